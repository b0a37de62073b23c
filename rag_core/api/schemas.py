"""Request and response bodies of the REST service (the workflow-service and search specs), with OpenAPI examples.

Search parameters carry their limits in the schema but the Workbench enforces them, so a limit
of 51 gets the same INVALID_QUERY message over REST, MCP and the CLI.

Response bodies that are a Workbench result are derived from the facade's own types (`wire_model`),
so a key added to a result type is published here without restating it.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import functools
import operator
import types
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from fastapi import UploadFile
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, create_model, field_validator
from typing_extensions import NotRequired, get_type_hints, is_typeddict

from rag_core.search.types import Citation
from rag_core.chat.retention import PurgeSummary as PurgeResult
from rag_core.chat.sessions import ChatMessage, SessionsDeleted, SessionSummary
from rag_core.chat.turn import ChatTurn
from rag_core.ingest.pipeline import SourceOutcome
from rag_core.ingest.store import DeletedCounts, StoreStatusInfo
from rag_core.ingest.web import WebIngestReport
from rag_core.jobs.records import JobInfo
from rag_core.limits import MAX_ANSWER_CHARS, MAX_DOCUMENT_CHARS, MAX_ID_CHARS, MAX_MESSAGE_CHARS, MAX_QUERY_CHARS
from rag_core.search.responses import SearchMetrics, SearchResponse
from rag_core.search.validation import MAX_PAGE
from rag_core.security.ids import ID_PATTERN, valid_id
from rag_core.security.text import text_problem


# Every session, user and site id of a body, a query or a path: validated by one pattern, published in OpenAPI.
ID_SCHEMA = {"pattern": ID_PATTERN}
Id = Annotated[str, AfterValidator(valid_id), Field(min_length=1, max_length=MAX_ID_CHARS, json_schema_extra=ID_SCHEMA)]


class Body(BaseModel):
    """Unknown fields are refused: a misspelt option must not be silently ignored."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    @field_validator("*", mode="after")
    @classmethod
    def _storable_text(cls, value: Any) -> Any:
        for item in value if isinstance(value, list) else [value]:
            problem = text_problem(item) if isinstance(item, str) else None
            if problem:
                raise ValueError(problem)
        return value


# ----- response bodies derived from the facade's types -----
def _wire_type(tp: Any) -> Any:
    """`tp` as it travels in JSON: a date or datetime as ISO text (jsonable_encoder writes them so), a
    TypedDict as its model, containers and unions element by element."""
    if tp in (dt.datetime, dt.date):
        return str
    if is_typeddict(tp) or dataclasses.is_dataclass(tp):
        return wire_model(tp)
    origin, args = get_origin(tp), get_args(tp)
    if origin in (Union, types.UnionType):
        return functools.reduce(operator.or_, (_wire_type(a) for a in args))
    if origin in (list, dict):
        return origin[tuple(_wire_type(a) for a in args)]
    return tp


@functools.cache
def wire_model(shape: Any, name: str | None = None, only: tuple[str, ...] | None = None,
               optional: tuple[str, ...] = (), extra: Literal["allow", "ignore"] = "allow",
               rename: tuple[tuple[str, str], ...] = ()) -> type[BaseModel]:
    """The response model of a facade TypedDict `shape`: the same keys, required where the TypedDict requires
    them; a key it may leave out defaults to None (routes that return such a shape exclude unset keys).
    A dataclass `shape` stands for its `to_dict()`: every field, required.

    `only` keeps those keys; `optional` names required keys a route may withhold; `extra="allow"` passes
    keys the type does not name through unchanged; `rename` gives keys their wire names ((key, wire), ...).
    """
    if dataclasses.is_dataclass(shape):
        names = {f.name for f in dataclasses.fields(shape)}
        hints = {k: v for k, v in get_type_hints(shape).items() if k in names}
    else:
        hints = get_type_hints(shape, include_extras=True)
    fields: dict[str, Any] = {}
    # NotRequired is read from the hints: `__required_keys__` misses it under postponed annotations.
    for key, tp in hints.items():
        if only is not None and key not in only:
            continue
        wire = dict(rename).get(key, key)
        if get_origin(tp) is NotRequired or key in optional:
            tp = get_args(tp)[0] if get_origin(tp) is NotRequired else tp
            fields[wire] = (_wire_type(tp) | None, None)
        else:
            fields[wire] = (_wire_type(tp), ...)
    return create_model(name or shape.__name__, __config__=ConfigDict(extra=extra), __doc__=shape.__doc__,
                        **fields)


# ----- errors (the search spec) -----
class ErrorDetail(BaseModel):
    code: str = Field(description="Stable error code: INVALID_QUERY, INVALID_INPUT, UNAUTHORIZED, RATE_LIMIT, "
                                  "NOT_FOUND, METHOD_NOT_ALLOWED, INDEX_UNAVAILABLE, DATABASE_ERROR, INTERNAL...")
    message: str = Field(description="What went wrong and how to fix it; safe to show a user.")
    details: Any = Field(default=None, description="Field names, allowed values, retry_after...")


