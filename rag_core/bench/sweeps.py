"""Notebook 02's engine: chunk size and overlap, and the fusion parameters, swept on one set.

Each chunking goes into its own site (`eval:<set>-c<size>o<overlap>`; the default chunking keeps
the set's usual site), so a rerun embeds nothing. Fusion settings only change the query: every
point of the fusion sweep searches the same stored chunks. The row marked `default` is the
measured setting of the workbench's embedder (`fusion_for`), so a sweep run with another embedder
(`suite.embedder_workbench`) is judged against that embedder's own choice.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Callable, Sequence

import pandas as pd

from rag_core.evaluation.datasets import BeirDataset
from rag_core.evaluation.runner import EvalResult, evaluate_dataset
from rag_core.search.hybrid import DEFAULT_FUSION, Fusion, fusion_for

CHUNKINGS: tuple[tuple[int, int], ...] = ((500, 75), (1000, 0), (1000, 150), (1000, 300), (2000, 300))
# Low full-text weights too: a strong dense model (e5-small) does best near the other end of the range.
ALPHAS: tuple[float, ...] = (0.1, 0.3, 0.5, 0.7, 0.8, 0.85, 0.9, 0.95)
RRF_VARIANTS: tuple[tuple[float, float], ...] = (
    (60.0, 1.0), (60.0, 0.5), (5.0, 1.0), (5.0, 0.2), (5.0, 0.1))  # (k, w_dense)


def _metrics(result: EvalResult) -> dict[str, float]:
    return {"hit@5": result.hit, "recall@5": result.recall, "mrr@10": result.mrr10, "ndcg@10": result.ndcg10,
            "p50 ms": result.latency_p50_ms, "p95 ms": result.latency_p95_ms}


def chunking_site_name(ds: BeirDataset, size: int, overlap: int, default: tuple[int, int]) -> str:
    """The dataset name (hence site) a chunking is stored under; the default keeps the usual one."""
    return ds.name if (size, overlap) == default else f"{ds.name}-c{size}o{overlap}"


def chunking_sweep(wb: Any, ds: BeirDataset, chunkings: Sequence[tuple[int, int]] = CHUNKINGS,
                   mode: str = "hybrid", log: Callable[[str], None] | None = print) -> pd.DataFrame:
    """hit@5, nDCG@10, chunk count and latency for each (chunk size, overlap), ingested into its own site."""
    default = (wb.settings.chunk_size, wb.settings.chunk_overlap)
    rows = []
    for size, overlap in chunkings:
        variant = wb.variant(chunk_size=size, chunk_overlap=overlap)
        sized = replace(ds, name=chunking_site_name(ds, size, overlap, default))
        result = evaluate_dataset(variant.library, variant.search_engine, sized, mode=mode)
        chunks = wb.status(site_id=result.site_id)["chunks"]
        rows.append({"chunking": f"{size}/{overlap}", "chunk_size": size, "overlap": overlap,
                     "default": (size, overlap) == default,
                     "chunks": chunks, "embedded_now": result.ingest.get("indexed", 0),
                     "ingest_s": result.ingest.get("duration_s", 0.0), **_metrics(result)})
        if log:
            log(f"chunk {size:5d} overlap {overlap:4d}: {chunks} chunks, hit@5 {result.hit:.3f}, "
                f"ndcg@10 {result.ndcg10:.3f}")
    return pd.DataFrame(rows)


def fusion_grid(alphas: Sequence[float] = ALPHAS,
                rrf: Sequence[tuple[float, float]] = RRF_VARIANTS) -> list[Fusion]:
    """Convex fusions over `alphas` and weighted-RRF fusions over (k, dense weight)."""
    return ([replace(DEFAULT_FUSION, method="convex", alpha=a) for a in alphas]
            + [replace(DEFAULT_FUSION, method="rrf", k=k, w_fulltext=1.0, w_dense=w) for k, w in rrf])


def describe_fusion(f: Fusion) -> str:
    """A short label: 'convex α=0.9', 'minmax α=0.625 best-of-each' or 'rrf k=60 w_dense=0.5'."""
    if f.method in ("convex", "minmax"):
        label = f"{f.method} α={f.alpha:g}"
    else:
        label = f"rrf k={f.k:g} w_dense={f.w_dense:g}"
    return label if f.documents == "best-chunk" else f"{label} {f.documents}"


def measured_fusions(embedders: Sequence[str]) -> pd.DataFrame:
    """The fusion each embedder's hybrid search uses (its measured setting, else the default)."""
    return pd.DataFrame([{"embedder": name, "fusion": describe_fusion(fusion_for(name))} for name in embedders])


