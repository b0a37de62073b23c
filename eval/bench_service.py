"""REST service benchmark: `rag serve` on loopback under 100 concurrent clients, cache off or on.

The load client runs in a process of its own (aiohttp on one event loop) and reports its own CPU
time, so a reader can check that the client was not the bottleneck (an httpx client burns about
3 ms of CPU per request on these 2 cores, which once capped the figures). The server's CPU (uvicorn
workers) and PostgreSQL's (the server's backends) are measured around every run too.

The site is `eval:scifact` when `rag eval` has built it, otherwise SciFact's abstracts ingested
into `bench:service` (a re-run finds them unchanged). Queries are distinct texts: SciFact's
questions, then its titles, then sentences of its abstracts; no text is sent twice in a cache-off
run, so neither the search cache nor the query-embedding cache can answer. With `--cache` a set
of queries is searched once to fill the cache, then the runs repeat those (every request a hit).

Figures, in order: one in-process `Workbench.search` per query (p50, CPU per search, the median
of each stage from the query log), then `--runs` runs of `--seconds` each: requests/s, p50/p95/p99,
errors, CPU per request of client, server and PostgreSQL, load average. The median run is the
headline. `--reference bare` also starts the floor a search service stands on (`bare_app`: the same
FastAPI and uvicorn, the request parsed, the query embedded, one bare pgvector HNSW statement, the
rows as JSON) and runs it right after each run of /search, on texts of its own; it then prints
/search's CPU per search (server + PostgreSQL) against the bare one's and the rate each allows on
this machine's cores, beside what the goal of 150 searches/s allows. `--profile` samples the server with py-spy during the first run (measurement only:
`pip install py-spy`; raw stacks in eval/cache/) and prints where the time went. Results go to
eval/results/ as JSON; nothing asserts a time. Re-run after any change of the search core:

    .venv/bin/python eval/bench_service.py                            # 1 worker, cache off, 3 x 30 s
    .venv/bin/python eval/bench_service.py --workers 2 --cache --runs 5
    .venv/bin/python eval/bench_service.py --reference bare              # /search against the floor
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import multiprocessing as mp
import os
import random
import re
import secrets
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import psutil
from pydantic import BaseModel, Field

from rag_core import open_workbench
from rag_core.evaluation.datasets import eval_set_dir, load_beir
from rag_core.evaluation.metrics import percentile
from rag_core.evaluation.runner import machine
from rag_core.settings import load_settings

RESULTS = Path(__file__).resolve().parent / "results"
EVAL_SITE = "eval:scifact"
BENCH_SITE = "bench:service"
_SENTENCE = re.compile(r"(?<=[.!?])\s+")


# ----- data -----
def prepare_site(wb: Any, docs: int | None) -> tuple[str, list[str]]:
    """The site to search and a pool of distinct query texts from SciFact."""
    ds = load_beir(eval_set_dir("scifact"), max_docs=docs)
    site = EVAL_SITE if wb.status(site_id=EVAL_SITE)["documents"] else BENCH_SITE
    if site == BENCH_SITE:
        records = [{"source": f"scifact/{d['_id']}", "title": d["title"], "text": d["text"]} for d in ds.corpus]
        print(f"Ingesting {len(records)} SciFact abstracts into '{BENCH_SITE}' (unchanged ones are skipped) ...")
        report = wb.ingest_texts(records, site_id=BENCH_SITE).to_dict()
        print(f"  {report['indexed']} new, {report['unchanged']} unchanged, {report['failed']} failed")
    texts = list(ds.queries.values()) + [d["title"] for d in ds.corpus]
    for d in ds.corpus:
        for sentence in _SENTENCE.split(d["text"]):
            words = sentence.split()
            if len(words) >= 4:
                texts.append(" ".join(words[:30])[:300])
    seen: set[str] = set()
    pool = [t for t in (" ".join(t.split()) for t in texts) if t and not (t.lower() in seen or seen.add(t.lower()))]
    head, tail = pool[:len(ds.queries)], pool[len(ds.queries):]
    random.Random(0).shuffle(tail)  # titles and sentences of all abstracts mixed, the same order every run
    return site, head + tail


# Every connection of this benchmark and of the server it starts names itself so (libpq reads PGAPPNAME):
# PostgreSQL's CPU is counted over those backends only, not over every backend of a server that other
# jobs share (which once doubled the figure).
APP_NAME = "rag-bench-service"


class Backends:
    """The backends of PostgreSQL serving this benchmark's connections, when the server runs on this machine."""

    def __init__(self, url: str) -> None:
        self.url = url

    def snapshot(self) -> dict[int, float]:
        """CPU seconds (user + system) of each backend named APP_NAME alive now."""
        import psycopg

        with psycopg.connect(self.url, application_name="rag-bench-service-probe") as conn:
            pids = [r[0] for r in conn.execute(
                "SELECT pid FROM pg_stat_activity WHERE application_name = %s", (APP_NAME,)).fetchall()]
        seen = {}
        for pid in pids:
            try:
                times = psutil.Process(pid).cpu_times()
                seen[pid] = times.user + times.system
            except psutil.Error:
                pass
        return seen

    @staticmethod
    def spent(before: dict[int, float], after: dict[int, float]) -> float:
        """CPU seconds spent between two snapshots (a backend opened in between counts whole)."""
        return sum(cpu - before.get(pid, 0.0) for pid, cpu in after.items())


