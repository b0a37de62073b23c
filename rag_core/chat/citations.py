"""Sources of an answer: built from retrieved chunks, stored as citations, rendered in the chat spec's format."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Sequence

from rag_core.chat.prompts import labels
from rag_core.providers.calibration import CosineScale
from rag_core.search.types import ChunkHit

if TYPE_CHECKING:
    import pandas as pd


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
    sites: list[str] = field(default_factory=list)  # every site holding this passage (the same file in several)

    @classmethod
    def from_hit(cls, n: int, hit: ChunkHit, scale: CosineScale | None = None,
                 sites: Sequence[str] | None = None, relevance: float | None = None) -> "Source":
        """A source from a hit; `relevance` (0..1) when the caller read it already (chat: its best sentence),
        else the hit's cosine read through the scale."""
        if relevance is None and scale is not None and not scale.is_identity:
            relevance = scale.relevance(float(hit.similarity))
        return cls(n=n, path=hit.source, title=hit.title or "", similarity=float(hit.similarity),
                   page=hit.page_number, chunk_id=int(hit.chunk_id), document_id=int(hit.document_id),
                   start_char=int(hit.start_char), end_char=int(hit.end_char), text=hit.text, site_id=hit.site_id,
                   relevance=None if relevance is None else round(float(relevance), 4),
                   sites=list(sites or [hit.site_id]))

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
            **({"sites": list(self.sites)} if len(self.sites) > 1 else {}),
        }

    @classmethod
    def from_citation(cls, data: dict[str, Any], n: int | None = None) -> "Source":
        """A stored citation back as a Source (history views re-render answers from it)."""
        return cls(n=int(data.get("n") or n or 0), path=data.get("documentPath", ""),
                   title=data.get("documentTitle", ""), similarity=float(data.get("similarity") or 0.0),
                   page=data.get("page"), chunk_id=int(data.get("chunkId") or 0),
                   document_id=int(data.get("documentId") or 0), start_char=int(data.get("startChar") or 0),
                   end_char=int(data.get("endChar") or 0), text=data.get("text", ""),
                   relevance=float(data["relevance"]) if data.get("relevance") is not None else None,
                   sites=[str(x) for x in data.get("sites") or []])

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["similarity_pct"] = self.similarity_pct
        return data


def source_line(source: Source, language: str = "en") -> str:
    """`1. [92.1%] path/to/file.md (p. 3)`, then `(sites: a, b)` when several sites hold the passage."""
    words = labels(language)
    page = f" ({words['page']} {source.page})" if source.page is not None else ""
    sites = f" ({words['sites']}: {', '.join(source.sites)})" if len(source.sites) > 1 else ""
    return f"{source.n}. [{source.similarity_pct:.1f}%] {source.path}{page}{sites}"


def render_sources(sources: Sequence[Source], language: str = "en") -> str:
    """The `## Sources` block; it is printed even when empty and then says so."""
    words = labels(language)
    body = "\n".join(source_line(s, language) for s in sources) if sources else words["none"]
    return f"## {words['sources']}\n{body}"


def render_turn(sources: Sequence[Source], answer: str, language: str = "en") -> str:
    """The chat spec's output: `## Sources` then `## Answer`, labels in RAG_LANGUAGE."""
    words = labels(language)
    return f"{render_sources(sources, language)}\n\n## {words['answer']}\n{answer.strip()}\n"


def sources_frame(sources: Sequence[Source]) -> "pd.DataFrame":
    """The sources of an answer, one row each (n, similarity, title, source, page, offsets, text, sites)."""
    import pandas as pd

    columns = ["n", "similarity", "similarity_pct", "title", "source", "page", "start_char", "end_char", "text",
               "sites"]
    return pd.DataFrame([{"n": s.n, "similarity": s.similarity, "similarity_pct": s.similarity_pct, "title": s.title,
                          "source": s.path, "page": s.page, "start_char": s.start_char, "end_char": s.end_char,
                          "text": s.text, "sites": ", ".join(s.sites or [s.site_id])} for s in sources],
                        columns=columns)
