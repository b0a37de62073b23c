"""Shared fixtures: a fresh database on a real PostgreSQL with pgvector for the whole test session."""

from __future__ import annotations

import os
import re
import shutil
import tempfile
import uuid
from pathlib import Path

import pytest

from rag_core.db.database import create_database_if_missing, drop_database, with_database
from rag_core.settings import RagSettings


def pytest_configure(config: pytest.Config) -> None:
    """One folder of converted models (the e5-small ONNX encoder) for every test and the commands they start.

    Tests give themselves fresh data folders; a converted encoder under each would be built again per test.
    The folder lives in pytest's cache, so later runs reuse it too; RAG_MODELS_DIR set outside wins.
    """
    cache = getattr(config, "cache", None)
    folder = cache.mkdir("models") if cache is not None else Path(tempfile.gettempdir()) / "rag-test-models"
    os.environ.setdefault("RAG_MODELS_DIR", str(folder))


def make_server_dir() -> Path:
    """A fresh folder for an embedded server that its OS user can enter when the tests run as root.

    pytest's own temp folders are private (700) and the server refuses to loosen them.
    """
    folder = Path(tempfile.mkdtemp(prefix="rag-test-pg-"))
    folder.chmod(0o755)  # our own new folder, not a parent of anything else
    return folder


@pytest.fixture
def server_dir() -> Path:
    """A folder for a test's own embedded server, removed afterwards."""
    folder = make_server_dir()
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="session")
def pg_server_url() -> str:
    """The server's URL: RAG_TEST_DATABASE_URL when set, else an embedded server in a temp folder."""
    external = os.environ.get("RAG_TEST_DATABASE_URL")
    if external:
        yield external
        return
    from rag_core.db.server import embedded_server_uri

    from rag_core.db.server import release_embedded_server

    folder = make_server_dir()
    # A failure here fails the suite with the reason; tests never skip for a missing database.
    yield embedded_server_uri(folder)
    release_embedded_server(folder)
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="session")
def pg_url(pg_server_url: str) -> str:
    """A fresh database for this test session, dropped at the end."""
    url = with_database(pg_server_url, f"rag_test_{uuid.uuid4().hex[:10]}")
    create_database_if_missing(url)
    yield url
    drop_database(url)


@pytest.fixture(scope="session")
def make_settings(pg_url: str, tmp_path_factory: pytest.TempPathFactory):
    """Settings bound to the test database that ignore the developer's .env file."""
    data_dir = tmp_path_factory.mktemp("rag-data")

    def factory(**overrides: object) -> RagSettings:
        values = {"database_url": pg_url, "data_dir": data_dir, "_env_file": None, **overrides}
        return RagSettings(**values)

    return factory


@pytest.fixture(scope="session")
def wb(make_settings):
    """One Workbench for the session (the embedder loads once); tests isolate themselves by site."""
    from rag_core import open_workbench

    workbench = open_workbench(make_settings())
    yield workbench
    workbench.close()


@pytest.fixture
def site(wb, request: pytest.FixtureRequest) -> str:
    """A site id unique to the test; its documents are deleted afterwards."""
    name = re.sub(r"[^A-Za-z0-9_.-]", "-", request.node.name[:40])  # a valid id (rag_core.security.ids)
    site_id = f"t-{name}-{uuid.uuid4().hex[:6]}"
    yield site_id
    with wb.db.connection() as conn:
        conn.execute("DELETE FROM documents WHERE site_id = %s", (site_id,))


@pytest.fixture
def cli_env(monkeypatch: pytest.MonkeyPatch, pg_url: str, tmp_path) -> None:
    """CLI commands open the test database; no developer .env is read."""
    monkeypatch.setenv("DATABASE_URL", pg_url)
    monkeypatch.setenv("RAG_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.chdir(tmp_path)
