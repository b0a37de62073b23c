"""The OpenAPI document is complete, and a property-based run from it (schemathesis) never gets a 5xx,
also when every text of a generated body is 10 MB long."""

from __future__ import annotations

import copy
import uuid
from typing import Any

import pytest
import schemathesis
from schemathesis.specs.openapi.checks import (
    content_type_conformance, response_schema_conformance, status_code_conformance,
)
from hypothesis import HealthCheck, Phase, given, settings

from rest_keys import ADMIN, auth

FUZZ_SITE = f"t-api-fuzz-{uuid.uuid4().hex[:6]}"


@pytest.fixture
def fuzz_site(wb):
    """The throw-away site generated writes land in; emptied afterwards."""
    yield FUZZ_SITE
    with wb.db.connection() as conn:
        conn.execute("DELETE FROM documents WHERE site_id = %s", (FUZZ_SITE,))
        conn.execute("DELETE FROM chat_sessions WHERE site_id = %s", (FUZZ_SITE,))


def _confine(case) -> None:
    """Generated writes land in one throw-away site, and the cleanup only counts: other tests' data stays."""
    if isinstance(case.body, dict) and "site_id" in case.body:
        case.body["site_id"] = FUZZ_SITE
    if case.query is not None and "site_id" in case.query:
        case.query["site_id"] = FUZZ_SITE
    if case.path == "/documents" and case.method == "DELETE":
        case.query = {**(case.query or {}), "site_id": FUZZ_SITE}
    if case.path == "/chat-messages/cleanup":
        case.query = {**(case.query or {}), "dry_run": "true"}
    if case.path == "/reindex":  # refused in place: no generated request re-embeds the whole store
        case.query = {**(case.query or {}), "background": "false"}


def test_no_generated_request_gets_a_server_error(make_client, fuzz_site):
    """Every operation of the app's own OpenAPI document, a few generated requests each (with the admin key)."""
    api = schemathesis.openapi.from_asgi("/openapi.json", make_client().app)
    operations = [result.ok() for result in api.get_all_operations()]
    assert len(operations) == 21
    seen: list[str] = []
    for operation in operations:
        @given(case=operation.as_strategy())
        @settings(max_examples=6, deadline=None, database=None, phases=[Phase.explicit, Phase.generate],
                  suppress_health_check=list(HealthCheck))
        def run(case) -> None:
            _confine(case)
            response = case.call(headers=auth(ADMIN))
            seen.append(f"{case.method} {case.path} {response.status_code}")
            assert response.status_code < 500, \
                f"{case.method} {case.formatted_path} -> {response.status_code}: {response.text[:500]}"
            if response.status_code >= 400:
                body = response.json()
                assert body["success"] is False and body["error"]["code"] and body["error"]["message"]
            # The documented bodies, status codes and content types are the ones returned.
            case.validate_response(response, checks=[response_schema_conformance, status_code_conformance,
                                                     content_type_conformance])

        run()
    assert len(seen) >= len(operations)


BIG = 10_000_000  # characters (ASCII: bytes too) put into one field of a generated body


