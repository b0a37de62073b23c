"""The ranking statement's SQL: the scope and filter fragments, the CTEs of each ranking, their fusion and
the page or top-chunk output, assembled by `build_statement` from fixed text (docs/search-method.md).

Every value is a bound parameter; the SQL text is assembled only from the fixed fragments below, but for the
predicate of a source filter's HNSW index, whose site and pattern are quoted literals: PostgreSQL walks a partial
index only for a query whose own text proves its predicate.
"""

from __future__ import annotations

import datetime as dt
import hashlib
from dataclasses import dataclass
from typing import Any

import numpy as np
from psycopg import sql as psql

from rag_core.search.fusion import SPREAD_DEPTH, Fusion
from rag_core.security.ids import every_site_sql

# The BM25 parameters and reference chunk length of the postings' impact order (migration 0003).
IMPACT_K1, IMPACT_B, IMPACT_LEN = 0.9, 0.4, 100.0

@dataclass
class Scope:
    site_id: str | None
    types: tuple[str, ...] = ()
    date_from: dt.date | None = None
    date_to: dt.date | None = None
    source: str | None = None

    @property
    def has_filters(self) -> bool:
        return bool(self.types or self.date_from or self.date_to or self.source)


def like_prefix(value: str) -> str:
    escaped = value.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    # An absolute path or URL matches from the start; anything else anywhere in the source.
    anchored = value.startswith(("/", "http://", "https://")) or (len(value) > 2 and value[1] == ":")
    return f"{escaped}%" if anchored else f"%{escaped}%"


# HNSW indexes of one source filter (ingest/vector_index.py builds them; planner.plan_search walks one).
SOURCE_INDEX_PREFIX = "chunks_hnsw_src_"


def source_index_name(site_id: str, source_filter: str) -> str:
    return SOURCE_INDEX_PREFIX + hashlib.sha1(f"{site_id}\0{source_filter}".encode()).hexdigest()[:16]


def source_index_predicate(site_id: str, source_filter: str, alias: str = "") -> str:
    """The partial index's WHERE, and what a search adds to its walk (the same text, so PostgreSQL proves
    that the index holds every row the walk may return); quoted literals, never parameters."""
    col = f"{alias}." if alias else ""
    return psql.SQL("{}site_id = {} AND {}source LIKE {}").format(
        psql.SQL(col), psql.Literal(site_id), psql.SQL(col), psql.Literal(like_prefix(source_filter))).as_string(None)


def covers(index_filter: str, source_filter: str) -> bool:
    """Whether every source the filter `source_filter` keeps is kept by `index_filter` (sql.like_prefix: an
    absolute path or URL is a prefix, anything else a part)."""
    index_pattern, pattern = like_prefix(index_filter), like_prefix(source_filter)
    if index_pattern.startswith("%"):   # a part: any source holding the narrower text holds it too
        return index_filter in source_filter
    return not pattern.startswith("%") and source_filter.startswith(index_filter)


