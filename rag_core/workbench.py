"""The Workbench facade: the one object every front-end (app, API, MCP, CLI, notebooks) talks to."""

from __future__ import annotations

import functools
import logging
import threading
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, ParamSpec, Sequence, TypeVar, cast

from llama_index.core.base.embeddings.base import BaseEmbedding
from psycopg.types.json import Jsonb

from rag_core.progress import notebook_progress
from rag_core.records import Records, StoreStatus
from rag_core.db.database import (
    Database, create_database_if_missing, describe_url, upgrade_schema, with_database,
)
from rag_core.db.replicas import ReadRouter, ReplicaState
from rag_core.errors import EmbedderMismatch, InvalidInput, NotFound
from rag_core.ingest import store, vector_index
from rag_core.ingest.store import DeletedCounts, DocumentListing, ReindexSummary, StoreStatusInfo
from rag_core.ingest.types import Progress, TextRecord
from rag_core.ingest.loaders import SUPPORTED_TYPES, unsupported_reason
from rag_core.ingest.pipeline import (
    IngestPipeline, IngestReport, ProgressCallback, SourceItem, SourceOutcome, discover_files, file_item,
    sha256, text_item, category_for,
)
from rag_core.search.hybrid import fusion_for
from rag_core.search.retrieval import retrieve_chunks
from rag_core.ingest.sample import PROJECT_ROOT, sample_corpus_paths
from rag_core.security.documents import check_document
from rag_core.security.ids import DEFAULT_SITE, SAMPLE_SITE, check_id
from rag_core.security.text import check_label, file_name_problem
from rag_core.security.url_policy import CrawlAllowlist, canonical_url
from rag_core.search.responses import LatencyHistogram, LoggedSearch, SearchMetrics, SearchResponse, SearchResults
from rag_core.search.types import ChunkHit
from rag_core.providers.embeddings import (
    build_embedder, embedder_identity, embedding_dimension, store_embedder_settings, unknown_embedder,
)
from rag_core.settings import RagSettings, load_settings
from rag_core.units import parse_since

if TYPE_CHECKING:  # imported lazily at run time: each brings its own dependencies
    from datetime import date, timedelta

    from llama_index.core.llms.llm import LLM as LlamaLLM
    from llama_index.core.vector_stores.types import MetadataFilters

    from rag_core.chat.instructions import Instruction
    from rag_core.chat.retention import PurgeSummary, RetentionStatus
    from rag_core.chat.sessions import ChatMessage, ChatSession, SessionsDeleted, SessionSummary
    from rag_core.chat.turn import ChatTurn, PreparedTurn
    from rag_core.evaluation.judged import JudgedSet, SavedEvaluation
    from rag_core.ingest.web import WebIngestReport
    from rag_core.jobs.queue import JobQueue
    from rag_core.jobs.records import JobInfo
    from rag_core.llamaindex.engines import CitingChatEngine, CitingQueryEngine
    from rag_core.llamaindex.retriever import WorkbenchRetriever
    from rag_core.llamaindex.vector_store import WorkbenchVectorStore
    from rag_core.providers.llms import LLM
    from rag_core.search.service import SearchEngine

log = logging.getLogger(__name__)

CRAWL_ALLOWLIST_SETTING = "crawl_allowed_domains"  # app_settings row: domains an admin added in the app
MAX_SESSION_TITLE_CHARS = 200
SOURCE_LOCK_STRIPES = 64


_NOTICES_LOGGED: set[str] = set()  # databases whose embedder notice this process has logged


def _adoption_notice(stored: str, default: str) -> str:
    return (f"This store was built with {stored}; the default embedder is now {default} (better search in "
            f"every language). Run `rag reindex` to move this store over, or set RAG_EMBEDDER={stored} to keep "
            "it and silence this.")


_P = ParamSpec("_P")
_R = TypeVar("_R")


