"""The planner of a search statement: how the dense candidates are found (exact scan or HNSW) and how a
filter is checked, chosen from the sizes of the scope and of the filtered set (docs/search-method.md)."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any, NamedTuple

from psycopg.pq import TransactionStatus

from rag_core.search.fusion import Fusion
from rag_core.search.sql import Scope, covers, scope_params, scope_sql, source_index_predicate


@dataclass(frozen=True)
class PlannerSettings:
    """The planner's cost model and bounds; tests and benchmarks pass their own, never patch module globals."""

    # A filtered set is ranked exactly while exact_ms_per_chunk * t < hnsw_ms_per_share * N / t
    # (t filtered chunks of N indexed), never past exact_scan_max (bench_search.py's filtered dense crossover).
    exact_scan_max: int = 20_000
    exact_ms_per_chunk: float = 0.006
    hnsw_ms_per_share: float = 5.7
    # A fixed exact-scan limit in chunks instead of the cost model: benchmarks and tests force a plan with it.
    exact_scan_chunks: int | None = None
    # A filter keeping at most this share of the scope is checked against a hashed set of its documents,
    # a broader one by looking up each row's document (bench_search.py, one-corpus source filter at 165K).
    row_check_share: float = 0.6
    # ...and only while that set costs less to build than the lookups it saves (bench_search.py at 165K);
    # work_mem is raised for the transaction so the set is hashed in memory (set_work_mem_bytes per chunk).
    row_check_max: int = 150_000
    set_work_mem_bytes: int = 128
    # A filter with an index of its own is checked against that set up to this many chunks, whatever its share
    # (work_mem follows the set: 122 MB at the bound), and looked up per row past it.
    own_set_max: int = 1_000_000
    # Semantic search alone has no postings walk to share the set with: building it cost more than the lookups
    # it saves past these (bench_search.py, semantic with the one-corpus filter at 167K).
    dense_row_check_share: float = 0.5
    dense_row_check_max: int = 50_000
    # A scope of more than count_max_docs documents tells a filter's breadth from a sample of sample_docs first.
    count_max_docs: int = 50_000
    sample_docs: int = 4000
    # The sample alone decides a narrow filter when its estimate is at most this share of the narrow bound,
    # a broad one when it is past sample_broad times the bound (a wrong side costs time, never results;
    # the count it saves read up to row_check_max documents: bench_search.py, one-corpus filter at 165K).
    sample_narrow: float = 0.8
    sample_broad: float = 1.25
    # hnsw.ef_search grows with the chunks indexed per ef_scale_chunks, up to 4x (bench_search.py's HNSW recall).
    ef_scale_chunks: int = 250_000
    # Most tuples an HNSW iterative scan may visit looking for rows that pass a filter.
    max_scan_tuples_cap: int = 200_000
    max_scan_tuples_min: int = 20_000

    def exact_scan_limit(self, indexed: int) -> int:
        """The largest filtered set (in chunks) ranked by exact scan when `indexed` chunks have vectors."""
        if self.exact_scan_chunks is not None:
            return self.exact_scan_chunks
        return min(self.exact_scan_max,
                   int(math.sqrt(self.hnsw_ms_per_share / self.exact_ms_per_chunk * max(indexed, 0))))

    def hnsw_ef_search(self, candidates: int, indexed: int) -> int:
        """hnsw.ef_search for `candidates` dense candidates from an index of `indexed` chunks."""
        return min(1000, int(max(40, candidates) * min(4.0, max(1.0, indexed / self.ef_scale_chunks))))

    def narrow_bound(self, in_scope: int) -> float:
        """The most filtered chunks checked against a hashed set of the filtered documents."""
        return min(self.row_check_share * in_scope, self.row_check_max)


DEFAULT_PLANNER = PlannerSettings()


class Plan(NamedTuple):
    """What the planner chose for one statement."""

    target: int            # chunks in scope after filters, capped where it stops mattering
    languages: list[str]   # languages stored in scope
    dense: str             # "exact", "hnsw" or "none"
    order: str             # the dense order for build_statement: "exact", "index_set" or "index" (a broad filter)
    # With an HNSW plan, the predicate of the source filter's own index (sql.source_index_predicate) when one
    # covers the filter: the walk then visits only that filter's chunks.
    index_predicate: str = ""
    # False when that index holds exactly the filtered chunks (the filter's own, and no other filter): the walk
    # then checks no filter at all.
    walk_checks: bool = True
    # The filter of the source index that covers the search's source filter, in any mode ("" when none does).
    source_index: str = ""


