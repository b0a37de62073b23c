"""Job fixtures: a database of the jobs tests' own (no other test's in-process worker takes their jobs),
a Workbench on it sharing the session's loaded embedder, and `rag worker` subprocesses."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

from rag_core import open_workbench
from rag_core.db.database import create_database_if_missing, drop_database, with_database
from rag_core.settings import RagSettings

ROOT = Path(__file__).resolve().parents[2]
# Short heartbeats so a killed worker's job is taken back within seconds, not the default half minute.
HEARTBEAT_SEC = 1
STALLED_SEC = 4


@pytest.fixture(scope="module")
def jobs_url(pg_server_url: str) -> Iterator[str]:
    url = with_database(pg_server_url, f"rag_jobs_{uuid.uuid4().hex[:10]}")
    create_database_if_missing(url)
    yield url
    drop_database(url)


@pytest.fixture(scope="module")
def jobs_env(jobs_url: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The environment of a `rag` process on the jobs database."""
    return {"DATABASE_URL": jobs_url, "RAG_DATA_DIR": str(tmp_path_factory.mktemp("jobs-data")),
            "RAG_WORKER_HEARTBEAT_SEC": str(HEARTBEAT_SEC), "RAG_JOB_STALLED_SEC": str(STALLED_SEC),
            "RAG_JOBS_IN_PROCESS_WORKER": "auto"}


@pytest.fixture(scope="module")
def jwb(wb: Any, jobs_env: dict[str, str]) -> Iterator[Any]:
    """A Workbench on the jobs database; it hosts no worker unless a test asks it to."""
    settings = RagSettings(database_url=jobs_env["DATABASE_URL"], data_dir=jobs_env["RAG_DATA_DIR"], _env_file=None,
                           worker_heartbeat_sec=HEARTBEAT_SEC, job_stalled_sec=STALLED_SEC)
    workbench = open_workbench(settings, embedder=wb.embedder)
    yield workbench
    workbench.close()


@pytest.fixture
def start_worker(jobs_env: dict[str, str]) -> Iterator[Callable[..., subprocess.Popen]]:
    """Start `rag worker` processes on the jobs database; the ones still running are stopped afterwards."""
    started: list[subprocess.Popen] = []

    def start(*args: str) -> subprocess.Popen:
        env = {**os.environ, **jobs_env, "PYTHONPATH": str(ROOT)}
        proc = subprocess.Popen([sys.executable, "-m", "rag_core.cli", "worker", *args], env=env, cwd=ROOT,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        started.append(proc)
        return proc

    yield start
    for proc in started:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
    for proc in started:
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
