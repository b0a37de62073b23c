"""API keys: missing and wrong keys, both header styles, per-site binding that leaks nothing, admin-only routes."""

from __future__ import annotations

import logging
import uuid

import pytest
from typer.testing import CliRunner

from rest_keys import ADMIN, API_KEYS, KEY_A, KEY_AB, KEY_ALL, KEY_B, SITE_A, SITE_B, auth
from rag_core.api.auth import KeyRing, check_bind, is_loopback
from rag_core.errors import ConfigError, Unauthorized

# One representative call per protected endpoint, aimed at SITE_B's data.
SITE_B_CALLS = [
    ("POST", "/documents", {"json": {"site_id": SITE_B, "source": "x.md", "content": "text"}}),
    ("POST", "/chat-messages", {"json": {"user_id": "u", "site_id": SITE_B, "role": "user", "message": "hi"}}),
    ("POST", "/retrieve-context", {"json": {"user_id": "u", "site_id": SITE_B, "query": "roadmap"}}),
    ("POST", "/search", {"json": {"query": "roadmap", "site_id": SITE_B}}),
    ("POST", "/chat", {"json": {"message": "roadmap?", "site_id": SITE_B}}),
    ("GET", "/sessions", {"params": {"site_id": SITE_B}}),
    ("POST", "/crawl", {"json": {"index_url": "https://example.com/", "site_id": SITE_B}}),
    ("POST", "/pages", {"json": {"url": "https://example.com/", "site_id": SITE_B}}),
    ("GET", "/status", {"params": {"site_id": SITE_B}}),
    ("GET", "/metrics/search", {"params": {"site_id": SITE_B}}),
]
ADMIN_CALLS = [
    ("DELETE", "/documents", {"params": {"source": "b/secret.md"}}),
    ("DELETE", "/chat-messages/cleanup", {}),
    ("DELETE", "/sessions/whatever", {}),
]


@pytest.mark.parametrize("method,path,kwargs", SITE_B_CALLS + ADMIN_CALLS)
def test_missing_key_is_unauthorized(client, method, path, kwargs):
    response = client.request(method, path, **kwargs)
    assert response.status_code == 401
    assert response.json() == {"success": False, "error": {
        "code": "UNAUTHORIZED",
        "message": "An API key is required; send it as `Authorization: Bearer <key>` or `X-API-Key: <key>`."}}


@pytest.mark.parametrize("headers", [{"Authorization": "Bearer nope"}, {"X-API-Key": "nope"},
                                     {"Authorization": f"Basic {KEY_A}"}, {"Authorization": f"Bearer {KEY_A}x"}])
def test_wrong_key_is_unauthorized(client, headers):
    response = client.post("/search", json={"query": "fire", "site_id": SITE_A}, headers=headers)
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "UNAUTHORIZED"


def test_bearer_and_x_api_key_both_work(client):
    body = {"query": "fire alarm", "site_id": SITE_A}
    bearer = client.post("/search", json=body, headers=auth(KEY_A))
    header = client.post("/search", json=body, headers={"X-API-Key": KEY_A})
    assert bearer.status_code == header.status_code == 200
    assert [r["id"] for r in bearer.json()["results"]] == [r["id"] for r in header.json()["results"]]


@pytest.mark.parametrize("method,path,kwargs", SITE_B_CALLS)
def test_another_sites_key_is_refused_before_anything_happens(client, wb, method, path, kwargs):
    before = wb.status(site_id=SITE_B)
    response = client.request(method, path, headers=auth(KEY_A), **kwargs)
    assert response.status_code == 401
    assert response.json()["error"] == {
        "code": "UNAUTHORIZED", "message": "This API key may not access the requested data; use a key bound to its site."}
    assert "secret" not in response.text.lower() and "roadmap" not in response.text.lower()
    after = wb.status(site_id=SITE_B)
    assert (after["documents"], after["chunks"]) == (before["documents"], before["chunks"])


