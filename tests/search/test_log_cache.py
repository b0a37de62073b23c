"""Query log and metrics, the TTL cache and its invalidation, suggestions from real data, tenants."""

from __future__ import annotations

import time

import pytest

from rag_core.search.cache import SearchCache


def log_rows(wb, site: str) -> list[tuple]:
    wb.flush_search_log()  # the log is written in the background
    with wb.db.connection() as conn:
        return conn.execute(
            "SELECT query, mode, result_count, error_code, user_id, params->>'cache', params->>'limit', duration_ms"
            " FROM query_log WHERE site_id = %s ORDER BY id", (site,)).fetchall()


def test_every_search_is_logged_and_metrics_summarise_them(wb, site) -> None:
    wb.ingest_texts([{"source": "a.md", "text": "Ventilation ducts need fire dampers.", "title": "Ducts"}], site_id=site)
    wb.search("fire dampers", site_id=site, user_id="u1", limit=5)
    wb.search("fire dampers", site_id=site, user_id="u1", limit=5)   # cache hit, still logged
    wb.search("zebra crossing", mode="fulltext", site_id=site)          # zero results
    with pytest.raises(Exception):
        wb.search("", site_id=site)
    rows = log_rows(wb, site)
    assert [(r[0], r[1], r[3], r[5]) for r in rows] == [
        ("fire dampers", "hybrid", None, "miss"), ("fire dampers", "hybrid", None, "hit"),
        ("zebra crossing", "fulltext", None, "miss"), ("", "hybrid", "INVALID_QUERY", None)]
    assert rows[0][2] == 1 and rows[0][4] == "u1" and rows[0][6] == "5" and rows[0][7] > 0
    metrics = wb.search_metrics(site_id=site)
    assert (metrics["searches"], metrics["errors"], metrics["zero_results"], metrics["cache_hits"]) == (4, 1, 1, 1)
    assert metrics["p95_ms"] >= metrics["p50_ms"] > 0 and metrics["avg_ms"] > 0
    assert metrics["popular_queries"][0] == {**metrics["popular_queries"][0], "query": "fire dampers", "count": 2}
    assert [q["query"] for q in metrics["zero_result_queries"]] == ["zebra crossing"]
    assert metrics["errors_by_code"] == {"INVALID_QUERY": 1}
    # Where the time went, stage by stage (the cache hit and the failure ran no stage).
    assert set(metrics["stage_p50_ms"]) == {"embed", "core", "highlights", "suggestions", "response"}
    assert all(v >= 0 for v in metrics["stage_p50_ms"].values()) and metrics["stage_p50_ms"]["core"] > 0
    assert len(metrics["daily"]) == 1 and metrics["daily"][0]["searches"] == 4
    assert wb.search_metrics(site_id=site, since="2999-01-01")["searches"] == 0


def test_cache_hit_and_invalidation_by_ingest_and_delete(wb, site) -> None:
    wb.ingest_texts([{"source": "a.md", "text": "Cable trays must be grounded.", "title": "Cables"}], site_id=site)
    first = wb.search("cable trays grounded", site_id=site)
    second = wb.search("cable trays grounded", site_id=site)
    assert second["results"] == first["results"]
    assert log_rows(wb, site)[-1][5] == "hit"
    second["results"].clear()  # callers cannot corrupt the cache
    assert wb.search("cable trays grounded", site_id=site)["results"] == first["results"]

    wb.ingest_texts([{"source": "b.md", "text": "Cable trays in tunnels are grounded twice.", "title": "Tunnels"}],
                    site_id=site)
    after_ingest = wb.search("cable trays grounded", site_id=site)
    assert log_rows(wb, site)[-1][5] == "miss" and after_ingest["total_results"] == 2

    wb.delete_source("b.md", site_id=site)
    after_delete = wb.search("cable trays grounded", site_id=site)
    assert log_rows(wb, site)[-1][5] == "miss" and after_delete["total_results"] == 1


def test_cache_expires_after_its_ttl() -> None:
    cache = SearchCache(ttl_sec=0.05)
    cache.put("k", b'{"v": 1}')
    assert cache.get("k") == b'{"v": 1}'
    time.sleep(0.06)
    assert cache.get("k") is None
    assert SearchCache(ttl_sec=0).get("k") is None


def test_suggestions_come_from_the_log_and_the_hits_only(wb, site) -> None:
    wb.ingest_texts([
        {"source": "1.md", "title": "Sprinklers", "text": "Sprinkler systems protect warehouses; sprinkler heads open at 68 C."},
        {"source": "2.md", "title": "Warehouses", "text": "Warehouses store pallets; sprinkler coverage reaches every rack."},
        {"source": "3.md", "title": "Racks", "text": "Racks in warehouses need sprinkler heads between levels."},
    ] + [{"source": f"other{i}.md", "title": f"Other {i}", "text": f"Elevator shaft {i} needs a pressure test of doors."}
         for i in range(5)], site_id=site)
    engine = wb.search_engine
    fresh = engine.search("sprinkler", site_id=site, use_cache=False)["suggestions"]
    assert fresh and all(s.startswith("sprinkler ") for s in fresh)
    words = {"warehouses", "heads"}
    assert {s.split()[-1].lower() for s in fresh} <= words  # recurring words of the hits, nothing invented
    wb.search("sprinkler heads in racks", site_id=site)
    wb.search("sprinkler heads in racks", site_id=site)
    wb.search("elevator shaft doors", site_id=site)  # shares no term: never suggested for "sprinkler"
    wb.flush_search_log()  # suggestions read the log, which a background thread writes
    later = engine.search("sprinkler", site_id=site, use_cache=False)["suggestions"]
    assert later[0] == "sprinkler heads in racks" and "elevator shaft doors" not in later
    assert len(later) <= 3


