"""Hardening figures: memory under hostile input, and how fast the service heals after losing its database.

Four measurements, each beside a reference from the same run where one exists:

1. `rag serve` (real uvicorn, its own embedded PostgreSQL in a temp folder): RSS and peak RSS
   (VmHWM) before and after a 10 MB POST /retrieve-context, sent with a Content-Length and streamed.
   Before the caps, one such request grew the server to 23 GB and the kernel killed it.
2. A gzip bomb (1 GB of zeros, about 1 MB on the wire) fetched by the crawler with a 5 MB cap: the
   peak of Python's allocations (tracemalloc) and of the process's RSS, against httpx's own decoding
   of the same body (the crawler's former path, which inflates each network chunk whole).
3. A .docx of about 1 MB holding 1 GiB of XML: peak RSS growth of `load_file` (refused before
   opening), against python-docx opening it (what the loader did before).
4. kill -9 of the postmaster under a running `rag serve`, `--runs` times: how long each
   /health/ready takes to answer 503 while the server is down (at once, not the pool's 30 s), and
   the time until it answers 200 again (the service restarts the server itself).
5. `rag slack` (HTTP mode, its own embedded PostgreSQL, a stand-in Slack API on loopback): peak RSS
   growth and log growth for unsigned bodies (a declared 400 MB one, a streamed 400 MB one, 40
   streamed 20 MB ones at once), and how long `/rag status` takes to be acknowledged with 100
   questions queued while the Slack API hangs.

    .venv/bin/python eval/bench_hardening.py              # everything, results in eval/results/hardening.json
    .venv/bin/python eval/bench_hardening.py --runs 3 --no-docx-reference
    .venv/bin/python eval/bench_hardening.py --only slack # section 5 alone (written to hardening_slack.json)

Nothing here asserts a figure; tests assert the behaviour.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import zipfile
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Iterator

import httpx

from rag_core.evaluation.runner import machine

RESULTS = Path(__file__).resolve().parent / "results"
MB = 1_000_000


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def memory_kb(pid: int) -> dict[str, int]:
    """VmRSS and VmHWM (peak) of a process, in kB."""
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            fields[key] = int(value.split()[0])
    return fields


def own_folder() -> Path:
    folder = Path(tempfile.mkdtemp(prefix="rag-bench-hardening-"))
    folder.chmod(0o755)  # run as root, the embedded server's own user must enter it
    return folder


# ----- 1 and 4: a real `rag serve` -----
def start_serve(folder: Path, admin: str) -> tuple[subprocess.Popen, str]:
    env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
    env.update({"RAG_DATA_DIR": str(folder / "data"), "RAG_API_KEYS": "", "RAG_ADMIN_API_KEY": admin,
                "RAG_RATE_LIMIT": "off"})
    port = free_port()
    log = (folder / "serve.log").open("wb")
    proc = subprocess.Popen([str(Path(sys.executable).with_name("rag")), "serve", "--port", str(port)], env=env,
                            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"rag serve exited:\n{(folder / 'serve.log').read_text()[-3000:]}")
        try:
            if httpx.get(f"{base}/health/ready", timeout=2).status_code == 200:
                return proc, base
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise SystemExit("rag serve was not ready in 300 s")


def postmaster(pgdata: Path) -> int:
    return int((pgdata / "postmaster.pid").read_text().split()[0])


def big_body(size: int) -> Iterator[bytes]:
    yield b'{"user_id": "u1", "site_id": "bench", "query": "'
    for _ in range(size // MB):
        yield b"x" * MB
    yield b'"}'


def measure_service(folder: Path, runs: int) -> dict[str, Any]:
    admin = "bench-admin"
    proc, base = start_serve(folder, admin)
    out: dict[str, Any] = {}
    try:
        with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {admin}"}, timeout=120) as client:
            client.post("/documents", json={"site_id": "bench", "source": "fire.md",
                                            "content": "Fire alarms are tested every month by a qualified person."})
            warm = client.post("/retrieve-context", json={"user_id": "u1", "site_id": "bench", "query": "fire alarms"})
            assert warm.status_code == 200, warm.text
            before = memory_kb(proc.pid)
            sized = client.post("/retrieve-context", json={"user_id": "u1", "site_id": "bench", "query": "x" * 10 * MB})
            after_sized = memory_kb(proc.pid)
            streamed = client.post("/retrieve-context", content=big_body(10 * MB),
                                   headers={"Content-Type": "application/json"})
            after_streamed = memory_kb(proc.pid)
            out["body_10mb"] = {
                "status_with_length": sized.status_code, "status_streamed": streamed.status_code,
                "rss_kb_before": before["VmRSS"], "rss_kb_after": after_streamed["VmRSS"],
                "peak_kb_before": before["VmHWM"], "peak_kb_after_length": after_sized["VmHWM"],
                "peak_kb_after_streamed": after_streamed["VmHWM"],
            }
            print(f"10 MB /retrieve-context: {sized.status_code} (Content-Length), {streamed.status_code} (streamed); "
                  f"RSS {before['VmRSS'] / 1024:.0f} -> {after_streamed['VmRSS'] / 1024:.0f} MB, peak "
                  f"{before['VmHWM'] / 1024:.0f} -> {after_streamed['VmHWM'] / 1024:.0f} MB")

            pgdata = folder / "data" / "pgdata"
            noticed, slowest_503, recovery = [], [], []
            for _ in range(runs):
                os.kill(postmaster(pgdata), signal.SIGKILL)
                killed = time.monotonic()
                answers = []  # (status, seconds the request took)
                while not answers or answers[-1][0] != 200 or all(status == 200 for status, _ in answers):
                    asked = time.monotonic()
                    status = client.get("/health/ready").status_code
                    answers.append((status, time.monotonic() - asked))
                    time.sleep(0.05)
                down = [(i, took) for i, (status, took) in enumerate(answers) if status == 503]
                noticed.append(sum(took for _, took in answers[:down[0][0] + 1]) + 0.05 * down[0][0])
                slowest_503.append(max(took for _, took in down))
                recovery.append(time.monotonic() - killed)
                assert client.post("/search", json={"query": "fire alarms", "site_id": "bench"}).status_code == 200
            out["postmaster_killed"] = {
                "runs": runs, "noticed_after_s": [round(x, 3) for x in noticed],
                "slowest_503_answer_s": [round(x, 3) for x in slowest_503],
                "back_after_s": [round(x, 2) for x in recovery],
                "median_slowest_503_answer_s": round(statistics.median(slowest_503), 3),
                "median_back_after_s": round(statistics.median(recovery), 2)}
            print(f"postmaster killed ({runs} runs): /health/ready answered 503 within "
                  f"{statistics.median(slowest_503) * 1000:.0f} ms at worst (median over runs) while the server was "
                  f"down; service back after {statistics.median(recovery):.2f} s (median; runs "
                  f"{', '.join(f'{x:.2f}' for x in recovery)})")
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=60)
    return out


# ----- 2: gzip bomb -----
FETCH = """
import asyncio, json, resource, sys, tracemalloc
mode, warm, url, cap = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
if mode == "crawler":
    from rag_core.errors import RagError
    from rag_core.ingest.crawl import WebCrawler
    from rag_core.settings import RagSettings
    settings = RagSettings(_env_file=None, allowed_domains=["127.0.0.1"], allow_private_networks=True,
                           crawl_delay_sec=0, crawl_respect_robots=False, crawl_timeout_sec=120, crawl_max_bytes=cap)
    asyncio.run(WebCrawler(settings).fetch_page(warm))
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    tracemalloc.start()
    try:
        asyncio.run(WebCrawler(settings).fetch_page(url)); outcome = "fetched"
    except RagError as exc:
        outcome = exc.details.get("reason")
