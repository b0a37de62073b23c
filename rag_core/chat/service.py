"""Chat as two services over one `Store`: turns (`ChatService`) and conversations (`SessionService`)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any, Callable

from rag_core.chat import instructions, retention, sessions
from rag_core.chat.context import retrieve_context
from rag_core.chat.instructions import Instruction
from rag_core.chat.llms import LLM, build_llm
from rag_core.chat.retention import PurgeSummary, RetentionStatus
from rag_core.chat.sessions import ChatMessage, ChatSession, SessionsDeleted, SessionSummary
from rag_core.chat.turn import ChatTurn, PreparedTurn, prepare_turn, run_turn
from rag_core.errors import InvalidInput, NotFound
from rag_core.ingest.handle import Store

MAX_SESSION_TITLE_CHARS = 200


class ChatService:
    """Chat turns over the store's documents with the configured answerer (RAG_LLM)."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._llm: LLM | None = None
        store.on_settings_change(self._forget_llm)

    def _forget_llm(self) -> None:
        self._llm = None

    @property
    def llm(self) -> LLM:
        """The configured answerer (RAG_LLM), built on first use."""
        if self._llm is None:
            self._llm = build_llm(self.store.settings, lambda: self.store.embedder)
        return self._llm

    def _answerer(self) -> LLM:
        return self.llm

    def turn(self, message: str, session_id: str | None = None, k: int = 5, site_id: str | None = None,
             user_id: str | None = None, resource_name: str | None = None,
             on_token: Callable[[str], None] | None = None, language: str | None = None) -> ChatTurn:
        """One chat turn with the session's history and the documents; the answer carries its sources.

        Args:
            resource_name: which of the site's agent instructions is the system prompt (default: the
                most recently updated active one).
            on_token: receives the answer piece by piece as the model streams it.
            language: en, ru or ja for this turn's labels and fixed statements (default RAG_LANGUAGE);
                a front-end that knows its user's language (Slack) passes it.
        """
        try:
            return run_turn(self.store, self._answerer, message, session_id=session_id, k=k, site_id=site_id,
                            user_id=user_id, resource_name=resource_name, on_token=on_token, language=language)
        finally:
            self.store.reads.note_write()

    def prepare(self, message: str, session_id: str | None = None, k: int = 5, site_id: str | None = None,
                user_id: str | None = None, resource_name: str | None = None) -> PreparedTurn:
        """A turn for a client that answers with its own model: stores the message, returns history,
        CONTEXT and the sources; the client stores its answer with `SessionService.append(..., sources=...)`."""
        try:
            return prepare_turn(self.store, self._answerer, message, session_id=session_id, k=k, site_id=site_id,
                                user_id=user_id, resource_name=resource_name)
        finally:
            self.store.reads.note_write()

    def context(self, user_id: str, site_id: str, query: str, k: int = 5) -> str:
        """The workflow-service spec's context string: the site's relevant knowledge, the user's last messages."""
        return retrieve_context(self.store, user_id, site_id, query, k=k)


