"""`rag serve` for real: uvicorn on a free loopback port, keys enforced, the purge scheduled, a clean stop."""

from __future__ import annotations

import os
import signal
import time
import uuid
from pathlib import Path

import httpx
import psutil
import psycopg

from rest_keys import SITE_A, auth
from serving import start_rag_serve, stop


def test_rag_serve_answers_on_loopback_and_stops_cleanly(pg_url, tmp_path, sites):
    key = "serve-test-key"
    env = {"DATABASE_URL": pg_url, "RAG_DATA_DIR": str(tmp_path / "data"),
           "RAG_API_KEYS": f"{key}={SITE_A}", "RAG_ADMIN_API_KEY": "", "RAG_RETENTION_TIME": "04:30"}
    log = tmp_path / "serve.log"
    query = f"fire alarm {uuid.uuid4().hex[:6]}"
    proc, base = start_rag_serve([], env, tmp_path, log, timeout=120)
    try:
        assert httpx.post(f"{base}/search", json={"query": query}).status_code == 401
        found = httpx.post(f"{base}/search", json={"query": query}, headers=auth(key), timeout=30)
        assert found.status_code == 200 and found.json()["results"][0]["file_path"] == "a/fire.md"
    finally:
        stop(proc, timeout=30)
    with psycopg.connect(pg_url) as conn:  # the background log writer flushed on the way out
        assert conn.execute("SELECT count(*) FROM query_log WHERE query = %s", (query,)).fetchone()[0] == 1
    output = log.read_text()
    assert "Retention purge scheduled daily at 04:30" in output
    assert "Application shutdown complete" in output
    assert key not in output


def postmaster(pgdata: Path) -> int | None:
    try:
        return int((pgdata / "postmaster.pid").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def test_rag_serve_on_the_embedded_server_refuses_huge_bodies_and_heals(server_dir, tmp_path):
    """A real `rag serve` on its own embedded PostgreSQL: a 10 MB body is refused (by length and when
    streamed), a key in the URL is refused and kept out of the access log, and after the postmaster is
    killed /health stays live, /health/ready answers 503 at once and the service comes back by itself."""
    admin = "serve-admin-key"
    env = {"DATABASE_URL": ""}  # empty: the service starts its own embedded server
    env.update({"RAG_DATA_DIR": str(server_dir / "data"), "RAG_API_KEYS": "", "RAG_ADMIN_API_KEY": admin,
                "RAG_RATE_LIMIT": "off"})
    pgdata = server_dir / "data" / "pgdata"
    log = tmp_path / "serve.log"
    proc, base = start_rag_serve([], env, tmp_path, log, timeout=180, ready="/health/ready")
    try:
        with httpx.Client(base_url=base, headers=auth(admin), timeout=60) as client:
            added = client.post("/documents", json={"site_id": "heal", "source": "fire.md",
                                                    "content": "Fire alarms are tested every month."})
            assert added.status_code == 201, added.text
            big = {"user_id": "u1", "site_id": "heal", "query": "x" * 10_000_000}
            assert client.post("/retrieve-context", json=big).status_code == 413

            def streamed():  # no Content-Length: refused once the bytes pass the limit
                yield b'{"user_id": "u1", "site_id": "heal", "query": "'
                for _ in range(100):
                    yield b"x" * 100_000
                yield b'"}'

            refused = client.post("/retrieve-context", content=streamed(), headers={"Content-Type": "application/json"})
            assert refused.status_code == 413 and refused.json()["error"]["code"] == "PAYLOAD_TOO_LARGE"
            in_url = httpx.post(f"{base}/search?api_key={admin}", json={"query": "fire", "site_id": "heal"})
            assert in_url.status_code == 401

            os.kill(postmaster(pgdata), signal.SIGKILL)
            killed_at = time.monotonic()
            assert client.get("/health").status_code == 200  # the process lives: liveness says so
            down = client.get("/health/ready")
            while down.status_code == 200:  # a killed server's backends may answer for a few milliseconds
                assert time.monotonic() - killed_at < 30, "readiness never noticed the dead server"
                down = client.get("/health/ready")
            assert down.status_code == 503 and down.headers["Retry-After"] == "2"
            assert down.json()["error"]["code"] == "DATABASE_ERROR"
            while client.get("/health/ready").status_code != 200:
                assert time.monotonic() - killed_at < 120, f"no recovery: {log.read_text()[-2000:]}"
                time.sleep(0.1)
            found = client.post("/search", json={"query": "fire alarms", "site_id": "heal"})
            assert found.status_code == 200 and found.json()["total_results"] == 1
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=60)
    output = log.read_text()
    assert admin not in output, "a key reached the log"
    assert "api_key=***" in output
    deadline = time.monotonic() + 30
    while postmaster(pgdata) and psutil.pid_exists(postmaster(pgdata)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not (postmaster(pgdata) and psutil.pid_exists(postmaster(pgdata))), "rag serve left its server running"
