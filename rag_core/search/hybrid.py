"""The three ways to rank a query: a page of documents (`rank_documents`, behind Workbench.search), the top
chunks (`rank_chunks`, what chat retrieves) and the full-text ranking alone (`rank_fulltext`), plus
chat's `term_coverage`. Each takes a query string or a PreparedQuery (query.py), plans its statement
(planner.py), builds it from the SQL fragments (sql.py) with a fusion (fusion.py) and runs it once, or deeper
when its full-text head cannot be proven exact. The method is explained in docs/search-method.md.
"""

from __future__ import annotations

import datetime as dt
import os
import select
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import wait as futures_wait
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Protocol

import numpy as np

from rag_core.errors import IndexUnavailable
from rag_core.search.fusion import (  # noqa: F401 - callers import the fusion from here too
    DEFAULT_FUSION,
    FUSION_BY_EMBEDDER,
    SPREAD_DEPTH,
    Fusion,
    cosine_floor,
    fusion_for,
)
from rag_core.search.planner import DEFAULT_PLANNER, Plan, PlannerSettings, plan_search, without_covering_filters
from rag_core.search.query import PreparedQuery, prepared
from rag_core.search.sql import (
    COVERAGE_SQL,
    Scope,
    build_statement,
    lexical_statement,
    number_array,
    scope_params,
    scope_sql,
    statement_params,
    with_fixed_limits,
)
from rag_core.search.types import ChunkHit
from rag_core.search.validation import SearchRequest
from rag_core.textproc import FTS_CONFIG

# The full-text head proven exact is at least this long (docs/search-method.md, the proof of the head).
PROVE_MIN = 10


def query_configs(query: str, languages_in_use: Sequence[str]) -> tuple[list[str], list[str]]:
    """(text-search configs, query text for each): PreparedQuery.configs for a plain string."""
    return PreparedQuery(query).configs(languages_in_use)


@dataclass
class DocumentHit:
    """One document of a result page with its best chunks (ranked by fused score)."""

    document_id: int
    site_id: str
    source: str
    title: str
    file_type: str
    file_size: int
    created_at: dt.datetime | None
    updated_at: dt.datetime | None
    doc_date: dt.datetime | None
    rank: int
    score: float
    chunks: list[ChunkHit] = field(default_factory=list)


@dataclass
class CoreResult:
    """What the ranking statement returns for a page: documents, the size of the whole set and its facets."""

    total: int
    documents: list[DocumentHit]
    document_types: dict[str, int]
    date_distribution: dict[str, int]
    top_score: float
    configs: list[str]
    plan: str
    terms: list[str] = field(default_factory=list)   # the query's rare lexemes (all when none is rare)
    query_texts: list[str] = field(default_factory=list)  # the query as given to each config
    lexemes: list[str] = field(default_factory=list)  # every query lexeme that occurs in the scope (for highlights)
    # The chunks a source filter keeps when no index of its own covers it and the search walked the whole store's
    # HNSW graph, or the postings (full text alone), for it; else 0: what a slow search tells the source-index
    # advisor (jobs/autoindex.py).
    walked_filter: int = 0


def _nothing_indexed(site_id: str | None) -> IndexUnavailable:
    where = f"site '{site_id}'" if site_id else "any site"
    return IndexUnavailable(
        f"Nothing is indexed for {where} yet; add documents with `rag ingest PATH"
        f"{' --site ' + site_id if site_id else ''}` (or Workbench.ingest_paths) and search again.",
        details={"site_id": site_id},
    )


def check_indexed(db: Any, site_id: str | None) -> None:
    """Raise IndexUnavailable when no chunk is stored for `site_id` (None: every site but the evaluation ones).

    One small query, for a caller that would otherwise load the embedding model first (seconds, on a first
    search) only to hear that there is nothing to search.
    """
    frag = scope_sql(Scope(site_id))
    with db.connection() as conn:
        found = conn.execute(f"SELECT EXISTS (SELECT 1 FROM corpus_stats s WHERE {frag['stats']} AND s.n_chunks > 0)",
                             {"site": site_id}).fetchone()[0]
    if not found:
        raise _nothing_indexed(site_id)


