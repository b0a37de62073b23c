"""What search and its query log hand to callers: the search spec's response, the metrics, the log rows.

These are the dicts every surface returns as is (REST, MCP, the CLI's JSON, notebooks), so they are
TypedDicts: callers index them like any dict, and editors and type checkers know each key. The REST
service derives its OpenAPI response schemas from them (`rag_core.api.schemas`), so a key added here
is published there.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Literal

from typing_extensions import NotRequired, TypedDict

if TYPE_CHECKING:
    import pandas as pd


class ContextChunk(TypedDict):
    """One of a result document's best chunks, in rank order."""

    chunk_id: int
    chunk_index: int
    text: str
    page_number: int | None
    start_char: int
    end_char: int
    relevance_score: float  # 0..1, comparable within one response
    score: float  # the ranking's own score (fused, BM25 or cosine)
    similarity: float | None  # cosine to the query; None in full-text mode
    dense_rank: int | None
    fulltext_rank: int | None
    fulltext_score: float | None


class SearchDocument(TypedDict):
    """One result document: where it is, how it ranked, its highlighted fragments and context chunks."""

    id: str  # "doc_<document_id>"
    document_id: int
    site_id: str
    title: str  # "" when the document has none
    file_path: str  # the document's source: a file path or a URL
    file_type: str
    file_size: str  # human-readable, e.g. "12.3 KB"
    file_size_bytes: int
    created_at: str | None  # ISO 8601, UTC
    updated_at: str | None
    document_date: str | None
    relevance_score: float
    score: float
    rank: int
    dense_rank: int | None
    fulltext_rank: int | None
    highlights: list[str]
    highlight_spans: list[list[list[int]]]  # per highlight, the [start, end) of each matched word
    context_chunks: list[ContextChunk]
    rerank_score: NotRequired[float]  # only when a reranker is configured


class Facets(TypedDict):
    """Counts over every candidate document after filters, not only one page."""

    document_types: dict[str, int]
    date_distribution: dict[str, int]


class SearchResponse(TypedDict):
    """`Workbench.search()`: the search spec's response."""

    success: Literal[True]
    query: str
    mode: str
    total_results: int
    page: int
    limit: int
    total_pages: int
    search_time: str  # e.g. "0.042s"
    results: list[SearchDocument]
    facets: Facets
    suggestions: list[str]


class QueryCount(TypedDict):
    query: str
    count: int
    last_at: str  # ISO 8601


class DailySearches(TypedDict):
    day: str  # YYYY-MM-DD, UTC
    searches: int
    typed_searches: int  # of them typed by people (not a page, filter or chart click repeating a search)
    errors: int
    zero_results: int
    avg_ms: float | None


class LatencyBucket(TypedDict):
    label: str
    from_ms: float
    to_ms: float | None  # None: the open-ended last bucket
    searches: int


class LatencyHistogram(TypedDict):
    """`Workbench.search_latency_histogram()`: successful searches per latency bucket, with p50 and p95."""

    searches: int
    p50_ms: float | None
    p95_ms: float | None
    buckets: list[LatencyBucket]


class SearchMetrics(TypedDict):
    """`Workbench.search_metrics()`: counts, latency, popular and zero-result queries, a per-day series."""

    site_id: str | None
    since: str | None
    searches: int
    typed_searches: int
    errors: int
    zero_results: int
    cache_hits: int
    avg_ms: float | None
    p50_ms: float | None
    p95_ms: float | None
    by_mode: dict[str, int]
    errors_by_code: dict[str, int]
    stage_p50_ms: dict[str, float]  # median milliseconds of each stage (cache hits have none)
    popular_queries: list[QueryCount]
    zero_result_queries: list[QueryCount]
    daily: list[DailySearches]
    latency: LatencyHistogram  # the successful searches per latency bucket, from the same snapshot


class LoggedSearch(TypedDict):
    """A row of `Workbench.query_log()`."""

    created_at: datetime
    query: str
    mode: str
    results: int
    ms: float
    error_code: str | None
    cache: str  # hit, miss or off
    site_id: str | None
    user_id: str | None


class SearchResults(dict):  # type: ignore[type-arg]
    """The search response as a dict of its own type (the same JSON on every surface): a notebook shows it
    as HTML (`rag_core.render.jupyter` registers the look) and `to_pandas()` makes a DataFrame of it."""

    def to_pandas(self) -> "pd.DataFrame":
        """One row per result document, in rank order."""
        import pandas as pd

        first = (self.get("page", 1) - 1) * self.get("limit", 10) + 1
        rows = [{"rank": n, "title": r.get("title"), "source": r.get("file_path"), "file_type": r.get("file_type"),
                 "score": r.get("relevance_score"), "dense_rank": r.get("dense_rank"),
                 "fulltext_rank": r.get("fulltext_rank"), "highlight": (r.get("highlights") or [""])[0],
                 "document_date": r.get("document_date"), "site_id": r.get("site_id")}
                for n, r in enumerate(self.get("results") or [], first)]
        return pd.DataFrame(rows, columns=["rank", "title", "source", "file_type", "score", "dense_rank",
                                           "fulltext_rank", "highlight", "document_date", "site_id"])
