"""The event log: one append-only SQLite file of events, grouped into commits and chained by hash.

Layer: storage. May touch: the SQLite file (``sqlite3``, ``sqlite_utils``) and ``storage.errors``. It imports nothing
else of ours and knows nothing of Iceberg: streams are opaque ids, payloads and parts are opaque canonical JSON text.

Tables (created with sqlite-utils, all STRICT):

- ``events``: ``position`` (INTEGER PRIMARY KEY, global, contiguous from 1), ``stream``, ``version`` (per stream,
  contiguous from 1, ``UNIQUE(stream, version)``), ``commit_id``, ``type``, ``type_version``, ``time_ms``,
  ``actor``, ``payload``, ``hash`` (sha256 hex chained to the previous event, see :func:`event_hash`).
- ``event_parts``: bulk child records of an event, keyed by ``(position, ordinal)``, ordinals from 0.
- ``commits``: one row per commit, keyed by its ``last_position``; ``commit_id`` UNIQUE, ``first_position``,
  ``time_ms`` as given, ``clock_ms`` (the running maximum of ``time_ms``, indexed, so a wall-clock lookup is one
  index seek even when writers' clocks disagree), ``actor``, ``message``.
- ``checkpoints``: derived blobs keyed by ``(stream, version)``; not hashed, not protected, deletable.

Triggers make UPDATE and DELETE on ``events``, ``event_parts`` and ``commits`` fail.
Writers queue for the write lock before ``BEGIN IMMEDIATE``: threads of one process on a per-file Python lock,
processes on a ``flock`` of the companion file ``<database>-writer-lock``, so the next writer starts as soon as
the lock is free instead of sleeping in SQLite's busy handler (which backs off up to 100 ms between tries); the
lock and the write group live in :mod:`storage.write_lock`, the file checks in :mod:`storage.sqlite_file`, and
the derived tables beside the log in :mod:`storage.sqlite_derived`.
The hot path (:meth:`Log.commit`) runs fixed SQL text (prepared once, cached by ``sqlite3``) and does index seeks
only: its cost grows with the events and parts it writes, never with the size of the log.
Writers of one file in one process that wait at the same time share a transaction (group commit, see
:meth:`Log.run_in_transaction`, :class:`storage.write_lock.WriteGroup`): one ``COMMIT`` and one fsync for all
of them, each keeping its own events, CAS and result.
"""

from __future__ import annotations

import contextlib
import functools
import json
import sqlite3
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, TypeVar
from os import PathLike
from pathlib import Path

import sqlite_utils

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
from storage.files import OPEN_DATABASES
from storage.sqlite_derived import SqliteDerived
from storage.sqlite_file import (
    DAMAGE_CODES,
    enable_wal,
    first_undecodable_position,
    register_database_file,
    wrong_thread,
)
from storage.errors import (InvalidWrite, LogBusy, LogClosed, LogDamaged, LogError, LogIntegrityError,
                            StreamVersionConflict, TransactionFailed)
from storage.write_lock import writer_lock

T = TypeVar("T")

SYNCHRONOUS_MODES = ("OFF", "NORMAL", "FULL", "EXTRA")
PROTECTED_TABLES = ("events", "event_parts", "commits")
_SCHEMA_TABLES = ("events", "event_parts", "commits", "checkpoints", "staged_files")
_SCHEMA_INDEXES = ("events_stream_version", "commits_commit_id", "commits_clock_ms")

_NO_LIMIT = 2**63 - 1
_SAVEPOINT = "icelog_log"

