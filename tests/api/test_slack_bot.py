"""The Slack bot over HTTP: signed requests to the real bolt app on loopback, replies recorded by a Slack API stand-in."""

from __future__ import annotations

import json
import logging
import re
import threading
import time
import uuid

import httpx

import pytest
from typer.testing import CliRunner

from chat.openai_server import OpenAIServer
from crawl_server import Route, base_url, serve
from slack_harness import DOCS, slack_api, start_bot  # noqa: F401 - fixtures
from slack_web import (
    ADMIN, BOT_USER, CHANNEL, TEAM, USER, direct_message, mention, new_ts, post_command, post_event, sign,
)
from rag_core.api.slack.messages import TEXTS
from rag_core.chat.prompts import RETRIEVAL_OFF_RULE, labels


@pytest.fixture
def docs(wb, site) -> str:
    assert wb.ingest_texts(DOCS, site_id=site).to_dict()["failed"] == 0
    return site


@pytest.fixture
def llm() -> OpenAIServer:
    with OpenAIServer() as server:
        yield server


@pytest.fixture
def website():
    with serve() as server:
        yield server


def in_thread(api, thread_ts: str, count: int = 1, contains: str = "") -> list:
    """Wait for `count` replies in a thread (holding `contains`) and return every reply there."""
    api.wait_for(lambda c: c.method == "chat.postMessage" and c.params.get("thread_ts") == thread_ts
                 and contains in c.text, count)
    return api.posts(thread_ts)


def ask(bot, api, text: str, **kw) -> str:
    """Mention the bot and return its (first) reply in the new thread."""
    event = mention(text, **kw)
    thread = event["event"].get("thread_ts") or event["event"]["ts"]
    before = len(api.posts(thread))
    assert post_event(bot.url, event).status_code == 200
    return in_thread(api, thread, before + 1)[before].text


# --------------------------------------------------------------------------- transport


def test_url_verification_and_signatures(start_bot, slack_api) -> None:
    bot = start_bot()
    challenge = json.dumps({"token": "legacy", "challenge": "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P",
                            "type": "url_verification"})
    ok = post_event(bot.url, json.loads(challenge))
    assert ok.status_code == 200 and ok.json() == {"challenge": "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P"}

    body = json.dumps(mention("rag status"))
    forged = httpx.post(f"{bot.url}/slack/events", content=body,
                        headers={"Content-Type": "application/json", **sign(body, secret="not-the-secret")})
    assert forged.status_code == 401
    tampered_headers = {"Content-Type": "application/json", **sign(body)}
    tampered = httpx.post(f"{bot.url}/slack/events", content=body.replace("rag status", "rag delete x"),
                          headers=tampered_headers)
    assert tampered.status_code == 401
    stale = post_event(bot.url, mention("rag status"), timestamp=int(time.time()) - 6 * 60)
    assert stale.status_code == 401
    unsigned = httpx.post(f"{bot.url}/slack/events", content=body, headers={"Content-Type": "application/json"})
    assert unsigned.status_code == 401
    # The one signed request in this test is the url_verification: nothing was answered or posted.
    assert slack_api.posts() == []


# --------------------------------------------------------------------------- questions


def test_question_gets_the_answer_and_linked_sources_in_its_thread(start_bot, slack_api, docs) -> None:
    bot = start_bot()
    event = mention("What does the await keyword do?")
    assert post_event(bot.url, event).status_code == 200
    reply = in_thread(slack_api, event["event"]["ts"])[0]
    assert reply.params["channel"] == CHANNEL and reply.token == "xoxb-test-bot-token-0001"
    answer, _, sources = reply.text.partition("\n\n*Sources*\n")
    assert "await keyword suspends a coroutine" in answer and "[1]" in answer
    assert sources.startswith("1. <https://docs.example.com/guide/async|Async and await> · ")
    assert reply.params.get("unfurl_links") is False


