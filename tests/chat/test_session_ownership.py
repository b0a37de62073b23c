"""Session ownership: ids are used exactly as given, and a session of one site is never read or written
through another (the insert itself checks the site, so no window opens between a check and the write)."""

from __future__ import annotations

import uuid

import pytest

from rag_core.chat import sessions
from rag_core.errors import InvalidInput, Unauthorized


@pytest.fixture
def two_sites(wb):
    run = uuid.uuid4().hex[:6]
    a, b = f"t-own-a-{run}", f"t-own-b-{run}"
    yield a, b
    with wb.db.connection() as conn:
        conn.execute("DELETE FROM chat_sessions WHERE site_id = ANY(%s)", ([a, b],))


def messages(wb, session_id: str) -> list[tuple[str, str]]:
    with wb.db.connection() as conn:
        return conn.execute("SELECT site_id, content FROM chat_messages WHERE session_id = %s ORDER BY id",
                            (session_id,)).fetchall()


def test_the_insert_refuses_a_session_of_another_site(wb, two_sites) -> None:
    a, b = two_sites
    sid = f"sess-{uuid.uuid4().hex[:8]}"
    sessions.append_message(wb.db, sid, "user", "B's private question", site_id=b)
    with pytest.raises(Unauthorized, match="belongs to another site"):
        sessions.append_message(wb.db, sid, "user", "A writing into B", site_id=a)
    assert messages(wb, sid) == [(b, "B's private question")]
    # Without a site (a caller allowed on every site) the session is simply continued.
    sessions.append_message(wb.db, sid, "assistant", "An answer", site_id=None)
    assert messages(wb, sid)[-1] == (b, "An answer")


@pytest.mark.parametrize("disguise", [" {sid}", "{sid} ", "\t{sid}", "{sid}\n", "{sid}\r\n"])
def test_a_chat_turn_never_strips_a_session_id_into_another_sites_session(wb, docs_site, two_sites,
                                                                           disguise: str) -> None:
    _, victim = two_sites
    sid = f"sess-{uuid.uuid4().hex[:8]}"
    sessions.append_message(wb.db, sid, "user", "The victim's private question", site_id=victim)
    before = messages(wb, sid)
    with pytest.raises(InvalidInput, match="not a valid id"):
        wb.chat("Show me your history", session_id=disguise.format(sid=sid), site_id=docs_site)
    with pytest.raises(Unauthorized):
        wb.chat("Show me your history", session_id=sid, site_id=docs_site)
    assert messages(wb, sid) == before


def test_chat_memory_sessions_are_written_only_by_chat_memory(wb, docs_site) -> None:
    sid = sessions.external_session_id("u-1", docs_site)
    for write in (lambda: wb.chat("Hello", session_id=sid, site_id=docs_site),
                  lambda: wb.chat_append(sid, "user", "squatting")):
        with pytest.raises(InvalidInput, match="chat-memory"):
            write()
    assert wb.get_session(sid) is None
    wb.chat_append(role="user", content="mine", user_id="u-1", site_id=docs_site)
    assert [m["content"] for m in wb.chat_history(sid)] == ["mine"]
    wb.chat_reset(sid)


def test_history_of_a_turn_is_what_came_before_it(wb, docs_site) -> None:
    sid = f"sess-{uuid.uuid4().hex[:8]}"
    wb.chat("Where is hybrid search implemented?", session_id=sid, site_id=docs_site)
    turn = wb.chat("And retention?", session_id=sid, site_id=docs_site)
    assert [m["content"] for m in turn.context["history"]][:1] == ["Where is hybrid search implemented?"]
    assert all(m["content"] != "And retention?" for m in turn.context["history"])
    wb.chat_reset(sid)


def test_a_long_answer_is_stored_but_a_long_question_is_not(wb, session_id) -> None:
    """Questions get embedded and are capped at 8,000 characters; answers are only stored, with a wider cap."""
    from rag_core.limits import MAX_ANSWER_CHARS, MAX_MESSAGE_CHARS

    wb.chat_append(session_id, "assistant", "a" * (MAX_MESSAGE_CHARS + 1))
    with pytest.raises(InvalidInput, match=f"the limit is {MAX_MESSAGE_CHARS}"):
        wb.chat_append(session_id, "user", "q" * (MAX_MESSAGE_CHARS + 1))
    with pytest.raises(InvalidInput, match=f"the limit is {MAX_ANSWER_CHARS}"):
        wb.chat_append(session_id, "assistant", "a" * (MAX_ANSWER_CHARS + 1))
    assert [len(m["content"]) for m in wb.chat_history(session_id)] == [MAX_MESSAGE_CHARS + 1]
