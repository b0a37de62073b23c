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
    wb.chat_append(role="user", content="Hello, how is search built?", user_id=user, site_id=docs_site)
    wb.chat_append(role="ai", content="It fuses full-text and vector ranks.", user_id=user, site_id=docs_site)
    wb.chat_append(role="user", content="Someone else's secret question", user_id=other, site_id=docs_site)
    for i in range(12):
        wb.chat_append(role="user", content=f"filler {i}", user_id=other, site_id=docs_site)

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
        wb.chat_append(role="bot", content="x", user_id=user, site_id=docs_site)


def test_chat_append_stores_a_workflow_message_by_user_and_site(wb, docs_site) -> None:
    """One verb for storing a message: by session id, or by an external workflow's user and site (role 'ai')."""
    user = f"u-{uuid.uuid4().hex[:6]}"
    stored = wb.chat_append(role="ai", content="Noted.", user_id=user, site_id=docs_site)
    assert (stored["role"], stored["user_id"], stored["site_id"]) == ("assistant", user, docs_site)
    assert [m["content"] for m in wb.chat_history(stored["session_id"])] == ["Noted."]
    with pytest.raises(InvalidInput, match="user_id and site_id are required"):
        wb.chat_append(role="user", content="x", user_id=user)
    with pytest.raises(InvalidInput, match="not both"):
        wb.chat_append(stored["session_id"], "user", "x", user_id=user, site_id=docs_site)
    assert len(wb.chat_history(stored["session_id"])) == 1
    wb.chat_reset(stored["session_id"])


def test_add_chat_message_is_a_deprecated_chat_append(wb, docs_site) -> None:
    user = f"u-{uuid.uuid4().hex[:6]}"
    with pytest.warns(DeprecationWarning, match=r"use chat_append\(role=role, content=message, user_id=user_id"):
        old = wb.add_chat_message(user, docs_site, "ai", "The same message.")
    new = wb.chat_append(role="ai", content="The same message.", user_id=user, site_id=docs_site)
    same = ("session_id", "site_id", "user_id", "role", "content")
    assert [old[k] for k in same] == [new[k] for k in same]
    wb.chat_reset(old["session_id"])
