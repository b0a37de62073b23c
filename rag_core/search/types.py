"""The two records every surface shares: a retrieved chunk (`Hit`) and a numbered source of an answer
(`Citation`). Inside rag_core a document's location is `source`; the wire names (`file_path`, `path`,
`documentPath`) are made by the serializers in api/ and by the stored citation JSON."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Sequence

from rag_core.providers.calibration import CosineScale


@dataclass
class Hit:
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


ChunkHit = Hit  # the earlier name of the same record


@dataclass
class Citation:
    """One numbered source of an answer: where the cited passage lives and how close it was."""

    n: int
    source: str               # file path or URL
    title: str
    similarity: float         # 0..1
    page: int | None
    chunk_id: int
    document_id: int
    start_char: int
    end_char: int
    text: str                 # the cited passage
    site_id: str = ""
    relevance: float | None = None  # the cosine read through the embedder's scale (0..1); None: the cosine
    sites: list[str] = field(default_factory=list)  # every site holding this passage (the same file in several)

    @classmethod
    def from_hit(cls, n: int, hit: Hit, scale: CosineScale | None = None,
                 sites: Sequence[str] | None = None, relevance: float | None = None) -> "Citation":
        """A source from a hit; `relevance` (0..1) when the caller read it already (chat: its best sentence),
        else the hit's cosine read through the scale."""
        if relevance is None and scale is not None and not scale.is_identity:
            relevance = scale.relevance(float(hit.similarity))
        return cls(n=n, source=hit.source, title=hit.title or "", similarity=float(hit.similarity),
                   page=hit.page_number, chunk_id=int(hit.chunk_id), document_id=int(hit.document_id),
                   start_char=int(hit.start_char), end_char=int(hit.end_char), text=hit.text, site_id=hit.site_id,
                   relevance=None if relevance is None else round(float(relevance), 4),
                   sites=list(sites or [hit.site_id]))

    @property
    def similarity_pct(self) -> float:
        """The percentage users see: the calibrated relevance when known (e5-small's cosines of 0.7-0.9
        would all read as "80%"), else the cosine."""
        return round((self.similarity if self.relevance is None else self.relevance) * 100, 1)

    def to_citation(self) -> dict[str, Any]:
        """The JSON stored in chat_messages.sources: the document-store spec's shape + similarity, page, offsets."""
        return {
            "n": self.n,
            "text": self.text,
            "documentPath": self.source,
            "documentTitle": self.title,
            "chunkId": str(self.chunk_id),
            "documentId": str(self.document_id),
            "similarity": round(self.similarity, 4),
            **({"relevance": self.relevance} if self.relevance is not None else {}),
            "page": self.page,
            "startChar": self.start_char,
            "endChar": self.end_char,
            **({"sites": list(self.sites)} if len(self.sites) > 1 else {}),
        }

    @classmethod
    def from_citation(cls, data: dict[str, Any], n: int | None = None) -> "Citation":
        """A stored citation back as a Citation (history views re-render answers from it)."""
        return cls(n=int(data.get("n") or n or 0), source=data.get("documentPath", ""),
                   title=data.get("documentTitle", ""), similarity=float(data.get("similarity") or 0.0),
                   page=data.get("page"), chunk_id=int(data.get("chunkId") or 0),
                   document_id=int(data.get("documentId") or 0), start_char=int(data.get("startChar") or 0),
                   end_char=int(data.get("endChar") or 0), text=data.get("text", ""),
                   relevance=float(data["relevance"]) if data.get("relevance") is not None else None,
                   sites=[str(x) for x in data.get("sites") or []])

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["similarity_pct"] = self.similarity_pct
        return data
