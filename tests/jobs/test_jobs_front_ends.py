"""Background jobs through the front-ends: REST (202, GET /jobs/{id}, key scoping, the in-process worker of
`rag serve`) and the CLI (`--background --json`, `rag jobs list|show|cancel`)."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any, Iterator

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from job_helpers import make_folder, wait_for
from rag_core.api.rest import create_app
from rag_core.cli import app as cli_app
from rag_core.settings import RagSettings

RUN = uuid.uuid4().hex[:6]
SITE_A, SITE_B = f"t-jobs-a-{RUN}", f"t-jobs-b-{RUN}"
KEY_A, KEY_B, ADMIN = f"ka-{uuid.uuid4().hex}", f"kb-{uuid.uuid4().hex}", f"adm-{uuid.uuid4().hex}"
runner = CliRunner()


def auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


@pytest.fixture
def make_client(jwb: Any, jobs_env: dict[str, str]) -> Iterator[Any]:
    clients: list[TestClient] = []

    def factory(host_jobs: bool = False) -> TestClient:
        settings = RagSettings(database_url=jobs_env["DATABASE_URL"], data_dir=jobs_env["RAG_DATA_DIR"],
                               _env_file=None, api_keys=f"{KEY_A}={SITE_A},{KEY_B}={SITE_B}", admin_api_key=ADMIN,
                               rate_limit="off", job_stalled_sec=4, worker_heartbeat_sec=1)
        client = TestClient(create_app(settings, workbench=jwb, run_scheduler=False, host_jobs=host_jobs))
        client.__enter__()
        clients.append(client)
        return client

    yield factory
    for client in clients:
        client.__exit__(None, None, None)


def document(site: str, name: str) -> dict[str, str]:
    return {"site_id": site, "source": f"{name}.md", "title": name,
            "content": f"The {name} note: the boiler room door must stay closed at all times."}


def test_rest_background_returns_202_and_the_job_is_scoped_to_its_site(jwb, make_client) -> None:
    client = make_client()
    queued = client.post("/documents?background=true", json=document(SITE_A, "boiler"), headers=auth(KEY_A))
    assert queued.status_code == 202, queued.text
    job_id = queued.json()["job_id"]
    assert queued.json()["status_url"] == f"/jobs/{job_id}"

    job = client.get(f"/jobs/{job_id}", headers=auth(KEY_A))
    assert job.status_code == 200 and job.json()["status"] == "queued" and job.json()["site_id"] == SITE_A
    # Another site's key learns nothing about it, not even that it exists.
    other = client.get(f"/jobs/{job_id}", headers=auth(KEY_B))
    assert other.status_code == 404 and other.json()["error"]["code"] == "NOT_FOUND"
    assert client.get(f"/jobs/{10**9}", headers=auth(KEY_B)).status_code == 404
    assert job_id not in [j["id"] for j in client.get("/jobs", headers=auth(KEY_B)).json()["jobs"]]
    assert job_id in [j["id"] for j in client.get("/jobs", headers=auth(KEY_A)).json()["jobs"]]
    assert client.delete(f"/jobs/{job_id}", headers=auth(KEY_B)).status_code == 404

    jwb.run_worker(wait=False)  # a worker empties the queue and returns
    done = client.get(f"/jobs/{job_id}", headers=auth(ADMIN)).json()
    assert done["status"] == "done" and done["result"]["indexed"] == 1 and done["finished_at"]
    hits = jwb.search("boiler room door", site_id=SITE_A, mode="fulltext")
    assert [h["file_path"] for h in hits["results"]] == ["boiler.md"]

    # Without the flag the request still runs in place and answers as before.
    inline = client.post("/documents", json=document(SITE_A, "stairs"), headers=auth(KEY_A))
    assert inline.status_code == 201 and inline.json()["status"] == "indexed"


def test_rest_background_crawl_refused_at_once(make_client, jwb) -> None:
    client = make_client()
    before = len(jwb.jobs(limit=1000))
    refused = client.post("/crawl?background=true", json={"index_url": "https://not-allowed.example/", "site_id": SITE_A},
                          headers=auth(KEY_A))
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "CRAWL_REFUSED"
    assert len(jwb.jobs(limit=1000)) == before


def test_serve_runs_jobs_itself_while_no_worker_is_alive(make_client, jwb) -> None:
    assert jwb.job_workers_alive() == 0
    client = make_client(host_jobs=True)
    job_id = client.post("/documents?background=true", json=document(SITE_B, "hosted"), headers=auth(KEY_B)).json()["job_id"]
    done = wait_for(lambda: (j := client.get(f"/jobs/{job_id}", headers=auth(KEY_B)).json())["status"] == "done" and j,
                    120, "the in-process worker to run the job")
    assert done["result"]["indexed"] == 1


def test_cli_background_json_and_jobs_commands(jwb, jobs_env, monkeypatch, tmp_path: Path) -> None:
    for name, value in jobs_env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.chdir(tmp_path)
    site = f"t-cli-{RUN}"
    folder = make_folder(tmp_path, 3, "cli")

    result = runner.invoke(cli_app, ["ingest", str(folder), "--site", site, "--background", "--json"])
    assert result.exit_code == 0, result.output
    job_id = json.loads(result.stdout)["job_id"]
    shown = json.loads(runner.invoke(cli_app, ["jobs", "show", str(job_id), "--json"]).stdout)
    assert shown["status"] == "queued" and shown["kind"] == "ingest" and shown["site_id"] == site
    listed = json.loads(runner.invoke(cli_app, ["jobs", "list", "--json"]).stdout)
    assert job_id in [j["id"] for j in listed]

    reindex = json.loads(runner.invoke(cli_app, ["reindex", "--background", "--json"]).stdout)["job_id"]
    cancelled = runner.invoke(cli_app, ["jobs", "cancel", str(reindex)])
    assert cancelled.exit_code == 0 and "cancelled" in cancelled.stdout
    assert json.loads(runner.invoke(cli_app, ["jobs", "show", str(reindex), "--json"]).stdout)["status"] == "cancelled"
    again = runner.invoke(cli_app, ["jobs", "cancel", str(reindex)])
    assert again.exit_code == 1 and "cancelled already" in again.output

    refused = runner.invoke(cli_app, ["crawl", "https://not-allowed.example/", "--site", site, "--background", "--json"])
    assert refused.exit_code == 1 and "CRAWL_REFUSED" in refused.output

    jwb.run_worker(wait=False)
    done = json.loads(runner.invoke(cli_app, ["jobs", "show", str(job_id), "--json"]).stdout)
    assert done["status"] == "done" and done["done"] == done["total"] == 3 and done["result"]["indexed"] == 3
    text = runner.invoke(cli_app, ["jobs", "list"]).stdout
    assert f"{job_id}" in text and "done" in text and "3/3" in text
    missing = runner.invoke(cli_app, ["jobs", "show", "999999999"])
    assert missing.exit_code == 1 and "NOT_FOUND" in missing.output


def test_uploads_wait_in_the_database_until_their_job_stored_them(jwb) -> None:
    site = f"t-upload-{RUN}"
    job_id = jwb.enqueue_uploads([("pumps.md", b"# Pumps\n\nPumps are serviced every spring."),
                                  ("tool.exe", b"MZ not a document")], site_id=site)
    with jwb.db.connection() as conn:
        assert conn.execute("SELECT count(*) FROM job_files").fetchone()[0] == 2
    jwb.run_worker(wait=False)
    done = jwb.job(job_id)
    assert done["status"] == "done" and done["result"]["indexed"] == 1
    assert [e["source"] for e in done["errors"]] == ["tool.exe"] and ".exe" in done["errors"][0]["reason"]
    with jwb.db.connection() as conn:
        assert conn.execute("SELECT count(*) FROM job_files").fetchone()[0] == 0
    assert [d["source"] for d in jwb.documents(site_id=site)] == ["pumps.md"]
