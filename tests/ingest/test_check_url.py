"""Workbench.check_url: the crawl policy's verdict on a URL without fetching it."""

from __future__ import annotations

import pytest

from rag_core.errors import CrawlRefused


def test_allowed_url_comes_back_normalised_without_a_request(wb) -> None:
    # .test never resolves: a DNS lookup or a fetch here would fail the call.
    policy_wb = wb.variant(allowed_domains=["docs.example.test"])
    assert policy_wb.check_url("HTTPS://Docs.Example.Test:443/guide") == "https://docs.example.test/guide"


def test_refusal_is_the_crawlers_own_text(wb) -> None:
    policy_wb = wb.variant(allowed_domains=["docs.example.test"])
    with pytest.raises(CrawlRefused) as checked:
        policy_wb.check_url("https://malicious-site.test/page")
    with pytest.raises(CrawlRefused) as ingested:
        policy_wb.ingest_url("https://malicious-site.test/page", site_id="t-check-url")
    assert checked.value.message == ingested.value.message
    assert "Domain not in allowlist: malicious-site.test" in checked.value.message
    assert "RAG_ALLOWED_DOMAINS" in checked.value.message


def test_without_an_allowlist_everything_is_refused(wb) -> None:
    with pytest.raises(CrawlRefused, match="no allowed domains are configured"):
        wb.variant(allowed_domains=[]).check_url("https://docs.example.test/")
