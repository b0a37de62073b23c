"""How the bot meets Slack: an HTTP endpoint (Events API and slash commands) or a Socket Mode connection."""

from __future__ import annotations

import logging
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

log = logging.getLogger(__name__)

EVENTS_PATH = "/slack/events"


def http_app(bot: SlackBot) -> Starlette:
    """The ASGI app: POST /slack/events (signature-checked by bolt) and GET /health."""
    if not bot.settings.slack_signing_secret.strip():
        # An empty secret would make every request "signed": anyone could forge one.
        raise ConfigError(MISSING_SIGNING_SECRET)

    async def events(request: Request) -> Response:
        body = await request.body()
        # bolt's dispatch blocks until the listener acknowledges; keep it off the event loop.
        response = await run_in_threadpool(bot.app.dispatch, to_bolt_request(request, body))
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
