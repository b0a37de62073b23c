"""The Slack bot: a slack-bolt app over the Workbench. It parses, authorises and formats; the Workbench does the rest.

* Mentions and direct messages: a question is a chat turn; the session is the Slack thread
  (`slack:<team>:<channel>:<thread ts>`), so a thread is one conversation and survives restarts in
  PostgreSQL. `rag crawl|add|status|delete|search` run the knowledge base commands.
* `/rag <subcommand>`: the same commands as a slash command.
* Slack wants an answer within 3 seconds: bolt's listener threads only acknowledge and hand the work
  on, so no slow question, Slack API call or crawl can hold up an acknowledgement. Questions and
  commands are answered on the answer threads, crawls and page adds on a separate bounded pool, so a
  long crawl never holds up a question. Progress goes into the thread (an edited message), then the summary.
* Every failure becomes a one-line reply that says what to do; the app keeps serving.
"""

from __future__ import annotations

import logging
import threading
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Callable

from slack_bolt import App, BoltResponse
from slack_bolt.error import BoltUnhandledRequestError
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError
from slack_sdk.http_retry.builtin_handlers import RateLimitErrorRetryHandler

from rag_core.api.slack import commands, messages
from rag_core.api.slack.access import SlackAccess
from rag_core.api.slack.commands import Command
from rag_core.api.slack.jobs import AlreadyRunning, JobPool, PoolBusy, ProgressThrottle, RecentKeys
from rag_core.api.slack.messages import escape, text
from rag_core.errors import ConfigError, CrawlRefused, DatabaseError, FetchError, IndexUnavailable, RagError
from rag_core.settings import RagSettings
from rag_core.workbench import Workbench

log = logging.getLogger(__name__)

LISTENER_THREADS = 4        # bolt's threads: they acknowledge and hand on, nothing slower
ANSWER_THREADS = 8          # questions, searches and replies answered at once
MAX_WAITING_JOBS = 10       # crawls waiting for a worker before new ones are refused
SEARCH_LIMIT = 5
WAIT_FOR_THREAD_SEC = 30.0  # a job waits this long for its progress message to exist
MISSING_SIGNING_SECRET = ("SLACK_SIGNING_SECRET is not set: HTTP mode verifies every request with it; copy it from "
                          "Basic Information > App Credentials (or set SLACK_APP_TOKEN for Socket Mode).")


@dataclass
class Origin:
    """Where a request came from and where its replies go."""

    team: str
    channel: str
    user: str
    thread_ts: str | None                          # None: a slash command before it opened a thread
    respond: Callable[..., Any] | None = None      # a slash command's response_url

    @property
    def session_id(self) -> str:
        """One chat session per Slack thread."""
        return f"slack:{self.team}:{self.channel}:{self.thread_ts}"

    @property
    def user_id(self) -> str:
        return f"slack:{self.team}:{self.user}"


def api_base_url(url: str) -> str:
    """slack_sdk joins method names onto the base URL, which must end with a slash."""
    return url if url.endswith("/") else url + "/"


def check_config(settings: RagSettings) -> str:
    """'socket' or 'http' from the tokens set; a missing or malformed one is a ConfigError saying where to find it."""
    if not settings.slack_bot_token.strip():
        raise ConfigError("SLACK_BOT_TOKEN is not set: copy the Bot User OAuth Token (xoxb-...) from your Slack "
                          "app's OAuth & Permissions page (docs/slack.md).")
    if settings.slack_app_token.strip():
        if not settings.slack_app_token.startswith("xapp-"):
            raise ConfigError("SLACK_APP_TOKEN is not an app-level token (they start with xapp-): create one with the "
                              "connections:write scope under Basic Information > App-Level Tokens, or unset it to "
                              "receive events over HTTP.")
        return "socket"
    if not settings.slack_signing_secret.strip():
        raise ConfigError(MISSING_SIGNING_SECRET)
    return "http"


