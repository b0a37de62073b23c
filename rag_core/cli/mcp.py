"""`rag mcp`: the MCP server over stdio (Claude Code starts it from .mcp.json)."""

from __future__ import annotations

from rag_core.cli import common
from rag_core.cli.common import app, run_safely


@app.command("mcp")
@run_safely
def mcp_command() -> None:
    """Serve the MCP tools (rag_search, search_documents, rag_chat_turn, ...) over stdio until the client quits."""
    from rag_core.api.mcp_server import run_stdio

    # One Workbench for the server's lifetime: the embedder loads once and every tool shares the pool.
    with common.workbench() as wb:
        run_stdio(wb)
