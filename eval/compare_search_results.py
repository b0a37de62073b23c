"""Search results before and after a change: record them, then check that they are identical.

On a small store built from the shared sets (RAG_EVAL_DATA), every query of each set (`--queries` per
set) is searched in the three modes, without a filter and with a source filter (one corpus) and a
type filter, through `Workbench.search` (documents: source, score and the chunk ids with their scores)
and through the chunk retrieval chat uses (top-10 chunk ids and scores). Scores are rounded to 4 places.

    .venv/bin/python eval/compare_search_results.py --size 3000 --keep --save before.json
    .venv/bin/python eval/compare_search_results.py --db NAME --check before.json

Nothing here asserts a time; it prints how many result lists differ.
"""

from __future__ import annotations

import argparse
import json
import sys
import uuid
from pathlib import Path
from typing import Any

from rag_core import load_settings, open_workbench
from rag_core.db.database import create_database_if_missing, drop_database, with_database
from rag_core.bench.scale import SITE, build_records, bulk_ingest
from rag_core.workbench import resolve_database

FILTERS: tuple[tuple[str, dict[str, Any]], ...] = (
    ("none", {}), ("source", {"source": "scifact/"}), ("source-ja", {"source": "jsquad/"}), ("type", {"types": ["txt"]}),
)


def record(wb: Any, queries: list[dict]) -> dict[str, Any]:
    """Every query's results in every mode and filter, keyed by 'set|mode|filter|surface|query'."""
    from rag_core.search.hybrid import rank_chunks
    from rag_core.search.retrieval import embed_query

    out: dict[str, Any] = {}
    for q in queries:
        for mode in ("semantic", "fulltext", "hybrid"):
            for label, filters in FILTERS:
                key = f"{q['set']}|{mode}|{label}|{{}}|{q['text']}"
                resp = wb.search_engine.search(q["text"], mode=mode, site_id=SITE, use_cache=False, limit=10,
                                               **filters)
                out[key.format("documents")] = [
                    [r["file_path"], round(r["score"], 4),
                     [[c["chunk_id"], round(c["score"], 4)] for c in r["context_chunks"]]]
                    for r in resp["results"]] + [resp["total_results"]]
                emb = embed_query(wb.embedder, q["text"]) if mode != "fulltext" else None
                hits = rank_chunks(wb.reads, q["text"], emb, k=10, site_id=SITE, mode=mode, fusion=wb.search_engine.fusion,
                                     **filters)
                out[key.format("chunks")] = [[h.source, h.chunk_id, round(h.score, 4)] for h in hits]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", type=int, default=3000, help="documents to store when building (default 3000)")
    parser.add_argument("--queries", type=int, default=50, help="queries per shared set")
    parser.add_argument("--db", default="", help="reuse this database (made by an earlier --keep run)")
    parser.add_argument("--keep", action="store_true")
    parser.add_argument("--save", type=Path, help="write the results here")
    parser.add_argument("--check", type=Path, help="compare with results saved earlier")
    args = parser.parse_args()

    settings = load_settings()
    records, queries = build_records(queries_per_set=args.queries)
    server_url, _ = resolve_database(settings)
    db_name = args.db or f"rag_compare_search_{uuid.uuid4().hex[:8]}"
    url = with_database(server_url, db_name)
    create_database_if_missing(url)
    keep = args.keep or bool(args.db)
    try:
        with open_workbench(settings.model_copy(update={"database_url": url, "search_cache_ttl_sec": 0})) as wb:
            bulk_ingest(wb, records, args.size, unit="documents")
            results = record(wb, queries)
    finally:
        if keep:
            print(f"kept database {db_name}; rerun with --db {db_name}", file=sys.stderr)
        else:
            drop_database(url)
    if args.save:
        args.save.write_text(json.dumps(results, ensure_ascii=False, indent=0) + "\n", encoding="utf-8")
    summary: dict[str, Any] = {"lists": len(results), "queries": len(queries), "database": db_name}
    if args.check:
        before = json.loads(args.check.read_text(encoding="utf-8"))
        differ = sorted(k for k in before.keys() | results.keys() if before.get(k) != results.get(k))
        summary.update({"compared": len(before), "differ": len(differ), "examples": differ[:5]})
    print(json.dumps(summary, ensure_ascii=False, indent=2))
    sys.exit(1 if summary.get("differ") else 0)


if __name__ == "__main__":
    main()
