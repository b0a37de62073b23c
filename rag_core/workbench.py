"""The Workbench: the one object every front-end (app, API, MCP, CLI, notebooks) talks to.

It only wires services together, each built from the `Store` (database, read replicas, settings, embedder):

    wb.library     documents: ingest, web pages, delete, list, status, reindex   (ingest/service.py)
    wb.search_engine  search with filters, facets, cache; query log and metrics   (search/service.py)
    wb.assistant   chat turns, prepared turns, workflow context                  (chat/service.py)
    wb.sessions    conversations, agent instructions, retention                  (chat/service.py)
    wb.evaluation  BEIR sets and each site's judged queries                      (evaluation/service.py)
    wb.background  background jobs and workers                                   (jobs/service.py)

The methods below are the facade's stable names for front-ends, notebooks and scripts; each calls one
service. Results are plain data; `rag_core.render` gives them their look in Jupyter.
"""

from __future__ import annotations

import functools
import warnings
from typing import TYPE_CHECKING, Any, Callable, Concatenate, ParamSpec, Sequence, TypeVar, cast

from llama_index.core.base.embeddings.base import BaseEmbedding

from rag_core.chat.service import ChatService, SessionService
from rag_core.db.database import Database
from rag_core.db.replicas import ReadRouter, ReplicaState
from rag_core.records import Records
from rag_core.errors import InvalidInput
from rag_core.evaluation.service import EvaluationService
from rag_core.ingest.handle import Store, open_store, resolve_database, upgrade_database  # noqa: F401 (re-exported)
from rag_core.ingest.service import DocumentService
from rag_core.jobs.autoindex import SourceIndexAdvisor
from rag_core.jobs.service import JobService
from rag_core.search.hybrid import fusion_for
from rag_core.search.querylog import flush_query_log, latency_histogram, recent_searches
from rag_core.search.responses import LatencyHistogram, SearchMetrics, SearchResults
from rag_core.search.service import SearchEngine
from rag_core.settings import RagSettings, load_settings
from rag_core.units import parse_since

if TYPE_CHECKING:
    from datetime import date, datetime, timedelta

    from llama_index.core.llms.llm import LLM as LlamaLLM
    from llama_index.core.vector_stores.types import MetadataFilters

    from rag_core.chat.sessions import ChatMessage, SessionsDeleted
    from rag_core.llamaindex.engines import CitingChatEngine, CitingQueryEngine
    from rag_core.llamaindex.retriever import WorkbenchRetriever
    from rag_core.llamaindex.vector_store import WorkbenchVectorStore
    from rag_core.search.responses import LoggedSearch, SearchResponse

_P = ParamSpec("_P")
_R = TypeVar("_R")


def _calls(service: str, method: Callable[Concatenate[Any, _P], _R]) -> Callable[Concatenate[Any, _P], _R]:
    """A facade method that is `method` of the service in attribute `service` (signature and docstring kept)."""
    class Delegate:
        def __set_name__(self, owner: type, name: str) -> None:
            self.__name__ = name

        def __get__(self, obj: object, owner: type | None = None) -> Any:
            if obj is None:
                return method
            return getattr(getattr(obj, service), method.__name__)

    delegate = Delegate()
    functools.update_wrapper(cast(Any, delegate), method)
    return cast(Callable[Concatenate[Any, _P], _R], delegate)  # typed as the method itself: editors bind self