def test_a_foreign_session_and_a_missing_one_look_the_same(client, wb):
    session = f"b-{uuid.uuid4().hex[:8]}"
    wb.chat_append(session, "user", "site B's private question")
    with wb.db.connection() as conn:
        conn.execute("UPDATE chat_sessions SET site_id = %s WHERE id = %s", (SITE_B, session))
    try:
        foreign = client.get(f"/sessions/{session}/messages", headers=auth(KEY_A))
        missing = client.get(f"/sessions/no-such-{uuid.uuid4().hex}/messages", headers=auth(KEY_A))
        assert foreign.status_code == missing.status_code == 401
        assert foreign.json() == missing.json()
        chat = client.post("/chat", json={"message": "continue", "session_id": session, "site_id": SITE_A},
                           headers=auth(KEY_A))
        assert chat.status_code == 401
        assert [m["content"] for m in wb.chat_history(session)] == ["site B's private question"]
        own = client.get(f"/sessions/{session}/messages", headers=auth(KEY_B))
        assert own.status_code == 200 and own.json()["messages"][0]["content"] == "site B's private question"
    finally:
        wb.chat_reset(session)


def test_a_key_with_several_sites_must_name_one(client):
    response = client.post("/search", json={"query": "fire"}, headers=auth(KEY_AB))
    assert response.status_code == 400
    assert SITE_A in response.json()["error"]["message"] and SITE_B in response.json()["error"]["message"]
    assert client.post("/search", json={"query": "fire", "site_id": SITE_B}, headers=auth(KEY_AB)).status_code == 200


def test_single_site_key_defaults_to_its_site(client):
    results = client.post("/search", json={"query": "fire alarm"}, headers=auth(KEY_A)).json()["results"]
    assert results and {r["site_id"] for r in results} == {SITE_A}


@pytest.mark.parametrize("key", [KEY_A, KEY_ALL])
@pytest.mark.parametrize("method,path,kwargs", ADMIN_CALLS)
def test_deletes_and_cleanup_need_the_admin_key(client, wb, key, method, path, kwargs):
    response = client.request(method, path, headers=auth(key), **kwargs)
    assert response.status_code == 401
    assert response.json()["error"]["message"] == "This operation needs the admin key (RAG_ADMIN_API_KEY)."
    assert wb.status(site_id=SITE_B)["documents"] == 1


def test_keys_never_reach_the_logs(client, caplog):
    caplog.set_level(logging.DEBUG)
    client.post("/search", json={"query": "fire", "site_id": SITE_A}, headers=auth(KEY_A))
    client.post("/search", json={"query": "fire", "site_id": SITE_B}, headers=auth(KEY_A))
    client.post("/search", json={"query": "fire"}, headers=auth(KEY_A + "wrong"))
    client.delete("/chat-messages/cleanup", params={"dry_run": True}, headers=auth(ADMIN))
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert KEY_A not in logged and ADMIN not in logged


def test_open_service_on_loopback_when_no_key_is_configured(make_client):
    client = make_client(api_keys="", admin_api_key="")
    assert client.post("/search", json={"query": "fire alarm", "site_id": SITE_A}).status_code == 200
    assert client.delete("/chat-messages/cleanup", params={"dry_run": True}).status_code == 200


def test_site_keys_without_an_admin_key_cannot_delete(make_client):
    client = make_client(admin_api_key="")
    response = client.delete("/chat-messages/cleanup", headers=auth(KEY_ALL))
    assert response.status_code == 401


def test_key_ring_parsing_and_constant_time_lookup():
    ring = KeyRing.from_settings(API_KEYS, ADMIN)
    assert ring.authenticate(KEY_A).sites == frozenset({SITE_A})
    assert ring.authenticate(KEY_AB).sites == frozenset({SITE_A, SITE_B})
    assert ring.authenticate(KEY_ALL).sites is None and not ring.authenticate(KEY_ALL).admin
    assert ring.authenticate(ADMIN).admin
    assert KEY_A not in ring.authenticate(KEY_A).identity  # the identity used for limits and logs is a digest
    with pytest.raises(Unauthorized):
        ring.authenticate(KEY_A.upper())
    for bad in ("k1", "k1=", "=site", "k1=a,k1=b"):
        with pytest.raises(ConfigError) as err:
            KeyRing.from_settings(bad, "")
        assert "RAG_API_KEYS" in err.value.message and "k1" not in err.value.message  # the secret is not echoed
    with pytest.raises(ConfigError, match="RAG_ADMIN_API_KEY"):
        KeyRing.from_settings("same=*", "same")


def test_refuses_to_bind_beyond_loopback_without_keys():
    open_ring = KeyRing.from_settings("", "")
    for host in ("127.0.0.1", "::1", "localhost", "127.0.0.2"):
        assert is_loopback(host)
        check_bind(host, open_ring)
    for host in ("0.0.0.0", "::", "10.1.2.3", "100.64.0.1"):
        assert not is_loopback(host)
        with pytest.raises(ConfigError, match="RAG_API_KEYS"):
            check_bind(host, open_ring)
    check_bind("0.0.0.0", KeyRing.from_settings("k=*", ""))


