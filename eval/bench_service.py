"""REST service benchmark: the real server (`rag serve`, uvicorn on loopback) under 100 concurrent searching clients.

It uses the configured store (embedded by default). The site is `eval:scifact` when `rag eval`
has built it, otherwise the first `--docs` scifact abstracts ingested into `bench:service`
(a re-run finds them unchanged). Queries are scifact's, cycled.

Figures, in order: in-process `Workbench.search` p50 (one caller), HTTP p50 with one client
(the adapter's overhead), then `--clients` clients searching for `--seconds`: requests/s,
p50/p95/p99, errors. The server runs with the search cache off (every request searches) and the
rate limit off, behind an API key; `--cache` keeps the configured search cache (seed 001's
five minutes) so repeated queries are answered from it. Figures go to
eval/results/bench_service[_cached].json; nothing asserts a time.

    .venv/bin/python eval/bench_service.py                      # 100 clients, 60 s, every request searches
    .venv/bin/python eval/bench_service.py --seconds 20 --workers 2 --cache
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import secrets
import signal
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx

from rag_core import open_workbench
from rag_core.evaluation.datasets import eval_set_dir, load_beir
from rag_core.evaluation.metrics import percentile
from rag_core.evaluation.runner import machine
from rag_core.settings import load_settings

RESULTS = Path(__file__).resolve().parent / "results"
EVAL_SITE = "eval:scifact"
BENCH_SITE = "bench:service"


def prepare_site(wb: Any, docs: int) -> tuple[str, list[str]]:
    """The site to search and the queries: eval:scifact when present, else a small ingested slice."""
    ds = load_beir(eval_set_dir("scifact"), max_docs=docs)
    queries = list(ds.queries.values())
    if wb.status(site_id=EVAL_SITE)["documents"]:
        return EVAL_SITE, queries
    records = [{"source": f"scifact/{d['_id']}", "title": d["title"], "text": d["text"]} for d in ds.corpus]
    print(f"Ingesting {len(records)} scifact abstracts into '{BENCH_SITE}' (unchanged ones are skipped) ...")
    report = wb.ingest_texts(records, site_id=BENCH_SITE).to_dict()
    print(f"  {report['indexed']} new, {report['unchanged']} unchanged, {report['failed']} failed")
    return BENCH_SITE, queries


def in_process_latencies(wb: Any, site: str, queries: list[str]) -> list[float]:
    """Milliseconds per `Workbench.search` (cache off), one caller, after a warm-up."""
    for q in queries[:5]:
        wb.search_engine.search(q, site_id=site, use_cache=False)
    times = []
    for q in queries:
        started = time.perf_counter()
        wb.search_engine.search(q, site_id=site, use_cache=False)
        times.append((time.perf_counter() - started) * 1000)
    return times


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_server(port: int, key: str, site: str, workers: int, cache: bool) -> subprocess.Popen:
    """`rag serve` on 127.0.0.1 with the rate limit (and unless `cache`, the cache) off; returns once /health answers."""
    env = {**os.environ, "RAG_API_KEYS": f"{key}={site}", "RAG_ADMIN_API_KEY": "", "RAG_RATE_LIMIT": "off"}
    if not cache:
        env["RAG_SEARCH_CACHE_TTL_SEC"] = "0"
    rag = Path(sys.executable).with_name("rag")
    proc = subprocess.Popen([str(rag), "serve", "--host", "127.0.0.1", "--port", str(port), "--workers", str(workers)],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"rag serve exited with {proc.returncode}: {proc.stderr.read().decode()[-2000:]}")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200:
                return proc
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    stop_server(proc)
    raise SystemExit("rag serve did not answer /health within 180 s")


def stop_server(proc: subprocess.Popen) -> None:
    """SIGTERM to the server's own process group (its workers too), SIGKILL after 20 s."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


async def run_clients(base: str, key: str, queries: list[str], clients: int, seconds: float) -> dict[str, Any]:
    """`clients` loops sending POST /search until the time is up; latency per request in ms."""
    latencies: list[float] = []
    errors: dict[str, int] = {}
    counter = iter(range(10**9))
    headers = {"Authorization": f"Bearer {key}"}
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    async with httpx.AsyncClient(base_url=base, headers=headers, limits=limits, timeout=60) as http:
        deadline = time.perf_counter() + seconds

        async def client() -> None:
            while time.perf_counter() < deadline:
                query = queries[next(counter) % len(queries)]
                started = time.perf_counter()
                try:
                    response = await http.post("/search", json={"query": query, "limit": 10})
                    status = str(response.status_code)
                except httpx.HTTPError as exc:
                    status = type(exc).__name__
                elapsed = (time.perf_counter() - started) * 1000
                if status == "200":
                    latencies.append(elapsed)
                else:
                    errors[status] = errors.get(status, 0) + 1

        started = time.perf_counter()
        await asyncio.gather(*(client() for _ in range(clients)))
        wall = time.perf_counter() - started
    done = len(latencies)
    return {"clients": clients, "seconds": round(wall, 1), "requests": done + sum(errors.values()), "ok": done,
            "errors": errors, "requests_per_s": round(done / wall, 1),
            "p50_ms": round(percentile(latencies, 50), 1), "p95_ms": round(percentile(latencies, 95), 1),
            "p99_ms": round(percentile(latencies, 99), 1), "max_ms": round(max(latencies, default=0), 1)}


