"""Finished jobs past RAG_JOB_RETENTION_DAYS are deleted by a `rag worker`, with their reports, and so are
uploaded files no job refers to any more; recent jobs and files stay."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

from job_helpers import make_folder, wait_for

from rag_core.jobs import records
from rag_core.jobs.queue import QUEUE


def _job_rows(jwb: Any, job_id: int) -> tuple[int, int]:
    """(procrastinate's rows, our progress rows) of a job."""
    with jwb.db.connection() as conn:
        return conn.execute("SELECT (SELECT count(*) FROM procrastinate_jobs WHERE id = %(id)s),"
                            " (SELECT count(*) FROM jobs WHERE id = %(id)s)", {"id": job_id}).fetchone()


def _files(jwb: Any, batch: str) -> int:
    with jwb.db.connection() as conn:
        return conn.execute("SELECT count(*) FROM job_files WHERE batch = %s", (batch,)).fetchone()[0]


def test_a_worker_deletes_finished_jobs_past_the_retention_and_keeps_recent_ones(jwb, start_worker,
                                                                                  tmp_path: Path) -> None:
    site = f"t-keep-{uuid.uuid4().hex[:6]}"
    old, recent = (jwb.enqueue_ingest([make_folder(tmp_path, 1, tag)], site_id=site) for tag in ("old", "recent"))
    first = start_worker()
    wait_for(lambda: all(jwb.job(j)["status"] == "done" for j in (old, recent)), 120, "both jobs to finish")
    first.terminate()
    first.wait(timeout=30)
    orphan_old, orphan_new, held = (f"t-{uuid.uuid4().hex}" for _ in range(3))
    with jwb.db.connection() as conn:
        # The old job finished 31 days ago (the default retention is 30).
        conn.execute("UPDATE procrastinate_events SET at = at - interval '31 days' WHERE job_id = %s", (old,))
        conn.execute("INSERT INTO job_files (batch, name, data, created_at) VALUES"
                     " (%s, 'gone.txt', 'x', now() - interval '2 hours'), (%s, 'just-saved.txt', 'x', now())",
                     (orphan_old, orphan_new))
    # An upload queued for later (a worker will not take it during the test) whose file is older than the
    # orphan age: its job still holds the file.
    records.save_files(jwb.db, held, [("held.txt", b"the file a queued job holds")])
    held_job = jwb.background.queue.app.configure_task(name="rag.upload", queue=QUEUE, schedule_in={"hours": 1}).defer(
        site_id=site, description="held.txt", args={"batch": held, "site_id": site})
    with jwb.db.connection() as conn:
        conn.execute("UPDATE job_files SET created_at = now() - interval '2 hours' WHERE batch = %s", (held,))
    assert _job_rows(jwb, old) == (1, 1)

    start_worker()  # its first look for stalled jobs also cleans up
    wait_for(lambda: _job_rows(jwb, old) == (0, 0), 60, "the worker to delete the job finished 31 days ago")
    wait_for(lambda: _files(jwb, orphan_old) == 0, 30, "the worker to delete the file no job refers to")
    assert _job_rows(jwb, recent) == (1, 1) and jwb.job(recent)["status"] == "done"
    assert _files(jwb, orphan_new) == 1  # just saved: its job may be about to be queued
    assert _files(jwb, held) == 1  # its queued job still needs it
    jwb.background.queue.cancel(held_job)
