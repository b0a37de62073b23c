"""`rag serve` for real: uvicorn on a free loopback port, keys enforced, the purge scheduled, a clean stop."""

from __future__ import annotations

import uuid

import httpx
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
