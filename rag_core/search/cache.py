"""A TTL cache of identical searches, cleared whenever the store changes (Workbench._after_write).

It lives in the process: another process's ingest reaches it only through the TTL
(RAG_SEARCH_CACHE_TTL_SEC, 300 s by default, the spec's five minutes).
"""

from __future__ import annotations

import copy
import threading
import time
from collections import OrderedDict
from typing import Any, Hashable


class SearchCache:
    """Least-recently-used entries that expire `ttl_sec` after they were stored."""

    def __init__(self, ttl_sec: float, max_entries: int = 512) -> None:
        self.ttl_sec = float(ttl_sec)
        self.max_entries = max_entries
        self._items: OrderedDict[Hashable, tuple[float, Any]] = OrderedDict()
        self._lock = threading.Lock()

    @property
    def enabled(self) -> bool:
        return self.ttl_sec > 0

    def get(self, key: Hashable) -> Any | None:
        """A copy of the stored value, or None when absent or expired."""
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
            value = item[1]
        return copy.deepcopy(value)

    def put(self, key: Hashable, value: Any) -> None:
        if not self.enabled:
            return
        stored = copy.deepcopy(value)
        with self._lock:
            self._items[key] = (time.monotonic() + self.ttl_sec, stored)
            self._items.move_to_end(key)
            while len(self._items) > self.max_entries:
                self._items.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)
