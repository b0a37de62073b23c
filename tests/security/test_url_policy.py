"""The crawler's URL policy alone (no network): ports, `host:port` entries and numeric hosts."""

from __future__ import annotations

from typing import Any

import pytest

from rag_core.errors import CrawlRefused
from rag_core.security.url_policy import UrlPolicy, normalize_host
from rag_core.settings import RagSettings


def policy(*allowed: str, private: bool = True) -> UrlPolicy:
    return UrlPolicy(RagSettings(_env_file=None, allowed_domains=list(allowed), allow_private_networks=private))


def refused(p: UrlPolicy, url: str, **kwargs: Any) -> str:
    with pytest.raises(CrawlRefused) as info:
        p.check(url, **kwargs)
    return info.value.message


def test_an_entry_without_a_port_allows_80_443_and_the_start_urls_port_only() -> None:
    p = policy("127.0.0.1", "example.com")
    assert p.check("http://127.0.0.1/a") == "http://127.0.0.1/a"
    assert p.check("https://docs.example.com:443/") == "https://docs.example.com/"
    message = refused(p, "http://127.0.0.1:6379/")  # a link or redirect to another port: a port probe
    assert "Port 6379 of 127.0.0.1 is not allowed" in message and "'127.0.0.1:6379'" in message
    assert p.check("http://127.0.0.1:8123/index.html", start=True) == "http://127.0.0.1:8123/index.html"
    assert p.check("http://127.0.0.1:8123/other.html") == "http://127.0.0.1:8123/other.html"
    refused(p, "http://127.0.0.1:8124/")
    refused(p, "http://example.com:8123/")  # the start port belongs to its own host only


def test_host_port_entries() -> None:
    p = policy("docs.example.com:8080", "[::1]:9000", "http://intra.example.org:8443/path", "10.0.0.5:22")
    assert p.allowed_domains == ("docs.example.com", "::1", "intra.example.org", "10.0.0.5")
    assert p.check("http://docs.example.com:8080/x") == "http://docs.example.com:8080/x"
    assert p.check("http://a.docs.example.com:8080/") == "http://a.docs.example.com:8080/"
    assert p.check("http://docs.example.com/") == "http://docs.example.com/"
    assert p.check("http://[::1]:9000/") == "http://[::1]:9000/"
    assert p.check("https://intra.example.org:8443/") == "https://intra.example.org:8443/"
    refused(p, "http://docs.example.com:8081/")
    refused(p, "http://[::1]:9001/")


@pytest.mark.parametrize("entry", ["example.com:http", "example.com:70000", "[::1]x", "0177.0.0.1"])
def test_bad_entries_are_ignored(entry: str) -> None:
    assert policy(entry, "ok.example").allowed_domains == ("ok.example",)


@pytest.mark.parametrize("host", ["0177.0.0.1", "0x7f.0.0.1", "0x7f.1", "127.1", "2130706433", "127.0.0.01",
                                  "017700000001", "1.2.3.4.5"])
def test_numeric_hosts_that_are_not_plain_ipv4_are_refused_cleanly(host: str) -> None:
    with pytest.raises(ValueError, match="four decimal numbers"):
        normalize_host(host)
    # Even allowlisted by the same spelling: refused with a message, never an exception from the HTTP client.
    message = refused(policy(host, "127.0.0.1", private=False), f"http://{host}/")
    assert "four decimal numbers" in message


def test_plain_dotted_decimal_and_names_with_digits_still_work() -> None:
    assert normalize_host("93.184.216.34") == "93.184.216.34"
    assert normalize_host("web1.example.com") == "web1.example.com"
    assert normalize_host("123.example.com") == "123.example.com"


@pytest.mark.parametrize("url", ["data:text/html,<b>x</b>", "data:,x", "javascript:alert(1)"])
def test_data_and_javascript_urls_are_refused(url: str) -> None:
    assert "Only http:// and https://" in refused(policy("example.com"), url)


def test_canonical_url_is_the_form_the_policy_returns_without_needing_an_allowlist() -> None:
    from rag_core.security.url_policy import canonical_url

    url = "HTTPS://Bücher.Example.:443/Straße mit Leer?q=ä b"
    expected = "https://xn--bcher-kva.example/Stra%C3%9Fe%20mit%20Leer?q=%C3%A4%20b"
    assert canonical_url(url) == expected
    assert policy("bücher.example").check(url) == expected
    assert canonical_url("http://example.com:8080") == "http://example.com:8080/"
    with pytest.raises(ValueError):
        canonical_url("http://0x7f.1/")
