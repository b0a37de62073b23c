"""The search response keeps its shape on REST and MCP, searched anew and served from the cache."""

from __future__ import annotations

import json
import uuid
from typing import Any

import anyio
from mcp import Client

from rest_keys import KEY_A, SITE_A, auth
from rag_core.api.mcp_server import build_server

TOP = {"success", "query", "mode", "total_results", "page", "limit", "total_pages", "search_time", "results",
       "facets", "suggestions"}
RESULT = {"id", "document_id", "site_id", "title", "file_path", "file_type", "file_size", "file_size_bytes",
          "created_at", "updated_at", "document_date", "relevance_score", "score", "rank", "dense_rank",
          "fulltext_rank", "highlights", "highlight_spans", "context_chunks"}
CHUNK = {"chunk_id", "chunk_index", "text", "page_number", "start_char", "end_char", "relevance_score", "score",
         "similarity", "dense_rank", "fulltext_rank", "fulltext_score"}


def assert_shape(response: dict[str, Any]) -> None:
    assert set(response) == TOP
    assert set(response["facets"]) == {"document_types", "date_distribution"}
    assert isinstance(response["suggestions"], list) and response["search_time"].endswith("s")
    assert response["results"], response
    for result in response["results"]:
        assert set(result) == RESULT
        assert all(isinstance(h, str) for h in result["highlights"])
        assert len(result["highlight_spans"]) == len(result["highlights"])
        assert all(len(span) == 2 for spans in result["highlight_spans"] for span in spans)
        for chunk in result["context_chunks"]:
            assert set(chunk) == CHUNK


def test_rest_search_shape_on_a_miss_and_on_a_cache_hit(make_client) -> None:
    client = make_client(search_cache_ttl_sec=60)
    body = {"query": f"fire alarm evacuation {uuid.uuid4().hex[:6]}", "limit": 5, "site_id": SITE_A}
    miss = client.post("/search", json=body, headers=auth(KEY_A))
    hit = client.post("/search", json=body, headers=auth(KEY_A))
    assert miss.status_code == hit.status_code == 200
    assert miss.headers["content-type"] == hit.headers["content-type"] == "application/json"
    assert_shape(miss.json())
    assert_shape(hit.json())
    assert {k: v for k, v in hit.json().items() if k != "search_time"} == \
           {k: v for k, v in miss.json().items() if k != "search_time"}


def test_mcp_search_documents_shape(wb, sites) -> None:
    server = build_server(wb)
    args = {"query": f"fire alarm evacuation {uuid.uuid4().hex[:6]}", "limit": 5}

    async def twice() -> list[Any]:
        async with Client(server) as client:
            return [await client.call_tool("search_documents", {**args, "source_filter": "a/"}) for _ in range(2)]

    for result in anyio.run(twice):
        assert not result.is_error
        text = "".join(block.text for block in result.content if block.type == "text")
        assert json.loads(text) == result.structured_content
        assert_shape(result.structured_content)
