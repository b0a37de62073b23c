"""Web ingestion end to end (the web-knowledge spec): a real 127.0.0.1 server, the real DB.

`rag crawl` / `rag add` / `rag delete` and Workbench.ingest_index / ingest_url: matching links only,
per-page errors with reasons, unchanged pages skipped without embedding (content hash, 304),
changed pages replaced whole, refusals that reach the user unchanged.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest
from crawl_server import Route, article_html, base_url, serve
from typer.testing import CliRunner

from rag_core import open_workbench
from rag_core.cli import app
from rag_core.errors import CrawlRefused, FetchError

UA = "RAG-Workbench-Test/1.0 (+https://example.invalid/bot)"
LAST_MODIFIED = "Wed, 01 May 2024 10:00:00 GMT"
runner = CliRunner()




@pytest.fixture(scope="module")
def web_wb(make_settings) -> Any:
    """A workbench allowed to crawl 127.0.0.1 quickly (short timeout, small delay)."""
    workbench = open_workbench(make_settings(allowed_domains=["127.0.0.1"], allow_private_networks=True,
                                             crawl_delay_sec=0.05, crawl_timeout_sec=0.5, crawl_user_agent=UA))
    yield workbench
    workbench.close()


def refuse_embedding(monkeypatch: pytest.MonkeyPatch, wb: Any) -> None:
    def refuse(self: Any, texts: Any, **kwargs: Any) -> Any:
        raise AssertionError("an unchanged page must not be embedded")

    monkeypatch.setattr(type(wb.embedder), "get_text_embedding_batch", refuse)


def rows(wb: Any, site: str) -> dict[str, dict[str, Any]]:
    """source -> document row (with its chunk ids) of one site."""
    with wb.db.connection() as conn:
        docs = conn.execute(
            "SELECT d.source, d.category, d.file_type, d.content, d.chunk_count, d.metadata, d.doc_date,"
            " array(SELECT c.id FROM chunks c WHERE c.document_id = d.id ORDER BY c.id),"
            " array(SELECT c.text FROM chunks c WHERE c.document_id = d.id ORDER BY c.id)"
            " FROM documents d WHERE d.site_id = %s", (site,)).fetchall()
    names = ["source", "category", "file_type", "content", "chunk_count", "metadata", "doc_date", "chunk_ids",
             "chunk_texts"]
    return {r[0]: dict(zip(names, r)) for r in docs}


def serve_index(srv: Any) -> str:
    """An index page with three matching articles, one 404, one slow page, one off-allowlist link."""
    links = ["/web/articles/one.html", "/web/articles/two.html", "articles/three.html", "/web/about.html",
             "http://evil.test/web/articles/steal.html", "/web/articles/missing.html", "/web/articles/slow.html",
             "/web/articles/one.html#comments", "mailto:someone@example.com"]
    anchors = "".join(f"<li><a href='{href}'>Link {i}</a></li>" for i, href in enumerate(links))
    routes = {
        "/web/index.html": Route(f"<html><body><nav><a href='/'>home</a></nav><ul>{anchors}</ul></body></html>".encode()),
        "/web/articles/one.html": Route(article_html("one")),
        "/web/articles/two.html": Route(article_html("two")),
        "/web/articles/three.html": Route(article_html("three")),
        "/web/about.html": Route(article_html("about")),
        "/web/articles/slow.html": Route(article_html("slow"), delay=1.5),
    }
    srv.state.routes.update(routes)
    return f"{base_url(srv)}/web/index.html"


# --------------------------------------------------------------------------- Workbench


def test_index_crawl_ingests_matching_pages_and_skips_unchanged(web_wb, site, srv, monkeypatch) -> None:
    base = base_url(srv)
    index = serve_index(srv)
    seen: list[Any] = []
    report = web_wb.ingest_index(index, r"/web/articles/", site_id=site, progress=seen.append)

    articles = [f"{base}/web/articles/{n}.html" for n in ("one", "two", "three")]
    assert (report.index_url, report.pages_found) == (index, 5)  # the refused link is an error
    assert (report.pages_ingested, report.unchanged) == (3, 0)
    assert [(e["url"], e["reason"]) for e in report.errors] == [
        ("http://evil.test/web/articles/steal.html", "refused"),
        (f"{base}/web/articles/missing.html", "http_status"),
        (f"{base}/web/articles/slow.html", "timeout"),
    ]
    assert "Allowed domains: 127.0.0.1" in report.errors[0]["message"]
    assert report.errors[1]["message"] == "HTTP 404 Not Found"
    assert "/web/about.html" not in srv.state.paths()  # filtered by the pattern, never fetched
    assert not any(p.startswith("/web/articles/steal") for p in srv.state.paths())
    assert seen and (seen[-1].done, seen[-1].total) == (5, 5)

    stored = rows(web_wb, site)
    assert sorted(stored) == sorted(articles)
    assert report.chunks == sum(r["chunk_count"] for r in stored.values()) > 0
    for url, row in stored.items():
        assert (row["category"], row["file_type"]) == ("web", "html")
        assert len(row["chunk_ids"]) == row["chunk_count"]
        name = url.rsplit("/", 1)[-1].split(".")[0]
        assert f"ARTICLETOKEN{name} paragraph 3" in row["content"]
        for token in ("NAVTOKEN", "FOOTERTOKEN", "HEADERTOKEN", "SCRIPTTOKEN"):
            assert token not in row["content"] and not any(token in t for t in row["chunk_texts"])
        assert row["metadata"]["final_url"] == url and row["metadata"]["crawled_at"]
        assert row["doc_date"] is not None

    text = report.summary_text()
    assert text.startswith("Crawl finished.\n  Pages ingested: 3\n  Chunks: ")
    assert "  Errors: 3 (refused: 1, http_status: 1, timeout: 1)" in text
    assert f"  - {base}/web/articles/missing.html: http_status: HTTP 404 Not Found" in text
    as_dict = report.to_dict()
    assert as_dict["error_counts"] == {"refused": 1, "http_status": 1, "timeout": 1}
    assert {d["url"] for d in as_dict["documents"]} == set(articles)

    # unchanged content: nothing is embedded or rewritten
    srv.state.routes.pop("/web/articles/slow.html")
    with monkeypatch.context() as m:
        refuse_embedding(m, web_wb)
        again = web_wb.ingest_index(index, r"/web/articles/", site_id=site)
    assert (again.pages_ingested, again.unchanged, again.chunks) == (3, 3, 0)
    assert "Pages ingested: 3 (3 unchanged)" in again.summary_text()
    assert {r["source"]: r["chunk_ids"] for r in rows(web_wb, site).values()} == \
        {s: r["chunk_ids"] for s, r in stored.items()}

    # a changed page is replaced whole; the others stay
    srv.state.routes["/web/articles/two.html"] = Route(article_html("twoB"))
    changed = web_wb.ingest_index(index, r"/web/articles/", site_id=site)
    assert (changed.pages_ingested, changed.unchanged) == (3, 2)
    assert [d["status"] for d in changed.documents if d["url"].endswith("two.html")] == ["updated"]
    after = rows(web_wb, site)
    two = after[f"{base}/web/articles/two.html"]
    assert "ARTICLETOKENtwoB" in two["content"] and "ARTICLETOKENtwo " not in two["content"]
    assert not set(two["chunk_ids"]) & set(stored[f"{base}/web/articles/two.html"]["chunk_ids"])
    with web_wb.db.connection() as conn:
        old = stored[f"{base}/web/articles/two.html"]["chunk_ids"]
        assert conn.execute("SELECT count(*) FROM chunks WHERE id = ANY(%s)", (old,)).fetchone()[0] == 0
    assert after[f"{base}/web/articles/one.html"]["chunk_ids"] == stored[f"{base}/web/articles/one.html"]["chunk_ids"]


def test_etag_304_counts_as_unchanged_and_new_version_replaces(web_wb, site, srv, monkeypatch) -> None:
    url = f"{base_url(srv)}/web/etag.html"
    srv.state.routes["/web/etag.html"] = Route(article_html("etag1"), etag='"v1"',
                                               headers={"Last-Modified": LAST_MODIFIED})
    first = web_wb.ingest_url(url, site_id=site)
    assert [d["status"] for d in first.documents] == ["indexed"] and first.chunks > 0
    assert first.summary_text() == f"Added: {url} ({first.chunks} chunks)"
    meta = rows(web_wb, site)[url]["metadata"]
    assert (meta["etag"], meta["last_modified"]) == ('"v1"', LAST_MODIFIED)

    with monkeypatch.context() as m:
        refuse_embedding(m, web_wb)
        again = web_wb.ingest_url(url, site_id=site)
    assert (again.pages_ingested, again.unchanged, again.chunks, again.errors) == (1, 1, 0, [])
    assert again.summary_text() == f"Unchanged: {url} (already up to date)"
    request = srv.state.records[-1]
    assert (request["path"], request["inm"], request["ims"]) == ("/web/etag.html", '"v1"', LAST_MODIFIED)

    old_ids = rows(web_wb, site)[url]["chunk_ids"]
    srv.state.routes["/web/etag.html"] = Route(article_html("etag2"), etag='"v2"')
    changed = web_wb.ingest_url(url, site_id=site)
    assert [d["status"] for d in changed.documents] == ["updated"]
    row = rows(web_wb, site)[url]
    assert "ARTICLETOKENetag2" in row["content"] and "ARTICLETOKENetag1" not in row["content"]
    assert row["metadata"]["etag"] == '"v2"' and not set(row["chunk_ids"]) & set(old_ids)


def test_ingest_url_dates_errors_and_delete_by_url(web_wb, site, srv) -> None:
    base = base_url(srv)
    body = ("<html><head><title>Undated</title></head><body><article><p>"
            + "UNDATEDTOKEN plain article text that is long enough to be the main content. " * 8
            + "</p></article></body></html>").encode()
    srv.state.routes["/web/undated.html"] = Route(body, headers={"Last-Modified": LAST_MODIFIED})
    report = web_wb.ingest_url(f"{base}/web/undated.html", site_id=site)
    assert report.pages_ingested == 1 and report.index_url is None
    row = rows(web_wb, site)[f"{base}/web/undated.html"]
    assert row["doc_date"] == datetime(2024, 5, 1, 10, 0, tzinfo=timezone.utc)

    dated = body.replace(b"<title>", b"<meta property='article:published_time' content='2023-03-15'><title>")
    srv.state.routes["/web/dated.html"] = Route(dated.replace(b"UNDATEDTOKEN", b"DATEDTOKEN"))
    web_wb.ingest_url(f"{base}/web/dated.html", site_id=site)
    assert rows(web_wb, site)[f"{base}/web/dated.html"]["doc_date"].date().isoformat() == "2023-03-15"

    missing = web_wb.ingest_url(f"{base}/web/nothing-here.html", site_id=site)
    assert (missing.pages_ingested, [e["reason"] for e in missing.errors]) == (0, ["http_status"])
    assert missing.summary_text() == (f"Error: the page could not be ingested.\n  URL: {base}/web/nothing-here.html\n"
                                      "  Reason (http_status): HTTP 404 Not Found")

    chunks = row["chunk_count"]
    assert web_wb.delete_source(f"{base}/web/undated.html", site_id=site) == {"documents": 1, "chunks": chunks}
    assert sorted(rows(web_wb, site)) == [f"{base}/web/dated.html"]
    with web_wb.db.connection() as conn:
        assert conn.execute("SELECT count(*) FROM chunks WHERE id = ANY(%s)", (row["chunk_ids"],)).fetchone()[0] == 0
    assert web_wb.delete_source(f"{base}/web/undated.html", site_id=site) == {"documents": 0, "chunks": 0}


def test_index_page_failure_and_bad_pattern_raise(web_wb, site, srv) -> None:
    with pytest.raises(FetchError) as info:
        web_wb.ingest_index(f"{base_url(srv)}/web/no-index.html", site_id=site)
    assert "index page could not be read" in info.value.message and "HTTP 404 Not Found" in info.value.message
    from rag_core.errors import InvalidInput

    with pytest.raises(InvalidInput):
        web_wb.ingest_index(serve_index(srv), "([unclosed", site_id=site)
    assert not any(p.startswith("/web/articles/") for p in srv.state.paths())


def test_empty_allowlist_refused_without_network(make_settings, site, srv) -> None:
    with open_workbench(make_settings(allowed_domains=[], allow_private_networks=True)) as wb:
        for call in (lambda: wb.ingest_url(f"{base_url(srv)}/web/articles/one.html", site_id=site),
                     lambda: wb.ingest_index(f"{base_url(srv)}/web/index.html", site_id=site)):
            with pytest.raises(CrawlRefused) as info:
                call()
            assert info.value.message.startswith("Crawling is disabled: no allowed domains are configured.")
            assert "RAG_ALLOWED_DOMAINS=example.com,docs.python.org" in info.value.message
    assert srv.state.records == []


# --------------------------------------------------------------------------- CLI


@pytest.fixture
def cli_env(monkeypatch: pytest.MonkeyPatch, pg_url: str, tmp_path: Path) -> None:
    monkeypatch.setenv("DATABASE_URL", pg_url)
    monkeypatch.setenv("RAG_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("RAG_ALLOWED_DOMAINS", "127.0.0.1")
    monkeypatch.setenv("RAG_ALLOW_PRIVATE_NETWORKS", "true")
    monkeypatch.setenv("RAG_CRAWL_DELAY_SEC", "0.05")
    monkeypatch.chdir(tmp_path)  # no developer .env is read


def flat(text: str) -> str:
    """Output with rich's line wrapping undone."""
    return " ".join(text.split())