# Each site's distinct file types by a loose walk of (site_id, file_type) (one index probe per type), and
# its date range and whether any document has no date; only the sites that hold chunks matter.
_SCOPE_BOUNDS = """
WITH RECURSIVE sites AS (SELECT s.site_id FROM corpus_stats s WHERE {stats} GROUP BY 1 HAVING sum(s.n_chunks) > 0),
types AS (
    SELECT s.site_id, (SELECT min(d.file_type) FROM documents d WHERE d.site_id = s.site_id) AS t FROM sites s
    UNION ALL
    SELECT x.site_id, (SELECT min(d.file_type) FROM documents d WHERE d.site_id = x.site_id AND d.file_type > x.t)
    FROM types x WHERE x.t IS NOT NULL
)
SELECT (SELECT array_agg(DISTINCT t) FROM types WHERE t IS NOT NULL),
       (SELECT min((SELECT min(d.doc_date) FROM documents d WHERE d.site_id = s.site_id)) FROM sites s),
       (SELECT max((SELECT max(d.doc_date) FROM documents d WHERE d.site_id = s.site_id)) FROM sites s),
       EXISTS (SELECT 1 FROM sites s WHERE EXISTS (
           SELECT 1 FROM documents d WHERE d.site_id = s.site_id AND d.doc_date IS NULL))
"""


def without_covering_filters(conn: Any, scope: Scope) -> Scope:
    """`scope` without the type and date filters that keep every document of its sites.

    Such a filter changes no result, but checked on every posting and HNSW row it cost more than the rest of the
    search (bench_search.py, type filter); dropped, the search takes the unfiltered plan.
    """
    if not (scope.types or scope.date_from or scope.date_to):
        return scope
    info = getattr(conn, "info", None)
    if info is not None and info.transaction_status == TransactionStatus.IDLE:
        # The bounds and the search read one snapshot: a document stored in between cannot pass a dropped filter.
        conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
    bounds = scope_params(scope)
    types, first, last, undated = conn.execute(_SCOPE_BOUNDS.format(stats=scope_sql(scope)["stats"]),
                                               bounds).fetchone()
    dated = not undated and first is not None
    return replace(
        scope,
        types=() if scope.types and set(types or ()) <= set(scope.types) else scope.types,
        date_from=None if scope.date_from and dated and first >= bounds["date_from"] else scope.date_from,
        date_to=None if scope.date_to and dated and last < bounds["date_to"] else scope.date_to,
    )


