"""Loads table and catalog state from the log cheaply: a cache the catalog owns, checkpoints, then a catch-up.

Layer: engine (reads the storage log; folds with engine.state.table_state). A table's state at its head
comes from the cached state when the head has not moved, else from the cached state (or the
newest checkpoint) plus the events since, so loading never replays a table's whole history.
Checkpoints are derived and disposable; deleting them only makes the next load slower.
"""

from __future__ import annotations

import json
import threading
import zlib
from collections import OrderedDict
from typing import Iterable, Mapping, Sequence

from engine.errors import IntegrityError, TableNotFound
from engine.state.events import CATALOG_STREAM, Event, FileChange, TableCreated, decode, decode_file_change
from engine.read.file_index import FileIndex
from engine.model.data_file import DataFile, LiveEntry
from engine.model.kept_values import SharedPerLog
from engine.model.types import StructType
from engine.state.table_state import (
    CatalogState,
    LogPosition,
    Snapshot,
    TableState,
    apply,
    state_from_json,
    state_json_text,
)
from storage import Log, StoredEvent
from storage.errors import ConnectionLost

CHECKPOINT_EVERY = 100
#: how many commit-boundary states a store keeps for the publish of the commits just made (a round publishes the
#: commits of the writers waiting on it, a few); each holds its own tuple of the table's snapshots, so 256 of them
#: cost 12 MB at 3,000 snapshots per catalog handle (one per REST worker thread), and the garbage collector walked
#: them all. A longer range is folded from the log: from the state before it (kept, or folded from the last
#: checkpoint, at most 99 commits back) on, about 30 µs a commit.
RECENT_STATES = 32


#: how many commit-boundary states the stores of one log in a process share (:class:`LandedStates`), and of how
#: many tables the newest state
SHARED_RECENT_STATES = 64
SHARED_NEWEST_TABLES = 256


class LandedStates:
    """States folded from commits that had landed (read outside any write transaction), shared by the stores of one
    log database in this process (:data:`LANDED_BY_LOG`): each table's newest, and those at recent commit
    boundaries, each with the boundary before it. Threads that each open the catalog (a REST server's workers,
    writers of one process) take the states another folded instead of each folding every commit of the others.

    A state read inside a write transaction may hold writes that never land, so it stays with the store that read
    it. A store checks that the log still holds a shared state's last commit at its version before it takes it.
    """

    def __init__(self) -> None:
        self._newest: OrderedDict[str, TableState] = OrderedDict()
        self._recent: OrderedDict[tuple[str, int], tuple[TableState, int]] = OrderedDict()
        self._lock = threading.Lock()

    def newest(self, table_uuid: str) -> TableState | None:
        return self._newest.get(table_uuid)  # one lookup; atomic, so no lock needed to read

    def at(self, table_uuid: str, version: int) -> tuple[TableState, int] | None:
        """The state at the commit boundary ``version``, with the version of the boundary before it."""
        return self._recent.get((table_uuid, version))

    def add(self, boundaries: Sequence[tuple[TableState, int]]) -> None:
        """Keep states at commit boundaries (each with the version of the boundary before it), oldest first."""
        with self._lock:
            recent, newest = self._recent, self._newest
            for state, previous in boundaries:
                recent[(state.table_uuid, state.version)] = (state, previous)
                kept = newest.get(state.table_uuid)
                if kept is None or kept.version < state.version:
                    newest.pop(state.table_uuid, None)
                    newest[state.table_uuid] = state
            while len(recent) > SHARED_RECENT_STATES:
                recent.popitem(last=False)
            while len(newest) > SHARED_NEWEST_TABLES:
                newest.popitem(last=False)


#: the states the stores of each log database in this process share
LANDED_BY_LOG: SharedPerLog[LandedStates] = SharedPerLog(LandedStates)


def position_of(e: StoredEvent) -> LogPosition:
    return LogPosition(position=e.position, version=e.version, commit_id=e.commit_id, time_ms=e.time_ms)


