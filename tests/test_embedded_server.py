"""The embedded PostgreSQL: shared by processes, and stopped even after a process is SIGKILLed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import psycopg


HOLD = """
import sys, time
from rag_core.db.server import embedded_server_uri
print(embedded_server_uri(sys.argv[1]), flush=True)
time.sleep(600)
"""

OPEN_AND_EXIT = """
import sys
from rag_core.db.server import embedded_server_uri
print(embedded_server_uri(sys.argv[1]))
"""


def postmaster_pid(pgdata: Path) -> int | None:
    pidfile = pgdata / "postmaster.pid"
    if not pidfile.exists():
        return None
    pid = int(pidfile.read_text().split()[0])
    return pid if psutil.pid_exists(pid) else None


def test_sigkilled_process_does_not_keep_server_alive(tmp_path: Path) -> None:
    data = tmp_path / "data"
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(data)], stdout=subprocess.PIPE, text=True)
    try:
        uri = holder.stdout.readline().strip()
        assert uri.startswith("postgresql://")
        pgdata = data / "pgdata"
        server_pid = postmaster_pid(pgdata)
        assert server_pid
        # a second process joins the running server and leaves; the server stays up for the holder
        joined = subprocess.run([sys.executable, "-c", OPEN_AND_EXIT, str(data)], capture_output=True, text=True,
                                timeout=120)
        assert joined.returncode == 0, joined.stderr
        assert postmaster_pid(pgdata) == server_pid
        with psycopg.connect(uri) as conn:
            version = conn.execute("SELECT default_version FROM pg_available_extensions WHERE name = 'vector'").fetchone()
        assert version and version[0] >= "0.8"
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=30)
    assert holder.pid in json.loads((pgdata / ".handle_pids.json").read_text())

    # the next process prunes the dead pid, so when it exits the server really stops
    again = subprocess.run([sys.executable, "-c", OPEN_AND_EXIT, str(data)], capture_output=True, text=True, timeout=120)
    assert again.returncode == 0, again.stderr
    deadline = time.monotonic() + 30
    while postmaster_pid(pgdata) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert postmaster_pid(pgdata) is None
    assert json.loads((pgdata / ".handle_pids.json").read_text()) == []


def test_data_dir_inside_root_is_refused_with_a_fix(tmp_path: Path) -> None:
    import pytest

    from rag_core.db.server import embedded_server_uri
    from rag_core.errors import ConfigError

    if os.geteuid() != 0:
        return  # the rule only concerns root, whose home the server's user cannot enter
    with pytest.raises(ConfigError, match="outside /root"):
        embedded_server_uri(Path("/root") / "rag-data-test")


HOLD_ON_STDIN = """
import sys
from rag_core.db.server import embedded_server_uri
print(embedded_server_uri(sys.argv[1]), flush=True)
sys.stdin.read()   # like `rag mcp`: blocked reading its client
"""


def test_sigterm_releases_the_handle_and_stops_the_server(tmp_path: Path) -> None:
    """A client stopping `rag mcp` with SIGTERM must not leave the embedded server running."""
    data = tmp_path / "data"
    holder = subprocess.Popen([sys.executable, "-c", HOLD_ON_STDIN, str(data)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().startswith("postgresql://")
        pgdata = data / "pgdata"
        assert postmaster_pid(pgdata)
        holder.send_signal(signal.SIGTERM)
        assert holder.wait(timeout=60) == -signal.SIGTERM
    finally:
        if holder.poll() is None:
            holder.kill()
    assert json.loads((pgdata / ".handle_pids.json").read_text()) == []
    deadline = time.monotonic() + 30
    while postmaster_pid(pgdata) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert postmaster_pid(pgdata) is None
