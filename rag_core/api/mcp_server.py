"""The MCP server (`rag mcp`): thin tool adapters over one Workbench, for Claude Code and other MCP clients.

Tools: rag_status, rag_search, search_documents (the search spec's schema and response), rag_chat_turn,
rag_chat_history, rag_chat_append, rag_chat_reset (the chat spec) and rag_index. Every tool calls the
Workbench, so a query gives the same hits, scores and sources here as in the CLI, the app and REST.

Errors are mapped in one place (`RagMCPServer.call_tool`): a RagError, or arguments that do not fit
a tool's input schema, come back as an MCP tool error (`isError`) whose text is the search spec's error
JSON (`{"success": false, "error": {"code", "message", "details"}}`); anything else is logged here
and the client sees only "Error executing tool <name>", never a traceback.
"""

from __future__ import annotations

import json
import logging
import time
from typing import Annotated, Any, Callable, Literal

import anyio.from_thread
import anyio.to_thread
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.tools import Tool
from mcp_types import CallToolResult, TextContent, ToolAnnotations
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError

from rag_core.api import schemas
from rag_core.chat.sessions import ChatMessage
from rag_core.errors import InvalidInput, InvalidQuery, RagError
from rag_core.ingest.store import StoreStatusInfo
from rag_core.limits import MAX_MESSAGE_CHARS, MAX_QUERY_CHARS
from rag_core.search.responses import SearchResponse
from rag_core.search.validation import DOCUMENT_TYPES, MAX_CHUNKS_RANGE, MODES
from rag_core.security.ids import DEFAULT_SITE, ID_PATTERN, valid_id
from rag_core.units import counted
from rag_core.workbench import Workbench

log = logging.getLogger(__name__)

SERVER_NAME = "rag"
# Consecutive /rag:chat calls without a session continue this conversation.
DEFAULT_SESSION = "claude-code"
# Tools whose bad arguments are search errors (the search spec's INVALID_QUERY) rather than INVALID_INPUT.
SEARCH_TOOLS = frozenset({"rag_search", "search_documents"})
# At most this many progress notifications per second while indexing: a folder of small files
# would otherwise send one per file and flood a slow client.
PROGRESS_PER_SEC = 5.0

INSTRUCTIONS = """\
Retrieval over the user's indexed documents (PostgreSQL + pgvector), with sources.
- rag_status first when unsure whether anything is indexed; rag_index ingests a file or folder.
- rag_search / search_documents find documents (hybrid full text + vectors by default).
- rag_chat_turn answers one message of a persistent conversation (history + retrieval + answer)
  and returns the answer with its sources; print its text as is: the `## Sources` block comes first.
- rag_chat_history, rag_chat_append and rag_chat_reset read, extend and forget a conversation.
"""

# The search spec's input schema of `search_documents`, published as is (types, limits, defaults, enum);
# the descriptions are in English like the rest of the tools.
SEARCH_DOCUMENTS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "query": {"type": "string", "description": "Search query in natural language",
                  "minLength": 1, "maxLength": MAX_QUERY_CHARS},
        "limit": {"type": "integer", "description": "Maximum number of results",
                  "minimum": 1, "maximum": 50, "default": 10},
        "document_types": {"type": "array", "items": {"type": "string"},
                           "description": "Filter by document types (pdf, docx, xlsx, txt; also md, csv, html)",
                           "default": []},
        "date_range": {"type": "object",
                       "properties": {"from": {"type": "string", "format": "date"},
                                      "to": {"type": "string", "format": "date"}}},
        "source_filter": {"type": "string", "description": "Filter by the documents' source path (or URL)"},
        "include_context": {"type": "boolean", "description": "Include context fragments of the documents",
                            "default": True},
        "max_chunks": {"type": "integer", "description": "Maximum number of fragments per document",
                       "minimum": MAX_CHUNKS_RANGE[0], "maximum": MAX_CHUNKS_RANGE[1], "default": 3},
        "search_mode": {"type": "string", "enum": ["semantic", "fulltext", "hybrid"], "description": "Search mode",
                        "default": "hybrid"},
    },
    "required": ["query"],
}
# Workbench.search's parameter names -> search_documents' (the search spec) names, for error details.
SEARCH_DOCUMENTS_FIELDS = {"mode": "search_mode", "types": "document_types", "source": "source_filter",
                           "date_from": "date_range.from", "date_to": "date_range.to"}