_EVENT_COLUMNS = "position, stream, version, commit_id, type, type_version, time_ms, actor, payload, hash"
_SELECT_COMMIT = "SELECT first_position, last_position, time_ms FROM commits WHERE commit_id = ?"
_SELECT_MESSAGES = "SELECT commit_id, message FROM commits WHERE commit_id IN (SELECT value FROM json_each(?))"
_SELECT_HEAD = "SELECT version FROM events WHERE stream = ? ORDER BY version DESC LIMIT 1"
_SELECT_HEADS = (
    "SELECT j.value, (SELECT e.version FROM events AS e WHERE e.stream = j.value ORDER BY e.version DESC LIMIT 1)"
    " FROM json_each(?) AS j"
)
_SELECT_COMMIT_AT = "SELECT commit_id FROM events WHERE stream = ? AND version = ?"
_SELECT_TAIL = (
    "SELECT e.position, e.hash, c.clock_ms FROM events AS e"
    " LEFT JOIN commits AS c ON c.last_position = e.position WHERE e.position = (SELECT max(position) FROM events)"
)
_INSERT_EVENT = f"INSERT INTO events ({_EVENT_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
_INSERT_PART = "INSERT INTO event_parts (position, ordinal, body) VALUES (?, ?, ?)"
_INSERT_COMMIT = (
    "INSERT INTO commits (last_position, first_position, commit_id, time_ms, clock_ms, actor, message)"
    " VALUES (?, ?, ?, ?, ?, ?, ?)"
)
_SELECT_COMMIT_STREAMS = "SELECT stream, version FROM events WHERE position BETWEEN ? AND ? ORDER BY position"
_SELECT_STREAM = (
    f"SELECT {_EVENT_COLUMNS} FROM events WHERE stream = ? AND version > ? AND version <= ? ORDER BY version"
)
_SELECT_SINCE = f"SELECT {_EVENT_COLUMNS} FROM events WHERE position > ? AND position <= ? ORDER BY position"
_SELECT_PARTS = "SELECT body FROM event_parts WHERE position = ? ORDER BY ordinal"
_SELECT_PARTS_MANY = (
    "SELECT position, body FROM event_parts WHERE position IN (SELECT value FROM json_each(?))"
    " ORDER BY position, ordinal"
)
_SELECT_POSITION_AT = (
    "SELECT last_position FROM commits WHERE clock_ms <= ? ORDER BY clock_ms DESC, last_position DESC LIMIT 1"
)
_PUT_CHECKPOINT = "INSERT OR REPLACE INTO checkpoints (stream, version, blob) VALUES (?, ?, ?)"
_SELECT_CHECKPOINT = (
    "SELECT version, blob FROM checkpoints WHERE stream = ? AND version <= ? ORDER BY version DESC LIMIT 1"
)
_SELECT_CHECKPOINT_VERSION = "SELECT max(version) FROM checkpoints WHERE stream = ? AND version <= ?"


