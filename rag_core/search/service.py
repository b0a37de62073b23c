"""The search spec's search: validation, cache, ranking (hybrid.py), rerank, highlights, facets, suggestions, log.

`SearchEngine.search` returns the response dict of the search spec and raises RagError subclasses
(InvalidQuery, IndexUnavailable, DatabaseError...) whose `to_dict()` is the error JSON. Every call
is written to query_log, cache hits and failures included, by a background writer (querylog.py):
the search does not wait for the log's commit.
"""

from __future__ import annotations

import datetime as dt
import functools
import logging
import math
import threading
import time
from dataclasses import replace
from typing import Any, Callable, Sequence

import orjson
import psycopg
from llama_index.core.base.embeddings.base import BaseEmbedding

from rag_core.db.database import Database
from rag_core.db.replicas import ReadRouter
from rag_core.errors import DatabaseError, RagError
from rag_core.providers.calibration import cosine_scale
from rag_core.providers.rerankers import Reranker, build_reranker
from rag_core.search.cache import build_search_cache
from rag_core.search.fusion import DEFAULT_FUSION, Fusion, cosine_floor
from rag_core.search.highlight import Highlight, highlight_texts
from rag_core.search.hybrid import CoreResult, DocumentHit, check_indexed, rank_documents
from rag_core.search.planner import DEFAULT_PLANNER, PlannerSettings
from rag_core.search.query import PreparedQuery
from rag_core.search.querylog import log_search, logged_mode, search_metrics
from rag_core.search.responses import SearchDocument, SearchMetrics, SearchResponse
from rag_core.search.retrieval import prepare_query, retrieve_chunks
from rag_core.search.suggestions import MAX_SUGGESTIONS, HitWords, RecentQueries, suggest
from rag_core.search.types import ChunkHit
from rag_core.search.validation import SearchRequest, validate_search
from rag_core.units import human_size

log = logging.getLogger(__name__)

# With a reranker on, this many documents (at least) are reordered before the page is cut.
RERANK_DEPTH = 30
_UNSET = object()
# Told (site, source filter, chunks it keeps, milliseconds) after a search walked the whole store's HNSW graph, or
# a full-text search the postings, for a source filter that no index of its own covers: the Workbench wires it to
# jobs/autoindex.SourceIndexAdvisor.
FilterWalk = Callable[[str | None, str, int, float], None]


@functools.lru_cache(maxsize=4096)  # a page shows three dates per document, and the same documents come back often
def iso_utc(ts: dt.datetime | None) -> str | None:
    if ts is None:
        return None
    if ts.tzinfo is not None:
        ts = ts.astimezone(dt.timezone.utc)
    return ts.replace(microsecond=0, tzinfo=None).isoformat() + "Z"  # a third cheaper than strftime


class _StageClock:
    """Milliseconds spent in each stage of one search, for the query log (where the time goes)."""

    def __init__(self) -> None:
        self.stages: dict[str, float] = {}
        self._last = time.perf_counter()

    def mark(self, stage: str) -> None:
        now = time.perf_counter()
        self.stages[stage] = round((now - self._last) * 1000, 3)
        self._last = now


def _encode(response: dict[str, Any], terms: list[str]) -> bytes:
    """A response and its query terms as the cache's bytes (JSON: safe to share through Redis)."""
    return orjson.dumps({"response": response, "terms": terms}, default=str)


def _decode(payload: bytes) -> tuple[dict[str, Any], list[str]]:
    data = orjson.loads(payload)
    return data["response"], data["terms"]


class _EarlyWork:
    """What a hybrid search works out while the database runs its ranking statement (hybrid.Meanwhile): the
    highlights of the first full-text candidates, and the earlier queries its suggestions start from. The page's
    chunks among them are not marked again (bench_search_floor.py)."""

    def __init__(self, query: PreparedQuery, text: str, site_id: str | None, recent: RecentQueries) -> None:
        self.query, self.text, self.site_id, self._recent = query, text, site_id, recent
        self.marks: dict[int, list[Highlight]] = {}
        self.recent: list[str] | None = None

    def __call__(self, terms: list[str], lexemes: list[str], texts: list[tuple[int, str | None, str]],
                 answered: Callable[[], bool]) -> None:
        self.recent = self._recent.matching(self.site_id, self.text, terms, MAX_SUGGESTIONS)
        for chunk_id, language, text in texts:   # best first, until the ranking's rows arrive
            if answered():
                break
            self.marks[chunk_id] = highlight_texts(self.query, lexemes, [(language, text)])[0]


