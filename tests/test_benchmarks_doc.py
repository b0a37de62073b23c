"""docs/benchmarks.md is generated from eval/results/*.json (eval/benchmarks_doc.py): it is up to date, every
results file is in it, and its figures come from the files, so none can be typed by hand."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "eval" / "benchmarks_doc.py"
DOC = ROOT / "docs" / "benchmarks.md"


def generator():
    """eval/benchmarks_doc.py as a module (eval/ is a folder of scripts, not a package)."""
    if "benchmarks_doc" not in sys.modules:
        spec = importlib.util.spec_from_file_location("benchmarks_doc", SCRIPT)
        module = importlib.util.module_from_spec(spec)
        sys.modules["benchmarks_doc"] = module  # dataclasses look their module up while the file runs
        spec.loader.exec_module(module)
    return sys.modules["benchmarks_doc"]


def test_the_committed_page_is_what_the_results_files_give() -> None:
    """Regenerating gives the same file: a hand edit, or a results file added without `make benchmarks-doc`, fails."""
    assert DOC.read_text(encoding="utf-8") == generator().render(), \
        "docs/benchmarks.md is out of date or was edited by hand: run `make benchmarks-doc`"


def test_the_check_mode_runs_on_the_repository() -> None:
    run = subprocess.run([sys.executable, str(SCRIPT), "--check"], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert run.returncode == 0, run.stderr


def test_every_results_file_has_its_section() -> None:
    gen = generator()
    text = DOC.read_text(encoding="utf-8")
    files = gen.result_files()
    assert len(files) > 10
    missing = [p.relative_to(gen.RESULTS).as_posix() for p in files
               if f"(../eval/results/{p.relative_to(gen.RESULTS).as_posix()})" not in text]
    assert not missing, f"results files without a section in docs/benchmarks.md: {missing}"


def test_figures_come_from_the_files(tmp_path: Path) -> None:
    """A changed figure changes the page, and a file no renderer knows still gets its scalar fields."""
    gen = generator()
    record = {"precision@5": 0.1, "hit@5": 0.8123, "recall@5": 0.7, "mrr@10": 0.6, "ndcg@10": 0.7045,
              "latency_ms": {"p50": 12.3, "p95": 45.6}, "queries": 300, "mode": "hybrid", "embedder": "e5-small",
              "dataset": "scifact", "machine": "2 cores, test CPU", "written": "2026-01-02T03:04:05Z"}
    (tmp_path / "retrieval_scifact_hybrid.json").write_text(json.dumps(record), encoding="utf-8")
    (tmp_path / "bench_new_thing.json").write_text(json.dumps({"widgets_per_s": 1234.5, "machine": "m"}),
                                                     encoding="utf-8")
    page = gen.render(tmp_path)
    assert "| scifact | hybrid | e5-small | 300 | 0.812 | 0.705 |" in page and "2 cores, test CPU" in page
    assert "## Other results" in page and "| widgets_per_s | 1,234.5" in page
    record["hit@5"] = 0.9
    (tmp_path / "retrieval_scifact_hybrid.json").write_text(json.dumps(record), encoding="utf-8")
    assert "| scifact | hybrid | e5-small | 300 | 0.900 |" in gen.render(tmp_path)
