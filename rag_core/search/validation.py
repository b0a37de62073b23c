"""Validation of search parameters (the search spec): every problem is an InvalidQuery naming the fix."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any, Iterable

from rag_core.errors import InvalidQuery
from rag_core.limits import MAX_QUERY_CHARS
from rag_core.security.text import text_problem

MODES = ("hybrid", "semantic", "fulltext")
# The document types the loaders produce (rag_core.ingest.loaders); the spec names pdf, docx, xlsx, txt.
DOCUMENT_TYPES = ("pdf", "docx", "xlsx", "txt", "md", "csv", "html")
_TYPE_ALIASES = {"markdown": "md", "htm": "html", "text": "txt"}
LIMIT_RANGE = (1, 50)
MAX_PAGE = 10_000  # 500,000 results at 50 a page: past it a number is a typo or a probe, not a reader
MAX_CHUNKS_RANGE = (1, 10)
MAX_SOURCE_CHARS = 1000


@dataclass(frozen=True)
class SearchRequest:
    """A validated search: what the ranking SQL, the cache key and the query log use."""

    query: str
    mode: str = "hybrid"
    limit: int = 10
    page: int = 1
    types: tuple[str, ...] = ()
    date_from: dt.date | None = None
    date_to: dt.date | None = None
    source: str | None = None
    site_id: str | None = None
    include_context: bool = True
    max_chunks: int = 3

    @property
    def offset(self) -> int:
        return (self.page - 1) * self.limit

    @property
    def has_filters(self) -> bool:
        return bool(self.types or self.date_from or self.date_to or self.source)

    def cache_key(self) -> tuple:
        return (self.query, self.mode, self.limit, self.page, self.types, self.date_from, self.date_to,
                self.source, self.site_id, self.include_context, self.max_chunks)

    def log_params(self) -> dict[str, Any]:
        """The parameters stored in query_log.params (JSON-safe)."""
        return {"mode": self.mode, "limit": self.limit, "page": self.page, "types": list(self.types),
                "date_from": self.date_from.isoformat() if self.date_from else None,
                "date_to": self.date_to.isoformat() if self.date_to else None, "source": self.source,
                "site_id": self.site_id, "include_context": self.include_context, "max_chunks": self.max_chunks}


def _invalid(message: str, field_name: str, value: Any, allowed: str | None = None) -> InvalidQuery:
    details: dict[str, Any] = {"field": field_name, "value": value if isinstance(value, (int, str, type(None))) else repr(value)}
    if allowed:
        details["allowed"] = allowed
    return InvalidQuery(message, details=details)


def _int(value: Any, name: str, low: int, high: int | None) -> int:
    if isinstance(value, bool) or value is None:
        raise _invalid(f"{name} must be a whole number; got {value!r}.", name, value)
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        value = int(value.strip())
    if not isinstance(value, int):
        raise _invalid(f"{name} must be a whole number; got {value!r}.", name, value)
    if value < low or (high is not None and value > high):
        allowed = f"{low}-{high}" if high is not None else f">= {low}"
        raise _invalid(f"{name} is {value}; choose {allowed}.", name, value, allowed)
    return value


def _date(value: Any, name: str) -> dt.date | None:
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if isinstance(value, dt.datetime):
        return value.date()
    if isinstance(value, dt.date):
        return value
    if isinstance(value, str):
        try:
            return dt.date.fromisoformat(value.strip())
        except ValueError:
            pass
    raise _invalid(f"{name} '{value}' is not a date; write it as YYYY-MM-DD, e.g. 2024-01-31.", name, value,
                   "YYYY-MM-DD")


def _types(value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    items: Iterable[Any] = value.split(",") if isinstance(value, str) else value
    if not isinstance(items, (list, tuple, set, frozenset)) and not isinstance(value, str):
        raise _invalid("types must be a list of document types, e.g. ['pdf', 'docx'].", "types", value,
                       ", ".join(DOCUMENT_TYPES))
    found: list[str] = []
    for item in items:
        if not isinstance(item, str):
            raise _invalid(f"document type {item!r} is not text; choose from {', '.join(DOCUMENT_TYPES)}.",
                           "types", item, ", ".join(DOCUMENT_TYPES))
        name = item.strip().lower().lstrip(".")
        if not name:
            continue
        name = _TYPE_ALIASES.get(name, name)
        if name not in DOCUMENT_TYPES:
            raise _invalid(f"Unknown document type '{item.strip()}'; choose from {', '.join(DOCUMENT_TYPES)}.",
                           "types", item, ", ".join(DOCUMENT_TYPES))
        if name not in found:
            found.append(name)
    return tuple(sorted(found))


def validate_search(query: Any, *, mode: Any = "hybrid", limit: Any = 10, page: Any = 1, types: Any = None,
                    date_from: Any = None, date_to: Any = None, source: Any = None, site_id: Any = None,
                    include_context: Any = True, max_chunks: Any = 3) -> SearchRequest:
    """Check every parameter; the first problem raises InvalidQuery with the field in `details`."""
    if not isinstance(query, str):
        raise _invalid("The query must be text.", "query", query)
    # NUL and lone surrogates cannot reach PostgreSQL; runs of whitespace become one space.
    text = query.replace("\x00", " ").encode("utf-8", "replace").decode("utf-8")
    text = " ".join(text.split())
    if not text:
        raise _invalid("The query is empty; type what you are looking for.", "query", query, "1-500 characters")
    if len(text) > MAX_QUERY_CHARS:
        raise _invalid(f"Query is {len(text)} characters; the limit is {MAX_QUERY_CHARS}.", "query", len(text),
                       f"1-{MAX_QUERY_CHARS} characters")
    if not isinstance(mode, str) or mode.strip().lower() not in MODES:
        raise _invalid(f"Unknown search mode {mode!r}; choose one of: {', '.join(MODES)}.", "mode", mode,
                       ", ".join(MODES))
    lim = _int(limit, "limit", *LIMIT_RANGE)
    chunks = _int(max_chunks, "max_chunks", *MAX_CHUNKS_RANGE)
    pg = _int(page, "page", 1, MAX_PAGE)
    start, end = _date(date_from, "date_from"), _date(date_to, "date_to")
    if end == dt.date.max:
        end = None  # "until the last day there is" bounds nothing; the day after it cannot be written
    if start and end and start > end:
        raise InvalidQuery(f"date_from {start.isoformat()} is after date_to {end.isoformat()}; swap them.",
                           details={"field": "date_from", "date_from": start.isoformat(), "date_to": end.isoformat()})
    src = None
    if source is not None:
        if not isinstance(source, str):
            raise _invalid("source must be text: a path or URL prefix.", "source", source)
        src = source.strip() or None
        problem = text_problem(src) if src else None
        if problem:
            raise _invalid(f"source {problem}.", "source", repr(src)[:60])
        if src and len(src) > MAX_SOURCE_CHARS:
            raise _invalid(f"source is {len(src)} characters; the limit is {MAX_SOURCE_CHARS}.", "source", len(src))
    if site_id is not None and (not isinstance(site_id, str) or not site_id.strip()):
        raise _invalid("site_id must be a non-empty text, or None for every site.", "site_id", site_id)
    if not isinstance(include_context, bool):
        raise _invalid("include_context must be true or false.", "include_context", include_context)
    return SearchRequest(query=text, mode=mode.strip().lower(), limit=lim, page=pg, types=_types(types),
                         date_from=start, date_to=end, source=src, site_id=site_id.strip() if site_id else None,
                         include_context=include_context, max_chunks=chunks)