def test_japanese_question_is_answered_in_japanese(start_bot, slack_api, docs) -> None:
    bot = start_bot()
    reply = ask(bot, slack_api, "awaitは何をしますか？")
    assert "\n\n*出典*\n1. <https://docs.example.com/ja/async|非同期処理>" in reply
    assert "コルーチンを一時停止" in reply


def test_a_thread_is_one_conversation(start_bot, slack_api, docs, llm) -> None:
    bot = start_bot(llm="openai", llm_base_url=llm.base_url, llm_model="test-model", llm_api_key="sk-test")
    first = mention("What does the await keyword do?")
    post_event(bot.url, first)
    thread = first["event"]["ts"]
    first_answer = in_thread(slack_api, thread)[0].text.partition("\n\n*Sources*")[0]

    llm.requests.clear()
    post_event(bot.url, mention("And how is a coroutine declared?", thread_ts=thread))
    in_thread(slack_api, thread, 2)
    answer_request = llm.requests[-1]
    assert [m["role"] for m in answer_request["messages"]] == ["system", "user", "assistant", "user"]
    assert answer_request["messages"][1]["content"] == "What does the await keyword do?"
    assert answer_request["messages"][2]["content"] in first_answer.replace("&amp;", "&")

    llm.requests.clear()
    other = mention("How is a coroutine declared?")  # a new thread starts a new conversation
    post_event(bot.url, other)
    in_thread(slack_api, other["event"]["ts"])
    assert [m["role"] for m in llm.requests[-1]["messages"]] == ["system", "user"]


def test_direct_messages_are_questions_and_a_mention_in_one_is_answered_once(start_bot, slack_api, docs) -> None:
    bot = start_bot()
    ts = new_ts()
    dm = direct_message(f"<@{BOT_USER}> What does the await keyword do?", ts=ts)
    as_mention = mention("What does the await keyword do?", channel="D0DIRECT1", ts=ts)
    assert post_event(bot.url, dm).status_code == 200
    assert post_event(bot.url, as_mention).status_code == 200
    in_thread(slack_api, ts)
    barrier = mention("rag status")  # answered after the duplicate would have been
    post_event(bot.url, barrier)
    in_thread(slack_api, barrier["event"]["ts"])
    assert len(slack_api.posts(ts)) == 1

    # An app that also subscribes to channel messages gets the mention twice; the channel copy is not the answer.
    ts = new_ts()
    channel_copy = direct_message(f"<@{BOT_USER}> rag status", channel=CHANNEL, ts=ts)
    channel_copy["event"]["channel_type"] = "channel"
    post_event(bot.url, channel_copy)
    post_event(bot.url, mention("rag status", ts=ts))
    assert in_thread(slack_api, ts)[0].text.startswith("Knowledge base statistics:")

    own = direct_message("A message the bot posted itself", user=BOT_USER)
    own["event"]["bot_id"] = "B0RAGBOT1"
    assert post_event(bot.url, own).status_code == 200
    barrier = mention("rag status")
    post_event(bot.url, barrier)
    in_thread(slack_api, barrier["event"]["ts"])
    assert slack_api.posts(own["event"]["ts"]) == []


def test_a_retried_event_is_not_answered_twice(start_bot, slack_api, docs, llm) -> None:
    llm.delay = 1.0  # a slow answer: the kind Slack retries
    bot = start_bot(llm="openai", llm_base_url=llm.base_url, llm_model="test-model", llm_api_key="sk-test")
    event = mention("What does the await keyword do?")
    first = post_event(bot.url, event)
    retry = post_event(bot.url, event, retry_num=1)
    assert first.status_code == 200 and "x-slack-no-retry" not in first.headers
    assert retry.status_code == 200 and retry.headers.get("x-slack-no-retry") == "1"
    in_thread(slack_api, event["event"]["ts"])
    assert post_event(bot.url, event, retry_num=2).headers.get("x-slack-no-retry") == "1"
    llm.delay = 0.0
    barrier = mention("rag status")
    post_event(bot.url, barrier)
    in_thread(slack_api, barrier["event"]["ts"])
    assert len(slack_api.posts(event["event"]["ts"])) == 1
    assert sum("await" in r["messages"][-1]["content"] for r in llm.requests) == 1


