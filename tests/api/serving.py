"""`rag serve` as a real subprocess on a free loopback port, for the tests that run the service."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_rag_serve(args: list[str], env: dict[str, str], cwd: Path, log: Path, timeout: float = 240,
                    ready: str = "/health") -> tuple[subprocess.Popen, str]:
    """Start `rag serve ARGS` on a free port in its own process group; return it and its base URL once `ready` answers."""
    port = free_port()
    rag = Path(sys.executable).with_name("rag")
    with log.open("wb") as out:
        proc = subprocess.Popen([str(rag), "serve", "--port", str(port), *args], env={**os.environ, **env}, cwd=cwd,
                                stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + timeout
    while True:
        assert proc.poll() is None, f"rag serve exited: {log.read_text()[-3000:]}"
        try:
            if httpx.get(f"{base}{ready}", timeout=1).status_code == 200:
                return proc, base
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline:
            stop(proc)
            raise AssertionError(f"no {ready} in {timeout:.0f} s: {log.read_text()[-3000:]}")
        time.sleep(0.2)


def stop(proc: subprocess.Popen, timeout: float = 60) -> None:
    """SIGTERM to the server's process group (its workers too): the clean shutdown path."""
    import signal

    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
    proc.wait(timeout=timeout)
