"""Benchmark building blocks shared by eval/bench_search.py and eval/bench_scale.py.

A large store is built from real text: the documents of the three evaluation sets in RAG_EVAL_DATA,
repeated with a variation marker in the title ("[v3]") until the target is reached. A repeat is embedded as its
original plus small deterministic noise (CachedEmbedder), so only originals are ever encoded.
"""

from __future__ import annotations

import random
import re
import statistics
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator, Sequence

import numpy as np

from rag_core.errors import RagError
from rag_core.evaluation.datasets import eval_set_dir, load_beir
from rag_core.evaluation.metrics import percentile
from rag_core.evaluation.vectors import text_key
from rag_core.jobs.tasks import describe

if TYPE_CHECKING:
    from rag_core.workbench import Workbench

SETS = ("ru_construction", "scifact", "jsquad")
SITE = "bench"
# (label, filters): no filter, a broad one, a selective one, and one on a column
FILTERS: tuple[tuple[str, dict[str, Any]], ...] = (
    ("no filter", {}), ("source filter (one corpus)", {"source": "scifact/"}),
    ("selective filter (1 corpus, 1 repeat)", {"source": "jsquad/v0/"}), ("type filter", {"types": ["txt"]}),
)


def chunk_inputs(title: str, text: str, chunk_size: int, chunk_overlap: int) -> list[str]:
    """The texts our pipeline embeds for a document: each chunk prefixed with the title."""
    from rag_core.ingest.chunking import chunk_text
    from rag_core.textproc import embedding_input

    return [embedding_input(title, piece.text) for piece in chunk_text(text, chunk_size, chunk_overlap)]


def build_records(queries_per_set: int = 100) -> tuple[list[dict], list[dict]]:
    """Corpus records of every set (shuffled so any size mixes the languages) and judged queries per set."""
    records, queries = [], []
    for name in SETS:
        ds = load_beir(eval_set_dir(name))
        for d in ds.corpus:
            records.append({"set": name, "id": d["_id"], "title": d["title"], "text": d["text"]})
        for qid in ds.judged_queries[:queries_per_set]:
            queries.append({"set": name, "text": ds.queries[qid][:500]})
    random.Random(0).shuffle(records)
    random.Random(1).shuffle(queries)
    return records, queries


# Sentence and clause ends; Japanese has no spaces and only full stops count (its commas cut too finely).
_UNIT_END = re.compile(r"(?<=[.!?;:])\s+")
_UNIT_END_JA = re.compile(r"(?<=[。！？])")


def text_units(text: str, japanese: bool = False) -> list[str]:
    """The sentences and clauses (split after . ! ? ; : or 。！？) of a text, stripped, empty ones dropped."""
    return [u.strip() for u in (_UNIT_END_JA if japanese else _UNIT_END).split(text) if u.strip()]


def distinct_windows(documents: Sequence[dict], set_name: str, max_chars: int = 600, min_chars: int = 20,
                     seen: set[str] | None = None) -> Iterator[dict]:
    """Every distinct window of consecutive sentences/clauses of a set's documents read as one stream.

    The documents are read in corpus order; a window starts at any unit and takes 1, 2, ... units while
    it stays within `max_chars` (one chunk), so windows near a document's end run on into the next
    document. A window whose normalised text (lower case, single spaces) was already made, here or in
    `seen`, is skipped: no text is stored twice.
    """
    japanese = set_name == "jsquad"
    sep = "" if japanese else " "
    stream = [(d, u) for d in documents for u in text_units(d["text"], japanese)]
    seen = set() if seen is None else seen
    for start in range(len(stream)):
        doc = stream[start][0]
        text = ""
        for width in range(1, len(stream) - start + 1):
            text = stream[start][1] if width == 1 else text + sep + stream[start + width - 1][1]
            if len(text) > max_chars:
                break
            key = " ".join(text.lower().split())
            if len(key) < min_chars or key in seen:
                continue
            seen.add(key)
            yield {"set": set_name, "id": f"{doc['_id']}-u{start}-w{width}", "title": doc.get("title") or "",
                   "text": text, "cross_document": stream[start + width - 1][0] is not doc}


