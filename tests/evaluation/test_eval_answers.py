"""Notebook 03's engine: chat turns through Workbench.chat, ragas metrics that need no LLM."""

from __future__ import annotations

import asyncio

from rag_core.bench.answers import (
    ChatRecord, answer_contains_reference, ask, llm_metrics_status, outside_event_loop, score_without_llm, summary,
)


def record(**kw) -> ChatRecord:
    values = dict(query_id="q", question="梅雨とは何季の一種か?", answer="雨季の一種である。 [1]", references=["雨季"],
                  retrieved_ids=["d1", "d2"], retrieved_contexts=["梅雨は雨季の一種である。", "東京都は日本の首都"],
                  reference_ids=["d1"], reference_contexts=["梅雨は雨季の一種である。"], latency_s=0.1)
    values.update(kw)
    return ChatRecord(**values)


def test_containment_ignores_whitespace_and_needs_a_reference():
    assert answer_contains_reference("It is the  rainy season.", ["rainy season"]) == 1.0
    assert answer_contains_reference("It is dry.", ["rainy season", ""]) == 0.0


def test_metrics_without_llm_score_citations_and_answers():
    scores = score_without_llm([record(), record(query_id="none", retrieved_ids=[], retrieved_contexts=[],
                                                 answer="見つかりません")])
    first, empty = scores.iloc[0], scores.iloc[1]
    assert first["id_context_recall"] == 1.0
    assert 0.0 < first["id_context_precision"] < 1.0       # the second cited document was not judged relevant
    assert first["context_recall"] == 1.0
    assert first["answer_contains_reference"] == 1.0
    assert empty["id_context_precision"] == 0.0 and empty["id_context_recall"] == 0.0
    assert empty["answer_contains_reference"] == 0.0
    assert first["string_similarity"] > empty["string_similarity"]
    means = summary(scores).set_index("metric")["mean"]
    assert means["answer_contains_reference"] == 0.5


def test_ragas_scoring_works_inside_a_running_event_loop_like_jupyters():
    async def in_notebook():
        return outside_event_loop(lambda: score_without_llm([record()]))

    assert asyncio.run(in_notebook()).iloc[0]["id_context_recall"] == 1.0


def test_llm_metrics_explain_how_to_enable_them(wb):
    available, note = llm_metrics_status(wb)
    assert not available and "RAG_LLM=openai" in note


def test_real_chat_turns_cite_sources_and_leave_no_sessions(wb, tiny_jsquad):
    before = len(wb.list_sessions(limit=1000))
    records = ask(wb, tiny_jsquad, log=None)
    assert len(records) == 3
    assert all(r.retrieved_ids and r.answer for r in records)
    assert all(set(r.retrieved_ids) <= {d["_id"] for d in tiny_jsquad.corpus} for r in records)
    assert len(wb.list_sessions(limit=1000)) == before
