"""The Ingestion page's background jobs: queued from the page, run by the app's own worker (no `rag worker`
is running), and shown with their progress again after a reload."""

from __future__ import annotations

import time
from pathlib import Path

from streamlit.testing.v1 import AppTest

import app_ui

ROOT = Path(__file__).resolve().parents[2]


def ingestion_page() -> AppTest:
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=180)
    at.run()
    at.switch_page("app_pages/ingestion.py").run()
    assert not at.exception and not at.error, [e.value for e in [*at.exception, *at.error]]
    return at


def progress_texts(at: AppTest) -> list[str]:
    return [el.proto.text for el in at.get("progress")]


def test_folder_job_from_the_page_runs_in_the_app_and_shows_after_reload(empty_db_url, tmp_path: Path) -> None:
    folder = tmp_path / "manuals"
    folder.mkdir()
    for name in ("boiler", "pump", "valve"):
        (folder / f"{name}.md").write_text(f"# {name}\n\nService the {name} every spring.", encoding="utf-8")
    at = ingestion_page()
    at.toggle(key="ingest_background").set_value(True).run()
    at.text_input(key="folder_path").input(str(folder)).run()
    at.button(key="folder_go").click().run()
    assert not at.exception and not at.error
    wb = app_ui.workbench()
    [job] = wb.jobs()
    assert job["kind"] == "ingest"
    deadline = time.monotonic() + 120
    while wb.job(job["id"])["status"] != "done" and time.monotonic() < deadline:
        time.sleep(0.2)
    assert wb.job(job["id"])["status"] == "done"  # the app ran it: no worker process exists here
    assert wb.status()["documents"] == 3

    reloaded = ingestion_page()  # a fresh session: the jobs come from the database
    assert any(f"#{job['id']} ingest" in text and "done" in text and "3 of 3" in text
               for text in progress_texts(reloaded)), progress_texts(reloaded)
