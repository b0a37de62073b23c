"""Result types shared by search, chat and every front-end."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any


@dataclass
class ChunkHit:
    """One retrieved chunk with everything a citation needs."""

    chunk_id: int
    document_id: int
    site_id: str
    source: str
    title: str
    file_type: str
    chunk_index: int
    text: str
    start_char: int
    end_char: int
    page_number: int | None
    similarity: float            # cosine similarity of query and chunk, clipped to 0..1
    score: float                 # the score the hits are ranked by (fused in hybrid mode)
    dense_rank: int | None = None        # rank among the dense candidates (None: not among them)
    fulltext_rank: int | None = None     # rank among the BM25 candidates (None: not among them)
    fulltext_score: float | None = None  # BM25 score of the chunk for the query
    language: str | None = None          # language the chunk was indexed under (ru, en, ja, other)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