def test_rag_serve_refuses_a_public_address_without_keys(cli_env, monkeypatch):
    from rag_core.cli import app

    monkeypatch.setenv("RAG_API_KEYS", "")
    monkeypatch.setenv("RAG_ADMIN_API_KEY", "")
    result = CliRunner().invoke(app, ["serve", "--host", "0.0.0.0", "--port", "8999"])
    assert result.exit_code == 1
    assert "Refusing to listen on 0.0.0.0 with no API key configured" in result.output


@pytest.mark.parametrize("disguise", [" {sid}", "{sid} ", "\t{sid}", "{sid}\n", "{sid}\t"])
def test_a_disguised_session_id_is_refused_and_site_b_stays_untouched(client, wb, disguise):
    """Key A once read and wrote site B's chat by sending B's session id with a leading space: the
    ownership check saw no such session, then the turn stripped the id and used B's."""
    sid = f"sess-b-{uuid.uuid4().hex[:8]}"
    wb.chat_append(sid, "user", "Site B's confidential question")
    with wb.db.connection() as conn:
        conn.execute("UPDATE chat_sessions SET site_id = %s WHERE id = %s", (SITE_B, sid))
    try:
        before = wb.chat_history(sid)
        for body in ({"message": "Show me the history", "session_id": disguise.format(sid=sid), "site_id": SITE_A},
                     {"message": "Show me the history", "session_id": disguise.format(sid=sid)}):
            response = client.post("/chat", json=body, headers=auth(KEY_A))
            assert response.status_code == 400, response.text
            error = response.json()["error"]
            assert error["code"] == "INVALID_INPUT" and error["details"][0]["field"] == "session_id"
            assert "Site B" not in response.text
        # The exact id: refused like a session that does not exist.
        exact = client.post("/chat", json={"message": "Show me the history", "session_id": sid}, headers=auth(KEY_A))
        assert exact.status_code == 401
        assert wb.chat_history(sid) == before
    finally:
        wb.chat_reset(sid)


def test_another_sites_chat_memory_session_cannot_be_claimed(client, wb):
    """Chat-memory session ids derive from site and user, so key A could compute site B's and create it
    first; such ids are written only through /chat-messages."""
    from rag_core.chat.sessions import external_session_id

    sid = external_session_id("u-77", SITE_B)
    response = client.post("/chat", json={"message": "hello", "session_id": sid}, headers=auth(KEY_A))
    assert response.status_code == 400 and "chat-memory" in response.json()["error"]["message"]
    assert wb.get_session(sid) is None
    stored = client.post("/chat-messages", json={"user_id": "u-77", "site_id": SITE_B, "role": "user",
                                                 "message": "mine"}, headers=auth(KEY_B))
    assert stored.status_code == 201 and stored.json()["session_id"] == sid
    wb.chat_reset(sid)


@pytest.mark.parametrize("field,value", [("user_id", " u-1"), ("user_id", "u-1\n"), ("site_id", f"{SITE_A}\t")])
def test_ids_in_chat_memory_bodies_follow_the_one_pattern(client, field, value):
    body = {"user_id": "u-1", "site_id": SITE_A, "role": "user", "message": "hi", field: value}
    response = client.post("/chat-messages", json=body, headers=auth(KEY_A))
    assert response.status_code == 400 and response.json()["error"]["details"][0]["field"] == field
    query = client.get("/sessions", params={"site_id": f" {SITE_A}"}, headers=auth(KEY_A))
    assert query.status_code == 400


@pytest.mark.parametrize("name", ["api_key", "API_KEY", "apikey", "token"])
def test_a_key_in_the_query_string_is_refused(client, name):
    response = client.post("/search", params={name: KEY_A}, json={"query": "fire", "site_id": SITE_A})
    assert response.status_code == 401
    assert "URL" in response.json()["error"]["message"] and KEY_A not in response.text
    # Refused even next to a valid header: the key in the URL is already in some log and must be replaced.
    both = client.post("/search", params={name: KEY_A}, json={"query": "fire", "site_id": SITE_A},
                       headers=auth(KEY_A))
    assert both.status_code == 401
