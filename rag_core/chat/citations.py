"""Sources of an answer: built from retrieved chunks, stored as citations, rendered in the chat spec's format."""

from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

from rag_core.chat.prompts import labels
from rag_core.search.types import Citation

if TYPE_CHECKING:
    import pandas as pd


def source_line(source: Citation, language: str = "en") -> str:
    """`1. [92.1%] path/to/file.md (p. 3)`, then `(sites: a, b)` when several sites hold the passage."""
    words = labels(language)
    page = f" ({words['page']} {source.page})" if source.page is not None else ""
    sites = f" ({words['sites']}: {', '.join(source.sites)})" if len(source.sites) > 1 else ""
    return f"{source.n}. [{source.similarity_pct:.1f}%] {source.source}{page}{sites}"


def render_sources(sources: Sequence[Citation], language: str = "en") -> str:
    """The `## Sources` block; it is printed even when empty and then says so."""
    words = labels(language)
    body = "\n".join(source_line(s, language) for s in sources) if sources else words["none"]
    return f"## {words['sources']}\n{body}"


def render_turn(sources: Sequence[Citation], answer: str, language: str = "en") -> str:
    """The chat spec's output: `## Sources` then `## Answer`, labels in RAG_LANGUAGE."""
    words = labels(language)
    return f"{render_sources(sources, language)}\n\n## {words['answer']}\n{answer.strip()}\n"


def sources_frame(sources: Sequence[Citation]) -> "pd.DataFrame":
    """The sources of an answer, one row each (n, similarity, title, source, page, offsets, text, sites)."""
    import pandas as pd

    columns = ["n", "similarity", "similarity_pct", "title", "source", "page", "start_char", "end_char", "text",
               "sites"]
    return pd.DataFrame([{"n": s.n, "similarity": s.similarity, "similarity_pct": s.similarity_pct, "title": s.title,
                          "source": s.source, "page": s.page, "start_char": s.start_char, "end_char": s.end_char,
                          "text": s.text, "sites": ", ".join(s.sites or [s.site_id])} for s in sources],
                        columns=columns)