class ErrorResponse(BaseModel):
    success: Literal[False] = False
    error: ErrorDetail

    model_config = ConfigDict(json_schema_extra={"examples": [{
        "success": False,
        "error": {"code": "INVALID_QUERY", "message": "limit is 51; choose 1-50.",
                  "details": {"field": "limit", "value": 51, "allowed": "1-50"}}}]})


# ----- the workflow-service spec -----
class DocumentIn(Body):
    site_id: Id = Field(description="Site (tenant) the document belongs to.")
    source: str = Field(min_length=1, max_length=2000, description="File name or URL; the same source again "
                                                                    "replaces the stored document.")
    content: str = Field(min_length=1, max_length=MAX_DOCUMENT_CHARS, description="The document's full text.")
    title: str | None = Field(default=None, max_length=500, description="Title (default: from the text).")

    model_config = ConfigDict(json_schema_extra={"examples": [{
        "site_id": "site_a", "source": "handbook/fire-safety.md",
        "content": "Buildings must have automatic fire alarm systems. Evacuation routes are at least 1.2 m wide."}]})


class DocumentOut(BaseModel):
    id: int | None = Field(description="The stored document's id.")
    site_id: str
    source: str
    status: str = Field(description="indexed (new), updated (replaced) or unchanged (same text as stored).")
    chunks: int = Field(description="Chunks written by this call (0 when unchanged).")


class UploadIn(BaseModel):
    """A multipart/form-data upload: the files, and the site they go to."""

    files: list[UploadFile] = Field(description="One or more files (pdf, docx, xlsx, html, md, txt, csv...); each is "
                                                "stored under its name, and the same name again replaces it.")
    site_id: Id | None = Field(default=None, description="The site the files go to (default: the key's only site, "
                                                         "or `default`).")

    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [{
        "files": ["fire-safety.pdf", "evacuation-plan.docx"], "site_id": "site_a"}]})


class UploadReportOut(BaseModel):
    """What became of each file of an upload run in place: indexed (new), updated (replaced), unchanged (same
    bytes as stored, not embedded again), skipped or failed with its reason; the counts over all of them."""

    site_id: str
    files: list[wire_model(SourceOutcome, "UploadedFile")]  # type: ignore[valid-type]
    indexed: int
    updated: int
    unchanged: int
    skipped: int
    failed: int
    chunks: int = Field(description="Chunks written by this request.")


class DeletedDocuments(wire_model(DeletedCounts, "DeletedCounts", extra="ignore")):  # type: ignore[misc]
    source: str


class ChatMessageIn(Body):
    user_id: Id = Field(description="The user (e.g. the JWT `sub` claim).")
    site_id: Id
    role: str = Field(description="'user' or 'ai'.", json_schema_extra={"enum": ["user", "ai"]})
    message: str = Field(min_length=1, max_length=MAX_ANSWER_CHARS,
                         description=f"The message text: up to {MAX_MESSAGE_CHARS} characters from a user, "
                                     f"{MAX_ANSWER_CHARS} from the AI.")

    model_config = ConfigDict(json_schema_extra={"examples": [{
        "user_id": "u-42", "site_id": "site_a", "role": "user", "message": "Which fire alarm do we need?"}]})


ChatMessageOut = wire_model(ChatMessage, "ChatMessageOut", only=(
    "id", "session_id", "site_id", "user_id", "role", "content", "created_at"), extra="ignore")


class RetrieveContextIn(Body):
    user_id: Id
    site_id: Id
    query: str = Field(min_length=1, max_length=MAX_MESSAGE_CHARS, description="The user's current message.")
    k: int = Field(default=5, ge=1, le=50, description="Knowledge chunks to include.")

    model_config = ConfigDict(json_schema_extra={"examples": [{
        "user_id": "u-42", "site_id": "site_a", "query": "How wide must evacuation routes be?"}]})


class ContextOut(BaseModel):
    context: str = Field(description="Formatted knowledge fragments and the user's recent messages on the site.")


PurgeSummary = wire_model(PurgeResult)


# ----- search (the search spec) -----
class DateRange(Body):
    from_: str | None = Field(default=None, alias="from", description="First day, YYYY-MM-DD.",
                              json_schema_extra={"format": "date"})
    to: str | None = Field(default=None, description="Last day, YYYY-MM-DD.", json_schema_extra={"format": "date"})