def postgres_backends(wb: Any) -> Backends | None:
    """The benchmark's backends when PostgreSQL runs on this machine (their CPU is measured), else None."""
    try:
        with wb.db.connection() as conn:
            backend = conn.execute("SELECT pg_backend_pid()").fetchone()[0]
        psutil.Process(backend).cpu_times()
    except (psutil.Error, AttributeError):
        return None
    return Backends(wb.db.url)


def tree_cpu(root: psutil.Process | None) -> float:
    """CPU seconds (user + system) of a process and its children alive now."""
    if root is None:
        return 0.0
    total = 0.0
    try:
        procs = [root, *root.children(recursive=True)]
    except psutil.Error:
        return 0.0
    for proc in procs:
        try:
            times = proc.cpu_times()
            total += times.user + times.system
        except psutil.Error:
            pass
    return total


# ----- in process -----
def in_process(wb: Any, site: str, queries: list[str], pg: Backends | None) -> dict[str, Any]:
    """One caller, `Workbench.search` per distinct query: latency, CPU per search and the stage medians."""
    for q in queries[:5]:
        wb.search(q + " (warm-up)", site_id=site)
    wb.flush_search_log()
    since = time.time()
    times = []
    cpu0, pg0 = time.process_time(), pg.snapshot() if pg else {}
    for q in queries:
        started = time.perf_counter()
        wb.search(q, site_id=site)
        times.append((time.perf_counter() - started) * 1000)
    cpu1, pg1 = time.process_time(), pg.snapshot() if pg else {}
    metrics = wb.search_metrics(site_id=site, since=dt.datetime.fromtimestamp(since, dt.timezone.utc))
    n = len(queries)
    return {"queries": n, "p50_ms": round(statistics.median(times), 1), "p95_ms": round(percentile(times, 95), 1),
            "python_cpu_ms_per_search": round((cpu1 - cpu0) * 1000 / n, 2),
            "postgres_cpu_ms_per_search": round(Backends.spent(pg0, pg1) * 1000 / n, 2) if pg else None,
            "stage_p50_ms": metrics.get("stage_p50_ms", {})}


# ----- the server -----
def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_server(port: int, key: str, site: str, workers: int, cache: bool) -> subprocess.Popen:
    """`rag serve` on 127.0.0.1, rate limit off, search cache off unless `cache`; returns once /health answers."""
    env = {**os.environ, "RAG_API_KEYS": f"{key}={site}", "RAG_ADMIN_API_KEY": "", "RAG_RATE_LIMIT": "off"}
    if not cache:
        env["RAG_SEARCH_CACHE_TTL_SEC"] = "0"
    rag = Path(sys.executable).with_name("rag")
    return _start([str(rag), "serve", "--host", "127.0.0.1", "--port", str(port), "--workers", str(workers)], env, port)


