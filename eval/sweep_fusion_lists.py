#!/usr/bin/env python
"""Fusion settings swept over cached candidate lists: every query is embedded and searched once.

`collect` ingests each set into its `eval:<set>` site (as `rag eval` does, with the embedder of
RAG_EMBEDDER), then caches per judged query the query vector and the full-text top-100 chunks with
their BM25 scores (`rank_fulltext`, the same SQL as a search), and the site's chunk vectors.
`sweep` rebuilds, for each setting, what the hybrid statement computes from those two lists
(`rag_core/search/hybrid.py`): the dense top-100 by exact cosine, the union with the full-text
top-100, RRF `w_ft/(k+rank_ft) + w_dense/(k+rank_dense)` or convex `alpha bm25/max + (1-alpha) cos`,
the relevance floor on dense-only chunks, then documents by their best chunk, top 10 scored with
`rag_core.evaluation.metrics`. The lists and the floor are those of a search; only the dense
ranking is exact where the store may use HNSW, so check the chosen setting with `rag eval`.

    RAG_EMBEDDER=e5-small RAG_DATA_DIR=$HOME/rag-e5-data .venv/bin/python eval/sweep_fusion_lists.py collect scifact jsquad
    .venv/bin/python eval/sweep_fusion_lists.py sweep scifact jsquad --floor 0.82 --json eval/results/fusion_e5.json

It picks the setting whose worst set margin (hybrid nDCG@10 minus the better of semantic and
full text) is largest, and prints every set's margin for it.

`adaptive` asks whether a QUERY-ADAPTIVE fusion does better: a rule that sets alpha per query from what a
search knows anyway (SIGNALS: BM25's and the dense side's gaps, their agreement, the best cosine and BM25
score, query lexemes and how many of them each side's best chunk holds). Each set gets a table of every
query's hit@5 and nDCG@10 at each alpha (today's min-max, best-of-each); a rule is scored by lookup. Every
rule with fitted parameters is fitted on some queries and scored on others, twice over: leave one set out
(fit on two sets, score the third) and 2-fold inside each set over `--seeds` pairs of random halves
(`validate`); it counts only if it beats both today's setting and a fixed alpha fitted on the same queries in
every split. The same validation covers
document scores made from all of a document's chunks (sum, softmax; `document_scores`) and BM25 k1/b, whose
lists `bm25` re-ranks in the store (full text only; dense lists stay cached). `lexemes` adds the signals
the lists lack (it searches the store once per query and side).

    RAG_EMBEDDER=e5-small RAG_DATA_DIR=... .venv/bin/python eval/sweep_fusion_lists.py bm25 scifact jsquad ru_construction --k1 1.2 --b 0.75
    RAG_EMBEDDER=e5-small RAG_DATA_DIR=... .venv/bin/python eval/sweep_fusion_lists.py lexemes scifact jsquad ru_construction
    .venv/bin/python eval/sweep_fusion_lists.py adaptive scifact jsquad ru_construction --floor 0.82 --json eval/results/fusion_adaptive_e5_small.json
"""

from __future__ import annotations

import argparse
import json
import pickle
import sys
import time
from pathlib import Path

import numpy as np

from rag_core.search.hybrid import SPREAD_DEPTH  # the dense rank whose cosine "minmax" reads as 0

DEPTH = 100  # chunks taken from each ranking (Fusion.candidates)
RRF_KS = (1, 2, 3, 5, 10, 20, 30, 60, 100)
RRF_DENSE_WEIGHTS = (0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 2.0, 3.0)
ALPHAS = tuple(round(a, 3) for a in np.arange(0.025, 0.976, 0.025))
DOCUMENTS = ("best-chunk", "best-of-each")


def log(message: str) -> None:
    print(time.strftime("%H:%M:%S"), message, file=sys.stderr, flush=True)


def collect_lists(wb, ds) -> dict:
    """Ingest `ds` into its eval site (once) and return its cached candidate lists (see the module text)."""
    from rag_core.evaluation.runner import EVAL_SITE_PREFIX, ingest_dataset
    from rag_core.search.hybrid import rank_fulltext
    from rag_core.search.validation import MAX_QUERY_CHARS

    last = [0.0]

    def report(p) -> None:
        if time.time() - last[0] > 30 or p.files_done == p.files_total:
            last[0] = time.time()
            log(f"ingest {ds.name}: {p.files_done}/{p.files_total} documents, {p.chunks_done} chunks")

    log(f"ingested {ds.name}: {ingest_dataset(wb.library, ds, report)}")
    site = EVAL_SITE_PREFIX + ds.name
    with wb.db.connection() as conn:
        rows = conn.execute("SELECT c.id, d.source, c.embedding::text FROM chunks c "
                            "JOIN documents d ON d.id = c.document_id WHERE c.site_id = %s", (site,)).fetchall()
    matrix = np.array([json.loads(r[2]) for r in rows], dtype=np.float32)
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    doc_of_source = {ds.source_of(d["_id"]): d["_id"] for d in ds.corpus}
    qids, vectors, fulltext = ds.judged_queries, [], []
    for n, qid in enumerate(qids, 1):
        text = ds.queries[qid][:MAX_QUERY_CHARS]
        vectors.append(wb.embedder.get_query_embedding(text))
        fulltext.append(rank_fulltext(wb.db, text, k=DEPTH, site_id=site)[0])
        if n % 500 == 0:
            log(f"lists {ds.name}: {n}/{len(qids)} queries")
    return {"embedder": wb.embedder_name, "ids": np.array([r[0] for r in rows]),
            "docs": [doc_of_source.get(r[1], r[1]) for r in rows], "mat": matrix, "qids": qids,
            "qv": np.array(vectors, dtype=np.float32), "ft": fulltext, "qrels": {q: ds.qrels[q] for q in qids}}


