"""Slack on loopback for the bot's tests: a recording Web API server and correctly signed requests.

    with SlackApiServer() as api:               # slack_sdk's base_url -> api.base_url
        ... the bot posts ...
        api.wait_for(lambda c: c.method == "chat.postMessage")
    post_event(bot_url, SECRET, mention("rag status"))   # signed like Slack signs them
"""

from __future__ import annotations

import hashlib
import hmac
import itertools
import json
import threading
import time
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable
from urllib.parse import parse_qsl

import httpx

SECRET = "8f742231b10e8888abcd99yyyzzz85a5"
BOT_TOKEN = "xoxb-test-bot-token-0001"
TEAM = "T0TEAM001"
BOT_USER = "U0RAGBOT1"
ADMIN = "U0ADMIN01"
USER = "U0MEMBER1"
CHANNEL = "C0GENERAL"


@dataclass
class Call:
    """One Web API call (or one POST to a response URL) the bot made."""

    method: str
    params: dict[str, Any]
    token: str = ""
    result: dict[str, Any] = field(default_factory=dict)   # what the server answered (its "ts" for a post)

    @property
    def text(self) -> str:
        return str(self.params.get("text", ""))


class SlackApiServer:
    """slack.com/api on 127.0.0.1: records calls and answers as Slack does (auth.test, chat.postMessage ...).

    `refuse_channels` makes chat.postMessage fail with not_in_channel there; `socket_url` is what
    apps.connections.open hands out (None: the app token is refused with invalid_auth). `outage` makes every
    call but auth.test fail as a troubled Slack does: "hang" (no answer until `reset` or the end), "close"
    (the connection closed unanswered), "fail" (HTTP 500) or "ratelimit" (HTTP 429, Retry-After: 1).
    """

    OUTAGES = ("hang", "close", "fail", "ratelimit")

    def __init__(self) -> None:
        self.calls: list[Call] = []
        self.refuse_channels: set[str] = set()
        self.socket_url: str | None = None
        self.outage: str | None = None
        self._released = threading.Event()
        self._cond = threading.Condition()
        self._ts = itertools.count(1)
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # keep test output quiet
                pass

            def do_POST(self) -> None:  # noqa: N802 - http.server API
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length).decode()
                if "json" in (self.headers.get("Content-Type") or ""):
                    params = json.loads(raw or "{}")
                else:
                    params = dict(parse_qsl(raw))
                token = (self.headers.get("Authorization") or "").removeprefix("Bearer ")
                if server.outage and not self.path.endswith("/auth.test") and self._outage(server.outage):
                    return
                if self.path.startswith("/respond/"):
                    server.record(Call("response_url", params, token))
                    self._send(200, b"ok", "text/plain")
                    return
                method = self.path.removeprefix("/api/").split("?")[0]
                result = server.answer(method, params)
                server.record(Call(method, params, token, result))
                self._send(200, json.dumps(result).encode(), "application/json")

            def _outage(self, mode: str) -> bool:
                server.record(Call(f"outage:{mode}", {}))
                if mode == "hang":
                    server._released.wait(600)
                    self.close_connection = True
                elif mode == "close":
                    self.close_connection = True
                elif mode == "fail":
                    self._send(500, b"internal error", "text/plain")
                elif mode == "ratelimit":
                    self.send_response(429)
                    self.send_header("Retry-After", "1")
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                else:
                    return False
                return True

            def _send(self, status: int, body: bytes, ctype: str) -> None:
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/api/"

    def response_url(self, name: str = "") -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/respond/{name or uuid.uuid4().hex[:8]}"

    def record(self, call: Call) -> None:
        with self._cond:
            self.calls.append(call)
            self._cond.notify_all()

    def answer(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        if method == "auth.test":
            return {"ok": True, "url": "https://test.slack.com/", "team": "Test", "user": "ragbot", "team_id": TEAM,
                    "user_id": BOT_USER, "bot_id": "B0RAGBOT1", "is_enterprise_install": False}
        if method == "chat.postMessage":
            if params.get("channel") in self.refuse_channels:
                return {"ok": False, "error": "not_in_channel"}
            ts = f"1700000000.{next(self._ts):06d}"
            return {"ok": True, "channel": params.get("channel"), "ts": ts,
                    "message": {"text": params.get("text"), "ts": ts, "thread_ts": params.get("thread_ts")}}
        if method == "chat.update":
            return {"ok": True, "channel": params.get("channel"), "ts": params.get("ts"), "text": params.get("text")}
        if method == "apps.connections.open":
            if self.socket_url is None:
                return {"ok": False, "error": "invalid_auth"}
            return {"ok": True, "url": self.socket_url}
        return {"ok": False, "error": "unknown_method"}

    def of(self, method: str) -> list[Call]:
        with self._cond:
            return [c for c in self.calls if c.method == method]

    def wait_for(self, match: Callable[[Call], bool], count: int = 1, timeout: float = 120.0) -> list[Call]:
        """Block until `count` recorded calls match; fail with what was recorded when they do not come."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                found = [c for c in self.calls if match(c)]
                if len(found) >= count:
                    return found
                left = deadline - time.monotonic()
                if left <= 0:
                    seen = "\n".join(f"  {c.method}: {c.text[:200]!r}" for c in self.calls[-20:])
                    raise AssertionError(f"expected {count} matching Slack call(s) in {timeout:.0f} s; recorded:\n{seen}")
                self._cond.wait(left)

    def posts(self, thread_ts: str | None = None) -> list[Call]:
        """chat.postMessage calls, in order; with `thread_ts` only the replies in that thread."""
        return [c for c in self.of("chat.postMessage") if thread_ts is None or c.params.get("thread_ts") == thread_ts]

    def reset(self) -> None:
        with self._cond:
            self.calls.clear()
        self.refuse_channels.clear()
        self.socket_url = None
        self.outage = None
        self._released.set()
        self._released = threading.Event()

    def __enter__(self) -> "SlackApiServer":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._released.set()
        self._httpd.shutdown()
        self._httpd.server_close()


# --------------------------------------------------------------------------- signed requests


def sign(body: str, timestamp: int | None = None, secret: str = SECRET) -> dict[str, str]:
    """Slack's v0 signature headers for a raw body."""
    ts = str(int(time.time()) if timestamp is None else timestamp)
    digest = hmac.new(secret.encode(), f"v0:{ts}:{body}".encode(), hashlib.sha256).hexdigest()
    return {"X-Slack-Request-Timestamp": ts, "X-Slack-Signature": f"v0={digest}"}


_ts_counter = itertools.count(1)


def new_ts() -> str:
    """A fresh Slack message timestamp."""
    return f"{int(time.time())}.{next(_ts_counter):06d}"


def mention(text: str, *, user: str = USER, channel: str = CHANNEL, team: str = TEAM, ts: str | None = None,
            thread_ts: str | None = None, event_id: str | None = None) -> dict[str, Any]:
    """An app_mention event_callback as Slack sends it (the text starts with the bot's mention)."""
    event: dict[str, Any] = {"type": "app_mention", "user": user, "text": f"<@{BOT_USER}> {text}",
                             "ts": ts or new_ts(), "channel": channel, "team": team}
    if thread_ts:
        event["thread_ts"] = thread_ts
    return _callback(event, team, event_id)


def direct_message(text: str, *, user: str = USER, channel: str = "D0DIRECT1", team: str = TEAM,
                   ts: str | None = None, thread_ts: str | None = None) -> dict[str, Any]:
    """A message.im event_callback."""
    event: dict[str, Any] = {"type": "message", "channel_type": "im", "user": user, "text": text,
                             "ts": ts or new_ts(), "channel": channel, "team": team}
    if thread_ts:
        event["thread_ts"] = thread_ts
    return _callback(event, team, None)


def _callback(event: dict[str, Any], team: str, event_id: str | None) -> dict[str, Any]:
    return {"token": "legacy", "team_id": team, "api_app_id": "A0RAGAPP1", "type": "event_callback",
            "event_id": event_id or f"Ev{uuid.uuid4().hex[:10].upper()}", "event_time": int(time.time()),
            "authorizations": [{"team_id": team, "user_id": BOT_USER, "is_bot": True}], "event": event}


def post_event(base: str, payload: dict[str, Any], *, timestamp: int | None = None, secret: str = SECRET,
               retry_num: int | None = None) -> httpx.Response:
    """POST a JSON event to the bot, signed."""
    body = json.dumps(payload)
    headers = {"Content-Type": "application/json", **sign(body, timestamp, secret)}
    if retry_num is not None:
        headers.update({"X-Slack-Retry-Num": str(retry_num), "X-Slack-Retry-Reason": "http_timeout"})
    return httpx.post(f"{base}/slack/events", content=body, headers=headers, timeout=30)


def command_body(text: str, response_url: str, *, user: str = USER, channel: str = CHANNEL, team: str = TEAM,
                 trigger_id: str | None = None) -> str:
    """The /rag slash command's form body as Slack sends it; each command has its own trigger id."""
    from urllib.parse import urlencode

    return urlencode({"token": "legacy", "team_id": team, "team_domain": "test", "channel_id": channel,
                      "channel_name": "general", "user_id": user, "user_name": "someone", "command": "/rag",
                      "text": text, "api_app_id": "A0RAGAPP1", "response_url": response_url,
                      "trigger_id": trigger_id or f"13345224609.738474920.{uuid.uuid4().hex}"})


def post_command(base: str, text: str, response_url: str, *, user: str = USER, channel: str = CHANNEL,
                 team: str = TEAM, timeout: float = 30) -> httpx.Response:
    """POST the /rag slash command as Slack does (form-encoded), signed."""
    body = command_body(text, response_url, user=user, channel=channel, team=team)
    headers = {"Content-Type": "application/x-www-form-urlencoded", **sign(body)}
    return httpx.post(f"{base}/slack/events", content=body, headers=headers, timeout=timeout)