def start_bare(port: int) -> subprocess.Popen:
    """The reference service (`bare_app`) in a process of its own, like `rag serve` with one worker."""
    return _start([sys.executable, str(Path(__file__).resolve()), "--serve-bare", str(port)], dict(os.environ), port)


def _start(command: list[str], env: dict[str, str], port: int) -> subprocess.Popen:
    """Start a server on 127.0.0.1:`port` and return once its /health answers."""
    import urllib.request

    proc = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"{Path(command[0]).name} exited with {proc.returncode}: "
                             f"{proc.stderr.read().decode()[-2000:]}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1) as response:
                if response.status == 200:
                    return proc
        except OSError:
            pass
        time.sleep(0.2)
    stop_server(proc)
    raise SystemExit(f"{' '.join(command[:2])} did not answer /health within 300 s")


# ----- the reference: the least a search service must do -----
# One HNSW walk over every chunk's vector, as a bare pgvector user writes it (hnsw.ef_search left at its default).
BARE_SQL = ("SELECT c.id, c.document_id, c.text, 1 - (c.embedding <=> %(emb)b::vector) AS similarity FROM chunks c"
            " ORDER BY c.embedding <=> %(emb)b::vector LIMIT %(limit)s")


class BareSearch(BaseModel):
    """The reference service's request body."""

    query: str = Field(min_length=1, max_length=500)
    limit: int = Field(default=10, ge=1, le=100)


def bare_app() -> Any:
    """The floor a search service stands on: the same framework and server (FastAPI on uvicorn, a synchronous
    route in the same thread pool, the same connection pool), a body parsed by a pydantic model, the query
    embedded by the configured embedder, one HNSW statement (BARE_SQL) and the rows as JSON.

    No key check, validation beyond the model, fusion, full text, filters, facets, highlights, suggestions,
    cache or query log: what is left is what every search must spend, so /search's CPU over this one is the
    price of everything else.
    """
    from contextlib import asynccontextmanager

    import anyio.to_thread
    import numpy as np
    from fastapi import FastAPI
    from fastapi.responses import ORJSONResponse

    settings = load_settings()
    wb = open_workbench(settings)
    embedder = wb.embedder
    embedder.get_query_embedding("warm-up")

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> Any:
        anyio.to_thread.current_default_thread_limiter().total_tokens = settings.db_pool_size  # as rag serve
        yield
        wb.close()

    app = FastAPI(lifespan=lifespan)

    @app.get("/health")
    def health() -> dict[str, str]:
        return {"status": "ok"}

    @app.post("/search")
    def search(body: BareSearch) -> Any:
        emb = np.asarray(embedder.get_query_embedding(body.query), dtype=np.float32)
        with wb.db.connection() as conn:
            rows = conn.execute(BARE_SQL, {"emb": emb, "limit": body.limit}).fetchall()
        return ORJSONResponse({"results": [{"chunk_id": r[0], "document_id": r[1], "text": r[2],
                                            "similarity": round(float(r[3]), 4)} for r in rows]})

    return app


def serve_bare(port: int) -> None:
    """Run `bare_app` as `rag serve` runs its app with one worker."""
    import uvicorn

    uvicorn.run(bare_app(), host="127.0.0.1", port=port, log_level="info")


