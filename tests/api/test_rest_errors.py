"""Every validation error and failure has the search spec's error body, names the problem, and stores nothing."""

from __future__ import annotations

import json
import socket
import threading
import time

import psycopg
import pytest
import uvicorn

from rest_keys import ADMIN, KEY_A, SITE_A, auth


def error_of(response, status: int, code: str) -> dict:
    assert response.status_code == status, response.text
    body = response.json()
    assert body["success"] is False and body["error"]["code"] == code
    assert "Traceback" not in response.text
    return body["error"]


@pytest.mark.parametrize("body,field,words", [
    ({}, "query", "Field required"),
    ({"query": 5}, "query", "valid string"),
    ({"query": "fire", "limit": "many"}, "limit", "valid integer"),
    ({"query": "fire", "limt": 5}, "limt", "Extra inputs"),
    ({"query": "fire", "document_types": "pdf"}, "document_types", "valid list"),
    ({"query": "fire", "date_range": {"from": "2024-01-01", "until": "x"}}, "date_range.until", "Extra inputs"),
    ({"query": "fire\x00"}, "query", "NUL"),
])
def test_schema_errors_are_invalid_query_on_search(client, body, field, words):
    error = error_of(client.post("/search", json=body, headers=auth(KEY_A)), 400, "INVALID_QUERY")
    assert error["message"].startswith(f"{field}:") and words in error["message"]
    assert {"field": field} .items() <= error["details"][0].items()


@pytest.mark.parametrize("body,message", [
    ({"query": "   "}, "The query is empty; type what you are looking for."),
    ({"query": "x" * 501}, "Query is 501 characters; the limit is 500."),
    ({"query": "fire", "limit": 51}, "limit is 51; choose 1-50."),
    ({"query": "fire", "limit": 0}, "limit is 0; choose 1-50."),
    ({"query": "fire", "max_chunks": 11}, "max_chunks is 11; choose 1-10."),
    ({"query": "fire", "page": 0}, "page is 0; choose 1-10000."),
    ({"query": "fire", "search_mode": "fuzzy"}, "Unknown search mode 'fuzzy'; choose one of: hybrid, semantic, fulltext."),
    ({"query": "fire", "document_types": ["exe"]}, "Unknown document type 'exe'; choose from pdf, docx, xlsx, txt, md, csv, html."),
    ({"query": "fire", "date_range": {"from": "2024-13-01"}},
     "date_from '2024-13-01' is not a date; write it as YYYY-MM-DD, e.g. 2024-01-31."),
    ({"query": "fire", "date_range": {"from": "2024-05-01", "to": "2024-01-01"}},
     "date_from 2024-05-01 is after date_to 2024-01-01; swap them."),
])
def test_search_limits_give_the_workbench_messages(client, body, message):
    error = error_of(client.post("/search", json={"site_id": SITE_A, **body}, headers=auth(KEY_A)), 400, "INVALID_QUERY")
    assert error["message"] == message


@pytest.mark.parametrize("path,body,field", [
    ("/documents", {"site_id": SITE_A, "source": "x.md"}, "content"),
    ("/documents", {"site_id": SITE_A, "source": "", "content": "text"}, "source"),
    ("/documents", {"site_id": SITE_A, "source": "x.md", "content": "a\x00b"}, "content"),
    ("/chat-messages", {"user_id": "u", "site_id": SITE_A, "role": "user"}, "message"),
    ("/retrieve-context", {"user_id": "u", "site_id": SITE_A, "query": "q", "k": 0}, "k"),
    ("/chat", {"message": ""}, "message"),
    ("/chat", {"message": "hi", "k": 500}, "k"),
    ("/crawl", {"pattern": "x"}, "index_url"),
    ("/pages", {"url": "https://example.com", "depth": 3}, "depth"),
])
def test_schema_errors_elsewhere_are_invalid_input(client, wb, path, body, field):
    before = wb.status(site_id=SITE_A)["documents"]
    error = error_of(client.post(path, json=body, headers=auth(KEY_A)), 400, "INVALID_INPUT")
    assert error["message"].startswith(f"{field}:")
    assert wb.status(site_id=SITE_A)["documents"] == before


@pytest.mark.parametrize("method,path,kwargs,field", [
    ("GET", "/sessions", {"params": {"limit": 0}}, "limit"),
    ("GET", "/sessions/s1/messages", {"params": {"limit": "all"}}, "limit"),
    ("DELETE", "/documents", {}, "source"),
    ("DELETE", "/chat-messages/cleanup", {"params": {"older_than_days": -1}}, "older_than_days"),
    ("GET", "/metrics/search", {"params": {"since": "soon"}}, "since"),
    ("GET", "/status", {"params": {"site_id": "a\x00"}}, "site_id"),
])
def test_query_parameter_errors(client, method, path, kwargs, field):
    key = ADMIN if method == "DELETE" else KEY_A
    assert field in error_of(client.request(method, path, headers=auth(key), **kwargs), 400, "INVALID_INPUT")["message"]


