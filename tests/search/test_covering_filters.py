"""A type or date filter that keeps every document of its scope is dropped before planning (the unfiltered,
cheaper plan), read from the documents as they are now: a document added, re-ingested or re-dated brings the
filter back at once, and the results are the same either way."""

from __future__ import annotations

import datetime as dt
import os
from pathlib import Path

import pytest
from filebuilders import ingest_dated_files

from rag_core.search.planner import PlannerSettings, plan_search, without_covering_filters
from rag_core.search.sql import Scope

FILES = [  # name, date, text
    ("a/fire_jan.md", "2024-01-15", "Fire alarm inspection report for the north wing."),
    ("a/fire_feb.txt", "2024-02-10", "Fire alarm maintenance: detectors replaced in the south wing."),
    ("a/fire_feb2.md", "2024-02-20", "Fire alarm wiring plan for the new school building."),
]


@pytest.fixture
def dated_site(wb, tmp_path: Path) -> tuple[str, Path]:
    site_id = ingest_dated_files(wb, tmp_path, FILES, "t-cover")
    yield site_id, tmp_path
    with wb.db.connection() as conn:
        conn.execute("DELETE FROM documents WHERE site_id = %s", (site_id,))


def page(wb, site: str, **filters) -> tuple:
    """What a search shows: every result's source, score and chunks, the total and the facets."""
    response = wb.search_engine.search("fire alarm wing", site_id=site, use_cache=False, **filters)
    return ([(Path(r["file_path"]).name, round(r["score"], 6), [c["chunk_id"] for c in r["context_chunks"]])
             for r in response["results"]], response["total_results"], response["facets"])


def effective(wb, scope: Scope) -> Scope:
    with wb.db.connection() as conn:
        return without_covering_filters(conn, scope)


def redate(path: Path, day: str) -> None:
    stamp = dt.datetime.fromisoformat(day).replace(hour=12, tzinfo=dt.timezone.utc).timestamp()
    os.utime(path, (stamp, stamp))


def test_a_type_filter_covering_every_type_is_dropped_until_another_type_arrives(wb, dated_site) -> None:
    site, root = dated_site
    every_type = Scope(site, types=("md", "txt"))
    assert effective(wb, every_type) == Scope(site)
    assert effective(wb, Scope(site, types=("md",))) == Scope(site, types=("md",))
    for mode in ("fulltext", "semantic", "hybrid"):
        assert page(wb, site, mode=mode, types=["md", "txt"]) == page(wb, site, mode=mode)

    # A csv document joins the site: the same filter now excludes it, and is kept.
    (root / "b").mkdir()
    (root / "b" / "fire_mar.csv").write_text("item,note\nfire alarm panel,checked in the west wing\n", encoding="utf-8")
    redate(root / "b" / "fire_mar.csv", "2024-03-05")
    assert wb.ingest_paths([root], site_id=site).count("indexed") == 1
    assert effective(wb, every_type) == every_type
    filtered, unfiltered = page(wb, site, types=["md", "txt"]), page(wb, site)
    assert "fire_mar.csv" in {name for name, _, _ in unfiltered[0]}
    assert "fire_mar.csv" not in {name for name, _, _ in filtered[0]}
    assert filtered[1] == unfiltered[1] - 1


def test_a_date_range_covering_every_document_is_dropped_until_one_falls_outside(wb, dated_site) -> None:
    site, root = dated_site
    year = Scope(site, date_from=dt.date(2024, 1, 1), date_to=dt.date(2024, 2, 20))  # date_to is inclusive
    assert effective(wb, year) == Scope(site)
    assert effective(wb, Scope(site, date_from=dt.date(2024, 1, 16))).date_from == dt.date(2024, 1, 16)
    assert effective(wb, Scope(site, date_to=dt.date(2024, 2, 19))).date_to == dt.date(2024, 2, 19)
    window = {"date_from": "2024-01-01", "date_to": "2024-02-20"}
    for mode in ("fulltext", "hybrid"):
        assert page(wb, site, mode=mode, **window) == page(wb, site, mode=mode)

    # A document edited and re-ingested with a date past the range: the range is checked again and excludes it.
    (root / "a" / "fire_feb.txt").write_text("Fire alarm maintenance: detectors replaced in the east wing.",
                                             encoding="utf-8")
    redate(root / "a" / "fire_feb.txt", "2024-06-01")
    assert wb.ingest_paths([root], site_id=site).count("updated") == 1
    assert effective(wb, year) == Scope(site, date_to=dt.date(2024, 2, 20))  # every date is still past date_from
    assert "fire_feb.txt" not in {name for name, _, _ in page(wb, site, **window)[0]}
    assert "fire_feb.txt" in {name for name, _, _ in page(wb, site)[0]}


