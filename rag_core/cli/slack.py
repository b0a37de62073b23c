"""`rag slack`: the Slack bot, over HTTP (Events API and slash commands) or Socket Mode."""

from __future__ import annotations

import signal
import threading

import typer

from rag_core.cli.common import app, console, run_safely


@app.command()
@run_safely
def slack(
    host: str = typer.Option("127.0.0.1", "--host", help="Address of the HTTP endpoint (put a TLS proxy in front)."),
    port: int = typer.Option(3000, "--port", min=1, max=65535, help="TCP port of the HTTP endpoint."),
) -> None:
    """Start the Slack bot: questions and `rag crawl|add|status|delete|search` by mention, DM or /rag.

    With SLACK_APP_TOKEN set it connects by Socket Mode (no public URL needed); otherwise it serves
    POST /slack/events, verified with SLACK_SIGNING_SECRET. docs/slack.md has the app manifest.
    """
    from rag_core import open_workbench
    from rag_core.api.slack import EVENTS_PATH, SlackBot, check_config, http_app
    from rag_core.cli.serve import configure_logging
    from rag_core.settings import load_settings

    configure_logging()
    settings = load_settings()
    mode = check_config(settings)  # a missing token stops here, before the database and the model load
    with open_workbench(settings) as wb:
        bot = SlackBot(wb)
        if mode == "socket":
            _serve_socket_mode(bot, settings.slack_app_token)
            return
        import uvicorn

        console.print(f"Slack bot on http://{host}:{port}{EVENTS_PATH} (HTTP mode; set this as the Request URL "
                      "of Event Subscriptions and of the /rag command).")
        uvicorn.run(http_app(bot), host=host, port=port, log_level="info")


def _serve_socket_mode(bot, app_token: str) -> None:
    """Hold the Socket Mode connection until SIGINT or SIGTERM."""
    from rag_core.api.slack import connect_socket_mode

    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    handler = connect_socket_mode(bot, app_token)
    console.print("Slack bot connected by Socket Mode; Ctrl+C stops it.")
    try:
        stop.wait()
    finally:
        handler.close()
        bot.close()
        console.print("Slack bot stopped.")
