"""Text PostgreSQL can store: no NUL character and no lone surrogate (a JSON `\\ud800` escape).

PostgreSQL refuses both in `text` and `jsonb`; let through, they surfaced as a database error (or an
MCP tool crash) instead of an answer naming the problem. Every surface checks through here: REST
bodies in their models, the Workbench for the MCP server, the CLI and the app.
"""

from __future__ import annotations

import re
from typing import Any

from rag_core.errors import InvalidInput


# Markdown that loads something as soon as it is shown: an image (`![x](url)`, also by reference) and, where
# the renderer shows raw HTML as Jupyter does, a tag (`<img src=url>`). A remote image is a tracking pixel,
# or a prompt-injected answer leaking the conversation in its URL.
_IMAGE_OPEN = re.compile(r"!\[")
_TAG_OPEN = re.compile(r"<(?=[A-Za-z/!?])")


def inert_markdown(text: str, raw_html: bool = False) -> str:
    """An answer or a passage as markdown that keeps its formatting and links but loads nothing: an image
    shows as a link, and with `raw_html` (a renderer that shows HTML, such as Jupyter) a tag shows as text."""
    text = _IMAGE_OPEN.sub("&#33;[", text or "")
    return _TAG_OPEN.sub("&lt;", text) if raw_html else text


def text_problem(text: str) -> str | None:
    """Why PostgreSQL could not store `text` (a NUL, a lone surrogate from a JSON escape), or None."""
    if "\x00" in text:
        return "contains a NUL character; remove it"
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return "is not valid UTF-8 text (a lone surrogate escape)"
    return None


# Characters that change how a name is shown without being seen: C0 and C1 controls (line breaks
# included) and the bidirectional overrides and isolates ("invoice\u202efdp.exe" shows as "invoiceexe.pdf").
_HIDDEN = re.compile("[\x00-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def hidden_character(value: str) -> str | None:
    """'the invisible character U+202E at position 7' for the first control or text-direction character, else None."""
    hidden = _HIDDEN.search(value)
    if hidden is None:
        return None
    return f"the invisible character U+{ord(hidden.group()):04X} at position {hidden.start()}"


def visible_title(value: str) -> str:
    """A title taken from a document's own content (PDF metadata, a heading, <title>) without its control and
    text-direction characters: line breaks and tabs become spaces, the rest is removed."""
    if not _HIDDEN.search(value):
        return value
    return " ".join(_HIDDEN.sub(lambda m: " " if m.group() in "\t\n\r\x0b\x0c" else "", value).split())


def file_name_problem(name: str) -> str | None:
    """Why a file's name cannot be a document's source (it holds a control or text-direction character), or None."""
    hidden = hidden_character(name)
    if hidden is None:
        return None
    return f"the file name contains {hidden}; rename the file without control and text-direction characters"


def check_label(value: str | None, field: str) -> None:
    """Raise InvalidInput when a name shown to people (a document's source or title) holds control or
    bidirectional formatting characters: they let one name pass for another in every list that shows it."""
    if value is None:
        return
    check_storable(value, field)
    hidden = hidden_character(value)
    if hidden:
        raise InvalidInput(f"{field} contains {hidden}; remove control and text-direction characters from it.",
                           details={"field": field})


def check_storable(value: Any, field: str) -> None:
    """Raise InvalidInput naming `field` when a text in `value` (a string, or one inside lists and dicts,
    keys included) could not be stored."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            problem = text_problem(item)
            if problem:
                raise InvalidInput(f"{field} {problem}.", details={"field": field})
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
