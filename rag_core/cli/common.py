"""What every `rag` command shares: the Typer app, the consoles, error handling and the Workbench."""

from __future__ import annotations

import json
import logging
from typing import Any, Callable, List

import click
import typer
from rich.console import Console
from rich.markup import escape
from rich.text import Text
from typer.core import TyperGroup

from rag_core.errors import RagError

app = typer.Typer(help="RAG workbench: ingest documents, search them, chat with sources.", no_args_is_help=True,
                  pretty_exceptions_enable=False)
db_app = typer.Typer(help="Database maintenance.", no_args_is_help=True)
app.add_typer(db_app, name="db")
sample_app = typer.Typer(help="The sample corpus (this project's README and docs) in its own site 'sample'.",
                         no_args_is_help=True)
app.add_typer(sample_app, name="sample")
index_app = typer.Typer(help="HNSW indexes of the source filters searches use often (a folder, a web site).",
                        no_args_is_help=True)
app.add_typer(index_app, name="index")

# Control characters shown as text (\x1b) instead of reaching the terminal: a document's title, text or file
# name carrying ESC sequences could retitle the terminal, clear the screen, hide or rewrite lines.
_CONTROLS = {c: f"\\x{c:02x}" for c in [*range(0x00, 0x09), *range(0x0b, 0x20), 0x7f, *range(0x80, 0xa0)]}
# In JSON the C0 controls are already escaped by json.dumps; DEL and C1 ones become \u escapes.
_JSON_CONTROLS = {c: f"\\u{c:04x}" for c in [0x7f, *range(0x80, 0xa0)]}


def terminal_text(text: str) -> str:
    """Text safe to print: control characters other than tab and line feed spelled out as \\xNN."""
    return text.translate(_CONTROLS)


def markup_text(value: object) -> str:
    """A value inside a rich markup string: its brackets escaped so it is shown, not read as styles."""
    return escape(str(value))


class TerminalConsole(Console):
    """A rich Console that spells out control characters of every string it renders (tables included)."""

    def render_str(self, text: str, **kwargs: Any) -> Text:
        return super().render_str(terminal_text(text), **kwargs)


def echo(text: str, *, nl: bool = True, err: bool = False, json_text: bool = False) -> None:
    """typer.echo of text from documents and callers, its control characters spelled out."""
    typer.echo(text.translate(_JSON_CONTROLS) if json_text else terminal_text(text), nl=nl, err=err)


console = TerminalConsole(stderr=True)
out = TerminalConsole(highlight=False, soft_wrap=True)


def _fail(exc: RagError) -> None:
    """Every RagError ends the command with its message and code, never a traceback."""
    console.print(f"[red]Error ({exc.code}):[/red] {markup_text(exc.message)}")
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


class _FirstUseHandler(logging.Handler):
    """Shows the one-time steps a first command waits for (the embedded database created, the e5-small
    encoder converted): seconds on a fresh RAG_DATA_DIR before any progress bar or result appears."""

    def emit(self, record: logging.LogRecord) -> None:
        console.print(markup_text(record.getMessage()), style="dim", soft_wrap=True)


def show_first_use_steps() -> None:
    """The library's first-use lines on stderr (stdout stays the command's result, MCP's protocol included);
    only those: the CLI's other INFO lines stay quiet, and they reach no other handler (no line twice)."""
    logger = logging.getLogger("rag_core.first_use")
    if not any(isinstance(h, _FirstUseHandler) for h in logger.handlers):
        logger.addHandler(_FirstUseHandler())
    logger.setLevel(logging.INFO)
    logger.propagate = False


def workbench():
    """The Workbench a command runs against (tests replace it to share one loaded embedder)."""
    from rag_core import open_workbench

    show_first_use_steps()
    return open_workbench()


def print_json(data: Any) -> None:
    out.print_json(json.dumps(data, default=str, ensure_ascii=False).translate(_JSON_CONTROLS))
