"""A real-browser pass: `streamlit run` on loopback, every page in headless Chromium, empty and then with data.

Screenshots land in test-artifacts/ (git-ignored). The test fails, never skips, when Chromium is missing.
"""

from __future__ import annotations

import csv
import os
import socket
import subprocess
import sys
import time
import uuid
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from urllib.parse import urlsplit

import httpx
import pytest

from rag_core.db.database import create_database_if_missing, drop_database, with_database

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-quic",
                 "--no-first-run", "--disable-component-update", "--disable-sync"]
PAGES = {"chat": "", "search": "search", "ingestion": "ingestion", "retention": "retention", "analytics": "analytics"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def running_app(url: str, tmp_path: Path) -> Iterator[str]:
    """`streamlit run app.py` on loopback over the database at `url`; yields its base URL and stops it afterwards."""
    port = free_port()
    env = {**os.environ, "DATABASE_URL": url, "RAG_DATA_DIR": str(tmp_path / "data")}
    log = open(tmp_path / "streamlit.log", "w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", str(ROOT / "app.py"), "--server.headless", "true",
         "--server.address", "127.0.0.1", "--server.port", str(port), "--browser.gatherUsageStats", "false",
         "--server.fileWatcherType", "none"],
        cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)  # ROOT: .streamlit/config.toml applies, as with `make run`
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while True:
            if proc.poll() is not None:
                pytest.fail(f"streamlit exited with {proc.returncode}: {(tmp_path / 'streamlit.log').read_text()[-2000:]}")
            try:
                if httpx.get(f"{base}/_stcore/health", timeout=2).text == "ok":
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                pytest.fail("streamlit did not answer /_stcore/health within 90 s")
            time.sleep(0.5)
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


@pytest.fixture
def browser_db_url(pg_server_url: str):
    """A fresh, empty database for one app server; dropped afterwards."""
    url = with_database(pg_server_url, f"rag_browser_{uuid.uuid4().hex[:10]}")
    create_database_if_missing(url)
    yield url
    drop_database(url)


@pytest.fixture
def app_server(browser_db_url: str, tmp_path: Path):
    """The app on a fresh, empty database; yields its base URL."""
    with running_app(browser_db_url, tmp_path) as base:
        yield base


def settle(page, timeout_s: float = 120) -> None:
    """Wait until the script run is over: the app is drawn and the 'running' indicator stayed away a while."""
    page.wait_for_selector('[data-testid="stApp"]', timeout=timeout_s * 1000)
    page.wait_for_selector('[data-testid="stMainBlockContainer"] h1', timeout=timeout_s * 1000)
    deadline, quiet_since = time.monotonic() + timeout_s, None
    while time.monotonic() < deadline:
        running = page.locator('[data-testid="stStatusWidget"]').count() > 0
        if running:
            quiet_since = None
        elif quiet_since is None:
            quiet_since = time.monotonic()
        elif time.monotonic() - quiet_since > 1.5:
            return
        time.sleep(0.25)
    pytest.fail(f"{page.url} kept running for {timeout_s} s")


LOOPBACK = {"127.0.0.1", "localhost", "::1", "[::1]"}


def guard_network(context) -> list[str]:
    """Refuse, and remember, every request to a host other than this machine: an offline app makes none
    (a favicon or a font from an outside host would be one)."""
    outside: list[str] = []

    def route(r) -> None:
        url = r.request.url
        host = urlsplit(url).hostname or ""
        if url.startswith(("data:", "blob:", "about:")) or host in LOOPBACK:
            r.continue_()
        else:
            outside.append(url)
            r.abort()

    context.route("**/*", route)
    return outside


def check_and_shoot(page, name: str, outside: list[str] | None = None) -> None:
    """Fail on any exception or error shown on the page, or any request to an outside host so far; save a
    screenshot either way."""
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"app-{name}.png"), full_page=True)
    assert not outside, f"{name}: requests to outside hosts: {sorted(set(outside))[:5]}"
    exceptions = page.locator('[data-testid="stException"]')
    assert exceptions.count() == 0, f"{name}: {exceptions.first.inner_text()[:800]}"
    errors = page.locator('[data-testid="stAlertContentError"]')
    assert errors.count() == 0, f"{name}: {errors.first.inner_text()[:800]}"
    body = page.locator("body").inner_text()
    assert "Traceback" not in body, f"{name}: a traceback is on the page"


def search_for(page, base: str, words: str) -> None:
    """Open the Search page, type `words`, press Enter and wait for the results."""
    page.goto(f"{base}/search")
    settle(page)
    box = page.get_by_placeholder("e.g. how does hybrid search rank documents?")
    box.fill(words)
    box.press("Enter")
    page.get_by_text("documents ·", exact=False).first.wait_for(timeout=120_000)
    settle(page)


