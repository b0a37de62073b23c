"""`rag chat` and `rag retention` through typer's CliRunner against the test database."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from rag_core.cli import app
from rag_core.cli.chat import DEFAULT_SESSION

runner = CliRunner()


def test_chat_continues_the_default_session(cli_env, shared_embedder, docs_site) -> None:
    first = runner.invoke(app, ["chat", "What is hybrid search?", "--site", docs_site])
    assert first.exit_code == 0, first.output
    assert first.stdout.startswith("## Sources\n1. [") and "docs/search.md" in first.stdout
    assert "\n## Answer\n" in first.stdout

    second = runner.invoke(app, ["chat", "--site", docs_site, "And where is it implemented?", "--k", "3"])
    assert second.exit_code == 0, second.output
    assert "hybrid.py" in second.stdout

    history = runner.invoke(app, ["chat", "history", "--n", "20"])
    assert history.exit_code == 0, history.output
    assert history.stdout.count("] user:") == 2 and history.stdout.count("] assistant:") == 2
    assert "And where is it implemented?" in history.stdout and "## Sources" in history.stdout

    other = runner.invoke(app, ["chat", "ask", "Where is hybrid search implemented?", "--session", "cli-other",
                                "--site", docs_site, "--json"])
    assert other.exit_code == 0, other.output
    assert '"session_id": "cli-other"' in other.stdout

    sessions = runner.invoke(app, ["chat", "sessions"])
    assert sessions.exit_code == 0 and DEFAULT_SESSION in sessions.stdout and "cli-other" in sessions.stdout

    reset = runner.invoke(app, ["chat", "reset"])
    assert reset.exit_code == 0 and "4 messages deleted" in reset.stdout
    assert "No messages" in runner.invoke(app, ["chat", "history"]).stdout
    assert runner.invoke(app, ["chat", "reset", "--session", "cli-other"]).exit_code == 0


def test_a_reset_counts_in_english(cli_env, wb) -> None:
    wb.chat_append("cli-one", "user", "A note kept alone.")
    reset = runner.invoke(app, ["chat", "reset", "--session", "cli-one"])
    assert reset.exit_code == 0 and "reset: 1 message deleted." in reset.stdout, reset.output


def test_chat_errors_end_cleanly(cli_env) -> None:
    result = runner.invoke(app, ["chat", "history", "--session", "nope", "--n", "0"])
    assert result.exit_code != 0
    empty = runner.invoke(app, ["chat", "   "])
    assert empty.exit_code == 1 and "INVALID_INPUT" in empty.output


def test_retention_commands(cli_env, wb) -> None:
    dry = runner.invoke(app, ["retention", "purge", "--dry-run", "--older-than", "30d"])
    assert dry.exit_code == 0, dry.output
    assert dry.stdout.startswith("Dry run: would delete 0 messages and 0 sessions older than 30 days")
    for value in ("12h", "90m"):
        result = runner.invoke(app, ["retention", "purge", "--dry-run", "--older-than", value])
        assert result.exit_code == 0 and "Dry run" in result.stdout
    bad = runner.invoke(app, ["retention", "purge", "--older-than", "30x"])
    assert bad.exit_code == 1 and "not a duration" in bad.output
    real = runner.invoke(app, ["retention", "purge"])
    assert real.exit_code == 0 and real.stdout.startswith("Deleted ")
    status = runner.invoke(app, ["retention", "status"])
    assert status.exit_code == 0, status.output
    assert "older than 30 days" in status.stdout and "14-30 d" in status.stdout
    assert "cli" in status.stdout  # the purges above are in the audit


def test_a_purge_that_leaves_no_message_says_so() -> None:
    """`rag retention purge --dry-run` on a store whose messages would all go ended 'oldest remaining message: -.'"""
    import datetime as dt

    from rag_core.cli.chat import purge_line

    cutoff = dt.datetime(2026, 10, 27, 6, 10, tzinfo=dt.timezone.utc)
    summary = {"messages_deleted": 4, "sessions_deleted": 1, "older_than_days": 30.0, "cutoff": cutoff,
               "duration_ms": 3.0, "oldest_remaining": None}
    assert purge_line(summary, dry_run=True).endswith("in 3 ms; no chat message would remain.")
    assert purge_line(summary, dry_run=False).endswith("in 3 ms; no chat message remains.")
    summary["oldest_remaining"] = cutoff + dt.timedelta(days=2)
    assert purge_line(summary, dry_run=False).endswith("oldest remaining message: 2026-10-29 06:10.")
    assert " -." not in purge_line(summary, dry_run=True)
