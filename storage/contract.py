"""What every event log backend of icelog offers: the events it takes and gives back, the hash that chains them,
the checks a commit passes before anything is written, and the operations themselves (:class:`EventLog`).

Layer: storage (nothing of Iceberg). :mod:`storage.log` keeps the log in an SQLite file, :mod:`storage.postgres_log`
in a PostgreSQL database; both compute the same hash chain, so ``verify`` and a copy between them agree.
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol, TypeVar

import attrs
from attrs import validators as v

from storage.errors import InvalidWrite

APPEND_ONLY_MESSAGE = "icelog: the event log is append-only"
GENESIS_HASH = "0" * 64

T = TypeVar("T")

_str = v.instance_of(str)


def _int(instance: object, attribute: attrs.Attribute, value: object) -> None:
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"Cannot build {type(instance).__name__}: {attribute.name} must be an int, not {value!r}")


@attrs.frozen(kw_only=True)
class NewEvent:
    """An event to append, as the engine encoded it.

    ::

        NewEvent(stream="t-uuid", type="snapshot-committed", type_version=1, payload='{"snapshot-id":1}',
                 parts=('{"file-path":"a.parquet"}',))

    :param stream: the stream it belongs to (must equal its :class:`StreamWrite`'s stream)
    :param type: the stable event type name
    :param type_version: the version of the type's payload shape (for upcasting on read)
    :param payload: canonical JSON text
    :param parts: bulk child records (canonical JSON text each), stored in ``event_parts`` and covered by the hash
    """

    stream: str = attrs.field(validator=_str)
    type: str = attrs.field(validator=_str)
    type_version: int = attrs.field(validator=_int)
    payload: str = attrs.field(validator=_str)
    parts: tuple[str, ...] = attrs.field(default=(), validator=v.deep_iterable(_str, v.instance_of(tuple)))


@attrs.frozen(kw_only=True)
class StreamWrite:
    """The events one commit appends to one stream, and the stream version they were built on (the CAS check).

    ::

        StreamWrite(stream="t-uuid", expected_version=0, events=(event,))  # 0: the stream must be new

    :param stream: the stream
    :param expected_version: the stream's head the events were built on; 0 for a new stream
    :param events: one or more events, appended as versions ``expected_version + 1, ...``
    """

    stream: str = attrs.field(validator=_str)
    expected_version: int = attrs.field(validator=_int)
    events: tuple[NewEvent, ...] = attrs.field(
        validator=v.deep_iterable(v.instance_of(NewEvent), v.instance_of(tuple)))


@attrs.frozen(kw_only=True)
class StoredEvent:
    """An event as the log holds it.

    :param position: global position in the log (contiguous from 1)
    :param stream: the stream
    :param version: version within the stream (contiguous from 1)
    :param commit_id: the commit that appended it
    :param type: the event type name
    :param type_version: the payload shape version
    :param time_ms: the commit time given by the writer
    :param actor: who committed it, if given
    :param payload: canonical JSON text
    :param hash: sha256 hex of this event chained to the previous one (:func:`event_hash`)
    """

    position: int
    stream: str
    version: int
    commit_id: str
    type: str
    type_version: int
    time_ms: int
    actor: str | None
    payload: str
    hash: str


@attrs.frozen(kw_only=True)
class CommitResult:
    """What a commit appended.

    :param commit_id: the commit id
    :param time_ms: the commit time as recorded
    :param positions: the log positions of its events, in order (contiguous)
    :param heads: ``(stream, version)`` after the commit, one per stream written, in write order
    :param duplicate: True when the commit id had already landed and this is the stored result
    """

    commit_id: str
    time_ms: int
    positions: tuple[int, ...]
    heads: tuple[tuple[str, int], ...]
    duplicate: bool = False


def event_hash(previous_hash: str, position: int, stream: str, version: int, commit_id: str, type: str,
               type_version: int, time_ms: int, actor: str | None, payload: str, parts: Sequence[str]) -> str:
    """The chained hash of one event: sha256 hex over a canonical concatenation of its fields.

    Each field is UTF-8 encoded and written as ``<byte length>:<bytes>,`` (a netstring); ``None`` is written as
    ``~,``. The fields, in order: the previous event's hash (:data:`GENESIS_HASH` for position 1), position, stream,
    version, commit id, type, type version, time, actor, payload, the number of parts, then the sha256 hex of each
    part in ordinal order. Integers are written in decimal. Any backend can reproduce it byte for byte.
    """
    fields = [previous_hash, str(position), stream, str(version), commit_id, type, str(type_version),
              str(time_ms), actor, payload, str(len(parts))]
    fields.extend(hashlib.sha256(part.encode()).hexdigest() for part in parts)
    chunks = []
    for field in fields:
        if field is None:
            chunks.append(b"~,")
        else:
            data = field.encode()
            chunks.append(b"%d:%s," % (len(data), data))
    return hashlib.sha256(b"".join(chunks)).hexdigest()


def stored_event(row: tuple) -> StoredEvent:
    position, stream, version, commit_id, type_, type_version, time_ms, actor, payload, hash_ = row
    return StoredEvent(position=position, stream=stream, version=version, commit_id=commit_id, type=type_,
                       type_version=type_version, time_ms=time_ms, actor=actor, payload=payload, hash=hash_)


@attrs.frozen
class ChainedRows:
    """A commit's rows, positioned and hashed: ``events`` (the event columns), ``parts`` (position, ordinal, body),
    ``heads`` ((stream, version) after it, in write order), and its first and last positions."""

    events: list[tuple[Any, ...]]
    parts: list[tuple[int, int, str]]
    heads: tuple[tuple[str, int], ...]
    first_position: int
    last_position: int


def chain_rows(writes: Sequence[StreamWrite], commit_id: str, time_ms: int, actor: str | None, after_position: int,
               previous_hash: str) -> ChainedRows:
    """The rows of a commit appended after ``after_position`` whose event hash is ``previous_hash``: positions and
    versions in write order, each event's hash chained to the one before (:func:`event_hash`)."""
    position = after_position
    event_rows: list[tuple[Any, ...]] = []
    part_rows: list[tuple[int, int, str]] = []
    heads = []
    for write in writes:
        version = write.expected_version
        for event in write.events:
            position += 1
            version += 1
            previous_hash = event_hash(previous_hash, position, write.stream, version, commit_id, event.type,
                                       event.type_version, time_ms, actor, event.payload, event.parts)
            event_rows.append((position, write.stream, version, commit_id, event.type, event.type_version, time_ms,
                               actor, event.payload, previous_hash))
            part_rows.extend((position, ordinal, part) for ordinal, part in enumerate(event.parts))
        heads.append((write.stream, version))
    return ChainedRows(events=event_rows, parts=part_rows, heads=tuple(heads), first_position=after_position + 1,
                       last_position=position)


def stored_result(commit_id: str, stored: Sequence[int], streams: Iterable[Sequence[Any]]
                  ) -> tuple[CommitResult, dict[str, tuple[int, int]]]:
    """A landed commit's result, from its ``commits`` row ``(first position, last position, time)`` and the
    ``(stream, version)`` of its events in position order; with each stream's span ``(base version, head)``."""
    first_position, last_position, time_ms = stored
    spans: dict[str, tuple[int, int]] = {}
    for stream, version in streams:
        base = spans[stream][0] if stream in spans else version - 1
        spans[stream] = (base, version)
    result = CommitResult(commit_id=commit_id, time_ms=time_ms,
                          positions=tuple(range(first_position, last_position + 1)),
                          heads=tuple((stream, span[1]) for stream, span in spans.items()))
    return result, spans


def resent_result(commit_id: str, result: CommitResult, spans: dict[str, tuple[int, int]],
                  writes: Sequence[StreamWrite]) -> CommitResult:
    """The stored result of a commit id sent again (``duplicate=True``), when it is the same write.

    :raises InvalidWrite: the commit id landed with another write
    """
    sent = {w.stream: (w.expected_version, w.expected_version + len(w.events)) for w in writes}
    if sent != spans:
        raise InvalidWrite(f"Cannot commit {commit_id!r}: that commit id already landed with a different write "
                           f"(streams and versions {sorted(spans.items())})")
    return attrs.evolve(result, duplicate=True)


def check_commit(commit_id: str, writes: Sequence[StreamWrite], time_ms: int, actor: str | None,
                  message: str | None) -> None:
    if not isinstance(commit_id, str) or not commit_id:
        raise InvalidWrite(f"Cannot commit: the commit id must be a non-empty string, not {commit_id!r}")
    if not isinstance(time_ms, int) or isinstance(time_ms, bool):
        raise InvalidWrite(f"Cannot commit {commit_id!r}: time_ms must be an int, not {time_ms!r}")
    if actor is not None and not isinstance(actor, str):
        raise InvalidWrite(f"Cannot commit {commit_id!r}: actor must be a string, not {actor!r}")
    if message is not None and not isinstance(message, str):
        raise InvalidWrite(f"Cannot commit {commit_id!r}: message must be a string, not {message!r}")
    if not writes:
        raise InvalidWrite(f"Cannot commit {commit_id!r}: no stream writes (an empty commit never reaches the log)")
    seen = set()
    for write in writes:
        if not isinstance(write, StreamWrite):
            raise InvalidWrite(f"Cannot commit {commit_id!r}: {write!r} is not a StreamWrite")
        if write.stream in seen:
            raise InvalidWrite(f"Cannot commit {commit_id!r}: stream {write.stream!r} is written twice")
        seen.add(write.stream)
        if write.expected_version < 0:
            raise InvalidWrite(f"Cannot commit {commit_id!r}: expected version {write.expected_version} "
                               f"of stream {write.stream!r} is negative")
        if not write.events:
            raise InvalidWrite(f"Cannot commit {commit_id!r}: the write to stream {write.stream!r} has no events")
        for event in write.events:
            if event.stream != write.stream:
                raise InvalidWrite(f"Cannot commit {commit_id!r}: an event of stream {event.stream!r} is in the "
                                   f"write to stream {write.stream!r}")


class EventLog(Protocol):
    """The operations the engine needs from an event log, whatever keeps it (SQLite: :class:`storage.log.Log`;
    PostgreSQL: :class:`storage.postgres_log.PostgresLog`). Every backend passes the same contract suite
    (``tests/storage/test_log_contract.py``).

    Writes: :meth:`commit` appends events to one or more streams in one transaction, each stream checked against
    the version its events were built on (compare-and-swap), positions contiguous from 1, each event's hash chained
    to the previous one (:func:`event_hash`); a commit id that already landed returns the stored result
    (``duplicate=True``) and writes nothing. Reads: by stream and version range, by position range, the parts of
    events, commit results and messages, the position at a time. Beside the hashed log: staged files and
    checkpoints (derived, deletable). :meth:`verify` recomputes the chain.
    """

    #: the tables other layers keep beside the log, in the same database
    derived: DerivedTables

    def transaction(self) -> contextlib.AbstractContextManager[Any]: ...

    def exclusive(self, key: str, timeout_s: float | None = None, until: Callable[[], bool] | None = None
                  ) -> contextlib.AbstractContextManager[bool]: ...

    def run_in_transaction(self, work: Callable[[], T]) -> T: ...

    def in_transaction(self) -> bool: ...

    def commit(self, commit_id: str, writes: Sequence[StreamWrite], *, time_ms: int, actor: str | None = None,
               message: str | None = None) -> CommitResult: ...

    def commit_of(self, commit_id: str) -> CommitResult | None: ...

    def head(self, stream: str) -> int: ...

    def commit_id_at(self, stream: str, version: int) -> str | None: ...

    def heads(self, streams: Iterable[str]) -> dict[str, int]: ...

    def read_stream(self, stream: str, after_version: int = 0, up_to_version: int | None = None
                    ) -> list[StoredEvent]: ...

    def read_since(self, after_position: int = 0, up_to_position: int | None = None) -> list[StoredEvent]: ...

    def read_parts(self, position: int) -> list[str]: ...

    def read_parts_many(self, positions: Iterable[int]) -> dict[int, list[str]]: ...

    def messages_of(self, commit_ids: Iterable[str]) -> dict[str, str | None]: ...

    def position_at(self, time_ms: int) -> int: ...

    def record_staged(self, stream: str, path: str, time_ms: int) -> None: ...

    def record_staged_many(self, stream: str, paths: Iterable[str], time_ms: int) -> None: ...

    def staged_files(self, stream: str, before_ms: int | None = None) -> list[tuple[str, int]]: ...

    def forget_staged(self, stream: str, paths: Iterable[str]) -> None: ...

    def put_checkpoint(self, stream: str, version: int, blob: bytes) -> None: ...

    def checkpoint_at_or_before(self, stream: str, version: int) -> tuple[int, bytes] | None: ...

    def checkpoint_version_at_or_before(self, stream: str, version: int) -> int: ...

    def verify(self) -> list[str]: ...

    def close(self) -> None: ...


def verify_rows(events: Iterable[Sequence[Any]], parts: Iterable[Sequence[Any]],
                commits: Iterable[Sequence[Any]]) -> list[str]:
    """Every problem of a log read as three ordered row streams: ``events`` (the event columns, by position),
    ``parts`` (position, ordinal, body; by position and ordinal) and ``commits`` (first position, last position,
    commit id; by last position). Checks positions contiguous from 1, versions contiguous per stream, every event's
    hash, part ordinals, and every event inside the commit row that names it. Shared by the backends' ``verify``.
    """
    problems: list[str] = []
    parts_iter, commits_iter = iter(parts), iter(commits)
    part = next(parts_iter, None)
    commit = next(commits_iter, None)
    commit_matched = False
    previous_hash = GENESIS_HASH
    expected_position = 1
    versions: dict[str, int] = {}
    for position, stream, version, commit_id, type_, type_version, time_ms, actor, payload, hash_ in events:
        if position != expected_position:
            problems.append(f"position {position}: expected position {expected_position} (a gap)")
        expected_position = position + 1
        if version != versions.get(stream, 0) + 1:
            problems.append(f"position {position}: stream {stream!r} version {version} follows "
                            f"version {versions.get(stream, 0)}")
        versions[stream] = version
        bodies = []
        while part is not None and part[0] <= position:
            if part[0] < position:
                problems.append(f"position {part[0]}: part {part[1]} belongs to no event")
            else:
                if part[1] != len(bodies):
                    problems.append(f"position {position}: part ordinal {part[1]}, expected {len(bodies)}")
                bodies.append(part[2])
            part = next(parts_iter, None)
        computed = event_hash(previous_hash, position, stream, version, commit_id, type_, type_version,
                              time_ms, actor, payload, bodies)
        if computed != hash_:
            problems.append(f"position {position}: hash does not match the event (the chain breaks here)")
        previous_hash = hash_
        while commit is not None and commit[1] < position:
            if not commit_matched:
                problems.append(f"commit {commit[2]!r}: positions {commit[0]}..{commit[1]} hold none of "
                                f"its events")
            commit, commit_matched = next(commits_iter, None), False
        if commit is None or not commit[0] <= position <= commit[1] or commit[2] != commit_id:
            problems.append(f"position {position}: not inside the row of commit {commit_id!r}")
        else:
            commit_matched = True
    while part is not None:
        problems.append(f"position {part[0]}: part {part[1]} belongs to no event")
        part = next(parts_iter, None)
    while commit is not None:
        if not commit_matched:
            problems.append(f"commit {commit[2]!r}: positions {commit[0]}..{commit[1]} hold none of its events")
        commit, commit_matched = next(commits_iter, None), False
    return problems


class DerivedTables(Protocol):
    """Tables beside the log that other layers keep in the same database (projection pointers, indexes, file
    blocks): derived, rebuildable from the log, not hashed and not protected. SQL is written once, with ``?``
    placeholders and SQLite's type names (INTEGER, TEXT, BLOB, VARCHAR(n); PostgreSQL reads INTEGER as BIGINT and
    BLOB as BYTEA); upserts, insert-if-absent and "one of these values" go through methods, since SQLite and
    PostgreSQL spell them differently. Errors of the database are :class:`storage.errors.LogError`.

    ::

        log.derived.create("CREATE TABLE IF NOT EXISTS t (k TEXT PRIMARY KEY, v BIGINT NOT NULL)")
        with log.derived.transaction():
            log.derived.upsert("t", ("k",), {"k": "a", "v": 1})
        log.derived.query("SELECT v FROM t WHERE k = ?", ["a"])   # [(1,)]
    """

    def create(self, statement: str) -> None: ...

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]: ...

    def execute(self, sql: str, params: Sequence[Any] = ()) -> None: ...

    def insert_missing(self, table: str, columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> None: ...

    def upsert(self, table: str, keys: Sequence[str], row: dict[str, Any]) -> None: ...

    def upsert_many(self, table: str, keys: Sequence[str], columns: Sequence[str],
                    rows: Iterable[Sequence[Any]]) -> None: ...

    def one_of(self, column: str) -> str:
        """A condition: ``column`` equals one of the values of a list parameter (:meth:`list_value`)."""
        ...

    def list_value(self, values: Sequence[Any]) -> Any:
        """The parameter :meth:`one_of`'s condition takes for ``values``."""
        ...

    def transaction(self) -> contextlib.AbstractContextManager[Any]: ...
