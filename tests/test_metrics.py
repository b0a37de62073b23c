"""Metric arithmetic on hand-checked rankings."""

from __future__ import annotations

import math

import pytest

from rag_core.evaluation.metrics import hit_at_k, mrr_at_k, ndcg_at_k, percentile, precision_at_k, recall_at_k

RANKED = ["d3", "d1", "d7", "d2", "d9", "d4"]


def test_single_relevant_document() -> None:
    rel = {"d7"}
    assert hit_at_k(RANKED, rel, 5) == 1.0
    assert hit_at_k(RANKED, rel, 2) == 0.0
    assert precision_at_k(RANKED, rel, 5) == pytest.approx(0.2)  # the ceiling with one relevant document
    assert recall_at_k(RANKED, rel, 5) == 1.0
    assert mrr_at_k(RANKED, rel, 10) == pytest.approx(1 / 3)
    assert ndcg_at_k(RANKED, rel, 10) == pytest.approx(1 / math.log2(4))


def test_several_relevant_and_graded() -> None:
    rel = {"d1": 2, "d4": 1, "d8": 1}
    assert recall_at_k(RANKED, rel, 5) == pytest.approx(1 / 3)
    assert mrr_at_k(RANKED, rel, 10) == pytest.approx(0.5)
    dcg = 2 / math.log2(3) + 1 / math.log2(7)
    idcg = 2 / math.log2(2) + 1 / math.log2(3) + 1 / math.log2(4)
    assert ndcg_at_k(RANKED, rel, 10) == pytest.approx(dcg / idcg)


def test_nothing_relevant_found() -> None:
    for fn in (hit_at_k, recall_at_k, mrr_at_k, ndcg_at_k, precision_at_k):
        assert fn(RANKED, {"zz"}) == 0.0
    assert recall_at_k(RANKED, set()) == 0.0


def test_duplicates_do_not_inflate_recall() -> None:
    assert recall_at_k(["a", "a", "b"], {"a", "c"}, 5) == 0.5


def test_percentile_interpolates() -> None:
    assert percentile([], 95) == 0.0
    assert percentile([5.0], 50) == 5.0
    assert percentile([1, 2, 3, 4], 50) == pytest.approx(2.5)
    assert percentile(list(range(101)), 95) == pytest.approx(95)