else:  # the former path: httpx decodes each chunk whole, the cap is checked after
    import httpx
    async def fetch(u):
        body = bytearray()
        async with httpx.AsyncClient() as client:
            async with client.stream("GET", u) as response:
                async for chunk in response.aiter_bytes():
                    body += chunk
                    if len(body) > cap:
                        return "too_large"
        return "fetched"
    asyncio.run(fetch(warm))
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    tracemalloc.start()
    outcome = asyncio.run(fetch(url))
traced_peak = tracemalloc.get_traced_memory()[1]
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"outcome": outcome, "peak_growth_kb": after - before, "traced_peak_kb": traced_peak // 1024}))
"""


def gzip_bomb(size: int) -> bytes:
    packer = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    block = b"\0" * MB
    return b"".join(packer.compress(block) for _ in range(size // MB)) + packer.flush()


def measure_gzip(size: int, cap: int) -> dict[str, Any]:
    bomb = gzip_bomb(size)
    page = b"<html><body><p>" + b"Plain page text. " * 200 + b"</p></body></html>"

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_GET(self) -> None:  # noqa: N802 - http.server API
            body, extra = (bomb, {"Content-Encoding": "gzip"}) if self.path == "/bomb" else (page, {})
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            for key, value in extra.items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    out: dict[str, Any] = {"bomb_bytes": len(bomb), "inflates_to": size, "cap": cap}
    try:
        for mode in ("crawler", "httpx_decoding"):
            run = subprocess.run([sys.executable, "-c", FETCH, mode, f"{base}/page", f"{base}/bomb", str(cap)],
                                 capture_output=True, text=True, timeout=600)
            out[mode] = json.loads(run.stdout.strip().splitlines()[-1]) if run.returncode == 0 else run.stderr[-500:]
    finally:
        server.shutdown()
    crawler, former = out["crawler"], out["httpx_decoding"]
    print(f"gzip bomb ({len(bomb) / MB:.1f} MB -> {size / MB:.0f} MB, cap {cap / MB:.0f} MB): crawler "
          f"{crawler['outcome']}, Python allocations peak {crawler['traced_peak_kb'] / 1024:.1f} MB, RSS peak "
          f"+{crawler['peak_growth_kb'] / 1024:.1f} MB; httpx decoding (the former path) "
          f"{former['traced_peak_kb'] / 1024:.1f} MB, RSS peak +{former['peak_growth_kb'] / 1024:.1f} MB")
    return out


# ----- 3: docx bomb -----
LOAD = """
import json, resource, sys
mode, path = sys.argv[1], sys.argv[2]
import docx
from rag_core.errors import LoaderError
from rag_core.ingest.loaders import load_file
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
try:
    if mode == "loader":
        load_file(path); outcome = "loaded"
    else:
        docx.Document(path); outcome = "opened"
