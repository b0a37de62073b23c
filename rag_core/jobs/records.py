"""SQL of our side of a job: what it is about, its progress, its per-file errors and its report.

The queue itself (who runs what, retries, heartbeats) is procrastinate's; a job's status is read
from procrastinate_jobs in the same statement, so the two never disagree.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Sequence

import psycopg
from psycopg.types.json import Jsonb
from typing_extensions import TypedDict

from rag_core.db.database import Database

# procrastinate's job states in the words of the jobs contract.
STATUS = {"todo": "queued", "doing": "running", "succeeded": "done", "failed": "failed",
          "cancelled": "cancelled", "aborted": "cancelled", "aborting": "running"}
# Errors kept per job: a folder of 100,000 broken files must not make one row of megabytes.
MAX_ERRORS = 1000


class JobError(TypedDict):
    """One file, page or step that failed, and why."""

    source: str | None
    reason: str


class JobInfo(TypedDict):
    """A background job as `rag jobs show` and GET /jobs/{id} report it."""

    id: int
    kind: str
    site_id: str | None
    description: str
    status: str  # queued | running | done | failed | cancelled
    cancel_requested: bool
    done: int
    total: int | None
    chunks: int
    current: str | None
    errors: list[JobError]
    result: dict[str, Any] | None
    runs: int
    created_at: datetime
    started_at: datetime | None
    updated_at: datetime
    finished_at: datetime | None


_SELECT = """
SELECT j.id, j.kind, j.site_id, j.description, p.status::text, p.abort_requested, j.done, j.total, j.chunks,
       j.current, j.errors, j.result, j.runs, j.created_at, j.started_at, j.updated_at, j.finished_at
  FROM jobs j JOIN procrastinate_jobs p ON p.id = j.id
"""


def _row(r: Sequence[Any]) -> JobInfo:
    return JobInfo(id=r[0], kind=r[1], site_id=r[2], description=r[3], status=STATUS.get(r[4], r[4]),
                   cancel_requested=bool(r[5]) and r[4] == "doing", done=r[6], total=r[7], chunks=r[8],
                   current=r[9], errors=r[10], result=r[11], runs=r[12], created_at=r[13], started_at=r[14],
                   updated_at=r[15], finished_at=r[16])


def create(db: Database, job_id: int, kind: str, site_id: str | None, description: str) -> None:
    """Record a job procrastinate has just queued (a worker that was quicker created it already)."""
    with db.connection() as conn:
        conn.execute("INSERT INTO jobs (id, kind, site_id, description) VALUES (%s, %s, %s, %s)"
                     " ON CONFLICT (id) DO NOTHING", (job_id, kind, site_id, description))


def start(db: Database, job_id: int, kind: str, site_id: str | None, description: str) -> None:
    """A run begins: count it, clear the progress of a run that died (its stored documents stay and are skipped)."""
    with db.connection() as conn:
        conn.execute(
            "INSERT INTO jobs (id, kind, site_id, description, runs, started_at) VALUES (%s, %s, %s, %s, 1, now())"
            " ON CONFLICT (id) DO UPDATE SET runs = jobs.runs + 1, started_at = now(), updated_at = now(),"
            " done = 0, chunks = 0, current = NULL, errors = '[]'::jsonb, finished_at = NULL",
            (job_id, kind, site_id, description))


def progress(db: Database, job_id: int, done: int, total: int | None, chunks: int, current: str | None) -> None:
    """Store how far a running job is (many times a second at most; see the writer in queue.py)."""
    with db.connection() as conn:
        conn.execute("SET LOCAL synchronous_commit = off")  # progress lost in a crash is redone anyway
        conn.execute("UPDATE jobs SET done = %s, total = %s, chunks = %s, current = %s, updated_at = now()"
                     " WHERE id = %s", (done, total, chunks, (current or "")[:500] or None, job_id))


def finish(db: Database, job_id: int, result: dict[str, Any] | None, errors: list[JobError]) -> None:
    """Store a run's report and its errors (the status is procrastinate's)."""
    with db.connection() as conn:
        conn.execute("UPDATE jobs SET result = %s, errors = %s, finished_at = now(), updated_at = now(),"
                     " current = NULL WHERE id = %s",
                     (Jsonb(result) if result is not None else None, Jsonb(list(errors)[:MAX_ERRORS]), job_id))


def get(db: Database, job_id: int) -> JobInfo | None:
    with db.connection() as conn:
        row = conn.execute(_SELECT + " WHERE j.id = %s", (job_id,)).fetchone()
    return _row(row) if row else None


def recent(db: Database, site_ids: Sequence[str] | None, limit: int) -> list[JobInfo]:
    """The newest jobs first: running and queued ones before finished ones; of some sites, or all."""
    with db.connection() as conn:
        rows = conn.execute(
            _SELECT + " WHERE (%(sites)s::text[] IS NULL OR j.site_id = ANY(%(sites)s))"
            " ORDER BY (p.status IN ('todo', 'doing')) DESC, j.id DESC LIMIT %(limit)s",
            {"sites": list(site_ids) if site_ids is not None else None, "limit": limit}).fetchall()
    return [_row(r) for r in rows]


_WORKERS = ("SELECT (SELECT count(*) FROM procrastinate_workers WHERE last_heartbeat > now() - make_interval(secs => %s)),"
            " (SELECT count(*) FROM procrastinate_jobs WHERE status = 'todo')")


def queued_with_lock(db: Database, lock: str | None) -> int | None:
    """The id of the job waiting in the queue under procrastinate's queueing `lock`, if one does."""
    with db.connection() as conn:
        row = conn.execute("SELECT id FROM procrastinate_jobs WHERE queueing_lock = %s AND status = 'todo'",
                           (lock,)).fetchone()
    return int(row[0]) if row else None


def worker_state(conn: psycopg.Connection, within_sec: float) -> tuple[int, int]:
    """(workers whose heartbeat is fresh, jobs waiting) on a connection of the caller's."""
    live, waiting = conn.execute(_WORKERS, (within_sec,)).fetchone()
    return live, waiting


def live_workers(db: Database, within_sec: float) -> int:
    """Workers whose heartbeat is fresh: any of them will take a queued job."""
    with db.connection() as conn:
        return worker_state(conn, within_sec)[0]


# ----- uploaded files, kept until their job stored them -----
def save_files(db: Database, batch: str, files: Sequence[tuple[str, bytes]]) -> None:
    with db.connection() as conn:
        with conn.cursor() as cur:
            cur.executemany("INSERT INTO job_files (batch, name, data) VALUES (%s, %s, %s)",
                            [(batch, name, data) for name, data in files])


def file_names(db: Database, batch: str) -> list[tuple[int, str]]:
    with db.connection() as conn:
        return [(r[0], r[1]) for r in conn.execute(
            "SELECT id, name FROM job_files WHERE batch = %s ORDER BY id", (batch,)).fetchall()]


def file_data(db: Database, file_id: int) -> bytes:
    with db.connection() as conn:
        row = conn.execute("SELECT data FROM job_files WHERE id = %s", (file_id,)).fetchone()
    return bytes(row[0]) if row else b""


def drop_files(db: Database, batch: str) -> None:
    with db.connection() as conn:
        conn.execute("DELETE FROM job_files WHERE batch = %s", (batch,))
