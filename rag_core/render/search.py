"""Search responses as text and markdown (the CLI and MCP print these; JSON is the response dict itself)."""

from __future__ import annotations

import re

from rag_core.search.highlight import Highlight
from rag_core.search.responses import ContextChunk, SearchDocument, SearchResponse

SNIPPET_CHARS = 300


def _marked(result: SearchDocument) -> list[str]:
    spans = result.get("highlight_spans") or [[] for _ in result.get("highlights", [])]
    return [Highlight(text, [tuple(s) for s in sp]).marked() for text, sp in zip(result.get("highlights", []), spans)]


def _md_plain(text: str) -> str:
    """Document text inside markdown output: its own emphasis markers dropped (a bold word of the source
    would otherwise meet the highlight's ** as "****word****"), a lone * and what _md_escape escapes."""
    text = re.sub(r"\*{2,}|(?<!\w)_{2,}|_{2,}(?!\w)", "", text)
    return _md_escape(text).replace("*", "\\*")


def _md_marked(result: SearchDocument) -> list[str]:
    """The highlights for markdown: matched terms in **bold**, the rest as plain text."""
    spans = result.get("highlight_spans") or [[] for _ in result.get("highlights", [])]
    out = []
    for text, sp in zip(result.get("highlights", []), spans):
        pieces, pos = [], 0
        for start, end in sorted((int(a), int(b)) for a, b in sp):
            if start < pos or end <= start:
                continue
            term = _md_plain(text[start:end]).strip()
            pieces += [_md_plain(text[pos:start]), f"**{term}**" if term else ""]
            pos = end
        pieces.append(_md_plain(text[pos:]))
        out.append("".join(pieces))
    return out


def _snippet(text: str, limit: int = SNIPPET_CHARS) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def header_line(resp: SearchResponse) -> str:
    pages = resp.get("total_pages") or 0
    page = f", page {resp.get('page', 1)} of {pages}" if pages > 1 or resp.get("page", 1) > 1 else ""
    return (f"{resp['total_results']} result{'s' if resp['total_results'] != 1 else ''} for \"{resp['query']}\""
            f" ({resp.get('mode', 'hybrid')}, {resp['search_time']}{page})")


def past_last_page(resp: SearchResponse) -> str:
    """What to say when the page asked for lies beyond the results ('' otherwise)."""
    pages, page = resp.get("total_pages") or 0, resp.get("page", 1)
    if resp["results"] or not pages or page <= pages:
        return ""
    return f"Page {page} is past the last page ({pages}); ask for page {pages} or less."


def _facets(resp: SearchResponse) -> tuple[str, str]:
    facets = resp.get("facets") or {}
    types = ", ".join(f"{k} {v}" for k, v in sorted((facets.get("document_types") or {}).items(), key=lambda p: -p[1]))
    dates = ", ".join(f"{k} {v}" for k, v in (facets.get("date_distribution") or {}).items())
    return types, dates


def _several_sites(resp: SearchResponse) -> bool:
    """Whether the hits come from more than one site: then each names its own (the same file ingested
    into two sites would otherwise show as two identical entries)."""
    return len({r.get("site_id") for r in resp["results"]}) > 1


def _meta(r: SearchDocument, with_site: bool = False) -> str:
    ranks = []
    if r.get("dense_rank") is not None:
        ranks.append(f"dense #{r['dense_rank']}")
    if r.get("fulltext_rank") is not None:
        ranks.append(f"full-text #{r['fulltext_rank']}")
    parts = [r["file_type"], r["file_size"]]
    if with_site:
        parts.insert(0, f"site {r.get('site_id')}")
    if r.get("document_date") or r.get("updated_at"):
        parts.append((r.get("document_date") or r.get("updated_at"))[:10])
    if ranks:
        parts.append(" + ".join(ranks))
    return " · ".join(parts)


def _chunk_label(c: ContextChunk) -> str:
    page = f", page {c['page_number']}" if c.get("page_number") else ""
    return f"chunk {c['chunk_index']}{page}, {c['relevance_score']:.2f}"


def render_text(resp: SearchResponse) -> str:
    """Plain text: numbered documents, highlights with **term**, context chunks, facets, suggestions."""
    lines = [header_line(resp), ""]
    if past_last_page(resp):
        lines += [past_last_page(resp), ""]
    for n, r in enumerate(resp["results"], (resp.get("page", 1) - 1) * resp.get("limit", 10) + 1):
        lines.append(f"{n}. {r['title']}  [{r['relevance_score']:.2f}]")
        lines.append(f"   {r['file_path']}")
        lines.append(f"   {_meta(r, _several_sites(resp))}")
        for h in _marked(r):
            lines.append(f"   … {h} …")
        for c in r.get("context_chunks") or []:
            lines.append(f"   [{_chunk_label(c)}] {_snippet(c['text'])}")
        lines.append("")
    types, dates = _facets(resp)
    if types:
        lines.append(f"Types: {types}")
    if dates:
        lines.append(f"Dates: {dates}")
    if resp.get("suggestions"):
        lines.append("Suggestions: " + "; ".join(resp["suggestions"]))
    return "\n".join(lines).rstrip() + "\n"


def _md_escape(text: str) -> str:
    """Text from documents and callers as markdown text: no link, image (`![x](url)` loads as soon as it is shown),
    autolink or raw HTML of theirs renders. Backslashes first, so `\\[` in the text cannot undo an escape."""
    return text.replace("\\", "\\\\").replace("[", "\\[").replace("]", "\\]").replace("<", "\\<")


def _md_code(text: str) -> str:
    """`text` as a code span whose fence is longer than any run of backticks inside it."""
    fence = "`" * (max((len(run) for run in re.findall("`+", text)), default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def render_markdown(resp: SearchResponse) -> str:
    """Markdown: a heading per document, highlights as quotes with **term**, context as a list."""
    lines = [f"## Search: {_md_plain(resp['query'])}", "", f"_{_md_plain(header_line(resp))}_", ""]
    if past_last_page(resp):
        lines += [past_last_page(resp), ""]
    for n, r in enumerate(resp["results"], (resp.get("page", 1) - 1) * resp.get("limit", 10) + 1):
        lines.append(f"### {n}. {_md_escape(r['title'])} ({r['relevance_score']:.2f})")
        lines.append("")
        lines.append(f"{_md_code(r['file_path'])} · {_meta(r, _several_sites(resp))}")
        lines.append("")
        for h in _md_marked(r):
            lines.append(f"> {h}")
            lines.append("")
        chunks = r.get("context_chunks") or []
        if chunks:
            for c in chunks:
                lines.append(f"- *{_chunk_label(c)}*: {_md_plain(_snippet(c['text']))}")
            lines.append("")
    types, dates = _facets(resp)
    if types or dates:
        lines.append("**Facets**")
        lines.append("")
        if types:
            lines.append(f"- types: {types}")
        if dates:
            lines.append(f"- dates: {dates}")
        lines.append("")
    if resp.get("suggestions"):
        lines.append("**Suggestions:** " + " · ".join(_md_plain(s) for s in resp["suggestions"]))
    return "\n".join(lines).rstrip() + "\n"
