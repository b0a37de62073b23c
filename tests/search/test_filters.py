"""Filters (types, dates, source, site), facets over the whole filtered set, pages, filtered HNSW search."""

from __future__ import annotations

import datetime as dt
from dataclasses import replace
from pathlib import Path

import numpy as np
import psycopg
import pytest
from filebuilders import ingest_dated_files
from storebuilders import clustered_chunks

from rag_core.db.database import plain_url
from rag_core.search import hybrid
from rag_core.search.planner import DEFAULT_PLANNER, PlannerSettings, plan_search
from rag_core.search.service import SearchEngine

FILES = [  # name, date, text
    ("a/fire_jan.md", "2024-01-15", "Fire alarm inspection report for the north wing."),
    ("a/fire_feb.txt", "2024-02-10", "Fire alarm maintenance: detectors replaced in the south wing."),
    ("a/fire_feb2.md", "2024-02-20", "Fire alarm wiring plan for the new school building."),
    ("b/fire_mar.csv", "2024-03-05", "item,note\nfire alarm panel,checked\nsmoke detector,replaced"),
    ("b/fire_dec.html", "2023-12-20", "<html><body><h1>Fire alarm</h1><p>Fire alarm test of December.</p></body></html>"),
    ("b/budget_mar.txt", "2024-03-25", "Budget for contractors and materials in March."),
]


@pytest.fixture(scope="module")
def files_site(wb, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path]:
    root = tmp_path_factory.mktemp("filtered")
    site_id = ingest_dated_files(wb, root, FILES, "t-filters")
    yield site_id, root.resolve()
    with wb.db.connection() as conn:
        conn.execute("DELETE FROM documents WHERE site_id = %s", (site_id,))


def names(response: dict) -> set[str]:
    return {Path(r["file_path"]).name for r in response["results"]}


def test_type_filter_and_its_facet(wb, files_site) -> None:
    site, _ = files_site
    response = wb.search("fire alarm", site_id=site, types=["md", "txt"])
    assert names(response) <= {"fire_jan.md", "fire_feb.txt", "fire_feb2.md", "budget_mar.txt"}
    assert {"fire_jan.md", "fire_feb.txt", "fire_feb2.md"} <= names(response)
    facet = response["facets"]["document_types"]
    assert set(facet) <= {"md", "txt"} and sum(facet.values()) == response["total_results"]
    assert wb.search("fire alarm", site_id=site, types="csv,html")["facets"]["document_types"] == {"csv": 1, "html": 1}


def test_date_filter_is_inclusive_and_the_date_facet_counts_months(wb, files_site) -> None:
    site, _ = files_site
    response = wb.search("fire alarm", mode="fulltext", site_id=site, date_from="2024-02-01", date_to="2024-03-05")
    assert names(response) == {"fire_feb.txt", "fire_feb2.md", "fire_mar.csv"}
    assert response["facets"]["date_distribution"] == {"2024-02": 2, "2024-03": 1}
    everything = wb.search("fire alarm", mode="fulltext", site_id=site)
    assert everything["facets"]["date_distribution"] == {"2023-12": 1, "2024-01": 1, "2024-02": 2, "2024-03": 1}


def test_source_filter_by_folder_prefix_or_part(wb, files_site) -> None:
    site, root = files_site
    by_prefix = wb.search("fire alarm", site_id=site, source=(root / "b").as_posix() + "/")
    assert names(by_prefix) == {"fire_mar.csv", "fire_dec.html"}  # the budget matches no word, nor in meaning
    everything_in_b = wb.search("fire alarm budget", site_id=site, source=(root / "b").as_posix() + "/")
    assert names(everything_in_b) == {"fire_mar.csv", "fire_dec.html", "budget_mar.txt"}
    by_part = wb.search("fire alarm", mode="fulltext", site_id=site, source="a/fire_feb")
    assert names(by_part) == {"fire_feb.txt", "fire_feb2.md"}
    odd = wb.search("fire alarm", site_id=site, source="%_\\'")
    assert odd["total_results"] == 0 and odd["results"] == []  # LIKE wildcards are literal


def test_pages_share_total_and_facets_and_cover_the_set(wb, files_site) -> None:
    site, _ = files_site
    pages = [wb.search("fire alarm", mode="fulltext", site_id=site, limit=2, page=p) for p in (1, 2, 3, 4)]
    total = pages[0]["total_results"]
    assert total == 5 and pages[0]["total_pages"] == 3
    assert all(p["total_results"] == total and p["facets"] == pages[0]["facets"] for p in pages)
    seen = [r["file_path"] for p in pages for r in p["results"]]
    assert len(seen) == len(set(seen)) == total and pages[3]["results"] == []
    assert [len(p["results"]) for p in pages] == [2, 2, 1, 0]
    assert sum(pages[0]["facets"]["document_types"].values()) == total