def test_rag_disabled_answers_without_retrieval_and_refuses_the_commands(start_bot, slack_api, docs, llm) -> None:
    bot = start_bot(enabled=False, slack_language="ja", llm="openai", llm_base_url=llm.base_url,
                    llm_model="test-model", llm_api_key="sk-test")
    for command in ("rag status", "rag search 非同期処理", "rag add http://127.0.0.1:9/x", "rag delete https://x.test/"):
        assert ask(bot, slack_api, command, user=ADMIN) == "エラー: RAG機能が無効です。管理者に連絡してください。"
    reply = ask(bot, slack_api, "What does the await keyword do?")
    system = llm.requests[-1]["messages"][0]["content"]
    assert RETRIEVAL_OFF_RULE in system and "docs.example.com" not in system
    assert reply.startswith("Answer to: What does the await keyword do?") and "Sources" not in reply


def test_a_retrieval_failure_is_logged_and_the_answer_goes_on(start_bot, slack_api, docs, caplog) -> None:
    # The operator switched RAG_EMBEDDER without `rag reindex`: searching the store fails.
    bot = start_bot(embedder="openai", embed_model="text-embedding-3-small")
    with caplog.at_level(logging.ERROR, logger="rag_core.chat.turn"):
        reply = ask(bot, slack_api, "What does the await keyword do?")
    assert reply.startswith(labels("en")["retrieval_failed"])
    assert any("Retrieval failed in chat session slack:" in r.getMessage() for r in caplog.records)


# --------------------------------------------------------------------------- crawl, add, status, delete, search


def test_crawl_progress_summary_status_delete_in_japanese(start_bot, slack_api, wb, site, website) -> None:
    bot = start_bot(slack_language="ja")
    index = f"{base_url(website)}/index.html"
    event = mention(f"rag crawl <{index}|127.0.0.1/index.html> /articles/", user=ADMIN)
    assert post_event(bot.url, event).status_code == 200
    thread = event["event"]["ts"]
    replies = in_thread(slack_api, thread, 2, contains="")
    accepted, summary = replies[0], replies[1]
    assert accepted.text.startswith(f"クロールを開始します: {index}（パターン: `/articles/`）")

    progress = [c.text for c in slack_api.of("chat.update") if c.params["ts"] == accepted.result["ts"]]
    done = [int(m.group(1)) for m in (re.search(r"進捗: (\d+) / 3 ページ", t) for t in progress) if m]
    assert done == [0, 1, 2, 3]

    chunks = wb.status(site_id=site)["chunks"]
    assert chunks > 0
    assert summary.text.startswith(f"クロール完了しました。\n取り込みページ数: 3\nチャンク数: {chunks}\nエラー: 1件（拒否）")
    assert "<http://evil.test/articles/steal.html>: Domain not in allowlist: evil.test" in summary.text

    assert ask(bot, slack_api, "rag status") == f"ナレッジベース統計:\n総チャンク数: {chunks}\nソースURL数: 3"

    page = f"{base_url(website)}/articles/a1.html"
    page_chunks = next(d["chunk_count"] for d in wb.documents(site_id=site) if d["source"] == page)
    assert ask(bot, slack_api, f"rag delete <{page}>", user=ADMIN) == f"削除しました: {page} ({page_chunks}チャンク)"
    assert ask(bot, slack_api, "rag status").startswith(
        f"ナレッジベース統計:\n総チャンク数: {chunks - page_chunks}\nソースURL数: 2")

    # A query shows its own language: English words get the English header in a Japanese workspace.
    found = ask(bot, slack_api, "rag search ARTICLETOKENa2 retrieval")
    assert found.startswith("*2 results for “ARTICLETOKENa2 retrieval”*\n"
                            f"1. <{base_url(website)}/articles/a2.html|Article a2 heading>\n>")
    assert "*ARTICLETOKENa2*" in found
    found_ja = ask(bot, slack_api, "rag search 記事の ARTICLETOKENa3")
    assert found_ja.startswith("*「記事の ARTICLETOKENa3」の検索結果: ")

    answered = ask(bot, slack_api, "What does the workbench split documents into?")
    assert f"\n\n*Sources*\n1. <{base_url(website)}/articles/a" in answered


