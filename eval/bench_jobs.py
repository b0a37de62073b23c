"""Job queue benchmark: jobs per second and documents per second with 1 and 2 `rag worker` processes, and the
time from enqueue to start.

Runs on a database of its own (an embedded server in a temporary folder unless DATABASE_URL is set; a
database named rag_bench_jobs_* is created and dropped there). Workers are real `rag worker` processes
with the configured embedder (e5-small by default), started after a warm-up so model loading is not
counted.

- small jobs: N jobs of one short text each (the queue's own cost plus one tiny embedding per job);
- folder jobs: J jobs of D single-chunk files each (embedding-bound: the CPU is the ceiling);
- enqueue to start: one job at a time into an idle worker, the median of R (procrastinate's 'deferred'
  and 'started' events, both stamped by the database clock).

    .venv/bin/python eval/bench_jobs.py                 # prints the table, writes eval/results/bench_jobs.json
    .venv/bin/python eval/bench_jobs.py --small 100 --folders 6 --docs 50 --repeats 15
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from rag_core import open_workbench
from rag_core.db.database import create_database_if_missing, drop_database, with_database
from rag_core.settings import RagSettings

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "eval" / "results" / "bench_jobs.json"


def _server(tmp: Path) -> tuple[str, Any]:
    """A server URL: DATABASE_URL's server, or an embedded one in `tmp` (stopped by the returned callable)."""
    if os.environ.get("DATABASE_URL"):
        return os.environ["DATABASE_URL"], lambda: None
    from rag_core.db.server import embedded_server_uri, release_embedded_server

    folder = tmp / "server"
    folder.mkdir()
    tmp.chmod(0o755)
    folder.chmod(0o755)
    return embedded_server_uri(folder), lambda: release_embedded_server(folder)


def _events(wb: Any, job_ids: list[int]) -> dict[int, dict[str, float]]:
    """Per job: the database times (epoch seconds) of deferred, started and finished."""
    with wb.db.connection() as conn:
        rows = conn.execute(
            "SELECT job_id, type::text, extract(epoch FROM at) FROM procrastinate_events WHERE job_id = ANY(%s)",
            (job_ids,)).fetchall()
    out: dict[int, dict[str, float]] = {}
    for job_id, kind, at in rows:
        out.setdefault(job_id, {})[kind] = float(at)
    return out


def _wait(wb: Any, job_ids: list[int], timeout: float = 1800) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with wb.db.connection() as conn:
            left = conn.execute("SELECT count(*) FROM procrastinate_jobs WHERE id = ANY(%s)"
                                " AND status IN ('todo', 'doing')", (job_ids,)).fetchone()[0]
        if not left:
            failed = [j for j in job_ids if wb.job(j)["status"] != "done"]
            if failed:
                raise SystemExit(f"jobs did not end done: {failed[:5]} ({wb.job(failed[0])['errors'][:2]})")
            return
        time.sleep(0.05)
    raise SystemExit(f"jobs still running after {timeout:.0f} s")


def _span(wb: Any, job_ids: list[int]) -> float:
    """From the first job queued to the last one finished (database clock)."""
    ev = _events(wb, job_ids)
    return max(e["succeeded"] for e in ev.values()) - min(e["deferred"] for e in ev.values())


def _folder(root: Path, name: str, docs: int) -> Path:
    folder = root / name
    folder.mkdir(parents=True)
    for i in range(docs):
        (folder / f"doc{i:04d}.md").write_text(
            f"# {name} note {i}\n\nInspection record {i} of {name}: the stair {i % 13} handrail and the exit "
            f"sign {i % 7} were checked on floor {i % 9}; everything was found in order.\n", encoding="utf-8")
    return folder


