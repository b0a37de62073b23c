"""The size caps: one module, a message that names the field and the limit."""

from __future__ import annotations

import pytest

from rag_core import limits
from rag_core.errors import InvalidInput


def test_a_text_over_its_cap_is_refused_with_the_numbers() -> None:
    limits.check_text_length("x" * limits.MAX_QUERY_CHARS, limits.MAX_QUERY_CHARS, "query")
    with pytest.raises(InvalidInput) as info:
        limits.check_text_length("x" * 8001, limits.MAX_MESSAGE_CHARS, "message")
    assert info.value.message == "message is 8001 characters; the limit is 8000. Shorten it."
    assert info.value.details == {"field": "message", "length": 8001, "limit": 8000}


def test_the_caps_fit_together() -> None:
    # A document's body holds its longest text in the widest UTF-8; the embedder never cuts a stored chunk.
    assert limits.MAX_DOCUMENT_REQUEST_BYTES > 4 * limits.MAX_DOCUMENT_CHARS
    assert limits.MAX_REQUEST_BYTES > 6 * limits.MAX_ANSWER_CHARS  # a stored answer, even fully \\u-escaped
    from rag_core.settings import RagSettings

    assert RagSettings.model_fields["chunk_size"].metadata[-1].le <= limits.MAX_EMBED_INPUT_CHARS
    assert limits.MAX_EMBED_INPUT_CHARS >= limits.MAX_MESSAGE_CHARS
