"""Every REST endpoint through TestClient against the real store: bodies and status codes of both specs."""

from __future__ import annotations

import json
import uuid

import pytest

from rest_keys import ADMIN, KEY_A, KEY_ALL, SITE_A, auth
from crawl_server import base_url, serve


def test_health_needs_no_key(client):
    response = client.get("/health")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}
    ready = client.get("/health/ready")  # readiness touches the database
    assert ready.status_code == 200 and ready.json() == {"status": "ready", "database": "ok"}


def test_searching_a_site_with_nothing_indexed_is_a_client_error(client):
    """An empty site is the caller's condition (ingest first), not the server's: a 4xx, not 503."""
    response = client.post("/search", json={"query": "fire", "site_id": f"t-api-empty-{uuid.uuid4().hex[:6]}"},
                           headers=auth(ADMIN))
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "INDEX_UNAVAILABLE"


def test_document_created_replaced_and_deleted(client, wb):
    source = f"notes/{uuid.uuid4().hex[:8]}.md"
    body = {"site_id": SITE_A, "source": source, "content": "The staircase handrail must be 900 mm high."}
    created = client.post("/documents", json=body, headers=auth(KEY_A))
    assert created.status_code == 201
    doc = created.json()
    assert doc["status"] == "indexed" and doc["chunks"] >= 1 and isinstance(doc["id"], int)

    again = client.post("/documents", json={**body, "content": "The staircase handrail must be 1100 mm high."},
                        headers=auth(KEY_A))
    assert again.status_code == 200
    assert again.json()["status"] == "updated"
    assert again.json()["id"] == doc["id"]
    hits = wb.search("staircase handrail height", site_id=SITE_A, mode="fulltext")["results"]
    assert hits[0]["file_path"] == source
    assert "1100 mm" in hits[0]["context_chunks"][0]["text"]

    deleted = client.request("DELETE", "/documents", params={"source": source, "site_id": SITE_A},
                             headers=auth(ADMIN))
    assert deleted.status_code == 200
    assert deleted.json()["documents"] == 1 and deleted.json()["chunks"] >= 1
    assert not [h for h in wb.search("staircase handrail", site_id=SITE_A, mode="fulltext")["results"]
                if h["file_path"] == source]
    missing = client.request("DELETE", "/documents", params={"source": source}, headers=auth(ADMIN))
    assert missing.status_code == 404
    assert missing.json()["error"]["code"] == "NOT_FOUND"
    # The hint names what does list the sources (GET /status only counts them).
    assert "file_path" in missing.json()["error"]["message"] and "rag status --sources" in missing.json()["error"]["message"]


def test_search_gives_the_same_hits_and_scores_as_the_workbench(client, wb):
    body = {"query": "fire alarm evacuation", "limit": 5, "search_mode": "hybrid", "site_id": SITE_A}
    response = client.post("/search", json=body, headers=auth(KEY_A))
    assert response.status_code == 200
    data = response.json()
    assert data["success"] is True and data["query"] == "fire alarm evacuation"
    assert {"total_results", "search_time", "results", "facets", "suggestions"} <= set(data)
    direct = wb.search_engine.search("fire alarm evacuation", limit=5, mode="hybrid", site_id=SITE_A, use_cache=False)
    assert [(r["id"], r["relevance_score"], r["score"]) for r in data["results"]] == \
           [(r["id"], r["relevance_score"], r["score"]) for r in direct["results"]]
    assert data["results"][0]["file_path"] == "a/fire.md"
    assert data["results"][0]["context_chunks"][0]["text"]


def test_search_options_of_seed_001_reach_the_workbench(client):
    body = {"query": "budget", "limit": 1, "document_types": ["txt"], "include_context": False,
            "source_filter": "a/", "search_mode": "fulltext"}
    data = client.post("/search", json=body, headers=auth(KEY_A)).json()
    assert [r["file_path"] for r in data["results"]] == ["a/budget.md"]
    assert data["results"][0]["context_chunks"] == []
    none = client.post("/search", json={**body, "document_types": ["pdf"]}, headers=auth(KEY_A)).json()
    assert none["total_results"] == 0 and none["results"] == []