class Workbench:
    """Ingestion, search, chat and evaluation over one PostgreSQL store."""

    def __init__(self, settings: RagSettings, db: Database, database_url: str, embedded: bool, *,
                 embedder: BaseEmbedding | None = None, reads: ReadRouter | None = None) -> None:
        """``db`` is the primary, which takes every write; ``reads`` is where searches, chat retrieval and listings
        read (the read replicas of DATABASE_READ_URL); by default the primary too. ``embedder`` is a model
        already loaded (see `Store`)."""
        self._wire(Store(settings, db, database_url, embedded, embedder=embedder, reads=reads))

    def _wire(self, store: Store) -> None:
        self.store = store
        self.library = DocumentService(store)
        self.assistant = ChatService(store)
        self.sessions = SessionService(store)
        self.evaluation = EvaluationService(self.library, lambda: self.search_engine)
        self.background = JobService(self.library)
        self.source_index_advisor = SourceIndexAdvisor(
            store.db, self.background.enqueue_source_index, store.settings.auto_source_index_ms,
            store.settings.auto_source_index_min_chunks)
        self._search_engine: SearchEngine | None = None
        store.on_write(self._invalidate_search)
        store.on_settings_change(self._drop_search_engine)

    # ----- the store -----
    settings = property(lambda self: self.store.settings, doc="The settings in force (the store's embedder's).")
    requested_settings = property(lambda self: self.store.requested_settings,
                                  doc="The settings asked for; `reindex` moves the store to their embedder.")
    db = property(lambda self: self.store.db, doc="The primary database (every write).")
    reads = property(lambda self: self.store.reads, doc="Where searches and listings read (replicas or primary).")
    database_url = property(lambda self: self.store.database_url)
    embedded = property(lambda self: self.store.embedded)
    embedder = property(lambda self: self.store.embedder, doc="The configured embedder, loaded on first use.")
    embedder_name = property(lambda self: self.store.embedder_name)
    embedder_notice = property(lambda self: self.store.embedder_notice,
                               doc="Set when the store opened with its own embedder instead of the default.")
    embedder_mismatch = _calls("store", Store.embedder_mismatch)
    llm = property(lambda self: self.assistant.llm, doc="The configured answerer (RAG_LLM), built on first use.")

    # ----- documents -----
    ingest_text = _calls("library", DocumentService.ingest_text)
    ingest_bytes = _calls("library", DocumentService.ingest_bytes)
    vanished_sources = _calls("library", DocumentService.vanished_sources)
    remove_sample_corpus = _calls("library", DocumentService.remove_sample_corpus)
    crawl_allowlist = _calls("library", DocumentService.crawl_allowlist)
    set_crawl_allowlist = _calls("library", DocumentService.set_crawl_allowlist)
    check_url = _calls("library", DocumentService.check_url)
    delete_source = _calls("library", DocumentService.delete_source)

    ingest_paths = _calls("library", DocumentService.ingest_paths)
    ingest_texts = _calls("library", DocumentService.ingest_texts)
    ingest_sample_corpus = _calls("library", DocumentService.ingest_sample_corpus)
    ingest_url = _calls("library", DocumentService.ingest_url)
    ingest_index = _calls("library", DocumentService.ingest_index)
    reindex = _calls("library", DocumentService.reindex)
    index_source = _calls("library", DocumentService.index_source)
    source_indexes = _calls("library", DocumentService.source_indexes)
    drop_source_index = _calls("library", DocumentService.drop_source_index)
    status = _calls("library", DocumentService.status)
    documents = _calls("library", DocumentService.documents)

    # ----- search -----
    @property
    def search_engine(self) -> SearchEngine:
        """The search service (cache, reranker, query log), built on first use."""
        if self._search_engine is None:
            store = self.store
            self._search_engine = SearchEngine(store.db, store.settings, lambda: store.embedder,
                                               store.require_compatible, fusion=fusion_for(store.embedder_name),
                                               reads=store.reads, on_filter_walk=self.source_index_advisor)
        return self._search_engine

    def _invalidate_search(self) -> None:
        if self._search_engine is not None:
            self._search_engine.invalidate()

    def _drop_search_engine(self) -> None:
        self._search_engine = None

    def search(self, query: str, mode: str = "hybrid", limit: int = 10, page: int = 1,
               types: Sequence[str] | str | None = None, date_from: str | date | None = None,
               date_to: str | date | None = None, source: str | None = None,
               site_id: str | None = None, include_context: bool = True, max_chunks: int = 3,
               user_id: str | None = None, typed: bool | None = None) -> SearchResponse:
        """Search documents: hybrid, semantic or full text, with filters, facets and suggestions
        (`SearchEngine.search` documents every argument). Problems raise RagError subclasses."""
        return cast("SearchResponse", SearchResults(self.search_engine.search(  # renders itself in Jupyter
            query, mode=mode, limit=limit, page=page, types=types, date_from=date_from, date_to=date_to,
            source=source, site_id=site_id, include_context=include_context, max_chunks=max_chunks, user_id=user_id,
            typed=typed)))

    retrieve = _calls("search_engine", SearchEngine.retrieve)

    def flush_search_log(self, timeout: float = 30.0) -> bool:
        """Wait until this process's searches so far are in the query log (it is written in the background)."""
        return flush_query_log(self.db, timeout)

    def search_metrics(self, site_id: str | None = None, since: datetime | timedelta | str | None = None
                       ) -> SearchMetrics:
        """Searches, errors, zero-result count, latency, popular and zero-result queries, per day."""
        return self.search_engine.metrics(site_id=site_id, since=parse_since(since))

    def query_log(self, site_id: str | None = None, since: datetime | timedelta | str | None = None,
                  limit: int = 1000) -> Records[LoggedSearch]:
        """The latest searches, newest first (query, mode, results, ms, error code, cache, when, who);
        `.to_pandas()` makes a DataFrame of them. Every site but the evaluation sites and the sample by default."""
        if not 1 <= int(limit) <= 100_000:
            raise InvalidInput(f"limit is {limit}; choose between 1 and 100000 searches.")
        return Records(recent_searches(self.reads, site_id=site_id, since=parse_since(since), limit=int(limit)))

    def search_latency_histogram(self, site_id: str | None = None, since: datetime | timedelta | str | None = None
                                 ) -> LatencyHistogram:
        """Successful searches per latency bucket (ms), with p50 and p95, from the query log."""
        return latency_histogram(self.reads, site_id=site_id, since=parse_since(since))

    # ----- LlamaIndex -----
    def as_retriever(self, mode: str = "hybrid", k: int = 5, site_id: str | None = None,
                     filters: MetadataFilters | None = None, **kwargs: Any) -> WorkbenchRetriever:
        """This store's retrieval as a LlamaIndex BaseRetriever (hybrid, semantic or fulltext; MetadataFilters)."""
        from rag_core.llamaindex.retriever import WorkbenchRetriever

        return WorkbenchRetriever(self.store, mode=mode, k=k, site_id=site_id, filters=filters, **kwargs)

    @property
    def vector_store(self) -> WorkbenchVectorStore:
        """This store's tables as a LlamaIndex vector store (for VectorStoreIndex.from_vector_store);
        LlamaIndex's Settings.embed_model and Settings.llm, when unset, become this embedder and answerer."""
        from rag_core.llamaindex.vector_store import WorkbenchVectorStore, fill_llamaindex_defaults

        fill_llamaindex_defaults(self.store, lambda: self.llm)
        return WorkbenchVectorStore(self.store)

    def as_query_engine(self, llm: LlamaLLM | None = None, **kwargs: Any) -> CitingQueryEngine:
        """A LlamaIndex RetrieverQueryEngine over this store; any LlamaIndex LLM, RAG_LLM's answerer by default.

        kwargs: retriever, node_postprocessors, response_mode, or as_retriever's mode, k, site_id, filters.
        Each response's metadata holds its sources, citations and the rendered Sources/Answer text.
        """
        from rag_core.llamaindex.engines import query_engine

        return query_engine(self.store, lambda: self.llm, llm=llm, **kwargs)

    def as_chat_engine(self, session_id: str, llm: LlamaLLM | None = None, **kwargs: Any) -> CitingChatEngine:
        """A LlamaIndex CondensePlusContextChatEngine whose history is chat session `session_id` (app, CLI)."""
        from rag_core.llamaindex.engines import chat_engine

        return chat_engine(self.store, lambda: self.llm, session_id, llm=llm, **kwargs)

    # ----- chat -----
    chat = _calls("assistant", ChatService.turn)
    chat_prepare = _calls("assistant", ChatService.prepare)
    retrieve_context = _calls("assistant", ChatService.context)
    chat_history = _calls("sessions", SessionService.history)
    chat_append = _calls("sessions", SessionService.append)
    chat_reset = _calls("sessions", SessionService.delete)

    def add_chat_message(self, user_id: str, site_id: str, role: str, message: str) -> ChatMessage:
        """Deprecated: `chat_append(role=..., content=..., user_id=..., site_id=...)` is the one verb for storing
        a message."""
        warnings.warn("Workbench.add_chat_message is deprecated; use chat_append(role=role, content=message, "
                      "user_id=user_id, site_id=site_id).", DeprecationWarning, stacklevel=2)
        return self.chat_append(role=role, content=message, user_id=user_id, site_id=site_id)

    def delete_session(self, session_id: str) -> SessionsDeleted:
        """Deprecated: `chat_reset(session_id, missing_ok=False)` is the one verb for deleting a conversation."""
        warnings.warn("Workbench.delete_session is deprecated; use chat_reset(session_id, missing_ok=False).",
                      DeprecationWarning, stacklevel=2)
        return self.chat_reset(session_id, missing_ok=False)
    rename_session = _calls("sessions", SessionService.rename)
    list_sessions = _calls("sessions", SessionService.list)
    get_session = _calls("sessions", SessionService.get)
    create_instruction = _calls("sessions", SessionService.create_instruction)
    update_instruction = _calls("sessions", SessionService.update_instruction)
    list_instructions = _calls("sessions", SessionService.list_instructions)
    get_instruction = _calls("sessions", SessionService.get_instruction)
    get_active_instruction = _calls("sessions", SessionService.get_active_instruction)
    activate_instruction = _calls("sessions", SessionService.activate_instruction)
    delete_instruction = _calls("sessions", SessionService.delete_instruction)
    purge_chat_history = _calls("sessions", SessionService.purge)
    retention_status = _calls("sessions", SessionService.retention_status)

    # ----- a user's own judged queries -----
    judged_queries = _calls("evaluation", EvaluationService.judged_queries)
    mark_relevant = _calls("evaluation", EvaluationService.mark_relevant)
    import_judged_queries = _calls("evaluation", EvaluationService.import_judged_queries)
    evaluate_judged = _calls("evaluation", EvaluationService.evaluate_judged)
    judged_results = _calls("evaluation", EvaluationService.judged_results)

    # ----- background jobs -----
    job_queue = property(lambda self: self.background.queue, doc="The procrastinate job queue on this database.")
    enqueue_ingest = _calls("background", JobService.enqueue_ingest)
    enqueue_uploads = _calls("background", JobService.enqueue_uploads)
    enqueue_texts = _calls("background", JobService.enqueue_texts)
    enqueue_crawl = _calls("background", JobService.enqueue_crawl)
    enqueue_page = _calls("background", JobService.enqueue_page)
    enqueue_reindex = _calls("background", JobService.enqueue_reindex)
    jobs = _calls("background", JobService.list)
    job = _calls("background", JobService.get)
    cancel_job = _calls("background", JobService.cancel)
    job_workers_alive = _calls("background", JobService.workers_alive)
    run_worker = _calls("background", JobService.run_worker)
    host_jobs = _calls("background", JobService.host)
    stop_hosting_jobs = _calls("background", JobService.stop_hosting)

    # ----- status and lifetime -----
    def read_replicas(self) -> list[ReplicaState]:
        """Each read replica (DATABASE_READ_URL) as its last check saw it: ok, lagging or down, with the lag."""
        return self.reads.states()

    def check_database(self) -> str:
        """'ok' when the database answers a query; DatabaseError at once while it is down or restarting."""
        return self.db.ping()

    def variant(self, **overrides: Any) -> "Workbench":
        """A workbench on the same store and loaded embedder with some settings changed (evaluation sweeps).

        It shares this one's connection pool: close only the original.
        """
        settings = self.settings.model_copy(update=overrides)
        if settings.chunk_overlap >= settings.chunk_size:
            raise InvalidInput(f"chunk_overlap ({settings.chunk_overlap}) must be smaller than chunk_size "
                               f"({settings.chunk_size}).")
        other = Workbench.__new__(Workbench)
        other._wire(self.store.variant(settings))
        return other

    def close(self) -> None:
        """Release the connection pools (the embedded server stops when the last process exits)."""
        self.background.close()
        self.store.close()

    def __enter__(self) -> "Workbench":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_workbench(settings: RagSettings | None = None, *, embedder: BaseEmbedding | None = None,
                   **overrides: Any) -> Workbench:
    """Open the workbench: settings from the environment, embedded DB unless DATABASE_URL is set.

    ``embedder`` is a model already loaded (shared between workbenches, or wrapped in a cache) to use
    instead of loading the one the settings name.
    """
    wb = Workbench.__new__(Workbench)
    wb._wire(open_store(settings or load_settings(**overrides), embedder=embedder))
    return wb
