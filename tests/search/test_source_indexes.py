"""A source filter's own HNSW index (`rag index source`): built over chunks stored before it existed, walked by
the searches its filter covers, kept by new documents, rebuilt after a bulk load's drop, dropped on request."""

from __future__ import annotations

import uuid
from dataclasses import replace

import numpy as np
import pytest
from storebuilders import clustered_chunks

from rag_core.errors import InvalidInput
from rag_core.ingest import vector_index
from rag_core.search import hybrid
from rag_core.search.planner import PlannerSettings, plan_search
from rag_core.search.sql import covers, scope_params, scope_sql, source_index_name
from rag_core.search.validation import validate_search

LARGE = PlannerSettings(exact_scan_chunks=0)   # the HNSW plan of a large store
EXACT = PlannerSettings(exact_scan_chunks=10**9)


@pytest.fixture
def two_folders(wb):
    """near/ and far/ (storebuilders.clustered_chunks) and a query from near/'s neighbourhood: a far/ filter's
    hard case, the query's nearest chunks all outside the filter."""
    site = f"t-srcidx-{uuid.uuid4().hex[:6]}"
    centres, rng = clustered_chunks(wb, site)
    query = centres["near"] + rng.normal(0, 0.1, len(centres["near"]))
    yield site, (query / np.linalg.norm(query)).astype(np.float32)
    for made in wb.source_indexes(site_id=site):
        wb.drop_source_index(made["source_filter"], site_id=site)
    with wb.db.connection() as conn:
        conn.execute("DELETE FROM documents WHERE site_id = %s", (site,))


def top(wb, site: str, source: str, query: np.ndarray, planner: PlannerSettings) -> tuple[list[str], str, str]:
    """The semantic top 10 of a source filter under `planner`: (sources, the walk's predicate, the plan)."""
    scope = hybrid.Scope(site, source=source)
    fusion = hybrid.Fusion(candidates=20)
    params = hybrid.statement_params(scope, fusion, ["english"], ["x"], query) | {"k": 10}
    with wb.db.connection() as conn:
        plan = plan_search(conn, scope, "semantic", fusion, planner)
        if plan.dense == "hnsw":
            conn.execute("SET LOCAL enable_sort = off")   # walk the index as on a large store
        sql = hybrid.build_statement("semantic", fusion, scope, plan.order, "chunks", walk=plan.index_predicate,
                                     walk_checks=plan.walk_checks)
        explained = "\n".join(r[0] for r in conn.execute("EXPLAIN " + sql, params, prepare=False))
        rows = conn.execute(sql, params, prepare=False).fetchall()
    return [r[3] for r in rows], plan.index_predicate, explained


def chunk_sources(wb, site: str) -> dict[str, int]:
    with wb.db.connection() as conn:
        rows = conn.execute("SELECT coalesce(split_part(source, '/', 1), 'none'), count(*) FROM chunks"
                            " WHERE site_id = %s GROUP BY 1", (site,)).fetchall()
    return dict(rows)


def test_a_source_filter_walks_its_own_index_with_the_exact_results(wb, two_folders) -> None:
    site, query = two_folders
    exact, _, _ = top(wb, site, "far/", query, EXACT)
    whole, none, whole_plan = top(wb, site, "far/", query, LARGE)
    assert none == "" and "chunks_embedding_hnsw_idx" in whole_plan

    made = wb.index_source("far/", site_id=site)
    assert made["chunks"] == 120 and made["index_name"] == source_index_name(site, "far/")
    # Only the filter's chunks learned their source; the others keep NULL until an index needs them.
    assert chunk_sources(wb, site) == {"far": 120, "none": 120}
    assert [m["source_filter"] for m in wb.source_indexes(site_id=site)] == ["far/"]

    walked, predicate, plan = top(wb, site, "far/", query, LARGE)
    assert made["index_name"] in plan and "chunks_embedding_hnsw_idx" not in plan
    assert predicate.startswith("c.site_id = ") and walked == exact and len(walked) == 10
    # The index holds exactly the filter's chunks: the walk checks no filter, and the filter's documents (which
    # the postings walk needs) are read from their own index, not by testing every document of the site.
    assert "SubPlan" not in plan.split("CTE de")[1].split("CTE der")[0]
    scope = hybrid.Scope(site, source="far/")
    with wb.db.connection() as conn:
        documents = "\n".join(r[0] for r in conn.execute(
            f"EXPLAIN SELECT d.id FROM documents d WHERE {scope_sql(scope)['doc']}", scope_params(scope), prepare=False))
    assert made["index_name"] + "_docs" in documents
    # A narrower filter walks the same index, checking its own filter; another folder's does not.
    narrow, predicate, plan = top(wb, site, "far/1", query, LARGE)
    assert made["index_name"] in plan and "SubPlan" in plan.split("CTE de")[1]
    assert narrow == top(wb, site, "far/1", query, EXACT)[0]
    assert all(s.startswith("far/1") for s in narrow)
    _, predicate, plan = top(wb, site, "near/", query, LARGE)
    assert predicate == "" and made["index_name"] not in plan


