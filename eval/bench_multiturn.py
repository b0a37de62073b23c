"""Multi-turn chat benchmark: is the right source among an answer's top three sources, turn after turn?

Ingests the multi-turn set of the chat tests (English, Russian and Japanese documents written for it)
into the site `eval:multiturn`, asks each conversation in its own session through `wb.chat`, and
prints the share of turns whose expected source is in the top three, per language and overall, with
the turns that missed. Follow-ups must find their topic through the conversation, and a new topic must
not be answered from the previous one. For reference it runs the set twice more with the follow-up rule
forced: every message searched alone, and every message folded with the previous question (the
behaviour before the rule); `--margins` sweeps the rule's margin.

    .venv/bin/python eval/bench_multiturn.py
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "chat"))

from multiturn_set import CONVERSATIONS, DOCS, ask_conversations, hit_rates  # noqa: E402

from rag_core import open_workbench  # noqa: E402
from rag_core.chat import turn  # noqa: E402

console = Console()
SITE = "eval:multiturn"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--k", type=int, default=5, help="Passages retrieved per turn.")
    parser.add_argument("--margins", type=float, nargs="*", default=[],
                        help="Further margins of the follow-up rule to measure.")
    parser.add_argument("--output", default=str(Path(__file__).parent / "results" / "multiturn.json"))
    args = parser.parse_args()

    rules = {"rule": turn.FOLLOW_UP_MARGIN, "never fold": -2.0, "always fold": 2.0}
    for margin in args.margins:
        rules[f"margin {margin:g}"] = margin
    results = {}
    with open_workbench() as wb:
        wb.ingest_texts(DOCS, site_id=SITE)
        embedder = wb.settings.embedder
        default = turn.FOLLOW_UP_MARGIN
        for name, margin in rules.items():
            turn.FOLLOW_UP_MARGIN = margin
            try:
                started = time.perf_counter()
                records = ask_conversations(wb, SITE, k=args.k)
                results[name] = {"rates": hit_rates(records), "seconds": time.perf_counter() - started,
                                 "margin": margin, "records": records}
            finally:
                turn.FOLLOW_UP_MARGIN = default

    records = results["rule"]["records"]
    console.print(f"{len(CONVERSATIONS)} conversations, {len(records)} turns, embedder {embedder}; "
                  f"right source in the top 3 of an answer's sources:")
    table = Table("follow-up rule", "en", "ru", "ja", "all", "seconds")
    for name, result in results.items():
        rates = result["rates"]
        label = f"{name} (margin {result['margin']:g})" if name == "rule" else name
        table.add_row(label, *(f"{rates[lang]:.1%}" for lang in ("en", "ru", "ja", "all")),
                      f"{result['seconds']:.1f}")
    console.print(table)
    for r in records:
        if not r["hit"]:
            console.print(f"  miss: [{r['language']}] {r['message']!r} expected {r['expected']}, "
                          f"got {r['sources']} (retrieval query {r['retrieval_query']!r})", markup=False)
    Path(args.output).write_text(json.dumps({"embedder": embedder, "results": results},
                                            ensure_ascii=False, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
