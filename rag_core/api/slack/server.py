"""How the bot meets Slack: an HTTP endpoint (Events API and slash commands) or a Socket Mode connection."""

from __future__ import annotations

import asyncio
import logging
import uuid
from contextlib import asynccontextmanager
from typing import AsyncIterator

from slack_bolt.adapter.socket_mode import SocketModeHandler
from slack_bolt.adapter.starlette.handler import to_bolt_request, to_starlette_response
from slack_sdk.errors import SlackApiError
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from rag_core.api.slack.app import MISSING_SIGNING_SECRET, SlackBot
from rag_core.errors import ConfigError
from rag_core.limits import MAX_SLACK_BODY_BYTES, SLACK_BODY_TIMEOUT_SEC
from rag_core.security.slack_signature import signed_by_slack

log = logging.getLogger(__name__)

EVENTS_PATH = "/slack/events"


class BodyRefused(Exception):
    """A request body the bot does not read to its end: too large, or too slow to arrive."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


async def read_capped_body(request: Request, limit: int = MAX_SLACK_BODY_BYTES,
                           timeout: float = SLACK_BODY_TIMEOUT_SEC) -> bytes:
    """The raw body, refused by its declared length before a byte is read, by the bytes streamed as soon as they
    pass `limit`, and by the clock after `timeout` seconds: memory and waiting stay bounded for any sender."""
    declared = request.headers.get("content-length", "").strip()
    if declared and (not declared.isdigit() or int(declared) > limit):
        raise BodyRefused(413, f"The body is over {limit} bytes, the limit of a Slack request.")
    parts: list[bytes] = []
    received = 0
    try:
        async with asyncio.timeout(timeout):
            async for chunk in request.stream():
                received += len(chunk)
                if received > limit:
                    raise BodyRefused(413, f"The body is over {limit} bytes, the limit of a Slack request.")
                parts.append(chunk)
    except TimeoutError:
        raise BodyRefused(408, f"The body did not arrive within {timeout:g} seconds.") from None
    return b"".join(parts)


def _refusal(status: int, message: str) -> Response:
    # Connection: close for a body left unread, so its rest is never taken for the next request.
    headers = {"Connection": "close"} if status in (408, 413) else None
    return JSONResponse({"ok": False, "error": message}, status_code=status, headers=headers)


def http_app(bot: SlackBot) -> Starlette:
    """The ASGI app: POST /slack/events and GET /health.

    A request is read with a size and time cap, its signature is checked on the raw bytes, and only a
    signed one is decoded, parsed and handed to bolt; no body is ever logged.
    """
    secret = bot.settings.slack_signing_secret
    if not secret.strip():
        # An empty secret would make every request "signed": anyone could forge one.
        raise ConfigError(MISSING_SIGNING_SECRET)

    async def events(request: Request) -> Response:
        try:
            body = await read_capped_body(request)
        except BodyRefused as refused:
            return _refusal(refused.status, refused.message)
        if not signed_by_slack(body, request.headers.get("x-slack-request-timestamp"),
                               request.headers.get("x-slack-signature"), secret):
            return _refusal(401, "invalid request")
        try:
            bolt_request = to_bolt_request(request, body)
            if not isinstance(bolt_request.body, dict):
                raise ValueError("not an object")
        except Exception:  # noqa: BLE001 - not UTF-8, not JSON, JSON but no object: bolt reads none of them
            return _refusal(400, "The body is not a Slack event or command (UTF-8 JSON or a form).")
        try:
            # bolt's dispatch blocks until the listener acknowledges; keep it off the event loop.
            response = await run_in_threadpool(bot.app.dispatch, bolt_request)
        except Exception:  # answered here, so the connection stays usable for the next request
            incident = uuid.uuid4().hex[:12]
            log.exception("Slack request failed (incident %s)", incident)
            return _refusal(500, f"The bot failed on this request (incident {incident}).")
        return to_starlette_response(response)

    async def health(request: Request) -> Response:
        return JSONResponse({"ok": True, "events": EVENTS_PATH})

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        yield
        bot.close()

    return Starlette(routes=[Route(EVENTS_PATH, events, methods=["POST"]), Route("/health", health)],
                     lifespan=lifespan)


def connect_socket_mode(bot: SlackBot, app_token: str) -> SocketModeHandler:
    """Open the Socket Mode connection; a refused app token is a ConfigError that says how to make one."""
    handler = SocketModeHandler(bot.app, app_token)
    try:
        handler.connect()
    except SlackApiError as exc:
        handler.close()
        error = exc.response.get("error") if exc.response is not None else str(exc)
        raise ConfigError(f"Slack refused SLACK_APP_TOKEN ({error}); create an app-level token with the "
                          "connections:write scope under Basic Information > App-Level Tokens and enable Socket "
                          "Mode, or unset SLACK_APP_TOKEN to receive events over HTTP.") from None
    except OSError as exc:
        handler.close()
        raise ConfigError(f"Cannot open the Socket Mode connection ({exc}); check the network, then start again.") \
            from None
    return handler
