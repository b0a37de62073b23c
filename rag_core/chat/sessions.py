"""Chat sessions and messages in PostgreSQL (tables chat_sessions, chat_messages): every chat SQL lives here."""

from __future__ import annotations

import hashlib
import uuid
from datetime import datetime
from typing import Any, Sequence

from psycopg.types.json import Jsonb
from typing_extensions import NotRequired, TypedDict

from rag_core.db.database import Connections, Database
from rag_core.errors import InvalidInput, Unauthorized
from rag_core.limits import MAX_ANSWER_CHARS, MAX_MESSAGE_CHARS, check_text_length
from rag_core.security.ids import DEFAULT_SITE, check_id, check_optional_id
from rag_core.security.text import check_storable

ROLES = ("user", "assistant", "system")
_MESSAGE_COLUMNS = "id, session_id, site_id, user_id, role, content, sources, created_at"
OTHER_SITE = ("Chat session '{session}' belongs to another site; start a new session (leave session_id out) "
              "or use it with its own site.")


class ChatMessage(TypedDict):
    """One stored message; an assistant's carries the citations of its answer in `sources`."""

    id: int
    session_id: str
    site_id: str | None
    user_id: str | None
    role: str
    content: str
    sources: list[dict[str, Any]]
    created_at: datetime
    session_created: NotRequired[bool]  # set by append_message: this message started the session


class ChatSession(TypedDict):
    """A conversation: who it belongs to, its title and when it was created and last active."""

    id: str
    site_id: str | None
    user_id: str | None
    title: str | None
    created_at: datetime
    updated_at: datetime


class SessionSummary(ChatSession):
    """A conversation in a list, with how many messages it holds and when the last one came."""

    messages: int
    last_message_at: datetime | None


class SessionsDeleted(TypedDict):
    """What forgetting a conversation removed."""

    sessions: int
    messages: int


def new_session_id() -> str:
    return uuid.uuid4().hex


EXTERNAL_PREFIX = "ext-"


def external_session_id(user_id: str, site_id: str) -> str:
    """The session that holds an external workflow's messages for one user on one site."""
    digest = hashlib.sha256(f"{site_id}\x1f{user_id}".encode()).hexdigest()[:24]
    return f"{EXTERNAL_PREFIX}{digest}"


def check_chat_session_id(session_id: str) -> str:
    """A session id a chat client may write to: a valid id outside the chat-memory sessions.

    Chat-memory session ids are derived from the site and user, so anyone could compute another
    site's; creating one first would lock that site's user out of their own memory.
    """
    check_id(session_id, "session_id")
    if session_id.startswith(EXTERNAL_PREFIX):
        raise InvalidInput(f"Session ids starting with '{EXTERNAL_PREFIX}' hold chat-memory messages (POST "
                           "/chat-messages) and are written only there; choose another session id.",
                           details={"field": "session_id"})
    return session_id


def check_role(role: str) -> str:
    role = (role or "").strip().lower()
    if role not in ROLES:
        raise InvalidInput(f"role '{role}' is not allowed; use one of: {', '.join(ROLES)}.")
    return role


def _message(row: Sequence[Any]) -> ChatMessage:
    return {"id": row[0], "session_id": row[1], "site_id": row[2], "user_id": row[3], "role": row[4],
            "content": row[5], "sources": row[6] or [], "created_at": row[7]}


def rename(db: Database, session_id: str, title: str) -> ChatSession | None:
    """Give the session a new title; the renamed session, or None when there is none."""
    with db.connection() as conn:
        updated = conn.execute("UPDATE chat_sessions SET title = %s WHERE id = %s", (title, session_id)).rowcount
    return get_session(db, session_id) if updated else None


def get_session(db: Database, session_id: str) -> ChatSession | None:
    """The session's id, site, user, title and times, or None."""
    check_id(session_id, "session_id")
    with db.connection() as conn:
        row = conn.execute("SELECT id, site_id, user_id, title, created_at, updated_at FROM chat_sessions"
                           " WHERE id = %s", (session_id,)).fetchone()
    if not row:
        return None
    return ChatSession(id=row[0], site_id=row[1], user_id=row[2], title=row[3], created_at=row[4], updated_at=row[5])


