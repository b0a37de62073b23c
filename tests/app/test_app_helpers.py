"""The Workbench reads the app added (latency histogram, sample corpus) and the app's pure helpers."""

from __future__ import annotations

import datetime as dt
import json

import app_ui
from rag_core.search.querylog import log_search
from rag_core.ingest.sample import PROJECT_ROOT, sample_corpus_paths


def test_latency_histogram_buckets_successes_in_sql(wb, site) -> None:
    for ms in (3, 8, 30, 30, 700, 1500, 9000):
        log_search(wb.db, query="q", mode="hybrid", params={}, result_count=1, duration_ms=ms, site_id=site, user_id=None)
    log_search(wb.db, query="bad", mode="hybrid", params={}, result_count=0, duration_ms=40000, site_id=site,
               user_id=None, error_code="INVALID_QUERY")
    try:
        hist = wb.search_latency_histogram(site_id=site)
        counts = {b["label"]: b["searches"] for b in hist["buckets"]}
        assert hist["searches"] == 7  # the failed search is not a latency sample
        assert counts["0-10 ms"] == 2 and counts["25-50 ms"] == 2 and counts["500-1000 ms"] == 1
        assert counts["1000-2000 ms"] == 1 and counts[">= 5000 ms"] == 1
        assert sum(counts.values()) == 7
        assert hist["p50_ms"] == 30.0 and 1500 < hist["p95_ms"] <= 9000
        assert wb.search_latency_histogram(site_id=site, since=dt.timedelta(seconds=-60))["searches"] == 0
    finally:
        with wb.db.connection() as conn:
            conn.execute("DELETE FROM query_log WHERE site_id = %s", (site,))


def test_sample_corpus_is_the_readme_and_the_guides(wb, site) -> None:
    paths = sample_corpus_paths()
    assert paths[0] == PROJECT_ROOT / "README.md"
    assert {p.name for p in paths[1:]} >= {"getting-started.md", "ingestion.md", "search.md", "chat.md"}
    report = wb.ingest_sample_corpus(site_id=site)
    assert report.count("failed") == 0 and report.count("indexed") == len(paths)
    categories = {d["source"].rsplit("/", 1)[-1]: d["category"] for d in wb.documents(site_id=site)}
    assert categories["README.md"] == "readme" and categories["search.md"] == "docs"
    # The document-store spec: the project's docs answer help questions.
    turn = wb.chat("How do I delete a document?", site_id=site)
    assert "rag delete" in turn.answer
    assert any(s.source.endswith("docs/ingestion.md") for s in turn.sources)


def test_facet_selection_narrows_types_and_months_within_the_sidebar() -> None:
    state = {"selection": {"points": [{"x": "2024-03", "y": 2}, {"x": "2024-01", "y": 5}]}}
    assert app_ui.selected_bars(state) == ["2024-01", "2024-03"]
    assert app_ui.selected_bars(None) == [] and app_ui.selected_bars({"selection": {"points": []}}) == []
    base = {"query": "q", "types": None, "date_from": dt.date(2024, 1, 15), "date_to": None}
    narrowed = app_ui.narrow_by_facets(base, ["pdf"], ["2024-01", "2024-02"])
    assert narrowed["types"] == ["pdf"]
    assert narrowed["date_from"] == dt.date(2024, 1, 15) and narrowed["date_to"] == dt.date(2024, 2, 29)
    assert app_ui.narrow_by_facets(base, [], []) == base


def test_cited_sentences_are_marked_inside_their_passage() -> None:
    passage = "Intro line.\nHybrid search fuses BM25 with dense ranks. Other text here."
    answer = "Hybrid search fuses BM25 with dense ranks. [1] Unrelated claim from elsewhere. [2]"
    spans = app_ui.cited_spans(answer, 1, passage)
    assert [passage[s:e] for s, e in spans] == ["Hybrid search fuses BM25 with dense ranks."]
    assert app_ui.cited_spans(answer, 2, passage) == []
    closest = "No passage answers this.\nClosest match: Other text here. [1]"
    assert [passage[s:e] for s, e in app_ui.cited_spans(closest, 1, passage)] == ["Other text here."]
    html = app_ui.marked_html("a <b> c", [(2, 5)])
    assert html.startswith("a <mark") and "&lt;b&gt;</mark> c" in html


def test_evaluation_results_keep_the_newest_per_set_and_mode(tmp_path) -> None:
    def write(name: str, data: object) -> None:
        (tmp_path / name).write_text(json.dumps(data))

    write("retrieval_ru_construction_hybrid.json", {"hit@5": 0.9, "written": "2026-01-01T00:00:00Z"})
    write("retrieval_ru_construction_hybrid_rerun.json",
          {"hit@5": 0.95, "dataset": "ru_construction", "mode": "hybrid", "written": "2026-02-01T00:00:00Z"})
    write("retrieval_scifact_semantic.json", {"hit@5": 0.5, "dataset": "scifact", "mode": "semantic"})
    (tmp_path / "retrieval_broken_hybrid.json").write_text("{not json")
    write("bench_search.json", {"hit@5": 1.0})
    rows = app_ui.evaluation_results(str(tmp_path))
    assert [(r["dataset"], r["mode"], r["hit@5"]) for r in rows] == [
        ("ru_construction", "hybrid", 0.95), ("scifact", "semantic", 0.5)]
