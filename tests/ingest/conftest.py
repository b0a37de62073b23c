"""Fixtures for the crawler tests: one real 127.0.0.1 HTTP server per module, reset per test."""

from __future__ import annotations

from typing import Any

import pytest

from crawl_server import serve


@pytest.fixture(scope="module")
def server() -> Any:
    with serve() as httpd:
        yield httpd


@pytest.fixture
def srv(server: Any) -> Any:
    server.state.reset()
    return server
