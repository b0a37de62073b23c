"""Multi-turn chat benchmark: is the right source among an answer's top three sources, turn after turn?

Ingests the multi-turn set of the chat tests (English, Russian and Japanese documents written for it)
into the site `eval:multiturn`, asks each conversation in its own session through `wb.chat`, and
prints the share of turns whose expected source is in the top three, per language and overall, with
the turns that missed, and how many later turns' answers cite the expected source first. Follow-ups
must find their topic through the conversation, and a new topic must not be answered from the
previous one. For reference it runs the set twice more with the follow-up rule
forced: every message searched alone, and every message folded with the previous question (the
behaviour before the rule); `--margins` sweeps the rule's margin. `--llm local` answers with the packaged
local model (with `--only-rule`, the rule alone) and prints seconds per turn and faithfulness beside.

Then it asks the company conversation set (tests/chat/company_set.py: a small company's documents as real
md, txt, pdf, docx, xlsx and html files in three languages) and prints, per category, the turns whose answer
is right (it contains the expected fact, cites the expected file first, on the expected page, quotes no
heading or question line and no title), the right source cited first, and the off-topic questions refused;
then every turn that went wrong.

    .venv/bin/python eval/bench_multiturn.py
    nice .venv/bin/python eval/bench_multiturn.py --llm local --threads 1 --only-rule \
        --output eval/results/multiturn-local.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

sys.path[:0] = [str(Path(__file__).resolve().parent.parent / "tests" / part) for part in ("chat", "")]

import company_set  # noqa: E402
from multiturn_set import CONVERSATIONS, DOCS, ask_conversations, hit_rates  # noqa: E402

from rag_core import open_workbench  # noqa: E402
from rag_core.chat import context, turn  # noqa: E402
from rag_core.providers.calibration import cosine_scale  # noqa: E402

console = Console()
SITE = "eval:multiturn"
COMPANY_SITE = "eval:company"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--k", type=int, default=5, help="Passages retrieved per turn.")
    parser.add_argument("--margins", type=float, nargs="*", default=[],
                        help="Further margins of the follow-up rule to measure.")
    parser.add_argument("--output", default=str(Path(__file__).parent / "results" / "multiturn.json"))
    parser.add_argument("--llm", default=None, help="RAG_LLM for the turns (default: the setting), e.g. local.")
    parser.add_argument("--llm-model", default=None, help="RAG_LLM_MODEL, e.g. qwen2.5-coder-1.5b for --llm local.")
    parser.add_argument("--threads", type=int, default=None, help="RAG_LLM_THREADS of a local model.")
    parser.add_argument("--only-rule", action="store_true", help="Run the follow-up rule alone (not the forced ones).")
    args = parser.parse_args()

    original = turn.follow_up_passages

    def forced(fold: bool):
        def retrieve(store, llm, message, history, *, k, site_id):
            if fold and any(m["role"] == "user" for m in history):
                folded = llm().condense(history, message)
                return folded, context.top_chunks(store, folded, k=k, site_id=site_id)
            return message, context.top_chunks(store, message, k=k, site_id=site_id)
        return retrieve

    rules = {"rule": (original, None), "never fold": (forced(False), None),
             "always fold": (forced(True), None)}
    for margin in args.margins:
        rules[f"rule, margin {margin:g}"] = (original, margin)
    if args.only_rule:
        rules = {"rule": rules["rule"]}
    overrides = {key: value for key, value in (("llm", args.llm), ("llm_model", args.llm_model),
                                               ("llm_threads", args.threads)) if value is not None}
    results = {}
    with open_workbench(**overrides) as wb:
        llm = wb.llm.describe()
        wb.ingest_texts(DOCS, site_id=SITE)
        embedder = wb.settings.embedder
        default = turn.FOLLOW_UP_MARGIN
        for name, (retrieve, margin) in rules.items():
            turn.follow_up_passages, turn.FOLLOW_UP_MARGIN = retrieve, default if margin is None else margin
            try:
                started = time.perf_counter()
                records = ask_conversations(wb, SITE, k=args.k)
                results[name] = {"top3": hit_rates(records), "first": hit_rates(records, "first"),
                                 "seconds": time.perf_counter() - started, "records": records}
            finally:
                turn.follow_up_passages, turn.FOLLOW_UP_MARGIN = original, default
        # The files are built afresh in a new folder each run (a PDF or Word file carries its build time), so an
        # earlier run's copies would stay beside them as further sources: the site starts empty.
        while stale := wb.documents(COMPANY_SITE, limit=100):
            for doc in stale:
                wb.delete_source(doc["source"], COMPANY_SITE)
        with tempfile.TemporaryDirectory() as folder:
            company_set.ingest(wb, Path(folder), COMPANY_SITE)
        started = time.perf_counter()
        company = company_set.ask(wb, COMPANY_SITE, session_prefix="eval-company")
        company_seconds = time.perf_counter() - started

    records = results["rule"]["records"]
    seconds = [r["seconds"] for r in records]
    faithful = [r["faithfulness"] for r in records if r["faithfulness"] is not None]
    console.print(f"answerer: {llm}; seconds per turn median {statistics.median(seconds):.2f} (max "
                  f"{max(seconds):.1f}); faithfulness {statistics.fmean(faithful) if faithful else 0:.3f} over "
                  f"{len(faithful)} answers that cite")
    console.print(f"{len(CONVERSATIONS)} conversations, {len(records)} turns, embedder {embedder}; right source "
                  f"in the top 3 of an answer's sources per language, and first (all turns; topic switches); "
                  f"turns after the first whose answer cites the right source first:")
    table = Table("follow-up rule", "en", "ru", "ja", "all", "first: all", "switches first",
                  "answer cites it: follow-ups", "switches", "seconds")
    for name, result in results.items():
        top3, first = result["top3"], result["first"]
        later = [r for r in result["records"] if r["turn"]]
        switches = [r["first"] for r in later if r["switch"]]
        answered = [sum(r["answered"] for r in later if r["switch"] == switch) for switch in (False, True)]
        label = f"{name} (margin {cosine_scale(embedder).follow_up_margin:g})" if name == "rule" else name
        table.add_row(label, *(f"{top3[lang]:.1%}" for lang in ("en", "ru", "ja", "all")), f"{first['all']:.1%}",
                      f"{sum(switches)}/{len(switches)}", f"{answered[0]}/{len(later) - len(switches)}",
                      f"{answered[1]}/{len(switches)}", f"{result['seconds']:.1f}")
    console.print(table)
    for r in records:
        if not r["hit"]:
            console.print(f"  miss: [{r['language']}] {r['message']!r} expected {r['expected']}, "
                          f"got {r['sources']} (retrieval query {r['retrieval_query']!r})", markup=False)
    summary = company_set.summary(company)
    console.print(f"\nCompany set: {len(company)} turns in {len(company_set.CONVERSATIONS)} conversations, "
                  f"{company_seconds / len(company):.2f} s per turn:")
    table = Table("category", "turns", "right", "contains the fact", "right source first", "refused")
    for category, row in summary.items():
        if category != "all":
            table.add_row(category, str(row["turns"]), f"{row['right']} ({row['right'] / row['turns']:.0%})",
                          str(row["contains"]), str(row["first"]), str(row["refused"]))
    overall = summary["all"]
    table.add_row("all", str(overall["turns"]), f"{overall['right']} ({overall['right'] / overall['turns']:.1%})",
                  "", "", "")
    console.print(table)
    console.print(f"off-topic answered: {overall['off_topic_answered']}; answers quoting a heading or question line: "
                  f"{overall['headings_quoted']}; starting with a title: {overall['title_prefixed']}; answerable "
                  f"questions refused: {overall['answerable_refused']}")
    for r in company:
        if not r.right:
            console.print(f"  wrong: [{r.turn.category}] {r.turn.message!r} expected {r.turn.source} "
                          f"{list(r.turn.contains)}, got {r.answer!r} from {r.sources}", markup=False)
    Path(args.output).write_text(json.dumps({"embedder": embedder, "llm": llm, "results": results,
                                             "company": {"summary": summary, "seconds_per_turn":
                                                         company_seconds / len(company),
                                                         "records": [r.to_dict() for r in company]}},
                                            ensure_ascii=False, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