def sequential_http(base: str, key: str, queries: list[str]) -> list[float]:
    times = []
    with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {key}"}, timeout=60) as http:
        for q in queries[:5]:
            http.post("/search", json={"query": q, "limit": 10})
        for q in queries:
            started = time.perf_counter()
            response = http.post("/search", json={"query": q, "limit": 10})
            times.append((time.perf_counter() - started) * 1000)
            if response.status_code != 200:
                raise SystemExit(f"POST /search answered {response.status_code}: {response.text[:500]}")
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=60.0, help="Length of the concurrent run.")
    parser.add_argument("--clients", type=int, default=100, help="Concurrent clients.")
    parser.add_argument("--workers", type=int, default=1, help="uvicorn workers of `rag serve`.")
    parser.add_argument("--docs", type=int, default=500, help="scifact abstracts to ingest when eval:scifact is absent.")
    parser.add_argument("--sample", type=int, default=60, help="Queries for the one-caller p50 figures.")
    parser.add_argument("--cache", action="store_true", help="Keep the configured search cache on in the server.")
    parser.add_argument("--out", type=Path, default=None, help="Result file (default eval/results/bench_service*.json).")
    args = parser.parse_args()

    settings = load_settings()  # what `rag serve` runs with, so both sides embed alike
    with open_workbench(settings) as wb:
        site, queries = prepare_site(wb, args.docs)
        sample = queries[:args.sample]
        local = in_process_latencies(wb, site, sample)
        chunks = wb.status(site_id=site)["chunks"]
    local_p50 = statistics.median(local)
    print(f"Site {site}: {chunks} chunks; in-process Workbench.search p50 {local_p50:.1f} ms "
          f"(p95 {percentile(local, 95):.1f} ms, {len(local)} queries, cache off)")

    key = secrets.token_urlsafe(24)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    load_before = os.getloadavg()
    proc = start_server(port, key, site, args.workers, args.cache)
    try:
        http_seq = sequential_http(base, key, sample)
        seq_p50 = statistics.median(http_seq)
        print(f"HTTP, one client: p50 {seq_p50:.1f} ms ({seq_p50 / local_p50:.2f}x in-process)")
        print(f"{args.clients} clients for {args.seconds:.0f} s ...")
        load = asyncio.run(run_clients(base, key, queries, args.clients, args.seconds))
    finally:
        stop_server(proc)
    load_after = os.getloadavg()
    result = {
        "site": site, "chunks": chunks, "workers": args.workers, "embed_threads": settings.embed_threads,
        "cache": f"on ({settings.search_cache_ttl_sec} s)" if args.cache else "off", "rate_limit": "off",
        "in_process": {"queries": len(local), "p50_ms": round(local_p50, 1), "p95_ms": round(percentile(local, 95), 1)},
        "http_one_client": {"queries": len(http_seq), "p50_ms": round(seq_p50, 1),
                            "p95_ms": round(percentile(http_seq, 95), 1)},
        "concurrent": load,
        "ratio_http_p50_to_in_process_p50": {"one_client": round(seq_p50 / local_p50, 2),
                                             "concurrent": round(load["p50_ms"] / local_p50, 2)},
        "machine": machine(), "load_average_before_after": [round(load_before[0], 2), round(load_after[0], 2)],
        "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    print(f"{load['requests_per_s']} requests/s; p50 {load['p50_ms']} ms, p95 {load['p95_ms']} ms, "
          f"p99 {load['p99_ms']} ms; errors {sum(load['errors'].values())} {load['errors'] or ''}")
    print(f"HTTP p50 / in-process p50: {result['ratio_http_p50_to_in_process_p50']['one_client']}x with one client, "
          f"{result['ratio_http_p50_to_in_process_p50']['concurrent']}x under {args.clients} clients; "
          f"load average {load_before[0]:.1f} -> {load_after[0]:.1f} ({machine()})")
    out = args.out or RESULTS / f"bench_service{'_cached' if args.cache else ''}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(f"Wrote {out}")


if __name__ == "__main__":
    main()
