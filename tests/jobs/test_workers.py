"""`rag worker` processes: a worker killed mid-job, two workers on one queue, progress read while a job runs."""

from __future__ import annotations

import signal
import uuid
from pathlib import Path
from typing import Any

from job_helpers import make_folder, wait_for

# More single-chunk files than one embedding batch holds (256 chunks), so a run stores some and is killed
# before it stores the rest.
KILLED_JOB_FILES = 600


def stored(jwb: Any, site: str) -> dict[str, tuple[int, int]]:
    """source -> (documents with that source, chunks of them) in the site."""
    with jwb.db.connection() as conn:
        rows = conn.execute(
            "SELECT d.source, count(DISTINCT d.id), count(c.id) FILTER (WHERE c.chunk_index IS NOT NULL),"
            " max(d.chunk_count) FROM documents d LEFT JOIN chunks c ON c.document_id = d.id"
            " WHERE d.site_id = %s GROUP BY d.source", (site,)).fetchall()
    for source, _docs, chunks, declared in rows:
        assert chunks == declared, f"{source}: {chunks} chunks stored, {declared} declared: a half-written document"
    return {r[0]: (r[1], r[2]) for r in rows}


def started_events(jwb: Any, job_id: int) -> int:
    with jwb.db.connection() as conn:
        return conn.execute("SELECT count(*) FROM procrastinate_events WHERE job_id = %s AND type = 'started'",
                            (job_id,)).fetchone()[0]


def test_killed_worker_job_is_finished_by_another_with_every_document_once(jwb, start_worker, tmp_path: Path) -> None:
    site = f"t-kill-{uuid.uuid4().hex[:6]}"
    folder = make_folder(tmp_path, KILLED_JOB_FILES, "kill")
    job_id = jwb.enqueue_ingest([folder], site_id=site)
    assert jwb.job(job_id)["status"] == "queued"

    first = start_worker()
    # The job's progress, read from the database while the worker runs it: part of the files stored.
    running = wait_for(lambda: (j := jwb.job(job_id))["status"] == "running" and 0 < j["done"] < j["total"] and j,
                       180, "the first worker to store part of the folder")
    assert running["total"] == KILLED_JOB_FILES and running["chunks"] > 0 and running["started_at"] is not None
    first.send_signal(signal.SIGKILL)
    first.wait(timeout=10)
    partly = stored(jwb, site)
    assert 0 < len(partly) < KILLED_JOB_FILES
    assert jwb.job(job_id)["status"] == "running"  # procrastinate still thinks the dead worker has it

    second = start_worker()
    done = wait_for(lambda: (j := jwb.job(job_id))["status"] in ("done", "failed") and j, 240,
                    "the second worker to finish the job")
    assert done["status"] == "done", done["errors"]
    assert done["runs"] == 2 and done["done"] == done["total"] == KILLED_JOB_FILES and done["errors"] == []
    # What the killed run had stored was skipped as unchanged, not embedded and written again.
    assert done["result"]["unchanged"] >= len(partly)
    assert done["result"]["indexed"] + done["result"]["unchanged"] == KILLED_JOB_FILES
    final = stored(jwb, site)
    assert len(final) == KILLED_JOB_FILES
    assert all(docs == 1 and chunks >= 1 for docs, chunks in final.values())
    assert second.poll() is None  # the second worker lives on, waiting for the next job


def test_two_workers_racing_for_one_queue_run_each_job_once(jwb, start_worker, tmp_path: Path) -> None:
    site = f"t-race-{uuid.uuid4().hex[:6]}"
    jobs = [jwb.enqueue_ingest([make_folder(tmp_path, 3, f"race{n}")], site_id=site) for n in range(6)]
    workers = [start_worker(), start_worker("--concurrency", "2")]
    finished = wait_for(lambda: all(jwb.job(j)["status"] in ("done", "failed") for j in jobs) and
                        [jwb.job(j) for j in jobs], 240, "both workers to empty the queue")
    assert [j["status"] for j in finished] == ["done"] * 6
    assert all(j["runs"] == 1 for j in finished)
    assert all(started_events(jwb, j) == 1 for j in jobs)
    assert all(docs == 1 for docs, _ in stored(jwb, site).values()) and len(stored(jwb, site)) == 18
    assert all(w.poll() is None for w in workers)


