"""Retention of chat history (the workflow-service spec): purge messages older than the policy, audit every run."""

from __future__ import annotations

import time
from datetime import datetime, timedelta
from typing import Any

from typing_extensions import TypedDict

from rag_core.db.database import Database
from rag_core.errors import InvalidInput

_PURGE_LOCK_ID = 724_011_032
# Age buckets of the status histogram, in days; the policy's own limit is added to them.
_BUCKET_EDGES = (1, 7, 14, 30, 60, 90, 180, 365)


class Purge(TypedDict):
    """One purge as audited (table retention_audit): what it deleted, or would have in a dry run."""

    ran_at: datetime
    older_than_days: float
    cutoff: datetime
    dry_run: bool
    messages_deleted: int
    sessions_deleted: int
    oldest_remaining: datetime | None
    duration_ms: float
    triggered_by: str


class PurgeRecord(Purge):
    """A row of the audit log."""

    id: int


class PurgeSummary(Purge):
    """What a purge that just ran reports, with the id of its audit row."""

    audit_id: int


class RetentionPolicy(TypedDict):
    retention_days: int
    purge_time: str


class AgeBucket(TypedDict):
    """Messages whose age in days is in [from_days, to_days); to_days None: no upper bound."""

    label: str
    from_days: int
    to_days: int | None
    messages: int
    beyond_policy: bool


class RetentionStatus(TypedDict):
    """The policy, message and session counts, the age histogram and the last purges."""

    policy: RetentionPolicy
    messages: int
    sessions: int
    due_for_purge: int
    oldest_message: datetime | None
    newest_message: datetime | None
    age_histogram: list[AgeBucket]
    last_purges: list[PurgeRecord]


def _purge(row: Any) -> Purge:
    """A retention_audit row (id first) without its id."""
    return Purge(ran_at=row[1], older_than_days=row[2], cutoff=row[3], dry_run=row[4], messages_deleted=row[5],
                 sessions_deleted=row[6], oldest_remaining=row[7], duration_ms=row[8], triggered_by=row[9])


def _audit_row(row: Any) -> PurgeRecord:
    return PurgeRecord(id=row[0], **_purge(row))


def purge_chat_history(db: Database, older_than: timedelta, *, dry_run: bool = False,
                       triggered_by: str = "manual") -> PurgeSummary:
    """Delete messages older than `older_than`, then the sessions left empty; audit the run.

    A dry run counts what would go, changes nothing, and is audited with its flag set.
    """
    if not isinstance(older_than, timedelta) or older_than <= timedelta(0):
        raise InvalidInput(f"older_than must be a positive duration (got {older_than!r}); e.g. 30 days.")
    started = time.perf_counter()
    with db.connection() as conn:
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_PURGE_LOCK_ID,))
            cutoff = conn.execute("SELECT now() - %s::interval", (older_than,)).fetchone()[0]
            if dry_run:
                messages = conn.execute("SELECT count(*) FROM chat_messages WHERE created_at < %s",
                                        (cutoff,)).fetchone()[0]
                sessions = conn.execute(
                    "SELECT count(*) FROM chat_sessions s"
                    " WHERE NOT EXISTS (SELECT 1 FROM chat_messages m WHERE m.session_id = s.id AND m.created_at >= %(c)s)"
                    "   AND (EXISTS (SELECT 1 FROM chat_messages m WHERE m.session_id = s.id) OR s.updated_at < %(c)s)",
                    {"c": cutoff}).fetchone()[0]
                oldest = conn.execute("SELECT min(created_at) FROM chat_messages WHERE created_at >= %s",
                                      (cutoff,)).fetchone()[0]
            else:
                messages, touched = conn.execute(
                    "WITH gone AS (DELETE FROM chat_messages WHERE created_at < %s RETURNING session_id)"
                    " SELECT count(*), coalesce(array_agg(DISTINCT session_id), '{}') FROM gone", (cutoff,)).fetchone()
                sessions = conn.execute(
                    "DELETE FROM chat_sessions s WHERE (s.id = ANY(%(touched)s) OR s.updated_at < %(c)s)"
                    " AND NOT EXISTS (SELECT 1 FROM chat_messages m WHERE m.session_id = s.id)",
                    {"touched": list(touched), "c": cutoff}).rowcount
                oldest = conn.execute("SELECT min(created_at) FROM chat_messages").fetchone()[0]
            duration_ms = (time.perf_counter() - started) * 1000
            row = conn.execute(
                "INSERT INTO retention_audit (older_than_days, cutoff, dry_run, messages_deleted, sessions_deleted,"
                " oldest_remaining, duration_ms, triggered_by) VALUES (%s, %s, %s, %s, %s, %s, %s, %s)"
                " RETURNING id, ran_at, older_than_days, cutoff, dry_run, messages_deleted, sessions_deleted,"
                " oldest_remaining, duration_ms, triggered_by",
                (older_than.total_seconds() / 86400, cutoff, dry_run, messages, sessions, oldest, duration_ms,
                 triggered_by)).fetchone()
    return PurgeSummary(audit_id=row[0], **_purge(row))


def retention_status(db: Database, retention_days: int, purge_time: str = "", last: int = 10) -> RetentionStatus:
    """Policy, message and session counts, oldest message, an age histogram and the last purges."""
    edges = sorted(set(_BUCKET_EDGES) | {retention_days})
    with db.connection() as conn:
        messages, oldest, newest, due = conn.execute(
            "SELECT count(*), min(created_at), max(created_at),"
            " count(*) FILTER (WHERE created_at < now() - make_interval(days => %s)) FROM chat_messages",
            (retention_days,)).fetchone()
        sessions = conn.execute("SELECT count(*) FROM chat_sessions").fetchone()[0]
        counts = dict(conn.execute(
            "SELECT width_bucket(extract(epoch FROM now() - created_at) / 86400.0, %s::float8[]), count(*)"
            " FROM chat_messages GROUP BY 1", ([float(e) for e in edges],)).fetchall())
        audits = conn.execute(
            "SELECT id, ran_at, older_than_days, cutoff, dry_run, messages_deleted, sessions_deleted,"
            " oldest_remaining, duration_ms, triggered_by FROM retention_audit ORDER BY ran_at DESC, id DESC LIMIT %s",
            (last,)).fetchall()
    bounds = [0, *edges, None]
    histogram: list[AgeBucket] = []
    for i in range(len(bounds) - 1):
        lo, hi = bounds[i], bounds[i + 1]
        histogram.append({"label": f"{lo}-{hi} d" if hi is not None else f">= {lo} d", "from_days": lo,
                          "to_days": hi, "messages": int(counts.get(i, 0)),
                          "beyond_policy": lo >= retention_days})
    return {
        "policy": {"retention_days": retention_days, "purge_time": purge_time},
        "messages": messages, "sessions": sessions, "due_for_purge": due,
        "oldest_message": oldest, "newest_message": newest,
        "age_histogram": histogram,
        "last_purges": [_audit_row(a) for a in audits],
    }