def test_chat_messages_and_retrieve_context(client, wb):
    user = f"u-{uuid.uuid4().hex[:6]}"
    stored = client.post("/chat-messages", json={"user_id": user, "site_id": SITE_A, "role": "user",
                                                 "message": "We are planning the school budget."},
                         headers=auth(KEY_A))
    assert stored.status_code == 201
    assert stored.json()["role"] == "user" and stored.json()["site_id"] == SITE_A
    answer = client.post("/chat-messages", json={"user_id": user, "site_id": SITE_A, "role": "ai",
                                                 "message": "The budget covers contractors."}, headers=auth(KEY_A))
    assert answer.status_code == 201 and answer.json()["role"] == "assistant"

    response = client.post("/retrieve-context", json={"user_id": user, "site_id": SITE_A,
                                                      "query": "What does the project budget cover?"},
                           headers=auth(KEY_A))
    assert response.status_code == 200
    context = response.json()["context"]
    assert context == wb.retrieve_context(user, SITE_A, "What does the project budget cover?")
    assert "a/budget.md" in context and "We are planning the school budget." in context
    assert "Site B" not in context  # another site's knowledge never enters


def test_chat_turn_sessions_history_and_delete(client):
    session = f"s-{uuid.uuid4().hex[:8]}"
    turn = client.post("/chat", json={"message": "How wide must evacuation routes be?", "session_id": session,
                                      "site_id": SITE_A}, headers=auth(KEY_A))
    assert turn.status_code == 200
    data = turn.json()
    assert data["session_id"] == session
    assert data["sources"] and data["sources"][0]["path"] == "a/fire.md"
    assert "1.2" in data["answer"]

    listed = client.get("/sessions", params={"site_id": SITE_A}, headers=auth(KEY_A)).json()["sessions"]
    assert session in [s["id"] for s in listed]
    assert all(s["site_id"] == SITE_A for s in listed)
    messages = client.get(f"/sessions/{session}/messages", params={"limit": 10}, headers=auth(KEY_A)).json()
    assert [m["role"] for m in messages["messages"]] == ["user", "assistant"]
    assert messages["messages"][1]["sources"]

    deleted = client.delete(f"/sessions/{session}", headers=auth(ADMIN))
    assert deleted.status_code == 200 and deleted.json() == {"session_id": session, "sessions": 1, "messages": 2}
    assert client.get(f"/sessions/{session}/messages", headers=auth(KEY_ALL)).status_code == 404


def test_cleanup_purges_with_the_admin_key(client, wb):
    session = f"old-{uuid.uuid4().hex[:8]}"
    old = wb.chat_append(session, "user", "an old message")
    recent = wb.chat_append(session, "user", "a recent message")
    with wb.db.connection() as conn:
        conn.execute("UPDATE chat_messages SET created_at = now() - interval '400 days' WHERE id = %s", (old["id"],))
    dry = client.delete("/chat-messages/cleanup", params={"older_than_days": 365, "dry_run": True},
                        headers=auth(ADMIN))
    assert dry.status_code == 200 and dry.json()["dry_run"] is True and dry.json()["messages_deleted"] >= 1
    assert [m["id"] for m in wb.chat_history(session)] == [old["id"], recent["id"]]
    done = client.delete("/chat-messages/cleanup", params={"older_than_days": 365}, headers=auth(ADMIN))
    summary = done.json()
    assert done.status_code == 200 and summary["messages_deleted"] >= 1 and summary["triggered_by"] == "api"
    assert [m["id"] for m in wb.chat_history(session)] == [recent["id"]]
    wb.chat_reset(session)