except LoaderError as exc:
    outcome = "refused: " + exc.message[:80]
except Exception as exc:  # the reference may fail after reading it all: its peak still counts
    outcome = f"failed: {type(exc).__name__}"
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"outcome": outcome, "peak_growth_kb": after - before}))
"""


def docx_bomb(folder: Path, xml_bytes: int) -> Path:
    import docx

    plain = folder / "plain.docx"
    document = docx.Document()
    document.add_paragraph("A real paragraph.")
    document.save(str(plain))
    bomb = folder / "bomb.docx"
    with zipfile.ZipFile(plain) as zin, zipfile.ZipFile(bomb, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as zout:
        for item in zin.infolist():
            data = zin.read(item.filename)
            if item.filename != "word/document.xml":
                zout.writestr(item, data)
                continue
            head, sep, tail = data.partition(b"?>")
            with zout.open(item.filename, "w", force_zip64=True) as out:
                out.write(head + sep)
                block = (b"<!--" + b" " * 4089 + b"-->") * 256  # 1 MiB of comments an XML parser keeps
                for _ in range(xml_bytes // len(block)):
                    out.write(block)
                out.write(tail)
    return bomb


def measure_docx(folder: Path, xml_bytes: int, reference: bool) -> dict[str, Any]:
    bomb = docx_bomb(folder, xml_bytes)
    out: dict[str, Any] = {"file_bytes": bomb.stat().st_size, "xml_bytes": xml_bytes}
    for mode in ("loader", "python-docx") if reference else ("loader",):
        run = subprocess.run([sys.executable, "-c", LOAD, mode, str(bomb)], capture_output=True, text=True,
                             timeout=1800)
        out[mode] = json.loads(run.stdout.strip().splitlines()[-1]) if run.returncode == 0 else run.stderr[-500:]
    line = (f"docx bomb ({bomb.stat().st_size / MB:.2f} MB file, {xml_bytes / (1 << 30):.1f} GiB of XML): loader "
            f"{out['loader']['outcome'][:7]}, peak +{out['loader']['peak_growth_kb'] / 1024:.1f} MB")
    if reference and isinstance(out.get("python-docx"), dict):
        line += f"; python-docx opening it (the former path) +{out['python-docx']['peak_growth_kb'] / 1024:.0f} MB"
    print(line)
    return out


# ----- 5: `rag slack` under unsigned and queued traffic -----
SLACK_SECRET = "bench-signing-secret"


class SlackStandIn:
    """Slack's Web API on loopback: auth.test answers; with `hang`, every other call waits until the end."""

    def __init__(self) -> None:
        self.hang = threading.Event()
        self.release = threading.Event()
        stand_in = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802 - http.server API
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if self.path.endswith("/auth.test"):
                    body = {"ok": True, "team_id": "T0BENCH", "user_id": "U0BOT", "bot_id": "B0BOT"}
                else:
                    if stand_in.hang.is_set():
                        stand_in.release.wait(600)
                    body = {"ok": True, "ts": "1700000000.000100", "channel": "C0BENCH"}
                data = json.dumps(body).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/api/"

    def close(self) -> None:
        self.release.set()
        self.server.shutdown()


