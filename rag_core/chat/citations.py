"""Sources of an answer: built from retrieved chunks, stored as citations, rendered in the chat spec's format."""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import Any, Sequence

from rag_core.chat.prompts import labels
from rag_core.providers.calibration import CosineScale
from rag_core.search.types import ChunkHit


@dataclass
class Source:
    """One numbered source of an answer: where the cited passage lives and how close it was."""

    n: int
    path: str                 # file path or URL
    title: str
    similarity: float         # 0..1
    page: int | None
    chunk_id: int
    document_id: int
    start_char: int
    end_char: int
    text: str                 # the cited passage
    site_id: str = ""
    relevance: float | None = None  # the cosine read through the embedder's scale (0..1); None: the cosine

    @classmethod
    def from_hit(cls, n: int, hit: ChunkHit, scale: CosineScale | None = None) -> "Source":
        return cls(n=n, path=hit.source, title=hit.title or "", similarity=float(hit.similarity),
                   page=hit.page_number, chunk_id=int(hit.chunk_id), document_id=int(hit.document_id),
                   start_char=int(hit.start_char), end_char=int(hit.end_char), text=hit.text, site_id=hit.site_id,
                   relevance=scale.relevance(float(hit.similarity)) if scale and not scale.is_identity else None)

    @property
    def similarity_pct(self) -> float:
        """The percentage users see: the calibrated relevance when known (e5-small's cosines of 0.7-0.9
        would all read as "80%"), else the cosine."""
        return round((self.similarity if self.relevance is None else self.relevance) * 100, 1)

    def to_citation(self) -> dict[str, Any]:
        """The JSON stored in chat_messages.sources: the document-store spec's shape + similarity, page, offsets."""
        return {
            "n": self.n,
            "text": self.text,
            "documentPath": self.path,
            "documentTitle": self.title,
            "chunkId": str(self.chunk_id),
            "documentId": str(self.document_id),
            "similarity": round(self.similarity, 4),
            **({"relevance": self.relevance} if self.relevance is not None else {}),
            "page": self.page,
            "startChar": self.start_char,
            "endChar": self.end_char,
        }

    @classmethod
    def from_citation(cls, data: dict[str, Any], n: int | None = None) -> "Source":
        """A stored citation back as a Source (history views re-render answers from it)."""
        return cls(n=int(data.get("n") or n or 0), path=data.get("documentPath", ""),
                   title=data.get("documentTitle", ""), similarity=float(data.get("similarity") or 0.0),
                   page=data.get("page"), chunk_id=int(data.get("chunkId") or 0),
                   document_id=int(data.get("documentId") or 0), start_char=int(data.get("startChar") or 0),
                   end_char=int(data.get("endChar") or 0), text=data.get("text", ""),
                   relevance=float(data["relevance"]) if data.get("relevance") is not None else None)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["similarity_pct"] = self.similarity_pct
        return data


def source_line(source: Source, language: str = "en") -> str:
    """`1. [92.1%] path/to/file.md (p. 3)`"""
    page = f" ({labels(language)['page']} {source.page})" if source.page is not None else ""
    return f"{source.n}. [{source.similarity_pct:.1f}%] {source.path}{page}"


def render_sources(sources: Sequence[Source], language: str = "en") -> str:
    """The `## Sources` block; it is printed even when empty and then says so."""
    words = labels(language)
    body = "\n".join(source_line(s, language) for s in sources) if sources else words["none"]
    return f"## {words['sources']}\n{body}"


def render_turn(sources: Sequence[Source], answer: str, language: str = "en") -> str:
    """The chat spec's output: `## Sources` then `## Answer`, labels in RAG_LANGUAGE."""
    words = labels(language)
    return f"{render_sources(sources, language)}\n\n## {words['answer']}\n{answer.strip()}\n"


_MARK_OPEN, _MARK_CLOSE = "\ue000", "\ue001"   # private-use sentinels: survive markdown rendering untouched
MARK_STYLE = "background:#ffe58f;padding:0 2px;border-radius:2px"
_LINE_MARKUP = re.compile(r"\s*(?:#{1,6}\s+|>\s*|[-*+•]\s+|\d{1,3}[.)]\s+|\|\s*)*")


def _find_words(text: str, passage: str) -> tuple[int, int] | None:
    """The span of `text`'s words in the passage, in order, with any whitespace or list markup between."""
    words = text.split()
    if not words:
        return None
    found = re.search(r"(?:\s|[-*+•>|])*".join(re.escape(w) for w in words), passage)
    return found.span() if found else None


def quoted_spans(answer: str, n: int, passage: str) -> list[tuple[int, int]]:
    """Where the answer's units marked [n] stand in passage n, matched across line breaks and markup.

    The extractive answerer quotes whole sentences, list items and code blocks (hard-wrapped lines
    joined) with the number after each sentence, or after the lead-in line of a block or list.
    """
    spans: list[tuple[int, int]] = []
    prev = 0
    for m in re.finditer(r"\[(\d+)\]", answer or ""):
        body = answer[prev:m.start()].rsplit("\n", 1)[-1]
        prev = m.end()
        if int(m.group(1)) != n:
            continue
        # A label such as "The closest passage:" may precede the quote: try it from each word on.
        words = body.split()
        for skip in range(min(len(words), 9)):
            if sum(len(w) for w in words[skip:]) < 6:
                break
            span = _find_words(" ".join(words[skip:]), passage)
            if span:
                spans.append(span)
                break
        if answer[m.end():m.end() + 1] == "\n":  # the block or list a cited lead-in introduces
            block = answer[m.end() + 1:].split("\n\n", 1)[0]
            span = _find_words(block, passage)
            if span:
                spans.append(span)
    return sorted(set(spans))


def passage_html(passage: str, spans: Sequence[tuple[int, int]] = ()) -> str:
    """A passage rendered from markdown to HTML (raw HTML in it escaped), each span marked.

    Marks are set line by line after the line's markdown markers, so headings, lists, tables and
    code fences still render and no mark crosses a block.
    """
    from markdown_it import MarkdownIt

    marked = list(passage)
    for start, end in sorted(spans, reverse=True):
        pos = start
        while pos < end:
            line_end = passage.find("\n", pos, end)
            line_end = end if line_end == -1 else line_end
            line_start = passage.rfind("\n", 0, pos) + 1
            prefix = _LINE_MARKUP.match(passage, line_start).end()
            a = max(pos, prefix)
            segment = passage[a:line_end]
            if segment.strip() and not segment.lstrip().startswith(("```", "~~~")):
                b = a + len(segment.rstrip())
                marked[b - 1] += _MARK_CLOSE
                marked[a] = _MARK_OPEN + marked[a]
            pos = line_end + 1
    md = MarkdownIt("commonmark", {"html": False}).enable("table")
    rendered = md.render("".join(marked))
    return rendered.replace(_MARK_OPEN, f'<mark style="{MARK_STYLE}">').replace(_MARK_CLOSE, "</mark>")
