"""Hostile input on every REST route: extreme numbers and dates, malformed bodies, odd text.

Each case was a 500 (or worse) before its fix: the answer must be a 4xx with a stable code, or the
ordinary result when the input, however odd, means something.
"""

from __future__ import annotations

import pytest

from rest_keys import KEY_A, SITE_A, auth


def test_the_last_representable_day_as_date_to_bounds_nothing(client):
    plain = client.post("/search", json={"query": "fire alarm", "site_id": SITE_A}, headers=auth(KEY_A))
    last_day = client.post("/search", json={"query": "fire alarm", "site_id": SITE_A,
                                            "date_range": {"to": "9999-12-31"}}, headers=auth(KEY_A))
    assert plain.status_code == 200 and last_day.status_code == 200, last_day.text
    assert [r["file_path"] for r in last_day.json()["results"]] == [r["file_path"] for r in plain.json()["results"]]
    assert "a/fire.md" in [r["file_path"] for r in plain.json()["results"]]


@pytest.mark.parametrize("since,words", [
    ("3000000d", "reaches back before the year 1"),
    ("99999999999d", "longer than any duration"),
])
def test_a_since_beyond_the_calendar_is_invalid_input(client, since, words):
    response = client.get("/metrics/search", params={"site_id": SITE_A, "since": since}, headers=auth(KEY_A))
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["code"] == "INVALID_INPUT" and words in error["message"]


@pytest.mark.parametrize("path,code", [("/search", "INVALID_QUERY"), ("/retrieve-context", "INVALID_INPUT")])
def test_a_body_nested_past_the_json_parser_is_a_stable_code(client, path, code):
    """Nested 200,000 deep the JSON parser gives up (RecursionError): the caller gets the usual codes."""
    deep = b"[" * 200_000 + b"]" * 200_000
    response = client.post(path, content=deep, headers={**auth(KEY_A), "Content-Type": "application/json"})
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["code"] == code and "could not be read as JSON" in error["message"]


@pytest.mark.parametrize("field,value,code_point", [
    ("source", "invoice\u202efdp.exe", "U+202E"),
    ("source", "notes/a\u0001.md", "U+0001"),
    ("title", "Budget\u2067 2024", "U+2067"),
    ("title", "two\nlines", "U+000A"),
])
def test_a_document_name_with_invisible_characters_is_refused(client, wb, field, value, code_point):
    """A source shown as 'invoiceexe.pdf' that is 'invoice<RLO>fdp.exe' would pass for another document."""
    body = {"site_id": SITE_A, "source": "notes/plain.md", "content": "Some text.", field: value}
    before = wb.status(site_id=SITE_A)["documents"]
    response = client.post("/documents", json=body, headers=auth(KEY_A))
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["code"] == "INVALID_INPUT" and code_point in error["message"] and field in error["message"]
    assert wb.status(site_id=SITE_A)["documents"] == before
