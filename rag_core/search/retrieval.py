"""Chunk-level retrieval: the one core every surface (search, chat, API, MCP) goes through."""

from __future__ import annotations

from typing import Sequence

import numpy as np
from llama_index.core.base.embeddings.base import BaseEmbedding

from rag_core.db.database import Database
from rag_core.search.hybrid import DEFAULT_FUSION, Fusion, search_chunks
from rag_core.search.types import ChunkHit


def embed_query(embedder: BaseEmbedding, query: str) -> np.ndarray:
    """The query's vector as float32 (the store holds unit vectors; cosine distance in SQL)."""
    return np.asarray(embedder.get_query_embedding(query), dtype=np.float32)


def retrieve_chunks(db: Database, embedder: BaseEmbedding, query: str, *, k: int = 5,
                    site_id: str | None = None, sources: Sequence[str] | None = None,
                    mode: str = "hybrid", fusion: Fusion = DEFAULT_FUSION) -> list[ChunkHit]:
    """Top-k chunks by hybrid retrieval (dense + BM25, fused); `similarity` stays the cosine.

    Args:
        sources: keep only chunks of these sources (exact source names).
    """
    text = " ".join(query.replace("\x00", " ").split())
    if not text or k <= 0:
        return []
    emb = embed_query(embedder, text) if mode != "fulltext" else None
    if sources:
        wanted = set(sources)
        hits = search_chunks(db, text, emb, k=max(k * 4, 20), site_id=site_id, mode=mode, fusion=fusion)
        return [h for h in hits if h.source in wanted][:k]
    return search_chunks(db, text, emb, k=k, site_id=site_id, mode=mode, fusion=fusion)
