"""`pytest` (testpaths include notebooks/, addopts --nbmake) runs each notebook on a small sample.

The kernels nbmake starts inherit this process's environment: before each notebook runs, this
points DATABASE_URL at a fresh test database (on RAG_TEST_DATABASE_URL's server, else an embedded
server in a temporary folder), never the developer's store (the databases notebooks open beside it
for other embedders are dropped with it), and sets RAG_EVAL_SAMPLE to a small
sample. With RAG_EVAL_DATA unset, the notebooks get the small sets tests/evalsets.py writes, so a
clone with nothing beside it runs them. The environment is restored after each notebook; the
database and the written sets are removed at the end.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import uuid
from pathlib import Path

import pytest
from evalsets import write_documents_folder, write_eval_sets

from rag_core.evaluation.notebooks import notebook_test_env
from rag_core.settings import RagSettings

_state: dict[str, object] = {}


def _test_database() -> tuple[str, str]:
    if "url" not in _state:
        from rag_core.db.database import create_database_if_missing, with_database

        # One fixed folder per machine user: pytest's own temp folders are pruned by any other pytest
        # run (even one on another checkout) while this server still uses them; the embedded server
        # is shared by concurrent runs and each run gets its own database.
        folder = Path(tempfile.gettempdir()) / f"rag-notebook-tests-{os.getuid() if hasattr(os, 'getuid') else 'u'}"
        server = os.environ.get("RAG_TEST_DATABASE_URL")
        if not server:
            from rag_core.db.server import embedded_server_uri

            # A failure here fails the notebook with the reason; notebooks never skip for a missing database.
            server = embedded_server_uri(folder / "pg")
        url = with_database(server, f"rag_nb_{uuid.uuid4().hex[:10]}")
        create_database_if_missing(url)
        _state.update(url=url, folder=folder)
    return str(_state["url"]), str(Path(str(_state["folder"])) / "data")


def _written_eval_sets() -> str | None:
    """None when RAG_EVAL_DATA is set (the kernels inherit it), else a folder of the tests' small sets."""
    if RagSettings(_env_file=None).eval_data is not None:
        return None
    if "eval_data" not in _state:
        _state["eval_data"] = str(write_eval_sets(Path(tempfile.mkdtemp(prefix="rag-notebook-eval-data-"))))
    return str(_state["eval_data"])


def _your_documents() -> str:
    """Notebook 00's folder (tests/evalsets.py writes it): markdown files and a judgements.tsv."""
    if "docs" not in _state:
        _state["docs"] = tempfile.mkdtemp(prefix="rag-notebook-docs-")
        write_documents_folder(Path(str(_state["docs"])))
    return str(Path(str(_state["docs"])) / "my-documents")


def pytest_runtest_setup(item: pytest.Item) -> None:
    if item.path.suffix != ".ipynb":
        return
    url, data_dir = _test_database()
    values = notebook_test_env(url, data_dir, dict(os.environ), eval_data=_written_eval_sets())
    values["RAG_NOTEBOOK_DOCS"] = _your_documents()
    _state["saved"] = {k: os.environ.get(k) for k in values}
    os.environ.update(values)


def pytest_runtest_teardown(item: pytest.Item) -> None:
    saved = _state.pop("saved", None)
    if item.path.suffix != ".ipynb" or not isinstance(saved, dict):
        return
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


def pytest_sessionfinish(session: pytest.Session) -> None:
    if "docs" in _state:
        shutil.rmtree(str(_state.pop("docs")), ignore_errors=True)
    if "eval_data" in _state:
        shutil.rmtree(str(_state.pop("eval_data")), ignore_errors=True)
    if "url" in _state:
        from rag_core.db.database import drop_database
        from rag_core.bench.suite import embedder_database_url
        from rag_core.providers.embeddings import EMBEDDERS

        drop_database(str(_state["url"]))
        for name in EMBEDDERS:  # the stores notebooks open for other embedders (suite.embedder_workbench)
            drop_database(embedder_database_url(str(_state["url"]), name))
        _state.clear()