def _execute(conn: Any, sql: str, params: dict[str, Any], generic: bool, last: bool = False,
             meanwhile: Callable[[Callable[[], bool]], None] | None = None) -> list[tuple]:
    """Rows of one statement; a `generic` one is prepared and planned once per connection (plan_search set
    plan_cache_mode for the transaction), its row counts fixed in its text. The `last` statement of the
    search's transaction goes with its COMMIT in one round trip (pipeline mode): a search's end waited for a
    second one (bench_search_floor.py); `meanwhile` runs once it is sent, while the database works, and is given
    a test of whether the answer has begun to arrive."""
    query, prepare = (with_fixed_limits(sql, params), True) if generic else (sql, None)
    if not last:
        return conn.execute(query, params, prepare=prepare).fetchall()
    with conn.pipeline():
        cursor = conn.execute(query, params, prepare=prepare)
        if meanwhile is not None:
            # The server sends the rows as soon as it has them (a flush request), so `answered` can tell.
            conn.pgconn.send_flush_request()
            conn.pgconn.flush()
            fd = conn.fileno()
            meanwhile(lambda: bool(select.select([fd], [], [], 0)[0]))
        conn.commit()
    return cursor.fetchall()


def _run_ranked(conn: Any, sql: str, params: dict[str, Any], fusion: Fusion, mode: str = "fulltext",
                generic: bool = False) -> list[tuple]:
    """Run a statement whose last column says whether its full-text top is provably exact; when it
    is not (lists cut too early, e.g. many near-duplicate chunks), run it again reading deeper: once
    (`deep_depth`), and for full text alone, whose ranking is BM25's, once more (`deeper_depth`). A tier
    no deeper than the last pass ends the retries."""
    rows = _execute(conn, sql, params, generic)
    tiers = [(fusion.deep_depth, fusion.deep_rescore)]
    if mode == "fulltext":
        tiers.append((fusion.deeper_depth, fusion.deeper_rescore))
    for depth, rescore in tiers:
        if not rows or rows[0][-1] is not False or params["depth"] >= depth:
            break
        params = {**params, "depth": depth, "rescore": max(params["rescore"], rescore)}
        rows = _execute(conn, sql, params, generic)
    return rows


# Helpers that plan a hybrid search and rank its full text while the searching thread embeds the query.
_FRONTS = ThreadPoolExecutor(max_workers=4, thread_name_prefix="rag-search-front")
# Rankings running in this process. Past one per core, the work a search overlaps or does ahead (the helper, the
# highlights marked while its statement runs) only takes CPU from the others: 100 concurrent REST searches
# served 15% fewer per second with it (bench_service.py).
_CORES = os.cpu_count() or 1
_running = 0
_running_lock = threading.Lock()


@contextmanager
def _counted() -> Iterator[int]:
    """Count this ranking as running while it runs; yields how many run now, itself included."""
    global _running
    with _running_lock:
        _running += 1
        now = _running
    try:
        yield now
    finally:
        with _running_lock:
            _running -= 1



# The full-text candidates whose text a hybrid search reads for `Meanwhile`: a page's highlighted chunks were among
# the first 50 four times in five (bench_search_floor.py's store, 100 queries); 30 and 100 measured alike.
MEANWHILE_TEXTS = 50


class Meanwhile(Protocol):
    """Work a hybrid search does on its own thread while the database runs its last statement (the search's
    highlights): given the query's terms and lexemes, the (chunk id, language, text) of its first
    MEANWHILE_TEXTS full-text candidates, and `answered`, true once the statement's rows are arriving (work
    past that point would delay the search). Called only by a hybrid search in two statements."""

    def __call__(self, terms: list[str], lexemes: list[str], texts: list[tuple[int, str | None, str]],
                 answered: Callable[[], bool]) -> None: ...


@dataclass
class _Front:
    """What a search knows before it needs the query's vector: the scope and plan, the full-text configs, the
    statement's parameters and, for a hybrid search in two statements, the full-text candidates (given to the
    second statement in `params`)."""

    scope: Scope
    plan: Plan
    configs: list[str]
    texts: list[str]
    params: dict[str, Any] = field(default_factory=dict)
    lexical_given: bool = False
    # The query's terms and lexemes and the first candidates' texts, for `Meanwhile`.
    head: tuple[list[str], list[str], list[tuple[int, str | None, str]]] | None = None