def plan_search(conn: Any, scope: Scope, mode: str, fusion: Fusion,
                settings: PlannerSettings = DEFAULT_PLANNER) -> Plan:
    """Session settings for this transaction and the sizes that choose the dense plan and the filter check.

    Without a filter the ranking statements are planned once per connection (force_generic_plan), their
    row counts written into their text (sql.with_fixed_limits): with the LIMITs as parameters a generic plan
    walked no index at 1M chunks (bench_search.py at 1M). A filter's selectivity shapes the plan, so a
    filtered search is planned for its own parameters.
    """
    if mode == "semantic":
        settings = replace(settings, row_check_share=settings.dense_row_check_share,
                           row_check_max=settings.dense_row_check_max)
    frag = scope_sql(scope)
    params = scope_params(scope)
    cache_mode = "force_custom_plan" if scope.has_filters else "force_generic_plan"
    indexable = bool(scope.source and scope.site_id)
    row = conn.execute(
        f"SELECT set_config('jit', 'off', true), set_config('plan_cache_mode', '{cache_mode}', true),"
        f" (SELECT coalesce(sum(s.n_chunks), 0) FROM corpus_stats s WHERE {frag['stats']}),"
        " (SELECT coalesce(sum(s.n_chunks), 0) FROM corpus_stats s),"
        f" (SELECT array_agg(language) FROM (SELECT s.language FROM corpus_stats s WHERE {frag['stats']}"
        "   GROUP BY s.language HAVING sum(s.n_chunks) > 0) x),"
        " (SELECT reltuples FROM pg_class WHERE oid = 'documents'::regclass)"
        + (", (SELECT array_agg(source_filter) FROM vector_source_indexes WHERE site_id = %(site)s)"
           if indexable else ""),
        params,
    ).fetchone()
    row = row[1:]
    in_scope, everything, languages = int(row[1]), int(row[2]), list(row[3] or [])
    index_filters = list(row[5] or []) if indexable else []
    if in_scope <= 0:
        return Plan(0, languages, "none", "exact")
    target = filtered_chunks(conn, frag, params, in_scope, everything, float(row[4] or -1), settings) \
        if scope.has_filters else in_scope
    covering = [f for f in index_filters if covers(f, scope.source or "")]
    own = max(covering, key=len) if covering else ""   # the narrowest index that holds every chunk the filter keeps
    # The filter's own index carries a btree of its documents: their set is read from it, not from every document
    # of the site, so even a broad filter is checked against the hashed set. Looked up per posting, the documents
    # of a list the filter rejects were read one by one: 523K lookups, 1.3 s, for a Russian query filtered to the
    # English corpus (bench_search.py at 1M, full text with the one-corpus filter; hashing its 424K documents
    # takes about 120 ms, and probing the set in the walk's order measured no better than the join).
    own_set = own == scope.source and not (scope.types or scope.date_from or scope.date_to)
    narrow = target <= settings.narrow_bound(in_scope) or (own_set and target <= settings.own_set_max)
    dense, order = "none", "exact" if narrow or not scope.has_filters else "index"
    predicate, walk_checks = "", True
    configs: list[str] = []   # this transaction's settings, sent in one statement
    values: list[Any] = []
    if scope.has_filters and narrow and target > 0:
        # A set hashed past work_mem spills to disk and is rebuilt for every posting list it is joined to.
        configs.append("set_config('work_mem', (SELECT greatest(setting::bigint, %s) FROM pg_settings"
                       " WHERE name = 'work_mem') || 'kB', true)")
        values.append(max(1, target * settings.set_work_mem_bytes // 1024))
    if mode in ("semantic", "hybrid") and target > 0:
        n = fusion.candidates
        if target <= settings.exact_scan_limit(everything):
            dense, order = "exact", "exact"
        else:
            dense = "hnsw"
            order = "index_set" if scope.has_filters and narrow else "index"
            share = max(min(target, in_scope) / max(everything, 1), 1e-6)
            max_scan = int(min(settings.max_scan_tuples_cap, max(settings.max_scan_tuples_min, 4 * n / share)))
            configs.append(
                "set_config('hnsw.ef_search', %s, true), set_config('hnsw.iterative_scan', 'relaxed_order', true),"
                " set_config('hnsw.max_scan_tuples', %s, true),"
                # Above the crossover the index is the cheaper plan, but on a small store the planner's
                # estimate still picks a sequential scan and a sort.
                " set_config('enable_seqscan', 'off', true), set_config('enable_bitmapscan', 'off', true)")
            values += [str(settings.hnsw_ef_search(n, everything)), str(max_scan)]
            if own:
                predicate = source_index_predicate(scope.site_id or "", own, alias="c")
                walk_checks = own != scope.source or bool(scope.types or scope.date_from or scope.date_to)
    if configs:
        conn.execute("SELECT " + ", ".join(configs), values)
    return Plan(target, languages, dense, order, predicate, walk_checks, own)


def filtered_chunks(conn: Any, frag: dict[str, str], params: dict[str, Any], in_scope: int, everything: int,
                    documents: float, settings: PlannerSettings = DEFAULT_PLANNER) -> int:
    """Chunks behind the filters, as precisely as the plan and the filter check need them.

    A large scope is sampled first (TABLESAMPLE); when the sample shows a filter well past the exact scan's
    size and clearly on one side of the narrow bound, its estimate decides. Otherwise the filtered documents
    are counted, only up to what decides the plan and the check (every document has a chunk).
    """
    scope_docs = documents * in_scope / max(everything, 1) if documents > 0 else 0.0
    if scope_docs > settings.count_max_docs:
        pct = min(100.0, 100.0 * settings.sample_docs / scope_docs)
        sampled, chunks, kept = conn.execute(
            f"SELECT count(*), sum(d.chunk_count), coalesce(sum(d.chunk_count) FILTER (WHERE {frag['doc_filters']}), 0)"
            f" FROM documents d TABLESAMPLE SYSTEM (%(pct)s) REPEATABLE (0) WHERE {frag['doc_site']}",
            {**params, "pct": pct}).fetchone()
        # Too few documents in the sample (the table's estimate stale or far off) leave it to the count.
        enough = pct >= 100.0 or sampled >= settings.sample_docs // 4
        estimate = int(in_scope * kept / chunks) if enough and chunks else 0
        bound = settings.narrow_bound(in_scope)
        if estimate > 2 * settings.exact_scan_limit(everything) and (
                estimate > settings.sample_broad * bound or estimate <= settings.sample_narrow * bound):
            return estimate
    return int(conn.execute(
        f"SELECT coalesce(sum(x.n), 0) FROM (SELECT d.chunk_count AS n FROM documents d WHERE {frag['doc']}"
        f" LIMIT greatest({int(settings.exact_scan_max)}, least({int(settings.row_check_max)},"
        f" %(in_scope)s::bigint * {float(settings.row_check_share)})::bigint) + 1) x",
        {**params, "in_scope": in_scope}).fetchone()[0])
