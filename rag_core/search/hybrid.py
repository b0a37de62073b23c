"""The ranking SQL: dense ranks, BM25 full-text ranks and their fusion in ONE SQL statement (search takes
pages of documents from it through service.py, chat takes top chunks through retrieval.py).

Full text is BM25 (k1=0.9, b=0.4) over the chunks' tsvector lexemes (stemmed English and Russian,
character bigrams under 'simple' for Japanese), read from an inverted index kept in PostgreSQL
(`postings`, migration 0003: per site, lexeme and chunk the term frequency and the chunk length;
corpus size, total length and document frequencies come from corpus_stats / term_stats, 0002).
Triggers write all of it in the transaction that writes the chunks.

How the work per query lexeme is bounded, whatever the corpus size:
1. Each lexeme's postings are read from the head of its list in impact order (a btree on
   (site, lexeme, impact DESC)), at most `Fusion.depth` of them. The impact is BM25's
   term-frequency factor tf / (tf + k1 (1 - b + b len / L0)) at a fixed reference length L0, so it
   never goes stale; from the last impact read, `gm`, the most any unread posting of that lexeme
   can add at the current average length L is idf (k1 + 1) gm / (gm + min(1, L0 / L) (1 - gm)).
   Whether a list is cut, and that bound, come before the walk from one index probe per list (its
   `depth`-th posting: the same filter, OFFSET depth - 1), so every posting read carries its
   list's bound and the postings go from the index straight into one aggregate per chunk.
   Grouping them a second time by list (to find the cut lists), joining the bounds back and
   keeping a materialized copy for both cost PostgreSQL 1.1-1.8 ms per search (SciFact, 10.6K
   chunks: hybrid 13.5 -> 12.3 ms on the service benchmark's queries, 11.3 without the copy; full
   text 6.2 -> 5.1 ms; 100K chunks, full text 11.6 -> 10.3 ms; the same results and scores).
2. A chunk's seen contributions are exact; adding the bounds of the cut lists it was not seen in
   gives its optimistic score (max-score / NRA style). The best `Fusion.rescore` chunks by that
   score are rescored exactly: whole lists give their seen contributions, cut lists are probed by
   primary key; the top `candidates` of them are the full-text ranking.
3. The statement also reports whether the head of that ranking that a page shows (`prove`
   chunks: the page's end, at least 10) is provably exact: its last score is at least every other
   chunk's optimistic score and the sum of the bounds (a chunk seen nowhere). A list shorter than
   the depth is read whole, so rare lexemes are always exact. When the head is not proven exact
   the statement runs once more with `deep_depth` / `deep_rescore` (4x deeper), and a full-text
   search that still cannot prove it once more with `deeper_depth` / `deeper_rescore` (16x); the
   work per lexeme stays bounded by that depth. The third pass is for lists of many near-identical
   postings: at 1M chunks (the shared sets' sentence windows, each repeated about nine times) two
   passes proved 60 of 100 Russian queries and their top 10 shared 0.907 with an exact BM25 (scifact
   0.959); with the third, 98 and 1.000 (1.000 on all three sets; full text p50 46 -> 91 ms, p95
   101 -> 222 ms). Hybrid search, whose full-text side is 100 candidates for fusion, stops after two:
   the third doubled its PostgreSQL CPU at 1M chunks (p50 60 -> 115 ms, p95 90 -> 250 ms) and
   changed 3 of 30 top 10s. At 100K distinct chunks two passes already prove every query. The
   candidates past the head (fusion, totals and facets take 100) carry exact scores but are not
   proven to be the 100 best: proving all 100 sent 26 of 60 SciFact queries (10.6K chunks) to the
   deep pass, proving the head 1 of 60.
A max-score walk was measured and not taken: short lists read whole gave a lower bound of the 100th
score, and long lists whose ceilings (idf times the best impact) added up to less were left unread
and probed by key for the rescored chunks only. On SciFact (10.6K chunks, 300 queries, interleaved,
PostgreSQL CPU of the backend) it cut the full-text statement from 6.9 to 5.8 ms but the hybrid one
only from 11.5 to 11.4 ms (14.2 to 14.7 on the service benchmark's titles and sentences); a skipped
list adds its whole ceiling to every optimistic score, so 7 queries in 300 instead of 1 went to the
deep pass, the fusion candidates' overlap with exact BM25's top 100 fell from 0.978 to 0.960, and at
100K chunks 62 of 150 queries instead of 46 went deep. The lists it could skip are the ones the
depth already cuts, and a key probe costs PostgreSQL about as much as reading a posting, so there
was little to save. Reading those lists 100 deep instead of skipping them did no better, nor did
rescoring past the best 100 only the chunks whose optimistic score reaches the 10th or the 100th
exact score (hybrid 11.1-11.7 ms; with the 10th the candidates' overlap with exact BM25's top 100
fell to 0.81).
Filters are a per-posting check during the walk (document_id in the set of the filtered documents
for a narrow filter, a lookup of the posting's document for a broad one, see ROW_CHECK_SHARE), so the
walk continues until it has `depth` postings that pass or the list ends: full text is never empty
while a query lexeme occurs in the filtered scope, and a selective filter degrades to exact
scoring of that lexeme's list. Measured (see README "Full text at scale"): the same top-10 as an
exact BM25 over the same lexemes on every shared set (overlap in README), at a cost that stops
growing once lists are longer than the depth.

Dense candidates come from the HNSW index (pgvector 0.8 iterative scan when a filter or a site
narrows the set), or from an exact scan when the filtered set is small enough to read whole
(`exact_scan_limit`). Walking HNSW, a narrow filter is checked against a hashed set of the filtered
documents and a broad one by looking up each row's document (ROW_CHECK_SHARE); ranked exactly, the
filtered set is read from its documents' chunks. A filter far from the query costs the most: HNSW
then visits many tuples before `candidates` pass (up to hnsw.max_scan_tuples, see _prepare).

The two candidate lists are fused by weighted scores (see DEFAULT_FUSION and FUSION_BY_EMBEDDER for the
measured choices; weighted reciprocal rank is the other method on offer), chunks are grouped into
documents by their best chunk or by their best share of each side (`Fusion.documents`), and the page,
the total and the facets are computed over the same candidate set. Every value is a bound parameter;
the SQL text is assembled only from the fixed fragments below.
"""

