"""Notebook 01's engine on a real sample: result files keep the format the Analytics page reads."""

from __future__ import annotations

import json
from dataclasses import replace
from urllib.parse import urlsplit

import pytest

from rag_core.db.database import drop_database
from rag_core.errors import ConfigError
from rag_core.evaluation.runner import EvalResult, evaluate_dataset
from rag_core.bench.suite import (embedder_database_url, embedder_workbench, failed_queries, run_retrieval_suite,
                                       search_modes)
from rag_core.search.hybrid import fusion_for


def test_every_mode_is_measured_and_written_in_the_analytics_format(wb, tiny_scifact, tmp_path, monkeypatch):
    monkeypatch.setattr("rag_core.bench.suite.load_eval_set", lambda name, sample, distractors, root: tiny_scifact)
    run = run_retrieval_suite(wb, sets=["scifact"], sample=3, out=tmp_path, log=None)
    table = run.table()
    assert list(table["mode"]) == ["semantic", "fulltext", "hybrid"]
    assert (table["queries"] == 3).all()
    data = json.loads((tmp_path / "retrieval_scifact_hybrid.json").read_text())
    for key in ("precision@5", "hit@5", "recall@5", "mrr@10", "ndcg@10", "latency_ms", "queries", "mode", "dataset"):
        assert key in data
    assert data["dataset"] == tiny_scifact.name and data["mode"] == "hybrid"
    assert 0.0 <= data["hit@5"] <= 1.0 and data["latency_ms"]["p95"] >= data["latency_ms"]["p50"] > 0
    # the same query through the same store gives the same ranking on a second run
    again = evaluate_dataset(wb.library, wb.search_engine, tiny_scifact, mode="hybrid")
    first = next(r for r in run.results if r.mode == "hybrid")
    assert [q["ranked"] for q in again.per_query] == [q["ranked"] for q in first.per_query]


def test_two_embedders_are_measured_on_the_same_sample_each_in_a_store_of_its_own(wb, tiny_scifact, tmp_path,
                                                                                 monkeypatch):
    monkeypatch.setattr("rag_core.bench.suite.load_eval_set", lambda name, sample, distractors, root: tiny_scifact)
    other = embedder_database_url(wb.database_url, "use-multilingual")  # the default e5-small is the session's
    try:
        run = run_retrieval_suite(wb, sets=["scifact"], sample=3, out=tmp_path, log=None,
                                  embedders=["use-multilingual", "e5-small"])
        table = run.table()
        assert list(zip(table["embedder"], table["mode"])) == [
            (e, m) for e in ("use-multilingual", "e5-small") for m in ("semantic", "fulltext", "hybrid")]
        assert (table["queries"] == 3).all() and (table["docs"] == len(tiny_scifact.corpus)).all()
        # the configured embedder's files stay where the Analytics page reads them; the other's go beside them
        assert json.loads((tmp_path / "retrieval_scifact_hybrid.json").read_text())["embedder"] == "e5-small"
        assert json.loads((tmp_path / "use-multilingual" / "retrieval_scifact_hybrid.json").read_text())["embedder"] \
            == "use-multilingual"
        wide = run.side_by_side()
        assert list(wide.columns) == [(m, e) for m in ("hit@5", "ndcg@10") for e in ("use-multilingual", "e5-small")]
        assert wide.loc[(tiny_scifact.name, "hybrid"), ("hit@5", "e5-small")] == next(
            r.hit for r in run.results if r.embedder == "e5-small" and r.mode == "hybrid")
        assert len(run.failures(tiny_scifact.name, "semantic", embedder="use-multilingual").columns) == 4
        # the configured store was left alone: it holds one vector space
        assert wb.embedder_mismatch() is None
        with embedder_workbench(wb, "use-multilingual") as use:
            assert use.database_url == other and use.embedder_name == "use-multilingual"
            assert replace(use.search_engine.fusion, cosine_floor=None) == fusion_for("use-multilingual")
            assert use.status(site_id="eval:" + tiny_scifact.name)["documents"] == len(tiny_scifact.corpus)
        with embedder_workbench(wb, "e5-small") as same:
            assert same is wb
    finally:
        drop_database(other)


def test_an_unknown_embedder_is_a_config_error_that_lists_the_known_ones(wb):
    with pytest.raises(ConfigError, match="choose one of: .*e5-small"):
        with embedder_workbench(wb, "e5-large"):
            pass
    name = urlsplit(embedder_database_url(wb.database_url, "e5-large")).path.lstrip("/")
    with wb.db.connection() as conn:
        assert conn.execute("SELECT count(*) FROM pg_database WHERE datname = %s", (name,)).fetchone()[0] == 0


def test_an_embedders_database_is_named_after_the_base_and_the_embedder():
    url = "postgresql://u@localhost:5433/rag_nb_1234?sslmode=disable"
    assert embedder_database_url(url, "e5-small") == "postgresql://u@localhost:5433/rag_nb_1234_e5_small?sslmode=disable"
    assert embedder_database_url("postgresql://localhost/rag", "huggingface:BAAI/bge").endswith("/rag_huggingface_baai_bge")


def test_without_a_reranker_there_is_no_rerank_row_and_a_note_says_how(wb):
    modes, note = search_modes(wb)
    assert [label for label, _, _ in modes] == ["semantic", "fulltext", "hybrid"]
    assert "RAG_RERANKER" in note


def test_a_resampled_set_leaves_no_stale_documents_in_its_site(wb, tiny_scifact):
    bigger = replace(tiny_scifact, name="scifact-prune")
    evaluate_dataset(wb.library, wb.search_engine, bigger, mode="fulltext")
    smaller = replace(bigger, corpus=bigger.corpus[:-5])
    result = evaluate_dataset(wb.library, wb.search_engine, smaller, mode="fulltext")
    assert result.ingest["removed"] == 5
    assert wb.status(site_id=result.site_id)["documents"] == len(smaller.corpus)


def test_failed_queries_show_the_expected_document_and_what_ranked_above_it(synthetic):
    per_query = [
        {"query_id": "q1", "ranked": ["d5", "d1"], "hit": 1.0},
        {"query_id": "q2", "ranked": ["d7", "d8", "d9", "d0", "d5", "d6", "d3"], "hit": 0.0},
        {"query_id": "q4", "ranked": ["d9"], "hit": 0.0},
    ]
    result = EvalResult("syn", "eval:syn", "hybrid", 5, 3, "x", 0, 0, 0, 0, 0, 0, 0, 0, per_query=per_query)
    table = failed_queries(result, synthetic)
    assert list(table["query"]) == ["two", "four"]
    assert table.iloc[0]["expected rank"] == 7
    assert table.iloc[0]["ranked above it"].split(" | ")[0].startswith("d7: Doc 7")
    assert len(table.iloc[0]["ranked above it"].split(" | ")) == 6
    assert table.iloc[1]["expected rank"] == "not in top 10"
    assert table.iloc[1]["expected"] == "d4: Doc 4"
