"""Chunk-level retrieval: the one core every surface (search, chat, API, MCP) goes through."""

from __future__ import annotations

from typing import Sequence

import numpy as np
from llama_index.core.base.embeddings.base import BaseEmbedding

from rag_core.db.database import Database
from rag_core.search.types import ChunkHit

_COLUMNS = """c.id, c.document_id, c.site_id, d.source, d.title, d.file_type, c.chunk_index, c.text,
              c.start_char, c.end_char, c.page_number"""


def _site_clause(site_id: str | None) -> str:
    # Evaluation sets live in 'eval:*' sites and never appear in a user's own searches.
    return "c.site_id = %(site)s" if site_id else "c.site_id NOT LIKE 'eval:%%'"


def retrieve_chunks(db: Database, embedder: BaseEmbedding, query: str, *, k: int = 5,
                    site_id: str | None = None, sources: Sequence[str] | None = None) -> list[ChunkHit]:
    """Top-k chunks by cosine similarity (semantic); the search module extends this to hybrid."""
    vector = np.asarray(embedder.get_query_embedding(query), dtype=np.float32)
    with db.connection() as conn:
        rows = conn.execute(
            f"SELECT {_COLUMNS}, 1 - (c.embedding <=> %(q)s) AS similarity"
            " FROM chunks c JOIN documents d ON d.id = c.document_id"
            f" WHERE {_site_clause(site_id)} AND c.embedding IS NOT NULL"
            " ORDER BY c.embedding <=> %(q)s LIMIT %(k)s",
            {"q": vector, "k": k, "site": site_id},
        ).fetchall()
    return [ChunkHit(*row[:11], similarity=max(0.0, min(1.0, float(row[11]))), score=float(row[11]),
                     dense_rank=rank) for rank, row in enumerate(rows, 1)]
