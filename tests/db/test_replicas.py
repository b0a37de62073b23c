"""Read replicas: a real streaming standby made with `pg_basebackup -R` from a primary the test starts.

Searches, chat retrieval and listings read on the replica, writes go to the primary; a replica that
stops, or lags past RAG_REPLICA_MAX_LAG_SEC, is skipped and the primary answers; a replica that
comes back serves again; a process's own writes are never read from a replica that lacks them.
pg_stat_statements on each server shows which one ran a statement.
"""

from __future__ import annotations

import json
import time
import uuid
from typing import Iterator

import pytest
from fastapi.testclient import TestClient

from pg_servers import PgServer, primary_and_replica, start_replica, statements_on, wait_for_replay, wait_until
from rag_core import open_workbench
from rag_core.api.rest import create_app
from rag_core.settings import RagSettings

DOCS = [
    {"source": "pumps.md", "text": "Fire pumps are tested every year at full pressure; the result goes into the pump log."},
    {"source": "doors.md", "text": "Smoke doors close on their own when the alarm sounds and are never wedged open."},
    {"source": "roof.md", "text": "Roof drains are cleared of leaves before winter so meltwater cannot pond."},
]
VALVES = {"source": "valves.md", "text": "Sprinkler valves are chained open and sealed; a closed valve is reported."}
MAX_LAG_SEC = 1.0


@pytest.fixture(scope="module")
def cluster() -> Iterator[tuple[PgServer, PgServer]]:
    """A primary with a database `rag`, and a hot standby of it on another port; both stopped by pid afterwards."""
    with primary_and_replica("rag-test-replicas-") as servers:
        yield servers


def _settings(primary: PgServer, replica: PgServer, tmp_path_factory: pytest.TempPathFactory, **overrides: object
              ) -> RagSettings:
    values = {"database_url": primary.url("rag"), "database_read_url": [replica.url("rag")],
              "replica_max_lag_sec": MAX_LAG_SEC, "replica_check_sec": 0.2, "search_cache_ttl_sec": 0,
              "data_dir": tmp_path_factory.mktemp("rag-data"), "_env_file": None, **overrides}
    return RagSettings(**values)


@pytest.fixture(scope="module")
def rwb(cluster, tmp_path_factory: pytest.TempPathFactory):
    """A Workbench whose writes go to the primary and whose reads go to the replica."""
    primary, replica = cluster
    workbench = open_workbench(_settings(primary, replica, tmp_path_factory))
    yield workbench
    workbench.close()


@pytest.fixture
def site(rwb) -> str:
    site_id = f"t-replica-{uuid.uuid4().hex[:6]}"
    report = rwb.ingest_texts(DOCS, site_id=site_id)
    assert report.count("indexed") == len(DOCS), report
    return site_id


def chunk_reads(server: PgServer) -> int:
    """Statements on the chunks table this server has run since its counters were reset."""
    return statements_on(server, "chunks")


def reset_counters(*servers: PgServer) -> None:
    for server in servers:
        server.sql("SELECT pg_stat_statements_reset()", dbname="rag")


def settled(primary: PgServer, replica: PgServer) -> None:
    """The replica has replayed every write so far (this process's fence included); both counters start at 0."""
    wait_for_replay(primary, replica)
    reset_counters(primary, replica)


def state(wb) -> str:
    return wb.read_replicas()[0]["state"]


def top_source(wb, query: str, site: str) -> str | None:
    found = wb.search(query, site_id=site, limit=3)["results"]
    return found[0]["file_path"] if found else None


