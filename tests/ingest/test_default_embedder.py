"""A store built with an embedder that is no longer the default keeps working until `rag reindex` moves it.

With RAG_EMBEDDER left unset (environment, .env, keyword), a store built with another registered embedder
opens with that one and says so once; an explicit RAG_EMBEDDER that differs is refused as before.
"""

from __future__ import annotations

import json
import logging
import uuid
from dataclasses import replace
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rag_core import open_workbench
from rag_core.cli import app
from rag_core.db.database import create_database_if_missing, drop_database, with_database
from rag_core.errors import EmbedderMismatch
from rag_core.providers.calibration import chat_floor, cosine_scale
from rag_core.search.hybrid import cosine_floor, fusion_for
from rag_core.settings import RagSettings

OLD = "use-multilingual"  # what every store on users' disks was built with before e5-small became the default
TEXTS = [
    ("api/fire", "Fire safety rules: every floor needs two evacuation exits and a smoke detector."),
    ("api/tea", "Green tea is brewed at eighty degrees for about two minutes."),
]


@pytest.fixture
def old_store(make_settings, pg_server_url: str) -> str:
    """The URL of a fresh database holding a store built with the former default, dropped afterwards."""
    url = with_database(pg_server_url, f"rag_olddefault_{uuid.uuid4().hex[:8]}")
    create_database_if_missing(url)
    with open_workbench(make_settings(database_url=url, embedder=OLD)) as first:
        for source, text in TEXTS:
            first.ingest_text(source, text, site_id="s")
    yield url
    drop_database(url)


def test_a_store_of_the_former_default_opens_with_its_own_embedder_and_says_how_to_move_it(
        old_store: str, make_settings, caplog: pytest.LogCaptureFixture) -> None:
    assert RagSettings.model_fields["embedder"].default == "e5-small"
    with caplog.at_level(logging.WARNING, logger="rag_core.workbench"):
        with open_workbench(make_settings(database_url=old_store)) as wb:
            assert (wb.settings.embedder, wb.embedder_name) == (OLD, OLD)
            assert wb.embedder_mismatch() is None
            # what reads a cosine is calibrated for the embedder in use, not the default
            assert chat_floor(wb.settings) == cosine_scale(OLD).chat_floor != cosine_scale("e5-small").chat_floor
            assert wb.search_engine.fusion == replace(fusion_for(OLD), cosine_floor=cosine_floor(OLD))
            hits = wb.search("how many exits does each floor need", mode="semantic", site_id="s")["results"]
            assert hits[0]["file_path"] == "api/fire"
            assert wb.ingest_text("api/more", "A third note.", site_id="s").status == "indexed"
            info = wb.status()
            assert (info["embedder"], info["dimension"], info["embedder_mismatch"]) == (OLD, 512, None)
            notice = info["embedder_notice"]
            assert notice == wb.embedder_notice
            assert f"built with {OLD}" in notice and "default embedder is now e5-small" in notice
            assert "rag reindex" in notice and f"RAG_EMBEDDER={OLD}" in notice
        with open_workbench(make_settings(database_url=old_store)):  # told once per process, not per opening
            pass
    assert [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING] == [notice]


def test_every_surface_on_a_store_of_the_former_default_uses_its_embedder(old_store: str, make_settings) -> None:
    """REST status carries the notice, LlamaIndex retrieves with the store's embedder, and a benchmark takes
    the store's vectors only for that embedder."""
    from fastapi.testclient import TestClient

    from rag_core.api.rest import create_app
    from rag_core.bench.scale import vectors_from_store

    with open_workbench(make_settings(database_url=old_store)) as wb:
        with TestClient(create_app(make_settings(database_url=old_store, rate_limit="off"), workbench=wb,
                                   run_scheduler=False)) as client:
            body = client.get("/status").json()
        assert (body["embedder"], body["embedder_notice"]) == (OLD, wb.embedder_notice)
        nodes = wb.as_retriever(mode="semantic", site_id="s").retrieve("how many exits does each floor need")
        assert nodes[0].node.metadata["source"] == "api/fire"
        wb.ingest_text("eval-doc", "Fire doors close automatically.", site_id="eval:scifact")
        assert len(vectors_from_store(wb, OLD)) == 1 and vectors_from_store(wb, "e5-small") == {}


