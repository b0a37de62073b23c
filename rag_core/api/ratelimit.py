"""Per-key rate limiting with the `limits` library: in-process, or shared through Redis across workers."""

from __future__ import annotations

import logging
import math
import time

from limits import RateLimitItem, parse
from limits.storage import MemoryStorage, Storage, storage_from_string
from limits.strategies import MovingWindowRateLimiter, SlidingWindowCounterRateLimiter

from rag_core.errors import ConfigError, InvalidInput, RateLimited

log = logging.getLogger(__name__)

DISABLED = ("", "0", "off", "none")


def parse_rate_limit(spec: str, variable: str = "RAG_RATE_LIMIT") -> RateLimitItem | None:
    """RAG_RATE_LIMIT (`120/minute`, `10/second`, `1000 per hour`) as a limit; off/0/empty disables it."""
    if (spec or "").strip().lower() in DISABLED:
        return None
    try:
        return parse(spec.strip())
    except ValueError:
        raise ConfigError(f"{variable}: '{spec}' is not a rate; write e.g. 120/minute, 10/second or "
                          "1000/hour (off disables limiting).") from None


def redis_storage(url: str) -> Storage:
    """A Redis storage that answered a ping; an unreachable Redis is a ConfigError naming RAG_REDIS_URL."""
    try:
        storage = storage_from_string(url)
    except Exception as exc:  # noqa: BLE001 - limits raises several types for bad schemes
        raise ConfigError(f"RAG_REDIS_URL: '{_safe_url(url)}' is not a Redis URL ({type(exc).__name__}); "
                          "write redis://host:6379/0.") from None
    if not storage.check():
        raise ConfigError(f"RAG_REDIS_URL: no Redis answers at {_safe_url(url)}; start redis-server or unset "
                          "RAG_REDIS_URL to keep limits and the search cache in the process.")
    return storage


def _safe_url(url: str) -> str:
    """The URL without its password, for messages."""
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    if parts.password:
        return url.replace(f":{parts.password}@", ":***@")
    return url


class RateLimiter:
    """A moving window per caller identity; `hit` raises RateLimited with the seconds to wait.

    With `counted` other than requests (the characters of documents, each hit costing many), the window is
    a sliding counter: a moving window keeps one entry per unit counted.
    """

    def __init__(self, spec: str, redis_url: str = "", *, variable: str = "RAG_RATE_LIMIT",
                 counted: str = "requests") -> None:
        self.spec = spec
        self.variable = variable
        self.counted = counted
        self.item = parse_rate_limit(spec, variable)
        self.shared = bool(redis_url)
        self.storage: Storage = redis_storage(redis_url) if redis_url else MemoryStorage()
        self.limiter = (MovingWindowRateLimiter(self.storage) if counted == "requests"
                        else SlidingWindowCounterRateLimiter(self.storage))
        self._warned_at = 0.0

    def hit(self, identity: str, cost: int = 1) -> None:
        """Count `cost` (one request) of `identity`; over the limit raises RateLimited (HTTP 429, Retry-After)."""
        if self.item is None:
            return
        if cost > self.item.amount:  # it would never fit: waiting does not help, so no 429 with a Retry-After
            raise InvalidInput(f"This request counts {cost} {self.counted}, more than the whole limit of {self.spec} "
                               f"per API key ({self.variable}); send less in each request, or raise {self.variable}.",
                               details={"limit": self.spec, "cost": cost})
        try:
            allowed = self.limiter.hit(self.item, "rag", self.counted, identity, cost=max(1, cost))
            if allowed:
                return
            reset_time, _ = self.limiter.get_window_stats(self.item, "rag", self.counted, identity)
        except Exception as exc:  # noqa: BLE001 - a Redis outage must not take the service down with it
            # Fail open: searches keep working while Redis is away; say so once a minute.
            if time.monotonic() - self._warned_at > 60:
                self._warned_at = time.monotonic()
                log.warning("Rate limiter storage failed (%s); requests are not limited until it is back.",
                            type(exc).__name__)
            return
        retry_after = max(1, math.ceil(reset_time - time.time()))
        raise RateLimited(f"Too many {self.counted}: the limit is {self.spec} per API key; retry in {retry_after} s.",
                          details={"limit": self.spec, "retry_after": retry_after})

    def reset(self) -> None:
        """Forget every counter (tests and admin use)."""
        self.storage.reset()
