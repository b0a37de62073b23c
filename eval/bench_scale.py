"""Scale benchmark (the search spec: 100K documents, under 1 s per search) and the vector store alone at 1M.

Part 1, --docs N (default 100000): N documents of real text (the eval corpora in RAG_EVAL_DATA; a corpus
repeats with a "[vN]" title marker once its originals are used up) ingested through
Workbench.ingest_texts into a database of its own: ingest time, HNSW/statistics build, search
p50/p95 per mode with and without filters, memory (this process's RSS, the PostgreSQL server's
RSS, database and index sizes). Originals are embedded once and cached in
eval/cache/bench_search_vectors_<embedder>.npz (shared with bench_search.py; --seed-from-store adds the
vectors of the `eval:*` sites `rag eval` built); repeats cost no model time. --only-cached keeps
to documents whose vectors are already cached, so a run embeds nothing.

Part 2, --vectors N (e.g. 1000000): the store alone. N precomputed vectors (the cached originals,
then noisy copies) COPYed in binary into a bare pgvector table, the HNSW index built
(maintenance_work_mem 1GB, as the product does), then top-10 query latency and recall@10 against
exact search.

Figures are printed and written to eval/results/bench_scale.json; nothing asserts a time.

    .venv/bin/python eval/bench_scale.py --docs 100000 --seed-from-store
    .venv/bin/python eval/bench_scale.py --docs 0 --vectors 1000000
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import numpy as np
import psutil
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from rag_core import load_settings, open_workbench
from rag_core.db.database import create_database_if_missing, drop_database, with_database
from rag_core.evaluation.runner import machine
from rag_core.bench.scale import (
    SITE, build_records, bulk_ingest, chunk_inputs, latency_summary, measure_modes, noisy_copies, store_sizes,
    vectors_from_store,
)
from rag_core.evaluation.vectors import CachedEmbedder, embedder_cache_file, load_cache, save_cache, text_key
from rag_core.providers.embeddings import build_embedder, embedder_identity
from rag_core.workbench import resolve_database

REPO = Path(__file__).resolve().parents[1]
CACHE_DIR = REPO / "eval" / "cache"


def vector_cache(settings: Any) -> Path:
    """The originals' vectors of the configured embedder (one file per embedder)."""
    return embedder_cache_file(CACHE_DIR, "bench_search_vectors", embedder_identity(settings))
console = Console(stderr=True, width=160)


def server_rss_mb(url: str) -> float:
    """Resident memory of the PostgreSQL server process tree serving `url` (postmaster and backends)."""
    import psycopg

    with psycopg.connect(url) as conn:   # held open: the backend must exist while it is looked up
        pid = conn.execute("SELECT pg_backend_pid()").fetchone()[0]
        try:
            root = psutil.Process(pid).parent()
            total = 0
            for proc in [root] + root.children(recursive=True):
                try:
                    total += proc.memory_info().rss
                except psutil.Error:
                    continue   # a backend that exited meanwhile
            return round(total / 1e6, 1)
        except psutil.Error:   # a remote server: not measurable from here
            return float("nan")


