"""Rate limits per key (429 + Retry-After), in the process and shared through a real redis-server; the shared cache."""

from __future__ import annotations

import uuid

import pytest

from rest_keys import KEY_A, KEY_B, SITE_A, SITE_B, auth
from rag_core.api.ratelimit import RateLimiter, parse_rate_limit
from rag_core.errors import ConfigError
from rag_core.search.cache import RedisSearchCache, SearchCache, build_search_cache
from rag_core.search.service import SearchEngine


def search(client, key: str, site: str):
    return client.post("/search", json={"query": "fire alarm", "site_id": site}, headers=auth(key))


def test_over_the_limit_is_429_with_retry_after(make_client):
    client = make_client(rate_limit="3/minute")
    assert [search(client, KEY_A, SITE_A).status_code for _ in range(3)] == [200, 200, 200]
    refused = search(client, KEY_A, SITE_A)
    assert refused.status_code == 429
    error = refused.json()["error"]
    assert error["code"] == "RATE_LIMIT" and "3/minute" in error["message"]
    retry_after = int(refused.headers["Retry-After"])
    assert 1 <= retry_after <= 60 and error["details"]["retry_after"] == retry_after
    # Limits are per key: another key still gets through, and /health is never limited.
    assert search(client, KEY_B, SITE_B).status_code == 200
    assert client.get("/health").status_code == 200


def test_wrong_keys_are_limited_per_address(make_client):
    client = make_client(rate_limit="2/minute")
    codes = [client.post("/search", json={"query": "x"}, headers=auth(f"guess-{i}")).status_code for i in range(3)]
    assert codes == [401, 401, 429]


def test_rate_limit_setting_is_validated():
    assert parse_rate_limit("off") is None and parse_rate_limit("") is None
    assert parse_rate_limit("120/minute").amount == 120
    with pytest.raises(ConfigError, match="RAG_RATE_LIMIT: 'lots' is not a rate"):
        parse_rate_limit("lots")


def test_unreachable_redis_stops_the_start_with_a_clear_message():
    with pytest.raises(ConfigError, match="RAG_REDIS_URL: no Redis answers at redis://127.0.0.1:1/0"):
        RateLimiter("10/minute", "redis://127.0.0.1:1/0")


def test_workers_share_the_limit_through_redis(make_client, redis_url):
    limit = "4/minute"
    RateLimiter(limit, redis_url).reset()
    worker_1 = make_client(rate_limit=limit, redis_url=redis_url)
    worker_2 = make_client(rate_limit=limit, redis_url=redis_url)
    assert worker_1.app.state.limiter.shared
    codes = [search(worker, KEY_A, SITE_A).status_code for worker in (worker_1, worker_2, worker_1, worker_2)]
    assert codes == [200, 200, 200, 200]
    refused = search(worker_2, KEY_A, SITE_A)
    assert refused.status_code == 429 and int(refused.headers["Retry-After"]) >= 1
    assert search(worker_1, KEY_B, SITE_B).status_code == 200


def test_in_process_limits_are_not_shared(make_client):
    worker_1 = make_client(rate_limit="1/minute")
    worker_2 = make_client(rate_limit="1/minute")
    assert search(worker_1, KEY_A, SITE_A).status_code == 200
    assert search(worker_2, KEY_A, SITE_A).status_code == 200


def test_search_cache_is_shared_and_invalidated_through_redis(wb, make_settings, redis_url, sites):
    settings = make_settings(redis_url=redis_url, search_cache_ttl_sec=60)
    assert isinstance(build_search_cache(settings), RedisSearchCache)
    assert isinstance(build_search_cache(make_settings()), SearchCache)
    engines = [SearchEngine(wb.db, settings, lambda: wb.embedder, wb.store.require_compatible) for _ in range(2)]
    query = f"fire alarm {uuid.uuid4().hex[:6]}"
    first = engines[0].search(query, site_id=SITE_A)
    second = engines[1].search(query, site_id=SITE_A)  # another process would see the same entry
    assert [(r["id"], r["relevance_score"]) for r in first["results"]] == \
           [(r["id"], r["relevance_score"]) for r in second["results"]]
    wb.flush_search_log()
    with wb.db.connection() as conn:
        cache_marks = [r[0] for r in conn.execute(
            "SELECT params->>'cache' FROM query_log WHERE query = %s ORDER BY id", (query,)).fetchall()]
    assert cache_marks == ["miss", "hit"]
    engines[0].invalidate()  # an ingest in one process clears the entry for all of them
    assert engines[1].cache.get(("anything",)) is None
    engines[1].search(query, site_id=SITE_A)
    wb.flush_search_log()
    with wb.db.connection() as conn:
        last = conn.execute("SELECT params->>'cache' FROM query_log WHERE query = %s ORDER BY id DESC LIMIT 1",
                            (query,)).fetchone()[0]
    assert last == "miss"


def test_redis_cache_of_another_store_is_separate(make_settings, redis_url):
    mine = build_search_cache(make_settings(redis_url=redis_url, search_cache_ttl_sec=60))
    other = build_search_cache(make_settings(redis_url=redis_url, search_cache_ttl_sec=60,
                                             database_url="postgresql://elsewhere/db"))
    mine.put(("k",), b'{"answer": 1}')
    assert mine.get(("k",)) == b'{"answer": 1}'
    assert other.get(("k",)) is None


def test_a_redis_outage_makes_cache_misses_not_failures(make_settings):
    cache = RedisSearchCache("redis://127.0.0.1:1/0", 60, "outage")
    cache.put(("k",), b"[1]")
    assert cache.get(("k",)) is None
    cache.clear()


def test_document_characters_have_a_budget_per_key(make_client):
    client = make_client(ingest_char_limit="5000000/hour")
    blank = " " * 3_000_000  # refused as empty after it is counted: the budget is spent without embedding anything
    first = client.post("/documents", json={"site_id": SITE_A, "source": "a/blank.md", "content": blank},
                        headers=auth(KEY_A))
    assert first.status_code == 400 and first.json()["error"]["code"] == "INVALID_INPUT"
    second = client.post("/documents", json={"site_id": SITE_A, "source": "a/blank.md", "content": blank},
                         headers=auth(KEY_A))
    assert second.status_code == 429, second.text
    error = second.json()["error"]
    assert error["code"] == "RATE_LIMIT" and "characters of documents" in error["message"]
    assert "5000000/hour" in error["message"] and int(second.headers["Retry-After"]) >= 1
    # Another key has its own budget; searches are not charged.
    assert client.post("/documents", json={"site_id": SITE_B, "source": "b/blank.md", "content": blank},
                       headers=auth(KEY_B)).status_code == 400
    assert search(client, KEY_A, SITE_A).status_code == 200


def test_a_document_budget_below_one_document_stops_the_start(make_client):
    with pytest.raises(ConfigError, match="RAG_INGEST_CHAR_LIMIT: '1000/hour' is less than one document may hold"):
        make_client(ingest_char_limit="1000/hour")
