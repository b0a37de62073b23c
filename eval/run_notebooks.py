"""Execute every evaluation notebook top to bottom (`make eval`).

RAG_EVAL_SAMPLE sizes the run (0 = every query of every set; `make eval` sets 0). Executed copies
go to eval/results/notebooks/ (eval/cache/sample-results/notebooks/ for a sample) beside the JSON
results and charts the notebooks write. Exits 1 when any notebook fails, after running the others.

    RAG_EVAL_SAMPLE=0 RAGAS_DO_NOT_TRACK=true .venv/bin/python eval/run_notebooks.py
    RAG_EVAL_SAMPLE=20 .venv/bin/python eval/run_notebooks.py 01 04      # a sample, two notebooks
"""

from __future__ import annotations

import argparse
import os
import sys

from rag_core import load_settings
from rag_core.evaluation.notebooks import execute_notebook, list_notebooks
from rag_core.bench.suite import results_dir


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("only", nargs="*", help="notebook number prefixes to run (default: all)")
    parser.add_argument("--timeout", type=int, default=7200, help="seconds allowed per cell")
    args = parser.parse_args()
    os.environ.setdefault("RAGAS_DO_NOT_TRACK", "true")
    sample = load_settings().eval_sample
    out = results_dir(sample) / "notebooks"
    books = [p for p in list_notebooks() if not args.only or any(p.name.startswith(o) for o in args.only)]
    if not books:
        print(f"No notebook matches {args.only}.", file=sys.stderr)
        return 2
    print(f"Running {len(books)} notebooks, sample {sample or 'all'}; executed copies in {out}", flush=True)
    failed = 0
    for path in books:
        print(f"{path.name} ...", flush=True)
        run = execute_notebook(path, out / path.name, timeout=args.timeout)
        status = "ok" if run.error is None else f"FAILED\n{run.error}"
        print(f"{path.name}: {run.seconds:.0f} s, {status}", flush=True)
        failed += run.error is not None
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
