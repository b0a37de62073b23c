"""Where reads go: a healthy read replica (DATABASE_READ_URL), in turn, else the primary.

Writes never come here: they use the primary's `Database`. The cores that only read (search, chat
retrieval, listings, analytics) take a `ReadRouter` as their database, so the choice of server is
made in one place.

A background thread checks each replica every RAG_REPLICA_CHECK_SEC: is it up, and how far behind
the primary is it (0 while it streams and has replayed all it received; else an upper bound from the
age of the last transaction it replayed and from what it had received at earlier looks, see `_lag`). A replica that is down or lags more than RAG_REPLICA_MAX_LAG_SEC gets no
reads until a later check finds it well again. A request that finds a replica's pooled connection
closed by the server goes elsewhere at once and wakes the checker.

Read-your-writes: after this process writes (an ingest, a delete, a chat message, the query log
flushed for analytics) the Workbench calls `note_write()`, which records the primary's WAL position;
a replica serves the reads that follow only once it has replayed past it (checked on the replica's
connection, and remembered, so only the first reads after a write pay for the check). Other
processes' writes reach this one's reads within the lag bound.
"""

from __future__ import annotations

import itertools
import logging
import math
import select
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import ContextManager, Iterator, Literal, Sequence, TypedDict

import psycopg
from psycopg_pool import ConnectionPool, PoolTimeout

from rag_core.db.database import Database, describe_url, open_pool, plain_url
from rag_core.errors import DatabaseError

log = logging.getLogger(__name__)

# Whether the server replays WAL, whether a WAL receiver runs (a row any user may see), how far it has
# received and replayed, and the age of the last transaction it replayed.
_STATE_SQL = """
SELECT pg_is_in_recovery(),
       EXISTS (SELECT 1 FROM pg_stat_wal_receiver),
       pg_last_wal_receive_lsn()::text,
       pg_last_wal_replay_lsn()::text,
       EXTRACT(EPOCH FROM now() - pg_last_xact_replay_timestamp())::float8
"""
_REPLAYED_SQL = "SELECT pg_last_wal_replay_lsn()::text"
_PRIMARY_LSN_SQL = "SELECT pg_current_wal_insert_lsn()::text"

_PROBE_TIMEOUT_SEC = 2
# A replica found behind what it has received is asked again after this long: a transaction that was
# arriving has been replayed by then, a replica that cannot keep up has not.
_RECHECK_SEC = 0.05
# A replica's pool that has no free connection within this long sends the read to the next server.
_CHECKOUT_TIMEOUT_SEC = 0.5

ReplicaHealth = Literal["ok", "lagging", "down"]


class ReplicaState(TypedDict):
    """`Workbench.read_replicas()`: one replica as the last check saw it."""

    replica: str  # host, port and database; never the password
    state: ReplicaHealth
    lag_sec: float | None  # None when down or unknown
    reason: str | None  # why it gets no reads
    checked_sec_ago: float | None


def parse_lsn(text: str | None) -> float:
    """A WAL position ('16/B374D848') as a number; None (not replaying) counts as past everything."""
    if text is None:
        return math.inf
    high, low = text.split("/")
    return float((int(high, 16) << 32) | int(low, 16))


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _closed_by_server(conn: psycopg.Connection) -> bool:
    """An idle connection with something to read was ended by its server (a shutdown, a crash, a terminated
    backend): the server sends nothing unasked on an idle connection without LISTEN. No round trip."""
    if conn.closed or conn.broken:
        return True
    try:
        readable, _, _ = select.select([conn.fileno()], [], [], 0)
    except (OSError, ValueError):
        return True
    return bool(readable)


@dataclass(eq=False)
class _Replica:
    url: str
    name: str
    pool: ConnectionPool | None = None
    monitor: psycopg.Connection | None = None
    usable: bool = False
    state: ReplicaHealth = "down"
    lag_sec: float | None = None
    reason: str | None = "not checked yet"
    checked_at: float | None = None
    replayed: float = 0.0  # the WAL position it had replayed when last asked
    received_at: tuple[float, float] | None = None  # (monotonic time, WAL position received) at the last check
    lock: threading.Lock = field(default_factory=threading.Lock)


