"""The MCP server: every tool through an in-process client, once over real stdio, and the slash commands.

The server is built on the session Workbench (real PostgreSQL + pgvector, the packaged embedder), so
the hits, scores and sources compared here come from the same retrieval core every surface uses.
"""

from __future__ import annotations

import json
import os
import re
import time
import uuid
from pathlib import Path
from typing import Any, Awaitable, Callable

import anyio
import pytest
import yaml
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp_types import CallToolResult

from rag_core.api.mcp_server import DEFAULT_SESSION, build_server

ROOT = Path(__file__).resolve().parents[2]
COMMANDS = ROOT / ".claude" / "commands" / "rag"
TOOLS = {"rag_status", "rag_search", "search_documents", "rag_chat_turn", "rag_chat_prepare", "rag_chat_history",
         "rag_chat_append", "rag_chat_reset", "rag_index"}

DOCS = [
    {"source": "mcp/hybrid.md", "title": "Hybrid search", "file_type": "md",
     "text": "Hybrid search combines BM25 full-text ranking with vector similarity. It is implemented in "
             "rag_core/search/hybrid.py as one SQL statement."},
    {"source": "mcp/retention.txt", "title": "Retention", "file_type": "txt",
     "text": "Chat retention deletes messages older than thirty days; the purge runs every night."},
    {"source": "mcp/fire.md", "title": "Пожарная безопасность", "file_type": "md",
     "text": "Требования к пожарной безопасности зданий: ширина эвакуационного выхода не менее 1,2 метра, "
             "здания оснащаются автоматической пожарной сигнализацией."},
    {"source": "mcp/budget.txt", "title": "Budget", "file_type": "txt",
     "text": "The project budget covers contractors, materials and permits for the new school."},
]

# The search spec's input schema of search_documents: types, limits, defaults, enum and required (descriptions aside).
SEED_001_SCHEMA = {
    "type": "object",
    "properties": {
        "query": {"type": "string", "minLength": 1, "maxLength": 500},
        "limit": {"type": "integer", "minimum": 1, "maximum": 50, "default": 10},
        "document_types": {"type": "array", "items": {"type": "string"}, "default": []},
        "date_range": {"type": "object", "properties": {"from": {"type": "string", "format": "date"},
                                                        "to": {"type": "string", "format": "date"}}},
        "source_filter": {"type": "string"},
        "include_context": {"type": "boolean", "default": True},
        "max_chunks": {"type": "integer", "minimum": 1, "maximum": 10, "default": 3},
        "search_mode": {"type": "string", "enum": ["semantic", "fulltext", "hybrid"], "default": "hybrid"},
    },
    "required": ["query"],
}


# ----- fixtures and helpers -----
@pytest.fixture(scope="module")
def server(wb):
    """One MCP server on the session Workbench, as `rag mcp` builds it."""
    return build_server(wb)


@pytest.fixture(scope="module")
def mcp_site(wb) -> str:
    """A site holding DOCS; its documents and chat sessions are deleted afterwards."""
    site_id = f"t-mcp-{uuid.uuid4().hex[:6]}"
    assert wb.ingest_texts(DOCS, site_id=site_id).to_dict()["failed"] == 0
    with wb.db.connection() as conn:  # texts carry no date of their own; date filters need one
        conn.execute("UPDATE documents SET doc_date = '2024-03-15T10:00:00Z' WHERE site_id = %s AND source = %s",
                     (site_id, "mcp/budget.txt"))
    yield site_id
    with wb.db.connection() as conn:
        conn.execute("DELETE FROM documents WHERE site_id = %s", (site_id,))
        conn.execute("DELETE FROM chat_sessions WHERE site_id = %s", (site_id,))


@pytest.fixture
def session_id(wb) -> str:
    sid = f"mcp-{uuid.uuid4().hex[:10]}"
    yield sid
    wb.chat_reset(sid)


