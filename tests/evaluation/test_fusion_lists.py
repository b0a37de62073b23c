"""eval/sweep_fusion_lists.py rebuilds hybrid search from cached candidate lists: it must rank as the SQL does."""

from __future__ import annotations

import importlib.util
from dataclasses import replace
from pathlib import Path

import numpy as np

from rag_core.evaluation.runner import EVAL_SITE_PREFIX, evaluate_dataset
from rag_core.search.hybrid import DEFAULT_FUSION, fusion_for, rank_chunks
from rag_core.search.validation import MAX_QUERY_CHARS

SCRIPT = Path(__file__).resolve().parents[2] / "eval" / "sweep_fusion_lists.py"
E5 = fusion_for("e5-small")


def _sweep_module():
    spec = importlib.util.spec_from_file_location("sweep_fusion_lists", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _rank_as_sql(wb, ds, settings: list[dict], lists=None) -> int:
    """Assert the sweep's document ranking equals the hybrid statement's for each setting; return how many
    best-of-each settings rank some query differently from their best-chunk twin."""
    if lists is None:
        sweep = _sweep_module()
        lists = sweep.Lists(sweep.collect_lists(wb, ds))
    floor = wb.search_engine.fusion.cosine_floor
    differs = 0
    for setting in settings:
        engine = wb.variant(search_cache_ttl_sec=0).search_engine
        params = {"alpha": setting["alpha"]} if setting["method"] != "rrf" else \
            {"k": setting["k"], "w_fulltext": 1.0, "w_dense": setting["w_dense"]}
        documents = setting.get("documents", "best-chunk")
        engine.fusion = replace(DEFAULT_FUSION, method=setting["method"], cosine_floor=floor, documents=documents, **params)
        result = evaluate_dataset(wb.library, engine, ds, mode="hybrid")
        shares, keep = lists.fused_scores(setting, floor)
        assert lists.rank(shares, keep, documents) == [q["ranked"] for q in result.per_query], setting
        assert abs(lists.fused(setting, floor)["ndcg@10"] - result.ndcg10) < 1e-9
        if documents == "best-of-each":
            differs += lists.rank(shares, keep, documents) != lists.rank(shares, keep)
    for mode in ("semantic", "fulltext"):
        result = evaluate_dataset(wb.library, wb.search_engine, ds, mode=mode)
        assert abs(lists.mode(mode)["ndcg@10"] - result.ndcg10) < 1e-9, mode
    return differs


def test_cached_lists_rank_documents_as_the_hybrid_statement_does(wb, tiny_scifact):
    # unequal RRF weights: equal ones tie a full-text-only and a dense-only chunk, and ties may break apart
    _rank_as_sql(wb, tiny_scifact, [
        {"method": "convex", "alpha": 0.1}, {"method": "convex", "alpha": DEFAULT_FUSION.alpha},
        {"method": "rrf", "k": 5.0, "w_dense": 0.5}, {"method": "minmax", "alpha": E5.alpha}])


def test_documents_scored_by_their_best_share_of_each_side_rank_as_the_statement_does(wb, tiny_scifact):
    """e5-small's setting: the cosine read against the query's own dense spread, and a document scoring its
    best full-text share plus its best dense share, which small chunks often take from different chunks."""
    small = wb.variant(chunk_size=120, chunk_overlap=0)
    ds = replace(tiny_scifact, name=f"{tiny_scifact.name}-c120")
    sweep = _sweep_module()
    lists = sweep.Lists(sweep.collect_lists(small, ds))
    settings = [{"method": E5.method, "alpha": E5.alpha, "documents": E5.documents},
                {"method": "minmax", "alpha": 0.3, "documents": "best-of-each"},
                {"method": "convex", "alpha": 0.5, "documents": "best-of-each"},
                {"method": "rrf", "k": 5.0, "w_dense": 0.5, "documents": "best-of-each"}]
    assert E5.documents == "best-of-each"
    assert _rank_as_sql(small, ds, settings, lists) > 0, "no query ranked differently: the per-document scoring went untested"
    # chat takes top chunks from the same statement: their fused scores are the sweep's sf + sd
    floor = small.search_engine.fusion.cosine_floor
    (sf, sd), keep = lists.fused_scores(settings[0], floor)
    rows = lists.rows
    for q, qid in enumerate(lists.qids):
        text = ds.queries[qid][:MAX_QUERY_CHARS]
        hits = rank_chunks(small.db, text, small.embedder.get_query_embedding(text), k=5,
                             site_id=EVAL_SITE_PREFIX + ds.name, fusion=replace(E5, cosine_floor=floor))
        mine = np.flatnonzero(keep & (rows["q"] == q))
        mine = mine[np.lexsort((rows["chunk"][mine], -(sf + sd)[mine]))][:5]
        assert [h.chunk_id for h in hits] == rows["chunk"][mine].tolist()
        # The sweep's cosines are float32 dot products, PostgreSQL's are pgvector's: about 1e-6 apart. The
        # min-max reading multiplies that by (1 - alpha) / (cos_1 - cos_100), which e5-small's narrow band of
        # cosines makes large (a spread of 0.03 gives 12x).
        slope = (1 - E5.alpha) / np.maximum(rows["cos_hi"][mine] - rows["cos_lo"][mine], 1e-9)
        assert np.allclose([h.score for h in hits], (sf + sd)[mine], rtol=0, atol=1e-6 + 2e-6 * float(slope.max(initial=0)))


def test_query_adaptive_rules_are_scored_on_queries_they_were_not_fitted_on(wb, tiny_scifact):
    """The `adaptive` subcommand scores a rule from per-query tables: a table column must score as the sweep's
    ranking of that setting does, and the validation must score held-out picks, not the fitted ones."""
    sweep = _sweep_module()
    small = wb.variant(chunk_size=120, chunk_overlap=0)
    lists = sweep.Lists(sweep.collect_lists(small, replace(tiny_scifact, name=f"{tiny_scifact.name}-c120")))
    floor = small.search_engine.fusion.cosine_floor
    settings = [{"method": E5.method, "alpha": a, "documents": E5.documents} for a in sweep.ADAPTIVE_ALPHAS]
    table = sweep.Table(lists, settings, floor)
    for i in (0, 8, 25, len(settings) - 1):
        assert abs(table.ndcg[:, i].mean() - lists.fused(settings[i], floor)["ndcg@10"]) < 1e-12
        assert abs(table.hit[:, i].mean() - lists.fused(settings[i], floor)["hit@5"]) < 1e-12
    # a softmax over a document's chunks with a tiny temperature is its best chunk; the sum is not
    shares, keep = lists.fused_scores(settings[25], floor)
    assert lists.rank(shares, keep, "softmax-0.0001") == lists.rank(shares, keep, "best-chunk")
    assert lists.rank(shares, keep, "sum") != lists.rank(shares, keep, "best-chunk")

    tables = {"one": table, "two": table}
    today = sweep.ADAPTIVE_ALPHAS.index(E5.alpha)
    n = len(lists.qids)
    keep_today = sweep.validate(lambda s, p, train: np.full(n, today), [0], tables, "ndcg@10", tables, today)
    assert {r["gain"] for r in keep_today["loso"] + keep_today["folds"]} == {0.0} and not keep_today["generalises"]
    fixed = sweep.validate(lambda s, p, train: np.full(n, p), list(range(len(settings))), tables, "ndcg@10", tables, today)
    assert {r["gain_vs_fixed"] for r in fixed["loso"] + fixed["folds"]} == {0.0}
    # each query's best alpha: never worse than any fixed alpha on the held-out half
    best = table.ndcg.argmax(1)
    oracle = sweep.validate(lambda s, p, train: best, [0], tables, "ndcg@10", tables, today)
    assert min(r["gain_vs_fixed"] for r in oracle["loso"] + oracle["folds"]) >= 0
    assert oracle["loso"][0]["ndcg@10"] == round(float(table.ndcg.max(1).mean()), 4)