def scope_sql(scope: Scope) -> dict[str, str]:
    """SQL fragments for the site scope (evaluation sites and the sample are never part of 'every site')."""
    if scope.site_id is not None:
        site = "{a}.site_id = %(site)s"
    else:
        site = every_site_sql("{a}.site_id")
    filters = []
    if scope.types:
        filters.append("d.file_type = ANY(%(types)s)")
    if scope.date_from:
        filters.append("d.doc_date >= %(date_from)s")
    if scope.date_to:
        filters.append("d.doc_date < %(date_to)s")
    if scope.source:
        filters.append(r"d.source LIKE %(source)s ESCAPE '\'")
    doc_site, checks = site.format(a="d"), "".join(f" AND {f}" for f in filters)

    def row_check(document_id: str) -> str:
        """A per-row lookup of the row's document under the filters."""
        return f" AND (SELECT true FROM documents d WHERE d.id = {document_id}{checks})" if filters else ""

    return {
        "chunk": site.format(a="c"),
        "stats": site.format(a="s"),
        "doc": doc_site + checks,
        "doc_site": doc_site,
        "doc_filters": " AND ".join(filters) or "true",
        # Ranked exactly, a filtered set is read from its documents' chunks by index: as a semi-join the
        # planner read every chunk of the site and kept the filtered ones (bench_search.py, filtered dense).
        "chunks_filtered": ("fd CROSS JOIN LATERAL (SELECT c.id, c.document_id, c.site_id, c.embedding FROM chunks c"
                            " WHERE c.document_id = fd.id OFFSET 0) c") if filters else "chunks c",
        # The postings walk joins a narrow filter's documents, a hash built once (a per-row check of the
        # same set was slower: bench_search.py, source filter at 100K)...
        "posting_filter_set": " AND p.document_id IN (SELECT id FROM fd)" if filters else "",
        # ...and looks up each posting's document under a broad one: joined, a set of hundreds of thousands
        # of documents overflows work_mem and is rebuilt on disk for every list (bench_search.py at 1M).
        "posting_filter_row": row_check("p.document_id"),
        # Walking HNSW the filter must stay a per-row check (as a join the planner ranks every filtered chunk
        # exactly); inside coalesce() the IN stays a hashed set of the filtered documents, one probe per row.
        "chunk_filter_set": " AND coalesce(c.document_id IN (SELECT id FROM fd), false)" if filters else "",
        # A broad filter passes most rows the HNSW walk meets, so a lookup of each row's document is
        # cheaper than building the set of every filtered document (PlannerSettings.row_check_share).
        "chunk_filter_row": row_check("c.document_id"),
        "fd": f"fd AS MATERIALIZED (SELECT d.id FROM documents d WHERE {doc_site}{checks})," if filters else "",
    }


def scope_params(scope: Scope) -> dict[str, Any]:
    params: dict[str, Any] = {"site": scope.site_id}
    if scope.types:
        params["types"] = list(scope.types)
    if scope.date_from:
        params["date_from"] = dt.datetime.combine(scope.date_from, dt.time(), tzinfo=dt.timezone.utc)
    if scope.date_to:
        params["date_to"] = dt.datetime.combine(scope.date_to + dt.timedelta(days=1), dt.time(), tzinfo=dt.timezone.utc)
    if scope.source:
        params["source"] = like_prefix(scope.source)
    return params



_LEXEME_CTES = r"""
ql AS (
    SELECT DISTINCT l.lex
    FROM unnest(%(cfgs)s::text[], %(qtexts)s::text[]) AS i(cfg, txt)
    CROSS JOIN LATERAL unnest(tsvector_to_array(to_tsvector(i.cfg::regconfig, i.txt))) AS l(lex)
),
cs AS (
    SELECT greatest(coalesce(sum(s.n_chunks), 0), 1)::float8 AS n,
           greatest(coalesce(sum(s.sum_len), 0), 1)::float8 AS total_len
    FROM corpus_stats s WHERE {stats_scope}
),
qw AS (
    SELECT t.lexeme AS lex, t.df, ln(1 + (cs.n - t.df + 0.5) / (t.df + 0.5)) AS idf
    FROM (SELECT s.lexeme, sum(s.df)::float8 AS df FROM term_stats s
          WHERE {stats_scope} AND s.lexeme IN (SELECT lex FROM ql)
          GROUP BY s.lexeme HAVING sum(s.df) > 0) t
    CROSS JOIN cs
),
qa AS (SELECT (SELECT total_len / n FROM cs) AS avglen),
"""

