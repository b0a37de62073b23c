"""Helpers the jobs tests share (a module of its own: `conftest` names collide across test folders)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Callable


def wait_for(predicate: Callable[[], Any], timeout: float, what: str) -> Any:
    """Poll until `predicate()` is truthy; fail naming `what` otherwise."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


def make_folder(root: Path, count: int, tag: str) -> Path:
    """`count` small distinct documents, one chunk each."""
    folder = root / tag
    folder.mkdir(parents=True)
    for i in range(count):
        (folder / f"doc{i:04d}.md").write_text(
            f"# Note {i} of {tag}\n\nRecord {i}: the inspection of building {i * 7 % 97} found item {i} in order.\n",
            encoding="utf-8")
    return folder
