"""The query log leaves the search's critical path, and loses nothing on a clean shutdown."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import uuid

import psycopg

from rag_core.db.database import Database
from rag_core.search.querylog import log_search


def count_rows(url: str, site: str) -> int:
    with psycopg.connect(url) as conn:
        return conn.execute("SELECT count(*) FROM query_log WHERE site_id = %s", (site,)).fetchone()[0]


def test_a_search_does_not_wait_for_its_log_row(wb, site, pg_url) -> None:
    wb.ingest_texts([{"source": "a.md", "text": "Smoke detectors sit on every ceiling.", "title": "Smoke"}],
                    site_id=site)
    done = threading.Event()
    # Another session holds a lock that blocks INSERTs into the log (reads go on): a search that
    # wrote its row in place would hang here until the lock is released.
    with psycopg.connect(pg_url) as blocker:
        blocker.execute("LOCK TABLE query_log IN EXCLUSIVE MODE")
        worker = threading.Thread(target=lambda: (wb.search("smoke detectors", site_id=site), done.set()),
                                  daemon=True)
        worker.start()
        finished = done.wait(120)
        blocker.rollback()
    worker.join(60)
    assert finished, "the search waited for the query log's INSERT"
    assert wb.flush_search_log()
    assert count_rows(pg_url, site) == 1


def test_closing_the_database_writes_every_queued_row(pg_url) -> None:
    site = f"t-log-close-{uuid.uuid4().hex[:6]}"
    db = Database(pg_url, pool_size=2)
    for i in range(2500):  # more than one batch
        log_search(db, query=f"q{i}", mode="fulltext", params={"i": i}, result_count=i % 3, duration_ms=1.0,
                   site_id=site, user_id=None)
    db.close()
    assert count_rows(pg_url, site) == 2500


def test_a_process_that_exits_without_closing_still_writes_its_rows(pg_url, tmp_path) -> None:
    site = f"t-log-exit-{uuid.uuid4().hex[:6]}"
    script = (
        "import sys\n"
        "from rag_core.db.database import Database\n"
        "from rag_core.search.querylog import log_search\n"
        "db = Database(sys.argv[1], pool_size=2)\n"
        "for i in range(700):\n"
        "    log_search(db, query=f'q{i}', mode='hybrid', params={}, result_count=1, duration_ms=1.0,\n"
        "               site_id=sys.argv[2], user_id=None)\n"
    )
    run = subprocess.run([sys.executable, "-c", script, pg_url, site], capture_output=True, text=True, timeout=120,
                         cwd=tmp_path, env={**os.environ})
    assert run.returncode == 0, run.stderr[-2000:]
    assert count_rows(pg_url, site) == 700


def test_metrics_see_the_searches_just_made(wb, site) -> None:
    wb.ingest_texts([{"source": "a.md", "text": "Fire hoses hang in every stairwell.", "title": "Hoses"}],
                    site_id=site)
    for query in ("fire hoses", "stairwell hoses", "fire stairwell"):
        wb.search(query, site_id=site)
    assert wb.search_metrics(site_id=site)["searches"] == 3
    assert wb.search_latency_histogram(site_id=site)["searches"] == 3
