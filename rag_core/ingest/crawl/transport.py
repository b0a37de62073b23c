"""The DNS-pinned HTTP transport: connections go only to the addresses the URL policy checked.

The policy resolves each host once and checks every address (``UrlPolicy.check_resolved``); the
backend then connects to one of those addresses, so no second DNS lookup can swap in a private
address (DNS rebinding). Environment proxies are ignored: a proxy would bypass the checks.
"""

from __future__ import annotations

import logging
from typing import Any

import httpcore
import httpx

from rag_core.security.url_policy import UrlPolicy, refusal as _refused

logger = logging.getLogger(__name__)

MAX_CONCURRENCY = 5


class _PinnedBackend(httpcore.AsyncNetworkBackend):
    """httpcore network backend that resolves through the policy and connects to the checked IP."""

    def __init__(self, policy: UrlPolicy) -> None:
        self._policy = policy
        self._inner = httpcore.AnyIOBackend()

    async def connect_tcp(self, host: str, port: int, timeout: float | None = None,
                          local_address: str | None = None, socket_options: Any = None) -> Any:
        addresses = await self._policy.check_resolved(host, port)
        last: Exception | None = None
        for address in addresses:
            try:
                return await self._inner.connect_tcp(address, port, timeout=timeout,
                                                     local_address=local_address,
                                                     socket_options=socket_options)
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                last = exc
        assert last is not None
        raise last

    async def connect_unix_socket(self, path: str, timeout: float | None = None,
                                  socket_options: Any = None) -> Any:
        raise _refused("Unix sockets are never used by the crawler", path)

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


def pinned_transport(policy: UrlPolicy) -> httpx.AsyncBaseTransport | None:
    """An httpx transport whose connections go to policy-checked addresses (None if unavailable)."""
    try:
        transport = httpx.AsyncHTTPTransport(trust_env=False, retries=0)
        transport._pool = httpcore.AsyncConnectionPool(  # noqa: SLF001 - documented-stable internals
            ssl_context=httpx.create_ssl_context(trust_env=False),
            max_connections=MAX_CONCURRENCY * 4, max_keepalive_connections=MAX_CONCURRENCY * 2,
            keepalive_expiry=5.0, http1=True, http2=False,
            network_backend=_PinnedBackend(policy),
        )
        return transport
    except Exception:  # noqa: BLE001 - fall back to checking right before each request
        logger.warning("Pinned transport unavailable; checking addresses before each request", exc_info=True)
        return None


class BorrowedTransport(httpx.AsyncBaseTransport):
    """Forwards to a caller-owned transport without closing it."""

    def __init__(self, inner: httpx.AsyncBaseTransport) -> None:
        self._inner = inner

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        return await self._inner.handle_async_request(request)

    async def aclose(self) -> None:
        return None

