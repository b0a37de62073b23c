"""Validation codes of the search spec, odd input as plain words, INDEX_UNAVAILABLE and DATABASE_ERROR."""

from __future__ import annotations

import pytest

from rag_core.errors import DatabaseError, IndexUnavailable, InvalidQuery
from rag_core.search.validation import validate_search

BAD = [
    ({"query": ""}, "query"),
    ({"query": "   \n\t "}, "query"),
    ({"query": "x" * 501}, "query"),
    ({"query": "ok", "limit": 0}, "limit"),
    ({"query": "ok", "limit": 51}, "limit"),
    ({"query": "ok", "limit": "many"}, "limit"),
    ({"query": "ok", "max_chunks": 0}, "max_chunks"),
    ({"query": "ok", "max_chunks": 11}, "max_chunks"),
    ({"query": "ok", "page": 0}, "page"),
    ({"query": "ok", "page": 10_001}, "page"),
    ({"query": "ok", "page": 2**64}, "page"),
    ({"query": "ok", "mode": "fuzzy"}, "mode"),
    ({"query": "ok", "types": ["pdf", "exe"]}, "types"),
    ({"query": "ok", "date_from": "2024-13-01"}, "date_from"),
    ({"query": "ok", "date_to": "yesterday"}, "date_to"),
    ({"query": "ok", "date_from": "2024-05-01", "date_to": "2024-04-30"}, "date_from"),
]


@pytest.mark.parametrize("kwargs,field", BAD)
def test_invalid_parameters_raise_invalid_query_with_the_field(kwargs: dict, field: str) -> None:
    with pytest.raises(InvalidQuery) as info:
        validate_search(**kwargs)
    body = info.value.to_dict()
    assert body["success"] is False and body["error"]["code"] == "INVALID_QUERY"
    assert body["error"]["details"]["field"] == field and body["error"]["message"]


def test_valid_edges_pass_and_are_normalised() -> None:
    req = validate_search("  fire \n alarm ", limit=50, max_chunks=10, page=3, types="PDF, .docx,md",
                          date_from="2024-01-01", date_to="2024-01-01", mode="Semantic")
    assert (req.query, req.limit, req.max_chunks, req.page, req.mode) == ("fire alarm", 50, 10, 3, "semantic")
    assert req.types == ("docx", "md", "pdf") and req.offset == 100
    assert validate_search("я" * 500).query == "я" * 500


def test_search_returns_the_error_json_and_logs_the_failure(wb, corpus_site) -> None:
    with pytest.raises(InvalidQuery) as info:
        wb.search("x" * 612, site_id=corpus_site)
    assert info.value.to_dict()["error"]["message"] == "Query is 612 characters; the limit is 500."
    wb.flush_search_log()
    with wb.db.connection() as conn:
        code = conn.execute("SELECT error_code FROM query_log WHERE site_id = %s ORDER BY id DESC LIMIT 1",
                            (corpus_site,)).fetchone()[0]
    assert code == "INVALID_QUERY"


ODD = [
    "'", "''", "\"quoted phrase\"", "\\", "a\\b\\\\c", "fire:*", "a:* & b", "&|!()", "(fire | alarm) & !budget",
    "'fire':A", "fire <-> alarm", "fire <2> alarm", "!!!!", "<->", "::tsquery", "%s %(q)s {}",
    "Robert'); DROP TABLE chunks;--", "1; DELETE FROM documents WHERE true", "' OR '1'='1",
    "😀 emoji 🚀 fire", "🔥", "\x01\x02 fire", "nul\x00byte", "日本語'テスト'\\", "Строительство: 'ГОСТ' \\ (2022)",
    "https://x.y/z?a=1&b='2'", "C:\\Windows\\path", "\ue000marker\ue001", "я" * 500, "\ud800 lone surrogate",
]


@pytest.mark.parametrize("mode", ["fulltext", "hybrid", "semantic"])
def test_odd_characters_are_plain_words(wb, corpus_site, mode: str) -> None:
    for query in ODD:
        response = wb.search(query, mode=mode, site_id=corpus_site, limit=3)
        assert response["success"] is True, query
    with wb.db.connection() as conn:
        assert conn.execute("SELECT count(*) FROM documents WHERE site_id = %s", (corpus_site,)).fetchone()[0] == 9
    hit = wb.search("(fire | alarm) & !budget:*", mode="fulltext", site_id=corpus_site)
    assert hit["results"][0]["file_path"] == "en/fire.md"  # operators are ignored, the words still count


def test_index_unavailable_on_an_empty_site(wb) -> None:
    with pytest.raises(IndexUnavailable) as info:
        wb.search("anything", site_id="t-empty-site-never-ingested")
    body = info.value.to_dict()["error"]
    assert body["code"] == "INDEX_UNAVAILABLE" and "rag ingest" in body["message"]


def test_database_error_when_the_server_is_unreachable(wb, corpus_site) -> None:
    from rag_core.db.database import Database
    from rag_core.workbench import Workbench

    closed = Workbench(wb.settings, Database(wb.database_url, pool_size=1), wb.database_url, False,
                       embedder=wb.embedder)
    closed.db.close()
    with pytest.raises(DatabaseError) as info:
        closed.search("fire alarm", site_id=corpus_site)
    body = info.value.to_dict()["error"]
    assert body["code"] == "DATABASE_ERROR"
    assert "Traceback" not in body["message"] and "File \"" not in body["message"]
