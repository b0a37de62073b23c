"""Deprecated: presentation moved to `rag_core.render` (HTML in `rag_core.render.html`, the notebook look in
`rag_core.render.jupyter`); the result types are plain data in the core. This module only re-exports."""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING, Any

from rag_core.chat.citations import sources_frame as _sources_frame
from rag_core.progress import auto_progress, notebook_progress
from rag_core.records import Records, StoreStatus
from rag_core.render.html import (esc, eval_html, marked_html, search_html, similarity_bar, source_link,
                                  table_html, turn_html)
from rag_core.render.jupyter import in_notebook, offline_charts
from rag_core.render.progress import progress_counts
from rag_core.search.responses import SearchResults

if TYPE_CHECKING:
    import pandas as pd

warnings.warn("rag_core.display is deprecated; import from rag_core.render (rag_core.render.jupyter.offline_charts, "
              "rag_core.render.html) instead.", DeprecationWarning, stacklevel=2)

__all__ = ["Records", "SearchResults", "StoreStatus", "auto_progress", "esc", "eval_frame", "eval_html",
           "hits_frame", "in_notebook", "marked_html", "notebook_progress", "offline_charts", "progress_counts",
           "search_html", "similarity_bar", "source_link", "sources_frame", "table_html", "turn_html"]


def hits_frame(resp: Any) -> "pd.DataFrame":
    """Deprecated: `wb.search(...).to_pandas()`."""
    return SearchResults(resp).to_pandas()


def sources_frame(turn: Any) -> "pd.DataFrame":
    """Deprecated: `turn.to_pandas()`."""
    return _sources_frame(turn.sources)


def eval_frame(result: Any) -> "pd.DataFrame":
    """Deprecated: `result.to_pandas()`."""
    return result.to_pandas()
