"""Notebook 02's sweeps: chunkings in their own sites, fusions over the same chunks, the default marked."""

from __future__ import annotations

import pandas as pd

from rag_core.db.database import drop_database
from rag_core.evaluation.runner import evaluate_dataset
from rag_core.bench.suite import embedder_database_url, embedder_workbench
from rag_core.bench.sweeps import (chunking_sweep, describe_fusion, fusion_grid, fusion_sweep, measured_fusions,
                                        verdict)
from rag_core.search.hybrid import DEFAULT_FUSION, fusion_for


def test_the_default_fusion_is_in_the_grid():
    grid = fusion_grid()
    assert DEFAULT_FUSION in grid
    assert describe_fusion(DEFAULT_FUSION) == "convex α=0.9"
    # every method and document scoring is named as it is, not as another method
    from dataclasses import replace

    assert describe_fusion(replace(DEFAULT_FUSION, method="minmax", alpha=0.5, documents="best-of-each")) \
        == "minmax α=0.5 best-of-each"
    assert {f.method for f in grid} == {"convex", "rrf"}


def test_smaller_chunks_are_stored_in_their_own_site_and_make_more_chunks(wb, tiny_scifact):
    table = chunking_sweep(wb, tiny_scifact, [(300, 50), (1000, 150)], mode="fulltext", log=None)
    small, default = table.iloc[0], table.iloc[1]
    assert bool(default["default"]) and not bool(small["default"])
    assert small["chunks"] > default["chunks"]
    assert wb.settings.chunk_size == 1000   # the sweep never changes the workbench it was given


def test_fusion_sweep_leaves_the_workbench_search_untouched(wb, tiny_scifact):
    before = wb.search_engine.fusion
    grid = [fusion_for(wb.embedder_name), fusion_grid()[-1]]  # the workbench embedder's measured fusion is marked
    table = fusion_sweep(wb, tiny_scifact, grid, log=None)
    assert list(table["fusion"][:2]) == ["fulltext only", "semantic only"]
    assert table["default"].sum() == 1
    assert wb.search_engine.fusion is before


def test_a_sweep_with_another_embedder_marks_that_embedders_measured_fusion_and_scores_it_as_search_does(
        wb, tiny_scifact):
    other = "use-multilingual"  # not the default embedder the session's workbench uses
    assert wb.embedder_name != other
    try:
        with embedder_workbench(wb, other) as use:
            table = fusion_sweep(use, tiny_scifact, log=None)
            plain = evaluate_dataset(use.library, use.search_engine, tiny_scifact, mode="hybrid")
    finally:
        drop_database(embedder_database_url(wb.database_url, other))
    assert (table["embedder"] == other).all()
    measured = table.loc[table["default"]]
    assert list(measured["fusion"]) == [describe_fusion(fusion_for(other))]
    # the measured row keeps the embedder's relevance floor: it is what Workbench.search returns
    assert measured.iloc[0]["ndcg@10"] == plain.ndcg10 and measured.iloc[0]["hit@5"] == plain.hit


def test_each_embedder_is_listed_with_the_fusion_its_hybrid_search_uses():
    table = measured_fusions(["use-multilingual", "e5-small"])
    assert list(table["fusion"]) == [describe_fusion(DEFAULT_FUSION), describe_fusion(fusion_for("e5-small"))]


def test_verdict_compares_the_default_with_the_best_row():
    df = pd.DataFrame({"fusion": ["a", "b"], "default": [True, False], "ndcg@10": [0.70, 0.75]})
    assert "(a) scores ndcg@10 0.700" in verdict(df, "fusion") and "(b) scores 0.750" in verdict(df, "fusion")
    df.loc[1, "ndcg@10"] = 0.6
    assert verdict(df, "fusion") == "The default (a) has the best ndcg@10: 0.700."
