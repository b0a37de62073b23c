"""Connections, database creation and schema upgrades (Alembic, under an advisory lock)."""

from __future__ import annotations

import logging
import re
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, ContextManager, Iterator, Protocol
from urllib.parse import urlsplit

import psycopg
from psycopg import _queries as _pg_queries
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict
from psycopg_pool import ConnectionPool, PoolTimeout

from rag_core.errors import ConfigError, DatabaseError

log = logging.getLogger(__name__)

MIGRATIONS_DIR = Path(__file__).parent / "migrations"
# Serialises schema upgrades when the app, the CLI and the tests open one database at once.
_MIGRATION_LOCK_ID = 724_011_031
# Serialises CREATE DATABASE: processes starting together on a fresh folder all found no database.
_CREATE_DATABASE_LOCK_ID = 724_011_032


class Connections(Protocol):
    """What a core that only reads takes: a `Database` (the primary) or a `ReadRouter` (a replica or the primary)."""

    def connection(self) -> ContextManager[psycopg.Connection]: ...


def describe_url(url: str) -> str:
    """A URL for messages: host and database, never the password."""
    parts = urlsplit(url)
    host = parts.hostname or dict(p.split("=", 1) for p in parts.query.split("&") if "=" in p).get("host", "local socket")
    return f"{host}{':' + str(parts.port) if parts.port else ''}/{parts.path.lstrip('/') or 'postgres'}"


CONNECT_TIMEOUT_SEC = 10  # a URL that points at something other than PostgreSQL fails after this, not never
_POSTGRES_SCHEME = re.compile(r"^postgres(ql)?(\+\w+)?://", re.IGNORECASE)
URL_FORM = "postgresql://user:password@host:5432/dbname"


def database_url_problem(url: str) -> str | None:
    """Why `url` is not a PostgreSQL URL libpq can read, in words that never quote it (it may hold a password);
    None when it is one."""
    if not _POSTGRES_SCHEME.match(url):
        return "it does not start with postgresql://"
    try:
        port = urlsplit(url).port
    except ValueError as exc:
        return "its port is not a number" if "port" in str(exc).lower() else "its host is malformed"
    if port == 0:
        return "its port is 0"
    try:
        conninfo_to_dict(plain_url(url))
    except psycopg.Error as exc:
        reason = str(exc)
        if "percent-encoded" in reason:
            return "it holds a % not followed by two hex digits (write a % in a password as %25)"
        if "IPv6" in reason or "host" in reason:
            return "its host is malformed (an IPv6 address needs its closing ])"
        if "query parameter" in reason:
            return "it has a query parameter libpq does not know"
        return "libpq cannot read it"
    return None


def connectable_url(url: str) -> str:
    """The URL as psycopg takes it (postgresql://, no driver suffix), with a connect timeout unless it sets one."""
    url = plain_url(url)
    if "connect_timeout=" in urlsplit(url).query:
        return url
    return url + ("&" if urlsplit(url).query else "?") + f"connect_timeout={CONNECT_TIMEOUT_SEC}"


def with_database(url: str, dbname: str) -> str:
    """The same server URL pointing at another database."""
    parts = urlsplit(url)
    return parts._replace(path="/" + dbname).geturl()


def plain_url(url: str) -> str:
    """psycopg wants postgresql://; accept SQLAlchemy-style driver suffixes too."""
    return _POSTGRES_SCHEME.sub("postgresql://", url)


def sqlalchemy_url(url: str) -> str:
    return _POSTGRES_SCHEME.sub("postgresql+psycopg://", url)


def _connect_error(url: str, exc: Exception) -> DatabaseError:
    return DatabaseError(
        f"Cannot connect to PostgreSQL at {describe_url(url)}: {str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__}. "
        "Check that the server runs and DATABASE_URL is right, or unset DATABASE_URL to use the embedded server."
    )


def create_database_if_missing(url: str) -> None:
    """Create the URL's database when the server lacks it (embedded default and test databases)."""
    dbname = urlsplit(url).path.lstrip("/") or "postgres"
    admin = with_database(url, "postgres")
    try:
        with psycopg.connect(plain_url(admin), autocommit=True, connect_timeout=10) as conn:
            # A session lock, released when the connection closes: CREATE DATABASE cannot run in a transaction.
            conn.execute("SELECT pg_advisory_lock(%s)", (_CREATE_DATABASE_LOCK_ID,))
            exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (dbname,)).fetchone()
            if not exists:
                try:
                    conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(dbname)))
                except (psycopg.errors.DuplicateDatabase, psycopg.errors.UniqueViolation):
                    pass  # a process that does not take the lock (an older version) created it in between
    except psycopg.OperationalError as exc:
        raise _connect_error(url, exc) from exc


def drop_database(url: str) -> None:
    """Drop the URL's database (tests clean up their own)."""
    dbname = urlsplit(url).path.lstrip("/")
    with psycopg.connect(plain_url(with_database(url, "postgres")), autocommit=True) as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(dbname)))


