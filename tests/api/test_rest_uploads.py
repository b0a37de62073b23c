"""File uploads (POST /documents/files) and reindex jobs (POST /reindex) over REST, against the real store,
the packaged model and the in-process worker the app starts while no `rag worker` is alive."""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

import anyio
import pytest

from filebuilders import make_pdf
from rest_keys import ADMIN, KEY_A, KEY_ALL, KEY_B, SITE_A, SITE_B, auth

RUN = uuid.uuid4().hex[:8]


def follow(client: Any, job_id: int, key: str, timeout: float = 180) -> dict[str, Any]:
    """GET /jobs/{id} until the job is done or failed (the app's own worker runs it)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        job = client.get(f"/jobs/{job_id}", headers=auth(key))
        assert job.status_code == 200, job.text
        if job.json()["status"] in ("done", "failed", "cancelled"):
            return job.json()
        time.sleep(0.2)
    raise AssertionError(f"job {job_id} did not finish in {timeout:.0f} s: {job.json()}")


def stored_copies(wb: Any, site: str, sources: list[str]) -> dict[str, int]:
    with wb.db.connection() as conn:
        rows = conn.execute("SELECT source, count(*) FROM documents WHERE site_id = %s AND source = ANY(%s) "
                            "GROUP BY source", (site, sources)).fetchall()
    return {source: count for source, count in rows}


@pytest.fixture
def names(wb: Any) -> Any:
    """File names unique to the test; their documents are deleted afterwards in both sites."""
    made: list[str] = []

    def name(suffix: str) -> str:
        made.append(f"up-{RUN}-{uuid.uuid4().hex[:6]}{suffix}")
        return made[-1]

    yield name
    with wb.db.connection() as conn:
        conn.execute("DELETE FROM documents WHERE source = ANY(%s)", (made,))


def test_two_files_uploaded_in_place_are_found_by_search(client, wb, names):
    pdf, md = names(".pdf"), names(".md")
    files = [("files", (pdf, make_pdf(["The periwinkle boiler must be serviced every autumn by a certified fitter."]),
                        "application/pdf")),
             ("files", (md, b"# Quarry\n\nThe quarry gate closes at dusk; the marmalade truck waits outside.\n",
                        "text/markdown"))]
    response = client.post("/documents/files", files=files, data={"site_id": SITE_A}, headers=auth(KEY_A))
    assert response.status_code == 200, response.text
    report = response.json()
    assert report["site_id"] == SITE_A and report["indexed"] == 2 and report["failed"] == 0
    assert [(f["source"], f["status"]) for f in report["files"]] == [(pdf, "indexed"), (md, "indexed")]
    assert all(f["chunks"] >= 1 and isinstance(f["document_id"], int) for f in report["files"])
    assert [h["file_path"] for h in wb.search("periwinkle boiler", site_id=SITE_A, mode="fulltext")["results"]] == [pdf]
    assert [h["file_path"] for h in wb.search("marmalade truck", site_id=SITE_A, mode="hybrid")["results"]][:1] == [md]

    # The same bytes again are recognised and not embedded twice.
    again = client.post("/documents/files", files=files, data={"site_id": SITE_A}, headers=auth(KEY_A)).json()
    assert [f["status"] for f in again["files"]] == ["unchanged", "unchanged"] and again["chunks"] == 0
    assert stored_copies(wb, SITE_A, [pdf, md]) == {pdf: 1, md: 1}


def test_a_corrupt_file_fails_alone_and_loses_nothing_stored(client, wb, names):
    manual, good = names(".pdf"), names(".md")
    first = client.post("/documents/files", files=[("files", (manual, make_pdf(
        ["The tangerine valve is opened with the brass key kept in the office."]), "application/pdf"))],
                        data={"site_id": SITE_A}, headers=auth(KEY_A))
    assert first.status_code == 200 and first.json()["indexed"] == 1
    # A corrupt version of the same file, beside a good new one.
    corrupt = b"%PDF-1.7\n1 0 obj << /Type /Catalog /Pages 2 0 R >> endobj\n\x00\x13garbage, no xref, no trailer"
    response = client.post("/documents/files", files=[("files", (manual, corrupt, "application/pdf")),
                                                      ("files", (good, b"The lighthouse keeper logs every ship.",
                                                                 "text/markdown"))],
                           data={"site_id": SITE_A}, headers=auth(KEY_A))
    assert response.status_code == 200, response.text
    report = response.json()
    bad, fine = report["files"]
    assert bad["source"] == manual and bad["status"] == "failed" and bad["reason"]
    assert fine["source"] == good and fine["status"] == "indexed"
    assert report["failed"] == 1 and report["indexed"] == 1
    # The stored version of the corrupt file is still there, whole.
    hits = wb.search("tangerine valve brass key", site_id=SITE_A, mode="fulltext")["results"]
    assert [h["file_path"] for h in hits] == [manual]
    assert stored_copies(wb, SITE_A, [manual, good]) == {manual: 1, good: 1}


def test_background_upload_is_a_job_of_its_site_storing_each_file_once(client, wb, names):
    one, two = names(".md"), names(".txt")
    files = [("files", (one, b"The walrus ferry leaves the harbour at noon.", "text/markdown")),
             ("files", (two, b"The saffron warehouse opens on Mondays.", "text/plain"))]
    queued = client.post("/documents/files?background=true", files=files, data={"site_id": SITE_A},
                         headers=auth(KEY_A))
    assert queued.status_code == 202, queued.text
    job_id = queued.json()["job_id"]
    assert queued.json()["status_url"] == f"/jobs/{job_id}"
    # Another site's key does not see the job, nor can it upload to this site.
    assert client.get(f"/jobs/{job_id}", headers=auth(KEY_B)).status_code == 404
    assert job_id not in [j["id"] for j in client.get("/jobs", headers=auth(KEY_B)).json()["jobs"]]
    job = follow(client, job_id, KEY_A)
    assert job["status"] == "done" and job["site_id"] == SITE_A, job
    assert job["result"]["indexed"] == 2 and job["errors"] == []
    assert stored_copies(wb, SITE_A, [one, two]) == {one: 1, two: 1}
    assert [h["file_path"] for h in wb.search("walrus ferry", site_id=SITE_A, mode="fulltext")["results"]] == [one]


def test_a_site_key_cannot_upload_to_another_site(client, wb, names):
    name = names(".md")
    files = [("files", (name, b"Site B must never receive this note about the cobalt lantern.", "text/markdown"))]
    for background in (False, True):
        refused = client.post(f"/documents/files?background={str(background).lower()}", files=files,
                              data={"site_id": SITE_B}, headers=auth(KEY_A))
        assert refused.status_code == 401 and refused.json()["error"]["code"] == "UNAUTHORIZED"
    assert stored_copies(wb, SITE_B, [name]) == {}
    # A key with one site may leave site_id out: the files go to its site.
    own = client.post("/documents/files", files=files, headers=auth(KEY_B))
    assert own.status_code == 200 and own.json()["site_id"] == SITE_B
    assert stored_copies(wb, SITE_B, [name]) == {name: 1}


def _post_upload_asgi(app: Any, headers: list[tuple[bytes, bytes]]) -> tuple[int, dict[str, Any], int]:
    """POST a multipart upload straight to the ASGI app: (status, JSON body, body messages the app asked for)."""
    asked = 0

    async def receive() -> dict[str, Any]:
        nonlocal asked
        asked += 1
        return {"type": "http.request", "body": b"x" * 65536, "more_body": asked < 16}

    sent: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST", "scheme": "http",
             "path": "/documents/files", "raw_path": b"/documents/files", "root_path": "", "query_string": b"",
             "headers": [(b"host", b"testserver"), (b"content-type", b"multipart/form-data; boundary=zz"),
                         (b"content-length", str(16 * 65536).encode()), *headers],
             "client": ("203.0.113.7", 40000), "server": ("testserver", 80)}
    anyio.run(app, scope, receive, send)
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return sent[0]["status"], json.loads(body), asked


def test_an_upload_without_a_valid_key_is_refused_before_its_body_is_read(client):
    """FastAPI reads a form before it resolves the caller: without the guard's check, anyone could make the server
    spool an upload of RAG_MAX_FILE_MB before hearing 401."""
    for headers in ([], [(b"x-api-key", b"not-a-key")], [(b"authorization", b"Bearer not-a-key")],
                    [(b"authorization", f"Basic {KEY_A}".encode())]):
        status, body, asked = _post_upload_asgi(client.app, headers)
        assert (status, body["error"]["code"], asked) == (401, "UNAUTHORIZED", 0), headers
    # A valid key gets past the guard: the body is read and the broken form is refused for what it is.
    status, body, asked = _post_upload_asgi(client.app, [(b"authorization", f"Bearer {KEY_A}".encode())])
    assert status == 400 and body["error"]["code"] == "INVALID_INPUT" and asked > 0


def test_an_upload_over_the_limit_names_it_and_its_setting(make_client, wb, names):
    client = make_client(max_file_mb=0.2)
    name = names(".txt")
    response = client.post("/documents/files", files=[("files", (name, b"a" * 300_000, "text/plain"))],
                           data={"site_id": SITE_A}, headers=auth(KEY_A))
    assert response.status_code == 413
    error = response.json()["error"]
    assert error["code"] == "PAYLOAD_TOO_LARGE" and "RAG_MAX_FILE_MB" in error["message"], error
    assert "0.2 MB" in error["message"]
    assert stored_copies(wb, SITE_A, [name]) == {}


def test_uploads_count_against_the_ingest_budget(make_client, wb, names):
    """The budget counts uploaded bytes before any work; a request larger than the whole budget is told so."""
    client = make_client(ingest_char_limit="5000000/hour")
    big = b"\x00" * 3_000_000  # of a type no loader reads: counted, then reported, never embedded
    first = client.post("/documents/files", files=[("files", (names(".bin"), big, "application/octet-stream"))],
                        data={"site_id": SITE_A}, headers=auth(KEY_A))
    assert first.status_code == 200 and first.json()["files"][0]["status"] == "failed"
    over = client.post("/documents/files", files=[("files", (names(".bin"), big, "application/octet-stream"))],
                       data={"site_id": SITE_A}, headers=auth(KEY_A))
    assert over.status_code == 429 and over.json()["error"]["code"] == "RATE_LIMIT"
    assert "Retry-After" in over.headers
    whole = make_client(ingest_char_limit="5000000/hour").post(
        "/documents/files", files=[("files", (names(".bin"), big, "application/octet-stream")),
                                   ("files", (names(".bin"), big, "application/octet-stream"))],
        data={"site_id": SITE_A}, headers=auth(KEY_A))
    assert whole.status_code == 400 and "RAG_INGEST_CHAR_LIMIT" in whole.json()["error"]["message"]


def test_reindex_is_an_admin_job(client, wb):
    for key in (KEY_A, KEY_ALL):
        refused = client.post("/reindex?background=true", headers=auth(key))
        assert refused.status_code == 401 and refused.json()["error"]["code"] == "UNAUTHORIZED"
    # Run in place it could outlast any client or proxy: the answer says how to ask for the job.
    inline = client.post("/reindex", headers=auth(ADMIN))
    assert inline.status_code == 400 and "background=true" in inline.json()["error"]["message"]
    # Vectors lost (an interrupted reindex leaves them so): the job embeds them again.
    with wb.db.connection() as conn:
        cleared = [r[0] for r in conn.execute(
            "UPDATE chunks SET embedding = NULL WHERE document_id IN (SELECT id FROM documents WHERE site_id = %s) "
            "RETURNING id", (SITE_A,)).fetchall()]
    assert cleared
    queued = client.post("/reindex?background=true", headers=auth(ADMIN))
    assert queued.status_code == 202, queued.text
    job_id = queued.json()["job_id"]
    assert client.get(f"/jobs/{job_id}", headers=auth(KEY_A)).status_code == 404  # store-wide: not a site key's
    job = follow(client, job_id, ADMIN)
    assert job["status"] == "done" and job["kind"] == "reindex", job
    assert job["result"]["embedder"] == wb.embedder_name and job["result"]["chunks"] >= len(cleared), job
    with wb.db.connection() as conn:
        assert conn.execute("SELECT count(*) FROM chunks WHERE id = ANY(%s) AND embedding IS NULL",
                            (cleared,)).fetchone()[0] == 0
    hits = wb.search("evacuation routes width", site_id=SITE_A, mode="semantic")["results"]
    assert hits and hits[0]["file_path"] == "a/fire.md"


def test_a_malformed_upload_names_what_is_wrong(client):
    no_files = client.post("/documents/files", data={"site_id": SITE_A}, headers=auth(KEY_A))
    assert no_files.status_code == 400 and no_files.json()["error"]["message"].startswith("files: Field required")
    misspelt = client.post("/documents/files", files=[("files", ("a.md", b"text", "text/markdown"))],
                           data={"site": SITE_A}, headers=auth(KEY_A))
    assert misspelt.status_code == 400 and misspelt.json()["error"]["message"].startswith("site:")
    broken = client.post("/documents/files", content=b"--xyz\r\nnot a part header\r\n",
                         headers={**auth(KEY_A), "Content-Type": "multipart/form-data; boundary=xyz"})
    assert broken.status_code == 400 and "multipart/form-data" in broken.json()["error"]["message"], broken.text
