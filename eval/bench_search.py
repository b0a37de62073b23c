"""Search benchmark: p50/p95 per mode, with and without filters, and 100 concurrent searches.

The store is built from real text: the chunks of the eval corpora in RAG_EVAL_DATA (ru_construction pages,
scifact abstracts, jsquad paragraphs), repeated with a variation marker in the title ("[v3]") until
`--size` chunks are stored. A repeat is embedded as its original plus small deterministic noise, so
only the originals are ever encoded; their vectors are cached under eval/cache/ (git-ignored) and,
when the main store already holds the `eval:*` sites built by `rag eval`, read from there.

Each run uses its own database on the embedded server (or DATABASE_URL's server); `--keep` leaves
it in place and a later run with `--db NAME` reuses it without ingesting again. It prints figures
and writes them to eval/results/bench_search.json; nothing asserts a time.

    .venv/bin/python eval/bench_search.py --size 100000
    .venv/bin/python eval/bench_search.py --size 20000 --queries 60 --keep
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from rag_core import load_settings, open_workbench
from rag_core.db.database import create_database_if_missing, drop_database, with_database
from rag_core.errors import RagError
from rag_core.evaluation.runner import machine
from rag_core.evaluation.scale import SITE, build_records, bulk_ingest, latency_summary as summary, measure_modes
from rag_core.evaluation.scale import timed_search, vectors_from_store
from rag_core.evaluation.vectors import CachedEmbedder, load_cache, save_cache
from rag_core.workbench import resolve_database

REPO = Path(__file__).resolve().parents[1]
CACHE = REPO / "eval" / "cache"
console = Console(stderr=True, width=160)


def vectors_from_main_store(settings: Any) -> dict[str, np.ndarray]:
    """Chunk vectors of the eval:* sites `rag eval` built in the main store (same chunking, same embedder)."""
    try:
        with open_workbench(settings) as wb:
            return vectors_from_store(wb)
    except RagError as exc:
        console.print(f"main store not readable ({exc.message}); originals will be embedded")
        return {}


def ingest(wb: Any, records: list[dict], size: int) -> dict[str, Any]:
    """Ingest repeats of the records until `size` chunks are stored, with a progress bar."""
    with Progress(TextColumn("ingest"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), console=console) as bar:
        task = bar.add_task("chunks", total=size)
        build = bulk_ingest(wb, records, size, unit="chunks", progress=lambda n: bar.update(task, completed=n))
    return build


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", type=int, default=100_000, help="chunks to store (default 100000)")
    parser.add_argument("--queries", type=int, default=90, help="queries per measurement (spread over the sets)")
    parser.add_argument("--concurrency", type=int, default=100, help="simultaneous searches from threads")
    parser.add_argument("--db", default="", help="reuse this bench database (made by an earlier --keep run)")
    parser.add_argument("--keep", action="store_true", help="keep the bench database for the next run")
    parser.add_argument("--output", type=Path, default=REPO / "eval" / "results" / "bench_search.json")
    args = parser.parse_args()

    settings = load_settings()
    server_url, _ = resolve_database(settings)
    db_name = args.db or f"rag_bench_search_{uuid.uuid4().hex[:8]}"
    url = with_database(server_url, db_name)
    create_database_if_missing(url)
    records, queries = build_records()
    cache_path = CACHE / "bench_search_vectors.npz"
    vectors = load_cache(cache_path)
    if len(vectors) < 1000:
        vectors.update(vectors_from_main_store(settings))
        console.print(f"{len(vectors)} chunk vectors taken from the main store's eval sites")
    keep = args.keep or bool(args.db)
    try:
        with open_workbench(settings.model_copy(update={"database_url": url, "search_cache_ttl_sec": 0})) as wb:
            real = wb.embedder
            cached = CachedEmbedder(real, vectors, embed_batch_size=settings.embed_batch_size)
            wb._embedder = cached
            build = ingest(wb, records, args.size)
            if cached.misses:
                save_cache(cache_path, vectors)
            console.print(f"store: {build['chunks']} chunks (load {build['load_s']} s, index {build['index_s']} s, "
                          f"{cached.misses} originals embedded)")
            wb.search("warm up", site_id=SITE)
            qs = [q["text"] for q in queries]
            step = max(1, len(qs) // args.queries)
            sample = qs[::step][: args.queries]
            results: dict[str, Any] = measure_modes(wb, sample, log=console.print)
            modes = ["hybrid", "semantic", "fulltext"]
            jobs = [(sample[i % len(sample)], modes[i % 3]) for i in range(args.concurrency)]
            barrier = threading.Barrier(args.concurrency)

            def one(job: tuple[str, str]) -> tuple[float, str | None, int]:
                barrier.wait()
                return timed_search(wb, job[0], mode=job[1])

            started = time.perf_counter()
            with ThreadPoolExecutor(max_workers=args.concurrency) as pool:
                runs = list(pool.map(one, jobs))
            wall = time.perf_counter() - started
            ms = [r[0] for r in runs]
            errors = [r[1] for r in runs if r[1]]
            results["concurrent"] = {"searches": args.concurrency, **summary(ms), "errors": len(errors),
                                     "error_codes": sorted(set(errors)), "wall_s": round(wall, 2),
                                     "pool_size": settings.db_pool_size}
            console.print(f"{args.concurrency} concurrent searches: p50 {results['concurrent']['p50']} ms, "
                          f"p95 {results['concurrent']['p95']} ms, errors {len(errors)}, wall {wall:.1f} s")
        report = {"chunks": build["chunks"], "build": build, "queries_per_measurement": len(sample),
                  "machine": machine(), "embedder": settings.embedder, "results": results,
                  "database": db_name if keep else None,
                  "written": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        print(json.dumps(report, indent=2, ensure_ascii=False))
    finally:
        if not keep:
            drop_database(url)
        else:
            console.print(f"kept database {db_name}; rerun with --db {db_name}")


if __name__ == "__main__":
    sys.exit(main())
