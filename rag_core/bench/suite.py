"""Notebook 01's engine: every evaluation set through every search mode, tables and failed queries.

Results go where the Analytics page reads them: eval/results/retrieval_<set>_<mode>.json for a
full run (RAG_EVAL_SAMPLE=0), eval/cache/sample-results/ for a sample, so a CI run never
overwrites the figures of a full one.

Several embedders can be measured side by side on the same sample. A store holds one vector space,
so each embedder other than the configured one gets a database of its own on the same server
(`<database>_<embedder>`, kept between runs so a rerun embeds nothing), searched through the same
`Workbench.search` with that embedder's measured fusion; its result files go to a subfolder named
after it, which the Analytics page does not read.
"""

from __future__ import annotations

import json
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator, Sequence

import pandas as pd

from rag_core.evaluation.charts import TARGET_HIT, TARGET_LATENCY_MS
from rag_core.evaluation.datasets import BeirDataset, available_sets
from rag_core.evaluation.runner import EvalResult, evaluate_dataset
from rag_core.evaluation.sampling import load_eval_set
from rag_core.evaluation.vectors import embedder_slug

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


def embedder_database_url(url: str, embedder: str) -> str:
    """The database an embedder's evaluation store lives in: `<database>_<embedder>` on the same server."""
    from urllib.parse import urlsplit

    from rag_core.db.database import with_database

    base = urlsplit(url).path.lstrip("/") or "rag"
    return with_database(url, f"{base}_{embedder_slug(embedder)}"[:63])


def open_embedder_workbench(wb: Workbench, embedder: str) -> Workbench:
    """A workbench with the registry embedder `embedder`: `wb` itself when it already uses it, else a new
    one (the caller closes it) on the embedder's own evaluation database, created when missing and kept."""
    if embedder == wb.settings.embedder:
        return wb
    from rag_core.db.database import create_database_if_missing
    from rag_core.providers.embeddings import build_embedder
    from rag_core.workbench import open_workbench

    url = embedder_database_url(wb.database_url, embedder)
    settings = wb.settings.model_copy(update={"embedder": embedder, "database_url": url})
    model = build_embedder(settings)  # an unknown name fails here, before a database is created
    create_database_if_missing(url)
    return open_workbench(settings, embedder=model)


@contextmanager
def embedder_workbench(wb: Workbench, embedder: str) -> Iterator[Workbench]:
    """`open_embedder_workbench` for a `with` block: a workbench it opened is closed on exit, `wb` is not."""
    other = open_embedder_workbench(wb, embedder)
    try:
        yield other
    finally:
        if other is not wb:
            other.close()


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
        """One row per set, mode and embedder: the metrics, latency and whether each target is met."""
        rows = []
        for r in self.results:
            rows.append({
                "set": r.dataset, "mode": r.mode, "embedder": r.embedder, "queries": r.queries,
                "docs": len(self.datasets[r.dataset].corpus),
                f"precision@{r.k}": r.precision, f"hit@{r.k}": r.hit, f"recall@{r.k}": r.recall,
                "mrr@10": r.mrr10, "ndcg@10": r.ndcg10, "p50 ms": r.latency_p50_ms, "p95 ms": r.latency_p95_ms,
                "hit target met": r.hit > TARGET_HIT, "latency target met": r.latency_p95_ms < TARGET_LATENCY_MS,
            })
        return pd.DataFrame(rows)

    def side_by_side(self, metrics: Sequence[str] = ("hit@5", "ndcg@10")) -> pd.DataFrame:
        """One row per set and mode, one column per metric and embedder (in the order they ran)."""
        table = self.table()
        order = list(dict.fromkeys(table["embedder"]))
        wide = table.pivot(index=["set", "mode"], columns="embedder", values=list(metrics))
        return wide.reindex(columns=pd.MultiIndex.from_product([list(metrics), order]))

    def failures(self, dataset: str, mode: str = "hybrid", limit: int = 10, embedder: str | None = None) -> pd.DataFrame:
        """Queries with no relevant document in the top 5: the query, what was expected, what ranked above it.

        Args:
            embedder: whose run to read (default: the first embedder measured).
        """
        result = next(r for r in self.results if r.dataset == dataset and r.mode == mode
                      and (embedder is None or r.embedder == embedder))
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
                        distractors: int | None = None, out: Path | None = None,
                        log: Callable[[str], None] | None = print,
                        embedders: Sequence[str] | None = None) -> RetrievalRun:
    """Each set in RAG_EVAL_DATA (sampled when RAG_EVAL_SAMPLE > 0) through each mode; writes JSON per set and mode.

    Args:
        distractors: documents besides the judged ones in a sample (default: RAG_EVAL_DISTRACTORS).
        out: the folder for the result files (default: results_dir(sample)); an embedder other than
            the workbench's writes into its subfolder `<out>/<embedder>/`.
        embedders: registry names to measure on the same sample (default: the workbench's own);
            each searches with its own measured fusion (embedder_workbench).
    """
    sample = wb.settings.eval_sample if sample is None else sample
    distractors = wb.settings.eval_distractors if distractors is None else distractors
    run = RetrievalRun(sample=sample)
    folder = out or results_dir(sample)
    root = wb.settings.eval_data_dir
    loaded = []
    for name in sets or available_sets(root):
        ds = load_eval_set(name, sample, distractors, root=root)
        run.datasets[ds.name] = ds
        loaded.append((name, ds))
        if log:
            log(f"{ds.name}: {len(ds.corpus)} documents, {len(ds.judged_queries)} queries")
    for embedder in embedders or [wb.settings.embedder]:
        target = folder if embedder == wb.settings.embedder else folder / embedder
        with embedder_workbench(wb, embedder) as ewb:
            modes, note = search_modes(ewb)
            run.note = run.note or note
            for name, ds in loaded:
                for label, mode, engine in modes:
                    result = evaluate_dataset(ewb.library, engine, ds, mode=mode, label=label)
                    run.results.append(result)
                    write_json(target, f"retrieval_{name}_{label.replace('+', '_')}.json",
                               result.to_dict(per_query=False))
                    if log:
                        log(f"  {embedder:17s} {ds.name:20s} {label:14s} hit@5 {result.hit:.3f}  "
                            f"ndcg@10 {result.ndcg10:.3f}  p50 {result.latency_p50_ms:.0f} ms  "
                            f"p95 {result.latency_p95_ms:.0f} ms")
    return run