class SessionService:
    """Conversations and their messages, the sites' agent instructions, and the retention of chat history."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def _written(self) -> None:
        """The listings read after a write (on a replica) show it."""
        self.store.reads.note_write()

    # ----- conversations -----
    def history(self, session_id: str, limit: int = 20) -> list[ChatMessage]:
        """The session's last `limit` messages, oldest first, assistant messages with their citations."""
        if not 1 <= int(limit) <= 1000:
            raise InvalidInput(f"limit is {limit}; choose between 1 and 1000 messages.")
        return sessions.history(self.store.db, session_id, int(limit))

    def append(self, session_id: str | None = None, role: str = "", content: str = "",
               sources: list[dict[str, Any]] | None = None, *, user_id: str | None = None,
               site_id: str | None = None) -> ChatMessage:
        """Store one message in a conversation (created on first use).

        By session id, role user, assistant or system; or, with `user_id` and `site_id` instead of a session id,
        in an external workflow's conversation of that user on that site, role 'user' or 'ai' (the chat memory
        that `ChatService.context` reads).
        """
        if session_id is None:
            return self._append_for_workflow(user_id, site_id, role, content, sources)
        if user_id is not None or site_id is not None:
            raise InvalidInput("Give a session_id, or a user_id and site_id for an external workflow's "
                               "conversation, not both.")
        message = sessions.append_message(self.store.db, sessions.check_chat_session_id(session_id), role, content,
                                          sources=sources)
        self._written()
        return message

    def _append_for_workflow(self, user_id: str | None, site_id: str | None, role: str, content: str,
                             sources: list[dict[str, Any]] | None) -> ChatMessage:
        mapped = {"user": "user", "ai": "assistant", "assistant": "assistant"}.get((role or "").strip().lower())
        if mapped is None:
            raise InvalidInput(f"role '{role}' is not allowed; use 'user' or 'ai'.")
        if not user_id or not str(user_id).strip() or not site_id or not str(site_id).strip():
            raise InvalidInput("user_id and site_id are required; give the user and the site of the message.")
        stored = sessions.append_message(self.store.db, sessions.external_session_id(user_id, site_id), mapped,
                                         content, sources=sources, site_id=site_id, user_id=user_id,
                                         title=f"{user_id} on {site_id}")
        self._written()
        return stored

    def delete(self, session_id: str, missing_ok: bool = True) -> SessionsDeleted:
        """Forget a conversation: delete it and its messages. With missing_ok=False a session that does not
        exist is NotFound (a user deleting a conversation they picked), else nothing to delete is no error."""
        result = sessions.reset(self.store.db, session_id)
        self._written()
        if not result["sessions"] and not missing_ok:
            raise NotFound(f"No conversation '{session_id}'; it may have been deleted already.")
        return result

    def rename(self, session_id: str, title: str) -> ChatSession:
        """Give a conversation a new title; returns the session (NotFound when there is none)."""
        title = (title or "").strip()
        if not title:
            raise InvalidInput("The title is empty; type a name for the conversation.")
        if len(title) > MAX_SESSION_TITLE_CHARS:
            raise InvalidInput(f"The title is {len(title)} characters; the limit is {MAX_SESSION_TITLE_CHARS}.")
        session = sessions.rename(self.store.db, sessions.check_chat_session_id(session_id), title)
        self._written()
        if session is None:
            raise NotFound(f"No conversation '{session_id}'; pick one from the list of conversations.")
        return session

    def list(self, site_id: str | None = None, user_id: str | None = None, limit: int = 100) -> list[SessionSummary]:
        """Chat sessions, most recently active first, with message counts."""
        return sessions.list_sessions(self.store.reads, site_id, user_id, limit)

    def get(self, session_id: str) -> ChatSession | None:
        """One chat session (id, site_id, user_id, title, created_at, updated_at), or None."""
        return sessions.get_session(self.store.db, session_id)

    # ----- agent instructions -----
    def create_instruction(self, site_id: str, resource_name: str, instruction_text: str) -> Instruction:
        """Create version 1 of an agent instruction for a site and resource."""
        return instructions.save_instruction(self.store.db, site_id, resource_name, instruction_text,
                                             must_exist=False)

    def update_instruction(self, site_id: str, resource_name: str, instruction_text: str) -> Instruction:
        """Write the next version of an instruction and make it the active one."""
        return instructions.save_instruction(self.store.db, site_id, resource_name, instruction_text,
                                             must_exist=True)

    def list_instructions(self, site_id: str, resource_name: str | None = None,
                          all_versions: bool = False) -> list[Instruction]:
        """A site's instructions: the latest version of each resource, or every version."""
        return instructions.list_instructions(self.store.db, site_id, resource_name, all_versions)

    def get_instruction(self, site_id: str, resource_name: str, version: int | None = None) -> Instruction:
        """One version of an instruction (the latest by default)."""
        return instructions.get_instruction(self.store.db, site_id, resource_name, version)

    def get_active_instruction(self, site_id: str, resource_name: str | None = None) -> Instruction | None:
        """The instruction chats of the site use as system prompt, or None."""
        return instructions.active_instruction(self.store.db, site_id, resource_name)

    def activate_instruction(self, site_id: str, resource_name: str, version: int) -> Instruction:
        """Make an earlier version of an instruction the active one again."""
        return instructions.activate_instruction(self.store.db, site_id, resource_name, version)

    def delete_instruction(self, site_id: str, resource_name: str, version: int | None = None) -> int:
        """Delete every version of an instruction, or one version; returns the rows deleted."""
        return instructions.delete_instruction(self.store.db, site_id, resource_name, version)

    # ----- retention -----
    def purge(self, older_than: timedelta | None = None, dry_run: bool = False,
              triggered_by: str = "manual") -> PurgeSummary:
        """Delete chat messages older than the policy (RAG_RETENTION_DAYS) and sessions left empty; audited."""
        older_than = older_than if older_than is not None else timedelta(days=self.store.settings.retention_days)
        summary = retention.purge_chat_history(self.store.db, older_than, dry_run=dry_run, triggered_by=triggered_by)
        self._written()
        return summary

    def retention_status(self) -> RetentionStatus:
        """Retention policy, message counts, oldest message, age histogram and the last purges."""
        settings = self.store.settings
        return retention.retention_status(self.store.db, settings.retention_days, settings.retention_time)
