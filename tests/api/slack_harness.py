"""Fixtures for the Slack bot's tests: the recording Slack API, and the bot served by uvicorn on loopback.

Test modules import the fixtures they use (`from slack_harness import slack_api, start_bot`).
"""

from __future__ import annotations

import socket
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Callable, Iterator

import pytest
import uvicorn

from slack_web import ADMIN, BOT_TOKEN, SECRET, TEAM, SlackApiServer
from rag_core.api.slack import SlackBot, http_app
from rag_core.workbench import Workbench


# Pages the bot answers from: web sources (the Sources block links them), English and Japanese.
DOCS = [
    {"source": "https://docs.example.com/guide/async", "title": "Async and await",
     "text": "Python coroutines are declared with async def. The await keyword suspends a coroutine until the "
             "awaited task finishes, so one thread can serve many network connections."},
    {"source": "https://docs.example.com/guide/packaging", "title": "Packaging",
     "text": "A pyproject.toml file declares the build backend and the dependencies of a Python package."},
    {"source": "https://docs.example.com/ja/async", "title": "非同期処理",
     "text": "Pythonのasync/awaitは非同期処理のための構文です。awaitはタスクの完了までコルーチンを一時停止します。"},
]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def bot_settings(api: SlackApiServer, site: str, **overrides: Any) -> dict[str, Any]:
    """The settings a test bot runs with: tokens, the recording API, one admin, the site of the test team."""
    return {"slack_bot_token": BOT_TOKEN, "slack_signing_secret": SECRET, "slack_api_url": api.base_url,
            "slack_admins": [ADMIN], "slack_site_map": f"{TEAM}={site}", "slack_progress_sec": 0.0,
            "allowed_domains": ["127.0.0.1"], "allow_private_networks": True, "crawl_delay_sec": 0.0, **overrides}


@dataclass
class RunningBot:
    url: str
    bot: SlackBot
    workbench: Workbench


@contextmanager
def serve_bot(wb: Workbench, api: SlackApiServer, site: str, **overrides: Any) -> Iterator[RunningBot]:
    """The bot over a variant of the session Workbench, served by uvicorn in a thread on a free loopback port."""
    bot_wb = wb.variant(**bot_settings(api, site, **overrides))
    bot = SlackBot(bot_wb)
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(http_app(bot), host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, name="slack-test-server", daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "the bot's HTTP server did not start"
        time.sleep(0.02)
    try:
        yield RunningBot(f"http://127.0.0.1:{port}", bot, bot_wb)
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        bot.jobs.shutdown(wait=True)  # no crawl of this test outlives it


@pytest.fixture
def slack_api() -> Iterator[SlackApiServer]:
    """A recording Slack API of the test's own, so a late post of one test never lands in another's."""
    with SlackApiServer() as api:
        yield api


@pytest.fixture
def start_bot(wb: Workbench, slack_api: SlackApiServer, site: str) -> Iterator[Callable[..., RunningBot]]:
    """Start a bot for the test's site (settings overridable); every bot started is stopped afterwards."""
    stack: list[Any] = []

    def start(**overrides: Any) -> RunningBot:
        manager = serve_bot(wb, slack_api, overrides.pop("site", site), **overrides)
        running = manager.__enter__()
        stack.append(manager)
        return running

    yield start
    for manager in reversed(stack):
        manager.__exit__(None, None, None)
