"""The query log: every search (hits, cache hits and failures), written in the background, and the
metrics read from it (after a flush, so a reader sees its own process's searches at once)."""

from __future__ import annotations

import atexit
import datetime as dt
import json
import logging
import queue
import threading
import weakref
from typing import Any

import orjson

from rag_core.db.database import Database
from rag_core.db.replicas import ReadRouter
from rag_core.search.responses import LatencyHistogram, LoggedSearch, SearchMetrics
from rag_core.search.validation import MODES
from rag_core.security.ids import every_site_sql

log = logging.getLogger(__name__)


# The mode a search rejected for its mode is counted under: one bucket, not one per string a caller sent.
INVALID_MODE = "invalid"


def logged_mode(mode: Any) -> str:
    """The mode a search is logged under: one of MODES, or INVALID_MODE for anything else."""
    name = mode.strip().lower() if isinstance(mode, str) else ""
    return name if name in MODES else INVALID_MODE


# Rows waiting for the writer at most; a search that finds the queue full waits for room (the
# database is then slower than the searches, and dropping rows would falsify the analytics).
MAX_PENDING = 10_000
# Rows per transaction at most: what gathered within LINGER_SEC, or while the last batch was written.
MAX_BATCH = 500
_INSERT = ("INSERT INTO query_log (created_at, query, mode, params, result_count, duration_ms, site_id, user_id,"
           " error_code) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)")
# How long the writer waits for more rows after the first one: one transaction per 0.1 s at most,
# instead of one per search, and analytics lag by no more than that.
LINGER_SEC = 0.1
_STOP, _FLUSH = object(), object()


class QueryLogWriter:
    """Writes query_log rows from a background thread, in batches, off the search's critical path.

    A search puts its row on a bounded queue and returns. The thread INSERTs what gathers within
    LINGER_SEC in one transaction with synchronous_commit off, so no search waits for a WAL flush
    (eval/bench_service.py) and a busy service commits ten times a second, not
    once per search. `flush()` waits until every row submitted so far is committed (a row the
    database refused counts as done: it is reported, never retried); `close()` flushes and stops
    the thread, and runs when the Database closes (a clean shutdown of the app, `rag serve` on
    SIGTERM, the CLI) and at interpreter exit.
    What a crash may lose: the rows still queued in a killed process, and, when PostgreSQL itself
    crashes, the commits of its last ~0.6 s (3 x wal_writer_delay). The log is analytics; the
    answer never depends on it.
    """

    def __init__(self, db: Database) -> None:
        self.db = db
        self._queue: queue.Queue = queue.Queue(maxsize=MAX_PENDING)
        self._cond = threading.Condition()
        self._submitted = 0
        self._written = 0
        self._thread: threading.Thread | None = None
        self._closed = False
        self._hurry = threading.Event()  # a flush or close cuts the linger short

    def submit(self, row: tuple) -> None:
        """Queue one row (created_at first, in _INSERT's column order)."""
        if self._closed:
            self._write([row])  # after close (a late search at shutdown): write it in place
            return
        with self._cond:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="rag-query-log", daemon=True)
                self._thread.start()
                _LIVE.add(self)
            self._submitted += 1
        self._queue.put(row)

    def flush(self, timeout: float = 30.0) -> bool:
        """Wait until every row submitted so far is written (or given up); False on timeout."""
        with self._cond:
            target = self._submitted
            if self._written >= target:
                return True
        self._queue.put(_FLUSH)  # the writer stops lingering and writes what it has now
        self._hurry.set()
        with self._cond:
            return self._cond.wait_for(lambda: self._written >= target, timeout=timeout)

    def close(self, timeout: float = 30.0) -> None:
        """Write what is queued and stop the thread; later rows are written synchronously."""
        with self._cond:
            if self._closed:
                return
            self._closed = True
            thread = self._thread
        if thread is not None:
            self._queue.put(_STOP)
            self._hurry.set()
            thread.join(timeout)
            if thread.is_alive():
                log.warning("The query log writer did not finish within %.0f s; %d rows may be lost.",
                            timeout, self._submitted - self._written)
        _LIVE.discard(self)

    def _run(self) -> None:
        stop = False
        while not stop:
            batch = [self._queue.get()]
            if batch[0] is not _STOP and batch[0] is not _FLUSH:
                # Rows gather for LINGER_SEC while this thread sleeps: waking it for every row (a get with a
                # timeout per row) cost a thread switch and a GIL hand-off per search, 18% of the service's
                # Python time under 100 clients.
                self._hurry.wait(LINGER_SEC)
            self._hurry.clear()
            while len(batch) < MAX_BATCH:  # whatever is waiting now goes in the same transaction
                try:
                    batch.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            stop = any(r is _STOP for r in batch)
            rows = [r for r in batch if r is not _STOP and r is not _FLUSH]
            self._write(rows)
            with self._cond:
                self._written += len(rows)
                self._cond.notify_all()

    def _write(self, rows: list[tuple]) -> None:
        if not rows:
            return
        try:
            with self.db.connection() as conn, conn.pipeline():
                conn.execute("SET LOCAL synchronous_commit = off")
                with conn.cursor() as cur:
                    cur.executemany(_INSERT, rows)
        except Exception as exc:  # the database may be the reason the searches failed
            log.warning("Could not write %d query log rows: %s", len(rows), getattr(exc, "message", exc))