def _text_fields(body: dict[str, Any], prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """The paths of every string value in a JSON body, nested objects included."""
    found: list[tuple[str, ...]] = []
    for key, value in body.items():
        if isinstance(value, str):
            found.append((*prefix, key))
        elif isinstance(value, dict):
            found.extend(_text_fields(value, (*prefix, key)))
    return found


def _with(body: dict[str, Any], path: tuple[str, ...], value: str) -> dict[str, Any]:
    out = copy.deepcopy(body)
    target = out
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return out


def test_bodies_of_10_mb_get_a_4xx_never_a_5xx(make_client, fuzz_site):
    """Every text field of every generated body, made 10 MB long in turn: refused with the error JSON.

    A 10 MB query once took `rag serve` to 23 GB: the texts that get embedded have caps, and bodies
    past the limit are refused before they are read (documents have their own, larger limit).
    """
    client = make_client()
    api = schemathesis.openapi.from_asgi("/openapi.json", client.app)
    with_body = [result.ok() for result in api.get_all_operations() if result.ok().body]
    assert {op.path for op in with_body} == {"/documents", "/chat-messages", "/retrieve-context", "/search",
                                             "/chat", "/crawl", "/pages", "/documents/files"}
    big = "x" * BIG
    statuses: dict[str, set[int]] = {}
    for operation in with_body:
        @given(case=operation.as_strategy())
        @settings(max_examples=2, deadline=None, database=None, phases=[Phase.explicit, Phase.generate],
                  suppress_health_check=list(HealthCheck))
        def run(case) -> None:
            _confine(case)
            if not isinstance(case.body, dict):
                return
            for field in _text_fields(case.body) or [("query",)]:
                body = _with(case.body, field, big)
                response = client.request(case.method, case.formatted_path, json=body, headers=auth(ADMIN))
                statuses.setdefault(f"{case.method} {case.path} {'.'.join(field)}", set()).add(response.status_code)
                assert 400 <= response.status_code < 500, \
                    f"{case.method} {case.path} with 10 MB in {field}: {response.status_code} {response.text[:300]}"
                error = response.json()["error"]
                assert error["code"] in ("PAYLOAD_TOO_LARGE", "INVALID_INPUT", "INVALID_QUERY"), error

        run()
    # Every body but a document's is refused by its size; a 10 MB document text by the document cap.
    assert statuses and all(codes <= {400, 413} for codes in statuses.values()), statuses
    assert statuses.get("POST /retrieve-context query") == {413}, statuses
    raw = client.post("/retrieve-context", content=b"{" + b" " * BIG + b"}", headers={**auth(ADMIN),
                                                                                 "Content-Type": "application/json"})
    assert raw.status_code == 413 and raw.json()["error"]["code"] == "PAYLOAD_TOO_LARGE"


def test_openapi_is_complete_with_examples(client):
    doc = client.get("/openapi.json").json()
    paths = doc["paths"]
    expected = {("post", "/documents"), ("delete", "/documents"), ("post", "/chat-messages"),
                ("post", "/retrieve-context"), ("delete", "/chat-messages/cleanup"), ("post", "/search"),
                ("post", "/chat"), ("get", "/sessions"), ("get", "/sessions/{session_id}/messages"),
                ("delete", "/sessions/{session_id}"), ("post", "/crawl"), ("post", "/pages"), ("get", "/status"),
                ("get", "/metrics/search"), ("get", "/health"), ("get", "/health/ready"), ("get", "/jobs"),
                ("get", "/jobs/{job_id}"), ("delete", "/jobs/{job_id}"), ("post", "/documents/files"),
                ("post", "/reindex")}
    assert {(m, p) for p, ops in paths.items() for m in ops} == expected
    components = doc["components"]["schemas"]
    for path, ops in paths.items():
        for method, op in ops.items():
            assert op.get("summary") and op.get("description"), (method, path)
            assert "422" not in op["responses"]
            if not path.startswith("/health"):
                assert {"400", "401", "429"} <= set(op["responses"]), (method, path)
                assert op.get("security"), (method, path)
            if "requestBody" in op:  # JSON, or multipart/form-data for uploads
                (content,) = op["requestBody"]["content"].values()
                ref = content["schema"]["$ref"].rsplit("/", 1)[-1]
                assert components[ref].get("examples"), f"{method} {path}: request body {ref} has no example"
    error = components["ErrorResponse"]
    assert set(error["properties"]) == {"success", "error"}
    assert {"BearerAuth", "APIKeyHeader"} & set(doc["components"]["securitySchemes"]) or \
        doc["components"]["securitySchemes"]


def test_response_schemas_name_every_key_of_the_workbench_results(client):
    """The response bodies are derived from the facade's result types: each key they return is documented,
    with its nesting (a search result's context chunks), and a required key stays required."""
    from typing_extensions import get_type_hints

    from rag_core.chat.retention import PurgeSummary
    from rag_core.ingest.store import StoreStatusInfo
    from rag_core.search.responses import ContextChunk, SearchDocument, SearchMetrics, SearchResponse

    components = client.get("/openapi.json").json()["components"]["schemas"]
    for component, shape in (("SearchOut", SearchResponse), ("SearchDocument", SearchDocument),
                             ("ContextChunk", ContextChunk), ("StatusOut", StoreStatusInfo),
                             ("MetricsOut", SearchMetrics), ("PurgeSummary", PurgeSummary)):
        assert set(components[component]["properties"]) == set(get_type_hints(shape)), component
    assert set(components["SearchOut"]["required"]) == set(get_type_hints(SearchResponse))
    results = components["SearchOut"]["properties"]["results"]["items"]["$ref"]
    assert results.endswith("/SearchDocument")
    assert "rerank_score" not in components["SearchDocument"]["required"]  # present only with a reranker
    assert "data_dir" not in components["StatusOut"]["required"]  # present only for the embedded server
    # Results that are objects (a chat turn, a crawl report) publish their to_dict(): every field and what it adds.
    import dataclasses

    from rag_core.chat.turn import ChatTurn
    from rag_core.ingest.web import WebIngestReport

    assert set(components["ChatTurnOut"]["properties"]) == {f.name for f in dataclasses.fields(ChatTurn)}
    assert set(components["WebReportOut"]["properties"]) == \
        {f.name for f in dataclasses.fields(WebIngestReport)} | {"error_counts"}
