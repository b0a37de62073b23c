"""Search benchmark: p50/p95 per mode, with and without filters, and 100 concurrent searches.

The store is built from real text: the chunks of the shared eval corpora (ru_construction pages,
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
import random
import statistics
import sys
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Sequence

import numpy as np
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from rag_core import load_settings, open_workbench
from rag_core.db.database import create_database_if_missing, drop_database, with_database
from rag_core.errors import RagError
from rag_core.evaluation.datasets import load_beir, shared_eval_dir
from rag_core.evaluation.metrics import percentile
from rag_core.evaluation.runner import machine
from rag_core.evaluation.vectors import CachedEmbedder, load_cache, save_cache, text_key
from rag_core.ingest import store, vector_index
from rag_core.workbench import resolve_database

REPO = Path(__file__).resolve().parents[1]
CACHE = REPO / "eval" / "cache"
SETS = ("ru_construction", "scifact", "jsquad")
console = Console(stderr=True, width=160)


def vectors_from_main_store(settings: Any) -> dict[str, np.ndarray]:
    """Chunk vectors of the eval:* sites `rag eval` built in the main store (same chunking, same embedder)."""
    from rag_core.textproc import embedding_input

    found: dict[str, np.ndarray] = {}
    try:
        with open_workbench(settings) as wb:
            with wb.db.connection() as conn:
                rows = conn.execute(
                    "SELECT d.title, c.text, c.embedding FROM chunks c JOIN documents d ON d.id = c.document_id"
                    " WHERE c.site_id = ANY(%s) AND c.embedding IS NOT NULL", ([f"eval:{s}" for s in SETS],))
                for title, text, emb in rows:
                    found[text_key(embedding_input(title, text))] = np.asarray(emb.to_numpy() if hasattr(emb, "to_numpy") else emb, dtype=np.float32)
    except RagError as exc:
        console.print(f"main store not readable ({exc.message}); originals will be embedded")
    return found


def build_records() -> tuple[list[dict], list[dict]]:
    """Corpus records of every set (original order) and up to 100 queries per set."""
    records, queries = [], []
    for name in SETS:
        ds = load_beir(shared_eval_dir() / name)
        for d in ds.corpus:
            records.append({"set": name, "id": d["_id"], "title": d["title"], "text": d["text"]})
        for qid in ds.judged_queries[:100]:
            queries.append({"set": name, "text": ds.queries[qid][:500]})
    random.Random(0).shuffle(records)  # any --size gets all three languages
    random.Random(1).shuffle(queries)
    return records, queries


def ingest(wb: Any, records: list[dict], size: int, batch_docs: int = 400) -> dict[str, Any]:
    """Ingest repeats v0, v1, ... of the records until `size` chunks are stored (HNSW built at the end)."""
    with wb.db.connection() as conn:
        have = conn.execute("SELECT count(*) FROM chunks WHERE site_id = 'bench'").fetchone()[0]
    loaded_before = have
    if have < size:  # rows load into a live HNSW index at ~256/s: drop it and build it once at the end
        vector_index.drop(wb.db)
    started = time.perf_counter()
    variant = 0
    with Progress(TextColumn("ingest"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), console=console) as bar:
        task = bar.add_task("chunks", total=size, completed=have)
        while have < size:
            suffix = f" [v{variant}]" if variant else ""
            batch: list[dict] = []
            for r in records:
                batch.append({"source": f"{r['set']}/v{variant}/{r['id']}", "title": (r["title"] or r["id"]) + suffix,
                              "text": r["text"]})
                if len(batch) == batch_docs:
                    have += wb.ingest_texts(batch, site_id="bench").chunks
                    bar.update(task, completed=min(have, size))
                    batch = []
                    if have >= size:
                        break
            if batch and have < size:
                have += wb.ingest_texts(batch, site_id="bench").chunks
                bar.update(task, completed=min(have, size))
            variant += 1
    load_s = time.perf_counter() - started
    started = time.perf_counter()
    console.print("building the HNSW index...")
    vector_index.ensure(wb.db)
    store.compact_term_stats(wb.db, ["bench"], force=True)
    import psycopg

    # What autovacuum does after a bulk load, done now: statistics, visibility map, GIN pending list.
    with psycopg.connect(wb.db.url, autocommit=True) as conn:
        conn.execute("VACUUM (ANALYZE) documents, chunks, term_stats, corpus_stats")
    with wb.db.connection() as conn:
        chunks = conn.execute("SELECT count(*) FROM chunks WHERE site_id = 'bench'").fetchone()[0]
    return {"chunks": chunks, "load_s": round(load_s, 1), "index_s": round(time.perf_counter() - started, 1),
            "reused_store": loaded_before >= size}


def timed(wb: Any, query: str, **kw: Any) -> tuple[float, str | None, int]:
    started = time.perf_counter()
    try:
        resp = wb.search_engine.search(query, site_id="bench", use_cache=False, **kw)
        return (time.perf_counter() - started) * 1000, None, resp["total_results"]
    except RagError as exc:
        return (time.perf_counter() - started) * 1000, exc.code, 0


def summary(ms: Sequence[float]) -> dict[str, float]:
    return {"p50": round(percentile(ms, 50), 1), "p95": round(percentile(ms, 95), 1),
            "mean": round(statistics.fmean(ms), 1) if ms else 0.0}


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
            wb.search("warm up", site_id="bench")
            qs = [q["text"] for q in queries]
            step = max(1, len(qs) // args.queries)
            sample = qs[::step][: args.queries]
            results: dict[str, Any] = {}
            for mode in ("semantic", "fulltext", "hybrid"):
                for label, filters in (("no filter", {}), ("source filter (one corpus)", {"source": "scifact/"}),
                                       ("selective filter (1 corpus, 1 repeat)", {"source": "jsquad/v0/"}),
                                       ("type filter", {"types": ["txt"]})):
                    runs = [timed(wb, q, mode=mode, **filters) for q in sample]
                    ms = [r[0] for r in runs]
                    key = f"{mode} / {label}"
                    results[key] = {**summary(ms), "errors": sum(1 for r in runs if r[1]),
                                    "empty": sum(1 for r in runs if not r[1] and r[2] == 0)}
                    console.print(f"{key:50s} p50 {results[key]['p50']:7.1f} ms  p95 {results[key]['p95']:7.1f} ms"
                                  f"  errors {results[key]['errors']}  empty {results[key]['empty']}")
            modes = ["hybrid", "semantic", "fulltext"]
            jobs = [(sample[i % len(sample)], modes[i % 3]) for i in range(args.concurrency)]
            barrier = threading.Barrier(args.concurrency)

            def one(job: tuple[str, str]) -> tuple[float, str | None, int]:
                barrier.wait()
                return timed(wb, job[0], mode=job[1])

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