def test_the_explicit_former_default_opens_without_a_notice(old_store: str, make_settings,
                                                            monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    with open_workbench(make_settings(database_url=old_store, embedder=OLD)) as wb:
        assert wb.embedder_notice is None and wb.status()["embedder_notice"] is None
    monkeypatch.setenv("RAG_EMBEDDER", OLD)
    with open_workbench(make_settings(database_url=old_store)) as wb:
        assert wb.embedder_notice is None and wb.embedder_name == OLD


@pytest.mark.parametrize("how", ["keyword", "environment", ".env"])
def test_an_explicit_other_embedder_is_still_refused(how: str, old_store: str, make_settings,
                                                     monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    extra: dict[str, object] = {}
    if how == "keyword":
        extra["embedder"] = "e5-small"
    elif how == "environment":
        monkeypatch.setenv("RAG_EMBEDDER", "e5-small")
    else:
        (tmp_path / ".env").write_text("RAG_EMBEDDER=e5-small\n", encoding="utf-8")
        extra["_env_file"] = tmp_path / ".env"
    with open_workbench(make_settings(database_url=old_store, **extra)) as wb:
        assert wb.embedder_notice is None and wb.embedder_name == "e5-small"
        with pytest.raises(EmbedderMismatch) as err:
            wb.search("evacuation exits", site_id="s")
        assert OLD in err.value.message and "e5-small" in err.value.message and "rag reindex" in err.value.message
        assert wb.status()["embedder_mismatch"]


def test_reindex_without_an_explicit_embedder_moves_the_store_to_the_default(old_store: str, make_settings) -> None:
    events = []
    with open_workbench(make_settings(database_url=old_store)) as wb:
        assert wb.embedder_name == OLD
        result = wb.reindex(progress=events.append)
        assert result == {"embedder": "e5-small", "dimension": 384, "chunks": 2}
        # the total is known from the first event on, before the model loads
        assert [(e.done, e.total) for e in events] == [(0, 2), (0, 2), (2, 2)]
        assert wb.embedder_notice is None and wb.settings.embedder == "e5-small"
        assert wb.search_engine.fusion == replace(fusion_for("e5-small"), cosine_floor=cosine_floor("e5-small"))
        hits = wb.search("how many exits does each floor need", mode="semantic", site_id="s")["results"]
        assert hits[0]["file_path"] == "api/fire"
        info = wb.status()
        assert (info["embedder"], info["dimension"], info["chunks_without_embedding"]) == ("e5-small", 384, 0)
        assert info["embedder_notice"] is None
    with open_workbench(make_settings(database_url=old_store)) as wb:
        assert wb.embedder_notice is None and wb.embedder_name == "e5-small"


def test_rag_status_and_reindex_on_a_store_of_the_former_default(old_store: str, cli_env,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DATABASE_URL", old_store)
    runner = CliRunner()
    status = runner.invoke(app, ["status"])
    assert status.exit_code == 0, status.output
    assert OLD in status.stdout and "default embedder is now e5-small" in " ".join(status.output.split())
    assert json.loads(runner.invoke(app, ["status", "--json"]).stdout)["embedder_notice"]
    moved = runner.invoke(app, ["reindex"])
    assert moved.exit_code == 0, moved.output
    assert "Re-embedded 2 chunks with e5-small (384 dimensions)." in moved.stdout
    after = runner.invoke(app, ["status"])
    assert "e5-small (384 dimensions)" in after.stdout and "default embedder is now" not in after.output
