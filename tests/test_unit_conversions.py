"""Durations, 'since' filters and byte sizes as people write and read them (rag_core.units)."""

from __future__ import annotations

import datetime as dt

import pytest

from rag_core.errors import InvalidInput
from rag_core.units import decimal_size, human_size, parse_duration, parse_since


def test_durations_take_a_unit_and_a_bare_number_is_days() -> None:
    assert parse_duration("7d") == dt.timedelta(days=7)
    assert parse_duration(" 12H ") == dt.timedelta(hours=12)
    assert parse_duration("2w") == dt.timedelta(weeks=2)
    assert parse_duration("30") == dt.timedelta(days=30)
    for bad in ("yesterday", "0d", "-3d", ""):
        with pytest.raises(InvalidInput, match="duration"):
            parse_duration(bad)


def test_since_is_a_duration_or_a_date_and_other_text_names_the_field() -> None:
    assert parse_since("7d") == dt.timedelta(days=7)
    assert parse_since("2024-01-31") == dt.datetime(2024, 1, 31)
    assert parse_since("  ") is None and parse_since(None) is None
    moment = dt.datetime(2025, 5, 1, tzinfo=dt.timezone.utc)
    assert parse_since(moment) is moment
    with pytest.raises(InvalidInput, match="since 'soon' is neither a duration") as info:
        parse_since("soon")
    assert info.value.details == {"field": "since"}


def test_sizes_in_binary_units_for_results_and_decimal_megabytes_for_limits() -> None:
    assert [human_size(n) for n in (0, 512, 14_540, 2_516_582)] == ["0B", "512B", "14.2KB", "2.4MB"]
    assert human_size(3 * 1024 ** 3, sep=" ") == "3.0 GB"
    assert decimal_size(80_000_000) == "80.0 MB" and decimal_size(50_000_000, exact=True) == "50 MB"
    assert decimal_size(99_999) == "99999 bytes"
