"""The REST endpoints: one short adapter per endpoint, each checking the caller's sites and calling one
Workbench method."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import logging
import queue
import threading
import uuid
from typing import Annotated, Any, Callable, Iterator

from fastapi import FastAPI, Form, Query, Request
from fastapi.encoders import jsonable_encoder
from fastapi.responses import JSONResponse, StreamingResponse

from rag_core.api import schemas as s
from rag_core.api.auth import DENIED, Principal
from rag_core.chat.sessions import ChatSession
from rag_core.jobs.records import JobInfo
from rag_core.errors import (
    CrawlRefused, FetchError, InvalidInput, LoaderError, NotFound, RagError, Unauthorized,
)
from rag_core.ingest.pipeline import IngestReport
from rag_core.limits import MAX_DOCUMENT_CHARS
from rag_core.security.ids import DEFAULT_SITE
from rag_core.workbench import Workbench

from rag_core.api.access import (
    Background, Caller, FastJSONResponse, JobPath, SessionPath, SiteQuery, UserQuery, WorkbenchDep, _client, _text,
)

log = logging.getLogger(__name__)

_ERRORS: dict[int | str, dict[str, Any]] = {404: {"model": s.ErrorResponse, "description": "Nothing to delete"}}
_ADMIN = "Needs the admin key (RAG_ADMIN_API_KEY)."
_QUEUED: dict[int | str, dict[str, Any]] = {202: {"model": s.JobQueued,
                                                  "description": "With `?background=true`: the job queued"}}
_NO_JOB: dict[int | str, dict[str, Any]] = {404: {"model": s.ErrorResponse,
                                                  "description": "No such job, or one of another site (NOT_FOUND)"}}

UPLOAD_PATH = "/documents/files"
REINDEX_IN_BACKGROUND = ("A reindex re-embeds every chunk of every site and can run for hours, longer than a client or "
                         "proxy waits for an answer; send POST /reindex?background=true and follow GET /jobs/{job_id}.")

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


def _charge_ingest(request: Request, caller: Principal, cost: int) -> None:
    """Count `cost` characters against the caller's ingest budget (RAG_INGEST_CHAR_LIMIT) before any work."""
    request.app.state.ingest_budget.hit(_client(request) if request.app.state.keys.open else caller.identity,
                                        cost=cost)


def _queued(job_id: int) -> JSONResponse:
    return JSONResponse({"job_id": job_id, "status_url": f"/jobs/{job_id}"}, status_code=202)


# ----- errors: the one place they are mapped -----


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

    @app.get("/health/ready", response_model=s.ReadyOut, response_model_exclude_unset=True, tags=["service"],
             summary="Readiness: the database answers (no key needed)",
             responses={503: {"model": s.ErrorResponse,
                              "description": "The database does not answer (DATABASE_ERROR)"}})
    def ready(wb: WorkbenchDep) -> dict[str, Any]:
        """200 when a query on the database succeeds, 503 DATABASE_ERROR at once while it is down or restarting;
        with read replicas, how many serve, lag or are down (counts only: no key is needed here)."""
        out: dict[str, Any] = {"status": "ready", "database": wb.check_database()}
        replicas = [r["state"] for r in wb.read_replicas()]
        if replicas:
            out["read_replicas"] = {state: replicas.count(state) for state in ("ok", "lagging", "down")}
        return out

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
        _charge_ingest(request, caller, len(body.content))
        if background:
            return _queued(wb.enqueue_texts([{"source": body.source, "text": body.content, "title": body.title}],
                                            site_id=body.site_id))
        outcome = wb.ingest_text(body.source, body.content, site_id=body.site_id, title=body.title)
        if outcome.status == "failed":
            raise LoaderError(f"'{body.source}' could not be indexed: {outcome.reason}", details={"source": body.source})
        out = {"id": outcome.document_id, "site_id": body.site_id, "source": outcome.source,
               "status": outcome.status, "chunks": outcome.chunks}
        return JSONResponse(out, status_code=201 if outcome.status == "indexed" else 200)

    @app.post(UPLOAD_PATH, response_model=s.UploadReportOut, tags=["documents"], summary="Upload files",
              responses={**_QUEUED})
    def upload_files(caller: Caller, wb: WorkbenchDep, request: Request,
                     form: Annotated[s.UploadIn, Form(media_type="multipart/form-data")],
                     background: Background = False) -> Any:
        """Ingest uploaded files (multipart/form-data, like `rag ingest`): a report per file, or 202 and the job id.

        The files of one request may hold RAG_MAX_FILE_MB together. A file that cannot be read fails alone,
        with its reason; the others are stored.
        """
        site = caller.site_for(form.site_id) or DEFAULT_SITE
        uploads = [(f.filename or "", f.file.read()) for f in form.files]
        # Charged in bytes before any work: the text is only extracted later, by a worker in the background,
        # and no file's text may pass MAX_DOCUMENT_CHARS, so no file counts more than a document may.
        _charge_ingest(request, caller, sum(min(len(data), MAX_DOCUMENT_CHARS) for _, data in uploads))
        if background:
            return _queued(wb.enqueue_uploads(uploads, site_id=site))
        report = IngestReport([wb.ingest_bytes(name, data, site_id=site) for name, data in uploads])
        return {"site_id": site, "files": [dataclasses.asdict(o) for o in report.outcomes], "chunks": report.chunks,
                **report.counts()}

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
        message = wb.chat_append(role=body.role, content=body.message, user_id=body.user_id, site_id=body.site_id)
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
        return JSONResponse(jsonable_encoder(s.wire_turn(turn.to_dict())))

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

    @app.post("/reindex", status_code=202, response_model=s.JobQueued, tags=["jobs"],
              summary="Re-embed every chunk (a background job)", description=_ADMIN)
    def reindex(caller: Caller, wb: WorkbenchDep, background: Background = False) -> Any:
        """Queue a reindex of every site (`rag reindex --background`): 202 and the job id. It runs only as a job
        (`?background=true`): it can outlast any request, and a job survives the client, shows its progress and
        resumes where it stopped."""
        caller.require_admin()
        if not background:
            raise InvalidInput(REINDEX_IN_BACKGROUND, details={"field": "background"})
        return _queued(wb.enqueue_reindex())

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
