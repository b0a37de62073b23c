"""A LlamaIndex retriever over the workbench's hybrid retrieval, and the filter mapping it shares.

Hits become `NodeWithScore`s with `TextNode`s that carry the chunk's offsets in its document, the
document as the SOURCE relationship, and the metadata a citation needs (source, title, page,
site, language, similarity and the dense and full-text ranks).
"""

from __future__ import annotations

import asyncio
import datetime as dt
from dataclasses import replace
from typing import Any, Sequence

from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.schema import NodeRelationship, NodeWithScore, QueryBundle, RelatedNodeInfo, TextNode
from llama_index.core.vector_stores.types import FilterCondition, FilterOperator, MetadataFilter, MetadataFilters

from rag_core.ingest.handle import Store
from rag_core.errors import InvalidQuery
from rag_core.search.hybrid import Fusion, cosine_floor, fusion_for, rank_chunks
from rag_core.search.types import ChunkHit
from rag_core.search.validation import MODES, validate_search
from rag_core.security.ids import check_id
from rag_core.security.text import check_storable

# Metadata keys a filter may name, and the filter of ours each one becomes.
FILTER_KEYS = {
    "file_type": "types", "type": "types", "types": "types",
    "doc_date": "date", "date": "date",
    "source": "source",
    "site": "site_id", "site_id": "site_id",
}
_SUPPORTED = ("file_type (== or in), doc_date (>=, >, <=, <, ==; YYYY-MM-DD), source (== or text_match: a path or "
              "URL prefix, or any part of it), site (==); combined with AND")
# Metadata a language model sees with each node; the rest is for citations and scoring.
LLM_METADATA_KEYS = ("source", "title", "page")


def _unsupported(what: str) -> InvalidQuery:
    return InvalidQuery(f"{what} cannot be applied to the workbench's store; supported filters: {_SUPPORTED}.",
                        details={"field": "filters", "allowed": _SUPPORTED})


def _day(value: Any, key: str) -> dt.date:
    if isinstance(value, str):
        try:
            return dt.date.fromisoformat(value.strip()[:10])
        except ValueError:
            pass
    raise InvalidQuery(f"Filter {key}={value!r} is not a date; write it as YYYY-MM-DD, e.g. 2024-01-31.",
                       details={"field": "filters", "value": repr(value)})


def filter_scope(filters: MetadataFilters | None, site_id: str | None = None) -> dict[str, Any]:
    """LlamaIndex MetadataFilters as the workbench's own filters (types, date_from, date_to, source, site_id).

    Raises InvalidQuery naming the supported keys and operators for anything else (OR, nested
    filters, other keys or operators).
    """
    scope: dict[str, Any] = {"site_id": site_id}
    if filters is None or not filters.filters:
        return scope
    if filters.condition not in (None, FilterCondition.AND):
        raise _unsupported(f"The condition '{filters.condition.value}'")
    types: list[str] = []
    date_from = date_to = source = None
    for f in filters.filters:
        if not isinstance(f, MetadataFilter):
            raise _unsupported("A nested MetadataFilters")
        target, op = FILTER_KEYS.get(f.key), f.operator
        if target is None:
            raise _unsupported(f"A filter on '{f.key}'")
        check_storable(f.value, f"The filter on '{f.key}'")  # a NUL or a lone surrogate never reaches SQL
        if target == "types" and op in (FilterOperator.EQ, FilterOperator.IN):
            types += [f.value] if isinstance(f.value, str) else list(f.value or [])
        elif target == "date" and op in (FilterOperator.GTE, FilterOperator.GT, FilterOperator.EQ):
            day = _day(f.value, f.key) + dt.timedelta(days=1 if op == FilterOperator.GT else 0)
            date_from = max(date_from, day) if date_from else day
            if op == FilterOperator.EQ:
                date_to = min(date_to, day) if date_to else day
        elif target == "date" and op in (FilterOperator.LTE, FilterOperator.LT):
            day = _day(f.value, f.key) - dt.timedelta(days=1 if op == FilterOperator.LT else 0)
            date_to = min(date_to, day) if date_to else day
        elif target == "source" and op in (FilterOperator.EQ, FilterOperator.TEXT_MATCH) and isinstance(f.value, str):
            source = f.value
        elif target == "site_id" and op == FilterOperator.EQ and isinstance(f.value, str):
            check_id(f.value, f"The filter on '{f.key}'")
            if site_id is not None and f.value != site_id:
                raise InvalidQuery(f"The filter site={f.value!r} contradicts site_id={site_id!r}; give one of them.",
                                   details={"field": "filters"})
            scope["site_id"] = f.value
        else:
            raise _unsupported(f"The operator '{op.value}' on '{f.key}'")
    # The search's own validation: known types, dates in order, source length.
    checked = validate_search("filters", types=types or None, date_from=date_from, date_to=date_to, source=source,
                              site_id=scope["site_id"])
    scope.update(types=checked.types, date_from=checked.date_from, date_to=checked.date_to, source=checked.source)
    return scope