def test_every_page_in_headless_chromium(app_server: str) -> None:
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: install the Debian packages chromium and chromium-driver "
                    "(`make system-deps` or `apt-get install chromium chromium-driver`).")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            context = browser.new_context(viewport={"width": 1400, "height": 900}, accept_downloads=True)
            outside = guard_network(context)
            page = context.new_page()
            # A fresh server's first request is a page URL (a bookmark, a reload after a restart): it must
            # still run through app.py's navigation, with the site picker and the page titles.
            page.goto(f"{app_server}/search")
            settle(page)
            sidebar = page.locator('[data-testid="stSidebar"]').inner_text()
            assert "Site" in sidebar and "Chat" in sidebar and "Retention" in sidebar, sidebar[:300]
            # First run: every page on an empty database.
            for name, path in PAGES.items():
                page.goto(f"{app_server}/{path}")
                settle(page)
                check_and_shoot(page, f"empty-{name}", outside)
            for name in ("chat", "search", "ingestion"):
                page.goto(f"{app_server}/{PAGES[name]}")
                settle(page)
                assert page.get_by_role("button", name="Index the sample corpus").count() == 1, name

            # One click indexes the sample corpus; then chat, search and every other page with data.
            page.goto(f"{app_server}/")
            settle(page)
            page.get_by_role("button", name="Index the sample corpus").click()
            page.get_by_text("chunks in", exact=False).first.wait_for(timeout=180_000)
            settle(page)
            check_and_shoot(page, "sample-corpus-indexed", outside)

            page.goto(f"{app_server}/")
            settle(page)
            page.get_by_placeholder("Ask about your documents").fill("How do I connect to my own PostgreSQL server?")
            page.keyboard.press("Enter")
            page.get_by_text("Sources (", exact=False).first.wait_for(timeout=120_000)
            settle(page)
            assert page.get_by_text("DATABASE_URL", exact=False).count() > 0
            page.locator('[data-testid="stChatMessage"]').first.scroll_into_view_if_needed()
            check_and_shoot(page, "data-chat", outside)

            search_for(page, app_server, "hybrid search fuses BM25")
            assert page.get_by_text("Why this hit", exact=False).count() > 0
            check_and_shoot(page, "data-search", outside)
            # A click on a bar of the type facet narrows the results to that type (plotly on_select).
            bar = page.locator(".js-plotly-plot .point path").first.bounding_box()  # plotly takes clicks on its
            page.mouse.click(bar["x"] + bar["width"] / 2, bar["y"] + bar["height"] / 2)  # drag layer, at the bar
            page.get_by_text("Narrowed by the charts to type md", exact=False).wait_for(timeout=60_000)
            settle(page)
            check_and_shoot(page, "data-search-facet", outside)

            # The CSV download holds every result of the search, not only the page shown.
            search_for(page, app_server, "document")
            slider = page.locator('[data-testid="stSidebar"]').get_by_role("slider").first  # results per page
            slider.focus()
            page.keyboard.press("ArrowLeft")  # 10 -> 5 per page
            page.get_by_text("Page 1 of 2", exact=False).wait_for(timeout=60_000)
            settle(page)
            summary = page.locator('[data-testid="stMainBlockContainer"]').get_by_text("documents ·", exact=False)
            total = int(summary.first.inner_text().split()[0])  # the results' count, not the sidebar's
            assert total > 5  # more than the page shown
            with page.expect_download(timeout=120_000) as download:
                page.get_by_role("button", name="CSV").click()
            with open(download.value.path(), encoding="utf-8", newline="") as fh:
                rows = list(csv.DictReader(fh))  # highlights may hold line breaks inside their quoted cell
            assert len(rows) == total and [int(r["rank"]) for r in rows] == list(range(1, total + 1))
            # Mark the first hit relevant: it becomes part of the user's judged set on the Analytics page.
            page.get_by_role("button", name="Mark relevant").first.click()
            page.get_by_role("button", name="Relevant", exact=True).first.wait_for(timeout=60_000)
            settle(page)
            check_and_shoot(page, "data-search-judged", outside)

            # A chat Reset asks first (a reload starts a new conversation: pick the stored one).
            page.goto(f"{app_server}/")
            settle(page)
            page.locator('[data-testid="stSidebar"] [data-testid="stSelectbox"]').nth(1).click()
            page.get_by_role("option", name="How do I connect", exact=False).first.click()
            settle(page)
            page.get_by_role("button", name="Reset").click()
            page.get_by_text("for good?", exact=False).wait_for(timeout=60_000)
            settle(page)
            check_and_shoot(page, "data-chat-reset-confirm", outside)
            page.get_by_role("button", name="Delete", exact=True).click()
            page.get_by_text("Conversation deleted", exact=False).wait_for(timeout=60_000)
            settle(page)
            check_and_shoot(page, "data-chat-reset-done", outside)

            for name in ("ingestion", "retention", "analytics"):
                page.goto(f"{app_server}/{PAGES[name]}")
                settle(page)
                if name == "ingestion":
                    page.get_by_role("tab", name="Web pages").click()
                    settle(page)
                    assert page.get_by_role("button", name="Crawl", exact=True).is_disabled()  # empty allowlist
                if name == "retention":
                    page.get_by_role("button", name="Dry run", exact=False).click()
                    page.get_by_text("would delete", exact=False).wait_for(timeout=60_000)
                    settle(page)
                    page.get_by_text("would delete", exact=False).scroll_into_view_if_needed()
                if name == "analytics":
                    page.get_by_role("button", name="Evaluate 1 query").click()
                    page.get_by_text("Per query", exact=False).wait_for(timeout=120_000)
                    settle(page)
                check_and_shoot(page, f"data-{name}", outside)
            assert page.get_by_text("Search volume", exact=False).count() > 0  # the searches above were logged
            assert page.get_by_text("Developers' benchmark sets", exact=False).count() == 1
        finally:
            browser.close()


