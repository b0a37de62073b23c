"""How the dense and full-text rankings are fused, and the measured choice per embedder (docs/search-method.md)."""

from __future__ import annotations

from dataclasses import dataclass

from rag_core.providers.calibration import SCALES

# The "minmax" fusion reads a cosine between the query's best and this dense rank's (fixed, so deeper
# pages, which take deeper candidate lists, rank their documents as the first page does).
SPREAD_DEPTH = 100


@dataclass(frozen=True)
class Fusion:
    """How dense and full-text rankings are combined.

    method "rrf": score = w_fulltext / (k + fulltext_rank) + w_dense / (k + dense_rank).
    method "convex": alpha * bm25 / max(bm25) + (1 - alpha) * cosine.
    method "minmax": alpha * bm25 / max(bm25) + (1 - alpha) * (cosine - cos_S) / (cos_1 - cos_S), where cos_1 is
    the query's best cosine and cos_S its SPREAD_DEPTH-th best: BM25 has a true zero, a cosine has none.
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


# With a weak multilingual dense model, 0.9 * bm25/max + 0.1 * cosine is the one setting that never lands
# below either part on the shared sets (`rag eval`, eval/results/retrieval_*.json).
DEFAULT_FUSION = Fusion(method="convex", alpha=0.9)
# A strong dense model changes the balance: for e5-small the largest worst-set gain over the better part
# among 300 settings swept (eval/sweep_fusion_lists.py, eval/results/fusion_e5_small.json).
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
    (rag_core/providers/calibration.py); RAG_SEARCH_COSINE_FLOOR (`override`) wins. An uncalibrated
    embedder has no floor.
    """
    if override is not None:
        return override
    scale = SCALES.get(embedder)
    return scale.chat_floor if scale is not None else None