class Log:
    """The append-only event log of one catalog, in one SQLite file (WAL mode).

    ::

        with Log.open(warehouse / "catalog.db") as log:
            event = NewEvent(stream="t1", type="table-created", type_version=1, payload="{}")
            result = log.commit("c-1", (StreamWrite(stream="t1", expected_version=0, events=(event,)),),
                                time_ms=1_700_000_000_000, actor="etl")
            log.head("t1")         # 1
            log.read_stream("t1")  # [StoredEvent(position=1, ...)]

    One ``Log`` owns one ``sqlite3`` connection (autocommit mode, explicit transactions); use one per thread or
    process. Several processes may commit to the same file at once: :meth:`transaction` takes the write lock with
    ``BEGIN IMMEDIATE`` and waits up to ``busy_timeout_ms`` for it.

    :param path: the SQLite file; its parent directory is created
    :param synchronous: ``PRAGMA synchronous``: "FULL" (fsync the WAL on every commit), "NORMAL", "OFF" or "EXTRA"
    :param busy_timeout_ms: how long to wait for another writer's lock before :class:`LogBusy`
    """

    def __init__(self, path: str | PathLike[str], *, synchronous: str = "FULL", busy_timeout_ms: int = 30_000,
                 create: bool = False) -> None:
        mode = str(synchronous).upper()
        if mode not in SYNCHRONOUS_MODES:
            raise LogError(f"Cannot open the log: synchronous must be one of {SYNCHRONOUS_MODES}, "
                           f"not {synchronous!r}")
        self.path = Path(path)
        self._closed = False
        self.path.parent.mkdir(parents=True, exist_ok=True)
        register_database_file(self.path, create=create)
        self._busy_timeout_s = busy_timeout_ms / 1000
        #: PRAGMA synchronous of this connection (writers share a transaction only with those of the same mode)
        self.synchronous = mode
        try:
            self._connect(mode, busy_timeout_ms)
        except BaseException:
            OPEN_DATABASES.discard(str(self.path))  # registered, never connected
            raise

    def _connect(self, mode: str, busy_timeout_ms: int) -> None:
        self._write_lock = writer_lock(self.path)
        conn = sqlite3.connect(self.path, isolation_level=None, timeout=busy_timeout_ms / 1000)
        try:
            conn.execute(f"PRAGMA synchronous = {mode}")
            conn.execute("PRAGMA foreign_keys = ON")
            self._db = sqlite_utils.Database(conn, execute_plugins=False)
            self._borrowed: tuple[sqlite3.Connection, sqlite_utils.Database] | None = None
            self._sharing = False  # this log's work runs inside a transaction shared by a write group
            #: tables other layers keep beside the log (storage.contract.DerivedTables)
            self.derived = SqliteDerived(self)
            self._conn = conn
            enable_wal(self._db, busy_timeout_ms)
            if not self._schema_present():
                with self.transaction():
                    self._create_schema()
        except sqlite3.DatabaseError as e:
            conn.close()
            if e.sqlite_errorcode in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED):
                raise LogBusy(f"Cannot open the log: {self.path} is locked ({e})") from e
            if e.sqlite_errorcode in DAMAGE_CODES:
                raise LogDamaged(f"Cannot open the log: {self.path} is damaged or not a catalog database ({e})",
                                 path=str(self.path)) from e
            raise LogError(f"Cannot open the log: {self.path} ({e})") from e
        except BaseException:
            conn.close()
            raise

    @classmethod
    def open(cls, path: str | PathLike[str], *, synchronous: str = "FULL", busy_timeout_ms: int = 30_000,
             create: bool = False) -> Log:
        """Open the log at ``path``, creating it when no file is there; the same as ``Log(path, ...)``.

        :param path: the SQLite file; its parent directory is created
        :param synchronous: "FULL" (default), "NORMAL", "OFF" or "EXTRA"
        :param busy_timeout_ms: how long to wait for another writer's lock
        :param create: also initialize an existing empty (0-byte) file; without it such a file is refused, since
            a log that lost its content must not silently become a new, empty catalog
        :raises LogDamaged: the file is empty (without ``create``), not an SQLite database, or damaged
        """
        return cls(path, synchronous=synchronous, busy_timeout_ms=busy_timeout_ms, create=create)

    def _schema_present(self) -> bool:
        """Whether every table, index and trigger of the schema exists already: then opening needs no write lock
        (and none of the schema introspection creating it costs)."""
        names = {*_SCHEMA_TABLES, *_SCHEMA_INDEXES,
                 *(f"{t}_no_{a.lower()}" for t in PROTECTED_TABLES for a in ("UPDATE", "DELETE"))}
        found = self._conn.execute("SELECT count(*) FROM sqlite_master WHERE name IN (SELECT value FROM json_each(?))",
                                   (json.dumps(sorted(names)),)).fetchone()[0]
        return bool(found == len(names))

    def _create_schema(self) -> None:
        db = self._db
        db["events"].create(
            {"position": int, "stream": str, "version": int, "commit_id": str, "type": str, "type_version": int,
             "time_ms": int, "actor": str, "payload": str, "hash": str},
            pk="position",
            not_null={"stream", "version", "commit_id", "type", "type_version", "time_ms", "payload", "hash"},
            strict=True, if_not_exists=True)
        db["events"].create_index(["stream", "version"], index_name="events_stream_version", unique=True,
                                  if_not_exists=True)
        db["event_parts"].create(
            {"position": int, "ordinal": int, "body": str},
            pk=("position", "ordinal"), not_null={"position", "ordinal", "body"},
            foreign_keys=[("position", "events", "position")], strict=True, if_not_exists=True)
        db["commits"].create(
            {"last_position": int, "first_position": int, "commit_id": str, "time_ms": int, "clock_ms": int,
             "actor": str, "message": str},
            pk="last_position", not_null={"first_position", "commit_id", "time_ms", "clock_ms"},
            strict=True, if_not_exists=True)
        db["commits"].create_index(["commit_id"], index_name="commits_commit_id", unique=True, if_not_exists=True)
        db["commits"].create_index(["clock_ms"], index_name="commits_clock_ms", if_not_exists=True)
        db["checkpoints"].create(
            {"stream": str, "version": int, "blob": bytes},
            pk=("stream", "version"), not_null={"stream", "version", "blob"}, strict=True, if_not_exists=True)
        db["staged_files"].create(
            {"stream": str, "path": str, "time_ms": int},
            pk=("stream", "path"), not_null={"stream", "path", "time_ms"}, strict=True, if_not_exists=True)
        for table in PROTECTED_TABLES:
            for action in ("UPDATE", "DELETE"):
                db.execute(
                    f"CREATE TRIGGER IF NOT EXISTS {table}_no_{action.lower()} BEFORE {action} ON {table}"
                    f" BEGIN SELECT RAISE(ABORT, '{APPEND_ONLY_MESSAGE}'); END")

    @property
    def db(self) -> sqlite_utils.Database:
        """The sqlite-utils view of the connection; other layers add their derived tables through it."""
        return self._borrowed[1] if self._borrowed is not None else self._db

    def _live(self) -> sqlite3.Connection:
        if self._closed:
            raise LogClosed(f"Cannot use the log: {self.path} is closed")
        return self._borrowed[0] if self._borrowed is not None else self._conn

    @contextlib.contextmanager
    def _sharing_with(self, leader: Log) -> Iterator[None]:
        """Run this log's work inside ``leader``'s open transaction for the duration of the block: on the leader's
        connection (while this log's own thread waits for the leader to run its work), and never in a transaction
        of its own should the shared one be rolled back under it."""
        if leader is not self:
            self._borrowed = (leader._conn, leader._db)
        self._sharing = True
        try:
            yield
        finally:
            self._borrowed = None
            self._sharing = False

    def exclusive(self, key: str, timeout_s: float | None = None, until: Callable[[], bool] | None = None
                  ) -> contextlib.AbstractContextManager[bool]:
        """Hold the lock named ``key`` among every user of this log file, in this process and in others, around
        work that is wasted when two do it at once (publishing one table's files). Yields whether it was taken
        within ``timeout_s`` (default: the busy timeout); the work behind it must be safe without it too.

        ::

            with log.exclusive("publish t1", until=lambda: published() >= 7) as taken:
                ...

        :param until: asked now and then while the lock is busy; once true, the wait ends untaken (the holder has
            done the work this waiter wanted), so waiters do not file through the lock one by one for nothing
        """
        return self._write_lock.named(key, self._busy_timeout_s if timeout_s is None else timeout_s, until)

    @contextlib.contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """Run a block in one write transaction and yield the ``sqlite3`` connection.

        ::

            with log.transaction() as conn:
                conn.execute("INSERT INTO my_index ...")

        The outermost block issues ``BEGIN IMMEDIATE`` (the write lock is taken before anything is read, which the
        compare-and-swap needs), commits at the end, and rolls back and re-raises on any error. Nested blocks use a
        savepoint. Cleanup runs only while the transaction is still open, so the first error is the one you see.

        :raises LogBusy: the write lock was not free within the busy timeout
        """
        conn = self._live()
        if self._sharing and not conn.in_transaction:  # SQLite rolled the shared transaction back (disk full, I/O)
            raise TransactionFailed(f"Cannot write to {self.path}: the transaction shared with other writers was "
                                    f"rolled back")
        if conn.in_transaction:
            conn.execute(f"SAVEPOINT {_SAVEPOINT}")
            try:
                yield conn
            except BaseException:
                if conn.in_transaction:
                    conn.execute(f"ROLLBACK TO {_SAVEPOINT}")
                    conn.execute(f"RELEASE {_SAVEPOINT}")
                raise
            conn.execute(f"RELEASE {_SAVEPOINT}")
            return
        if not self._write_lock.acquire(self._busy_timeout_s):
            raise LogBusy(f"Cannot begin a write transaction: {self.path} is locked by another writer")
        try:
            try:
                conn.execute("BEGIN IMMEDIATE")
            except sqlite3.OperationalError as e:
                if e.sqlite_errorcode in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED):
                    raise LogBusy(f"Cannot begin a write transaction: {self.path} is locked ({e})") from e
                raise LogError(f"Cannot begin a write transaction: {self.path} ({e})") from e
            try:
                yield conn
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            try:
                conn.execute("COMMIT")
            except sqlite3.Error as e:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise TransactionFailed(f"Cannot commit the transaction: {self.path} ({e})") from e
        finally:
            self._write_lock.release()

    def write_rows(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        """Run the write statement ``sql`` once per row, all rows or none: in a transaction of its own, or in the one
        open (in a savepoint for several rows; one statement is atomic by itself). No rows: nothing is done."""
        if not rows:
            return
        conn = self._live()
        if len(rows) == 1 and conn.in_transaction:
            conn.execute(sql, rows[0])
            return
        with self.transaction() as conn:
            conn.executemany(sql, rows)

    def run_in_transaction(self, work: Callable[[], T]) -> T:
        """Run ``work()`` in a write transaction and return what it returns (or raise what it raises, having rolled
        back what it wrote); the transaction may be shared with other writers of this file in this process.

        ::

            def attempt() -> CommitResult:
                base = log.head("t1")
                return log.commit(commit_id, (StreamWrite(stream="t1", expected_version=base, events=events),),
                                  time_ms=now_ms)

            result = log.run_in_transaction(attempt)

        Group commit: while one writer holds the write lock, the others of this process queue their work; the next
        of them to lead takes the lock once and runs every queued work in its own transaction, each in a savepoint
        (a failing work is rolled back alone and its error goes to its writer), then commits once: one fsync for
        all. Inside the work this log reads and writes on the leader's connection, so it sees the writes of the
        works run before it in the same transaction (a compare-and-swap on a stream another work just appended to
        sees the new head). ``work`` must use this log (and what is built on it) for every read and write, and must
        not wait for anything its own thread holds.

        :raises TransactionFailed: the shared transaction did not commit; nothing of ``work`` landed, and what it
            read may include writes that did not land either
        :raises LogBusy: the write lock was not free within the busy timeout
        """
        if self.in_transaction():  # inside this connection's (or a leader's) transaction already: a savepoint
            with self.transaction():
                return work()
        return self._write_lock.group.run(self, work)

    def in_transaction(self) -> bool:
        """Whether reads run inside a write transaction (own, or a write group's), so may see writes not landed."""
        return self._live().in_transaction

    def group_commit_counts(self) -> tuple[int, int]:
        """How many transactions :meth:`run_in_transaction` committed for this file in this process, and how many
        works they carried (equal when no transaction was shared)."""
        return self._write_lock.group.transactions, self._write_lock.group.works

    def commit(self, commit_id: str, writes: Sequence[StreamWrite], *, time_ms: int, actor: str | None = None,
               message: str | None = None, after: Callable[[sqlite3.Connection], None] | None = None
               ) -> CommitResult:
        """Append the events of one or more streams atomically, if every stream is still where the writer left it.

        ::

            write = StreamWrite(stream="t1", expected_version=log.head("t1"), events=(event,))
            try:
                result = log.commit(commit_id, (write,), time_ms=now_ms, actor="etl", message="nightly load")
            except StreamVersionConflict as e:
                ...  # reload, re-validate against what landed since, rebuild, retry with the same commit id

        In one ``BEGIN IMMEDIATE`` transaction: if ``commit_id`` already landed, nothing is written and the stored
        result comes back with ``duplicate=True`` (so re-sending a commit whose outcome is unknown is safe); every
        stream's head is checked against its ``expected_version``; the events are appended at the next positions
        and versions, each hash chained to the previous event; the parts and a ``commits`` row are written; then
        ``after(conn)`` runs inside the same transaction (for derived rows; if it raises, nothing is committed).

        :param commit_id: unique id of this commit (the idempotency key)
        :param writes: one :class:`StreamWrite` per stream, each with at least one event, no stream twice
        :param time_ms: commit time in milliseconds since the epoch, taken once by the caller
        :param actor: who commits (stored on every event and on the commit)
        :param message: free text for the audit trail (stored on the commit)
        :param after: called with the ``sqlite3`` connection inside the transaction, after the events are written
        :raises StreamVersionConflict: a stream is not at its expected version; names the commit that got there first
        :raises InvalidWrite: the request is malformed, or the commit id landed with a different write
        :raises LogBusy: the write lock was not free within the busy timeout
        """
        conn = self._live()
        writes = tuple(writes)
        check_commit(commit_id, writes, time_ms, actor, message)
        with self.transaction():
            stored = conn.execute(_SELECT_COMMIT, (commit_id,)).fetchone()
            if stored is not None:
                return resent_result(commit_id, *self._stored_result(conn, commit_id, stored), writes)
            for write in writes:
                row = conn.execute(_SELECT_HEAD, (write.stream,)).fetchone()
                head = row[0] if row is not None else 0
                if head != write.expected_version:
                    found = conn.execute(_SELECT_COMMIT_AT, (write.stream, write.expected_version + 1)).fetchone()
                    winner = found[0] if found is not None else None
                    raise StreamVersionConflict(stream=write.stream, expected_version=write.expected_version,
                                                actual_version=head, winner_commit_id=winner, commit_id=commit_id)
            tail = conn.execute(_SELECT_TAIL).fetchone()
            position, previous_hash, clock_ms = tail if tail is not None else (0, GENESIS_HASH, None)
            rows = chain_rows(writes, commit_id, time_ms, actor, position, previous_hash)
            clock_ms = time_ms if clock_ms is None or clock_ms < time_ms else clock_ms
            try:
                conn.executemany(_INSERT_EVENT, rows.events)
                if rows.parts:
                    conn.executemany(_INSERT_PART, rows.parts)
                conn.execute(_INSERT_COMMIT, (rows.last_position, rows.first_position, commit_id, time_ms, clock_ms,
                                              actor, message))
            except sqlite3.IntegrityError as e:
                raise LogIntegrityError(position=rows.first_position,
                                        reason=f"cannot append commit {commit_id!r} ({e})") from e
            if after is not None:
                after(conn)
        return CommitResult(commit_id=commit_id, time_ms=time_ms,
                            positions=tuple(range(rows.first_position, rows.last_position + 1)), heads=rows.heads,
                            duplicate=False)

    @staticmethod
    def _stored_result(conn: sqlite3.Connection, commit_id: str, stored: tuple[int, int, int]
                       ) -> tuple[CommitResult, dict[str, tuple[int, int]]]:
        return stored_result(commit_id, stored, conn.execute(_SELECT_COMMIT_STREAMS, (stored[0], stored[1])))

    def commit_of(self, commit_id: str) -> CommitResult | None:
        """The result of a commit that landed, or ``None``.

        :param commit_id: the commit id
        """
        conn = self._live()
        stored = conn.execute(_SELECT_COMMIT, (commit_id,)).fetchone()
        if stored is None:
            return None
        return self._stored_result(conn, commit_id, stored)[0]

    def commit_id_at(self, stream: str, version: int) -> str | None:
        """The commit that wrote the stream's event at ``version`` (None when there is none); one index seek."""
        row = self._live().execute(_SELECT_COMMIT_AT, (stream, version)).fetchone()
        return row[0] if row is not None else None

    def head(self, stream: str) -> int:
        """The stream's current version (0 when it has no events).

        :param stream: the stream
        """
        row = self._live().execute(_SELECT_HEAD, (stream,)).fetchone()
        return row[0] if row is not None else 0

    def heads(self, streams: Iterable[str]) -> dict[str, int]:
        """The current version of each stream (0 for streams without events), in one query.

        :param streams: the streams
        """
        rows = self._live().execute(_SELECT_HEADS, (json.dumps(list(streams)),))
        return {stream: version or 0 for stream, version in rows}

    def read_stream(self, stream: str, after_version: int = 0, up_to_version: int | None = None
                    ) -> list[StoredEvent]:
        """The stream's events with ``after_version < version <= up_to_version``, in version order.

        :param stream: the stream
        :param after_version: read events after this version (0: from the start)
        :param up_to_version: last version to read (``None``: to the head)
        """
        limit = _NO_LIMIT if up_to_version is None else up_to_version
        rows = self._live().execute(_SELECT_STREAM, (stream, after_version, limit))
        return [stored_event(row) for row in rows]

    def read_since(self, after_position: int = 0, up_to_position: int | None = None) -> list[StoredEvent]:
        """The whole log's events with ``after_position < position <= up_to_position``, in log order.

        :param after_position: read events after this position (0: from the start)
        :param up_to_position: last position to read (``None``: to the end)
        """
        limit = _NO_LIMIT if up_to_position is None else up_to_position
        rows = self._live().execute(_SELECT_SINCE, (after_position, limit))
        return [stored_event(row) for row in rows]

    def read_parts(self, position: int) -> list[str]:
        """The parts of the event at ``position``, in ordinal order.

        :param position: the event's log position
        """
        return [body for (body,) in self._live().execute(_SELECT_PARTS, (position,))]

    def read_parts_many(self, positions: Iterable[int]) -> dict[int, list[str]]:
        """The parts of several events in one query: ``{position: [part, ...]}`` (an empty list when none).

        :param positions: the events' log positions
        """
        wanted = list(positions)
        parts: dict[int, list[str]] = {position: [] for position in wanted}
        for position, body in self._live().execute(_SELECT_PARTS_MANY, (json.dumps(wanted),)):
            parts[position].append(body)
        return parts

    def messages_of(self, commit_ids: Iterable[str]) -> dict[str, str | None]:
        """The message of each commit in ``commit_ids`` that landed: ``{commit_id: message or None}`` (one query).

        :param commit_ids: commit ids, in any order, repeats allowed; ids that never landed are left out
        """
        wanted = sorted(set(commit_ids))
        if not wanted:
            return {}
        rows = self._live().execute(_SELECT_MESSAGES, (json.dumps(wanted),))
        return {commit_id: message for commit_id, message in rows}

    def position_at(self, time_ms: int) -> int:
        """The last position of the longest log prefix whose commits all have ``time_ms <= time_ms`` (0: none).

        When writers' clocks agree this is simply the last position with ``time_ms <= t``. When a commit carries an
        earlier time than one before it, it counts from the time of that earlier commit, so the answer is always a
        prefix of the log (one index seek on ``commits.clock_ms``).

        :param time_ms: wall-clock time in milliseconds since the epoch
        """
        row = self._live().execute(_SELECT_POSITION_AT, (time_ms,)).fetchone()
        return row[0] if row is not None else 0

    def record_staged(self, stream: str, path: str, time_ms: int) -> None:
        """Note a file a writer is about to write for ``stream``, before it is written or committed, so files
        of failed jobs are found later without listing storage. Not part of the hashed log.

        :param stream: the stream the file is staged for
        :param path: the file's location
        :param time_ms: when it was staged
        """
        self.record_staged_many(stream, (path,), time_ms)

    def record_staged_many(self, stream: str, paths: Iterable[str], time_ms: int) -> None:
        """:meth:`record_staged` for several files in one write transaction (one disk flush)."""
        self.write_rows("INSERT OR IGNORE INTO staged_files (stream, path, time_ms) VALUES (?, ?, ?)",
                        [(stream, path, time_ms) for path in paths])

    def staged_files(self, stream: str, before_ms: int | None = None) -> list[tuple[str, int]]:
        """Files staged for ``stream`` (optionally only those staged before ``before_ms``), oldest first.

        :param stream: the stream
        :param before_ms: only files staged before this time
        """
        sql = "SELECT path, time_ms FROM staged_files WHERE stream = ?"
        params: list[Any] = [stream]
        if before_ms is not None:
            sql += " AND time_ms < ?"
            params.append(before_ms)
        return [(p, t) for p, t in self._live().execute(sql + " ORDER BY time_ms, path", params)]

    def forget_staged(self, stream: str, paths: Iterable[str]) -> None:
        """Drop staging records (of files committed for good, or deleted as orphans).

        :param stream: the stream
        :param paths: the files
        """
        with self.transaction() as conn:
            conn.executemany("DELETE FROM staged_files WHERE stream = ? AND path = ?",
                             [(stream, p) for p in paths])

    def put_checkpoint(self, stream: str, version: int, blob: bytes) -> None:
        """Store a derived checkpoint of a stream at a version (replacing one stored there before).

        Checkpoints are not part of the log: not hashed, not protected, deletable, rebuildable.

        :param stream: the stream
        :param version: the version the blob reflects (1 to the stream's head)
        :param blob: the checkpoint bytes
        """
        with self.transaction() as conn:
            row = conn.execute(_SELECT_HEAD, (stream,)).fetchone()
            head = row[0] if row is not None else 0
            if not 0 < version <= head:
                raise InvalidWrite(f"Cannot store a checkpoint: stream {stream!r} has no version {version} "
                                   f"(head {head})")
            conn.execute(_PUT_CHECKPOINT, (stream, version, blob))

    def checkpoint_at_or_before(self, stream: str, version: int) -> tuple[int, bytes] | None:
        """The latest checkpoint of the stream at or before ``version``, as ``(version, blob)``, or ``None``.

        :param stream: the stream
        :param version: the highest version wanted
        """
        row = self._live().execute(_SELECT_CHECKPOINT, (stream, version)).fetchone()
        return (row[0], row[1]) if row is not None else None

    def checkpoint_version_at_or_before(self, stream: str, version: int) -> int:
        """The version of the latest checkpoint of the stream at or before ``version`` (0: none), without its blob."""
        row = self._live().execute(_SELECT_CHECKPOINT_VERSION, (stream, version)).fetchone()
        return int(row[0] or 0)

    def verify(self) -> list[str]:
        """Recompute the whole hash chain (parts included) and check the log's invariants; list every problem.

        Checks: positions contiguous from 1, versions contiguous per stream, every event's hash, part ordinals
        contiguous and every part belonging to an event, and every event inside the commit row that names it.
        An empty list means the log is intact. Reads one consistent snapshot; O(log) by nature, so not for hot paths.
        """
        conn = self._live()
        own_snapshot = not conn.in_transaction
        if own_snapshot:
            conn.execute("BEGIN")
        try:
            return verify_rows(
                conn.execute(f"SELECT {_EVENT_COLUMNS} FROM events ORDER BY position"),
                conn.cursor().execute("SELECT position, ordinal, body FROM event_parts ORDER BY position, ordinal"),
                conn.cursor().execute(
                    "SELECT first_position, last_position, commit_id FROM commits ORDER BY last_position"))
        finally:
            if own_snapshot:
                conn.execute("COMMIT")

    def close(self) -> None:
        """Close the connection; later calls raise :class:`LogClosed`. Closing twice is harmless."""
        if not self._closed:
            self._closed = True
            self._conn.close()
            OPEN_DATABASES.discard(str(self.path))

    def __enter__(self) -> Log:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Log({str(self.path)!r})"


def _translate_damage(method: Callable[..., Any]) -> Callable[..., Any]:
    """Turn SQLite's reports of a damaged file (malformed pages, text that is not UTF-8) into :class:`LogDamaged`
    naming the file and, for damaged text, the first damaged position; a use from another thread into
    :class:`WrongThread`."""

    @functools.wraps(method)
    def translated(self: Log, *args: Any, **kwargs: Any) -> Any:
        try:
            return method(self, *args, **kwargs)
        except sqlite3.DatabaseError as e:
            if getattr(e, "sqlite_errorcode", None) in DAMAGE_CODES:
                raise LogDamaged(f"Cannot read the log: {self.path} is damaged ({e})", path=str(self.path)) from e
            refused = wrong_thread(e, self.path, "the log")
            if refused is not None:
                raise refused from e
            if isinstance(e, sqlite3.OperationalError) and "decode" in str(e).lower():
                position = first_undecodable_position(self.path)
                where = f" at position {position}" if position is not None else ""
                raise LogDamaged(f"Cannot trust the log{where}: a stored text of {self.path} is not valid UTF-8 "
                                 f"(a damaged byte)", path=str(self.path), position=position) from e
            raise

    return translated


def log_read_write_methods() -> list[str]:
    """The names of Log's public methods that read or write the database (not ``open``, ``close`` or the
    ``transaction`` context manager): the ones a wrapper translating errors must cover."""
    return [name for name, method in vars(Log).items()
            if callable(method) and not name.startswith("_") and name not in ("transaction", "close", "open")]


# every public method of Log reports a damaged file as LogDamaged
for _name in log_read_write_methods():
    setattr(Log, _name, _translate_damage(getattr(Log, _name)))