# How the head of each list is read. Unfiltered, a probe for each list's `depth`-th posting gives its bound and
# the postings stream from the index into one aggregate per chunk (materializing the walk cost more:
# bench_search.py, no filter at 165K).
_PROBED_HEADS = r"""
lists AS MATERIALIZED (
    -- Each query lexeme's list in each site, and when it is longer than the walk reads (its `depth`-th
    -- posting exists), the bound of what its unread postings can add (from that posting's impact).
    SELECT s.site_id, q.lex, q.idf,
           q.idf * (%(k1)s + 1) * x.last / (x.last + least(1, %(impact_len)s / qa.avglen) * (1 - x.last)) AS ub
    FROM qw q CROSS JOIN sites s CROSS JOIN qa
    LEFT JOIN LATERAL (
        SELECT p.impact AS last FROM postings p
        WHERE p.site_id = s.site_id AND p.lexeme = q.lex{posting_filter}
        ORDER BY p.impact DESC OFFSET %(depth)s::bigint - 1 LIMIT 1) x ON true
),
pre AS (
    SELECT l.site_id, p.chunk_id, p.document_id, l.ub,
           l.idf * p.tf * (%(k1)s + 1) / (p.tf + %(k1)s * (1 - %(b)s + %(b)s * p.len / qa.avglen)) AS w
    FROM lists l CROSS JOIN qa
    CROSS JOIN LATERAL (
        SELECT p.chunk_id, p.document_id, p.tf, p.len FROM postings p
        WHERE p.site_id = l.site_id AND p.lexeme = l.lex{posting_filter}
        ORDER BY p.impact DESC LIMIT %(depth)s) p
),
cut AS (SELECT site_id, lex, idf, ub FROM lists WHERE ub IS NOT NULL),
"""

# Filtered, the walk checks every posting it reads, and when the filter rejects most of a list it reads all of
# it: the head is read once and gives its bound itself.
_WALKED_HEADS = r"""
walk AS MATERIALIZED (
    -- The head of each query lexeme's list in each site, read once, in the query's lexeme order. A list is cut
    -- when the walk read `depth` postings; the bound of what its unread postings can add comes from the least
    -- impact read (a probe for the `depth`-th posting walked the same head twice: bench_search.py, source filter
    -- at 165K). Each posting carries its list's bound, so the postings are summed per chunk in the walk's order.
    SELECT s.site_id, q.lex, q.idf, h.chunk_id, h.document_id, h.tf, h.len, h.nth,
           CASE WHEN h.n >= %(depth)s::bigint THEN
               q.idf * (%(k1)s + 1) * h.least_impact / (h.least_impact + least(1, %(impact_len)s / qa.avglen) * (1 - h.least_impact))
           END AS ub
    FROM qw q CROSS JOIN sites s CROSS JOIN qa
    CROSS JOIN LATERAL (
        SELECT p.*, count(*) OVER () AS n, min(p.impact) OVER () AS least_impact, row_number() OVER () AS nth FROM (
            SELECT p.chunk_id, p.document_id, p.tf, p.len, p.impact FROM postings p
            WHERE p.site_id = s.site_id AND p.lexeme = q.lex{posting_filter}
            ORDER BY p.impact DESC LIMIT %(depth)s) p) h
),
pre AS (
    SELECT w.site_id, w.chunk_id, w.document_id, w.ub,
           w.idf * w.tf * (%(k1)s + 1) / (w.tf + %(k1)s * (1 - %(b)s + %(b)s * w.len / qa.avglen)) AS w
    FROM walk w CROSS JOIN qa
),
cut AS (SELECT site_id, lex, idf, ub FROM walk WHERE nth = 1 AND ub IS NOT NULL),
"""

# Full-text top-k from the postings (migration 0003): the head of each query lexeme's impact-ordered
# list, its chunks rescored exactly on the lexemes whose lists were cut (docs/search-method.md).
_FULLTEXT_RANK_CTES = r"""
sites AS (SELECT DISTINCT s.site_id FROM corpus_stats s WHERE {stats_scope}),
{list_heads}cut_sum AS (SELECT site_id, sum(ub) AS ub FROM cut GROUP BY 1),
part AS (
    SELECT site_id, chunk_id, min(document_id) AS document_id, sum(w) AS seen,
           coalesce(sum(w) FILTER (WHERE ub IS NULL), 0) AS whole, coalesce(sum(ub), 0) AS seen_ub
    FROM pre GROUP BY 1, 2
),
opt AS MATERIALIZED (
    SELECT x.*, row_number() OVER (ORDER BY x.optimistic DESC, x.chunk_id) AS nth
    FROM (SELECT p.site_id, p.chunk_id, p.document_id, p.whole, p.seen + coalesce(s.ub, 0) - p.seen_ub AS optimistic
          FROM part p LEFT JOIN cut_sum s ON s.site_id = p.site_id
          ORDER BY optimistic DESC, p.chunk_id
          LIMIT %(rescore)s::bigint + 1) x
),
ft AS MATERIALIZED (
    SELECT o.chunk_id AS id, o.document_id, o.whole + coalesce((
               SELECT sum(c.idf * p.tf * (%(k1)s + 1)
                          / (p.tf + %(k1)s * (1 - %(b)s + %(b)s * p.len / (SELECT avglen FROM qa))))
               FROM cut c JOIN postings p ON p.site_id = c.site_id AND p.lexeme = c.lex AND p.chunk_id = o.chunk_id
               WHERE c.site_id = o.site_id), 0) AS score
    FROM opt o WHERE o.nth <= %(rescore)s
    ORDER BY score DESC, id
    LIMIT %(n)s
),
ftr AS (SELECT id, document_id, score, row_number() OVER (ORDER BY score DESC, id) AS r, max(score) OVER () AS mx FROM ft),
ft_exact AS (
    -- True when the head of the rescored top is provably the exact BM25 head: no chunk outside it can score more.
    SELECT coalesce((SELECT min(score) FROM ftr WHERE r <= %(prove)s), 0) >= greatest(
               coalesce((SELECT max(optimistic) FROM opt WHERE nth > %(rescore)s), 0),
               coalesce((SELECT max(ub) FROM cut_sum), 0)) AS exact
),
"""