def _writes_sessions(method: Callable[_P, _R]) -> Callable[_P, _R]:
    """A method that writes chat sessions: the listings read after it (on a replica) show its write."""
    @functools.wraps(method)
    def wrapper(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        result = method(*args, **kwargs)
        cast("Workbench", args[0]).reads.note_write()
        return result
    return wrapper


class Workbench:
    """Ingestion, search, chat and evaluation over one PostgreSQL store."""

    def __init__(self, settings: RagSettings, db: Database, database_url: str, embedded: bool, *,
                 embedder: BaseEmbedding | None = None, reads: ReadRouter | None = None) -> None:
        """``embedder`` replaces the one the settings name (a model already loaded, a cached one);
        it must produce the vectors of ``settings.embedder``, whose name the store records.

        ``db`` is the primary, which takes every write; ``reads`` is where searches, chat retrieval and
        listings read (the read replicas of DATABASE_READ_URL); by default the primary too.

        With RAG_EMBEDDER left to its default, a store built with another embedder opens with that
        one (``embedder_notice`` says so and how to move the store over); a RAG_EMBEDDER set to
        another one than the store's is refused at first use (EmbedderMismatch).
        """
        self.requested_settings = settings  # what the caller asked for: `reindex` moves the store to it
        self.embedder_notice: str | None = None
        info = None if "embedder" in settings.model_fields_set else store.read_store_info(db)
        adopted = store_embedder_settings(settings, info[0]) if info else None
        if adopted is not None:
            self.embedder_notice = _adoption_notice(info[0], embedder_identity(settings))
            settings, embedder = adopted, None  # a model passed in is the default's, not the store's
        self.settings = settings
        self.db = db
        self.reads = reads if reads is not None else ReadRouter(db)
        self.database_url = database_url
        self.embedded = embedded
        self.embedder_name = embedder_identity(settings)
        self._embedder: BaseEmbedding | None = embedder
        self._embedder_lock = threading.Lock()
        self._store_checked = False
        # Ingests of one (site, source) in this process wait for each other, so the second finds the first's
        # version and skips embedding it again (across processes the store's own check reports 'unchanged').
        self._source_locks = [threading.Lock() for _ in range(SOURCE_LOCK_STRIPES)]

    # ----- models -----
    @property
    def embedder(self) -> BaseEmbedding:
        """The configured embedder, loaded on first use (which logs the embedder notice, once per process)."""
        with self._embedder_lock:
            if self._embedder is None:
                if self.embedder_notice and self.database_url not in _NOTICES_LOGGED:
                    _NOTICES_LOGGED.add(self.database_url)
                    log.warning(self.embedder_notice)
                self._embedder = build_embedder(self.settings)
            return self._embedder

    def _require_compatible_store(self) -> None:
        """Record the embedder on first use, or refuse a store built with another one."""
        if self._store_checked:
            return
        info = store.read_store_info(self.db)
        if info and info[0] == self.embedder_name:
            self._store_checked = True
            return
        dim = embedding_dimension(self.embedder)
        store.check_store_identity(self.db, self.embedder_name, dim)
        self._store_checked = True

    def embedder_mismatch(self) -> str | None:
        """The mismatch message when the store was built with another embedder, else None; a RAG_EMBEDDER that
        names no embedder gets the list of known ones (`rag reindex` would only fail on it)."""
        unknown = unknown_embedder(self.settings.embedder)
        if unknown:
            return unknown
        info = store.read_store_info(self.db)
        if info is None or info[0] == self.embedder_name:
            return None
        return (f"This store was built with '{info[0]}' ({info[1]} dimensions) but RAG_EMBEDDER is "
                f"'{self.embedder_name}'; run `rag reindex` or set RAG_EMBEDDER back to '{info[0]}'.")

    # ----- ingestion -----
    def ingest_paths(self, paths: Sequence[str | Path], include: Sequence[str] = (), exclude: Sequence[str] = (),
                     site_id: str = DEFAULT_SITE, progress: ProgressCallback | None = None) -> IngestReport:
        """Ingest files and folders (recursively); unchanged files are skipped without embedding."""
        check_id(site_id, "site_id")
        self._require_compatible_store()
        files, problems = discover_files(paths, include, exclude)
        max_bytes = int(self.settings.max_file_mb * 1_000_000)
        items: list[SourceItem] = []
        for path in files:
            try:
                items.append(file_item(path, site_id, max_bytes))
            except (OSError, InvalidInput) as exc:
                problems.append(SourceOutcome(path.as_posix(), "failed", reason=str(exc), site_id=site_id))
            except Exception as exc:  # LoaderError for oversized files
                problems.append(SourceOutcome(path.as_posix(), "failed", reason=getattr(exc, "message", str(exc)),
                                              site_id=site_id))
        return self._run(items, progress, preloaded=problems)

    def vanished_sources(self, paths: Sequence[str | Path], site_id: str = DEFAULT_SITE) -> list[str]:
        """Stored sources under the given folders whose files are gone (deleted or renamed since they were
        ingested): re-ingesting a folder does not remove them, so they would still be found and cited."""
        folders = [Path(p).expanduser().resolve().as_posix().rstrip("/") + "/" for p in paths
                   if Path(p).expanduser().is_dir()]
        return [s for s in store.sources_under(self.db, site_id, folders) if not Path(s).exists()]

    def ingest_sample_corpus(self, site_id: str = SAMPLE_SITE,
                             progress: ProgressCallback | None = None) -> IngestReport:
        """Ingest the project's own README.md and docs/*.md (the first-run sample corpus) into the site
        `sample`, which 'every site' leaves out: its passages never come back among a user's own sources."""
        paths = sample_corpus_paths()
        if not paths:
            raise NotFound(f"The sample corpus (README.md and docs/*.md) is not in {PROJECT_ROOT}; "
                           "run from a source checkout or ingest your own folder instead.")
        return self.ingest_paths(paths, site_id=site_id, progress=progress)

    def remove_sample_corpus(self) -> DeletedCounts:
        """Delete the sample corpus: every document of the site `sample`, with its chunks."""
        docs, chunks = store.delete_site_documents(self.db, SAMPLE_SITE)
        self._after_write()
        return DeletedCounts(documents=docs, chunks=chunks)

    def ingest_text(self, source: str, text: str, *, site_id: str = DEFAULT_SITE, title: str | None = None,
                    file_type: str = "txt", metadata: dict[str, Any] | None = None) -> SourceOutcome:
        """Ingest raw text under a source name; the same source again replaces it."""
        check_document(site_id, source, text or "")
        if not text or not text.strip():
            raise InvalidInput(f"content of '{source}' is empty; send the document's full text.")
        check_label(title, "title")
        with self._source_locks[hash((site_id, source.strip())) % SOURCE_LOCK_STRIPES]:
            report = self._run([text_item(source.strip(), text, site_id, title, file_type, metadata)], None)
        return report.outcomes[0]

    def ingest_texts(self, records: Sequence[TextRecord], *, site_id: str,
                     progress: ProgressCallback | None = None) -> IngestReport:
        """Ingest many texts (dicts with source, text and optional title, metadata) in one run; a text the document
        rules refuse (`security/documents.py`) is reported as failed, the others are stored."""
        check_id(site_id, "site_id")
        self._require_compatible_store()
        items = [text_item(r["source"], r["text"], site_id, r.get("title"), r.get("file_type", "txt"),
                           r.get("metadata")) for r in records if r.get("text", "").strip()]
        return self._run(items, progress)

    def ingest_bytes(self, name: str, data: bytes, *, site_id: str = DEFAULT_SITE, source: str | None = None) -> SourceOutcome:
        """Ingest an uploaded file's bytes; its type comes from the name's suffix."""
        from rag_core.ingest.loaders import load_bytes

        check_id(site_id, "site_id")
        suffix = Path(name).suffix.lower()
        if suffix not in SUPPORTED_TYPES:
            return SourceOutcome(source or name, "failed", site_id=site_id,
                                 reason=unsupported_reason(name))
        src = source or name
        bad_name = file_name_problem(name)
        if bad_name:
            return SourceOutcome(src, "failed", site_id=site_id, reason=bad_name)
        check_label(source, "source")
        item = SourceItem(source=src, site_id=site_id, content_hash=sha256(data), file_size=len(data),
                          category=category_for(src), load=lambda: load_bytes(data, SUPPORTED_TYPES[suffix], name=name),
                          metadata={"file_name": name, "uploaded": True}, file_bytes=True,
                          received_at=datetime.now(timezone.utc))
        return self._run([item], None).outcomes[0]

    # ----- web -----
    def crawl_allowlist(self) -> CrawlAllowlist:
        """The domains the crawler may fetch: the environment's (RAG_ALLOWED_DOMAINS, the floor), the ones
        an admin stored in the database, and their union, which every crawl uses."""
        with self.db.connection() as conn:
            row = conn.execute("SELECT value, updated_at, updated_by FROM app_settings WHERE name = %s",
                               (CRAWL_ALLOWLIST_SETTING,)).fetchone()
        environment = list(self.settings.allowed_domains or [])
        stored = [d for d in (row[0] if row else []) if d not in environment]
        return CrawlAllowlist(environment=environment, stored=stored, effective=environment + stored,
                              updated_at=row[1] if row else None, updated_by=row[2] if row else None)

    def set_crawl_allowlist(self, domains: Sequence[str] | str, updated_by: str = "admin") -> CrawlAllowlist:
        """Store the domains an admin allows on top of the environment's; an entry like `example.com`,
        `*.example.com`, `example.com:8080` or a URL. Returns the new `crawl_allowlist()`."""
        from rag_core.security.url_policy import parse_entry

        if isinstance(domains, str):
            domains = domains.replace("\n", ",").split(",")
        entries: list[str] = []
        for raw in domains:
            text = str(raw).strip().lower().rstrip(".")
            if not text:
                continue
            try:
                parse_entry(text)
            except ValueError as exc:
                raise InvalidInput(f"'{raw}' is not a domain the crawler can allow ({exc}); write it as "
                                   "example.com, *.example.com or example.com:8080.") from None
            if " " in text or "/" in text.split("://", 1)[-1].rstrip("/"):
                raise InvalidInput(f"'{raw}' is not a domain; write the host only, e.g. example.com.")
            if text not in entries:
                entries.append(text)
        with self.db.connection() as conn:
            conn.execute(
                "INSERT INTO app_settings (name, value, updated_by) VALUES (%s, %s, %s) ON CONFLICT (name) DO UPDATE"
                " SET value = EXCLUDED.value, updated_at = now(), updated_by = EXCLUDED.updated_by",
                (CRAWL_ALLOWLIST_SETTING, Jsonb(entries), updated_by))
        return self.crawl_allowlist()

    def _crawl_settings(self) -> RagSettings:
        """The settings a crawl runs with: the allowlist is the environment's plus the stored one."""
        effective = self.crawl_allowlist()["effective"]
        if effective == list(self.settings.allowed_domains or []):
            return self.settings
        return self.settings.model_copy(update={"allowed_domains": effective})

    def check_url(self, url: str) -> str:
        """The URL as the crawler would fetch it, or CrawlRefused naming the rule and the fix (no request is made).

        Front-ends that run crawls in the background call it first so a refusal is answered at once.
        """
        from rag_core.security.url_policy import UrlPolicy

        # The URL is one the user asked for, so its own port counts as allowed, as in a real crawl.
        return UrlPolicy(self._crawl_settings()).check(url, start=True)

    def ingest_url(self, url: str, site_id: str = DEFAULT_SITE,
                   progress: ProgressCallback | None = None) -> WebIngestReport:
        """Fetch and ingest one web page (`rag add`); a URL the crawl policy refuses raises CrawlRefused."""
        from rag_core.ingest import web

        check_id(site_id, "site_id")
        self._require_compatible_store()
        with notebook_progress(progress, "fetching", unit="page") as progress:
            report = web.ingest_url(self.db, lambda: self.embedder, self._crawl_settings(), url, site_id=site_id,
                                    progress=progress)
        self._after_write()
        return report

    def ingest_index(self, index_url: str, pattern: str = "", site_id: str = DEFAULT_SITE,
                     progress: ProgressCallback | None = None) -> WebIngestReport:
        """Ingest the pages linked from an index page (depth 1) whose URL matches the regex `pattern`."""
        from rag_core.ingest import web

        check_id(site_id, "site_id")
        self._require_compatible_store()
        with notebook_progress(progress, "pages", unit="page") as progress:
            report = web.ingest_index(self.db, lambda: self.embedder, self._crawl_settings(), index_url, pattern,
                                      site_id=site_id, progress=progress)
        self._after_write()
        return report

    def _run(self, items: list[SourceItem], progress: ProgressCallback | None,
             preloaded: Sequence[SourceOutcome] = ()) -> IngestReport:
        self._require_compatible_store()
        pipeline = IngestPipeline(self.db, self.embedder, self.settings)
        with notebook_progress(progress, "ingest") as progress:
            report = pipeline.run(items, progress=progress, preloaded=preloaded)
        self._after_write()
        return report

    def _after_write(self) -> None:
        """Hook for caches that depend on the store's content (the search cache clears here).

        The reads that follow wait for a replica that has this write (none is cached before that)."""
        self.reads.note_write()
        engine = self.__dict__.get("_search_engine")
        if engine is not None:
            engine.invalidate()

    def delete_source(self, source: str, site_id: str | None = None) -> DeletedCounts:
        """Delete a source (path or URL) with its chunks; a relative path is resolved like `rag ingest` does."""
        if not source or not source.strip():
            raise InvalidInput("source is empty; give the path or URL shown by `rag status` or the sources table.")
        candidates = [source.strip()]
        if source.strip().lower().startswith(("http://", "https://")):
            try:
                candidates.append(canonical_url(source))
            except ValueError:
                pass  # not a URL the crawler could have stored: only the text as given can match
        else:
            resolved = Path(source).expanduser().resolve().as_posix()
            if resolved not in candidates:
                candidates.append(resolved)
        docs = chunks = 0
        for cand in candidates:
            d, c = store.delete_source(self.db, cand, site_id)
            docs, chunks = docs + d, chunks + c
            if d:
                break
        self._after_write()
        return DeletedCounts(documents=docs, chunks=chunks)

    # ----- retrieval -----
    def retrieve(self, query: str, *, k: int = 5, site_id: str | None = None) -> list[ChunkHit]:
        """Top-k chunks for a query (chat, the chat-memory context), ranked by the same SQL as `search`."""
        self._require_compatible_store()
        return retrieve_chunks(self.reads, self.embedder, query, k=k, site_id=site_id,
                               fusion=fusion_for(self.embedder_name))

    # ----- search -----
    @property
    def search_engine(self) -> SearchEngine:
        """The search spec's search with its cache and reranker, built on first use."""
        engine = self.__dict__.get("_search_engine")
        if engine is None:
            from rag_core.search.service import SearchEngine

            engine = self.__dict__.setdefault(
                "_search_engine",
                SearchEngine(self.db, self.settings, lambda: self.embedder, self._require_compatible_store,
                             fusion=fusion_for(self.embedder_name), reads=self.reads))
        return engine

    def search(self, query: str, mode: str = "hybrid", limit: int = 10, page: int = 1,
               types: Sequence[str] | str | None = None, date_from: str | date | None = None,
               date_to: str | date | None = None, source: str | None = None,
               site_id: str | None = None, include_context: bool = True, max_chunks: int = 3,
               user_id: str | None = None, typed: bool | None = None) -> SearchResponse:
        """Search documents (the search spec): hybrid, semantic or full text, with filters, facets and suggestions.

        Returns the response dict (success, query, total_results, search_time, results, facets,
        suggestions). total_results and the facets count every document among the candidates
        after filters (the best 100 chunks of each ranking, more for deep pages), not one page.
        Problems raise RagError subclasses (InvalidQuery, IndexUnavailable, DatabaseError);
        `exc.to_dict()` is the error JSON.

        Args:
            types: document types (pdf, docx, xlsx, txt, md, csv, html), a list or a comma list.
            date_from: first day (YYYY-MM-DD) of the documents' date, inclusive; date_to likewise.
            source: an absolute path or URL prefix, or any part of the source path.
            site_id: one site; None searches every site except the evaluation sites ('eval:*') and the sample ('sample').
            max_chunks: context chunks per document (1-10).
            typed: whether the user typed this query (True) or a page, filter or chart click repeated it
                (False); only typed searches count as popular queries. None: not known (counted).
        """
        # A SearchResults is the response dict under a type of its own, which a notebook shows as HTML.
        return cast("SearchResponse", SearchResults(self.search_engine.search(
            query, mode=mode, limit=limit, page=page, types=types, date_from=date_from, date_to=date_to,
            source=source, site_id=site_id, include_context=include_context, max_chunks=max_chunks, user_id=user_id,
            typed=typed)))

    def flush_search_log(self, timeout: float = 30.0) -> bool:
        """Wait until this process's searches so far are in the query log (it is written in the background)."""
        from rag_core.search.querylog import flush_query_log

        return flush_query_log(self.db, timeout)

    def search_metrics(self, site_id: str | None = None, since: datetime | timedelta | str | None = None
                       ) -> SearchMetrics:
        """Searches, errors, zero-result count, average and p95 latency, popular and zero-result queries, per day.

        ``since`` is a datetime, a timedelta back from now, or text: "7d", "12h", "2024-01-31" (InvalidInput otherwise).
        """
        return self.search_engine.metrics(site_id=site_id, since=parse_since(since))

    def query_log(self, site_id: str | None = None, since: datetime | timedelta | str | None = None,
                  limit: int = 1000) -> Records[LoggedSearch]:
        """The latest searches, newest first (query, mode, results, ms, error code, cache, when, who);
        `.to_pandas()` makes a DataFrame of them. Every site but the evaluation sites and the sample when site_id is None."""
        from rag_core.search.querylog import recent_searches

        if not 1 <= int(limit) <= 100_000:
            raise InvalidInput(f"limit is {limit}; choose between 1 and 100000 searches.")
        return Records(recent_searches(self.reads, site_id=site_id, since=parse_since(since), limit=int(limit)))

    def search_latency_histogram(self, site_id: str | None = None,
                                 since: datetime | timedelta | str | None = None) -> LatencyHistogram:
        """Successful searches per latency bucket (ms), with p50 and p95, from the query log."""
        from rag_core.search.querylog import latency_histogram

        return latency_histogram(self.reads, site_id=site_id, since=parse_since(since))

    # ----- LlamaIndex -----
    def as_retriever(self, mode: str = "hybrid", k: int = 5, site_id: str | None = None,
                     filters: MetadataFilters | None = None, **kwargs: Any) -> WorkbenchRetriever:
        """This store's retrieval as a LlamaIndex BaseRetriever (hybrid, semantic or fulltext; MetadataFilters)."""
        from rag_core.llamaindex.retriever import WorkbenchRetriever

        return WorkbenchRetriever(self, mode=mode, k=k, site_id=site_id, filters=filters, **kwargs)

    @property
    def vector_store(self) -> WorkbenchVectorStore:
        """This store's tables as a LlamaIndex vector store (for VectorStoreIndex.from_vector_store).

        LlamaIndex's Settings.embed_model and Settings.llm, when unset, become this embedder and answerer.
        """
        from rag_core.llamaindex.vector_store import WorkbenchVectorStore, fill_llamaindex_defaults

        fill_llamaindex_defaults(self)
        return WorkbenchVectorStore(self)

    def as_query_engine(self, llm: LlamaLLM | None = None, **kwargs: Any) -> CitingQueryEngine:
        """A LlamaIndex RetrieverQueryEngine over this store; any LlamaIndex LLM, RAG_LLM's answerer by default.

        kwargs: retriever, node_postprocessors, response_mode, or as_retriever's mode, k, site_id, filters.
        Each response's metadata holds its sources, citations and the rendered Sources/Answer text.
        """
        from rag_core.llamaindex.engines import query_engine

        return query_engine(self, llm=llm, **kwargs)

    def as_chat_engine(self, session_id: str, llm: LlamaLLM | None = None,
                       **kwargs: Any) -> CitingChatEngine:
        """A LlamaIndex CondensePlusContextChatEngine whose history is chat session `session_id` (app, CLI)."""
        from rag_core.llamaindex.engines import chat_engine

        return chat_engine(self, session_id, llm=llm, **kwargs)

    # ----- chat -----
    @property
    def llm(self) -> LLM:
        """The configured answerer (RAG_LLM), built on first use."""
        llm = getattr(self, "_llm", None)
        if llm is None:
            from rag_core.providers.llms import build_llm

            llm = self._llm = build_llm(self.settings, lambda: self.embedder)
        return llm

    @_writes_sessions
    def chat(self, message: str, session_id: str | None = None, k: int = 5, site_id: str | None = None,
             user_id: str | None = None, resource_name: str | None = None,
             on_token: Callable[[str], None] | None = None, language: str | None = None) -> ChatTurn:
        """One chat turn with the session's history and the documents; the answer carries its sources.

        Args:
            resource_name: which of the site's agent instructions is the system prompt (default: the
                most recently updated active one).
            on_token: receives the answer piece by piece as the model streams it.
            language: en, ru or ja for this turn's labels and fixed statements (default RAG_LANGUAGE);
                a front-end that knows its user's language (Slack) passes it.
        """
        from rag_core.chat.turn import run_turn

        return run_turn(self, message, session_id=session_id, k=k, site_id=site_id, user_id=user_id,
                        resource_name=resource_name, on_token=on_token, language=language)

    @_writes_sessions
    def chat_prepare(self, message: str, session_id: str | None = None, k: int = 5, site_id: str | None = None,
                     user_id: str | None = None, resource_name: str | None = None) -> PreparedTurn:
        """A turn for a client that answers with its own model: stores the message, returns history,
        CONTEXT and the sources; the client stores its answer with `chat_append(..., sources=citations)`."""
        from rag_core.chat.turn import prepare_turn

        return prepare_turn(self, message, session_id=session_id, k=k, site_id=site_id, user_id=user_id,
                            resource_name=resource_name)

    def chat_history(self, session_id: str, limit: int = 20) -> list[ChatMessage]:
        """The session's last `limit` messages, oldest first, assistant messages with their citations."""
        from rag_core.chat import sessions

        if not 1 <= int(limit) <= 1000:
            raise InvalidInput(f"limit is {limit}; choose between 1 and 1000 messages.")
        return sessions.history(self.db, session_id, int(limit))

    @_writes_sessions
    def chat_append(self, session_id: str, role: str, content: str,
                    sources: list[dict[str, Any]] | None = None) -> ChatMessage:
        """Store one message in a session (created on first use); role is user, assistant or system."""
        from rag_core.chat import sessions

        return sessions.append_message(self.db, sessions.check_chat_session_id(session_id), role, content,
                                       sources=sources)

    @_writes_sessions
    def chat_reset(self, session_id: str) -> SessionsDeleted:
        """Forget a session: delete it and its messages."""
        from rag_core.chat import sessions

        return sessions.reset(self.db, session_id)

    @_writes_sessions
    def rename_session(self, session_id: str, title: str) -> ChatSession:
        """Give a conversation a new title; returns the session (NotFound when there is none)."""
        from rag_core.chat import sessions

        title = (title or "").strip()
        if not title:
            raise InvalidInput("The title is empty; type a name for the conversation.")
        if len(title) > MAX_SESSION_TITLE_CHARS:
            raise InvalidInput(f"The title is {len(title)} characters; the limit is {MAX_SESSION_TITLE_CHARS}.")
        sessions.check_chat_session_id(session_id)
        with self.db.connection() as conn:
            updated = conn.execute("UPDATE chat_sessions SET title = %s WHERE id = %s", (title, session_id)).rowcount
        session = sessions.get_session(self.db, session_id) if updated else None
        if session is None:
            raise NotFound(f"No conversation '{session_id}'; pick one from the list of conversations.")
        return session

    def delete_session(self, session_id: str) -> SessionsDeleted:
        """Delete one conversation and its messages (NotFound when there is none)."""
        result = self.chat_reset(session_id)
        if not result["sessions"]:
            raise NotFound(f"No conversation '{session_id}'; it may have been deleted already.")
        return result

    def list_sessions(self, site_id: str | None = None, user_id: str | None = None,
                      limit: int = 100) -> list[SessionSummary]:
        """Chat sessions, most recently active first, with message counts."""
        from rag_core.chat import sessions

        return sessions.list_sessions(self.reads, site_id, user_id, limit)

    def get_session(self, session_id: str) -> ChatSession | None:
        """One chat session (id, site_id, user_id, title, created_at, updated_at), or None."""
        from rag_core.chat import sessions

        return sessions.get_session(self.db, session_id)

    @_writes_sessions
    def add_chat_message(self, user_id: str, site_id: str, role: str, message: str) -> ChatMessage:
        """Store an external workflow's message (role 'user' or 'ai') for one user on one site."""
        from rag_core.chat import sessions

        mapped = {"user": "user", "ai": "assistant", "assistant": "assistant"}.get((role or "").strip().lower())
        if mapped is None:
            raise InvalidInput(f"role '{role}' is not allowed; use 'user' or 'ai'.")
        if not user_id or not str(user_id).strip() or not site_id or not str(site_id).strip():
            raise InvalidInput("user_id and site_id are required; give the user and the site of the message.")
        return sessions.append_message(self.db, sessions.external_session_id(user_id, site_id), mapped, message,
                                       site_id=site_id, user_id=user_id, title=f"{user_id} on {site_id}")

    def retrieve_context(self, user_id: str, site_id: str, query: str, k: int = 5) -> str:
        """The workflow-service spec's context string: the site's relevant knowledge, the user's last messages."""
        from rag_core.chat.context import retrieve_context

        return retrieve_context(self, user_id, site_id, query, k=k)

    def create_instruction(self, site_id: str, resource_name: str, instruction_text: str) -> Instruction:
        """Create version 1 of an agent instruction for a site and resource."""
        from rag_core.chat import instructions

        return instructions.save_instruction(self.db, site_id, resource_name, instruction_text, must_exist=False)

    def update_instruction(self, site_id: str, resource_name: str, instruction_text: str) -> Instruction:
        """Write the next version of an instruction and make it the active one."""
        from rag_core.chat import instructions

        return instructions.save_instruction(self.db, site_id, resource_name, instruction_text, must_exist=True)

    def list_instructions(self, site_id: str, resource_name: str | None = None,
                          all_versions: bool = False) -> list[Instruction]:
        """A site's instructions: the latest version of each resource, or every version."""
        from rag_core.chat import instructions

        return instructions.list_instructions(self.db, site_id, resource_name, all_versions)

    def get_instruction(self, site_id: str, resource_name: str, version: int | None = None) -> Instruction:
        """One version of an instruction (the latest by default)."""
        from rag_core.chat import instructions

        return instructions.get_instruction(self.db, site_id, resource_name, version)

    def get_active_instruction(self, site_id: str, resource_name: str | None = None) -> Instruction | None:
        """The instruction chats of the site use as system prompt, or None."""
        from rag_core.chat import instructions

        return instructions.active_instruction(self.db, site_id, resource_name)

    def activate_instruction(self, site_id: str, resource_name: str, version: int) -> Instruction:
        """Make an earlier version of an instruction the active one again."""
        from rag_core.chat import instructions

        return instructions.activate_instruction(self.db, site_id, resource_name, version)

    def delete_instruction(self, site_id: str, resource_name: str, version: int | None = None) -> int:
        """Delete every version of an instruction, or one version; returns the rows deleted."""
        from rag_core.chat import instructions

        return instructions.delete_instruction(self.db, site_id, resource_name, version)

    @_writes_sessions
    def purge_chat_history(self, older_than: timedelta | None = None, dry_run: bool = False,
                           triggered_by: str = "manual") -> PurgeSummary:
        """Delete chat messages older than the policy (RAG_RETENTION_DAYS) and sessions left empty; audited."""
        from datetime import timedelta

        from rag_core.chat import retention

        older_than = older_than if older_than is not None else timedelta(days=self.settings.retention_days)
        return retention.purge_chat_history(self.db, older_than, dry_run=dry_run, triggered_by=triggered_by)

    def retention_status(self) -> RetentionStatus:
        """Retention policy, message counts, oldest message, age histogram and the last purges."""
        from rag_core.chat import retention

        return retention.retention_status(self.db, self.settings.retention_days, self.settings.retention_time)

    # ----- a user's own judged queries -----
    def _stored_sources(self, site_id: str) -> Callable[[list[str]], set[str]]:
        """Which of some sources the site stores (judgements name sources that may since have been deleted)."""
        def stored(candidates: list[str]) -> set[str]:
            return store.stored_sources(self.db, site_id, candidates)

        return stored

    def judged_queries(self, site_id: str = DEFAULT_SITE) -> JudgedSet:
        """The site's judged queries (marked on the Search page or uploaded), kept in BEIR layout; each lists
        the relevant sources deleted from the site since (`deleted`)."""
        from rag_core.evaluation import judged

        return judged.judged_set(self.settings.data_dir, site_id, self._stored_sources(site_id))

    def mark_relevant(self, query: str, source: str, site_id: str = DEFAULT_SITE, title: str = "",
                      relevant: bool = True) -> JudgedSet:
        """Judge a search hit: `source` answers `query` (relevant=False withdraws the judgement)."""
        from rag_core.evaluation import judged

        return judged.mark_relevant(self.settings.data_dir, site_id, query, source, title, relevant,
                                    stored=self._stored_sources(site_id))

    def import_judged_queries(self, queries: bytes, qrels: bytes, site_id: str = DEFAULT_SITE) -> JudgedSet:
        """Add a queries file (BEIR queries.jsonl, or id<TAB>text) and a qrels.tsv whose corpus ids are the
        site's stored sources to the site's judged set."""
        from rag_core.evaluation import judged

        return judged.import_judged(self.settings.data_dir, site_id, queries, qrels, self._stored_sources(site_id))

    def evaluate_judged(self, site_id: str = DEFAULT_SITE, mode: str = "hybrid", k: int = 5,
                        progress: Callable[[int, int], None] | None = None) -> SavedEvaluation:
        """Score the site's judged queries against its stored documents with the evaluation runner; the
        result (the JSON of `rag eval`, per query included) is kept for the Analytics page.

        A relevant source deleted from the site since it was judged is no miss of search: a query is scored
        on its relevant sources still stored, one with none left is not scored, and both are listed under
        `deleted_judgements`."""
        from rag_core.evaluation import judged
        from rag_core.evaluation.runner import evaluate_dataset

        ds, deleted = judged.without_deleted(judged.load_judged(self.settings.data_dir, site_id),
                                             self._stored_sources(site_id))
        if not ds.judged_queries:
            raise InvalidInput(f"Every judged query of site '{site_id}' names only sources deleted from the site "
                               f"since ({', '.join(sorted({d for j in deleted for d in j['deleted']})[:3])}); "
                               "ingest them again or judge hits of the stored documents on the Search page.")
        result = evaluate_dataset(self, ds, mode=mode, k=k, query_progress=progress, site_id=site_id)
        data = {**result.to_dict(per_query=True), "dataset": f"your judged queries ({site_id})",
                "deleted_judgements": deleted}
        judged.save_result(self.settings.data_dir, site_id, data)
        return data

    def judged_results(self, site_id: str = DEFAULT_SITE) -> list[SavedEvaluation]:
        """The saved evaluations of the site's judged queries, one per mode."""
        from rag_core.evaluation import judged

        return judged.saved_results(self.settings.data_dir, site_id)

    # ----- background jobs -----
    @property
    def job_queue(self) -> JobQueue:
        """The store's job queue (procrastinate on the same database), built on first use."""
        queue = self.__dict__.get("_job_queue")
        if queue is None:
            from rag_core.jobs.queue import JobQueue

            queue = self.__dict__.setdefault("_job_queue", JobQueue(self.database_url, self.db, self.settings))
        return queue

    def _enqueue(self, kind: str, site_id: str | None, args: dict[str, Any], description: str | None = None) -> int:
        job_id = self.job_queue.enqueue(kind, site_id, args, description)
        if self.__dict__.get("_hosts_jobs"):
            self.job_queue.ensure_worker(self)
        return job_id

    def enqueue_ingest(self, paths: Sequence[str | Path], include: Sequence[str] = (), exclude: Sequence[str] = (),
                       site_id: str = DEFAULT_SITE, prune: bool = False) -> int:
        """Queue `ingest_paths` as a background job; returns its id. Paths are read by the worker that takes it."""
        absolute = [Path(p).expanduser().resolve().as_posix() for p in paths]
        if not absolute:
            raise InvalidInput("No path given; name the files or folders to ingest.")
        return self._enqueue("ingest", site_id, {"paths": absolute, "site_id": site_id, "include": list(include),
                                                 "exclude": list(exclude), "prune": prune})

    def enqueue_uploads(self, files: Sequence[tuple[str, bytes]], site_id: str = DEFAULT_SITE) -> int:
        """Queue uploaded files (name, bytes) as one job; they wait in the database until it stored them."""
        import uuid

        from rag_core.jobs import records

        if not files:
            raise InvalidInput("No file given; choose the files to upload.")
        batch = uuid.uuid4().hex
        records.save_files(self.db, batch, files)
        names = [name for name, _ in files]
        try:
            return self._enqueue("upload", site_id, {"batch": batch, "site_id": site_id},
                                 ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else ""))
        except Exception:
            records.drop_files(self.db, batch)
            raise

    def enqueue_texts(self, texts: Sequence[TextRecord], site_id: str = DEFAULT_SITE) -> int:
        """Queue texts (source, text, optional title and metadata) for ingestion as one job."""
        for record in texts:  # refused now, with the rules every stored document meets, not in the worker
            check_document(site_id, record.get("source"), record.get("text", ""))
        return self._enqueue("texts", site_id, {"texts": [dict(t) for t in texts], "site_id": site_id})

    def enqueue_crawl(self, index_url: str, pattern: str = "", site_id: str = DEFAULT_SITE) -> int:
        """Queue `ingest_index`; a URL the crawl policy refuses is refused now, not in the worker."""
        self.check_url(index_url)
        return self._enqueue("crawl", site_id, {"index_url": index_url, "pattern": pattern, "site_id": site_id})

    def enqueue_page(self, url: str, site_id: str = DEFAULT_SITE) -> int:
        """Queue `ingest_url` (`rag add --background`); a refused URL is refused now."""
        self.check_url(url)
        return self._enqueue("add", site_id, {"url": url, "site_id": site_id})

    def enqueue_reindex(self) -> int:
        """Queue `reindex` (every site's chunks)."""
        return self._enqueue("reindex", None, {})

    def jobs(self, site_id: str | None = None, sites: Sequence[str] | None = None, limit: int = 50) -> list[JobInfo]:
        """Running and queued jobs first, then the latest finished ones; of one site, of some, or all."""
        from rag_core.jobs import records

        if not 1 <= int(limit) <= 1000:
            raise InvalidInput(f"limit is {limit}; choose between 1 and 1000 jobs.")
        wanted = [site_id] if site_id is not None else (list(sites) if sites is not None else None)
        return records.recent(self.db, wanted, int(limit))

    def job(self, job_id: int) -> JobInfo:
        """One job with its status, progress, errors and timestamps (NotFound when there is none)."""
        from rag_core.jobs import records

        info = records.get(self.db, int(job_id))
        if info is None:
            raise NotFound(f"No job {job_id}; `rag jobs list` shows the recent ones.")
        return info

    def cancel_job(self, job_id: int) -> JobInfo:
        """Cancel a queued job, or ask a running one to stop after its current file or batch."""
        info = self.job(job_id)
        if info["status"] not in ("queued", "running"):
            raise InvalidInput(f"Job {job_id} is {info['status']} already; only queued or running jobs can be "
                               "cancelled.")
        self.job_queue.cancel(int(job_id))
        return self.job(job_id)

    def job_workers_alive(self) -> int:
        """Workers whose heartbeat is recent (`rag worker` processes and in-process ones)."""
        return self.job_queue.workers_alive()

    def run_worker(self, concurrency: int = 1, wait: bool = True) -> None:
        """Take jobs until SIGTERM/SIGINT (or, with wait=False, until the queue is empty); `rag worker`."""
        if not 1 <= int(concurrency) <= 64:
            raise InvalidInput(f"concurrency is {concurrency}; choose between 1 and 64 jobs at once.")
        self.job_queue.run_worker(self, int(concurrency), wait=wait)

    def host_jobs(self) -> bool:
        """Run queued jobs in this process whenever no worker is alive (`rag serve`, the app); True if it does now."""
        self.__dict__["_hosts_jobs"] = True
        return self.job_queue.host(self)

    def stop_hosting_jobs(self) -> None:
        """Stop the job worker `host_jobs` started here (its running job finishes first)."""
        self.__dict__.pop("_hosts_jobs", None)
        queue = self.__dict__.get("_job_queue")
        if queue is not None:
            queue.stop_in_process()

    # ----- status -----
    def read_replicas(self) -> list[ReplicaState]:
        """Each read replica (DATABASE_READ_URL) as its last check saw it: ok, lagging or down, with the lag."""
        return self.reads.states()

    def check_database(self) -> str:
        """'ok' when the database answers a query; DatabaseError at once while it is down or restarting."""
        return self.db.ping()

    def status(self, site_id: str | None = None) -> StoreStatusInfo:
        """Documents, chunks, sources, embedder, dimension and database size."""
        result = StoreStatusInfo(**store.store_status(self.db, site_id), configured_embedder=self.embedder_name,
                                 embedder_mismatch=self.embedder_mismatch(), embedder_notice=self.embedder_notice,
                                 database="embedded" if self.embedded else describe_url(self.database_url))
        if self.embedded:
            result["data_dir"] = str(self.settings.data_dir)
        # A StoreStatus is the dict under a type of its own, which a notebook shows as a table.
        return cast(StoreStatusInfo, StoreStatus(result))

    def documents(self, site_id: str | None = None, limit: int = 100, offset: int = 0) -> Records[DocumentListing]:
        """Stored documents, newest first."""
        return Records(store.list_documents(self.reads, site_id, limit, offset))

    # ----- maintenance -----
    def reindex(self, progress: ProgressCallback | None = None, batch: int = 512) -> ReindexSummary:
        """Re-embed every chunk with the configured embedder (resumable: rerun to continue).

        A store opened with its own embedder because RAG_EMBEDDER was left unset moves to the default.
        """
        if self.embedder_notice is not None:
            self._use_settings(self.requested_settings)
        with notebook_progress(progress, "re-embedding", unit="chunk") as progress:
            if progress:  # the total shows while the model loads
                progress(Progress(0, store.chunks_to_reembed(self.db, self.embedder_name), 0,
                                  current=f"loading {self.embedder_name}"))
            dim = embedding_dimension(self.embedder)
            store.begin_reindex(self.db, self.embedder_name, dim)
            done = store.reembed_missing(self.db, self.embedder, batch=batch, progress=progress)
        vector_index.ensure(self.db)
        self._store_checked = True
        self._after_write()
        return ReindexSummary(embedder=self.embedder_name, dimension=dim, chunks=done)

    def _use_settings(self, settings: RagSettings) -> None:
        """Switch this workbench to other settings' embedder (and everything built from it)."""
        with self._embedder_lock:
            self.settings = settings
            self.embedder_name = embedder_identity(settings)
            self._embedder = None
            self.embedder_notice = None
            self._store_checked = False
            self.__dict__.pop("_search_engine", None)
            self.__dict__.pop("_llm", None)

    def variant(self, **overrides: Any) -> "Workbench":
        """A workbench on the same store and loaded embedder with some settings changed (evaluation sweeps).

        It shares this one's connection pool: close only the original.
        """
        settings = self.settings.model_copy(update=overrides)
        if settings.chunk_overlap >= settings.chunk_size:
            raise InvalidInput(f"chunk_overlap ({settings.chunk_overlap}) must be smaller than chunk_size "
                               f"({settings.chunk_size}).")
        same_model = settings.embedder == self.settings.embedder and settings.embed_model == self.settings.embed_model
        # the model loads once
        return Workbench(settings, self.db, self.database_url, self.embedded,
                         embedder=self.embedder if same_model else None, reads=self.reads)

    def close(self) -> None:
        """Release the connection pools (the embedded server stops when the last process exits)."""
        queue = self.__dict__.get("_job_queue")
        if queue is not None:
            queue.close()
        self.reads.close()
        self.db.close()

    def __enter__(self) -> "Workbench":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def resolve_database(settings: RagSettings) -> tuple[str, bool]:
    """(database URL, embedded?) — DATABASE_URL when set, else the embedded server's 'rag' database."""
    if settings.database_url:
        return settings.database_url, False
    from rag_core.db.server import embedded_server_uri

    uri = with_database(embedded_server_uri(settings.data_dir), "rag")
    return uri, True