class SearchEngine:
    """The search behind Workbench.search: one per Workbench, thread-safe."""

    def __init__(self, db: Database, settings: Any, embedder: Callable[[], BaseEmbedding],
                 check_store: Callable[[], None], fusion: Fusion = DEFAULT_FUSION,
                 reads: ReadRouter | None = None, planner: PlannerSettings = DEFAULT_PLANNER,
                 on_filter_walk: FilterWalk | None = None) -> None:
        """``db`` is the primary (the query log is written there); ``reads`` where the searches read (replicas);
        ``on_filter_walk`` hears of each search that walked the whole HNSW graph (or the postings, in full text)
        for a source filter no index of its own covers."""
        self.db = db
        self.on_filter_walk = on_filter_walk
        self.reads = reads if reads is not None else ReadRouter(db)
        self.settings = settings
        self._embedder = embedder
        self._check_store = check_store
        # Chat's retrieval keeps passages at its own floor, later: it ranks with the fusion as given.
        self.retrieval_fusion = fusion
        if fusion.cosine_floor is None:
            fusion = replace(fusion, cosine_floor=cosine_floor(settings.embedder, settings.search_cosine_floor))
        self.fusion = fusion
        self.planner = planner
        self.cache = build_search_cache(settings)
        self.recent_queries = RecentQueries(self.reads)
        self.hit_words = HitWords(self.reads)
        self._reranker: Any = _UNSET
        self._model_ready = False
        self._model_lock = threading.Lock()

    @property
    def reranker(self) -> Reranker | None:
        """The configured reranker (RAG_RERANKER), built on first use; None when off."""
        if self._reranker is _UNSET:
            self._reranker = build_reranker(self.settings)
        return self._reranker

    def load_model(self) -> float:
        """Load the embedding model, and the reranker's when one is configured, now (a service does so before it
        serves); the seconds it took, 0 once loaded.

        Searches that arrive during the load wait for it here, outside their clocks.
        """
        if self._model_ready:
            return 0.0
        with self._model_lock:
            if self._model_ready:
                return 0.0
            started = time.perf_counter()
            self._embedder().get_query_embedding("warm-up")
            # A reranker model (RAG_RERANKER) loads on first use too: seconds inside the first search's clock.
            load = getattr(self.reranker, "load", None)
            if callable(load):
                load()
            self._model_ready = True
            return time.perf_counter() - started

    def _ready_model(self, mode: str) -> float:
        """The model loaded before a search that needs it starts its clock; the seconds the load took.

        A process's first search loaded the model inside its clock: the CLI, MCP and the query log reported
        seconds of loading as the search's time.
        """
        if self._model_ready or mode == "fulltext":
            return 0.0
        try:
            seconds = self.load_model()
        except Exception:  # noqa: BLE001 - the search's own embedding reports the failure
            return 0.0
        if seconds:
            log.info("Loaded the embedding model in %.2f s (not counted in the search's time).", seconds)
        return seconds

    def invalidate(self) -> None:
        """Forget cached searches (called after every ingest and delete)."""
        self.cache.clear()
        self.hit_words.clear_shares()

    # ----- a query prepared once, searched many times -----
    def prepare(self, query: str) -> PreparedQuery:
        """The query prepared once (language, configs, bigrams; its vector on first dense use) for several
        searches: pass it to `search` or `retrieve` instead of the string."""
        return prepare_query(self._embedder(), query)

    def retrieve(self, query: str | PreparedQuery, *, k: int = 5, site_id: str | None = None, mode: str = "hybrid",
                 sources: Sequence[str] | None = None, **filters: Any) -> list[ChunkHit]:
        """Top-k chunks for a query, ranked by the statement `search` uses (what chat reads: Workbench.retrieve).

        Args:
            query: a string, or the PreparedQuery of `prepare` that several searches share.
            mode: hybrid, semantic or fulltext.
            sources: keep only chunks of these sources (exact source names).
            filters: types, date_from, date_to, source (a prefix or part of it).
        """
        if mode != "hybrid" or filters:  # checked as a search checks them: a bad mode or date names the fix
            checked = validate_search("filters", mode=mode, **filters)
            mode = checked.mode
            filters = {"types": checked.types, "date_from": checked.date_from, "date_to": checked.date_to,
                       "source": checked.source}
        self._check_store()
        return retrieve_chunks(self.reads, self._embedder(), query, k=k, site_id=site_id, sources=sources, mode=mode,
                               fusion=self.retrieval_fusion, planner=self.planner, **filters)

    # ----- the search -----
    def search(self, query: Any, *, mode: Any = "hybrid", limit: Any = 10, page: Any = 1, types: Any = None,
               date_from: Any = None, date_to: Any = None, source: Any = None, site_id: Any = None,
               include_context: Any = True, max_chunks: Any = 3, user_id: str | None = None,
               use_cache: bool = True, typed: bool | None = None) -> SearchResponse:
        started = time.perf_counter()
        prepared = query if isinstance(query, PreparedQuery) else None
        query = prepared.text if prepared is not None else query
        # A surface that knows whether its user typed this query (not a page, filter or chart click) says so;
        # the popular-queries list counts only those.
        origin = {} if typed is None else {"typed": bool(typed)}
        raw = {"mode": mode, "limit": limit, "page": page, "types": types, "date_from": date_from,
               "date_to": date_to, "source": source, "include_context": include_context, "max_chunks": max_chunks}
        try:
            req = validate_search(query, site_id=site_id, **raw)
        except RagError as exc:
            self._log_failure(query, mode, {k: str(v) if v is not None else None for k, v in raw.items()},
                              site_id if isinstance(site_id, str) else None, user_id, exc, started)
            raise
        key = req.cache_key()
        cached = self.cache.get(key) if use_cache else None
        if cached is not None:
            response, terms = _decode(cached)
            elapsed = time.perf_counter() - started
            response["search_time"] = f"{elapsed:.3f}s"
            when = log_search(self.db, query=req.query, mode=req.mode,
                              params={**req.log_params(), **origin, "terms": terms, "cache": "hit"},
                              result_count=response["total_results"], duration_ms=elapsed * 1000,
                              site_id=req.site_id, user_id=user_id)
            self._note(req, terms, response["total_results"], when)
            return response
        try:
            if not self._model_ready and req.mode != "fulltext":
                check_indexed(self.reads, req.site_id)  # an empty store answers before the model loads (seconds)
            load = self._ready_model(req.mode)
            started += load  # the search's time is its own; the model's load is logged beside it
            response, terms, plan, stages, walked = self._run(req, prepared)
        except RagError as exc:
            self._log_failure(req.query, req.mode, req.log_params(), req.site_id, user_id, exc, started)
            raise
        except psycopg.Error as exc:
            error = DatabaseError(
                "The database failed while searching; check that PostgreSQL is running (`rag status`) and retry.",
                details={"reason": type(exc).__name__},
            )
            self._log_failure(req.query, req.mode, req.log_params(), req.site_id, user_id, error, started)
            raise error from exc
        elapsed = time.perf_counter() - started
        response["search_time"] = f"{elapsed:.3f}s"
        if use_cache and self.cache.enabled:  # encoding a response nobody will read cost a dump per search
            self.cache.put(key, _encode(response, terms))
        when = log_search(self.db, query=req.query, mode=req.mode,
                          params={**req.log_params(), **origin, "terms": terms,
                                  "cache": "miss" if use_cache else "off", "plan": plan, "stages_ms": stages,
                                  **({"model_load_ms": round(load * 1000, 1)} if load else {})},
                          result_count=response["total_results"], duration_ms=elapsed * 1000, site_id=req.site_id,
                          user_id=user_id)
        self._note(req, terms, response["total_results"], when)
        if walked and req.source and self.on_filter_walk is not None:
            self.on_filter_walk(req.site_id, req.source, walked, elapsed * 1000)
        return response

    def _note(self, req: SearchRequest, terms: list[str], found: int, when: dt.datetime) -> None:
        """A successful search joins the suggestions' window of recent queries at once."""
        if found > 0:
            self.recent_queries.note(req.site_id, req.query, terms, when)

    def _log_failure(self, query: Any, mode: Any, params: dict[str, Any], site_id: str | None, user_id: str | None,
                     exc: RagError, started: float) -> None:
        if isinstance(exc, DatabaseError):
            return  # the log lives in the database that just failed; trying again would only wait
        log_search(self.db, query=query if isinstance(query, str) else repr(query), mode=logged_mode(mode),
                   params=params, result_count=0, duration_ms=(time.perf_counter() - started) * 1000,
                   site_id=site_id, user_id=user_id, error_code=exc.code)

    def _run(self, req: SearchRequest, prepared: PreparedQuery | None = None
             ) -> tuple[SearchResponse, list[str], str, dict[str, float], int]:
        self._check_store()
        clock = _StageClock()
        q = prepared if prepared is not None and prepared.text == req.query else self.prepare(req.query)
        waited = q.waited_ms
        core_req = req if req.include_context else replace(req, max_chunks=1)
        reranker = self.reranker
        early = _EarlyWork(q, req.query, req.site_id, self.recent_queries)
        if reranker is None:
            core = rank_documents(self.reads, q, None, core_req, self.fusion, planner=self.planner, meanwhile=early)
            documents = core.documents
        else:
            depth = max(RERANK_DEPTH, req.page * req.limit)
            core = rank_documents(self.reads, q, None, core_req, self.fusion, page_size=depth, offset=0,
                                  planner=self.planner, meanwhile=early)
            documents = self._rerank(reranker, req.query, core.documents)[req.offset:req.offset + req.limit]
        clock.mark("core")
        # The query is embedded while the database ranks its full text: "embed" is the time the search's thread
        # spent on the vector (embedding it, or waiting for it), counted out of "core".
        clock.stages["embed"] = round(q.waited_ms - waited, 3)
        clock.stages["core"] = round(clock.stages["core"] - clock.stages["embed"], 3)
        # Highlights are marked in Python from the lexemes the statement returned; suggestions come from the
        # recent queries held in memory and, for the top hits' words, a lookup that remembers its answers.
        marks = self._highlights(q, core, documents, early.marks)
        clock.mark("highlights")
        suggestions = suggest(self.recent_queries, self.hit_words, req.query, req.site_id, core.terms, core.lexemes,
                              [(d.chunks[0].language, d.chunks[0].text) for d in documents[:5] if d.chunks],
                              recent_found=early.recent)
        clock.mark("suggestions")
        results = [self._document(req, core, doc, marks.get(doc.document_id, [])) for doc in documents]
        response = {
            "success": True,
            "query": req.query,
            "mode": req.mode,
            "total_results": core.total,
            "page": req.page,
            "limit": req.limit,
            "total_pages": math.ceil(core.total / req.limit) if core.total else 0,
            "search_time": "",
            "results": results,
            "facets": {"document_types": core.document_types, "date_distribution": core.date_distribution},
            "suggestions": suggestions,
        }
        clock.mark("response")
        return response, core.terms, core.plan, clock.stages, core.walked_filter

    def _rerank(self, reranker: Reranker, query: str, documents: list[DocumentHit]) -> list[DocumentHit]:
        if not documents:
            return documents
        scores = reranker.score(query, [d.chunks[0].text if d.chunks else d.title for d in documents])
        for doc, score in zip(documents, scores):
            doc.rerank_score = score  # type: ignore[attr-defined]
        ordered = sorted(zip(documents, scores), key=lambda p: (-p[1], p[0].rank))
        return [d for d, _ in ordered]

    def _highlights(self, query: PreparedQuery, core: CoreResult, documents: list[DocumentHit],
                    early: dict[int, list[Highlight]]) -> dict[int, list[Highlight]]:
        """Each document's fragments from its two best chunks: matched ones first, three at most. `early` holds the
        fragments of chunks marked while the ranking statement ran (_EarlyWork)."""
        items = [(doc.document_id, chunk) for doc in documents for chunk in doc.chunks[:2]]
        late = iter(highlight_texts(query, core.lexemes,
                                    [(c.language, c.text) for _, c in items if c.chunk_id not in early]))
        found: dict[int, list[Highlight]] = {}
        for doc_id, chunk in items:
            frags = early.get(chunk.chunk_id)
            found.setdefault(doc_id, []).extend(frags if frags is not None else next(late))
        out: dict[int, list[Highlight]] = {}
        for doc_id, frags in found.items():
            matched = [f for f in frags if f.spans]
            out[doc_id] = (matched or frags)[:3]
        return out

    def _relevance(self, req: SearchRequest, core: CoreResult, chunk: ChunkHit) -> float:
        if req.mode == "semantic":  # the cosine as the embedder's scale reads it (e5's sit in a high band)
            value = cosine_scale(self.settings.embedder).relevance(chunk.similarity)
        elif req.mode == "fulltext":
            value = chunk.score / core.top_score if core.top_score > 0 else 0.0
        else:
            return self._fused_relevance(chunk.score)
        return round(max(0.0, min(1.0, value)), 4)

    def _fused_relevance(self, score: float) -> float:
        value = score / self.fusion.max_score if self.fusion.method == "rrf" else score
        return round(max(0.0, min(1.0, value)), 4)

    def _document(self, req: SearchRequest, core: CoreResult, doc: DocumentHit, marks: list[Highlight]) -> SearchDocument:
        best = doc.chunks[0] if doc.chunks else None
        result: dict[str, Any] = {
            "id": f"doc_{doc.document_id}",
            "document_id": doc.document_id,
            "site_id": doc.site_id,
            "title": doc.title,
            "file_path": doc.source,
            "file_type": doc.file_type,
            "file_size": human_size(doc.file_size),
            "file_size_bytes": doc.file_size,
            "created_at": iso_utc(doc.created_at),
            "updated_at": iso_utc(doc.updated_at),
            "document_date": iso_utc(doc.doc_date),
            # A hybrid document may take its full-text and its dense share from two chunks (Fusion.documents), so
            # its own fused score orders the page: the relevance shown follows it, never its best chunk's alone.
            "relevance_score": (self._fused_relevance(doc.score) if req.mode == "hybrid"
                                else self._relevance(req, core, best) if best else 0.0),
            "score": round(doc.score, 6),
            "rank": doc.rank,
            "dense_rank": best.dense_rank if best else None,
            "fulltext_rank": best.fulltext_rank if best else None,
            "highlights": [h.text for h in marks],
            "highlight_spans": [list(map(list, h.spans)) for h in marks],
            "context_chunks": [],
        }
        if hasattr(doc, "rerank_score"):
            result["rerank_score"] = round(float(doc.rerank_score), 6)  # type: ignore[attr-defined]
        if req.include_context:
            result["context_chunks"] = [{
                "chunk_id": c.chunk_id,
                "chunk_index": c.chunk_index,
                "text": c.text,
                "page_number": c.page_number,
                "start_char": c.start_char,
                "end_char": c.end_char,
                "relevance_score": self._relevance(req, core, c),
                "score": round(c.score, 6),
                "similarity": round(c.similarity, 4) if req.mode != "fulltext" else None,
                "dense_rank": c.dense_rank,
                "fulltext_rank": c.fulltext_rank,
                "fulltext_score": round(c.fulltext_score, 4) if c.fulltext_score is not None else None,
            } for c in doc.chunks[:req.max_chunks]]
        return result

    def metrics(self, site_id: str | None = None, since: Any = None) -> SearchMetrics:
        try:
            return search_metrics(self.reads, site_id=site_id, since=since)
        except psycopg.Error as exc:
            raise DatabaseError("The database failed while reading the query log; check that PostgreSQL is running.",
                                details={"reason": type(exc).__name__}) from exc
