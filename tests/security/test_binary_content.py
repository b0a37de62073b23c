"""Bytes of another format behind a text name or a text Content-Type never become chunks of raw bytes."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from crawl_server import Route, base_url, make_pdf, serve

from filebuilders import make_docx
from rag_core.errors import LoaderError
from rag_core.ingest.crawl import PageError, WebCrawler, run
from rag_core.settings import RagSettings


@pytest.fixture(scope="module")
def server() -> Any:
    with serve() as httpd:
        yield httpd


def crawler(server: Any) -> WebCrawler:
    return WebCrawler(RagSettings(
        _env_file=None, allowed_domains=[f"127.0.0.1:{server.server_address[1]}"], allow_private_networks=True,
        crawl_delay_sec=0.0, crawl_timeout_sec=10, crawl_respect_robots=False))


def test_a_pdf_served_as_html_is_read_as_the_pdf_it_is(server: Any) -> None:
    server.state.routes["/report"] = Route(body=make_pdf("PDFTOKEN quarterly figures"), ctype="text/html")
    page = run(crawler(server).fetch_page(base_url(server) + "/report"))
    assert "PDFTOKEN quarterly figures" in page.document.text
    assert "%PDF" not in page.document.text and "endobj" not in page.document.text


def test_a_zip_served_as_html_or_text_is_refused_by_name(server: Any, tmp_path: Path) -> None:
    body = make_docx(tmp_path / "x.docx").read_bytes()
    server.state.routes["/a.html"] = Route(body=body, ctype="text/html; charset=utf-8")
    server.state.routes["/b.txt"] = Route(body=body, ctype="text/plain")
    url = base_url(server)
    results = run(crawler(server).fetch_many([url + "/a.html", url + "/b.txt"]))
    assert all(isinstance(r, PageError) for r in results), [getattr(r, "document", None) for r in results]
    assert all("is DOCX data" in r.message for r in results), [r.message for r in results]


def test_files_whose_bytes_are_another_format_fail_by_name(wb, site, stored_text, tmp_path: Path) -> None:
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "scan.txt").write_bytes(make_pdf("PDFTOKEN scanned letter"))
    make_docx(folder / "page.html")
    (folder / "noise.html").write_bytes(b"<html>" + bytes(range(1, 32)) * 60 + os.urandom(2000))
    (folder / "real.md").write_text("# Real\n\nA genuine note about hybrid search.\n", encoding="utf-8")

    report = wb.ingest_paths([folder], site_id=site)

    reasons = {Path(o.source).name: o.reason or "" for o in report.outcomes if o.status == "failed"}
    assert "PDF data" in reasons["scan.txt"] and "DOCX data" in reasons["page.html"]
    assert "binary, not HTML" in reasons["noise.html"]
    text = stored_text(site)
    assert "genuine note" in text and "%PDF" not in text and "PK\x03\x04" not in text
    with pytest.raises(LoaderError, match="PNG data"):
        from rag_core.ingest.loaders import load_bytes

        load_bytes(b"\x89PNG\r\n\x1a\n" + b"<html><body>x</body></html>", "html", name="pic.html")
