"""A charset a page or server declares is used only when it is one the web uses (the WHATWG list): Python's
other codecs (`punycode` decodes in quadratic time, `unicode_escape` rewrites backslashes) are ignored."""

from __future__ import annotations

from typing import Any

import pytest
from crawl_server import Route, base_url, serve

from rag_core.ingest.crawl import WebCrawler, run
from rag_core.ingest.loaders import load_bytes
from rag_core.settings import RagSettings

PAGE = ("<html><head><title>Кран</title></head><body><article><h1>Кран мостовой</h1>"
        + "<p>Мостовой кран поднимает грузы до десяти тонн над пролётом цеха.</p>" * 8 + "</article></body></html>")


@pytest.fixture(scope="module")
def server() -> Any:
    with serve() as httpd:
        yield httpd


@pytest.mark.parametrize("charset", ["punycode", "unicode_escape", "idna"])
def test_a_served_charset_outside_the_web_list_is_ignored(server: Any, charset: str) -> None:
    server.state.routes["/crane"] = Route(body=PAGE.encode("utf-8"), ctype=f"text/html; charset={charset}")
    crawler = WebCrawler(RagSettings(
        _env_file=None, allowed_domains=[f"127.0.0.1:{server.server_address[1]}"], allow_private_networks=True,
        crawl_delay_sec=0.0, crawl_timeout_sec=10, crawl_respect_robots=False))
    page = run(crawler.fetch_page(base_url(server) + "/crane"))
    assert "Мостовой кран поднимает грузы" in page.document.text


def test_a_meta_charset_outside_the_web_list_is_ignored() -> None:
    page = PAGE.replace("<head>", '<head><meta charset="punycode">').encode("cp1251")
    doc = load_bytes(page, "html", name="crane.html")
    assert "Мостовой кран поднимает грузы" in doc.text


def test_the_web_list() -> None:
    from rag_core.ingest.loaders.encoding import web_codec

    assert web_codec("Windows-1251") == "cp1251" and web_codec(" UTF-8 ") == "utf-8" and web_codec("Shift_JIS")
    assert web_codec("punycode") is None and web_codec("rot13") is None and web_codec("no-such") is None