def history(db: Database, session_id: str, limit: int, *, before_id: int | None = None) -> list[ChatMessage]:
    """The session's last `limit` messages (older than message `before_id` when given), oldest first."""
    check_id(session_id, "session_id")
    if limit <= 0:
        return []
    with db.connection() as conn:
        rows = conn.execute(
            f"SELECT {_MESSAGE_COLUMNS} FROM chat_messages WHERE session_id = %s"
            " AND (%s::bigint IS NULL OR id < %s)"
            " ORDER BY created_at DESC, id DESC LIMIT %s", (session_id, before_id, before_id, limit)).fetchall()
    return [_message(r) for r in reversed(rows)]


def append_message(db: Database, session_id: str, role: str, content: str, *,
                   sources: list[dict[str, Any]] | None = None, site_id: str | None = None,
                   user_id: str | None = None, title: str | None = None) -> ChatMessage:
    """Store one message (and its citations) in one transaction; the session is created on first use.

    The message takes the session's site and user unless given; a session without a title gets `title`.
    With `site_id`, the session must belong to that site: the insert itself checks it (no window
    between a check and the write), and a session of another site raises Unauthorized.
    """
    role = check_role(role)
    check_id(session_id, "session_id")
    check_optional_id(site_id, "site_id")
    check_optional_id(user_id, "user_id")
    if content is None or not str(content).strip():
        raise InvalidInput("The message is empty; nothing was stored.")
    check_text_length(content, MAX_ANSWER_CHARS if role == "assistant" else MAX_MESSAGE_CHARS, "message")
    check_storable(content, "message")
    check_storable(title, "title")
    check_storable(sources, "sources")
    with db.connection() as conn:
        with conn.transaction():
            claimed = conn.execute(
                "INSERT INTO chat_sessions (id, site_id, user_id, title) VALUES (%(id)s, %(site)s, %(user)s, %(title)s)"
                " ON CONFLICT (id) DO UPDATE SET title = COALESCE(chat_sessions.title, EXCLUDED.title),"
                " updated_at = now()"
                " WHERE NOT %(check_site)s OR chat_sessions.site_id = EXCLUDED.site_id"
                " RETURNING (xmax = 0), site_id, user_id",
                {"id": session_id, "site": site_id or DEFAULT_SITE, "user": user_id, "title": title,
                 "check_site": site_id is not None},
            ).fetchone()
            if claimed is None:  # the session exists and belongs to another site
                raise Unauthorized(OTHER_SITE.format(session=session_id))
            created, sess_site, sess_user = claimed
            row = conn.execute(
                f"INSERT INTO chat_messages (session_id, site_id, user_id, role, content, sources)"
                f" VALUES (%s, %s, %s, %s, %s, %s) RETURNING {_MESSAGE_COLUMNS}",
                (session_id, site_id or sess_site, user_id if user_id is not None else sess_user, role, content,
                 Jsonb(sources) if sources is not None else None),
            ).fetchone()
    message = _message(row)
    message["session_created"] = bool(created)
    return message


def reset(db: Database, session_id: str) -> SessionsDeleted:
    """Delete a session and its messages (the foreign key cascades)."""
    check_id(session_id, "session_id")
    with db.connection() as conn:
        with conn.transaction():
            messages = conn.execute("SELECT count(*) FROM chat_messages WHERE session_id = %s",
                                    (session_id,)).fetchone()[0]
            sessions = conn.execute("DELETE FROM chat_sessions WHERE id = %s", (session_id,)).rowcount
    return {"sessions": sessions, "messages": messages}


def list_sessions(db: Connections, site_id: str | None = None, user_id: str | None = None,
                  limit: int = 100, offset: int = 0) -> list[SessionSummary]:
    """Sessions, most recently active first, with their message counts."""
    check_optional_id(site_id, "site_id")
    check_optional_id(user_id, "user_id")
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
    return [SessionSummary(id=r[0], site_id=r[1], user_id=r[2], title=r[3], created_at=r[4], updated_at=r[5],
                           messages=r[6], last_message_at=r[7]) for r in rows]


def recent_messages(db: Database, *, user_id: str, site_id: str, limit: int) -> list[ChatMessage]:
    """One user's last `limit` messages on one site across sessions, oldest first."""
    check_id(user_id, "user_id")
    check_id(site_id, "site_id")
    with db.connection() as conn:
        rows = conn.execute(
            f"SELECT {_MESSAGE_COLUMNS} FROM chat_messages WHERE site_id = %s AND user_id = %s"
            " ORDER BY created_at DESC, id DESC LIMIT %s", (site_id, user_id, limit)).fetchall()
    return [_message(r) for r in reversed(rows)]
