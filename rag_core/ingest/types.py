"""Records shared by the ingestion pipeline and the store (kept apart so neither imports the other)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from typing_extensions import NotRequired, TypedDict


@dataclass
class Progress:
    """What a progress bar needs: items done of total, chunks stored, the current source.

    The items are the operation's own unit: files for an ingest, pages for a crawl, chunks for a reindex.
    """

    done: int
    total: int
    chunks_done: int
    current: str = ""

    # The names this event had when only ingest sent it; code written against them keeps working.
    @property
    def files_done(self) -> int:
        return self.done

    @property
    def files_total(self) -> int:
        return self.total


ProgressCallback = Callable[[Progress], None]


class TextRecord(TypedDict):
    """One text for `Workbench.ingest_texts`: the source that names it and its text; the rest optional."""

    source: str
    text: str
    title: NotRequired[str | None]
    file_type: NotRequired[str]  # txt unless given
    metadata: NotRequired[dict[str, Any] | None]
