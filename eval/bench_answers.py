"""Answer benchmark: JSQuAD questions through `wb.chat`, and the similarity floor measured.

1. Ingests jsquad (from RAG_EVAL_DATA) into the site `eval:jsquad` (unchanged documents are skipped).
2. Asks N questions, each in a fresh session, and counts how often the answer contains one of the
   reference answers (answers.jsonl), with the retrieval hit rate beside it.
   With `--llm local` the same questions are answered by the packaged local model; beside right answers
   it prints faithfulness (the share of cited sentences that the passage they cite supports,
   rag_core/chat/faithfulness.py) and seconds per turn, the figures that decide RAG_LLM's default.
3. Prints the similarity of the top hit for those answerable questions against unrelated questions
   (English SciFact and Russian building-code queries asked of the Japanese set), and the share of
   each that a range of floors keeps: RAG_CHAT_SIMILARITY_FLOOR is chosen from this.

    .venv/bin/python eval/bench_answers.py --max-queries 200
    nice .venv/bin/python eval/bench_answers.py --max-queries 200 --unrelated 0 --llm local --threads 1 \
        --output eval/results/answers-local.json
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import time
import uuid
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from rag_core import open_workbench
from rag_core.chat.turn import ChatTurn
from rag_core.errors import LLMError
from rag_core.bench.answers import cited_faithfulness
from rag_core.evaluation.datasets import eval_set_dir, load_beir
from rag_core.evaluation.metrics import percentile
from rag_core.providers.calibration import chat_floor

console = Console()
SITE = "eval:jsquad"
FLOORS = [round(0.05 * i, 2) for i in range(0, 15)]


def _bar() -> Progress:
    return Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                    console=console, transient=True)


def _queries(path: Path, n: int, seed: int) -> list[str]:
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    random.Random(seed).shuffle(rows)
    return [r["text"] for r in rows[:n]]


def _summary(values: list[float]) -> dict[str, float]:
    if not values:
        return {}
    return {"n": len(values), "min": min(values), "p02": percentile(values, 2), "p05": percentile(values, 5),
            "p10": percentile(values, 10), "p50": percentile(values, 50), "p90": percentile(values, 90),
            "p95": percentile(values, 95), "max": max(values), "mean": statistics.fmean(values)}


def _mean(values: list[float | None]) -> float:
    present = [v for v in values if v is not None]
    return statistics.fmean(present) if present else 0.0


def _top_similarity(wb, questions: list[str], k: int, label: str) -> list[float]:
    out: list[float] = []
    with _bar() as bar:
        task = bar.add_task(label, total=len(questions))
        for q in questions:
            hits = wb.retrieve(q, k=k, site_id=SITE)
            out.append(hits[0].similarity if hits else 0.0)
            bar.advance(task)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--max-queries", type=int, default=200, help="JSQuAD questions to ask.")
    parser.add_argument("--unrelated", type=int, default=200, help="Unrelated questions per set for the floor.")
    parser.add_argument("--k", type=int, default=5, help="Passages retrieved per question.")
    parser.add_argument("--floor", type=float, default=None, help="Similarity floor for the chat turns "
                        "(default: RAG_CHAT_SIMILARITY_FLOOR).")
    parser.add_argument("--seed", type=int, default=13)
    parser.add_argument("--llm", default=None, help="RAG_LLM for the turns (default: the setting), e.g. local.")
    parser.add_argument("--llm-model", default=None, help="RAG_LLM_MODEL, e.g. qwen2.5-coder-1.5b for --llm local.")
    parser.add_argument("--threads", type=int, default=None, help="RAG_LLM_THREADS of a local model.")
    parser.add_argument("--output", default=str(Path(__file__).parent / "results" / "answers.json"))
    args = parser.parse_args()

    ds = load_beir(eval_set_dir("jsquad"))
    overrides = {} if args.floor is None else {"chat_similarity_floor": args.floor}
    for key, value in (("llm", args.llm), ("llm_model", args.llm_model), ("llm_threads", args.threads)):
        if value is not None:
            overrides[key] = value
    load_before = os.getloadavg()
    with open_workbench(**overrides) as wb:
        records = [{"source": ds.source_of(d["_id"]), "title": d["title"], "text": d["text"]} for d in ds.corpus]
        with _bar() as bar:
            task = bar.add_task("ingest jsquad", total=len(records))
            started = time.perf_counter()
            report = wb.ingest_texts(records, site_id=SITE, progress=lambda p: bar.update(task, completed=p.done))
        ingest = report.to_dict()
        console.print(f"Corpus: {len(records)} documents ({ingest['indexed']} new, {ingest['unchanged']} unchanged) "
                      f"in {time.perf_counter() - started:.1f} s.")

        qids = [q for q in ds.judged_queries if ds.answers.get(q)]
        random.Random(args.seed).shuffle(qids)
        qids = qids[: args.max_queries]
        rows = []
        # each turn as it is done: a run of a slow local model that is stopped keeps what it measured
        partial = Path(args.output).with_suffix(".turns.jsonl")
        partial.parent.mkdir(parents=True, exist_ok=True)
        partial.write_text("", encoding="utf-8")
        with _bar() as bar:
            task = bar.add_task("chat turns", total=len(qids))
            for qid in qids:
                question, answers = ds.queries[qid], ds.answers[qid]
                relevant = {ds.source_of(d) for d in ds.qrels[qid]}
                hits = wb.retrieve(question, k=args.k, site_id=SITE)
                session = f"bench-{uuid.uuid4().hex[:12]}"
                started = time.perf_counter()
                try:
                    turn = wb.chat(question, session_id=session, k=args.k, site_id=SITE)
                except LLMError as exc:  # a model that timed out is a wrong answer, not the end of the run
                    turn = ChatTurn(session, question, f"LLMError: {exc}", [], question, {}, "")
                latency = time.perf_counter() - started
                wb.chat_reset(session)
                first = turn.answer.split("[", 1)[0]
                rows.append({
                    "id": qid, "question": question, "answers": answers, "answer": turn.answer,
                    "faithfulness": cited_faithfulness(turn.answer, {s.n: s.text for s in turn.sources}),
                    "contains": any(a in turn.answer for a in answers),
                    "first_sentence_contains": any(a in first for a in answers),
                    "context_contains": any(a in s.text for s in turn.sources for a in answers),
                    "hit_at_k": any(h.source in relevant for h in hits),
                    "cited_relevant": any(s.source in relevant for s in turn.sources),
                    "top_similarity": hits[0].similarity if hits else 0.0,
                    "top_relevant": bool(hits) and hits[0].source in relevant,
                    "relevant_similarity": max((h.similarity for h in hits if h.source in relevant), default=None),
                    "sources": len(turn.sources), "latency_s": latency,
                })
                with partial.open("a", encoding="utf-8") as f:
                    f.write(json.dumps(rows[-1], ensure_ascii=False, default=str) + "\n")
                bar.advance(task)

        scifact = _top_similarity(wb, _queries(eval_set_dir("scifact") / "queries.jsonl", args.unrelated, args.seed),
                                  args.k, "unrelated (scifact, en)")
        russian = _top_similarity(wb, _queries(eval_set_dir("ru_construction") / "queries.jsonl", args.unrelated,
                                               args.seed), args.k, "unrelated (ru_construction, ru)")
        floor_used = chat_floor(wb.settings)
        llm = wb.llm.describe()

    n = len(rows)

    def rate(key: str, subset: list[dict] | None = None) -> float:
        subset = rows if subset is None else subset
        return sum(1 for r in subset if r[key]) / len(subset) if subset else 0.0

    answerable_top = [r["top_similarity"] for r in rows]
    relevant_sims = [r["relevant_similarity"] for r in rows if r["relevant_similarity"] is not None]
    relevant_top = [r["top_similarity"] for r in rows if r["top_relevant"]]
    floors = []
    for f in FLOORS:
        floors.append({
            "floor": f,
            "relevant_hits_kept": sum(1 for s in relevant_sims if s >= f) / len(relevant_sims) if relevant_sims else 0,
            "answerable_top_kept": sum(1 for s in answerable_top if s >= f) / n if n else 0,
            "unrelated_en_kept": sum(1 for s in scifact if s >= f) / len(scifact) if scifact else 0,
            "unrelated_ru_kept": sum(1 for s in russian if s >= f) / len(russian) if russian else 0,
        })
    # The highest floor that still keeps 98% of the relevant hits found in the top k.
    suggested = max((f["floor"] for f in floors if f["relevant_hits_kept"] >= 0.98), default=0.0)
    results = {
        "set": "jsquad", "queries": n, "k": args.k, "floor_used": floor_used, "llm": llm,
        "load_average": {"before": load_before, "after": os.getloadavg()},
        "faithfulness": _mean([r["faithfulness"] for r in rows]),
        "answers_with_cited_sentence": sum(r["faithfulness"] is not None for r in rows) / n if n else 0,
        "answer_contains_reference": rate("contains"),
        "first_sentence_contains_reference": rate("first_sentence_contains"),
        "context_contains_reference": rate("context_contains"),
        "answer_contains_given_relevant_cited": rate("contains", [r for r in rows if r["cited_relevant"]]),
        "hit_at_k": rate("hit_at_k"), "cited_relevant": rate("cited_relevant"),
        "no_sources": sum(1 for r in rows if r["sources"] == 0) / n if n else 0,
        "latency_s": {"p50": percentile([r["latency_s"] for r in rows], 50),
                      "p95": percentile([r["latency_s"] for r in rows], 95)},
        "similarity": {"answerable_top": _summary(answerable_top), "relevant_top": _summary(relevant_top),
                       "relevant_in_top_k": _summary(relevant_sims),
                       "unrelated_en_top": _summary(scifact), "unrelated_ru_top": _summary(russian)},
        "floors": floors, "suggested_floor": suggested,
        "examples": rows[:20],
    }
    Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    Path(args.output).write_text(json.dumps(results, ensure_ascii=False, indent=2, default=str), encoding="utf-8")

    console.print(f"\n[bold]JSQuAD, {n} questions, k={args.k}, floor {floor_used}, {llm}[/bold]")
    console.print(f"answer contains a reference answer: {results['answer_contains_reference']:.3f}  "
                  f"(first cited sentence: {results['first_sentence_contains_reference']:.3f}; "
                  f"the context given: {results['context_contains_reference']:.3f})")
    console.print(f"relevant paragraph retrieved in top {args.k}: {results['hit_at_k']:.3f}; cited: "
                  f"{results['cited_relevant']:.3f}; answer contains reference when it was cited: "
                  f"{results['answer_contains_given_relevant_cited']:.3f}")
    console.print(f"turn latency p50 {results['latency_s']['p50']:.2f} s, p95 {results['latency_s']['p95']:.2f} s")
    console.print(f"faithfulness (cited sentences the cited passage supports): {results['faithfulness']:.3f} over "
                  f"{results['answers_with_cited_sentence']:.1%} of answers that cite; load average "
                  f"{load_before[0]:.1f} before, {results['load_average']['after'][0]:.1f} after")
    console.print("\n[bold]Top-hit similarity[/bold] (p02 / p05 / p50 / p95)")
    for name, values in results["similarity"].items():
        if values:
            console.print(f"  {name:<20} n={values['n']:<4} {values['p02']:.3f} / {values['p05']:.3f} / "
                          f"{values['p50']:.3f} / {values['p95']:.3f}")
    console.print("\n[bold]floor  relevant-kept  answerable-top-kept  unrelated-en-kept  unrelated-ru-kept[/bold]")
    for f in floors:
        console.print(f"  {f['floor']:.2f}   {f['relevant_hits_kept']:.3f}          {f['answerable_top_kept']:.3f}"
                      f"                {f['unrelated_en_kept']:.3f}              {f['unrelated_ru_kept']:.3f}")
    console.print(f"\nsuggested floor (keeps >= 98% of relevant hits): {suggested:.2f}")
    console.print(f"written: {args.output}")


if __name__ == "__main__":
    main()
