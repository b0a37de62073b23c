"""Fixtures for the Slack bot's tests: the recording Slack API, and the bot served by uvicorn on loopback.

Test modules import the fixtures they use (`from slack_harness import slack_api, start_bot`).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

import httpx
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


# --------------------------------------------------------------------------- `rag slack` as a subprocess

RAG = Path(sys.executable).with_name("rag")


def slack_env(api: SlackApiServer, database_url: str, tmp_path: Path, site: str, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAG_", "SLACK_"))}
    env.update({"RAG_MODELS_DIR": os.environ["RAG_MODELS_DIR"],  # the session's converted models (conftest)
                "DATABASE_URL": database_url, "RAG_DATA_DIR": str(tmp_path / "data"), "SLACK_BOT_TOKEN": BOT_TOKEN,
                "SLACK_SIGNING_SECRET": SECRET, "RAG_SLACK_API_URL": api.base_url,
                "RAG_SLACK_SITE_MAP": f"{TEAM}={site}", "RAG_SLACK_ADMINS": ADMIN, "RAG_SLACK_PROGRESS_SEC": "0",
                "RAG_ALLOWED_DOMAINS": "127.0.0.1", "RAG_ALLOW_PRIVATE_NETWORKS": "true", "RAG_CRAWL_DELAY_SEC": "0",
                **extra})
    return env


@contextmanager
def rag_slack(env: dict[str, str], cwd: Path, log: Path) -> Iterator[str]:
    """`rag slack` on a free port until the block ends (SIGTERM); yields its base URL once /health answers."""
    with rag_slack_process(env, cwd, log) as (base, _):
        yield base


@contextmanager
def rag_slack_process(env: dict[str, str], cwd: Path, log: Path) -> Iterator[tuple[str, subprocess.Popen]]:
    """`rag slack` as rag_slack starts it; yields its base URL and the process."""
    port = free_port()
    with log.open("ab") as out:
        proc = subprocess.Popen([str(RAG), "slack", "--port", str(port)], env=env, cwd=cwd, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            assert proc.poll() is None, f"rag slack exited: {log.read_text()[-3000:]}"
            try:
                if httpx.get(f"{base}/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, f"no /health in 120 s: {log.read_text()[-3000:]}"
            time.sleep(0.2)
        yield base, proc
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=60)
