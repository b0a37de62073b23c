"""The query log: every search (hits, cache hits and failures) and the metrics read from it."""

from __future__ import annotations

import datetime as dt
import json
import logging
from typing import Any

from rag_core.db.database import Database

log = logging.getLogger(__name__)


def log_search(db: Database, *, query: str, mode: str, params: dict[str, Any], result_count: int,
               duration_ms: float, site_id: str | None, user_id: str | None, error_code: str | None = None) -> None:
    """Write one query_log row; a failure to log never fails the search (it is only reported)."""
    try:
        with db.connection() as conn:
            conn.execute(
                "INSERT INTO query_log (query, mode, params, result_count, duration_ms, site_id, user_id, error_code)"
                " VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
                (str(query).replace("\x00", " ")[:2000], str(mode)[:40], json.dumps(params, default=str),
                 int(result_count), float(duration_ms), site_id, user_id, error_code),
            )
    except Exception as exc:  # the database may be the reason the search failed
        log.warning("Could not write the query log: %s", getattr(exc, "message", exc))


def _since(value: Any) -> dt.datetime | None:
    if value is None:
        return None
    if isinstance(value, dt.timedelta):
        return dt.datetime.now(dt.timezone.utc) - value
    if isinstance(value, dt.datetime):
        return value if value.tzinfo else value.replace(tzinfo=dt.timezone.utc)
    if isinstance(value, dt.date):
        return dt.datetime.combine(value, dt.time(), tzinfo=dt.timezone.utc)
    if isinstance(value, str):
        return _since(dt.datetime.fromisoformat(value.strip()))
    raise TypeError(f"since must be a datetime, date, timedelta or ISO string; got {value!r}")


def search_metrics(db: Database, site_id: str | None = None, since: Any = None, top: int = 10) -> dict[str, Any]:
    """Counts, latency, popular and zero-result queries and a per-day series for one site or all.

    With site_id None every site counts except the evaluation sites ('eval:*').
    """
    start = _since(since)
    where = ("site_id = %(site)s" if site_id is not None
             else "(site_id IS NULL OR site_id NOT LIKE 'eval:%%')")
    if start is not None:
        where += " AND created_at >= %(since)s"
    args = {"site": site_id, "since": start, "top": top}
    with db.connection() as conn:
        total, errors, zero, hits, avg_ms, p50, p95 = conn.execute(
            f"""SELECT count(*), count(*) FILTER (WHERE error_code IS NOT NULL),
                       count(*) FILTER (WHERE error_code IS NULL AND result_count = 0),
                       count(*) FILTER (WHERE params ->> 'cache' = 'hit'),
                       avg(duration_ms) FILTER (WHERE error_code IS NULL),
                       percentile_cont(0.5) WITHIN GROUP (ORDER BY duration_ms) FILTER (WHERE error_code IS NULL),
                       percentile_cont(0.95) WITHIN GROUP (ORDER BY duration_ms) FILTER (WHERE error_code IS NULL)
                FROM query_log WHERE {where}""", args).fetchone()
        popular = conn.execute(
            f"""SELECT min(query), count(*), max(created_at) FROM query_log WHERE {where} AND error_code IS NULL
                GROUP BY lower(query) ORDER BY 2 DESC, 3 DESC LIMIT %(top)s""", args).fetchall()
        zero_rows = conn.execute(
            f"""SELECT min(query), count(*), max(created_at) FROM query_log
                WHERE {where} AND error_code IS NULL AND result_count = 0
                GROUP BY lower(query) ORDER BY 2 DESC, 3 DESC LIMIT %(top)s""", args).fetchall()
        by_mode = dict(conn.execute(f"SELECT mode, count(*) FROM query_log WHERE {where} GROUP BY 1 ORDER BY 2 DESC",
                                    args).fetchall())
        by_code = dict(conn.execute(
            f"SELECT error_code, count(*) FROM query_log WHERE {where} AND error_code IS NOT NULL GROUP BY 1 ORDER BY 2 DESC",
            args).fetchall())
        daily = conn.execute(
            f"""SELECT (created_at AT TIME ZONE 'UTC')::date AS day, count(*),
                       count(*) FILTER (WHERE error_code IS NOT NULL),
                       count(*) FILTER (WHERE error_code IS NULL AND result_count = 0),
                       avg(duration_ms) FILTER (WHERE error_code IS NULL)
                FROM query_log WHERE {where} GROUP BY 1 ORDER BY 1""", args).fetchall()

    def ms(value: Any) -> float | None:
        return round(float(value), 1) if value is not None else None

    return {
        "site_id": site_id, "since": start.isoformat() if start else None,
        "searches": total, "errors": errors, "zero_results": zero, "cache_hits": hits,
        "avg_ms": ms(avg_ms), "p50_ms": ms(p50), "p95_ms": ms(p95),
        "by_mode": by_mode, "errors_by_code": by_code,
        "popular_queries": [{"query": q, "count": n, "last_at": last.isoformat()} for q, n, last in popular],
        "zero_result_queries": [{"query": q, "count": n, "last_at": last.isoformat()} for q, n, last in zero_rows],
        "daily": [{"day": d.isoformat(), "searches": n, "errors": e, "zero_results": z, "avg_ms": ms(a)}
                  for d, n, e, z, a in daily],
    }


# Latency buckets of the analytics histogram, in ms; the last bucket is open-ended.
LATENCY_EDGES_MS = (10, 25, 50, 100, 250, 500, 1000, 2000, 5000)


def latency_histogram(db: Database, site_id: str | None = None, since: Any = None,
                      edges_ms: tuple[float, ...] = LATENCY_EDGES_MS) -> dict[str, Any]:
    """Successful searches counted per latency bucket (aggregated in SQL), with p50 and p95."""
    start = _since(since)
    where = ("site_id = %(site)s" if site_id is not None
             else "(site_id IS NULL OR site_id NOT LIKE 'eval:%%')")
    where += " AND error_code IS NULL"
    if start is not None:
        where += " AND created_at >= %(since)s"
    args = {"site": site_id, "since": start, "edges": [float(e) for e in edges_ms]}
    with db.connection() as conn:
        counts = dict(conn.execute(
            f"SELECT width_bucket(duration_ms, %(edges)s::float8[]), count(*) FROM query_log WHERE {where} GROUP BY 1",
            args).fetchall())
        total, p50, p95 = conn.execute(
            f"""SELECT count(*), percentile_cont(0.5) WITHIN GROUP (ORDER BY duration_ms),
                       percentile_cont(0.95) WITHIN GROUP (ORDER BY duration_ms)
                FROM query_log WHERE {where}""", args).fetchone()
    bounds = [0.0, *[float(e) for e in edges_ms], None]
    buckets = []
    for i in range(len(bounds) - 1):
        lo, hi = bounds[i], bounds[i + 1]
        label = f"{lo:g}-{hi:g} ms" if hi is not None else f">= {lo:g} ms"
        buckets.append({"label": label, "from_ms": lo, "to_ms": hi, "searches": int(counts.get(i, 0))})
    return {"searches": int(total), "p50_ms": round(float(p50), 1) if p50 is not None else None,
            "p95_ms": round(float(p95), 1) if p95 is not None else None, "buckets": buckets}
