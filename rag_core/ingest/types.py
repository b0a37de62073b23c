"""Records shared by the ingestion pipeline and the store (kept apart so neither imports the other)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from typing_extensions import NotRequired, TypedDict


@dataclass
class Progress:
    """What a progress bar needs: files done of total, chunks stored, the current source."""

    files_done: int
    files_total: int
    chunks_done: int
    current: str = ""


ProgressCallback = Callable[[Progress], None]


class TextRecord(TypedDict):
    """One text for `Workbench.ingest_texts`: the source that names it and its text; the rest optional."""

    source: str
    text: str
    title: NotRequired[str | None]
    file_type: NotRequired[str]  # txt unless given
    metadata: NotRequired[dict[str, Any] | None]
