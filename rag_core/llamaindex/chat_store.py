"""A LlamaIndex chat store on the workbench's chat_sessions and chat_messages tables.

A conversation a LlamaIndex chat engine or memory holds under a key is the workbench's chat session
with that id: the app's chat page and `rag chat` show it, and it obeys the same ownership and
retention rules. Citations stored with an answer come back as `additional_kwargs["sources"]`
only through `get_sources`, so they never leak into LlamaIndex's condense prompts.
"""

from __future__ import annotations

from typing import Any, Optional

from llama_index.core.base.llms.types import ChatMessage, MessageRole
from llama_index.core.bridge.pydantic import PrivateAttr
from llama_index.core.storage.chat_store.base import BaseChatStore
from psycopg.types.json import Jsonb

from rag_core.ingest.handle import Store
from rag_core.chat import sessions
from rag_core.chat.prompts import session_title
from rag_core.errors import InvalidInput

ROLES = {MessageRole.USER: "user", MessageRole.ASSISTANT: "assistant", MessageRole.SYSTEM: "system"}
# The most messages one key returns (the workbench's history limit).
MAX_MESSAGES = 1000


def _role(message: ChatMessage) -> str:
    role = ROLES.get(message.role)
    if role is None:
        raise InvalidInput(f"A '{message.role.value}' message cannot be stored in the workbench's chat history; "
                           "it keeps user, assistant and system messages.")
    return role


class WorkbenchChatStore(BaseChatStore):
    """Chat history in the workbench's tables; keys are chat session ids.

    Args:
        site_id: the site new sessions belong to (an existing session of another site is refused).
        user_id: the user recorded with new messages.
    """

    site_id: Optional[str] = None
    user_id: Optional[str] = None
    _handle: Any = PrivateAttr()

    def __init__(self, handle: Store, site_id: str | None = None, user_id: str | None = None) -> None:
        super().__init__(site_id=site_id, user_id=user_id)
        self._handle = handle

    @classmethod
    def class_name(cls) -> str:
        return "WorkbenchChatStore"

    def _append(self, key: str, message: ChatMessage) -> dict[str, Any]:
        sources = message.additional_kwargs.get("sources") if message.additional_kwargs else None
        role = _role(message)
        return sessions.append_message(
            self._handle.db, sessions.check_chat_session_id(key), role, message.content or "", sources=sources,
            site_id=self.site_id, user_id=self.user_id,
            title=session_title(message.content or "") if role == "user" else None)

    def set_messages(self, key: str, messages: list[ChatMessage]) -> None:
        self.delete_messages(key)
        for message in messages:
            self._append(key, message)

    def get_messages(self, key: str) -> list[ChatMessage]:
        return [ChatMessage(role=m["role"], content=m["content"])
                for m in sessions.history(self._handle.db, key, MAX_MESSAGES)]

    def get_sources(self, key: str) -> list[list[dict[str, Any]]]:
        """The citations stored with each message of the session (empty for user messages)."""
        return [m["sources"] for m in sessions.history(self._handle.db, key, MAX_MESSAGES)]

    def add_message(self, key: str, message: ChatMessage) -> None:
        self._append(key, message)

    def attach_sources(self, key: str, citations: list[dict[str, Any]]) -> None:
        """Store citations with the session's last assistant message (a chat engine wrote it without them)."""
        with self._handle.db.connection() as conn:
            conn.execute(
                "UPDATE chat_messages SET sources = %s WHERE id = (SELECT max(id) FROM chat_messages"
                " WHERE session_id = %s AND role = 'assistant')", (Jsonb(citations), key))

    def delete_messages(self, key: str) -> Optional[list[ChatMessage]]:
        messages = self.get_messages(key)
        with self._handle.db.connection() as conn:
            conn.execute("DELETE FROM chat_messages WHERE session_id = %s", (key,))
        return messages or None

    def _delete_at(self, key: str, idx: int) -> Optional[ChatMessage]:
        rows = sessions.history(self._handle.db, key, MAX_MESSAGES)
        if not -len(rows) <= idx < len(rows):
            return None
        row = rows[idx]
        with self._handle.db.connection() as conn:
            conn.execute("DELETE FROM chat_messages WHERE id = %s", (row["id"],))
        return ChatMessage(role=row["role"], content=row["content"])

    def delete_message(self, key: str, idx: int) -> Optional[ChatMessage]:
        return self._delete_at(key, idx) if idx >= 0 else None

    def delete_last_message(self, key: str) -> Optional[ChatMessage]:
        return self._delete_at(key, -1)

    def get_keys(self) -> list[str]:
        return [s["id"] for s in sessions.list_sessions(self._handle.db, self.site_id, self.user_id, limit=MAX_MESSAGES)]