# ----- results -----
def _jsonable(data: Any) -> Any:
    """Dates and other values as JSON-safe types (structured content must be plain JSON)."""
    return json.loads(json.dumps(data, default=str, ensure_ascii=False))


def _dump(data: Any) -> str:
    return json.dumps(data, ensure_ascii=False, indent=2, default=str)


def _result(text: str, structured: Any) -> CallToolResult:
    """A tool result: `text` for the model to read, the same data as structured content."""
    return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=_jsonable(structured))


def error_result(exc: RagError) -> CallToolResult:
    """A RagError as an MCP tool error whose text is the search spec's error JSON."""
    body = _jsonable(exc.to_dict())
    return CallToolResult(content=[TextContent(type="text", text=json.dumps(body, ensure_ascii=False))],
                          structured_content=body, is_error=True)


def _from_validation(tool: str, exc: ValidationError) -> RagError:
    """The first schema violation as the RagError the other surfaces raise for bad input."""
    err = exc.errors()[0]
    field = ".".join(str(p) for p in err["loc"]) or "arguments"
    got = err.get("input")
    got_text = "" if err["type"] == "missing" else f"; got {got!r}"[:120]
    message = f"{field}: {err['msg']}{got_text}. The tool's input schema lists what it accepts."
    cls = InvalidQuery if tool in SEARCH_TOOLS else InvalidInput
    return cls(message, details={"field": field, "tool": tool})


class RagMCPServer(MCPServer):
    """MCPServer with the one place where tool failures become MCP tool errors."""

    _arguments: dict[str, list[str]]

    async def _unknown_arguments(self, name: str, arguments: dict[str, Any] | None) -> list[str]:
        """The arguments a call gives that the tool's published input schema does not list."""
        if not arguments:
            return []
        if not hasattr(self, "_arguments"):
            self._arguments = {t.name: sorted((t.input_schema or {}).get("properties", {}))
                               for t in await self.list_tools()}
        if name not in self._arguments:
            return []  # an unknown tool: the SDK says so
        return sorted(set(arguments) - set(self._arguments[name]))

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
        unknown = await self._unknown_arguments(name, arguments)
        if unknown:
            # Left to the SDK, an unknown argument was dropped without a word: `rag_index {"site": "x"}`
            # indexed into the default site, `rag_chat_prepare {"session": ...}` wrote another session.
            cls = InvalidQuery if name in SEARCH_TOOLS else InvalidInput
            known = ", ".join(self._arguments[name])
            return error_result(cls(f"{unknown[0]}: not an argument of {name}. It accepts: {known}.",
                                    details={"field": unknown[0], "tool": name}))
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            cause = exc.__cause__
            if isinstance(cause, RagError):
                log.info("Tool %s failed: %s %s", name, cause.code, cause.message)
                return error_result(cause)
            if isinstance(cause, ValidationError):
                return error_result(_from_validation(name, cause))
            raise  # unknown tool, or a crash: the SDK logs it and sends only "Error executing tool <name>"


# ----- argument types -----
def _hint(description: str, **schema: Any) -> Any:
    """A Field that publishes `schema` (limits, enums) but leaves checking to the Workbench.

    The Workbench's own validation then reports a bad value with the same message and code as
    every other surface (`limit is 80; choose 1-50.`), instead of a pydantic error text.
    """
    return Field(description=description, json_schema_extra=schema or None)


