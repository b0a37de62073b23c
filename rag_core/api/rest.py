"""The REST service (the workflow-service and search specs): a thin FastAPI adapter over the Workbench.

Every endpoint authenticates (except /health), counts against the caller's rate limit, checks
the caller's sites and calls one Workbench method: `access.py` declares the caller and the checked ids,
`routes.py` the endpoints; this module builds the app. Errors are mapped in one place
(`_install_error_handlers`) to the search spec's body; no stack trace reaches a client.
"""

from __future__ import annotations

import logging
import uuid
from contextlib import asynccontextmanager
from typing import Any, AsyncIterator, Mapping

import anyio.to_thread
import psycopg
from fastapi import FastAPI, Request
from fastapi import HTTPException as FastAPIHTTPException
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.utils import get_openapi
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from rag_core.api import schemas as s
from rag_core.api.access import refuse_before_body
from rag_core.api.auth import KeyRing, RedactKeysInAccessLog
from rag_core.api.ratelimit import RateLimiter
from rag_core.api.retention_schedule import parse_purge_time, start_retention_scheduler
from rag_core.api.service_logging import configure_logging
from rag_core.errors import (
    ConfigError, DatabaseError, RagError,
)
from rag_core.limits import MAX_DOCUMENT_CHARS, MAX_DOCUMENT_REQUEST_BYTES, MAX_REQUEST_BYTES, MAX_UPLOAD_FORM_BYTES
from rag_core.units import decimal_size
from rag_core.workbench import Workbench
from rag_core.settings import RagSettings, load_settings
from rag_core.api.routes import UPLOAD_PATH, _routes

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

def _error(status: int, code: str, message: str, details: Any = None, headers: Mapping[str, str] | None = None
           ) -> JSONResponse:
    body: dict[str, Any] = {"code": code, "message": message}
    if details is not None:
        body["details"] = details
    return JSONResponse({"success": False, "error": jsonable_encoder(body)}, status_code=status, headers=headers)


def rag_error_response(method: str, path: str, exc: RagError) -> JSONResponse:
    """The error body of a RagError, with Retry-After when it says when to retry."""
    headers = None
    if isinstance(exc.details, dict) and "retry_after" in exc.details:  # rate limit, database restarting
        headers = {"Retry-After": str(exc.details["retry_after"])}
    if exc.status >= 500:
        # A database that is being restarted answers every probe with 503: one line each, not an error each.
        level = logging.INFO if headers else logging.ERROR
        log.log(level, "%s %s failed: %s (%s)", method, path, exc.code, exc.message)
    return JSONResponse(jsonable_encoder(exc.to_dict()), status_code=exc.status, headers=headers)


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
        return rag_error_response(request.method, request.url.path, exc)

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
            return _too_large(request.method, request.url.path, upload_limit(request.app.state.settings))
        if exc.status_code == 400 and request.url.path == UPLOAD_PATH:  # a multipart body the parser gave up on
            return _error(400, "INVALID_INPUT", "The body could not be read as multipart/form-data; send each file "
                                                "as a form field named `files` (curl -F files=@report.pdf).")
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


def upload_limit(settings: RagSettings) -> int:
    """The largest upload request: its files together may hold RAG_MAX_FILE_MB, the app's limit per file, so one
    request never holds more in memory than the largest file the store accepts."""
    return int(settings.max_file_mb * 1_000_000) + MAX_UPLOAD_FORM_BYTES


def body_limit(method: str, path: str, upload_bytes: int) -> int:
    """The largest body a request may send: documents and uploads have their own limits."""
    if (method, path) == ("POST", UPLOAD_PATH):
        return upload_bytes
    return MAX_DOCUMENT_REQUEST_BYTES if (method, path) == ("POST", "/documents") else MAX_REQUEST_BYTES


def _too_large(method: str, path: str, upload_bytes: int) -> JSONResponse:
    limit = body_limit(method, path, upload_bytes)
    if (method, path) == ("POST", UPLOAD_PATH):
        return _error(413, "PAYLOAD_TOO_LARGE",
                      f"The upload is larger than {limit} bytes: the files of one request may hold "
                      f"{decimal_size(limit - MAX_UPLOAD_FORM_BYTES, exact=True)} together (RAG_MAX_FILE_MB). "
                      "Send the files in several requests, or raise RAG_MAX_FILE_MB on the server.",
                      {"limit_bytes": limit, "setting": "RAG_MAX_FILE_MB"})
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

    def __init__(self, app: Any, upload_bytes: int) -> None:
        self.app = app
        self.upload_bytes = upload_bytes

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if (scope["method"], scope["path"]) == ("POST", UPLOAD_PATH):
            # FastAPI reads a form before it resolves the caller: a request with no valid key is refused before
            # a byte of its upload is spooled.
            try:
                await refuse_before_body(Request(scope))
            except RagError as exc:
                await rag_error_response(scope["method"], scope["path"], exc)(scope, receive, send)
                return
        limit = body_limit(scope["method"], scope["path"], self.upload_bytes)
        length = dict(scope.get("headers") or ()).get(b"content-length", b"")
        if length.strip().isdigit() and int(length) > limit:
            await _too_large(scope["method"], scope["path"], self.upload_bytes)(scope, receive, send)
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
        specific = {"/documents": embeds, UPLOAD_PATH: embeds, "/retrieve-context": embeds, "/crawl": web,
                    "/chat-messages": embeds,
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
    # Body limits, and unexpected errors answered without dropping the connection.
    app.add_middleware(_RequestGuard, upload_bytes=upload_limit(settings))
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