from __future__ import annotations

import datetime as dt
import math
from dataclasses import dataclass, field, replace
from typing import Any, Sequence

import numpy as np

from rag_core.errors import IndexUnavailable
from rag_core.search.types import ChunkHit
from rag_core.search.validation import SearchRequest
from rag_core.security.ids import every_site_sql
from rag_core.textproc import FTS_CONFIG, cjk_bigrams, detect_language

# Dense candidates of a small filtered set are ranked exactly (its vectors read whole), of a larger
# one through HNSW with iterative scans. Measured at 100,864 chunks (eval/bench_search.py's filtered
# dense crossover, 30 queries, date filters keeping 2-100% of the chunks, README "Filtered search at
# 100K"): the exact scan costs about 0.006 ms per filtered chunk with the vectors in their rows
# (migration 0006_inline_vectors; 0.016 when each was a TOAST read), the iterative scan a cost that
# does not depend on the share plus about 5.7 ms / share, where share = filtered chunks / chunks in
# the index (a narrow filter makes HNSW visit many tuples to find enough that pass). With the fixed
# costs taken as equal, exact wins while 0.006 t < 5.7 N / t for t filtered chunks of N indexed:
# t < sqrt(950 N), ~9,800 at 100K (measured: 10% of the chunks, exact 57-65 ms against HNSW
# 58-81 ms; 5%, 37 against 112-125 ms; 20%, 77-99 against 50-66 ms), past EXACT_SCAN_MAX at 1M. A
# filter far from the query (other language, other corpus) costs HNSW more than this model says,
# never the exact scan. Never more than EXACT_SCAN_MAX vectors are read exactly.
EXACT_SCAN_MAX = 20_000
EXACT_MS_PER_CHUNK, HNSW_MS_PER_SHARE = 0.006, 5.7


def exact_scan_limit(indexed: int) -> int:
    """The largest filtered set (in chunks) ranked by exact scan when `indexed` chunks have vectors."""
    return min(EXACT_SCAN_MAX, int(math.sqrt(HNSW_MS_PER_SHARE / EXACT_MS_PER_CHUNK * max(indexed, 0))))