def window_records(size: int, max_chars: int = 600, seed: int = 3,
                   root: str | Path | None = None) -> tuple[list[dict], dict[str, Any]]:
    """`size` distinct, storable window records drawn at random from every set's windows, and how many there were."""
    from rag_core.security.text import text_problem

    pool: list[dict] = []
    seen: set[str] = set()
    for name in SETS:
        pool.extend(distinct_windows(load_beir(eval_set_dir(name, root)).corpus, name, max_chars, seen=seen))
    random.Random(seed).shuffle(pool)
    # PostgreSQL cannot store a few texts (a NUL byte in a scanned page); dropped after the draw, so the draw
    # and a half-built store's documents stay the same
    pool = [r for r in pool if not text_problem(r["text"])]
    per_set = {n: sum(1 for r in pool if r["set"] == n) for n in SETS}
    chosen = pool[:size]
    stats = {"method": f"every window of 1+ consecutive sentences/clauses up to {max_chars} characters over each "
                       "set's documents in corpus order, exact duplicates (case and spacing folded) dropped, "
                       f"{len(chosen)} drawn at random (seed {seed})",
             "distinct windows available": len(pool), "available per set": per_set,
             "chosen per set": {n: sum(1 for r in chosen if r["set"] == n) for n in SETS},
             "chosen crossing a document boundary": sum(1 for r in chosen if r["cross_document"])}
    return chosen, stats


def vectors_from_store(wb: Workbench, embedder: str | None = None) -> dict[str, np.ndarray]:
    """Chunk vectors of the eval:* sites already in a store (same chunking, same embedder), keyed by text;
    none when the store holds another embedder's vectors than `embedder` (a store built before e5-small
    became the default opens with use-multilingual)."""
    from rag_core.textproc import embedding_input

    found: dict[str, np.ndarray] = {}
    if embedder is not None and wb.embedder_name != embedder:
        return found
    with wb.db.connection() as conn:
        rows = conn.execute(
            "SELECT d.title, c.text, c.embedding FROM chunks c JOIN documents d ON d.id = c.document_id"
            " WHERE c.site_id = ANY(%s) AND c.embedding IS NOT NULL", ([f"eval:{s}" for s in SETS],))
        for title, text, emb in rows:
            vec = emb.to_numpy() if hasattr(emb, "to_numpy") else emb
            found[text_key(embedding_input(title, text))] = np.asarray(vec, dtype=np.float32)
    return found


def repeated_batches(records: Sequence[dict], batch_docs: int = 400) -> Iterator[list[dict]]:
    """Ingest records in batches: v0 is the originals, v1, v2... repeats with the marker in the title."""
    variant = 0
    while True:
        suffix = f" [v{variant}]" if variant else ""
        batch: list[dict] = []
        for r in records:
            batch.append({"source": f"{r['set']}/v{variant}/{r['id']}", "title": (r["title"] or r["id"]) + suffix,
                          "text": r["text"]})
            if len(batch) == batch_docs:
                yield batch
                batch = []
        if batch:
            yield batch
        variant += 1


def bulk_ingest(wb: Workbench, records: Sequence[dict], target: int, unit: str = "chunks", site: str = SITE,
                progress: Callable[[int], None] | None = None) -> dict[str, Any]:
    """Ingest repeats until `target` chunks (or documents) are stored; HNSW built once at the end."""
    from rag_core.ingest import store, vector_index

    column = "count(*)" if unit == "chunks" else "count(DISTINCT document_id)"
    with wb.db.connection() as conn:
        have = conn.execute(f"SELECT {column} FROM chunks WHERE site_id = %s", (site,)).fetchone()[0]
    reused, stored_before = have >= target, have
    started = time.perf_counter()
    if not reused:
        vector_index.drop(wb.db)   # rows load into a live HNSW index at ~256/s: build it once at the end
        with wb.db.connection() as conn:
            already = {r[0] for r in conn.execute("SELECT source FROM documents WHERE site_id = %s", (site,))}
        for batch in repeated_batches(records):
            batch = [b for b in batch if b["source"] not in already]
            if not batch:
                continue
            report = wb.ingest_texts(batch, site_id=site)
            have += report.chunks if unit == "chunks" else len(batch)
            if progress:
                progress(min(have, target))
            if have >= target:
                break
    load_s = time.perf_counter() - started
    started = time.perf_counter()
    vector_index.ensure(wb.db)
    store.compact_term_stats(wb.db, [site], force=True)
    import psycopg

    # What autovacuum does after a bulk load, done now: statistics, visibility map, GIN pending list.
    with psycopg.connect(wb.db.url, autocommit=True) as conn:
        conn.execute("VACUUM (ANALYZE) documents, chunks, term_stats, corpus_stats, postings")
    with wb.db.connection() as conn:
        chunks, docs = conn.execute("SELECT count(*), count(DISTINCT document_id) FROM chunks WHERE site_id = %s",
                                    (site,)).fetchone()
    return {"chunks": chunks, "documents": docs, "stored_before": stored_before, "load_s": round(load_s, 1),
            "index_s": round(time.perf_counter() - started, 1), "reused_store": reused}


