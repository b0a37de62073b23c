"""One chat turn with the offline extractive answerer: sources, follow-ups, empty cases, failures, budget."""

from __future__ import annotations

import re
import uuid

import pytest

from rag_core.providers.calibration import cosine_scale


CITATION_KEYS = {"n", "text", "documentPath", "documentTitle", "chunkId", "documentId", "similarity", "page",
                 "startChar", "endChar"}


def _messages(wb, session_id: str) -> list[tuple]:
    with wb.db.connection() as conn:
        return conn.execute("SELECT role, content, sources FROM chat_messages WHERE session_id = %s ORDER BY id",
                            (session_id,)).fetchall()


def test_answer_lists_sources_and_stores_citations(wb, docs_site, session_id) -> None:
    question = "Where is hybrid search implemented?"
    turn = wb.chat(question, session_id=session_id, site_id=docs_site)

    assert turn.sources[0].source == "docs/search.md"
    assert "hybrid.py" in turn.answer and "[1]" in turn.answer
    assert turn.flags["stored"] and turn.flags["new_session"] and not turn.flags["retrieval_failed"]
    lines = turn.rendered.splitlines()
    assert lines[0] == "## Sources"
    assert re.fullmatch(r"1\. \[\d{1,3}\.\d%\] docs/search\.md", lines[1])
    assert "## Answer" in lines and lines[lines.index("## Answer") + 1].startswith(turn.answer.splitlines()[0])
    assert turn.context["passages"][0]["source"] == "docs/search.md"
    assert turn.context["context_text"].startswith("--- Reference 1 ---\nSource: docs/search.md\n")

    rows = _messages(wb, session_id)
    assert [r[0] for r in rows] == ["user", "assistant"]
    assert rows[0][1] == question and rows[1][1] == turn.answer
    citations = rows[1][2]
    assert len(citations) == len(turn.sources)
    first = citations[0]
    # an embedder with a calibrated cosine scale (the default e5-small) also stores the percentage shown
    scale = cosine_scale(wb.embedder_name)
    assert set(first) == CITATION_KEYS | (set() if scale.is_identity else {"relevance"})
    # the relevance shown is that of the passage's sentence that answers, read on the embedder's scale
    assert first.get("relevance", first["similarity"]) == pytest.approx(turn.sources[0].similarity_pct / 100, abs=1e-3)
    assert first["documentPath"] == "docs/search.md" and first["documentTitle"] == "Hybrid search"
    assert first["chunkId"] == str(turn.sources[0].chunk_id)
    assert 0 < first["similarity"] <= 1 and first["page"] is None
    with wb.db.connection() as conn:
        text, start, end = conn.execute("SELECT text, start_char, end_char FROM chunks WHERE id = %s",
                                        (turn.sources[0].chunk_id,)).fetchone()
    assert (first["text"], first["startChar"], first["endChar"]) == (text, start, end)
    assert wb.list_sessions(site_id=docs_site)[0]["title"] == question


def test_second_question_uses_the_first(wb, docs_site, session_id) -> None:
    wb.chat("What is hybrid search?", session_id=session_id, site_id=docs_site)
    follow_up = wb.chat("And where is it implemented?", session_id=session_id, site_id=docs_site)

    assert follow_up.flags["condensed"]
    assert "hybrid search" in follow_up.retrieval_query.lower()
    assert follow_up.sources[0].source == "docs/search.md"
    assert "hybrid.py" in follow_up.answer
    assert [m["role"] for m in follow_up.context["history"]] == ["user", "assistant"]
    assert len(wb.chat_history(session_id)) == 4


def test_no_relevant_documents_still_prints_sources(wb, docs_site, session_id) -> None:
    strict = wb.variant(chat_similarity_floor=0.99, chat_term_coverage=0)
    turn = strict.chat("Where is hybrid search implemented?", session_id=session_id, site_id=docs_site)
    assert turn.sources == [] and turn.flags["no_sources"] and turn.flags["stored"]
    assert turn.rendered.startswith("## Sources\nNo relevant documents found.\n\n## Answer\n")
    assert "No relevant documents were found" in turn.answer
    assert _messages(wb, session_id)[1][2] == []

    russian = wb.variant(chat_similarity_floor=0.99, chat_term_coverage=0, language="ru")
    turn = russian.chat("Где реализован гибридный поиск?", session_id=session_id, site_id=docs_site)
    assert turn.rendered.startswith("## Источники\nРелевантные документы не найдены.\n\n## Ответ\n")


