"""The `rag` command: a thin client of the Workbench facade."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Callable, List, Optional

import click
import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from typer.core import TyperGroup

from rag_core.errors import RagError
from rag_core.security.ids import DEFAULT_SITE
from rag_core.units import human_size

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


def _workbench():
    from rag_core import open_workbench

    return open_workbench()


def _print_json(data: Any) -> None:
    out.print_json(json.dumps(data, default=str, ensure_ascii=False))


@app.command()
@run_safely
def ingest(
    paths: List[Path] = typer.Argument(..., help="Files or folders (folders are read recursively)."),
    include: List[str] = typer.Option([], "--include", help="Glob of files to take, e.g. '*.md' (repeatable)."),
    exclude: List[str] = typer.Option([], "--exclude", help="Glob of files to leave out (repeatable)."),
    site: str = typer.Option(DEFAULT_SITE, "--site", help="Site (tenant) the documents belong to."),
    as_json: bool = typer.Option(False, "--json", help="Print the summary as JSON."),
) -> None:
    """Ingest files and folders: md, txt, pdf, docx, xlsx, csv, html."""
    with _workbench() as wb:
        with Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                      TextColumn("{task.fields[chunks]} chunks"), TimeElapsedColumn(),
                      console=console, transient=as_json or not sys.stderr.isatty()) as bar:
            task = bar.add_task("files", total=None, chunks=0)

            def on_progress(p: Any) -> None:
                bar.update(task, completed=p.files_done, total=p.files_total, chunks=p.chunks_done)

            report = wb.ingest_paths(paths, include=include, exclude=exclude, site_id=site, progress=on_progress)
    summary = report.to_dict()
    if as_json:
        summary.pop("documents", None)
        _print_json(summary)
    else:
        out.print(f"Indexed {summary['indexed']} new and {summary['updated']} changed documents "
                  f"({summary['chunks']} chunks); {summary['unchanged']} unchanged, "
                  f"{summary['skipped']} skipped, {summary['failed']} failed in {summary['duration_s']:.1f} s.")
        for err in summary["errors"]:
            out.print(f"  [red]failed[/red] {err['source']}: {err['reason']}")
        for skip in summary["skipped_sources"][:20]:
            out.print(f"  [yellow]skipped[/yellow] {skip['source']}: {skip['reason']}")
        if len(summary["skipped_sources"]) > 20:
            out.print(f"  ... and {len(summary['skipped_sources']) - 20} more skipped")
    if summary["failed"] and not (summary["indexed"] or summary["updated"] or summary["unchanged"]):
        raise typer.Exit(code=1)


@app.command()
@run_safely
def delete(
    source: str = typer.Argument(..., help="Path or URL of the source to remove."),
    site: Optional[str] = typer.Option(None, "--site", help="Only in this site."),
) -> None:
    """Remove a source and its chunks."""
    with _workbench() as wb:
        result = wb.delete_source(source, site_id=site)
    if not result["documents"]:
        console.print(f"[yellow]No document with source {source!r}.[/yellow] `rag status` lists the sources.")
        raise typer.Exit(code=1)
    out.print(f"Deleted: {source} ({result['chunks']} chunks)")


@app.command()
@run_safely
def status(
    site: Optional[str] = typer.Option(None, "--site", help="Only this site."),
    as_json: bool = typer.Option(False, "--json", help="Print as JSON."),
) -> None:
    """Documents, chunks, sources, embedder, dimension and database size."""
    with _workbench() as wb:
        info = wb.status(site_id=site)
    if as_json:
        _print_json(info)
        return
    table = Table(show_header=False, box=None)
    rows = [
        ("documents", info["documents"]), ("chunks", info["chunks"]), ("sources", info["sources"]),
        ("source URLs", info["web_sources"]),
        ("by type", ", ".join(f"{k}: {v}" for k, v in info["by_type"].items()) or "-"),
        ("sites", ", ".join(f"{k}: {v}" for k, v in info["by_site"].items()) or "-"),
        ("embedder", f"{info['embedder'] or info['configured_embedder']}"
                     f" ({info['dimension'] or '?'} dimensions)"),
        ("database", f"{info['database']}, {human_size(info['database_bytes'], sep=' ')}"),
        ("last indexed", info["last_indexed_at"] or "never"),
    ]
    for key, value in rows:
        table.add_row(f"[bold]{key}[/bold]", str(value))
    out.print(table)
    if info["embedder_mismatch"]:
        console.print(f"[red]{info['embedder_mismatch']}[/red]")
    if info["documents"] == 0:
        console.print("Nothing indexed yet: run `rag ingest PATH` or use the Ingestion page.")


@app.command()
@run_safely
def reindex() -> None:
    """Re-embed every chunk with the configured embedder (after changing RAG_EMBEDDER)."""
    with _workbench() as wb:
        with Progress(TextColumn("[bold]re-embedding"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                      console=console) as bar:
            task = bar.add_task("chunks", total=None)
            result = wb.reindex(progress=lambda p: bar.update(task, completed=p.files_done, total=p.files_total))
    out.print(f"Re-embedded {result['chunks']} chunks with {result['embedder']} ({result['dimension']} dimensions).")


@db_app.command("upgrade")
@run_safely
def db_upgrade() -> None:
    """Create the database if needed and apply every migration."""
    from rag_core.db.database import describe_url
    from rag_core.settings import load_settings
    from rag_core.workbench import upgrade_database

    url, revision, embedded = upgrade_database(load_settings())
    out.print(f"Database {'(embedded) ' if embedded else ''}{describe_url(url)} is at revision {revision}.")


def main() -> None:
    """Entry point of the `rag` script; configuration errors end with one line."""
    try:
        app()
    except RagError as exc:
        console.print(f"[red]Error ({exc.code}):[/red] {exc.message}")
        sys.exit(1)


from rag_core.cli import web as _web  # noqa: E402,F401
from rag_core.cli import chat as _chat  # noqa: E402,F401
from rag_core.cli import evaluate as _evaluate, search as _search  # noqa: E402,F401
from rag_core.cli import mcp as _mcp  # noqa: E402,F401
from rag_core.cli import serve as _serve  # noqa: E402,F401
from rag_core.cli import slack as _slack  # noqa: E402,F401
from rag_core.cli import llamaindex as _llamaindex  # noqa: E402,F401


if __name__ == "__main__":
    main()
