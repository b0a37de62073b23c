"""The crawler's URL policy: which URLs may be fetched, checked by name and again by resolved address.

* **Allowlist required.** Nothing is fetched unless ``RAG_ALLOWED_DOMAINS`` is set. An entry
  ``example.com`` allows the host ``example.com`` itself and every subdomain ``*.example.com``
  (``docs.example.com``, ``a.b.example.com``) -- and nothing else: ``evil-example.com`` and
  ``example.com.evil.net`` are refused. Hosts are compared case-insensitively, without a trailing
  dot, IDNA-encoded (``bücher.de`` == ``xn--bcher-kva.de``). An entry that is an IP address
  matches only that exact address.
* **Ports.** An allowed host may be fetched on ports 80 and 443, on the port of the URL the user
  asked for (the start URL of a crawl or the one page added), and on ports named in ``host:port``
  entries (``docs.example.com:8080``). Links and redirects to any other port are refused: they
  would let a crawl probe the host's internal services.
* Only ``http`` and ``https``; URLs with user info (``http://user@host``) are refused.
* Numeric hosts must be plain dotted-decimal IPv4 (``127.0.0.1``): ``0177.0.0.1``, ``0x7f.1``,
  ``127.1`` and ``2130706433`` mean different addresses to different programs and are refused.
* Private, loopback, link-local, multicast, reserved, shared (CGNAT) and cloud-metadata addresses
  are refused unless ``RAG_ALLOW_PRIVATE_NETWORKS=true`` -- both as IP literals in the URL and
  after DNS resolution: every address a name resolves to is checked, and the crawler connects to
  the checked address (no second lookup, so DNS rebinding cannot swap it).
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import re
import socket
from datetime import datetime
from typing import Any, Callable
from urllib.parse import quote, urlsplit

from typing_extensions import TypedDict

from rag_core.errors import CrawlRefused, FetchError, InvalidInput
from rag_core.settings import RagSettings

logger = logging.getLogger(__name__)

ALLOWED_DOMAINS_EXAMPLE = "RAG_ALLOWED_DOMAINS=example.com,docs.python.org"

_HOST_LABEL = re.compile(r"^[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?$")

_BLOCKED_NETWORKS = tuple(ipaddress.ip_network(n) for n in (
    "0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16", "172.16.0.0/12",
    "192.0.0.0/24", "192.0.2.0/24", "192.88.99.0/24", "192.168.0.0/16", "198.18.0.0/15",
    "198.51.100.0/24", "203.0.113.0/24", "224.0.0.0/4", "240.0.0.0/4", "255.255.255.255/32",
    "::/128", "::1/128", "::/96", "64:ff9b:1::/48", "100::/64", "2001:db8::/32", "fc00::/7",
    "fe80::/10", "fec0::/10", "ff00::/8",
))
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
DEFAULT_PORTS = frozenset({80, 443})
# A last label that is a number (decimal, octal by a leading 0, or 0x hex) makes the host an IPv4
# address to URL parsers and resolvers, in whatever form they accept.
_NUMERIC_LABEL = re.compile(r"^(?:0x[0-9a-f]*|[0-9]+)$")


# What RE2 may build from one link pattern (its default is 8 MB too): nested counted repeats such as
# ((a{1000}){1000}){1000} are refused instead of compiled.
LINK_PATTERN_MAX_MEM = 8 << 20


def link_matcher(pattern: str) -> Callable[[str], bool] | None:
    """The test a crawl's link must pass (`re.search` semantics), or None for an empty pattern.

    The pattern comes from whoever calls the crawl (REST, Slack, the app), so it runs on RE2, which
    matches in time linear in the URL: with Python's backtracking `re`, `(\\w+\\W?)+\\d\\.html$` never
    finished on a 60-character URL it did not match, and held the GIL, so the whole server stopped.
    RE2 has no backreferences or lookarounds; a pattern using them is refused as InvalidInput like
    any other invalid pattern.
    """
    if not pattern:
        return None
    import re2

    options = re2.Options()
    options.max_mem = LINK_PATTERN_MAX_MEM
    options.log_errors = False
    try:
        compiled = re2.compile(pattern, options)
    except re2.error as exc:
        reason = exc.args[0].decode(errors="replace") if exc.args and isinstance(exc.args[0], bytes) else str(exc)
        raise InvalidInput(f"Invalid URL pattern {pattern!r}: {reason}. Patterns use RE2 syntax (no backreferences "
                           "or lookarounds), e.g. /guide/.+ or \\.html$.", details={"field": "pattern"}) from None
    return lambda url: compiled.search(url) is not None


class CrawlAllowlist(TypedDict):
    """The domains a crawl may fetch: the environment's (RAG_ALLOWED_DOMAINS, the floor), the ones an
    admin stored, and their union (`effective`), which every crawl uses."""

    environment: list[str]
    stored: list[str]
    effective: list[str]
    updated_at: datetime | None  # when an admin last stored the list
    updated_by: str | None


def fetch_failure(message: str, reason: str, url: str, **extra: Any) -> FetchError:
    """A FetchError carrying the crawler's reason (timeout, http_status, network...)."""
    return FetchError(message, details={"url": url, "reason": reason, **extra})