def test_failed_files_are_reported_per_file(jwb, start_worker, tmp_path: Path) -> None:
    site = f"t-fail-{uuid.uuid4().hex[:6]}"
    folder = make_folder(tmp_path, 2, "mixed")
    (folder / "empty.md").write_text("   \n", encoding="utf-8")
    (folder / "broken.pdf").write_bytes(b"%PDF-1.4 this is not a pdf")
    job_id = jwb.enqueue_ingest([folder], site_id=site)
    start_worker()
    done = wait_for(lambda: (j := jwb.job(job_id))["status"] in ("done", "failed") and j, 120, "the job to end")
    assert done["status"] == "done"
    reasons = {Path(e["source"]).name: e["reason"] for e in done["errors"]}
    assert set(reasons) == {"empty.md", "broken.pdf"}
    assert "no text" in reasons["empty.md"]
    assert len(stored(jwb, site)) == 2


def test_worker_stops_gracefully_on_sigterm(jwb, start_worker) -> None:
    worker = start_worker()
    wait_for(lambda: jwb.job_workers_alive() >= 1, 60, "the worker to register")
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(timeout=30) == 0
    assert "Worker stopped." in worker.stdout.read()


def test_a_job_still_held_by_another_run_waits_instead_of_running_twice(jwb, tmp_path: Path) -> None:
    """The guard behind 'two workers never run one job at once' when a job is queued again while its first run
    lives on (a worker cut off from the database past the stalled limit): the second run waits for the lock."""
    import threading

    import psycopg

    from rag_core.jobs.queue import run_lock_key
    from job_helpers import wait_for as wait

    site = f"t-held-{uuid.uuid4().hex[:6]}"
    job_id = jwb.enqueue_ingest([make_folder(tmp_path, 2, "held")], site_id=site)
    started: list[Any] = []
    with psycopg.connect(jwb.database_url, autocommit=True) as first_run:
        first_run.execute("SELECT pg_advisory_lock(%s, %s)", run_lock_key(job_id))
        thread = threading.Thread(target=jwb.job_queue.run_worker, args=(jwb, 1),
                                  kwargs={"install_signal_handlers": False, "started": started}, daemon=True)
        thread.start()
        wait(lambda: started_events(jwb, job_id) >= 2, 60, "the worker to try the held job twice")
        assert jwb.job(job_id)["runs"] == 0 and stored(jwb, site) == {}  # it never began
    # The first run's connection is gone, and its lock with it: the next try runs the job.
    done = wait(lambda: (j := jwb.job(job_id))["status"] == "done" and j, 60, "the job to run once the lock is free")
    assert done["runs"] == 1 and len(stored(jwb, site)) == 2
    for worker in started:
        worker.stop()
    thread.join(30)


def test_cancelling_a_running_job_stops_it_and_keeps_what_it_stored_whole(jwb, tmp_path: Path) -> None:
    import threading

    site = f"t-cancel-{uuid.uuid4().hex[:6]}"
    job_id = jwb.enqueue_ingest([make_folder(tmp_path, KILLED_JOB_FILES, "cancel")], site_id=site)
    started: list[Any] = []
    thread = threading.Thread(target=jwb.job_queue.run_worker, args=(jwb, 1),
                              kwargs={"install_signal_handlers": False, "started": started}, daemon=True)
    thread.start()
    try:
        wait_for(lambda: (j := jwb.job(job_id))["status"] == "running" and j["done"] > 0, 180, "part of the folder stored")
        assert jwb.cancel_job(job_id)["cancel_requested"]
        ended = wait_for(lambda: (j := jwb.job(job_id))["status"] != "running" and j, 120, "the job to stop")
        assert ended["status"] == "cancelled" and ended["errors"] == [{"source": None, "reason": "cancelled"}]
        kept = stored(jwb, site)  # each document whole (checked inside), none twice
        assert 0 < len(kept) < KILLED_JOB_FILES and all(docs == 1 for docs, _ in kept.values())
    finally:
        for worker in started:
            worker.stop()
        thread.join(30)


def test_a_reindex_asked_for_while_one_waits_is_that_job(jwb) -> None:
    first = jwb.enqueue_reindex()
    try:
        assert jwb.enqueue_reindex() == first  # it would redo the same work: the waiting job answers for both
        assert [j["id"] for j in jwb.jobs(limit=1000) if j["kind"] == "reindex" and j["status"] == "queued"] == [first]
    finally:
        jwb.cancel_job(first)
    again = jwb.enqueue_reindex()  # none waits now: a new job
    jwb.cancel_job(again)
    assert again != first
