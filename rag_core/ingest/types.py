"""Records shared by the ingestion pipeline and the store (kept apart so neither imports the other)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass
class Progress:
    """What a progress bar needs: files done of total, chunks stored, the current source."""

    files_done: int
    files_total: int
    chunks_done: int
    current: str = ""


ProgressCallback = Callable[[Progress], None]