def test_status_and_search_metrics(client):
    status = client.get("/status", headers=auth(KEY_A)).json()
    assert status["documents"] >= 2 and set(status["by_site"]) == {SITE_A}
    assert "data_dir" not in status  # a site key does not learn the server's layout
    client.post("/search", json={"query": "budget", "site_id": SITE_A}, headers=auth(KEY_A))
    metrics = client.get("/metrics/search", params={"since": "1d"}, headers=auth(KEY_A))
    assert metrics.status_code == 200
    assert metrics.json()["searches"] >= 1
    bad = client.get("/metrics/search", params={"since": "yesterday"}, headers=auth(KEY_A))
    assert bad.status_code == 400 and "since" in bad.json()["error"]["message"]


def test_rejected_modes_share_one_invalid_bucket_in_the_metrics(client):
    def by_mode() -> dict[str, int]:
        return client.get("/metrics/search", params={"site_id": SITE_A}, headers=auth(KEY_A)).json()["by_mode"]

    before = by_mode()
    junk = [f"junk-{uuid.uuid4().hex[:8]}", "Semantic-ish"]
    for mode in junk:
        response = client.post("/search", json={"query": "budget", "site_id": SITE_A, "search_mode": mode},
                               headers=auth(KEY_A))
        assert response.status_code == 400 and response.json()["error"]["code"] == "INVALID_QUERY"
    client.post("/search", json={"query": "budget", "site_id": SITE_A, "search_mode": "Fulltext"}, headers=auth(KEY_A))
    after = by_mode()
    assert not set(after) - {"hybrid", "semantic", "fulltext", "invalid"}, after
    assert after["invalid"] == before.get("invalid", 0) + 2
    assert after["fulltext"] == before.get("fulltext", 0) + 1


@pytest.fixture(scope="module")
def page_server():
    with serve() as httpd:
        yield httpd


def test_pages_and_crawl_ingest_from_a_real_server(make_client, wb, page_server):
    site = f"t-api-web-{uuid.uuid4().hex[:6]}"
    web = wb.variant(allowed_domains=["127.0.0.1"], allow_private_networks=True, crawl_delay_sec=0.0,
                     crawl_timeout_sec=2.0)
    client = make_client(workbench=web)
    root = base_url(page_server)
    try:
        page = client.post("/pages", json={"url": f"{root}/articles/a1.html", "site_id": site}, headers=auth(ADMIN))
        assert page.status_code == 200
        assert page.json()["pages_ingested"] == 1 and page.json()["chunks"] >= 1
        crawl = client.post("/crawl", json={"index_url": f"{root}/index.html", "pattern": r"/articles/",
                                            "site_id": site}, headers=auth(ADMIN))
        assert crawl.status_code == 200
        report = crawl.json()
        assert report["pages_found"] >= 2 and report["pages_ingested"] >= 2 and report["unchanged"] >= 1

        # Asked for NDJSON, the crawl streams one progress line per fetched page, then the report.
        with client.stream("POST", "/crawl", json={"index_url": f"{root}/index.html", "pattern": r"/articles/",
                                                  "site_id": site},
                           headers={**auth(ADMIN), "Accept": "application/x-ndjson"}) as streamed:
            assert streamed.status_code == 200
            assert streamed.headers["content-type"].startswith("application/x-ndjson")
            events = [json.loads(line) for line in streamed.iter_lines() if line]
        progress = [e for e in events if e["event"] == "progress"]
        assert len(progress) >= report["pages_found"]
        assert progress[-1]["pages_done"] == progress[-1]["pages_total"] == report["pages_found"]
        assert events[-1]["event"] == "done" and events[-1]["report"]["unchanged"] == report["pages_found"]
    finally:
        with wb.db.connection() as conn:
            conn.execute("DELETE FROM documents WHERE site_id = %s", (site,))