def test_add_reports_added_unchanged_timeout_and_http_errors(start_bot, slack_api, website) -> None:
    bot = start_bot(crawl_timeout_sec=0.5)
    page = f"{base_url(website)}/articles/new.html"
    added = mention(f"rag add {page}", user=ADMIN)
    post_event(bot.url, added)
    accepted, result = in_thread(slack_api, added["event"]["ts"], 2)
    assert accepted.text == f"Adding {page} in the background; the result follows in this thread."
    assert re.fullmatch(rf"Added: {re.escape(page)} \(\d+ chunks\)", result.text)

    again = mention(f"rag add {page}", user=ADMIN)
    post_event(bot.url, again)
    assert in_thread(slack_api, again["event"]["ts"], 2)[1].text == f"Unchanged: {page} (already up to date)"

    slow = mention(f"rag add {base_url(website)}/slow.html", user=ADMIN)
    post_event(bot.url, slow)
    assert in_thread(slack_api, slow["event"]["ts"], 2)[1].text == (
        f"Error: the page could not be ingested.\nURL: {base_url(website)}/slow.html\n"
        "Reason: the connection timed out (0.5 s)")

    missing = mention(f"rag add {base_url(website)}/missing.html", user=ADMIN, team=TEAM)
    post_event(bot.url, missing)
    assert in_thread(slack_api, missing["event"]["ts"], 2)[1].text == (
        f"Error: the page could not be ingested.\nURL: {base_url(website)}/missing.html\nReason: HTTP 404 Not Found")


def test_index_page_timeout_in_russian(start_bot, slack_api, website) -> None:
    bot = start_bot(crawl_timeout_sec=0.5, slack_language="ru")
    event = mention(f"rag crawl {base_url(website)}/slow.html", user=ADMIN)
    post_event(bot.url, event)
    assert in_thread(slack_api, event["event"]["ts"], 2)[1].text == (
        f"Ошибка: обход не удался.\nURL: {base_url(website)}/slow.html\n"
        "Причина: истекло время ожидания соединения (0.5 с)")


def test_a_long_crawl_does_not_hold_up_questions(start_bot, slack_api, docs, website) -> None:
    gate = threading.Event()
    website.state.routes["/slow-index.html"] = Route(body=b"<a href='/articles/s1.html'>s1</a>", gate=gate)
    bot = start_bot()
    try:
        crawl = mention(f"rag crawl {base_url(website)}/slow-index.html", user=ADMIN)
        post_event(bot.url, crawl)
        in_thread(slack_api, crawl["event"]["ts"])  # accepted; the index page is still being served

        again = mention(f"rag crawl {base_url(website)}/slow-index.html", user=ADMIN)
        post_event(bot.url, again)
        assert in_thread(slack_api, again["event"]["ts"])[0].text == (
            f"Error: {base_url(website)}/slow-index.html is already being ingested; wait for it to finish.")

        answer = ask(bot, slack_api, "What does the await keyword do?")
        assert "*Sources*" in answer
        assert len(slack_api.posts(crawl["event"]["ts"])) == 1  # the crawl has not finished
    finally:
        gate.set()
    summary = in_thread(slack_api, crawl["event"]["ts"], 2)[1].text
    assert summary.startswith("Crawl finished.\nPages ingested: 1\n")


