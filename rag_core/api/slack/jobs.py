"""Background work for the Slack bot: a bounded pool for crawls, throttled progress, recent event ids."""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Hashable

log = logging.getLogger(__name__)


class PoolBusy(Exception):
    """More jobs wait than the pool accepts."""


class AlreadyRunning(Exception):
    """A job with the same key (the same URL in the same site) is queued or running."""


class JobPool:
    """At most `workers` crawls run at once and at most `max_waiting` wait; questions never queue here."""

    def __init__(self, workers: int, max_waiting: int) -> None:
        self.max_waiting = max_waiting
        self._executor = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="slack-crawl")
        self._workers = workers
        self._lock = threading.Lock()
        self._active: set[Hashable] = set()     # queued or running

    def submit(self, key: Hashable, job: Callable[[], None]) -> int:
        """Queue a job; returns its place in the queue (0: it starts at once). Raises AlreadyRunning or PoolBusy."""
        with self._lock:
            if key in self._active:
                raise AlreadyRunning(key)
            waiting = max(0, len(self._active) - self._workers)
            if waiting >= self.max_waiting:
                raise PoolBusy(waiting)
            place = waiting + 1 if len(self._active) >= self._workers else 0
            self._active.add(key)

        def run() -> None:
            try:
                job()
            except Exception:  # the job reports its own failures; this only keeps the worker alive
                log.exception("Slack background job %s failed", key)
            finally:
                with self._lock:
                    self._active.discard(key)

        self._executor.submit(run)
        return place

    def shutdown(self, wait: bool = True) -> None:
        """Stop taking jobs; with `wait`, let the running ones finish."""
        self._executor.shutdown(wait=wait, cancel_futures=not wait)


class ProgressThrottle:
    """Decides when a progress message is worth an update: a new page count, at most once per interval,
    and always the first and the last count."""

    def __init__(self, interval_sec: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.interval = interval_sec
        self._clock = clock
        self._last_at: float | None = None
        self._last_done: int | None = None

    def due(self, done: int, total: int) -> bool:
        """Whether to post `done / total` now."""
        if done == self._last_done:
            return False  # the pipeline reports chunks after the last page; the count did not move
        now = self._clock()
        final = total > 0 and done >= total
        if self._last_at is not None and not final and now - self._last_at < self.interval:
            return False
        self._last_at, self._last_done = now, done
        return True


class RecentKeys:
    """Event ids seen lately: Slack resends an event it thinks was not acknowledged, and a slow answer
    must not be posted twice. Bounded in size and age; kept in memory (see docs/slack.md)."""

    def __init__(self, ttl_sec: float = 3600.0, max_size: int = 10_000,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.ttl = ttl_sec
        self.max_size = max_size
        self._clock = clock
        self._seen: OrderedDict[str, float] = OrderedDict()
        self._lock = threading.Lock()

    def first_time(self, key: str) -> bool:
        """True the first time a key is offered (within the TTL), False for a repeat."""
        now = self._clock()
        with self._lock:
            while self._seen and (len(self._seen) >= self.max_size or
                                  now - next(iter(self._seen.values())) > self.ttl):
                self._seen.popitem(last=False)
            if key in self._seen:
                return False
            self._seen[key] = now
            return True