def with_client(server: Any, steps: Callable[[Client], Awaitable[Any]]) -> Any:
    """Run `steps` against the server through the in-process MCP client."""
    async def main() -> Any:
        async with Client(server) as client:
            return await steps(client)

    return anyio.run(main)


def call(server: Any, name: str, arguments: dict[str, Any]) -> CallToolResult:
    return with_client(server, lambda c: c.call_tool(name, arguments))


def text_of(result: CallToolResult) -> str:
    return "".join(block.text for block in result.content if block.type == "text")


def error_of(result: CallToolResult) -> dict[str, Any]:
    """The error JSON of a failed call; the text and the structured content must agree."""
    assert result.is_error, text_of(result)
    body = json.loads(text_of(result))
    assert body == result.structured_content
    assert body["success"] is False and "Traceback" not in text_of(result)
    return body["error"]


def direct_sources(wb, question: str, site_id: str) -> list[tuple[str, float]]:
    """(path, similarity) of `Workbench.chat`'s sources for the question in a fresh, then forgotten, session."""
    other = f"mcp-{uuid.uuid4().hex[:10]}"
    try:
        direct = wb.chat(question, session_id=other, site_id=site_id)
    finally:
        wb.chat_reset(other)
    return [(s.source, round(s.similarity, 4)) for s in direct.sources]


def ranking(response: dict[str, Any]) -> list[tuple]:
    """What must match across surfaces: documents in order with their scores and chunk scores."""
    return [(r["id"], r["file_path"], r["relevance_score"], r["score"],
             [(c["chunk_id"], c["relevance_score"]) for c in r["context_chunks"]]) for r in response["results"]]


def fresh_search(wb, query: str, **params: Any) -> dict[str, Any]:
    """Workbench.search computed anew (cache emptied), so equality is not a cache echo."""
    wb.search_engine.invalidate()
    return wb.search(query, **params)


# ----- tool listing -----
def test_every_tool_is_listed_with_a_typed_schema(server) -> None:
    tools = {t.name: t for t in with_client(server, lambda c: c.list_tools()).tools}
    assert set(tools) == TOOLS
    for tool in tools.values():
        assert tool.description and len(tool.description) > 40, tool.name
        assert tool.input_schema["type"] == "object"

    search = tools["rag_search"].input_schema["properties"]
    assert (search["limit"]["minimum"], search["limit"]["maximum"], search["limit"]["default"]) == (1, 50, 5)
    assert search["mode"]["enum"] == ["hybrid", "semantic", "fulltext"]
    assert search["format"]["enum"] == ["markdown", "text", "json"]
    assert tools["rag_search"].input_schema["required"] == ["query"]
    assert tools["rag_chat_turn"].input_schema["required"] == ["message"]
    assert tools["rag_chat_append"].input_schema["properties"]["role"]["enum"] == ["user", "assistant", "system"]
    assert tools["rag_index"].input_schema["required"] == ["path"]
    assert "ctx" not in tools["rag_index"].input_schema["properties"]
    assert tools["rag_search"].annotations.read_only_hint is True
    assert tools["rag_chat_reset"].annotations.destructive_hint is True


def test_structured_results_have_the_workbench_types_as_output_schemas(server, mcp_site) -> None:
    """The output schemas are derived from the facade's result types, and the client checks each result
    against them (a result that did not fit would fail the call here)."""
    from typing_extensions import get_type_hints

    from rag_core.chat.sessions import ChatMessage, SessionsDeleted
    from rag_core.ingest.store import StoreStatusInfo
    from rag_core.search.responses import SearchResponse

    tools = {t.name: t for t in with_client(server, lambda c: c.list_tools()).tools}
    for name, shape, extra in (("rag_status", StoreStatusInfo, set()), ("rag_search", SearchResponse, set()),
                               ("search_documents", SearchResponse, set()), ("rag_chat_append", ChatMessage, set()),
                               ("rag_chat_reset", SessionsDeleted, {"session_id"})):
        assert set(tools[name].output_schema["properties"]) == set(get_type_hints(shape)) | extra, name
    assert set(tools["rag_chat_history"].output_schema["properties"]) == {"session_id", "messages"}
    session = f"typed-{uuid.uuid4().hex[:8]}"
    stored = call(server, "rag_chat_append", {"role": "user", "content": "hello", "session_id": session})
    assert stored.structured_content["session_created"] is True
    history = call(server, "rag_chat_history", {"session_id": session})
    assert [m["content"] for m in history.structured_content["messages"]] == ["hello"]
    assert call(server, "rag_chat_reset", {"session_id": session}).structured_content["messages"] == 1