def stop_server(proc: subprocess.Popen) -> None:
    """SIGTERM to the server's own process group (its workers too), SIGKILL after 30 s."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


# ----- the load client (its own process) -----
async def _load(base: str, key: str, queries: list[str], clients: int, seconds: float, cycle: bool) -> dict[str, Any]:
    import aiohttp
    import orjson

    latencies: list[float] = []
    errors: Counter = Counter()
    position = 0
    headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
    connector = aiohttp.TCPConnector(limit=clients, force_close=False)
    timeout = aiohttp.ClientTimeout(total=120)
    async with aiohttp.ClientSession(base_url=base, headers=headers, connector=connector, timeout=timeout) as http:
        deadline = time.perf_counter() + seconds

        async def client() -> None:
            nonlocal position
            while time.perf_counter() < deadline:
                if position >= len(queries) and not cycle:
                    return
                query = queries[position % len(queries)]
                position += 1
                body = orjson.dumps({"query": query, "limit": 10})
                started = time.perf_counter()
                try:
                    async with http.post("/search", data=body) as response:
                        await response.read()
                        status = str(response.status)
                except (aiohttp.ClientError, asyncio.TimeoutError) as exc:
                    status = type(exc).__name__
                if status == "200":
                    latencies.append((time.perf_counter() - started) * 1000)
                else:
                    errors[status] += 1

        started = time.perf_counter()
        await asyncio.gather(*(client() for _ in range(clients)))
        wall = time.perf_counter() - started
    return {"wall": wall, "latencies": latencies, "errors": dict(errors), "sent": position}


def _client_process(conn: Any, base: str, key: str, queries: list[str], clients: int, seconds: float,
                    cycle: bool) -> None:
    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass
    cpu0 = time.process_time()
    result = asyncio.run(_load(base, key, queries, clients, seconds, cycle))
    result["cpu_s"] = time.process_time() - cpu0
    conn.send(result)
    conn.close()


def run_load(base: str, key: str, queries: list[str], clients: int, seconds: float, cycle: bool,
             server: psutil.Process, pg: Backends | None) -> dict[str, Any]:
    """One run from a separate client process; latency, throughput and everyone's CPU per request."""
    ctx = mp.get_context("spawn")
    parent, child = ctx.Pipe(duplex=False)
    load0 = os.getloadavg()[0]
    srv0, pg0 = tree_cpu(server), pg.snapshot() if pg else {}
    proc = ctx.Process(target=_client_process, args=(child, base, key, queries, clients, seconds, cycle))
    proc.start()
    raw = parent.recv()
    proc.join()
    srv1, pg1 = tree_cpu(server), pg.snapshot() if pg else {}
    lat = raw["latencies"]
    ok = len(lat)
    done = max(ok + sum(raw["errors"].values()), 1)
    return {"clients": clients, "seconds": round(raw["wall"], 1), "requests": done, "ok": ok, "errors": raw["errors"],
            "requests_per_s": round(ok / raw["wall"], 1),
            "p50_ms": round(percentile(lat, 50), 1), "p95_ms": round(percentile(lat, 95), 1),
            "p99_ms": round(percentile(lat, 99), 1), "max_ms": round(max(lat, default=0), 1),
            "distinct_queries_sent": min(raw["sent"], len(queries)), "queries_sent": raw["sent"],
            "cpu_ms_per_request": {"client": round(raw["cpu_s"] * 1000 / done, 2),
                                   "server": round((srv1 - srv0) * 1000 / done, 2),
                                   "postgres": round(Backends.spent(pg0, pg1) * 1000 / done, 2) if pg else None},
            "client_cpu_share_of_one_core": round(raw["cpu_s"] / raw["wall"], 2),
            "load_average_before_after": [round(load0, 2), round(os.getloadavg()[0], 2)]}