def fusion_sweep(wb: Any, ds: BeirDataset, fusions: Sequence[Fusion] | None = None,
                 log: Callable[[str], None] | None = print) -> pd.DataFrame:
    """Each fusion over the same stored chunks, with semantic and full text alone as the baselines.

    The row marked `default` is the workbench embedder's measured fusion, added to the grid when
    the grid lacks it; every row names the embedder.
    """
    measured = fusion_for(wb.embedder_name)
    grid = list(fusions or fusion_grid())
    if fusions is None and measured not in grid:
        grid.append(measured)
    rows = []
    for mode in ("fulltext", "semantic"):
        result = evaluate_dataset(wb.library, wb.search_engine, ds, mode=mode)
        rows.append({"embedder": wb.embedder_name, "fusion": f"{mode} only", "method": mode, "alpha": None,
                     "rrf_k": None, "w_dense": None, "default": False, **_metrics(result)})
    for fusion in grid:
        engine = wb.variant(search_cache_ttl_sec=0).search_engine
        # the embedder's relevance floor stays, so the measured row scores what a search does
        engine.fusion = replace(fusion, cosine_floor=engine.fusion.cosine_floor)
        label = describe_fusion(fusion)
        result = evaluate_dataset(wb.library, engine, ds, mode="hybrid", label=label)
        rows.append({"embedder": wb.embedder_name, "fusion": label, "method": fusion.method,
                     "alpha": fusion.alpha if fusion.method in ("convex", "minmax") else None,
                     "rrf_k": fusion.k if fusion.method == "rrf" else None,
                     "w_dense": fusion.w_dense if fusion.method == "rrf" else None,
                     "default": fusion == measured, **_metrics(result)})
        if log:
            log(f"{label:24s} hit@5 {result.hit:.3f}  ndcg@10 {result.ndcg10:.3f}")
    return pd.DataFrame(rows)


def fusion_sweeps(wb: Any, ds: BeirDataset, embedders: Sequence[str],
                  log: Callable[[str], None] | None = print) -> pd.DataFrame:
    """`fusion_sweep` once per embedder on the same set, each in its own store (`suite.embedder_workbench`)."""
    from rag_core.bench.suite import embedder_workbench

    tables = []
    for name in embedders:
        with embedder_workbench(wb, name) as ewb:
            if log:
                log(f"{name}: {describe_fusion(fusion_for(ewb.embedder_name))} is its measured fusion")
            tables.append(fusion_sweep(ewb, ds, log=log))
    return pd.concat(tables, ignore_index=True)


def verdict(df: pd.DataFrame, label: str, metric: str = "ndcg@10") -> str:
    """One sentence: how the default row compares with the best row of a sweep on `metric`."""
    if df.empty or not df["default"].any():
        return f"No default setting among the rows; best {metric}: {df[metric].max():.3f}." if not df.empty else "No rows."
    best = df.loc[df[metric].idxmax()]
    default = df.loc[df["default"]].iloc[0]
    gap = float(best[metric]) - float(default[metric])
    if gap <= 0:
        return f"The default ({default[label]}) has the best {metric}: {float(default[metric]):.3f}."
    return (f"The default ({default[label]}) scores {metric} {float(default[metric]):.3f}; the best row "
            f"({best[label]}) scores {float(best[metric]):.3f}, {gap:.3f} more"
            + (" (within noise for this many queries)." if gap < 0.01 else "."))
