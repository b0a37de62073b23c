"""Who may use the Slack bot for what, and which site (tenant) a workspace or channel works on.

* Asking and searching: everyone in an allowed channel (``RAG_SLACK_CHANNELS``; empty allows every
  channel, ``dm`` allows every direct message).
* Crawling, adding and deleting: only the user ids in ``RAG_SLACK_ADMINS``; empty means nobody.
* Sites: ``RAG_SLACK_SITE_MAP`` maps a channel id or a workspace (team) id to a site; a channel's
  entry wins over its workspace's, ``*`` catches the rest. With a map set, a workspace or channel it
  does not name gets no site at all, so a new workspace never reads another tenant's documents. With
  no map every request uses the default site.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Iterable

from rag_core.errors import ConfigError
from rag_core.settings import RagSettings
from rag_core.security.ids import DEFAULT_SITE

ANY = "*"
DIRECT_MESSAGES = "dm"
LANGUAGES = ("en", "ru", "ja")

# Slack ids: T... (workspace), E... (enterprise), C/G (channels), D (direct messages), U/W (users).
SLACK_ID = re.compile(r"^[A-Z][A-Z0-9]{2,20}$")
SITE_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,99}$")


def parse_id_map(text: str, variable: str, value_pattern: re.Pattern[str], what: str) -> dict[str, str]:
    """Parse `ID=value,ID2=value2,*=value` into a dict; a malformed entry is a ConfigError naming it."""
    mapping: dict[str, str] = {}
    for n, entry in enumerate((text or "").split(","), 1):
        entry = entry.strip()
        if not entry:
            continue
        key, sep, value = (part.strip() for part in entry.partition("="))
        if not sep or not (key == ANY or SLACK_ID.match(key)) or not value_pattern.match(value):
            raise ConfigError(f"{variable}: entry {n} ({entry!r}) is not `ID={what}`; use a Slack workspace or "
                              f"channel id (T0123ABCD, C0123ABCD) or *, then '=' and the {what}.")
        if key in mapping:
            raise ConfigError(f"{variable}: {key} is given twice; give each workspace or channel once.")
        mapping[key] = value
    return mapping


def _check_ids(ids: Iterable[str], variable: str, extra: tuple[str, ...] = ()) -> frozenset[str]:
    for value in ids:
        if value not in extra and not SLACK_ID.match(value):
            raise ConfigError(f"{variable}: {value!r} is not a Slack id (like U0123ABCD or C0123ABCD); "
                              "copy it from the member's or channel's details in Slack.")
    return frozenset(ids)


@dataclass(frozen=True)
class SlackAccess:
    """The bot's access rules, parsed once from the settings."""

    admins: frozenset[str] = frozenset()
    channels: frozenset[str] = frozenset()
    site_map: dict[str, str] = field(default_factory=dict)
    languages: dict[str, str] = field(default_factory=dict)
    default_language: str = "en"

    @classmethod
    def from_settings(cls, settings: RagSettings) -> "SlackAccess":
        """Parse RAG_SLACK_ADMINS, RAG_SLACK_CHANNELS, RAG_SLACK_SITE_MAP and RAG_SLACK_LANGUAGE."""
        admins = _check_ids(settings.slack_admins, "RAG_SLACK_ADMINS")
        channels = _check_ids(settings.slack_channels, "RAG_SLACK_CHANNELS", (DIRECT_MESSAGES,))
        site_map = parse_id_map(settings.slack_site_map, "RAG_SLACK_SITE_MAP", SITE_ID, "site")
        language_text = (settings.slack_language or "").strip()
        if language_text in LANGUAGES:  # one language for every workspace
            language_text = f"{ANY}={language_text}"
        elif language_text and "=" not in language_text:
            raise ConfigError(f"RAG_SLACK_LANGUAGE: {language_text!r} is not a language; use en, ru or ja for every "
                              "workspace, or entries like T0123ABCD=ja,*=en.")
        languages = parse_id_map(language_text, "RAG_SLACK_LANGUAGE", re.compile(r"^(en|ru|ja)$"),
                                 "language (en, ru or ja)")
        return cls(admins, channels, site_map, languages, settings.language)

    def channel_allowed(self, channel_id: str) -> bool:
        """Whether the bot answers in this channel (a direct message's id starts with D)."""
        if not self.channels:
            return True
        return channel_id in self.channels or (channel_id.startswith("D") and DIRECT_MESSAGES in self.channels)

    def is_admin(self, user_id: str | None) -> bool:
        """Whether the user may crawl, add and delete."""
        return bool(user_id) and user_id in self.admins

    def site_for(self, team_id: str | None, channel_id: str | None) -> str | None:
        """The site a request from this workspace and channel works on; None when the map names neither."""
        if not self.site_map:
            return DEFAULT_SITE
        for key in (channel_id, team_id, ANY):
            if key and key in self.site_map:
                return self.site_map[key]
        return None

    def language_for(self, team_id: str | None, channel_id: str | None) -> str:
        """The reply language of a workspace or channel when the message itself does not show one."""
        for key in (channel_id, team_id, ANY):
            if key and key in self.languages:
                return self.languages[key]
        return self.default_language