# ----- profile -----
def profile(server: psutil.Process, seconds: float, out: Path) -> subprocess.Popen | None:
    """Start py-spy sampling the server and its workers for `seconds` (raw stacks to `out`).

    Only threads holding the GIL are sampled: what a worker spends its one core of Python on.
    """
    spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    if not Path(spy).exists():
        print("py-spy is not installed (pip install py-spy); no profile taken.")
        return None
    proc = subprocess.Popen([spy, "record", "--pid", str(server.pid), "--subprocesses", "--duration", str(int(seconds)),
                             "--format", "raw", "--nonblocking", "--gil", "-o", str(out)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return proc


def top_functions(raw: Path, top: int = 25) -> list[tuple[str, float]]:
    """Inclusive share of samples per function (each stack counts a function once)."""
    counts: Counter = Counter()
    total = 0
    for line in raw.read_text(errors="replace").splitlines():
        stack, _, n = line.rpartition(" ")
        if not n.isdigit():
            continue
        total += int(n)
        frames = {re.sub(r":\d+\)$", ")", f) for f in stack.split(";") if f and not f.startswith(("process ", "thread "))}
        for frame in frames:
            counts[frame] += int(n)
    return [(name, round(100 * c / max(total, 1), 1)) for name, c in counts.most_common(top)]


GOAL_RATE = 150  # searches/s the service should sustain under 100 clients (p95 under 1 s)


def report_run(label: str, result: dict[str, Any], planned: int, cycled: bool) -> None:
    errors = sum(result["errors"].values())
    print(f"{label}: {result['requests_per_s']} req/s, p50 {result['p50_ms']} ms, p95 {result['p95_ms']} ms,"
          f" errors {errors} {result['errors'] or ''}; CPU ms/request {result['cpu_ms_per_request']};"
          f" load {result['load_average_before_after']}")
    if not cycled and result["queries_sent"] > planned:
        print(f"  note: {result['queries_sent'] - planned} queries were repeats")


def summarize(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The median of each figure over runs."""
    def median(key: str) -> float:
        return round(statistics.median(r[key] for r in runs), 1)

    return {"requests_per_s": median("requests_per_s"), "p50_ms": median("p50_ms"), "p95_ms": median("p95_ms"),
            "p99_ms": median("p99_ms"), "errors": sum(sum(r["errors"].values()) for r in runs),
            "cpu_ms_per_request": {k: (round(statistics.median(r["cpu_ms_per_request"][k] for r in runs), 2)
                                       if runs[0]["cpu_ms_per_request"][k] is not None else None)
                                   for k in ("client", "server", "postgres")}}


def reference_figures(summary: dict[str, Any], bare_runs: list[dict[str, Any]]) -> dict[str, Any]:
    """/search against the bare reference measured in the same session: CPU per search and what the goal allows."""
    bare = summarize(bare_runs)

    def service_cpu(s: dict[str, Any]) -> float:
        cpu = s["cpu_ms_per_request"]
        return cpu["server"] + (cpu["postgres"] or 0.0)

    ours, floor = service_cpu(summary), service_cpu(bare)
    cores = os.cpu_count() or 1
    goal = 1000.0 * cores / GOAL_RATE
    return {"name": "bare", "runs": bare_runs, "median_of_runs": bare,
            "search_cpu_ms": round(ours, 2), "bare_cpu_ms": round(floor, 2),
            "cpu_ratio": round(ours / floor, 2) if floor else None,
            "goal_cpu_ms": round(goal, 1),
            "goal_cpu_ms_with_client": round(goal - bare["cpu_ms_per_request"]["client"], 1),
            "bare_ceiling_per_s": round(1000.0 * cores / (floor + bare["cpu_ms_per_request"]["client"])) if floor else None,
            "search_ceiling_per_s": round(1000.0 * cores / (ours + summary["cpu_ms_per_request"]["client"]))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=30.0, help="Length of each measured run.")
    parser.add_argument("--runs", type=int, default=3, help="Measured runs (the median is the headline).")
    parser.add_argument("--warmup", type=float, default=5.0, help="Seconds of load before the runs, not counted.")
    parser.add_argument("--clients", type=int, default=100, help="Concurrent clients.")
    parser.add_argument("--workers", type=int, default=1, help="uvicorn workers of `rag serve`.")
    parser.add_argument("--docs", type=int, default=None, help="SciFact abstracts to ingest (default all) when "
                                                                 "eval:scifact is absent.")
    parser.add_argument("--sample", type=int, default=100, help="Queries for the in-process figures.")
    parser.add_argument("--cache", action="store_true", help="Keep the search cache on; runs repeat warmed queries.")
    parser.add_argument("--cached-queries", type=int, default=400,
                        help="Distinct queries warmed with --cache (the in-process cache keeps 512).")
    parser.add_argument("--profile", action="store_true", help="Sample the server with py-spy during the first run.")
    parser.add_argument("--reference", choices=["bare"], default=None,
                        help="Also measure the bare reference service (bare_app), a run of it after each run of "
                             "/search, and print /search's CPU per search against it.")
    parser.add_argument("--serve-bare", type=int, default=None, metavar="PORT", help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, default=None, help="Result file (default eval/results/bench_service_*.json).")
    args = parser.parse_args()
    if args.serve_bare is not None:
        serve_bare(args.serve_bare)
        return

    os.environ["PGAPPNAME"] = APP_NAME  # before any connection: the server started below inherits it
    settings = load_settings()  # what `rag serve` runs with, so both sides embed alike
    with open_workbench(settings) as wb:
        embedder = wb.embedder_name  # a store built with another embedder than the default is searched with that one
        site, pool = prepare_site(wb, args.docs)
        chunks = wb.status(site_id=site)["chunks"]
        pg = postgres_backends(wb)
        local = in_process(wb, site, pool[:args.sample], pg)
    used = args.sample
    print(f"Site {site}: {chunks} chunks, {len(pool)} distinct query texts. In process, one caller, cache off: "
          f"p50 {local['p50_ms']} ms, p95 {local['p95_ms']} ms; CPU per search {local['python_cpu_ms_per_search']} ms "
          f"Python + {local['postgres_cpu_ms_per_search']} ms PostgreSQL; stage medians {local['stage_p50_ms']}")

    key = secrets.token_urlsafe(24)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    proc = start_server(port, key, site, args.workers, args.cache)
    server = psutil.Process(proc.pid)
    bare_proc = bare_server = None
    bare_base = ""
    runs: list[dict[str, Any]] = []
    bare_runs: list[dict[str, Any]] = []
    hot: list[str] = []
    spy_top = None
    # Distinct texts per run: enough for the fastest rate seen here, shared out when the pool is short.
    targets = 2 if args.reference else 1
    per_run = min(int(args.seconds * 500), max(100, (len(pool) - used - int(args.warmup * 400) * targets)
                                                // max(1, args.runs * targets)))
    try:
        if args.reference == "bare":
            bare_port = free_port()
            bare_base = f"http://127.0.0.1:{bare_port}"
            bare_proc = start_bare(bare_port)
            bare_server = psutil.Process(bare_proc.pid)
        if args.cache:
            hot = pool[used:used + args.cached_queries]
            used += len(hot)
            warm = run_load(base, key, hot, min(args.clients, 20), 3600, False, server, pg)
            print(f"Cache filled with {warm['ok']} searches ({warm['errors'] or 'no errors'}).")
        warm_queries = hot or pool[used:used + int(args.warmup * 400)]
        used += 0 if hot else len(warm_queries)
        run_load(base, key, warm_queries, args.clients, args.warmup, bool(hot), server, pg)
        if bare_server is not None:
            warm_queries = pool[used:used + int(args.warmup * 400)]
            used += len(warm_queries)
            run_load(bare_base, key, warm_queries, args.clients, args.warmup, False, bare_server, pg)
        measured_from = dt.datetime.now(dt.timezone.utc)
        for i in range(args.runs):
            if hot:
                queries = hot
            else:
                queries = pool[used:used + per_run]
                used += len(queries)
            spy = None
            raw = RESULTS.parent / "cache" / f"profile_service_w{args.workers}.txt"
            raw.parent.mkdir(parents=True, exist_ok=True)
            if args.profile and i == 0:
                spy = profile(server, args.seconds, raw)
            result = run_load(base, key, queries, args.clients, args.seconds, bool(hot), server, pg)
            if spy is not None:
                spy.wait(timeout=120)
                spy_top = top_functions(raw) if raw.exists() else None
            runs.append(result)
            report_run(f"run {i + 1}", result, len(queries), bool(hot))
            if bare_server is not None:  # the reference right after, on texts of its own: the same machine state
                queries = pool[used:used + per_run]
                used += len(queries)
                result = run_load(bare_base, key, queries, args.clients, args.seconds, False, bare_server, pg)
                bare_runs.append(result)
                report_run(f"run {i + 1}, bare reference", result, len(queries), False)
    finally:
        stop_server(proc)
        if bare_proc is not None:
            stop_server(bare_proc)
    # The server's query log (flushed on its clean stop) says how many of the measured requests were hits.
    with open_workbench(settings) as wb:
        logged = wb.search_metrics(site_id=site, since=measured_from)
    hit_share = round(logged["cache_hits"] / max(logged["searches"], 1), 3)
    print(f"Query log of the measured runs: {logged['searches']} searches, {logged['cache_hits']} cache hits "
          f"({hit_share:.1%}); server-side p50 {logged['p50_ms']} ms, p95 {logged['p95_ms']} ms.")

    summary = summarize(runs)
    result = {
        "site": site, "chunks": chunks, "workers": args.workers, "clients": args.clients,
        "cache": f"on ({settings.search_cache_ttl_sec} s), {len(hot)} warmed queries repeated" if args.cache
        else "off, every query text distinct",
        "rate_limit": "off", "embedder": embedder, "db_pool_size": settings.db_pool_size,
        "in_process": local, "runs": runs, "median_of_runs": summary,
        "server_query_log": {"searches": logged["searches"], "cache_hits": logged["cache_hits"],
                             "cache_hit_share": hit_share, "p50_ms": logged["p50_ms"], "p95_ms": logged["p95_ms"],
                             "stage_p50_ms": logged.get("stage_p50_ms")},
        "profile_top_inclusive_percent": spy_top,
        "reference": reference_figures(summary, bare_runs) if bare_runs else None,
        "machine": machine(), "cpus": os.cpu_count(),
        "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "command": " ".join([Path(sys.argv[0]).name, *sys.argv[1:]]),
    }
    print(f"Median of {len(runs)} runs: {summary['requests_per_s']} req/s, p50 {summary['p50_ms']} ms, p95 "
          f"{summary['p95_ms']} ms, {summary['errors']} errors; CPU ms/request {summary['cpu_ms_per_request']} "
          f"({machine()})")
    if bare_runs:
        ref = result["reference"]
        print(f"Bare reference, median of {len(bare_runs)} runs: {ref['median_of_runs']['requests_per_s']} req/s, p50 "
              f"{ref['median_of_runs']['p50_ms']} ms, p95 {ref['median_of_runs']['p95_ms']} ms; CPU ms/request "
              f"{ref['median_of_runs']['cpu_ms_per_request']}")
        print(f"CPU per search, server + PostgreSQL: /search {ref['search_cpu_ms']} ms, bare {ref['bare_cpu_ms']} ms, "
              f"ratio {ref['cpu_ratio']}x. {GOAL_RATE} searches/s on {os.cpu_count()} cores allows "
              f"{ref['goal_cpu_ms']} ms per search ({ref['goal_cpu_ms_with_client']} ms beside this client on the same cores); "
              f"the bare service's CPU allows {ref['bare_ceiling_per_s']}/s, /search's {ref['search_ceiling_per_s']}/s.")
    if spy_top:
        print("Where the server's time went (py-spy, share of samples including callees):")
        for name, share in spy_top:
            print(f"  {share:5.1f}%  {name}")
    out = args.out or RESULTS / f"bench_service_w{args.workers}_{'cached' if args.cache else 'uncached'}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"Wrote {out}")


if __name__ == "__main__":
    main()
