"""A LlamaIndex vector store over the workbench's own documents and chunks tables (no second copy).

`VectorStoreIndex.from_vector_store(wb.vector_store, embed_model=wb.embedder)` queries the same rows
`rag search` does, and nodes LlamaIndex inserts become documents and chunks like ingested ones:
one document per source document (the nodes' ref_doc_id), full-text indexed and searchable.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

from llama_index.core.bridge.pydantic import PrivateAttr
from llama_index.core.schema import BaseNode, MetadataMode
from llama_index.core.vector_stores.types import (
    BasePydanticVectorStore, VectorStoreQuery, VectorStoreQueryMode, VectorStoreQueryResult,
)

from rag_core.ingest.handle import Store
from rag_core.errors import InvalidInput, InvalidQuery, RagError
from rag_core.ingest import store
from rag_core.llamaindex.engines import workbench_llm
from rag_core.llamaindex.retriever import filter_scope, retrieve_nodes
from rag_core.chat.llms import LLM
from rag_core.search.validation import DOCUMENT_TYPES
from rag_core.security.documents import check_document
from rag_core.security.ids import check_optional_id
from rag_core.security.text import visible_title
from rag_core.textproc import detect_language, embedding_input, fts_text

QUERY_MODES = {
    VectorStoreQueryMode.DEFAULT: "semantic",
    VectorStoreQueryMode.SPARSE: "fulltext",
    VectorStoreQueryMode.TEXT_SEARCH: "fulltext",
    VectorStoreQueryMode.HYBRID: "hybrid",
    VectorStoreQueryMode.SEMANTIC_HYBRID: "hybrid",
}
# Where a node's metadata names its document (LlamaIndex readers use file_path).
SOURCE_KEYS = ("source", "file_path", "url", "file_name")
TITLE_KEYS = ("title", "file_name")


def _json_safe(data: dict[str, Any]) -> dict[str, Any]:
    return json.loads(json.dumps(data, default=str))


def _source_of(ref_id: str, metadata: dict[str, Any]) -> str:
    return next((str(metadata[k]) for k in SOURCE_KEYS if metadata.get(k)), f"llamaindex:{ref_id}")


def _document_row(site_id: str, ref_id: str, nodes: Sequence[BaseNode], vectors: Sequence[Sequence[float]]
                  ) -> store.DocumentRow:
    first = nodes[0].metadata or {}
    source = _source_of(ref_id, first)
    # A title from a node's metadata is cleaned like one from a document's content (`rag ingest`).
    title = visible_title(next((str(first[k]) for k in TITLE_KEYS if first.get(k)), Path(source).name or ref_id))
    suffix = Path(source).suffix.lower().lstrip(".")
    file_type = next((t for t in (str(first.get("file_type", "")).lower(), suffix) if t in DOCUMENT_TYPES), "txt")
    doc_date = None
    if isinstance(first.get("doc_date"), str):
        try:
            doc_date = dt.datetime.fromisoformat(first["doc_date"]).replace(tzinfo=dt.timezone.utc)
        except ValueError:
            doc_date = None
    texts = [n.get_content(metadata_mode=MetadataMode.NONE) for n in nodes]
    content = "\n\n".join(texts)
    doc_language = detect_language(content)
    chunks, start = [], 0
    for i, (text, vector) in enumerate(zip(texts, vectors)):
        lang = detect_language(text)
        lang = doc_language if lang == "other" else lang
        chunks.append(store.ChunkRow(
            chunk_index=i, text=text, start_char=start, end_char=start + len(text), token_count=len(text.split()),
            page_number=None, language=lang, fts_source=fts_text(f"{title}\n{text}", lang), embedding=vector))
        start += len(text) + 2
    return store.DocumentRow(
        site_id=site_id, source=source, title=title, file_type=file_type, file_size=len(content.encode("utf-8")),
        category="llamaindex", language=doc_language,
        content_hash=hashlib.sha256(content.encode("utf-8")).hexdigest(), content=content, doc_date=doc_date,
        metadata=_json_safe({**first, "ref_doc_id": ref_id, "added_by": "llamaindex"}), chunks=chunks)


def fill_llamaindex_defaults(handle: Store, answerer: Callable[[], LLM]) -> None:
    """Make the workbench's embedder and answerer LlamaIndex's defaults where the program has set none.

    Then `VectorStoreIndex.from_vector_store(wb.vector_store).as_query_engine()` embeds queries in the
    store's vector space and answers offline instead of reaching for OpenAI; a program's own
    `Settings.embed_model` / `Settings.llm` stay untouched.
    """
    from llama_index.core import Settings

    if Settings._embed_model is None:
        Settings.embed_model = handle.embedder
    if Settings._llm is None:
        Settings.llm = workbench_llm(answerer())


class WorkbenchVectorStore(BasePydanticVectorStore):
    """The workbench's store as a LlamaIndex vector store.

    Query modes: DEFAULT (dense), SPARSE and TEXT_SEARCH (BM25 full text), HYBRID (both fused in one
    SQL statement). Filters: see `filter_scope`. Nodes whose embedding is missing or comes from
    another model are embedded with the workbench's embedder; so is a query embedding of another
    dimension. Adding the nodes of a document replaces the nodes stored for that document.
    """

    stores_text: bool = True
    is_embedding_query: bool = True
    flat_metadata: bool = False
    site_id: Optional[str] = None
    _handle: Any = PrivateAttr()

    def __init__(self, handle: Store, site_id: str | None = None, **kwargs: Any) -> None:
        check_optional_id(site_id, "site_id")
        super().__init__(site_id=site_id, **kwargs)
        self._handle = handle

    @classmethod
    def class_name(cls) -> str:
        return "WorkbenchVectorStore"

    @property
    def client(self) -> Any:
        """The workbench's connection pool."""
        return self._handle.db

    def _dimension(self) -> int:
        self._handle.require_compatible()
        return store.read_store_info(self._handle.db)[1]

    # ----- writing -----
    def add(self, nodes: Sequence[BaseNode], **kwargs: Any) -> list[str]:
        """Store nodes as chunks of their source documents (site: this store's, else 'default').

        A document the document rules refuse (its source, its size: security/documents.py) is not embedded
        or stored; the others are, then InvalidInput names the refused ones."""
        if not nodes:
            return []
        dim = self._dimension()
        site = self.site_id or "default"
        groups: dict[str, list[BaseNode]] = {}
        for node in nodes:
            groups.setdefault(node.ref_doc_id or node.node_id, []).append(node)
        refused: list[str] = []
        for ref, group in list(groups.items()):
            source = _source_of(ref, group[0].metadata or {})
            try:
                check_document(site, source, "\n\n".join(n.get_content(metadata_mode=MetadataMode.NONE)
                                                          for n in group))
            except RagError as exc:
                refused.append(f"{source[:200]!r}: {exc.message}")
                del groups[ref]
        nodes = [n for group in groups.values() for n in group]
        missing = [n for n in nodes if n.embedding is None or len(n.embedding) != dim]
        if missing:  # LlamaIndex embedded with another model, or not at all: our embedder decides
            vectors = self._handle.embedder.get_text_embedding_batch(
                [embedding_input(str(n.metadata.get("title", "")), n.get_content(metadata_mode=MetadataMode.NONE))
                 for n in missing])
            fresh = {n.node_id: v for n, v in zip(missing, vectors)}
        else:
            fresh = {}
        rows = [_document_row(site, ref, group, [fresh.get(n.node_id, n.embedding) for n in group])
                for ref, group in groups.items()]
        written = store.write_documents(self._handle.db, rows)
        failed = refused + [f"{doc.source[:200]!r}: {error}" for doc, _, _, error in written if error]
        with self._handle.db.connection() as conn:
            with conn.cursor() as cur:
                cur.executemany(
                    "UPDATE chunks SET metadata = metadata || %s::jsonb WHERE document_id = %s AND chunk_index = %s",
                    [(json.dumps({"node_id": n.node_id, "node_metadata": _json_safe(n.metadata or {})}, default=str),
                      doc_id, i)
                     for (doc, doc_id, _, _), group in zip(written, groups.values()) if doc_id is not None
                     for i, n in enumerate(group)])
        self._handle.after_write()
        if failed:
            raise InvalidInput(f"{len(failed)} document(s) could not be stored: " + "; ".join(failed[:3]),
                               details={"refused": failed[:20]})
        return [n.node_id for n in nodes]

    def delete(self, ref_doc_id: str, **delete_kwargs: Any) -> None:
        """Delete the document LlamaIndex knows by this id (its ref_doc_id, or its source) with its chunks."""
        with self._handle.db.connection() as conn:
            rows = conn.execute(
                "DELETE FROM documents WHERE (metadata->>'ref_doc_id' = %(ref)s OR source = %(ref)s)"
                " AND (%(site)s::text IS NULL OR site_id = %(site)s) RETURNING site_id",
                {"ref": ref_doc_id, "site": self.site_id}).fetchall()
        store.compact_term_stats(self._handle.db, {r[0] for r in rows})
        self._handle.after_write()

    # ----- reading -----
    def query(self, query: VectorStoreQuery, **kwargs: Any) -> VectorStoreQueryResult:
        mode = QUERY_MODES.get(query.mode)
        if mode is None:
            raise InvalidQuery(f"Query mode '{query.mode.value}' is not supported by the workbench's store; use "
                               "default (dense), sparse or text_search (BM25) or hybrid.",
                               details={"field": "mode"})
        if query.node_ids or query.doc_ids:
            raise InvalidQuery("Restricting a query to node_ids or doc_ids is not supported by the workbench's "
                               "store; filter by source, file_type, doc_date or site instead.",
                               details={"field": "filters"})
        k = query.similarity_top_k
        if mode == "hybrid" and query.hybrid_top_k:
            k = query.hybrid_top_k
        elif mode == "fulltext" and query.sparse_top_k:
            k = query.sparse_top_k
        embedding = query.query_embedding
        if embedding is not None and (mode == "fulltext" or len(embedding) != self._dimension()):
            embedding = None  # another model's vector: the query text is embedded with ours
        if not (query.query_str or "").strip() and embedding is None:
            raise InvalidQuery("The query has neither text nor an embedding of the store's dimension.",
                               details={"field": "query"})
        nodes = retrieve_nodes(self._handle, query.query_str or "", k=max(1, k), mode=mode,
                               scope=filter_scope(query.filters, self.site_id), embedding=embedding)
        return VectorStoreQueryResult(nodes=[n.node for n in nodes], similarities=[float(n.score) for n in nodes],
                                      ids=[n.node.node_id for n in nodes])
