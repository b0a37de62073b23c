"""With nothing configured (the embedded PostgreSQL on its Unix socket, no worker started), a job queued by
`rag ingest --background` runs in `rag serve`'s own process."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import httpx

from job_helpers import make_folder, wait_for

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "api"))
from serving import start_rag_serve, stop  # noqa: E402

RAG = str(Path(sys.executable).with_name("rag"))


def test_job_queued_by_the_cli_is_run_by_rag_serve_on_the_embedded_default(server_dir: Path, tmp_path: Path) -> None:
    import os

    env = {**os.environ, "DATABASE_URL": "", "RAG_DATA_DIR": str(server_dir / "data"), "RAG_API_KEYS": "",
           "RAG_ADMIN_API_KEY": "", "RAG_WORKER_HEARTBEAT_SEC": "1", "RAG_JOB_STALLED_SEC": "4"}
    folder = make_folder(tmp_path, 3, "embedded")
    queued = subprocess.run([RAG, "ingest", str(folder), "--site", "emb", "--background", "--json"], env=env,
                            cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert queued.returncode == 0, queued.stderr
    job_id = json.loads(queued.stdout)["job_id"]
    assert "No worker is running" in queued.stderr

    proc, base = start_rag_serve([], env, tmp_path, tmp_path / "serve.log", timeout=180, ready="/health/ready")
    try:
        done = wait_for(lambda: (j := httpx.get(f"{base}/jobs/{job_id}", timeout=10).json())["status"] == "done" and j,
                        120, "rag serve to run the queued job")
        assert done["done"] == done["total"] == 3 and done["result"]["indexed"] == 3
    finally:
        stop(proc)
    shown = subprocess.run([RAG, "jobs", "show", str(job_id), "--json"], env=env, cwd=tmp_path, capture_output=True,
                           text=True, timeout=300)
    assert json.loads(shown.stdout)["status"] == "done"