# --------------------------------------------------------------------------- refusals and permissions


def test_a_refused_url_gets_the_same_text_as_the_cli(start_bot, slack_api, website, cli_env, monkeypatch) -> None:
    bot = start_bot()
    reply = ask(bot, slack_api, "rag add <https://malicious-site.com/page|malicious-site.com/page>", user=ADMIN)
    headline, _, reason = reply.partition("\n")
    assert headline == "Error: the crawl policy refused this URL."

    from rag_core.cli import app

    monkeypatch.setenv("RAG_ALLOWED_DOMAINS", "127.0.0.1")
    result = CliRunner().invoke(app, ["add", "https://malicious-site.com/page"])
    assert result.exit_code == 1
    cli_text = " ".join(result.output.split()).removeprefix("Error (CRAWL_REFUSED): ")
    assert reason == cli_text
    assert reason.startswith("Domain not in allowlist: malicious-site.com. URL: https://malicious-site.com/page")

    private = start_bot(allow_private_networks=False)
    blocked = ask(private, slack_api, f"rag crawl {base_url(website)}/index.html", user=ADMIN)
    assert blocked.startswith("Error: the crawl policy refused this URL.\nRefused 127.0.0.1 (127.0.0.1): private")
    assert website.state.paths() == []  # nothing was fetched


def test_only_admins_crawl_add_and_delete(start_bot, slack_api, website, docs) -> None:
    bot = start_bot()
    for command in (f"rag crawl {base_url(website)}/index.html", f"rag add {base_url(website)}/articles/a1.html",
                    "rag delete https://docs.example.com/guide/async"):
        assert ask(bot, slack_api, command, user=USER) == (
            "Error: only admins may crawl, add and delete. Ask one of them, or ask the operator to add your user "
            f"id ({USER}) to RAG_SLACK_ADMINS.")
    assert website.state.paths() == []
    assert "docs.example.com/guide/async" in ask(bot, slack_api, "rag search await keyword", user=USER)
    assert ask(bot, slack_api, "rag status", user=USER).startswith("Knowledge base statistics:\nTotal chunks: ")


def test_channels_outside_the_list_are_refused(start_bot, slack_api, docs) -> None:
    bot = start_bot(slack_channels=["C0ALLOWED", "dm"])
    assert ask(bot, slack_api, "What does the await keyword do?", channel="C0ELSEWHR") == (
        "Error: the bot is not enabled in this channel; ask the operator to add C0ELSEWHR to RAG_SLACK_CHANNELS.")
    assert "*Sources*" in ask(bot, slack_api, "What does the await keyword do?", channel="C0ALLOWED")
    dm = direct_message("What does the await keyword do?")
    post_event(bot.url, dm)
    assert "*Sources*" in in_thread(slack_api, dm["event"]["ts"])[0].text


def test_each_workspace_reads_only_its_own_site(start_bot, slack_api, wb, docs) -> None:
    other_site = f"t-slack-other-{uuid.uuid4().hex[:6]}"
    wb.ingest_texts([{"source": "https://other.example.com/secret", "title": "Other tenant",
                      "text": "In the other tenant's notes, the await keyword pauses a coroutine until the awaited "
                              "task is done; these notes are private to the other workspace."}],
                    site_id=other_site)
    try:
        bot = start_bot(slack_site_map=f"{TEAM}={docs},T0OTHER01={other_site}")
        mine = ask(bot, slack_api, "rag search await keyword")
        assert "docs.example.com/guide/async" in mine and "other.example.com" not in mine
        theirs = ask(bot, slack_api, "rag search await keyword", team="T0OTHER01")
        assert "other.example.com/secret" in theirs and "docs.example.com" not in theirs
        answer = ask(bot, slack_api, "What does the await keyword do?", team="T0OTHER01")
        assert "other.example.com/secret" in answer and "docs.example.com" not in answer
        assert ask(bot, slack_api, "rag status", team="T0STRANGR") == (
            "Error: this workspace and channel are not mapped to a site; ask the operator to add `T0STRANGR=<site>` "
            f"or `{CHANNEL}=<site>` to RAG_SLACK_SITE_MAP.")
    finally:
        wb.delete_source("https://other.example.com/secret", site_id=other_site)


