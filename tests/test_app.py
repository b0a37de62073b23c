"""The Streamlit entry point renders the index status with no exception on the page."""

from __future__ import annotations

from pathlib import Path

from streamlit.testing.v1 import AppTest

ROOT = Path(__file__).resolve().parents[1]


def test_status_page_renders(monkeypatch, pg_url, tmp_path, wb) -> None:
    wb.ingest_text("api/app-doc", "A document the status page counts.", site_id="default")
    monkeypatch.setenv("DATABASE_URL", pg_url)
    monkeypatch.chdir(tmp_path)
    try:
        at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120).run()
        assert not at.exception
        metrics = {m.label: m.value for m in at.metric}
        assert int(metrics["Documents"]) >= 1 and int(metrics["Chunks"]) >= 1
    finally:
        wb.delete_source("api/app-doc", site_id="default")