def collect(sets: list[str], cache_dir: Path, sample: int = 0, distractors: int = 0) -> None:
    from rag_core import open_workbench
    from rag_core.evaluation.sampling import load_eval_set

    with open_workbench() as wb:
        for name in sets:
            ds = load_eval_set(name, sample, distractors, root=wb.settings.eval_data_dir)
            cache = collect_lists(wb, ds)
            with (cache_dir / f"{ds.name}.cache.pkl").open("wb") as fh:
                pickle.dump(cache, fh)
            log(f"cached {ds.name}: {len(cache['ids'])} chunks, {len(cache['qids'])} queries")


def bm25_variant(name: str, k1: float, b: float) -> str:
    """The cache name of a set's lists whose full-text side was ranked with other BM25 parameters."""
    return f"{name}.k1-{k1:g}.b-{b:g}"


def relist(sets: list[str], cache_dir: Path, k1: float, b: float) -> None:
    """Re-rank each cached set's full-text lists with BM25 `k1` and `b` (every posting read, so the impact
    order, which bakes in the stored parameters, cannot bias the head) into `<set>.k1-<k1>.b-<b>`: the dense
    side and the chunk vectors stay as cached. Needs the store the lists were collected from."""
    from dataclasses import replace

    from rag_core import open_workbench
    from rag_core.evaluation.runner import EVAL_SITE_PREFIX
    from rag_core.evaluation.sampling import load_eval_set
    from rag_core.search.hybrid import DEFAULT_FUSION, rank_fulltext
    from rag_core.search.validation import MAX_QUERY_CHARS

    fusion = replace(DEFAULT_FUSION, k1=k1, b=b)
    with open_workbench() as wb:
        for name in sets:
            with (cache_dir / f"{name}.cache.pkl").open("rb") as fh:
                cache = pickle.load(fh)
            ds = load_eval_set(name, root=wb.settings.eval_data_dir)
            ft = []
            for n, qid in enumerate(cache["qids"], 1):
                ft.append(rank_fulltext(wb.db, ds.queries[qid][:MAX_QUERY_CHARS], k=DEPTH, site_id=EVAL_SITE_PREFIX + name,
                                           fusion=fusion, exact=True)[0])
                if n % 500 == 0:
                    log(f"bm25 k1={k1:g} b={b:g} {name}: {n}/{len(cache['qids'])} queries")
            with (cache_dir / f"{bm25_variant(name, k1, b)}.cache.pkl").open("wb") as fh:
                pickle.dump({**cache, "ft": ft}, fh)
            log(f"cached {bm25_variant(name, k1, b)}")