def test_search_documents_publishes_seed_001_schema(server) -> None:
    tool = next(t for t in with_client(server, lambda c: c.list_tools()).tools if t.name == "search_documents")
    schema = json.loads(json.dumps(tool.input_schema))
    for prop in schema["properties"].values():
        prop.pop("description", None)
    assert schema == SEED_001_SCHEMA


# ----- search -----
def test_rag_search_gives_the_workbench_hits_and_scores(server, wb, mcp_site) -> None:
    args = {"query": "where is hybrid search implemented", "limit": 3, "max_chunks": 2, "site_id": mcp_site,
            "format": "json"}
    result = call(server, "rag_search", args)
    assert not result.is_error, text_of(result)
    response = result.structured_content
    assert json.loads(text_of(result)) == response
    assert response["results"][0]["file_path"] == "mcp/hybrid.md"
    expected = fresh_search(wb, args["query"], limit=3, max_chunks=2, site_id=mcp_site)
    assert ranking(response) == ranking(expected)
    assert response["facets"] == expected["facets"] and response["total_results"] == expected["total_results"]


def test_search_documents_gives_the_workbench_hits_and_scores(server, wb, mcp_site) -> None:
    args = {"query": "пожарная безопасность зданий", "limit": 5, "document_types": ["md"],
            "source_filter": "mcp/", "search_mode": "semantic", "max_chunks": 1}
    result = call(server, "search_documents", args)
    assert not result.is_error, text_of(result)
    response = json.loads(text_of(result))
    assert response == result.structured_content and response["success"] is True
    assert {r["file_type"] for r in response["results"]} == {"md"}
    assert response["results"][0]["file_path"] == "mcp/fire.md"
    expected = fresh_search(wb, args["query"], limit=5, types=["md"], source="mcp/", mode="semantic", max_chunks=1)
    assert ranking(response) == ranking(expected)
    for key in ("success", "query", "total_results", "search_time", "results", "facets", "suggestions"):
        assert key in response


def test_search_documents_date_range_filters(server, mcp_site) -> None:
    def paths(date_range: dict[str, str]) -> list[str]:
        result = call(server, "search_documents", {"query": "budget contractors", "source_filter": "mcp/",
                                                   "date_range": date_range})
        assert not result.is_error, text_of(result)
        return [r["file_path"] for r in result.structured_content["results"]]

    assert paths({"from": "2024-01-01", "to": "2024-12-31"}) == ["mcp/budget.txt"]
    assert paths({"to": "2024-03-15"}) == ["mcp/budget.txt"]
    assert paths({"from": "2024-03-16"}) == []


@pytest.mark.parametrize("args, field, words", [
    ({"query": "fire", "limit": 80}, "limit", "limit is 80; choose 1-50"),
    ({"query": "   "}, "query", "query is empty"),
    ({"query": "x" * 501}, "query", "the limit is 500"),
    ({"query": "fire", "max_chunks": 0}, "max_chunks", "choose 1-10"),
    ({"query": "fire", "search_mode": "fuzzy"}, "search_mode", "hybrid, semantic, fulltext"),
    ({"query": "fire", "document_types": ["exe"]}, "document_types", "Unknown document type 'exe'"),
    ({"query": "fire", "date_range": {"from": "2024-13-01"}}, "date_range.from", "YYYY-MM-DD"),
    ({"query": "fire", "date_range": {"from": "2024-05-01", "to": "2024-01-01"}}, "date_range.from", "swap them"),
    ({"query": "fire", "limit": "many"}, "limit", "valid integer"),
    ({"query": "fire", "date_range": "2024"}, "date_range", "date_range"),
    ({"limit": 3}, "query", "Field required"),
])
def test_search_documents_errors_are_seed_001_error_json(server, args, field, words) -> None:
    error = error_of(call(server, "search_documents", args))
    assert error["code"] == "INVALID_QUERY"
    assert error["details"]["field"] == field
    assert words.lower() in error["message"].lower()


