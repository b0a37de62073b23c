"""Experiments on a user's own documents: their judged queries, scored like the benchmark sets.

A site's judged queries (marked on the Search page, uploaded, or marked in notebook 00) name the
stored sources that answer them. Here they become a BEIR dataset whose corpus is every document
of the site with its full text, so the same runner and sweeps as the benchmark notebooks compare
search modes, chunk sizes and embedders on the user's documents:

- modes: `Workbench.evaluate_judged` searches the site itself (nothing is copied) and saves each
  result where the app's Analytics page reads it;
- chunkings: `sweeps.chunking_sweep` stores each chunking in its own evaluation site
  (`eval:<name>-c<size>o<overlap>`), which every other surface ignores;
- embedders: dense retrieval with each embedder, exact cosine over the same chunks, best chunk per
  document; a store holds one vector space, so the comparison runs in memory and stores nothing.
"""

from __future__ import annotations

import re
import time
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np
import pandas as pd

from rag_core.errors import InvalidInput
from rag_core.evaluation.datasets import BeirDataset
from rag_core.evaluation.metrics import hit_at_k, mrr_at_k, ndcg_at_k, percentile, recall_at_k

if TYPE_CHECKING:
    from rag_core.workbench import Workbench

RANK_DEPTH = 10


def judged_dataset(wb: "Workbench", site_id: str, example_question: str | None = None) -> BeirDataset:
    """The site's judged queries over every stored document of the site (ids are the sources); relevant
    sources deleted from the site since are dropped (a query left with none is left out).

    With no judged query yet and `example_question` given, the set is that question with its best hit as
    the relevant document: an example held in memory, never written as a judgement of the user's."""
    from rag_core.evaluation import judged

    with wb.db.connection() as conn:
        rows = conn.execute("SELECT source, title, content FROM documents WHERE site_id = %s ORDER BY source",
                            (site_id,)).fetchall()
    if not rows:
        raise InvalidInput(f"Site '{site_id}' holds no documents; ingest your folder into it first.")
    stored = {source for source, _, _ in rows}
    if example_question is not None and not wb.judged_queries(site_id)["queries"]:
        best = wb.search(example_question, site_id=site_id, limit=1, include_context=False, typed=False)["results"]
        qid = judged.query_id(example_question)
        base = BeirDataset(name="example", path=judged.judged_dir(wb.settings.data_dir, site_id), corpus=[],
                           queries={qid: example_question}, qrels={qid: {best[0]["file_path"]: 1}} if best else {})
    else:
        base, _ = judged.without_deleted(judged.load_judged(wb.settings.data_dir, site_id),
                                         lambda candidates: stored & set(candidates))
    name = "yours-" + re.sub(r"[^A-Za-z0-9_.-]+", "_", site_id)[:40]
    corpus = [{"_id": source, "title": title or "", "text": content} for source, title, content in rows]
    return BeirDataset(name=name, path=base.path, corpus=corpus, queries=dict(base.queries),
                       qrels={q: dict(r) for q, r in base.qrels.items()})


def compare_modes(wb: "Workbench", site_id: str, modes: Sequence[str] = ("semantic", "fulltext", "hybrid"),
                  k: int = 5, dataset: BeirDataset | None = None) -> pd.DataFrame:
    """One row per search mode over the site's judged queries; each result is saved for Analytics.

    `dataset` (an example set of `judged_dataset`) is scored on the site instead, and nothing is saved."""
    from rag_core.evaluation.runner import evaluate_dataset

    rows = []
    for mode in modes:
        if dataset is None:
            data = wb.evaluate_judged(site_id=site_id, mode=mode, k=k)
        else:
            data = evaluate_dataset(wb.library, wb.search_engine, dataset, mode=mode, k=k, site_id=site_id).to_dict()
        rows.append({"mode": mode, "queries": data["queries"], f"hit@{k}": data[f"hit@{k}"],
                     f"recall@{k}": data[f"recall@{k}"], "mrr@10": data["mrr@10"], "ndcg@10": data["ndcg@10"],
                     "p50 ms": data["latency_ms"]["p50"],
                     "not scored (sources deleted)": sum(not d["scored"] for d in data.get("deleted_judgements", []))})
    return pd.DataFrame(rows)