def test_recent_queries_come_from_the_table_and_from_this_process(wb, site) -> None:
    """Suggestions read the log once per refresh interval; this process's own searches count at once."""
    from rag_core.search.querylog import log_search
    from rag_core.search.suggestions import RecentQueries

    def logged(query: str, terms: list[str], found: int, code: str | None = None) -> None:
        log_search(wb.db, query=query, mode="hybrid", params={"terms": terms}, result_count=found, duration_ms=1.0,
                   site_id=site, user_id=None, error_code=code)

    fresh = RecentQueries(wb.db, refresh_sec=0)
    assert fresh.matching(site, "valves", ["valv"], 3) == []
    logged("valves in pumps", ["valv", "pump"], 2)
    logged("Valves in pumps", ["valv", "pump"], 1)
    logged("valve seats", ["valv", "seat"], 1)
    logged("valve failures", ["valv", "failur"], 0)            # found nothing: never suggested
    logged("valve leaks", ["valv", "leak"], 0, "INVALID_QUERY")  # failed: never suggested
    logged("pump curves", ["pump", "curv"], 3)                  # shares no term with "valves"
    wb.flush_search_log()
    assert fresh.matching(site, "valves", ["valv"], 3) == ["Valves in pumps", "valve seats"]  # most often first
    assert fresh.matching(site, "valve seats", ["valv", "seat"], 1) == ["Valves in pumps"]  # never itself
    slow = RecentQueries(wb.db, refresh_sec=3600)
    assert slow.matching(site, "curves", ["curv"], 3) == ["pump curves"]
    logged("curved pipes", ["curv", "pipe"], 1)  # another worker's search: seen at the next refresh
    wb.flush_search_log()
    assert slow.matching(site, "curves", ["curv"], 3) == ["pump curves"]
    assert fresh.matching(site, "curves", ["curv"], 3) == ["curved pipes", "pump curves"]
    import datetime as dt

    slow.note(site, "curve radius", ["curv", "radius"], dt.datetime.now(dt.timezone.utc))  # this process's: at once
    assert slow.matching(site, "curves", ["curv"], 3) == ["curve radius", "pump curves"]


def test_own_searches_past_the_window_are_forgotten(wb, site) -> None:
    """This process's searches are found by term; only the newest `window` of them count."""
    import datetime as dt

    from rag_core.search.suggestions import RecentQueries

    recent = RecentQueries(wb.db, refresh_sec=3600, window=3)
    assert recent.matching(site, "gauges", ["gaug"], 5) == []  # the site's log, read once, is empty
    now = dt.datetime.now(dt.timezone.utc)
    for i in range(10):  # the oldest seven leave the window; the index is rebuilt on the way
        recent.note(site, f"gauge {i}", ["gaug", f"n{i}"], now + dt.timedelta(seconds=i))
    assert recent.matching(site, "gauges", ["gaug"], 5) == ["gauge 9", "gauge 8", "gauge 7"]
    assert recent.matching(site, "n2", ["n2"], 5) == []
    assert recent.matching(site, "n8 gauges", ["n8", "gaug"], 5) == ["gauge 9", "gauge 8", "gauge 7"]  # each once
    assert recent.matching(site, "n8", ["n8"], 5) == ["gauge 8"]


def test_tenant_isolation_and_eval_sites_stay_out_of_every_site_searches(wb, site) -> None:
    secret = "quokkavault"
    wb.ingest_texts([{"source": "mine.md", "text": f"The {secret} manual of tenant A.", "title": "Mine"}], site_id=site)
    other = f"{site}-b"
    evaluation = f"eval:{site}"
    try:
        wb.ingest_texts([{"source": "theirs.md", "text": f"The {secret} manual of tenant B.", "title": "Theirs"}],
                        site_id=other)
        wb.ingest_texts([{"source": "eval.md", "text": f"The {secret} manual of the benchmark.", "title": "Eval"}],
                        site_id=evaluation)
        wb.search(f"{secret} manual tenant B", site_id=other)  # B's log must not feed A's suggestions
        for mode in ("hybrid", "semantic", "fulltext"):
            mine = wb.search(f"{secret} manual", mode=mode, site_id=site)
            assert {r["site_id"] for r in mine["results"]} == {site}
            assert sum(mine["facets"]["document_types"].values()) == mine["total_results"] == 1
            assert all("tenant b" not in s.lower() for s in mine["suggestions"])
            everyone = wb.search(f"{secret} manual", mode=mode, limit=50)
            assert evaluation not in {r["site_id"] for r in everyone["results"]}
        found = {r["site_id"] for r in wb.search(secret, mode="fulltext", limit=50)["results"]}
        assert {site, other} <= found and evaluation not in found
        assert wb.search(secret, mode="fulltext", site_id=evaluation)["total_results"] == 1
        assert wb.search_metrics(site_id=evaluation)["searches"] == 1
        everyone_metrics = wb.search_metrics(since="2000-01-01")
        assert all(secret not in q["query"] or "tenant B" in q["query"] or q["query"].startswith(secret)
                   for q in everyone_metrics["popular_queries"])
    finally:
        with wb.db.connection() as conn:
            conn.execute("DELETE FROM documents WHERE site_id = ANY(%s)", ([other, evaluation],))
