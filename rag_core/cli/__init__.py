"""The `rag` command: a thin client of the Workbench facade.

`common` holds the Typer app and what every command shares; each other module adds its commands
to that app when imported below (the order is the order of `rag --help`).
"""

from __future__ import annotations

import sys

from rag_core.cli.common import app, console, markup_text
from rag_core.errors import RagError

# Each import registers its commands on `app`.
from rag_core.cli import documents  # noqa: F401,I001
from rag_core.cli import web  # noqa: F401
from rag_core.cli import jobs  # noqa: F401
from rag_core.cli import chat  # noqa: F401
from rag_core.cli import evaluate, search  # noqa: F401
from rag_core.cli import mcp  # noqa: F401
from rag_core.cli import serve  # noqa: F401
from rag_core.cli import slack  # noqa: F401
from rag_core.cli import llamaindex  # noqa: F401

__all__ = ["app", "main"]


def main() -> None:
    """Entry point of the `rag` script; configuration errors end with one line."""
    try:
        app()
    except RagError as exc:
        console.print(f"[red]Error ({exc.code}):[/red] {markup_text(exc.message)}")
        sys.exit(1)


if __name__ == "__main__":
    main()