def run(workers: int, args: argparse.Namespace, wb: Any, env: dict[str, str], tmp: Path) -> dict[str, Any]:
    procs = [subprocess.Popen([sys.executable, "-m", "rag_core.cli", "worker"], env=env, cwd=ROOT,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for _ in range(workers)]
    try:
        tag = uuid.uuid4().hex[:6]
        # Warm-up: every worker loads its model on its first job.
        warm = [wb.enqueue_texts([{"source": f"warm{i}.md", "text": f"warm-up text {i} {tag}"}], site_id="bench-warm")
                for i in range(workers * 3)]
        _wait(wb, warm)

        small = [wb.enqueue_texts([{"source": f"s{i}.md", "text": f"Small job {i} of run {tag}: the door {i} is shut."}],
                                  site_id=f"bench-small-{tag}") for i in range(args.small)]
        _wait(wb, small)
        small_sec = _span(wb, small)

        folders = [_folder(tmp / f"w{workers}-{tag}", f"f{j}", args.docs) for j in range(args.folders)]
        big = [wb.enqueue_ingest([f], site_id=f"bench-docs-{tag}") for f in folders]
        _wait(wb, big)
        big_sec = _span(wb, big)

        latencies = []
        for i in range(args.repeats):
            time.sleep(0.3)  # the worker is idle, waiting on LISTEN, when the job arrives
            job = wb.enqueue_texts([{"source": f"l{i}.md", "text": f"latency probe {i} {tag}"}], site_id="bench-lat")
            _wait(wb, [job])
            ev = _events(wb, [job])[job]
            latencies.append((ev["started"] - ev["deferred"]) * 1000)
        return {"workers": workers, "small_jobs": args.small, "small_jobs_per_sec": round(args.small / small_sec, 2),
                "folder_jobs": args.folders, "docs_per_job": args.docs,
                "folder_jobs_per_sec": round(args.folders / big_sec, 3),
                "docs_per_sec": round(args.folders * args.docs / big_sec, 1),
                "enqueue_to_start_ms_median": round(statistics.median(latencies), 1),
                "enqueue_to_start_ms_max": round(max(latencies), 1), "latency_samples": len(latencies)}
    finally:
        for p in procs:
            p.send_signal(signal.SIGTERM)
        for p in procs:
            try:
                p.wait(timeout=60)
            except subprocess.TimeoutExpired:
                p.kill()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--small", type=int, default=60, help="small jobs per run")
    parser.add_argument("--folders", type=int, default=4, help="folder jobs per run")
    parser.add_argument("--docs", type=int, default=100, help="files per folder job")
    parser.add_argument("--repeats", type=int, default=11, help="enqueue-to-start samples")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    args = parser.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="rag-bench-jobs-"))
    server, stop = _server(tmp)
    url = with_database(server, f"rag_bench_jobs_{uuid.uuid4().hex[:8]}")
    create_database_if_missing(url)
    env = {**os.environ, "DATABASE_URL": url, "RAG_DATA_DIR": str(tmp / "data"), "PYTHONPATH": str(ROOT),
           "RAG_JOBS_IN_PROCESS_WORKER": "off"}
    wb = open_workbench(RagSettings(database_url=url, data_dir=tmp / "data", jobs_in_process_worker="off"))
    try:
        rows = []
        for n in args.workers:
            row = run(n, args, wb, env, tmp)
            rows.append(row)
            print(json.dumps(row))
        load = os.getloadavg()
        result = {"benchmark": "jobs", "embedder": wb.embedder_name, "cpus": os.cpu_count(),
                  "load_after": [round(x, 2) for x in load], "runs": rows,
                  "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        RESULTS.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
        print(f"\n{'workers':>7} {'small jobs/s':>13} {'folder jobs/s':>14} {'docs/s':>7} {'enqueue->start ms (median)':>27}")
        for r in rows:
            print(f"{r['workers']:>7} {r['small_jobs_per_sec']:>13} {r['folder_jobs_per_sec']:>14} {r['docs_per_sec']:>7}"
                  f" {r['enqueue_to_start_ms_median']:>27}")
        print(f"embedder {wb.embedder_name}, {os.cpu_count()} CPUs, load average {load[0]:.2f}; written to {RESULTS}")
    finally:
        wb.close()
        drop_database(url)
        stop()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
