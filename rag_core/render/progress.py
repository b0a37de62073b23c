"""A notebook progress bar (tqdm.auto) fed with the progress events of ingest, crawl, reindex and evaluation."""

from __future__ import annotations

from typing import Any


class NotebookBar:
    """A tqdm.auto bar fed with progress events; it appears with the first event (a step that has
    nothing to do shows no bar) and closes itself when done reaches the total."""

    def __init__(self, description: str, unit: str) -> None:
        self.description, self.unit = description, unit
        self.bar: Any = None
        self.closed = False

    def __call__(self, p: Any) -> None:
        if self.closed:  # a last event after the total was reached (ingest's final tick)
            return
        done, total = progress_counts(p)
        if self.bar is None:
            from tqdm.auto import tqdm

            self.bar = tqdm(desc=self.description, unit=self.unit, total=total or None)
        bar = self.bar
        if total and bar.total != total:
            bar.total = total
        bar.n = done
        current = getattr(p, "current", "")
        if current:
            bar.set_postfix_str(str(current)[-60:], refresh=False)
        bar.refresh()
        if total and done >= total:
            self.close()

    def close(self) -> None:
        self.closed = True
        if self.bar is not None:
            self.bar.close()


def progress_counts(p: Any) -> tuple[int, int]:
    """(done, total) of a progress event: an ingest `Progress`, or a (done, total) pair."""
    if isinstance(p, tuple):
        return int(p[0]), int(p[1])
    return int(getattr(p, "done", 0)), int(getattr(p, "total", 0))
