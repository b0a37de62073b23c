"""A Workbench with other settings on the same database and loaded embedder, for tests."""

from __future__ import annotations

from rag_core.workbench import Workbench


def variant(wb: Workbench, **settings: object) -> Workbench:
    """A Workbench on the same database and embedder with other settings (no model reload)."""
    other = Workbench(wb.settings.model_copy(update=settings), wb.db, wb.database_url, wb.embedded)
    other._embedder = wb.embedder
    return other
