"""What a notebook shows for an object: IPython's own display formatter with rag_core's formatters registered."""

from __future__ import annotations

from typing import Any

from IPython.core.formatters import DisplayFormatter

from rag_core.render.jupyter import register

_formatter = DisplayFormatter()
register(_formatter)


def shown(obj: Any, mime: str = "text/html") -> str:
    """The `mime` output Jupyter gets for `obj` ('' when it has none)."""
    data, _ = _formatter.format(obj, include=[mime])
    return data.get(mime, "")