def test_cli_crawl_add_status_delete(cli_env, site, srv) -> None:
    base = base_url(srv)
    index = serve_index(srv)
    srv.state.routes.pop("/web/articles/slow.html")  # now a 404 too: no timeout to wait for
    result = runner.invoke(app, ["crawl", index, r"/web/articles/(one|two)\.html$", "--site", site])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[:2] == ["Crawl finished.", "  Pages ingested: 2"]
    assert lines[2].startswith("  Chunks: ") and int(lines[2].split(": ")[1]) > 0
    assert lines[3] == "  Errors: 0"

    as_json = runner.invoke(app, ["crawl", index, r"/web/articles/", "--site", site, "--json"])
    assert as_json.exit_code == 0, as_json.output
    summary = json.loads(as_json.stdout)
    assert (summary["pages_ingested"], summary["unchanged"]) == (3, 2)
    assert summary["error_counts"] == {"refused": 1, "http_status": 2}
    assert [e["url"] for e in summary["errors"]] == ["http://evil.test/web/articles/steal.html",
                                                     f"{base}/web/articles/missing.html",
                                                     f"{base}/web/articles/slow.html"]

    srv.state.routes["/web/single.html"] = Route(article_html("single"))
    added = runner.invoke(app, ["add", f"{base}/web/single.html", "--site", site])
    assert added.exit_code == 0, added.output
    assert added.stdout.startswith(f"Added: {base}/web/single.html (")
    again = runner.invoke(app, ["add", f"{base}/web/single.html", "--site", site, "--json"])
    assert json.loads(again.stdout)["unchanged"] == 1

    status = runner.invoke(app, ["status", "--site", site])
    assert "source URLs" in status.stdout
    assert json.loads(runner.invoke(app, ["status", "--site", site, "--json"]).stdout)["web_sources"] == 4

    deleted = runner.invoke(app, ["delete", f"{base}/web/single.html", "--site", site])
    assert deleted.exit_code == 0 and deleted.stdout.startswith(f"Deleted: {base}/web/single.html (")
    assert json.loads(runner.invoke(app, ["status", "--site", site, "--json"]).stdout)["web_sources"] == 3

    missing = runner.invoke(app, ["add", f"{base}/web/nothing-here.html", "--site", site])
    assert missing.exit_code == 1 and "HTTP 404 Not Found" in missing.stdout


