"""Chat fixtures: a small indexed site, a local OpenAI-compatible server, workbench variants."""

from __future__ import annotations

import uuid

import pytest

from openai_server import OpenAIServer
from rag_core.workbench import Workbench

DOCS = [
    {"source": "docs/search.md", "title": "Hybrid search",
     "text": "Hybrid search combines full-text ranking with vector similarity. It is implemented in "
             "rag_core/search/hybrid.py as one SQL statement with CTEs and reciprocal rank fusion."},
    {"source": "docs/retention.md", "title": "Retention",
     "text": "Chat retention deletes messages older than thirty days. The purge runs every night at "
             "03:00 and writes an audit row for each run."},
    {"source": "docs/ingest.md", "title": "Ingestion",
     "text": "Ingestion reads PDF, DOCX and Markdown files, splits them into chunks and embeds every chunk "
             "with the configured embedder."},
    {"source": "docs/fire.md", "title": "Пожарная безопасность",
     "text": "Требования к пожарной безопасности зданий описаны в своде правил. Ширина эвакуационного "
             "выхода должна быть не менее 1,2 метра."},
]


@pytest.fixture(scope="session")
def docs_site(wb) -> str:
    """A site holding DOCS, ingested once for the chat tests."""
    site_id = f"t-chat-{uuid.uuid4().hex[:6]}"
    report = wb.ingest_texts(DOCS, site_id=site_id)
    assert report.to_dict()["failed"] == 0
    yield site_id
    with wb.db.connection() as conn:
        conn.execute("DELETE FROM documents WHERE site_id = %s", (site_id,))
        conn.execute("DELETE FROM chat_sessions WHERE site_id = %s", (site_id,))
        conn.execute("DELETE FROM agent_instructions WHERE site_id = %s", (site_id,))


@pytest.fixture
def session_id(wb) -> str:
    """A fresh chat session id, deleted afterwards."""
    sid = f"s-{uuid.uuid4().hex[:10]}"
    yield sid
    wb.chat_reset(sid)


@pytest.fixture(scope="session")
def openai_server() -> OpenAIServer:
    with OpenAIServer() as server:
        yield server


@pytest.fixture
def llm_server(openai_server: OpenAIServer) -> OpenAIServer:
    openai_server.reset()
    yield openai_server
    openai_server.reset()


@pytest.fixture
def llm_wb(wb, llm_server: OpenAIServer) -> Workbench:
    """The workbench answering with the `openai` provider against the local server."""
    return wb.variant(llm="openai", llm_base_url=llm_server.base_url, llm_model="test-model",
                      llm_api_key="sk-test", llm_timeout_sec=5.0)


@pytest.fixture
def cli_env(cli_env, wb) -> None:
    """The shared CLI environment, with the default CLI conversation emptied."""
    from rag_core.cli.chat import DEFAULT_SESSION

    wb.chat_reset(DEFAULT_SESSION)
    yield
    wb.chat_reset(DEFAULT_SESSION)


@pytest.fixture
def shared_embedder(monkeypatch: pytest.MonkeyPatch, wb, pg_url: str) -> None:
    """`rag chat "..."` opens a Workbench per call; reuse the loaded embedder to keep the test quick."""
    from rag_core.cli import common
    from rag_core.db.database import Database
    from rag_core.settings import load_settings
    from rag_core.workbench import Workbench

    def workbench() -> Workbench:
        return Workbench(load_settings(), Database(pg_url, pool_size=2), pg_url, False, embedder=wb.embedder)

    monkeypatch.setattr(common, "workbench", workbench)
