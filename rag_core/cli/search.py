"""`rag search`: the search spec's /search command through the Workbench (text, json or markdown)."""

from __future__ import annotations

import json
from typing import Any, Optional

import typer

from rag_core.cli import common
from rag_core.cli.common import app
from rag_core.errors import RagError

FORMATS = ("text", "json", "markdown")


def _error(exc: RagError, fmt: str) -> None:
    """The search spec's error JSON with --format json, one line otherwise; exit 1 either way."""
    if fmt == "json":
        common.echo(json.dumps(exc.to_dict(), ensure_ascii=False, default=str), json_text=True)
    else:
        common.echo(f"Error ({exc.code}): {exc.message}", err=True)
    raise typer.Exit(code=1)


@app.command()
def search(
    query: str = typer.Argument(..., help="What to look for, in natural language."),
    limit: int = typer.Option(10, "--limit", "-l", help="Documents per page (1-50)."),
    types: str = typer.Option("", "--types", "-t", help="Document types, comma separated: pdf,docx,xlsx,txt,md,csv,html."),
    date_from: Optional[str] = typer.Option(None, "--date-from", help="Documents dated on or after YYYY-MM-DD."),
    date_to: Optional[str] = typer.Option(None, "--date-to", help="Documents dated on or before YYYY-MM-DD."),
    source: Optional[str] = typer.Option(None, "--source", help="Source path or URL prefix (or any part of the path)."),
    fmt: str = typer.Option("text", "--format", "-f", help="Output: text, json or markdown."),
    context: bool = typer.Option(True, "--context/--no-context", "-c", help="Show each document's best chunks."),
    chunks: int = typer.Option(3, "--chunks", "-k", help="Chunks per document (1-10)."),
    mode: str = typer.Option("hybrid", "--mode", help="hybrid, semantic or fulltext."),
    page: int = typer.Option(1, "--page", help="Page of results (1 is the first)."),
    site: Optional[str] = typer.Option(None, "--site", help="Search one site (tenant); default: every site."),
) -> None:
    """Search the indexed documents: hybrid (default), semantic or full text, with filters."""
    fmt = fmt.strip().lower()
    if fmt not in FORMATS:
        from rag_core.errors import InvalidQuery

        _error(InvalidQuery(f"Unknown format '{fmt}'; choose one of: {', '.join(FORMATS)}.",
                            details={"field": "format", "allowed": ", ".join(FORMATS)}), "text")
    try:
        with common.workbench() as wb:
            response: dict[str, Any] = wb.search(
                query, mode=mode, limit=limit, page=page, types=types or None, date_from=date_from,
                date_to=date_to, source=source, site_id=site, include_context=context, max_chunks=chunks)
    except RagError as exc:
        _error(exc, fmt)
        return
    from rag_core.render.search import render_markdown, render_text

    # echo, not rich: rich would turn ":name:" inside documents into emoji.
    if fmt == "json":
        common.echo(json.dumps(response, ensure_ascii=False, default=str), json_text=True)
    elif fmt == "markdown":
        common.echo(render_markdown(response), nl=False)
    else:
        common.echo(render_text(response), nl=False)
