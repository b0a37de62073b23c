"""A conversation as plain text, the one way every text surface (the CLI, MCP) shows chat history."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from rag_core.chat.citations import render_sources
from rag_core.search.types import Citation


def format_when(value: Any) -> str:
    """A stored timestamp to the minute (2025-01-31 12:00), or "-" when there is none."""
    return value.strftime("%Y-%m-%d %H:%M") if value else "-"


def render_transcript(messages: Sequence[Mapping[str, Any]], language: str = "en") -> str:
    """Messages oldest first as `[2025-01-31 12:00] user:` and the content; under each answer its
    `## Sources` block (in `language`)."""
    parts: list[str] = []
    for m in messages:
        parts.append(f"[{format_when(m['created_at'])}] {m['role']}:\n{m['content']}")
        if m["role"] == "assistant":
            cited = [Citation.from_citation(c, i) for i, c in enumerate(m.get("sources") or [], 1)]
            parts.append(render_sources(cited, language))
    return "\n\n".join(parts) + "\n"
