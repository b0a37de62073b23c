"""Human-readable quantities, read and written in one place: durations ("7d", "12h"), points in
time ("7d" ago or an ISO date), byte sizes ("14.2KB") and counts of things ("1 message", "2 messages")."""

from __future__ import annotations

import datetime as dt
import re
from datetime import timedelta

from rag_core.errors import InvalidInput

_UNITS = {"w": "weeks", "d": "days", "h": "hours", "m": "minutes", "s": "seconds"}
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([wdhms]?)\s*$", re.IGNORECASE)


def counted(n: int, noun: str) -> str:
    """`n` and the noun in its English number: "1 message", "0 messages", "2 sessions"."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def parse_duration(text: str) -> timedelta:
    """`30d`, `12h`, `90m` (also `2w`, `45s`; a bare number means days) as a timedelta."""
    match = _DURATION.match(text or "")
    if not match:
        raise InvalidInput(f"'{text}' is not a duration; write a number and a unit, e.g. 30d, 12h or 90m.")
    value, unit = float(match.group(1)), (match.group(2) or "d").lower()
    try:
        delta = timedelta(**{_UNITS[unit]: value})
    except OverflowError:
        raise InvalidInput(f"'{text}' is longer than any duration can be; e.g. 30d, 12h or 90m.") from None
    if delta <= timedelta(0):
        raise InvalidInput(f"'{text}' is not a positive duration; e.g. 30d, 12h or 90m.")
    return delta


def parse_since(value: str | dt.datetime | timedelta | None) -> dt.datetime | timedelta | None:
    """A 'since' filter: a duration back from now (`7d`, `12h`) or a date/time (`2024-01-31`).

    Datetimes, timedeltas and None pass through; text that is neither raises InvalidInput.
    """
    if not isinstance(value, str):
        return value
    if not value.strip():
        return None
    if _DURATION.match(value):
        delta = parse_duration(value)
        if delta > dt.datetime.now(dt.timezone.utc) - dt.datetime.min.replace(tzinfo=dt.timezone.utc):
            raise InvalidInput(f"since '{value}' reaches back before the year 1; give a shorter duration "
                               "(e.g. 365d) or a date.", details={"field": "since"})
        return delta
    try:
        return dt.datetime.fromisoformat(value.strip())
    except ValueError:
        raise InvalidInput(f"since '{value}' is neither a duration (7d, 12h) nor a date (2024-01-31).",
                           details={"field": "since"}) from None


def human_size(n: int | float, sep: str = "") -> str:
    """Bytes in binary units as the search results show them: 512B, 14.2KB, 2.4MB (``sep`` goes
    between number and unit)."""
    value = float(n or 0)
    for unit in ("B", "KB", "MB", "GB"):
        if value < 1024 or unit == "GB":
            return f"{int(value)}{sep}B" if unit == "B" else f"{value:.1f}{sep}{unit}"
        value /= 1024
    return f"{value:.1f}{sep}TB"


def decimal_size(n: int, exact: bool = False) -> str:
    """Bytes in decimal megabytes, the unit of size limits such as RAG_MAX_FILE_MB: 80.0 MB, or
    50 MB with ``exact`` (no trailing .0); under 100 kB in bytes."""
    if n < 100_000:
        return f"{n} bytes"
    return f"{round(n / 1e6, 1):g} MB" if exact else f"{n / 1e6:.1f} MB"