def ensure_pgvector(url: str) -> None:
    """Create the vector extension, or stop with a message that says how to install it."""
    try:
        with psycopg.connect(plain_url(url), autocommit=True, connect_timeout=10) as conn:
            available = conn.execute(
                "SELECT 1 FROM pg_available_extensions WHERE name = 'vector'"
            ).fetchone()
            if not available:
                version = conn.execute("SHOW server_version_num").fetchone()[0]
                major = int(version) // 10000
                raise ConfigError(
                    f"The PostgreSQL server at {describe_url(url)} has no pgvector extension. "
                    f"Install it on the server (Debian/Ubuntu: apt install postgresql-{major}-pgvector; "
                    "others: https://github.com/pgvector/pgvector#installation), or unset DATABASE_URL "
                    "to use the embedded server that ships it."
                )
            try:
                conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
            except psycopg.errors.UniqueViolation:
                pass  # two processes created it at once: IF NOT EXISTS only checks before inserting
    except psycopg.errors.InsufficientPrivilege as exc:
        raise ConfigError(
            f"pgvector is installed on {describe_url(url)} but this user may not create extensions; "
            "ask the database owner to run CREATE EXTENSION vector in this database."
        ) from exc
    except psycopg.OperationalError as exc:
        raise _connect_error(url, exc) from exc


def upgrade_schema(url: str, embedding_dim: "int | Callable[[], int]") -> str:
    """Apply every Alembic migration (one process at a time); return the current revision."""
    from alembic import command
    from alembic.config import Config
    from alembic.runtime.migration import MigrationContext
    from sqlalchemy import create_engine, text
    from sqlalchemy.pool import NullPool

    ensure_pgvector(url)
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    cfg.set_main_option("sqlalchemy.url", sqlalchemy_url(url).replace("%", "%%"))
    cfg.attributes["embedding_dim"] = embedding_dim
    engine = create_engine(sqlalchemy_url(url), poolclass=NullPool)
    try:
        with engine.connect() as conn:
            conn.execute(text("SELECT pg_advisory_lock(:k)"), {"k": _MIGRATION_LOCK_ID})
            conn.commit()
            try:
                cfg.attributes["connection"] = conn
                command.upgrade(cfg, "head")
                conn.commit()
                return MigrationContext.configure(conn).get_current_revision() or ""
            finally:
                conn.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": _MIGRATION_LOCK_ID})
                conn.commit()
    except Exception as exc:
        if isinstance(exc, (ConfigError, DatabaseError)):
            raise
        from sqlalchemy.exc import OperationalError

        if isinstance(exc, OperationalError):
            raise _connect_error(url, exc) from exc
        raise
    finally:
        engine.dispose()


# psycopg remembers how it parsed a statement's placeholders only for statements up to 4 KB; the search
# statement is larger and was parsed again on every search. Raising the bound keeps its few variants parsed
# (the cache holds the last 128 statements; eval/bench_service.py measures the service's overhead).
if getattr(_pg_queries, "MAX_CACHED_STATEMENT_LENGTH", 0) < 32_768:
    _pg_queries.MAX_CACHED_STATEMENT_LENGTH = 32_768


def _configure(conn: psycopg.Connection) -> None:
    from pgvector.psycopg import register_vector

    register_vector(conn)
    conn.commit()


def open_pool(url: str, size: int, name: str, timeout: float = 15) -> ConnectionPool:
    """An open pool of up to `size` connections with pgvector's types; DatabaseError when the server does not answer."""
    pool = ConnectionPool(url, min_size=1, max_size=size, configure=_configure, open=False,
                          kwargs={"connect_timeout": 10}, name=name)
    try:
        pool.open(wait=True, timeout=timeout)
    except Exception as exc:
        pool.close()
        raise _connect_error(url, exc) from exc
    return pool


# How long a request waits for a pooled connection before the server is probed, and in all.
_FAST_CHECKOUT_SEC = 1.0
_BUSY_TIMEOUT_SEC = 30.0
_PROBE_TIMEOUT_SEC = 2
_PROBE_CACHE_SEC = 1.0
RETRY_AFTER_SEC = 2


