"""Notebook 02's sweeps: chunkings in their own sites, fusions over the same chunks, the default marked."""

from __future__ import annotations

import pandas as pd

from rag_core.evaluation.sweeps import chunking_sweep, describe_fusion, fusion_grid, fusion_sweep, verdict
from rag_core.search.hybrid import DEFAULT_FUSION


def test_the_default_fusion_is_in_the_grid():
    grid = fusion_grid()
    assert DEFAULT_FUSION in grid
    assert describe_fusion(DEFAULT_FUSION) == "convex α=0.9"
    assert {f.method for f in grid} == {"convex", "rrf"}


def test_smaller_chunks_are_stored_in_their_own_site_and_make_more_chunks(wb, tiny_scifact):
    table = chunking_sweep(wb, tiny_scifact, [(300, 50), (1000, 150)], mode="fulltext", log=None)
    small, default = table.iloc[0], table.iloc[1]
    assert bool(default["default"]) and not bool(small["default"])
    assert small["chunks"] > default["chunks"]
    assert wb.settings.chunk_size == 1000   # the sweep never changes the workbench it was given


def test_fusion_sweep_leaves_the_workbench_search_untouched(wb, tiny_scifact):
    before = wb.search_engine.fusion
    grid = [DEFAULT_FUSION, fusion_grid()[-1]]
    table = fusion_sweep(wb, tiny_scifact, grid, log=None)
    assert list(table["fusion"][:2]) == ["fulltext only", "semantic only"]
    assert table["default"].sum() == 1
    assert wb.search_engine.fusion is before


def test_verdict_compares_the_default_with_the_best_row():
    df = pd.DataFrame({"fusion": ["a", "b"], "default": [True, False], "ndcg@10": [0.70, 0.75]})
    assert "(a) scores ndcg@10 0.700" in verdict(df, "fusion") and "(b) scores 0.750" in verdict(df, "fusion")
    df.loc[1, "ndcg@10"] = 0.6
    assert verdict(df, "fusion") == "The default (a) has the best ndcg@10: 0.700."
