"""A TTL cache of identical searches, cleared whenever the store changes (Store.after_write).

In the process by default: another process's ingest reaches it only through the TTL
(RAG_SEARCH_CACHE_TTL_SEC, 300 s by default, the spec's five minutes). With RAG_REDIS_URL set,
RedisSearchCache shares it between processes and invalidates it everywhere at once.

Both hold serialized bytes (the engine's JSON), never live objects: every reader decodes its own
copy, so no caller can change what another one is served, and no deep copy is paid per hit.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from typing import Any, Hashable


class SearchCache:
    """Least-recently-used entries that expire `ttl_sec` after they were stored."""

    def __init__(self, ttl_sec: float, max_entries: int = 512) -> None:
        self.ttl_sec = float(ttl_sec)
        self.max_entries = max_entries
        self._items: OrderedDict[Hashable, tuple[float, bytes]] = OrderedDict()
        self._lock = threading.Lock()

    @property
    def enabled(self) -> bool:
        return self.ttl_sec > 0

    def get(self, key: Hashable) -> bytes | None:
        """The stored bytes, or None when absent or expired."""
        if not self.enabled:
            return None
        with self._lock:
            item = self._items.get(key)
            if item is None:
                return None
            if item[0] < time.monotonic():
                del self._items[key]
                return None
            self._items.move_to_end(key)
            return item[1]

    def put(self, key: Hashable, value: bytes) -> None:
        """Store serialized bytes under `key` for `ttl_sec`."""
        if not self.enabled:
            return
        if not isinstance(value, bytes):
            raise TypeError(f"the search cache stores bytes, not {type(value).__name__}")
        with self._lock:
            self._items[key] = (time.monotonic() + self.ttl_sec, value)
            self._items.move_to_end(key)
            while len(self._items) > self.max_entries:
                self._items.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)


class RedisSearchCache:
    """The same cache shared by every process through Redis (RAG_REDIS_URL): the search spec's Redis cache.

    Values are the engine's JSON bytes (never pickle: whoever can write to Redis must not run code here).
    `clear()` bumps a generation number that is part of every key, so one ingest in any process
    invalidates every process's entries at once; old generations expire by their TTL. A Redis
    outage turns the cache into misses, never into failed searches.
    """

    def __init__(self, url: str, ttl_sec: float, namespace: str, client: Any = None) -> None:
        import redis

        self.ttl_sec = float(ttl_sec)
        self.client = client or redis.Redis.from_url(url, socket_timeout=1.0, socket_connect_timeout=1.0)
        self.prefix = f"rag:search:{namespace}"
        self._errors = (redis.RedisError, OSError)
        self._warned_at = 0.0

    @property
    def enabled(self) -> bool:
        return self.ttl_sec > 0

    def _key(self, generation: int, key: Hashable) -> str:
        import hashlib

        return f"{self.prefix}:{generation}:{hashlib.sha256(repr(key).encode()).hexdigest()}"

    def _generation(self) -> int:
        return int(self.client.get(f"{self.prefix}:generation") or 0)

    def _warn(self, exc: BaseException) -> None:
        import logging

        if time.monotonic() - self._warned_at > 60:
            self._warned_at = time.monotonic()
            logging.getLogger(__name__).warning("Search cache in Redis unavailable (%s); searching without it.",
                                                type(exc).__name__)

    def get(self, key: Hashable) -> bytes | None:
        """The stored bytes, or None when absent, expired or Redis is down."""
        if not self.enabled:
            return None
        try:
            raw = self.client.get(self._key(self._generation(), key))
        except self._errors as exc:
            self._warn(exc)
            return None
        return bytes(raw) if raw is not None else None

    def put(self, key: Hashable, value: bytes) -> None:
        """Store serialized bytes under `key` for `ttl_sec`, in the current generation."""
        if not self.enabled:
            return
        if not isinstance(value, bytes):
            raise TypeError(f"the search cache stores bytes, not {type(value).__name__}")
        try:
            self.client.set(self._key(self._generation(), key), value, px=max(1, int(self.ttl_sec * 1000)))
        except self._errors as exc:
            self._warn(exc)

    def clear(self) -> None:
        try:
            self.client.incr(f"{self.prefix}:generation")
        except self._errors as exc:
            self._warn(exc)

    def __len__(self) -> int:
        try:
            return sum(1 for _ in self.client.scan_iter(f"{self.prefix}:{self._generation()}:*"))
        except self._errors as exc:
            self._warn(exc)
            return 0


def cache_namespace(settings: Any) -> str:
    """Entries of one store only: two stores sharing a Redis never see each other's results."""
    import hashlib

    store = settings.database_url or f"embedded:{settings.data_dir}"
    return hashlib.sha256(f"{store}|{settings.embedder}|{settings.embed_model}".encode()).hexdigest()[:16]


def build_search_cache(settings: Any) -> "SearchCache | RedisSearchCache":
    """Redis-backed when RAG_REDIS_URL is set (shared by workers), else in the process."""
    if getattr(settings, "redis_url", ""):
        return RedisSearchCache(settings.redis_url, settings.search_cache_ttl_sec, cache_namespace(settings))
    return SearchCache(settings.search_cache_ttl_sec)