def slack_signed(body: str) -> dict[str, str]:
    import hashlib
    import hmac

    ts = str(int(time.time()))
    digest = hmac.new(SLACK_SECRET.encode(), f"v0:{ts}:{body}".encode(), hashlib.sha256).hexdigest()
    return {"X-Slack-Request-Timestamp": ts, "X-Slack-Signature": f"v0={digest}"}


def unsigned_stream(size: int) -> Iterator[bytes]:
    yield b'{"type": "event_callback", "pad": "'
    for _ in range(size // MB):
        yield b"x" * MB
    yield b'"}'


def post_unsigned(base: str, size: int, declared: bool) -> int:
    """An unsigned body of `size` bytes, with its Content-Length or streamed; the status (0: connection closed)."""
    try:
        if declared:
            with socket.create_connection(("127.0.0.1", int(base.rsplit(":", 1)[1])), timeout=60) as sock:
                sock.sendall(b"POST /slack/events HTTP/1.1\r\nHost: bench\r\nContent-Type: application/json\r\n"
                             b"Content-Length: %d\r\n\r\n" % size)
                try:
                    for chunk in unsigned_stream(size):
                        sock.sendall(chunk)
                except OSError:
                    pass  # refused and closed before the whole body was sent
                return int(sock.recv(64).split(b" ")[1] or 0)
        return httpx.post(f"{base}/slack/events", content=unsigned_stream(size),
                          headers={"Content-Type": "application/json"}, timeout=120).status_code
    except (OSError, httpx.HTTPError, ValueError, IndexError):
        return 0


def measure_slack(folder: Path, acks: int) -> dict[str, Any]:
    stand_in = SlackStandIn()
    env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL" and not k.startswith("SLACK_")}
    env.update({"RAG_DATA_DIR": str(folder / "slack-data"), "SLACK_BOT_TOKEN": "xoxb-bench",
                "SLACK_SIGNING_SECRET": SLACK_SECRET, "RAG_SLACK_API_URL": stand_in.url})
    port = free_port()
    log_path = folder / "slack.log"
    log = log_path.open("wb")
    proc = subprocess.Popen([str(Path(sys.executable).with_name("rag")), "slack", "--port", str(port)], env=env,
                            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    out: dict[str, Any] = {}
    try:
        deadline = time.monotonic() + 300
        while True:
            if proc.poll() is not None:
                raise SystemExit(f"rag slack exited:\n{log_path.read_text()[-3000:]}")
            try:
                if httpx.get(f"{base}/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise SystemExit("rag slack did not answer /health in 300 s")
            time.sleep(0.2)

        def attack(name: str, fn) -> None:
            # RSS sampled every 10 ms while the attack runs: VmHWM alone keeps the start-up peak (model, imports).
            before, log_before = memory_kb(proc.pid), log_path.stat().st_size
            highest = [before["VmRSS"]]
            done = threading.Event()

            def sample() -> None:
                while not done.wait(0.01):
                    highest[0] = max(highest[0], memory_kb(proc.pid)["VmRSS"])

            sampler = threading.Thread(target=sample, daemon=True)
            sampler.start()
            started = time.perf_counter()
            statuses = fn()
            done.set()
            sampler.join()
            after = memory_kb(proc.pid)
            out[name] = {"statuses": sorted(set(statuses)), "seconds": round(time.perf_counter() - started, 2),
                         "rss_before_mb": round(before["VmRSS"] / 1024, 1),
                         "peak_rss_growth_mb": round((highest[0] - before["VmRSS"]) / 1024, 1),
                         "vmhwm_growth_mb": round((after["VmHWM"] - before["VmHWM"]) / 1024, 1),
                         "log_growth_bytes": log_path.stat().st_size - log_before}
            print(f"rag slack, {name}: answered {out[name]['statuses']} in {out[name]['seconds']} s; RSS "
                  f"{out[name]['rss_before_mb']} MB, peak +{out[name]['peak_rss_growth_mb']} MB while it ran; "
                  f"log +{out[name]['log_growth_bytes']} bytes")

        attack("unsigned 400 MB, declared", lambda: [post_unsigned(base, 400 * MB, declared=True)])
        attack("unsigned 400 MB, streamed", lambda: [post_unsigned(base, 400 * MB, declared=False)])

        def concurrent() -> list[int]:
            statuses: list[int] = []
            threads = [threading.Thread(target=lambda: statuses.append(post_unsigned(base, 20 * MB, declared=False)))
                       for _ in range(40)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            return statuses

        attack("40 x unsigned 20 MB at once, streamed", concurrent)

        stand_in.hang.set()
        with httpx.Client(timeout=30) as client:
            for i in range(100):
                event = {"type": "event_callback", "team_id": "T0BENCH", "event_id": f"EvBench{i}",
                         "event": {"type": "app_mention", "user": "U0USER", "text": f"<@U0BOT> question {i}",
                                   "ts": f"{int(time.time())}.{i:06d}", "channel": "C0BENCH"}}
                body = json.dumps(event)
                client.post(f"{base}/slack/events", content=body,
                            headers={"Content-Type": "application/json", **slack_signed(body)})
            times, codes = [], []
            for i in range(acks):
                form = (f"team_id=T0BENCH&channel_id=C0BENCH&user_id=U0USER&command=%2Frag&text=status&"
                        f"response_url={stand_in.url}respond&trigger_id=bench.{i}.{time.time()}")
                started = time.perf_counter()
                answer = client.post(f"{base}/slack/events", content=form,
                                     headers={"Content-Type": "application/x-www-form-urlencoded", **slack_signed(form)})
                times.append(time.perf_counter() - started)
                codes.append(answer.status_code)
        out["slash command ack, 100 questions queued, Slack API hanging"] = {
            "statuses": sorted(set(codes)), "median_s": round(statistics.median(times), 3),
            "max_s": round(max(times), 3), "runs": acks}
        print(f"rag slack, /rag status with 100 questions queued and the Slack API hanging: statuses "
              f"{sorted(set(codes))}, acknowledged in a median {statistics.median(times) * 1000:.0f} ms "
              f"(max {max(times) * 1000:.0f} ms, {acks} commands)")
        out["log_bytes_total"] = log_path.stat().st_size
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        stand_in.close()
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5, help="Postmaster kills to time.")
    parser.add_argument("--no-docx-reference", action="store_true", help="Skip opening the docx bomb with python-docx.")
    parser.add_argument("--only", choices=["slack"], help="Run one section alone.")
    parser.add_argument("--acks", type=int, default=7, help="Slash commands to time with questions queued.")
    args = parser.parse_args()
    print(f"Machine: {machine()}; load average {os.getloadavg()[0]:.1f}")
    folder = own_folder()
    results: dict[str, Any] = {"machine": machine(), "load_average_1m": round(os.getloadavg()[0], 1)}
    try:
        if args.only != "slack":
            results["service"] = measure_service(folder, args.runs)
            results["gzip_bomb"] = measure_gzip(1000 * MB, 5 * MB)
            results["docx_bomb"] = measure_docx(folder, 1 << 30, not args.no_docx_reference)
        results["slack"] = measure_slack(folder, args.acks)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    results["load_average_1m_after"] = round(os.getloadavg()[0], 1)
    RESULTS.mkdir(exist_ok=True)
    name = "hardening_slack.json" if args.only == "slack" else "hardening.json"
    (RESULTS / name).write_text(json.dumps(results, indent=2) + "\n")
    print(f"Written to {RESULTS / name}")


if __name__ == "__main__":
    main()
