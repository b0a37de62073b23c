"""The REST service (the workflow-service and search specs): a thin FastAPI adapter over the Workbench.

Every endpoint authenticates (except /health), counts against the caller's rate limit, checks
the caller's sites and calls one Workbench method. Errors are mapped in one place
(`_install_error_handlers`) to the search spec's body; no stack trace reaches a client.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import queue
import threading
import uuid
from contextlib import asynccontextmanager
from typing import Annotated, Any, AsyncIterator, Callable, Iterator, Mapping, TypeVar

import anyio.to_thread
import orjson
import psycopg
from fastapi import Depends, FastAPI, Path, Query, Request, Security
from fastapi import HTTPException as FastAPIHTTPException
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.utils import get_openapi
from fastapi.responses import JSONResponse, StreamingResponse
from fastapi.security import APIKeyHeader, HTTPAuthorizationCredentials, HTTPBearer
from pydantic import AfterValidator
from starlette.exceptions import HTTPException as StarletteHTTPException

from rag_core.api import schemas as s
from rag_core.api.auth import DENIED, KeyRing, Principal, RedactKeysInAccessLog, refuse_key_in_query
from rag_core.api.ratelimit import RateLimiter
from rag_core.api.retention_schedule import parse_purge_time, start_retention_scheduler
from rag_core.api.service_logging import configure_logging
from rag_core.chat.sessions import ChatSession
from rag_core.jobs.records import JobInfo
from rag_core.errors import (
    ConfigError, CrawlRefused, DatabaseError, FetchError, InvalidInput, LoaderError, NotFound, RagError, Unauthorized,
)
from rag_core.limits import MAX_DOCUMENT_CHARS, MAX_DOCUMENT_REQUEST_BYTES, MAX_ID_CHARS, MAX_REQUEST_BYTES
from rag_core.security.ids import DEFAULT_SITE, valid_id
from rag_core.security.text import text_problem
from rag_core.workbench import Workbench
from rag_core.settings import RagSettings, load_settings

log = logging.getLogger(__name__)

DESCRIPTION = """\
Documents, search, chat and chat-history memory over one RAG workbench store (PostgreSQL + pgvector).

**Keys.** Send `Authorization: Bearer <key>` or `X-API-Key: <key>`. Each key of `RAG_API_KEYS`
(`k1=site_a|site_b,k2=*`) may use only its sites; `RAG_ADMIN_API_KEY` may use every site and is the
only key for deletes and the retention cleanup. With no key configured the service runs open, and
only on loopback. `/health` needs no key.

