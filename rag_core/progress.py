"""ProgressCallback callbacks of long calls (ingest, crawl, reindex, evaluation) and the default a front-end installs.

A caller passes its own callback; without one, the default factory, when a front-end installed one
(inside Jupyter `rag_core.render.jupyter` installs a notebook progress bar), makes one per call.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Callable, Iterator

ProgressCallback = Callable[[Any], None]
# (description, unit) -> a callback for one call, or None for no output.
ProgressFactory = Callable[[str, str], "ProgressCallback | None"]

_default_factory: ProgressFactory | None = None


def set_default_progress(factory: ProgressFactory | None) -> None:
    """Install (or with None remove) the progress shown for calls made without a callback."""
    global _default_factory
    _default_factory = factory


def auto_progress(progress: ProgressCallback | None, description: str, unit: str = "file") -> ProgressCallback | None:
    """The caller's progress callback; without one, the installed default's (None when there is none)."""
    if progress is not None or _default_factory is None:
        return progress
    return _default_factory(description, unit)


@contextmanager
def notebook_progress(progress: ProgressCallback | None, description: str,
                      unit: str = "file") -> Iterator[ProgressCallback | None]:
    """`auto_progress` for one call: a default that can be closed is closed when the call ends, interrupted or not."""
    report = auto_progress(progress, description, unit)
    try:
        yield report
    finally:
        if report is not progress:
            close = getattr(report, "close", None)
            if close is not None:
                close()