def compare_embedders(wb: "Workbench", ds: BeirDataset, embedders: Sequence[str], k: int = 5) -> pd.DataFrame:
    """Dense retrieval quality of each embedder on the judged queries (exact cosine, best chunk per
    document), with its corpus encoding speed and query latency. An embedder that cannot load here
    (a missing optional package, a model that is not on this machine) is a row with its error."""
    from rag_core.ingest.chunking import chunk_text
    from rag_core.providers.embeddings import build_embedder
    from rag_core.textproc import embedding_input

    chunks, owners = [], []
    for doc in ds.corpus:
        for piece in chunk_text(doc["text"], wb.settings.chunk_size, wb.settings.chunk_overlap):
            chunks.append(embedding_input(doc["title"], piece.text))
            owners.append(doc["_id"])
    qids = ds.judged_queries
    if not qids:
        raise InvalidInput("No judged query yet: mark a few hits as relevant (Workbench.mark_relevant) first.")
    rows = []
    for name in embedders:
        try:
            embedder = build_embedder(wb.settings.model_copy(update={"embedder": name}))
            started = time.perf_counter()
            doc_vecs = np.asarray(embedder.get_text_embedding_batch(chunks), dtype=np.float32)
            encode_s = time.perf_counter() - started
        except Exception as exc:  # noqa: BLE001 - the comparison goes on with the other embedders
            rows.append({"embedder": name, "error": f"{type(exc).__name__}: {exc}"})
            continue
        doc_vecs /= np.linalg.norm(doc_vecs, axis=1, keepdims=True) + 1e-12
        sums = {"hit": 0.0, "recall": 0.0, "mrr": 0.0, "ndcg": 0.0}
        latencies = []
        for qid in qids:
            started = time.perf_counter()
            q = np.asarray(embedder.get_query_embedding(ds.queries[qid]), dtype=np.float32)
            latencies.append((time.perf_counter() - started) * 1000)
            scores = doc_vecs @ (q / (np.linalg.norm(q) + 1e-12))
            ranked: list[str] = []
            for i in np.argsort(-scores):
                if owners[i] not in ranked:
                    ranked.append(owners[i])
                if len(ranked) == RANK_DEPTH:
                    break
            relevant = ds.qrels[qid]
            sums["hit"] += hit_at_k(ranked, relevant, k)
            sums["recall"] += recall_at_k(ranked, relevant, k)
            sums["mrr"] += mrr_at_k(ranked, relevant, RANK_DEPTH)
            sums["ndcg"] += ndcg_at_k(ranked, relevant, RANK_DEPTH)
        n = len(qids)
        rows.append({"embedder": name, "queries": n, f"hit@{k}": sums["hit"] / n, f"recall@{k}": sums["recall"] / n,
                     "mrr@10": sums["mrr"] / n, "ndcg@10": sums["ndcg"] / n,
                     "query p50 ms": round(percentile(latencies, 50), 1),
                     "chunks/s": round(len(chunks) / encode_s, 1) if encode_s > 0 else None, "error": None})
    return pd.DataFrame(rows)


def judgements_from_file(wb: "Workbench", path: Any, site_id: str, root: Any = None) -> dict[str, Any]:
    """Mark relevant what a tab-separated file says: `query<TAB>file` per line, where file is a path
    relative to `root` (the ingested folder) or a stored source. Returns the site's judged set."""
    from pathlib import Path

    lines = Path(path).read_text(encoding="utf-8").splitlines()
    for n, line in enumerate(lines, 1):
        if not line.strip() or line.startswith("#"):
            continue
        query, sep, target = line.partition("\t")
        if not sep or not query.strip() or not target.strip():
            raise InvalidInput(f"{path} line {n}: expected 'query<TAB>file', got {line[:80]!r}.")
        source = target.strip()
        if root is not None and not Path(source).is_absolute() and "://" not in source:
            source = (Path(root) / source).resolve().as_posix()
        wb.mark_relevant(query.strip(), source, site_id=site_id)
    return wb.judged_queries(site_id)


def example_question(wb: "Workbench", site_id: str, example: str) -> str:
    """The question notebook 00 demonstrates with when the user wrote no judgements: `example` when it
    finds something in the site, else the title of the site's newest document, so a folder about
    anything else still shows a search, an answer and an example evaluation instead of an empty result."""
    if wb.search(example, site_id=site_id, limit=1, include_context=False, typed=False)["results"]:
        return example
    newest = list(wb.documents(site_id=site_id, limit=1))
    return newest[0]["title"] if newest else example
