"""The document every loader returns, and the text clean-up they share."""

from __future__ import annotations

import datetime as _dt
import re
from dataclasses import dataclass, field
from email.utils import parsedate_to_datetime
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import unquote, urlsplit

from rag_core.errors import LoaderError
from rag_core.limits import MAX_DOCUMENT_CHARS


@dataclass
class LoadedDocument:
    """A source turned into one text; `pages` holds (page_number, start_char, end_char) spans."""

    text: str
    title: str
    file_type: str
    pages: list[tuple[int, int, int]] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)
    language: str | None = None


def check_text_size(chars: int, label: str) -> None:
    """Refuse a document whose extracted text passes MAX_DOCUMENT_CHARS: every character gets embedded."""
    if chars > MAX_DOCUMENT_CHARS:
        raise LoaderError(f"{label} holds more than {MAX_DOCUMENT_CHARS} characters of text; the limit per "
                          "document is that. Split it into smaller files.",
                          details={"chars": chars, "limit": MAX_DOCUMENT_CHARS})


def stem_of(name: str, url: str | None) -> str:
    """A fallback title: the file name without suffix, else the last segment of the URL path."""
    if name:
        return Path(name).stem or name
    if url:
        try:
            parts = urlsplit(url)
        except ValueError:
            return url
        segment = unquote(PurePosixPath(parts.path).name)
        return PurePosixPath(segment).stem or segment or parts.netloc or url
    return ""


def normalise_newlines(text: str) -> str:
    return text.replace("\r\n", "\n").replace("\r", "\n")


def clean(text: str) -> str:
    """Newlines to LF, NULs removed (PostgreSQL text cannot hold them), outer blank space trimmed."""
    text = normalise_newlines(text).replace("\x00", "")
    # Drop leading blank lines but keep a first line's indentation; drop trailing whitespace.
    return re.sub(r"\A(?:[^\S\n]*\n)+", "", text).rstrip()


def parse_date(value: Any) -> _dt.datetime | None:
    """An ISO 8601 or RFC 2822 date (a Last-Modified header) as an aware datetime (UTC when it names no zone),
    else None."""
    if not value:
        return None
    if isinstance(value, _dt.datetime):
        parsed: _dt.datetime | None = value
    else:
        try:
            parsed = _dt.datetime.fromisoformat(str(value).strip().replace("Z", "+00:00"))
        except ValueError:
            try:
                parsed = parsedate_to_datetime(str(value))
            except (TypeError, ValueError, IndexError):
                return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=_dt.timezone.utc)


def document_date(metadata: dict[str, Any]) -> _dt.datetime | None:
    """The date a document gives itself: last modified, else created (PDF, DOCX and XLSX properties), else an
    HTML page's date."""
    for key in ("modified_at", "created_at", "date"):
        parsed = parse_date(metadata.get(key))
        if parsed is not None:
            return parsed
    return None


def json_safe(value: Any) -> Any:
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (_dt.datetime, _dt.date, _dt.time)):
        return value.isoformat()
    return str(value)
