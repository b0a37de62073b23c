"""The Slack bot's pure parts: parsing Slack's markup, access rules, texts, throttling, repeats, the job pool."""

from __future__ import annotations

import threading

import pytest

from rag_core.api.slack import check_config
from rag_core.api.slack.access import SlackAccess
from rag_core.api.slack.commands import Command, parse, slack_to_plain
from rag_core.api.slack.jobs import AlreadyRunning, JobPool, PoolBusy, ProgressThrottle, RecentKeys
from rag_core.api.slack import messages
from rag_core.errors import ConfigError
from rag_core.ingest.web import WebIngestReport
from rag_core.settings import RagSettings


def settings(**values: object) -> RagSettings:
    return RagSettings(_env_file=None, **values)


# --------------------------------------------------------------------------- parsing


def test_slack_markup_is_undone() -> None:
    raw = "<@U0RAGBOT1> rag crawl <https://example.com/docs|example.com/docs> \\.html$ &amp; &lt;b&gt;"
    assert slack_to_plain(raw, "U0RAGBOT1") == "rag crawl https://example.com/docs \\.html$ & <b>"
    assert slack_to_plain("ask <@U0OTHER01> in <#C0GENERAL|general> <!here>", "U0RAGBOT1") == \
        "ask @U0OTHER01 in #general @here"
    assert slack_to_plain("<mailto:a@b.example|a@b.example>") == "mailto:a@b.example"


@pytest.mark.parametrize(("text", "slash", "expected"), [
    ("rag crawl https://example.com/docs \\.html$", False,
     Command("crawl", url="https://example.com/docs", pattern="\\.html$")),
    ("RAG add https://example.com/guide/getting-started", False,
     Command("add", url="https://example.com/guide/getting-started")),
    ("rag status", False, Command("status")),
    ("rag delete https://example.com/guide/getting-started", False,
     Command("delete", url="https://example.com/guide/getting-started")),
    ("rag search  async   await", False, Command("search", text="async   await")),
    ("Pythonのasync/awaitについて教えて", False, Command("ask", text="Pythonのasync/awaitについて教えて")),
    ("", False, Command("usage")),
    ("rag", False, Command("usage")),
    ("rag help", False, Command("usage")),
    ("rag crawl", False, Command("missing", subcommand="crawl")),
    ("rag search", False, Command("missing", subcommand="search")),
    ("rag frobnicate x", False, Command("usage", subcommand="frobnicate")),
    ("crawl https://example.com/a a b", True, Command("crawl", url="https://example.com/a", pattern="a b")),
    ("ask what is this?", True, Command("ask", text="what is this?")),
    ("what is this?", True, Command("usage", subcommand="what")),
    ("", True, Command("usage")),
])
def test_commands_are_parsed(text: str, slash: bool, expected: Command) -> None:
    assert parse(text, slash) == expected


# --------------------------------------------------------------------------- access


def test_access_rules() -> None:
    access = SlackAccess.from_settings(settings(
        slack_admins="U0ADMIN01, W0ADMIN02", slack_channels="C0ALLOWED,dm",
        slack_site_map="T0TEAM001=acme, C0SUPPORT=acme-support, *=public"))
    assert access.is_admin("W0ADMIN02") and not access.is_admin("U0MEMBER1") and not access.is_admin("")
    assert access.channel_allowed("C0ALLOWED") and access.channel_allowed("D0DIRECT1")
    assert not access.channel_allowed("C0ELSEWHR")
    assert access.site_for("T0TEAM001", "C0SUPPORT") == "acme-support"   # the channel beats its workspace
    assert access.site_for("T0TEAM001", "C0GENERAL") == "acme"
    assert access.site_for("T0STRANGR", "C0GENERAL") == "public"


def test_a_site_map_without_a_catch_all_leaves_strangers_out() -> None:
    access = SlackAccess.from_settings(settings(slack_site_map="T0TEAM001=acme"))
    assert access.site_for("T0STRANGR", "C0GENERAL") is None
    assert SlackAccess.from_settings(settings()).site_for("T0ANYONE1", "C0ANY0001") == "default"
    assert SlackAccess.from_settings(settings()).channel_allowed("C0ANY0001")
    assert not SlackAccess.from_settings(settings()).is_admin("U0ADMIN01")  # nobody is admin by default


@pytest.mark.parametrize(("values", "message"), [
    ({"slack_site_map": "T0TEAM001"}, "RAG_SLACK_SITE_MAP: entry 1 ('T0TEAM001') is not `ID=site`"),
    ({"slack_site_map": "T0TEAM001=a,T0TEAM001=b"}, "RAG_SLACK_SITE_MAP: T0TEAM001 is given twice"),
    ({"slack_site_map": "general=a"}, "RAG_SLACK_SITE_MAP: entry 1 ('general=a')"),
    ({"slack_site_map": "T0TEAM001=bad site"}, "is not `ID=site`"),
    ({"slack_admins": "alice"}, "RAG_SLACK_ADMINS: 'alice' is not a Slack id"),
    ({"slack_channels": "#general"}, "RAG_SLACK_CHANNELS: '#general' is not a Slack id"),
    ({"slack_language": "de"}, "RAG_SLACK_LANGUAGE: 'de' is not a language; use en, ru or ja"),
    ({"slack_language": "T0TEAM001=de"}, "RAG_SLACK_LANGUAGE: entry 1 ('T0TEAM001=de') is not `ID=language"),
])
def test_bad_access_settings_name_the_variable(values: dict, message: str) -> None:
    with pytest.raises(ConfigError) as err:
        SlackAccess.from_settings(settings(**values))
    assert message in err.value.message