def launch_chromium(pw):
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: install the Debian packages chromium and chromium-driver "
                    "(`make system-deps` or `apt-get install chromium chromium-driver`).")
    return pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)


def test_rename_and_delete_act_on_the_open_conversation(app_server: str, browser_db_url: str) -> None:
    """Two stored conversations; the older one is opened from the sidebar: Rename and Delete change that one,
    never the other, and a new, unsaved conversation offers no Delete that could reach a stored one."""
    from playwright.sync_api import sync_playwright

    from rag_core import open_workbench

    with sync_playwright() as pw:
        browser = launch_chromium(pw)
        try:
            page = browser.new_context(viewport={"width": 1400, "height": 900}).new_page()
            # The app opens (and migrates) the store before the test writes to it; not on the Chat page, whose
            # conversation list would stay cached for a while.
            page.goto(f"{app_server}/search")
            settle(page)
            wb = open_workbench(database_url=browser_db_url)
            try:
                for sid, title in (("browser-alpha", "Alpha trip"), ("browser-beta", "Beta budget")):
                    wb.chat_append(sid, "user", f"A question of {title}")
                    wb.chat_append(sid, "assistant", f"The answer of {title}")
                    wb.rename_session(sid, title)  # beta, written last, heads the list

                page.goto(f"{app_server}/")
                settle(page)
                sidebar = page.locator('[data-testid="stSidebar"]')
                sidebar.locator('[data-testid="stSelectbox"]').nth(1).click()  # 0 is the site picker
                page.get_by_role("option", name="Alpha trip", exact=False).first.click()
                settle(page)
                assert page.get_by_text("The answer of Alpha trip").count() == 1  # alpha is the one on screen

                sidebar.get_by_text("Rename or delete", exact=False).click()
                box = sidebar.get_by_label("New title")
                box.fill("Alpha renamed")
                box.press("Enter")
                settle(page)
                sidebar.get_by_role("button", name="Rename").click()
                page.get_by_text("Renamed to", exact=False).first.wait_for(timeout=60_000)
                settle(page)
                titles = {s["id"]: s["title"] for s in wb.list_sessions()}
                assert titles == {"browser-alpha": "Alpha renamed", "browser-beta": "Beta budget"}, titles

                if not sidebar.get_by_label("New title").is_visible():
                    sidebar.get_by_text("Rename or delete", exact=False).click()
                sidebar.get_by_text("Delete it and its messages for good").click()
                settle(page)
                sidebar.get_by_role("button", name="Delete conversation").click()
                page.get_by_text("Deleted 'Alpha renamed'", exact=False).first.wait_for(timeout=60_000)
                settle(page)
                assert [s["id"] for s in wb.list_sessions()] == ["browser-beta"]

                # A new conversation is open: nothing stored is its to rename or delete.
                sidebar.get_by_role("button", name="New").click()
                settle(page)
                manage = sidebar.get_by_text("Rename or delete", exact=False)
                if manage.count():
                    manage.first.click()
                    settle(page)
                    sure = sidebar.get_by_text("Delete it and its messages for good")
                    if sure.count():
                        sure.click()
                        settle(page)
                        sidebar.get_by_role("button", name="Delete conversation").click()
                        settle(page)
                assert [s["id"] for s in wb.list_sessions()] == ["browser-beta"]
                check_and_shoot(page, "chat-manage-open-conversation")
            finally:
                wb.close()
        finally:
            browser.close()
