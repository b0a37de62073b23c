"""The Slack front-end (`rag slack`): questions, `rag crawl|add|status|delete|search` and `/rag`, over the Workbench."""

from rag_core.api.slack.app import SlackBot, check_config
from rag_core.api.slack.server import EVENTS_PATH, connect_socket_mode, http_app

__all__ = ["SlackBot", "check_config", "http_app", "connect_socket_mode", "EVENTS_PATH"]
