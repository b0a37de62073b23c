"""A process's first search reports its own time; loading the embedding model is logged beside it."""

from __future__ import annotations

from typer.testing import CliRunner

from rag_core import open_workbench
from rag_core.cli import app

DOC = {"source": "ducts.md", "text": "Ventilation ducts need fire dampers at every fire wall.", "title": "Ducts"}


def logged(wb, site: str) -> list[tuple]:
    wb.flush_search_log()
    with wb.db.connection() as conn:
        return conn.execute("SELECT query, mode, params ? 'model_load_ms', (params->>'model_load_ms')::float"
                            " FROM query_log WHERE site_id = %s ORDER BY id", (site,)).fetchall()


def test_the_model_load_is_logged_apart_from_the_first_search(wb, make_settings, site) -> None:
    wb.ingest_texts([DOC], site_id=site)
    with open_workbench(make_settings()) as fresh:  # a new process's workbench: its model is not loaded yet
        fresh.search("ventilation", mode="fulltext", site_id=site)  # full text needs no model
        fresh.search("fire dampers", site_id=site)
        fresh.search("fire wall", mode="semantic", site_id=site)
        fresh.flush_search_log()
    rows = logged(wb, site)
    assert [(r[0], r[2]) for r in rows] == [("ventilation", False), ("fire dampers", True), ("fire wall", False)]
    assert rows[1][3] > 0


def test_rag_search_logs_the_model_load_apart(cli_env, wb, site) -> None:
    wb.ingest_texts([DOC], site_id=site)
    result = CliRunner().invoke(app, ["search", "fire dampers", "--site", site])
    assert result.exit_code == 0, result.output
    assert "1 result for \"fire dampers\" (hybrid, " in result.output
    rows = logged(wb, site)
    assert [(r[0], r[2]) for r in rows] == [("fire dampers", True)]


def test_a_service_loads_the_model_before_serving_and_no_search_counts_it(wb, make_settings, site) -> None:
    wb.ingest_texts([DOC], site_id=site)
    with open_workbench(make_settings()) as fresh:
        assert fresh.search_engine.load_model() > 0   # what `rag serve` does before it serves
        assert fresh.search_engine.load_model() == 0  # once
        fresh.search("fire dampers", site_id=site)
        fresh.flush_search_log()
    assert [(r[0], r[2]) for r in logged(wb, site)] == [("fire dampers", False)]


def test_an_empty_site_answers_before_the_model_loads(wb, make_settings, site) -> None:
    """A first search of a site with nothing in it loaded the model (about 10 s with e5-small) to say so."""
    import pytest

    from rag_core.errors import IndexUnavailable

    with open_workbench(make_settings()) as fresh:
        for mode in ("hybrid", "semantic"):
            with pytest.raises(IndexUnavailable, match=f"Nothing is indexed for site '{site}' yet"):
                fresh.search("fire dampers", mode=mode, site_id=site)
        assert not fresh.search_engine._model_ready
        wb.ingest_texts([DOC], site_id=site)
        assert fresh.search("fire dampers", site_id=site)["total_results"] == 1
        assert fresh.search_engine._model_ready
        fresh.flush_search_log()
    assert [(r[0], r[1]) for r in logged(wb, site)][:2] == [("fire dampers", "hybrid"), ("fire dampers", "semantic")]