def test_a_source_or_path_naming_an_unknown_home_is_not_found(client, wb, tmp_path):
    """`~name` of a user this machine lacks cannot be expanded (pathlib raises RuntimeError): it is a source
    that is not stored, and a path that does not exist, not a server error (the REST fuzz test found it)."""
    gone = "~no-such-user-7f3e/notes.md"
    error = error_of(client.delete("/documents", params={"source": gone, "site_id": SITE_A}, headers=auth(ADMIN)),
                     404, "NOT_FOUND")
    assert gone in error["message"]
    report = wb.ingest_paths([gone, tmp_path], site_id=SITE_A)
    [outcome] = [o for o in report.outcomes if o.status == "failed"]
    assert outcome.reason == "path does not exist" and outcome.source.startswith("~no-such-user-7f3e")


def test_role_and_malformed_json(client):
    error = error_of(client.post("/chat-messages", json={"user_id": "u", "site_id": SITE_A, "role": "bot",
                                                         "message": "hi"}, headers=auth(KEY_A)), 400, "INVALID_INPUT")
    assert error["message"] == "role 'bot' is not allowed; use 'user' or 'ai'."
    broken = client.post("/search", content=b'{"query": "fire",', headers={**auth(KEY_A), "Content-Type": "application/json"})
    error = error_of(broken, 400, "INVALID_QUERY")
    assert error["message"].startswith("body: not valid JSON at character 17 (") and "See /docs" in error["message"]
    assert error["details"][0]["field"] == "body"


def test_unknown_path_and_wrong_method(client):
    error = error_of(client.get("/nope", headers=auth(KEY_A)), 404, "NOT_FOUND")
    assert error["message"] == "No endpoint GET /nope; /docs lists them."
    response = client.get("/search", headers=auth(KEY_A))
    error = error_of(response, 405, "METHOD_NOT_ALLOWED")
    assert "POST" in error["message"] and response.headers["allow"] == "POST"


class Exploding:
    """A Workbench stand-in whose search fails the way a bug or a dead database would."""

    def __init__(self, wb, exc: Exception) -> None:
        self._wb, self._exc = wb, exc
        self.settings = wb.settings

    def search(self, *args, **kwargs):
        raise self._exc

    def __getattr__(self, name):
        return getattr(self._wb, name)


def test_a_bug_is_a_500_without_a_stack_trace(make_client, wb, caplog):
    client = make_client(workbench=Exploding(wb, KeyError("secret internal detail")), raise_server_exceptions=False)
    response = client.post("/search", json={"query": "fire", "site_id": SITE_A}, headers=auth(KEY_A))
    error = error_of(response, 500, "INTERNAL")
    assert "secret internal detail" not in response.text and "KeyError" not in response.text
    assert error["details"]["incident"] in error["message"]
    assert any(error["details"]["incident"] in r.getMessage() and r.exc_info for r in caplog.records)


def test_a_database_failure_is_database_error(make_client, wb):
    client = make_client(workbench=Exploding(wb, psycopg.OperationalError("connection refused")))
    error = error_of(client.post("/search", json={"query": "fire", "site_id": SITE_A}, headers=auth(KEY_A)),
                     503, "DATABASE_ERROR")
    assert "PostgreSQL" in error["message"] and "connection refused" not in error["message"]


def _request(sock: socket.socket, method: str, path: str, headers: dict[str, str],
             body: bytes = b"") -> tuple[int, bytes]:
    """One HTTP/1.1 request on an open keep-alive connection; (status, body), or (0, b"") if the server hung up."""
    head = "".join(f"{k}: {v}\r\n" for k, v in {"Host": "test", "Content-Length": str(len(body)), **headers}.items())
    sock.sendall(f"{method} {path} HTTP/1.1\r\n{head}\r\n".encode() + body)
    data = b""
    try:
        while b"\r\n\r\n" not in data:
            chunk = sock.recv(65536)
            if not chunk:
                return 0, b""
            data += chunk
        header, _, rest = data.partition(b"\r\n\r\n")
        lines = header.decode("latin-1").split("\r\n")
        length = int(next(line.split(":", 1)[1] for line in lines if line.lower().startswith("content-length")))
        while len(rest) < length:
            chunk = sock.recv(65536)
            if not chunk:
                return 0, b""
            rest += chunk
    except ConnectionResetError:
        return 0, b""
    return int(lines[0].split()[1]), rest[:length]


def test_after_a_500_the_next_request_on_the_same_connection_works(make_client, wb):
    """A real uvicorn and a raw keep-alive client: Starlette's outermost error handler re-raised after
    answering, and uvicorn then reset the connection, so the client's next request failed too."""
    app = make_client(workbench=Exploding(wb, KeyError("bug")), raise_server_exceptions=False).app
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="critical", lifespan="off"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 30
        while not server.started:
            assert time.monotonic() < deadline, "uvicorn did not start"
            time.sleep(0.05)
        body = json.dumps({"query": "fire", "site_id": SITE_A}).encode()
        headers = {**auth(KEY_A), "Content-Type": "application/json"}
        with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
            status, text = _request(sock, "POST", "/search", headers, body)
            assert status == 500 and json.loads(text)["error"]["code"] == "INTERNAL"
            assert _request(sock, "GET", "/health", {})[0] == 200
            assert _request(sock, "POST", "/search", headers, body)[0] == 500
            assert _request(sock, "GET", "/status", auth(KEY_A))[0] == 200
    finally:
        server.should_exit = True
        thread.join(timeout=30)
