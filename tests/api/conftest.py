"""REST fixtures: two sites with documents, keys bound to them, a TestClient per app, a real redis-server."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from typing import Any, Callable, Iterator

import pytest
from fastapi.testclient import TestClient

from rag_core.api.rest import create_app
from rag_core.workbench import Workbench
from rest_keys import ADMIN, API_KEYS, DOCS_A, DOCS_B, SITE_A, SITE_B


@pytest.fixture(scope="session")
def sites(wb: Workbench) -> tuple[str, str]:
    """Two sites with a few documents each, removed at the end."""
    for site, docs in ((SITE_A, DOCS_A), (SITE_B, DOCS_B)):
        assert wb.ingest_texts(docs, site_id=site).to_dict()["failed"] == 0
    yield SITE_A, SITE_B
    with wb.db.connection() as conn:
        conn.execute("DELETE FROM documents WHERE site_id = ANY(%s)", ([SITE_A, SITE_B],))
        conn.execute("DELETE FROM chat_sessions WHERE site_id = ANY(%s)", ([SITE_A, SITE_B],))


@pytest.fixture
def make_client(wb: Workbench, make_settings: Callable[..., Any], sites: tuple[str, str]
                ) -> Iterator[Callable[..., TestClient]]:
    """Build a TestClient on an app over the session Workbench; keys on, rate limit off unless overridden."""
    clients: list[TestClient] = []

    def factory(workbench: Workbench | None = None, raise_server_exceptions: bool = True,
                **overrides: object) -> TestClient:
        values = {"api_keys": API_KEYS, "admin_api_key": ADMIN, "rate_limit": "off", **overrides}
        app = create_app(make_settings(**values), workbench=workbench or wb, run_scheduler=False)
        client = TestClient(app, raise_server_exceptions=raise_server_exceptions)
        client.__enter__()
        clients.append(client)
        return client

    yield factory
    for client in clients:
        client.__exit__(None, None, None)


@pytest.fixture
def client(make_client: Callable[..., TestClient]) -> TestClient:
    return make_client()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="session")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real redis-server on a free loopback port, killed afterwards; fails (never skips) when it is missing."""
    binary = shutil.which("redis-server")
    if binary is None:
        pytest.fail("redis-server is not installed: the shared rate limiter and search cache are tested against a "
                    "real Redis. Install it with `make system-deps` (Debian package redis-server).")
    port = _free_port()
    workdir = tmp_path_factory.mktemp("redis")
    proc = subprocess.Popen([binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                             "--dir", str(workdir)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        import redis

        client = redis.Redis(host="127.0.0.1", port=port)
        deadline = time.monotonic() + 10
        while True:
            try:
                client.ping()
                break
            except redis.ConnectionError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    err = proc.stderr.read().decode(errors="replace") if proc.poll() is not None else ""
                    pytest.fail(f"redis-server did not start on port {port}: {err.strip() or 'no answer in 10 s'}")
                time.sleep(0.05)
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        proc.kill()
        proc.wait(timeout=10)