def test_documents_stored_later_are_in_the_index_and_a_dropped_index_comes_back(wb, two_folders) -> None:
    site, query = two_folders
    made = wb.index_source("far/", site_id=site)
    text = "The far cellar holds the archive of brass instruments and their tuning records."
    outcome = wb.ingest_text("far/cellar.md", text, site_id=site)
    assert outcome.status == "indexed"
    vector = np.asarray(wb.embedder.get_query_embedding(text), dtype=np.float32)
    walked, _, plan = top(wb, site, "far/", vector, LARGE)
    assert made["index_name"] in plan and walked[0] == "far/cellar.md"

    # A bulk load drops the vector indexes; ensure() builds the listed ones again.
    with wb.db.connection() as conn:
        conn.execute(f'DROP INDEX "{made["index_name"]}"')
    vector_index.ensure(wb.db)
    with wb.db.connection() as conn:
        assert conn.execute("SELECT count(*) FROM pg_indexes WHERE indexname = %s", (made["index_name"],)).fetchone()[0]

    assert wb.drop_source_index("far/", site_id=site) and not wb.drop_source_index("far/", site_id=site)
    _, predicate, plan = top(wb, site, "far/", query, LARGE)
    assert predicate == "" and made["index_name"] not in plan and wb.source_indexes(site_id=site) == []


def test_a_chunk_written_without_its_source_gets_it_and_is_walked(wb, two_folders) -> None:
    """A writer of a version before migration 0009 (still running while another process upgraded the store)
    inserts chunks without `source`: the database fills it from the document, so the chunk is in the index of
    its source filter and the walk through that index finds it."""
    site, _ = two_folders
    made = wb.index_source("far/", site_id=site)
    rng = np.random.default_rng(3)
    vector = rng.normal(size=len(two_folders[1]))
    vector = (vector / np.linalg.norm(vector)).astype(np.float32)
    with wb.db.connection() as conn:
        doc_id = conn.execute("INSERT INTO documents (site_id, source, file_type, content_hash, content, chunk_count)"
                              " VALUES (%s, 'far/old-writer.md', 'md', 'x', 'x', 1) RETURNING id", (site,)).fetchone()[0]
        conn.execute("INSERT INTO chunks (document_id, site_id, chunk_index, text, start_char, end_char, language,"
                     " fts, embedding) VALUES (%s, %s, 0, 'x', 0, 1, 'en', to_tsvector('english', 'x'), %s)",
                     (doc_id, site, vector))
        assert conn.execute("SELECT source FROM chunks WHERE document_id = %s", (doc_id,)).fetchone() == (
            "far/old-writer.md",)
    walked, _, plan = top(wb, site, "far/", vector, LARGE)
    assert made["index_name"] in plan and walked[0] == "far/old-writer.md"


def test_a_filter_that_keeps_nothing_is_refused_with_the_fix(wb, two_folders) -> None:
    site, _ = two_folders
    with pytest.raises(InvalidInput, match="rag status --sources"):
        wb.index_source("nowhere/", site_id=site)
    with pytest.raises(InvalidInput, match="empty"):
        wb.index_source("  ", site_id=site)
    assert wb.source_indexes(site_id=site) == []


