"""Top chunks of a query (`retrieve_chunks`: the one path behind `Workbench.retrieve` and chat's retrieval), ranked
by hybrid.py, the query prepared once for them (`prepare_query`), and the cache of query vectors search shares."""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any, Hashable, Sequence

import numpy as np
from llama_index.core.base.embeddings.base import BaseEmbedding

from rag_core.db.database import Connections
from rag_core.search.fusion import DEFAULT_FUSION, Fusion
from rag_core.errors import IndexUnavailable
from rag_core.search.hybrid import check_indexed, rank_chunks
from rag_core.search.planner import DEFAULT_PLANNER, PlannerSettings
from rag_core.search.query import PreparedQuery
from rag_core.search.types import ChunkHit


class QueryEmbeddingCache:
    """A thread-safe LRU of query vectors keyed by the embedder's identity and the query text.

    The same question asked again (a second page, another surface, a chat turn after a search)
    skips the model. Vectors are returned read-only: every caller shares the cached array.
    """

    def __init__(self, max_entries: int = 4096) -> None:
        self.max_entries = max_entries
        self._items: OrderedDict[Hashable, np.ndarray] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = self.misses = 0

    def get(self, embedder: BaseEmbedding, query: str) -> np.ndarray:
        """The query's vector from the cache, or from the embedder (then stored)."""
        key = (embedder_key(embedder), query)
        with self._lock:
            vector = self._items.get(key)
            if vector is not None:
                self._items.move_to_end(key)
                self.hits += 1
                return vector
            self.misses += 1
        vector = np.asarray(embedder.get_query_embedding(query), dtype=np.float32)
        vector.flags.writeable = False
        with self._lock:
            self._items[key] = vector
            self._items.move_to_end(key)
            while len(self._items) > self.max_entries:
                self._items.popitem(last=False)
        return vector

    def get_texts(self, embedder: BaseEmbedding, texts: Sequence[str]) -> np.ndarray:
        """Passage-side vectors of texts (`get_text_embedding_batch`), the missing ones embedded in one batch."""
        ident = embedder_key(embedder)
        found: dict[str, np.ndarray] = {}
        with self._lock:
            for text in texts:
                vector = self._items.get((ident, text))
                if vector is not None:
                    self._items.move_to_end((ident, text))
                    found[text] = vector
            self.hits += len(found)
        missing = list(dict.fromkeys(t for t in texts if t not in found))
        if missing:
            vectors = np.asarray(embedder.get_text_embedding_batch(missing), dtype=np.float32)
            with self._lock:
                self.misses += len(missing)
                for text, vector in zip(missing, vectors):
                    vector.flags.writeable = False
                    found[text] = self._items[(ident, text)] = vector
                while len(self._items) > self.max_entries:
                    self._items.popitem(last=False)
        return np.stack([found[t] for t in texts]) if texts else np.zeros((0, 0), dtype=np.float32)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()


def embedder_key(embedder: BaseEmbedding) -> tuple:
    """What makes two embedders give the same vectors: class, model and where it runs."""
    kind = type(embedder)
    return (kind.__module__, kind.__qualname__, getattr(embedder, "model_name", None),
            getattr(embedder, "model_path", None), getattr(embedder, "base_url", None))


QUERY_EMBEDDINGS = QueryEmbeddingCache()
# Chat reads the same passages' sentences turn after turn: their vectors are kept apart from the queries'
# (an embedder may embed a query and a passage differently).
PASSAGE_EMBEDDINGS = QueryEmbeddingCache(max_entries=16384)


def embed_passages(embedder: BaseEmbedding, texts: Sequence[str]) -> np.ndarray:
    """Passage-side vectors of texts as float32 rows, cached."""
    return PASSAGE_EMBEDDINGS.get_texts(embedder, texts)


def embed_query(embedder: BaseEmbedding, query: str) -> np.ndarray:
    """The query's vector as read-only float32 (unit vectors in the store; cosine distance in SQL), cached."""
    return QUERY_EMBEDDINGS.get(embedder, query)


def normalize_query(text: str) -> str:
    """The query as every search ranks it: NUL bytes dropped, whitespace collapsed."""
    return " ".join(text.replace("\x00", " ").split())


