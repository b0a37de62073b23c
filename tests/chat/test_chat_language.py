"""A turn in a language other than RAG_LANGUAGE: a front-end that knows its user's language passes it."""

from __future__ import annotations

import uuid

import pytest

from rag_core.chat.prompts import labels
from rag_core.errors import InvalidInput


def test_turn_labels_follow_the_language_argument(wb, docs_site, session_id) -> None:
    assert wb.settings.language == "en"
    turn = wb.chat("Где описаны требования к пожарной безопасности?", session_id=session_id, site_id=docs_site,
                   language="ru")
    assert turn.rendered.startswith(f"## {labels('ru')['sources']}\n")
    assert f"## {labels('ru')['answer']}\n" in turn.rendered


def test_empty_site_answer_is_in_the_asked_language(wb, session_id) -> None:
    empty = f"t-empty-{uuid.uuid4().hex[:6]}"
    turn = wb.chat("何が索引されていますか？", session_id=session_id, site_id=empty, language="ja")
    assert turn.flags["no_index"]
    assert turn.answer == labels("ja")["no_index"].format(where=f" (site '{empty}')")


def test_unknown_language_is_refused_before_anything_is_stored(wb, docs_site, session_id) -> None:
    with pytest.raises(InvalidInput, match="language is 'de'; choose one of: en, ru, ja"):
        wb.chat("Where is hybrid search implemented?", session_id=session_id, site_id=docs_site, language="de")
    assert wb.chat_history(session_id, 10) == []
