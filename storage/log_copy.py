"""Open a log by where it lives, and copy a log from one backend to another, event for event.

Layer: storage. A copy re-commits every commit of the source, in order, with its commit id, time, actor, message,
streams, versions, payloads and parts, into an empty target: positions, versions and so every hash come out the
same, so the target's hash chain head equals the source's and ``verify`` proves the copy. Staged-file records go
along (they name the files the tables own but never committed); checkpoints are derived and are rebuilt.

::

    with open_log("warehouse/catalog.db") as src, open_log("postgresql://icelog@db/lake") as dst:
        copy_log(src, dst)    # CopyResult(events=..., commits=..., head_hash=...)
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import attrs

from storage.contract import GENESIS_HASH, EventLog, NewEvent, StoredEvent, StreamWrite
from storage.errors import FileNotFound, InvalidWrite, LogIntegrityError
from storage.postgres_url import is_postgres_url

#: how many events are read from the source at a time
BATCH_EVENTS = 5000
#: the SQLite log's file name inside a catalog folder
CATALOG_FILE = "catalog.db"


def open_log(target: str, *, busy_timeout_ms: int = 30_000, must_exist: bool = False) -> EventLog:
    """The log at ``target``: a ``postgresql://`` URL, a SQLite file, or a folder holding ``catalog.db`` (a path
    that does not exist yet is a folder, as ``--catalog-dir`` takes it, unless its name has a suffix: ``lake.db``).

    :param target: the URL, file or folder
    :param busy_timeout_ms: how long to wait for another writer's lock
    :param must_exist: refuse a SQLite log that is not there yet instead of creating it (a copy's source)
    :raises FileNotFound: ``must_exist`` and no SQLite log file is at ``target``; nothing is created
    """
    if is_postgres_url(target):
        from storage.postgres_log import PostgresLog

        return PostgresLog.open(target, busy_timeout_ms=busy_timeout_ms)
    from storage.log import Log

    folder = os.path.isdir(target) or (not os.path.lexists(target) and not os.path.splitext(target.rstrip("/"))[1])
    path = os.path.join(target, CATALOG_FILE) if folder else target
    if must_exist and not os.path.isfile(path):
        raise FileNotFound(f"Cannot open the log at {target}: there is none (no {path})", path=target)
    return Log.open(path, busy_timeout_ms=busy_timeout_ms)


@attrs.frozen
class CopyResult:
    """What a copy moved: events, commits, staged-file records, and the hash chain head both logs now share."""

    events: int
    commits: int
    staged_files: int
    head_hash: str


def _commits(source: EventLog) -> Iterator[list[StoredEvent]]:
    """The source's events grouped by commit, in log order."""
    after = 0
    current: list[StoredEvent] = []
    while True:
        batch = source.read_since(after, after + BATCH_EVENTS)
        if not batch:
            break
        for event in batch:
            if current and event.commit_id != current[-1].commit_id:
                yield current
                current = []
            current.append(event)
        after = batch[-1].position
    if current:
        yield current


def copy_log(source: EventLog, target: EventLog) -> CopyResult:
    """Copy every commit of ``source`` into ``target``, which must hold no events.

    :raises InvalidWrite: the target already holds events
    :raises LogIntegrityError: an event landed at another position or with another hash than in the source
    """
    if target.read_since(0, 1):
        raise InvalidWrite("Cannot copy the log: the target already holds events (copy into an empty log)")
    events = commits = 0
    head = GENESIS_HASH
    streams: set[str] = set()
    for group in _commits(source):
        parts = source.read_parts_many(e.position for e in group)
        writes: list[StreamWrite] = []
        for event in group:
            new = NewEvent(stream=event.stream, type=event.type, type_version=event.type_version,
                           payload=event.payload, parts=tuple(parts[event.position]))
            if writes and writes[-1].stream == event.stream:
                last = writes[-1]
                writes[-1] = attrs.evolve(last, events=last.events + (new,))
            else:
                writes.append(StreamWrite(stream=event.stream, expected_version=event.version - 1, events=(new,)))
        first = group[0]
        message = source.messages_of([first.commit_id]).get(first.commit_id)
        result = target.commit(first.commit_id, writes, time_ms=first.time_ms, actor=first.actor, message=message)
        if result.positions != tuple(e.position for e in group):
            raise LogIntegrityError(position=first.position,
                                    reason=f"commit {first.commit_id!r} landed at positions {result.positions}")
        copied = target.read_since(group[-1].position - 1, group[-1].position)
        if not copied or copied[0].hash != group[-1].hash:
            raise LogIntegrityError(position=group[-1].position,
                                    reason=f"commit {first.commit_id!r} hashes differently in the copy")
        head = group[-1].hash
        events += len(group)
        commits += 1
        streams.update(e.stream for e in group)
    staged = 0
    for stream in sorted(streams):
        by_time: dict[int, list[str]] = {}
        for path, time_ms in source.staged_files(stream):
            by_time.setdefault(time_ms, []).append(path)
        for time_ms, paths in by_time.items():
            target.record_staged_many(stream, paths, time_ms)
            staged += len(paths)
    return CopyResult(events=events, commits=commits, staged_files=staged, head_hash=head)


def head_hash(log: EventLog) -> str:
    """The hash of the log's last event (:data:`GENESIS_HASH` when it is empty)."""
    last_position = log.position_at(2**62)  # every commit is at or before the end of time
    last = log.read_since(last_position - 1, last_position) if last_position else []
    return last[0].hash if last else GENESIS_HASH
