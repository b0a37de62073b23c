"""RAG_ENABLED=false: a chat turn answers without the knowledge base (no index check, no retrieval)."""

from __future__ import annotations

import uuid

from rag_core.chat.prompts import RETRIEVAL_OFF_RULE, labels


def test_turn_without_retrieval_asks_the_model_without_context(llm_wb, llm_server, docs_site, session_id) -> None:
    off = llm_wb.variant(enabled=False)
    question = "Where is hybrid search implemented?"
    turn = off.chat(question, session_id=session_id, site_id=docs_site)

    system = llm_server.requests[-1]["messages"][0]["content"]
    assert RETRIEVAL_OFF_RULE in system
    assert "--- Reference" not in system and "docs/search.md" not in system
    assert turn.sources == [] and turn.flags["retrieval_off"] and not turn.flags["retrieval_failed"]
    assert turn.answer.startswith("Answer to: " + question)
    assert [m["role"] for m in off.chat_history(session_id, 10)] == ["user", "assistant"]

    # A follow-up is not condensed (there is no search to condense for): one model call per turn.
    llm_server.requests.clear()
    off.chat("And where is it tested?", session_id=session_id, site_id=docs_site)
    assert len(llm_server.requests) == 1
    assert [m["role"] for m in llm_server.requests[0]["messages"]] == ["system", "user", "assistant", "user"]


def test_turn_without_retrieval_needs_no_index(llm_wb, llm_server, session_id) -> None:
    off = llm_wb.variant(enabled=False)
    empty_site = f"t-empty-{uuid.uuid4().hex[:6]}"
    turn = off.chat("What is the capital of France?", session_id=session_id, site_id=empty_site)
    assert not turn.flags["no_index"] and turn.flags["stored"]
    assert len(llm_server.requests) == 1


def test_extractive_answerer_says_it_needs_documents(wb, docs_site, session_id) -> None:
    off = wb.variant(enabled=False, language="ja")
    turn = off.chat("ハイブリッド検索はどこに実装されていますか？", session_id=session_id, site_id=docs_site)
    assert turn.answer == labels("ja")["retrieval_off"]
    assert "RAG_ENABLED=false" in turn.answer and turn.sources == []