# The BM25 parameters and reference chunk length of the postings' impact order (migration 0003).
IMPACT_K1, IMPACT_B, IMPACT_LEN = 0.9, 0.4, 100.0
# The full-text head proven exact is at least this long (see the module docstring, point 3).
PROVE_MIN = 10
# The "minmax" fusion reads a cosine between the query's best and this dense rank's (fixed, so deeper
# pages, which take deeper candidate lists, rank their documents as the first page does).
SPREAD_DEPTH = 100
# Walking HNSW with a filter, a filter that keeps at most this share of the scope is checked against
# a hashed set of its documents, built once per statement; a broader one by looking up each row's
# document. A narrow filter can be far from the query (a folder of English abstracts, a Russian
# query: 15-20K tuples visited to find 100 that pass, at 100K chunks), where one hash probe per
# tuple instead of an index lookup halves the time; a broad one passes most tuples met, where the
# set of every filtered document (tens of thousands of ids) would cost more than the lookups.
ROW_CHECK_SHARE = 0.5
# ...and only while that set stays small enough for PostgreSQL to hash it within work_mem (4 MB by
# default, roughly 80K ids). Past that the planner keeps the IN as a plain subplan that scans the whole
# list for every tuple the walk meets: at 1M chunks a one-corpus filter (394K chunks) ran one statement
# for minutes. A larger set is checked by the per-row document lookup instead.
ROW_CHECK_MAX = 50_000
# A scope of more than COUNT_MAX_DOCS documents tells a filter's breadth from a sample of SAMPLE_DOCS of them
# before counting (see _filtered_chunks).
COUNT_MAX_DOCS, SAMPLE_DOCS = 50_000, 4000
# The sample also decides a narrow filter when its estimate is at most this share of the narrow bound:
# the set of its documents is then hashed in work_mem, which holds about 80K ids, so the estimate would
# have to be half the truth to overflow it (a sample of a few hundred blocks errs by a few percent on a
# filter keeping 40% of the documents). Counting a 40K-document filter on part of a path reads every
# document's source: at 100K chunks, deciding it from the sample took hybrid p50 from 133 to 89 ms
# (60 queries in three languages, interleaved, identical results).
SAMPLE_NARROW = 0.8
# HNSW's search breadth grows with the index: at 1M chunks (USE vectors, 30 queries, top 100 against an exact
# scan) ef_search 100 finds 0.893 of the exact top 10 in 5.2 ms, 200 finds 0.947 in 7.9 ms, 400 finds 0.983 in
# 12.9 ms; at 100K chunks 100 already found 0.981. The candidates' ef_search is scaled by the chunks indexed
# per EF_SCALE_CHUNKS, up to 4x.
EF_SCALE_CHUNKS = 250_000


def hnsw_ef_search(candidates: int, indexed: int) -> int:
    """hnsw.ef_search for `candidates` dense candidates from an index of `indexed` chunks."""
    return min(1000, int(max(40, candidates) * min(4.0, max(1.0, indexed / EF_SCALE_CHUNKS))))


# Most tuples an HNSW iterative scan may visit looking for rows that pass a filter.
MAX_SCAN_TUPLES_CAP = 200_000
MAX_SCAN_TUPLES_MIN = 20_000


@dataclass(frozen=True)
class Fusion:
    """How dense and full-text rankings are combined.

    method "rrf": score = w_fulltext / (k + fulltext_rank) + w_dense / (k + dense_rank).
    method "convex": alpha * bm25 / max(bm25) + (1 - alpha) * cosine.
    method "minmax": alpha * bm25 / max(bm25) + (1 - alpha) * (cosine - cos_S) / (cos_1 - cos_S), where cos_1 is
    the query's best cosine and cos_S its SPREAD_DEPTH-th best: BM25 has a true zero (no query term), a
    cosine has none (an unrelated passage still scores 0.79 with e5-small), so it is read against the spread
    of the query's own dense candidates.
    documents "best-chunk": a document scores as its best chunk; "best-of-each": its best full-text share
    plus its best dense share, which may come from different chunks.
    """

    method: str = "rrf"
    k: float = 5.0
    w_fulltext: float = 1.0
    w_dense: float = 0.2
    alpha: float = 0.9
    candidates: int = 100          # chunks taken from each ranking before fusion
    k1: float = 0.9                # BM25 term-frequency saturation
    b: float = 0.4                 # BM25 length normalisation
    prefilter_df: float = 0.1      # lexemes in more than this share of chunks are not reported as `terms`
    depth: int = 1000              # postings read from the head of each query lexeme's impact-ordered list
    rescore: int = 300             # candidates rescored exactly on the lexemes whose lists were cut
    deep_depth: int = 4000         # second pass, only when the first cannot prove its top exact
    deep_rescore: int = 1000
    deeper_depth: int = 16000      # third pass (full text alone), only when the second cannot prove it either
    deeper_rescore: int = 3000
    cosine_floor: float | None = None  # hybrid keeps a chunk without a full-text match only above this cosine
    documents: str = "best-chunk"  # how a document's score is made from its chunks' (see above)

    @property
    def max_score(self) -> float:
        """The best fused score possible (rank 1 in both lists), to scale scores into 0..1."""
        if self.method == "rrf":
            return self.w_fulltext / (self.k + 1) + self.w_dense / (self.k + 1)
        return 1.0


