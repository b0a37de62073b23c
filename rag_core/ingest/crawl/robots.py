"""robots.txt (RFC 9309, parsed by protego): one record per origin and how it is read.

A 4xx answer allows everything; a 5xx answer or a network failure disallows everything until the
record is retried (``ROBOTS_RETRY_SEC``); a parsed file is cached for at most 24 hours.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from rag_core.errors import CrawlRefused, FetchError
from rag_core.ingest.crawl.content import RawResponse
from rag_core.ingest.loaders.encoding import web_codec

logger = logging.getLogger(__name__)

ROBOTS_MAX_BYTES = 512 * 1024  # RFC 9309: parse at least 500 KiB
ROBOTS_MAX_DELAY_SEC = 600.0
ROBOTS_TTL_SEC = 24 * 3600.0        # RFC 9309: do not use a cached robots.txt for more than 24 h
ROBOTS_RETRY_SEC = 300.0            # an unreachable robots.txt (disallow-all) is retried after this


@dataclass
class Robots:
    parser: Any = None           # protego.Protego, or None
    allow_all: bool = False
    note: str = ""               # why everything is disallowed, when parser is None and not allow_all
    expires: float = 0.0         # time.monotonic() after which robots.txt is fetched again

    def fresh(self) -> bool:
        return time.monotonic() < self.expires

    def can_fetch(self, url: str, user_agent: str) -> bool:
        if self.parser is not None:
            return bool(self.parser.can_fetch(url, user_agent))
        return self.allow_all

    def crawl_delay(self, user_agent: str) -> float | None:
        if self.parser is None:
            return None
        try:
            delay = self.parser.crawl_delay(user_agent)
        except Exception:  # noqa: BLE001
            return None
        return float(delay) if delay is not None else None


    def ttl(self) -> float:
        """Seconds to keep this record: a day when robots.txt was read, minutes when it was unreachable."""
        return ROBOTS_TTL_SEC if (self.parser is not None or self.allow_all) else ROBOTS_RETRY_SEC


async def load_robots(origin: str, fetch: Callable[[str], Awaitable[RawResponse]]) -> Robots:
    """The robots.txt record of an origin; ``fetch`` gets its URL (any type, truncated, any status)."""
    robots_url = origin + "/robots.txt"
    try:
        raw = await fetch(robots_url)
    except CrawlRefused as exc:  # redirected somewhere we may not go: treat as unavailable
        logger.info("robots.txt of %s not followed (%s); allowing all", origin, exc.message)
        return Robots(allow_all=True)
    except FetchError as exc:
        return Robots(note=f"robots.txt of {origin} could not be fetched ({exc.message})")
    if 400 <= raw.status < 500:
        return Robots(allow_all=True)
    if raw.status >= 500 or not 200 <= raw.status < 300:
        return Robots(note=f"robots.txt of {origin} answered HTTP {raw.status}")
    from protego import Protego

    try:
        parser = Protego.parse(raw.body.decode(web_codec(raw.charset) or "utf-8", errors="replace"))
    except Exception:  # noqa: BLE001 - an unparsable robots.txt is treated like a missing one
        logger.warning("Unparsable robots.txt at %s; allowing all", robots_url, exc_info=True)
        return Robots(allow_all=True)
    return Robots(parser=parser)