def refusal(message: str, url: str, reason: str = "refused") -> CrawlRefused:
    """A CrawlRefused carrying the URL and the reason (refused, robots)."""
    return CrawlRefused(message, details={"url": url, "reason": reason})


def is_blocked_address(address: str | ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    """True for any address that is not plainly public unicast (private, loopback, link-local,
    CGNAT, multicast, reserved, unspecified, documentation, cloud metadata ...), including IPv6
    forms that embed such an IPv4 address (IPv4-mapped, 6to4, NAT64, Teredo)."""
    try:
        ip = ipaddress.ip_address(str(address).split("%", 1)[0])
    except ValueError:
        return True
    if isinstance(ip, ipaddress.IPv6Address):
        embedded: list[ipaddress.IPv4Address] = []
        if ip.ipv4_mapped is not None:
            embedded.append(ip.ipv4_mapped)
        if ip.sixtofour is not None:
            embedded.append(ip.sixtofour)
        if ip.teredo is not None:
            embedded.extend(ip.teredo)
        if ip in _NAT64:
            embedded.append(ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF))
        if any(is_blocked_address(e) for e in embedded):
            return True
        if ip.ipv4_mapped is not None:
            return False
    if any(ip in net for net in _BLOCKED_NETWORKS if net.version == ip.version):
        return True
    return (not ip.is_global or ip.is_private or ip.is_loopback or ip.is_link_local
            or ip.is_multicast or ip.is_reserved or ip.is_unspecified)