# Measured with `rag eval` on scifact, jsquad and ru_construction (README "Retrieval quality"):
# with the weak multilingual dense model, equal-weight RRF lands below BM25 alone on every set;
# 0.9 * bm25/max + 0.1 * cosine is the one setting tried that never lands below either part, and
# every alpha from 0.85 to 0.95 stays within 0.002 of it.
DEFAULT_FUSION = Fusion(method="convex", alpha=0.9)
# A strong dense model changes the balance. With e5-small, 0.625 * bm25/max + 0.375 * the cosine read between
# the query's best and 100th best dense candidate, a document scoring its best full-text share plus its best
# dense share, has the largest worst-set gain of hybrid nDCG@10 over the better of its parts among 300
# settings swept over the same cached candidate lists of the whole sets (eval/sweep_fusion_lists.py; README
# "e5-small"): +0.037 scifact, +0.015 jsquad, +0.016 ru_construction (the earlier convex 0.1 per best chunk:
# +0.040, +0.014, +0.006). Every alpha from 0.55 to 0.70 keeps the worst set at +0.0136 or more; no setting
# reaches +0.02 on jsquad (full text alone is 0.938 there) or on ru_construction.
FUSION_BY_EMBEDDER: dict[str, Fusion] = {
    "e5-small": Fusion(method="minmax", alpha=0.625, documents="best-of-each"),
}


def fusion_for(embedder: str) -> Fusion:
    """The measured fusion for an embedder (its registry name or recorded identity), else the default."""
    return FUSION_BY_EMBEDDER.get(embedder, DEFAULT_FUSION)


def cosine_floor(embedder: str, override: float | None = None) -> float | None:
    """The relevance floor of hybrid search: a chunk that matches no query lexeme counts as a hit only
    when its cosine to the query reaches it, so results, totals and facets count documents that match.

    It is the embedder's calibrated floor, the same cosine chat keeps a passage at
    (rag_core/providers/calibration.py, measured on the shared sets; README "Relevance floor");
    RAG_SEARCH_COSINE_FLOOR (`override`) wins. An uncalibrated embedder has no floor.
    """
    if override is not None:
        return override
    from rag_core.providers.calibration import SCALES

    scale = SCALES.get(embedder)
    return scale.chat_floor if scale is not None else None


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


@dataclass
class _Scope:
    site_id: str | None
    types: tuple[str, ...] = ()
    date_from: dt.date | None = None
    date_to: dt.date | None = None
    source: str | None = None

    @property
    def has_filters(self) -> bool:
        return bool(self.types or self.date_from or self.date_to or self.source)


def _like_prefix(value: str) -> str:
    escaped = value.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    # An absolute path or URL matches from the start; anything else anywhere in the source.
    anchored = value.startswith(("/", "http://", "https://")) or (len(value) > 2 and value[1] == ":")
    return f"{escaped}%" if anchored else f"%{escaped}%"


def _scope_sql(scope: _Scope) -> dict[str, str]:
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
        # Ranked exactly, a filtered set is read from its documents: the chunks of each filtered
        # document through the (document_id, chunk_index) index. As a semi-join the planner read every
        # chunk of the site and kept the filtered ones (220 ms of 450 at 100K chunks for 5.6K kept).
        "chunks_filtered": ("fd CROSS JOIN LATERAL (SELECT c.id, c.document_id, c.site_id, c.embedding FROM chunks c"
                            " WHERE c.document_id = fd.id OFFSET 0) c") if filters else "chunks c",
        # The postings walk joins a narrow filter's documents (a hash built once; a per-row check of the
        # same hashed set, which could stop the walk earlier, measured 5-25% slower at 100K chunks)...
        "posting_filter_set": " AND p.document_id IN (SELECT id FROM fd)" if filters else "",
        # ...and looks up each posting's document under a broad one. Joined, a set of hundreds of thousands
        # of documents overflows work_mem: the hash is then built in batches on disk, and again for every
        # list the walk reads (at 1M chunks a filter keeping every document cost 1.9 s of a 2.3 s statement).
        "posting_filter_row": row_check("p.document_id"),
        # Walking HNSW the filter must stay a per-row check: as a join the planner would rank every
        # filtered chunk exactly instead (seconds at 100K chunks with a broad filter). Inside
        # coalesce() the IN is not turned into a join: it is a hashed set of the filtered documents,
        # built once per statement, and each row the walk meets costs one hash probe.
        "chunk_filter_set": " AND coalesce(c.document_id IN (SELECT id FROM fd), false)" if filters else "",
        # A broad filter passes most rows the HNSW walk meets, so a lookup of each row's document is
        # cheaper than building the set of every filtered document (see ROW_CHECK_SHARE).
        "chunk_filter_row": row_check("c.document_id"),
        "fd": f"fd AS MATERIALIZED (SELECT d.id FROM documents d WHERE {doc_site}{checks})," if filters else "",
    }


def _scope_params(scope: _Scope) -> dict[str, Any]:
    params: dict[str, Any] = {"site": scope.site_id}
    if scope.types:
        params["types"] = list(scope.types)
    if scope.date_from:
        params["date_from"] = dt.datetime.combine(scope.date_from, dt.time(), tzinfo=dt.timezone.utc)
    if scope.date_to:
        params["date_to"] = dt.datetime.combine(scope.date_to + dt.timedelta(days=1), dt.time(), tzinfo=dt.timezone.utc)
    if scope.source:
        params["source"] = _like_prefix(scope.source)
    return params


