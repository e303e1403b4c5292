"""The event log in a PostgreSQL database: the same events, hash chain and guarantees as the SQLite file of
:mod:`storage.log`, for a catalog that several hosts (pipelines, REST servers) share.

Layer: storage. May touch: the database (``psycopg`` 3) and ``storage.errors``; knows nothing of Iceberg.

Tables: ``events``, ``event_parts``, ``commits``, ``checkpoints``, ``staged_files``, with the columns and keys of the
SQLite log (``UNIQUE (stream, version)``, ``commits.commit_id`` unique, ``commits.clock_ms`` indexed). Triggers
refuse UPDATE, DELETE and TRUNCATE on ``events``, ``event_parts`` and ``commits``; for a role that can only append,
grant it ``SELECT, INSERT`` on those three and ``SELECT, INSERT, UPDATE, DELETE`` on the other two (README).

Compare-and-swap: every write transaction first takes one transaction-level advisory lock
(``pg_advisory_xact_lock``), so writers of the whole log take turns, as SQLite's single writer does. The hash chain
and contiguous positions need a total order of commits anyway; with the lock held, each statement of the
transaction (READ COMMITTED) sees every commit that finished before it, so the heads it checks cannot move before
it commits, and the lock goes with the transaction however it ends (a lost connection included). The unique keys
stay as a second line. A commit whose connection breaks is looked up by its commit id on a new connection: it
landed (its result comes back) or it did not (it is sent again, safely: commit ids are idempotent).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, TypeVar

import psycopg
from psycopg import errors as pg_errors
from psycopg.pq import TransactionStatus

from storage.contract import (
    APPEND_ONLY_MESSAGE,
    GENESIS_HASH,
    CommitResult,
    StoredEvent,
    StreamWrite,
    chain_rows,
    check_commit,
    resent_result,
    stored_event,
    stored_result,
    verify_rows,
)
from storage.postgres_url import redacted, scrubbed
from storage.errors import (  # noqa: I001
    ConnectionLost, TransactionFailed,
    InvalidWrite,
    LogBusy,
    LogClosed,
    LogError,
    LogIntegrityError,
    StreamVersionConflict,
    WrongThread,
)

T = TypeVar("T")

#: the advisory lock every write transaction of the log takes first (an arbitrary 64-bit key: "icelog" in ASCII)
WRITER_LOCK_KEY = 0x69_63_65_6C_6F_67
_PROTECTED = ("events", "event_parts", "commits")
_EVENT_COLUMNS = "position, stream, version, commit_id, type, type_version, time_ms, actor, payload, hash"
_NO_LIMIT = 2**63 - 1

_SCHEMA = f"""
CREATE TABLE IF NOT EXISTS events (
    position BIGINT PRIMARY KEY, stream TEXT NOT NULL, version BIGINT NOT NULL, commit_id TEXT NOT NULL,
    type TEXT NOT NULL, type_version INTEGER NOT NULL, time_ms BIGINT NOT NULL, actor TEXT, payload TEXT NOT NULL,
    hash TEXT NOT NULL, CONSTRAINT events_stream_version UNIQUE (stream, version));
CREATE TABLE IF NOT EXISTS event_parts (
    position BIGINT NOT NULL REFERENCES events (position), ordinal INTEGER NOT NULL, body TEXT NOT NULL,
    PRIMARY KEY (position, ordinal));
CREATE TABLE IF NOT EXISTS commits (
    last_position BIGINT PRIMARY KEY, first_position BIGINT NOT NULL, commit_id TEXT NOT NULL, time_ms BIGINT NOT NULL,
    clock_ms BIGINT NOT NULL, actor TEXT, message TEXT, CONSTRAINT commits_commit_id UNIQUE (commit_id));
CREATE INDEX IF NOT EXISTS commits_clock_ms ON commits (clock_ms);
CREATE TABLE IF NOT EXISTS checkpoints (
    stream TEXT NOT NULL, version BIGINT NOT NULL, blob BYTEA NOT NULL, PRIMARY KEY (stream, version));
CREATE TABLE IF NOT EXISTS staged_files (
    stream TEXT NOT NULL, path TEXT NOT NULL, time_ms BIGINT NOT NULL, PRIMARY KEY (stream, path));
