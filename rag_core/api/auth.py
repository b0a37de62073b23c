"""API keys of the REST service: parsing RAG_API_KEYS, constant-time lookup, per-site access.

Keys never appear in logs, error bodies or rate-limit identities: a caller is known by the
SHA-256 prefix of its key.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import logging
import re
import socket
from dataclasses import dataclass
from typing import Iterable

from rag_core.errors import ConfigError, InvalidInput, Unauthorized

ALL_SITES = "*"
# One message for every refusal: a key learns nothing about data it may not touch.
DENIED = "This API key may not access the requested data; use a key bound to its site."
MISSING = "An API key is required; send it as `Authorization: Bearer <key>` or `X-API-Key: <key>`."
WRONG = "The API key is not valid; check RAG_API_KEYS on the server."
ADMIN_ONLY = "This operation needs the admin key (RAG_ADMIN_API_KEY)."
KEY_IN_URL = ("API keys in the URL are refused: URLs end up in access logs, proxies and browser history. "
              "Send the key as `Authorization: Bearer <key>` or `X-API-Key: <key>`, and replace the key you sent.")
# Query parameters that carry a key in common APIs; none of them is a parameter of this service.
KEY_QUERY_PARAMS = frozenset({"api_key", "apikey", "api-key", "key", "access_token", "token"})
_KEY_IN_QUERY = re.compile(r"([?&](?:" + "|".join(re.escape(p) for p in sorted(KEY_QUERY_PARAMS)) + r")=)[^&#\s]*",
                           re.IGNORECASE)


def _digest(key: str) -> bytes:
    return hashlib.sha256(key.encode("utf-8")).digest()


@dataclass(frozen=True)
class Principal:
    """Who is calling: an identity safe to log, the sites it may use (None = every site), admin rights."""

    identity: str
    sites: frozenset[str] | None
    admin: bool = False

    def allows(self, site_id: str | None) -> bool:
        """Whether this caller may read and write `site_id` (None means every site)."""
        if self.sites is None:
            return True
        return site_id is not None and site_id in self.sites

    def site_for(self, site_id: str | None) -> str | None:
        """The site a request works on: the one asked for, or a restricted key's only site.

        A restricted key must name a site when it has several: searching "every site" would
        read other sites' data.
        """
        if site_id is not None and not str(site_id).strip():
            raise InvalidInput("site_id is empty; give a site id or leave the field out.")
        if self.sites is None:
            return site_id
        if site_id is None:
            if len(self.sites) == 1:
                return next(iter(self.sites))
            raise InvalidInput("site_id is required with this API key: it is bound to several sites; "
                               f"choose one of: {', '.join(sorted(self.sites))}.")
        if site_id not in self.sites:
            raise Unauthorized(DENIED)
        return site_id

    def require_site(self, site_id: str | None) -> None:
        """Refuse (UNAUTHORIZED, nothing more) when the caller may not use `site_id`."""
        if not self.allows(site_id):
            raise Unauthorized(DENIED)

    def require_admin(self) -> None:
        if not self.admin:
            raise Unauthorized(ADMIN_ONLY)


OPEN_ACCESS = Principal(identity="open", sites=None, admin=True)


@dataclass(frozen=True)
class _Key:
    digest: bytes
    principal: Principal


class KeyRing:
    """The configured keys. With none at all the service is open (allowed on loopback only)."""

    def __init__(self, keys: Iterable[tuple[str, frozenset[str] | None]], admin_key: str = "") -> None:
        entries = []
        for key, sites in keys:
            entries.append(_Key(_digest(key), Principal(f"key:{_digest(key).hex()[:12]}", sites)))
        if admin_key:
            entries.append(_Key(_digest(admin_key), Principal(f"admin:{_digest(admin_key).hex()[:12]}", None, True)))
        self._entries = tuple(entries)

    @classmethod
    def from_settings(cls, api_keys: str, admin_key: str) -> "KeyRing":
        """Parse RAG_API_KEYS (`k1=site_a|site_b,k2=*`) and RAG_ADMIN_API_KEY; a bad entry is a ConfigError."""
        parsed: list[tuple[str, frozenset[str] | None]] = []
        seen: set[str] = set()
        for n, entry in enumerate((api_keys or "").split(","), 1):
            entry = entry.strip()
            if not entry:
                continue
            key, sep, sites_text = entry.partition("=")
            key = key.strip()
            sites = [s.strip() for s in sites_text.split("|") if s.strip()]
            if not sep or not key or not sites:
                # The entry is not echoed: it holds a secret.
                raise ConfigError(f"RAG_API_KEYS: entry {n} is not `key=site_a|site_b` or `key=*`; "
                                  "each key needs '=' and at least one site.")
            if key in seen:
                raise ConfigError(f"RAG_API_KEYS: entry {n} repeats a key given earlier; give each key once.")
            seen.add(key)
            parsed.append((key, None if ALL_SITES in sites else frozenset(sites)))
        admin = (admin_key or "").strip()
        if admin and admin in seen:
            raise ConfigError("RAG_ADMIN_API_KEY is also listed in RAG_API_KEYS; give the admin its own key.")
        return cls(parsed, admin)

    @property
    def open(self) -> bool:
        """True when no key is configured: every caller gets full access."""
        return not self._entries

    @property
    def has_admin(self) -> bool:
        return any(e.principal.admin for e in self._entries)

    def authenticate(self, token: str | None) -> Principal:
        """The caller a key belongs to; compares against every key in constant time."""
        if self.open:
            return OPEN_ACCESS
        if not token:
            raise Unauthorized(MISSING)
        probe = _digest(token)
        found: Principal | None = None
        for entry in self._entries:  # no early exit: the time does not depend on which key matched
            if hmac.compare_digest(probe, entry.digest):
                found = entry.principal
        if found is None:
            raise Unauthorized(WRONG)
        return found


def refuse_key_in_query(names: Iterable[str]) -> None:
    """Refuse (UNAUTHORIZED) a request that carries a key in its query string."""
    if any(name.lower() in KEY_QUERY_PARAMS for name in names):
        raise Unauthorized(KEY_IN_URL)


def redact_keys_in_url(text: str) -> str:
    """The text with the value of every key-like query parameter replaced by `***`."""
    return _KEY_IN_QUERY.sub(r"\1***", text)


class RedactKeysInAccessLog(logging.Filter):
    """Keeps a key sent in a URL out of uvicorn's access log, which writes every request's path and query."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple):
            record.args = tuple(redact_keys_in_url(a) if isinstance(a, str) else a for a in record.args)
        return True


def is_loopback(host: str) -> bool:
    """Whether `host` (an address or a name) only ever reaches this machine."""
    host = (host or "").strip().strip("[]")
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        pass
    try:
        addresses = {info[4][0] for info in socket.getaddrinfo(host, None)}
    except OSError:
        return False
    return bool(addresses) and all(ipaddress.ip_address(a.split("%")[0]).is_loopback for a in addresses)


def check_bind(host: str, keys: KeyRing) -> None:
    """Refuse to listen beyond loopback with no key configured (the workflow-service spec: never public, never open)."""
    if keys.open and not is_loopback(host):
        raise ConfigError(
            f"Refusing to listen on {host} with no API key configured: anyone who can reach it could read "
            "and delete every document. Set RAG_API_KEYS (e.g. `k1=site_a,k2=*`) and RAG_ADMIN_API_KEY, "
            "or bind to 127.0.0.1.")