def test_reply_language() -> None:
    access = SlackAccess.from_settings(settings(slack_language="T0TEAM001=ja,C0RUSSIAN=ru", language="en"))
    assert access.language_for("T0TEAM001", "C0GENERAL") == "ja"
    assert access.language_for("T0TEAM001", "C0RUSSIAN") == "ru"
    assert access.language_for("T0OTHER01", "C0GENERAL") == "en"
    assert SlackAccess.from_settings(settings(slack_language="ja")).language_for("T0ANY0001", "C0ANY0001") == "ja"
    assert messages.reply_language("Где описаны требования?", "ja") == "ru"
    assert messages.reply_language("awaitは何をしますか？", "en") == "ja"
    assert messages.reply_language("What does await do?", "ja") == "en"
    assert messages.reply_language("42", "ja") == "ja"


def test_check_config_names_the_missing_token() -> None:
    with pytest.raises(ConfigError, match="SLACK_BOT_TOKEN is not set"):
        check_config(settings())
    with pytest.raises(ConfigError, match="SLACK_SIGNING_SECRET is not set"):
        check_config(settings(slack_bot_token="xoxb-1"))
    with pytest.raises(ConfigError, match="SLACK_APP_TOKEN is not an app-level token"):
        check_config(settings(slack_bot_token="xoxb-1", slack_app_token="xoxb-2"))
    assert check_config(settings(slack_bot_token="xoxb-1", slack_signing_secret="s")) == "http"
    assert check_config(settings(slack_bot_token="xoxb-1", slack_app_token="xapp-1-A-1-x")) == "socket"