**Errors** always have the shape `{"success": false, "error": {"code", "message", "details"}}`.
**Rate limit**: `RAG_RATE_LIMIT` per key; over it, HTTP 429 `RATE_LIMIT` with `Retry-After`.
"""

_bearer = HTTPBearer(auto_error=False, description="An API key from RAG_API_KEYS or RAG_ADMIN_API_KEY.")
_header_key = APIKeyHeader(name="X-API-Key", auto_error=False, description="The same key, as a header.")


# ----- access -----
class FastJSONResponse(JSONResponse):
    """JSON rendered by orjson: a 37 KB search page took 0.13 ms of CPU with the json module, 0.025 ms with orjson."""

    def render(self, content: Any) -> bytes:
        return orjson.dumps(content)


def _client(request: Request) -> str:
    return f"ip:{request.client.host if request.client else 'unknown'}"


async def get_caller(request: Request,
                     bearer: Annotated[HTTPAuthorizationCredentials | None, Security(_bearer)] = None,
                     header_key: Annotated[str | None, Security(_header_key)] = None) -> Principal:
    """Authenticate the key and count the request against the caller's rate limit.

    Async, so a request does not queue for a worker thread twice; only a Redis round trip goes to a thread.
    """
    keys: KeyRing = request.app.state.keys
    limiter: RateLimiter = request.app.state.limiter

    async def hit(identity: str) -> None:
        if limiter.shared:
            await anyio.to_thread.run_sync(limiter.hit, identity)
        else:
            limiter.hit(identity)

    token = header_key or (bearer.credentials if bearer else None)
    try:
        refuse_key_in_query(request.query_params.keys())
        caller = keys.authenticate(token)
    except Unauthorized:
        await hit(_client(request))  # guessing keys is limited per address
        raise
    await hit(_client(request) if keys.open else caller.identity)
    return caller


async def get_workbench(request: Request) -> Workbench:
    return request.app.state.workbench


Caller = Annotated[Principal, Depends(get_caller)]
WorkbenchDep = Annotated[Workbench, Depends(get_workbench)]
# Ids in query strings and paths: the same pattern as in bodies (rag_core.security.ids).
SiteQuery = Annotated[str | None, Query(max_length=MAX_ID_CHARS, json_schema_extra=s.ID_SCHEMA,
                                        description="Only this site."), AfterValidator(valid_id)]
UserQuery = Annotated[str | None, Query(max_length=MAX_ID_CHARS, json_schema_extra=s.ID_SCHEMA),
                      AfterValidator(valid_id)]
SessionPath = Annotated[str, Path(min_length=1, max_length=MAX_ID_CHARS, json_schema_extra=s.ID_SCHEMA),
                        AfterValidator(valid_id)]


JobPath = Annotated[int, Path(ge=1, description="The job id a 202 answered with.")]
Background = Annotated[bool, Query(description="Queue a job and answer 202 with its id at once, instead of "
                                               "waiting for the work; GET /jobs/{job_id} follows it.")]


TextOrNone = TypeVar("TextOrNone", bound=str | None)


def _text(value: TextOrNone, name: str) -> TextOrNone:
    """Query and path text PostgreSQL can store (the bodies' fields are checked by their models)."""
    problem = text_problem(value) if value is not None else None
    if problem:
        raise InvalidInput(f"{name} {problem}.", details={"field": name})
    return value


def _session_for(wb: Workbench, caller: Principal, session_id: str) -> ChatSession:
    """The session when the caller may use it; a restricted key gets UNAUTHORIZED whether it exists or not."""
    session = wb.get_session(session_id)
    if session is None and caller.sites is None:
        raise NotFound(f"No chat session '{session_id}'; GET /sessions lists them.")
    if session is None or not caller.allows(session["site_id"]):
        raise Unauthorized(DENIED)
    return session


def _job_for(wb: Workbench, caller: Principal, job_id: int) -> JobInfo:
    """The job when the caller may see it; a key bound to sites gets 404 for other sites' jobs and for
    store-wide ones (a reindex), so it cannot learn which ids exist."""
    try:
        job = wb.job(job_id)
    except NotFound:
        job = None
    if job is None or (caller.sites is not None and not caller.allows(job["site_id"])):
        raise NotFound(f"No job {job_id} for this key; GET /jobs lists its jobs.")
    return job


def _queued(job_id: int) -> JSONResponse:
    return JSONResponse({"job_id": job_id, "status_url": f"/jobs/{job_id}"}, status_code=202)


# ----- errors: the one place they are mapped -----
def _error(status: int, code: str, message: str, details: Any = None, headers: Mapping[str, str] | None = None
           ) -> JSONResponse:
    body: dict[str, Any] = {"code": code, "message": message}
    if details is not None:
        body["details"] = details
    return JSONResponse({"success": False, "error": jsonable_encoder(body)}, status_code=status, headers=headers)


def _field(loc: tuple[Any, ...]) -> str:
    if loc and loc[0] in ("body", "query", "path", "header"):
        loc = loc[1:]  # where the value came from; the field name follows
    return ".".join(str(p) for p in loc) or "body"


def _problem(error: Mapping[str, Any]) -> dict[str, str]:
    """One validation error as field and problem; a body that is not JSON names where the parser stopped and why
    (FastAPI reports it at the character offset, which read as a field named "10")."""
    loc = tuple(error.get("loc", ()))
    if error.get("type") == "json_invalid":
        at = f" at character {loc[-1]}" if len(loc) > 1 else ""
        reason = (error.get("ctx") or {}).get("error")
        return {"field": "body", "problem": f"not valid JSON{at}" + (f" ({reason})" if reason else "")}
    return {"field": _field(loc), "problem": error.get("msg", "invalid")}


def _install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(RagError)
    async def rag_error(request: Request, exc: RagError) -> JSONResponse:
        headers = None
        if isinstance(exc.details, dict) and "retry_after" in exc.details:  # rate limit, database restarting
            headers = {"Retry-After": str(exc.details["retry_after"])}
        if exc.status >= 500:
            # A database that is being restarted answers every probe with 503: one line each, not an error each.
            level = logging.INFO if headers else logging.ERROR
            log.log(level, "%s %s failed: %s (%s)", request.method, request.url.path, exc.code, exc.message)
        return JSONResponse(jsonable_encoder(exc.to_dict()), status_code=exc.status, headers=headers)

    @app.exception_handler(RequestValidationError)
    async def invalid_request(request: Request, exc: RequestValidationError) -> JSONResponse:
        code = "INVALID_QUERY" if request.url.path == "/search" else "INVALID_INPUT"
        problems = [_problem(e) for e in exc.errors()]
        first = problems[0] if problems else {"field": "body", "problem": "invalid"}
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        problem = first["problem"].removeprefix("Value error, ")
        message = f"{first['field']}: {problem}{more}. See /docs for the request body."
        return _error(400, code, message, problems)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        if exc.status_code == 404:
            return _error(404, "NOT_FOUND", f"No endpoint {request.method} {request.url.path}; /docs lists them.")
        if exc.status_code == 413:
            return _too_large(request.method, request.url.path)
        if exc.status_code == 400:  # FastAPI could not read the body (nested too deep for the JSON parser)
            return _error(400, "INVALID_QUERY" if request.url.path == "/search" else "INVALID_INPUT",
                          "The body could not be read as JSON; send one JSON object, nested a few levels at most. "
                          "See /docs for the request body.")
        if exc.status_code == 405:
            allow = (exc.headers or {}).get("Allow", "")
            return _error(405, "METHOD_NOT_ALLOWED",
                          f"{request.method} is not allowed on {request.url.path}; use {allow or 'another method'}.",
                          headers=exc.headers)
        return _error(exc.status_code, f"HTTP_{exc.status_code}", str(exc.detail), headers=exc.headers)

    @app.exception_handler(psycopg.Error)
    async def database_error(request: Request, exc: psycopg.Error) -> JSONResponse:
        log.error("%s %s: database error %s", request.method, request.url.path, type(exc).__name__)
        err = DatabaseError("The database failed; check that PostgreSQL is running (`rag status`) and retry.",
                            details={"reason": type(exc).__name__})
        return JSONResponse(err.to_dict(), status_code=err.status)


def document_char_budget(settings: RagSettings) -> RateLimiter:
    """RAG_INGEST_CHAR_LIMIT as a per-key budget; one that cannot hold a document at the cap is a ConfigError."""
    budget = RateLimiter(settings.ingest_char_limit, settings.redis_url, variable="RAG_INGEST_CHAR_LIMIT",
                         counted="characters of documents")
    if budget.item is not None and budget.item.amount < MAX_DOCUMENT_CHARS:
        raise ConfigError(f"RAG_INGEST_CHAR_LIMIT: '{settings.ingest_char_limit}' is less than one document may hold "
                          f"({MAX_DOCUMENT_CHARS} characters); write e.g. 10000000/hour, or off.")
    return budget


def body_limit(method: str, path: str) -> int:
    """The largest body a request may send: documents have their own limit, sized for MAX_DOCUMENT_CHARS."""
    return MAX_DOCUMENT_REQUEST_BYTES if (method, path) == ("POST", "/documents") else MAX_REQUEST_BYTES


def _too_large(method: str, path: str) -> JSONResponse:
    limit = body_limit(method, path)
    return _error(413, "PAYLOAD_TOO_LARGE",
                  f"The request body is larger than {limit} bytes, the limit of {method} {path}; send less text "
                  "(a document's text has its own, larger limit on POST /documents).", {"limit_bytes": limit})


class _RequestGuard:
    """Pure ASGI around the routes: bodies over their limit and unexpected exceptions.

    A body over its limit gets 413: by Content-Length before a byte is read, and by the bytes actually
    streamed (a chunked body has no length) as soon as they pass it, so memory stays bounded.

    An unexpected exception is answered with the 500 body here, before it reaches Starlette's
    outermost error middleware: that one re-raises after answering, and uvicorn then resets the
    connection, so the client's next request on the same keep-alive connection failed too.
    """

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = body_limit(scope["method"], scope["path"])
        length = dict(scope.get("headers") or ()).get(b"content-length", b"")
        if length.strip().isdigit() and int(length) > limit:
            await _too_large(scope["method"], scope["path"])(scope, receive, send)
            return
        received = 0
        started = False

        async def counted() -> dict[str, Any]:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    # FastAPI passes an HTTPException from reading the body on to the handlers above.
                    raise FastAPIHTTPException(413)
            return message

        async def tracked(message: dict[str, Any]) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, counted, tracked)
        except Exception:
            if started:  # half a response is out: only closing the connection tells the client
                raise
            incident = uuid.uuid4().hex[:12]
            log.exception("%s %s failed (incident %s)", scope.get("method"), scope.get("path"), incident)
            response = _error(500, "INTERNAL", f"The server failed on this request; it is logged as incident "
                                               f"{incident}.", {"incident": incident})
            await response(scope, receive, send)


