"""Ingestion benchmark: a BEIR corpus from empty, then again unchanged.

Prints documents/s, chunks/s, the pipeline's overhead over the embedder's raw encode time on the
same chunks (goal: under 15%), and the unchanged re-ingest time as a share of the first run
(goal: under 5%). Each run uses a fresh database on the embedded server (or DATABASE_URL's server).

    .venv/bin/python eval/bench_ingest.py --runs 3
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
import uuid
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from rag_core import load_settings, open_workbench
from rag_core.db.database import create_database_if_missing, drop_database, with_database
from rag_core.evaluation.datasets import find_eval_set, load_beir
from rag_core.textproc import embedding_input
from rag_core.workbench import resolve_database

console = Console()


def machine() -> str:
    cpu = ""
    try:
        cpu = next(line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name"))
    except (OSError, StopIteration):
        cpu = platform.processor()
    return f"{os.cpu_count()} cores, {cpu}, {platform.system()} {platform.release()}"


def one_run(records: list[dict], base_settings) -> dict:
    server_url, _ = resolve_database(base_settings)
    url = with_database(server_url, f"rag_bench_{uuid.uuid4().hex[:8]}")
    create_database_if_missing(url)
    try:
        with open_workbench(base_settings.model_copy(update={"database_url": url})) as wb:
            wb.embedder.get_text_embedding("warm up")
            with Progress(TextColumn("ingest"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[chunks]} chunks"),
                          TimeElapsedColumn(), console=console, transient=True) as bar:
                task = bar.add_task("docs", total=len(records), chunks=0)
                started = time.perf_counter()
                first = wb.ingest_texts(records, site_id="bench",
                                        progress=lambda p: bar.update(task, completed=p.done, chunks=p.chunks_done))
                first_s = time.perf_counter() - started
            started = time.perf_counter()
            second = wb.ingest_texts(records, site_id="bench")
            second_s = time.perf_counter() - started
            with wb.db.connection() as conn:
                rows = conn.execute("SELECT d.title, c.text FROM chunks c JOIN documents d ON d.id = c.document_id"
                                    " WHERE d.site_id = 'bench' ORDER BY c.id").fetchall()
            texts = [embedding_input(t, x) for t, x in rows]
            started = time.perf_counter()
            wb.embedder.get_text_embedding_batch(texts)
            encode_s = time.perf_counter() - started
    finally:
        drop_database(url)
    assert first.count("failed") == 0 and second.count("unchanged") == len(records)
    return {
        "documents": first.count("indexed"), "chunks": first.chunks, "first_s": first_s, "unchanged_s": second_s,
        "raw_encode_s": encode_s, "docs_per_s": first.count("indexed") / first_s, "chunks_per_s": first.chunks / first_s,
        "raw_chunks_per_s": len(texts) / encode_s, "overhead": (first_s - encode_s) / first_s,
        "unchanged_share": second_s / first_s,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default="scifact", help="a set in RAG_EVAL_DATA or a BEIR folder")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--max-docs", type=int, default=None)
    parser.add_argument("--json", type=Path, default=Path(__file__).parent / "results" / "bench_ingest.json")
    args = parser.parse_args()

    data = load_beir(find_eval_set(args.data), max_docs=args.max_docs)
    records = [{"source": data.source_of(d["_id"]), "title": d["title"], "text": d["text"]} for d in data.corpus]
    settings = load_settings()
    runs = []
    for n in range(args.runs):
        result = one_run(records, settings)
        runs.append(result)
        console.print(f"run {n + 1}: {result['documents']} docs, {result['chunks']} chunks in {result['first_s']:.1f} s "
                      f"({result['docs_per_s']:.1f} docs/s, {result['chunks_per_s']:.1f} chunks/s); raw encode "
                      f"{result['raw_encode_s']:.1f} s ({result['raw_chunks_per_s']:.1f} chunks/s); overhead "
                      f"{result['overhead']:.1%}; unchanged re-ingest {result['unchanged_s']:.2f} s "
                      f"({result['unchanged_share']:.1%} of the first run)")
    keys = ["first_s", "unchanged_s", "raw_encode_s", "docs_per_s", "chunks_per_s", "raw_chunks_per_s", "overhead", "unchanged_share"]
    median = {k: statistics.median(r[k] for r in runs) for k in keys}
    summary = {"dataset": data.name, "documents": runs[0]["documents"], "chunks": runs[0]["chunks"],
               "embedder": settings.embedder, "chunk_size": settings.chunk_size, "chunk_overlap": settings.chunk_overlap,
               "runs": runs, "median": median, "machine": machine(), "measured_at": time.strftime("%Y-%m-%d")}
    console.print(f"[bold]median of {len(runs)}[/bold]: {median['docs_per_s']:.1f} docs/s, {median['chunks_per_s']:.1f} chunks/s, "
                  f"overhead {median['overhead']:.1%} (goal < 15%), unchanged {median['unchanged_share']:.1%} of first run "
                  f"(goal < 5%) — {summary['machine']}")
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
