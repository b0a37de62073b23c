"""`rag slack` for real: the command on loopback, signed requests, a restart, a lost database, Socket Mode."""

from __future__ import annotations

import json
import logging
import re
import subprocess
import threading
import time
import uuid
from typing import Iterator
from urllib.parse import urlsplit

import httpx
import psycopg
import pytest
from psycopg import sql

from chat.openai_server import OpenAIServer
from crawl_server import base_url, serve
from slack_harness import DOCS, RAG, free_port, rag_slack, slack_api, slack_env  # noqa: F401 - fixture
from slack_web import ADMIN, BOT_TOKEN, SECRET, TEAM, SlackApiServer, mention, post_event, sign
from rag_core.db.database import create_database_if_missing, drop_database, plain_url, with_database

def replies(api: SlackApiServer, thread: str, count: int) -> list[str]:
    api.wait_for(lambda c: c.method == "chat.postMessage" and c.params.get("thread_ts") == thread, count)
    return [c.text for c in api.posts(thread)]


def test_rag_slack_serves_questions_crawls_and_keeps_threads_across_a_restart(wb, site, slack_api, pg_url,
                                                                                tmp_path) -> None:
    assert wb.ingest_texts(DOCS, site_id=site).to_dict()["failed"] == 0
    log = tmp_path / "slack.log"
    with OpenAIServer() as llm, serve() as website:
        env = slack_env(slack_api, pg_url, tmp_path, site, RAG_LLM="openai", RAG_LLM_BASE_URL=llm.base_url,
                        RAG_LLM_MODEL="test-model", RAG_LLM_API_KEY="sk-test", RAG_SLACK_LANGUAGE="ja")
        with rag_slack(env, tmp_path, log) as bot:
            verified = post_event(bot, {"token": "legacy", "challenge": "c-123", "type": "url_verification"})
            assert verified.json() == {"challenge": "c-123"}
            body = json.dumps(mention("rag status"))
            forged = httpx.post(f"{bot}/slack/events", content=body,
                                headers={"Content-Type": "application/json", **sign(body, secret="wrong")})
            assert forged.status_code == 401
            assert post_event(bot, mention("rag status"), timestamp=int(time.time()) - 600).status_code == 401

            first = mention("What does the await keyword do?")
            assert post_event(bot, first).status_code == 200
            thread = first["event"]["ts"]
            answer = replies(slack_api, thread, 1)[0]
            assert answer.startswith("Answer to: What does the await keyword do? [1].")
            assert "\n\n*Sources*\n1. <https://docs.example.com/guide/async|Async and await> · " in answer
            assert post_event(bot, first, retry_num=1).headers.get("x-slack-no-retry") == "1"

            crawl = mention(f"rag crawl {base_url(website)}/index.html /articles/", user=ADMIN)
            post_event(bot, crawl)
            accepted, summary = replies(slack_api, crawl["event"]["ts"], 2)
            assert accepted.startswith("クロールを開始します: ")
            assert summary.startswith("クロール完了しました。\n取り込みページ数: 3\nチャンク数: ")
            assert "\nエラー: 1件（拒否）" in summary
            assert any("進捗: 3 / 3 ページ" in c.text for c in slack_api.of("chat.update"))

        # A new process: the thread's history comes back from PostgreSQL.
        llm.requests.clear()
        with rag_slack(env, tmp_path, log) as bot:
            post_event(bot, mention("And how is a coroutine declared?", thread_ts=thread))
            assert len(replies(slack_api, thread, 2)) == 2
    answer_request = llm.requests[-1]
    assert [m["role"] for m in answer_request["messages"]] == ["system", "user", "assistant", "user"]
    assert answer_request["messages"][1]["content"] == "What does the await keyword do?"
    output = log.read_text()
    assert output.count("Slack bot on http://127.0.0.1:") == 2
    assert BOT_TOKEN not in output and SECRET not in output


@pytest.fixture
def own_database(pg_server_url: str) -> Iterator[str]:
    """A database of this test's own, so cutting it off disturbs no other test."""
    url = with_database(pg_server_url, f"rag_slack_{uuid.uuid4().hex[:8]}")
    create_database_if_missing(url)
    yield url
    set_connections(url, allowed=True)
    drop_database(url)


def set_connections(url: str, allowed: bool) -> None:
    """Let the database take connections or not; when not, end the ones it has (the bot's pool)."""
    name = urlsplit(url).path.lstrip("/")
    with psycopg.connect(plain_url(with_database(url, "postgres")), autocommit=True) as conn:
        conn.execute(sql.SQL("ALTER DATABASE {} ALLOW_CONNECTIONS {}").format(
            sql.Identifier(name), sql.Literal(allowed)))
        if not allowed:
            conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s", (name,))


