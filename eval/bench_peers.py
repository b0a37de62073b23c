"""Peer comparison: our hybrid search beside LlamaIndex's in-memory index, ChromaDB and bm25s.

The same corpus, chunks, vectors (the configured embedder, RAG_EMBEDDER, computed once) and queries go
through every system in one run (rag_core.bench.peers, the code notebook 04 runs). Prints a
table and writes eval/results/bench_peers_<set>.json: hit@5, nDCG@10, query latency p50/p95,
ingest time and disk size, each also as a ratio to ours. With --runs N the whole comparison runs
N times and the median of each figure is reported.

Chunk vectors are cached in eval/cache/peers_vectors_<embedder>.npz (git-ignored); --seed-from-store first
takes the vectors of the `eval:<set>` site `rag eval` built in the configured store.

    .venv/bin/python eval/bench_peers.py --set scifact                 # every query, whole corpus
    .venv/bin/python eval/bench_peers.py --set jsquad --sample 100 --runs 3
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import pandas as pd

from rag_core import open_workbench
from rag_core.bench.peers import compare_peers, vector_cache_name, with_ratios
from rag_core.evaluation.runner import machine
from rag_core.evaluation.sampling import DEFAULT_DISTRACTORS, load_eval_set
from rag_core.bench.scale import vectors_from_store
from rag_core.evaluation.vectors import load_cache, save_cache

REPO = Path(__file__).resolve().parents[1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--set", default="scifact", help="evaluation set in RAG_EVAL_DATA")
    parser.add_argument("--sample", type=int, default=0, help="queries (with their judged documents); 0 = all")
    parser.add_argument("--distractors", type=int, default=DEFAULT_DISTRACTORS, help="other documents in a sample")
    parser.add_argument("--runs", type=int, default=1, help="repeat the comparison and report medians")
    parser.add_argument("--seed-from-store", action="store_true", help="reuse the eval:<set> site's vectors")
    parser.add_argument("--output", type=Path, default=None)
    args = parser.parse_args()

    ds = load_eval_set(args.set, args.sample, args.distractors)
    output = args.output or REPO / "eval" / "results" / f"bench_peers_{ds.name}.json"
    with open_workbench() as wb:
        cache = REPO / "eval" / "cache" / vector_cache_name(wb.settings.embedder)
        if args.seed_from_store:
            vectors = load_cache(cache)
            vectors.update(vectors_from_store(wb))
            save_cache(cache, vectors)
            print(f"{len(vectors)} chunk vectors in the cache after reading the store", flush=True)
        tables = []
        for n in range(args.runs):
            load = os.getloadavg()[0]
            table = compare_peers(wb, ds, cache_path=cache)
            table["load_1min"] = load
            tables.append(table)
            print(f"run {n + 1}/{args.runs} done (load average {load:.1f})", flush=True)
    numeric = pd.concat(tables).groupby("system", sort=False).median(numeric_only=True).reset_index()
    table = with_ratios(numeric[["system", "hit@5", "recall@5", "mrr@10", "ndcg@10", "p50 ms", "p95 ms", "ingest s",
                                 "disk MB", "queries", "load_1min"]])
    report = {"set": ds.name, "documents": len(ds.corpus), "queries": len(ds.judged_queries), "runs": args.runs,
              "embedder": wb.embedder_name, "machine": machine(),
              "note": "medians over runs; other jobs shared the machine (load_1min)",
              "systems": table.round(4).to_dict(orient="records"),
              "written": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    with pd.option_context("display.width", 200, "display.max_columns", 30):
        print(table.round(3).to_string(index=False))
    print(f"written: {output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