def test_cli_refusals_exit_1_with_the_policy_message(cli_env, site, srv, monkeypatch) -> None:
    refused = runner.invoke(app, ["crawl", "http://evil.test/articles", "--site", site])
    assert refused.exit_code == 1 and "Traceback" not in refused.output
    message = flat(refused.output)
    assert "Error (CRAWL_REFUSED): Domain not in allowlist: evil.test." in message
    assert "Allowed domains: 127.0.0.1." in message

    scheme = runner.invoke(app, ["add", "file:///etc/passwd", "--site", site])
    assert scheme.exit_code == 1 and "Only http:// and https:// URLs can be crawled" in flat(scheme.output)

    monkeypatch.setenv("RAG_ALLOWED_DOMAINS", "")
    for args in (["crawl", f"{base_url(srv)}/web/index.html"], ["add", f"{base_url(srv)}/web/index.html"]):
        empty = runner.invoke(app, [*args, "--site", site])
        assert empty.exit_code == 1
        assert "Set RAG_ALLOWED_DOMAINS to the domains you want to crawl" in flat(empty.output)
    assert srv.state.records == []



def test_links_and_redirects_to_another_port_of_an_allowed_host_are_refused(web_wb, site, srv) -> None:
    """With 127.0.0.1 allowlisted, an index page's links and redirects to another port of that host were
    followed and stored (a crawl could probe internal services). Only the start URL's port, 80 and 443
    are crawled, unless a `host:port` entry names another."""
    with serve() as other:
        inner = base_url(other)
        other.state.routes["/secret.html"] = Route(article_html("INTERNALSERVICE"))
        srv.state.routes["/ports/index.html"] = Route(
            f"<html><body><a href='{inner}/secret.html'>internal</a><a href='/ports/to-inner'>hop</a>"
            "<a href='/ports/own.html'>own</a></body></html>".encode())
        srv.state.routes["/ports/to-inner"] = Route(status=302, headers={"Location": f"{inner}/secret.html"})
        srv.state.routes["/ports/own.html"] = Route(article_html("own"))
        report = web_wb.ingest_index(f"{base_url(srv)}/ports/index.html", site_id=site)
        assert report.pages_ingested == 1
        reasons = {e["url"]: (e["reason"], e["message"]) for e in report.errors}
        assert reasons[f"{inner}/secret.html"][0] == "refused"
        assert f"Port {other.server_address[1]} of 127.0.0.1 is not allowed" in reasons[f"{inner}/secret.html"][1]
        assert "Redirect refused" in reasons[f"{base_url(srv)}/ports/to-inner"][1]
        assert other.state.records == []  # not one request reached the other port
        assert all("INTERNALSERVICE" not in r["content"] for r in rows(web_wb, site).values())

        allowed = web_wb.variant(allowed_domains=[f"127.0.0.1:{other.server_address[1]}", "127.0.0.1"])
        opened = allowed.ingest_index(f"{base_url(srv)}/ports/index.html", site_id=site)
        assert opened.pages_ingested == 3 and not opened.errors


def test_cli_refuses_odd_numeric_hosts_and_data_redirects_without_a_traceback(cli_env, site, srv,
                                                                               monkeypatch) -> None:
    monkeypatch.setenv("RAG_ALLOWED_DOMAINS", "127.0.0.1,0177.0.0.1,0x7f.1")
    monkeypatch.setenv("RAG_ALLOW_PRIVATE_NETWORKS", "true")
    for url in ("http://0177.0.0.1/", "http://0x7f.1/x"):
        result = runner.invoke(app, ["add", url, "--site", site])
        assert result.exit_code == 1 and "Traceback" not in result.output, result.output
        assert "four decimal numbers" in flat(result.output)
    srv.state.routes["/to-data"] = Route(status=302, headers={"Location": "data:text/html,<b>owned</b>"})
    redirected = runner.invoke(app, ["add", f"{base_url(srv)}/to-data", "--site", site])
    assert redirected.exit_code == 1 and "Traceback" not in redirected.output, redirected.output
    assert "Redirect refused" in flat(redirected.output)
