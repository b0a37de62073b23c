"""The core's result types get their Jupyter look here: HTML (and markdown) formatters registered with a
running IPython, and a progress bar for long calls made without a callback.

`import rag_core` calls `install()` inside IPython; the core types stay plain data (a dict, a list, a
dataclass) and never import this package. Types are registered by module and name, so nothing heavy
loads until a result is shown; `FORMATTED` is that list and a test checks each entry still imports.
"""

from __future__ import annotations

from typing import Any, Callable

from rag_core.progress import set_default_progress
from rag_core.render import html
from rag_core.render.progress import NotebookBar
from rag_core.render.search import render_markdown
from rag_core.security.text import inert_markdown


def _turn_markdown(turn: Any) -> str:
    """The chat spec's text, shown where a notebook takes markdown: Jupyter renders raw HTML and images in
    it, and the answer and the passages come from a model and from documents, so nothing of theirs loads."""
    return inert_markdown(turn.rendered, raw_html=True)


# (module, class name, MIME type, formatter): what a notebook shows for each result type.
FORMATTED: list[tuple[str, str, str, Callable[[Any], str]]] = [
    ("rag_core.search.responses", "SearchResults", "text/html", html.search_html),
    ("rag_core.search.responses", "SearchResults", "text/markdown", render_markdown),
    ("rag_core.chat.turn", "ChatTurn", "text/html", html.turn_html),
    ("rag_core.chat.turn", "ChatTurn", "text/markdown", _turn_markdown),
    ("rag_core.evaluation.runner", "EvalResult", "text/html", html.eval_html),
    ("rag_core.records", "Records", "text/html", html.records_html),
    ("rag_core.records", "StoreStatus", "text/html", html.status_html),
]


def register(display_formatter: Any) -> None:
    """Register every result type's formatters with an IPython `DisplayFormatter`."""
    for module, name, mime, formatter in FORMATTED:
        display_formatter.formatters[mime].for_type_by_name(module, name, formatter)


def in_notebook() -> bool:
    """True inside a Jupyter kernel (where a progress bar is a widget, not escape codes)."""
    shell = _shell()
    return shell is not None and type(shell).__name__ == "ZMQInteractiveShell"


def _shell() -> Any:
    try:
        from IPython import get_ipython
    except ImportError:  # IPython is optional: without it there is nothing to install
        return None
    return get_ipython()


def install() -> None:
    """Inside a running IPython: results render as HTML, and in a Jupyter kernel long calls made without a
    progress callback show a notebook progress bar. Elsewhere nothing happens."""
    shell = _shell()
    if shell is None:
        return
    register(shell.display_formatter)
    if in_notebook():
        set_default_progress(NotebookBar)


def offline_charts() -> None:
    """Plotly figures render offline: JupyterLab draws them with its bundled extension, and the
    notebook itself carries plotly.js (no CDN), so an exported HTML shows them without a network.
    PLOTLY_RENDERER, when set (the test runs set `json`), wins."""
    import os

    import plotly.io as pio

    if not os.environ.get("PLOTLY_RENDERER"):
        pio.renderers.default = "plotly_mimetype+notebook"
