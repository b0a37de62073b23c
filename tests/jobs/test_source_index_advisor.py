"""The source-index advisor: searches that walk the whole HNSW graph (or the postings) slowly for one source filter
queue that filter's own index as a job, once; a worker builds it and the next searches walk it instead."""

from __future__ import annotations

import logging
import uuid
from typing import Any

import pytest
from storebuilders import clustered_chunks

from rag_core.jobs.autoindex import SourceIndexAdvisor
from rag_core.search.planner import PlannerSettings
from rag_core.search.service import SearchEngine

LARGE = PlannerSettings(exact_scan_chunks=0)   # the HNSW plan a large store gets


@pytest.fixture
def folders(jwb: Any) -> Any:
    site = f"t-advisor-{uuid.uuid4().hex[:6]}"
    clustered_chunks(jwb, site)   # near/ and far/, 120 one-chunk documents each
    yield site
    for made in jwb.source_indexes(site_id=site):
        jwb.drop_source_index(made["source_filter"], site_id=site)
    with jwb.db.connection() as conn:
        conn.execute("DELETE FROM documents WHERE site_id = %s", (site,))


def engine(jwb: Any, advisor: SourceIndexAdvisor) -> SearchEngine:
    store = jwb.store
    return SearchEngine(store.db, store.settings, lambda: store.embedder, store.require_compatible,
                        reads=store.reads, planner=LARGE, on_filter_walk=advisor)


def source_index_jobs(jwb: Any, site: str) -> list[dict]:
    return [j for j in jwb.jobs(site_id=site) if j["kind"] == "source_index"]


def test_slow_walks_of_one_filter_queue_its_index_once_and_a_worker_builds_it(jwb, folders) -> None:
    site = folders
    heard: list[tuple] = []
    advisor = SourceIndexAdvisor(jwb.db, jwb.background.enqueue_source_index, slow_ms=0.001, min_chunks=100)

    def listen(*args: Any) -> None:
        heard.append(args)
        advisor(*args)

    search = engine(jwb, advisor)
    search.on_filter_walk = listen
    for mode in ("semantic", "fulltext"):   # a full-text search reads the postings for the filter: heard too
        search.search("boiler room door", site_id=site, source="far/", mode=mode, use_cache=False)
    # An unfiltered search walks no filter: the advisor hears nothing of it.
    search.search("boiler room door", site_id=site, mode="semantic", use_cache=False)
    advisor.wait()
    assert [(s, f, n) for s, f, n, _ in heard] == [(site, "far/", 120)] * 2
    assert source_index_jobs(jwb, site) == []   # two slow searches are not yet a pattern

    search.search("boiler room door", site_id=site, source="far/", mode="hybrid", use_cache=False)
    advisor.wait()
    [job] = source_index_jobs(jwb, site)
    assert job["status"] == "queued" and job["description"] == "HNSW index of far/"
    # Proposed once: more slow searches queue nothing more, and another process asking for the same index while
    # it waits gets the waiting job (the queueing lock), not a second build.
    search.search("boiler room door", site_id=site, source="far/", mode="semantic", use_cache=False)
    advisor.wait()
    assert jwb.background.enqueue_source_index("far/", site_id=site) == job["id"]
    assert len(source_index_jobs(jwb, site)) == 1

    jwb.run_worker(wait=False)   # a worker empties the queue and returns
    done = jwb.job(job["id"])
    assert done["status"] == "done" and done["result"]["chunks"] == 120, done
    assert [m["source_filter"] for m in jwb.source_indexes(site_id=site)] == ["far/"]
    heard.clear()
    search.search("boiler room door", site_id=site, source="far/", mode="semantic", use_cache=False)
    search.search("boiler room door", site_id=site, source="far/17", mode="semantic", use_cache=False)
    search.search("boiler room door", site_id=site, source="far/", mode="fulltext", use_cache=False)
    assert heard == []   # the filter, and a narrower one, walk the filter's own index now


def test_fast_small_or_unscoped_walks_propose_nothing_and_a_full_site_only_says_so(jwb, folders, caplog) -> None:
    site = folders
    queued: list[tuple[str, str]] = []

    def enqueue(source: str, site_id: str) -> int:
        queued.append((source, site_id))
        return 1

    fast = SourceIndexAdvisor(jwb.db, enqueue, slow_ms=100, min_chunks=100)
    small = SourceIndexAdvisor(jwb.db, enqueue, slow_ms=1, min_chunks=121)
    off = SourceIndexAdvisor(jwb.db, enqueue, slow_ms=0, min_chunks=0)
    for _ in range(5):
        fast(site, "far/", 120, 99.0)       # quicker than the threshold
        small(site, "far/", 120, 500.0)     # the filter keeps too few chunks to be worth an index
        off(site, "far/", 120, 500.0)       # turned off
        fast(None, "far/", 120, 500.0)      # a search over every site: an index belongs to one
    for advisor in (fast, small, off):
        advisor.wait()
    assert queued == []

    jwb.index_source("near/", site_id=site)
    full = SourceIndexAdvisor(jwb.db, enqueue, slow_ms=1, min_chunks=0, max_per_site=1)
    with caplog.at_level(logging.WARNING, logger="rag_core.jobs.autoindex"):
        for _ in range(3):
            full(site, "far/", 120, 500.0)
        full.wait()
    assert queued == []
    assert "rag index drop" in caplog.text and "near/" in caplog.text and "rag index source far/" in caplog.text

    counted = SourceIndexAdvisor(jwb.db, enqueue, slow_ms=1, min_chunks=0)
    for _ in range(3):
        counted(site, "far/", 120, 500.0)
    counted.wait()
    assert queued == [("far/", site)]
