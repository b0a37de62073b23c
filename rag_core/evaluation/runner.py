"""The evaluation runner: a BEIR set into its own site, its judged queries through the search service.

The corpus goes into the site `eval:<name>` with sources `<name>/<doc id>`; a second run finds
every document unchanged and embeds nothing. Queries run through the same search as every surface
(document-level results, highlights and suggestions included) with the cache off, so latency is
what a user waits for, query embedding included.
"""

from __future__ import annotations

import datetime as dt
import os
import platform
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from rag_core.errors import InvalidInput, RagError
from rag_core.evaluation.datasets import BeirDataset, find_eval_set, load_beir
from rag_core.evaluation.metrics import hit_at_k, mrr_at_k, ndcg_at_k, percentile, precision_at_k, recall_at_k
from rag_core.progress import auto_progress
from rag_core.search.validation import MAX_QUERY_CHARS, MODES
from rag_core.security.ids import EVAL_SITE_PREFIX

if TYPE_CHECKING:
    import pandas as pd

    from rag_core.ingest.service import DocumentService
    from rag_core.search.service import SearchEngine

RANK_DEPTH = 10  # mrr@10 and ndcg@10 need the top ten documents


@dataclass
class EvalResult:
    """Mean metrics over the judged queries, search latency and what produced them."""

    dataset: str
    site_id: str
    mode: str
    k: int
    queries: int
    embedder: str
    precision: float
    hit: float
    recall: float
    mrr10: float
    ndcg10: float
    latency_p50_ms: float
    latency_p95_ms: float
    latency_mean_ms: float
    errors: int = 0
    ingest: dict[str, Any] = field(default_factory=dict)
    per_query: list[dict[str, Any]] = field(default_factory=list)

    def to_pandas(self) -> pd.DataFrame:
        """One row per judged query: dataset, mode, query_id, hit, precision, recall, mrr, ndcg, ms, ranked."""
        import pandas as pd

        columns = ["query_id", "hit", "precision", "recall", "mrr", "ndcg", "ms", "ranked"]
        frame = pd.DataFrame(self.per_query, columns=columns)
        frame.insert(0, "dataset", self.dataset)
        frame.insert(1, "mode", self.mode)
        return frame

    def to_dict(self, per_query: bool = False) -> dict[str, Any]:
        """The JSON `rag eval --json` prints: metric keys are named by their cut-off (precision@5...)."""
        k = self.k
        data = {
            f"precision@{k}": round(self.precision, 4),
            f"hit@{k}": round(self.hit, 4),
            f"recall@{k}": round(self.recall, 4),
            "mrr@10": round(self.mrr10, 4),
            "ndcg@10": round(self.ndcg10, 4),
            "latency_ms": {"p50": round(self.latency_p50_ms, 1), "p95": round(self.latency_p95_ms, 1),
                           "mean": round(self.latency_mean_ms, 1)},
            "queries": self.queries,
            "mode": self.mode,
            "embedder": self.embedder,
            "dataset": self.dataset,
            "site_id": self.site_id,
            "errors": self.errors,
            "ingest": self.ingest,
            "machine": machine(),
            "written": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        }
        if per_query:
            data["per_query"] = self.per_query
        return data


