"""The fetch engine: WebCrawler follows redirects by hand, throttles per host, honours robots.txt,
streams bodies under a byte bound and turns them into documents.

See ``rag_core.ingest.crawl`` for the rules it enforces.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
import logging
import threading
import time
import zlib
from collections.abc import Awaitable, Callable, Coroutine, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from http import HTTPStatus
from typing import Any, AsyncIterator, TypeVar
from urllib.parse import urldefrag, urljoin, urlsplit

import httpx

from rag_core.errors import CrawlRefused, FetchError, RagError
from rag_core.ingest.crawl.content import (
    HTML_TYPES, RawResponse, load_document, parse_content_type, parse_links, sniff_type, supported_type,
)
from rag_core.ingest.crawl.results import CrawledPage, PageError, error_reason
from rag_core.ingest.crawl.robots import ROBOTS_MAX_BYTES, ROBOTS_MAX_DELAY_SEC, Robots, load_robots
from rag_core.ingest.crawl.transport import MAX_CONCURRENCY, BorrowedTransport, pinned_transport
from rag_core.security.archives import BoundedInflater, InflateLimitExceeded, UnsupportedEncoding
from rag_core.security.url_policy import UrlPolicy, fetch_failure as _fetch_error, link_matcher, refusal as _refused
from rag_core.settings import RagSettings

logger = logging.getLogger(__name__)

T = TypeVar("T")

MAX_REDIRECTS = 5
REDIRECT_STATUSES = {301, 302, 303, 307, 308}
# hrefs that are not documents: skipped silently by extract_links (never fetched either way)
# The links of an index page that are read at all: twice the largest RAG_MAX_CRAWL_PAGES. Each costs about
# 40 microseconds (join, pattern, policy), and a 5 MB page holds 250,000 of them.
MAX_INDEX_LINKS = 20_000
NON_DOCUMENT_SCHEMES = {"mailto", "tel", "sms", "callto", "javascript", "about"}
ACCEPT = "text/html,application/xhtml+xml;q=0.9,text/plain;q=0.8,application/pdf;q=0.8,*/*;q=0.1"


@dataclass
class _Redirect:
    location: str


class _Session:
    def __init__(self, client: httpx.AsyncClient, check_before_request: bool) -> None:
        self.client = client
        self.check_before_request = check_before_request
        self.loop = asyncio.get_running_loop()
        self.robots_locks: dict[str, asyncio.Lock] = {}

    async def aclose(self) -> None:
        await self.client.aclose()


def _fmt_seconds(value: float) -> str:
    return f"{value:g}"


def _origin(url: str) -> tuple[str, str]:
    parts = urlsplit(url)
    host = (parts.hostname or "").lower()
    return f"{parts.scheme}://{parts.netloc.lower()}", host


class WebCrawler:
    """Fetches pages under a UrlPolicy; see the module docstring for the rules it enforces.

    Use it directly (each call opens and closes its own HTTP client) or as
    ``async with WebCrawler(settings) as crawler:`` to share one client across calls.
    From synchronous code: ``run(crawler.fetch_page(url))``.
    """

    def __init__(self, settings: RagSettings, *, transport: httpx.AsyncBaseTransport | None = None,
                 policy: UrlPolicy | None = None) -> None:
        self.settings = settings
        self.policy = policy or UrlPolicy(settings)
        self.user_agent = settings.crawl_user_agent
        self.timeout = float(settings.crawl_timeout_sec)
        self.max_bytes = int(settings.crawl_max_bytes)
        self.delay = float(settings.crawl_delay_sec)
        self.concurrency = max(1, min(int(settings.crawl_concurrency), MAX_CONCURRENCY))
        self.max_pages = int(settings.max_crawl_pages)
        self.respect_robots = bool(settings.crawl_respect_robots)
        self._transport = transport
        self._robots: dict[str, Robots] = {}
        self._next_slot: dict[str, float] = {}
        self._slot_lock = threading.Lock()
        self._session: _Session | None = None

    # -- session handling

    async def __aenter__(self) -> "WebCrawler":
        self._session = self._open_session()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        session, self._session = self._session, None
        if session is not None:
            await session.aclose()

    def _open_session(self) -> _Session:
        if self._transport is not None:
            transport: httpx.AsyncBaseTransport | None = BorrowedTransport(self._transport)
            check_before = True
        else:
            transport = pinned_transport(self.policy)
            check_before = transport is None
            if transport is None:
                transport = httpx.AsyncHTTPTransport(trust_env=False)
        client = httpx.AsyncClient(
            transport=transport, follow_redirects=False, trust_env=False,
            timeout=httpx.Timeout(self.timeout),
            headers={"User-Agent": self.user_agent, "Accept": ACCEPT, "Accept-Encoding": "gzip, deflate"},
        )
        return _Session(client, check_before)

    @asynccontextmanager
    async def _use_session(self) -> AsyncIterator[_Session]:
        current = self._session
        if current is not None and current.loop is asyncio.get_running_loop():
            yield current
            return
        session = self._open_session()
        try:
            yield session
        finally:
            await session.aclose()

    # -- politeness

    def _host_delay(self, origin: str) -> float:
        delay = self.delay
        robots = self._robots.get(origin)
        if self.respect_robots and robots is not None:
            extra = robots.crawl_delay(self.user_agent)
            if extra is not None and extra > delay:
                delay = min(extra, ROBOTS_MAX_DELAY_SEC)
        return delay

    async def _throttle(self, url: str) -> None:
        """Reserve the next request slot of the URL's host; starts are spaced by the delay."""
        origin, host = _origin(url)
        delay = self._host_delay(origin)
        with self._slot_lock:
            now = time.monotonic()
            start = max(now, self._next_slot.get(host, 0.0))
            self._next_slot[host] = start + delay
        wait = start - time.monotonic()
        if wait > 0:
            await asyncio.sleep(wait)

    async def _robots_for(self, session: _Session, url: str) -> Robots:
        origin, _host = _origin(url)
        cached = self._robots.get(origin)
        if cached is not None and cached.fresh():
            return cached
        lock = session.robots_locks.setdefault(origin, asyncio.Lock())
        async with lock:
            cached = self._robots.get(origin)
            if cached is None or not cached.fresh():
                cached = await self._load_robots(session, origin)
                cached.expires = time.monotonic() + cached.ttl()
                self._robots[origin] = cached
        return cached

    async def _load_robots(self, session: _Session, origin: str) -> Robots:
        async def fetch(robots_url: str) -> RawResponse:
            return await self._fetch_raw(session, robots_url, check_robots=False, any_type=True,
                                         truncate=True, max_bytes=ROBOTS_MAX_BYTES, error_statuses=False)

        return await load_robots(origin, fetch)

    async def _check_robots(self, session: _Session, url: str) -> None:
        robots = await self._robots_for(session, url)
        if robots.can_fetch(url, self.user_agent):
            return
        if robots.note:
            message = (f"{robots.note}; RFC 9309 treats an unreachable robots.txt as disallow-all. "
                       f"URL: {url}")
        else:
            message = (f"Disallowed by robots.txt for user agent {self.user_agent!r}. URL: {url}. "
                       "Set RAG_CRAWL_RESPECT_ROBOTS=false only for sites you own.")
        raise _refused(message, url, "robots")

    # -- one request chain

    async def _fetch_raw(self, session: _Session, url: str, *, etag: str | None = None,
                         last_modified: str | None = None, check_robots: bool = True,
                         any_type: bool = False, truncate: bool = False, max_bytes: int | None = None,
                         error_statuses: bool = True) -> RawResponse:
        requested = self.policy.check(url)
        current = requested
        for hop in range(MAX_REDIRECTS + 1):
            if hop:
                try:
                    current = self.policy.check(current)
                except CrawlRefused as exc:
                    raise _refused(f"Redirect refused: {exc.message}", requested) from None
            parts = urlsplit(current)
            if session.check_before_request:
                try:
                    await self.policy.check_resolved(parts.hostname or "", parts.port)
                except CrawlRefused as exc:
                    raise _refused(exc.message if not hop else f"Redirect refused: {exc.message}",
                                   requested) from None
            if check_robots and self.respect_robots:
                await self._check_robots(session, current)
            await self._throttle(current)
            try:
                result = await asyncio.wait_for(
                    self._one_request(session, requested, current, etag=etag, last_modified=last_modified,
                                      any_type=any_type, truncate=truncate,
                                      max_bytes=max_bytes or self.max_bytes, error_statuses=error_statuses),
                    timeout=self.timeout)
            except (asyncio.TimeoutError, httpx.TimeoutException):
                raise _fetch_error(f"Timed out after {_fmt_seconds(self.timeout)} s", "timeout",
                                   requested) from None
            except CrawlRefused as exc:  # raised by the pinned backend at connect time
                prefix = "Redirect refused: " if hop else ""
                raise _refused(prefix + exc.message, requested) from None
            except httpx.InvalidURL as exc:
                # httpx parses a redirect's Location before we see it: data:, javascript: and malformed
                # targets end here, and they are refused like any other URL outside the policy.
                raise _refused(f"Redirect refused: the redirect target is not an http(s) URL that may be "
                               f"crawled ({exc}). URL: {current}", requested) from None
            except httpx.HTTPError as exc:
                detail = str(exc) or type(exc).__name__
                raise _fetch_error(f"Network error fetching {current}: {detail}", "network",
                                   requested) from None
            if isinstance(result, _Redirect):
                current = urldefrag(urljoin(current, result.location))[0]
                continue
            return result
        raise _fetch_error(f"Too many redirects (more than {MAX_REDIRECTS}) starting at {requested}",
                           "http_status", requested)

    async def _one_request(self, session: _Session, requested: str, url: str, *, etag: str | None,
                           last_modified: str | None, any_type: bool, truncate: bool, max_bytes: int,
                           error_statuses: bool) -> RawResponse | _Redirect:
        headers: dict[str, str] = {}
        if etag:
            headers["If-None-Match"] = etag
        if last_modified:
            headers["If-Modified-Since"] = last_modified
        async with session.client.stream("GET", url, headers=headers) as response:
            status = response.status_code
            resp_etag = response.headers.get("etag")
            resp_lm = response.headers.get("last-modified")
            if status in REDIRECT_STATUSES:
                location = response.headers.get("location")
                if not location:
                    raise _fetch_error(f"HTTP {status} redirect without a Location header", "http_status",
                                       requested, status=status)
                return _Redirect(location.strip())
            if status == 304 and (etag or last_modified):
                return RawResponse(requested, url, status, "", None, b"", resp_etag or etag, resp_lm or last_modified,
                            not_modified=True)
            if error_statuses and not 200 <= status < 300:
                phrase = response.reason_phrase
                if not phrase:
                    try:
                        phrase = HTTPStatus(status).phrase
                    except ValueError:
                        phrase = ""
                raise _fetch_error(f"HTTP {status} {phrase}".strip(), "http_status", requested, status=status)
            content_type, charset = parse_content_type(response.headers.get("content-type", ""))
            if content_type and not any_type and not supported_type(content_type):
                raise _fetch_error(
                    f"Unsupported content type {content_type!r} (expected HTML, plain text or PDF). URL: {url}",
                    "content_type", requested, content_type=content_type)
            length = response.headers.get("content-length", "").strip()
            if length.isdigit() and int(length) > max_bytes and not truncate:
                raise _too_large(max_bytes, requested)
            encoding = response.headers.get("content-encoding", "")
            try:
                inflater = BoundedInflater(encoding, max_bytes)
            except UnsupportedEncoding:
                raise _fetch_error(f"Unsupported content encoding {encoding!r} (gzip and deflate are asked for). "
                                   f"URL: {url}", "content_type", requested) from None
            body = bytearray()
            try:
                # Raw network bytes, decoded here under the bound: httpx inflates each chunk whole.
                async for chunk in response.aiter_raw():
                    body += inflater.feed(chunk)
            except InflateLimitExceeded:
                if not truncate:
                    raise _too_large(max_bytes, requested) from None
            except zlib.error as exc:
                raise _fetch_error(f"The {encoding} body is corrupt ({exc}). URL: {url}", "network",
                                   requested) from None
        data = bytes(body)
        if not content_type and not any_type:
            content_type = sniff_type(data)
            if not content_type:
                raise _fetch_error(f"No content type and not recognisable as HTML or PDF. URL: {url}",
                                   "content_type", requested)
        return RawResponse(requested, url, status, content_type, charset, data, resp_etag, resp_lm)

    # -- public API

    async def fetch_page(self, url: str, *, etag: str | None = None,
                         last_modified: str | None = None) -> CrawledPage:
        """Fetch one page and extract its text.

        Raises CrawlRefused (policy or robots.txt), FetchError (timeout, HTTP status, size, content
        type, network) or LoaderError (no readable text). With validators, a 304 answer gives
        ``CrawledPage(not_modified=True, document=None)``. The URL is a start URL: its port is allowed.
        """
        self.policy.check(url, start=True)
        async with self._use_session() as session:
            raw = await self._fetch_raw(session, url, etag=etag, last_modified=last_modified)
        return await self._to_page(raw)

    async def _to_page(self, raw: RawResponse) -> CrawledPage:
        if raw.not_modified:
            return CrawledPage(url=raw.url, final_url=raw.final_url, status=raw.status, content_type="",
                               document=None, etag=raw.etag, last_modified=raw.last_modified,
                               not_modified=True)
        document = await asyncio.to_thread(load_document, raw)
        document.metadata.setdefault("source_url", raw.final_url)
        document.metadata.setdefault("crawled_at", datetime.now(timezone.utc).isoformat(timespec="seconds"))
        return CrawledPage(url=raw.url, final_url=raw.final_url, status=raw.status,
                           content_type=raw.content_type, document=document, etag=raw.etag,
                           last_modified=raw.last_modified)

    async def extract_links(self, index_url: str, pattern: str = "") -> tuple[list[str], list[PageError]]:
        """Links of one index page (depth 1, no recursion).

        ``<a href>`` targets are resolved against the page (and its ``<base href>``), the fragment
        is dropped, duplicates removed (page order kept), non-document links (mailto:, tel:,
        javascript: ...) skipped, the rest filtered by ``pattern`` (``re.search`` semantics on RE2, see
        ``link_matcher``) and checked by the policy: refused ones come back as PageError(reason="refused").
        At most RAG_MAX_CRAWL_PAGES links and as many refusals are returned; links after the last one kept,
        and past the first MAX_INDEX_LINKS, are not read. The index page itself failing raises.
        """
        matches = link_matcher(pattern)
        self.policy.check(index_url, start=True)  # the links may use the index page's port
        async with self._use_session() as session:
            raw = await self._fetch_raw(session, index_url)
        if raw.content_type not in HTML_TYPES:
            raise _fetch_error(f"The index page is not HTML ({raw.content_type}). URL: {raw.final_url}",
                               "content_type", raw.url)
        hrefs, base = await asyncio.to_thread(parse_links, raw)
        base_url = urljoin(raw.final_url, base) if base else raw.final_url
        links: list[str] = []
        errors: list[PageError] = []
        seen: set[str] = set()
        unread = max(0, len(hrefs) - MAX_INDEX_LINKS)
        unreported = 0
        for position, href in enumerate(hrefs[:MAX_INDEX_LINKS]):
            if len(links) >= self.max_pages:
                # The rest is not resolved or checked: a 5 MB page of 250,000 links cost 10 s of CPU here
                # (URL joins, the pattern and the policy for each) to keep the first 50.
                unread = len(hrefs) - position
                break
            href = href.strip()
            if not href or href.startswith("#"):
                continue
            scheme = href.split(":", 1)[0].strip().lower() if ":" in href else ""
            if scheme in NON_DOCUMENT_SCHEMES:
                continue
            absolute = urldefrag(urljoin(base_url, href))[0]
            if absolute in seen:
                continue
            seen.add(absolute)
            if matches is not None and not matches(absolute):
                continue
            try:
                normalized = self.policy.check(absolute)
            except CrawlRefused as exc:
                if len(errors) < self.max_pages:  # a report of 250,000 refusals would be 40 MB of JSON
                    errors.append(PageError(absolute, "refused", exc.message))
                else:
                    unreported += 1
                continue
            if normalized in seen and normalized != absolute:
                continue
            seen.add(normalized)
            links.append(normalized)
        if unread or unreported:
            logger.info("%s: %d links after the first RAG_MAX_CRAWL_PAGES=%d not read, %d more refused links not "
                        "reported", index_url, unread, self.max_pages, unreported)
        return links, errors

    async def fetch_many(
        self, urls: Iterable[str],
        validators: dict[str, tuple[str | None, str | None]] | None = None,
        on_result: Callable[[CrawledPage | PageError], Any] | None = None,
    ) -> list[CrawledPage | PageError]:
        """Fetch pages concurrently; one result per distinct URL, in input order.

        At most RAG_CRAWL_CONCURRENCY (<= 5) requests run at once; requests to one host start at
        least RAG_CRAWL_DELAY_SEC apart; a page's failure becomes a PageError and never stops the
        others. URLs beyond RAG_MAX_CRAWL_PAGES are not fetched (PageError "refused").
        ``validators`` maps a URL to (etag, last_modified) for conditional requests.
        ``on_result`` (sync or async) is called after each page, in completion order.
        """
        validators = validators or {}
        unique: list[str] = []
        seen: set[str] = set()
        for u in urls:
            if u not in seen:
                seen.add(u)
                unique.append(u)
        semaphore = asyncio.Semaphore(self.concurrency)
        results: list[CrawledPage | PageError | None] = [None] * len(unique)

        async def report(result: CrawledPage | PageError) -> None:
            if on_result is None:
                return
            try:
                outcome = on_result(result)
                if inspect.isawaitable(outcome):
                    await outcome
            except Exception:  # noqa: BLE001 - a progress callback must not stop the crawl
                logger.exception("on_result callback failed")

        async def one(index: int, url: str, session: _Session) -> None:
            result: CrawledPage | PageError
            if index >= self.max_pages:
                result = PageError(url, "refused",
                                   f"Page limit reached: at most RAG_MAX_CRAWL_PAGES={self.max_pages} "
                                   "pages per crawl.")
            else:
                etag, last_modified = _lookup_validators(validators, url, self.policy)
                async with semaphore:
                    try:
                        raw = await self._fetch_raw(session, url, etag=etag, last_modified=last_modified)
                        result = await self._to_page(raw)
                    except RagError as exc:
                        result = PageError(url, error_reason(exc), exc.message)
                    except Exception as exc:  # noqa: BLE001 - isolate unexpected failures per page
                        logger.exception("Unexpected error crawling %s", url)
                        result = PageError(url, "network", f"Unexpected error: {type(exc).__name__}: {exc}")
            results[index] = result
            await report(result)

        async with self._use_session() as session:
            await asyncio.gather(*(one(i, u, session) for i, u in enumerate(unique)))
        return [r for r in results if r is not None]



def _too_large(max_bytes: int, url: str) -> FetchError:
    return _fetch_error(f"Response larger than the limit of {max_bytes:,} bytes (RAG_CRAWL_MAX_BYTES)",
                        "too_large", url)


def _lookup_validators(validators: dict[str, tuple[str | None, str | None]], url: str,
                       policy: UrlPolicy) -> tuple[str | None, str | None]:
    if url in validators:
        return validators[url]
    try:
        normalized = policy.check(url)
    except CrawlRefused:
        return None, None
    return validators.get(normalized, (None, None))




def run(coro: Coroutine[Any, Any, T] | Awaitable[T]) -> T:
    """Run a crawler coroutine from synchronous code (a CLI, Streamlit, a notebook).

    ``asyncio.run`` when no event loop is running in this thread; otherwise the coroutine runs
    on a fresh loop in a worker thread and this call blocks until it finishes.
    """
    async def _await() -> T:
        return await coro

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(_await())
    with concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="crawler-run") as pool:
        return pool.submit(asyncio.run, _await()).result()