# --------------------------------------------------------------------------- bad input


def test_bad_input_gets_one_line_with_the_fix(start_bot, slack_api, site) -> None:
    bot = start_bot()
    unknown = ask(bot, slack_api, "rag frobnicate now")
    assert unknown.startswith("Unknown command: `frobnicate`\nUsage:\n")
    assert "`@bot rag crawl <URL> [pattern]`" in unknown
    assert ask(bot, slack_api, "rag").startswith("Usage:\n")
    assert ask(bot, slack_api, "rag add", user=ADMIN) == \
        "Error: `rag add` needs a URL, e.g. `rag add https://example.com/page`"
    assert ask(bot, slack_api, "rag search") == \
        "Error: `rag search` needs words to search for, e.g. `rag search async tasks`"
    assert ask(bot, slack_api, "rag delete https://docs.example.com/never-added", user=ADMIN) == (
        "Error: https://docs.example.com/never-added is not in the knowledge base; give the URL exactly as it was added.")
    empty = TEXTS["en"]["empty_index"]
    assert ask(bot, slack_api, "What is in the knowledge base?") == empty
    assert ask(bot, slack_api, "rag search anything") == empty
    assert ask(bot, slack_api, "rag status") == (
        "Knowledge base statistics:\nTotal chunks: 0\nSource URLs: 0\n" + TEXTS["en"]["status_empty"])


# --------------------------------------------------------------------------- the /rag slash command


def test_slash_command(start_bot, slack_api, docs, website) -> None:
    bot = start_bot()
    status = post_command(bot.url, "status", slack_api.response_url("status"))
    assert status.status_code == 200 and status.text == ""  # acknowledged at once, the reply follows
    reply = slack_api.wait_for(lambda c: c.method == "response_url")[0]
    assert reply.params["text"].startswith("Knowledge base statistics:\nTotal chunks: ")
    assert reply.params["response_type"] == "ephemeral"

    post_command(bot.url, "ask What does the await keyword do?", slack_api.response_url())
    root = slack_api.wait_for(lambda c: c.method == "chat.postMessage" and "asked:" in c.text)[0]
    assert root.text == f"<@{USER}> asked: What does the await keyword do?" and "thread_ts" not in root.params
    thread = root.result["ts"]
    answer = in_thread(slack_api, thread)[0]
    assert "*Sources*" in answer.text

    post_event(bot.url, mention("And how is one declared?", thread_ts=thread))  # the thread goes on by mention
    assert len(in_thread(slack_api, thread, 2)) == 2

    post_command(bot.url, "frobnicate", slack_api.response_url("bad"))
    bad = slack_api.wait_for(lambda c: c.method == "response_url" and "frobnicate" in c.text)[0]
    assert bad.text.startswith("Unknown command: `frobnicate`\nUsage:")

    slack_api.refuse_channels.add("C0PRIVATE")
    post_command(bot.url, f"add {base_url(website)}/articles/a1.html", slack_api.response_url("nic"), user=ADMIN,
                 channel="C0PRIVATE")
    refused = slack_api.wait_for(lambda c: c.method == "response_url" and "cannot post" in c.text)[0]
    assert refused.text.startswith("Error: the bot cannot post in this channel; invite it with `/invite @bot`")
    added = slack_api.wait_for(lambda c: c.method == "response_url" and c.text.startswith("Added: "))[0]
    assert f"{base_url(website)}/articles/a1.html" in added.text
