"""Error classes: each carries a stable code and an HTTP status, and a message safe to show a user."""

from __future__ import annotations

from typing import Any


class RagError(Exception):
    """Base of every error the workbench raises on purpose."""

    code = "INTERNAL"
    status = 500

    def __init__(self, message: str, details: Any = None) -> None:
        super().__init__(message)
        self.message = message
        self.details = details

    def to_dict(self) -> dict[str, Any]:
        """The error body every surface returns: the search spec's shape."""
        body: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.details is not None:
            body["details"] = self.details
        return {"success": False, "error": body}


class ConfigError(RagError):
    """A setting is missing or has a value the program cannot use."""

    code = "CONFIG_ERROR"
    status = 500


class InvalidQuery(RagError):
    code = "INVALID_QUERY"
    status = 400


class InvalidInput(RagError):
    """Bad input to an operation other than search (a path, a URL, a role...)."""

    code = "INVALID_INPUT"
    status = 400


class NotFound(RagError):
    code = "NOT_FOUND"
    status = 404


class IndexUnavailable(RagError):
    """Nothing is indexed where the caller searched: the caller's condition (ingest first), so a 4xx."""

    code = "INDEX_UNAVAILABLE"
    status = 404


class DatabaseError(RagError):
    code = "DATABASE_ERROR"
    status = 503


class EmbedderMismatch(RagError):
    """The store was built with another embedder or dimension than the one configured."""

    code = "EMBEDDER_MISMATCH"
    status = 409


class Unauthorized(RagError):
    code = "UNAUTHORIZED"
    status = 401


class RateLimited(RagError):
    code = "RATE_LIMIT"
    status = 429


class CrawlRefused(RagError):
    """A URL was refused by the crawl policy (allowlist, scheme, private address, robots.txt)."""

    code = "CRAWL_REFUSED"
    status = 403


class FetchError(RagError):
    """A page or file could not be fetched (timeout, HTTP status, size, content type)."""

    code = "FETCH_ERROR"
    status = 502


class ChecksumMismatch(FetchError):
    """A downloaded file is not the pinned one: it changed upstream or was damaged on the way."""

    code = "CHECKSUM_MISMATCH"


class LoaderError(RagError):
    """A file could not be read into text (corrupt, empty, unreadable encoding, unsupported type)."""

    code = "LOADER_ERROR"
    status = 422


class LLMError(RagError):
    code = "LLM_ERROR"
    status = 502