CREATE OR REPLACE FUNCTION icelog_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN RAISE EXCEPTION '{APPEND_ONLY_MESSAGE}'; END $$;
""" + "".join(
    f"CREATE OR REPLACE TRIGGER {t}_append_only BEFORE UPDATE OR DELETE ON {t} "
    f"FOR EACH ROW EXECUTE FUNCTION icelog_append_only();\n"
    f"CREATE OR REPLACE TRIGGER {t}_no_truncate BEFORE TRUNCATE ON {t} "
    f"FOR EACH STATEMENT EXECUTE FUNCTION icelog_append_only();\n" for t in _PROTECTED)

_SELECT_COMMIT = "SELECT first_position, last_position, time_ms FROM commits WHERE commit_id = %s"
_SELECT_HEAD = "SELECT max(version) FROM events WHERE stream = %s"
_SELECT_COMMIT_AT = "SELECT commit_id FROM events WHERE stream = %s AND version = %s"
_SELECT_TAIL = ("SELECT e.position, e.hash, c.clock_ms FROM events AS e LEFT JOIN commits AS c"
                " ON c.last_position = e.position ORDER BY e.position DESC LIMIT 1")
_INSERT_EVENT = f"INSERT INTO events ({_EVENT_COLUMNS}) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"
_INSERT_PART = "INSERT INTO event_parts (position, ordinal, body) VALUES (%s, %s, %s)"
_INSERT_COMMIT = ("INSERT INTO commits (last_position, first_position, commit_id, time_ms, clock_ms, actor, message)"
                  " VALUES (%s, %s, %s, %s, %s, %s, %s)")
_SELECT_COMMIT_STREAMS = "SELECT stream, version FROM events WHERE position BETWEEN %s AND %s ORDER BY position"


class ConnectionPool:
    """Idle connections of this process, per URL, that closed logs hand back and new ones take first: opening a
    catalog handle (a REST request's, a short script's) then costs no new connection and session. A connection is
    taken back only when it is healthy, outside any transaction, and holds no session lock; at most
    ``max_idle`` wait per URL. A forked child starts with an empty pool (a connection must never be shared across
    processes).
    """

    def __init__(self, max_idle: int = 8) -> None:
        self.max_idle = max_idle
        self._idle: dict[str, list[psycopg.Connection]] = {}
        self._guard = threading.Lock()

    def take(self, url: str) -> psycopg.Connection | None:
        with self._guard:
            idle = self._idle.get(url, [])
            while idle:
                conn = idle.pop()
                if not conn.closed and not conn.broken:
                    return conn
        return None

    def give_back(self, url: str, conn: psycopg.Connection) -> None:
        if conn.closed or conn.broken or conn.info.transaction_status != TransactionStatus.IDLE:
            conn.close()
            return
        try:
            conn.execute("SELECT pg_advisory_unlock_all()")
        except psycopg.Error:
            conn.close()
            return
        with self._guard:
            idle = self._idle.setdefault(url, [])
            if len(idle) < self.max_idle:
                idle.append(conn)
                return
        conn.close()

    def forget(self) -> None:
        """Drop every idle connection without closing it (in a forked child: the parent still uses them)."""
        self._idle = {}
        self._guard = threading.Lock()


#: the process's pool of idle connections (see :class:`ConnectionPool`)
POOL = ConnectionPool()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=POOL.forget)


def _execute_rows(cursor: psycopg.Cursor, sql: str, rows: Sequence[Sequence[Any]]) -> None:
    """One statement per row: a single row in one round trip, several in one pipeline (``executemany``)."""
    if len(rows) == 1:
        cursor.execute(sql, rows[0])
    else:
        cursor.executemany(sql, rows)


#: a connection refused for good: SQLSTATE classes (authorization, unknown database), and libpq's own words
_REFUSED_STATES = ("28", "3D")
_REFUSED_WORDS = ("password authentication failed", "does not exist", "invalid ", "no password supplied")


def _refused_for_good(error: psycopg.OperationalError) -> bool:
    """Whether connecting failed for a reason no wait cures (a wrong password, database, role or parameter), as
    opposed to a server that is not up yet or unreachable."""
    state = getattr(error, "sqlstate", None) or ""
    return state.startswith(_REFUSED_STATES) or any(word in str(error) for word in _REFUSED_WORDS)


def _lock_key(name: str) -> int:
    """A signed 64-bit advisory lock key for ``name`` (never the writer lock's)."""
    key = int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "big", signed=True)
    return key if key != WRITER_LOCK_KEY else key + 1


