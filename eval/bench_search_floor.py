"""In-process hybrid `Workbench.search` against its floor: the query embedding plus a bare pgvector HNSW top-10.

On a store an earlier benchmark kept (`--db NAME`, e.g. from eval/bench_search.py --keep or
eval/compare_search_results.py --keep), every query text is new to both sides: the search runs with its
cache off and its query-vector cache cleared, the floor embeds with the model directly and runs
`ORDER BY embedding <=> q LIMIT 10` over the same site. The two alternate query by query, so load
falls on both alike. Prints p50/p95 of each and the ratio of the p50s for each of `--runs` runs and their
median, and writes them to `--output`; nothing asserts a time.

    .venv/bin/python eval/bench_search_floor.py --db NAME --output eval/results/search_floor_after.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import time
from pathlib import Path
from typing import Any

from rag_core import load_settings, open_workbench
from rag_core.db.database import with_database
from rag_core.evaluation.runner import machine
from rag_core.bench.scale import SITE, build_records, latency_summary
from rag_core.search.retrieval import QUERY_EMBEDDINGS
from rag_core.workbench import resolve_database

BARE_SQL = "SELECT id FROM chunks WHERE site_id = %s ORDER BY embedding <=> %s LIMIT 10"


def one_run(wb: Any, queries: list[str], site: str) -> dict[str, Any]:
    """p50/p95 of hybrid search and of its floor over the same distinct texts, alternating which goes first."""
    import numpy as np

    model = wb.embedder
    ours, floor = [], []

    def search(q: str) -> None:
        started = time.perf_counter()
        wb.search_engine.search(q, mode="hybrid", site_id=site, use_cache=False)
        ours.append((time.perf_counter() - started) * 1000)

    def bare(q: str) -> None:
        started = time.perf_counter()
        vector = np.asarray(model.get_query_embedding(q), dtype=np.float32)
        with wb.db.connection() as conn:
            conn.execute(BARE_SQL, (site, vector)).fetchall()
        floor.append((time.perf_counter() - started) * 1000)

    for i, q in enumerate(queries):
        for step in ((search, bare) if i % 2 == 0 else (bare, search)):
            step(q)
    wb.flush_search_log()
    a, b = latency_summary(ours), latency_summary(floor)
    return {"hybrid search": a, "floor (embedding + bare HNSW top-10)": b,
            "ratio of p50s": round(a["p50"] / max(b["p50"], 1e-3), 2), "load": os.getloadavg()[0]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--db", required=True, help="a kept bench database")
    parser.add_argument("--site", default=SITE)
    parser.add_argument("--queries", type=int, default=60, help="distinct query texts per run")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--output", type=Path, default=None)
    args = parser.parse_args()
    settings = load_settings()
    _, all_queries = build_records(queries_per_set=200)
    texts = list(dict.fromkeys(q["text"] for q in all_queries))
    server_url, _ = resolve_database(settings)
    url = with_database(server_url, args.db)
    runs = []
    with open_workbench(settings.model_copy(update={"database_url": url, "search_cache_ttl_sec": 0})) as wb:
        wb.search_engine.load_model()
        wb.search_engine.search("warm up", site_id=args.site, use_cache=False)
        for r in range(args.runs):
            QUERY_EMBEDDINGS.clear()
            sample = texts[r * args.queries:(r + 1) * args.queries]  # every run's texts new to both sides
            runs.append(one_run(wb, sample, args.site))
            print(json.dumps(runs[-1]))
        chunks = wb.status(site_id=args.site)["chunks"]
    code = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=Path(__file__).resolve().parent,
                          capture_output=True, text=True).stdout.strip()
    report = {"code": code, "database": args.db, "site": args.site, "chunks": chunks, "embedder": wb.embedder_name,
              "queries_per_run": args.queries, "runs": runs,
              "median ratio of p50s": statistics.median(r["ratio of p50s"] for r in runs),
              "median hybrid p50": statistics.median(r["hybrid search"]["p50"] for r in runs),
              "median floor p50": statistics.median(r["floor (embedding + bare HNSW top-10)"]["p50"] for r in runs),
              "machine": machine(), "written": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    print(json.dumps({k: v for k, v in report.items() if k != "runs"}, indent=2))
    if args.output:
        args.output.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
