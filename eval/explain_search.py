"""Where a search's time goes on a kept bench store: stages from the query log, and EXPLAIN ANALYZE of the
ranking statement.

Each search of the sample runs once through the Workbench, its SQL recorded as it is sent (whatever module
sends it); then the transaction is replayed with the ranking statement (the one that starts with WITH)
under EXPLAIN (ANALYZE, BUFFERS), with the same session settings and parameters. Printed per query: the
statement's planning and execution time, the time of each CTE's own, and the plan nodes that spend the most
time of their own. The query log of the bench store gives each stage's p50/p95 (embed, core ranking,
highlights, suggestions, response) per mode and filter of every search logged there, e.g. by
eval/bench_search.py's run.

    .venv/bin/python eval/explain_search.py --db rag_bench_search_1m_distinct --queries 12
    .venv/bin/python eval/explain_search.py --db NAME --mode hybrid --filter "type filter" --output explain.json
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any, Iterator

import psycopg
from rich.console import Console

from rag_core import load_settings, open_workbench
from rag_core.db.database import with_database
from rag_core.evaluation.metrics import percentile
from rag_core.evaluation.runner import machine
from rag_core.bench.scale import FILTERS, SITE, build_records, timed_search
from rag_core.workbench import resolve_database

console = Console(stderr=True, width=160)


@contextlib.contextmanager
def recorded_statements() -> Iterator[list[tuple[int, Any, Any]]]:
    """Every (connection id, query, params) this thread sends through psycopg while the block runs."""
    calls: list[tuple[int, Any, Any]] = []
    original = psycopg.Connection.execute
    me = threading.get_ident()

    def execute(self: Any, query: Any, params: Any = None, **kw: Any) -> Any:
        if threading.get_ident() == me:
            calls.append((id(self), query, params))
        return original(self, query, params, **kw)

    psycopg.Connection.execute = execute  # type: ignore[method-assign]
    try:
        yield calls
    finally:
        psycopg.Connection.execute = original  # type: ignore[method-assign]


def ranking_transaction(calls: list[tuple[int, Any, Any]]) -> list[tuple[Any, Any]]:
    """The statements of the connection that ran the ranking statement (the longest WITH statement: suggestions
    and highlights send short ones), up to it."""
    ranking = [i for i, (_, q, _) in enumerate(calls) if isinstance(q, str) and q.lstrip().upper().startswith("WITH")]
    if not ranking:
        return []
    last = max(ranking, key=lambda i: len(calls[i][1]))
    return [(q, p) for c, q, p in calls[:last + 1] if c == calls[last][0]]


def explain(url: str, statements: list[tuple[Any, Any]]) -> dict[str, Any]:
    """Replay `statements` in one transaction, the last under EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON)."""
    from pgvector.psycopg import register_vector

    with psycopg.connect(url) as conn:
        register_vector(conn)
        for query, params in statements[:-1]:
            conn.execute(query, params, prepare=False)
        query, params = statements[-1]
        return conn.execute("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + query, params, prepare=False).fetchone()[0][0]


def plan_summary(plan: dict[str, Any], top: int = 6) -> dict[str, Any]:
    """Planning and execution ms, each CTE's own ms (without the CTEs it reads), and the nodes with the most
    time of their own (a CTE Scan's time belongs to its CTE)."""
    ctes: dict[str, float] = {}
    nodes: list[tuple[float, str]] = []

    def total(node: dict[str, Any]) -> float:
        return float(node.get("Actual Total Time", 0.0)) * max(1, int(node.get("Actual Loops", 1)))

    def scans_of_other_ctes(node: dict[str, Any]) -> float:
        """Time of the CTE Scans under a node, not descending into other CTEs' own plans: a scan's time
        includes computing the rows of the CTE it reads, which is that CTE's time, not this one's."""
        out = 0.0
        for child in node.get("Plans", []):
            if child.get("Subplan Name", "").startswith("CTE "):
                continue
            out += total(child) if child["Node Type"] == "CTE Scan" else scans_of_other_ctes(child)
        return out

    def walk(node: dict[str, Any]) -> None:
        children = node.get("Plans", [])
        name = node.get("Subplan Name", "")
        if name.startswith("CTE "):
            ctes[name[4:]] = round(ctes.get(name[4:], 0.0) + total(node) - scans_of_other_ctes(node), 2)
        if node["Node Type"] != "CTE Scan":  # its time is its CTE's, counted there
            # a CTE's own plan hangs under the node that first needs it, but its time is inside the CTE Scan's
            own = total(node) - sum(total(c) for c in children if not c.get("Subplan Name", "").startswith("CTE "))
            label = " ".join(x for x in (node["Node Type"], node.get("Index Name") or node.get("Relation Name") or "",
                                         f"[{name}]" if name else "") if x)
            nodes.append((own, f"{label} rows={node.get('Actual Rows')} loops={node.get('Actual Loops')}"))
        for child in children:
            walk(child)

    walk(plan["Plan"])
    nodes.sort(reverse=True)
    return {"planning_ms": round(plan.get("Planning Time", 0.0), 2), "execution_ms": round(plan["Execution Time"], 2),
            "cte_own_ms": ctes, "top_own_ms": [[round(ms, 2), label] for ms, label in nodes[:top]]}


def stage_breakdown(wb: Any, site: str = SITE) -> dict[str, dict[str, dict[str, float]]]:
    """p50/p95 of each stage per mode and filter, over the successful uncached searches logged for `site`."""
    with wb.db.connection() as conn:
        rows = conn.execute(
            "SELECT mode, params ->> 'source', params -> 'types', params -> 'stages_ms', duration_ms"
            " FROM query_log WHERE site_id = %s AND error_code IS NULL AND params ? 'stages_ms'", (site,)).fetchall()
    groups: dict[str, dict[str, list[float]]] = {}
    for mode, source, types, stages, total in rows:
        label = f"source {source}" if source else f"types {','.join(types)}" if types else "no filter"
        group = groups.setdefault(f"{mode} / {label}", {"total": []})
        group["total"].append(float(total))
        for stage, ms in (stages or {}).items():
            group.setdefault(stage, []).append(float(ms))
    return {key: {stage: {"p50": round(percentile(ms, 50), 1), "p95": round(percentile(ms, 95), 1), "n": len(ms)}
                  for stage, ms in group.items()} for key, group in sorted(groups.items())}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--db", required=True, help="a bench database kept by eval/bench_search.py --keep")
    parser.add_argument("--queries", type=int, default=12, help="queries to explain (spread over the sets)")
    parser.add_argument("--mode", default="hybrid", choices=("hybrid", "semantic", "fulltext"))
    parser.add_argument("--filter", default="no filter", choices=[label for label, _ in FILTERS])
    parser.add_argument("--output", type=Path, help="also write the figures to this JSON file")
    args = parser.parse_args()

    settings = load_settings()
    server_url, _ = resolve_database(settings)
    url = with_database(server_url, args.db)
    _, queries = build_records()
    qs = [q["text"] for q in queries]
    sample = qs[::max(1, len(qs) // args.queries)][:args.queries]
    filters = dict(FILTERS)[args.filter]
    report: dict[str, Any] = {"database": args.db, "mode": args.mode, "filter": args.filter, "machine": machine(),
                              "load_1min_at_start": round(os.getloadavg()[0], 1), "queries": []}
    with open_workbench(settings.model_copy(update={"database_url": url, "search_cache_ttl_sec": 0})) as wb:
        report["stages_from_query_log"] = stage_breakdown(wb)
        timed_search(wb, "warm up", mode=args.mode)
        for q in sample:
            with recorded_statements() as calls:
                ms, error, found = timed_search(wb, q, mode=args.mode, **filters)
            statements = ranking_transaction(calls)
            if error or not statements:
                console.print(f"[yellow]{q[:50]!r}: {error or 'no ranking statement recorded'}[/yellow]")
                continue
            summary = {"query": q[:80], "search_ms": round(ms, 1), "results": found,
                       **plan_summary(explain(url, statements))}
            report["queries"].append(summary)
            console.print(f"{q[:40]!r:44s} search {ms:7.1f} ms  SQL exec {summary['execution_ms']:7.1f} ms"
                          f"  plan {summary['planning_ms']:5.1f} ms  CTEs {summary['cte_own_ms']}")
            for own, label in summary["top_own_ms"][:3]:
                console.print(f"    {own:8.1f} ms own  {label}")
    execs = [s["execution_ms"] for s in report["queries"]]
    if execs:
        report["execution_ms"] = {"p50": round(percentile(execs, 50), 1), "p95": round(percentile(execs, 95), 1)}
    report["load_1min_at_end"] = round(os.getloadavg()[0], 1)
    report["written"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    for key, stages in report["stages_from_query_log"].items():
        console.print(f"{key:28s} " + "  ".join(f"{s} {v['p50']}/{v['p95']}" for s, v in stages.items()))
    if args.output:
        args.output.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    print(json.dumps(report, indent=2, ensure_ascii=False))


if __name__ == "__main__":
    sys.exit(main())