def _two_statements(mode: str, scope: Scope, order: str) -> bool:
    """A hybrid search first ranks the full text alone, then passes its candidates to the dense ranking and the
    fusion; with a narrow filter one statement does both, since both would build its set of documents (`fd`)
    (bench_search.py, one-corpus filter at 165K documents)."""
    return mode == "hybrid" and not (scope.has_filters and order != "index")


def _plan_and_rank_text(conn: Any, q: PreparedQuery, scope: Scope, mode: str, fusion: Fusion,
                        planner: PlannerSettings, extra: dict[str, Any], head_texts: int = 0) -> _Front:
    """The planner's statement and, for a hybrid search in two statements, the full-text ranking: nothing here
    needs the query's vector."""
    scope = without_covering_filters(conn, scope)
    plan = plan_search(conn, scope, mode, fusion, planner)
    configs, texts = q.configs(plan.languages)
    front = _Front(scope, plan, configs, texts)
    if plan.target == 0:
        return front
    front.params = statement_params(scope, fusion, configs, texts, None)
    front.params.update(extra)
    if _two_statements(mode, scope, plan.order):
        lexical = _run_ranked(conn, lexical_statement(scope, plan.order), {**front.params, "texts": head_texts}, fusion,
                              mode, generic=not scope.has_filters)
        found = [r for r in lexical if r[0] is not None]
        front.params.update({
            "ft_ids": number_array(r[0] for r in found), "ft_docs": number_array(r[1] for r in found),
            "ft_scores": number_array(r[2] for r in found),
            "terms": lexical[0][3] if lexical else None, "lexemes": lexical[0][4] if lexical else None,
            "ft_exact": lexical[0][-1] if lexical else True})
        front.lexical_given = True
        if head_texts and lexical:
            front.head = (list(lexical[0][3] or []), list(lexical[0][4] or []),
                          [(r[0], r[5], r[6]) for r in found if r[6] is not None])
    return front


def _front(conn: Any, q: PreparedQuery, emb: np.ndarray | None, scope: Scope, mode: str, fusion: Fusion,
           planner: PlannerSettings, extra: dict[str, Any], crowded: bool, head_texts: int = 0) -> _Front:
    """`_plan_and_rank_text`, beside the query's embedding when the search needs a vector it does not have yet.

    A hybrid search embeds on its own thread while a helper runs the statements: the full text is ranked before
    the vector is ready, so the vector, which the rest waits for, never waits for a thread to wake
    (bench_search_floor.py). A helper that has not started by then (every helper busy with other searches) is
    not waited for: the search runs the statements itself. Semantic search, and any search while the process
    runs more rankings than it has cores (`crowded`: no core is idle to overlap on), embeds in the background
    instead, beside the statements run on the search's thread.
    """
    if mode == "hybrid" and emb is None and q.vector_pending and not crowded:
        pending = _FRONTS.submit(_plan_and_rank_text, conn, q, scope, mode, fusion, planner, extra, head_texts)
        try:
            q.vector
        except BaseException:
            futures_wait([pending])   # the connection is the helper's until it is done
            raise
        if not pending.cancel():
            return pending.result()
    elif emb is None and mode != "fulltext":
        q.start_vector()
    return _plan_and_rank_text(conn, q, scope, mode, fusion, planner, extra, head_texts)


def _ranked(conn: Any, query: PreparedQuery, emb: np.ndarray | None, mode: str, fusion: Fusion, output: str,
            front: _Front, meanwhile: Meanwhile | None = None) -> list[tuple]:
    """The ranking statement's rows (the second of a hybrid search in two statements, `meanwhile` run while the
    database works on it)."""
    scope, plan, params = front.scope, front.plan, front.params
    if mode != "fulltext":
        params["emb"] = emb if emb is not None else query.vector
    sql = build_statement(mode, fusion, scope, plan.order, output, lexical_given=front.lexical_given,
                          walk=plan.index_predicate, walk_checks=plan.walk_checks)
    if front.lexical_given:
        head = front.head
        return _execute(conn, sql, params, not scope.has_filters, last=True,
                        meanwhile=(lambda answered: meanwhile(*head, answered))
                        if meanwhile is not None and head is not None else None)
    return _run_ranked(conn, sql, params, fusion, mode, not scope.has_filters)


