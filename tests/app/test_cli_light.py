"""Small promises around the app: `rag --help` loads no heavy library, markdown output is clean markdown,
and a PDF with a placeholder title is named after its file."""

from __future__ import annotations

import json
import subprocess
import sys

from filebuilders import make_pdf, pdf_sentences

from rag_core.render.search import render_markdown

HEAVY = ("torch", "llama_index", "streamlit", "sentence_transformers", "psycopg", "sqlalchemy", "pandas", "numpy")


def test_rag_help_imports_no_heavy_library() -> None:
    code = ("import sys\nsys.argv = ['rag', '--help']\nfrom rag_core.cli import main\n"
            "try:\n    main()\nexcept SystemExit:\n    pass\n"
            "import json\nprint(json.dumps(sorted(m for m in sys.modules)), file=sys.stderr)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert "ingest" in done.stdout and "search" in done.stdout  # the help itself
    loaded = json.loads(done.stderr.strip().splitlines()[-1])
    heavy = sorted({m.split(".")[0] for m in loaded} & set(HEAVY))
    assert not heavy, f"`rag --help` imported {heavy}"


def test_markdown_output_does_not_double_a_documents_own_bold() -> None:
    text = "Open the **Search** page and type a query."
    start = text.index("Search")
    response = {"query": "search", "total_results": 1, "total_pages": 1, "page": 1, "limit": 10, "mode": "hybrid",
                "search_time": "0.010s", "suggestions": [], "facets": {},
                "results": [{"title": "Guide", "relevance_score": 0.9, "file_path": "docs/guide.md", "file_type": "md",
                             "file_size": "1 KB", "document_date": None, "dense_rank": 1, "fulltext_rank": 1,
                             "highlights": [text], "highlight_spans": [[[start, start + len("Search")]]],
                             "context_chunks": []}]}
    out = render_markdown(response)
    assert "****" not in out
    assert "> Open the **Search** page and type a query." in out


def test_a_pdf_titled_about_blank_takes_its_file_name(app_wb, app_site) -> None:
    for name, title in (("pump-manual-2024.pdf", "about:blank"), ("valve-guide.pdf", "Untitled")):
        outcome = app_wb.ingest_bytes(name, make_pdf(pdf_sentences(), title=title), site_id=app_site)
        assert outcome.status == "indexed", outcome.reason
    titles = {d["source"]: d["title"] for d in app_wb.documents(site_id=app_site)}
    assert titles == {"pump-manual-2024.pdf": "pump-manual-2024", "valve-guide.pdf": "valve-guide"}


def test_status_of_an_empty_store_names_no_unknown_dimension(empty_db_url) -> None:
    """`rag status` on a fresh store printed 'use-multilingual (? dimensions)'."""
    from typer.testing import CliRunner

    from rag_core.cli import app

    result = CliRunner().invoke(app, ["status"])
    assert result.exit_code == 0, result.output
    assert "(nothing embedded yet)" in result.stdout and "?" not in result.stdout
