"""What a Slack message asks for: Slack's markup undone, then a question or a `rag` subcommand."""

from __future__ import annotations

import html
import re
from dataclasses import dataclass

# <https://example.com|label>, <mailto:a@b.c|a@b.c>, <@U123>, <#C123|general>, <!here>
_ANGLE = re.compile(r"<([^<>]*)>")

WRITE_COMMANDS = ("crawl", "add", "delete")
KNOWLEDGE_COMMANDS = ("crawl", "add", "delete", "status", "search")
SUBCOMMANDS = (*KNOWLEDGE_COMMANDS, "ask", "help")


@dataclass(frozen=True)
class Command:
    """A parsed request: `name` is a subcommand, `ask`, `usage` (unknown or help) or `missing`."""

    name: str
    url: str = ""
    pattern: str = ""
    text: str = ""          # the question or the search query
    subcommand: str = ""    # for usage and missing: what the user typed


def slack_to_plain(text: str, bot_user_id: str | None = None) -> str:
    """The text as the user typed it: links back to their URL, mentions of the bot dropped, entities decoded."""

    def plain(match: re.Match[str]) -> str:
        inner = match.group(1)
        target, _, label = inner.partition("|")
        if target.startswith("@"):
            return "" if bot_user_id and target[1:] == bot_user_id else f"@{label or target[1:]}"
        if target.startswith("#"):
            return f"#{label or target[1:]}"
        if target.startswith("!"):
            return label or f"@{target[1:].split('^')[0]}"
        return target  # a link: Slack shows the label, but the URL is what the user pasted

    return html.unescape(_ANGLE.sub(plain, text or "")).strip()


def parse(text: str, slash: bool = False) -> Command:
    """Parse a mention or DM (`rag <sub> ...` or a question) or the text of the `/rag` slash command."""
    words = text.split()
    if not slash:
        if not words:
            return Command("usage")
        if words[0].lower() != "rag":
            return Command("ask", text=text.strip())
        words = words[1:]
    if not words:
        return Command("usage")
    sub, rest = words[0].lower(), words[1:]
    if sub not in SUBCOMMANDS:
        return Command("usage", subcommand=words[0])
    if sub == "help":
        return Command("usage")
    if sub in ("ask", "search"):
        query = text.split(None, 2 if not slash else 1)[-1] if rest else ""
        return Command(sub, text=query.strip()) if rest else Command("missing", subcommand=sub)
    if sub == "status":
        return Command("status")
    if not rest:
        return Command("missing", subcommand=sub)
    if sub == "crawl":
        return Command("crawl", url=rest[0], pattern=" ".join(rest[1:]))
    return Command(sub, url=rest[0])