@pytest.mark.parametrize("index_filter, source_filter, covered", [
    ("far/", "far/", True), ("far/", "far/deep/", True), ("far/", "x/far/y", True),
    ("far/", "fa", False), ("/srv/docs/", "/srv/docs/a", True), ("/srv/docs/", "srv/docs/a", False),
    ("docs/", "/srv/docs/a", True), ("https://a.example/", "https://a.example/x", True),
    ("https://a.example/", "https://b.example/", False),
])
def test_which_filters_an_index_covers(index_filter: str, source_filter: str, covered: bool) -> None:
    """An index serves a filter only when every source the filter keeps is in it: a part (relative) filter
    is matched anywhere in the source, an absolute path or URL from its start (sql.like_prefix)."""
    assert covers(index_filter, source_filter) is covered


def test_a_hybrid_page_is_the_same_through_the_index(wb, two_folders) -> None:
    site, query = two_folders
    req = validate_search("x", mode="semantic", source="far/", site_id=site)
    before = hybrid.rank_documents(wb.db, "x", query, req, hybrid.Fusion(candidates=20), planner=LARGE)
    wb.index_source("far/", site_id=site)
    after = hybrid.rank_documents(wb.db, "x", query, req, hybrid.Fusion(candidates=20), planner=LARGE)
    assert [d.source for d in after.documents] == [d.source for d in before.documents] and after.total == before.total


def test_a_broad_filter_with_its_own_index_checks_the_postings_against_its_documents(wb, two_folders) -> None:
    """Full text with a broad source filter looks up each posting's document, which for a list the filter rejects
    means every posting of it; with the filter's own index the walk hashes the filter's documents (read from that
    index) instead, and ranks the same. Only the search with no index of its own is reported to the advisor."""
    site, _ = two_folders
    for folder in ("far", "near"):
        for i, text in enumerate(("Brass instruments are tuned in the cellar every spring.",
                                  "The archive lists each brass horn and its tuning record.",
                                  "Woodwinds are kept upstairs, away from the damp cellar.")):
            assert wb.ingest_text(f"{folder}/music-{i}.md", text, site_id=site).status == "indexed"
    broad = PlannerSettings(row_check_max=0, exact_scan_chunks=0)   # every filter broad, as 424K chunks at 1M
    req = validate_search("brass tuning cellar", mode="fulltext", source="far/", site_id=site)
    both = validate_search("brass tuning cellar", mode="hybrid", source="far/", site_id=site)
    scope = hybrid.Scope(site, source="far/")
    with wb.db.connection() as conn:
        assert plan_search(conn, scope, "fulltext", hybrid.Fusion(), broad).order == "index"
    before = hybrid.rank_documents(wb.db, req.query, None, req, planner=broad)
    fused = hybrid.rank_documents(wb.db, both.query, None, both, planner=broad)

    wb.index_source("far/", site_id=site)
    with wb.db.connection() as conn:
        plan = plan_search(conn, scope, "fulltext", hybrid.Fusion(), broad)
    assert plan.order == "exact" and plan.source_index == "far/"
    with wb.db.connection() as conn:   # past own_set_max the filter is looked up per row again (work_mem bounded)
        assert plan_search(conn, scope, "fulltext", hybrid.Fusion(), replace(broad, own_set_max=100)).order == "index"
    after = hybrid.rank_documents(wb.db, req.query, None, req, planner=broad)
    ranked = [(d.source, round(d.score, 9)) for d in before.documents]
    assert len(ranked) == 3 and all(s.startswith("far/") for s, _ in ranked)
    assert [(d.source, round(d.score, 9)) for d in after.documents] == ranked and after.total == before.total
    assert before.walked_filter == 123 and after.walked_filter == 0
    # Hybrid walks the filter's own HNSW index and joins the same set to its postings: the same page.
    with wb.db.connection() as conn:
        assert plan_search(conn, scope, "hybrid", hybrid.Fusion(), broad)[2:4] == ("hnsw", "index_set")
    fused_after = hybrid.rank_documents(wb.db, both.query, None, both, planner=broad)
    assert [d.source for d in fused_after.documents] == [d.source for d in fused.documents]
    assert fused.total == fused_after.total >= 3