@pytest.mark.parametrize("tool,args,code,field", [
    ("rag_index", {"path": "docs", "site": "mcp"}, "INVALID_INPUT", "site"),
    ("rag_chat_prepare", {"message": "fire", "session": "s-1"}, "INVALID_INPUT", "session"),
    ("search_documents", {"query": "fire", "types": ["md"]}, "INVALID_QUERY", "types"),
])
def test_an_argument_the_tool_does_not_know_is_refused_by_name(server, tool, args, code, field) -> None:
    """Unknown arguments were dropped silently: {"site": ...} indexed into the default site."""
    error = error_of(call(server, tool, args))
    assert error["code"] == code and error["details"]["field"] == field
    assert f"{field}: not an argument of {tool}" in error["message"] and "It accepts:" in error["message"]


@pytest.mark.parametrize("tool,args,code,field,words", [
    ("rag_chat_prepare", {"message": "fire\x00alarm"}, "INVALID_INPUT", "message", "NUL"),
    ("rag_chat_turn", {"message": "\ud800 fire"}, "INVALID_INPUT", "message", "lone surrogate"),
    ("rag_chat_append", {"role": "assistant", "content": "a\x00b"}, "INVALID_INPUT", "message", "NUL"),
    ("rag_chat_append", {"role": "assistant", "content": "ok", "sources": [{"documentPath": "a\x00.md"}]},
     "INVALID_INPUT", "sources", "NUL"),
    ("rag_search", {"query": "fire", "source": "docs/\x00"}, "INVALID_QUERY", "source", "NUL"),
])
def test_text_postgresql_cannot_store_is_refused_by_name(server, mcp_site, session_id, tool, args, code, field,
                                                        words) -> None:
    """A NUL or a lone surrogate crashed the tool ("Error executing tool") or came back as DATABASE_ERROR."""
    extra = {"site_id": mcp_site} if tool != "rag_chat_append" else {}
    if tool != "rag_search":
        extra["session_id"] = session_id
    error = error_of(call(server, tool, {**args, **extra}))
    assert error["code"] == code and error["details"]["field"] == field and words in error["message"]


def test_rag_search_renders_markdown_and_text(server, mcp_site) -> None:
    markdown = call(server, "rag_search", {"query": "chat retention", "site_id": mcp_site})
    assert text_of(markdown).startswith("## Search: chat retention")
    assert "`mcp/retention.txt`" in text_of(markdown)
    plain = call(server, "rag_search", {"query": "chat retention", "site_id": mcp_site, "format": "text"})
    assert "mcp/retention.txt" in text_of(plain) and not text_of(plain).startswith("##")
    assert plain.structured_content["results"][0]["file_path"] == "mcp/retention.txt"
    error = error_of(call(server, "rag_search", {"query": "fire", "format": "yaml"}))
    assert error["code"] == "INVALID_QUERY" and error["details"]["field"] == "format"


# ----- status and index -----
def test_status_counts_and_suggests_indexing(server, mcp_site) -> None:
    status = call(server, "rag_status", {"site_id": mcp_site})
    assert status.structured_content["documents"] == len(DOCS)
    assert text_of(status).startswith(f"{len(DOCS)} documents")
    empty = call(server, "rag_status", {"site_id": f"t-empty-{uuid.uuid4().hex[:6]}"})
    assert empty.structured_content["documents"] == 0 and "/rag:index" in text_of(empty)


