"""WebCrawler and UrlPolicy (the web-knowledge spec) against a real HTTP server on 127.0.0.1.

The server (tests/crawl_server.py) is started by the tests themselves (random port); no other
host is ever contacted: names such as evil.test are refused before any connection, and the
DNS-rebinding tests use a policy whose resolver maps test names to loopback addresses.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import pytest
from crawl_server import Route, base_url, serve

from rag_core.errors import CrawlRefused, FetchError, InvalidInput
from rag_core.ingest.crawl import CrawledPage, PageError, WebCrawler, run
from rag_core.security.url_policy import UrlPolicy, is_blocked_address, normalize_host
from rag_core.settings import RagSettings

UA = "RAG-Workbench-Test/1.0 (+https://example.invalid/bot)"




def make_settings(**overrides: Any) -> RagSettings:
    values: dict[str, Any] = dict(
        allowed_domains=["127.0.0.1"], allow_private_networks=True, crawl_delay_sec=0.0,
        crawl_timeout_sec=0.5, crawl_max_bytes=64 * 1024, crawl_concurrency=5, max_crawl_pages=50,
        crawl_respect_robots=True, crawl_user_agent=UA,
    )
    values.update(overrides)
    return RagSettings(_env_file=None, **values)


def served(srv: Any) -> list[str]:
    """An allowlist entry for the test server's own port: fetch_many's URLs are links, not start URLs."""
    return [f"127.0.0.1:{srv.server_address[1]}"]


def refused(fn: Callable[[], Any]) -> CrawlRefused:
    with pytest.raises(CrawlRefused) as info:
        fn()
    return info.value


# --------------------------------------------------------------------------- policy (no server)


def test_ac33_empty_allowlist_rejects_all() -> None:
    settings = make_settings(allowed_domains=[])
    err = refused(lambda: UrlPolicy(settings).check("https://example.com/page"))
    assert "RAG_ALLOWED_DOMAINS=example.com,docs.python.org" in err.message
    assert err.details["reason"] == "refused"
    crawler = WebCrawler(settings)
    refused(lambda: asyncio.run(crawler.fetch_page("https://example.com/page")))
    refused(lambda: asyncio.run(crawler.extract_links("https://example.com/")))
    [result] = asyncio.run(crawler.fetch_many(["https://example.com/page"]))
    assert isinstance(result, PageError) and result.reason == "refused"
    assert "RAG_ALLOWED_DOMAINS" in result.message


def test_ac30_disallowed_domain_rejected() -> None:
    policy = UrlPolicy(make_settings(allowed_domains=["example.com", "docs.python.org"],
                                     allow_private_networks=False))
    err = refused(lambda: policy.check("https://malicious-site.com/page"))
    assert "URL: https://malicious-site.com/page" in err.message
    assert "Allowed domains: example.com, docs.python.org" in err.message
    assert "RAG_ALLOWED_DOMAINS" in err.message


@pytest.mark.parametrize("url,ok", [
    ("https://example.com/a", True),
    ("https://docs.example.com/a", True),
    ("https://a.b.example.com/a", True),
    ("https://EXAMPLE.COM./a", True),
    ("https://Docs.Example.Com/a", True),
    ("https://evil-example.com/a", False),
    ("https://example.com.evil.net/a", False),
    ("https://notexample.com/a", False),
    ("https://example.co/a", False),
    ("https://com/a", False),
])
def test_subdomain_rule(url: str, ok: bool) -> None:
    """`example.com` allows example.com and *.example.com, nothing that merely contains it."""
    policy = UrlPolicy(make_settings(allowed_domains=["example.com"], allow_private_networks=False))
    if ok:
        assert policy.check(url).startswith("https://")
    else:
        refused(lambda: policy.check(url))


def test_host_normalisation_and_idna() -> None:
    policy = UrlPolicy(make_settings(allowed_domains=["Bücher.de.", "*.Example.org"],
                                     allow_private_networks=False))
    assert policy.allowed_domains == ("xn--bcher-kva.de", "example.org")
    assert policy.check("http://BÜCHER.de/ä?q=ü#frag") == "http://xn--bcher-kva.de/%C3%A4?q=%C3%BC"
    assert policy.check("http://xn--bcher-kva.de:80/") == "http://xn--bcher-kva.de/"
    assert policy.check("https://www.example.org:8443", start=True) == "https://www.example.org:8443/"
    assert normalize_host("WWW.Example.ORG.") == "www.example.org"
    with pytest.raises(ValueError):
        normalize_host("exa mple.org")


@pytest.mark.parametrize("url", [
    "file:///etc/passwd", "ftp://example.com/file", "javascript:alert(1)",
    "data:text/html,<h1>x</h1>", "gopher://example.com/", "example.com/no-scheme", "//example.com/x",
])
def test_ac31_non_http_scheme_rejected(url: str) -> None:
    policy = UrlPolicy(make_settings(allowed_domains=["example.com"]))
    err = refused(lambda: policy.check(url))
    assert "http" in err.message


@pytest.mark.parametrize("url", [
    "http://user@example.com/", "http://user:secret@example.com/", "http://example.com@evil.net/",
])
def test_userinfo_refused(url: str) -> None:
    policy = UrlPolicy(make_settings(allowed_domains=["example.com", "evil.net"]))
    assert "user" in refused(lambda: policy.check(url)).message


PRIVATE_HOSTS = ["127.0.0.1", "10.0.0.1", "169.254.169.254", "::1", "localhost", "172.16.5.4",
                 "192.168.1.10", "100.64.0.1", "0.0.0.0", "fe80::1", "fc00::1", "224.0.0.1",
                 "::ffff:127.0.0.1"]


@pytest.mark.parametrize("host", PRIVATE_HOSTS)
def test_private_addresses_refused(host: str) -> None:
    """Even when allowlisted, private/loopback/link-local/metadata hosts need allow_private_networks."""
    url_host = f"[{host}]" if ":" in host else host
    allowed = [host, "::ffff:7f00:1"]
    policy = UrlPolicy(make_settings(allowed_domains=allowed, allow_private_networks=False))
    err = refused(lambda: policy.check(f"http://{url_host}/latest/meta-data"))
    assert "RAG_ALLOW_PRIVATE_NETWORKS" in err.message
    open_policy = UrlPolicy(make_settings(allowed_domains=allowed, allow_private_networks=True))
    assert open_policy.check(f"http://{url_host}/x").endswith("/x")


def test_hostname_resolving_to_loopback_refused() -> None:
    """`localhost` passes the allowlist by name, but its addresses are loopback."""
    policy = UrlPolicy(make_settings(allowed_domains=["localhost"], allow_private_networks=False))
    err = refused(lambda: asyncio.run(policy.check_resolved("localhost")))
    assert "127.0.0.1" in err.message or "::1" in err.message
    open_policy = UrlPolicy(make_settings(allowed_domains=["localhost"], allow_private_networks=True))
    assert asyncio.run(open_policy.check_resolved("localhost"))


@pytest.mark.parametrize("address,blocked", [
    ("8.8.8.8", False), ("93.184.216.34", False), ("2606:4700:4700::1111", False),
    ("127.0.0.1", True), ("127.9.9.9", True), ("10.1.2.3", True), ("172.31.255.255", True),
    ("192.168.0.1", True), ("169.254.169.254", True), ("0.0.0.0", True), ("100.64.0.1", True),
    ("100.100.100.200", True), ("224.0.0.251", True), ("255.255.255.255", True), ("::", True),
    ("::1", True), ("fc00::1", True), ("fd00:ec2::254", True), ("fe80::1", True), ("ff02::1", True),
    ("::ffff:127.0.0.1", True), ("::ffff:10.0.0.1", True), ("::ffff:8.8.8.8", False),
    ("64:ff9b::a00:1", True), ("2002:7f00:1::", True), ("not-an-ip", True),
])
def test_is_blocked_address(address: str, blocked: bool) -> None:
    assert is_blocked_address(address) is blocked


# --------------------------------------------------------------------------- links


def test_ac12_ac13_ac32_extract_links(srv: Any) -> None:
    base = base_url(srv)
    crawler = WebCrawler(make_settings())
    links, errors = asyncio.run(crawler.extract_links(f"{base}/index.html", r"/articles/"))
    assert links == [f"{base}/articles/a1.html", f"{base}/articles/a2.html", f"{base}/articles/a3.html"]
    assert [(e.url, e.reason) for e in errors] == [("http://evil.test/articles/steal.html", "refused")]
    assert "Allowed domains: 127.0.0.1" in errors[0].message

    links, errors = asyncio.run(crawler.extract_links(f"{base}/index.html"))
    assert links == [f"{base}/", f"{base}/articles/a1.html", f"{base}/articles/a2.html",
                     f"{base}/articles/a3.html", f"{base}/other/about.html", f"{base}/private/secret.html"]
    assert len(errors) == 1  # javascript:, mailto: and #top are not documents: skipped, not reported
    assert not any(s in u for u in links for s in ("javascript", "mailto", "#"))


def test_extract_links_bad_pattern_and_non_html(srv: Any) -> None:
    crawler = WebCrawler(make_settings())
    with pytest.raises(InvalidInput):
        asyncio.run(crawler.extract_links(f"{base_url(srv)}/index.html", "([unclosed"))
    with pytest.raises(FetchError) as info:
        asyncio.run(crawler.extract_links(f"{base_url(srv)}/plain-index.txt"))
    assert info.value.details["reason"] == "content_type"


@pytest.mark.timeout(120)
def test_a_backtracking_pattern_filters_links_in_linear_time(srv: Any) -> None:
    """`(\\w+\\W?)+\\d\\.html$` made Python's `re` backtrack for ever on a link it did not match (the
    server stopped with it); on RE2 it keeps the numbered articles and refuses nothing else."""
    base = base_url(srv)
    srv.state.routes["/long-index.html"] = Route(
        b"<a href='/articles/a1.html'>one</a><a href='/other/about-the-company-and-its-team.html'>about</a>"
        b"<a href='/articles/a2.html'>two</a>")
    links, _ = asyncio.run(WebCrawler(make_settings()).extract_links(f"{base}/long-index.html",
                                                                     r"(\w+\W?)+\d\.html$"))
    assert links == [f"{base}/articles/a1.html", f"{base}/articles/a2.html"]


@pytest.mark.parametrize("pattern,words", [(r"(a)\1", "invalid escape sequence"), ("(?=x)", "invalid perl operator"),
                                           ("((a{1000}){1000}){1000}", "repetition")])
def test_a_pattern_outside_re2_is_invalid_input_naming_the_syntax(srv: Any, pattern: str, words: str) -> None:
    with pytest.raises(InvalidInput) as info:
        asyncio.run(WebCrawler(make_settings()).extract_links(f"{base_url(srv)}/index.html", pattern))
    assert words in info.value.message and "RE2 syntax" in info.value.message
    assert "/index.html" not in srv.state.paths()  # refused before anything is fetched


def test_a_huge_index_page_is_read_only_as_far_as_the_crawl_needs(srv: Any) -> None:
    """250,000 links cost 10 s of CPU (join, pattern, policy each) to keep 50; a report could list every refusal."""
    base = base_url(srv)
    links_html = b"".join(b"<a href='http://elsewhere.test/r%d'>r</a><a href='/p%d'>p</a>" % (i, i) for i in range(3000))
    srv.state.routes["/huge-index.html"] = Route(b"<html><body>" + links_html + b"</body></html>")
    crawler = WebCrawler(make_settings(max_crawl_pages=20, crawl_max_bytes=1_000_000))
    checked: list[str] = []
    check = crawler.policy.check

    def counting_check(url: str, **kwargs: Any) -> str:
        checked.append(url)
        return check(url, **kwargs)

    crawler.policy.check = counting_check  # type: ignore[method-assign]
    links, errors = asyncio.run(crawler.extract_links(f"{base}/huge-index.html"))
    assert links == [f"{base}/p{i}" for i in range(20)]
    assert len(errors) == 20 and all(e.reason == "refused" for e in errors)
    link_checks = [u for u in checked if "/p" in u or "elsewhere" in u]  # not the index page or robots.txt
    assert len(link_checks) == 40  # the links up to the twentieth kept, none after

    refused_only = WebCrawler(make_settings(max_crawl_pages=20, crawl_max_bytes=1_000_000))
    links, errors = asyncio.run(refused_only.extract_links(f"{base}/huge-index.html", "elsewhere"))
    assert links == [] and len(errors) == 20  # 3,000 refusals, 20 reported


def test_ac34_max_crawl_pages_limit(srv: Any) -> None:
    base = base_url(srv)
    crawler = WebCrawler(make_settings(max_crawl_pages=2))
    links, _ = asyncio.run(crawler.extract_links(f"{base}/index.html", "articles"))
    assert links == [f"{base}/articles/a1.html", f"{base}/articles/a2.html"]

    srv.state.reset()
    urls = [f"{base}/articles/a{i}.html" for i in range(1, 5)]
    results = asyncio.run(crawler.fetch_many(urls))
    assert [type(r) for r in results] == [CrawledPage, CrawledPage, PageError, PageError]
    assert all(r.reason == "refused" and "RAG_MAX_CRAWL_PAGES=2" in r.message
               for r in results if isinstance(r, PageError))
    assert [p for p in srv.state.paths() if p.startswith("/articles/")] != []
    assert not {"/articles/a3.html", "/articles/a4.html"} & set(srv.state.paths())


# --------------------------------------------------------------------------- single pages


def test_ac14_fetch_page_extracts_article_text(srv: Any) -> None:
    url = f"{base_url(srv)}/articles/a1.html"
    page = asyncio.run(WebCrawler(make_settings()).fetch_page(url))
    assert page.status == 200 and page.url == url and page.final_url == url
    assert page.content_type == "text/html" and not page.not_modified
    text = page.document.text
    assert "ARTICLETOKENa1 paragraph 0" in text and "ARTICLETOKENa1 paragraph 3" in text
    for token in ("NAVTOKEN", "FOOTERTOKEN", "HEADERTOKEN", "SCRIPTTOKEN", "STYLETOKEN"):
        assert token not in text
    assert page.document.metadata["source_url"] == url
    assert "Article a1" in page.document.title
    uas = {r["ua"] for r in srv.state.records}
    assert uas == {UA}
    assert srv.state.paths() == ["/robots.txt", "/articles/a1.html"]


def test_plain_text_page(srv: Any) -> None:
    page = asyncio.run(WebCrawler(make_settings()).fetch_page(f"{base_url(srv)}/plain.txt"))
    assert page.content_type == "text/plain"
    assert "ünïcode" in page.document.text


def test_pdf_page(srv: Any) -> None:
    page = asyncio.run(WebCrawler(make_settings()).fetch_page(f"{base_url(srv)}/doc.pdf"))
    assert page.content_type == "application/pdf" and page.document.file_type == "pdf"
    assert "PDFTOKEN crawled portable document" in page.document.text


def test_redirect_to_allowed_path_is_followed(srv: Any) -> None:
    base = base_url(srv)
    crawler = WebCrawler(make_settings())
    page = asyncio.run(crawler.fetch_page(f"{base}/redirect/ok"))
    assert page.url == f"{base}/redirect/ok" and page.final_url == f"{base}/articles/a1.html"
    assert "ARTICLETOKENa1" in page.document.text
    page = asyncio.run(crawler.fetch_page(f"{base}/redirect/chain/3"))  # 4 hops
    assert page.final_url == f"{base}/articles/a2.html"


def test_redirect_chain_longer_than_five_hops_fails(srv: Any) -> None:
    with pytest.raises(FetchError) as info:
        asyncio.run(WebCrawler(make_settings()).fetch_page(f"{base_url(srv)}/redirect/chain/5"))
    assert info.value.details["reason"] == "http_status" and "redirects" in info.value.message
    assert "/articles/a2.html" not in srv.state.paths()


def test_redirect_to_forbidden_host_refused(srv: Any) -> None:
    err = refused(lambda: asyncio.run(
        WebCrawler(make_settings()).fetch_page(f"{base_url(srv)}/redirect/forbidden")))
    assert "Redirect refused" in err.message and "evil.test" in err.message


def test_timeout(srv: Any) -> None:
    started = time.monotonic()
    with pytest.raises(FetchError) as info:
        asyncio.run(WebCrawler(make_settings(crawl_timeout_sec=0.5)).fetch_page(f"{base_url(srv)}/slow.html"))
    assert info.value.details["reason"] == "timeout"
    assert info.value.message == "Timed out after 0.5 s"
    assert time.monotonic() - started < 1.4


@pytest.mark.parametrize("path,reason,needle", [
    ("/missing", "http_status", "HTTP 404 Not Found"),
    ("/error500", "http_status", "HTTP 500"),
    ("/big.html", "too_large", "65,536 bytes"),
    ("/big-stream.html", "too_large", "65,536 bytes"),
    ("/file.bin", "content_type", "application/octet-stream"),
])
def test_fetch_errors(srv: Any, path: str, reason: str, needle: str) -> None:
    with pytest.raises(FetchError) as info:
        asyncio.run(WebCrawler(make_settings()).fetch_page(base_url(srv) + path))
    assert info.value.details["reason"] == reason
    assert needle in info.value.message
    if path == "/missing":
        assert info.value.message == "HTTP 404 Not Found"


def test_conditional_request_304(srv: Any) -> None:
    url = f"{base_url(srv)}/etag.html"
    crawler = WebCrawler(make_settings())
    first = asyncio.run(crawler.fetch_page(url))
    assert first.etag == '"v1"' and first.last_modified and first.document is not None
    again = asyncio.run(crawler.fetch_page(url, etag=first.etag, last_modified=first.last_modified))
    assert again.not_modified and again.document is None and again.status == 304
    assert again.etag == '"v1"'
    last = srv.state.records[-1]
    assert last["inm"] == '"v1"' and last["ims"] == first.last_modified
    [via_many] = asyncio.run(crawler.fetch_many([url], validators={url: (first.etag, None)}))
    assert isinstance(via_many, CrawledPage) and via_many.not_modified


# --------------------------------------------------------------------------- robots.txt


def test_robots_disallow_and_cache(srv: Any) -> None:
    base = base_url(srv)
    crawler = WebCrawler(make_settings())
    err = refused(lambda: asyncio.run(crawler.fetch_page(f"{base}/private/secret.html")))
    assert err.details["reason"] == "robots"
    err = refused(lambda: asyncio.run(crawler.fetch_page(f"{base}/redirect/robots")))  # hop checked too
    assert err.details["reason"] == "robots"
    asyncio.run(crawler.fetch_many([f"{base}/articles/a1.html", f"{base}/articles/a2.html"]))
    paths = srv.state.paths()
    assert paths.count("/robots.txt") == 1
    assert not any(p.startswith("/private/") for p in paths)
    # ignoring robots.txt is an explicit setting
    page = asyncio.run(WebCrawler(make_settings(crawl_respect_robots=False))
                       .fetch_page(f"{base}/private/secret.html"))
    assert "ARTICLETOKENsecret" in page.document.text


def test_robots_missing_allows_and_5xx_disallows(srv: Any) -> None:
    url = f"{base_url(srv)}/articles/a1.html"
    srv.state.robots_status = 404
    assert asyncio.run(WebCrawler(make_settings()).fetch_page(url)).status == 200
    srv.state.robots_status = 503
    err = refused(lambda: asyncio.run(WebCrawler(make_settings()).fetch_page(url)))
    assert err.details["reason"] == "robots" and "503" in err.message


def test_robots_crawl_delay_honoured(srv: Any) -> None:
    srv.state.robots_body = "User-agent: *\nCrawl-delay: 0.5\nDisallow: /private/\n"
    base = base_url(srv)
    crawler = WebCrawler(make_settings(crawl_delay_sec=0.01, allowed_domains=served(srv)))
    asyncio.run(crawler.fetch_many([f"{base}/articles/a1.html", f"{base}/articles/a2.html"]))
    starts = [r["start"] for r in srv.state.records if r["path"].startswith("/articles/")]
    assert len(starts) == 2 and abs(starts[1] - starts[0]) >= 0.5 - 0.03


# --------------------------------------------------------------------------- many pages


def test_ac15_fetch_many_isolates_errors(srv: Any) -> None:
    base = base_url(srv)
    paths = ["/articles/a1.html", "/missing", "/slow.html", "/file.bin", "/big.html",
             "/redirect/forbidden", "/private/secret.html", "/articles/a2.html"]
    seen: list[Any] = []
    results = asyncio.run(WebCrawler(make_settings(allowed_domains=served(srv))).fetch_many(
        [base + p for p in paths], on_result=seen.append))
    kinds = [r.reason if isinstance(r, PageError) else "ok" for r in results]
    assert kinds == ["ok", "http_status", "timeout", "content_type", "too_large", "refused", "robots", "ok"]
    assert [r.url for r in results] == [base + p for p in paths]
    assert len(seen) == len(paths) and {id(r) for r in seen} == {id(r) for r in results}
    assert results[1].message == "HTTP 404 Not Found"
    assert results[2].message == "Timed out after 0.5 s"


def test_fetch_many_async_callback_and_bad_urls(srv: Any) -> None:
    base = base_url(srv)
    calls: list[str] = []

    async def on_result(result: Any) -> None:
        calls.append(result.url)
        raise RuntimeError("a broken progress callback must not stop the crawl")

    results = asyncio.run(WebCrawler(make_settings(allowed_domains=served(srv))).fetch_many(
        [f"{base}/articles/a1.html", "ftp://127.0.0.1/x", f"{base}/articles/a1.html"], on_result=on_result))
    assert [type(r) for r in results] == [CrawledPage, PageError]  # duplicate fetched once
    assert results[1].reason == "refused" and len(calls) == 2


def test_ac35_crawl_delay_between_requests(srv: Any) -> None:
    delay = 0.2
    base = base_url(srv)
    crawler = WebCrawler(make_settings(crawl_delay_sec=delay, crawl_concurrency=5, allowed_domains=served(srv)))
    results = asyncio.run(crawler.fetch_many([f"{base}/articles/a{i}.html" for i in range(1, 5)]))
    assert all(isinstance(r, CrawledPage) for r in results)
    starts = sorted(r["start"] for r in srv.state.records)  # robots.txt + 4 pages, one host
    assert len(starts) == 5
    gaps = [b - a for a, b in zip(starts, starts[1:])]
    assert min(gaps) >= delay - 0.03, gaps


def test_concurrency_never_exceeds_setting(srv: Any) -> None:
    base = base_url(srv)
    crawler = WebCrawler(make_settings(crawl_concurrency=2, crawl_respect_robots=False, allowed_domains=served(srv)))
    results = asyncio.run(crawler.fetch_many([f"{base}/conc/{i}" for i in range(6)]))
    assert all(isinstance(r, CrawledPage) for r in results)
    assert srv.state.max_inflight == 2  # parallel, but never more than the setting


# --------------------------------------------------------------------------- DNS rebinding


class FakeDnsPolicy(UrlPolicy):
    """Resolves test names to loopback addresses and pretends 127.0.0.1 is a public address."""

    ZONE = {"public.test": ["127.0.0.1"], "inner.test": ["127.0.0.2"], "mixed.test": ["127.0.0.1", "127.0.0.2"]}

    async def resolve(self, host: str, port: int | None = None) -> list[str]:
        return list(self.ZONE[host])

    def is_blocked_address(self, address: str) -> bool:
        return address != "127.0.0.1" and super().is_blocked_address(address)


def test_connects_to_checked_address_and_refuses_rebinding(srv: Any) -> None:
    port = srv.server_address[1]
    settings = make_settings(allowed_domains=["public.test", "inner.test", "mixed.test"],
                             allow_private_networks=False)
    crawler = WebCrawler(settings, policy=FakeDnsPolicy(settings))
    # public.test exists only in the policy's resolver: a fetch works only if the crawler
    # connects to the address the policy checked
    page = asyncio.run(crawler.fetch_page(f"http://public.test:{port}/articles/a1.html"))
    assert "ARTICLETOKENa1" in page.document.text
    assert srv.state.records[-1]["host"] == f"public.test:{port}"
    for host in ("inner.test", "mixed.test"):  # allowlisted name, private address
        err = refused(lambda: asyncio.run(crawler.fetch_page(f"http://{host}:{port}/articles/a1.html")))
        assert "127.0.0.2" in err.message
    err = refused(lambda: asyncio.run(crawler.fetch_page(f"http://public.test:{port}/redirect/rebind")))
    assert "Redirect refused" in err.message and "127.0.0.2" in err.message
    assert not any(r["host"].startswith(("inner.test", "mixed.test")) for r in srv.state.records)


# --------------------------------------------------------------------------- sync helper and sessions


def test_run_helper_without_and_with_running_loop(srv: Any) -> None:
    url = f"{base_url(srv)}/articles/a2.html"
    crawler = WebCrawler(make_settings())
    assert "ARTICLETOKENa2" in run(crawler.fetch_page(url)).document.text

    async def inside_loop() -> CrawledPage:
        return run(crawler.fetch_page(url))  # e.g. Streamlit or a notebook with a running loop

    assert asyncio.run(inside_loop()).status == 200


def test_shared_session_context_manager(srv: Any) -> None:
    base = base_url(srv)

    async def go() -> list[Any]:
        async with WebCrawler(make_settings()) as crawler:
            links, _ = await crawler.extract_links(f"{base}/index.html", r"a[12]\.html$")
            return await crawler.fetch_many(links)

    results = asyncio.run(go())
    assert [r.final_url for r in results] == [f"{base}/articles/a1.html", f"{base}/articles/a2.html"]
