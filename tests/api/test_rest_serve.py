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

from rest_keys import SITE_A, auth


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_rag_serve_answers_on_loopback_and_stops_cleanly(pg_url, tmp_path, sites):
    port = free_port()
    key = "serve-test-key"
    env = {**os.environ, "DATABASE_URL": pg_url, "RAG_DATA_DIR": str(tmp_path / "data"),
           "RAG_API_KEYS": f"{key}={SITE_A}", "RAG_ADMIN_API_KEY": "", "RAG_RETENTION_TIME": "04:30"}
    rag = Path(sys.executable).with_name("rag")
    log = tmp_path / "serve.log"
    with log.open("wb") as out:
        proc = subprocess.Popen([str(rag), "serve", "--port", str(port)], env=env, cwd=tmp_path,
                                stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 120
        while True:
            assert proc.poll() is None, f"rag serve exited: {log.read_text()[-2000:]}"
            try:
                if httpx.get(f"{base}/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, f"no /health in 120 s: {log.read_text()[-2000:]}"
            time.sleep(0.2)
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
