"""Chat sessions and messages in PostgreSQL (tables chat_sessions, chat_messages): every chat SQL lives here."""

from __future__ import annotations

import hashlib
import uuid
from typing import Any, Sequence

from psycopg.types.json import Jsonb

from rag_core.db.database import Database
from rag_core.errors import InvalidInput

ROLES = ("user", "assistant", "system")
DEFAULT_SITE = "default"
_MESSAGE_COLUMNS = "id, session_id, site_id, user_id, role, content, sources, created_at"


def new_session_id() -> str:
    return uuid.uuid4().hex


def external_session_id(user_id: str, site_id: str) -> str:
    """The session that holds an external workflow's messages for one user on one site."""
    digest = hashlib.sha256(f"{site_id}\x1f{user_id}".encode()).hexdigest()[:24]
    return f"ext-{digest}"


def check_role(role: str) -> str:
    role = (role or "").strip().lower()
    if role not in ROLES:
        raise InvalidInput(f"role '{role}' is not allowed; use one of: {', '.join(ROLES)}.")
    return role


def _message(row: Sequence[Any]) -> dict[str, Any]:
    return {"id": row[0], "session_id": row[1], "site_id": row[2], "user_id": row[3], "role": row[4],
            "content": row[5], "sources": row[6] or [], "created_at": row[7]}


def has_indexed_chunks(db: Database, site_id: str | None) -> bool:
    """Whether anything searchable is stored for the site (or, without one, outside the eval sites)."""
    where = "site_id = %(site)s" if site_id else "site_id NOT LIKE 'eval:%%'"
    with db.connection() as conn:
        row = conn.execute(f"SELECT EXISTS (SELECT 1 FROM chunks WHERE {where} AND embedding IS NOT NULL)",
                           {"site": site_id}).fetchone()
    return bool(row[0])


def get_session(db: Database, session_id: str) -> dict[str, Any] | None:
    with db.connection() as conn:
        row = conn.execute("SELECT id, site_id, user_id, title, created_at, updated_at FROM chat_sessions"
                           " WHERE id = %s", (session_id,)).fetchone()
    if not row:
        return None
    return dict(zip(("id", "site_id", "user_id", "title", "created_at", "updated_at"), row))


def history(db: Database, session_id: str, limit: int) -> list[dict[str, Any]]:
    """The session's last `limit` messages, oldest first."""
    if limit <= 0:
        return []
    with db.connection() as conn:
        rows = conn.execute(
            f"SELECT {_MESSAGE_COLUMNS} FROM chat_messages WHERE session_id = %s"
            " ORDER BY created_at DESC, id DESC LIMIT %s", (session_id, limit)).fetchall()
    return [_message(r) for r in reversed(rows)]


def append_message(db: Database, session_id: str, role: str, content: str, *,
                   sources: list[dict[str, Any]] | None = None, site_id: str | None = None,
                   user_id: str | None = None, title: str | None = None) -> dict[str, Any]:
    """Store one message (and its citations) in one transaction; the session is created on first use.

    The message takes the session's site and user unless given; a session without a title gets `title`.
    """
    role = check_role(role)
    if not session_id or not str(session_id).strip():
        raise InvalidInput("session_id is empty; give a session id (any text) or leave it out to start one.")
    if content is None or not str(content).strip():
        raise InvalidInput("The message is empty; nothing was stored.")
    with db.connection() as conn:
        with conn.transaction():
            created, sess_site, sess_user = conn.execute(
                "INSERT INTO chat_sessions (id, site_id, user_id, title) VALUES (%(id)s, %(site)s, %(user)s, %(title)s)"
                " ON CONFLICT (id) DO UPDATE SET title = COALESCE(chat_sessions.title, EXCLUDED.title),"
                " updated_at = now()"
                " RETURNING (xmax = 0), site_id, user_id",
                {"id": session_id, "site": site_id or DEFAULT_SITE, "user": user_id, "title": title},
            ).fetchone()
            row = conn.execute(
                f"INSERT INTO chat_messages (session_id, site_id, user_id, role, content, sources)"
                f" VALUES (%s, %s, %s, %s, %s, %s) RETURNING {_MESSAGE_COLUMNS}",
                (session_id, site_id or sess_site, user_id if user_id is not None else sess_user, role, content,
                 Jsonb(sources) if sources is not None else None),
            ).fetchone()
    message = _message(row)
    message["session_created"] = bool(created)
    return message


def reset(db: Database, session_id: str) -> dict[str, int]:
    """Delete a session and its messages (the foreign key cascades)."""
    with db.connection() as conn:
        with conn.transaction():
            messages = conn.execute("SELECT count(*) FROM chat_messages WHERE session_id = %s",
                                    (session_id,)).fetchone()[0]
            sessions = conn.execute("DELETE FROM chat_sessions WHERE id = %s", (session_id,)).rowcount
    return {"sessions": sessions, "messages": messages}


def list_sessions(db: Database, site_id: str | None = None, user_id: str | None = None,
                  limit: int = 100, offset: int = 0) -> list[dict[str, Any]]:
    """Sessions, most recently active first, with their message counts."""
    with db.connection() as conn:
        rows = conn.execute(
            "SELECT s.id, s.site_id, s.user_id, s.title, s.created_at, s.updated_at,"
            "       count(m.id), max(m.created_at)"
            " FROM chat_sessions s LEFT JOIN chat_messages m ON m.session_id = s.id"
            " WHERE (%(site)s::text IS NULL OR s.site_id = %(site)s)"
            "   AND (%(user)s::text IS NULL OR s.user_id = %(user)s)"
            " GROUP BY s.id ORDER BY s.updated_at DESC, s.id LIMIT %(limit)s OFFSET %(offset)s",
            {"site": site_id, "user": user_id, "limit": limit, "offset": offset},
        ).fetchall()
    keys = ("id", "site_id", "user_id", "title", "created_at", "updated_at", "messages", "last_message_at")
    return [dict(zip(keys, r)) for r in rows]


def recent_messages(db: Database, *, user_id: str, site_id: str, limit: int) -> list[dict[str, Any]]:
    """One user's last `limit` messages on one site across sessions, oldest first."""
    with db.connection() as conn:
        rows = conn.execute(
            f"SELECT {_MESSAGE_COLUMNS} FROM chat_messages WHERE site_id = %s AND user_id = %s"
            " ORDER BY created_at DESC, id DESC LIMIT %s", (site_id, user_id, limit)).fetchall()
    return [_message(r) for r in reversed(rows)]
