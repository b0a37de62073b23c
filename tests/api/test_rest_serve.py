"""`rag serve` for real: uvicorn on a free loopback port, keys enforced, the purge scheduled, a clean stop."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import psutil

from rest_keys import SITE_A, auth


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_serve(env: dict[str, str], tmp_path: Path, ready: str = "/health") -> tuple[subprocess.Popen, str, Path]:
    """`rag serve` on a free loopback port, once `ready` answers 200: (process, base URL, log file)."""
    port = free_port()
    log = tmp_path / "serve.log"
    with log.open("wb") as out:
        proc = subprocess.Popen([str(Path(sys.executable).with_name("rag")), "serve", "--port", str(port)], env=env,
                                cwd=tmp_path, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 180
    while True:
        assert proc.poll() is None, f"rag serve exited: {log.read_text()[-2000:]}"
        try:
            if httpx.get(f"{base}{ready}", timeout=2).status_code == 200:
                return proc, base, log
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline:
            os.killpg(proc.pid, signal.SIGTERM)
            raise AssertionError(f"no {ready} in 180 s: {log.read_text()[-2000:]}")
        time.sleep(0.2)


def test_rag_serve_answers_on_loopback_and_stops_cleanly(pg_url, tmp_path, sites):
    key = "serve-test-key"
    env = {**os.environ, "DATABASE_URL": pg_url, "RAG_DATA_DIR": str(tmp_path / "data"),
           "RAG_API_KEYS": f"{key}={SITE_A}", "RAG_ADMIN_API_KEY": "", "RAG_RETENTION_TIME": "04:30"}
    proc, base, log = start_serve(env, tmp_path)
    try:
        assert httpx.post(f"{base}/search", json={"query": "fire alarm"}).status_code == 401
        found = httpx.post(f"{base}/search", json={"query": "fire alarm"}, headers=auth(key), timeout=30)
        assert found.status_code == 200 and found.json()["results"][0]["file_path"] == "a/fire.md"
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)
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
    env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
    env.update({"RAG_DATA_DIR": str(server_dir / "data"), "RAG_API_KEYS": "", "RAG_ADMIN_API_KEY": admin,
                "RAG_RATE_LIMIT": "off"})
    pgdata = server_dir / "data" / "pgdata"
    proc, base, log = start_serve(env, tmp_path, ready="/health/ready")
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
