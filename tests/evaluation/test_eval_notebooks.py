"""The notebooks' wiring: pytest executes them (nbmake) on a sample against the test database."""

from __future__ import annotations

import ast
import subprocess
import sys
import uuid
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


def test_notebook_00_writes_no_judgement_the_user_did_not_make(pg_server_url, tmp_path, monkeypatch):
    """On a folder without judgements.tsv the notebook runs its evaluation on an example held in memory:
    the site's judged set (what Analytics scores as the user's) stays empty."""
    from rag_core.db.database import create_database_if_missing, drop_database, with_database
    from rag_core.evaluation.judged import judged_set
    from rag_core.evaluation.notebooks import NOTEBOOK_DIR, execute_notebook

    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "boilers.md").write_text("# Boilers\n\nThe boilers are descaled every autumn by the facilities team.")
    (folder / "chillers.md").write_text("# Chillers\n\nChillers are checked every spring before the cooling season.")
    url = with_database(pg_server_url, f"rag_nb00_{uuid.uuid4().hex[:8]}")
    create_database_if_missing(url)
    data_dir = tmp_path / "data"
    for name, value in {**notebook_test_env(url, str(data_dir), {}), "RAG_NOTEBOOK_DOCS": str(folder)}.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("RAG_EVAL_DATA", raising=False)
    try:
        run = execute_notebook(NOTEBOOK_DIR / "00_your_documents.ipynb", tmp_path / "out.ipynb", timeout=900)
        assert run.error is None, run.error
    finally:
        drop_database(url)
    assert judged_set(data_dir, "my-documents")["queries"] == 0
    assert not (data_dir / "judged").exists() or not any((data_dir / "judged").rglob("qrels.tsv"))
