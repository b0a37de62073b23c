"""`rag chat` (turns, history, reset, sessions) and `rag retention` (purge, status), through the Workbench."""

from __future__ import annotations

from typing import Any, Optional

import typer
from rich.table import Table

from rag_core.render.transcript import format_when, render_transcript
from rag_core.cli import common
from rag_core.cli.common import app, console, group_with_default, out, print_json, run_safely
from rag_core.units import counted

# Consecutive `rag chat` calls without --session continue this conversation.
DEFAULT_SESSION = "cli-default"


# `rag chat "message"` asks; `rag chat history|reset|sessions|ask ...` run the subcommand.
chat_app = typer.Typer(cls=group_with_default("ask"), no_args_is_help=True,
                       help='Chat with your documents: `rag chat "question"`; every answer lists its sources.')
retention_app = typer.Typer(help="Chat history retention: purge old messages, show the policy and the last purges.",
                            no_args_is_help=True)
app.add_typer(chat_app, name="chat")
app.add_typer(retention_app, name="retention")

SESSION_OPTION = typer.Option(DEFAULT_SESSION, "--session", "-s", help="Conversation id (default: the CLI's own).")


@chat_app.command("ask")
@run_safely
def ask(
    message: str = typer.Argument(..., help="Your question."),
    session: str = SESSION_OPTION,
    k: int = typer.Option(5, "--k", min=1, max=50, help="Passages to retrieve."),
    site: Optional[str] = typer.Option(None, "--site", help="Only this site's documents."),
    resource: Optional[str] = typer.Option(None, "--resource", help="Agent instruction to use as system prompt."),
    as_json: bool = typer.Option(False, "--json", help="Print the turn as JSON."),
) -> None:
    """Ask a question (the same as `rag chat "question"`)."""
    with common.workbench() as wb:
        turn = wb.chat(message, session_id=session, k=k, site_id=site, resource_name=resource)
    if as_json:
        from rag_core.api.schemas import wire_turn  # pydantic and the database driver: not for `rag --help`

        print_json(wire_turn(turn.to_dict()))
    else:
        out.print(turn.rendered, markup=False)


@chat_app.command("history")
@run_safely
def history(
    n: int = typer.Option(20, "--n", "-n", min=1, max=1000, help="How many of the last messages."),
    session: str = SESSION_OPTION,
    as_json: bool = typer.Option(False, "--json", help="Print as JSON."),
) -> None:
    """Show the last N messages of a conversation, answers with their sources."""
    with common.workbench() as wb:
        messages = wb.chat_history(session, n)
        language = wb.settings.language
    if as_json:
        print_json(messages)
        return
    if not messages:
        out.print(f"No messages in session '{session}'.")
        return
    out.print(render_transcript(messages, language), markup=False)


@chat_app.command("reset")
@run_safely
def reset(session: str = SESSION_OPTION) -> None:
    """Forget a conversation: delete its messages."""
    with common.workbench() as wb:
        result = wb.chat_reset(session)
    if result["sessions"]:
        out.print(f"Session '{session}' reset: {counted(result['messages'], 'message')} deleted.")
    else:
        out.print(f"Session '{session}' had no messages.")


@chat_app.command("sessions")
@run_safely
def sessions(
    site: Optional[str] = typer.Option(None, "--site", help="Only this site."),
    user: Optional[str] = typer.Option(None, "--user", help="Only this user."),
    limit: int = typer.Option(50, "--limit", min=1, max=1000),
    as_json: bool = typer.Option(False, "--json", help="Print as JSON."),
) -> None:
    """List conversations, most recent first."""
    with common.workbench() as wb:
        rows = wb.list_sessions(site_id=site, user_id=user, limit=limit)
    if as_json:
        print_json(rows)
        return
    if not rows:
        out.print('No conversations yet: ask with `rag chat "question"`.')
        return
    table = Table("session", "title", "site", "messages", "last active")
    for r in rows:
        table.add_row(r["id"], r["title"] or "", r["site_id"], str(r["messages"]), format_when(r["updated_at"]))
    out.print(table)


@retention_app.command("purge")
@run_safely
def purge(
    older_than: Optional[str] = typer.Option(None, "--older-than",
                                             help="Age limit such as 30d, 12h or 90m (default: RAG_RETENTION_DAYS)."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Count what would be deleted; change nothing."),
    as_json: bool = typer.Option(False, "--json", help="Print the summary as JSON."),
) -> None:
    """Delete chat messages older than the policy and the sessions left empty (audited)."""
    from rag_core.units import parse_duration

    delta = parse_duration(older_than) if older_than else None
    with common.workbench() as wb:
        summary = wb.purge_chat_history(delta, dry_run=dry_run, triggered_by="cli")
    if as_json:
        print_json(summary)
        return
    out.print(purge_line(summary, dry_run))


def purge_line(summary: Any, dry_run: bool) -> str:
    """One line for a purge or its dry run: what went (or would), the cutoff, and the oldest message left."""
    verb = "Dry run: would delete" if dry_run else "Deleted"
    if summary["oldest_remaining"]:
        left = f"oldest remaining message: {format_when(summary['oldest_remaining'])}"
    else:
        left = "no chat message would remain" if dry_run else "no chat message remains"
    return (f"{verb} {counted(summary['messages_deleted'], 'message')} and "
            f"{counted(summary['sessions_deleted'], 'session')} older "
            f"than {summary['older_than_days']:g} days (before {format_when(summary['cutoff'])}) in "
            f"{summary['duration_ms']:.0f} ms; {left}.")


@retention_app.command("status")
@run_safely
def retention_status(as_json: bool = typer.Option(False, "--json", help="Print as JSON.")) -> None:
    """Retention policy, message counts, the age of messages and the last purges."""
    with common.workbench() as wb:
        info = wb.retention_status()
    if as_json:
        print_json(info)
        return
    policy = info["policy"]
    out.print(f"Policy: delete chat messages older than {policy['retention_days']} days"
              f"{' (daily at ' + policy['purge_time'] + ')' if policy['purge_time'] else ''}.")
    out.print(f"{info['messages']} messages in {info['sessions']} sessions; {info['due_for_purge']} due for purge; "
              f"oldest {format_when(info['oldest_message'])}.")
    table = Table("age", "messages")
    for bucket in info["age_histogram"]:
        table.add_row(bucket["label"], str(bucket["messages"]))
    out.print(table)
    if info["last_purges"]:
        purges = Table("ran at", "dry run", "older than (d)", "messages", "sessions", "by")
        for a in info["last_purges"]:
            purges.add_row(format_when(a["ran_at"]), "yes" if a["dry_run"] else "no", f"{a['older_than_days']:g}",
                           str(a["messages_deleted"]), str(a["sessions_deleted"]), a["triggered_by"])
        out.print(purges)
    else:
        console.print("No purge has run yet: `rag retention purge` (or --dry-run first).")