def decoded(events: Iterable[StoredEvent]) -> Iterable[tuple[Event, LogPosition]]:
    for e in events:
        yield decode(e.type, e.type_version, e.payload, position=e.position), position_of(e)


class StateStore:
    """The catalog's view of state, kept fresh from the log.

    ::

        store = StateStore(log)
        state = store.table(table_uuid)            # at the stream head
        old = store.table(table_uuid, version=3)   # right after stream version 3

    :param log: the event log
    """

    def __init__(self, log: Log) -> None:
        self.log = log
        self._tables: dict[str, TableState] = {}
        #: states at recent commit boundaries, each with the version of the boundary before it (0: none)
        self._recent: OrderedDict[tuple[str, int], tuple[TableState, int]] = OrderedDict()
        self._catalog = CatalogState()
        self._registered: tuple[CatalogState | None, frozenset[str]] = (None, frozenset())
        #: per table stream read: its first event, and the original metadata names it holds
        self._created: dict[str, tuple[TableCreated | None, frozenset[str]]] = {}
        #: decoded file changes and live file sets per snapshot (derived, rebuildable): see engine.read.file_index
        self.file_index = FileIndex(log)
        #: what this process's other stores of the log folded from landed commits
        self._landed = LANDED_BY_LOG.of(log)

    def stop_sharing(self) -> None:
        """Keep nothing more with the process's other stores of the log (the log was closed)."""
        self._landed = LandedStates()

    def forget_cached(self) -> None:
        """Drop every cached state (after a write transaction failed whose reads may have seen writes that never
        landed); the next load folds from the log again, or takes a state another store of the log folded from
        landed commits."""
        self._tables.clear()
        self._recent.clear()
        self._created.clear()
        self._catalog = CatalogState()
        self.file_index.clear()

    # ------------------------------------------------------------ catalog
    def catalog(self) -> CatalogState:
        head = self.log.head(CATALOG_STREAM)
        state = self._catalog
        if head != state.version:
            for event, at in decoded(self.log.read_stream(CATALOG_STREAM, after_version=state.version)):
                state = apply(event, state, at)
            self._catalog = state
        return state

    def check_registered(self, table_uuid: str, name: str) -> None:
        """Refuse a commit to a table stream the catalog no longer names (dropped, through a stale handle): its
        events would land where no reader looks."""
        state = self.catalog()
        kept, uuids = self._registered
        if kept is not state:
            uuids = frozenset(t.table_uuid for t in state.tables)
            self._registered = (state, uuids)
        if table_uuid not in uuids:
            raise TableNotFound(f"Cannot commit to {name}: the table was dropped (this handle is stale)")

    # ------------------------------------------------------------ tables
    def table_created(self, table_uuid: str) -> TableCreated | None:
        """The event that began the table's stream (what a registered table's location held then is in it), or None
        for a stream that does not begin with one."""
        return self._first_event(table_uuid)[0]

    def original_metadata(self, table_uuid: str) -> frozenset[str]:
        """Names of the files a table registered in place found in its metadata folder (none for others)."""
        return self._first_event(table_uuid)[1]

    def _first_event(self, table_uuid: str) -> tuple[TableCreated | None, frozenset[str]]:
        if table_uuid not in self._created:  # a stream's first event never changes
            first = [event for event, _ in decoded(self.log.read_stream(table_uuid, up_to_version=1))]
            if not first:
                return None, frozenset()
            created = first[0] if isinstance(first[0], TableCreated) else None
            self._created[table_uuid] = (created, frozenset(created.original_metadata if created else ()))
        return self._created[table_uuid]

    def recent_table(self, table_uuid: str) -> TableState:
        """The table's state as last loaded here (perhaps behind the log's head: no query), else its head state: for
        settings read before a commit (its retry policy), which builds on the head inside the transaction anyway."""
        cached = self._tables.get(table_uuid)
        return cached if cached is not None else self.table(table_uuid)

    def table(self, table_uuid: str, version: int | None = None) -> TableState:
        """The state of a table at ``version`` (default: its head)."""
        head = self.log.head(table_uuid) if version is None else version
        if head == 0:
            raise TableNotFound(f"Cannot load table: no table stream {table_uuid}")
        cached = self._tables.get(table_uuid)
        if cached is not None and cached.version == head:
            return cached
        recent = self._recent.get((table_uuid, head))
        if recent is not None:
            return recent[0]
        base: TableState | None = None
        if cached is not None and cached.version < head:
            base = cached
        shared = self._landed_state(table_uuid, head, newer_than=base.version if base is not None else 0)
        if shared is not None:
            if shared.version == head:
                if version is None:
                    self._tables[table_uuid] = shared
                return shared
            base = shared
        if base is None:
            found = self.log.checkpoint_at_or_before(table_uuid, head)
            if found is not None:
                base = state_from_json(json.loads(zlib.decompress(found[1])))
        after = base.version if base is not None else 0
        events = self.log.read_stream(table_uuid, after_version=after, up_to_version=head)
        # the head ends a commit (a commit's events land together); a version asked for may be inside one
        ends_commit = version is None or self._ends_commit(table_uuid, events)
        states = self._fold_commits(base, events, ends_commit=ends_commit)
        state = states[-1] if states else base
        assert state is not None
        if version is None:
            self._tables[table_uuid] = state
        # a checkpoint may be inside a commit (time travel into a large one starts there): a state to fold on,
        # never taken for a commit's end
        if events and events[-1].version // CHECKPOINT_EVERY > after // CHECKPOINT_EVERY:
            self._checkpoint(state)
        return state

    def _ends_commit(self, table_uuid: str, events: list[StoredEvent]) -> bool:
        """Whether the last of ``events`` (read up to a version asked for) is the last event of its commit."""
        return not events or self.log.commit_id_at(table_uuid, events[-1].version + 1) != events[-1].commit_id

    def _landed_state(self, table_uuid: str, version: int, newer_than: int) -> TableState | None:
        """The newest state another store of this log in the process folded from landed commits, at or before
        ``version`` and after ``newer_than``, when this log still holds its last commit at its version."""
        state = self._landed.newest(table_uuid)
        if state is None or state.version > version:
            found = self._landed.at(table_uuid, version)
            state = found[0] if found is not None else None
        if state is None or state.version <= newer_than:
            return None
        return state if self.log.commit_id_at(table_uuid, state.version) == state.commit_id else None

    def _fold_commits(self, base: TableState | None, events: list[StoredEvent], *,
                      ends_commit: bool = True) -> list[TableState]:
        """Fold ``events`` onto ``base``; the states at each commit boundary, oldest first, and the state after the
        last event (remembered as a boundary only when ``ends_commit``: events read up to a version inside a
        commit end halfway through it, in a state no commit ever had). Boundaries are remembered, so publishing the
        commits just made does not fold them again, and shared with the other stores of the log in the process
        when the events were read outside a write transaction, so they have landed."""
        out: list[TableState] = []
        boundaries: list[tuple[TableState, int]] = []
        state = base
        previous = base.version if base is not None else 0
        for i, (event, at) in enumerate(decoded(events)):
            state = apply(event, state, at)
            last = i + 1 == len(events)
            if last or events[i + 1].commit_id != events[i].commit_id:
                out.append(state)  # type: ignore[arg-type]
                if last and not ends_commit:
                    break
                boundaries.append((state, previous))  # type: ignore[arg-type]
                self._recent[(state.table_uuid, state.version)] = (state, previous)  # type: ignore[union-attr]
                previous = state.version  # type: ignore[union-attr]
        while len(self._recent) > RECENT_STATES:
            self._recent.popitem(last=False)
        if boundaries and not self.log.in_transaction():
            self._landed.add(boundaries)
        return out

    def _checkpoint(self, state: TableState) -> None:
        boundary = state.version // CHECKPOINT_EVERY * CHECKPOINT_EVERY
        if boundary == 0 or self.log.checkpoint_version_at_or_before(state.table_uuid, state.version) >= boundary:
            return  # another handle (or process) folding the same commits wrote it already
        # writers of one table cross a boundary together: one of them writes the checkpoint, the others go on
        table_uuid = state.table_uuid
        try:
            with self.log.exclusive(f"checkpoint {table_uuid}", timeout_s=0) as taken:
                if not taken or self.log.checkpoint_version_at_or_before(table_uuid, state.version) >= boundary:
                    return
                # level 1: a checkpoint of 1,000 snapshots compresses in 2 ms instead of 6, for 13% more bytes
                blob = zlib.compress(state_json_text(state).encode("utf-8"), 1)
                self.log.put_checkpoint(table_uuid, state.version, blob)
        except ConnectionLost:  # a log server's connection broke under the lock: a checkpoint is derived, the next
            return  # fold past the boundary writes it

    def commits_between(self, table_uuid: str, after_version: int, up_to_version: int) -> list[TableState]:
        """States at every commit boundary in ``(after_version, up_to_version]``, oldest first: the states folded
        recently when they cover the range (a publish of the commits just made), else folded from the log (the
        base state usually comes from the recent states, so only the events in the range)."""
        recent = self._recent_between(table_uuid, after_version, up_to_version)
        if recent is not None:
            return recent
        base = self.table(table_uuid, after_version) if after_version else None
        events = self.log.read_stream(table_uuid, after_version=after_version, up_to_version=up_to_version)
        return self._fold_commits(base, events, ends_commit=self._ends_commit(table_uuid, events))

    def _recent_between(self, table_uuid: str, after_version: int, up_to_version: int) -> list[TableState] | None:
        """The recent states at every boundary in ``(after_version, up_to_version]``, oldest first, or None when
        one is not kept (or ``after_version`` is no boundary)."""
        out: list[TableState] = []
        version = up_to_version
        while version > after_version:
            found = self._recent.get((table_uuid, version))
            if found is None:
                found = self._landed.at(table_uuid, version)  # another store's, checked as still the log's
                if found is None or self.log.commit_id_at(table_uuid, version) != found[0].commit_id:
                    return None
            out.append(found[0])
            version = found[1]
        if version != after_version:
            return None
        out.reverse()
        return out

    # ------------------------------------------------------------ files
    def file_changes(self, state: TableState, snapshot_log_position: int) -> list[FileChange]:
        """The files a snapshot event added and removed."""
        types: dict[int, StructType] = {s.spec_id: state.partition_type_of(s) for s in state.specs}
        try:
            return [decode_file_change(p, types) for p in self.log.read_parts(snapshot_log_position)]
        except (ValueError, KeyError, TypeError, AttributeError, IndexError) as e:
            raise IntegrityError(f"Cannot decode the files of the snapshot at log position {snapshot_log_position}: "
                                 f"a part is damaged ({type(e).__name__}: {str(e)[:200]})",
                                 position=snapshot_log_position) from e

    def file_changes_of(self, state: TableState, snap: "Snapshot") -> list[FileChange]:
        """The files a snapshot added and removed (a snapshot staged in a transaction carries its own)."""
        if snap.staged_changes is not None:
            return list(snap.staged_changes)
        return self.file_changes(state, snap.log_position)

    def live_entries(self, state: TableState, snapshot_id: int | None) -> list[LiveEntry]:
        """Data and delete files live in a snapshot, from the log: files its ancestry added minus those it removed,
        each with the sequence numbers and snapshot of the commit that added it, oldest first."""
        return self.file_index.live_entries(state, snapshot_id)

    def live_files_by_key(self, state: TableState, snapshot_id: int | None) -> Mapping[str, DataFile]:
        """The files of :meth:`live_entries` by ``DataFile.key``, each decoded when looked up (no copy of the set)."""
        return self.file_index.live_files_by_key(state, snapshot_id)

    def live_files(self, state: TableState, snapshot_id: int | None) -> list[DataFile]:
        """The files of :meth:`live_entries`, without their sequence numbers."""
        return [e.file for e in self.live_entries(state, snapshot_id)]