def timed_search(wb: Workbench, query: str, site: str = SITE, **kw: Any) -> tuple[float, str | None, int]:
    """(milliseconds, error code or None, total results) of one uncached Workbench search."""
    started = time.perf_counter()
    try:
        resp = wb.search_engine.search(query, site_id=site, use_cache=False, **kw)
        return (time.perf_counter() - started) * 1000, None, resp["total_results"]
    except RagError as exc:
        return (time.perf_counter() - started) * 1000, exc.code, 0


def latency_summary(ms: Sequence[float]) -> dict[str, float]:
    """p50, p95 and mean in milliseconds, rounded."""
    return {"p50": round(percentile(ms, 50), 1), "p95": round(percentile(ms, 95), 1),
            "mean": round(statistics.fmean(ms), 1) if ms else 0.0}


def measure_modes(wb: Workbench, queries: Sequence[str], site: str = SITE,
                  log: Callable[[str], None] | None = None,
                  filters: Sequence[tuple[str, dict[str, Any]]] = FILTERS,
                  modes: Sequence[str] = ("semantic", "fulltext", "hybrid")) -> dict[str, dict[str, Any]]:
    """Latency of every mode with and without filters over the same queries."""
    results: dict[str, dict[str, Any]] = {}
    for mode in modes:
        for label, kw in filters:
            runs = [timed_search(wb, q, site, mode=mode, **kw) for q in queries]
            key = f"{mode} / {label}"
            results[key] = {**latency_summary([r[0] for r in runs]), "errors": sum(1 for r in runs if r[1]),
                            "empty": sum(1 for r in runs if not r[1] and r[2] == 0)}
            if log:
                log(f"{key:50s} p50 {results[key]['p50']:7.1f} ms  p95 {results[key]['p95']:7.1f} ms"
                    f"  errors {results[key]['errors']}  empty {results[key]['empty']}")
    return results


def measure_own_index(wb: Workbench, queries: Sequence[str], site: str = SITE,
                      log: Callable[[str], None] | None = None) -> dict[str, dict[str, Any]]:
    """The one-corpus source filter again, its chunks given an HNSW index of their own (`rag index source`):
    built, measured in every mode (the full text reads the filter's documents from its own index too), and dropped,
    so the store is left as it was."""
    label, kw = next((lab, f) for lab, f in FILTERS if lab.startswith("source filter (one corpus)"))
    started = time.perf_counter()
    made = wb.index_source(kw["source"], site_id=site)
    built_s = round(time.perf_counter() - started, 1)
    if log:
        log(f"own HNSW index of {kw['source']}: {made['chunks']} chunks in {built_s} s")
    try:
        results = measure_modes(wb, queries, site, log, filters=[(f"{label}, own HNSW index", kw)],
                                modes=("semantic", "fulltext", "hybrid"))
    finally:
        wb.drop_source_index(kw["source"], site_id=site)
    results["own HNSW index of the one-corpus filter"] = {"chunks": made["chunks"], "build_s": built_s}
    return results