def node_ids(handle: Store, hits: Sequence[ChunkHit]) -> dict[int, tuple[str, str, dict[str, Any]]]:
    """chunk id -> (node id, document's ref id, node metadata): what LlamaIndex gave them, else ours.

    Our own chunks are `rag-<document id>-<chunk index>` in the document whose ref id is its source.
    """
    if not hits:
        return {}
    with handle.reads.connection() as conn:
        rows = conn.execute(
            "SELECT c.id, coalesce(c.metadata->>'node_id', 'rag-' || c.document_id || '-' || c.chunk_index),"
            " coalesce(d.metadata->>'ref_doc_id', d.source), c.metadata->'node_metadata'"
            " FROM chunks c JOIN documents d ON d.id = c.document_id WHERE c.id = ANY(%s)",
            ([h.chunk_id for h in hits],)).fetchall()
    return {int(r[0]): (r[1], r[2], r[3] or {}) for r in rows}


def hit_metadata(hit: ChunkHit) -> dict[str, Any]:
    return {
        "source": hit.source, "title": hit.title, "page": hit.page_number, "site": hit.site_id,
        "language": hit.language, "file_type": hit.file_type, "similarity": round(float(hit.similarity), 6),
        "score": float(hit.score), "dense_rank": hit.dense_rank, "fulltext_rank": hit.fulltext_rank,
        "fulltext_score": hit.fulltext_score, "chunk_id": int(hit.chunk_id), "document_id": int(hit.document_id),
        "chunk_index": int(hit.chunk_index),
    }


def hits_to_nodes(handle: Store, hits: Sequence[ChunkHit]) -> list[NodeWithScore]:
    """Hits as LlamaIndex nodes, in order, scored by the ranking's score."""
    ids = node_ids(handle, hits)
    out = []
    for hit in hits:
        node_id, ref_id, extra = ids.get(hit.chunk_id, (f"rag-{hit.document_id}-{hit.chunk_index}", hit.source, {}))
        metadata = {**extra, **hit_metadata(hit)}
        node = TextNode(
            id_=node_id, text=hit.text, start_char_idx=hit.start_char, end_char_idx=hit.end_char,
            metadata=metadata,
            relationships={NodeRelationship.SOURCE: RelatedNodeInfo(
                node_id=ref_id, metadata={"source": hit.source, "title": hit.title})},
            excluded_llm_metadata_keys=[k for k in metadata if k not in LLM_METADATA_KEYS],
            excluded_embed_metadata_keys=[k for k in metadata if k != "title"],
        )
        out.append(NodeWithScore(node=node, score=float(hit.score)))
    return out


def check_mode(mode: str) -> str:
    if mode not in MODES:
        raise InvalidQuery(f"Unknown retrieval mode {mode!r}; choose one of: {', '.join(MODES)}.",
                           details={"field": "mode", "allowed": ", ".join(MODES)})
    return mode


def fusion_of_search(handle: Store) -> Fusion:
    """The fusion and relevance floor search ranks with (SearchEngine's), so nodes come as search lists them."""
    fusion = fusion_for(handle.embedder_name)
    if fusion.cosine_floor is None:
        floor = cosine_floor(handle.settings.embedder, handle.settings.search_cosine_floor)
        fusion = replace(fusion, cosine_floor=floor)
    return fusion


def retrieve_nodes(handle: Store, query: str, *, k: int, mode: str, scope: dict[str, Any],
                   embedding: Sequence[float] | None = None) -> list[NodeWithScore]:
    """The top k chunks for a query under a filter scope, as nodes (the vector store's query uses it too)."""
    from rag_core.search.retrieval import embed_query

    import numpy as np

    check_storable(query, "query")
    handle.require_compatible()
    text = " ".join((query or "").split())
    if not text and (mode != "semantic" or embedding is None):
        raise InvalidQuery("The query is empty; give the text to retrieve for.", details={"field": "query"})
    if embedding is not None:
        emb = np.asarray(embedding, dtype=np.float32)
    else:
        emb = embed_query(handle.embedder, text) if mode != "fulltext" else None
    # The fusion (and relevance floor) `Workbench.search` ranks with: a notebook's nodes come best first with
    # the scores search reports. The default fusion ranked another embedder's hits in another order.
    hits = rank_chunks(handle.reads, text, emb, k=k, mode=mode, fusion=fusion_of_search(handle), **scope)
    return hits_to_nodes(handle, hits)


class WorkbenchRetriever(BaseRetriever):
    """The workbench's retrieval (hybrid: dense + BM25 fused in one SQL statement) as a LlamaIndex retriever.

    Args:
        mode: hybrid, semantic or fulltext.
        k: chunks per query (1-1000).
        site_id: one site; None retrieves from every site except the evaluation sites and the sample.
        filters: LlamaIndex MetadataFilters on file_type, doc_date, source and site.
    """

    def __init__(self, handle: Store, mode: str = "hybrid", k: int = 5, site_id: str | None = None,
                 filters: MetadataFilters | None = None, **kwargs: Any) -> None:
        if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= 1000:
            raise InvalidQuery(f"k is {k!r}; choose a whole number from 1 to 1000.", details={"field": "k"})
        self.handle = handle
        self.mode = check_mode(mode)
        self.k = k
        self.scope = filter_scope(filters, site_id)  # checked now: a bad filter fails here, not mid-query
        super().__init__(**kwargs)

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return retrieve_nodes(self.handle, query_bundle.query_str, k=self.k, mode=self.mode, scope=self.scope)

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        # The database and the embedder are synchronous: a worker thread keeps the event loop free.
        return await asyncio.to_thread(self._retrieve, query_bundle)
