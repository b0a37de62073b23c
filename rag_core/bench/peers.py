"""Notebook 04 and eval/bench_peers.py: our hybrid search beside three peers on one corpus.

The corpus is chunked once with our chunker (each chunk prefixed with its document's title, as our
pipeline embeds it) and embedded once with the workbench's embedder; every system gets the same
chunks and the same vectors:

- ours: the corpus ingested through Workbench.ingest_texts into a database of its own on the same
  server (so its disk size is measurable), queried through the same search every surface uses;
- LlamaIndex's default in-memory VectorStoreIndex (SimpleVectorStore), the nodes carrying our vectors;
- ChromaDB, a persistent client in a temporary folder (the web-knowledge spec's choice), our vectors passed in;
- BM25 from bm25s over the same chunk texts (character bigrams for Japanese, as our full text).

Chunk hits are folded into documents (first occurrence wins), then scored like `rag eval`.
Query latency includes embedding the query for every system but BM25; ours also includes what a
user gets with each result (highlights, suggestions, the query-log write).
"""

from __future__ import annotations

import shutil
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Sequence

import numpy as np
import pandas as pd

from rag_core.evaluation.datasets import BeirDataset
from rag_core.evaluation.metrics import hit_at_k, mrr_at_k, ndcg_at_k, percentile, recall_at_k
from rag_core.bench.scale import chunk_inputs
from rag_core.evaluation.vectors import CachedEmbedder, embed_once, load_cache, save_cache, text_key
from rag_core.textproc import cjk_bigrams, detect_language

if TYPE_CHECKING:
    from rag_core.workbench import Workbench

SITE = "peers"
CHUNK_DEPTH = 40   # chunks asked of each peer so that ten distinct documents remain after folding
DOC_DEPTH = 10


@dataclass
class PeerCorpus:
    """The chunks every system indexes: text as embedded, owning document, and one vector each."""

    dataset: BeirDataset
    texts: list[str]
    doc_ids: list[str]
    vectors: np.ndarray
    language: str
    embed_s: float = 0.0


@dataclass
class SystemRun:
    """One system's ingest cost and its ranked documents per query."""

    name: str
    ingest_s: float
    disk_bytes: int
    rankings: dict[str, list[str]] = field(default_factory=dict)
    latencies_ms: list[float] = field(default_factory=list)
    note: str = ""


def folder_bytes(path: Path) -> int:
    """Total size of the files under a folder."""
    return sum(p.stat().st_size for p in Path(path).rglob("*") if p.is_file())


def fold_to_documents(chunk_doc_ids: Sequence[str], depth: int = DOC_DEPTH) -> list[str]:
    """Document ids in order of their best chunk, without repeats, at most `depth`."""
    return list(dict.fromkeys(chunk_doc_ids))[:depth]


def prepare_corpus(wb: Workbench, ds: BeirDataset, vectors: dict[str, np.ndarray] | None = None,
                   log: Callable[[str], None] | None = print) -> PeerCorpus:
    """Chunk every document as our pipeline does and embed each chunk once (cached in `vectors`)."""
    s = wb.settings
    texts, doc_ids = [], []
    for d in ds.corpus:
        pieces = chunk_inputs((d["title"] or d["_id"]).strip(), d["text"], s.chunk_size, s.chunk_overlap)
        texts += pieces
        doc_ids += [d["_id"]] * len(pieces)
    cache = vectors if vectors is not None else {}
    started = time.perf_counter()
    matrix = embed_once(wb.embedder, texts, cache, batch=s.embed_batch_size)
    embed_s = time.perf_counter() - started
    language = detect_language(" ".join(d["text"] for d in ds.corpus[:20]))
    if log:
        log(f"{ds.name}: {len(ds.corpus)} documents, {len(texts)} chunks, embedded in {embed_s:.1f} s")
    return PeerCorpus(ds, texts, doc_ids, matrix, language, embed_s)


def _query_loop(run: SystemRun, ds: BeirDataset, search: Callable[[str], list[str]]) -> None:
    for qid in ds.judged_queries:
        started = time.perf_counter()
        run.rankings[qid] = search(ds.queries[qid][:500])
        run.latencies_ms.append((time.perf_counter() - started) * 1000)


