"""Evaluation fixtures: tiny samples of the evaluation sets and a synthetic BEIR set for pure tests.

The sets are RAG_EVAL_DATA's when it is set (`make test` sets it to the real sets when they are
beside the clone), else the small ones tests/evalsets.py writes; the same assertions hold on both.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from evalsets import write_eval_sets

from rag_core.evaluation.datasets import BeirDataset, choose_set
from rag_core.evaluation.sampling import load_eval_set
from rag_core.settings import RagSettings


@pytest.fixture(scope="session")
def eval_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The folder of evaluation sets: RAG_EVAL_DATA (not a developer's .env), else the sets written for the tests."""
    configured = RagSettings(_env_file=None).eval_data
    return configured or write_eval_sets(tmp_path_factory.mktemp("eval-data"))


@pytest.fixture(scope="session")
def tiny_scifact(eval_root: Path) -> BeirDataset:
    """Three English claims (SciFact when present), their judged abstracts and 25 distractors."""
    return load_eval_set(choose_set("scifact", language="en", root=eval_root), sample=3, distractors=25,
                         root=eval_root)


@pytest.fixture(scope="session")
def tiny_jsquad(eval_root: Path) -> BeirDataset:
    """Three Japanese questions that have reference answers (JSQuAD when present), their paragraphs, 25 distractors."""
    name = choose_set("jsquad", language="ja", require_answers=True, root=eval_root)
    return load_eval_set(name, sample=3, distractors=25, require_answers=True, root=eval_root)


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
