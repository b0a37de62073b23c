"""Presentation lives in rag_core/render/ (tests/test_architecture.py checks that no core imports it): results stay
plain data that a notebook still shows as HTML, through formatters `import rag_core` registers inside IPython."""

from __future__ import annotations

import ast
import importlib
import json
import subprocess
import sys
from pathlib import Path

from rag_core.render.jupyter import FORMATTED

PACKAGE = Path(__file__).resolve().parents[2] / "rag_core"
# Front-ends, the facade and the deprecated re-export may use render/; everything else is core.
NOT_CORE = ("render/", "cli/", "api/", "workbench.py", "__init__.py", "display.py")


def core_modules() -> list[Path]:
    files = sorted(PACKAGE.rglob("*.py"))
    return [f for f in files if not str(f.relative_to(PACKAGE)).startswith(NOT_CORE)]


def test_core_types_carry_no_notebook_methods() -> None:
    """The HTML and markdown of a result come from render/, not from methods on the core's types."""
    found = [f"{f.relative_to(PACKAGE)}: {node.name}" for f in core_modules()
             for node in ast.walk(ast.parse(f.read_text()))
             if isinstance(node, ast.FunctionDef) and node.name in ("_repr_html_", "_repr_markdown_")]
    assert not found


def test_every_formatted_type_still_exists() -> None:
    """Types are registered by module and name; a class moved or renamed would silently lose its look."""
    for module, name, mime, formatter in FORMATTED:
        assert isinstance(getattr(importlib.import_module(module), name), type), f"{module}.{name}"
        assert mime in ("text/html", "text/markdown") and callable(formatter)


RESPONSE = {"query": "pumps", "total_results": 1, "total_pages": 1, "page": 1, "limit": 10, "mode": "hybrid",
            "search_time": "0.010s", "suggestions": [], "facets": {},
            "results": [{"title": "Guide <b>", "relevance_score": 0.9, "file_path": "docs/guide.md",
                         "file_type": "md", "file_size": "1 KB", "document_date": None, "dense_rank": 1,
                         "fulltext_rank": 1, "highlights": ["Heat pumps work."], "highlight_spans": [[[5, 10]]],
                         "context_chunks": []}]}


def run_python(code: str) -> dict:
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_import_rag_core_installs_the_notebook_look_inside_ipython_only() -> None:
    inside = run_python(
        "import json\nfrom IPython.core.interactiveshell import InteractiveShell\n"
        "shell = InteractiveShell.instance()\nimport rag_core\n"
        "from rag_core.records import Records, StoreStatus\nfrom rag_core.search.responses import SearchResults\n"
        f"response = SearchResults({RESPONSE!r})\n"
        "data, _ = shell.display_formatter.format(response)\n"
        "status, _ = shell.display_formatter.format(StoreStatus(documents=2))\n"
        "plain, _ = shell.display_formatter.format(dict(response))\n"
        "print(json.dumps({'search': data, 'status': status, 'plain': sorted(plain), "
        "'same_json': json.dumps(response) == json.dumps(dict(response))}))")
    page = inside["search"]["text/html"]
    assert "<mark" in page and "Guide &lt;b&gt;" in page and "docs/guide.md" in page
    assert inside["search"]["text/markdown"].startswith("## Search: pumps")
    assert "<table" in inside["status"]["text/html"] and ">documents<" in inside["status"]["text/html"]
    assert inside["plain"] == ["text/plain"]      # a plain dict keeps its plain look
    assert inside["same_json"]                    # every other surface sees the same JSON
    outside = run_python("import json, sys\nimport rag_core\nfrom rag_core.search.responses import SearchResults\n"
                         "print(json.dumps(sorted(m for m in sys.modules if m.startswith(('IPython', "
                         "'rag_core.render')))))")
    assert outside == []


def test_the_old_display_module_still_imports_with_a_deprecation_warning() -> None:
    found = run_python(
        "import json, warnings\nwarnings.simplefilter('always')\n"
        "with warnings.catch_warnings(record=True) as caught:\n"
        "    from rag_core.display import Records, SearchResults, StoreStatus, offline_charts, search_html\n"
        "from rag_core import records, search\n"
        "print(json.dumps({'warned': [str(w.message) for w in caught if w.category is DeprecationWarning], "
        "'same': SearchResults is search.responses.SearchResults and StoreStatus is records.StoreStatus}))")
    assert found["same"]
    assert any("rag_core.render" in message for message in found["warned"]), found


def test_a_call_without_a_callback_gets_the_installed_default_and_closes_it() -> None:
    """The evaluation runner and the facade ask rag_core.progress; render/ installs the notebook bar there."""
    from rag_core.progress import auto_progress, notebook_progress, set_default_progress

    made: list[tuple[str, str]] = []
    closed: list[str] = []

    class Bar:
        def __init__(self, description: str, unit: str) -> None:
            made.append((description, unit))

        def __call__(self, event: object) -> None:
            pass

        def close(self) -> None:
            closed.append("closed")

    def mine(event: object) -> None:
        pass

    assert auto_progress(None, "ingest") is None            # nothing installed: no output
    set_default_progress(Bar)
    try:
        assert auto_progress(mine, "ingest") is mine          # the caller's own callback wins
        with notebook_progress(None, "re-embedding", unit="chunk") as report:
            assert isinstance(report, Bar)
        with notebook_progress(mine, "ingest") as report:
            assert report is mine
    finally:
        set_default_progress(None)
    assert made == [("re-embedding", "chunk")] and closed == ["closed"]