def upgrade_database(settings: RagSettings, embedder: BaseEmbedding | None = None) -> tuple[str, str, bool]:
    """Create the database when needed and apply every migration; returns (url, revision, embedded)."""
    url, embedded = resolve_database(settings)
    if embedded:
        create_database_if_missing(url)
    def dimension() -> int:
        if embedder is None:
            return embedding_dimension(build_embedder(settings))
        return len(embedder.get_query_embedding("dimension probe"))  # a query: caches of texts stay as they are

    revision = upgrade_schema(url, dimension)
    return url, revision, embedded


def open_workbench(settings: RagSettings | None = None, *, embedder: BaseEmbedding | None = None,
                   **overrides: Any) -> Workbench:
    """Open the workbench: settings from the environment, embedded DB unless DATABASE_URL is set.

    ``embedder`` is a model already loaded (shared between workbenches, or wrapped in a cache) to use
    instead of loading the one the settings name.
    """
    settings = settings or load_settings(**overrides)
    url, _, embedded = upgrade_database(settings, embedder)
    restart = alive = None
    if embedded:
        from rag_core.db.server import embedded_server_running, embedded_server_uri

        def restart() -> None:  # the embedded server is ours to start again when it dies
            embedded_server_uri(settings.data_dir)

        def alive() -> bool:
            return embedded_server_running(settings.data_dir)
    db = Database(url, pool_size=settings.db_pool_size, restart=restart, server_alive=alive)
    vector_index.ensure(db)  # rebuilds an index a crashed bulk load left dropped
    reads = ReadRouter(db, settings.database_read_url, max_lag_sec=settings.replica_max_lag_sec,
                       check_every_sec=settings.replica_check_sec, pool_size=settings.db_pool_size)
    return Workbench(settings, db, url, embedded, embedder=embedder, reads=reads)
