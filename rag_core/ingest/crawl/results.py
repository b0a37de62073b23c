"""What a crawl gives back: a fetched page, or the reason one page could not be crawled."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from rag_core.errors import CrawlRefused, LoaderError
from rag_core.ingest.loaders import LoadedDocument

Reason = Literal["refused", "robots", "timeout", "http_status", "too_large", "content_type", "network", "extract"]


@dataclass
class CrawledPage:
    """One fetched page. ``document`` is None when the server answered 304 Not Modified."""

    url: str                 # as requested (normalised)
    final_url: str           # after redirects
    status: int
    content_type: str
    document: LoadedDocument | None
    etag: str | None
    last_modified: str | None
    not_modified: bool = False


@dataclass
class PageError:
    """A page that could not be crawled; ``reason`` is one of the ``Reason`` values."""

    url: str
    reason: str
    message: str


def error_reason(exc: BaseException) -> str:
    """The PageError reason of an exception raised by the crawler."""
    details = getattr(exc, "details", None)
    if isinstance(details, dict) and details.get("reason"):
        return str(details["reason"])
    if isinstance(exc, CrawlRefused):
        return "refused"
    if isinstance(exc, LoaderError):
        return "extract"
    return "network"

