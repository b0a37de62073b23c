"""The notebooks' wiring: pytest executes them (nbmake) on a sample against the test database."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import nbformat

from rag_core.evaluation.notebooks import TEST_DISTRACTORS, TEST_SAMPLE, list_notebooks, notebook_test_env

REPO = Path(__file__).resolve().parents[2]


def test_pytest_collects_the_notebooks_with_nbmake():
    # no arguments: the configured testpaths; a notebook is only collected when --nbmake is in addopts
    listed = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q"], cwd=REPO,
                            capture_output=True, text=True, timeout=300)
    names = [p.name for p in list_notebooks()]
    assert names == ["00_your_documents.ipynb", "01_retrieval_quality.ipynb", "02_chunking_and_fusion.ipynb",
                     "03_answers_with_ragas.ipynb", "04_peers.ipynb", "05_llamaindex.ipynb"]
    for name in names:
        assert f"notebooks/{name}" in listed.stdout, listed.stdout + listed.stderr


def test_kernels_get_the_test_database_and_a_small_sample(tmp_path):
    env = notebook_test_env("postgresql://x/test", str(tmp_path / "d"), {"RAG_EVAL_SAMPLE": "0", "DATABASE_URL": "postgresql://x/dev"})
    assert env["DATABASE_URL"] == "postgresql://x/test"
    assert env["RAG_EVAL_SAMPLE"] == str(TEST_SAMPLE) and env["RAGAS_DO_NOT_TRACK"] == "true"
    assert notebook_test_env("u", "d", {"RAG_EVAL_SAMPLE": "5"})["RAG_EVAL_SAMPLE"] == "5"
    assert env["RAG_EVAL_DISTRACTORS"] == str(TEST_DISTRACTORS)
    assert notebook_test_env("u", "d", {"RAG_EVAL_DISTRACTORS": "7"})["RAG_EVAL_DISTRACTORS"] == "7"
    # the sets the tests write reach the kernels only when RAG_EVAL_DATA is not configured
    assert "RAG_EVAL_DATA" not in env
    sets = str(tmp_path / "sets")
    assert notebook_test_env("u", "d", {}, eval_data=sets)["RAG_EVAL_DATA"] == sets


def test_notebooks_open_the_workbench_first_and_define_no_logic():
    for path in list_notebooks():
        book = nbformat.read(path, as_version=4)
        assert book.metadata.kernelspec.name == "python3"
        code = [c.source for c in book.cells if c.cell_type == "code"]
        assert code[0] == "from rag_core import open_workbench; wb = open_workbench()", path.name
        for source in code:
            tree = ast.parse(source)
            defined = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.ClassDef, ast.Lambda))]
            assert not defined, f"{path.name} defines logic: move it into rag_core.evaluation"
        assert all(not c.get("outputs") for c in book.cells if c.cell_type == "code"), f"{path.name} has stored outputs"
