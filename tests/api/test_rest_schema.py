"""The OpenAPI document is complete, and a property-based run from it (schemathesis) never gets a 5xx."""

from __future__ import annotations

import uuid

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


def test_no_generated_request_gets_a_server_error(make_client, fuzz_site):
    """Every operation of the app's own OpenAPI document, a few generated requests each (with the admin key)."""
    api = schemathesis.openapi.from_asgi("/openapi.json", make_client().app)
    operations = [result.ok() for result in api.get_all_operations()]
    assert len(operations) == 15
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


def test_openapi_is_complete_with_examples(client):
    doc = client.get("/openapi.json").json()
    paths = doc["paths"]
    expected = {("post", "/documents"), ("delete", "/documents"), ("post", "/chat-messages"),
                ("post", "/retrieve-context"), ("delete", "/chat-messages/cleanup"), ("post", "/search"),
                ("post", "/chat"), ("get", "/sessions"), ("get", "/sessions/{session_id}/messages"),
                ("delete", "/sessions/{session_id}"), ("post", "/crawl"), ("post", "/pages"), ("get", "/status"),
                ("get", "/metrics/search"), ("get", "/health")}
    assert {(m, p) for p, ops in paths.items() for m in ops} == expected
    components = doc["components"]["schemas"]
    for path, ops in paths.items():
        for method, op in ops.items():
            assert op.get("summary") and op.get("description"), (method, path)
            assert "422" not in op["responses"]
            if path != "/health":
                assert {"400", "401", "429"} <= set(op["responses"]), (method, path)
                assert op.get("security"), (method, path)
            if "requestBody" in op:
                ref = op["requestBody"]["content"]["application/json"]["schema"]["$ref"].rsplit("/", 1)[-1]
                assert components[ref].get("examples"), f"{method} {path}: request body {ref} has no example"
    error = components["ErrorResponse"]
    assert set(error["properties"]) == {"success", "error"}
    assert {"BearerAuth", "APIKeyHeader"} & set(doc["components"]["securitySchemes"]) or \
        doc["components"]["securitySchemes"]