def machine() -> str:
    """Cores, CPU model and OS: printed beside every measured figure."""
    cpu = platform.processor()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            cpu = next(line.split(":", 1)[1].strip() for line in fh if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return f"{os.cpu_count()} cores, {cpu or 'unknown CPU'}, {platform.system()} {platform.release()}"


def ingest_dataset(documents: DocumentService, ds: BeirDataset, progress: Callable[[Any], None] | None = None) -> dict[str, Any]:
    """Put the corpus into `eval:<name>` (unchanged documents are skipped); returns the ingest summary."""
    site = EVAL_SITE_PREFIX + ds.name
    records = [{"source": ds.source_of(d["_id"]), "title": d["title"], "text": d["text"]} for d in ds.corpus]
    report = documents.ingest_texts(records, site_id=site, progress=progress)
    summary = report.to_dict()
    result = {key: summary[key] for key in ("indexed", "updated", "unchanged", "failed", "chunks", "duration_s")}
    result["removed"] = prune_site(documents, site, {r["source"] for r in records})
    return result


def prune_site(documents: DocumentService, site: str, keep: set[str]) -> int:
    """Delete the documents of an eval site that the set no longer holds (a sample drawn differently)."""
    stale, offset = [], 0
    while True:
        page = documents.documents(site_id=site, limit=1000, offset=offset)
        stale += [d["source"] for d in page if d["source"] not in keep]
        if len(page) < 1000:
            break
        offset += 1000
    for source in stale:
        documents.delete_source(source, site_id=site)
    return len(stale)


def run_eval(documents: DocumentService, engine: SearchEngine, path: str | Path, *, mode: str = "hybrid", k: int = 5, max_queries: int | None = None,
             ingest_progress: Callable[[Any], None] | None = None,
             query_progress: Callable[[int, int], None] | None = None) -> EvalResult:
    """Ingest a BEIR set (a folder, or a set name in RAG_EVAL_DATA) once and score its judged queries."""
    if mode not in MODES:
        raise InvalidInput(f"Unknown mode '{mode}'; choose one of: {', '.join(MODES)}.")
    if not 1 <= k <= 50:
        raise InvalidInput(f"k is {k}; choose between 1 and 50.")
    if max_queries is not None and max_queries < 1:
        raise InvalidInput(f"--max-queries is {max_queries}; give a positive number or leave it out for all.")
    ds = load_beir(find_eval_set(path, documents.store.settings.eval_data_dir))
    if not ds.corpus:
        raise InvalidInput(f"{ds.path / 'corpus.jsonl'} holds no documents.")
    if not ds.judged_queries:
        raise InvalidInput(f"No query in {ds.path / 'queries.jsonl'} has a relevant document in qrels.tsv.")
    return evaluate_dataset(documents, engine, ds, mode=mode, k=k, max_queries=max_queries,
                            ingest_progress=ingest_progress, query_progress=query_progress)


def evaluate_dataset(documents: DocumentService, engine: SearchEngine, ds: BeirDataset, *, mode: str = "hybrid", k: int = 5, max_queries: int | None = None,
                     ingest_progress: Callable[[Any], None] | None = None,
                     query_progress: Callable[[int, int], None] | None = None,
                     label: str | None = None, site_id: str | None = None) -> EvalResult:
    """Ingest a loaded set into `eval:<name>` (once) and score its judged queries.

    Args:
        site_id: score against the documents already stored in this site (a user's own judged queries,
            whose document ids are the stored sources): nothing is ingested.
        engine: the SearchEngine to query; sweeps pass one with other fusion or reranker settings over the
            same store.
        label: the mode name recorded in the result (e.g. "hybrid+rerank"); defaults to `mode`.
    """
    if mode not in MODES:
        raise InvalidInput(f"Unknown mode '{mode}'; choose one of: {', '.join(MODES)}.")
    qids = ds.judged_queries
    if max_queries:
        qids = qids[:max_queries]
    if not qids:
        raise InvalidInput(f"Evaluation set '{ds.name}' has no judged query to score.")
    ingest_progress = auto_progress(ingest_progress, f"ingest {ds.name}")
    on_query = auto_progress((lambda p: query_progress(*p)) if query_progress else None,
                             f"{ds.name} · {label or mode}", unit="query")
    if site_id is not None:
        site, ingest, doc_of_source = site_id, {}, {}
    else:
        site = EVAL_SITE_PREFIX + ds.name
        ingest = ingest_dataset(documents, ds, ingest_progress)
        doc_of_source = {ds.source_of(d["_id"]): d["_id"] for d in ds.corpus}
    depth = max(RANK_DEPTH, k)
    sums = {"precision": 0.0, "hit": 0.0, "recall": 0.0, "mrr": 0.0, "ndcg": 0.0}
    latencies: list[float] = []
    per_query: list[dict[str, Any]] = []
    errors = 0
    for n, qid in enumerate(qids, 1):
        text = ds.queries[qid][:MAX_QUERY_CHARS]
        relevant = ds.qrels[qid]
        started = time.perf_counter()
        try:
            # typed=False: an evaluation's queries are no searches people typed (a user's judged queries run
            # in the user's own site, whose popular queries must not fill with them).
            response = engine.search(text, mode=mode, limit=depth, site_id=site, include_context=False,
                                     max_chunks=1, use_cache=False, typed=False)
            ranked = [doc_of_source.get(r["file_path"], r["file_path"]) for r in response["results"]]
        except RagError as exc:
            if exc.code in ("DATABASE_ERROR", "INDEX_UNAVAILABLE", "EMBEDDER_MISMATCH"):
                raise
            errors += 1  # an unanswerable query (e.g. empty after trimming) counts as a miss
            ranked = []
        latencies.append((time.perf_counter() - started) * 1000)
        scores = {
            "precision": precision_at_k(ranked, relevant, k), "hit": hit_at_k(ranked, relevant, k),
            "recall": recall_at_k(ranked, relevant, k), "mrr": mrr_at_k(ranked, relevant, RANK_DEPTH),
            "ndcg": ndcg_at_k(ranked, relevant, RANK_DEPTH),
        }
        for key, value in scores.items():
            sums[key] += value
        per_query.append({"query_id": qid, "ranked": ranked[:depth], **scores, "ms": round(latencies[-1], 1)})
        if on_query:
            on_query((n, len(qids)))
    count = len(qids)
    return EvalResult(
        dataset=ds.name, site_id=site, mode=label or mode, k=k, queries=count, embedder=documents.store.embedder_name,
        precision=sums["precision"] / count, hit=sums["hit"] / count, recall=sums["recall"] / count,
        mrr10=sums["mrr"] / count, ndcg10=sums["ndcg"] / count,
        latency_p50_ms=percentile(latencies, 50), latency_p95_ms=percentile(latencies, 95),
        latency_mean_ms=sum(latencies) / count, errors=errors, ingest=ingest, per_query=per_query,
    )