def fulltext_rank_ctes(stats_scope: str, posting_filter: str) -> str:
    """The full-text ranking's CTEs, the heads of the lists read as the filter (or its absence) is cheapest."""
    heads = (_WALKED_HEADS if posting_filter else _PROBED_HEADS).format(posting_filter=posting_filter)
    return _FULLTEXT_RANK_CTES.format(stats_scope=stats_scope, list_heads=heads)


_DENSE_CTES = """
de AS MATERIALIZED (
    SELECT c.id, c.document_id, c.embedding <=> %(emb)b::vector AS dist
    FROM {chunks}
    WHERE {chunk_scope} AND c.embedding IS NOT NULL{chunk_filter}
    ORDER BY {order}
    LIMIT %(n)s
),
der AS (SELECT id, document_id, dist, row_number() OVER (ORDER BY dist, id) AS r FROM de),
"""

# Each fused row carries its two shares, `sf` (full text) and `sd` (dense), and score = sf + sd.
_CONVEX = """fused AS (
    SELECT y.*, y.sf + y.sd AS score FROM (
        SELECT x.id, x.document_id, x.fr, x.dr, x.bm25,
               %(alpha)s * coalesce(x.bm25 / nullif(x.mx, 0), 0) AS sf,
               (1 - %(alpha)s) * {cosine} AS sd
        FROM (SELECT coalesce(f.id, d.id) AS id, coalesce(f.document_id, d.document_id) AS document_id, f.r AS fr, d.r AS dr,
                     f.score AS bm25,
                     -- Only a full-text candidate the dense walk did not meet reads its vector (a join of every
                     -- candidate to chunks read them all).
                     coalesce(1 - d.dist, (SELECT 1 - (c.embedding <=> %(emb)b::vector) FROM chunks c WHERE c.id = f.id),
                              0) AS cos,
                     (SELECT max(mx) FROM ftr) AS mx
              FROM ftr f FULL JOIN der d ON d.id = f.id
              WHERE f.id IS NOT NULL OR 1 - d.dist >= %(floor)s
              OFFSET 0) x) y  -- OFFSET 0: each cosine read once, though minmax's formula names it twice
),"""

_FUSED = {
    "semantic": "fused AS (SELECT d.id, d.document_id, NULL::bigint AS fr, d.r AS dr, NULL::float8 AS bm25, 0::float8 AS sf, 1 - d.dist AS sd, 1 - d.dist AS score FROM der d),",
    "fulltext": "fused AS (SELECT f.id, f.document_id, f.r AS fr, NULL::bigint AS dr, f.score AS bm25, f.score AS sf, 0::float8 AS sd, f.score AS score FROM ftr f),",
    "rrf": """fused AS (
    SELECT y.*, y.sf + y.sd AS score FROM (
        SELECT coalesce(f.id, d.id) AS id, coalesce(f.document_id, d.document_id) AS document_id, f.r AS fr, d.r AS dr,
               f.score AS bm25, coalesce(%(wf)s / (%(rrf_k)s + f.r), 0) AS sf, coalesce(%(wd)s / (%(rrf_k)s + d.r), 0) AS sd
        FROM ftr f FULL JOIN der d ON d.id = f.id
        WHERE f.id IS NOT NULL OR 1 - d.dist >= %(floor)s) y
),""",
    "convex": _CONVEX.format(cosine="x.cos"),
    # The cosine read between the query's best and its `spread`-th best dense candidate (1 and 0).
    "minmax": _CONVEX.format(cosine="""coalesce((x.cos - (SELECT 1 - max(dist) FROM der WHERE r <= %(spread)s))
                 / greatest((SELECT max(dist) - min(dist) FROM der WHERE r <= %(spread)s), 1e-9), 0)"""),
}