def _document_openapi(app: FastAPI) -> None:
    """Every operation documents the error bodies it can return (400 instead of FastAPI's 422)."""

    def openapi() -> dict[str, Any]:
        if app.openapi_schema:
            return app.openapi_schema
        schema = get_openapi(title=app.title, version=app.version, description=app.description, routes=app.routes)
        components = schema.setdefault("components", {}).setdefault("schemas", {})
        for model in (s.ErrorResponse, s.ErrorDetail):
            components[model.__name__] = model.model_json_schema(ref_template="#/components/schemas/{model}")
        for name in ("HTTPValidationError", "ValidationError"):
            components.pop(name, None)
        ref = {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorResponse"}}}}
        reasons = {"400": "Invalid input (INVALID_QUERY on /search, INVALID_INPUT elsewhere).",
                   "401": "Missing or wrong key, or a key used on another site's data (UNAUTHORIZED).",
                   "429": "Over the key's rate limit (RATE_LIMIT); see the Retry-After header.",
                   "500": "Unexpected failure (INTERNAL); no stack trace is returned.",
                   "503": "The database is unavailable or restarting (DATABASE_ERROR); see Retry-After."}
        embeds = {"409": "The store was built with another embedder (EMBEDDER_MISMATCH); run `rag reindex`.",
                  "413": "The request body is over its limit (PAYLOAD_TOO_LARGE)."}
        web = {**embeds, "403": "The crawl policy refused the URL (CRAWL_REFUSED).",
               "502": "The page could not be fetched (FETCH_ERROR)."}
        specific = {"/documents": embeds, "/retrieve-context": embeds, "/crawl": web, "/chat-messages": embeds,
                    "/search": {**embeds, "404": "Nothing is indexed in the site searched (INDEX_UNAVAILABLE)."},
                    "/pages": web,
                    "/chat": {**embeds, "404": "No active instruction named resource_name (NOT_FOUND).",
                              "502": "The answering model failed (LLM_ERROR); the question is kept."}}
        for path, ops in schema.get("paths", {}).items():
            for method, op in ops.items():
                responses = op.setdefault("responses", {})
                responses.pop("422", None)
                wanted = {"500": reasons["500"]} if path == "/health" else dict(reasons)
                if method == "post":
                    wanted.update(specific.get(path, {}))
                for status, description in wanted.items():
                    responses.setdefault(status, {"description": description, **ref})
                for status, resp in responses.items():
                    if status[0] in "45" and "content" not in resp:
                        resp.update(ref)
        app.openapi_schema = schema
        return schema

    app.openapi = openapi  # type: ignore[method-assign]


_ERRORS: dict[int | str, dict[str, Any]] = {404: {"model": s.ErrorResponse, "description": "Nothing to delete"}}
_ADMIN = "Needs the admin key (RAG_ADMIN_API_KEY)."
_QUEUED: dict[int | str, dict[str, Any]] = {202: {"model": s.JobQueued,
                                                  "description": "With `?background=true`: the job queued"}}
_NO_JOB: dict[int | str, dict[str, Any]] = {404: {"model": s.ErrorResponse,
                                                  "description": "No such job, or one of another site (NOT_FOUND)"}}


def _warm_up(workbench: Workbench) -> None:
    """Embed one text before serving: the packaged model builds its tokenizer on first use, and 100
    requests arriving together on a cold server each built it at once (every one took over a minute)."""
    try:
        seconds = workbench.search_engine.load_model()  # the searches' clocks then never include it
    except Exception as exc:  # noqa: BLE001 - a remote embedder that is down must not stop the start
        log.warning("Could not load the embedding or reranker model before serving (%s: %s); the first searches "
                    "will try again.", type(exc).__name__, getattr(exc, "message", None) or exc)
        return
    log.info("Embedder %s loaded in %.1f s.", workbench.embedder_name, seconds)


def warn_if_open(keys: KeyRing) -> None:
    """Say once at start that every caller has full access when no key is configured."""
    if keys.open:
        log.warning("No API key configured (RAG_API_KEYS, RAG_ADMIN_API_KEY): every caller has full access. "
                    "This is allowed on loopback only.")


def create_app(settings: RagSettings | None = None, workbench: Workbench | None = None, *,
               run_scheduler: bool = True, warn_open: bool = True, host_jobs: bool = True) -> FastAPI:
    """The FastAPI app; opens a Workbench unless one is given, and runs the daily purge unless told not to.

    Args:
        warn_open: warn that no API key is configured (`rag serve --workers N` says it once, not per worker).
        host_jobs: run queued background jobs in this process whenever no `rag worker` is alive
            (RAG_JOBS_IN_PROCESS_WORKER decides whether and when).
    """
    settings = settings or (workbench.settings if workbench is not None else load_settings())
    keys = KeyRing.from_settings(settings.api_keys, settings.admin_api_key)
    limiter = RateLimiter(settings.rate_limit, settings.redis_url)
    ingest_budget = document_char_budget(settings)
    parse_purge_time(settings.retention_time)  # a bad time stops the start, not the first purge
    owned = workbench is None
    if workbench is None:
        from rag_core import open_workbench

        workbench = open_workbench(settings)
    wb: Workbench = workbench  # the lifespan's closure needs the narrowed type
    if warn_open:
        warn_if_open(keys)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        # One worker thread per pooled connection (anyio's default is 40): with more, a search took a
        # connection for the core statement, gave it back, then queued behind thirty other threads to
        # get one again for its highlights; the threads beyond the pool only fought over the GIL.
        anyio.to_thread.current_default_thread_limiter().total_tokens = settings.db_pool_size
        await anyio.to_thread.run_sync(_warm_up, wb)
        scheduler = start_retention_scheduler(wb, settings.retention_time) if run_scheduler else None
        if host_jobs:  # queued jobs run here while no `rag worker` is alive
            await anyio.to_thread.run_sync(wb.host_jobs)
        try:
            yield
        finally:
            if host_jobs:
                await anyio.to_thread.run_sync(wb.stop_hosting_jobs)
            if scheduler is not None:
                scheduler.shutdown(wait=False)
            if owned:
                wb.close()

    app = FastAPI(title="RAG workbench service", version="0.1.0", description=DESCRIPTION, lifespan=lifespan)
    _keep_keys_out_of_access_log()
    app.state.workbench = workbench
    app.state.keys = keys
    app.state.limiter = limiter
    app.state.ingest_budget = ingest_budget
    app.state.settings = settings
    app.add_middleware(_RequestGuard)  # body limits, and unexpected errors answered without dropping the connection
    _install_error_handlers(app)
    _document_openapi(app)
    _routes(app)
    return app


def _keep_keys_out_of_access_log() -> None:
    access = logging.getLogger("uvicorn.access")
    if not any(isinstance(f, RedactKeysInAccessLog) for f in access.filters):
        access.addFilter(RedactKeysInAccessLog())


def create_worker_app() -> FastAPI:
    """The app of one of several uvicorn workers: `rag serve` runs the daily purge and warns of open access
    once, in the supervisor; each worker's lines name its process id."""
    configure_logging(with_pid=True)
    return create_app(run_scheduler=False, warn_open=False)


NDJSON = "application/x-ndjson"
# What a caller learns about a page that failed: its reason and a fixed sentence. The crawler's own
# messages name resolved addresses, resolver errors and the whole allowlist, which map the server's
# network for whoever calls; they go to the server log instead.
PUBLIC_CRAWL_REASONS = {
    "refused": "Refused by the crawl policy: the host, port, scheme or address is not allowed "
               "(the server's RAG_ALLOWED_DOMAINS and address rules decide).",
    "robots": "Disallowed by the site's robots.txt, or its robots.txt could not be fetched.",
    "timeout": "The page did not answer in time.",
    "http_status": "The web server answered with an error status.",
    "too_large": "The page is larger than the crawl size limit.",
    "content_type": "The page is not HTML, plain text or PDF.",
    "network": "The page could not be fetched: the host could not be resolved or reached.",
    "extract": "No text could be extracted from the page.",
    "ingest": "The page's text could not be stored.",
}
_REFUSALS = ("refused", "robots")


def _publicly_refused(call: Callable[[], Any]) -> Any:
    """`call()` with a refused or unreachable URL told in generic words (the details go to the log)."""
    try:
        return call()
    except (CrawlRefused, FetchError) as exc:
        reason = exc.details.get("reason") if isinstance(exc.details, dict) else None
        reason = reason if reason in PUBLIC_CRAWL_REASONS else ("refused" if isinstance(exc, CrawlRefused)
                                                                else "network")
        log.warning("Crawl request failed (%s): %s", reason, exc.message)
        raise type(exc)(PUBLIC_CRAWL_REASONS[reason], details={"reason": reason}) from None


def _public_crawl(run: Callable[[Callable[[Any], None]], Any]) -> Callable[[Callable[[Any], None]], Any]:
    """`run` with crawl errors told in generic words; a refusal of the URL asked for is always a 403."""

    def public(progress: Callable[[Any], None]) -> Any:
        report = _publicly_refused(lambda: run(progress))
        for error in report.errors:
            log.info("Crawl page failed (%s): %s: %s", error["reason"], error["url"], error["message"])
            error["message"] = PUBLIC_CRAWL_REASONS.get(error["reason"], "The page failed.")
        if report.index_url is None and not report.pages_ingested and report.errors \
                and report.errors[0]["reason"] in _REFUSALS:
            # The one page asked for was refused after its name resolved: the same answer as a refusal before.
            reason = report.errors[0]["reason"]
            raise CrawlRefused(PUBLIC_CRAWL_REASONS[reason], details={"reason": reason})
        return report

    return public


def _web_response(request: Request, run: Callable[[Callable[[Any], None]], Any]) -> Any:
    """The crawl report as JSON, or streamed as NDJSON progress lines then the report when the client asks."""
    if NDJSON not in request.headers.get("accept", ""):
        return JSONResponse(jsonable_encoder(run(lambda p: None).to_dict()))
    events: queue.Queue[dict[str, Any]] = queue.Queue()

    def work() -> None:
        try:
            report = run(lambda p: events.put({"event": "progress", "pages_done": p.done,
                                               "pages_total": p.total, "chunks": p.chunks_done,
                                               "current": p.current}))
            events.put({"event": "done", "report": report.to_dict()})
        except RagError as exc:
            events.put({"event": "error", **exc.to_dict()})
        except Exception:  # noqa: BLE001 - reported like every other unexpected failure, without a trace
            incident = uuid.uuid4().hex[:12]
            log.exception("%s %s failed while streaming (incident %s)", request.method, request.url.path, incident)
            events.put({"event": "error", "success": False, "error": {
                "code": "INTERNAL", "message": f"The crawl failed; it is logged as incident {incident}."}})

    threading.Thread(target=work, name="rest-crawl", daemon=True).start()

    def lines() -> Iterator[str]:
        while True:
            event = events.get()
            yield json.dumps(jsonable_encoder(event), ensure_ascii=False) + "\n"
            if event["event"] != "progress":
                return

    return StreamingResponse(lines(), media_type=NDJSON)


def _routes(app: FastAPI) -> None:  # noqa: C901 - one short adapter per endpoint
    @app.get("/health", response_model=s.HealthOut, tags=["service"], summary="Liveness (no key needed)")
    def health() -> dict[str, str]:
        """The process answers; it does not touch the database (see /health/ready)."""
        return {"status": "ok"}

    @app.get("/health/ready", response_model=s.ReadyOut, tags=["service"],
             summary="Readiness: the database answers (no key needed)",
             responses={503: {"model": s.ErrorResponse,
                              "description": "The database does not answer (DATABASE_ERROR)"}})
    def ready(wb: WorkbenchDep) -> dict[str, Any]:
        """200 when a query on the database succeeds, 503 DATABASE_ERROR at once while it is down or restarting."""
        return {"status": "ready", "database": wb.check_database()}

    # ----- the workflow-service spec: documents, chat memory, context -----
    @app.post("/documents", status_code=201, response_model=s.DocumentOut, tags=["documents"],
              summary="Add or replace a document",
              responses={200: {"model": s.DocumentOut, "description": "The source existed: replaced or unchanged"},
                         422: {"model": s.ErrorResponse, "description": "The text could not be indexed"},
                         **_QUEUED})
    def add_document(body: s.DocumentIn, caller: Caller, wb: WorkbenchDep, request: Request,
                     background: Background = False) -> Any:
        """Chunk, embed and store a document; the same source again replaces it (201 new, 200 replaced).

        With `?background=true`: 202 and the job id at once; GET /jobs/{job_id} follows it.
        """
        caller.require_site(body.site_id)
        # Embedding costs CPU per character: each key has its budget of characters (RAG_INGEST_CHAR_LIMIT).
        request.app.state.ingest_budget.hit(_client(request) if request.app.state.keys.open else caller.identity,
                                            cost=len(body.content))
        if background:
            return _queued(wb.enqueue_texts([{"source": body.source, "text": body.content, "title": body.title}],
                                            site_id=body.site_id))
        outcome = wb.ingest_text(body.source, body.content, site_id=body.site_id, title=body.title)
        if outcome.status == "failed":
            raise LoaderError(f"'{body.source}' could not be indexed: {outcome.reason}", details={"source": body.source})
        out = {"id": outcome.document_id, "site_id": body.site_id, "source": outcome.source,
               "status": outcome.status, "chunks": outcome.chunks}
        return JSONResponse(out, status_code=201 if outcome.status == "indexed" else 200)

    @app.delete("/documents", response_model=s.DeletedDocuments, tags=["documents"], summary="Delete a document",
                description=_ADMIN, responses=_ERRORS)
    def delete_document(caller: Caller, wb: WorkbenchDep,
                        source: Annotated[str, Query(min_length=1, max_length=2000, description="Source to delete.")],
                        site_id: SiteQuery = None
                        ) -> dict[str, Any]:
        """Delete a source with its chunks (admin key)."""
        caller.require_admin()
        result = wb.delete_source(_text(source, "source"), site_id=site_id)
        if not result["documents"]:
            raise NotFound(f"No document with source '{source}'. A search result's file_path is its source, "
                           "exactly as stored; on the server, `rag status --sources` lists them per site.")
        return {"source": source, **result}

    @app.post("/chat-messages", status_code=201, response_model=s.ChatMessageOut, tags=["chat memory"],
              summary="Store a chat message")
    def add_chat_message(body: s.ChatMessageIn, caller: Caller, wb: WorkbenchDep) -> dict[str, Any]:
        """Store one message of a user on a site (role 'user' or 'ai') for the context and the 30-day history."""
        caller.require_site(body.site_id)
        message = wb.add_chat_message(body.user_id, body.site_id, body.role, body.message)
        return {k: message[k] for k in ("id", "session_id", "site_id", "user_id", "role", "content")} | {
            "created_at": message["created_at"].isoformat()}

    @app.post("/retrieve-context", response_model=s.ContextOut, tags=["chat memory"], summary="Context for a query")
    def retrieve_context(body: s.RetrieveContextIn, caller: Caller, wb: WorkbenchDep) -> dict[str, str]:
        """The site's relevant knowledge and the user's recent messages there, as one formatted string."""
        caller.require_site(body.site_id)
        return {"context": wb.retrieve_context(body.user_id, body.site_id, body.query, k=body.k)}

    @app.delete("/chat-messages/cleanup", response_model=s.PurgeSummary, tags=["chat memory"],
                summary="Purge old chat messages", description=_ADMIN)
    def cleanup(caller: Caller, wb: WorkbenchDep,
                older_than_days: Annotated[float | None, Query(gt=0, le=36500, description=(
                    "Age limit in days (default RAG_RETENTION_DAYS)."))] = None,
                dry_run: Annotated[bool, Query(description="Count only; delete nothing.")] = False) -> dict[str, Any]:
        """Delete messages older than the retention policy and sessions left empty; returns the audited summary."""
        caller.require_admin()
        older = dt.timedelta(days=older_than_days) if older_than_days is not None else None
        summary = wb.purge_chat_history(older_than=older, dry_run=dry_run, triggered_by="api")
        log.info("Retention purge via API: %s messages, %s sessions (dry run %s).",
                 summary["messages_deleted"], summary["sessions_deleted"], summary["dry_run"])
        return jsonable_encoder(summary)

    # ----- the search spec: search -----
    @app.post("/search", response_model=s.SearchOut, tags=["search"], summary="Search documents")
    def search(body: s.SearchIn, caller: Caller, wb: WorkbenchDep) -> Any:
        """Hybrid, semantic or full-text search with filters, facets, highlights and suggestions (the search spec)."""
        site = caller.site_for(body.site_id)
        dates = body.date_range or s.DateRange()
        result = wb.search(body.query, mode=body.search_mode, limit=body.limit, page=body.page,
                           types=body.document_types, date_from=dates.from_, date_to=dates.to,
                           source=body.source_filter, site_id=site, include_context=body.include_context,
                           max_chunks=body.max_chunks, user_id=body.user_id)
        return FastJSONResponse(result)

    # ----- chat -----
    @app.post("/chat", response_model=s.ChatTurnOut, tags=["chat"], summary="One chat turn")
    def chat(body: s.ChatIn, caller: Caller, wb: WorkbenchDep) -> Any:
        """Answer with the session's history and the documents; the answer carries its sources."""
        site = caller.site_for(body.site_id)
        if body.session_id and caller.sites is not None:
            session = wb.get_session(body.session_id)
            if session is not None and not caller.allows(session["site_id"]):
                raise Unauthorized(DENIED)
        try:
            # With a site, the turn's insert refuses a session of another site in the same statement,
            # so a session created elsewhere after the check above is still refused.
            turn = wb.chat(body.message, session_id=body.session_id, k=body.k, site_id=site, user_id=body.user_id,
                           resource_name=body.resource_name)
        except Unauthorized:
            raise Unauthorized(DENIED) from None
        return JSONResponse(jsonable_encoder(turn.to_dict()))

    @app.get("/sessions", response_model=s.SessionsOut, tags=["chat"], summary="List chat sessions")
    def list_sessions(caller: Caller, wb: WorkbenchDep,
                      site_id: SiteQuery = None,
                      user_id: UserQuery = None,
                      limit: Annotated[int, Query(ge=1, le=1000)] = 100) -> Any:
        """Sessions, most recently active first, with message counts."""
        site = caller.site_for(site_id)
        return {"sessions": jsonable_encoder(wb.list_sessions(site_id=site, user_id=user_id,
                                                               limit=limit))}

    @app.get("/sessions/{session_id}/messages", response_model=s.MessagesOut, response_model_exclude_unset=True,
             tags=["chat"],
             summary="A session's messages", responses={404: {"model": s.ErrorResponse, "description": "No session"}})
    def session_messages(caller: Caller, wb: WorkbenchDep,
                         session_id: SessionPath,
                         limit: Annotated[int, Query(ge=1, le=1000)] = 20) -> Any:
        """The last `limit` messages, oldest first; answers with their sources."""
        _session_for(wb, caller, session_id)
        return {"session_id": session_id, "messages": jsonable_encoder(wb.chat_history(session_id, limit))}

    @app.delete("/sessions/{session_id}", response_model=s.SessionDeleted, tags=["chat"], summary="Delete a session",
                description=_ADMIN, responses=_ERRORS)
    def delete_session(caller: Caller, wb: WorkbenchDep,
                       session_id: SessionPath) -> dict[str, Any]:
        """Forget a session and its messages (admin key)."""
        caller.require_admin()
        result = wb.chat_reset(session_id)
        if not result["sessions"]:
            raise NotFound(f"No chat session '{session_id}'; GET /sessions lists them.")
        return {"session_id": session_id, **result}

    # ----- web -----
    @app.post("/crawl", response_model=s.WebReportOut, tags=["web"], summary="Ingest the pages an index links to",
              responses={200: {"content": {NDJSON: {"schema": {"type": "string"}}},
                               "description": "The report; with `Accept: application/x-ndjson`, progress lines first"},
                         **_QUEUED})
    def crawl(body: s.CrawlIn, caller: Caller, wb: WorkbenchDep, request: Request, background: Background = False) -> Any:
        """Fetch an index page and ingest its linked pages matching `pattern` (RAG_ALLOWED_DOMAINS applies).

        Send `Accept: application/x-ndjson` to receive one progress line per page as it is fetched,
        then the report (`{"event": "done", "report": ...}`) or the error (`{"event": "error", ...}`).
        """
        site = caller.site_for(body.site_id) or DEFAULT_SITE
        if background:
            return _queued(_publicly_refused(lambda: wb.enqueue_crawl(body.index_url, body.pattern, site_id=site)))
        return _web_response(request, _public_crawl(
            lambda progress: wb.ingest_index(body.index_url, body.pattern, site_id=site, progress=progress)))

    @app.post("/pages", response_model=s.WebReportOut, tags=["web"], summary="Ingest one web page",
              responses={200: {"content": {NDJSON: {"schema": {"type": "string"}}},
                               "description": "The report; with `Accept: application/x-ndjson`, progress lines first"},
                         **_QUEUED})
    def add_page(body: s.PageIn, caller: Caller, wb: WorkbenchDep, request: Request, background: Background = False) -> Any:
        """Fetch and ingest one page (the crawl policy applies); NDJSON progress like /crawl."""
        site = caller.site_for(body.site_id) or DEFAULT_SITE
        if background:
            return _queued(_publicly_refused(lambda: wb.enqueue_page(body.url, site_id=site)))
        return _web_response(request, _public_crawl(
            lambda progress: wb.ingest_url(body.url, site_id=site, progress=progress)))

    # ----- background jobs -----
    @app.get("/jobs", response_model=s.JobsOut, tags=["jobs"], summary="Recent background jobs")
    def list_jobs(caller: Caller, wb: WorkbenchDep, site_id: SiteQuery = None,
                  limit: Annotated[int, Query(ge=1, le=1000)] = 50) -> Any:
        """Running and queued jobs first, then the latest finished ones; a key sees its sites' jobs only."""
        if site_id is not None:
            caller.require_site(site_id)
            return {"jobs": jsonable_encoder(wb.jobs(site_id=site_id, limit=limit))}
        sites = None if caller.sites is None else sorted(caller.sites)
        return {"jobs": jsonable_encoder(wb.jobs(sites=sites, limit=limit))}

    @app.get("/jobs/{job_id}", response_model=s.JobOut, tags=["jobs"], summary="One background job",
             responses=_NO_JOB)
    def get_job(caller: Caller, wb: WorkbenchDep, job_id: JobPath) -> Any:
        """Status (queued, running, done, failed, cancelled), progress done/total, errors per file, timestamps."""
        return jsonable_encoder(_job_for(wb, caller, job_id))

    @app.delete("/jobs/{job_id}", response_model=s.JobOut, tags=["jobs"], summary="Cancel a background job",
                responses=_NO_JOB)
    def cancel_job(caller: Caller, wb: WorkbenchDep, job_id: JobPath) -> Any:
        """Cancel a queued job, or stop a running one after the file or batch it is on (what is stored stays)."""
        _job_for(wb, caller, job_id)
        return jsonable_encoder(wb.cancel_job(job_id))

    # ----- status -----
    @app.get("/status", response_model=s.StatusOut, response_model_exclude_unset=True, tags=["service"],
             summary="Store status")
    def status(caller: Caller, wb: WorkbenchDep,
               site_id: SiteQuery = None) -> dict[str, Any]:
        """Documents, chunks, sources, embedder, dimension and database size (of the key's site)."""
        site = caller.site_for(site_id)
        info: dict[str, Any] = dict(wb.status(site_id=site))
        if caller.sites is not None:
            for private in ("data_dir", "database"):  # the server's layout is not a site's business
                info.pop(private, None)
        return jsonable_encoder(info)

    @app.get("/metrics/search", response_model=s.MetricsOut, tags=["service"], summary="Search metrics")
    def metrics(caller: Caller, wb: WorkbenchDep,
                site_id: SiteQuery = None,
                since: Annotated[str | None, Query(max_length=40, description="7d, 12h or a date")] = None
                ) -> dict[str, Any]:
        """Searches, errors, zero results, average and p95 latency, popular queries, per day."""
        site = caller.site_for(site_id)
        return jsonable_encoder(wb.search_metrics(site_id=site, since=_text(since, "since")))
