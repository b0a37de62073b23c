"""Connections, database creation and schema upgrades (Alembic, under an advisory lock)."""

from __future__ import annotations

import logging
import re
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator
from urllib.parse import urlsplit

import psycopg
from psycopg import sql
from psycopg_pool import ConnectionPool, PoolTimeout

from rag_core.errors import ConfigError, DatabaseError

log = logging.getLogger(__name__)

MIGRATIONS_DIR = Path(__file__).parent / "migrations"
# Serialises schema upgrades when the app, the CLI and the tests open one database at once.
_MIGRATION_LOCK_ID = 724_011_031


def describe_url(url: str) -> str:
    """A URL for messages: host and database, never the password."""
    parts = urlsplit(url)
    host = parts.hostname or dict(p.split("=", 1) for p in parts.query.split("&") if "=" in p).get("host", "local socket")
    return f"{host}{':' + str(parts.port) if parts.port else ''}/{parts.path.lstrip('/') or 'postgres'}"


def with_database(url: str, dbname: str) -> str:
    """The same server URL pointing at another database."""
    parts = urlsplit(url)
    return parts._replace(path="/" + dbname).geturl()


def plain_url(url: str) -> str:
    """psycopg wants postgresql://; accept SQLAlchemy-style driver suffixes too."""
    return re.sub(r"^postgres(ql)?(\+\w+)?://", "postgresql://", url)


def sqlalchemy_url(url: str) -> str:
    return re.sub(r"^postgres(ql)?(\+\w+)?://", "postgresql+psycopg://", url)


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
            exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (dbname,)).fetchone()
            if not exists:
                try:
                    conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(dbname)))
                except psycopg.errors.DuplicateDatabase:
                    pass  # another process created it in between
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
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
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


def _configure(conn: psycopg.Connection) -> None:
    from pgvector.psycopg import register_vector

    register_vector(conn)
    conn.commit()


class Database:
    """A pool of psycopg connections with pgvector types registered."""

    def __init__(self, url: str, *, pool_size: int = 10) -> None:
        self.url = plain_url(url)
        self._close_hooks: list[Callable[[], None]] = []
        self.pool = ConnectionPool(
            self.url, min_size=1, max_size=pool_size, configure=_configure, open=False,
            kwargs={"connect_timeout": 10}, name="rag",
        )
        try:
            self.pool.open(wait=True, timeout=15)
        except Exception as exc:
            self.pool.close()
            raise _connect_error(self.url, exc) from exc

    @contextmanager
    def connection(self) -> Iterator[psycopg.Connection]:
        """A pooled connection in a transaction; database failures become DatabaseError."""
        try:
            with self.pool.connection(timeout=30) as conn:
                yield conn
        except psycopg.OperationalError as exc:
            raise _connect_error(self.url, exc) from exc
        except PoolTimeout as exc:
            raise DatabaseError("The database is busy: no connection became free within 30 s.") from exc

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
        self.pool.close()