# A document's score: its best chunk's, or ("best-of-each") its best full-text share plus its best dense share.
_DOCUMENT_SCORE = {"best-chunk": "max(score)", "best-of-each": "max(sf) + max(sd)"}

_DOCUMENT_OUTPUT = """
hits AS (
    SELECT f.*, row_number() OVER (PARTITION BY f.document_id ORDER BY f.score DESC, f.id) AS rank_in_doc
    FROM fused f
),
docs AS (
    SELECT document_id, {doc_score} AS doc_score, row_number() OVER (ORDER BY {doc_score} DESC, document_id) AS doc_rank
    FROM fused GROUP BY document_id
),
facet_rows AS (SELECT d.file_type, d.doc_date FROM docs JOIN documents d ON d.id = docs.document_id),
meta AS (
    SELECT (SELECT count(*) FROM docs) AS total,
           (SELECT max(doc_score) FROM docs) AS top_score,
           (SELECT jsonb_object_agg(file_type, n) FROM (
                SELECT file_type, count(*) AS n FROM facet_rows GROUP BY file_type) t) AS type_facet,
           (SELECT jsonb_object_agg(month, n) FROM (
                SELECT to_char(doc_date AT TIME ZONE 'UTC', 'YYYY-MM') AS month, count(*) AS n
                FROM facet_rows WHERE doc_date IS NOT NULL GROUP BY 1) t) AS date_facet,
           {terms} AS terms, {lexemes} AS lexemes
),
page AS (SELECT * FROM docs WHERE doc_rank > %(offset)s ORDER BY doc_rank LIMIT %(limit)s)
SELECT m.total, m.top_score,
       -- The facets and the query's lexemes once, on the first row: the client parsed them again for every row.
       CASE WHEN row_number() OVER w = 1 THEN m.type_facet END, CASE WHEN row_number() OVER w = 1 THEN m.date_facet END,
       CASE WHEN row_number() OVER w = 1 THEN m.terms END, CASE WHEN row_number() OVER w = 1 THEN m.lexemes END,
       p.doc_rank, p.doc_score, d.id, d.site_id, d.source, d.title, d.file_type, d.file_size,
       d.created_at, d.updated_at, d.doc_date,
       h.id, h.rank_in_doc, h.score, h.fr, h.dr, h.bm25,
       c.chunk_index, c.text, c.start_char, c.end_char, c.page_number, c.language, {cos} AS cos,
       {ft_exact} AS ft_exact
FROM meta m
LEFT JOIN page p ON true
LEFT JOIN documents d ON d.id = p.document_id
LEFT JOIN hits h ON h.document_id = p.document_id AND h.rank_in_doc <= %(max_chunks)s
LEFT JOIN chunks c ON c.id = h.id
WINDOW w AS (ORDER BY p.doc_rank, h.rank_in_doc)
ORDER BY p.doc_rank, h.rank_in_doc
"""

# The query's rare lexemes (the `terms` suggestions read) and all its lexemes found in scope.
_TERMS = """(SELECT array_agg(lex ORDER BY lex) FROM qw
            WHERE qw.df <= %(prefilter_df)s * (SELECT n FROM cs)
               OR NOT EXISTS (SELECT 1 FROM qw q2 WHERE q2.df <= %(prefilter_df)s * (SELECT n FROM cs)))"""
_LEXEMES = "(SELECT array_agg(lex) FROM qw)"