class SearchIn(Body):
    query: str = Field(description="Natural-language query.", json_schema_extra={"minLength": 1, "maxLength": MAX_QUERY_CHARS})
    limit: int = Field(default=10, description="Results per page.", json_schema_extra={"minimum": 1, "maximum": 50})
    page: int = Field(default=1, description="Page of results.", json_schema_extra={"minimum": 1, "maximum": MAX_PAGE})
    document_types: list[str] = Field(default_factory=list, description="pdf, docx, xlsx, txt, md, csv, html.")
    date_range: DateRange | None = None
    source_filter: str | None = Field(default=None, description="Path or URL prefix, or any part of the path.")
    include_context: bool = True
    max_chunks: int = Field(default=3, description="Context chunks per document.",
                            json_schema_extra={"minimum": 1, "maximum": 10})
    search_mode: str = Field(default="hybrid", json_schema_extra={"enum": ["semantic", "fulltext", "hybrid"]})
    site_id: Id | None = Field(default=None, description="One site (default: the key's only site; for an "
                                                         "all-sites key every site except eval:* and sample).")
    user_id: Id | None = Field(default=None, description="Written to the query log.")

    model_config = ConfigDict(json_schema_extra={"examples": [{
        "query": "требования к пожарной безопасности", "limit": 5, "document_types": ["pdf", "docx"],
        "date_range": {"from": "2024-01-01", "to": "2024-12-31"}, "search_mode": "hybrid", "site_id": "site_a"}]})


SearchOut = wire_model(SearchResponse, "SearchOut")


# ----- chat -----
class ChatIn(Body):
    message: str = Field(min_length=1, max_length=MAX_MESSAGE_CHARS, description="The question.")
    session_id: Id | None = Field(default=None, description="Conversation id; omitted starts one.")
    k: int = Field(default=5, ge=1, le=50, description="Passages to retrieve.")
    site_id: Id | None = None
    user_id: Id | None = None
    resource_name: str | None = Field(default=None, max_length=200, description="Agent instruction to use.")

    model_config = ConfigDict(json_schema_extra={"examples": [{
        "message": "Where is hybrid search implemented?", "session_id": "s1", "site_id": "site_a"}]})


# A citation's location is `source` inside rag_core; the chat spec's JSON has always called it `path`.
CITATION_WIRE_NAMES = (("source", "path"),)


class SourceOut(wire_model(Citation, "Source", rename=CITATION_WIRE_NAMES)):  # type: ignore[misc]
    similarity_pct: float


def wire_sources(sources: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Citations' dicts with their wire names (`path`), in the field order the API has always sent."""
    names = dict(CITATION_WIRE_NAMES)
    return [{names.get(k, k): v for k, v in s.items()} for s in sources]


def wire_turn(data: dict[str, Any]) -> dict[str, Any]:
    """A ChatTurn's or PreparedTurn's `to_dict()` as REST and MCP send it."""
    return {**data, "sources": wire_sources(data["sources"])}


class ChatTurnOut(wire_model(ChatTurn, "ChatTurnBase")):  # type: ignore[misc]
    sources: list[SourceOut]


class SessionsOut(BaseModel):
    sessions: list[wire_model(SessionSummary)]  # type: ignore[valid-type]


class MessagesOut(BaseModel):
    session_id: str
    messages: list[wire_model(ChatMessage)]  # type: ignore[valid-type]


class SessionDeleted(wire_model(SessionsDeleted, extra="ignore")):  # type: ignore[misc]
    session_id: str


# ----- web -----
class CrawlIn(Body):
    index_url: str = Field(min_length=1, max_length=2000, description="Index page whose links are ingested (depth 1).")
    pattern: str = Field(default="", max_length=500, description="Regex the linked URLs must match.")
    site_id: Id | None = None

    model_config = ConfigDict(json_schema_extra={"examples": [{
        "index_url": "https://docs.example.com/guide/", "pattern": r"/guide/.+", "site_id": "site_a"}]})


class PageIn(Body):
    url: str = Field(min_length=1, max_length=2000)
    site_id: Id | None = None

    model_config = ConfigDict(json_schema_extra={"examples": [{
        "url": "https://docs.example.com/guide/install.html", "site_id": "site_a"}]})


class WebReportOut(wire_model(WebIngestReport, "WebIngestReport")):  # type: ignore[misc]
    error_counts: dict[str, int]


JobOut = wire_model(JobInfo, "JobOut")


class JobQueued(BaseModel):
    """202 of a request run in the background: the job to follow at GET /jobs/{job_id}."""

    job_id: int
    status_url: str


class JobsOut(BaseModel):
    jobs: list[JobOut]  # type: ignore[valid-type]


class HealthOut(BaseModel):
    status: Literal["ok"] = "ok"


class ReplicaCounts(BaseModel):
    ok: int = Field(description="Replicas serving reads.")
    lagging: int = Field(description="Replicas behind the primary by more than RAG_REPLICA_MAX_LAG_SEC (no reads).")
    down: int = Field(description="Replicas that do not answer (no reads).")


class ReadyOut(BaseModel):
    status: Literal["ready"] = "ready"
    database: Literal["ok"] = Field(default="ok", description="A query on the database succeeded.")
    read_replicas: ReplicaCounts | None = Field(
        default=None, description="With DATABASE_READ_URL: the replicas by state as their last check saw them "
                                  "(reads fall back to the primary, so the service is ready with none serving); "
                                  "`rag status` names them.")


# A site's key is not told where the database is (the server's layout): the route leaves `database` out.
StatusOut = wire_model(StoreStatusInfo, "StatusOut", optional=("database",))
MetricsOut = wire_model(SearchMetrics, "MetricsOut")