Message = Annotated[str, _hint(f"The user's message (up to {MAX_MESSAGE_CHARS} characters).",
                               maxLength=MAX_MESSAGE_CHARS)]
Query = Annotated[str, _hint("What to look for, in natural language.", minLength=1, maxLength=MAX_QUERY_CHARS)]
Mode = Annotated[str, _hint("hybrid (full text + vectors), semantic (vectors) or fulltext.", enum=list(MODES))]
# Ids follow the one pattern of rag_core.security.ids (published in the schema), used exactly as given.
SiteId = Annotated[str | None, Field(description="Only this site (tenant); omitted: every site except 'eval:*' and 'sample'.",
                                     json_schema_extra={"pattern": ID_PATTERN}), AfterValidator(valid_id)]
SessionId = Annotated[str, Field(description="Conversation id: letters, digits and _ . : @ | + = ~ -, no spaces; "
                                             "the same id continues the conversation.",
                                 json_schema_extra={"pattern": ID_PATTERN}), AfterValidator(valid_id)]


class DateRange(BaseModel):
    """The search spec's date_range: first and last day (YYYY-MM-DD) of the documents' date, inclusive."""

    model_config = ConfigDict(populate_by_name=True, extra="forbid")
    from_: str | None = Field(None, alias="from")
    to: str | None = None