class SlackBot:
    """The bolt app, its Web API client and the background pool, over one Workbench."""

    def __init__(self, wb: Workbench, settings: RagSettings | None = None) -> None:
        self.wb = wb
        self.settings = settings or wb.settings
        self.access = SlackAccess.from_settings(self.settings)
        self.client = WebClient(token=self.settings.slack_bot_token, base_url=api_base_url(self.settings.slack_api_url),
                                logger=log)
        # Progress edits and replies may hit Slack's per-method rate limits; wait as Slack says, twice at most.
        self.client.retry_handlers.append(RateLimitErrorRetryHandler(max_retry_count=2))
        self.jobs = JobPool(self.settings.slack_crawl_workers, MAX_WAITING_JOBS)
        self.events = RecentKeys()
        self._listeners = ThreadPoolExecutor(max_workers=LISTENER_THREADS, thread_name_prefix="slack-listener")
        self._answers = ThreadPoolExecutor(max_workers=ANSWER_THREADS, thread_name_prefix="slack-answer")
        try:
            # auth.test at start: a wrong bot token stops the program here instead of at the first reply.
            # Unhandled requests go to _on_error, which logs no body (bolt's own warning quotes the whole body).
            self.app = App(client=self.client, signing_secret=self.settings.slack_signing_secret,
                           listener_executor=self._listeners, name="rag-slack", logger=log,
                           raise_error_for_unhandled_request=True)
        except Exception as exc:  # BoltError for a refused token, URLError when Slack is unreachable
            raise ConfigError(_start_problem(exc, self.settings)) from None
        self.app.error(self._on_error)
        self.app.use(self._drop_repeats)
        self.app.event("app_mention")(self._on_mention)
        self.app.event("message")(self._on_message)
        self.app.command("/rag")(self._on_command)

    def close(self) -> None:
        """Stop taking crawls (running ones finish) and stop the listener threads."""
        self.jobs.shutdown(wait=False)
        self._listeners.shutdown(wait=False)
        self._answers.shutdown(wait=False)

    # ------------------------------------------------------------------ Slack entry points

    def _drop_repeats(self, body: dict[str, Any], request: Any, next_: Callable[[], Any]) -> Any:
        """Answer each message once: Slack resends events (X-Slack-Retry-Num) and a mention in a DM arrives twice."""
        event = body.get("event") if isinstance(body, dict) else None
        keys = [f"event:{body['event_id']}"] if isinstance(body, dict) and body.get("event_id") else []
        if isinstance(body, dict) and body.get("command") and body.get("trigger_id"):
            keys.append(f"command:{body['trigger_id']}")  # a replayed slash command (within its 5 minutes)
        if isinstance(event, dict) and event.get("ts") and _answered(event):
            keys.append(f"message:{event['channel']}:{event['ts']}")
        fresh = [self.events.first_time(key) for key in keys]
        if not all(fresh):
            retry = (request.headers.get("x-slack-retry-num") or ["-"])[0]
            log.info("Dropped a repeated Slack event %s (retry %s)", keys[0], retry)
            return BoltResponse(status=200, body="", headers={"X-Slack-No-Retry": "1"})
        return next_()

    def _on_error(self, error: Exception, body: dict[str, Any]) -> None:
        """bolt's error handler: an unhandled request or a failed listener, logged by kind, never with its body."""
        kind = (body.get("type") or body.get("command") or "request") if isinstance(body, dict) else "request"
        if isinstance(error, BoltUnhandledRequestError):
            log.info("Ignored a Slack %s the bot has no handler for", str(kind)[:40])
            return
        log.error("Slack %s failed: %s", str(kind)[:40], type(error).__name__, exc_info=error)

    def _on_mention(self, event: dict[str, Any], body: dict[str, Any], context: Any) -> None:
        self._on_user_message(event, body, context)

    def _on_message(self, event: dict[str, Any], body: dict[str, Any], context: Any) -> None:
        if _answered(event):
            self._on_user_message(event, body, context)

    def _on_user_message(self, event: dict[str, Any], body: dict[str, Any], context: Any) -> None:
        origin = Origin(team=body.get("team_id") or event.get("team") or "", channel=event["channel"],
                        user=event.get("user") or "", thread_ts=event.get("thread_ts") or event["ts"])
        self._answer_later(origin, commands.slack_to_plain(event.get("text", ""), context.bot_user_id))

    def _on_command(self, ack: Callable[..., None], command: dict[str, Any], respond: Callable[..., Any]) -> None:
        ack()  # within Slack's 3 seconds; the reply follows through the response URL or in a thread
        origin = Origin(team=command.get("team_id", ""), channel=command.get("channel_id", ""),
                        user=command.get("user_id", ""), thread_ts=None, respond=respond)
        self._answer_later(origin, commands.slack_to_plain(command.get("text", "")), slash=True)

    def _answer_later(self, origin: Origin, message: str, slash: bool = False) -> None:
        """Queue the request on the answer threads; bolt's listener thread returns at once."""

        def answer() -> None:
            try:
                self.handle(origin, message, slash)
            except Exception:  # noqa: BLE001 - a reply Slack refused after the error reply; the thread goes on
                log.exception("Slack reply failed in %s", origin.channel)

        self._answers.submit(answer)

    # ------------------------------------------------------------------ one request

    def handle(self, origin: Origin, message: str, slash: bool = False) -> None:
        """Parse, authorise and run one request; every outcome is a reply, never an exception."""
        cmd = commands.parse(message, slash)
        language = self.access.language_for(origin.team, origin.channel)
        if cmd.name in ("ask", "search"):
            language = messages.reply_language(cmd.text, language)
        try:
            site = self._authorise(origin, cmd, language)
            if site is not None:
                getattr(self, f"_{cmd.name}")(origin, cmd, language, site)
        except Exception as exc:  # noqa: BLE001 - each failure is answered in one line, the app keeps serving
            self._reply(origin, self._error_text(exc, language))

    def _authorise(self, origin: Origin, cmd: Command, language: str) -> str | None:
        """The request's site, or None after replying why it may not run."""
        if not self.access.channel_allowed(origin.channel):
            self._reply(origin, text(language, "channel_denied", channel=origin.channel))
            return None
        site = self.access.site_for(origin.team, origin.channel)
        if site is None:
            self._reply(origin, text(language, "no_site", team=origin.team, channel=origin.channel))
            return None
        if cmd.name in commands.KNOWLEDGE_COMMANDS and not self.settings.enabled:
            self._reply(origin, text(language, "disabled"))
            return None
        if cmd.name in commands.WRITE_COMMANDS and not self.access.is_admin(origin.user):
            self._reply(origin, text(language, "not_admin", user=origin.user))
            return None
        return site

    def _error_text(self, exc: Exception, language: str) -> str:
        if isinstance(exc, CrawlRefused):
            return text(language, "refused", reason=escape(exc.message))
        if isinstance(exc, IndexUnavailable):
            return text(language, "empty_index")
        if isinstance(exc, DatabaseError):
            log.warning("Slack request failed: %s", exc.message)
            return text(language, "db_down")
        if isinstance(exc, RagError):
            return text(language, "failed", message=escape(exc.message))
        incident = uuid.uuid4().hex[:12]
        log.exception("Slack request failed (incident %s)", incident)
        return text(language, "internal", incident=incident)

    # ------------------------------------------------------------------ commands

    def _usage(self, origin: Origin, cmd: Command, language: str, site: str) -> None:
        usage = text(language, "usage")
        if cmd.subcommand:
            usage = text(language, "unknown", sub=escape(cmd.subcommand)) + "\n" + usage
        self._reply(origin, usage)

    def _missing(self, origin: Origin, cmd: Command, language: str, site: str) -> None:
        if cmd.subcommand in ("ask", "search"):
            kind = "query" if cmd.subcommand == "search" else "question"
            self._reply(origin, text(language, "missing_text", sub=cmd.subcommand, what=text(language, f"what_{kind}"),
                                     example=text(language, f"example_{kind}")))
        else:
            self._reply(origin, text(language, "missing_url", sub=cmd.subcommand))

    def _ask(self, origin: Origin, cmd: Command, language: str, site: str) -> None:
        if origin.thread_ts is None and not self._open_thread(
                origin, text(language, "asked", user=origin.user, question=escape(cmd.text)), language):
            return
        turn = self.wb.chat(cmd.text, session_id=origin.session_id, site_id=site, user_id=origin.user_id,
                            language=language)
        if turn.flags.get("no_index"):
            self._reply(origin, text(language, "empty_index"))
            return
        self._reply(origin, messages.answer(turn.answer, turn.sources, language,
                                            with_sources=not turn.flags.get("retrieval_off")))

    def _search(self, origin: Origin, cmd: Command, language: str, site: str) -> None:
        response = self.wb.search(cmd.text, site_id=site, limit=SEARCH_LIMIT, include_context=False,
                                  user_id=origin.user_id)
        self._reply(origin, messages.search_results(response, language))

    def _status(self, origin: Origin, cmd: Command, language: str, site: str) -> None:
        self._reply(origin, messages.status(self.wb.status(site_id=site), language))

    def _delete(self, origin: Origin, cmd: Command, language: str, site: str) -> None:
        result = self.wb.delete_source(cmd.url, site_id=site)
        key = "deleted" if result["documents"] else "not_found"
        self._reply(origin, text(language, key, url=escape(cmd.url), chunks=result["chunks"]))

    def _crawl(self, origin: Origin, cmd: Command, language: str, site: str) -> None:
        self._start_web_job(origin, cmd, language, site)

    def _add(self, origin: Origin, cmd: Command, language: str, site: str) -> None:
        self._start_web_job(origin, cmd, language, site)

    # ------------------------------------------------------------------ background crawls

    def _start_web_job(self, origin: Origin, cmd: Command, language: str, site: str) -> None:
        """Refuse a URL at once, else queue the crawl and open the message its progress edits."""
        url = self.wb.check_url(cmd.url)  # CrawlRefused: the crawler's own text, before anything is queued
        pattern = text(language, "pattern", pattern=escape(cmd.pattern)) if cmd.pattern else ""
        accepted = text(language, f"{cmd.name}_accepted", url=escape(url), pattern=pattern)
        progress: dict[str, Any] = {}
        ready = threading.Event()

        def job() -> None:
            ready.wait(WAIT_FOR_THREAD_SEC)
            self._run_web_job(origin, cmd, language, site, progress.get("ts"), accepted)

        try:
            place = self.jobs.submit((site, cmd.name, url), job)
        except AlreadyRunning:
            self._reply(origin, text(language, "duplicate", url=escape(url)))
            return
        except PoolBusy as busy:
            self._reply(origin, text(language, "busy", n=busy.args[0]))
            return
        try:
            queued = text(language, "queued", n=place) if place else ""
            progress["ts"] = self._open_thread(origin, accepted + queued, language)
        finally:
            ready.set()

    def _run_web_job(self, origin: Origin, cmd: Command, language: str, site: str, progress_ts: str | None,
                     accepted: str) -> None:
        throttle = ProgressThrottle(self.settings.slack_progress_sec)
        timeout = self.settings.crawl_timeout_sec

        def on_progress(p: Any) -> None:
            if progress_ts and p.total and throttle.due(p.done, p.total):
                chunks = text(language, "progress_chunks", chunks=p.chunks_done) if p.chunks_done else ""
                self._update(origin.channel, progress_ts, accepted + "\n" +
                             text(language, "progress", done=p.done, total=p.total) + chunks)

        try:
            if cmd.name == "crawl":
                report = self.wb.ingest_index(cmd.url, cmd.pattern, site_id=site, progress=on_progress)
                summary = messages.crawl_summary(report, language, timeout)
            else:
                report = self.wb.ingest_url(cmd.url, site_id=site, progress=on_progress)
                summary = messages.add_summary(report, language, timeout)
        except FetchError as exc:  # the index page itself could not be read
            details = exc.details if isinstance(exc.details, dict) else {}
            inner = exc.message.rpartition("Reason: ")[2]
            summary = text(language, "crawl_failed", url=escape(str(details.get("url", cmd.url))),
                           reason=messages.cause(str(details.get("reason", "")), inner, language, timeout))
        except Exception as exc:  # noqa: BLE001 - reported in the thread like any other failure
            summary = self._error_text(exc, language)
        self._reply(origin, summary)

    # ------------------------------------------------------------------ Web API

    def _open_thread(self, origin: Origin, message: str, language: str) -> str | None:
        """Post a message that starts (or continues) the request's thread; its ts, or None when Slack refused."""
        try:
            ts = self._post(origin.channel, message, origin.thread_ts)
        except SlackApiError as exc:
            log.warning("Slack refused a post in %s: %s", origin.channel, exc.response.get("error"))
            if origin.respond is not None:
                self._respond(origin, text(language, "not_in_channel"))
            return None
        if origin.thread_ts is None:
            origin.thread_ts = ts
        return ts

    def _reply(self, origin: Origin, message: str) -> None:
        """A reply in the request's thread, or through a slash command's response URL before there is one."""
        if origin.thread_ts is None and origin.respond is not None:
            self._respond(origin, message)
            return
        try:
            self._post(origin.channel, message, origin.thread_ts)
        except SlackApiError as exc:
            log.warning("Slack refused a reply in %s: %s", origin.channel, exc.response.get("error"))
            if origin.respond is not None:
                self._respond(origin, message)

    def _respond(self, origin: Origin, message: str) -> None:
        try:
            origin.respond(text=message, response_type="ephemeral", replace_original=False)  # type: ignore[misc]
        except Exception as exc:  # noqa: BLE001 - an expired response URL must not end the request's thread
            log.warning("Slack response URL failed: %s", exc)

    def _post(self, channel: str, message: str, thread_ts: str | None) -> str:
        response = self.client.chat_postMessage(channel=channel, text=message, thread_ts=thread_ts,
                                                unfurl_links=False, unfurl_media=False)
        return str(response["ts"])

    def _update(self, channel: str, ts: str, message: str) -> None:
        try:
            self.client.chat_update(channel=channel, ts=ts, text=message)
        except SlackApiError as exc:  # a lost progress update must not stop the crawl
            log.warning("Slack refused a progress update: %s", exc.response.get("error"))


def _answered(event: dict[str, Any]) -> bool:
    """Whether the bot answers this event: a mention, or a user's direct message (channel messages reach the
    bot as mentions; edits, joins and bot posts are no questions)."""
    if not event.get("channel") or event.get("subtype") or event.get("bot_id"):
        return False
    return event.get("type") == "app_mention" or (event.get("type") == "message" and event.get("channel_type") == "im")


def _start_problem(exc: Exception, settings: RagSettings) -> str:
    """Why the bot could not start, with the fix."""
    detail = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    if "invalid_auth" in detail or "not_authed" in detail or "token_revoked" in detail or "account_inactive" in detail:
        return (f"Slack refused SLACK_BOT_TOKEN ({detail}); copy the Bot User OAuth Token (xoxb-...) from the app's "
                "OAuth & Permissions page and install the app to the workspace.")
    return (f"Cannot reach the Slack API at {settings.slack_api_url} ({detail}); check the network or "
            "RAG_SLACK_API_URL, then start again.")