class Database:
    """A pool of psycopg connections with pgvector types registered, that notices a lost server.

    When the server goes away (a killed postmaster, a restarted host), the first failed request
    marks the database down and starts one background recovery: `restart` (the embedded server
    starts again; None for a server of your own), then a probe until it answers, then a fresh
    pool. Meanwhile every request fails at once with DatabaseError (retry_after) instead of
    waiting out the pool's 30 s timeout.
    """

    def __init__(self, url: str, *, pool_size: int = 10, restart: Callable[[], object] | None = None,
                 server_alive: Callable[[], bool] | None = None) -> None:
        self.url = plain_url(url)
        self.pool_size = pool_size
        self._close_hooks: list[Callable[[], None]] = []
        self._restart = restart
        self._server_alive = server_alive
        self._state_lock = threading.Lock()
        self._down_since: float | None = None
        self._closed = False
        self._probe: tuple[float, bool] = (0.0, True)
        self.pool = self._open_pool()

    def _open_pool(self) -> ConnectionPool:
        return open_pool(self.url, self.pool_size, "rag")

    @property
    def down(self) -> bool:
        """True while the server is lost and being recovered."""
        return self._down_since is not None

    @contextmanager
    def connection(self) -> Iterator[psycopg.Connection]:
        """A pooled connection in a transaction; database failures become DatabaseError."""
        if self._down_since is not None:
            raise self._unavailable()
        pool = self.pool
        try:
            conn = self._checkout(pool)
        except psycopg.OperationalError as exc:  # the pool was closed
            raise _connect_error(self.url, exc) from exc
        try:
            with conn:
                yield conn
        except psycopg.OperationalError as exc:
            if conn.broken or conn.closed:
                self._lost(f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}")
                raise self._unavailable() from exc
            raise _connect_error(self.url, exc) from exc
        finally:
            pool.putconn(conn)

    def _checkout(self, pool: ConnectionPool) -> psycopg.Connection:
        try:
            return pool.getconn(timeout=_FAST_CHECKOUT_SEC)
        except PoolTimeout:
            pass
        # No connection within a second: a busy pool, or a server that is gone? Ask the server.
        if not self._server_answers():
            self._lost("no connection could be made")
            raise self._unavailable()
        try:
            return pool.getconn(timeout=_BUSY_TIMEOUT_SEC - _FAST_CHECKOUT_SEC)
        except PoolTimeout as exc:
            raise DatabaseError(f"The database is busy: no connection became free within {_BUSY_TIMEOUT_SEC:.0f} s.",
                                details={"retry_after": RETRY_AFTER_SEC}) from exc

    def _server_answers(self) -> bool:
        """Whether a fresh connection succeeds; one probe a second serves every waiting request."""
        with self._state_lock:
            checked_at, answered = self._probe
            if time.monotonic() - checked_at < _PROBE_CACHE_SEC:
                return answered
            try:
                psycopg.connect(self.url, connect_timeout=_PROBE_TIMEOUT_SEC).close()
                answered = True
            except psycopg.Error:
                answered = False
            self._probe = (time.monotonic(), answered)
            return answered

    def _unavailable(self) -> DatabaseError:
        what = "restarting the embedded server" if self._restart else "waiting for it to answer again"
        return DatabaseError(f"The database connection was lost; {what}. Retry in a few seconds.",
                             details={"retry_after": RETRY_AFTER_SEC})

    def _lost(self, reason: str) -> None:
        """Mark the database down and start the one recovery thread (no-op when one already runs)."""
        with self._state_lock:
            if self._down_since is not None or self._closed:
                return
            self._down_since = time.monotonic()
        log.warning("Lost the database connection (%s); recovering in the background.", reason)
        threading.Thread(target=self._recover, name="rag-db-recovery", daemon=True).start()

    def _recover(self) -> None:
        attempts = 0
        while not self._closed:
            attempts += 1
            # Quick retries for the first seconds (a killed server restarts as soon as its process is
            # reaped), then slower ones for a server that stays away.
            delay = 0.25 if attempts <= 40 else 5.0
            try:
                if self._restart is not None:
                    self._restart()
                psycopg.connect(self.url, connect_timeout=_PROBE_TIMEOUT_SEC).close()
                fresh = self._open_pool()
            except Exception as exc:  # noqa: BLE001 - keep trying: the server may need a few seconds
                log.info("Database not back yet (%s: %s); retrying in %.1f s.", type(exc).__name__,
                         str(exc).strip().splitlines()[0] if str(exc).strip() else "", delay)
                time.sleep(delay)
                continue
            # The old pool's connections all died with the server, and its own reconnect attempts back
            # off for minutes: a new pool serves at once. Requests still holding an old connection put
            # it back into the old pool, which discards it.
            old, self.pool = self.pool, fresh
            with self._state_lock:
                down_for = time.monotonic() - (self._down_since or time.monotonic())
                self._down_since = None
                self._probe = (0.0, True)
            old.close(timeout=2)
            log.warning("Database connection back after %.1f s.", down_for)
            return

    def ping(self) -> str:
        """'ok' when a query succeeds; DatabaseError at once while the server is down or restarting."""
        if self._server_alive is not None and self._down_since is None and not self._server_alive():
            # A killed postmaster's idle backends still answer for a moment: ask the process table too.
            self._lost("the server process is gone")
        with self.connection() as conn:
            conn.execute("SELECT 1").fetchone()
        return "ok"

    def on_close(self, hook: Callable[[], None]) -> None:
        """Run `hook` when the pool closes, before its connections go (background writers flush there)."""
        self._close_hooks.append(hook)

    def close(self) -> None:
        """Run the close hooks, then close the pool."""
        hooks, self._close_hooks = self._close_hooks, []
        for hook in hooks:
            try:
                hook()
            except Exception as exc:  # noqa: BLE001 - one failing hook must not keep the pool open
                log.warning("A close hook failed: %s", exc)
        self._closed = True
        self.pool.close()