def run_ours(wb: Workbench, corpus: PeerCorpus, modes: Sequence[str] = ("hybrid", "fulltext", "semantic")) -> list[SystemRun]:
    """Our store in a database of its own on the same server; one run per search mode."""
    from rag_core import open_workbench
    from rag_core.db.database import create_database_if_missing, drop_database, with_database
    from rag_core.ingest import vector_index

    ds = corpus.dataset
    url = with_database(wb.database_url, f"rag_peers_{uuid.uuid4().hex[:8]}")
    create_database_if_missing(url)
    runs: list[SystemRun] = []
    try:
        cached = CachedEmbedder(wb.embedder, dict(zip(map(text_key, corpus.texts), corpus.vectors)))
        with open_workbench(wb.settings.model_copy(update={"database_url": url, "search_cache_ttl_sec": 0}),
                            embedder=cached) as ours:
            with ours.db.connection() as conn:
                empty = conn.execute("SELECT pg_database_size(current_database())").fetchone()[0]
            records = [{"source": ds.source_of(d["_id"]), "title": (d["title"] or d["_id"]).strip(), "text": d["text"]}
                       for d in ds.corpus]
            started = time.perf_counter()
            vector_index.drop(ours.db)   # one HNSW build after the load, as bulk loads do
            ours.ingest_texts(records, site_id=SITE)
            vector_index.ensure(ours.db)
            ingest_s = time.perf_counter() - started
            with ours.db.connection() as conn:
                conn.execute("ANALYZE")
                disk = conn.execute("SELECT pg_database_size(current_database())").fetchone()[0] - empty
            doc_of_source = {ds.source_of(d["_id"]): d["_id"] for d in ds.corpus}
            misses = cached.misses
            for mode in modes:
                run = SystemRun(f"ours ({mode})", ingest_s, int(disk),
                                note="" if not misses else f"{misses} chunk texts differed and were embedded again")

                def search(q: str, mode: str = mode) -> list[str]:
                    resp = ours.search_engine.search(q, mode=mode, limit=DOC_DEPTH, site_id=SITE,
                                                     include_context=False, max_chunks=1, use_cache=False)
                    return [doc_of_source.get(r["file_path"], r["file_path"]) for r in resp["results"]]

                search("warm up")
                _query_loop(run, ds, search)
                runs.append(run)
    finally:
        drop_database(url)
    return runs


def run_llamaindex(wb: Workbench, corpus: PeerCorpus) -> SystemRun:
    """LlamaIndex's default VectorStoreIndex (in memory); disk is its persisted JSON."""
    from llama_index.core import StorageContext, VectorStoreIndex
    from llama_index.core.schema import TextNode

    nodes = [TextNode(text=t, id_=f"{d}#{i}", metadata={"doc_id": d}, embedding=v.tolist())
             for i, (t, d, v) in enumerate(zip(corpus.texts, corpus.doc_ids, corpus.vectors))]
    started = time.perf_counter()
    index = VectorStoreIndex(nodes, embed_model=wb.embedder, storage_context=StorageContext.from_defaults())
    ingest_s = time.perf_counter() - started
    folder = Path(tempfile.mkdtemp(prefix="peers-llamaindex-"))
    try:
        index.storage_context.persist(persist_dir=str(folder))
        disk = folder_bytes(folder)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    retriever = index.as_retriever(similarity_top_k=CHUNK_DEPTH)
    run = SystemRun("LlamaIndex VectorStoreIndex (in memory)", ingest_s, disk, note="disk: persisted JSON")
    _query_loop(run, corpus.dataset, lambda q: fold_to_documents([n.node.metadata["doc_id"] for n in retriever.retrieve(q)]))
    return run


def run_chroma(wb: Workbench, corpus: PeerCorpus) -> SystemRun:
    """ChromaDB persistent client in a temporary folder, cosine HNSW, our vectors passed in."""
    import chromadb
    from chromadb.config import Settings

    folder = Path(tempfile.mkdtemp(prefix="peers-chroma-"))
    try:
        client = chromadb.PersistentClient(path=str(folder), settings=Settings(anonymized_telemetry=False))
        started = time.perf_counter()
        col = client.create_collection("peers", metadata={"hnsw:space": "cosine"})
        step = max(1, min(5000, client.get_max_batch_size()))
        for s in range(0, len(corpus.texts), step):
            col.add(ids=[f"{d}#{i}" for i, d in enumerate(corpus.doc_ids[s:s + step], s)],
                    embeddings=corpus.vectors[s:s + step], documents=corpus.texts[s:s + step],
                    metadatas=[{"doc_id": d} for d in corpus.doc_ids[s:s + step]])
        ingest_s = time.perf_counter() - started
        run = SystemRun("ChromaDB (persistent)", ingest_s, 0)

        def search(q: str) -> list[str]:
            emb = wb.embedder.get_query_embedding(q)
            res = col.query(query_embeddings=[emb], n_results=min(CHUNK_DEPTH, len(corpus.texts)),
                            include=["metadatas"])
            return fold_to_documents([m["doc_id"] for m in res["metadatas"][0]])

        _query_loop(run, corpus.dataset, search)
        run.disk_bytes = folder_bytes(folder)
        del col, client
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return run


