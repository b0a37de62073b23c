"""The one id pattern: what passes, what is refused, and that nothing is cleaned up on the way."""

from __future__ import annotations

import re

import pytest

from rag_core.errors import InvalidInput
from rag_core.security.ids import ID_PATTERN, check_id, check_optional_id, is_valid_id


@pytest.mark.parametrize("value", ["s1", "site_a", "eval:scifact", "ext-0123abcd", "auth0|42", "a@b.example",
                                   "u+tag=1~x", "_private", "x" * 200])
def test_ids_that_pass_are_returned_unchanged(value: str) -> None:
    assert check_id(value, "session_id") is value
    assert re.fullmatch(ID_PATTERN, value)  # the pattern published in OpenAPI agrees


@pytest.mark.parametrize("value", ["", " sess-b", "sess-b ", "sess\tb", "sess-b\n", "a b", "x" * 201, "-lead",
                                   "sess/../b", "naïve", "a\x00b", "семья"])
def test_ids_with_spaces_controls_or_odd_characters_are_refused(value: str) -> None:
    with pytest.raises(InvalidInput) as info:
        check_id(value, "session_id")
    assert info.value.details["field"] == "session_id" and "no spaces" in info.value.message
    assert not re.fullmatch(ID_PATTERN, value)


def test_a_trailing_newline_does_not_slip_through_the_anchor() -> None:
    # Python's `$` also matches before a final newline; the check must not.
    assert not is_valid_id("sess-b\n") and not is_valid_id(None) and not is_valid_id(42)


def test_optional_ids() -> None:
    assert check_optional_id(None, "site_id") is None
    with pytest.raises(InvalidInput):
        check_optional_id(" ", "site_id")