class ReadRouter:
    """The connections reads use: a replica's when one is usable, else the primary's.

    With no replica URLs it is the primary itself, at no cost.
    """

    def __init__(self, primary: Database, replica_urls: Sequence[str] = (), *, max_lag_sec: float = 5.0,
                 check_every_sec: float = 2.0, pool_size: int = 10) -> None:
        self.primary = primary
        self.max_lag_sec = max_lag_sec
        self.check_every_sec = check_every_sec
        self.pool_size = pool_size
        self._replicas = [_Replica(plain_url(u), describe_url(u)) for u in replica_urls]
        self._turn = itertools.count()
        self._fence = 0.0  # the primary's WAL position at this process's last write
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        if self._replicas:
            for replica in self._replicas:  # the first reads already know which replicas serve
                self._check(replica)
            self._thread = threading.Thread(target=self._watch, name="rag-replica-check", daemon=True)
            self._thread.start()

    # ----- the request path -----
    def connection(self) -> ContextManager[psycopg.Connection]:
        """A connection in a transaction on a usable replica, or on the primary; failures become DatabaseError."""
        if not self._replicas:
            return self.primary.connection()
        return self._routed()

    @contextmanager
    def _routed(self) -> Iterator[psycopg.Connection]:
        picked = self._checkout()
        if picked is None:
            with self.primary.connection() as conn:
                yield conn
            return
        replica, pool, conn = picked
        try:
            with conn:
                yield conn
        except psycopg.OperationalError as exc:
            if not (conn.broken or conn.closed):
                raise DatabaseError(f"The read replica {replica.name} failed: {_first_line(exc)}.") from exc
            self._suspect(replica, _first_line(exc))
            raise DatabaseError(f"The read replica {replica.name} went away during the query; retry, the next "
                                "reads go to another server.", details={"retry_after": 1}) from exc
        finally:
            pool.putconn(conn)

    def _checkout(self) -> tuple[_Replica, ConnectionPool, psycopg.Connection] | None:
        usable = [r for r in self._replicas if r.usable]
        if not usable:
            return None
        start = next(self._turn) % len(usable)
        for replica in usable[start:] + usable[:start]:
            pool = replica.pool
            if pool is None:
                continue
            try:
                conn = pool.getconn(timeout=_CHECKOUT_TIMEOUT_SEC)
            except PoolTimeout:
                continue  # busy: this read goes to the next server
            except psycopg.OperationalError:  # the pool was closed by the checker meanwhile
                continue
            if _closed_by_server(conn):
                conn.close()
                pool.putconn(conn)
                self._suspect(replica, "the server closed its connection")
                continue
            if self._fence > replica.replayed and not self._past_fence(replica, pool, conn):
                continue
            return replica, pool, conn
        return None

    def _past_fence(self, replica: _Replica, pool: ConnectionPool, conn: psycopg.Connection) -> bool:
        """Whether the replica has replayed this process's last write; the connection goes back when not."""
        try:
            replayed = parse_lsn(conn.execute(_REPLAYED_SQL).fetchone()[0])
        except psycopg.Error as exc:
            conn.close()
            pool.putconn(conn)
            self._suspect(replica, _first_line(exc))
            return False
        replica.replayed = max(replica.replayed, replayed)
        if replayed >= self._fence:
            return True
        conn.rollback()
        pool.putconn(conn)
        return False

    def note_write(self) -> None:
        """This process wrote: the reads that follow use only replicas that have replayed it."""
        if not self._replicas:
            return
        try:
            with self.primary.connection() as conn:
                position = parse_lsn(conn.execute(_PRIMARY_LSN_SQL).fetchone()[0])
        except (DatabaseError, psycopg.Error) as exc:
            # The write is stored; failing it now would say otherwise. Without the position, the reads that
            # follow may be as stale as the lag bound allows, and the primary they would wait for is gone.
            log.warning("Could not read the primary's WAL position after a write (%s); reads may lag it by up "
                        "to RAG_REPLICA_MAX_LAG_SEC.", _first_line(exc))
            return
        self._fence = max(self._fence, position)

    # ----- the checker -----
    def _suspect(self, replica: _Replica, reason: str) -> None:
        """No more reads to `replica` until the checker, woken now, finds it well."""
        with replica.lock:
            if replica.usable:
                log.warning("Read replica %s skipped (%s); reads go to the other servers.", replica.name, reason)
            replica.usable, replica.state, replica.reason = False, "down", reason
        self._wake.set()

    def _watch(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(self.check_every_sec)
            self._wake.clear()
            for replica in self._replicas:
                if self._stop.is_set():
                    return
                try:
                    self._check(replica)
                except Exception:  # noqa: BLE001 - the checker must outlive any one odd answer
                    log.exception("Checking read replica %s failed", replica.name)

    def _check(self, replica: _Replica) -> None:
        """Ask the replica whether it is up and how far behind; open or close its pool to match."""
        try:
            if replica.monitor is None or replica.monitor.closed or replica.monitor.broken:
                replica.monitor = psycopg.connect(replica.url, autocommit=True, connect_timeout=_PROBE_TIMEOUT_SEC,
                                                  application_name="rag-replica-check")
            lag = self._lag(replica)
        except psycopg.Error as exc:
            self._down(replica, _first_line(exc))
            return
        if lag > self.max_lag_sec:
            self._set(replica, "lagging", lag, f"{lag:.1f} s behind the primary (RAG_REPLICA_MAX_LAG_SEC="
                                               f"{self.max_lag_sec:g})" if math.isfinite(lag) else
                      "it has replayed no transaction of its primary yet")
            return
        if replica.pool is not None and not replica.usable:
            replica.pool.check()  # a restarted replica: drop the connections its old server closed
        if replica.pool is None:
            try:
                replica.pool = open_pool(replica.url, self.pool_size, f"rag-read-{replica.name}", timeout=5)
            except DatabaseError as exc:
                self._down(replica, exc.message)
                return
        self._set(replica, "ok", lag, None)

    def _lag(self, replica: _Replica) -> float:
        """Seconds the replica's data may be behind the primary's: an upper bound, 0 when it is caught up.

        The age of the last transaction it replayed bounds it, but after a quiet spell on the primary that
        age is large while the replica is a moment behind a transaction now arriving; so a replica found
        behind is asked again shortly, and what it had received at the last check bounds it too.
        """
        assert replica.monitor is not None
        started = time.monotonic()
        in_recovery, streaming, received, replayed, age = replica.monitor.execute(_STATE_SQL).fetchone()
        received_lsn, replayed_lsn = parse_lsn(received), parse_lsn(replayed)
        replica.replayed = max(replica.replayed, replayed_lsn)
        earlier, replica.received_at = replica.received_at, (started, received_lsn)
        if not in_recovery or (streaming and replayed_lsn >= received_lsn):
            return 0.0
        bound = float(age) if age is not None else math.inf
        if not streaming:  # cut off from its primary: what it received says nothing about the primary
            return bound
        time.sleep(_RECHECK_SEC)
        replayed_lsn = parse_lsn(replica.monitor.execute(_REPLAYED_SQL).fetchone()[0])
        replica.replayed = max(replica.replayed, replayed_lsn)
        if replayed_lsn >= received_lsn:
            return time.monotonic() - started
        if earlier is not None and replayed_lsn >= earlier[1]:
            bound = min(bound, time.monotonic() - earlier[0])
        return bound

    def _down(self, replica: _Replica, reason: str) -> None:
        if replica.monitor is not None:
            replica.monitor.close()
            replica.monitor = None
        pool, replica.pool = replica.pool, None
        self._set(replica, "down", None, reason)
        if pool is not None:
            pool.close(timeout=1)

    def _set(self, replica: _Replica, state: ReplicaHealth, lag: float | None, reason: str | None) -> None:
        with replica.lock:
            before = replica.state if replica.checked_at is not None else None
            replica.state, replica.lag_sec, replica.reason = state, lag, reason
            replica.checked_at = time.monotonic()
            replica.usable = state == "ok"
        if state == before:
            return
        if state == "ok":
            log.log(logging.INFO if before is None else logging.WARNING,
                    "Read replica %s serves reads (lag %.2f s).", replica.name, lag or 0.0)
        else:
            log.warning("Read replica %s gets no reads: %s.", replica.name, reason)

    def states(self) -> list[ReplicaState]:
        """Each replica as the last check saw it."""
        now = time.monotonic()
        return [ReplicaState(replica=r.name, state=r.state, reason=r.reason,
                             lag_sec=round(r.lag_sec, 3) if r.lag_sec is not None and math.isfinite(r.lag_sec) else None,
                             checked_sec_ago=round(now - r.checked_at, 1) if r.checked_at is not None else None)
                for r in self._replicas]

    def close(self) -> None:
        """Stop the checker and close the replicas' connections (the primary is closed by its owner)."""
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        for replica in self._replicas:
            replica.usable = False
            if replica.monitor is not None:
                replica.monitor.close()
            if replica.pool is not None:
                replica.pool.close(timeout=1)
