"""Read-replica benchmark: search p50/p95 through a streaming replica against the primary alone, and how
long the first search takes after the replica dies (it falls back to the primary).

It starts its own primary and a `pg_basebackup -R` hot standby of it from the embedded package's binaries
on 127.0.0.1 (the helpers the tests use, tests/pg_servers.py), ingests `--docs` documents of a BEIR set
(scifact by default, from RAG_EVAL_DATA) through the Workbench, and then, with the search cache off and
every query's vector embedded once beforehand (so the figures are the service and the database):

- `--rounds` passes over `--queries` queries, alternating a Workbench that reads on the primary and one
  whose reads go to the replica (pg_stat_statements confirms where they ran);
- `--trials` times of: the replica stopped with a fast shutdown, the first search timed (and the next
  four), the replica started again and the time from its start until reads go to it again.

Figures are printed and written to eval/results/bench_replicas.json with the machine's load; nothing
asserts a time. Both servers are stopped by pid at the end.

    RAG_EVAL_DATA=/path/to/eval-data .venv/bin/python eval/bench_replicas.py --docs 1500
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))  # the server helpers the replica tests use

from pg_servers import primary_and_replica, statements_on, wait_until  # noqa: E402
from rag_core import load_settings, open_workbench  # noqa: E402
from rag_core.evaluation.datasets import eval_set_dir, load_beir  # noqa: E402
from rag_core.evaluation.runner import machine  # noqa: E402
from rag_core.search.retrieval import embed_query  # noqa: E402

SITE = "bench-replicas"


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def timed_search(wb, query: str) -> float:
    started = time.perf_counter()
    wb.search(query, site_id=SITE, limit=10)
    return (time.perf_counter() - started) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--set", default="scifact")
    parser.add_argument("--docs", type=int, default=1500)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--out", default=str(REPO / "eval" / "results" / "bench_replicas.json"))
    args = parser.parse_args()

    dataset = load_beir(eval_set_dir(args.set), max_docs=args.docs)
    queries = list(dataset.queries.values())[: args.queries]
    results: dict = {"machine": machine(), "load_1min_at_start": round(os.getloadavg()[0], 2), "set": args.set,
                     "docs": len(dataset.corpus), "queries": len(queries), "rounds": args.rounds}
    with primary_and_replica("rag-bench-replicas-") as (primary, replica):
        base = load_settings(database_url=primary.url("rag"), data_dir=primary.pgdata.parent / "data",
                             search_cache_ttl_sec=0)
        routed = base.model_copy(update={"database_read_url": [replica.url("rag")]})

        with open_workbench(base) as on_primary:
            started = time.perf_counter()
            report = on_primary.ingest_texts([{"source": dataset.source_of(d["_id"]), "title": d["title"],
                                               "text": d["text"]} for d in dataset.corpus], site_id=SITE)
            results["chunks"] = report.chunks
            results["ingest_s"] = round(time.perf_counter() - started, 1)
            print(f"ingested {len(dataset.corpus)} documents, {report.chunks} chunks in {results['ingest_s']} s")
            for query in queries:  # every vector once: the timed searches measure the service and the database
                embed_query(on_primary.embedder, query)
            with open_workbench(routed, embedder=on_primary.embedder) as on_replica:
                wait_until(lambda: on_replica.read_replicas()[0]["state"] == "ok", timeout=60)
                for wb in (on_primary, on_replica):  # warm both servers' caches and both pools
                    for query in queries[:20]:
                        wb.search(query, site_id=SITE, limit=10)
                times: dict[str, list[float]] = {"primary": [], "replica": []}
                reads_before = statements_on(replica, "chunks")
                for _ in range(args.rounds):
                    for query in queries:
                        times["primary"].append(timed_search(on_primary, query))
                        times["replica"].append(timed_search(on_replica, query))
                replica_reads = statements_on(replica, "chunks") - reads_before
                for name, values in times.items():
                    results[f"search_{name}"] = {"p50_ms": round(statistics.median(values), 2),
                                                 "p95_ms": round(percentile(values, 0.95), 2), "searches": len(values)}
                    print(f"search reading on the {name:8s} p50 {results[f'search_{name}']['p50_ms']:6.2f} ms"
                          f"  p95 {results[f'search_{name}']['p95_ms']:6.2f} ms  ({len(values)} searches)")
                results["replica_statements_on_chunks"] = replica_reads
                print(f"statements on chunks the replica ran meanwhile: {replica_reads}")

                fallback: list[dict] = []
                for trial in range(args.trials):
                    timed_search(on_replica, queries[trial])  # the replica's pool holds idle connections
                    replica.stop()
                    stopped = time.perf_counter()
                    first = timed_search(on_replica, queries[trial + 1])
                    following = [timed_search(on_replica, q) for q in queries[trial + 2: trial + 6]]
                    replica.start()
                    restarted = time.perf_counter()
                    wait_until(lambda: on_replica.read_replicas()[0]["state"] == "ok", timeout=60, every=0.01)
                    back = time.perf_counter() - restarted
                    fallback.append({"first_search_ms": round(first, 2),
                                     "next_searches_median_ms": round(statistics.median(following), 2),
                                     "serving_again_after_up_s": round(back, 2)})
                    print(f"trial {trial + 1}: first search after the replica stopped {first:.1f} ms, next ones "
                          f"{statistics.median(following):.1f} ms; replica serving again {back:.2f} s after it was up")
                results["fallback_trials"] = fallback
                results["fallback_first_search_median_ms"] = round(
                    statistics.median(t["first_search_ms"] for t in fallback), 2)
        results["load_avg_at_end"] = [round(x, 2) for x in os.getloadavg()]
        results["cpus"] = os.cpu_count()
        results["check_every_sec"] = routed.replica_check_sec
        results["embedder"] = on_primary.embedder_name
    results["written"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    Path(args.out).write_text(json.dumps(results, indent=2) + "\n")
    print(f"load average {results['load_avg_at_end']}; written to {args.out}")


if __name__ == "__main__":
    main()