def rank_documents(db: Any, query: str | PreparedQuery, emb: np.ndarray | None, req: SearchRequest,
                   fusion: Fusion = DEFAULT_FUSION, page_size: int | None = None,
                   offset: int | None = None, planner: PlannerSettings = DEFAULT_PLANNER,
                   meanwhile: Meanwhile | None = None) -> CoreResult:
    """One page of documents for a validated request (emb is None in full-text mode, or taken from a
    PreparedQuery when it is None); `meanwhile` gets the full-text head while the last statement runs.

    Raises IndexUnavailable when nothing is indexed in the request's scope.
    """
    q = prepared(query)
    scope = Scope(req.site_id, req.types, req.date_from, req.date_to, req.source)
    limit = page_size if page_size is not None else req.limit
    start = offset if offset is not None else req.offset
    # Deep pages need deeper candidate lists: a page shows `limit` documents of several chunks each.
    fusion = replace(fusion, candidates=min(1000, max(fusion.candidates, 3 * (start + limit))))
    extra = {"offset": start, "limit": limit, "max_chunks": req.max_chunks,
             "prove": min(fusion.candidates, max(PROVE_MIN, start + limit))}
    with _counted() as running, db.connection() as conn:
        crowded = running > _CORES
        if crowded:
            meanwhile = None
        front = _front(conn, q, emb, scope, req.mode, fusion, planner, extra, crowded,
                       MEANWHILE_TEXTS if meanwhile is not None else 0)
        if front.plan.target == 0 and not front.plan.languages:
            raise _nothing_indexed(req.site_id)
        if front.plan.target == 0:
            return CoreResult(0, [], {}, {}, 0.0, front.configs, "empty", query_texts=front.texts)
        rows = _ranked(conn, q, emb, req.mode, fusion, "documents", front, meanwhile)
    result = _documents_from_rows(rows, front.configs, front.plan.dense)
    result.query_texts = front.texts
    if scope.source and not front.plan.source_index and (front.plan.dense == "hnsw" or req.mode == "fulltext"):
        result.walked_filter = front.plan.target
    q.lexemes = result.lexemes
    return result



def _documents_from_rows(rows: list[tuple], configs: list[str], plan: str) -> CoreResult:
    if not rows:
        return CoreResult(0, [], {}, {}, 0.0, configs, plan)
    first = rows[0]
    docs: dict[int, DocumentHit] = {}
    for r in rows:
        (_, _, _, _, _, _, doc_rank, doc_score, doc_id, site_id, source, title, file_type, file_size, created, updated,
         doc_date, chunk_id, rank_in_doc, score, fr, dr, bm25, chunk_index, text, start, end, page, lang, cos, _) = r
        if doc_id is None:
            continue
        doc = docs.get(doc_id)
        if doc is None:
            doc = docs[doc_id] = DocumentHit(doc_id, site_id, source, title, file_type, int(file_size or 0), created,
                                             updated, doc_date, int(doc_rank), float(doc_score))
        if chunk_id is not None:
            doc.chunks.append(ChunkHit(
                chunk_id=chunk_id, document_id=doc_id, site_id=site_id, source=source, title=title,
                file_type=file_type, chunk_index=chunk_index, text=text, start_char=start, end_char=end,
                page_number=page, similarity=_clip(cos), score=float(score),
                dense_rank=int(dr) if dr is not None else None, fulltext_rank=int(fr) if fr is not None else None,
                fulltext_score=float(bm25) if bm25 is not None else None, language=lang,
            ))
    return CoreResult(total=int(first[0] or 0), documents=sorted(docs.values(), key=lambda d: d.rank),
                      document_types=dict(first[2] or {}), date_distribution=dict(sorted((first[3] or {}).items())),
                      top_score=float(first[1] or 0.0), configs=configs, plan=plan, terms=list(first[4] or []),
                      lexemes=list(first[5] or []))