class Lists:
    """One set's candidate rows: per (query, chunk) of the union, its ranks, BM25, cosine and document."""

    def __init__(self, cache: dict):
        from rag_core.evaluation.metrics import hit_at_k, ndcg_at_k

        self.hit, self.ndcg = hit_at_k, ndcg_at_k
        ids, matrix = cache["ids"], cache["mat"]
        index_of = {int(c): i for i, c in enumerate(ids)}
        doc_names = sorted(set(cache["docs"]))
        doc_no = {d: i for i, d in enumerate(doc_names)}
        chunk_doc = np.array([doc_no[d] for d in cache["docs"]])
        self.doc_names, self.qids, self.qrels = doc_names, cache["qids"], cache["qrels"]
        cols: dict[str, list] = {k: [] for k in ("q", "chunk", "doc", "fr", "dr", "bm25n", "bm25", "cos", "cos_hi", "cos_lo")}
        scores = cache["qv"] @ matrix.T
        for q, (sims, ft) in enumerate(zip(scores, cache["ft"])):
            top = np.argpartition(-sims, DEPTH - 1)[:DEPTH] if len(sims) > DEPTH else np.arange(len(sims))
            top = top[np.lexsort((ids[top], -sims[top]))]
            dense_rank = {int(j): r for r, j in enumerate(top, 1)}
            ft_rows = [(index_of[c], s) for c, s in ft if c in index_of]
            ft_rank = {j: (r, s) for r, (j, s) in enumerate(ft_rows, 1)}
            top_bm25 = max((s for _, s in ft_rows), default=0.0) or 1.0
            # the query's best cosine and its SPREAD_DEPTH-th best (the "minmax" fusion's 1 and 0)
            cos_hi, cos_lo = float(sims[top[0]]), float(sims[top[:SPREAD_DEPTH][-1]])
            for j in set(dense_rank) | set(ft_rank):
                fr, bm25 = ft_rank.get(j, (np.inf, 0.0))
                for key, value in (("q", q), ("chunk", int(ids[j])), ("doc", chunk_doc[j]), ("fr", fr),
                                   ("dr", dense_rank.get(j, np.inf)), ("bm25n", bm25 / top_bm25), ("bm25", bm25),
                                   ("cos", float(sims[j])), ("cos_hi", cos_hi), ("cos_lo", cos_lo)):
                    cols[key].append(value)
        self.rows = {k: np.asarray(v) for k, v in cols.items()}

    def rank(self, shares: tuple[np.ndarray, np.ndarray], keep: np.ndarray, documents: str = "best-chunk") -> list[list[str]]:
        """Each query's top-10 document ids from the kept rows' (full-text share, dense share): documents by
        their best chunk's sum, or as `document_scores` says for the other document scorings."""
        r = self.rows
        sel = np.flatnonzero(keep)
        sf, sd = shares[0][sel], shares[1][sel]
        q, chunk = r["q"][sel], r["chunk"][sel]
        key = q * len(self.doc_names) + r["doc"][sel]
        if documents != "best-chunk":
            docs, inv = np.unique(key, return_inverse=True)
            first = np.full(len(docs), -np.inf)
            np.maximum.at(first, inv, -chunk)
            # ties go to the lower document id, as in SQL (a document's chunks are numbered after it)
            order = np.lexsort((-first, -document_scores(sf, sd, inv, len(docs), documents), docs // len(self.doc_names)))
            pairs = zip(docs[order] // len(self.doc_names), docs[order] % len(self.doc_names))
        else:
            order = np.lexsort((chunk, -(sf + sd), q))
            _, first = np.unique(key[order], return_index=True)
            order = order[np.sort(first)]
            pairs = zip(q[order], r["doc"][sel][order])
        ranked: list[list[str]] = [[] for _ in self.qids]
        for qi, d in pairs:
            if len(ranked[qi]) < 10:
                ranked[qi].append(self.doc_names[d])
        return ranked

    def per_query(self, shares: tuple[np.ndarray, np.ndarray], keep: np.ndarray,
                  documents: str = "best-chunk") -> tuple[np.ndarray, np.ndarray]:
        """Each query's hit@5 and nDCG@10 of the documents ranked as `rank` does."""
        ranked = self.rank(shares, keep, documents)
        rel = [self.qrels[q] for q in self.qids]
        return (np.array([self.hit(x, g, 5) for x, g in zip(ranked, rel)], dtype=float),
                np.array([self.ndcg(x, g, 10) for x, g in zip(ranked, rel)], dtype=float))

    def score(self, shares: tuple[np.ndarray, np.ndarray], keep: np.ndarray, documents: str = "best-chunk") -> dict[str, float]:
        """hit@5 and nDCG@10 of the documents ranked as `rank` does."""
        hit, ndcg = self.per_query(shares, keep, documents)
        return {"hit@5": float(hit.mean()), "ndcg@10": float(ndcg.mean())}

    def mode(self, name: str) -> dict[str, float]:
        r = self.rows
        zero = np.zeros(len(r["cos"]))
        if name == "fulltext":
            return self.score((r["bm25"], zero), np.isfinite(r["fr"]))
        return self.score((zero, r["cos"]), np.isfinite(r["dr"]))

    def fused(self, setting: dict, floor: float | None) -> dict[str, float]:
        shares, keep = self.fused_scores(setting, floor)
        return self.score(shares, keep, setting.get("documents", "best-chunk"))

    def fused_scores(self, setting: dict, floor: float | None) -> tuple[tuple[np.ndarray, np.ndarray], np.ndarray]:
        """Each row's (full-text share, dense share) of its fused score, and whether the hybrid statement keeps
        it (full-text match or cosine >= floor)."""
        r = self.rows
        if setting["method"] == "rrf":
            shares = (1.0 / (setting["k"] + r["fr"]), setting["w_dense"] / (setting["k"] + r["dr"]))
        elif setting["method"] == "minmax":
            spread = np.maximum(r["cos_hi"] - r["cos_lo"], 1e-9)
            shares = (setting["alpha"] * r["bm25n"], (1 - setting["alpha"]) * (r["cos"] - r["cos_lo"]) / spread)
        else:
            shares = (setting["alpha"] * r["bm25n"], (1 - setting["alpha"]) * r["cos"])
        keep = np.isfinite(r["fr"]) | (r["cos"] >= (floor if floor is not None else -2.0))
        return shares, keep


def document_scores(sf: np.ndarray, sd: np.ndarray, inv: np.ndarray, n: int, documents: str) -> np.ndarray:
    """A document's score from its kept chunks' full-text and dense shares (`inv`: each chunk's document).

    "best-of-each": its best full-text share plus its best dense share (the hybrid statement's);
    "sum": the sum of its chunks' fused scores; "softmax-<T>": T log sum exp(fused / T), which runs from
    the best chunk (T -> 0) towards the sum (T large). The last two are candidates the statement lacks.
    """
    def best(x: np.ndarray) -> np.ndarray:
        out = np.full(n, -np.inf)
        np.maximum.at(out, inv, x)
        return out

    if documents == "best-of-each":
        return best(sf) + best(sd)
    fused = sf + sd
    if documents == "sum":
        out = np.zeros(n)
        np.add.at(out, inv, fused)
        return out
    if documents.startswith("softmax-"):
        t = float(documents.removeprefix("softmax-"))
        top = best(fused)
        out = np.zeros(n)
        np.add.at(out, inv, np.exp((fused - top[inv]) / t))
        return top + t * np.log(out)
    raise ValueError(f"unknown document scoring {documents!r}")


def settings_grid() -> list[dict]:
    return ([{"method": "rrf", "k": k, "w_dense": w, "documents": d}
             for k in RRF_KS for w in RRF_DENSE_WEIGHTS for d in DOCUMENTS]
            + [{"method": m, "alpha": a, "documents": d} for m in ("convex", "minmax") for a in ALPHAS for d in DOCUMENTS])


def label(s: dict) -> str:
    name = f"rrf k={s['k']:g} w_dense={s['w_dense']:g}" if s["method"] == "rrf" else f"{s['method']} alpha={s['alpha']:g}"
    return f"{name} {s.get('documents', 'best-chunk')}"


def is_neighbour(row: dict, best: dict) -> bool:
    """The chosen setting's neighbours: same method and document scoring, each parameter within two grid steps."""
    if row is best or (row["method"], row["documents"]) != (best["method"], best["documents"]):
        return False
    if row["method"] == "rrf":
        return (abs(RRF_KS.index(row["k"]) - RRF_KS.index(best["k"])) <= 2
                and abs(RRF_DENSE_WEIGHTS.index(row["w_dense"]) - RRF_DENSE_WEIGHTS.index(best["w_dense"])) <= 2)
    return abs(ALPHAS.index(row["alpha"]) - ALPHAS.index(best["alpha"])) <= 2


def sweep(sets: list[str], cache_dir: Path, floor: float | None, out: Path | None) -> int:
    lists, parts = {}, {}
    for name in sets:
        with (cache_dir / f"{name}.cache.pkl").open("rb") as fh:
            lists[name] = Lists(pickle.load(fh))
        parts[name] = {m: lists[name].mode(m) for m in ("semantic", "fulltext")}
        log(f"{name}: {len(lists[name].qids)} queries; semantic {parts[name]['semantic']}, "
            f"fulltext {parts[name]['fulltext']}")
    rows = []
    for setting in settings_grid():
        row = {"setting": label(setting), **setting, "sets": {}}
        for name in sets:
            m = lists[name].fused(setting, floor)
            best = max(parts[name]["semantic"]["ndcg@10"], parts[name]["fulltext"]["ndcg@10"])
            row["sets"][name] = {**{k: round(v, 4) for k, v in m.items()}, "margin": round(m["ndcg@10"] - best, 4)}
        row["worst_margin"] = min(v["margin"] for v in row["sets"].values())
        rows.append(row)
    rows.sort(key=lambda r: -r["worst_margin"])
    for row in rows[:15]:
        cells = "  ".join(f"{n} {v['hit@5']:.3f}/{v['ndcg@10']:.3f} ({v['margin']:+.3f})" for n, v in row["sets"].items())
        print(f"{row['setting']:<26} worst {row['worst_margin']:+.3f}  {cells}")
    best = rows[0]
    print(f"\nchosen: {best['setting']} (floor {floor}); hybrid nDCG@10 minus the better part per set:")
    for name, v in best["sets"].items():
        p = parts[name]
        print(f"  {name:<16} semantic {p['semantic']['hit@5']:.3f}/{p['semantic']['ndcg@10']:.3f}  fulltext "
              f"{p['fulltext']['hit@5']:.3f}/{p['fulltext']['ndcg@10']:.3f}  hybrid {v['hit@5']:.3f}/{v['ndcg@10']:.3f}  "
              f"margin {v['margin']:+.3f}{'' if v['margin'] >= 0.02 else '  (goal +0.02 not reached)'}")
    print("neighbours (same method and document scoring, one or two grid steps away): worst-set margin")
    for row in sorted((r for r in rows if is_neighbour(r, best)), key=lambda r: label(r)):
        print(f"  {row['setting']:<34} worst {row['worst_margin']:+.4f}  "
              + "  ".join(f"{n} {v['hit@5']:.3f}/{v['ndcg@10']:.3f}" for n, v in row["sets"].items()))
    if out:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps({"floor": floor, "depth": DEPTH, "parts": parts, "chosen": best["setting"],
                                   "settings": rows}, indent=1) + "\n", encoding="utf-8")
    return 0


# --- Query-adaptive fusion, document scoring from chunks, BM25 k1/b: validated on data not fitted on -------

ADAPTIVE_ALPHAS = tuple(round(a, 3) for a in np.arange(0.0, 1.0001, 0.025))  # per-query alphas a rule picks from
FIXED_ALPHAS = tuple(round(a, 3) for a in np.arange(0.3, 0.9001, 0.05))  # alphas beside each document scoring / BM25
POOLINGS = ("best-of-each", "best-chunk", "sum", "softmax-0.02", "softmax-0.05", "softmax-0.1", "softmax-0.2")
SLOPES = tuple(round(c, 3) for c in np.arange(-1.0, 1.0001, 0.05))
RIDGE_PENALTIES = (1e-4, 1e-3, 1e-2, 0.1, 1.0)
RATIO_WEIGHTS = tuple(round(float(w), 3) for w in np.geomspace(0.25, 4, 17))
# What a search knows about a query before it fuses, each on a scale of about 0..1 (fixed, not fitted to data).
SIGNALS = {
    "bm25_gap": "(s1 - s10) / s1 of the BM25 candidates: how far full text's best stands above its 10th",
    "bm25_gap2": "(s1 - s2) / s1: how far full text's best stands above its 2nd",
    "dense_gap": "(cos1 - cos10) / (cos1 - cos100): how far the dense best stands above its 10th",
    "dense_gap2": "(cos1 - cos2) / (cos1 - cos100)",
    "gap_diff": "bm25_gap - dense_gap + 0.5: which side's best stands out more",
    "cos_spread": "10 (cos1 - cos10), the raw dense spread",
    "cos1": "5 (cos1 - 0.8), the best cosine",
    "bm25_top": "ln(1 + s1) / 5, the best BM25 score",
    "agreement": "documents shared by the two top-10 lists / 10",
    "query_terms": "distinct query lexemes / 20 (character bigrams for Japanese)",
    "ft_coverage": "share of the query's lexemes in full text's best chunk",
    "dense_coverage": "share of the query's lexemes in the dense best chunk",
    "coverage_diff": "ft_coverage - dense_coverage + 0.5",
}


def query_signals(lists: Lists, lexemes: dict | None = None) -> dict[str, np.ndarray]:
    """SIGNALS per query, from the cached lists (and from `lexemes`, the `lexemes` subcommand's output, when given)."""
    r = lists.rows
    nq = len(lists.qids)
    order = np.argsort(r["q"], kind="stable")
    bounds = np.searchsorted(r["q"][order], np.arange(nq + 1))
    out = {k: np.zeros(nq) for k in ("bm25_gap", "bm25_gap2", "dense_gap", "dense_gap2", "cos_spread", "cos1",
                                      "bm25_top", "agreement")}

    def top_docs(score: np.ndarray, doc: np.ndarray) -> set:
        seen: list = []
        for d in doc[np.argsort(-score, kind="stable")]:
            if d not in seen:
                seen.append(d)
                if len(seen) == 10:
                    break
        return set(seen)

    for q in range(nq):
        idx = order[bounds[q]:bounds[q + 1]]
        ft, de = idx[np.isfinite(r["fr"][idx])], idx[np.isfinite(r["dr"][idx])]
        s = np.sort(r["bm25"][ft])[::-1]
        c = np.sort(r["cos"][de])[::-1]
        if len(s):
            out["bm25_gap"][q] = (s[0] - (s[9] if len(s) >= 10 else 0.0)) / s[0]
            out["bm25_gap2"][q] = (s[0] - (s[1] if len(s) >= 2 else 0.0)) / s[0]
            out["bm25_top"][q] = np.log1p(s[0]) / 5
        spread = max(c[0] - c[min(SPREAD_DEPTH, len(c)) - 1], 1e-9)
        out["dense_gap"][q] = (c[0] - c[min(10, len(c)) - 1]) / spread
        out["dense_gap2"][q] = (c[0] - c[min(2, len(c)) - 1]) / spread
        out["cos_spread"][q] = 10 * (c[0] - c[min(10, len(c)) - 1])
        out["cos1"][q] = 5 * (c[0] - 0.8)
        out["agreement"][q] = len(top_docs(r["bm25"][ft], r["doc"][ft]) & top_docs(r["cos"][de], r["doc"][de])) / 10
    out["gap_diff"] = out["bm25_gap"] - out["dense_gap"] + 0.5
    if lexemes is not None:
        for key in ("query_terms", "ft_coverage", "dense_coverage"):
            out[key] = np.array([lexemes[qid][key] for qid in lists.qids], dtype=float)
        out["query_terms"] = out["query_terms"] / 20
        out["coverage_diff"] = out["ft_coverage"] - out["dense_coverage"] + 0.5
    return out


def collect_lexemes(sets: list[str], cache_dir: Path) -> None:
    """Per cached query, the lexeme signals the lists lack: how many distinct lexemes the query has and what
    share of them full text's and the dense side's best chunk contain (`term_coverage`, as chat reads it)
    into `<set>.lexemes.json`. Needs the store the lists were collected from."""
    from rag_core import open_workbench
    from rag_core.evaluation.runner import EVAL_SITE_PREFIX
    from rag_core.evaluation.sampling import load_eval_set
    from rag_core.search.hybrid import query_configs, rank_chunks, term_coverage
    from rag_core.search.validation import MAX_QUERY_CHARS

    with open_workbench() as wb:
        for name in sets:
            with (cache_dir / f"{name}.cache.pkl").open("rb") as fh:
                cache = pickle.load(fh)
            ds = load_eval_set(name, root=wb.settings.eval_data_dir)
            site, out = EVAL_SITE_PREFIX + name, {}
            with wb.db.connection() as conn:
                languages = [r[0] for r in conn.execute(
                    "SELECT DISTINCT language FROM chunks WHERE site_id = %s", (site,)).fetchall()]
            for n, (qid, vector) in enumerate(zip(cache["qids"], cache["qv"]), 1):
                text = ds.queries[qid][:MAX_QUERY_CHARS]
                configs, texts = query_configs(text, languages)
                with wb.db.connection() as conn:
                    terms = conn.execute(
                        "SELECT count(DISTINCT l) FROM unnest(%s::text[], %s::text[]) AS i(cfg, txt) CROSS JOIN LATERAL "
                        "unnest(tsvector_to_array(to_tsvector(i.cfg::regconfig, i.txt))) AS l", (configs, texts)).fetchone()[0]
                tops = [rank_chunks(wb.db, text, vector, k=1, site_id=site, mode=mode) for mode in ("fulltext", "semantic")]
                cover = term_coverage(wb.db, text, [hits[0] for hits in tops if hits])
                out[qid] = {"query_terms": terms, **{key: cover.get(hits[0].chunk_id, 0.0) if hits else 0.0
                                                     for key, hits in zip(("ft_coverage", "dense_coverage"), tops)}}
                if n % 500 == 0:
                    log(f"lexemes {name}: {n}/{len(cache['qids'])} queries")
            (cache_dir / f"{name}.lexemes.json").write_text(json.dumps(out), encoding="utf-8")
            log(f"lexeme signals of {name}: {len(out)} queries")


class Table:
    """Per query and candidate setting, hit@5 and nDCG@10: any rule that picks a setting per query (or one
    for all) is scored by lookup. `hit` and `ndcg` are (queries, settings) arrays."""

    def __init__(self, lists: Lists, settings: list[dict], floor: float | None):
        self.settings = settings
        cols = [lists.per_query(*lists.fused_scores(s, floor), s.get("documents", "best-chunk")) for s in settings]
        self.hit = np.stack([c[0] for c in cols], axis=1)
        self.ndcg = np.stack([c[1] for c in cols], axis=1)

    def metric(self, name: str) -> np.ndarray:
        return self.ndcg if name == "ndcg@10" else self.hit


def _split(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    perm = np.random.default_rng(seed).permutation(n)
    return np.sort(perm[: n // 2]), np.sort(perm[n // 2:])


def validate(pick, grid: list, tables: dict[str, Table], metric: str, alphas: dict[str, Table], today: int,
             seeds: int = 1) -> dict:
    """Fit a rule's parameters on some queries, score it on others: leave one set out (fit on the other two
    sets, their means weighted equally) and 2-fold inside each set (random halves, one pair per seed). `pick`
    gives each query's column in the set's table (`pick(set, params, train)`: a rule may also fit on the
    training queries, [(set, query indices)]). Each held-out figure is set against today's setting
    (column `today` of `alphas`, the per-query alpha tables: `gain`) and against the one fixed alpha fitted on
    the same queries (`gain_vs_fixed`); today's setting was itself chosen on all three sets, so the second is
    the fair one. A rule generalises when both gains are positive in every split."""
    def value(tabs: dict[str, Table], name: str, idx: np.ndarray, cols: np.ndarray) -> float:
        return float(tabs[name].metric(metric)[idx, cols[idx]].mean())

    def fit(tabs: dict[str, Table], chooser, options: list, train: list[tuple[str, np.ndarray]]):
        scores = [np.mean([value(tabs, n, idx, chooser(n, p, train)) for n, idx in train]) for p in options]
        return options[int(np.argmax(scores))]

    def const(n: str, col: int, train=None) -> np.ndarray:
        return np.full(len(alphas[n].hit), col)

    def held_out(train: list[tuple[str, np.ndarray]], name: str, test: np.ndarray) -> dict:
        params = fit(tables, pick, grid, train)
        fixed = fit(alphas, const, list(range(len(ADAPTIVE_ALPHAS))), train)
        got = value(tables, name, test, pick(name, params, train))
        return {"params": params, "fixed_alpha": ADAPTIVE_ALPHAS[fixed], metric: round(got, 4),
                "gain": round(got - value(alphas, name, test, const(name, today)), 4),
                "gain_vs_fixed": round(got - value(alphas, name, test, const(name, fixed)), 4)}

    everyone = {n: np.arange(len(alphas[n].hit)) for n in tables}
    loso = [{"held_out": held, **held_out([(n, everyone[n]) for n in tables if n != held], held, everyone[held])}
            for held in tables]
    folds = []
    for seed in range(seeds):
        for name in tables:
            halves = _split(len(everyone[name]), seed)
            for k, (train, test) in enumerate((halves, halves[::-1])):
                folds.append({"set": name, "seed": seed, "fold": k, **held_out([(name, train)], name, test)})
    rows = loso + folds
    return {"loso": loso, "folds": folds, "min_gain": min(x["gain"] for x in rows),
            "min_gain_vs_fixed": min(x["gain_vs_fixed"] for x in rows),
            "in_set_wins": sum(min(x["gain"], x["gain_vs_fixed"]) > 0 for x in folds), "in_set_splits": len(folds),
            "generalises": min(min(x["gain"], x["gain_vs_fixed"]) for x in rows) > 0}


def _regression(signals: dict[str, dict[str, np.ndarray]], tables: dict[str, Table], names: list[str]):
    """A rule with one weight per signal, fitted by weighted ridge regression to each training query's best
    alphas (the mean of the alphas that reach its best nDCG@10, weighted by how much the alpha matters to it):
    not a candidate for the product (too many parameters), a check whether the signals together say anything."""
    fitted: dict = {}

    def features(n: str) -> np.ndarray:
        return np.column_stack([np.ones(len(signals[n][names[0]]))] + [signals[n][s] - 0.5 for s in names])

    def pick(n: str, penalty: float, train: list[tuple[str, np.ndarray]]) -> np.ndarray:
        key = (penalty, tuple((m, idx.tobytes()) for m, idx in train))
        if key not in fitted:
            xs, ys, ws = [], [], []
            for m, idx in train:
                nd = tables[m].ndcg[idx]
                best = nd >= nd.max(1, keepdims=True) - 1e-12
                ys.append((best * np.array(ADAPTIVE_ALPHAS)).sum(1) / best.sum(1))
                ws.append((nd.max(1) - nd.min(1)) / len(idx))  # each set weighs the same, flat queries nothing
                xs.append(features(m)[idx])
            x, y, w = np.vstack(xs), np.concatenate(ys), np.concatenate(ws)
            a = x.T @ (w[:, None] * x) + penalty * np.diag([0.0] + [1.0] * len(names))
            fitted[key] = np.linalg.solve(a, x.T @ (w * y))
        return _alpha_column(features(n) @ fitted[key])

    return pick


def _add_margins(result: dict, parts: dict, metric: str, variant=None) -> dict:
    """Beside each held-out set's nDCG@10 (leave one set out), its margin over the better of full text and
    semantic (`parts[set]`, or `parts[set][variant(row)]` when the parts depend on the fitted setting)."""
    if metric == "ndcg@10":
        for row in result["loso"]:
            mine = parts[row["held_out"]] if variant is None else parts[row["held_out"]][variant(row)]
            row["margin"] = round(row[metric] - max(mine[m]["ndcg@10"] for m in ("fulltext", "semantic")), 4)
    return result


def _gains(result: dict) -> str:
    """One line of held-out gains: against today's setting, and (in brackets) against a fitted fixed alpha."""
    return ("held out, LOSO " + " ".join(f"{x['held_out'][:7]} {x['gain']:+.4f} ({x['gain_vs_fixed']:+.4f})" for x in result["loso"])
            + " | 2-fold, first seed " + " ".join(f"{x['set'][:3]} {x['gain']:+.4f} ({x['gain_vs_fixed']:+.4f})"
                                                  for x in result["folds"] if x["seed"] == 0)
            + f" | in-set splits won {result['in_set_wins']}/{result['in_set_splits']}")


def _alpha_column(alpha: np.ndarray) -> np.ndarray:
    step = ADAPTIVE_ALPHAS[1] - ADAPTIVE_ALPHAS[0]
    return np.rint(np.clip(alpha, 0.0, 1.0) / step).astype(int)


def adaptive(sets: list[str], cache_dir: Path, floor: float | None, out: Path | None, seeds: int = 1) -> int:
    """Query-adaptive alpha rules, document scorings from chunks and BM25 k1/b, each validated as `validate` does."""
    from rag_core.search.hybrid import fusion_for

    today = fusion_for("e5-small")
    current_setting = {"method": today.method, "alpha": today.alpha, "documents": today.documents}
    lists, signals, tables, parts = {}, {}, {}, {}
    for name in sets:
        with (cache_dir / f"{name}.cache.pkl").open("rb") as fh:
            lists[name] = Lists(pickle.load(fh))
        lexeme_file = cache_dir / f"{name}.lexemes.json"
        lexemes = json.loads(lexeme_file.read_text(encoding="utf-8")) if lexeme_file.exists() else None
        signals[name] = query_signals(lists[name], lexemes)
        tables[name] = Table(lists[name], [{**current_setting, "alpha": a} for a in ADAPTIVE_ALPHAS], floor)
        parts[name] = {m: lists[name].mode(m) for m in ("semantic", "fulltext")}
        log(f"{name}: alpha table of {len(lists[name].qids)} queries")
    today_col = ADAPTIVE_ALPHAS.index(today.alpha)
    report: dict = {"floor": floor, "fold_seeds": seeds, "current": current_setting, "parts": parts, "sets": {}, "rules": [], "pooling": {}, "bm25": {}}
    for name, t in tables.items():
        report["sets"][name] = {
            "queries": len(lists[name].qids),
            "current": {"hit@5": round(float(t.hit[:, today_col].mean()), 4), "ndcg@10": round(float(t.ndcg[:, today_col].mean()), 4)},
            "oracle_alpha_per_query": {"hit@5": round(float(t.hit.max(1).mean()), 4), "ndcg@10": round(float(t.ndcg.max(1).mean()), 4)},
            "best_fixed_alpha": {m: {"alpha": ADAPTIVE_ALPHAS[int(t.metric(m).mean(0).argmax())],
                                     m: round(float(t.metric(m).mean(0).max()), 4)} for m in ("hit@5", "ndcg@10")}}
    common = [s for s in SIGNALS if all(s in signals[n] for n in sets)]
    # (rule, pick, parameter grid, how many parameters are fitted)
    families = [("fixed alpha", lambda n, p, train: np.full(len(signals[n]["cos1"]), p), list(range(len(ADAPTIVE_ALPHAS))), 1)]
    grid2 = [(a, c) for a in ADAPTIVE_ALPHAS for c in SLOPES]
    for sig in common:
        families.append((f"alpha = a + c ({sig} - 0.5)",
                         lambda n, p, train, sig=sig: _alpha_column(p[0] + p[1] * (signals[n][sig] - 0.5)), grid2, 2))

    def ratio(n: str, w: float, train=None) -> np.ndarray:
        gb, gd = signals[n]["bm25_gap"], signals[n]["dense_gap"]
        return _alpha_column(w * gb / np.maximum(w * gb + gd, 1e-9))

    families.append(("alpha = bm25_gap / (bm25_gap + dense_gap)", ratio, [1.0], 0))
    families.append(("alpha = w bm25_gap / (w bm25_gap + dense_gap)", ratio, list(RATIO_WEIGHTS), 1))
    families.append((f"alpha = ridge regression on all {len(common)} signals (many parameters: a check for any signal)",
                     _regression(signals, tables, common), list(RIDGE_PENALTIES), len(common) + 2))
    for metric in ("ndcg@10", "hit@5"):
        for family, pick, grid, fitted in families:
            result = validate(pick, grid, tables, metric, tables, today_col, seeds)
            for row in result["loso"] + result["folds"]:
                if family == "fixed alpha":
                    row["params"] = ADAPTIVE_ALPHAS[row["params"]]
            _add_margins(result, parts, metric)
            report["rules"].append({"rule": family, "objective": metric, "parameters": fitted, **result})
            log(f"{metric} {family}: {_gains(result)}")
    # document scorings (each with the fixed alphas) and BM25 k1/b variants: a fixed setting fitted per split
    pool_settings = [{"method": "minmax", "alpha": a, "documents": d} for d in POOLINGS for a in FIXED_ALPHAS]
    report["pooling"] = _fixed_family(lists, pool_settings, floor, tables, today_col, sets, parts, seeds)
    variants = sorted({p.name.split(".", 1)[1].removesuffix(".cache.pkl") for n in sets
                       for p in cache_dir.glob(f"{n}.k1-*.cache.pkl")})
    variants = [v for v in variants if all((cache_dir / f"{n}.{v}.cache.pkl").exists() for n in sets)]
    if variants:
        report["bm25"] = _bm25_family(cache_dir, variants, floor, tables, today_col, sets, current_setting, seeds)
    if out:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(report, indent=1, default=float) + "\n", encoding="utf-8")
    print(f"held-out gains, smallest over the 3 leave-one-set-out and {6 * seeds} in-set splits, against today's "
          "setting and against a fixed alpha fitted on the same queries; in-set splits won against both:")
    for r in report["rules"]:
        print(f"  {r['objective']:<8} {r['rule'][:52]:<52} {r['min_gain']:+.4f}  {r['min_gain_vs_fixed']:+.4f}  "
              f"{r['in_set_wins']}/{r['in_set_splits']}" + ("  generalises" if r["generalises"] else ""))
    for name, part in (("document scoring", report["pooling"]), ("BM25 k1/b", report["bm25"])):
        for metric in ("ndcg@10", "hit@5"):
            if metric in part:
                m = part[metric]
                print(f"  {metric:<8} {name:<52} {m['min_gain']:+.4f}  {m['min_gain_vs_fixed']:+.4f}  "
                      f"{m['in_set_wins']}/{m['in_set_splits']}" + ("  generalises" if m["generalises"] else ""))
    return 0


def _fixed_family(lists: dict[str, Lists], settings: list[dict], floor: float | None, tables: dict[str, Table],
                  today_col: int, sets: list[str], parts: dict, seeds: int) -> dict:
    """One fixed setting of `settings` fitted per split (as `validate` does); the held-out gains and each
    setting's whole-set figures."""
    fixed = {n: Table(lists[n], settings, floor) for n in sets}
    out: dict = {"settings": [{"setting": label(s), **{n: {"hit@5": round(float(fixed[n].hit[:, i].mean()), 4),
                                                           "ndcg@10": round(float(fixed[n].ndcg[:, i].mean()), 4)} for n in sets}}
                              for i, s in enumerate(settings)]}
    for metric in ("ndcg@10", "hit@5"):
        result = validate(lambda n, p, train: np.full(len(fixed[n].hit), p), list(range(len(settings))), fixed, metric,
                          tables, today_col, seeds)
        for row in result["loso"] + result["folds"]:
            row["params"] = label(settings[row["params"]])
        out[metric] = _add_margins(result, parts, metric)
        log(f"document scoring {metric}: {_gains(result)}")
    return out


def _bm25_family(cache_dir: Path, variants: list[str], floor: float | None, tables: dict[str, Table], today_col: int,
                 sets: list[str], current_setting: dict, seeds: int) -> dict:
    """BM25 k1/b variants (the `bm25` subcommand's caches) with the fixed alphas: each variant's full text and best
    hybrid per set, and one (k1, b, alpha) fitted per split, scored on held-out queries."""
    settings = [{**current_setting, "alpha": a} for a in FIXED_ALPHAS]
    per_variant, stacked = {}, {n: {"hit": [], "ndcg": []} for n in sets}
    for v in variants:
        per_variant[v] = {}
        for n in sets:
            with (cache_dir / f"{n}.{v}.cache.pkl").open("rb") as fh:
                lv = Lists(pickle.load(fh))
            t = Table(lv, settings, floor)
            stacked[n]["hit"].append(t.hit)
            stacked[n]["ndcg"].append(t.ndcg)
            per_variant[v][n] = {"fulltext": lv.mode("fulltext"), "semantic": lv.mode("semantic"),
                                 "best_hybrid_ndcg@10": round(float(t.ndcg.mean(0).max()), 4),
                                 "at_alpha": FIXED_ALPHAS[int(t.ndcg.mean(0).argmax())]}
        log(f"bm25 {v}: " + "  ".join(f"{n} fulltext {x['fulltext']['ndcg@10']:.4f} hybrid {x['best_hybrid_ndcg@10']:.4f}"
                                       for n, x in per_variant[v].items()))
    combined = {}
    for n in sets:
        t = object.__new__(Table)
        t.hit, t.ndcg = np.concatenate(stacked[n]["hit"], axis=1), np.concatenate(stacked[n]["ndcg"], axis=1)
        combined[n] = t
    names = [f"{v} alpha={a:g}" for v in variants for a in FIXED_ALPHAS]
    out: dict = {"variants": per_variant}
    for metric in ("ndcg@10", "hit@5"):
        result = validate(lambda n, p, train: np.full(len(combined[n].hit), p), list(range(len(names))), combined, metric,
                          tables, today_col, seeds)
        for row in result["loso"] + result["folds"]:
            row["params"] = names[row["params"]]
        # a variant's margin is over its own full text (and the unchanged semantic)
        out[metric] = _add_margins(result, {n: {v: per_variant[v][n] for v in variants} for n in sets}, metric,
                                   lambda row: row["params"].split(" alpha=")[0])
        log(f"bm25 {metric}: {_gains(result)}")
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("command", choices=("collect", "sweep", "bm25", "lexemes", "adaptive"))
    p.add_argument("sets", nargs="+")
    p.add_argument("--cache-dir", type=Path, default=Path(__file__).resolve().parent / "cache")
    p.add_argument("--floor", type=float, default=None, help="cosine a dense-only chunk needs (the embedder's floor)")
    p.add_argument("--json", type=Path, default=None)
    p.add_argument("--sample", type=int, default=0,
                   help="collect: the first N judged queries with up to 5 judged documents each (set <name>-s<N>)")
    p.add_argument("--distractors", type=int, default=150, help="collect: other documents beside a sample's judged ones")
    p.add_argument("--k1", type=float, default=0.9, help="bm25: BM25 term-frequency saturation")
    p.add_argument("--b", type=float, default=0.4, help="bm25: BM25 length normalisation")
    p.add_argument("--seeds", type=int, default=5, help="adaptive: pairs of random halves per set for the in-set 2-fold")
    args = p.parse_args(argv)
    args.cache_dir.mkdir(parents=True, exist_ok=True)
    if args.command == "collect":
        collect(args.sets, args.cache_dir, args.sample, args.distractors)
        return 0
    if args.command == "bm25":
        relist(args.sets, args.cache_dir, args.k1, args.b)
        return 0
    if args.command == "lexemes":
        collect_lexemes(args.sets, args.cache_dir)
        return 0
    if args.command == "adaptive":
        return adaptive(args.sets, args.cache_dir, args.floor, args.json, args.seeds)
    return sweep(args.sets, args.cache_dir, args.floor, args.json)


if __name__ == "__main__":
    sys.exit(main())
