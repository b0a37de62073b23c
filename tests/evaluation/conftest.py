"""Evaluation fixtures: a tiny real sample of the shared sets and a synthetic BEIR set for pure tests."""

from __future__ import annotations

import pytest

from rag_core.evaluation.datasets import BeirDataset
from rag_core.evaluation.sampling import load_eval_set


@pytest.fixture(scope="session")
def tiny_scifact() -> BeirDataset:
    """Three SciFact queries, their judged abstracts and 25 distractors (real text, real judgements)."""
    return load_eval_set("scifact", sample=3, distractors=25)


@pytest.fixture(scope="session")
def tiny_jsquad() -> BeirDataset:
    """Three JSQuAD questions that have reference answers, their paragraphs and 25 distractors."""
    return load_eval_set("jsquad", sample=3, distractors=25, require_answers=True)


@pytest.fixture
def synthetic() -> BeirDataset:
    """Ten documents, four queries: q1 judges d1 (2) and d2 (1), q2 judges d3, q3 has no judgement, q4 judges d4."""
    corpus = [{"_id": f"d{i}", "title": f"Doc {i}", "text": f"text of document {i}"} for i in range(10)]
    return BeirDataset(
        name="syn", path=None, corpus=corpus,  # type: ignore[arg-type]
        queries={"q1": "one", "q2": "two", "q3": "three", "q4": "four"},
        qrels={"q1": {"d1": 2, "d2": 1}, "q2": {"d3": 1}, "q4": {"d4": 1}},
        answers={"q2": ["two"], "q4": ["four"]},
    )
