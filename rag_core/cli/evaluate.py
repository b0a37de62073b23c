"""`rag eval`: retrieval quality and search latency on a BEIR-layout set; `rag eval fetch`: the public sets."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, List, Optional

import typer
from rich.progress import (
    BarColumn,
    DownloadColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TransferSpeedColumn,
)
from rich.table import Table

from rag_core.cli import common
from rag_core.cli.common import app, console, group_with_default, out, run_safely

# `rag eval DATASET` measures; `rag eval fetch NAME` downloads.
eval_app = typer.Typer(cls=group_with_default("run"), no_args_is_help=True,
                       help="Measure retrieval on a BEIR set (`rag eval scifact`); `rag eval fetch` downloads the "
                            "public sets.")
app.add_typer(eval_app, name="eval")


@eval_app.command("run")
@run_safely
def evaluate(
    dataset: str = typer.Argument(..., help="A set in RAG_EVAL_DATA (scifact, jsquad...) or a BEIR folder: "
                                            "corpus.jsonl, queries.jsonl, qrels.tsv."),
    mode: str = typer.Option("hybrid", "--mode", help="hybrid, semantic or fulltext."),
    k: int = typer.Option(5, "--k", help="Cut-off of precision, hit and recall (mrr and ndcg use 10)."),
    max_queries: Optional[int] = typer.Option(None, "--max-queries", help="Use the first N judged queries (file order)."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="Also write the JSON to this file."),
) -> None:
    """Measure retrieval on a BEIR set: precision/hit/recall@k, MRR@10, nDCG@10, latency p50/p95."""
    from rag_core.evaluation.datasets import find_eval_set
    from rag_core.evaluation.runner import run_eval
    from rag_core.settings import load_settings

    path = find_eval_set(dataset, load_settings().eval_data_dir)   # a missing set fails before the database starts
    with common.workbench() as wb:
        with Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                      console=console, transient=as_json or not sys.stderr.isatty()) as bar:
            ingest_task = bar.add_task("ingest", total=None)
            query_task = bar.add_task("queries", total=None, visible=False)

            def on_ingest(p: Any) -> None:
                bar.update(ingest_task, completed=p.done, total=p.total or None)

            def on_query(done: int, total: int) -> None:
                bar.update(query_task, completed=done, total=total, visible=True)

            result = run_eval(wb.library, wb.search_engine, path, mode=mode, k=k, max_queries=max_queries,
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


@eval_app.command("fetch")
@run_safely
def fetch(
    names: List[str] = typer.Argument(..., help="scifact and/or jsquad (ru_construction is evaluation-only: not "
                                                "fetchable)."),
    dest: Optional[Path] = typer.Option(None, "--dest", help="Folder of evaluation sets (default: RAG_EVAL_DATA)."),
) -> None:
    """Download public evaluation sets from their originals, check them against pinned checksums, write BEIR layout."""
    from rag_core.evaluation.fetch import fetch_dataset, fetch_spec
    from rag_core.settings import load_settings

    specs = [fetch_spec(name) for name in names]   # every name is checked before anything is downloaded
    configured = load_settings().eval_data_dir
    root = (dest or configured).expanduser()
    for spec in specs:
        with Progress(TextColumn("[bold]{task.description}"), BarColumn(), DownloadColumn(), TransferSpeedColumn(),
                      TimeElapsedColumn(), console=console) as bar:
            tasks: dict[str, Any] = {}

            def on_progress(filename: str, done: int, total: int) -> None:
                if filename not in tasks:
                    tasks[filename] = bar.add_task(f"{spec.name}: {filename}", total=total)
                bar.update(tasks[filename], completed=done)

            result = fetch_dataset(spec, root, progress=on_progress)
        if result.already_present:
            out.print(f"{spec.name}: already in {result.path} and matches its pinned checksums; nothing downloaded.",
                      markup=False)
        else:
            out.print(f"{spec.name}: {result.downloaded_bytes:,} bytes downloaded and checked, BEIR layout in "
                      f"{result.path}. Licence: {spec.licence}", markup=False)
    if root.resolve() != configured.resolve():
        out.print(f"Set RAG_EVAL_DATA={root} so that `rag eval {specs[0].name}` and the notebooks find them.",
                  markup=False)