def test_reads_go_to_the_replica_and_writes_to_the_primary(cluster, rwb, site) -> None:
    primary, replica = cluster
    wait_until(lambda: state(rwb) == "ok")
    settled(primary, replica)

    assert top_source(rwb, "are fire pumps tested at full pressure", site) == "pumps.md"
    assert {h.source for h in rwb.retrieve("smoke doors alarm", k=2, site_id=site)} >= {"doors.md"}
    assert {d["source"] for d in rwb.documents(site_id=site)} == {d["source"] for d in DOCS}
    assert rwb.as_retriever(k=2, site_id=site).retrieve("fire pumps at full pressure")  # LlamaIndex's retriever
    chat = rwb.chat("When are roof drains cleared?", site_id=site)
    assert "roof.md" in [s.source for s in chat.sources]
    assert [s["site_id"] for s in rwb.list_sessions(site_id=site)] == [site]

    assert chunk_reads(replica) > 0
    assert chunk_reads(primary) == 0, "a search, retrieval or listing read the primary although the replica was well"
    # The writes (documents, the chat's messages, the query log) are on the primary, the replica is read-only.
    rwb.flush_search_log()
    assert primary.sql("SELECT count(*) FROM query_log WHERE site_id = %s", "rag", (site,))[0][0] >= 1
    assert primary.sql("SELECT count(*) FROM chat_messages m JOIN chat_sessions s ON s.id = m.session_id "
                       "WHERE s.site_id = %s", "rag", (site,))[0][0] == 2


def test_a_stopped_replica_is_skipped_and_used_again_when_it_returns(cluster, rwb, site) -> None:
    primary, replica = cluster
    wait_until(lambda: state(rwb) == "ok")
    assert top_source(rwb, "smoke doors alarm", site) == "doors.md"  # the replica's pool holds a connection

    replica.stop()
    started = time.perf_counter()
    assert top_source(rwb, "are fire pumps tested at full pressure", site) == "pumps.md"
    print(f"first search after the replica stopped: {(time.perf_counter() - started) * 1000:.1f} ms")
    for query in ("roof drains before winter", "smoke doors alarm"):
        assert top_source(rwb, query, site) in ("roof.md", "doors.md")
    assert rwb.documents(site_id=site)
    wait_until(lambda: state(rwb) == "down")
    assert rwb.read_replicas()[0]["reason"]  # the connection error, for `rag status` and the logs
    # The service stays ready on the primary; its readiness counts the replica down, naming no server.
    with TestClient(create_app(workbench=rwb, run_scheduler=False, warn_open=False, host_jobs=False)) as client:
        ready = client.get("/health/ready")
    assert ready.status_code == 200
    assert ready.json() == {"status": "ready", "database": "ok", "read_replicas": {"ok": 0, "lagging": 0, "down": 1}}

    replica.start()
    wait_until(lambda: state(rwb) == "ok")
    with TestClient(create_app(workbench=rwb, run_scheduler=False, warn_open=False, host_jobs=False)) as client:
        assert client.get("/health/ready").json()["read_replicas"] == {"ok": 1, "lagging": 0, "down": 0}
    settled(primary, replica)
    assert top_source(rwb, "roof drains before winter", site) == "roof.md"
    assert chunk_reads(replica) > 0 and chunk_reads(primary) == 0


def test_a_lagging_replica_is_skipped(cluster, rwb, site, tmp_path_factory) -> None:
    primary, replica = cluster
    wait_until(lambda: state(rwb) == "ok")
    wait_for_replay(primary, replica)  # this test is about the lag, not about this process's own writes
    replica.sql("SELECT pg_wal_replay_pause()")
    try:
        # Another process writes: this workbench's reads are not held back by a write of its own.
        with open_workbench(_settings(primary, replica, tmp_path_factory, database_read_url=[]),
                            embedder=rwb.embedder) as writer:
            writer.ingest_texts([VALVES], site_id=site)
        wait_until(lambda: state(rwb) == "lagging", timeout=30)
        assert "behind the primary" in rwb.read_replicas()[0]["reason"]
        reset_counters(primary, replica)
        assert top_source(rwb, "sprinkler valves chained open", site) == "valves.md"
        assert chunk_reads(replica) == 0 and chunk_reads(primary) > 0
    finally:
        replica.sql("SELECT pg_wal_replay_resume()")
    wait_until(lambda: state(rwb) == "ok")
    settled(primary, replica)
    assert top_source(rwb, "sprinkler valves chained open", site) == "valves.md"
    assert chunk_reads(replica) > 0 and chunk_reads(primary) == 0


