"""An unfiltered search runs one generic plan per connection: it must rank exactly as a plan made for the
search's own parameters does."""

from __future__ import annotations

from dataclasses import replace

import pytest

from rag_core.search import hybrid
from rag_core.search.retrieval import embed_query
from rag_core.search.validation import validate_search

QUERIES = ["fire alarm evacuation routes", "пожарная сигнализация зданий", "budget for the school building",
           "BM25 keyword ranking and vector similarity", "富士山の標高", "water supply networks"]


def _rows(conn, sql: str, params: dict, prepare: bool) -> list[tuple]:
    # prepare=True: a named prepared statement, which the transaction's plan_cache_mode makes generic at once;
    # prepare=False: the unnamed statement, always planned for these parameter values.
    return conn.execute(sql, params, prepare=prepare).fetchall()


@pytest.mark.parametrize("mode", ["hybrid", "semantic"])
@pytest.mark.parametrize("dense_order", ["exact", "index"])
def test_generic_plan_ranks_as_a_custom_one(wb, corpus_site, mode: str, dense_order: str) -> None:
    fusion = replace(wb.search_engine.fusion, candidates=100)
    scope = hybrid._Scope(corpus_site)
    sql = hybrid.build_statement(mode, fusion, scope, dense_order, "documents")
    for query in QUERIES:
        req = validate_search(query, site_id=corpus_site, mode=mode)
        with wb.db.connection() as conn:
            _, languages, _, _ = hybrid._prepare(conn, scope, mode, fusion, reuse_plan=True)
            assert conn.execute("SHOW plan_cache_mode").fetchone()[0] == "force_generic_plan"
            configs, texts = hybrid.query_configs(req.query, languages)
            params = hybrid._params(scope, fusion, configs, texts, embed_query(wb.embedder, req.query))
            params.update({"offset": 0, "limit": 10, "max_chunks": 3, "prove": 10})
            generic = _rows(conn, sql, params, prepare=True)
            custom = _rows(conn, sql, params, prepare=False)
        assert generic, query
        assert [(r[0], r[8], r[17], r[19]) for r in generic] == [(r[0], r[8], r[17], r[19]) for r in custom], query


def test_filtered_fulltext_and_chunk_searches_keep_custom_plans(wb, corpus_site) -> None:
    fusion = wb.search_engine.fusion
    cases = (("hybrid", hybrid._Scope(corpus_site, types=("md",)), True), ("fulltext", hybrid._Scope(corpus_site), True),
             ("hybrid", hybrid._Scope(corpus_site), False))  # the last: chat's top chunks (search_chunks)
    for mode, scope, reuse in cases:
        with wb.db.connection() as conn:
            hybrid._prepare(conn, scope, mode, fusion, reuse_plan=reuse)
            assert conn.execute("SHOW plan_cache_mode").fetchone()[0] == "auto", (mode, scope, reuse)
