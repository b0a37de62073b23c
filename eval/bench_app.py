"""App benchmark: how long each Streamlit page takes to run, and the Workbench reads behind it, on a large store.

It runs on a database with real chunks in the site 'bench', made by `eval/bench_search.py --keep`
(embedding 100K chunks' originals takes long on a loaded machine, so `--replicate-to` can stop it
early and copy its documents in SQL, each copy with its own small vector offset, another type and
another month, up to the size wanted):

    .venv/bin/python eval/bench_search.py --size 100000 --keep --db rag_bench_app
    .venv/bin/python eval/bench_app.py --db rag_bench_app [--replicate-to 100000]

Each page is driven headless with Streamlit's AppTest (the whole script: widgets, SQL, charts; the
browser's drawing is not included). Cached reads are cleared before every run, so the figures are
the uncached cost a user sees after a write or when the short TTL has expired. It prints medians
and p95 of several runs and writes eval/results/bench_app.json; nothing asserts a time.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from rag_core import load_settings  # noqa: E402
from rag_core.db.database import with_database  # noqa: E402
from rag_core.evaluation.runner import machine  # noqa: E402
from rag_core.workbench import resolve_database  # noqa: E402

SITE = "bench"
QUERIES = ("fire safety requirements for buildings", "protein folding in yeast cells", "東京の人口",
           "требования к вентиляции", "vaccine efficacy trial")


def stats(ms: list[float]) -> dict[str, float]:
    """Median, p95 and max of a list of milliseconds."""
    ordered = sorted(ms)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return {"median": round(statistics.median(ordered), 1), "p95": round(p95, 1), "max": round(ordered[-1], 1),
            "runs": len(ordered)}


def measure(label: str, fn: Callable[[], Any], runs: int, results: dict[str, Any]) -> None:
    """Run `fn` `runs` times after one warm-up; print and record its timing."""
    fn()
    ms = []
    for _ in range(runs):
        started = time.perf_counter()
        fn()
        ms.append((time.perf_counter() - started) * 1000)
    results[label] = stats(ms)
    print(f"{label:58s} median {results[label]['median']:8.1f} ms   p95 {results[label]['p95']:8.1f} ms", flush=True)


def replicate(wb: Any, target: int) -> None:
    """Copy the site's original documents and chunks in SQL until it holds `target` chunks; rebuild the index."""
    from rag_core.ingest import store, vector_index

    with wb.db.connection() as conn:
        originals = conn.execute("SELECT count(*) FROM chunks c JOIN documents d ON d.id = c.document_id"
                                 " WHERE d.site_id = %s AND d.source NOT LIKE '%%#r%%'", (SITE,)).fetchone()[0]
        have = conn.execute("SELECT count(*) FROM chunks WHERE site_id = %s", (SITE,)).fetchone()[0]
        dim = conn.execute("SELECT embedding_dim FROM store_info WHERE id = 1").fetchone()[0]
    if have >= target or not originals:
        return
    vector_index.drop(wb.db)
    started, r = time.perf_counter(), 0
    while have < target:
        r += 1
        with wb.db.connection() as conn, conn.transaction():
            if conn.execute("SELECT 1 FROM documents WHERE site_id = %s AND source LIKE %s LIMIT 1",
                            (SITE, f"%#r{r}")).fetchone():
                continue  # an earlier, interrupted run made this copy
            conn.execute(
                "INSERT INTO documents (site_id, source, title, file_type, file_size, category, language,"
                " content_hash, content, doc_date, chunk_count, metadata)"
                " SELECT site_id, source || %(suffix)s, title || %(tag)s,"
                " (ARRAY['pdf','docx','txt','md','html','xlsx','csv'])[1 + %(r)s %% 7], file_size, category, language,"
                " content_hash, content, now() - make_interval(days => (%(r)s * 13) %% 700), chunk_count, metadata"
                " FROM documents WHERE site_id = %(site)s AND source NOT LIKE '%%#r%%'",
                {"suffix": f"#r{r}", "tag": f" [r{r}]", "r": r, "site": SITE})
            conn.execute(
                "INSERT INTO chunks (document_id, site_id, chunk_index, text, start_char, end_char, token_count,"
                " page_number, language, embedding, fts)"
                " SELECT n.id, c.site_id, c.chunk_index, c.text, c.start_char, c.end_char, c.token_count,"
                " c.page_number, c.language, c.embedding + noise.v, c.fts"
                " FROM chunks c JOIN documents o ON o.id = c.document_id"
                " JOIN documents n ON n.site_id = o.site_id AND n.source = o.source || %(suffix)s,"
                " (SELECT array_agg((random() - 0.5) * 0.02)::vector AS v FROM generate_series(1, %(dim)s)) noise"
                " WHERE o.site_id = %(site)s AND o.source NOT LIKE '%%#r%%'",
                {"suffix": f"#r{r}", "site": SITE, "dim": dim})
            have = conn.execute("SELECT count(*) FROM chunks WHERE site_id = %s", (SITE,)).fetchone()[0]
        print(f"copy {r}: {have:,} chunks", flush=True)
    print(f"copied in {time.perf_counter() - started:.0f} s; building the HNSW index ...", flush=True)
    started = time.perf_counter()
    vector_index.ensure(wb.db)
    store.compact_term_stats(wb.db, [SITE], force=True)
    import psycopg

    with psycopg.connect(wb.db.url, autocommit=True) as conn:
        conn.execute("VACUUM (ANALYZE) documents, chunks, term_stats, corpus_stats")
    print(f"index and statistics in {time.perf_counter() - started:.0f} s", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--db", required=True, help="the bench database made by eval/bench_search.py --keep")
    parser.add_argument("--replicate-to", type=int, default=0,
                        help="copy the site's documents in SQL until it holds this many chunks")
    parser.add_argument("--runs", type=int, default=7, help="timed runs per measurement (after one warm-up)")
    parser.add_argument("--output", type=Path, default=REPO / "eval" / "results" / "bench_app.json")
    args = parser.parse_args()

    server_url, _ = resolve_database(load_settings())
    os.environ["DATABASE_URL"] = with_database(server_url, args.db)
    import streamlit as st
    from streamlit.testing.v1 import AppTest

    import app_ui

    wb = app_ui.workbench()
    if args.replicate_to:
        replicate(wb, args.replicate_to)
    info = wb.status(SITE)
    print(f"store: {info['documents']:,} documents, {info['chunks']:,} chunks in site '{SITE}'", flush=True)
    if info["chunks"] < 1000:
        raise SystemExit(f"Site '{SITE}' of {args.db} holds {info['chunks']} chunks; build it with "
                         f"eval/bench_search.py --size 100000 --keep --db {args.db}")
    session = "bench-app-history"
    wb.chat_reset(session)
    for i in range(20):  # a conversation of 40 messages to replay, answered from the 100K chunks
        wb.chat(f"{QUERIES[i % len(QUERIES)]} (question {i})", session_id=session, site_id=SITE)
    results: dict[str, Any] = {}
    try:
        # The Workbench reads behind the pages, uncached.
        last_page = max(0, info["documents"] - 50)
        measure("status (counts, per type, per site, size)", lambda: wb.status(SITE), args.runs, results)
        measure("documents: first page of 50", lambda: wb.documents(SITE, 50, 0), args.runs, results)
        measure(f"documents: last page (offset {last_page:,})", lambda: wb.documents(SITE, 50, last_page),
                args.runs, results)
        measure("chat history (40 messages with sources)", lambda: wb.chat_history(session, 100), args.runs, results)
        measure("retention status (age histogram, audit)", wb.retention_status, args.runs, results)
        measure("search metrics (query log, 30 days)", lambda: wb.search_metrics(since=dt.timedelta(days=30)), args.runs,
                results)
        measure("latency histogram (query log)", lambda: wb.search_latency_histogram(), args.runs, results)
        queries = iter(QUERIES * 100)
        measure("search, hybrid, uncached, page 1 with facets",
                lambda: wb.search_engine.search(next(queries), site_id=SITE, use_cache=False), args.runs, results)
        measure("chat turn (retrieve + extractive answer + store)",
                lambda: wb.chat(next(queries), session_id="bench-app-turns", site_id=SITE), args.runs, results)

        # Whole page runs, as a click or a navigation triggers them: the app is started once per page, then
        # each timed run is one rerun of app.py and that page, with the cached reads cleared first.
        def page_run(path: str, prepare: Callable[[AppTest], None] | None = None,
                     clear: bool = True) -> Callable[[], None]:
            at = AppTest.from_file(str(REPO / "app.py"), default_timeout=300)
            at.session_state["site"] = SITE
            at.session_state["chat_session"] = session
            at.run()
            if path != "app_pages/chat.py":
                at.switch_page(path).run()

            def run() -> None:
                if clear:
                    st.cache_data.clear()
                (prepare or (lambda t: t.run()))(at)
                if at.exception:
                    raise SystemExit(f"{path}: {at.exception[0].value}")
            return run

        queries_page = iter(QUERIES * 100)
        measure("page: Chat (replays 40 messages with sources)", page_run("app_pages/chat.py"), args.runs, results)
        measure("page: Search (a new query: results, facets, downloads)", page_run(
            "app_pages/search.py", lambda at: at.text_input(key="search_query").input(next(queries_page)).run()),
            args.runs, results)
        measure("page: Ingestion (status, sources table)", page_run("app_pages/ingestion.py"), args.runs, results)
        measure("page: Retention", page_run("app_pages/retention.py"), args.runs, results)
        measure("page: Analytics", page_run("app_pages/analytics.py"), args.runs, results)
        # The usual case: a click within the reads' 30 s TTL finds them cached.
        for name in ("chat", "ingestion", "retention", "analytics"):
            measure(f"page: {name.capitalize()}, cached reads", page_run(f"app_pages/{name}.py", clear=False),
                    args.runs, results)
    finally:
        wb.chat_reset(session)
        wb.chat_reset("bench-app-turns")
    out = {"store": {"documents": info["documents"], "chunks": info["chunks"], "database": args.db},
           "machine": machine(), "note": "a page run is one rerun of app.py and the page (AppTest, no browser drawing), cached reads cleared",
           "written": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "results": results}
    args.output.write_text(json.dumps(out, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"written to {args.output}")


if __name__ == "__main__":
    main()
