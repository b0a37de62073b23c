"""Background jobs of one store: enqueue ingests, crawls and reindexes, follow them, run workers."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any, Sequence

from rag_core.errors import InvalidInput, NotFound
from rag_core.ingest.service import DocumentService
from rag_core.ingest.types import TextRecord
from rag_core.jobs import records
from rag_core.jobs.queue import JobQueue
from rag_core.jobs.records import JobInfo
from rag_core.security.documents import check_document
from rag_core.security.ids import DEFAULT_SITE
from rag_core.security.paths import user_path


class JobService:
    """The store's job queue (procrastinate on the same database); jobs run `DocumentService` calls."""

    def __init__(self, documents: DocumentService) -> None:
        self.documents = documents
        self.store = documents.store
        self._queue: JobQueue | None = None
        self._hosting = False

    @property
    def queue(self) -> JobQueue:
        """The procrastinate-backed queue, built on first use."""
        if self._queue is None:
            self._queue = JobQueue(self.store.database_url, self.store.db, self.store.settings)
        return self._queue

    def _enqueue(self, kind: str, site_id: str | None, args: dict[str, Any], description: str | None = None,
                 once: bool | str = False) -> int:
        job_id = self.queue.enqueue(kind, site_id, args, description, once=once)
        if self._hosting:
            self.queue.ensure_worker(self.documents)
        return job_id

    def enqueue_ingest(self, paths: Sequence[str | Path], include: Sequence[str] = (), exclude: Sequence[str] = (),
                       site_id: str = DEFAULT_SITE, prune: bool = False) -> int:
        """Queue an ingest of files and folders; returns its id. Paths are read by the worker that takes it."""
        absolute = [user_path(p).resolve().as_posix() for p in paths]
        if not absolute:
            raise InvalidInput("No path given; name the files or folders to ingest.")
        return self._enqueue("ingest", site_id, {"paths": absolute, "site_id": site_id, "include": list(include),
                                                 "exclude": list(exclude), "prune": prune})

    def enqueue_uploads(self, files: Sequence[tuple[str, bytes]], site_id: str = DEFAULT_SITE) -> int:
        """Queue uploaded files (name, bytes) as one job; they wait in the database until it stored them."""
        if not files:
            raise InvalidInput("No file given; choose the files to upload.")
        batch = uuid.uuid4().hex
        records.save_files(self.store.db, batch, files)
        names = [name for name, _ in files]
        try:
            return self._enqueue("upload", site_id, {"batch": batch, "site_id": site_id},
                                 ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else ""))
        except Exception:
            records.drop_files(self.store.db, batch)
            raise

    def enqueue_texts(self, texts: Sequence[TextRecord], site_id: str = DEFAULT_SITE) -> int:
        """Queue texts (source, text, optional title and metadata) for ingestion as one job."""
        for record in texts:  # refused now, with the rules every stored document meets, not in the worker
            check_document(site_id, record.get("source"), record.get("text", ""))
        return self._enqueue("texts", site_id, {"texts": [dict(t) for t in texts], "site_id": site_id})

    def enqueue_crawl(self, index_url: str, pattern: str = "", site_id: str = DEFAULT_SITE) -> int:
        """Queue a crawl of an index page; a URL the crawl policy refuses is refused now, not in the worker."""
        self.documents.check_url(index_url)
        return self._enqueue("crawl", site_id, {"index_url": index_url, "pattern": pattern, "site_id": site_id})

    def enqueue_page(self, url: str, site_id: str = DEFAULT_SITE) -> int:
        """Queue one web page (`rag add --background`); a refused URL is refused now."""
        self.documents.check_url(url)
        return self._enqueue("add", site_id, {"url": url, "site_id": site_id})

    def enqueue_source_index(self, source_filter: str, site_id: str = DEFAULT_SITE) -> int:
        """Queue `rag index source` for one filter; while one for it waits in the queue, that job's id."""
        return self._enqueue("source_index", site_id, {"source_filter": source_filter, "site_id": site_id},
                             once=f"{site_id}:{source_filter}")

    def enqueue_reindex(self) -> int:
        """Queue a reindex (every site's chunks); while one waits in the queue, its id (it will do the same work)."""
        return self._enqueue("reindex", None, {}, once=True)

    def list(self, site_id: str | None = None, sites: Sequence[str] | None = None, limit: int = 50) -> list[JobInfo]:
        """Running and queued jobs first, then the latest finished ones; of one site, of some, or all."""
        if not 1 <= int(limit) <= 1000:
            raise InvalidInput(f"limit is {limit}; choose between 1 and 1000 jobs.")
        wanted = [site_id] if site_id is not None else (list(sites) if sites is not None else None)
        return records.recent(self.store.db, wanted, int(limit))

    def get(self, job_id: int) -> JobInfo:
        """One job with its status, progress, errors and timestamps (NotFound when there is none)."""
        info = records.get(self.store.db, int(job_id))
        if info is None:
            raise NotFound(f"No job {job_id}; `rag jobs list` shows the recent ones.")
        return info

    def cancel(self, job_id: int) -> JobInfo:
        """Cancel a queued job, or ask a running one to stop after its current file or batch."""
        info = self.get(job_id)
        if info["status"] not in ("queued", "running"):
            raise InvalidInput(f"Job {job_id} is {info['status']} already; only queued or running jobs can be "
                               "cancelled.")
        self.queue.cancel(int(job_id))
        return self.get(job_id)

    def workers_alive(self) -> int:
        """Workers whose heartbeat is recent (`rag worker` processes and in-process ones)."""
        return self.queue.workers_alive()

    def run_worker(self, concurrency: int = 1, wait: bool = True) -> None:
        """Take jobs until SIGTERM/SIGINT (or, with wait=False, until the queue is empty); `rag worker`."""
        if not 1 <= int(concurrency) <= 64:
            raise InvalidInput(f"concurrency is {concurrency}; choose between 1 and 64 jobs at once.")
        self.queue.run_worker(self.documents, int(concurrency), wait=wait)

    def host(self) -> bool:
        """Run queued jobs in this process whenever no worker is alive (`rag serve`, the app); True if it does now."""
        self._hosting = True
        return self.queue.host(self.documents)

    def stop_hosting(self) -> None:
        """Stop the job worker `host` started here (its running job finishes first)."""
        self._hosting = False
        if self._queue is not None:
            self._queue.stop_in_process()

    def close(self) -> None:
        if self._queue is not None:
            self._queue.close()
