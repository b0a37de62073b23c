"""Running the evaluation notebooks top to bottom from the command line (`make eval`)."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

NOTEBOOK_DIR = Path(__file__).resolve().parents[2] / "notebooks"
# The figure JSON plus plotly.js carried once in the notebook: an executed notebook draws its charts
# in Jupyter, VS Code and an exported HTML with no network (about 4.6 MB more per notebook).
PLOTLY_RENDERER = "plotly_mimetype+notebook"


@dataclass
class NotebookRun:
    """The outcome of executing one notebook."""

    name: str
    seconds: float
    output: Path | None
    error: str | None = None


def list_notebooks(folder: Path = NOTEBOOK_DIR) -> list[Path]:
    """The numbered notebooks (NN_name.ipynb) in order."""
    return sorted(p for p in folder.glob("[0-9][0-9]_*.ipynb"))


def execute_notebook(path: Path, output: Path | None, timeout: int = 7200, kernel: str = "python3") -> NotebookRun:
    """Execute a notebook in a fresh kernel (working directory: the repository root); save the result."""
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    os.environ.setdefault("PLOTLY_RENDERER", PLOTLY_RENDERER)  # the kernel inherits this process's environment
    book = nbformat.read(path, as_version=4)
    client = NotebookClient(book, timeout=timeout, kernel_name=kernel,
                            resources={"metadata": {"path": str(path.resolve().parents[1])}})
    started = time.perf_counter()
    error = None
    try:
        client.execute()
    except CellExecutionError as exc:
        # the first lines name the cell and the exception; the rest is the kernel's traceback
        error = "\n".join(str(exc).strip().splitlines()[-3:])
    seconds = time.perf_counter() - started
    if output is not None:
        output.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(book, output)
    return NotebookRun(path.stem, seconds, output, error)


TEST_SAMPLE = 12  # queries per set when pytest runs the notebooks: each finishes in well under a minute
# Documents besides the judged ones in a test run's samples: notebooks 01 and 02 embed each sample a second
# time with e5-small (about 68 passages/s on a quiet machine), which this keeps to well under a minute.
TEST_DISTRACTORS = 50


def notebook_test_env(database_url: str, data_dir: str, env: dict[str, str],
                      eval_data: str | None = None) -> dict[str, str]:
    """The variables `pytest --nbmake` gives the notebook kernels: the test database, a small sample, no tracking.

    A sample of 0 (everything) from the caller's environment is replaced: a test run never
    evaluates the full sets; a positive sample is kept, and so is RAG_EVAL_DISTRACTORS when set. `eval_data`, when given, becomes the
    kernels' RAG_EVAL_DATA (the sets the tests write when none is configured).
    """
    try:
        sample = int(env.get("RAG_EVAL_SAMPLE", "0"))
    except ValueError:
        sample = 0
    values = {
        "DATABASE_URL": database_url,
        "RAG_DATA_DIR": data_dir,
        "RAG_EVAL_SAMPLE": str(sample if sample > 0 else TEST_SAMPLE),
        "RAG_EVAL_DISTRACTORS": env.get("RAG_EVAL_DISTRACTORS") or str(TEST_DISTRACTORS),
        "RAGAS_DO_NOT_TRACK": "true",
        "PLOTLY_RENDERER": "json",   # figure JSON only: nothing to render in a test
    }
    if eval_data:
        values["RAG_EVAL_DATA"] = eval_data
    return values
