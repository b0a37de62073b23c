"""The relevance a hybrid page shows falls as its ranks do: a document may take its full-text and its dense share
from two different chunks, and showing its best chunk's own score put "[0.50]" under "[0.32]" on the project's
own documents."""

from __future__ import annotations

import uuid

import pytest

QUERIES = ["requirements", "hybrid search fusion", "REST API keys", "how do I configure the embedder",
           "delete a document", "retention purge schedule", "crawl a website", "evaluation hit@5",
           "пожарная безопасность", "検索の設定"]


@pytest.fixture(scope="module")
def sample_site(wb) -> str:
    site_id = f"t-order-{uuid.uuid4().hex[:6]}"
    assert wb.ingest_sample_corpus(site_id=site_id).to_dict()["failed"] == 0
    yield site_id
    with wb.db.connection() as conn:
        conn.execute("DELETE FROM documents WHERE site_id = %s", (site_id,))


def test_hybrid_relevance_falls_with_rank(wb, sample_site) -> None:
    pages = 0
    for query in QUERIES:
        results = wb.search(query, site_id=sample_site, mode="hybrid", limit=10)["results"]
        relevance = [r["relevance_score"] for r in results]
        scores = [r["score"] for r in results]
        assert scores == sorted(scores, reverse=True), query
        assert relevance == sorted(relevance, reverse=True), (query, relevance)
        assert all(0 <= r <= 1 for r in relevance), (query, relevance)
        pages += len(results) > 1
    assert pages >= 8  # most queries rank several documents, so the order is really checked