def test_crawl_refused_by_policy_is_a_clear_error(client):
    response = client.post("/pages", json={"url": "https://example.com/", "site_id": SITE_A}, headers=auth(KEY_A))
    assert response.status_code == 403
    error = response.json()["error"]
    assert error["code"] == "CRAWL_REFUSED" and "RAG_ALLOWED_DOMAINS" in error["message"]
    streamed = client.post("/crawl", json={"index_url": "https://example.com/", "site_id": SITE_A},
                           headers={**auth(KEY_A), "Accept": "application/x-ndjson"})
    last = json.loads(streamed.text.strip().splitlines()[-1])
    assert last["event"] == "error" and last["error"]["code"] == "CRAWL_REFUSED"


def test_crawl_errors_tell_callers_one_status_and_generic_reasons(make_client, wb, page_server, caplog):
    """Refusals before and after DNS get the same 403, and no caller learns resolved addresses, resolver
    errors or the allowlist; the server log keeps the details."""
    import socket as sockets

    own_name = sockets.gethostname()  # resolves to this machine: a private or loopback address
    web = wb.variant(allowed_domains=["127.0.0.1", own_name, "nothing.invalid", "secret-intranet.example"],
                     allow_private_networks=False, crawl_delay_sec=0.0, crawl_timeout_sec=2.0)
    client = make_client(workbench=web)
    site = f"t-api-web-{uuid.uuid4().hex[:6]}"
    before_dns = client.post("/pages", json={"url": "http://not-allowed.example/", "site_id": site},
                             headers=auth(ADMIN))
    page = f"http://{own_name}:{page_server.server_address[1]}/articles/a1.html"
    after_dns = client.post("/pages", json={"url": page, "site_id": site}, headers=auth(ADMIN))
    assert before_dns.status_code == after_dns.status_code == 403
    assert before_dns.json()["error"] == after_dns.json()["error"]
    # An unresolvable host: robots.txt cannot be fetched (a refusal), or without robots the page (a report error).
    unresolvable = client.post("/pages", json={"url": "http://nothing.invalid/", "site_id": site}, headers=auth(ADMIN))
    assert unresolvable.status_code == 403 and unresolvable.json()["error"]["details"] == {"reason": "robots"}
    no_robots = make_client(workbench=web.variant(crawl_respect_robots=False))
    fetched = no_robots.post("/pages", json={"url": "http://nothing.invalid/", "site_id": site}, headers=auth(ADMIN))
    assert fetched.status_code == 200 and fetched.json()["errors"][0]["reason"] == "network"
    assert fetched.json()["errors"][0]["message"] == \
        "The page could not be fetched: the host could not be resolved or reached."
    leaks = ("127.0.0.", "secret-intranet", "Name or service", "gaierror", "resolve host", "Allowed domains")
    for response in (before_dns, after_dns, unresolvable, fetched):
        assert not any(leak in response.text for leak in leaks), response.text
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert "secret-intranet.example" in logged and "nothing.invalid" in logged


def test_redirects_to_data_urls_are_refused_cleanly(make_client, wb, page_server):
    from crawl_server import Route

    page_server.state.routes["/to-data"] = Route(status=302, headers={"Location": "data:text/html,<b>hi</b>"})
    web = wb.variant(allowed_domains=["127.0.0.1"], allow_private_networks=True, crawl_delay_sec=0.0)
    client = make_client(workbench=web, raise_server_exceptions=False)
    response = client.post("/pages", json={"url": f"{base_url(page_server)}/to-data", "site_id": SITE_A},
                           headers=auth(ADMIN))
    assert response.status_code == 403 and response.json()["error"]["code"] == "CRAWL_REFUSED"
def test_worker_threads_match_the_connection_pool(make_client):
    """More threads than pooled connections only queue for a connection twice per search."""
    import anyio.to_thread

    client = make_client(db_pool_size=3)
    assert client.portal.call(lambda: anyio.to_thread.current_default_thread_limiter().total_tokens) == 3
