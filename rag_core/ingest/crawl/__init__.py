"""Polite, SSRF-safe web crawler: index page -> links -> page texts (httpx + trafilatura).

One concern per module:

* ``rag_core.security.url_policy`` -- which URLs may be fetched (allowlist, ports, schemes, numeric
  hosts, private addresses); the crawler connects only to the addresses that policy checked.
* ``transport`` -- the DNS-pinned HTTP transport that connects to those checked addresses only.
* ``robots`` -- robots.txt records per origin (RFC 9309, parsed by protego).
* ``content`` -- content-type parsing and sniffing, text extraction, the links of a page.
* ``engine`` -- ``WebCrawler``: redirects, throttling, bounded bodies, fetch_page / extract_links /
  fetch_many; ``run`` calls its coroutines from synchronous code.
* ``results`` -- ``CrawledPage`` and ``PageError``.

Security model:

* Redirects are followed by hand (at most 5 hops); every hop goes through the same checks, and a
  redirect to something that is not an http(s) URL (``data:``, ``javascript:``) is refused.
* Bodies are streamed and cut off past ``RAG_CRAWL_MAX_BYTES``, compressed ones inflated piece by
  piece under the same bound (a gzip bomb never grows past it); each request has a deadline of
  ``RAG_CRAWL_TIMEOUT_SEC``; environment proxies are ignored (a proxy would bypass the checks).

Politeness: an identifiable User-Agent, robots.txt (cached per origin, Crawl-delay honoured when
larger than ``RAG_CRAWL_DELAY_SEC``), at least ``RAG_CRAWL_DELAY_SEC`` between the starts of two
requests to the same host, at most ``RAG_CRAWL_CONCURRENCY`` (<= 5) requests at once, at most
``RAG_MAX_CRAWL_PAGES`` pages per crawl.
"""

from rag_core.ingest.crawl.engine import WebCrawler, run
from rag_core.ingest.crawl.results import CrawledPage, PageError, error_reason

__all__ = ["CrawledPage", "PageError", "WebCrawler", "error_reason", "run"]
