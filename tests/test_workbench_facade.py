"""The facade's own arguments: a loaded embedder passed in, and 'since' written as text."""

from __future__ import annotations

import datetime as dt

import pytest

from rag_core.errors import InvalidInput


def test_open_workbench_uses_the_embedder_it_is_given(wb, make_settings) -> None:
    from rag_core import open_workbench

    with open_workbench(make_settings(), embedder=wb.embedder) as other:
        assert other.embedder is wb.embedder
        assert other.embedder_mismatch() is None
    assert wb.variant(chunk_size=300, chunk_overlap=30).embedder is wb.embedder


def test_search_metrics_read_since_as_text_and_refuse_what_is_not_a_time(wb, site) -> None:
    wb.ingest_text("units.md", "Durations such as seven days are written 7d.", site_id=site)
    wb.search("seven days", site_id=site)
    assert wb.search_metrics(site_id=site, since="7d")["searches"] == 1
    assert wb.search_metrics(site_id=site, since=dt.timedelta(days=7))["searches"] == 1
    assert wb.search_metrics(site_id=site, since="2999-01-01")["searches"] == 0
    assert len(wb.query_log(site_id=site, since="12h")) == 1
    with pytest.raises(InvalidInput, match="since 'last week' is neither a duration"):
        wb.search_metrics(site_id=site, since="last week")