# The full-text candidates a first statement ranked (`lexical_statement`), given back as parameters.
_GIVEN_FTR = """ftr AS (
    SELECT t.id, t.document_id, t.score, row_number() OVER (ORDER BY t.score DESC, t.id) AS r, max(t.score) OVER () AS mx
    FROM unnest(%(ft_ids)s::bigint[], %(ft_docs)s::bigint[], %(ft_scores)s::float8[]) AS t(id, document_id, score)
),"""

_CHUNK_OUTPUT = """
top AS (SELECT * FROM fused ORDER BY score DESC, id LIMIT %(k)s)
SELECT t.id, c.document_id, c.site_id, d.source, d.title, d.file_type, c.chunk_index, c.text,
       c.start_char, c.end_char, c.page_number, {cos} AS cos, t.score, t.dr, t.fr, t.bm25, c.language,
       {ft_exact} AS ft_exact
FROM top t JOIN chunks c ON c.id = t.id JOIN documents d ON d.id = c.document_id
ORDER BY t.score DESC, t.id
"""


def build_statement(mode: str, fusion: Fusion, scope: Scope, dense_order: str, output: str,
                    lexical_given: bool = False, walk: str = "", walk_checks: bool = True) -> str:
    """The one statement for a mode: CTEs for each ranking, their fusion, then the page or top chunks.

    dense_order (from planner.plan_search) also says how a filter is checked: "index" looks up each row's document
    (a broad filter, in the postings walk as in the HNSW walk); "index_set" and "exact" use the set of the
    filtered documents (a narrow one). With lexical_given (hybrid only) the full-text candidates, the query's
    terms and lexemes and the proof of the head come as parameters from `lexical_statement`, run while the
    query was being embedded. `walk` (planner.Plan.index_predicate) confines an HNSW walk to a source filter's index,
    and without `walk_checks` (that index holds exactly the filtered chunks) the walk checks no filter.
    """
    frag = scope_sql(scope)
    row_check = dense_order == "index"
    parts = ["WITH", frag["fd"]] if frag["fd"] and not row_check else ["WITH"]
    given = lexical_given and mode == "hybrid"
    if given:
        parts.append(_GIVEN_FTR)
    elif mode in ("fulltext", "hybrid") or output == "documents":
        # The query's lexemes and their statistics; documents output reports the rare ones as `terms`.
        parts.append(_LEXEME_CTES.format(stats_scope=frag["stats"]))
    if mode in ("fulltext", "hybrid") and not given:
        posting_filter = frag["posting_filter_row" if row_check else "posting_filter_set"]
        parts.append(fulltext_rank_ctes(frag["stats"], posting_filter))
    if mode in ("semantic", "hybrid"):
        if dense_order in ("index", "index_set"):
            order, chunks = "c.embedding <=> %(emb)b::vector", "chunks c"
            dense_filter = frag["chunk_filter_set" if dense_order == "index_set" else "chunk_filter_row"]
            if walk:  # its LIKE pattern's % are not placeholders
                dense_filter = (dense_filter if walk_checks else "") + " AND " + walk.replace("%", "%%")
        else:  # "+ 0" keeps the planner off the index: the filtered set is small enough to rank exactly
            order, chunks, dense_filter = "(c.embedding <=> %(emb)b::vector) + 0", frag["chunks_filtered"], ""
        parts.append(_DENSE_CTES.format(chunks=chunks, chunk_scope=frag["chunk"], chunk_filter=dense_filter,
                                        order=order))
    parts.append(_FUSED[fusion.method if mode == "hybrid" else mode])
    cos = "1 - (c.embedding <=> %(emb)b::vector)" if mode != "fulltext" else "NULL::float8"
    if given:
        ft_exact, terms, lexemes = "%(ft_exact)s::boolean", "%(terms)s::text[]", "%(lexemes)s::text[]"
    else:
        ft_exact = "(SELECT exact FROM ft_exact)" if mode in ("fulltext", "hybrid") else "NULL::boolean"
        terms, lexemes = _TERMS, _LEXEMES
    doc_score = _DOCUMENT_SCORE[fusion.documents]
    parts.append((_DOCUMENT_OUTPUT if output == "documents" else _CHUNK_OUTPUT).format(
        cos=cos, ft_exact=ft_exact, doc_score=doc_score, terms=terms, lexemes=lexemes))
    return "\n".join(parts)