def test_no_match_after_filters_is_an_empty_page_not_an_error(wb, files_site) -> None:
    site, _ = files_site
    response = wb.search("fire alarm", site_id=site, date_from="2030-01-01")
    assert response["success"] and response["total_results"] == 0 and response["results"] == []


def test_selective_filter_on_hnsw_still_returns_rows(wb, site) -> None:
    """A crowd of near-identical vectors in another site fills the first HNSW candidates; pgvector's
    iterative scan keeps going until the filtered rows are found."""
    wb.ingest_texts([{"source": "target.md", "text": "Sprinkler heads must be tested every five years.",
                      "title": "Sprinklers"}], site_id=site)
    query = "sprinkler testing interval"
    q = np.asarray(wb.embedder.get_query_embedding(query), dtype=np.float32)
    rng = np.random.default_rng(7)
    crowd = q + rng.normal(0, 0.01, (400, q.size)).astype(np.float32)
    crowd /= np.linalg.norm(crowd, axis=1, keepdims=True)
    crowd_site = f"{site}-crowd"
    with wb.db.connection() as conn:
        doc_id = conn.execute(
            "INSERT INTO documents (site_id, source, file_type, content_hash, content, chunk_count)"
            " VALUES (%s, 'crowd.md', 'md', 'x', 'crowd', 400) RETURNING id", (crowd_site,)).fetchone()[0]
        with conn.cursor() as cur:
            cur.executemany(
                "INSERT INTO chunks (document_id, site_id, chunk_index, text, start_char, end_char, language, fts, embedding)"
                " VALUES (%s, %s, %s, 'crowd', 0, 5, 'en', to_tsvector('english', 'crowd'), %s)",
                [(doc_id, crowd_site, i, v) for i, v in enumerate(crowd)])
    try:
        large = PlannerSettings(exact_scan_max=0)  # the plan a large store gets
        fusion = hybrid.Fusion(candidates=20)
        scope = hybrid.Scope(site)
        sql = hybrid.build_statement("semantic", fusion, scope, "index", "chunks")
        params = hybrid.statement_params(scope, fusion, ["english"], [query], q) | {"k": 5}

        def run(iterative: bool) -> tuple[list[str], str]:
            with wb.db.connection() as conn:
                assert plan_search(conn, scope, "semantic", fusion, large).dense == "hnsw"
                conn.execute("SET LOCAL hnsw.ef_search = 20")
                if not iterative:
                    conn.execute("SET LOCAL hnsw.iterative_scan = off")
                # Make the planner walk the HNSW index as it does on a large store.
                conn.execute("SET LOCAL enable_seqscan = off")
                conn.execute("SET LOCAL enable_bitmapscan = off")
                conn.execute("SET LOCAL enable_sort = off")
                plan = "\n".join(r[0] for r in conn.execute("EXPLAIN " + sql, params, prepare=False))
                rows = conn.execute(sql, params, prepare=False).fetchall()
            return [r[3] for r in rows], plan

        found, plan = run(iterative=True)
        assert "chunks_embedding_hnsw_idx" in plan
        assert found == ["target.md"]
        missed, _ = run(iterative=False)
        assert missed == []  # without the iterative scan the crowd fills every candidate slot

        # Through the engine with the HNSW plan: the selective site filter still finds it.
        engine = SearchEngine(wb.db, wb.settings, lambda: wb.embedder, lambda: None,
                              fusion=wb.search_engine.fusion, planner=large)
        response = engine.search(query, mode="semantic", site_id=site, use_cache=False)
        assert [r["file_path"] for r in response["results"]] == ["target.md"]
        wb.flush_search_log()
        engine.cache.clear()
        with wb.db.connection() as conn:
            logged = conn.execute("SELECT params->>'plan' FROM query_log WHERE site_id = %s ORDER BY id DESC LIMIT 1",
                                  (site,)).fetchone()[0]
        assert logged == "hnsw"
    finally:
        with wb.db.connection() as conn:
            conn.execute("DELETE FROM documents WHERE site_id = %s", (crowd_site,))


@pytest.mark.parametrize(("row_check_share", "row_check_max"), [(1.0, 10**9), (0.0, 10**9), (1.0, 100)],
                         ids=["hashed-set", "row-lookup", "set-over-its-cap"])