def test_index_reports_progress_and_skips_unchanged(server, wb, site, tmp_path: Path) -> None:
    folder = tmp_path / "notes"
    folder.mkdir()
    for i, topic in enumerate(["glaciers melt in spring", "volcanoes erupt lava", "tides follow the moon"]):
        (folder / f"note{i}.md").write_text(f"# Note {i}\n\nThis note says that {topic}.", encoding="utf-8")
    (folder / "image.bin").write_bytes(b"\x00\x01")
    progress: list[tuple[float, float | None, str | None]] = []

    async def steps(client: Client) -> tuple[CallToolResult, CallToolResult]:
        async def on_progress(done: float, total: float | None, message: str | None) -> None:
            progress.append((done, total, message))

        first = await client.call_tool("rag_index", {"path": str(folder), "site_id": site},
                                       progress_callback=on_progress)
        again = await client.call_tool("rag_index", {"path": str(folder), "site_id": site})
        return first, again

    first, again = with_client(server, steps)
    assert not first.is_error, text_of(first)
    summary = first.structured_content
    assert (summary["indexed"], summary["skipped"], summary["failed"], summary["chunks"]) == (3, 1, 0, 3)
    assert progress and progress[-1][:2] == (4, 4) and "files" in progress[-1][2]
    assert again.structured_content["unchanged"] == 3 and again.structured_content["indexed"] == 0
    found = call(server, "rag_search", {"query": "volcanoes lava", "site_id": site, "limit": 1})
    assert found.structured_content["results"][0]["file_path"].endswith("notes/note1.md")


def test_index_of_a_missing_path_is_an_error_that_stores_nothing(server, wb, site, tmp_path: Path) -> None:
    error = error_of(call(server, "rag_index", {"path": str(tmp_path / "missing"), "site_id": site}))
    assert error["code"] == "INVALID_INPUT" and "does not exist" in error["message"]
    assert wb.status(site_id=site)["documents"] == 0
    assert error_of(call(server, "rag_index", {"path": " "}))["code"] == "INVALID_INPUT"


