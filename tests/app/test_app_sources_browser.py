"""The chat page's Sources panel in a real browser shows the calibrated relevance every other surface shows."""

from __future__ import annotations

import re
import uuid
from pathlib import Path

import pytest

from chat import company_set as cs
from rag_core.db.database import create_database_if_missing, drop_database, with_database
from test_app_browser import CHROMIUM, CHROMIUM_ARGS, check_and_shoot, guard_network, running_app, settle


@pytest.fixture
def company_app(pg_server_url: str, make_settings, tmp_path: Path):
    """The app over a fresh database holding the company documents; yields (base URL, database URL)."""
    from rag_core import open_workbench

    url = with_database(pg_server_url, f"rag_sources_{uuid.uuid4().hex[:10]}")
    create_database_if_missing(url)
    try:
        with open_workbench(make_settings(database_url=url)) as wb:
            cs.ingest(wb, tmp_path / "docs", "default")
        with running_app(url, tmp_path) as base:
            yield base, url
    finally:
        drop_database(url)


def test_the_sources_panel_shows_the_calibrated_relevance(company_app, make_settings) -> None:
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: `make system-deps` or `apt-get install chromium chromium-driver`.")
    from playwright.sync_api import sync_playwright

    from rag_core import open_workbench

    base, url = company_app
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            context = browser.new_context(viewport={"width": 1400, "height": 900})
            outside = guard_network(context)
            page = context.new_page()
            page.goto(f"{base}/")
            settle(page)
            page.get_by_placeholder("Ask about your documents").fill("How long is parental leave?")
            page.keyboard.press("Enter")
            page.get_by_text("Sources (", exact=False).first.wait_for(timeout=120_000)
            settle(page)
            page.locator('[data-testid="stExpander"] summary').first.click()
            page.get_by_text(re.compile(r"\[1\] \d+\.\d%")).first.wait_for(timeout=30_000)
            check_and_shoot(page, "sources-calibrated", outside)
            shown = [float(x) for x in re.findall(r"\[\d+\] (\d+\.\d)%", page.locator("body").inner_text())]
        finally:
            browser.close()
    with open_workbench(make_settings(database_url=url)) as wb:
        session = wb.list_sessions()[0]
        answer = wb.chat_history(session["id"])[-1]
    stored = [round(c["relevance"] * 100, 1) for c in answer["sources"]]
    assert shown and shown == stored  # the calibrated reading, as the CLI, REST, MCP and Slack print it
    assert shown != [round(c["similarity"] * 100, 1) for c in answer["sources"]]  # not the raw cosine