class PostgresDerived:
    """The derived tables (:class:`storage.contract.DerivedTables`) in the log's PostgreSQL database: ``?``
    placeholders become ``%s``, insert-if-absent and upsert become ``ON CONFLICT``."""

    def __init__(self, log: PostgresLog) -> None:
        self._log = log

    @staticmethod
    def _sql(sql: str) -> str:
        return sql.replace("%", "%%").replace("?", "%s")

    @contextlib.contextmanager
    def _errors(self) -> Iterator[None]:
        try:
            yield
        except psycopg.OperationalError:
            raise  # a lost connection: the log's own handling (LogBusy) applies
        except psycopg.Error as e:
            raise LogError(f"Cannot use the derived tables of {self._log.path}: {str(e).strip()}") from e

    def create(self, statement: str) -> None:
        """Run a ``CREATE ... IF NOT EXISTS``, unless what it names is there already: a role that may only write
        the tables (see the README's grants) holds no CREATE on the schema, which PostgreSQL asks for first."""
        statement = re.sub(r"\bINTEGER\b", "BIGINT", re.sub(r"\bBLOB\b", "BYTEA", statement))
        named = re.match(r"\s*CREATE\s+(?:TABLE|INDEX)\s+IF\s+NOT\s+EXISTS\s+(\w+)", statement, re.IGNORECASE)
        with self._errors():
            if named and self._log._read("SELECT to_regclass(%s)", [named.group(1)])[0][0] is not None:
                return
        with self._errors(), self._log.transaction() as conn:  # the writer lock orders concurrent creators
            conn.execute(statement)

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        with self._errors():
            return [tuple(bytes(v) if isinstance(v, memoryview) else v for v in row)
                    for row in self._log._read(self._sql(sql), list(params))]

    def execute(self, sql: str, params: Sequence[Any] = ()) -> None:
        with self._errors(), self._log.transaction() as conn:
            conn.execute(self._sql(sql), list(params))

    def insert_missing(self, table: str, columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> None:
        self._insert(table, columns, rows, "DO NOTHING", ())

    def upsert(self, table: str, keys: Sequence[str], row: dict[str, Any]) -> None:
        self.upsert_many(table, keys, list(row), [list(row.values())])

    def upsert_many(self, table: str, keys: Sequence[str], columns: Sequence[str],
                    rows: Iterable[Sequence[Any]]) -> None:
        updates = ", ".join(f"{c} = EXCLUDED.{c}" for c in columns if c not in keys)
        self._insert(table, columns, rows, f"DO UPDATE SET {updates}" if updates else "DO NOTHING", keys)

    def _insert(self, table: str, columns: Sequence[str], rows: Iterable[Sequence[Any]], action: str,
                keys: Sequence[str]) -> None:
        rows = [list(r) for r in rows]
        if not rows:
            return
        target = f"({', '.join(keys)}) " if keys else ""
        sql = (f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({', '.join('%s' for _ in columns)}) "
               f"ON CONFLICT {target}{action}")
        with self._errors(), self._log.transaction() as conn, conn.cursor() as cur:
            _execute_rows(cur, sql, rows)

    def one_of(self, column: str) -> str:
        return f"{column} = ANY(?)"

    def list_value(self, values: Sequence[Any]) -> Any:
        return list(values)

    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        with self._log.transaction():
            yield


class PostgresLog:
    """The append-only event log of one catalog in a PostgreSQL database (the :class:`storage.contract.EventLog`
    operations, as :class:`storage.log.Log` offers them on SQLite).

    ::

        with PostgresLog.open("postgresql://icelog@db-host:5432/lake") as log:
            log.commit("c-1", (StreamWrite(stream="t1", expected_version=0, events=(event,)),), time_ms=0)

    One ``PostgresLog`` holds one connection (autocommit, explicit transactions), taken from the process's pool of
    idle connections and handed back by :meth:`close`; use one per thread or process. A connection that breaks is
    replaced on the next call; a commit in flight is settled by its commit id.

    :param url: ``postgresql://user[:password]@host[:port]/database`` (libpq parameters in the query string)
    :param busy_timeout_ms: how long a writer waits for the write lock (and a broken connection is retried)
    """

    def __init__(self, url: str, *, busy_timeout_ms: int = 30_000) -> None:
        self.url = url
        self.path = redacted(url)  # named in messages, as the SQLite log names its file
        self._busy_timeout_s = busy_timeout_ms / 1000
        self._closed = False
        self._depth = 0
        self._conn: psycopg.Connection | None = None
        #: the thread that opened the log: its connection is used by that thread only, as SQLite's is (threads
        #: interleaving BEGIN, savepoints and COMMIT on one connection would write a broken chain into the log)
        self._owner = threading.get_ident()
        self._held: dict[int, list[str]] = {}  #: the session locks (``exclusive``) held: lost with the connection
        #: tables other layers keep beside the log (storage.contract.DerivedTables)
        self.derived = PostgresDerived(self)
        self._connect()
        if not self._schema_present():
            with self.transaction() as conn:
                conn.execute(_SCHEMA)

    @classmethod
    def open(cls, url: str, *, busy_timeout_ms: int = 30_000) -> PostgresLog:
        """Open the log in the database at ``url``, creating its tables when they are not there."""
        return cls(url, busy_timeout_ms=busy_timeout_ms)

    # ------------------------------------------------------------ connections

    def _connect(self) -> psycopg.Connection:
        deadline = time.monotonic() + self._busy_timeout_s
        while True:
            pooled = POOL.take(self.url)
            try:
                conn = pooled or psycopg.connect(self.url, autocommit=True,
                                                 connect_timeout=max(1, int(self._busy_timeout_s)))
                conn.execute(f"SET lock_timeout = {int(self._busy_timeout_s * 1000)}")
                self._conn = conn
                return conn
            except psycopg.OperationalError as e:
                if pooled is not None:  # an idle connection the server dropped meanwhile: try the next at once
                    pooled.close()
                    continue
                if _refused_for_good(e):  # a wrong password, database or parameter: waiting changes nothing
                    raise LogError(f"Cannot open the log: {self.path} ({self._scrubbed(e)})") from None
                if time.monotonic() >= deadline:
                    raise LogBusy(f"Cannot reach the log: {self.path} ({self._scrubbed(e)})") from None
                time.sleep(0.2)
            except psycopg.Error as e:  # a URL libpq cannot parse (a bad %-escape, an unknown parameter)
                raise LogError(f"Cannot open the log: {self.path} ({self._scrubbed(e)})") from None

    def _scrubbed(self, error: BaseException) -> str:
        return scrubbed(str(error).strip(), self.url)

    def _live(self) -> psycopg.Connection:
        if self._closed:
            raise LogClosed(f"Cannot use the log: {self.path} is closed")
        if threading.get_ident() != self._owner:
            raise WrongThread(f"Cannot use the log from this thread: {self.path} was opened by another one, and a "
                              f"catalog handle belongs to the thread that opened it (open one per thread)")
        if self._conn is None or self._conn.closed or self._conn.broken:
            if self._depth:
                raise LogError(f"Cannot use the log: the connection to {self.path} broke inside a transaction")
            if self._held:  # its session locks went with it: the work they guard must not go on as if held
                keys = ", ".join(repr(names[0]) for names in self._held.values())
                raise ConnectionLost(f"Cannot use the log: the connection to {self.path} broke while holding the "
                                     f"lock {keys}, which another user may hold now")
            return self._connect()
        return self._conn

    def _read(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """Rows of a read, retried once on a new connection when the old one broke (reads are idempotent)."""
        try:
            try:
                return self._live().execute(sql, params).fetchall()
            except psycopg.OperationalError:
                if self._depth or self._conn is None or not (self._conn.broken or self._conn.closed):
                    raise
                return self._live().execute(sql, params).fetchall()
        except psycopg.OperationalError:
            raise
        except psycopg.Error as e:  # refused by the server (permissions, a read-only standby): typed, named
            raise LogError(f"Cannot read the log {self.path}: {str(e).strip()}") from e

    def _schema_present(self) -> bool:
        names = ["events", "event_parts", "commits", "checkpoints", "staged_files"]
        row = self._read("SELECT count(*) FROM pg_tables WHERE schemaname = current_schema() AND tablename = ANY(%s)",
                         (names,))
        triggers = self._read("SELECT count(*) FROM pg_trigger WHERE tgname = ANY(%s)",
                              ([f"{t}_{k}" for t in _PROTECTED for k in ("append_only", "no_truncate")],))
        return row[0][0] == len(names) and triggers[0][0] == 2 * len(_PROTECTED)

    # ------------------------------------------------------------ transactions

    @contextlib.contextmanager
    def transaction(self) -> Iterator[psycopg.Connection]:
        """Run a block in one write transaction (the writer lock taken first) and yield the connection; nested
        blocks use a savepoint. Commits at the end; rolls back and re-raises on any error.

        :raises LogBusy: the write lock was not free within the busy timeout, or the server could not be reached
        """
        conn = self._live()
        if self._depth:
            self._depth += 1
            try:
                with conn.transaction():  # a savepoint inside the open transaction
                    yield conn
            finally:
                self._depth -= 1
            return
        conn = self._begun(conn)
        self._depth = 1
        try:
            try:
                yield conn
            except BaseException:
                if not conn.broken and not conn.closed:
                    conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
        except psycopg.OperationalError as e:
            if not (conn.broken or conn.closed):
                raise LogError(f"Cannot finish a write transaction on {self.path}: {str(e).strip()}") from e
            raise ConnectionLost(f"Cannot finish a write transaction: the connection to {self.path} broke "
                                 f"({str(e).strip()}); its outcome is unknown") from e
        except psycopg.Error as e:  # refused by the server (permissions, a read-only standby): rolled back
            raise TransactionFailed(f"Cannot write to the log {self.path}: {str(e).strip()}") from e
        finally:
            self._depth = 0

    def _begun(self, conn: psycopg.Connection) -> psycopg.Connection:
        """Begin a write transaction and take the writer lock; returns the connection it runs on. READ COMMITTED
        whatever the database's default: the lock orders the writers, and each must read the heads the one before
        it committed (a snapshot taken under REPEATABLE READ before the lock is granted would not see them). Nothing
        is written yet, so a connection that breaks here is replaced once."""
        for attempt in (1, 2):
            try:
                conn.execute("BEGIN ISOLATION LEVEL READ COMMITTED")
                conn.execute("SELECT pg_advisory_xact_lock(%s)", (WRITER_LOCK_KEY,))
                return conn
            except psycopg.Error as e:
                if (alive := not (conn.broken or conn.closed)):
                    conn.execute("ROLLBACK")
                if isinstance(e, (pg_errors.LockNotAvailable, pg_errors.QueryCanceled)):  # lock or statement timeout
                    raise LogBusy(f"Cannot begin a write transaction: {self.path} is locked by another writer "
                                  f"({str(e).strip()})") from e
                if not isinstance(e, psycopg.OperationalError):
                    raise TransactionFailed(f"Cannot begin a write transaction on {self.path}: "
                                            f"{str(e).strip()}") from e
                if alive or attempt == 2:
                    raise LogBusy(f"Cannot begin a write transaction on {self.path}: {str(e).strip()}") from e
            conn = self._live()  # a new connection (refused when session locks went with the old one)
        raise AssertionError("unreachable")

    def in_transaction(self) -> bool:
        """:meth:`storage.log.Log.in_transaction`: inside a transaction of this log's."""
        return self._depth > 0

    def run_in_transaction(self, work: Callable[[], T]) -> T:
        """Run ``work()`` in one write transaction and return what it returns (see
        :meth:`storage.log.Log.run_in_transaction`; here every writer has a transaction of its own)."""
        with self.transaction():
            return work()

    @contextlib.contextmanager
    def exclusive(self, key: str, timeout_s: float | None = None, until: Callable[[], bool] | None = None
                  ) -> Iterator[bool]:
        """Hold the lock named ``key`` among every user of this log, on any host (a session advisory lock); yields
        whether it was taken within ``timeout_s`` (default: the busy timeout), or False as soon as ``until()`` is
        true while it is busy. See :meth:`storage.log.Log.exclusive`."""
        lock = _lock_key(key)
        deadline = time.monotonic() + (self._busy_timeout_s if timeout_s is None else timeout_s)
        delay = 0.0005
        while True:
            try:
                conn = self._live()
                taken = bool(conn.execute("SELECT pg_try_advisory_lock(%s)", (lock,)).fetchone()[0])
            except psycopg.OperationalError as e:
                if self._depth:
                    raise
                if time.monotonic() >= deadline:
                    raise LogBusy(f"Cannot take the lock {key!r}: the connection to {self.path} broke "
                                  f"({str(e).strip()})") from e
                taken = False  # the connection broke: the next round takes a new one
            if taken or time.monotonic() >= deadline or (until is not None and until()):
                break
            time.sleep(delay)
            delay = min(delay * 2, 0.02)
        if taken:  # a session lock is taken again by its holder (then let go as often)
            self._held.setdefault(lock, []).append(key)
        try:
            yield taken
        finally:
            if taken:
                if len(names := self._held.get(lock, [])) <= 1:
                    self._held.pop(lock, None)
                names[-1:] = []
                if not conn.broken and not conn.closed:
                    with contextlib.suppress(psycopg.OperationalError):  # a session lock dies with its connection
                        conn.execute("SELECT pg_advisory_unlock(%s)", (lock,))

    # ------------------------------------------------------------ writes

    def commit(self, commit_id: str, writes: Sequence[StreamWrite], *, time_ms: int, actor: str | None = None,
               message: str | None = None) -> CommitResult:
        """Append the events of ``writes`` as one commit (see :meth:`storage.log.Log.commit`).

        When the connection breaks before the client learns the outcome, the commit id is looked up on a new
        connection: a commit that landed returns its result; one that did not is sent again.

        :raises StreamVersionConflict: a stream is not at its expected version; names the commit that got there first
        :raises InvalidWrite: the request is malformed, or the commit id landed with a different write
        :raises LogBusy: the write lock was not free, or the server stayed unreachable, within the busy timeout
        """
        writes = tuple(writes)
        check_commit(commit_id, writes, time_ms, actor, message)
        if self._depth:  # inside the caller's transaction: its outcome is the caller's to settle
            return self._append(self._live(), commit_id, writes, time_ms, actor, message)
        deadline = time.monotonic() + self._busy_timeout_s
        while True:
            try:
                with self.transaction() as conn:
                    return self._append(conn, commit_id, writes, time_ms, actor, message)
            except LogBusy:
                if self._conn is not None and not (self._conn.broken or self._conn.closed):
                    raise  # the lock stayed taken: nothing was sent
                if time.monotonic() >= deadline:
                    raise
            try:  # the connection broke: did the commit land?
                landed = self.commit_of(commit_id)
            except (LogBusy, psycopg.OperationalError):
                landed = None
                if time.monotonic() >= deadline:
                    raise LogBusy(f"Cannot learn whether commit {commit_id!r} landed: {self.path} stays "
                                  f"unreachable; re-send it with the same commit id") from None
                time.sleep(0.2)
                continue
            if landed is not None:
                return landed

    def _append(self, conn: psycopg.Connection, commit_id: str, writes: Sequence[StreamWrite], time_ms: int,
                actor: str | None, message: str | None) -> CommitResult:
        stored = conn.execute(_SELECT_COMMIT, (commit_id,)).fetchone()
        if stored is not None:
            return resent_result(commit_id, *self._stored_result(conn, commit_id, stored), writes)
        for write in writes:
            head = conn.execute(_SELECT_HEAD, (write.stream,)).fetchone()[0] or 0
            if head != write.expected_version:
                found = conn.execute(_SELECT_COMMIT_AT, (write.stream, write.expected_version + 1)).fetchone()
                raise StreamVersionConflict(stream=write.stream, expected_version=write.expected_version,
                                            actual_version=head, winner_commit_id=found[0] if found else None,
                                            commit_id=commit_id)
        tail = conn.execute(_SELECT_TAIL).fetchone()
        position, previous_hash, clock_ms = tail if tail is not None else (0, GENESIS_HASH, None)
        rows = chain_rows(writes, commit_id, time_ms, actor, position, previous_hash)
        clock_ms = time_ms if clock_ms is None or clock_ms < time_ms else clock_ms
        try:
            with conn.cursor() as cur:
                _execute_rows(cur, _INSERT_EVENT, rows.events)
                if rows.parts:
                    _execute_rows(cur, _INSERT_PART, rows.parts)
                cur.execute(_INSERT_COMMIT, (rows.last_position, rows.first_position, commit_id, time_ms, clock_ms,
                                             actor, message))
        except pg_errors.IntegrityError as e:
            raise LogIntegrityError(position=rows.first_position,
                                    reason=f"cannot append commit {commit_id!r} ({str(e).strip()})") from e
        return CommitResult(commit_id=commit_id, time_ms=time_ms,
                            positions=tuple(range(rows.first_position, rows.last_position + 1)), heads=rows.heads,
                            duplicate=False)

    @staticmethod
    def _stored_result(conn: psycopg.Connection, commit_id: str, stored: Sequence[int]
                       ) -> tuple[CommitResult, dict[str, tuple[int, int]]]:
        return stored_result(commit_id, stored, conn.execute(_SELECT_COMMIT_STREAMS, (stored[0], stored[1])))

    def record_staged(self, stream: str, path: str, time_ms: int) -> None:
        """Note a file a writer is about to write for ``stream`` (see :meth:`storage.log.Log.record_staged`)."""
        self.record_staged_many(stream, (path,), time_ms)

    def record_staged_many(self, stream: str, paths: Iterable[str], time_ms: int) -> None:
        rows = [(stream, path, time_ms) for path in paths]
        if not rows:
            return
        with self.transaction() as conn, conn.cursor() as cur:
            _execute_rows(cur, "INSERT INTO staged_files (stream, path, time_ms) VALUES (%s, %s, %s) "
                               "ON CONFLICT (stream, path) DO NOTHING", rows)

    def forget_staged(self, stream: str, paths: Iterable[str]) -> None:
        rows = [(stream, path) for path in paths]
        if not rows:
            return
        with self.transaction() as conn, conn.cursor() as cur:
            cur.executemany("DELETE FROM staged_files WHERE stream = %s AND path = %s", rows)

    def put_checkpoint(self, stream: str, version: int, blob: bytes) -> None:
        """Store a derived checkpoint of a stream at a version (see :meth:`storage.log.Log.put_checkpoint`)."""
        with self.transaction() as conn:
            head = conn.execute(_SELECT_HEAD, (stream,)).fetchone()[0] or 0
            if not 0 < version <= head:
                raise InvalidWrite(f"Cannot store a checkpoint: stream {stream!r} has no version {version} "
                                   f"(head {head})")
            conn.execute("INSERT INTO checkpoints (stream, version, blob) VALUES (%s, %s, %s) "
                         "ON CONFLICT (stream, version) DO UPDATE SET blob = EXCLUDED.blob", (stream, version, blob))

    # ------------------------------------------------------------ reads

    def commit_of(self, commit_id: str) -> CommitResult | None:
        """The result of a commit that landed, or ``None``."""
        rows = self._read(_SELECT_COMMIT, (commit_id,))
        if not rows:
            return None
        return self._stored_result(self._live(), commit_id, rows[0])[0]

    def commit_id_at(self, stream: str, version: int) -> str | None:
        """:meth:`storage.log.Log.commit_id_at`."""
        rows = self._read(_SELECT_COMMIT_AT, (stream, version))
        return rows[0][0] if rows else None

    def head(self, stream: str) -> int:
        """The stream's current version (0 when it has no events)."""
        return self._read(_SELECT_HEAD, (stream,))[0][0] or 0

    def heads(self, streams: Iterable[str]) -> dict[str, int]:
        """The current version of each stream (0 for streams without events), in one query."""
        wanted = list(streams)
        rows = self._read("SELECT s, (SELECT max(version) FROM events WHERE stream = s) FROM unnest(%s::text[]) AS s",
                          (wanted,))
        return {stream: version or 0 for stream, version in rows}

    def read_stream(self, stream: str, after_version: int = 0, up_to_version: int | None = None
                    ) -> list[StoredEvent]:
        """The stream's events with ``after_version < version <= up_to_version``, in version order."""
        limit = _NO_LIMIT if up_to_version is None else up_to_version
        rows = self._read(f"SELECT {_EVENT_COLUMNS} FROM events WHERE stream = %s AND version > %s AND version <= %s"
                          " ORDER BY version", (stream, after_version, limit))
        return [stored_event(row) for row in rows]

    def read_since(self, after_position: int = 0, up_to_position: int | None = None) -> list[StoredEvent]:
        """The whole log's events with ``after_position < position <= up_to_position``, in log order."""
        limit = _NO_LIMIT if up_to_position is None else up_to_position
        rows = self._read(f"SELECT {_EVENT_COLUMNS} FROM events WHERE position > %s AND position <= %s"
                          " ORDER BY position", (after_position, limit))
        return [stored_event(row) for row in rows]

    def read_parts(self, position: int) -> list[str]:
        """The parts of the event at ``position``, in ordinal order."""
        return [body for (body,) in self._read("SELECT body FROM event_parts WHERE position = %s ORDER BY ordinal",
                                               (position,))]

    def read_parts_many(self, positions: Iterable[int]) -> dict[int, list[str]]:
        """The parts of several events in one query: ``{position: [part, ...]}`` (an empty list when none)."""
        wanted = list(positions)
        parts: dict[int, list[str]] = {position: [] for position in wanted}
        for position, body in self._read("SELECT position, body FROM event_parts WHERE position = ANY(%s)"
                                         " ORDER BY position, ordinal", (wanted,)):
            parts[position].append(body)
        return parts

    def messages_of(self, commit_ids: Iterable[str]) -> dict[str, str | None]:
        """The message of each commit in ``commit_ids`` that landed (ids that never landed are left out)."""
        wanted = sorted(set(commit_ids))
        if not wanted:
            return {}
        return dict(self._read("SELECT commit_id, message FROM commits WHERE commit_id = ANY(%s)", (wanted,)))

    def position_at(self, time_ms: int) -> int:
        """The last position of the longest log prefix whose commits all have ``time_ms <= time_ms`` (0: none)."""
        rows = self._read("SELECT last_position FROM commits WHERE clock_ms <= %s"
                          " ORDER BY clock_ms DESC, last_position DESC LIMIT 1", (time_ms,))
        return rows[0][0] if rows else 0

    def staged_files(self, stream: str, before_ms: int | None = None) -> list[tuple[str, int]]:
        """Files staged for ``stream`` (optionally only those staged before ``before_ms``), oldest first."""
        sql = "SELECT path, time_ms FROM staged_files WHERE stream = %s"
        params: list[Any] = [stream]
        if before_ms is not None:
            sql += " AND time_ms < %s"
            params.append(before_ms)
        return [(p, t) for p, t in self._read(sql + " ORDER BY time_ms, path", params)]

    def checkpoint_at_or_before(self, stream: str, version: int) -> tuple[int, bytes] | None:
        """The latest checkpoint of the stream at or before ``version``, as ``(version, blob)``, or ``None``."""
        rows = self._read("SELECT version, blob FROM checkpoints WHERE stream = %s AND version <= %s"
                          " ORDER BY version DESC LIMIT 1", (stream, version))
        return (rows[0][0], bytes(rows[0][1])) if rows else None

    def checkpoint_version_at_or_before(self, stream: str, version: int) -> int:
        """The version of the latest checkpoint at or before ``version`` (0: none), without its blob."""
        rows = self._read("SELECT max(version) FROM checkpoints WHERE stream = %s AND version <= %s",
                          (stream, version))
        return int(rows[0][0] or 0)

    def verify(self) -> list[str]:
        """Recompute the whole hash chain (parts included) and check the log's invariants on one consistent
        snapshot (REPEATABLE READ); the same checks as :meth:`storage.log.Log.verify`."""
        begin = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"
        conn = self._live()
        try:
            conn.execute(begin)
        except psycopg.OperationalError:  # a connection the server dropped (a restart): once more on a new one
            if self._depth or not (conn.broken or conn.closed):
                raise
            conn = self._live()
            conn.execute(begin)
        try:
            with conn.cursor(name="icelog_verify_events") as events, \
                    conn.cursor(name="icelog_verify_parts") as parts, \
                    conn.cursor(name="icelog_verify_commits") as commits:
                events.itersize = parts.itersize = commits.itersize = 5000
                events.execute(f"SELECT {_EVENT_COLUMNS} FROM events ORDER BY position")
                parts.execute("SELECT position, ordinal, body FROM event_parts ORDER BY position, ordinal")
                commits.execute("SELECT first_position, last_position, commit_id FROM commits ORDER BY last_position")
                return verify_rows(events, parts, commits)
        finally:
            if not conn.broken and not conn.closed:
                conn.execute("COMMIT")

    def close(self) -> None:
        """Hand the connection back to the process's pool; later calls raise :class:`LogClosed`. Closing twice is
        harmless."""
        if not self._closed:
            self._closed = True
            if self._conn is not None:
                POOL.give_back(self.url, self._conn)  # reused by the next log opened on this URL
                self._conn = None

    def __enter__(self) -> PostgresLog:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"PostgresLog({self.path!r})"
