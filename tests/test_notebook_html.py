"""Notebook 00 executed in a real kernel and exported to HTML shows its results rendered: marked
highlights, the chat turn's sources with similarity, tables and charts (plotly.js inside the page)."""

from __future__ import annotations

import re
from pathlib import Path

from evalsets import write_documents_folder

from rag_core.evaluation.notebooks import execute_notebook

ROOT = Path(__file__).resolve().parents[1]


def test_notebook_00_exported_to_html_shows_rendered_results(pg_url, tmp_path, monkeypatch):
    from nbconvert import HTMLExporter

    data_dir = tmp_path / "data"
    monkeypatch.setenv("DATABASE_URL", pg_url)
    monkeypatch.setenv("RAG_DATA_DIR", str(data_dir))
    monkeypatch.setenv("RAG_NOTEBOOK_DOCS", str(write_documents_folder(tmp_path)))
    monkeypatch.setenv("PLOTLY_RENDERER", "plotly_mimetype+notebook")   # what `make eval` uses: offline
    run = execute_notebook(ROOT / "notebooks" / "00_your_documents.ipynb", tmp_path / "00.ipynb", timeout=900)
    assert run.error is None, run.error
    page, _ = HTMLExporter().from_filename(str(tmp_path / "00.ipynb"))
    assert "<mark" in page                                           # search highlights and cited sentences
    assert re.search(r"\[1\] <span[^>]*>.*?\d+\.\d%", page)           # a numbered source with its similarity
    assert page.index("Sources (") < page.rindex(">Answer<")          # sources first, then the answer
    assert "hit@5" in page and "ndcg@10" in page                      # the comparison tables
    assert "plotly" in page.lower() and "Plotly.newPlot" in page      # charts drawn in the page itself
    assert not re.search(r"<script[^>]*src=[\"']https://cdn\.plot\.ly", page)   # plotly.js inline, not fetched
    judged = (data_dir / "judged")
    assert any(judged.rglob("qrels.tsv")) and any(judged.rglob("*.json"))   # what the Analytics page reads