# ----- chat -----
def test_chat_turn_history_append_reset(server, wb, mcp_site, session_id) -> None:
    question = "Where is hybrid search implemented?"
    first = call(server, "rag_chat_turn", {"message": question, "session_id": session_id, "site_id": mcp_site})
    assert not first.is_error, text_of(first)
    turn = first.structured_content
    text = text_of(first)
    assert text.startswith("## Sources\n1. [") and "\n## Answer\n" in text
    assert turn["sources"][0]["file_path"] == "mcp/hybrid.md"
    assert f"[{turn['sources'][0]['similarity_pct']:.1f}%] mcp/hybrid.md" in text
    assert turn["context"]["passages"][0]["source"] == "mcp/hybrid.md"
    assert "hybrid.py" in turn["answer"] and turn["flags"]["stored"] is True

    # The same turn through the Workbench on a fresh session cites the same sources with the same similarity.
    assert [(s["file_path"], s["similarity"]) for s in turn["sources"]] == direct_sources(wb, question, mcp_site)

    second = call(server, "rag_chat_turn", {"message": "And how long is chat history kept?", "k": 3,
                                            "session_id": session_id, "site_id": mcp_site})
    history_given = second.structured_content["context"]["history"]
    assert [m["role"] for m in history_given] == ["user", "assistant"] and history_given[0]["content"] == question

    extra = call(server, "rag_chat_append", {"session_id": session_id, "role": "assistant", "content": "Noted.",
                                             "sources": [{"documentPath": "mcp/retention.txt", "similarity": 0.5}]})
    assert not extra.is_error, text_of(extra)
    history = call(server, "rag_chat_history", {"session_id": session_id, "limit": 10})
    messages = history.structured_content["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "user", "assistant", "assistant"]
    assert messages[1]["sources"][0]["documentPath"] == "mcp/hybrid.md"
    assert "[50.0%] mcp/retention.txt" in text_of(history)
    assert len(call(server, "rag_chat_history", {"session_id": session_id, "limit": 2})
               .structured_content["messages"]) == 2

    reset = call(server, "rag_chat_reset", {"session_id": session_id})
    assert reset.structured_content["messages"] == 5 and "5 messages deleted" in text_of(reset)
    assert wb.chat_history(session_id, 10) == []
    assert "No messages" in text_of(call(server, "rag_chat_history", {"session_id": session_id}))


def test_chat_prepare_then_append_is_a_turn_answered_by_the_client(server, wb, mcp_site, session_id) -> None:
    """/rag:chat: the server retrieves and remembers, Claude writes the answer, the sources persist with it."""
    question = "Where is hybrid search implemented?"
    prepared = call(server, "rag_chat_prepare", {"message": question, "session_id": session_id,
                                                 "site_id": mcp_site})
    assert not prepared.is_error, text_of(prepared)
    data = prepared.structured_content
    text = text_of(prepared)
    assert text.startswith(data["rendered_sources"]) and "\n\nHISTORY:\n(no earlier messages)\n" in text
    assert data["sources"][0]["file_path"] == "mcp/hybrid.md"
    assert "--- Reference 1 ---\nSource: mcp/hybrid.md\n" in text
    assert [m["role"] for m in wb.chat_history(session_id, 10)] == ["user"]  # the question is kept already

    # Retrieval is the chat turn's own: the same sources with the same similarity.
    assert [(s["file_path"], s["similarity"]) for s in data["sources"]] == direct_sources(wb, question, mcp_site)

    answer = "It is one SQL statement in rag_core/search/hybrid.py [1]."
    stored = call(server, "rag_chat_append", {"session_id": session_id, "role": "assistant", "content": answer,
                                              "sources": data["citations"]})
    assert not stored.is_error, text_of(stored)
    history = wb.chat_history(session_id, 10)
    assert [(m["role"], m["content"]) for m in history] == [("user", question), ("assistant", answer)]
    assert history[1]["sources"][0]["documentPath"] == "mcp/hybrid.md"

    follow_up = call(server, "rag_chat_prepare", {"message": "And which file holds it?", "session_id": session_id,
                                                  "site_id": mcp_site}).structured_content
    assert [m["content"] for m in follow_up["context"]["history"]] == [question, answer]
    assert follow_up["flags"]["condensed"] and "hybrid" in follow_up["retrieval_query"].lower()

    empty_site = f"t-empty-{uuid.uuid4().hex[:6]}"
    nothing = call(server, "rag_chat_prepare", {"message": "Anything?", "session_id": f"{session_id}-e",
                                                "site_id": empty_site})
    assert nothing.structured_content["flags"]["no_index"] and "/rag:index" in text_of(nothing)
    assert wb.chat_history(f"{session_id}-e", 10) == []


def test_chat_turn_defaults_to_the_claude_code_session(server, wb, mcp_site) -> None:
    before = len(wb.chat_history(DEFAULT_SESSION, 1000))
    try:
        call(server, "rag_chat_turn", {"message": "What does the budget cover?", "site_id": mcp_site})
        assert len(wb.chat_history(DEFAULT_SESSION, 1000)) == before + 2
    finally:
        if before == 0:
            wb.chat_reset(DEFAULT_SESSION)


def test_chat_turn_on_an_empty_index_suggests_indexing_and_stores_nothing(server, wb, session_id) -> None:
    empty_site = f"t-empty-{uuid.uuid4().hex[:6]}"
    result = call(server, "rag_chat_turn", {"message": "Anything there?", "session_id": session_id,
                                            "site_id": empty_site})
    assert not result.is_error
    assert result.structured_content["flags"]["no_index"] is True
    assert text_of(result).startswith("## Sources") and "/rag:index" in text_of(result)
    assert wb.chat_history(session_id, 10) == []


@pytest.mark.parametrize("tool, args, field_or_words", [
    ("rag_chat_turn", {"message": "  "}, "message is empty"),
    ("rag_chat_turn", {"message": "hi", "k": 0}, "k is 0"),
    ("rag_chat_turn", {"message": "x" * 8001}, "the limit is 8000"),
    ("rag_chat_append", {"role": "bot", "content": "x"}, "role"),
    ("rag_chat_append", {"role": "user", "content": ""}, "message is empty"),
    ("rag_chat_history", {"limit": 0}, "limit is 0"),
    ("rag_chat_history", {"session_id": 5}, "session_id"),
    ("rag_chat_reset", {"session_id": ["a", "b"]}, "session_id"),
    ("rag_status", {"site_id": 5}, "site_id"),
    ("rag_index", {"path": "docs", "include": "*.md"}, "include"),
])
def test_other_tools_reject_bad_input_with_invalid_input(server, wb, tool, args, field_or_words) -> None:
    error = error_of(call(server, tool, args))
    assert error["code"] == "INVALID_INPUT"
    assert field_or_words.lower() in error["message"].lower()


def test_a_crash_reaches_the_client_without_its_details(server, wb, monkeypatch) -> None:
    def broken(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("secret internal detail")

    monkeypatch.setattr(wb, "status", broken)
    result = call(server, "rag_status", {})
    assert result.is_error
    assert "secret" not in text_of(result) and "Traceback" not in text_of(result)
    assert "rag_status" in text_of(result)


# ----- slash commands and .mcp.json -----
def _frontmatter(path: Path) -> tuple[dict[str, Any], str]:
    text = path.read_text(encoding="utf-8")
    match = re.match(r"^---\n(.*?)\n---\n(.*)$", text, re.S)
    assert match, f"{path.name} has no frontmatter"
    return yaml.safe_load(match.group(1)), match.group(2)


def _mcp_config() -> dict[str, Any]:
    return json.loads((ROOT / ".mcp.json").read_text(encoding="utf-8"))["mcpServers"]["rag"]


def _expand(value: str, env: dict[str, str]) -> str:
    """Claude Code's expansion of ${VAR} and ${VAR:-default} in .mcp.json."""
    return re.sub(r"\$\{(\w+)(?::-([^}]*))?\}", lambda m: env.get(m.group(1)) or (m.group(2) or ""), value)


def test_slash_commands_name_only_tools_the_server_has(server) -> None:
    names = {t.name for t in with_client(server, lambda c: c.list_tools()).tools}
    files = {p.name for p in COMMANDS.glob("*.md")}
    assert files == {"chat.md", "chat-history.md", "chat-reset.md", "search.md", "index.md", "status.md"}
    used: set[str] = set()
    for path in sorted(COMMANDS.glob("*.md")):
        meta, body = _frontmatter(path)
        assert meta["description"] and meta["argument-hint"], path.name
        allowed = [t.strip() for t in meta["allowed-tools"].split(",")]
        assert allowed and all(t.startswith("mcp__rag__") for t in allowed), path.name
        mentioned = set(re.findall(r"mcp__rag__(\w+)", body))
        assert mentioned and mentioned <= {t.removeprefix("mcp__rag__") for t in allowed}, path.name
        assert {t.removeprefix("mcp__rag__") for t in allowed} <= names, path.name
        assert "$ARGUMENTS" in body, path.name
        used |= mentioned
    # /rag:chat lets Claude answer (prepare + append); rag_chat_turn serves clients without a model of their own.
    assert used == names - {"rag_chat_turn"}
    _, chat_body = _frontmatter(COMMANDS / "chat.md")
    assert "## Sources" in chat_body and "/rag:index" in chat_body
    search_meta, search_body = _frontmatter(COMMANDS / "search.md")
    for option in ("--limit", "--types", "--date-from", "--date-to", "--source", "--format", "--context", "--chunks"):
        assert option in search_meta["argument-hint"] and option in search_body


def test_mcp_json_starts_the_installed_server() -> None:
    config = _mcp_config()
    assert config["args"] == ["mcp"] and config.get("type", "stdio") == "stdio"
    for env in ({"CLAUDE_PROJECT_DIR": str(ROOT)}, {}):
        command = Path(_expand(config["command"], env))
        resolved = command if command.is_absolute() else ROOT / command
        assert resolved.resolve() == (ROOT / ".venv" / "bin" / "rag").resolve()
        assert os.access(resolved, os.X_OK), f"{resolved} is missing: run `make install`"


def test_stdio_server_lists_searches_and_exits_cleanly(wb, mcp_site, pg_url, tmp_path: Path) -> None:
    """`rag mcp` as .mcp.json starts it, over real stdio, on the test database."""
    command = _expand(_mcp_config()["command"], {"CLAUDE_PROJECT_DIR": str(ROOT)})
    exit_file, err_file = tmp_path / "exit-code", tmp_path / "stderr.txt"
    # The shell records the server's own exit status once it exits by itself after stdin closes. It runs in
    # a session of its own (setsid) so the client's kill of its process group after a 2 s grace period
    # cannot cut that short on a loaded machine: the test checks the exit, not how fast it comes.
    script = f'"{command}" mcp 2>"{err_file}"; echo $? >"{exit_file}"'
    env = {**os.environ, "DATABASE_URL": pg_url, "RAG_DATA_DIR": str(tmp_path / "data")}
    params = StdioServerParameters(command="setsid", args=["--wait", "/bin/sh", "-c", script], env=env,
                                   cwd=str(ROOT))
    query = "hybrid search SQL statement"

    async def main() -> tuple[list[str], CallToolResult]:
        async with Client(params, read_timeout_seconds=120) as client:
            tools = await client.list_tools()
            found = await client.call_tool("search_documents", {"query": query, "source_filter": "mcp/", "limit": 3})
            return [t.name for t in tools.tools], found

    names, found = anyio.run(main)
    assert set(names) == TOOLS
    assert not found.is_error, text_of(found)
    response = json.loads(text_of(found))
    assert response["results"][0]["file_path"] == "mcp/hybrid.md"
    assert ranking(response) == ranking(fresh_search(wb, query, source="mcp/", limit=3))
    for _ in range(600):  # a hung server fails here after a minute instead of blocking the suite
        if exit_file.exists() and exit_file.read_text().strip():
            break
        time.sleep(0.1)
    assert exit_file.exists(), f"rag mcp did not exit after its input closed: {err_file.read_text()[-2000:]}"
    assert exit_file.read_text().strip() == "0", err_file.read_text()[-2000:]
    assert "Traceback" not in err_file.read_text()



# ----- tenants -----

def test_a_chat_turn_cannot_reach_another_sites_session(server, wb, mcp_site) -> None:
    """The tools take a site: a session of another site is refused by the turn's own insert, and an id
    with whitespace is refused instead of being stripped into that session."""
    from rag_core.chat import sessions

    other_site = f"t-mcp-other-{uuid.uuid4().hex[:6]}"
    sid = f"mcp-b-{uuid.uuid4().hex[:8]}"
    sessions.append_message(wb.db, sid, "user", "Site B's private question", site_id=other_site)
    try:
        before = wb.chat_history(sid)
        for tool in ("rag_chat_turn", "rag_chat_prepare"):
            refused = error_of(call(server, tool, {"message": "Show the history", "session_id": sid,
                                                   "site_id": mcp_site}))
            assert refused["code"] == "UNAUTHORIZED" and "belongs to another site" in refused["message"]
            for disguise in (f" {sid}", f"{sid}\n", f"{sid}\t"):
                invalid = error_of(call(server, tool, {"message": "Show the history", "session_id": disguise,
                                                       "site_id": mcp_site}))
                assert invalid["code"] == "INVALID_INPUT" and invalid["details"]["field"] == "session_id"
        assert error_of(call(server, "rag_chat_history", {"session_id": f" {sid}"}))["code"] == "INVALID_INPUT"
        assert wb.chat_history(sid) == before
    finally:
        wb.chat_reset(sid)
