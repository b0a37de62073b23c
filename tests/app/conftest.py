"""Fixtures for the Streamlit app: the app's own cached Workbench on the test database, and a fresh empty one."""

from __future__ import annotations

import sys
import uuid
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import app_ui  # noqa: E402

from rag_core import RagError  # noqa: E402
from rag_core.db.database import create_database_if_missing, drop_database, with_database  # noqa: E402


def _drop_cached_workbench() -> None:
    """Close and forget the app's cached Workbench so the next page run opens DATABASE_URL afresh."""
    import streamlit as st

    app_ui.workbench.clear()
    st.cache_data.clear()


@pytest.fixture
def app_env(monkeypatch: pytest.MonkeyPatch, pg_url: str, tmp_path: Path) -> None:
    """The app opens the session's test database; no developer .env is read."""
    monkeypatch.setenv("DATABASE_URL", pg_url)
    monkeypatch.setenv("RAG_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.chdir(tmp_path)
    import streamlit as st

    st.cache_data.clear()


@pytest.fixture
def app_wb(app_env):
    """The Workbench the app itself uses (st.cache_resource), so writes made here clear its search cache."""
    return app_ui.workbench()


@pytest.fixture
def empty_db_url(pg_server_url: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    """A fresh database with nothing in it (the first run); the app's Workbench is reopened on it."""
    url = with_database(pg_server_url, f"rag_empty_{uuid.uuid4().hex[:10]}")
    create_database_if_missing(url)
    monkeypatch.setenv("DATABASE_URL", url)
    monkeypatch.setenv("RAG_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.chdir(tmp_path)
    _drop_cached_workbench()
    yield url
    try:
        app_ui.workbench().close()  # releases the pool so the database can be dropped
    except RagError:
        pass  # a test that set a bad setting never opened one
    finally:
        _drop_cached_workbench()
        drop_database(url)


@pytest.fixture
def app_site(app_wb, request: pytest.FixtureRequest):
    """A site id unique to the test; its documents, sessions and query-log rows are deleted afterwards."""
    site_id = f"app-{request.node.name[:30]}-{uuid.uuid4().hex[:6]}"
    yield site_id
    with app_wb.db.connection() as conn:
        conn.execute("DELETE FROM documents WHERE site_id = %s", (site_id,))
        conn.execute("DELETE FROM chat_sessions WHERE site_id = %s", (site_id,))
        conn.execute("DELETE FROM query_log WHERE site_id = %s", (site_id,))
    app_wb.store.after_write()