def bm25_tokens(texts: Sequence[str], language: str) -> Any:
    """bm25s tokens: English stopwords removed; Japanese as character bigrams (like our full text)."""
    import bm25s

    prepared = [cjk_bigrams(t) if language == "ja" else t for t in texts]
    return bm25s.tokenize(prepared, stopwords="en" if language == "en" else None, show_progress=False)


def run_bm25(corpus: PeerCorpus) -> SystemRun:
    """bm25s over the same chunk texts (its defaults: Lucene BM25, k1 1.5, b 0.75)."""
    import bm25s

    started = time.perf_counter()
    retriever = bm25s.BM25()
    retriever.index(bm25_tokens(corpus.texts, corpus.language), show_progress=False)
    ingest_s = time.perf_counter() - started
    folder = Path(tempfile.mkdtemp(prefix="peers-bm25s-"))
    try:
        retriever.save(str(folder))
        disk = folder_bytes(folder)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    run = SystemRun("bm25s", ingest_s, disk)
    k = min(CHUNK_DEPTH, len(corpus.texts))

    def search(q: str) -> list[str]:
        tokens = bm25_tokens([q], corpus.language)
        if not tokens.vocab:   # a query of stopwords only finds nothing
            return []
        ids, _ = retriever.retrieve(tokens, k=k, show_progress=False)
        return fold_to_documents([corpus.doc_ids[i] for i in ids[0]])

    _query_loop(run, corpus.dataset, search)
    return run


def score(run: SystemRun, ds: BeirDataset) -> dict[str, Any]:
    """Mean hit@5, recall@5, MRR@10 and nDCG@10 and latency percentiles of one system."""
    qids = list(run.rankings)
    n = len(qids) or 1
    return {
        "system": run.name,
        "hit@5": sum(hit_at_k(run.rankings[q], ds.qrels[q], 5) for q in qids) / n,
        "recall@5": sum(recall_at_k(run.rankings[q], ds.qrels[q], 5) for q in qids) / n,
        "mrr@10": sum(mrr_at_k(run.rankings[q], ds.qrels[q], 10) for q in qids) / n,
        "ndcg@10": sum(ndcg_at_k(run.rankings[q], ds.qrels[q], 10) for q in qids) / n,
        "p50 ms": percentile(run.latencies_ms, 50), "p95 ms": percentile(run.latencies_ms, 95),
        "ingest s": run.ingest_s, "disk MB": run.disk_bytes / 1e6, "queries": len(qids), "note": run.note,
    }


def with_ratios(table: pd.DataFrame, reference: str = "ours (hybrid)") -> pd.DataFrame:
    """Add `<metric> / ours` columns: each system's figure divided by our hybrid search's."""
    ref = table.set_index("system").loc[reference]
    out = table.copy()
    for col in ("hit@5", "ndcg@10", "p50 ms", "p95 ms", "ingest s", "disk MB"):
        out[f"{col} / ours"] = out[col] / ref[col] if ref[col] else float("nan")
    return out


def vector_cache_name(embedder: str) -> str:
    """The chunk-vector cache file of an embedder (under eval/cache/): two embedders' vectors never mix."""
    from rag_core.evaluation.vectors import embedder_slug

    return f"peers_vectors_{embedder_slug(embedder)}.npz"


def compare_peers(wb: Workbench, ds: BeirDataset, cache_path: Path | None = None,
                  log: Callable[[str], None] | None = print) -> pd.DataFrame:
    """Every system on one corpus in one run: quality, latency, ingest time and disk, with ratios to ours.

    Args:
        cache_path: an .npz of chunk vectors kept between runs (eval/cache/ is git-ignored).
    """
    vectors = load_cache(cache_path) if cache_path else {}
    before = len(vectors)
    corpus = prepare_corpus(wb, ds, vectors, log)
    if cache_path and len(vectors) > before:
        save_cache(cache_path, vectors)
    runs = run_ours(wb, corpus)
    for runner in (lambda: run_llamaindex(wb, corpus), lambda: run_chroma(wb, corpus), lambda: run_bm25(corpus)):
        runs.append(runner())
        if log:
            log(f"{runs[-1].name}: done")
    table = pd.DataFrame([score(r, ds) for r in runs])
    return with_ratios(table)