def _clip(value: float | None) -> float:
    return 0.0 if value is None else max(0.0, min(1.0, float(value)))



def rank_chunks(db: Any, query: str | PreparedQuery, emb: np.ndarray | None, *, k: int = 5,
                site_id: str | None = None, mode: str = "hybrid", fusion: Fusion = DEFAULT_FUSION,
                types: Sequence[str] = (), date_from: dt.date | None = None, date_to: dt.date | None = None,
                source: str | None = None, planner: PlannerSettings = DEFAULT_PLANNER) -> list[ChunkHit]:
    """Top-k chunks (several may come from one document): what chat and Workbench.retrieve use.

    types, date_from, date_to and source narrow the documents as in `rank_documents`; emb None takes a
    PreparedQuery's vector.
    """
    q = prepared(query)
    scope = Scope(site_id, tuple(types), date_from, date_to, source)
    fusion = replace(fusion, candidates=min(1000, max(fusion.candidates, 2 * k)))
    with _counted() as running, db.connection() as conn:
        front = _front(conn, q, emb, scope, mode, fusion, planner,
                       {"k": k, "prove": min(fusion.candidates, max(PROVE_MIN, k))}, crowded=running > _CORES)
        if front.plan.target == 0:
            return []
        rows = _ranked(conn, q, emb, mode, fusion, "chunks", front)
    return [ChunkHit(chunk_id=r[0], document_id=r[1], site_id=r[2], source=r[3], title=r[4], file_type=r[5],
                     chunk_index=r[6], text=r[7], start_char=r[8], end_char=r[9], page_number=r[10],
                     similarity=_clip(r[11]), score=float(r[12]), dense_rank=r[13], fulltext_rank=r[14],
                     fulltext_score=float(r[15]) if r[15] is not None else None, language=r[16])
            for r in rows]


def term_coverage(db: Any, query: str | PreparedQuery, hits: Sequence[ChunkHit]) -> dict[int, float]:
    """For each hit, the share of the query's distinct lexemes that its chunk contains (0..1).

    Each chunk is judged under its own text-search config (stemmed English or Russian, bigrams
    for Japanese), so the figure says how much of the question the passage literally speaks of.
    A query with no lexemes (only stop words) covers nothing: its chunks are absent from the result.
    """
    if not hits:
        return {}
    q = prepared(query)
    langs = [h.language or "other" for h in hits]
    params = {"ids": [h.chunk_id for h in hits], "cfgs": [FTS_CONFIG.get(lang, "simple") for lang in langs],
              "texts": [q.text_for_language(lang) for lang in langs]}
    with db.connection() as conn:
        return {int(r[0]): float(r[1]) for r in conn.execute(COVERAGE_SQL, params).fetchall()}


def rank_fulltext(db: Any, query: str | PreparedQuery, *, k: int = 10, site_id: str | None = None,
                  types: Sequence[str] = (), fusion: Fusion = DEFAULT_FUSION,
                  exact: bool = False) -> tuple[list[tuple[int, float]], bool]:
    """The full-text ranking alone: ([(chunk id, BM25 score)] best first, whether it is provably exact).

    With exact=True every posting of every query lexeme is read and scored (the reference the
    pruned ranking is measured against).
    """
    q = prepared(query)
    scope = Scope(site_id, tuple(types))
    fusion = replace(fusion, candidates=k)
    if exact:
        fusion = replace(fusion, depth=2**31 - 1, rescore=2**31 - 1)
    sql = lexical_statement(scope)
    frag = scope_sql(scope)
    with db.connection() as conn:
        languages = [r[0] for r in conn.execute(
            f"SELECT DISTINCT s.language FROM corpus_stats s WHERE {frag['stats']}", scope_params(scope)).fetchall()]
        configs, texts = q.configs(languages)
        rows = _run_ranked(conn, sql, statement_params(scope, fusion, configs, texts, None), fusion)
    return [(int(r[0]), float(r[2])) for r in rows if r[0] is not None], bool(rows[0][-1]) if rows else True