def prepare_query(embedder: BaseEmbedding | None, query: str | PreparedQuery) -> PreparedQuery:
    """The query prepared once for several searches: language, configs and bigrams on first use, its vector
    from `embedder` (through the query-vector cache) only when a dense or hybrid search first needs it."""
    if isinstance(query, PreparedQuery):
        return query
    text = normalize_query(query)
    return PreparedQuery(text, (lambda t: embed_query(embedder, t)) if embedder is not None else None)


def retrieve_chunks(db: Connections, embedder: BaseEmbedding | None, query: str | PreparedQuery, *, k: int = 5,
                    site_id: str | None = None, sources: Sequence[str] | None = None, mode: str = "hybrid",
                    fusion: Fusion = DEFAULT_FUSION, planner: PlannerSettings = DEFAULT_PLANNER,
                    **filters: Any) -> list[ChunkHit]:
    """Top-k chunks by hybrid retrieval (dense + BM25, fused); `similarity` stays the cosine.

    The one path to top-k chunks: `SearchEngine.retrieve` (Workbench.retrieve) and chat's steps call it.

    Args:
        query: a string, or a PreparedQuery (prepare_query) that several searches of one chat turn share.
        sources: keep only chunks of these sources (exact source names).
        filters: types, date_from, date_to, source (a prefix or part), as `rank_chunks` takes them.
    """
    q = prepare_query(embedder, query)
    if not q.text or k <= 0:
        return []
    if sources:
        wanted = set(sources)
        hits = rank_chunks(db, q, None, k=max(k * 4, 20), site_id=site_id, mode=mode, fusion=fusion, planner=planner,
                           **filters)
        return [h for h in hits if h.source in wanted][:k]
    return rank_chunks(db, q, None, k=k, site_id=site_id, mode=mode, fusion=fusion, planner=planner, **filters)


# Some chunks and their neighbours in their documents, most similar to a query vector first (exact cosine).
_NEIGHBOURS_SQL = """
WITH cited AS (SELECT document_id, chunk_index FROM chunks WHERE id = ANY(%(chunks)s))
SELECT c.id, c.document_id, c.site_id, d.source, d.title, d.file_type, c.chunk_index, c.text, c.start_char,
       c.end_char, c.page_number, 1 - (c.embedding <=> %(vector)s::vector) AS cos, c.language
FROM chunks c JOIN documents d ON d.id = c.document_id
WHERE EXISTS (SELECT 1 FROM cited x WHERE x.document_id = c.document_id AND abs(x.chunk_index - c.chunk_index) <= 1)
  AND c.embedding IS NOT NULL AND (%(site)s::text IS NULL OR c.site_id = %(site)s)
ORDER BY cos DESC, c.id
LIMIT %(k)s
"""


def cited_neighbours(db: Connections, vector: Any, chunk_ids: Sequence[int], *, site_id: str | None,
                     k: int) -> list[ChunkHit]:
    """Some chunks and the chunks beside them in their documents, the k most similar to `vector` first."""
    with db.connection() as conn:
        rows = conn.execute(_NEIGHBOURS_SQL, {"vector": vector, "chunks": list(chunk_ids), "site": site_id,
                                              "k": k}).fetchall()
    return [ChunkHit(chunk_id=int(r[0]), document_id=int(r[1]), site_id=r[2], source=r[3], title=r[4],
                     file_type=r[5], chunk_index=r[6], text=r[7], start_char=r[8], end_char=r[9], page_number=r[10],
                     similarity=max(0.0, min(1.0, float(r[11] or 0.0))), score=float(r[11] or 0.0), language=r[12])
            for r in rows]


def chunk_similarities(db: Connections, vector: Any, chunk_ids: Sequence[int]) -> dict[int, float]:
    """The exact cosine similarity of some chunks to a query vector."""
    with db.connection() as conn:
        rows = conn.execute("SELECT id, 1 - (embedding <=> %s::vector) FROM chunks WHERE id = ANY(%s)",
                            (vector, list(chunk_ids))).fetchall()
    return {int(i): float(sim or 0.0) for i, sim in rows}


def is_indexed(db: Connections, site_id: str | None) -> bool:
    """Whether anything is stored to search in the site (None: every site but the evaluation sites and the sample)."""
    try:
        check_indexed(db, site_id)
    except IndexUnavailable:
        return False
    return True