# Writers with a running thread, closed (flushed) at interpreter exit.
_LIVE: "weakref.WeakSet[QueryLogWriter]" = weakref.WeakSet()
_WRITERS: "weakref.WeakKeyDictionary[Database, QueryLogWriter]" = weakref.WeakKeyDictionary()
_WRITERS_LOCK = threading.Lock()


@atexit.register
def _close_all() -> None:
    for writer in list(_LIVE):
        writer.close(timeout=10.0)


def query_log_writer(db: Database) -> QueryLogWriter:
    """The one writer of a Database (shared by every engine on it), closed before its pool."""
    with _WRITERS_LOCK:
        writer = _WRITERS.get(db)
        if writer is None:
            writer = _WRITERS[db] = QueryLogWriter(db)
            db.on_close(writer.close)
        return writer


def flush_query_log(db: Database, timeout: float = 30.0) -> bool:
    """Wait until the searches logged so far in this process are in query_log (readers call it first)."""
    with _WRITERS_LOCK:
        writer = _WRITERS.get(db)
    return writer.flush(timeout) if writer is not None else True


def log_search(db: Database, *, query: str, mode: str, params: dict[str, Any], result_count: int,
               duration_ms: float, site_id: str | None, user_id: str | None,
               error_code: str | None = None) -> dt.datetime:
    """Queue one query_log row for the background writer; logging never fails or slows the search.

    Returns the row's created_at."""
    when = dt.datetime.now(dt.timezone.utc)
    try:
        row = (when, str(query).replace("\x00", " ")[:2000], str(mode)[:40],
               _json(params), int(result_count), float(duration_ms), site_id, user_id, error_code)
    except Exception as exc:  # an odd value must not fail the search either
        log.warning("Could not log a search: %s", exc)
        return when
    query_log_writer(db).submit(row)
    return when


def _json(params: dict[str, Any]) -> str:
    """params as JSON text: orjson (a tenth of json's CPU on the search path), json for what orjson refuses
    (an integer past 64 bits, a key that is not a string)."""
    try:
        return orjson.dumps(params, default=str).decode()
    except TypeError:
        return json.dumps(params, default=str)


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


def _scope(reads: ReadRouter, site_id: str | None, since: Any) -> tuple[str, dt.datetime | None]:
    """The WHERE clause (params: site, since) for one site or every site but the evaluation sites
    ('eval:*') and the sample, from `since` on; the background writer is flushed to the primary first, and the
    read waits for a replica that has the rows, so they are all there."""
    start = _since(since)
    flush_query_log(reads.primary)
    reads.note_write()
    where = ("site_id = %(site)s" if site_id is not None
             else f"(site_id IS NULL OR {every_site_sql('site_id')})")
    if start is not None:
        where += " AND created_at >= %(since)s"
    return where, start


