"""Notebook 01's engine: every evaluation set through every search mode, tables and failed queries.

Results go where the Analytics page reads them: eval/results/retrieval_<set>_<mode>.json for a
full run (RAG_EVAL_SAMPLE=0), eval/cache/sample-results/ for a sample, so a CI run never
overwrites the figures of a full one.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

import pandas as pd

from rag_core.evaluation.charts import TARGET_HIT, TARGET_LATENCY_MS
from rag_core.evaluation.datasets import BeirDataset, available_sets
from rag_core.evaluation.runner import EvalResult, evaluate_dataset
from rag_core.evaluation.sampling import DEFAULT_DISTRACTORS, load_eval_set

if TYPE_CHECKING:
    from rag_core.workbench import Workbench

REPO = Path(__file__).resolve().parents[2]
BASE_MODES = ("semantic", "fulltext", "hybrid")


def results_dir(sample: int) -> Path:
    """eval/results for full runs; eval/cache/sample-results (git-ignored) for samples."""
    return REPO / "eval" / "results" if sample == 0 else REPO / "eval" / "cache" / "sample-results"


def write_json(folder: Path, name: str, data: Any) -> Path:
    """Write one result file (UTF-8, indented) and return its path."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(json.dumps(data, ensure_ascii=False, indent=2, default=str) + "\n", encoding="utf-8")
    return path


def search_modes(wb: Workbench) -> tuple[list[tuple[str, str, Any]], str]:
    """(label, mode, engine) for each mode to measure, and a note on reranking.

    "hybrid+rerank" is added when RAG_RERANKER names a model; plain hybrid then runs on a
    variant with the reranker off, so the two rows show what reranking adds.
    """
    if (wb.settings.reranker or "none").strip().lower() in ("", "none"):
        modes = [(m, m, wb.search_engine) for m in BASE_MODES]
        return modes, "Reranking is off (RAG_RERANKER=none): set it to a cross-encoder to add a hybrid+rerank row."
    plain = wb.variant(reranker="none").search_engine
    modes = [(m, m, plain) for m in BASE_MODES] + [("hybrid+rerank", "hybrid", wb.search_engine)]
    return modes, f"Reranker: {wb.settings.reranker}."


@dataclass
class RetrievalRun:
    """The results of one suite run, with the datasets they were measured on."""

    sample: int
    datasets: dict[str, BeirDataset] = field(default_factory=dict)
    results: list[EvalResult] = field(default_factory=list)
    note: str = ""

    def table(self) -> pd.DataFrame:
        """One row per set and mode: the metrics, latency and whether each target is met."""
        rows = []
        for r in self.results:
            rows.append({
                "set": r.dataset, "mode": r.mode, "queries": r.queries, "docs": len(self.datasets[r.dataset].corpus),
                f"precision@{r.k}": r.precision, f"hit@{r.k}": r.hit, f"recall@{r.k}": r.recall,
                "mrr@10": r.mrr10, "ndcg@10": r.ndcg10, "p50 ms": r.latency_p50_ms, "p95 ms": r.latency_p95_ms,
                "hit target met": r.hit > TARGET_HIT, "latency target met": r.latency_p95_ms < TARGET_LATENCY_MS,
            })
        return pd.DataFrame(rows)

    def failures(self, dataset: str, mode: str = "hybrid", limit: int = 10) -> pd.DataFrame:
        """Queries with no relevant document in the top 5: the query, what was expected, what ranked above it."""
        result = next(r for r in self.results if r.dataset == dataset and r.mode == mode)
        return failed_queries(result, self.datasets[dataset], limit)


def failed_queries(result: EvalResult, ds: BeirDataset, limit: int = 10) -> pd.DataFrame:
    """The first `limit` missed queries: expected document(s), their rank in the top 10, the titles above them."""
    titles = {d["_id"]: (d["title"] or d["text"][:60]).strip() for d in ds.corpus}
    rows = []
    for pq in result.per_query:
        if pq["hit"] > 0:
            continue
        relevant = ds.qrels[pq["query_id"]]
        ranked = pq["ranked"]
        found = [i for i, d in enumerate(ranked, 1) if d in relevant]
        first = found[0] if found else None
        above = ranked[: (first - 1) if first else result.k]
        rows.append({
            "query": ds.queries[pq["query_id"]],
            "expected": "; ".join(f"{d}: {titles.get(d, '?')}" for d in list(relevant)[:3]),
            "expected rank": first if first else "not in top 10",
            "ranked above it": " | ".join(f"{d}: {titles.get(d, '?')[:50]}" for d in above),
        })
        if len(rows) >= limit:
            break
    return pd.DataFrame(rows, columns=["query", "expected", "expected rank", "ranked above it"])


def run_retrieval_suite(wb: Workbench, sets: list[str] | None = None, sample: int | None = None,
                        distractors: int = DEFAULT_DISTRACTORS, out: Path | None = None,
                        log: Callable[[str], None] | None = print) -> RetrievalRun:
    """Each set in RAG_EVAL_DATA (sampled when RAG_EVAL_SAMPLE > 0) through each mode; writes JSON per set and mode.

    Args:
        out: the folder for the result files (default: results_dir(sample)).
    """
    sample = wb.settings.eval_sample if sample is None else sample
    modes, note = search_modes(wb)
    run = RetrievalRun(sample=sample, note=note)
    folder = out or results_dir(sample)
    root = wb.settings.eval_data_dir
    for name in sets or available_sets(root):
        ds = load_eval_set(name, sample, distractors, root=root)
        run.datasets[ds.name] = ds
        if log:
            log(f"{ds.name}: {len(ds.corpus)} documents, {len(ds.judged_queries)} queries")
        for label, mode, engine in modes:
            result = evaluate_dataset(wb, ds, mode=mode, engine=engine, label=label)
            run.results.append(result)
            write_json(folder, f"retrieval_{name}_{label.replace('+', '_')}.json", result.to_dict(per_query=False))
            if log:
                log(f"  {label:14s} hit@5 {result.hit:.3f}  ndcg@10 {result.ndcg10:.3f}  "
                    f"p50 {result.latency_p50_ms:.0f} ms  p95 {result.latency_p95_ms:.0f} ms")
    return run
