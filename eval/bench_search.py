"""Search benchmark: p50/p95 per mode with and without filters, side by side with references, and
100 concurrent searches.

The store is built from real, distinct text: the documents of the eval corpora in RAG_EVAL_DATA
(ru_construction pages, scifact abstracts, jsquad paragraphs; 13,362 documents, about 27K chunks),
`--size` of them (`--unit chunks` counts chunks instead). Past the distinct documents the corpora
are repeated with a marker in the title ("[v3]"), which the run reports: HNSW recall over
near-duplicates means little. Vectors of the originals are cached per embedder under eval/cache/ (git-ignored)
or read from the `eval:*` sites `rag eval` built in the main store. `--windows` makes more distinct
documents from the same text: each corpus document becomes windows of 1, 2 or 3 consecutive
sentences (narrower windows when the wider ones are too few), each window a document of its own,
duplicates dropped; up to 114K documents, every one embedded (new text has no cached vector), so
100K of them take the embedder a while. `--distinct-windows 600` goes to 1M distinct chunks: every window
of consecutive sentences and clauses up to 600 characters, read across document ends (about 1.12M; see
docs/evaluation.md); such a build takes hours and resumes where it stopped when run again with its `--db`.

In the same run, on the same chunks: bm25s top-100, a bare pgvector `ORDER BY embedding <=> q
LIMIT 10` and ChromaDB (when installed), with the ratios of our p50 to theirs; the top-10 overlap
of the pruned full-text ranking with an exact BM25 over the same lexemes, per set; and filtered
dense search by exact scan against HNSW iterative scan at several filtered-set sizes (the figures
PlannerSettings.exact_scan_max is set from). The one-corpus source filter is measured twice: walking the whole
store's HNSW graph, then an index of its own (`rag index source`, built for the run and dropped after it).
`--auto-index` measures it before and after the index its slow searches make the source-index advisor queue
(the advisor is off in every other run). `--overlap-only` measures the overlap on the `eval:*` sites alone.

Each run uses its own database on the embedded server (or DATABASE_URL's server); `--keep` leaves
it in place and a later run with `--db NAME` reuses it without ingesting again. Before measuring, the
queries it does not measure warm the caches (`--cold` measures a server's first searches instead). It prints figures
and writes them to eval/results/bench_search.json; nothing asserts a time.

    .venv/bin/python eval/bench_search.py --size 10000
    .venv/bin/python eval/bench_search.py --size 100000 --windows --keep
    .venv/bin/python eval/bench_search.py --size 100000 --unit chunks --keep
    .venv/bin/python eval/bench_search.py --overlap-only
    .venv/bin/python eval/bench_search.py --size 1000000 --distinct-windows 600 --db rag_bench_search_1m_distinct \
        --keep --no-crossover --output eval/results/bench_search_1m_distinct.json
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
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
from rag_core.bench.scale import (
    SITE, build_records, bulk_ingest, latency_summary as summary, measure_auto_index, measure_modes, measure_own_index,
)
from rag_core.bench.scale import timed_search, vectors_from_store
from rag_core.evaluation.vectors import CachedEmbedder, embedder_cache_file, load_cache, save_cache
from rag_core.providers.embeddings import build_embedder, embedder_identity
from rag_core.workbench import resolve_database

REPO = Path(__file__).resolve().parents[1]
CACHE = REPO / "eval" / "cache"
console = Console(stderr=True, width=160)


_SENTENCE = re.compile(r"(?<=[.!?])\s+|(?<=[。！？])")


def sentence_windows(records: list[dict], size: int) -> list[dict]:
    """Distinct documents from the corpus documents: windows of consecutive sentences.

    Windows take 1, 2, 3, 1, ... sentences in turn, or 1, 1, 2, ... or single sentences when the wider
    ones give fewer than `size` documents (about 69K, 93K and 114K from the shared sets). Every window
    is real text of its own (duplicates and windows under 20 characters are dropped), so HNSW recall
    against an exact search means what it says. A window keeps its document's title and set; the
    windows of all documents are shuffled together and the first `size` kept.
    """
    for widths in ((1, 2, 3), (1, 1, 2), (1,)):
        out: list[dict] = []
        seen: set[str] = set()
        for r in records:
            sentences = [s.strip() for s in _SENTENCE.split(r["text"]) if s.strip()]
            pos = turn = 0
            while pos < len(sentences):
                width = widths[turn % len(widths)]
                piece = sentences[pos:pos + width]
                pos, turn = pos + width, turn + 1
                text = ("" if r["set"] == "jsquad" else " ").join(piece)
                key = " ".join(text.lower().split())
                if len(key) < 20 or key in seen:
                    continue
                seen.add(key)
                out.append({"set": r["set"], "id": f"{r['id']}-w{turn}", "title": r["title"], "text": text})
        if len(out) >= size:
            break
    random.Random(2).shuffle(out)
    return out[:size]


def vectors_from_main_store(settings: Any) -> dict[str, np.ndarray]:
    """Chunk vectors of the eval:* sites `rag eval` built in the main store (same chunking, same embedder)."""
    try:
        with open_workbench(settings) as wb:
            return vectors_from_store(wb, embedder_identity(settings))
    except RagError as exc:
        console.print(f"main store not readable ({exc.message}); originals will be embedded")
        return {}


def distinct_window_records(size: int, max_chars: int) -> tuple[list[dict], dict[str, Any]]:
    """`size` distinct window documents of at most `max_chars` characters, and how they were made."""
    from rag_core.bench.scale import window_records

    started = time.perf_counter()
    records, stats = window_records(size, max_chars)
    stats["seconds"] = round(time.perf_counter() - started, 1)
    console.print(f"{len(records)} distinct window documents of {stats['distinct windows available']} available "
                  f"({stats['available per set']}); {stats['chosen crossing a document boundary']} cross a document "
                  f"boundary")
    return records, stats


def distinct_chunk_texts(wb: Any) -> int:
    """How many different chunk texts the bench site holds (the check that nothing was stored twice)."""
    with wb.db.connection() as conn:
        return int(conn.execute("SELECT count(DISTINCT md5(text)) FROM chunks WHERE site_id = %s", (SITE,)).fetchone()[0])


def logged_ingest(wb: Any, records: list[dict], size: int, unit: str) -> dict[str, Any]:
    """bulk_ingest with a plain progress line every 10,000 units (for a log file, where no bar is drawn)."""
    started, last, first = time.perf_counter(), [0], [-1]

    def report(n: int) -> None:
        if first[0] < 0:
            first[0] = n
        if n - last[0] >= 10_000 or n >= size:
            last[0] = n
            rate = (n - first[0]) / max(time.perf_counter() - started, 1e-3)
            print(f"{time.strftime('%H:%M:%S')} ingest {n}/{size} {unit} ({rate:.0f}/s since start of this run)",
                  file=sys.stderr, flush=True)

    return bulk_ingest(wb, records, size, unit=unit, progress=report)


def ingest(wb: Any, records: list[dict], size: int, unit: str) -> dict[str, Any]:
    """Ingest the records (repeats only past the distinct documents) until `size` units are stored."""
    if not console.is_terminal:
        return logged_ingest(wb, records, size, unit)
    with Progress(TextColumn("ingest"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), console=console) as bar:
        task = bar.add_task(unit, total=size)
        build = bulk_ingest(wb, records, size, unit=unit, progress=lambda n: bar.update(task, completed=n))
    return build


def timed(fn: Any, items: list[Any]) -> list[float]:
    """Milliseconds of fn(item) for every item."""
    out = []
    for item in items:
        started = time.perf_counter()
        fn(item)
        out.append((time.perf_counter() - started) * 1000)
    return out


def warm_caches(wb: Any, queries: list[str]) -> dict[str, Any]:
    """Hybrid and full-text searches of queries that are not measured, so the measured ones meet the caches a
    running service has (the postings, the HNSW graph's pages) rather than a server's first minutes: at 1M
    chunks a first pass after a start measured full text at p95 2.8 s, warm 0.2-0.3 s. `--cold` skips it."""
    started = time.perf_counter()
    with Progress(TextColumn("warming the caches"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=console) as bar:
        task = bar.add_task("warm", total=2 * len(queries))
        for mode in ("hybrid", "fulltext"):
            for q in queries:
                timed_search(wb, q, mode=mode)
                bar.advance(task)
    out = {"queries": len(queries), "modes": ["hybrid", "fulltext"], "seconds": round(time.perf_counter() - started, 1)}
    console.print(f"caches warmed by {len(queries)} queries that are not measured, hybrid and full text "
                  f"({out['seconds']} s)")
    return out


def references(wb: Any, queries: list[str]) -> dict[str, Any]:
    """Side by side on the same chunks, in this run: bm25s top-100 and a bare pgvector HNSW top-10."""
    import bm25s

    from rag_core.search.retrieval import embed_query
    from rag_core.textproc import cjk_bigrams, detect_language

    with wb.db.connection() as conn:
        rows = conn.execute("SELECT text, language FROM chunks WHERE site_id = %s ORDER BY id", (SITE,)).fetchall()
    texts = [cjk_bigrams(t) if lang == "ja" else t for t, lang in rows]
    retriever = bm25s.BM25()
    retriever.index(bm25s.tokenize(texts, stopwords="en", show_progress=False), show_progress=False)
    prepared = [cjk_bigrams(q) if detect_language(q) == "ja" else q for q in queries]

    def bm25_one(q: str) -> None:
        tokens = bm25s.tokenize([q], stopwords="en", show_progress=False)
        if tokens.vocab:
            retriever.retrieve(tokens, k=100, show_progress=False)

    vectors = [embed_query(wb.embedder, q) for q in queries]   # embedded once, outside the timing
    with wb.db.connection() as conn:
        def hnsw_one(v: np.ndarray) -> None:
            conn.execute("SELECT id FROM chunks WHERE site_id = %s ORDER BY embedding <=> %s LIMIT 10",
                         (SITE, v)).fetchall()
        hnsw_one(vectors[0])
        hnsw = timed(hnsw_one, vectors)
    bm25_one(prepared[0])
    out = {"bm25s top-100": summary(timed(bm25_one, prepared)), "pgvector HNSW top-10": summary(hnsw),
           "pgvector HNSW recall@10 against exact": hnsw_recall(wb, vectors)}
    try:
        out["chromadb top-10"] = summary(chroma_reference(wb, vectors))
    except ImportError:
        console.print("chromadb is not installed: no ChromaDB reference")
    return out


def hnsw_recall(wb: Any, vectors: list[np.ndarray]) -> dict[str, float]:
    """Share of the exact top-10 (every vector read) that the HNSW index returns, at its default ef_search,
    at 100 and at the ef_search our 100 dense candidates use in an index of this size."""
    from rag_core.search.planner import DEFAULT_PLANNER

    sql = "SELECT id FROM chunks WHERE site_id = %s ORDER BY embedding <=> %s LIMIT 10"
    with wb.db.connection() as conn:
        conn.execute("SET LOCAL enable_indexscan = off")
        exact = [{r[0] for r in conn.execute(sql, (SITE, v), prepare=False).fetchall()} for v in vectors]
    with wb.db.connection() as conn:
        indexed = conn.execute("SELECT count(*) FROM chunks WHERE embedding IS NOT NULL").fetchone()[0]
    out = {}
    for ef in sorted({40, 100, DEFAULT_PLANNER.hnsw_ef_search(100, indexed)}):  # the last: what the product's candidates use
        with wb.db.connection() as conn:
            conn.execute(f"SET LOCAL hnsw.ef_search = {ef}")
            found = [{r[0] for r in conn.execute(sql, (SITE, v), prepare=False).fetchall()} for v in vectors]
        out[f"ef_search {ef}"] = round(float(np.mean([len(a & b) / max(len(b), 1) for a, b in zip(found, exact)])), 3)
    console.print(f"pgvector HNSW recall@10 against exact: {out}")
    return out


def chroma_reference(wb: Any, vectors: list[np.ndarray]) -> list[float]:
    """ChromaDB (in-memory, its HNSW) over the same chunk vectors: milliseconds per top-10 query."""
    import chromadb

    client = chromadb.EphemeralClient()
    col = client.create_collection(f"bench{uuid.uuid4().hex[:6]}", metadata={"hnsw:space": "cosine"})
    with wb.db.connection() as conn:
        rows = conn.execute("SELECT id, embedding FROM chunks WHERE site_id = %s", (SITE,)).fetchall()
    for i in range(0, len(rows), 5000):
        part = rows[i:i + 5000]
        col.add(ids=[str(r[0]) for r in part], embeddings=[np.asarray(r[1].to_numpy()) for r in part])
    return timed(lambda v: col.query(query_embeddings=[v], n_results=10), vectors)


def fulltext_overlap(wb: Any, sets_queries: dict[str, list[str]], site_prefix: str) -> dict[str, Any]:
    """Top-10 overlap of the pruned full-text ranking with an exact BM25 over the same lexemes, per set."""
    from rag_core.search.hybrid import rank_fulltext

    out: dict[str, Any] = {}
    for name, qs in sets_queries.items():
        site = site_prefix + name if site_prefix != SITE else SITE
        overlaps, proven, pruned_ms, exact_ms, same_top1 = [], 0, [], [], 0
        for q in qs:
            t0 = time.perf_counter()
            got, exact = rank_fulltext(wb.db, q, k=10, site_id=site)
            t1 = time.perf_counter()
            ref, _ = rank_fulltext(wb.db, q, k=10, site_id=site, exact=True)
            t2 = time.perf_counter()
            pruned_ms.append((t1 - t0) * 1000)
            exact_ms.append((t2 - t1) * 1000)
            ids, ref_ids = [c for c, _ in got], [c for c, _ in ref]
            if ref_ids:
                overlaps.append(len(set(ids) & set(ref_ids)) / len(ref_ids))
                same_top1 += ids[:1] == ref_ids[:1]
            proven += exact
        if not overlaps:  # the site is missing or none of its queries has a lexeme in it: nothing to compare
            console.print(f"[yellow]full text {name}: no query of this set matches anything in site {site!r}; "
                          "build it with `rag eval` first[/yellow]")
            continue
        out[name] = {"site": site, "queries": len(qs), "overlap@10": round(float(np.mean(overlaps)), 4),
                     "min overlap@10": round(float(min(overlaps)), 2), "same top-1": same_top1,
                     "proven exact": proven, "pruned": summary(pruned_ms), "exact": summary(exact_ms)}
        console.print(f"full text {name:16s} overlap@10 {out[name]['overlap@10']:.4f} (min {out[name]['min overlap@10']})"
                      f"  proven exact {proven}/{len(qs)}  pruned p50 {out[name]['pruned']['p50']} ms"
                      f"  exact p50 {out[name]['exact']['p50']} ms")
    return out


def dense_crossover(wb: Any, queries: list[str]) -> dict[str, Any]:
    """Filtered dense search: exact scan against HNSW iterative scan at several filtered-set sizes.

    Documents get dates spread over 1,000 days (this bench database only), so a date range selects
    a known share of the chunks; each plan is forced through `PlannerSettings.exact_scan_chunks`; the cost model
    comes from these figures.
    """
    import datetime as dt

    from rag_core.search import hybrid
    from rag_core.search.planner import PlannerSettings
    from rag_core.search.retrieval import embed_query
    from rag_core.search.validation import validate_search

    with wb.db.connection() as conn:
        conn.execute("UPDATE documents SET doc_date = timestamptz '2020-01-01 12:00+00' + (id %% 1000) * interval '1 day'"
                     " WHERE site_id = %s", (SITE,))
        total = conn.execute("SELECT count(*) FROM chunks WHERE site_id = %s", (SITE,)).fetchone()[0]
    vectors = [embed_query(wb.embedder, q) for q in queries]
    out: dict[str, Any] = {}
    try:
        for share in (0.02, 0.05, 0.1, 0.2, 0.35, 0.5, 1.0):
            days = max(1, int(1000 * share))
            date_to = (dt.date(2020, 1, 1) + dt.timedelta(days=days - 1)).isoformat()
            req = validate_search(query="x", mode="semantic", limit=10, site_id=SITE, date_from="2020-01-01",
                                  date_to=date_to)
            row: dict[str, Any] = {"chunks": int(total * share)}
            tops = {}
            for plan, cap in (("exact", 10**9), ("hnsw", 0)):
                planner = PlannerSettings(exact_scan_chunks=cap)
                ms, tops[plan] = [], []
                for q, v in zip(queries, vectors):
                    started = time.perf_counter()
                    res = hybrid.rank_documents(wb.db, q, v, req, planner=planner)
                    ms.append((time.perf_counter() - started) * 1000)
                    tops[plan].append([d.document_id for d in res.documents])
                row[plan] = summary(ms)
            row["hnsw recall@10"] = round(float(np.mean([len(set(a) & set(b)) / max(len(b), 1)
                                                         for a, b in zip(tops["hnsw"], tops["exact"])])), 3)
            out[f"{share:.0%}"] = row
            console.print(f"filtered dense {share:5.0%} ({row['chunks']:6d} chunks): exact p50 {row['exact']['p50']:6.1f}"
                          f" p95 {row['exact']['p95']:6.1f} | hnsw p50 {row['hnsw']['p50']:6.1f} p95 {row['hnsw']['p95']:6.1f}"
                          f" recall@10 {row['hnsw recall@10']}")
    finally:
        with wb.db.connection() as conn:
            conn.execute("UPDATE documents SET doc_date = NULL WHERE site_id = %s", (SITE,))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", type=int, default=10_000, help="documents (or chunks) to store (default 10000)")
    parser.add_argument("--unit", choices=("documents", "chunks"), default="documents")
    parser.add_argument("--windows", action="store_true",
                        help="documents made of 1-3 sentence windows of the corpus documents (up to 114K distinct)")
    parser.add_argument("--distinct-windows", type=int, default=0, metavar="CHARS",
                        help="documents made of every window of consecutive sentences/clauses up to CHARS characters "
                             "(one chunk each; 600 gives about 1.3M distinct)")
    parser.add_argument("--queries", type=int, default=90, help="queries per measurement (spread over the sets)")
    parser.add_argument("--concurrency", type=int, default=100, help="simultaneous searches from threads")
    parser.add_argument("--no-crossover", action="store_true", help="skip the filtered dense exact/HNSW crossover")
    parser.add_argument("--no-overlap", action="store_true",
                        help="skip the full-text overlap with exact BM25 (an exact ranking per query at 1M chunks)")
    parser.add_argument("--no-own-index", action="store_true",
                        help="skip the one-corpus filter's own index (its build takes minutes at 1M chunks)")
    parser.add_argument("--filters-only", action="store_true",
                        help="on a kept store: only the modes with and without filters and the one-corpus filter's "
                             "own index (no references, overlap, crossover or concurrency)")
    parser.add_argument("--auto-index", action="store_true",
                        help="on a kept store: only the one-corpus filter before and after the index its slow "
                             "searches make the source-index advisor queue (a worker runs in this process)")
    parser.add_argument("--overlap-only", action="store_true",
                        help="only the full-text overlap with exact BM25, on the eval:* sites `rag eval` built")
    parser.add_argument("--cold", action="store_true",
                        help="measure without warming the caches first (the first searches after a server start)")
    parser.add_argument("--db", default="", help="reuse this bench database (made by an earlier --keep run)")
    parser.add_argument("--keep", action="store_true", help="keep the bench database for the next run")
    parser.add_argument("--output", type=Path, default=REPO / "eval" / "results" / "bench_search.json")
    args = parser.parse_args()

    settings = load_settings()
    load_1min = {"start": round(os.getloadavg()[0], 1)}   # the machine is shared: say how busy it was
    records, queries = build_records()
    if args.windows:
        records = sentence_windows(records, args.size)
        console.print(f"{len(records)} sentence-window documents from the shared sets")
    window_stats = None
    if args.distinct_windows:
        records, window_stats = distinct_window_records(args.size, args.distinct_windows)
        args.size = min(args.size, len(records))   # never past the distinct windows: no repeated text
    by_set: dict[str, list[str]] = {}
    for q in queries:
        by_set.setdefault(q["set"], []).append(q["text"])
    if args.overlap_only:
        with open_workbench(settings) as wb:
            overlap = fulltext_overlap(wb, by_set, "eval:")
        print(json.dumps({"fulltext_overlap": overlap, "machine": machine()}, indent=2, ensure_ascii=False))
        return
    distinct_docs = len(records)
    if args.unit == "documents" and args.size > distinct_docs:
        console.print(f"[yellow]the shared sets hold {distinct_docs} distinct documents: documents past that are "
                      "repeats with a marker in the title, not new text[/yellow]")
    server_url, _ = resolve_database(settings)
    db_name = args.db or f"rag_bench_search_{uuid.uuid4().hex[:8]}"
    url = with_database(server_url, db_name)
    create_database_if_missing(url)
    # the million window vectors get a file of their own: the smaller runs need not load them
    stem = "bench_search_distinct_window_vectors" if args.distinct_windows else "bench_search_vectors"
    cache_path = embedder_cache_file(CACHE, stem, embedder_identity(settings))
    vectors = load_cache(cache_path)
    if len(vectors) < 1000:
        vectors.update(vectors_from_main_store(settings))
        console.print(f"{len(vectors)} chunk vectors taken from the main store's eval sites")
    keep = args.keep or bool(args.db)
    try:
        cached = CachedEmbedder(build_embedder(settings), vectors, embed_batch_size=settings.embed_batch_size)
        # The source-index advisor only where it is measured: elsewhere a filter's walk is measured as it is.
        advisor = {} if args.auto_index else {"auto_source_index_ms": 0}
        with open_workbench(settings.model_copy(update={"database_url": url, "search_cache_ttl_sec": 0, **advisor}),
                            embedder=cached) as wb:
            build = ingest(wb, records, args.size, args.unit)
            if cached.misses:
                save_cache(cache_path, vectors)
            console.print(f"store: {build['documents']} documents, {build['chunks']} chunks (load {build['load_s']} s, "
                          f"index {build['index_s']} s, {cached.misses} originals embedded)")
            load_1min["after build"] = round(os.getloadavg()[0], 1)
            if window_stats:
                window_stats["distinct chunk texts stored"] = distinct_chunk_texts(wb)
            wb.search("warm up", site_id=SITE)
            qs = [q["text"] for q in queries]
            step = max(1, len(qs) // args.queries)
            sample = qs[::step][: args.queries]
            warm_up = None if args.cold else warm_caches(wb, [q for q in qs if q not in set(sample)])
            if args.auto_index:
                results: dict[str, Any] = measure_auto_index(wb, sample, log=console.print)
            else:
                results = measure_modes(wb, sample, log=console.print)
                if not args.no_own_index:
                    results.update(measure_own_index(wb, sample, log=console.print))
            if args.filters_only or args.auto_index:
                report = {"documents": build["documents"], "chunks": build["chunks"], "build": build,
                          "queries_per_measurement": len(sample), "machine": machine(),
                          "command": " ".join(["eval/bench_search.py", *sys.argv[1:]]),
                          "load_1min": {**load_1min, "end": round(os.getloadavg()[0], 1)}, "warm_up": warm_up,
                          "embedder": wb.embedder_name, "results": results, "database": db_name if keep else None,
                          "written": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
                args.output.parent.mkdir(parents=True, exist_ok=True)
                args.output.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
                print(json.dumps(report, indent=2, ensure_ascii=False))
                return
            refs = references(wb, sample)
            hybrid_p50 = results["hybrid / no filter"]["p50"]
            ratios = {"hybrid p50 / bm25s p50": round(hybrid_p50 / max(refs["bm25s top-100"]["p50"], 1e-3), 1),
                      "fulltext p50 / bm25s p50": round(results["fulltext / no filter"]["p50"]
                                                        / max(refs["bm25s top-100"]["p50"], 1e-3), 1),
                      "semantic p50 / HNSW p50": round(results["semantic / no filter"]["p50"]
                                                       / max(refs["pgvector HNSW top-10"]["p50"], 1e-3), 1),
                      "hybrid p50 / HNSW p50": round(hybrid_p50 / max(refs["pgvector HNSW top-10"]["p50"], 1e-3), 1)}
            for name, fig in refs.items():
                if "p50" in fig:
                    console.print(f"{name:50s} p50 {fig['p50']:7.2f} ms  p95 {fig['p95']:7.2f} ms")
            for name, value in ratios.items():
                console.print(f"{name:50s} {value}x")
            overlap = {} if args.no_overlap else fulltext_overlap(wb, by_set, SITE)
            crossover = {} if args.no_crossover else dense_crossover(wb, sample[:30])
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
        report = {"documents": build["documents"], "chunks": build["chunks"],
                  "distinct documents available": distinct_docs, "build": build,
                  **({"distinct windows": window_stats} if window_stats else {}),
                  "queries_per_measurement": len(sample), "machine": machine(),
                  "command": " ".join(["eval/bench_search.py", *sys.argv[1:]]),
                  "load_1min": {**load_1min, "end": round(os.getloadavg()[0], 1)}, "warm_up": warm_up,
                  "embedder": wb.embedder_name,  # a kept store built with another embedder is searched with that one
                  "results": results, "references": refs, "ratios": ratios, "fulltext_overlap": overlap,
                  "filtered_dense_crossover": crossover, "database": db_name if keep else None,
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