def test_filtered_hnsw_top_equals_exact_within_the_filter(wb, site,
                                                          row_check_share: float, row_check_max: int) -> None:
    """A filter far from the query (its documents in another cluster than the query's nearest
    neighbours): the HNSW walk with either form of the per-row check returns the exact top within
    the filter, and the statement checks the filter against a hashed set when it is narrow."""
    centres, rng = clustered_chunks(wb, site)
    # Rows other tests deleted stay in the HNSW graph until a vacuum, and the walk still visits them.
    with psycopg.connect(plain_url(wb.database_url), autocommit=True) as conn:
        conn.execute("VACUUM chunks")
    query = centres["near"] + rng.normal(0, 0.1, len(centres["near"]))
    query = (query / np.linalg.norm(query)).astype(np.float32)
    # A set larger than the cap (120 far documents here) is not hashed: each row's document is looked up.
    checks = PlannerSettings(dense_row_check_share=row_check_share, dense_row_check_max=row_check_max)
    hashed = bool(row_check_share) and row_check_max >= 120
    scope = hybrid.Scope(site, source="far/")
    fusion = hybrid.Fusion(candidates=20)
    params = hybrid.statement_params(scope, fusion, ["english"], ["x"], query) | {"k": 10}

    def top(limit: int) -> tuple[list[str], str]:
        with wb.db.connection() as conn:
            _, _, plan, order, *_ = plan_search(conn, scope, "semantic", fusion, replace(checks, exact_scan_chunks=limit))
            if plan == "hnsw":
                # Make the planner walk the HNSW index as it does on a large store.
                conn.execute("SET LOCAL enable_sort = off")
            sql = hybrid.build_statement("semantic", fusion, scope, order, "chunks")
            explained = "\n".join(r[0] for r in conn.execute("EXPLAIN " + sql, params, prepare=False))
            rows = conn.execute(sql, params, prepare=False).fetchall()
        return [r[3] for r in rows], f"{plan} {order}\n{explained}"

    exact, exact_plan = top(10**9)
    walked, walked_plan = top(0)
    assert exact_plan.startswith("exact") and len(exact) == 10 and all(s.startswith("far/") for s in exact)
    # Ranked exactly, the filtered set is read from its documents, not from every chunk of the site.
    assert "chunks_document_index_key" in exact_plan and "chunks_site_idx" not in exact_plan
    assert walked_plan.startswith("hnsw " + ("index_set" if hashed else "index\n"))
    assert "chunks_embedding_hnsw_idx" in walked_plan
    assert ("hashed SubPlan" in walked_plan) == hashed
    assert walked == exact


@pytest.mark.parametrize("mode", ["fulltext", "hybrid"])
def test_a_broad_filter_is_looked_up_row_by_row_in_the_postings_walk_too(wb, files_site, mode: str) -> None:
    """Past the narrow bound the postings walk checks each posting's document instead of joining the set
    of every filtered document (which at 1M chunks overflowed work_mem and was rebuilt for every list):
    the same documents either way, and the statement then builds no such set at all."""
    site, _ = files_site
    large = PlannerSettings(exact_scan_chunks=0)  # the HNSW plan of a large store
    scope = hybrid.Scope(site, types=("md", "txt"))
    fusion = hybrid.Fusion()
    query = "fire alarm wing"
    emb = np.asarray(wb.embedder.get_query_embedding(query), dtype=np.float32) if mode == "hybrid" else None

    def run(row_check_share: float) -> tuple[list[str], str, str]:
        with wb.db.connection() as conn:
            _, languages, _, order, *_ = plan_search(conn, scope, mode, fusion, replace(large, row_check_share=row_check_share))
            configs, texts = hybrid.query_configs(query, languages)
            sql = hybrid.build_statement(mode, fusion, scope, order, "chunks")
            params = hybrid.statement_params(scope, fusion, configs, texts, emb) | {"k": 10}
            explained = "\n".join(r[0] for r in conn.execute("EXPLAIN " + sql, params, prepare=False))
            rows = conn.execute(sql, params, prepare=False).fetchall()
        return sorted(Path(r[3]).name for r in rows), order, explained

    as_set, set_order, set_plan = run(1.0)
    by_row, row_order, row_plan = run(0.0)
    assert set_order in ("exact", "index_set") and row_order == "index"
    assert "CTE fd" in set_plan and "CTE fd" not in row_plan and "documents_pkey" in row_plan
    assert by_row == as_set
    assert {"fire_jan.md", "fire_feb.txt", "fire_feb2.md"} <= set(by_row) <= {"fire_jan.md", "fire_feb.txt",
                                                                            "fire_feb2.md", "budget_mar.txt"}