def test_a_document_without_a_date_keeps_a_date_filter(wb, dated_site) -> None:
    """A date filter excludes undated documents, so it never covers a scope that holds one."""
    site, _ = dated_site
    with wb.db.connection() as conn:
        conn.execute("UPDATE documents SET doc_date = NULL WHERE site_id = %s AND source LIKE %s", (site, "%fire_jan%"))
    wide = Scope(site, date_from=dt.date(2000, 1, 1))
    assert effective(wb, wide) == wide
    assert "fire_jan.md" not in {name for name, _, _ in page(wb, site, date_from="2000-01-01")[0]}


def test_the_hashed_set_of_a_large_filter_gets_the_work_mem_it_needs(wb, dated_site) -> None:
    """Hashed past work_mem, the set of the filtered documents spills to disk and is built again for every
    posting list it meets; the planner raises work_mem for the transaction when it chooses the set."""
    site, _ = dated_site
    scope = Scope(site, types=("md",))  # two of three documents: narrow under a share of 0.7
    settings = PlannerSettings(row_check_share=0.7, set_work_mem_bytes=64 * 2**20)
    with wb.db.connection() as conn:
        before = conn.execute("SELECT setting::bigint FROM pg_settings WHERE name = 'work_mem'").fetchone()[0]
        plan = plan_search(conn, scope, "fulltext", wb.search_engine.fusion, settings)
        during = conn.execute("SELECT setting::bigint FROM pg_settings WHERE name = 'work_mem'").fetchone()[0]
    with wb.db.connection() as conn:
        after = conn.execute("SELECT setting::bigint FROM pg_settings WHERE name = 'work_mem'").fetchone()[0]
    assert plan.target == 2
    assert during == 2 * 64 * 1024 > before == after  # kB, for this transaction only


def test_the_scope_bounds_and_the_search_read_one_snapshot(wb, dated_site, pg_url) -> None:
    """A document of another type stored between the look at the scope's types and the search must not pass the
    dropped type filter: with a type or date filter the search transaction is REPEATABLE READ."""
    import psycopg

    site, _ = dated_site
    with wb.db.connection() as conn:
        assert without_covering_filters(conn, Scope(site, types=("md", "txt"))) == Scope(site)
        assert conn.execute("SHOW transaction_isolation").fetchone()[0] == "repeatable read"
        # Another connection stores a csv document now; this transaction still sees the site as it was.
        with psycopg.connect(pg_url, autocommit=True) as other:
            doc = other.execute("INSERT INTO documents (site_id, source, file_type, content_hash, content, chunk_count)"
                                " VALUES (%s, 'late.csv', 'csv', 'x', 'x', 1) RETURNING id", (site,)).fetchone()[0]
        try:
            seen = conn.execute("SELECT count(*) FROM documents WHERE site_id = %s AND file_type = 'csv'",
                                (site,)).fetchone()[0]
        finally:
            with psycopg.connect(pg_url, autocommit=True) as other:
                other.execute("DELETE FROM documents WHERE id = %s", (doc,))
    assert seen == 0
    with wb.db.connection() as conn:  # an unfiltered search keeps the default isolation
        without_covering_filters(conn, Scope(site))
        assert conn.execute("SHOW transaction_isolation").fetchone()[0] == "read committed"
