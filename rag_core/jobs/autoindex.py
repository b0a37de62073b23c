"""The source-index advisor: a source filter whose searches keep walking the whole store's HNSW graph slowly
gets an index of its own (`rag index source`) from a background job, with no step by hand.

A filter whose chunks lie far from a query in the graph (a folder of Russian norms searched in English) makes the
walk visit much of the store before it finds the filter's chunks; the filter's own index makes that walk short
(`eval/bench_search.py --auto-index`: the one-corpus filter before and after the advisor's index). Its btree of
the filter's documents spares a full-text search with a broad filter a lookup of each posting's document. The
advisor counts such searches per (site, filter) in this process; at `AFTER` within `WINDOW_SEC` it queues one
job (a queueing lock keeps a second process from queueing another while it waits). A site keeps at most
`MAX_PER_SITE` indexes of its own: each one is written to by every ingest into its filter.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from typing import Callable

from rag_core.ingest import vector_index

log = logging.getLogger(__name__)

AFTER = 3
WINDOW_SEC = 3600.0
MAX_PER_SITE = 8


class SourceIndexAdvisor:
    """Hears of searches that walked the graph or the postings for a source filter (search.service.FilterWalk) and
    proposes."""

    def __init__(self, db: vector_index.Connections, enqueue: Callable[[str, str], int], slow_ms: float,
                 min_chunks: int, after: int = AFTER, window_sec: float = WINDOW_SEC,
                 max_per_site: int = MAX_PER_SITE) -> None:
        """``enqueue(source_filter, site_id)`` queues the job; ``slow_ms`` 0 turns the advisor off."""
        self.db = db
        self.enqueue = enqueue
        self.slow_ms, self.min_chunks, self.after = slow_ms, min_chunks, after
        self.window_sec, self.max_per_site = window_sec, max_per_site
        self._lock = threading.Lock()
        self._slow: dict[tuple[str, str], deque[float]] = {}
        self._proposed: set[tuple[str, str]] = set()   # once per process: a dropped index is not forced back
        self.proposals: list[threading.Thread] = []

    def __call__(self, site_id: str | None, source: str, chunks: int, ms: float) -> None:
        if self.slow_ms <= 0 or site_id is None or ms < self.slow_ms or chunks < self.min_chunks:
            return
        key, now = (site_id, source), time.monotonic()
        with self._lock:
            if key in self._proposed:
                return
            seen = self._slow.setdefault(key, deque())
            seen.append(now)
            while seen and seen[0] < now - self.window_sec:
                seen.popleft()
            if len(seen) < self.after:
                return
            self._proposed.add(key)
            del self._slow[key]
        # Off the search's thread: the queue's first use opens its connections.
        proposal = threading.Thread(target=self._propose, args=key, name="source-index-advisor", daemon=True)
        self.proposals.append(proposal)
        proposal.start()

    def _propose(self, site_id: str, source: str) -> None:
        try:
            have = vector_index.source_indexes(self.db, site_id)
            if len(have) >= self.max_per_site:
                log.warning("searches of site %s filtered on %s are slow with no index of their own, but the site has "
                            "%d indexes of its own already (%s); drop one with `rag index drop` and run `rag index "
                            "source %s --site %s`", site_id, source, len(have),
                            ", ".join(i["source_filter"] for i in have), source, site_id)
                return
            job_id = self.enqueue(source, site_id)
            log.info("searches of site %s filtered on %s were slow (%d over %.0f ms): job %d builds its own HNSW "
                     "index", site_id, source, self.after, self.slow_ms, job_id)
        except Exception:   # advice only: a search never fails for it
            log.warning("could not queue the HNSW index of %s in site %s", source, site_id, exc_info=True)
            with self._lock:
                self._proposed.discard((site_id, source))

    def wait(self, timeout: float = 30.0) -> None:
        """Wait for the proposals made so far (tests, benchmarks)."""
        for proposal in list(self.proposals):
            proposal.join(timeout)
