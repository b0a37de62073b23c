"""What every `rag` command shares: the Typer app, the consoles, error handling and the Workbench."""

from __future__ import annotations

import json
from typing import Any, Callable, List

import click
import typer
from rich.console import Console
from typer.core import TyperGroup

from rag_core.errors import RagError

app = typer.Typer(help="RAG workbench: ingest documents, search them, chat with sources.", no_args_is_help=True,
                  pretty_exceptions_enable=False)
db_app = typer.Typer(help="Database maintenance.", no_args_is_help=True)
app.add_typer(db_app, name="db")

console = Console(stderr=True)
out = Console(highlight=False, soft_wrap=True)


def _fail(exc: RagError) -> None:
    """Every RagError ends the command with its message and code, never a traceback."""
    console.print(f"[red]Error ({exc.code}):[/red] {exc.message}")
    raise typer.Exit(code=1)


def run_safely(fn: Callable[..., Any]) -> Callable[..., Any]:
    import functools

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except RagError as exc:
            _fail(exc)

    return wrapper


def group_with_default(command: str) -> type[TyperGroup]:
    """A Typer group that runs `command` when the first word is not one of its subcommands."""

    class GroupWithDefault(TyperGroup):
        def parse_args(self, ctx: click.Context, args: List[str]) -> List[str]:
            if args and args[0] not in self.commands and args[0] not in ctx.help_option_names:
                args = [command, *args]
            return super().parse_args(ctx, args)

    return GroupWithDefault


def workbench():
    """The Workbench a command runs against (tests replace it to share one loaded embedder)."""
    from rag_core import open_workbench

    return open_workbench()


def print_json(data: Any) -> None:
    out.print_json(json.dumps(data, default=str, ensure_ascii=False))
