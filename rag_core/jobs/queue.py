"""The job queue: procrastinate on the store's own PostgreSQL, our tasks, workers and stalled-job recovery.

Any process that reaches the database may enqueue; any number of workers (`rag worker`, or the
one `rag serve` and the app start in their own process when no worker is alive) take jobs. A
worker killed mid-job stops sending heartbeats; a live worker then puts its job back in the queue
and another run finishes it: every document is written in its own transaction and an unchanged
one is skipped, so a document is never stored twice nor half.
"""

from __future__ import annotations

import asyncio
import atexit
import logging
import os
import socket
import threading
import time
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Iterator

import psycopg
from procrastinate import App, PsycopgConnector, RetryStrategy, SyncPsycopgConnector
from procrastinate.exceptions import AlreadyEnqueued, JobAborted
from procrastinate.worker import Worker

from rag_core.errors import RagError
from rag_core.ingest.types import Progress
from rag_core.jobs import records, tasks

if TYPE_CHECKING:
    from procrastinate.job_context import JobContext

    from rag_core.db.database import Database
    from rag_core.settings import RagSettings
    from rag_core.ingest.service import DocumentService

log = logging.getLogger(__name__)

QUEUE = "rag"
# A run holds this advisory lock (with the job id) for as long as it works on the job: a job put back
# in the queue while its first run is in fact still alive (a worker cut off from the database for longer
# than the stalled limit) waits instead of running twice. The server releases it when a run's process dies.
_RUN_LOCK_CLASS = 724_011_033
# One worker at a time looks for stalled jobs: two could both put one back while a third had taken it.
_RECOVERY_LOCK_ID = 724_011_034
# A job whose worker died this many times (a file that kills the process, the OOM killer) fails
# instead of taking down worker after worker.
MAX_RUNS = 3
# A job whose earlier run still holds it is tried again every BUSY_WAIT_SEC, this many times, then fails.
BUSY_RETRIES = 100
BUSY_WAIT_SEC = 2
# The least time between two progress writes of one job.
PROGRESS_EVERY_SEC = 0.5
# How often a worker (the one holding the recovery lock) deletes finished jobs past RAG_JOB_RETENTION_DAYS.
CLEANUP_EVERY_SEC = 3600
# An uploaded file no job refers to is deleted only past this age: its job is queued just after it is saved.
ORPHAN_FILE_AGE_SEC = 3600


def run_lock_key(job_id: int) -> tuple[int, int]:
    """The two-part advisory lock key a run of `job_id` holds while it works on the job."""
    return _RUN_LOCK_CLASS, job_id % 2_147_483_647


class JobBusy(Exception):
    """Another run of this job still holds it: tried again a little later."""


