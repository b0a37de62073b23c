"""`rag ingest`, `rag delete`, `rag status`, `rag reindex`, `rag index` and `rag db upgrade`: the store's documents."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, List, Optional

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from rag_core.cli import common
from rag_core.cli.common import (
    app, console, db_app, echo, index_app, markup_text, out, print_json, run_safely, sample_app,
)
from rag_core.cli.jobs import report_enqueued
from rag_core.security.ids import DEFAULT_SITE
from rag_core.units import human_size

SOURCES_LISTED = 500

# Failed and skipped files listed by name after an ingest; the rest are counted.
SHOWN = 20


@app.command()
@run_safely
def ingest(
    paths: List[Path] = typer.Argument(..., help="Files or folders (folders are read recursively)."),
    include: List[str] = typer.Option([], "--include", help="Glob of files to take, e.g. '*.md' (repeatable)."),
    exclude: List[str] = typer.Option([], "--exclude", help="Glob of files to leave out (repeatable)."),
    site: str = typer.Option(DEFAULT_SITE, "--site", help="Site (tenant) the documents belong to."),
    as_json: bool = typer.Option(False, "--json", help="Print the summary as JSON."),
    prune: bool = typer.Option(False, "--prune", help="Also remove stored sources under the folders whose files "
                                                      "are gone (deleted or renamed since they were ingested)."),
    background: bool = typer.Option(False, "--background", help="Queue a job for `rag worker` and print its id."),
) -> None:
    """Ingest files and folders: md, txt, pdf, docx, xlsx, csv, html."""
    if background:
        with common.workbench() as wb:
            report_enqueued(wb, wb.enqueue_ingest(paths, include=include, exclude=exclude, site_id=site, prune=prune),
                            as_json)
        return
    with common.workbench() as wb:
        with Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                      TextColumn("{task.fields[chunks]} chunks"), TimeElapsedColumn(),
                      console=console, transient=as_json or not sys.stderr.isatty()) as bar:
            task = bar.add_task("files", total=None, chunks=0)

            def on_progress(p: Any) -> None:
                bar.update(task, completed=p.done, total=p.total, chunks=p.chunks_done)

            report = wb.ingest_paths(paths, include=include, exclude=exclude, site_id=site, progress=on_progress)
        vanished = wb.vanished_sources(paths, site_id=site)
        for source in vanished if prune else []:
            wb.delete_source(source, site_id=site)
    summary = report.to_dict()
    if as_json:
        summary.pop("documents", None)
        summary["pruned" if prune else "vanished"] = vanished
        print_json(summary)
    else:
        out.print(f"Indexed {summary['indexed']} new and {summary['updated']} changed documents "
                  f"({summary['chunks']} chunks); {summary['unchanged']} unchanged, "
                  f"{summary['skipped']} skipped, {summary['failed']} failed in {summary['duration_s']:.1f} s.")
        for err in summary["errors"][:SHOWN]:
            out.print(f"  [red]failed[/red] {markup_text(err['source'])}: {markup_text(err['reason'])}")
        if len(summary["errors"]) > SHOWN:  # a folder of 100,000 broken files printed 100,000 lines
            out.print(f"  ... and {len(summary['errors']) - SHOWN} more failed (`--json` lists them all)")
        for skip in summary["skipped_sources"][:SHOWN]:
            out.print(f"  [yellow]skipped[/yellow] {markup_text(skip['source'])}: {markup_text(skip['reason'])}")
        if len(summary["skipped_sources"]) > SHOWN:
            out.print(f"  ... and {len(summary['skipped_sources']) - SHOWN} more skipped")
        _print_vanished(vanished, prune)
    if summary["failed"] and not (summary["indexed"] or summary["updated"] or summary["unchanged"]):
        raise typer.Exit(code=1)


def _print_vanished(vanished: list[str], pruned: bool) -> None:
    """The stored sources whose files are gone: removed (--prune), or still found by searches until they are."""
    if not vanished:
        return
    if pruned:
        out.print(f"Removed {len(vanished)} stored source(s) whose files are gone:")
    else:
        console.print(f"[yellow]{len(vanished)} stored source(s) under these folders no longer exist on disk "
                      "and are still searched[/yellow]; `rag ingest --prune` (with the same folders) removes them:")
    for source in vanished[:SHOWN]:
        out.print(f"  {source}", markup=False)
    if len(vanished) > SHOWN:
        out.print(f"  ... and {len(vanished) - SHOWN} more")


@app.command()
@run_safely
def delete(
    source: str = typer.Argument(..., help="Path or URL of the source to remove."),
    site: Optional[str] = typer.Option(None, "--site", help="Only in this site."),
) -> None:
    """Remove a source and its chunks."""
    with common.workbench() as wb:
        result = wb.delete_source(source, site_id=site)
    if not result["documents"]:
        console.print(f"[yellow]No document with source {markup_text(repr(source))}.[/yellow] `rag status --sources` lists them.")
        raise typer.Exit(code=1)
    sites = f"{result['documents']} documents, one per site, " if result["documents"] > 1 else ""
    out.print(f"Deleted: {markup_text(source)} ({sites}{result['chunks']} chunks)")


@app.command()
@run_safely
def status(
    site: Optional[str] = typer.Option(None, "--site", help="Only this site."),
    as_json: bool = typer.Option(False, "--json", help="Print as JSON."),
    sources: bool = typer.Option(False, "--sources", help=f"List the stored sources (newest first, up to "
                                                          f"{SOURCES_LISTED}): what `rag delete` takes."),
) -> None:
    """Documents, chunks, sources, embedder, dimension and database size."""
    with common.workbench() as wb:
        info = wb.status(site_id=site)
        replicas = wb.read_replicas()
        listed = wb.documents(site_id=site, limit=SOURCES_LISTED) if sources else None
    if listed is not None:
        _print_sources(list(listed), info["documents"], as_json, site)
        return
    if as_json:
        print_json({**info, "read_replicas": replicas} if replicas else info)
        return
    table = Table(show_header=False, box=None)
    rows = [
        ("documents", info["documents"]), ("chunks", info["chunks"]), ("sources", info["sources"]),
        ("source URLs", info["web_sources"]),
        ("by type", ", ".join(f"{k}: {v}" for k, v in info["by_type"].items()) or "-"),
        ("sites", ", ".join(f"{k}: {v}" for k, v in info["by_site"].items()) or "-"),
        ("embedder", f"{info['embedder'] or info['configured_embedder']}"
                     + (f" ({info['dimension']} dimensions)" if info["dimension"] else " (nothing embedded yet)")),
        ("database", f"{info['database']}, {human_size(info['database_bytes'], sep=' ')}"),
        ("last indexed", info["last_indexed_at"] or "never"),
        *[("read replica", f"{r['replica']}: {r['state']}" + (f", lag {r['lag_sec']:g} s" if r["lag_sec"] is not None
                                                              else "") + (f" ({r['reason']})" if r["reason"] else ""))
          for r in replicas],
    ]
    for key, value in rows:
        table.add_row(f"[bold]{key}[/bold]", str(value))
    out.print(table)
    if info["embedder_mismatch"]:
        console.print(f"[red]{info['embedder_mismatch']}[/red]")
    if info["embedder_notice"]:
        console.print(f"[yellow]{info['embedder_notice']}[/yellow]")
    if info["documents"] == 0:
        console.print(_nothing_indexed(site))


def _nothing_indexed(site: str | None) -> str:
    """An empty store, or an empty site of a store that holds others (a mistyped --site read as an empty store)."""
    if site is None:
        return "Nothing indexed yet: run `rag ingest PATH` or use the Ingestion page."
    name = markup_text(site)
    return (f"Nothing indexed for site '{name}' yet: run `rag ingest PATH --site {name}`; "
            "`rag status` lists the sites that hold documents.")


def _print_sources(docs: list[Any], total: int, as_json: bool, site: str | None) -> None:
    """One line per source (site, type, chunks, indexed at, source), unwrapped so it can be copied."""
    if as_json:
        print_json([{"source": d["source"], "site_id": d["site_id"], "file_type": d["file_type"],
                     "chunks": d["chunk_count"], "indexed_at": d["indexed_at"].isoformat()} for d in docs])
        return
    for d in docs:
        echo(f"{d['site_id']}\t{d['file_type']}\t{d['chunk_count']} chunks\t"
                   f"{d['indexed_at']:%Y-%m-%d %H:%M}\t{d['source']}")
    if total > len(docs):
        console.print(f"... and {total - len(docs)} more; `--site` narrows the list.")
    if not docs:
        console.print(_nothing_indexed(site))


@app.command()
@run_safely
def reindex(
    background: bool = typer.Option(False, "--background", help="Queue a job for `rag worker` and print its id."),
    as_json: bool = typer.Option(False, "--json", help="With --background: print the job id as JSON."),
) -> None:
    """Re-embed every chunk with the configured embedder (after changing RAG_EMBEDDER)."""
    if background:
        with common.workbench() as wb:
            report_enqueued(wb, wb.enqueue_reindex(), as_json)
        return
    with common.workbench() as wb:
        with Progress(TextColumn("[bold]re-embedding"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                      console=console) as bar:
            task = bar.add_task("chunks", total=None)
            result = wb.reindex(progress=lambda p: bar.update(task, completed=p.done, total=p.total))
    out.print(f"Re-embedded {result['chunks']} chunks with {result['embedder']} ({result['dimension']} dimensions).")


@index_app.command("source")
@run_safely
def index_source(
    source_filter: str = typer.Argument(..., metavar="SOURCE", help="The search's source filter, e.g. docs/ or "
                                        "https://example.com/ (a narrower filter uses the same index)."),
    site: str = typer.Option(..., "--site", help="Site of the documents."),
) -> None:
    """Give a source filter's chunks an HNSW index of their own (rerun to rebuild it)."""
    with common.workbench() as wb:
        with Progress(TextColumn("[bold]indexing"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                      console=console) as bar:
            task = bar.add_task("documents", total=None)
            made = wb.index_source(source_filter, site_id=site,
                                   progress=lambda p: bar.update(task, completed=p.done, total=p.total))
    out.print(f"Indexed {made['chunks']} chunks of '{markup_text(source_filter)}' in site '{site}' "
              f"({made['index_name']}); searches with that source filter walk them alone.")


@index_app.command("list")
@run_safely
def index_list(site: Optional[str] = typer.Option(None, "--site", help="Only this site."),
               as_json: bool = typer.Option(False, "--json", help="Print as JSON.")) -> None:
    """The source filters with an HNSW index of their own."""
    with common.workbench() as wb:
        made = wb.source_indexes(site_id=site)
    if as_json:
        print_json(made)
        return
    table = Table("site", "source filter", "chunks", "built")
    for m in made:
        table.add_row(markup_text(m["site_id"]), markup_text(m["source_filter"]), str(m["chunks"]),
                      m["created_at"].strftime("%Y-%m-%d %H:%M"))
    out.print(table if made else "No source filter has an index of its own; `rag index source SOURCE --site S` "
                                 "makes one.")


@index_app.command("drop")
@run_safely
def index_drop(source_filter: str = typer.Argument(..., metavar="SOURCE"),
               site: str = typer.Option(..., "--site", help="Site of the documents.")) -> None:
    """Drop a source filter's own index (its searches walk the whole store's graph again)."""
    with common.workbench() as wb:
        dropped = wb.drop_source_index(source_filter, site_id=site)
    if not dropped:
        echo(f"'{source_filter}' in site '{site}' has no index of its own; `rag index list` shows those that do.",
             err=True)
        raise typer.Exit(code=1)
    out.print(f"Dropped the index of '{markup_text(source_filter)}' in site '{site}'.")


@sample_app.command("add")
@run_safely
def sample_add() -> None:
    """Index the sample corpus into the site 'sample' (searched with --site sample, never with your documents)."""
    with common.workbench() as wb:
        report = wb.ingest_sample_corpus()
    s = report.to_dict()
    out.print(f"Sample corpus in site 'sample': {s['indexed']} indexed, {s['updated']} updated, "
              f"{s['unchanged']} unchanged, {s['failed']} failed ({s['chunks']} chunks). "
              "Try `rag search --site sample \"hybrid search\"`; `rag sample remove` deletes it.")


@sample_app.command("remove")
@run_safely
def sample_remove() -> None:
    """Delete the sample corpus (every document of the site 'sample')."""
    with common.workbench() as wb:
        result = wb.remove_sample_corpus()
    out.print(f"Removed the sample corpus: {result['documents']} documents, {result['chunks']} chunks.")


@db_app.command("upgrade")
@run_safely
def db_upgrade() -> None:
    """Create the database if needed and apply every migration."""
    from rag_core.db.database import describe_url
    from rag_core.settings import load_settings
    from rag_core.workbench import upgrade_database

    url, revision, embedded = upgrade_database(load_settings())
    out.print(f"Database {'(embedded) ' if embedded else ''}{describe_url(url)} is at revision {revision}.")
