"""eval/sweep_fusion_lists.py rebuilds hybrid search from cached candidate lists: it must rank as the SQL does."""

from __future__ import annotations

import importlib.util
from dataclasses import replace
from pathlib import Path

from rag_core.evaluation.runner import evaluate_dataset
from rag_core.search.hybrid import DEFAULT_FUSION

SCRIPT = Path(__file__).resolve().parents[2] / "eval" / "sweep_fusion_lists.py"


def _sweep_module():
    spec = importlib.util.spec_from_file_location("sweep_fusion_lists", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_cached_lists_rank_documents_as_the_hybrid_statement_does(wb, tiny_scifact):
    sweep = _sweep_module()
    lists = sweep.Lists(sweep.collect_lists(wb, tiny_scifact))
    floor = wb.search_engine.fusion.cosine_floor
    # unequal RRF weights: equal ones tie a full-text-only and a dense-only chunk, and ties may break apart
    settings = [{"method": "convex", "alpha": 0.1}, {"method": "convex", "alpha": DEFAULT_FUSION.alpha},
                {"method": "rrf", "k": 5.0, "w_dense": 0.5}]
    for setting in settings:
        engine = wb.variant(search_cache_ttl_sec=0).search_engine
        params = {"alpha": setting["alpha"]} if setting["method"] == "convex" else \
            {"k": setting["k"], "w_fulltext": 1.0, "w_dense": setting["w_dense"]}
        engine.fusion = replace(DEFAULT_FUSION, method=setting["method"], cosine_floor=floor, **params)
        result = evaluate_dataset(wb, tiny_scifact, mode="hybrid", engine=engine)
        expected = [q["ranked"] for q in result.per_query]
        assert lists.rank(*lists.fused_scores(setting, floor)) == expected, setting
        assert abs(lists.fused(setting, floor)["ndcg@10"] - result.ndcg10) < 1e-9
    for mode in ("semantic", "fulltext"):
        result = evaluate_dataset(wb, tiny_scifact, mode=mode)
        assert abs(lists.mode(mode)["ndcg@10"] - result.ndcg10) < 1e-9, mode
