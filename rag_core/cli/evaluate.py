"""`rag eval`: retrieval quality and search latency on a BEIR-layout set, through the Workbench."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Optional

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

import rag_core.cli as cli
from rag_core.cli import app, console, out, run_safely


@app.command("eval")
@run_safely
def evaluate(
    dataset_dir: Path = typer.Argument(..., help="BEIR folder: corpus.jsonl, queries.jsonl, qrels.tsv."),
    mode: str = typer.Option("hybrid", "--mode", help="hybrid, semantic or fulltext."),
    k: int = typer.Option(5, "--k", help="Cut-off of precision, hit and recall (mrr and ndcg use 10)."),
    max_queries: Optional[int] = typer.Option(None, "--max-queries", help="Use the first N judged queries (file order)."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="Also write the JSON to this file."),
) -> None:
    """Measure retrieval on a BEIR set: precision/hit/recall@k, MRR@10, nDCG@10, latency p50/p95."""
    from rag_core.evaluation.runner import run_eval

    with cli._workbench() as wb:
        with Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                      console=console, transient=as_json or not sys.stderr.isatty()) as bar:
            ingest_task = bar.add_task("ingest", total=None)
            query_task = bar.add_task("queries", total=None, visible=False)

            def on_ingest(p: Any) -> None:
                bar.update(ingest_task, completed=p.files_done, total=p.files_total or None)

            def on_query(done: int, total: int) -> None:
                bar.update(query_task, completed=done, total=total, visible=True)

            result = run_eval(wb, dataset_dir, mode=mode, k=k, max_queries=max_queries,
                              ingest_progress=on_ingest, query_progress=on_query)
    data = result.to_dict()
    if output:
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(json.dumps(data, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")
    if as_json:
        typer.echo(json.dumps(data, ensure_ascii=False))
        return
    table = Table(title=f"{result.dataset}: {result.mode}, {result.queries} queries, {result.embedder}")
    table.add_column("metric")
    table.add_column("value", justify="right")
    for key in (f"precision@{k}", f"hit@{k}", f"recall@{k}", "mrr@10", "ndcg@10"):
        table.add_row(key, f"{data[key]:.3f}")
    table.add_row("latency p50", f"{data['latency_ms']['p50']:.1f} ms")
    table.add_row("latency p95", f"{data['latency_ms']['p95']:.1f} ms")
    out.print(table)
    ing = result.ingest
    out.print(f"Ingest: {ing['indexed']} indexed, {ing['unchanged']} unchanged, {ing['failed']} failed "
              f"({ing['duration_s']:.1f} s). Site: {result.site_id}.", markup=False)