def search_metrics(db: ReadRouter, site_id: str | None = None, since: Any = None, top: int = 10) -> SearchMetrics:
    """Counts, latency, popular and zero-result queries and a per-day series for one site or all.

    With site_id None every site counts except the evaluation sites ('eval:*') and the sample ('sample').
    """
    where, start = _scope(db, site_id, since)
    args = {"site": site_id, "since": start, "top": top}
    # A search a surface marked as not typed (a page, filter or chart click) is no new query; a search left
    # empty by a date filter says nothing about the words, so it is no zero-result query either.
    typed = "coalesce((params ->> 'typed')::boolean, true)"
    zero = ("error_code IS NULL AND result_count = 0 AND params ->> 'date_from' IS NULL "
            "AND params ->> 'date_to' IS NULL")
    with db.connection() as conn:
        # Every figure, the latency histogram included, from one snapshot of the log: the background writer
        # adds rows meanwhile, and totals computed a moment apart disagreed with the charts beside them.
        conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        total, errors, zeros, hits, avg_ms, p50, p95, typed_total = conn.execute(
            f"""SELECT count(*), count(*) FILTER (WHERE error_code IS NOT NULL),
                       count(*) FILTER (WHERE {zero} AND {typed}),
                       count(*) FILTER (WHERE params ->> 'cache' = 'hit'),
                       avg(duration_ms) FILTER (WHERE error_code IS NULL),
                       percentile_cont(0.5) WITHIN GROUP (ORDER BY duration_ms) FILTER (WHERE error_code IS NULL),
                       percentile_cont(0.95) WITHIN GROUP (ORDER BY duration_ms) FILTER (WHERE error_code IS NULL),
                       count(*) FILTER (WHERE {typed})
                FROM query_log WHERE {where}""", args).fetchone()
        popular = conn.execute(
            f"""SELECT min(query), count(*), max(created_at) FROM query_log WHERE {where} AND error_code IS NULL
                AND {typed} GROUP BY lower(query) ORDER BY 2 DESC, 3 DESC LIMIT %(top)s""", args).fetchall()
        zero_rows = conn.execute(
            f"""SELECT min(query), count(*), max(created_at) FROM query_log
                WHERE {where} AND {zero} AND {typed}
                GROUP BY lower(query) ORDER BY 2 DESC, 3 DESC LIMIT %(top)s""", args).fetchall()
        by_mode = dict(conn.execute(
            f"SELECT CASE WHEN mode = ANY(%(modes)s) THEN mode ELSE %(invalid)s END, count(*) FROM query_log"
            f" WHERE {where} GROUP BY 1 ORDER BY 2 DESC", {**args, "modes": list(MODES), "invalid": INVALID_MODE}
        ).fetchall())
        by_code = dict(conn.execute(
            f"SELECT error_code, count(*) FROM query_log WHERE {where} AND error_code IS NOT NULL GROUP BY 1 ORDER BY 2 DESC",
            args).fetchall())
        stages = dict(conn.execute(
            f"""SELECT s.key, percentile_cont(0.5) WITHIN GROUP (ORDER BY s.value::float8)
                FROM query_log CROSS JOIN LATERAL jsonb_each_text(params -> 'stages_ms') AS s
                WHERE {where} AND error_code IS NULL GROUP BY 1""", args).fetchall())
        daily = conn.execute(
            f"""SELECT (created_at AT TIME ZONE 'UTC')::date AS day, count(*),
                       count(*) FILTER (WHERE error_code IS NOT NULL),
                       count(*) FILTER (WHERE {zero} AND {typed}),
                       avg(duration_ms) FILTER (WHERE error_code IS NULL),
                       count(*) FILTER (WHERE {typed})
                FROM query_log WHERE {where} GROUP BY 1 ORDER BY 1""", args).fetchall()
        latency = _latency_histogram(conn, where, {**args, "edges": [float(e) for e in LATENCY_EDGES_MS]},
                                     LATENCY_EDGES_MS)

    def ms(value: Any) -> float | None:
        return round(float(value), 1) if value is not None else None

    return {
        "site_id": site_id, "since": start.isoformat() if start else None,
        "searches": total, "typed_searches": typed_total, "errors": errors, "zero_results": zeros,
        "cache_hits": hits,
        "avg_ms": ms(avg_ms), "p50_ms": ms(p50), "p95_ms": ms(p95),
        "by_mode": by_mode, "errors_by_code": by_code,
        # Median milliseconds of each stage of the searches that ran (cache hits have none).
        "stage_p50_ms": {k: round(float(v), 2) for k, v in sorted(stages.items())},
        "popular_queries": [{"query": q, "count": n, "last_at": last.isoformat()} for q, n, last in popular],
        "zero_result_queries": [{"query": q, "count": n, "last_at": last.isoformat()} for q, n, last in zero_rows],
        "daily": [{"day": d.isoformat(), "searches": n, "typed_searches": t, "errors": e, "zero_results": z,
                   "avg_ms": ms(a)} for d, n, e, z, a, t in daily],
        "latency": latency,
    }


# Latency buckets of the analytics histogram, in ms; the last bucket is open-ended.
LATENCY_EDGES_MS = (10, 25, 50, 100, 250, 500, 1000, 2000, 5000)


def latency_histogram(db: ReadRouter, site_id: str | None = None, since: Any = None,
                      edges_ms: tuple[float, ...] = LATENCY_EDGES_MS) -> LatencyHistogram:
    """Successful searches counted per latency bucket (aggregated in SQL), with p50 and p95."""
    where, start = _scope(db, site_id, since)
    args = {"site": site_id, "since": start, "edges": [float(e) for e in edges_ms]}
    with db.connection() as conn:
        return _latency_histogram(conn, where, args, edges_ms)


def _latency_histogram(conn: Any, where: str, args: dict[str, Any], edges_ms: tuple[float, ...]) -> LatencyHistogram:
    """The histogram of the successful searches under `where` (params: site, since, edges), on `conn`."""
    where += " AND error_code IS NULL"
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


def recent_searches(db: ReadRouter, site_id: str | None = None, since: Any = None, limit: int = 1000) -> list[LoggedSearch]:
    """The latest query_log rows, newest first, as plain dicts (the notebook's query-log frame)."""
    where, start = _scope(db, site_id, since)
    with db.connection() as conn:
        rows = conn.execute(
            f"""SELECT created_at, query, mode, result_count, duration_ms, error_code, params ->> 'cache',
                       site_id, user_id
                FROM query_log WHERE {where} ORDER BY created_at DESC, id DESC LIMIT %(limit)s""",
            {"site": site_id, "since": start, "limit": limit}).fetchall()
    return [{"created_at": at, "query": q, "mode": mode, "results": n, "ms": round(float(ms), 1),
             "error_code": code, "cache": cache or "off", "site_id": site, "user_id": user}
            for at, q, mode, n, ms, code, cache, site, user in rows]