class JobQueue:
    """Enqueue, cancel and run the store's jobs (procrastinate's queue named 'rag')."""

    def __init__(self, url: str, db: Database, settings: RagSettings) -> None:
        self.url = url
        self.db = db
        self.settings = settings
        self._lock = threading.Lock()
        self._sync_app: App | None = None
        self._in_process: tuple[threading.Thread, list[Worker]] | None = None
        self._watcher: tuple[threading.Thread, threading.Event] | None = None

    # ----- the enqueuing side (sync: CLI, REST handlers, Streamlit) -----
    @property
    def app(self) -> App:
        with self._lock:
            if self._sync_app is None:
                app = App(connector=SyncPsycopgConnector(conninfo=self.url, min_size=0, max_size=2,
                                                         kwargs={"connect_timeout": 10}))
                app.open()
                self._sync_app = app
            return self._sync_app

    def enqueue(self, kind: str, site_id: str | None, args: dict[str, Any], description: str | None = None,
                once: bool | str = False) -> int:
        """Queue one job; returns procrastinate's job id, which is also ours.

        once: while a job of this kind (True) or of this kind and key (a string) waits in the queue, return that
        job's id instead of queueing another (procrastinate's queueing lock): a second reindex asked for before
        the first started would redo it all.
        """
        description = description or tasks.describe(kind, args)
        lock = (f"rag.{kind}" + (f":{once}" if isinstance(once, str) else "")) if once else None
        for _ in range(3):  # the waiting job may start between the refusal and the look-up: queue again then
            try:
                job_id = self.app.configure_task(name=f"rag.{kind}", queue=QUEUE, queueing_lock=lock).defer(
                    site_id=site_id, description=description, args=args)
            except AlreadyEnqueued:
                waiting = records.queued_with_lock(self.db, lock)
                if waiting is not None:
                    return waiting
                continue
            records.create(self.db, job_id, kind, site_id, description)
            return job_id
        raise RagError(f"Could not queue the {kind} job: jobs of its kind kept starting as it was queued; try again.")

    def cancel(self, job_id: int) -> bool:
        """A queued job is cancelled at once; a running one stops after the file or batch it is on."""
        return self.app.job_manager.cancel_job_by_id(job_id, abort=True)

    def workers_alive(self) -> int:
        return records.live_workers(self.db, self.settings.job_stalled_sec)

    def close(self) -> None:
        self.stop_in_process()
        with self._lock:
            if self._sync_app is not None:
                self._sync_app.close()
                self._sync_app = None

    # ----- the working side -----
    def _worker_app(self, documents: DocumentService, concurrency: int) -> App:
        app = App(connector=PsycopgConnector(conninfo=self.url, min_size=1, max_size=concurrency + 3,
                                             kwargs={"connect_timeout": 10}))
        retry = RetryStrategy(max_attempts=BUSY_RETRIES, wait=BUSY_WAIT_SEC, retry_exceptions={JobBusy})
        for kind in tasks.RUNNERS:
            app.task(name=f"rag.{kind}", queue=QUEUE, pass_context=True, retry=retry)(self._task(documents, kind))
        return app

    def _task(self, documents: DocumentService, kind: str) -> Any:
        runner = tasks.RUNNERS[kind]

        def run(context: JobContext, *, site_id: str | None, description: str, args: dict[str, Any]) -> None:
            job_id = context.job.id
            assert job_id is not None
            with self._run_lock(job_id) as held:
                if not held:
                    if context.job.attempts + 1 >= BUSY_RETRIES:  # the last try: say why the job fails
                        records.finish(self.db, job_id, None, [{"source": None, "reason": (
                            f"another run of this job kept it for {BUSY_RETRIES * BUSY_WAIT_SEC} s (a worker cut off "
                            "from the database?); run it again once that worker is stopped")}])
                    raise JobBusy(f"job {job_id} is still held by another run")
                records.start(self.db, job_id, kind, site_id, description)
                writer = _ProgressWriter(self.db, job_id, context)
                try:
                    result, errors = runner(documents, writer, **args)
                except JobAborted:
                    writer.flush()
                    records.finish(self.db, job_id, None, [{"source": None, "reason": "cancelled"}])
                    raise
                except RagError as exc:
                    writer.flush()
                    records.finish(self.db, job_id, None, [{"source": None, "reason": exc.message}])
                    raise
                except Exception as exc:
                    writer.flush()
                    records.finish(self.db, job_id, None, [{"source": None, "reason": f"{type(exc).__name__}: {exc}"}])
                    raise
                writer.flush()
                records.finish(self.db, job_id, result, errors)

        run.__name__ = f"rag_{kind}"
        return run

    @contextmanager
    def _run_lock(self, job_id: int) -> Iterator[bool]:
        """This run's hold on the job, on a connection of its own for as long as the run lasts."""
        with psycopg.connect(self.url, autocommit=True, connect_timeout=10) as conn:
            held = conn.execute("SELECT pg_try_advisory_lock(%s, %s)", run_lock_key(job_id)).fetchone()[0]
            yield held

    def run_worker(self, documents: DocumentService, concurrency: int = 1, *, name: str | None = None,
                   install_signal_handlers: bool = True, wait: bool = True,
                   started: list[Worker] | None = None) -> None:
        """Take jobs until stopped (SIGTERM/SIGINT finish the running jobs first) or, with wait=False,
        until the queue is empty."""
        app = self._worker_app(documents, concurrency)
        worker = Worker(app, queues=[QUEUE], concurrency=concurrency, wait=wait,
                        name=name or f"{socket.gethostname()}:{os.getpid()}",
                        install_signal_handlers=install_signal_handlers,
                        # LISTEN/NOTIFY wakes an idle worker at once; the poll is the fallback when a notification
                        # is missed (eval/bench_jobs.py saw one start in about ten wait the default 5 s).
                        fetch_job_polling_interval=1.0,
                        update_heartbeat_interval=self.settings.worker_heartbeat_sec,
                        stalled_worker_timeout=self.settings.job_stalled_sec)
        if started is not None:
            started.append(worker)

        async def main() -> None:
            async with app.open_async():
                recovery = asyncio.create_task(self._recover_stalled(app))
                try:
                    await worker.run()
                finally:
                    recovery.cancel()

        asyncio.run(main())

    async def _recover_stalled(self, app: App) -> None:
        """Put the jobs of workers that stopped sending heartbeats back in the queue, every few seconds."""
        every = max(1.0, self.settings.job_stalled_sec / 3)
        conn: psycopg.AsyncConnection | None = None
        cleaned_at: float | None = None
        while True:
            try:
                if conn is None or conn.closed:
                    conn = await psycopg.AsyncConnection.connect(self.url, autocommit=True, connect_timeout=10)
                got = (await (await conn.execute("SELECT pg_try_advisory_lock(%s)", (_RECOVERY_LOCK_ID,))).fetchone())[0]
                if got:
                    try:
                        await self._retry_stalled(app, conn)
                        if cleaned_at is None or time.monotonic() - cleaned_at >= CLEANUP_EVERY_SEC:
                            cleaned_at = time.monotonic()
                            await self._remove_old_jobs(app, conn)
                    finally:
                        await conn.execute("SELECT pg_advisory_unlock(%s)", (_RECOVERY_LOCK_ID,))
            except asyncio.CancelledError:
                if conn is not None:
                    await conn.close()
                raise
            except Exception as exc:  # noqa: BLE001 - the next round tries again (a restarting database)
                log.warning("Looking for stalled jobs failed: %s", exc)
                conn = None
            await asyncio.sleep(every)

    async def _remove_old_jobs(self, app: App, conn: psycopg.AsyncConnection) -> None:
        """Delete the jobs finished more than RAG_JOB_RETENTION_DAYS ago (procrastinate's own cleanup; our
        progress and report rows go with them, ON DELETE CASCADE) and uploaded files no job refers to."""
        days = self.settings.job_retention_days
        if days <= 0:
            return
        await app.job_manager.delete_old_jobs(nb_hours=max(1, round(days * 24)), queue=QUEUE, include_failed=True,
                                              include_cancelled=True, include_aborted=True)
        removed = await conn.execute(
            "DELETE FROM job_files f WHERE f.created_at < now() - make_interval(secs => %s) AND NOT EXISTS ("
            " SELECT 1 FROM procrastinate_jobs p WHERE p.task_name = 'rag.upload' AND p.args->'args'->>'batch' = f.batch)",
            (ORPHAN_FILE_AGE_SEC,))
        if removed.rowcount:
            log.info("Deleted %d uploaded files whose job is gone.", removed.rowcount)

    async def _retry_stalled(self, app: App, conn: psycopg.AsyncConnection) -> None:
        from procrastinate.jobs import Status

        stalled = await app.job_manager.get_stalled_jobs(queue=QUEUE,
                                                         seconds_since_heartbeat=self.settings.job_stalled_sec)
        for job in stalled:
            assert job.id is not None
            # A late heartbeat is not a dead run: a worker busy loading a model, or cut off for a while, still
            # holds its run's lock, which the server drops only when that run's connection is gone.
            key = run_lock_key(job.id)
            if not (await (await conn.execute("SELECT pg_try_advisory_lock(%s, %s)", key)).fetchone())[0]:
                continue
            await conn.execute("SELECT pg_advisory_unlock(%s, %s)", key)
            info = await asyncio.to_thread(records.get, self.db, job.id)
            if info is not None and info["runs"] >= MAX_RUNS:
                log.warning("Job %s stopped with its worker %d times; failing it.", job.id, info["runs"])
                await asyncio.to_thread(records.finish, self.db, job.id, None, [{
                    "source": None, "reason": f"the job's worker stopped {info['runs']} times while running it "
                    "(killed, or out of memory); look at the file it was on and run it again"}])
                await app.job_manager.finish_job(job, Status.FAILED, delete_job=False)
                continue
            log.warning("Job %s lost its worker; putting it back in the queue.", job.id)
            await app.job_manager.retry_job(job)

    # ----- the worker inside `rag serve` and the app -----
    def host(self, documents: DocumentService) -> bool:
        """Run queued jobs in this process whenever no worker is alive: now, and checked again every few
        seconds (a job queued by `rag ingest --background` in another terminal). True if a worker runs here now."""
        if self.settings.jobs_in_process_worker == "off":
            return False
        with self._lock:
            if self._watcher is None:
                stop = threading.Event()
                every = max(1.0, self.settings.job_stalled_sec / 3)

                def watch() -> None:
                    while not stop.wait(every):
                        try:
                            self.ensure_worker(documents)
                        except Exception as exc:  # noqa: BLE001 - a database restart; the next round retries
                            log.debug("Checking for a job worker failed: %s", exc)

                thread = threading.Thread(target=watch, name="rag-job-watch", daemon=True)
                self._watcher = (thread, stop)
                thread.start()
                # Before the embedded server's own exit hook stops it (hooks run last registered first): a
                # watcher or worker left running would query a server that is gone.
                atexit.register(self.stop_in_process)
        return self.ensure_worker(documents)

    def ensure_worker(self, documents: DocumentService) -> bool:
        """Start a worker thread in this process when jobs wait and no worker is alive; True if one runs here."""
        mode = self.settings.jobs_in_process_worker
        if mode == "off":
            return False
        with self._lock:
            if self._in_process is not None and self._in_process[0].is_alive():
                return True
            if mode == "auto":
                # A connection of its own, not the pool's: a check every few seconds from a thread must not
                # set off the pool's reconnection when the server has just stopped (the process is ending).
                with psycopg.connect(self.url, autocommit=True, connect_timeout=5) as conn:
                    live, waiting = records.worker_state(conn, self.settings.job_stalled_sec)
                if live or not waiting:
                    return False
            started: list[Worker] = []
            thread = threading.Thread(target=self._run_in_process, args=(documents, started), name="rag-job-worker",
                                      daemon=True)
            self._in_process = (thread, started)
            thread.start()
        log.info("No job worker is running: this process runs the queued jobs itself.")
        return True

    def _run_in_process(self, documents: DocumentService, started: list[Worker]) -> None:
        try:
            self.run_worker(documents, 1, name=f"in-process:{socket.gethostname()}:{os.getpid()}",
                            install_signal_handlers=False, started=started)
        except Exception:  # noqa: BLE001 - logged; the next enqueue starts another
            log.exception("The in-process job worker stopped")

    def stop_in_process(self, timeout: float = 10.0) -> None:
        """Stop hosting: the watcher, then the worker thread (its running job finishes first)."""
        with self._lock:
            running, self._in_process = self._in_process, None
            watcher, self._watcher = self._watcher, None
        if watcher is not None:
            watcher[1].set()
        if running is None:
            return
        thread, started = running
        deadline = time.monotonic() + timeout
        while not started and thread.is_alive() and time.monotonic() < deadline:
            time.sleep(0.05)
        for worker in started:
            worker.stop()
        thread.join(max(0.0, deadline - time.monotonic()))


class _ProgressWriter:
    """The progress callback of a running job: stored at most every half second, and the last one always;
    a cancel request stops the job at the next callback."""

    def __init__(self, db: Database, job_id: int, context: JobContext) -> None:
        self.db = db
        self.job_id = job_id
        self.context = context
        self.last: Progress | None = None
        self.written_at = 0.0
        self.pending = False

    def __call__(self, p: Progress) -> None:
        self.last, self.pending = p, True
        now = time.monotonic()
        if now - self.written_at >= PROGRESS_EVERY_SEC or (p.total and p.done >= p.total):
            self.flush()
        if self.context.should_abort():
            raise JobAborted()

    def flush(self) -> None:
        if self.pending and self.last is not None:
            p = self.last
            records.progress(self.db, self.job_id, p.done, p.total, p.chunks_done, p.current)
            self.written_at, self.pending = time.monotonic(), False