def _ip_literal(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return None


def normalize_host(host: str) -> str:
    """Lower-case, trailing dot stripped, IDNA (punycode) encoded; ValueError if not a valid host."""
    host = host.strip().rstrip(".").lower()
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if not host:
        raise ValueError("empty host")
    literal = _ip_literal(host)
    if literal is not None:
        if "%" in host:
            raise ValueError("IPv6 zone identifiers are not allowed")
        return str(literal)
    if _NUMERIC_LABEL.match(host.rsplit(".", 1)[-1]):
        raise ValueError("a numeric address must be four decimal numbers such as 127.0.0.1; forms with leading "
                         "zeros, hex or fewer parts (0177.0.0.1, 0x7f.1, 127.1) mean different addresses to "
                         "different programs")
    if not host.isascii():
        try:
            import idna

            host = idna.encode(host, uts46=True).decode("ascii")
        except Exception:  # noqa: BLE001 - idna raises several error types
            try:
                host = host.encode("idna").decode("ascii")
            except UnicodeError as exc:
                raise ValueError(f"not a valid international domain name ({exc})") from None
        host = host.lower()
    if len(host) > 253 or not all(_HOST_LABEL.match(label) for label in host.split(".")):
        raise ValueError("not a valid host name")
    return host


def _assemble(scheme: str, host: str, port: int | None, path: str, query: str) -> str:
    """scheme://host[:port]/path?query with the default port left out and path and query percent-quoted."""
    if port is not None and port == {"http": 80, "https": 443}.get(scheme):
        port = None
    netloc = f"[{host}]" if ":" in host else host
    if port is not None:
        netloc += f":{port}"
    path = quote(path or "/", safe="/%:@!$&'()*+,;=-._~")
    query = quote(query, safe="/?%:@!$&'()*+,;=-._~")
    return f"{scheme}://{netloc}{path}" + (f"?{query}" if query else "")


def canonical_url(url: str) -> str:
    """The form the crawler stores URLs in (what ``UrlPolicy.check`` returns), without the policy:
    lower-case scheme, host normalised (lower case, IDNA, no trailing dot), no default port, path at
    least '/', path and query percent-quoted. ValueError for a malformed URL or host."""
    parts = urlsplit(url.strip())
    return _assemble(parts.scheme.lower(), normalize_host(parts.hostname or ""), parts.port, parts.path, parts.query)


def _covers(domain: str, host: str) -> bool:
    """Whether an allowlist entry covers the host: the same host, or a subdomain of a domain name."""
    if host == domain:
        return True
    return _ip_literal(domain) is None and _ip_literal(host) is None and host.endswith("." + domain)


def parse_entry(raw: str) -> tuple[str, int | None]:
    """An allowlist entry as (normalised host, port or None): `example.com`, `*.example.com`,
    `example.com:8080`, `[::1]:8080`, `::1`, or a URL whose host (and port) count."""
    entry = raw.strip()
    port: int | None = None
    if "://" in entry:
        parts = urlsplit(entry)
        entry, port = parts.hostname or "", parts.port
    elif entry.startswith("["):
        host, _, rest = entry[1:].partition("]")
        entry, port = host, (int(rest[1:]) if rest.startswith(":") and rest[1:].isdigit() else None)
        if rest and port is None:
            raise ValueError("write [address]:port")
    elif entry.count(":") == 1:
        entry, _, port_text = entry.partition(":")
        if not port_text.isdigit():
            raise ValueError("the port must be a number")
        port = int(port_text)
    if port is not None and not 0 < port < 65536:
        raise ValueError("ports are 1-65535")
    return normalize_host(entry.lstrip("*").lstrip(".")), port


class UrlPolicy:
    """Decides which URLs may be fetched (see the module docstring for the rules).

    ``check(url)`` is the name-level check (scheme, user info, allowlist, port, IP literals);
    ``check(url, start=True)`` also opens the URL's port on its host for the rest of the crawl;
    ``check_resolved(host)`` resolves the host and checks every address.
    """

    def __init__(self, settings: RagSettings) -> None:
        self.allow_private = bool(settings.allow_private_networks)
        entries: list[str] = []
        ports: dict[str, set[int]] = {}
        for raw in settings.allowed_domains or []:
            try:
                norm, port = parse_entry(str(raw))
            except ValueError as exc:
                logger.warning("Ignoring invalid RAG_ALLOWED_DOMAINS entry %r (%s)", raw, exc)
                continue
            if norm not in entries:
                entries.append(norm)
            if port is not None:
                ports.setdefault(norm, set()).add(port)
        self.allowed_domains: tuple[str, ...] = tuple(entries)
        self.allowed_ports: dict[str, frozenset[int]] = {d: frozenset(p) for d, p in ports.items()}
        self._start_origins: set[tuple[str, int]] = set()

    # -- name level

    def host_allowed(self, host: str) -> bool:
        """True if the (normalised) host is an allowlisted domain or a subdomain of one."""
        return any(_covers(domain, host) for domain in self.allowed_domains)

    def port_allowed(self, host: str, port: int) -> bool:
        """80 and 443, the start URL's port on its host, and the ports of `host:port` entries covering the host."""
        if port in DEFAULT_PORTS or (host, port) in self._start_origins:
            return True
        return any(port in ports and _covers(domain, host) for domain, ports in self.allowed_ports.items())

    def check(self, url: str, *, start: bool = False) -> str:
        """Return the normalised URL, or raise CrawlRefused naming the problem and the fix.

        With `start`, the URL is one the user asked for: its port is allowed on its host from now on.
        """
        original = url
        if not self.allowed_domains:
            raise refusal(
                "Crawling is disabled: no allowed domains are configured. Set RAG_ALLOWED_DOMAINS to "
                f"the domains you want to crawl, e.g. {ALLOWED_DOMAINS_EXAMPLE}", original)
        url = (url or "").strip()
        if not url:
            raise refusal("Empty URL. Give an http:// or https:// URL.", original)
        if any(ord(c) < 0x20 or c in "\\\x7f" for c in url):
            raise refusal(f"URL contains control characters or backslashes: {url!r}", original)
        try:
            parts = urlsplit(url)
            port = parts.port
        except ValueError as exc:
            raise refusal(f"Malformed URL ({exc}): {url}", original) from None
        scheme = parts.scheme.lower()
        if not scheme:
            raise refusal(f"URL has no scheme; only http:// and https:// URLs can be crawled "
                           f"(e.g. https://{url.lstrip('/')}). URL: {url}", original)
        if scheme not in ("http", "https"):
            raise refusal(
                f"Only http:// and https:// URLs can be crawled (scheme '{scheme}:' refused). URL: {url}",
                original)
        if "@" in parts.netloc or parts.username is not None or parts.password is not None:
            raise refusal(
                f"URLs with a user name or password (user@host) are refused; remove that part. URL: {url}",
                original)
        try:
            host = normalize_host(parts.hostname or "")
        except ValueError as exc:
            raise refusal(f"Invalid host in URL ({exc}): {url}", original) from None
        if not self.host_allowed(host):
            raise refusal(
                f"Domain not in allowlist: {host}. URL: {url} / Allowed domains: "
                f"{', '.join(self.allowed_domains)}. Add the domain to RAG_ALLOWED_DOMAINS to crawl it.",
                original)
        if not self.allow_private:
            literal = _ip_literal(host)
            if literal is not None and is_blocked_address(literal):
                raise refusal(self._private_message(host, [str(literal)], url), original)
            if host == "localhost" or host.endswith(".localhost"):
                raise refusal(self._private_message(host, ["loopback"], url), original)
        effective = port if port is not None else (80 if scheme == "http" else 443)
        if start:
            self._start_origins.add((host, effective))
        elif not self.port_allowed(host, effective):
            raise refusal(
                f"Port {effective} of {host} is not allowed: only 80, 443 and the port of the URL you asked "
                f"for are crawled. URL: {url}. Add '{host}:{effective}' to RAG_ALLOWED_DOMAINS to allow it.",
                original)
        return _assemble(scheme, host, port, parts.path, parts.query)

    @staticmethod
    def _private_message(host: str, addresses: list[str], url: str) -> str:
        return (
            f"Refused {host} ({', '.join(addresses)}): private, loopback, link-local and cloud-metadata "
            f"addresses are blocked to prevent SSRF. URL: {url}. Set RAG_ALLOW_PRIVATE_NETWORKS=true "
            "only to crawl a trusted internal server.")

    # -- address level

    async def resolve(self, host: str, port: int | None = None) -> list[str]:
        """Addresses of ``host`` (getaddrinfo in a worker thread), in resolver order, deduplicated."""
        literal = _ip_literal(host)
        if literal is not None:
            return [str(literal)]
        try:
            infos = await asyncio.to_thread(socket.getaddrinfo, host, port or 80, 0, socket.SOCK_STREAM)
        except (socket.gaierror, UnicodeError, OSError) as exc:
            raise fetch_failure(f"Could not resolve host {host!r} ({exc})", "network", host) from None
        out: list[str] = []
        for info in infos:
            addr = str(info[4][0]).split("%", 1)[0]
            if addr not in out:
                out.append(addr)
        if not out:
            raise fetch_failure(f"Host {host!r} has no addresses", "network", host)
        return out

    def is_blocked_address(self, address: str) -> bool:
        return is_blocked_address(address)

    async def check_resolved(self, host: str, port: int | None = None) -> list[str]:
        """Resolve ``host`` and return its addresses; CrawlRefused if any of them is private
        (unless allow_private_networks). Connect only to the addresses returned."""
        host = normalize_host(host)
        addresses = await self.resolve(host, port)
        if not self.allow_private:
            blocked = [a for a in addresses if self.is_blocked_address(a)]
            if blocked:
                raise refusal(self._private_message(host, blocked, host), host)
        return addresses