def test_a_passage_holding_the_question_words_is_a_source_below_the_floor(wb, docs_site, session_id) -> None:
    """With the cosine floor out of reach, only the question's literal words can admit a passage."""
    from rag_core.search.hybrid import term_coverage

    lexical = wb.variant(chat_similarity_floor=0.99, chat_term_coverage=0.5)
    question = "Where is hybrid search implemented?"
    hits = lexical.retrieve(question, k=4, site_id=docs_site)
    coverage = term_coverage(wb.db, question, hits)
    by_source = {h.source: coverage.get(h.chunk_id, 0.0) for h in hits}
    assert by_source["docs/search.md"] == 1.0  # hybrid, search, implement: all three stems
    assert all(v < 0.5 for s, v in by_source.items() if s != "docs/search.md")

    turn = lexical.chat(question, session_id=session_id, site_id=docs_site)
    assert [s.source for s in turn.sources] == ["docs/search.md"]
    unrelated = lexical.chat("What is the capital of France?", session_id=f"{session_id}-new", site_id=docs_site)
    wb.chat_reset(f"{session_id}-new")
    assert unrelated.sources == [] and unrelated.flags["no_sources"]


def test_empty_index_gives_the_ingest_hint_and_stores_nothing(wb, session_id) -> None:
    empty_site = f"t-empty-{uuid.uuid4().hex[:6]}"
    turn = wb.chat("What is in my documents?", session_id=session_id, site_id=empty_site)
    assert turn.flags["no_index"] and not turn.flags["stored"]
    assert "rag ingest PATH" in turn.answer and "Ingestion" in turn.answer
    assert turn.rendered.startswith("## Sources\nNo relevant documents found.")
    assert _messages(wb, session_id) == []
    assert wb.list_sessions(site_id=empty_site) == []


def test_retrieval_failure_answers_without_context_and_stores_the_turn(wb, docs_site, session_id,
                                                                          monkeypatch) -> None:
    def fail(*args, **kwargs):
        raise RuntimeError("index exploded")

    monkeypatch.setattr("rag_core.chat.turn.top_chunks", fail)
    turn = wb.chat("Where is hybrid search implemented?", session_id=session_id, site_id=docs_site)
    assert turn.flags["retrieval_failed"] and turn.sources == []
    assert turn.answer.startswith("Note: the document search failed")
    rows = _messages(wb, session_id)
    assert [r[0] for r in rows] == ["user", "assistant"] and rows[1][1] == turn.answer


def test_context_stays_within_the_byte_budget_in_whole_chunks(wb, docs_site, session_id) -> None:
    small = wb.variant(chat_context_bytes=512, chat_similarity_floor=0.0)
    question = "How are documents searched, ingested and retained?"
    hits = small.retrieve(question, k=4, site_id=docs_site)
    turn = small.chat(question, session_id=session_id, site_id=docs_site, k=4)

    assert 1 <= len(turn.sources) < len(hits)
    assert len(turn.context["context_text"].encode("utf-8")) <= 512
    ranked = [h.chunk_id for h in hits]
    chosen = [s.chunk_id for s in turn.sources]
    assert chosen == sorted(chosen, key=ranked.index)  # best first
    for source, hit in zip(turn.sources, [h for h in hits if h.chunk_id in chosen]):
        assert source.text == hit.text  # never a partial chunk
        assert f"Source: {source.source}\n{hit.text.strip()}" in turn.context["context_text"]


def test_japanese_labels_and_page_numbers() -> None:
    from rag_core.chat.citations import render_turn
    from rag_core.search.types import Citation

    src = Citation(n=1, source="manual.pdf", title="Manual", similarity=0.9214, page=3, chunk_id=7, document_id=2,
                 start_char=0, end_char=10, text="...")
    text = render_turn([src], "答え [1]", "ja")
    assert text.startswith("## 出典\n1. [92.1%] manual.pdf (p. 3)\n\n## 回答\n答え [1]")
    assert render_turn([src], "x", "en").splitlines()[1] == "1. [92.1%] manual.pdf (p. 3)"
