"""The search cache hands every caller its own copy, in the process and through a real Redis."""

from __future__ import annotations

import copy
import uuid

import pytest

from rest_keys import SITE_A
from rag_core.search.cache import RedisSearchCache, SearchCache
from rag_core.search.service import SearchEngine


@pytest.mark.parametrize("shared", [False, True], ids=["in-process", "redis"])
def test_changing_a_returned_response_does_not_change_the_cached_one(wb, make_settings, redis_url, sites,
                                                                     shared: bool) -> None:
    settings = make_settings(redis_url=redis_url if shared else "", search_cache_ttl_sec=60)
    engine = SearchEngine(wb.db, settings, lambda: wb.embedder, wb.store.require_compatible)
    assert isinstance(engine.cache, RedisSearchCache if shared else SearchCache)
    query = f"fire alarm evacuation {uuid.uuid4().hex[:6]}"
    stored = engine.search(query, site_id=SITE_A)  # the miss: this object's content went into the cache
    snapshot = copy.deepcopy({k: v for k, v in stored.items() if k != "search_time"})
    assert stored["results"] and stored["results"][0]["highlights"]

    def vandalise(response: dict) -> None:
        response["results"][0]["highlights"].append("changed")
        response["results"][0]["context_chunks"][0]["text"] = "changed"
        response["facets"]["document_types"]["pdf"] = 99
        response["suggestions"].append("changed")
        response["results"].reverse()

    vandalise(stored)
    first_hit = engine.search(query, site_id=SITE_A)
    assert {k: v for k, v in first_hit.items() if k != "search_time"} == snapshot
    vandalise(first_hit)
    second_hit = engine.search(query, site_id=SITE_A)
    assert {k: v for k, v in second_hit.items() if k != "search_time"} == snapshot
    wb.flush_search_log()
    with wb.db.connection() as conn:
        marks = [r[0] for r in conn.execute("SELECT params->>'cache' FROM query_log WHERE query = %s ORDER BY id",
                                            (query,)).fetchall()]
    assert marks == ["miss", "hit", "hit"]


def test_the_cache_holds_bytes_only() -> None:
    cache = SearchCache(ttl_sec=60)
    with pytest.raises(TypeError, match="bytes"):
        cache.put("k", {"live": "object"})