def query_configs(query: str, languages_in_use: Sequence[str]) -> tuple[list[str], list[str]]:
    """(text-search configs, query text for each): the query's language plus every language stored.

    A Russian query against Russian chunks is stemmed with 'russian' whatever the server's
    default_text_search_config; in a mixed site its lexemes are OR-ed under each config in use.
    Japanese chunks are indexed as character bigrams under 'simple', so the query is bigrammed too.
    """
    langs = {lang for lang in languages_in_use if lang}
    qlang = detect_language(query)
    if qlang != "other":
        langs.add(qlang)
    if not langs:
        langs = {"other"}
    configs = sorted({FTS_CONFIG.get(lang, "simple") for lang in langs})
    texts = [cjk_bigrams(query) if cfg == "simple" else query for cfg in configs]
    return configs, texts


# --- SQL fragments -------------------------------------------------------------------------------

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

# Full-text top-k from the postings (migration 0003): the head of each query lexeme's impact-ordered
# list, its chunks rescored exactly on the lexemes whose lists were cut (see the module docstring).
_FULLTEXT_RANK_CTES = r"""
sites AS (SELECT DISTINCT s.site_id FROM corpus_stats s WHERE {stats_scope}),
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
cut_sum AS (SELECT site_id, sum(ub) AS ub FROM cut GROUP BY 1),
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
              WHERE f.id IS NOT NULL OR 1 - d.dist >= %(floor)s) x) y
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
           (SELECT array_agg(lex ORDER BY lex) FROM qw
            WHERE qw.df <= %(prefilter_df)s * (SELECT n FROM cs)
               OR NOT EXISTS (SELECT 1 FROM qw q2 WHERE q2.df <= %(prefilter_df)s * (SELECT n FROM cs))) AS terms,
           (SELECT array_agg(lex) FROM qw) AS lexemes
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

_CHUNK_OUTPUT = """
top AS (SELECT * FROM fused ORDER BY score DESC, id LIMIT %(k)s)
SELECT t.id, c.document_id, c.site_id, d.source, d.title, d.file_type, c.chunk_index, c.text,
       c.start_char, c.end_char, c.page_number, {cos} AS cos, t.score, t.dr, t.fr, t.bm25, c.language,
       {ft_exact} AS ft_exact