def test_own_writes_are_read_back_even_from_a_replica_within_the_lag_bound(cluster, rwb, site, tmp_path_factory
                                                                          ) -> None:
    """A replica that lags less than the bound still lacks this process's last write: the reads after it go
    to the primary until the replica has replayed it, then to the replica again."""
    primary, replica = cluster
    patient = _settings(primary, replica, tmp_path_factory, replica_max_lag_sec=3600)
    with open_workbench(patient, embedder=rwb.embedder) as writer, \
            open_workbench(patient, embedder=rwb.embedder) as other:
        wait_until(lambda: state(writer) == "ok" and state(other) == "ok")
        wait_for_replay(primary, replica)  # the replica holds the site's first documents, not the valves
        replica.sql("SELECT pg_wal_replay_pause()")
        try:
            writer.ingest_texts([VALVES], site_id=site)
            assert state(writer) == "ok"  # within the bound: only the fence keeps the stale replica out
            assert top_source(writer, "sprinkler valves chained open", site) == "valves.md"
            assert "valves.md" in {d["source"] for d in writer.documents(site_id=site)}
            # Another process, which wrote nothing, reads the replica as it is: without the valves.
            assert top_source(other, "sprinkler valves chained open", site) != "valves.md"
            assert {d["source"] for d in other.documents(site_id=site)} == {d["source"] for d in DOCS}
        finally:
            replica.sql("SELECT pg_wal_replay_resume()")
        settled(primary, replica)
        wait_until(lambda: top_source(writer, "sprinkler valves chained open", site) == "valves.md"
                   and chunk_reads(replica) > 0)


def test_rag_status_shows_each_replica(cluster, monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    from typer.testing import CliRunner

    from rag_core.cli import app

    primary, replica = cluster
    monkeypatch.setenv("DATABASE_URL", primary.url("rag"))
    monkeypatch.setenv("DATABASE_READ_URL", f"{replica.url('rag')},postgresql://postgres@127.0.0.1:1/rag")
    monkeypatch.setenv("RAG_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["status", "--json"])
    assert result.exit_code == 0, result.output
    listed = json.loads(result.stdout)["read_replicas"]
    assert [(r["replica"], r["state"]) for r in listed] == [(f"127.0.0.1:{replica.port}/rag", "ok"),
                                                            ("127.0.0.1:1/rag", "down")]
    assert "refused" in listed[1]["reason"].lower()


def test_reads_are_shared_by_two_replicas_and_the_one_left_takes_them_all(cluster, site, tmp_path_factory) -> None:
    primary, replica = cluster
    second = start_replica(primary, "replica2")
    try:
        settings = _settings(primary, replica, tmp_path_factory,
                             database_read_url=[replica.url("rag"), second.url("rag")])
        with open_workbench(settings) as wb:
            wait_until(lambda: [r["state"] for r in wb.read_replicas()] == ["ok", "ok"])
            wait_for_replay(primary, second)
            settled(primary, replica)
            reset_counters(second)
            for _ in range(3):
                assert top_source(wb, "are fire pumps tested at full pressure", site) == "pumps.md"
            assert chunk_reads(replica) > 0 and chunk_reads(second) > 0 and chunk_reads(primary) == 0

            second.stop()
            reset_counters(replica)
            for _ in range(3):
                assert top_source(wb, "smoke doors alarm", site) == "doors.md"
            assert chunk_reads(replica) > 0 and chunk_reads(primary) == 0
            assert [r["state"] for r in wb.read_replicas()] == ["ok", "down"]
    finally:
        second.stop()