def test_an_empty_index_and_a_lost_database_get_one_line_and_the_bot_keeps_serving(slack_api, own_database,
                                                                                   tmp_path) -> None:
    env = slack_env(slack_api, own_database, tmp_path, "default")
    log = tmp_path / "slack.log"
    with rag_slack(env, tmp_path, log) as bot:
        empty = mention("What is in the knowledge base?")
        post_event(bot, empty)
        assert replies(slack_api, empty["event"]["ts"], 1) == [
            "The knowledge base is empty: add pages with `@bot rag add <URL>` or `@bot rag crawl <URL>`, then ask again."]

        set_connections(own_database, allowed=False)
        lost = mention("What is in the knowledge base now?")
        post_event(bot, lost)
        assert replies(slack_api, lost["event"]["ts"], 1) == [
            "Error: the knowledge base database is unreachable; check that PostgreSQL runs and DATABASE_URL is right, "
            "then try again."]
        assert httpx.get(f"{bot}/health").status_code == 200

        set_connections(own_database, allowed=True)
        # The pool comes back in the background; until then a request gets the same fast one-line error.
        deadline = time.monotonic() + 60
        while True:
            back = mention("rag status")
            post_event(bot, back)
            answer = replies(slack_api, back["event"]["ts"], 1)[0]
            if not answer.startswith("Error: the knowledge base database is unreachable") or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        assert answer.startswith("Knowledge base statistics:\nTotal chunks: 0\nSource URLs: 0\n"), answer
    output = log.read_text()
    assert "Traceback" not in output
    assert "Slack request failed: Cannot connect to PostgreSQL" in output or "Slack request failed: The database" \
        in output


def test_an_app_token_chooses_socket_mode_and_a_refused_one_stops_with_the_fix(slack_api, pg_url, tmp_path) -> None:
    env = slack_env(slack_api, pg_url, tmp_path, "default", SLACK_APP_TOKEN="xapp-1-A0RAGAPP1-revoked",
                    SLACK_SIGNING_SECRET="")
    result = subprocess.run([str(RAG), "slack", "--port", str(free_port())], env=env, cwd=tmp_path,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 1
    output = " ".join((result.stdout + result.stderr).split())
    assert "Error (CONFIG_ERROR): Slack refused SLACK_APP_TOKEN (invalid_auth); create an app-level token" in output
    assert "Traceback" not in output and "Slack bot on http" not in output
    opened = slack_api.of("apps.connections.open")
    assert len(opened) == 1 and opened[0].token == "xapp-1-A0RAGAPP1-revoked"

    env["SLACK_APP_TOKEN"] = "xoxb-not-an-app-token"
    result = subprocess.run([str(RAG), "slack"], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert result.returncode == 1 and "SLACK_APP_TOKEN is not an app-level token" in result.stderr
    assert len(slack_api.of("apps.connections.open")) == 1  # refused before any call


def test_a_refused_bot_token_stops_the_http_bot_with_the_fix(pg_url, tmp_path) -> None:
    with SlackApiServer() as api:
        api.answer = lambda method, params: {"ok": False, "error": "invalid_auth"}  # type: ignore[method-assign]
        env = slack_env(api, pg_url, tmp_path, "default")
        result = subprocess.run([str(RAG), "slack", "--port", str(free_port())], env=env, cwd=tmp_path,
                                capture_output=True, text=True, timeout=120)
    assert result.returncode == 1
    output = " ".join(result.stderr.split())
    assert "Slack refused SLACK_BOT_TOKEN" in output and "invalid_auth" in output and "Traceback" not in output
    assert BOT_TOKEN not in result.stdout + result.stderr


def test_socket_mode_receives_events_acknowledges_them_and_replies(wb, site, slack_api, caplog) -> None:
    from websockets.sync.server import serve as websocket_serve

    from slack_harness import bot_settings
    from rag_core.api.slack import SlackBot, connect_socket_mode

    assert wb.ingest_texts(DOCS, site_id=site).to_dict()["failed"] == 0
    acks: list[dict] = []
    event = mention("What does the await keyword do?")

    def slack_side(ws) -> None:
        ws.send(json.dumps({"type": "hello", "num_connections": 1, "connection_info": {"app_id": "A0RAGAPP1"}}))
        envelope = {"envelope_id": "env-1", "type": "events_api", "accepts_response_payload": False,
                    "retry_attempt": 0, "retry_reason": "", "payload": event}
        ws.send(json.dumps(envelope))
        ws.send(json.dumps({**envelope, "envelope_id": "env-2", "retry_attempt": 1, "retry_reason": "timeout"}))
        for message in ws:
            acks.append(json.loads(message))

    with websocket_serve(slack_side, "127.0.0.1", 0) as ws_server:
        threading.Thread(target=ws_server.serve_forever, daemon=True).start()
        slack_api.socket_url = f"ws://127.0.0.1:{ws_server.socket.getsockname()[1]}/link/?ticket=t1"
        bot = SlackBot(wb.variant(**bot_settings(slack_api, site, slack_signing_secret="",
                                                 slack_app_token="xapp-1-A0RAGAPP1-test")))
        caplog.set_level(logging.INFO, logger="rag_core.api.slack.app")
        handler = connect_socket_mode(bot, "xapp-1-A0RAGAPP1-test")
        try:
            answer = replies(slack_api, event["event"]["ts"], 1)[0]
            deadline = time.monotonic() + 30
            while {a.get("envelope_id") for a in acks} != {"env-1", "env-2"} and time.monotonic() < deadline:
                time.sleep(0.05)
        finally:
            handler.close()
            bot.close()
            ws_server.shutdown()
    assert "\n\n*Sources*\n1. <https://docs.example.com/guide/async|Async and await>" in answer
    assert {a["envelope_id"] for a in acks} == {"env-1", "env-2"}   # both acknowledged, the retry dropped:
    assert f"Dropped a repeated Slack event event:{event['event_id']}" in caplog.text
    assert len(slack_api.posts(event["event"]["ts"])) == 1
    assert slack_api.of("apps.connections.open")[0].token == "xapp-1-A0RAGAPP1-test"
    assert not re.search(r"xoxb", json.dumps(acks))
