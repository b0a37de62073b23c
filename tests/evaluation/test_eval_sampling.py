"""Samples bound the corpus: judged documents of the sampled queries plus a fixed set of distractors."""

from __future__ import annotations

import pytest

from evalsets import write_eval_sets

from rag_core.errors import InvalidInput
from rag_core.evaluation.datasets import available_sets, choose_set
from rag_core.evaluation.sampling import load_eval_set, sample_dataset


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


def test_sets_load_by_name_and_a_missing_one_says_where_it_looked_and_how_to_fetch(eval_root):
    names = available_sets(eval_root)
    assert len(names) >= 3
    assert load_eval_set(names[0], root=eval_root).judged_queries
    with pytest.raises(InvalidInput) as err:
        load_eval_set("nope", root=eval_root)
    message = err.value.message
    assert f"in {eval_root} (RAG_EVAL_DATA)" in message and f"it has {', '.join(sorted(names))}" in message
    assert "`rag eval fetch scifact jsquad`" in message
    with pytest.raises(InvalidInput, match="`rag eval fetch jsquad`"):
        load_eval_set("jsquad", root=eval_root / "empty")


def test_an_empty_or_missing_folder_names_the_variable_and_the_fetch_command(tmp_path):
    for folder in (tmp_path, tmp_path / "missing"):
        with pytest.raises(InvalidInput, match=r"No evaluation sets in .* \(RAG_EVAL_DATA\)\. .*rag eval fetch"):
            available_sets(folder)


def test_ru_construction_is_never_offered_for_download(tmp_path):
    with pytest.raises(InvalidInput, match="evaluation only and is not redistributed"):
        load_eval_set("ru_construction", root=tmp_path)


def test_notebooks_fall_back_to_a_set_in_the_same_language(tmp_path):
    write_eval_sets(tmp_path)
    assert choose_set("scifact", language="en", root=tmp_path) == "mini-en"
    assert choose_set("jsquad", language="ja", require_answers=True, root=tmp_path) == "mini-ja"
    assert choose_set("ru_construction", language="ru", root=tmp_path) == "mini-ru"
    assert choose_set("mini-ja", language="en", root=tmp_path) == "mini-ja"       # the named set wins
    with pytest.raises(InvalidInput, match="nor another set in language 'ru' with reference answers"):
        choose_set("ru_construction", language="ru", require_answers=True, root=tmp_path)


def test_a_sample_of_a_set_judging_many_pages_per_query_stays_small(eval_root):
    # ru_construction judges every page of a code relevant: hundreds of pages per question
    name = choose_set("ru_construction", language="ru", root=eval_root)
    full = load_eval_set(name, root=eval_root)
    assert max(len(rel) for rel in full.qrels.values()) > 5
    ds = load_eval_set(name, sample=5, distractors=10, root=eval_root)
    assert len(ds.corpus) <= 5 * 5 + 10
    assert all(1 <= len(rel) <= 5 for rel in ds.qrels.values())
