"""Retrieval metrics over one ranked list of document ids and the set judged relevant."""

from __future__ import annotations

import math
from typing import Mapping, Sequence


def precision_at_k(ranked: Sequence[str], relevant: Mapping[str, int] | set[str], k: int = 5) -> float:
    """Share of the top k that is relevant (capped by how many relevant documents exist: with one, at most 1/k)."""
    if k <= 0:
        return 0.0
    return sum(1 for d in ranked[:k] if d in relevant) / k


def hit_at_k(ranked: Sequence[str], relevant: Mapping[str, int] | set[str], k: int = 5) -> float:
    """1.0 when any relevant document is in the top k: how we read "relevant result in the top 5"."""
    return 1.0 if any(d in relevant for d in ranked[:k]) else 0.0


def recall_at_k(ranked: Sequence[str], relevant: Mapping[str, int] | set[str], k: int = 5) -> float:
    """Share of the relevant documents found in the top k."""
    if not relevant:
        return 0.0
    return sum(1 for d in set(ranked[:k]) if d in relevant) / len(relevant)


def mrr_at_k(ranked: Sequence[str], relevant: Mapping[str, int] | set[str], k: int = 10) -> float:
    """Reciprocal rank of the first relevant document within the top k (0 when none)."""
    for rank, doc in enumerate(ranked[:k], 1):
        if doc in relevant:
            return 1.0 / rank
    return 0.0


def ndcg_at_k(ranked: Sequence[str], relevant: Mapping[str, int] | set[str], k: int = 10) -> float:
    """Normalised discounted cumulative gain with graded relevance when given (binary for a set)."""
    gains = relevant if isinstance(relevant, Mapping) else {d: 1 for d in relevant}
    dcg = sum(gains.get(d, 0) / math.log2(rank + 1) for rank, d in enumerate(ranked[:k], 1))
    ideal = sorted(gains.values(), reverse=True)[:k]
    idcg = sum(g / math.log2(rank + 1) for rank, g in enumerate(ideal, 1))
    return dcg / idcg if idcg else 0.0


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0-100) by linear interpolation; 0.0 for no values."""
    if not values:
        return 0.0
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100
    low, high = math.floor(pos), math.ceil(pos)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)
