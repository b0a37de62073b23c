"""Samples bound the corpus: judged documents of the sampled queries plus a fixed set of distractors."""

from __future__ import annotations

import pytest

from rag_core.errors import InvalidInput
from rag_core.evaluation.sampling import available_sets, load_eval_set, sample_dataset


def test_sample_keeps_judged_documents_and_a_fixed_number_of_distractors(synthetic):
    sampled = sample_dataset(synthetic, queries=2, distractors=3)
    ids = {d["_id"] for d in sampled.corpus}
    assert sampled.name == "syn-s2"
    assert list(sampled.queries) == ["q1", "q2"]          # the first judged queries, file order
    assert {"d1", "d2", "d3"} <= ids
    assert len(ids) == 3 + 3
    assert "d4" not in sampled.qrels.get("q4", {}) and "q4" not in sampled.queries


def test_sample_is_the_same_on_every_call(synthetic):
    first = sample_dataset(synthetic, queries=2, distractors=4)
    again = sample_dataset(synthetic, queries=2, distractors=4)
    assert [d["_id"] for d in first.corpus] == [d["_id"] for d in again.corpus]


def test_judgements_are_capped_per_query_keeping_the_highest_grade(synthetic):
    sampled = sample_dataset(synthetic, queries=1, distractors=0, max_relevant=1)
    assert sampled.qrels == {"q1": {"d1": 2}}
    assert [d["_id"] for d in sampled.corpus] == ["d1"]


def test_zero_means_the_whole_set_and_answers_filter_questions(synthetic):
    assert sample_dataset(synthetic, queries=0) is synthetic
    answered = sample_dataset(synthetic, queries=5, distractors=0, require_answers=True)
    assert list(answered.queries) == ["q2", "q4"]
    assert answered.answers == {"q2": ["two"], "q4": ["four"]}


def test_bad_sample_sizes_name_the_problem(synthetic):
    with pytest.raises(InvalidInput, match="distractors >= 0"):
        sample_dataset(synthetic, queries=2, distractors=-1)


def test_shared_sets_load_by_name_and_unknown_names_list_the_choices():
    assert {"scifact", "jsquad", "ru_construction"} <= set(available_sets())
    with pytest.raises(InvalidInput, match="choose one of: scifact"):
        load_eval_set("nope")


def test_a_ru_construction_sample_stays_small():
    # that set judges every page of a code relevant: hundreds of pages per question
    ds = load_eval_set("ru_construction", sample=5, distractors=10)
    assert len(ds.corpus) <= 5 * 5 + 10
    assert all(1 <= len(rel) <= 5 for rel in ds.qrels.values())