def test_slack_tokens_use_their_conventional_names(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SLACK_BOT_TOKEN", "xoxb-from-env")
    monkeypatch.setenv("SLACK_SIGNING_SECRET", "secret-from-env")
    monkeypatch.setenv("SLACK_APP_TOKEN", "xapp-from-env")
    monkeypatch.setenv("RAG_SLACK_ADMINS", "U0ADMIN01,U0ADMIN02")
    loaded = RagSettings(_env_file=None)
    assert (loaded.slack_bot_token, loaded.slack_signing_secret, loaded.slack_app_token) == \
        ("xoxb-from-env", "secret-from-env", "xapp-from-env")
    assert loaded.slack_admins == ["U0ADMIN01", "U0ADMIN02"]


# --------------------------------------------------------------------------- texts


def crawl_report(**values: object) -> WebIngestReport:
    report = WebIngestReport(index_url="https://example.com/articles", pages_found=17, pages_ingested=15, chunks=128)
    for key, value in values.items():
        setattr(report, key, value)
    return report


def test_crawl_summary_in_the_requirements_words() -> None:
    timeouts = [{"url": f"https://example.com/a{i}", "reason": "timeout", "message": "Timed out after 30 s"}
                for i in range(2)]
    ja = messages.crawl_summary(crawl_report(errors=timeouts), "ja", 30.0)
    assert ja.startswith("クロール完了しました。\n取り込みページ数: 15\nチャンク数: 128\nエラー: 2件（タイムアウト）\n")
    assert "• <https://example.com/a0>: 接続がタイムアウトしました (30秒)" in ja
    en = messages.crawl_summary(crawl_report(errors=timeouts), "en", 30.0)
    assert en.startswith("Crawl finished.\nPages ingested: 15\nChunks: 128\nErrors: 2 (timeout)\n")
    ru = messages.crawl_summary(crawl_report(errors=timeouts), "ru", 30.0)
    assert ru.startswith("Обход завершён.\nЗагружено страниц: 15\nФрагментов: 128\nОшибки: 2 (тайм-аут)\n")
    clean = messages.crawl_summary(crawl_report(unchanged=4), "ja", 30.0)
    assert clean == "クロール完了しました。\n取り込みページ数: 15（うち変更なし 4）\nチャンク数: 128\nエラー: 0件"


def test_error_counts_by_reason_and_the_list_is_capped() -> None:
    errors = ([{"url": f"https://e.example/t{i}", "reason": "timeout", "message": "t"} for i in range(4)]
              + [{"url": f"https://e.example/h{i}", "reason": "http_status", "message": "HTTP 404 Not Found"}
                 for i in range(3)])
    text = messages.crawl_summary(crawl_report(errors=errors), "en", 30)
    assert "Errors: 7 (timeout: 4, HTTP error: 3)" in text
    assert text.count("\n• ") == messages.MAX_ERROR_LINES + 1 and text.endswith("• … +2")


def test_status_delete_and_disabled_texts() -> None:
    info = {"chunks": 342, "web_sources": 20, "documents": 20}
    assert messages.status(info, "ja") == "ナレッジベース統計:\n総チャンク数: 342\nソースURL数: 20"
    url = "https://example.com/guide/getting-started"
    assert messages.text("ja", "deleted", url=url, chunks=8) == f"削除しました: {url} (8チャンク)"
    assert messages.text("ja", "disabled") == "エラー: RAG機能が無効です。管理者に連絡してください。"
    failed = messages.text("ja", "add_failed", url="https://example.com/broken-page", reason="HTTP 404 Not Found")
    assert failed == "エラー: ページの取り込みに失敗しました。\nURL: https://example.com/broken-page\n原因: HTTP 404 Not Found"


def test_every_language_has_every_text() -> None:
    keys = set(messages.TEXTS["en"])
    for language in ("ja", "ru"):
        assert set(messages.TEXTS[language]) == keys
        assert set(messages.REASONS[language]) == set(messages.REASONS["en"])


def test_document_text_cannot_inject_slack_markup() -> None:
    answer = messages.markdown_to_mrkdwn("**Bold** see [the guide](https://example.com/g?a=1&b=2) <!channel> a<b & c")
    assert answer == "*Bold* see <https://example.com/g?a=1&amp;b=2|the guide> &lt;!channel&gt; a&lt;b &amp; c"
    assert messages.link("https://example.com/x", "A|B>C") == "<https://example.com/x|A¦B&gt;C>"
    assert messages.link("docs/readme.md", "Readme") == "`docs/readme.md`"


def test_answer_lists_sources_or_says_there_are_none() -> None:
    from rag_core.search.types import Citation

    src = Citation(n=1, source="https://example.com/a", title="Async", similarity=0.921, page=None, chunk_id=1,
                 document_id=1, start_char=0, end_char=10, text="t")
    assert messages.answer("It waits [1].", [src], "en") == \
        "It waits [1].\n\n*Sources*\n1. <https://example.com/a|Async> · 92.1%"
    shared = Citation(n=2, source="docs/a.md", title="", similarity=0.5, page=None, chunk_id=2, document_id=2,
                    start_char=0, end_char=10, text="t", sites=["docs", "help<desk>"])
    assert messages.answer("It waits [2].", [shared], "en").endswith(
        "2. `docs/a.md` · 50.0% · sites: docs, help&lt;desk&gt;")
    assert messages.answer("No idea.", [], "ru") == "No idea.\n\n*Источники*\n_Релевантные документы не найдены._"
    assert messages.answer("From memory.", [], "en", with_sources=False) == "From memory."
    assert len(messages.answer("x" * 50_000, [], "en")) <= messages.MAX_TEXT


# --------------------------------------------------------------------------- throttling, repeats, the pool


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_progress_is_throttled_but_first_and_last_counts_always_show() -> None:
    clock = Clock()
    throttle = ProgressThrottle(5.0, clock)
    assert throttle.due(0, 10)
    clock.now += 1
    assert not throttle.due(1, 10)          # within the interval
    assert not throttle.due(1, 10)
    clock.now += 5
    assert throttle.due(2, 10)
    assert not throttle.due(2, 10)          # the same count again (chunks moved, pages did not)
    clock.now += 0.1
    assert throttle.due(10, 10)             # the last count always shows
    assert not throttle.due(10, 10)


def test_recent_keys_forget_after_the_ttl_and_stay_bounded() -> None:
    clock = Clock()
    keys = RecentKeys(ttl_sec=60, max_size=3, clock=clock)
    assert keys.first_time("Ev1") and not keys.first_time("Ev1")
    clock.now += 61
    assert keys.first_time("Ev1")
    for key in ("Ev2", "Ev3", "Ev4"):
        assert keys.first_time(key)
    assert keys.first_time("Ev1")           # pushed out by the size bound


def test_job_pool_refuses_duplicates_and_overflow() -> None:
    pool = JobPool(workers=1, max_waiting=1)
    release = threading.Event()
    started = threading.Event()

    def blocked() -> None:
        started.set()
        release.wait(10)

    try:
        assert pool.submit("a", blocked) == 0          # starts at once
        started.wait(10)
        with pytest.raises(AlreadyRunning):
            pool.submit("a", blocked)
        assert pool.submit("b", blocked) == 1          # first in the queue behind the running one
        with pytest.raises(PoolBusy):
            pool.submit("c", blocked)
    finally:
        release.set()
        pool.shutdown(wait=True)


def test_http_mode_refuses_an_empty_signing_secret(wb) -> None:
    from rag_core.api.slack import SlackBot, http_app
    from slack_web import SlackApiServer
    from slack_harness import bot_settings

    with SlackApiServer() as api:
        bot = SlackBot(wb.variant(**bot_settings(api, "default", slack_signing_secret="")))
        try:
            with pytest.raises(ConfigError, match="SLACK_SIGNING_SECRET is not set"):
                http_app(bot)
        finally:
            bot.close()