def documents_part(args: argparse.Namespace, settings: Any, vectors: dict[str, np.ndarray]) -> dict[str, Any]:
    """Ingest args.docs documents into a fresh database and time searches of every mode."""
    records, queries = build_records()
    if args.only_cached:
        records = [r for r in records if all(text_key(t) in vectors for t in chunk_inputs(
            (r["title"] or r["id"]).strip(), r["text"], settings.chunk_size, settings.chunk_overlap))]
        console.print(f"{len(records)} originals have cached vectors; repeats fill up to {args.docs} documents")
    server_url, _ = resolve_database(settings)
    db_name = args.db or f"rag_bench_scale_{uuid.uuid4().hex[:8]}"
    url = with_database(server_url, db_name)
    create_database_if_missing(url)
    try:
        cached = CachedEmbedder(build_embedder(settings), vectors, embed_batch_size=settings.embed_batch_size)
        with open_workbench(settings.model_copy(update={"database_url": url, "search_cache_ttl_sec": 0}),
                            embedder=cached) as wb:
            embedder = wb.embedder_name  # a kept store (--db) built with another embedder is searched with that one
            with Progress(TextColumn("ingest"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                          console=console) as bar:
                task = bar.add_task("documents", total=args.docs)
                build = bulk_ingest(wb, records, args.docs, unit="documents",
                                    progress=lambda n: bar.update(task, completed=n))
            if cached.misses:
                save_cache(vector_cache(settings), vectors)
            build["originals_embedded"] = cached.misses
            build["docs_per_s"] = round(build["documents"] / build["load_s"], 1) if build["load_s"] else None
            console.print(f"store: {build['documents']} documents, {build['chunks']} chunks "
                          f"(load {build['load_s']} s, index and statistics {build['index_s']} s, "
                          f"{cached.misses} originals embedded)")
            wb.search("warm up", site_id=SITE)
            texts = [q["text"] for q in queries]
            sample = texts[:: max(1, len(texts) // args.queries)][: args.queries]
            results = measure_modes(wb, sample, log=console.print)
            memory = {"process_rss_mb": round(psutil.Process().memory_info().rss / 1e6, 1),
                      "server_rss_mb": server_rss_mb(url),
                      "sizes_mb": {k: round(v / 1e6, 1) for k, v in store_sizes(wb).items()}}
            console.print(f"memory: {memory}")
        return {"embedder": embedder, "build": build, "queries_per_measurement": len(sample), "search": results,
                "memory": memory,
                "database": db_name if args.keep else None}
    finally:
        if not args.keep:
            drop_database(url)


def vectors_part(args: argparse.Namespace, settings: Any, vectors: dict[str, np.ndarray]) -> dict[str, Any]:
    """The bare vector store at args.vectors rows: COPY, HNSW build, query latency and recall."""
    import psycopg
    from pgvector.psycopg import register_vector

    originals = np.stack(list(vectors.values())).astype(np.float32)
    dim = originals.shape[1]
    server_url, _ = resolve_database(settings)
    url = with_database(server_url, f"rag_bench_vectors_{uuid.uuid4().hex[:8]}")
    create_database_if_missing(url)
    _, queries = build_records()
    model = build_embedder(settings)   # real query vectors of the cached vectors' embedder, not a store's
    qvecs = [np.asarray(model.get_query_embedding(q["text"]), dtype=np.float32)
             for q in queries[:: max(1, len(queries) // args.queries)][: args.queries]]
    try:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
            register_vector(conn)
            conn.execute(f"CREATE TABLE bench_vectors (id bigint, embedding vector({dim}))")
            started = time.perf_counter()
            with Progress(TextColumn("COPY"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                          console=console) as bar:
                task = bar.add_task("rows", total=args.vectors)
                with conn.cursor().copy("COPY bench_vectors (id, embedding) FROM STDIN WITH (FORMAT BINARY)") as copy:
                    copy.set_types(["int8", "vector"])
                    n = 0
                    for block in noisy_copies(originals, args.vectors):
                        for vec in block:
                            copy.write_row((n, vec))
                            n += 1
                        bar.update(task, completed=n)
            copy_s = time.perf_counter() - started
            console.print(f"COPY {args.vectors} vectors of {dim} dimensions: {copy_s:.1f} s; building HNSW...")
            started = time.perf_counter()
            conn.execute("SET maintenance_work_mem = '1GB'")
            conn.execute("CREATE INDEX ON bench_vectors USING hnsw (embedding vector_cosine_ops)")
            index_s = time.perf_counter() - started
            conn.execute("ANALYZE bench_vectors")
            console.print(f"HNSW build: {index_s:.1f} s")
            # the product searches with ef_search = its 100-candidate list (rag_core.search.hybrid)
            conn.execute(f"SET hnsw.ef_search = {int(args.ef_search)}")
            sql = "SELECT id FROM bench_vectors ORDER BY embedding <=> %s LIMIT 10"
            ms, found = [], []
            for q in qvecs:
                t = time.perf_counter()
                found.append([r[0] for r in conn.execute(sql, (q,), prepare=False)])
                ms.append((time.perf_counter() - t) * 1000)
            # exact top 10 for a few queries; prepare=False so the plan really drops the index
            conn.execute("SET enable_indexscan = off")
            recalls, recalls_orig = [], []
            n_orig = len(originals)
            for q, got in list(zip(qvecs, found))[: args.recall_queries]:
                exact = {r[0] for r in conn.execute(sql, (q,), prepare=False)}
                recalls.append(len(exact & set(got)) / 10)
                # row n is a noisy copy of original n % n_orig: copies of one original are near-ties, so
                # the exact top 10 is an arbitrary pick among them; which originals come back is what counts
                want = {i % n_orig for i in exact}
                recalls_orig.append(len(want & {i % n_orig for i in got}) / len(want))
            sizes = conn.execute("SELECT pg_table_size('bench_vectors'), pg_indexes_size('bench_vectors')").fetchone()
        result = {"vectors": args.vectors, "dimensions": dim, "originals": len(originals), "copy_s": round(copy_s, 1),
                  "hnsw_build_s": round(index_s, 1), "ef_search": args.ef_search, "query_ms": latency_summary(ms),
                  "recall@10_vs_exact": round(float(np.mean(recalls)), 3) if recalls else None,
                  "recall@10_of_originals": round(float(np.mean(recalls_orig)), 3) if recalls_orig else None,
                  "recall_queries": len(recalls), "table_mb": round(sizes[0] / 1e6, 1),
                  "index_mb": round(sizes[1] / 1e6, 1), "server_rss_mb": server_rss_mb(url)}
        console.print(f"store alone: {result}")
        return result
    finally:
        drop_database(url)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--docs", type=int, default=100_000, help="documents to store (0 skips part 1)")
    parser.add_argument("--vectors", type=int, default=0, help="rows for the store-alone part (e.g. 1000000)")
    parser.add_argument("--queries", type=int, default=60, help="queries per measurement")
    parser.add_argument("--ef-search", type=int, default=100, help="hnsw.ef_search for the store-alone queries")
    parser.add_argument("--recall-queries", type=int, default=10, help="queries checked against exact search")
    parser.add_argument("--seed-from-store", action="store_true", help="add the eval:* sites' vectors to the cache")
    parser.add_argument("--only-cached", action="store_true", help="use only documents whose vectors are cached")
    parser.add_argument("--db", default="", help="reuse a database kept by an earlier --keep run")
    parser.add_argument("--keep", action="store_true", help="keep the part 1 database")
    parser.add_argument("--output", type=Path, default=REPO / "eval" / "results" / "bench_scale.json")
    args = parser.parse_args()
    args.keep = args.keep or bool(args.db)

    settings = load_settings()
    vectors = load_cache(vector_cache(settings))
    if args.seed_from_store:
        with open_workbench(settings) as wb:
            vectors.update(vectors_from_store(wb, embedder_identity(settings)))
        save_cache(vector_cache(settings), vectors)
    console.print(f"{len(vectors)} original chunk vectors cached")
    report: dict[str, Any] = {"machine": machine(), "embedder": embedder_identity(settings),
                              "load_1min_at_start": round(os.getloadavg()[0], 1)}
    if args.docs:
        report["documents"] = documents_part(args, settings, vectors)
        report["embedder"] = report["documents"]["embedder"]
    if args.vectors:
        if not vectors:
            console.print("no cached vectors: run part 1 or --seed-from-store first")
            return 2
        report["store_alone"] = vectors_part(args, settings, vectors)
    report["load_1min_at_end"] = round(os.getloadavg()[0], 1)
    report["written"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    print(json.dumps(report, indent=2, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
