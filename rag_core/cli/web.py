"""`rag crawl` and `rag add`: web pages into the store, through the Workbench."""

from __future__ import annotations

import sys
from contextlib import contextmanager
from typing import Any, Callable, Iterator

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from rag_core.cli import common
from rag_core.cli.common import app, console, out, print_json, run_safely
from rag_core.cli.jobs import report_enqueued
from rag_core.security.ids import DEFAULT_SITE


@contextmanager
def _page_bar(quiet: bool) -> Iterator[Callable[[Any], None]]:
    """A progress bar of pages fetched / total (and chunks stored); the callback the Workbench takes."""
    with Progress(TextColumn("[bold]pages"), BarColumn(), MofNCompleteColumn(),
                  TextColumn("{task.fields[chunks]} chunks"), TimeElapsedColumn(),
                  console=console, transient=quiet or not sys.stderr.isatty()) as bar:
        task = bar.add_task("pages", total=None, chunks=0)

        def on_progress(p: Any) -> None:
            bar.update(task, completed=p.done, total=p.total or None, chunks=p.chunks_done)

        yield on_progress


def _report(report: Any, as_json: bool) -> None:
    if as_json:
        print_json(report.to_dict())
    else:
        out.print(report.summary_text(), markup=False)
    if report.errors and not report.pages_ingested:
        raise typer.Exit(code=1)


@app.command()
@run_safely
def crawl(
    url: str = typer.Argument(..., help="Index page whose links are crawled (depth 1, no recursion)."),
    pattern: str = typer.Argument("", help="Regular expression a link must match, e.g. '\\.html$'."),
    site: str = typer.Option(DEFAULT_SITE, "--site", help="Site (tenant) the pages belong to."),
    as_json: bool = typer.Option(False, "--json", help="Print the summary as JSON."),
    background: bool = typer.Option(False, "--background", help="Queue a job for `rag worker` and print its id."),
) -> None:
    """Crawl the pages linked from an index page and ingest them (only RAG_ALLOWED_DOMAINS)."""
    if background:
        with common.workbench() as wb:
            report_enqueued(wb, wb.enqueue_crawl(url, pattern, site_id=site), as_json)
        return
    with common.workbench() as wb:
        with _page_bar(as_json) as on_progress:
            report = wb.ingest_index(url, pattern, site_id=site, progress=on_progress)
    _report(report, as_json)


@app.command()
@run_safely
def add(
    url: str = typer.Argument(..., help="Web page to ingest."),
    site: str = typer.Option(DEFAULT_SITE, "--site", help="Site (tenant) the page belongs to."),
    as_json: bool = typer.Option(False, "--json", help="Print the summary as JSON."),
    background: bool = typer.Option(False, "--background", help="Queue a job for `rag worker` and print its id."),
) -> None:
    """Ingest one web page (re-adding it replaces its chunks when it changed)."""
    if background:
        with common.workbench() as wb:
            report_enqueued(wb, wb.enqueue_page(url, site_id=site), as_json)
        return
    with common.workbench() as wb:
        with _page_bar(as_json) as on_progress:
            report = wb.ingest_url(url, site_id=site, progress=on_progress)
    _report(report, as_json)
