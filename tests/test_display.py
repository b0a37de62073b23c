"""Results that render in Jupyter: the HTML of each object, its DataFrame, progress in a kernel."""

from __future__ import annotations

import dataclasses

import html
import re
from dataclasses import replace

import pytest

from rag_core.chat.quotes import cited_spans
from rag_core.evaluation.runner import run_eval
from rag_core.records import Records, StoreStatus
from rag_core.render.html import marked_html
from rag_core.search.responses import SearchResults
from evalsets import write_eval_sets
from notebook_display import shown

DOCS = {
    "notes/heat-pumps.md": ("Heat pumps <script>alert(1)</script>",
                            "A heat pump moves heat from outside air into the house. In cold climates a heat pump "
                            "still delivers three units of heat for each unit of electricity. Defrost cycles "
                            "lower the efficiency below minus fifteen degrees."),
    "notes/solar.md": ("Solar panels",
                       "Solar panels convert sunlight into electricity. Panels facing south at a tilt equal to the "
                       "latitude collect the most energy over a year."),
}


@pytest.fixture
def filled(wb, site):
    for source, (title, text) in DOCS.items():
        wb.ingest_text(source, text, site_id=site, title=title, file_type="md")
    return site


def test_search_results_render_as_html_with_marks_scores_and_escaped_text(wb, filled):
    resp = wb.search("heat pump efficiency in cold climates", mode="hybrid", site_id=filled, limit=5)
    assert isinstance(resp, SearchResults) and isinstance(resp, dict)
    page = shown(resp)
    assert "<script>" not in page and html.escape("<script>") in page   # document text is escaped
    assert "<mark" in page and "heat" in page.lower()                   # the highlighted terms
    assert "notes/heat-pumps.md" in page
    score = f"{resp['results'][0]['relevance_score']:.2f}"
    assert score in page and "width:" in page                           # the score and its bar
    first = resp["results"][0]
    assert (first["dense_rank"], first["fulltext_rank"]) != (None, None)   # hybrid: found by at least one list
    if first["dense_rank"] is not None:                                 # how the best chunk ranked in each list
        assert f"dense #{first['dense_rank']}" in page
    if first["fulltext_rank"] is not None:
        assert f"full text #{first['fulltext_rank']}" in page
    assert "Types: md <b>" in page                                      # the facets
    assert shown(resp, "text/markdown").startswith("## Search:")


def test_search_results_become_a_dataframe_in_rank_order(wb, filled):
    resp = wb.search("solar panels electricity", mode="fulltext", site_id=filled)
    frame = resp.to_pandas()
    assert list(frame.columns) == ["rank", "title", "source", "file_type", "score", "dense_rank", "fulltext_rank",
                                   "highlight", "document_date", "site_id"]
    assert frame["source"].iloc[0] == "notes/solar.md"
    assert list(frame["rank"]) == list(range(1, len(frame) + 1))
    assert frame["score"].is_monotonic_decreasing


def test_chat_turn_renders_sources_with_similarity_bars_marked_quotes_then_the_answer(wb, filled):
    turn = wb.chat("How much heat does a heat pump deliver in cold climates?", site_id=filled)
    assert turn.sources, turn.answer
    page = shown(turn)
    assert page.index("Sources (") < page.index("Answer")
    for s in turn.sources:
        assert f"{s.similarity_pct:.1f}%" in page and f"[{s.n}]" in page
    # The extractive answer quotes a sentence of its first source: that sentence is marked there.
    marked = re.findall(r"<mark[^>]*>(.*?)</mark>", page)
    assert any("three units of heat" in m for m in marked), page
    # The title (it holds a <script>) stands in the Sources, not before the quote.
    assert "Heat pumps" not in turn.answer and "<script>" not in turn.rendered
    # The markdown is the spec's text, with tags shown as text: Jupyter renders raw HTML in markdown.
    tagged = dataclasses.replace(turn, rendered=turn.rendered + "<script>alert(1)</script>")
    assert shown(tagged, "text/markdown") == turn.rendered + "&lt;script>alert(1)&lt;/script>"
    frame = turn.to_pandas()
    assert list(frame.columns) == ["n", "similarity", "similarity_pct", "title", "source", "page", "start_char",
                                   "end_char", "text", "sites"]
    assert list(frame["similarity_pct"]) == [s.similarity_pct for s in turn.sources]
    assert len(frame) == len(turn.sources) and set(frame["sites"]) == {filled}
    assert "sites:" not in page  # one site: nothing to say


def test_a_chat_source_held_by_two_sites_names_both_in_jupyter(wb, filled):
    turn = wb.chat("How much heat does a heat pump deliver in cold climates?", site_id=filled)
    shared = replace(turn.sources[0], sites=[filled, "copy-site"])
    turn = replace(turn, sources=[shared, *turn.sources[1:]])
    assert f"sites: {filled}, copy-site" in shown(turn)
    assert turn.to_pandas()["sites"].iloc[0] == f"{filled}, copy-site"


def test_cited_spans_and_marks_find_the_quoted_sentence_and_escape_the_rest():
    passage = "First <b>fact</b>. The pump delivers three units. Last one."
    answer = "Closest match: The pump delivers three units. [1] Something else. [2]"
    spans = cited_spans(answer, 1, passage)
    assert [passage[a:b] for a, b in spans] == ["The pump delivers three units."]
    assert cited_spans(answer, 3, passage) == []
    out = marked_html(passage, spans)
    assert "&lt;b&gt;fact&lt;/b&gt;" in out and ">The pump delivers three units.</mark>" in out


def test_evaluation_result_renders_metrics_and_per_query_rows(wb, tmp_path):
    root = write_eval_sets(tmp_path)
    result = run_eval(wb.library, wb.search_engine, root / "mini-en", mode="hybrid", k=5, max_queries=6)
    page = shown(result)
    for label in ("hit@5", "nDCG@10", "MRR@10", "latency p50"):
        assert label in page
    assert f"{result.hit:.3f}" in page
    frame = result.to_pandas()
    assert list(frame.columns) == ["dataset", "mode", "query_id", "hit", "precision", "recall", "mrr", "ndcg",
                                   "ms", "ranked"]
    assert len(frame) == 6 and frame["hit"].mean() == pytest.approx(result.hit)


def test_status_documents_and_query_log_render_and_become_frames(wb, filled):
    status = wb.status(filled)
    assert isinstance(status, StoreStatus) and "<table" in shown(status)
    assert "documents" in shown(status)
    docs = wb.documents(filled)
    assert isinstance(docs, Records) and len(docs.to_pandas()) == 2
    wb.search("defrost cycles", site_id=filled, user_id="nb-user")
    log = wb.query_log(site_id=filled, limit=10)
    frame = log.to_pandas()
    assert list(frame.columns) == ["created_at", "query", "mode", "results", "ms", "error_code", "cache",
                                   "site_id", "user_id"]
    assert frame["query"].iloc[0] == "defrost cycles" and frame["user_id"].iloc[0] == "nb-user"
    assert "defrost cycles" in shown(log)


def test_query_log_limit_is_checked(wb):
    from rag_core.errors import InvalidInput

    with pytest.raises(InvalidInput, match="limit"):
        wb.query_log(limit=0)