FROM top t JOIN chunks c ON c.id = t.id JOIN documents d ON d.id = c.document_id
ORDER BY t.score DESC, t.id
"""


def build_statement(mode: str, fusion: Fusion, scope: _Scope, dense_order: str, output: str) -> str:
    """The one statement for a mode: CTEs for each ranking, their fusion, then the page or top chunks.

    dense_order (from _prepare) also says how a filter is checked: "index" looks up each row's document
    (a broad filter, in the postings walk as in the HNSW walk); "index_set" and "exact" use the set of the
    filtered documents (a narrow one).
    """
    frag = _scope_sql(scope)
    row_check = dense_order == "index"
    parts = ["WITH", frag["fd"]] if frag["fd"] and not row_check else ["WITH"]
    if mode in ("fulltext", "hybrid") or output == "documents":
        # The query's lexemes and their statistics; documents output reports the rare ones as `terms`.
        parts.append(_LEXEME_CTES.format(stats_scope=frag["stats"]))
    if mode in ("fulltext", "hybrid"):
        posting_filter = frag["posting_filter_row" if row_check else "posting_filter_set"]
        parts.append(_FULLTEXT_RANK_CTES.format(stats_scope=frag["stats"], posting_filter=posting_filter))
    if mode in ("semantic", "hybrid"):
        if dense_order in ("index", "index_set"):
            order, chunks = "c.embedding <=> %(emb)b::vector", "chunks c"
            dense_filter = frag["chunk_filter_set" if dense_order == "index_set" else "chunk_filter_row"]
        else:  # "+ 0" keeps the planner off the index: the filtered set is small enough to rank exactly
            order, chunks, dense_filter = "(c.embedding <=> %(emb)b::vector) + 0", frag["chunks_filtered"], ""
        parts.append(_DENSE_CTES.format(chunks=chunks, chunk_scope=frag["chunk"], chunk_filter=dense_filter,
                                        order=order))
    parts.append(_FUSED[fusion.method if mode == "hybrid" else mode])
    cos = "1 - (c.embedding <=> %(emb)b::vector)" if mode != "fulltext" else "NULL::float8"
    ft_exact = "(SELECT exact FROM ft_exact)" if mode in ("fulltext", "hybrid") else "NULL::boolean"
    doc_score = _DOCUMENT_SCORE[fusion.documents]
    parts.append((_DOCUMENT_OUTPUT if output == "documents" else _CHUNK_OUTPUT).format(cos=cos, ft_exact=ft_exact,
                                                                                        doc_score=doc_score))
    return "\n".join(parts)


# --- running it ----------------------------------------------------------------------------------

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
    frag = _scope_sql(_Scope(site_id))
    with db.connection() as conn:
        found = conn.execute(f"SELECT EXISTS (SELECT 1 FROM corpus_stats s WHERE {frag['stats']} AND s.n_chunks > 0)",
                             {"site": site_id}).fetchone()[0]
    if not found:
        raise _nothing_indexed(site_id)


def _prepare(conn: Any, scope: _Scope, mode: str, fusion: Fusion) -> tuple[int, list[str], str, str]:
    """Session settings for this transaction and the sizes that choose the dense plan and the filter check.

    Returns (chunks in scope after filters, capped where it stops mattering; languages stored in
    scope; dense plan: "exact", "hnsw" or "none"; the dense order for build_statement, which also
    says how the filter is checked: "index" for a broad filter, looked up row by row, in full text too).

    Every statement is planned for its own parameters. A generic plan per connection for unfiltered
    searches saved about 1.2 ms of PostgreSQL's CPU per hybrid statement at 10.6K chunks (11.6 -> 10.4 ms)
    and 0-2 ms at 100K, but at 1M chunks it raised the hybrid statement from 68-239 to 1,300-2,960 ms
    (15 queries in three languages, twice): a plan that cannot see the query's values walks no index
    the way the custom plan does. It is not used.
    """
    frag = _scope_sql(scope)
    params = _scope_params(scope)
    row = conn.execute(
        "SELECT set_config('jit', 'off', true),"
        f" (SELECT coalesce(sum(s.n_chunks), 0) FROM corpus_stats s WHERE {frag['stats']}),"
        " (SELECT coalesce(sum(s.n_chunks), 0) FROM corpus_stats s),"
        f" (SELECT array_agg(language) FROM (SELECT s.language FROM corpus_stats s WHERE {frag['stats']}"
        "   GROUP BY s.language HAVING sum(s.n_chunks) > 0) x),"
        " (SELECT reltuples FROM pg_class WHERE oid = 'documents'::regclass)",
        params,
    ).fetchone()
    in_scope, everything, languages = int(row[1]), int(row[2]), list(row[3] or [])
    if in_scope <= 0:
        return 0, languages, "none", "exact"
    target = _filtered_chunks(conn, frag, params, in_scope, everything, float(row[4] or -1)) if scope.has_filters \
        else in_scope
    narrow = target <= min(ROW_CHECK_SHARE * in_scope, ROW_CHECK_MAX)
    plan, order = "none", "exact" if narrow or not scope.has_filters else "index"
    if mode in ("semantic", "hybrid") and target > 0:
        n = fusion.candidates
        if target <= exact_scan_limit(everything):
            plan, order = "exact", "exact"
        else:
            plan = "hnsw"
            order = "index_set" if scope.has_filters and narrow else "index"
            share = max(min(target, in_scope) / max(everything, 1), 1e-6)
            max_scan = int(min(MAX_SCAN_TUPLES_CAP, max(MAX_SCAN_TUPLES_MIN, 4 * n / share)))
            conn.execute(
                "SELECT set_config('hnsw.ef_search', %s, true), set_config('hnsw.iterative_scan', 'relaxed_order', true),"
                " set_config('hnsw.max_scan_tuples', %s, true),"
                # Above the measured crossover the index is the cheaper plan, but on a store of a few
                # thousand chunks the planner's estimate still picks a sequential scan and a sort.
                " set_config('enable_seqscan', 'off', true), set_config('enable_bitmapscan', 'off', true)",
                (str(hnsw_ef_search(n, everything)), str(max_scan)),
            )
    return target, languages, plan, order


def _filtered_chunks(conn: Any, frag: dict[str, str], params: dict[str, Any], in_scope: int, everything: int,
                     documents: float) -> int:
    """Chunks behind the filters, as precisely as the plan and the filter check need them.

    A large scope is sampled first (TABLESAMPLE: SAMPLE_DOCS of its documents, a few milliseconds at 1M
    chunks); when the sample shows a filter well past the exact scan's size and clearly on one side of the
    narrow bound, its estimate decides. Otherwise the filtered documents
    are counted, only up to what decides the plan and the check: past EXACT_SCAN_MAX chunks and past the
    narrow filter's bound (ROW_CHECK_SHARE of the scope, at most ROW_CHECK_MAX; every document has a
    chunk). Counting alone cost 260-600 ms at 1M chunks for a filter on one corpus whose sources sort
    after the others' (the count walks the source index to find 50K that pass).
    """
    scope_docs = documents * in_scope / max(everything, 1) if documents > 0 else 0.0
    if scope_docs > COUNT_MAX_DOCS:
        pct = min(100.0, 100.0 * SAMPLE_DOCS / scope_docs)
        sampled, chunks, kept = conn.execute(
            f"SELECT count(*), sum(d.chunk_count), coalesce(sum(d.chunk_count) FILTER (WHERE {frag['doc_filters']}), 0)"
            f" FROM documents d TABLESAMPLE SYSTEM (%(pct)s) REPEATABLE (0) WHERE {frag['doc_site']}",
            {**params, "pct": pct}).fetchone()
        # Too few documents in the sample (the table's estimate stale or far off) leave it to the count.
        enough = pct >= 100.0 or sampled >= SAMPLE_DOCS // 4
        estimate = int(in_scope * kept / chunks) if enough and chunks else 0
        bound = min(ROW_CHECK_SHARE * in_scope, ROW_CHECK_MAX)
        if estimate > 2 * exact_scan_limit(everything) and (estimate > 2 * bound or estimate <= SAMPLE_NARROW * bound):
            return estimate
    return int(conn.execute(
        f"SELECT coalesce(sum(x.n), 0) FROM (SELECT d.chunk_count AS n FROM documents d WHERE {frag['doc']}"
        f" LIMIT greatest({EXACT_SCAN_MAX}, least({ROW_CHECK_MAX}, %(in_scope)s::bigint * {ROW_CHECK_SHARE})::bigint) + 1) x",
        {**params, "in_scope": in_scope}).fetchone()[0])


def _params(scope: _Scope, fusion: Fusion, configs: list[str], texts: list[str], emb: np.ndarray | None) -> dict[str, Any]:
    params = _scope_params(scope)
    params.update({
        "cfgs": configs, "qtexts": texts, "prefilter_df": fusion.prefilter_df, "k1": fusion.k1, "b": fusion.b,
        "n": fusion.candidates, "rescore": max(fusion.rescore, fusion.candidates), "impact_len": IMPACT_LEN,
        "prove": fusion.candidates,
        # The impact order bounds unread postings only for the BM25 parameters it was built with.
        "depth": max(fusion.depth, fusion.candidates) if (fusion.k1, fusion.b) == (IMPACT_K1, IMPACT_B) else 2**31 - 1,
        "wf": fusion.w_fulltext, "wd": fusion.w_dense, "rrf_k": fusion.k,
        "alpha": fusion.alpha, "spread": SPREAD_DEPTH, "floor": fusion.cosine_floor if fusion.cosine_floor is not None else -2.0,
    })
    if emb is not None:
        params["emb"] = emb
    return params


def _run_ranked(conn: Any, sql: str, params: dict[str, Any], fusion: Fusion, mode: str = "fulltext") -> list[tuple]:
    """Run a statement whose last column says whether its full-text top is provably exact; when it
    is not (lists cut too early, e.g. many near-duplicate chunks), run it again reading deeper: once
    (`deep_depth`), and for full text alone, whose ranking is BM25's, once more (`deeper_depth`). A tier
    no deeper than the last pass ends the retries."""
    rows = conn.execute(sql, params).fetchall()
    tiers = [(fusion.deep_depth, fusion.deep_rescore)]
    if mode == "fulltext":
        tiers.append((fusion.deeper_depth, fusion.deeper_rescore))
    for depth, rescore in tiers:
        if not rows or rows[0][-1] is not False or params["depth"] >= depth:
            break
        params = {**params, "depth": depth, "rescore": max(params["rescore"], rescore)}
        rows = conn.execute(sql, params).fetchall()
    return rows


def search_documents(db: Any, query: str, emb: np.ndarray | None, req: SearchRequest,
                     fusion: Fusion = DEFAULT_FUSION, page_size: int | None = None,
                     offset: int | None = None) -> CoreResult:
    """One page of documents for a validated request (emb is None in full-text mode).

    Raises IndexUnavailable when nothing is indexed in the request's scope.
    """
    scope = _Scope(req.site_id, req.types, req.date_from, req.date_to, req.source)
    limit = page_size if page_size is not None else req.limit
    start = offset if offset is not None else req.offset
    # Deep pages need deeper candidate lists: a page shows `limit` documents of several chunks each.
    fusion = replace(fusion, candidates=min(1000, max(fusion.candidates, 3 * (start + limit))))
    with db.connection() as conn:
        target, languages, plan, order = _prepare(conn, scope, req.mode, fusion)
        if target == 0 and not languages:
            raise _nothing_indexed(req.site_id)
        configs, texts = query_configs(query, languages)
        if target == 0:
            return CoreResult(0, [], {}, {}, 0.0, configs, "empty", query_texts=texts)
        sql = build_statement(req.mode, fusion, scope, order, "documents")
        params = _params(scope, fusion, configs, texts, emb)
        params.update({"offset": start, "limit": limit, "max_chunks": req.max_chunks,
                       "prove": min(fusion.candidates, max(PROVE_MIN, start + limit))})
        rows = _run_ranked(conn, sql, params, fusion, req.mode)
    result = _documents_from_rows(rows, configs, plan)
    result.query_texts = texts
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


def search_chunks(db: Any, query: str, emb: np.ndarray | None, *, k: int = 5, site_id: str | None = None,
                  mode: str = "hybrid", fusion: Fusion = DEFAULT_FUSION, types: Sequence[str] = (),
                  date_from: dt.date | None = None, date_to: dt.date | None = None,
                  source: str | None = None) -> list[ChunkHit]:
    """Top-k chunks (several may come from one document): what chat and Workbench.retrieve use.

    types, date_from, date_to and source narrow the documents as in `search_documents`.
    """
    scope = _Scope(site_id, tuple(types), date_from, date_to, source)
    fusion = replace(fusion, candidates=min(1000, max(fusion.candidates, 2 * k)))
    with db.connection() as conn:
        target, languages, _, order = _prepare(conn, scope, mode, fusion)
        if target == 0:
            return []
        configs, texts = query_configs(query, languages)
        sql = build_statement(mode, fusion, scope, order, "chunks")
        params = _params(scope, fusion, configs, texts, emb)
        params.update({"k": k, "prove": min(fusion.candidates, max(PROVE_MIN, k))})
        rows = _run_ranked(conn, sql, params, fusion, mode)
    return [ChunkHit(chunk_id=r[0], document_id=r[1], site_id=r[2], source=r[3], title=r[4], file_type=r[5],
                     chunk_index=r[6], text=r[7], start_char=r[8], end_char=r[9], page_number=r[10],
                     similarity=_clip(r[11]), score=float(r[12]), dense_rank=r[13], fulltext_rank=r[14],
                     fulltext_score=float(r[15]) if r[15] is not None else None, language=r[16])
            for r in rows]


_COVERAGE_SQL = """
SELECT i.id, count(*) FILTER (WHERE l.lex = ANY (tsvector_to_array(c.fts)))::float8 / count(*)
FROM unnest(%(ids)s::bigint[], %(cfgs)s::text[], %(texts)s::text[]) AS i(id, cfg, txt)
JOIN chunks c ON c.id = i.id
CROSS JOIN LATERAL (SELECT DISTINCT lex FROM unnest(tsvector_to_array(to_tsvector(i.cfg::regconfig, i.txt))) AS u(lex)) l
GROUP BY i.id
"""


def term_coverage(db: Any, query: str, hits: Sequence[ChunkHit]) -> dict[int, float]:
    """For each hit, the share of the query's distinct lexemes that its chunk contains (0..1).

    Each chunk is judged under its own text-search config (stemmed English or Russian, bigrams
    for Japanese), so the figure says how much of the question the passage literally speaks of.
    A query with no lexemes (only stop words) covers nothing: its chunks are absent from the result.
    """
    if not hits:
        return {}
    langs = [h.language or "other" for h in hits]
    params = {"ids": [h.chunk_id for h in hits], "cfgs": [FTS_CONFIG.get(lang, "simple") for lang in langs],
              "texts": [cjk_bigrams(query) if lang == "ja" else query for lang in langs]}
    with db.connection() as conn:
        return {int(r[0]): float(r[1]) for r in conn.execute(_COVERAGE_SQL, params).fetchall()}


def fulltext_ranking(db: Any, query: str, *, k: int = 10, site_id: str | None = None, types: Sequence[str] = (),
                     fusion: Fusion = DEFAULT_FUSION, exact: bool = False) -> tuple[list[tuple[int, float]], bool]:
    """The full-text ranking alone: ([(chunk id, BM25 score)] best first, whether it is provably exact).

    With exact=True every posting of every query lexeme is read and scored (the reference the
    pruned ranking is measured against).
    """
    scope = _Scope(site_id, tuple(types))
    fusion = replace(fusion, candidates=k)
    if exact:
        fusion = replace(fusion, depth=2**31 - 1, rescore=2**31 - 1)
    frag = _scope_sql(scope)
    sql = "\n".join(["WITH", frag["fd"], _LEXEME_CTES.format(stats_scope=frag["stats"]),
                     _FULLTEXT_RANK_CTES.format(stats_scope=frag["stats"], posting_filter=frag["posting_filter_set"]),
                     "x AS (SELECT 1) SELECT f.id, f.score, (SELECT exact FROM ft_exact) FROM ft f ORDER BY f.score DESC, f.id"])
    with db.connection() as conn:
        languages = [r[0] for r in conn.execute(
            f"SELECT DISTINCT s.language FROM corpus_stats s WHERE {frag['stats']}", _scope_params(scope)).fetchall()]
        configs, texts = query_configs(query, languages)
        rows = _run_ranked(conn, sql, _params(scope, fusion, configs, texts, None), fusion)
    return [(int(r[0]), float(r[1])) for r in rows], bool(rows[0][2]) if rows else True