def _sources_brief(sources: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The chat spec's source entries (file_path and similarity) with page, title and offsets."""
    return [{"n": s["n"], "file_path": s["path"], "title": s["title"], "similarity": round(s["similarity"], 4),
             "similarity_pct": s["similarity_pct"], "page": s["page"], "document_id": s["document_id"],
             "chunk_id": s["chunk_id"], "start_char": s["start_char"], "end_char": s["end_char"]}
            for s in sources]


# ----- the server -----
def build_server(wb: Workbench) -> RagMCPServer:
    """The MCP server with every tool bound to `wb` (built once by the caller and shared by all calls)."""
    read_only = ToolAnnotations(read_only_hint=True, open_world_hint=False)
    tools: list[Tool] = []

    def tool(fn: Callable[..., Any], title: str, annotations: ToolAnnotations | None = None,
             parameters: dict[str, Any] | None = None, output: type[BaseModel] | None = None) -> None:
        registered = Tool.from_function(fn, title=title, annotations=annotations)
        if parameters is not None:
            # add_tool() derives the schema from the signature; the search spec's is published verbatim instead.
            registered.parameters = parameters
        if output is not None:
            # The structured content's schema, derived from the Workbench's result type (as REST's is);
            # clients check results against it.
            registered.fn_metadata.output_schema = output.model_json_schema()
        tools.append(registered)

    def rag_status(site_id: SiteId = None) -> CallToolResult:
        """Index status: documents, chunks, sources, types, sites, embedder and database size.

        When nothing is indexed, say so and suggest /rag:index (the rag_index tool)."""
        info = wb.status(site_id=site_id)
        where = f" in site '{site_id}'" if site_id else ""
        lines = [f"{info['documents']} documents, {info['chunks']} chunks{where}; embedder "
                 f"{info['embedder'] or info['configured_embedder']} ({info['dimension'] or '?'} dimensions); "
                 f"database {info['database']}; last indexed {info['last_indexed_at'] or 'never'}."]
        if info["by_type"]:
            lines.append("Types: " + ", ".join(f"{k} {v}" for k, v in info["by_type"].items()))
        if info["embedder_mismatch"]:
            lines.append(info["embedder_mismatch"])
        if info["embedder_notice"]:
            lines.append(info["embedder_notice"])
        if info["documents"] == 0:
            lines.append("Nothing is indexed yet: run /rag:index PATH (tool rag_index) first.")
        return _result("\n".join(lines), info)

    def rag_search(
        query: Query,
        limit: Annotated[int, _hint("Documents to return (1-50).", minimum=1, maximum=50)] = 5,
        mode: Mode = "hybrid",
        types: Annotated[list[str] | None, _hint("Document types: " + ", ".join(DOCUMENT_TYPES) + ".")] = None,
        date_from: Annotated[str | None, _hint("Documents dated on or after this day.", format="date")] = None,
        date_to: Annotated[str | None, _hint("Documents dated on or before this day.", format="date")] = None,
        source: Annotated[str | None, Field(description="Source path or URL prefix, or any part of the path.")] = None,
        site_id: SiteId = None,
        include_context: Annotated[bool, Field(description="Include each document's best chunks.")] = True,
        max_chunks: Annotated[int, _hint("Chunks per document (1-10).", minimum=1, maximum=10)] = 3,
        page: Annotated[int, _hint("Page of results, 1 first.", minimum=1)] = 1,
        format: Annotated[Literal["markdown", "text", "json"], Field(  # noqa: A002 - the /search option's name
            description="How the text content is rendered; the structured content is always the JSON response.")
        ] = "markdown",
    ) -> CallToolResult:
        """Search the indexed documents (hybrid full text + vectors by default) with filters.

        Returns the search spec's response (results with relevance_score, highlights, context chunks, facets,
        suggestions) as structured content, and the same rendered as markdown, text or JSON."""
        from rag_core.render.search import render_markdown, render_text

        response = wb.search(query, mode=mode, limit=limit, page=page, types=types, date_from=date_from,
                             date_to=date_to, source=source, site_id=site_id, include_context=include_context,
                             max_chunks=max_chunks)
        text = {"markdown": render_markdown, "text": render_text}.get(format, _dump)(response)
        return _result(text, response)

    def search_documents(
        query: str,
        limit: int = 10,
        document_types: list[str] | None = None,
        date_range: DateRange | None = None,
        source_filter: str | None = None,
        include_context: bool = True,
        max_chunks: int = 3,
        search_mode: str = "hybrid",
    ) -> CallToolResult:
        """Semantic, full-text or hybrid search over the indexed documents (the search spec's search_documents).

        Returns the search spec's JSON response: success, query, total_results, search_time, results (id, title,
        file_path, file_type, file_size, dates, relevance_score, highlights, context_chunks), facets and
        suggestions; a problem returns its error JSON (INVALID_QUERY, INDEX_UNAVAILABLE, DATABASE_ERROR)."""
        try:
            response = wb.search(query, mode=search_mode, limit=limit, types=document_types or None,
                                 date_from=date_range.from_ if date_range else None,
                                 date_to=date_range.to if date_range else None, source=source_filter,
                                 include_context=include_context, max_chunks=max_chunks)
        except InvalidQuery as exc:
            # details.field names the parameter as this tool's caller wrote it.
            if isinstance(exc.details, dict) and exc.details.get("field") in SEARCH_DOCUMENTS_FIELDS:
                exc.details = {**exc.details, "field": SEARCH_DOCUMENTS_FIELDS[exc.details["field"]]}
            raise
        return _result(json.dumps(response, ensure_ascii=False, default=str), response)

    def rag_chat_turn(
        message: Message,
        session_id: SessionId = DEFAULT_SESSION,
        k: Annotated[int, _hint("Passages to retrieve (1-50).", minimum=1, maximum=50)] = 5,
        site_id: SiteId = None,
    ) -> CallToolResult:
        """One turn of a persistent chat (the chat spec): reads the session's history, retrieves passages for the
        message, answers from HISTORY + CONTEXT, and stores the user and assistant messages with the sources.

        The text is `## Sources` (`1. [92.1%] path`, printed even when empty) then `## Answer`; the structured
        content adds the answer, the sources (file_path, similarity), and the context the answer was built from
        (history, passages, retrieval query). An empty index stores nothing and suggests /rag:index."""
        turn = wb.chat(message, session_id=session_id, k=k, site_id=site_id)
        data = schemas.wire_turn(turn.to_dict())
        text = turn.rendered
        hint = None
        if turn.flags.get("no_index"):
            hint = "Nothing is indexed yet: run /rag:index PATH (tool rag_index), then ask again."
            text = f"{text.rstrip()}\n\n{hint}\n"
        structured = {"session_id": turn.session_id, "answer": turn.answer,
                      "sources": _sources_brief(data["sources"]), "context": data["context"],
                      "retrieval_query": turn.retrieval_query, "flags": data["flags"], "llm": turn.llm,
                      "message_ids": turn.message_ids, "rendered": turn.rendered, "hint": hint}
        return _result(text, structured)

    def rag_chat_prepare(
        message: Message,
        session_id: SessionId = DEFAULT_SESSION,
        k: Annotated[int, _hint("Passages to retrieve (1-50).", minimum=1, maximum=50)] = 5,
        site_id: SiteId = None,
    ) -> CallToolResult:
        """The first half of a turn for a client that answers with its own model: stores the user's message,
        reads the session's history, retrieves passages exactly as rag_chat_turn does and returns them.

        The text is the `## Sources` block (print it as is), then the history and the numbered CONTEXT to
        answer from; the structured content adds `citations`: pass them unchanged as `sources` to
        rag_chat_append with the answer. An empty index stores nothing and suggests /rag:index."""
        prepared = wb.chat_prepare(message, session_id=session_id, k=k, site_id=site_id)
        data = schemas.wire_turn(prepared.to_dict())
        if prepared.request is None:
            hint = "Nothing is indexed yet: run /rag:index PATH (tool rag_index), then ask again."
            return _result(f"{data['rendered_sources']}\n\n{hint}\n", {**data, "hint": hint})
        text = f"{data['rendered_sources']}\n\n{prepared.request.history_and_context()}"
        structured = {**data, "sources": _sources_brief(data["sources"])}
        return _result(text, structured)

    def rag_chat_history(
        session_id: SessionId = DEFAULT_SESSION,
        limit: Annotated[int, _hint("How many of the last messages (1-1000).", minimum=1, maximum=1000)] = 8,
    ) -> CallToolResult:
        """The last `limit` messages of a conversation, oldest first; assistant messages carry their sources
        (documentPath, similarity, page)."""
        from rag_core.render.transcript import render_transcript

        messages = wb.chat_history(session_id, limit)
        if not messages:
            return _result(f"No messages in session '{session_id}'.", {"session_id": session_id, "messages": []})
        return _result(render_transcript(messages, wb.settings.language), {"session_id": session_id, "messages": messages})

    def rag_chat_append(
        role: Annotated[Literal["user", "assistant", "system"], Field(description="Who wrote the message.")],
        content: Annotated[str, Field(description="The message text.")],
        session_id: SessionId = DEFAULT_SESSION,
        sources: Annotated[list[dict[str, Any]] | None, Field(
            description="For assistant messages: the cited sources, e.g. [{\"documentPath\": \"docs/a.md\", "
                        "\"similarity\": 0.92, \"text\": \"...\"}] (rag_chat_turn's citations).")] = None,
    ) -> CallToolResult:
        """Store one message in a conversation (created on first use), e.g. an answer written by the client."""
        stored = wb.chat_append(session_id, role, content, sources=sources)
        return _result(f"Stored {role} message {stored.get('id')} in session '{session_id}'.", stored)

    def rag_chat_reset(session_id: SessionId = DEFAULT_SESSION) -> CallToolResult:
        """Forget a conversation: delete the session and all its messages."""
        result = wb.chat_reset(session_id)
        text = (f"Session '{session_id}' reset: {counted(result['messages'], 'message')} deleted." if result.get("sessions")
                else f"Session '{session_id}' had no messages.")
        return _result(text, {"session_id": session_id, **result})

    async def rag_index(
        path: Annotated[str, Field(description="File or folder to ingest (folders recursively); relative paths "
                                               "are resolved against the server's working directory.")],
        ctx: Context,
        site_id: Annotated[str, Field(description="Site (tenant) the documents belong to.",
                                      json_schema_extra={"pattern": ID_PATTERN}), AfterValidator(valid_id)
                           ] = DEFAULT_SITE,
        include: Annotated[list[str] | None, Field(description="Globs of files to take, e.g. ['*.md'].")] = None,
        exclude: Annotated[list[str] | None, Field(description="Globs of files to leave out.")] = None,
    ) -> CallToolResult:
        """Ingest a file or folder (md, txt, pdf, docx, xlsx, csv, html); unchanged files are skipped without
        embedding. Sends progress notifications (files done of total) while it runs."""
        if not path or not path.strip():
            raise InvalidInput("path is empty; give a file or folder to index, e.g. docs/.")
        last = [0.0]

        def on_progress(p: Any) -> None:
            # Runs on the worker thread; the notification is sent from the event loop.
            now = time.monotonic()
            if p.done < p.total and now - last[0] < 1 / PROGRESS_PER_SEC:
                return
            last[0] = now
            anyio.from_thread.run(ctx.report_progress, p.done, p.total or None,
                                  f"{p.done}/{p.total} files, {p.chunks_done} chunks {p.current}".strip())

        report = await anyio.to_thread.run_sync(
            lambda: wb.ingest_paths([path.strip()], include=include or (), exclude=exclude or (), site_id=site_id,
                                    progress=on_progress))
        summary = report.to_dict()
        summary.pop("documents", None)
        text = (f"Indexed {summary['indexed']} new and {summary['updated']} changed documents ({summary['chunks']} "
                f"chunks); {summary['unchanged']} unchanged, {summary['skipped']} skipped, {summary['failed']} "
                f"failed in {summary['duration_s']:.1f} s.")
        text += "".join(f"\nfailed {e['source']}: {e['reason']}" for e in summary["errors"][:20])
        if summary["failed"] and not (summary["indexed"] or summary["updated"] or summary["unchanged"]):
            raise InvalidInput(f"Nothing from '{path}' could be indexed: "
                               + "; ".join(f"{e['source']}: {e['reason']}" for e in summary["errors"][:5]),
                               details=summary)
        return _result(text, {"path": path, "site_id": site_id, **summary})

    search_output = schemas.wire_model(SearchResponse)
    tool(rag_status, "Index status", read_only, output=schemas.wire_model(StoreStatusInfo))
    tool(rag_search, "Search documents", read_only, output=search_output)
    tool(search_documents, "Search documents: semantic, full-text or hybrid, with filters and facets", read_only,
         parameters=SEARCH_DOCUMENTS_SCHEMA, output=search_output)
    tool(rag_chat_turn, "Chat turn with sources", ToolAnnotations(destructive_hint=False, open_world_hint=False))
    tool(rag_chat_prepare, "Prepare a chat turn for the client's own answer",
         ToolAnnotations(destructive_hint=False, open_world_hint=False))
    tool(rag_chat_history, "Chat history", read_only, output=schemas.MessagesOut)
    tool(rag_chat_append, "Append a chat message", ToolAnnotations(destructive_hint=False, open_world_hint=False),
         output=schemas.wire_model(ChatMessage))
    tool(rag_chat_reset, "Reset a chat session",
         ToolAnnotations(destructive_hint=True, idempotent_hint=True, open_world_hint=False),
         output=schemas.SessionDeleted)
    tool(rag_index, "Index a file or folder",
         ToolAnnotations(destructive_hint=False, idempotent_hint=True, open_world_hint=False))
    # WARNING: stderr is the client's log; INFO would add a line per embedded-server command.
    return RagMCPServer(name=SERVER_NAME, title="RAG workbench", instructions=INSTRUCTIONS, version=_version(),
                        tools=tools, log_level="WARNING")


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("rag-workbench")
    except PackageNotFoundError:
        return "0"


def run_stdio(wb: Workbench) -> None:
    """Serve `wb` over stdio until the client closes the pipe."""
    build_server(wb).run("stdio")