def measure_auto_index(wb: Workbench, queries: Sequence[str], site: str = SITE,
                       log: Callable[[str], None] | None = None) -> dict[str, dict[str, Any]]:
    """The source filters (one corpus, and the selective one) with no step by hand: their slow searches make the
    source-index advisor queue each filter's own index, a worker builds them (as `rag worker` or `rag serve`
    would), and the same searches run again. The indexes are dropped afterwards, so the store is left as it was.
    A filter that keeps fewer chunks than the advisor's minimum gets no index: its rows before and after match."""
    sources = [(lab, f) for lab, f in FILTERS if "source" in f]

    def drop_own_indexes() -> None:
        made = {i["source_filter"] for i in wb.source_indexes(site_id=site)}
        for _, kw in sources:
            if kw["source"] in made:
                wb.drop_source_index(kw["source"], site_id=site)

    drop_own_indexes()
    heard: dict[str, list[float]] = {kw["source"]: [] for _, kw in sources}   # each walk's ms, as the advisor hears
    advisor, engine = wb.source_index_advisor, wb.search_engine

    def listen(site_id: str | None, source: str, chunks: int, ms: float) -> None:
        heard.setdefault(source, []).append(ms)
        advisor(site_id, source, chunks, ms)

    engine.on_filter_walk = listen
    jobs: dict[str, Any] = {}
    results: dict[str, dict[str, Any]] = {}
    built_s = 0.0
    try:
        for label, kw in sources:
            results.update(measure_modes(wb, queries, site, log, filters=[(f"{label}, before the advisor's index", kw)],
                                         modes=("hybrid", "fulltext")))
        advisor.wait()
        queued = [j["id"] for j in wb.jobs(site_id=site) if j["kind"] == "source_index" and j["status"] == "queued"]
        started = time.perf_counter()
        wb.run_worker(wait=False)
        built_s = round(time.perf_counter() - started, 1)
        # A job names its filter in its description (jobs.tasks.describe), so a failed one is matched too.
        by_description = {describe("source_index", {"source_filter": kw["source"]}): kw["source"] for _, kw in sources}
        for job in (wb.job(job_id) for job_id in queued):
            jobs[by_description.get(job["description"], job["description"])] = job
        if log:
            for _, kw in sources:
                walks, job = heard[kw["source"]], jobs.get(kw["source"])
                log(f"advisor, {kw['source']}: {len(walks)} walks heard, "
                    f"{sum(1 for ms in walks if ms >= advisor.slow_ms)} slow; "
                    f"job {job['id'] if job else None} {job['status'] if job else 'not queued'}")
            log(f"worker: {len(jobs)} jobs in {built_s} s")
        for label, kw in sources:
            results.update(measure_modes(wb, queries, site, log, filters=[(f"{label}, after the advisor's index", kw)],
                                         modes=("hybrid", "fulltext")))
    finally:
        engine.on_filter_walk = advisor
        drop_own_indexes()
    for label, kw in sources:
        walks, job = heard[kw["source"]], jobs.get(kw["source"])
        result = (job or {}).get("result") or {}
        took = (job["finished_at"] - job["started_at"]).total_seconds() if job and job["finished_at"] else None
        results[f"advisor, {label}"] = {
            "walks heard": len(walks), "slow walks": sum(1 for ms in walks if ms >= advisor.slow_ms),
            "job status": job["status"] if job else None, "index chunks": result.get("chunks"),
            "job s": round(took, 1) if took is not None else None}
    results["advisor worker"] = {"jobs": len(jobs), "worker s": built_s}
    return results


def store_sizes(wb: Workbench) -> dict[str, int]:
    """Bytes of the database, the chunks table with its TOAST, and each index on chunks."""
    with wb.db.connection() as conn:
        sizes = {"database": conn.execute("SELECT pg_database_size(current_database())").fetchone()[0],
                 "chunks_table": conn.execute("SELECT pg_table_size('chunks')").fetchone()[0]}
        for name, size in conn.execute(
                "SELECT indexrelname, pg_relation_size(indexrelid) FROM pg_stat_user_indexes WHERE relname = 'chunks'"):
            sizes[f"index {name}"] = size
    return {k: int(v) for k, v in sizes.items()}


def noisy_copies(originals: np.ndarray, n: int, seed: int = 0, scale: float = 0.02,
                 batch: int = 50_000) -> Iterator[np.ndarray]:
    """`n` unit vectors in batches: originals cycled, each copy after the first with fixed Gaussian noise."""
    rng = np.random.default_rng(seed)
    done = 0
    while done < n:
        size = min(batch, n - done)
        idx = (np.arange(done, done + size) % len(originals))
        block = originals[idx].copy()
        repeat = (np.arange(done, done + size) // len(originals)) > 0
        block[repeat] += rng.normal(0, scale, (int(repeat.sum()), originals.shape[1])).astype(np.float32)
        block /= np.linalg.norm(block, axis=1, keepdims=True)
        yield block.astype(np.float32)
        done += size