def lexical_statement(scope: Scope, dense_order: str = "exact") -> str:
    """The full-text ranking alone (a hybrid search's first part, which needs no vector): its candidates
    (id, document, BM25 score) best first, the query's terms and lexemes on every row, the language and text of
    the first `%(texts)s` candidates (hybrid.Meanwhile), and last whether the head is provably exact. One row
    with a NULL id when nothing matches."""
    frag = scope_sql(scope)
    row_check = dense_order == "index"
    posting_filter = frag["posting_filter_row" if row_check else "posting_filter_set"]
    return "\n".join([
        "WITH", frag["fd"] if frag["fd"] and not row_check else "",
        _LEXEME_CTES.format(stats_scope=frag["stats"]),
        fulltext_rank_ctes(frag["stats"], posting_filter),
        f"m AS (SELECT {_TERMS} AS terms, {_LEXEMES} AS lexemes, (SELECT exact FROM ft_exact) AS exact)",
        "SELECT f.id, f.document_id, f.score, m.terms, m.lexemes, t.language, t.text, m.exact FROM m"
        " LEFT JOIN ftr f ON true"
        " LEFT JOIN LATERAL (SELECT c.language, c.text FROM chunks c WHERE c.id = f.id AND f.r <= %(texts)s) t ON true"
        " ORDER BY f.score DESC, f.id"])


def number_array(values: Any) -> str:
    """A PostgreSQL array literal of numbers for a `%(x)s::bigint[]` or `::float8[]` parameter: psycopg dumps a
    list element by element, a cost on a hybrid search's path after its vector is ready (bench_search_floor.py).
    repr() of a float reads back as the same double."""
    return "{" + ",".join(repr(float(v)) if isinstance(v, float) else str(int(v)) for v in values) + "}"


# The row counts that shape a statement's plan (how far each index walk reads): written into the text of a
# statement planned once for all its parameters (`with_fixed_limits`).
PLAN_LIMITS = ("n", "depth", "rescore", "k")


def with_fixed_limits(sql: str, params: dict[str, Any]) -> str:
    """`sql` with its plan-shaping row counts as literals, so a generic plan knows them (integers we set)."""
    for name in PLAN_LIMITS:
        if name in params:
            sql = sql.replace(f"%({name})s", str(int(params[name])))
    return sql


def statement_params(scope: Scope, fusion: Fusion, configs: list[str], texts: list[str], emb: np.ndarray | None) -> dict[str, Any]:
    params = scope_params(scope)
    params.update({
        "cfgs": configs, "qtexts": texts, "prefilter_df": fusion.prefilter_df, "k1": fusion.k1, "b": fusion.b,
        "n": fusion.candidates, "rescore": max(fusion.rescore, fusion.candidates), "impact_len": IMPACT_LEN,
        "prove": fusion.candidates, "texts": 0,
        # The impact order bounds unread postings only for the BM25 parameters it was built with.
        "depth": max(fusion.depth, fusion.candidates) if (fusion.k1, fusion.b) == (IMPACT_K1, IMPACT_B) else 2**31 - 1,
        "wf": fusion.w_fulltext, "wd": fusion.w_dense, "rrf_k": fusion.k,
        "alpha": fusion.alpha, "spread": SPREAD_DEPTH, "floor": fusion.cosine_floor if fusion.cosine_floor is not None else -2.0,
    })
    if emb is not None:
        params["emb"] = emb
    return params



COVERAGE_SQL = """
SELECT i.id, count(*) FILTER (WHERE l.lex = ANY (tsvector_to_array(c.fts)))::float8 / count(*)
FROM unnest(%(ids)s::bigint[], %(cfgs)s::text[], %(texts)s::text[]) AS i(id, cfg, txt)
JOIN chunks c ON c.id = i.id
CROSS JOIN LATERAL (SELECT DISTINCT lex FROM unnest(tsvector_to_array(to_tsvector(i.cfg::regconfig, i.txt))) AS u(lex)) l
GROUP BY i.id
"""

