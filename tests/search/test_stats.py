"""BM25 statistics stay equal to what the chunks say: re-ingest, delete (cascade), concurrent writers."""

from __future__ import annotations

import threading

from rag_core.ingest import store


def stats_from_ledger(wb, site: str) -> tuple[dict[str, int], tuple[int, int]]:
    with wb.db.connection() as conn:
        df = dict(conn.execute("SELECT lexeme, sum(df)::int FROM term_stats WHERE site_id = %s GROUP BY 1"
                               " HAVING sum(df) <> 0", (site,)).fetchall())
        n, length = conn.execute("SELECT coalesce(sum(n_chunks), 0)::int, coalesce(sum(sum_len), 0)::int"
                                 " FROM corpus_stats WHERE site_id = %s", (site,)).fetchone()
    return df, (n, length)


def stats_from_chunks(wb, site: str) -> tuple[dict[str, int], tuple[int, int]]:
    with wb.db.connection() as conn:
        df = dict(conn.execute("SELECT l, count(*)::int FROM chunks, unnest(tsvector_to_array(fts)) l"
                               " WHERE site_id = %s GROUP BY 1", (site,)).fetchall())
        n, length = conn.execute("SELECT count(*)::int, coalesce(sum(fts_len), 0)::int FROM chunks WHERE site_id = %s",
                                 (site,)).fetchone()
    return df, (n, length)


def test_fts_len_counts_lexeme_occurrences(wb, site) -> None:
    wb.ingest_texts([{"source": "a.md", "text": "alarm alarm panel", "title": "Alarm"}], site_id=site)
    with wb.db.connection() as conn:
        fts, length = conn.execute("SELECT fts::text, fts_len FROM chunks WHERE site_id = %s", (site,)).fetchone()
    assert length == 4 and "'alarm':1,2,3" in fts  # the title is indexed with the text


def test_stats_follow_reingest_delete_and_cascade(wb, site) -> None:
    wb.ingest_texts([{"source": "a.md", "text": "Smoke detectors in corridors.", "title": "A"},
                     {"source": "b.md", "text": "Smoke vents on the roof.", "title": "B"}], site_id=site)
    assert stats_from_ledger(wb, site) == stats_from_chunks(wb, site)
    assert stats_from_ledger(wb, site)[0]["smoke"] == 2
    wb.ingest_texts([{"source": "a.md", "text": "Heat detectors in kitchens.", "title": "A"}], site_id=site)  # changed
    df, _ = stats_from_ledger(wb, site)
    assert stats_from_ledger(wb, site) == stats_from_chunks(wb, site)
    assert df["smoke"] == 1 and df["heat"] == 1 and "corridor" not in df
    wb.delete_source("b.md", site_id=site)
    assert stats_from_ledger(wb, site) == stats_from_chunks(wb, site)
    with wb.db.connection() as conn:  # a cascade from documents issued by hand, not through the store
        conn.execute("DELETE FROM documents WHERE site_id = %s", (site,))
    assert stats_from_ledger(wb, site) == ({}, (0, 0))


def test_compaction_folds_the_ledger_without_changing_it(wb, site) -> None:
    for i in range(4):
        wb.ingest_texts([{"source": f"{i}.md", "text": f"Pump {i} pressure test number {i}.", "title": f"P{i}"}], site_id=site)
    before = stats_from_ledger(wb, site)
    store.compact_term_stats(wb.db, [site], force=True)
    assert stats_from_ledger(wb, site) == before == stats_from_chunks(wb, site)
    with wb.db.connection() as conn:
        rows, pending = conn.execute("SELECT count(*), count(*) FILTER (WHERE NOT compacted) FROM term_stats"
                                     " WHERE site_id = %s", (site,)).fetchone()
    assert pending == 0 and rows == len(before[0])


def test_two_writers_on_one_site_at_once(wb, site) -> None:
    """Concurrent ingests into the same site neither deadlock nor lose a delta."""
    from rag_core.db.database import Database
    from rag_core.workbench import Workbench

    errors: list[BaseException] = []

    def writer(tag: str) -> None:
        other = Workbench(wb.settings, Database(wb.database_url, pool_size=2), wb.database_url, False,
                          embedder=wb.embedder)
        try:
            for round_ in range(3):
                other.ingest_texts([{"source": f"{tag}-{i}.md", "title": tag,
                                     "text": f"Shared words: valve pump hydrant {tag} round {round_} item {i}."}
                                    for i in range(6)], site_id=site)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
        finally:
            other.close()

    threads = [threading.Thread(target=writer, args=(t,)) for t in ("left", "right")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert stats_from_ledger(wb, site) == stats_from_chunks(wb, site)
    assert stats_from_ledger(wb, site)[0]["valv"] == 12


def test_an_update_checks_its_rows_in_one_pass_and_the_ledgers_follow(wb, site) -> None:
    """The UPDATE triggers first ask whether anything they keep changed (migration 0010): that check reads the
    old and new rows with a hash join, never a nested loop comparing every old row with every new one (an
    UPDATE of 4,000 chunks took 17 s). Then an update of other columns leaves statistics and postings alone,
    and an update of the text's lexemes moves both."""
    from psycopg import connect

    from rag_core.db.database import plain_url

    wb.ingest_texts([{"source": f"u{i}.md", "title": "U", "text": f"Valve pump number {i} in hall {i % 7}."}
                     for i in range(300)], site_id=site)
    before = stats_from_ledger(wb, site)
    with wb.db.connection() as conn:
        postings = conn.execute("SELECT count(*), sum(tf) FROM postings WHERE site_id = %s", (site,)).fetchone()
    plans: list[str] = []
    with connect(plain_url(wb.database_url), autocommit=True) as conn:
        conn.add_notice_handler(lambda notice: plans.append(notice.message_primary or ""))
        conn.execute("LOAD 'auto_explain'")
        for name, value in (("log_min_duration", "0"), ("log_nested_statements", "on"), ("log_analyze", "on"),
                            ("log_timing", "off"), ("log_level", "notice")):
            conn.execute(f"SET auto_explain.{name} = {value}")
        conn.execute("SET client_min_messages = notice")
        assert conn.execute("UPDATE chunks SET metadata = metadata || '{\"checked\": true}'"
                            " WHERE site_id = %s", (site,)).rowcount == 300
    checks = [p for p in plans if "rag_old_chunks o JOIN rag_new_chunks n" in p]
    assert len(checks) == 2, plans   # one per trigger: statistics and postings
    for plan in checks:
        assert "Hash Join" in plan and "Nested Loop" not in plan, plan
    assert stats_from_ledger(wb, site) == before
    with wb.db.connection() as conn:
        assert conn.execute("SELECT count(*), sum(tf) FROM postings WHERE site_id = %s", (site,)).fetchone() == postings
        conn.execute("UPDATE chunks SET fts = to_tsvector('english', 'hydrant hydrant') WHERE site_id = %s"
                     " AND document_id = (SELECT id FROM documents WHERE site_id = %s AND source = 'u0.md')",
                     (site, site))
        assert conn.execute("SELECT tf FROM postings WHERE site_id = %s AND lexeme = 'hydrant'",
                            (site,)).fetchall() == [(2,)]
    assert stats_from_ledger(wb, site) == stats_from_chunks(wb, site)
    assert stats_from_ledger(wb, site)[0]["hydrant"] == 1
