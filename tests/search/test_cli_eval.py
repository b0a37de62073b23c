"""`rag search` in three formats, its error output, and `rag eval` on a tiny BEIR folder."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rag_core.cli import app

runner = CliRunner()


@pytest.fixture
def cli_env(cli_env, monkeypatch: pytest.MonkeyPatch, pg_url: str, wb) -> None:
    """The shared CLI environment; each command's Workbench reuses the loaded embedder."""
    from rag_core.cli import common
    from rag_core.db.database import Database
    from rag_core.settings import load_settings
    from rag_core.workbench import Workbench


    def workbench() -> Workbench:
        return Workbench(load_settings(), Database(pg_url, pool_size=2), pg_url, False, embedder=wb.embedder)

    monkeypatch.setattr(common, "workbench", workbench)


def test_search_json(cli_env, corpus_site) -> None:
    result = runner.invoke(app, ["search", "fire safety of buildings", "--site", corpus_site, "-f", "json", "-l", "2",
                                 "-k", "1"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["success"] and data["results"][0]["file_path"] == "en/fire.md"
    assert len(data["results"]) == 2 and len(data["results"][0]["context_chunks"]) == 1


def test_search_text_marks_terms(cli_env, corpus_site) -> None:
    result = runner.invoke(app, ["search", "пожарная сигнализация", "--site", corpus_site, "--mode", "fulltext"])
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("1 result for \"пожарная сигнализация\" (fulltext")
    assert "1. Пожарная безопасность" in result.stdout and "**пожарной**" in result.stdout


def test_search_markdown_with_filters_and_no_context(cli_env, corpus_site) -> None:
    result = runner.invoke(app, ["search", "富士山", "--site", corpus_site, "--format", "markdown", "--no-context",
                                 "--types", "txt", "--source", "ja/", "--page", "1"])
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("## Search: 富士山") and "### 1. 富士山" in result.stdout
    assert "**富士山**" in result.stdout and "- *chunk" not in result.stdout


def test_search_errors_as_json_or_one_line(cli_env, corpus_site) -> None:
    as_json = runner.invoke(app, ["search", "fire", "--site", corpus_site, "--limit", "0", "--format", "json"])
    assert as_json.exit_code == 1
    body = json.loads(as_json.stdout)
    assert body["success"] is False and body["error"]["code"] == "INVALID_QUERY" and "limit" in body["error"]["message"]
    plain = runner.invoke(app, ["search", "fire", "--site", corpus_site, "--date-from", "2024-02-30"])
    assert plain.exit_code == 1 and plain.stdout == ""
    assert plain.stderr.startswith("Error (INVALID_QUERY): date_from '2024-02-30' is not a date")
    assert len(plain.stderr.strip().splitlines()) == 1
    empty = runner.invoke(app, ["search", "fire", "--site", "t-cli-empty-site", "-f", "json"])
    assert empty.exit_code == 1 and json.loads(empty.stdout)["error"]["code"] == "INDEX_UNAVAILABLE"


def test_search_database_error_without_traceback(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("DATABASE_URL", f"postgresql://postgres@/rag?host={tmp_path / 'no-such-socket-dir'}")
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, ["search", "fire", "--format", "json"])
    assert result.exit_code == 1
    body = json.loads(result.stdout)
    assert body["error"]["code"] == "DATABASE_ERROR" and "Traceback" not in result.output
    text = runner.invoke(app, ["search", "fire"])
    assert text.exit_code == 1 and text.stderr.startswith("Error (DATABASE_ERROR):") and "Traceback" not in text.output


def write_beir(folder: Path) -> Path:
    folder.mkdir(parents=True)
    docs = [("d1", "Fire alarms", "Automatic fire alarm systems in public buildings."),
            ("d2", "Budgets", "School budget for contractors and materials."),
            ("d3", "Roads", "Design of rural roads with low traffic."),
            ("d4", "Water", "Water supply networks and pumping stations.")]
    (folder / "corpus.jsonl").write_text("".join(json.dumps({"_id": i, "title": t, "text": x}) + "\n" for i, t, x in docs))
    queries = [("q1", "fire alarm systems"), ("q2", "school budget"), ("q3", "unjudged question"), ("q4", "water pumps")]
    (folder / "queries.jsonl").write_text("".join(json.dumps({"_id": i, "text": t}) + "\n" for i, t in queries))
    (folder / "qrels.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\nq2\td2\t1\nq4\td4\t1\n")
    return folder


def test_eval_runner_json_and_reuse(cli_env, wb, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import uuid

    folder = write_beir(tmp_path / f"tiny{uuid.uuid4().hex[:6]}")
    site = f"eval:{folder.name}"
    try:
        result = runner.invoke(app, ["eval", str(folder), "--mode", "hybrid", "--json", "-o", str(tmp_path / "r.json")])
        assert result.exit_code == 0, result.output
        data = json.loads(result.stdout)
        assert {"precision@5", "hit@5", "recall@5", "mrr@10", "ndcg@10", "latency_ms", "queries", "mode",
                "embedder"} <= set(data)
        assert set(data["latency_ms"]) >= {"p50", "p95"} and data["latency_ms"]["p95"] >= data["latency_ms"]["p50"] > 0
        assert data["queries"] == 3 and data["mode"] == "hybrid" and data["embedder"] == "e5-small"
        assert data["hit@5"] == 1.0 and data["mrr@10"] == 1.0 and data["precision@5"] == pytest.approx(0.2)
        assert data["ingest"]["indexed"] == 4
        assert json.loads((tmp_path / "r.json").read_text())["ndcg@10"] == data["ndcg@10"]

        monkeypatch.setenv("RAG_EVAL_DATA", str(folder.parent))   # a set of RAG_EVAL_DATA goes by its name
        again = runner.invoke(app, ["eval", folder.name, "--mode", "fulltext", "--max-queries", "2", "--json"])
        second = json.loads(again.stdout)
        assert second["ingest"]["unchanged"] == 4 and second["ingest"]["indexed"] == 0
        assert second["queries"] == 2 and second["mode"] == "fulltext"

        table = runner.invoke(app, ["eval", "run", str(folder), "--mode", "semantic"])
        assert table.exit_code == 0 and "ndcg@10" in table.stdout and "latency p95" in table.stdout
        everyone = wb.search_engine.search("automatic fire alarm systems", mode="fulltext", limit=50, use_cache=False)
        assert site not in {r["site_id"] for r in everyone["results"]}
    finally:
        with wb.db.connection() as conn:
            conn.execute("DELETE FROM documents WHERE site_id = %s", (site,))


def test_eval_rejects_a_folder_that_is_not_beir(cli_env, tmp_path: Path) -> None:
    result = runner.invoke(app, ["eval", str(tmp_path)])
    assert result.exit_code == 1 and "qrels.tsv" in result.output


def test_eval_of_a_set_missing_from_rag_eval_data_says_how_to_fetch_it(cli_env, tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAG_EVAL_DATA", str(tmp_path / "sets"))
    result = runner.invoke(app, ["eval", "scifact"])
    message = " ".join(result.output.split())   # rich wraps long lines, a long path even inside it
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert "No evaluation set 'scifact' in" in message and "(RAG_EVAL_DATA)" in message
    assert str(tmp_path / "sets") in "".join(result.output.split())
    assert "`rag eval fetch scifact`" in message
