"""Chat memory: persistence across Workbench instances, append/history/reset/sessions, the one-string context."""

from __future__ import annotations

import uuid

import pytest

from rag_core import open_workbench
from rag_core.errors import InvalidInput


def test_history_survives_a_new_workbench(wb, docs_site, session_id, make_settings) -> None:
    turn = wb.chat("Where is hybrid search implemented?", session_id=session_id, site_id=docs_site)
    with open_workbench(make_settings()) as other:  # its own connection pool, as after a restart
        messages = other.chat_history(session_id)
        assert [m["role"] for m in messages] == ["user", "assistant"]
        assert messages[1]["content"] == turn.answer
        assert messages[1]["sources"][0]["documentPath"] == "docs/search.md"
        assert session_id in [s["id"] for s in other.list_sessions(site_id=docs_site)]


def test_append_history_reset_and_sessions(wb, session_id) -> None:
    wb.chat_append(session_id, "system", "Be brief.")
    wb.chat_append(session_id, "user", "Hello")
    wb.chat_append(session_id, "assistant", "Hi", sources=[{"documentPath": "a.md", "chunkId": "1"}])
    assert [m["role"] for m in wb.chat_history(session_id)] == ["system", "user", "assistant"]
    assert [m["content"] for m in wb.chat_history(session_id, limit=2)] == ["Hello", "Hi"]
    assert wb.chat_history(session_id)[-1]["sources"] == [{"documentPath": "a.md", "chunkId": "1"}]
    listed = {s["id"]: s for s in wb.list_sessions()}
    assert listed[session_id]["messages"] == 3
    with pytest.raises(InvalidInput, match="role 'robot' is not allowed"):
        wb.chat_append(session_id, "robot", "beep")
    with pytest.raises(InvalidInput):
        wb.chat_append(session_id, "user", "   ")
    assert wb.chat_reset(session_id) == {"sessions": 1, "messages": 3}
    assert wb.chat_history(session_id) == []
    assert wb.chat_reset(session_id) == {"sessions": 0, "messages": 0}


def test_retrieve_context_formats_knowledge_and_recent_conversation(wb, docs_site) -> None:
    user, other = f"u-{uuid.uuid4().hex[:6]}", f"u-{uuid.uuid4().hex[:6]}"
    wb.add_chat_message(user, docs_site, "user", "Hello, how is search built?")
    wb.add_chat_message(user, docs_site, "ai", "It fuses full-text and vector ranks.")
    wb.add_chat_message(other, docs_site, "user", "Someone else's secret question")
    for i in range(12):
        wb.add_chat_message(other, docs_site, "user", f"filler {i}")

    wide = wb.variant(chat_similarity_floor=0.0)
    context = wide.retrieve_context(user, docs_site, "Where is hybrid search implemented?")
    knowledge, conversation = context.split("\n\n--- Recent conversation ---\n")
    assert knowledge.startswith("--- Reference 1 ---\nSource: docs/search.md\nHybrid search combines")
    assert "\n\n--- Reference 2 ---\nSource: " in knowledge
    assert conversation == "User: Hello, how is search built?\nAI: It fuses full-text and vector ranks."
    assert "secret" not in context

    only_history = wb.retrieve_context(user, docs_site, "")
    assert only_history.startswith("--- Recent conversation ---\nUser: Hello")
    strict = wb.variant(chat_similarity_floor=0.99)
    assert strict.retrieve_context(f"nobody-{uuid.uuid4().hex[:4]}", docs_site, "anything") == ""
    last = wb.retrieve_context(other, docs_site, "").splitlines()
    assert len(last) == 1 + 8 and last[-1] == "User: filler 11"  # RAG_CHAT_HISTORY_MESSAGES=8, within 5..10
    with pytest.raises(InvalidInput, match="use 'user' or 'ai'"):
        wb.add_chat_message(user, docs_site, "bot", "x")
