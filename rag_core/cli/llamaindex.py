"""`rag import llamaindex` and `rag export llamaindex`: PGVectorStore tables in and out of the store."""

from __future__ import annotations

import json
from typing import Optional

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from rag_core.cli import common
from rag_core.cli.common import app, markup_text, run_safely
from rag_core.security.ids import DEFAULT_SITE

import_app = typer.Typer(help="Bring documents from another tool into the store.", no_args_is_help=True)
export_app = typer.Typer(help="Write the store's documents out for another tool.", no_args_is_help=True)
app.add_typer(import_app, name="import")
app.add_typer(export_app, name="export")

TABLE_HELP = "PGVectorStore's table_name (its rows live in data_<name>)."
URL_HELP = "The PostgreSQL holding the table (postgresql://...); default: the workbench's own database."
# Options the import and export commands share (Typer reads each as the parameter's default).
TABLE_OPTION = typer.Option(..., "--table", help=TABLE_HELP)
URL_OPTION = typer.Option(None, "--url", help=URL_HELP)
SCHEMA_OPTION = typer.Option("public", "--schema", help="The table's schema.")
JSON_OPTION = typer.Option(False, "--json", help="Print the summary as JSON.")


def _run(label: str, fn, **kwargs) -> dict:
    with common.workbench() as wb:
        with Progress(TextColumn(f"[bold]{label}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                      console=common.console) as bar:
            task = bar.add_task("nodes", total=None)
            return fn(wb.store, progress=lambda done, total: bar.update(task, completed=done, total=total), **kwargs)


@import_app.command("llamaindex")
@run_safely
def import_llamaindex(
    table: str = TABLE_OPTION,
    site: str = typer.Option(DEFAULT_SITE, "--site", help="Site (tenant) the nodes go to."),
    url: Optional[str] = URL_OPTION,
    schema: str = SCHEMA_OPTION,
    as_json: bool = JSON_OPTION,
) -> None:
    """Ingest a LlamaIndex PGVectorStore table's nodes (vectors kept when they are this embedder's)."""
    from rag_core.llamaindex.interop import import_table

    result = _run("importing", import_table, table=table, site_id=site, url=url, schema=schema)
    if as_json:
        common.out.print(json.dumps(result))
        return
    how = "embedded again" if result["re_embedded"] else "vectors kept"
    common.out.print(f"Imported {result['nodes']} nodes of {result['documents']} documents from PGVectorStore table "
                     f"'{result['table']}' into site '{site}' ({how}).")
    if result["refused"]:
        common.console.print(f"{len(result['refused'])} document(s) not imported (the same rules as `rag ingest`):")
        for line in result["refused"][:10]:
            common.console.print(f"  {markup_text(line)}")


@export_app.command("llamaindex")
@run_safely
def export_llamaindex(
    table: str = TABLE_OPTION,
    site: str = typer.Option(DEFAULT_SITE, "--site", help="Site (tenant) to export."),
    url: Optional[str] = URL_OPTION,
    schema: str = SCHEMA_OPTION,
    as_json: bool = JSON_OPTION,
) -> None:
    """Write a site's chunks, vectors and metadata into a LlamaIndex PGVectorStore table."""
    from rag_core.llamaindex.interop import export_table

    result = _run("exporting", export_table, table=table, site_id=site, url=url, schema=schema)
    if as_json:
        common.out.print(json.dumps(result))
        return
    common.out.print(f"Exported {result['nodes']} nodes of site '{site}' into PGVectorStore table '{result['table']}' "
                     f"({result['dimension']} dimensions).")
