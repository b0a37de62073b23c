"""Small, fixed samples of the evaluation sets: the sample bounds the corpus, not only the queries.

Embedding a whole corpus takes minutes on a laptop; a sample keeps the judged documents of the
sampled queries plus a fixed number of distractors, so a CI run measures ranking among real
competitors in seconds. A sample is stored in its own site (`eval:<set>-s<N>`), so full runs stay
intact and are never mixed with it.
"""

from __future__ import annotations

import random
from dataclasses import replace
from pathlib import Path

from rag_core.errors import InvalidInput
from rag_core.evaluation.datasets import BeirDataset, eval_set_dir, load_beir

DEFAULT_DISTRACTORS = 150
MAX_RELEVANT_PER_QUERY = 5  # ru_construction judges every page of a code relevant: hundreds per query


def sample_dataset(ds: BeirDataset, queries: int, distractors: int = DEFAULT_DISTRACTORS, seed: int = 0,
                   require_answers: bool = False, max_relevant: int = MAX_RELEVANT_PER_QUERY) -> BeirDataset:
    """The first `queries` judged queries (file order) with their judged documents and `distractors` others.

    `queries=0` returns the set unchanged. The name becomes `<set>-s<queries>` (its own eval site);
    distractors are drawn with a fixed seed so every run ingests the same documents. A query keeps
    at most `max_relevant` judged documents (highest grade first, then corpus order) and its
    judgements are cut to those, so a set that judges hundreds of pages per query stays small.
    """
    if queries < 0 or distractors < 0 or max_relevant < 1:
        raise InvalidInput(f"A sample needs queries >= 0, distractors >= 0 and max_relevant >= 1 "
                           f"(got {queries}, {distractors}, {max_relevant}).")
    if queries == 0:
        return ds
    qids = [q for q in ds.judged_queries if not require_answers or ds.answers.get(q)][:queries]
    position = {d["_id"]: i for i, d in enumerate(ds.corpus)}
    qrels = {}
    for q in qids:
        judged = sorted((d for d in ds.qrels[q] if d in position), key=lambda d: (-ds.qrels[q][d], position[d]))
        qrels[q] = {d: ds.qrels[q][d] for d in judged[:max_relevant]}
    qids = [q for q in qids if qrels[q]]
    relevant = {d for q in qids for d in qrels[q]}
    rest = [d for d in ds.corpus if d["_id"] not in relevant]
    chosen = set(d["_id"] for d in random.Random(seed).sample(rest, min(distractors, len(rest))))
    corpus = [d for d in ds.corpus if d["_id"] in relevant or d["_id"] in chosen]
    return replace(
        ds, name=f"{ds.name}-s{queries}", corpus=corpus,
        queries={q: ds.queries[q] for q in qids}, qrels={q: qrels[q] for q in qids},
        answers={q: ds.answers[q] for q in qids if q in ds.answers},
    )


def load_eval_set(name: str, sample: int = 0, distractors: int = DEFAULT_DISTRACTORS,
                  require_answers: bool = False, root: str | Path | None = None) -> BeirDataset:
    """Load a set of the evaluation folder (RAG_EVAL_DATA) by name, sampled when `sample` > 0 (RAG_EVAL_SAMPLE)."""
    ds = load_beir(eval_set_dir(name, root))
    if require_answers and sample == 0:
        # the full set, but only questions that have reference answers
        qids = [q for q in ds.judged_queries if ds.answers.get(q)]
        return replace(ds, queries={q: ds.queries[q] for q in qids})
    return sample_dataset(ds, sample, distractors, require_answers=require_answers)