def test_a_large_scope_tells_a_broad_filter_from_a_sample(wb, files_site) -> None:
    """A scope of many documents is sampled before its filter is counted: a sample that shows a filter
    clearly broad or clearly narrow decides alone, one near the narrow bound is counted exactly (an empty
    filter stays empty)."""
    site, _ = files_site
    with wb.db.connection() as conn:
        conn.execute("ANALYZE documents")  # the sample's size comes from the table's row estimate
    sampled = PlannerSettings(count_max_docs=0,     # every scope is "large"
                              sample_docs=10**6,    # ...and sampled whole, so the estimate is exact
                              exact_scan_chunks=0,
                              exact_scan_max=0)     # a count stops at the narrow bound plus one document
    fusion = hybrid.Fusion()

    counted: list[bool] = []

    class Recorder:  # notes whether the planner ran the count (its statement stops at a LIMIT)
        def __init__(self, conn) -> None:
            self.conn = conn

        def execute(self, sql: str, params=None):
            counted.append("LIMIT greatest" in sql)
            return self.conn.execute(sql, params)

    def prepared(scope: hybrid.Scope, row_check_max: int, share: float = 0.5) -> tuple[int, str]:
        counted.clear()
        with wb.db.connection() as conn:
            target, _, _, order, *_ = plan_search(Recorder(conn), scope, "hybrid", fusion,
                                              replace(sampled, row_check_max=row_check_max, row_check_share=share))
        return target, order

    broad = hybrid.Scope(site, types=("md", "txt", "csv"))  # 5 of the 6 one-chunk documents
    # The sample decides (a count would have stopped at 2 documents): broad, each row looked up.
    assert prepared(broad, 1) == (5, "index") and not any(counted)
    # Past the bound (half the scope, 3 documents) by more than sample_broad: broad without a count.
    assert prepared(broad, 10**6) == (5, "index") and not any(counted)
    # Near the bound (0.7 of the scope, 4.2 documents): counted up to the bound plus one.
    assert prepared(broad, 10**6, share=0.7) == (5, "index") and any(counted)
    # Well under the bound by the sample: narrow without a count, the filtered set is hashed.
    assert prepared(hybrid.Scope(site, types=("csv",)), 10**6) == (1, "index_set") and not any(counted)
    assert prepared(hybrid.Scope(site, date_from=dt.date(2030, 1, 1)), 1)[0] == 0


def test_filters_have_indexes_for_large_stores(wb, files_site) -> None:
    """A filter on part of a path (LIKE '%part%') is served by an index (migration 0005), not by reading
    every document's source: at 1M chunks that read cost 240 ms of a 360 ms search. The per-row check of
    a broad filter is index-only."""
    site, _ = files_site
    with wb.db.connection() as conn:
        for setting in ("enable_seqscan", "enable_indexscan", "enable_indexonlyscan"):
            conn.execute(f"SET LOCAL {setting} = off")  # what a large table's estimates choose
        plan = "\n".join(r[0] for r in conn.execute(
            "EXPLAIN SELECT d.id FROM documents d WHERE d.source LIKE %s", ("%a/fire_feb%",)).fetchall())
        kept = conn.execute("SELECT count(*) FROM documents d WHERE d.site_id = %s AND d.source LIKE %s",
                            (site, "%a/fire_feb%")).fetchone()[0]
        # A broad filter's per-row lookup of a document can read what the filters need from an index alone
        # (the planner takes it on a large table; on this small one it reads the table).
        covering = conn.execute("SELECT indexdef FROM pg_indexes WHERE indexname = 'documents_filter_idx'").fetchone()
    assert "documents_source_trgm_idx" in plan
    assert kept == 2
    assert covering is not None and "(id) INCLUDE (file_type, doc_date, source)" in covering[0]


def test_hnsw_searches_wider_in_a_larger_index(wb, files_site) -> None:
    """ef_search grows with the chunks indexed (at 1M chunks ef_search 100 found 0.89 of the exact top 10,
    400 found 0.98), up to four times the candidates."""
    site, _ = files_site
    fusion = hybrid.Fusion(candidates=100)

    def ef(scale_chunks: int) -> int:
        planner = PlannerSettings(exact_scan_chunks=0, ef_scale_chunks=scale_chunks)  # the HNSW plan of a large store
        with wb.db.connection() as conn:
            assert plan_search(conn, hybrid.Scope(site), "semantic", fusion, planner).dense == "hnsw"
            return int(conn.execute("SELECT current_setting('hnsw.ef_search')").fetchone()[0])

    assert ef(10**9) == 100   # a small index: as many as the candidates
    assert ef(1) == 400       # far larger than the scale: four times
    assert DEFAULT_PLANNER.hnsw_ef_search(100, 500_000) == 200 and DEFAULT_PLANNER.hnsw_ef_search(10, 10) == 40
