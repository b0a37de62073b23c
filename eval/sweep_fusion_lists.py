#!/usr/bin/env python
"""Fusion settings swept over cached candidate lists: every query is embedded and searched once.

`collect` ingests each set into its `eval:<set>` site (as `rag eval` does, with the embedder of
RAG_EMBEDDER), then caches per judged query the query vector and the full-text top-100 chunks with
their BM25 scores (`fulltext_ranking`, the same SQL as a search), and the site's chunk vectors.
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
    from rag_core.search.hybrid import fulltext_ranking
    from rag_core.search.validation import MAX_QUERY_CHARS

    last = [0.0]

    def report(p) -> None:
        if time.time() - last[0] > 30 or p.files_done == p.files_total:
            last[0] = time.time()
            log(f"ingest {ds.name}: {p.files_done}/{p.files_total} documents, {p.chunks_done} chunks")

    log(f"ingested {ds.name}: {ingest_dataset(wb, ds, report)}")
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
        fulltext.append(fulltext_ranking(wb.db, text, k=DEPTH, site_id=site)[0])
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
        their best chunk's sum, or ("best-of-each") by their best full-text share plus their best dense share."""
        r = self.rows
        sel = np.flatnonzero(keep)
        sf, sd = shares[0][sel], shares[1][sel]
        q, chunk = r["q"][sel], r["chunk"][sel]
        key = q * len(self.doc_names) + r["doc"][sel]
        if documents == "best-of-each":
            docs, inv = np.unique(key, return_inverse=True)
            best = {}
            for name, part, fill in (("sf", sf, -np.inf), ("sd", sd, -np.inf), ("id", -chunk, -np.inf)):
                best[name] = np.full(len(docs), fill)
                np.maximum.at(best[name], inv, part)
            # ties go to the lower document id, as in SQL (a document's chunks are numbered after it)
            order = np.lexsort((-best["id"], -(best["sf"] + best["sd"]), docs // len(self.doc_names)))
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

    def score(self, shares: tuple[np.ndarray, np.ndarray], keep: np.ndarray, documents: str = "best-chunk") -> dict[str, float]:
        """hit@5 and nDCG@10 of the documents ranked as `rank` does."""
        ranked = self.rank(shares, keep, documents)
        rel = [self.qrels[q] for q in self.qids]
        n = len(self.qids)
        return {"hit@5": sum(self.hit(x, g, 5) for x, g in zip(ranked, rel)) / n,
                "ndcg@10": sum(self.ndcg(x, g, 10) for x, g in zip(ranked, rel)) / n}

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


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("command", choices=("collect", "sweep"))
    p.add_argument("sets", nargs="+")
    p.add_argument("--cache-dir", type=Path, default=Path(__file__).resolve().parent / "cache")
    p.add_argument("--floor", type=float, default=None, help="cosine a dense-only chunk needs (the embedder's floor)")
    p.add_argument("--json", type=Path, default=None)
    p.add_argument("--sample", type=int, default=0,
                   help="collect: the first N judged queries with up to 5 judged documents each (set <name>-s<N>)")
    p.add_argument("--distractors", type=int, default=150, help="collect: other documents beside a sample's judged ones")
    args = p.parse_args(argv)
    args.cache_dir.mkdir(parents=True, exist_ok=True)
    if args.command == "collect":
        collect(args.sets, args.cache_dir, args.sample, args.distractors)
        return 0
    return sweep(args.sets, args.cache_dir, args.floor, args.json)


if __name__ == "__main__":
    sys.exit(main())
