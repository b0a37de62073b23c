"""Retention: the 30-day boundary, dry runs, idempotent purges, empty sessions, the audit and the status."""

from __future__ import annotations

import uuid

import pytest


def _age(wb, message_id: int, interval: str) -> None:
    with wb.db.connection() as conn:
        conn.execute("UPDATE chat_messages SET created_at = now() - %s::interval WHERE id = %s", (interval, message_id))


def _ids(wb, session_id: str) -> set[int]:
    return {m["id"] for m in wb.chat_history(session_id, 100)}


def _audits(wb) -> int:
    with wb.db.connection() as conn:
        return conn.execute("SELECT count(*) FROM retention_audit").fetchone()[0]


@pytest.fixture
def aged(wb):
    """Session A: messages 29d23h, 30d+1s and 0 old; session B: one message 31 days old."""
    a, b = f"ret-a-{uuid.uuid4().hex[:6]}", f"ret-b-{uuid.uuid4().hex[:6]}"
    kept = wb.chat_append(a, "user", "almost thirty days old")["id"]
    gone = wb.chat_append(a, "assistant", "just over thirty days old")["id"]
    fresh = wb.chat_append(a, "user", "new")["id"]
    only = wb.chat_append(b, "user", "old and alone")["id"]
    _age(wb, kept, "29 days 23 hours")
    _age(wb, gone, "30 days 1 second")
    _age(wb, only, "31 days")
    yield {"a": a, "b": b, "kept": kept, "gone": gone, "fresh": fresh, "only": only}
    wb.chat_reset(a)
    wb.chat_reset(b)


def test_purge_boundaries_dry_run_and_audit(wb, aged) -> None:
    audits = _audits(wb)
    dry = wb.purge_chat_history(dry_run=True)
    assert (dry["messages_deleted"], dry["sessions_deleted"], dry["dry_run"]) == (2, 1, True)
    assert dry["older_than_days"] == 30
    assert _ids(wb, aged["a"]) == {aged["kept"], aged["gone"], aged["fresh"]}
    assert _ids(wb, aged["b"]) == {aged["only"]}

    done = wb.purge_chat_history(triggered_by="test")
    assert (done["messages_deleted"], done["sessions_deleted"], done["dry_run"]) == (2, 1, False)
    assert _ids(wb, aged["a"]) == {aged["kept"], aged["fresh"]}
    assert aged["b"] not in [s["id"] for s in wb.list_sessions()]
    assert done["oldest_remaining"] is not None and done["oldest_remaining"] > done["cutoff"]
    assert done["duration_ms"] >= 0 and done["audit_id"]

    again = wb.purge_chat_history()
    assert (again["messages_deleted"], again["sessions_deleted"]) == (0, 0)
    assert _audits(wb) == audits + 3

    status = wb.retention_status()
    assert status["policy"]["retention_days"] == 30
    assert sum(b["messages"] for b in status["age_histogram"]) == status["messages"]
    bucket = next(b for b in status["age_histogram"] if b["from_days"] == 14)
    assert bucket["to_days"] == 30 and bucket["messages"] >= 1  # the 29d23h message
    assert status["due_for_purge"] == 0
    latest = status["last_purges"][:3]
    assert [p["dry_run"] for p in latest] == [False, False, True]
    assert latest[1]["triggered_by"] == "test" and latest[1]["messages_deleted"] == 2


def test_shorter_policy_and_bad_durations(wb, aged) -> None:
    from datetime import timedelta

    from rag_core.errors import InvalidInput

    dry = wb.purge_chat_history(timedelta(days=29, hours=22), dry_run=True)
    assert dry["messages_deleted"] == 3
    with pytest.raises(InvalidInput):
        wb.purge_chat_history(timedelta(0))
