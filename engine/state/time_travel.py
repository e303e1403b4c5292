"""Time travel on the event log: a table or the whole catalog exactly as it was after a log version, position or
moment, the log's entries, and the files that changed between two versions.

Layer: engine (reads the storage log through the catalog's StateStore; renders past states with
projections.projector; writes files only in :meth:`HistoricalTable.publish_view`, under the folder it is given).

Iceberg's own time travel reads snapshots; the log also knows the states no snapshot records (a schema change, a
property change) and the snapshots that expiry has since removed from the metadata::

    old = table.as_of(version=12)            # right after stream version 12
    old = table.as_of(time=datetime(...))    # the last version committed at or before that moment
    old.schema(), old.properties, old.scan(where="id > 3").to_arrow()
    old.publish_view("/tmp/view")            # an Iceberg table folder Spark loads by path
    cat.as_of(position=40).load_table("db.t")
    table.log(), cat.log(since=10), table.changes(3, 9)

States come from :meth:`StateStore.table` (the newest checkpoint at or before the version, then the events
since), so a past version costs about as much as loading a table, never a replay from the first event. Versions
and times resolve with a handful of index seeks (a binary search over the stream's versions by log position).
"""

from __future__ import annotations

import datetime as dt
import json
import os
from collections.abc import Callable, Sequence
from typing import Any

import attrs

from engine.errors import IntegrityError, NotFound, TableNotFound, ValidationError
from engine.state.events import CATALOG_STREAM, TableDropped, TableRenamed, decode
from engine.model.data_file import DataFile, DataFileContent
from engine.model.identifiers import parse_identifier, parse_namespace
from engine.model.partitioning import PartitionSpec
from engine.model.schema import Schema
from engine.model.types import is_long
from engine.ownership import check_table_location
from engine.publishing import write_only_new
from engine.read.scan import Scan
from engine.state.table_state import (
    MAIN_BRANCH,
    CatalogState,
    TableState,
    TableStateReads,
    apply,
)
from engine.state.store import position_of
from projections import layout
from projections.projector import render_all
from storage import Log
from storage.files import is_s3

READ_ONLY = "it is a read-only view of the past"

# ---------------------------------------------------------------- values


@attrs.frozen(kw_only=True)
class LogEntry:
    """One event of the log, as ``table.log()`` and ``catalog.log()`` list it.

    :param position: global position in the log
    :param version: version within its stream
    :param stream: the stream (a table uuid, or ``"catalog"``)
    :param type: the event type (``"set-properties"``, ``"add-snapshot"``...)
    :param time_ms: the commit time
    :param actor: who committed it, if recorded
    :param message: the commit's message, if recorded
    :param commit_id: the commit that appended it
    :param payload: the event's payload (its bulk parts, such as file changes, are not included)
    """

    position: int
    version: int
    stream: str
    type: str
    time_ms: int
    actor: str | None
    message: str | None
    commit_id: str
    payload: dict[str, Any]


@attrs.frozen(kw_only=True)
class Changes:
    """Files added and removed between two versions of a table (net: a file added and removed in between is in
    neither list). Data and delete files alike; ``DataFile.content`` tells them apart."""

    added: tuple[DataFile, ...] = ()
    removed: tuple[DataFile, ...] = ()

    @property
    def added_data_files(self) -> list[DataFile]:
        return [f for f in self.added if f.content == DataFileContent.DATA]

    @property
    def removed_data_files(self) -> list[DataFile]:
        return [f for f in self.removed if f.content == DataFileContent.DATA]


# ---------------------------------------------------------------- resolving versions and times


_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)


def to_time_ms(time: Any) -> int:
    """Milliseconds since the epoch from an int/float (already ms) or a datetime (naive datetimes are UTC)."""
    if isinstance(time, bool):
        raise ValidationError(f"Cannot travel to time {time!r}: give milliseconds since the epoch or a datetime")
    if isinstance(time, dt.datetime):
        if time.tzinfo is None:
            time = time.replace(tzinfo=dt.timezone.utc)
        # exact integer arithmetic (timestamp() * 1000 loses a millisecond to float rounding from 2039 on)
        return (time - _EPOCH) // dt.timedelta(milliseconds=1)
    if isinstance(time, (int, float)) and -2**63 <= time < 2**63:  # NaN and infinities fail the range
        return int(time)
    raise ValidationError(f"Cannot travel to time {time!r}: give milliseconds since the epoch (a 64-bit number) "
                          f"or a datetime")


def last_position(log: Log) -> int:
    """The log's last position (0 when empty)."""
    return log.position_at(2**62)


def _position_of_version(log: Log, stream: str, version: int) -> int:
    events = log.read_stream(stream, after_version=version - 1, up_to_version=version)
    return events[0].position


def version_at_position(log: Log, stream: str, position: int, head: int | None = None) -> int:
    """The stream's last version whose log position is ``<= position`` (0: the stream had no events yet).
    Positions grow with versions, so this is a binary search of index seeks."""
    hi = log.head(stream) if head is None else head
    lo = 0
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if _position_of_version(log, stream, mid) <= position:
            lo = mid
        else:
            hi = mid - 1
    return lo


def _check_int(value: Any, what: str) -> int:
    if not is_long(value):
        raise ValidationError(f"Cannot travel to {what} {value!r}: it must be a 64-bit integer")
    return value


def resolve_version(table: Any, version: int | None, time: Any) -> int:
    """The stream version ``table_as_of`` reads: ``version`` itself, or the last one committed at or before
    ``time``, or the head when neither is given."""
    log: Log = table.catalog.log
    head = log.head(table.uuid)
    name = ".".join(table.identifier)
    if version is not None and time is not None:
        raise ValidationError(f"Cannot travel in table {name}: give a version or a time, not both")
    if version is not None:
        version = _check_int(version, "version")
        if version < 1:
            raise ValidationError(f"Cannot travel to version {version} of table {name}: versions start at 1")
        if version > head:
            raise NotFound(f"Cannot travel to version {version} of table {name}: its log ends at version {head}")
        return version
    if time is not None:
        time_ms = to_time_ms(time)
        found = version_at_position(log, table.uuid, log.position_at(time_ms), head)
        if found == 0:
            raise NotFound(f"Cannot travel to time {time_ms} in table {name}: the table did not exist yet")
        return found
    if head == 0:
        raise TableNotFound(f"Cannot travel in table {name}: no table stream {table.uuid}")
    return head


# ---------------------------------------------------------------- a table in the past


def _read_only(method: str) -> Callable[..., Any]:
    def refuse(self: HistoricalTable, *args: Any, **kwargs: Any) -> Any:
        raise ValidationError(f"Cannot {method.replace('_', ' ')} table {'.'.join(self.identifier)} at version "
                              f"{self.version}: {READ_ONLY}")

    refuse.__name__ = method
    refuse.__doc__ = f"Refused: a historical table is read-only ({method})."
    return refuse


WRITE_METHODS = (
    "append", "append_files", "delete", "overwrite", "dynamic_overwrite", "stage_file", "delete_files",
    "set_properties", "remove_properties", "upgrade_format_version", "transaction", "commit_transaction",
    "commit_events", "update_schema", "update_spec", "replace_sort_order", "expire_snapshots",
    "remove_orphan_files", "manage_snapshots", "row_delta", "delete_by_key", "upsert", "rewrite_data_files",
    "rewrite_manifests", "publish", "rebuild",
)


class HistoricalTable(TableStateReads):
    """A read-only table exactly as it was right after stream version ``version``.

    Reads answer as :class:`engine.table.Table` does (``schema()``, ``spec()``, ``properties``,
    ``snapshots()``, ``scan()``...); every write raises ValidationError.

    :param catalog: the owning catalog
    :param namespace: the table's namespace at that time
    :param name: the table's name at that time
    :param table_uuid: the table's stream id
    :param state: the table state right after ``state.version``
    """

    def __init__(self, catalog: Any, namespace: tuple[str, ...], name: str, table_uuid: str,
                 state: TableState) -> None:
        self.catalog = catalog
        self.namespace = namespace
        self.name = name
        self.uuid = table_uuid
        self.state = state

    def __repr__(self) -> str:
        return f"HistoricalTable({'.'.join(self.identifier)!r}, version={self.version})"

    @property
    def identifier(self) -> tuple[str, ...]:
        return self.namespace + (self.name,)

    @property
    def version(self) -> int:
        return self.state.version

    @property
    def time_ms(self) -> int:
        """The commit time of the version this view shows."""
        return self.state.last_updated_ms

    # ------------------------------------------------------------ state
    def schemas(self) -> dict[int, Schema]:
        return {s.schema_id: s for s in self.state.schemas}

    def specs(self) -> dict[int, PartitionSpec]:
        return {s.spec_id: s for s in self.state.specs}

    @property
    def format_version(self) -> int:
        return self.state.format_version

    # ------------------------------------------------------------ reads
    def scan(self, where: str | None = None, columns: Sequence[str] | None = None,
             snapshot_id: int | None = None, **options: Any) -> Scan:
        """The data as it was: the live files come from the log, so snapshots expired later still plan (reading
        raises CorruptFileError naming the file when expiry has deleted it since). ``options`` go to
        :class:`engine.read.scan.Scan` (``as_of_timestamp_ms``, ``ref``)."""
        snapshot = self.state.snapshot_by_id(snapshot_id) if snapshot_id is not None else None
        if snapshot_id is not None and snapshot is None:
            expired = self.state.logged_snapshot(snapshot_id)
            if expired is not None:  # expired before this version: still readable from the log
                state = attrs.evolve(self.state, snapshots=self.state.snapshots + (expired,))
                return Scan(self.catalog.store, state, where=where, columns=columns, snapshot_id=snapshot_id,
                            io=self.catalog.io, **options)
        return Scan(self.catalog.store, self.state, where=where, columns=columns, snapshot_id=snapshot_id,
                    io=self.catalog.io, **options)

    def log(self) -> list[LogEntry]:
        """The table's log entries up to this version."""
        return _entries(self.catalog.log, self.catalog.log.read_stream(self.uuid, up_to_version=self.version))

    def changes(self, from_version: int, to_version: int | None = None, *, branch: str = MAIN_BRANCH) -> Changes:
        return _changes(self.catalog, self.uuid, from_version, self.version if to_version is None else to_version,
                        limit=self.version, name=".".join(self.identifier), branch=branch)

    def as_of(self, *, version: int | None = None, time: Any = None) -> HistoricalTable:
        return table_as_of(self, version=version, time=time)

    def render(self, location: str | None = None) -> dict[str, bytes]:
        """Every metadata file of this past state (path -> bytes), with the table location replaced by
        ``location`` when given (data file paths stay where the data is)."""
        store = self.catalog.store
        states = store.commits_between(self.uuid, 0, self.version)
        if location is not None:
            states = [attrs.evolve(s, location=location) for s in states]
        return render_all(states, store.file_changes_of)

    def publish_view(self, directory: str | os.PathLike) -> str:
        """Materialize a read-only Iceberg table folder for this past state under ``directory``: its
        ``metadata/`` (every metadata.json up to this version, manifests, manifest lists, version-hint.text)
        points at the data files where they are, so ``spark.read.format("iceberg").load(directory)`` reads the
        rows of that state (the data files must still exist). Returns the path of the metadata.json. Only new
        files are written: publishing the same view again changes nothing, and a file there with other bytes
        (another table's metadata, a view of another state) stops it before anything is written.

        :raises ValidationError: the folder is a table's location, inside or around one, or holds a file in the
            way"""
        text = os.fspath(directory)
        target = text.rstrip("/") if is_s3(text) else os.path.abspath(text).rstrip("/")
        catalog = self.catalog
        check_table_location(target, warehouse=catalog.warehouse, catalog_database=catalog.database,
                             others=catalog.table_locations(), must_be_empty=False,
                             what=f"publish view of table {'.'.join(self.identifier)}")
        files = self.render(target)
        for path in files:
            if not path.startswith(target + "/"):
                raise ValidationError(f"Cannot publish view of table {'.'.join(self.identifier)}: rendered file "
                                      f"{path} falls outside {target}")
        write_only_new(catalog.io, files, f"publish view of table {'.'.join(self.identifier)} into {target}")
        return layout.metadata_file_of(self.state, self.version, location=target)


for _method in WRITE_METHODS:
    setattr(HistoricalTable, _method, _read_only(_method))


def table_as_of(table: Any, version: int | None = None, time: Any = None) -> HistoricalTable:
    """``table`` read-only, exactly as it was right after stream ``version``, or at ``time`` (ms since the
    epoch or a datetime: the last version committed at or before it).

    :raises NotFound: the version is past the log's head, or the table did not exist yet at that time
    :raises ValidationError: both or a malformed version or time, a version below 1
    """
    resolved = resolve_version(table, version, time)
    state = table.catalog.store.table(table.uuid, resolved)
    namespace, name = _name_then(table, _position_of_version(table.catalog.log, table.uuid, resolved))
    return HistoricalTable(table.catalog, namespace, name, table.uuid, state)


def _name_then(table: Any, position: int) -> tuple[tuple[str, ...], str]:
    """The table's name right after log ``position``: the name its first rename or drop after it moved away from,
    else the catalog's name for it today (only the catalog's events since are read, not its whole history; the
    handle's own name may be a historical view's or a stale handle's)."""
    log: Log = table.catalog.log
    since = version_at_position(log, CATALOG_STREAM, position)
    for e in log.read_stream(CATALOG_STREAM, after_version=since):
        if e.type in (TableRenamed.TYPE, TableDropped.TYPE):
            event = decode(e.type, e.type_version, e.payload, position=e.position)
            if isinstance(event, (TableRenamed, TableDropped)) and event.table_uuid == table.uuid:
                return event.namespace, event.name
    for entry in table.catalog.store.catalog().tables:
        if entry.table_uuid == table.uuid:
            return entry.namespace, entry.name
    return table.namespace, table.name


# ---------------------------------------------------------------- the catalog in the past


class HistoricalCatalog:
    """A read-only catalog as it was right after log ``position``: its namespaces and table names then, each
    table at the last version it had reached by that position.

    :param catalog: the live catalog
    :param state: the catalog stream folded up to ``position``
    :param position: the log position
    """

    def __init__(self, catalog: Any, state: CatalogState, position: int) -> None:
        self.catalog = catalog
        self.state = state
        self.position = position

    def __repr__(self) -> str:
        return f"HistoricalCatalog(position={self.position})"

    def list_namespaces(self) -> list[tuple[str, ...]]:
        return [ns for ns, _ in self.state.namespaces]

    def namespace_properties(self, namespace: str | Sequence[str]) -> dict[str, str]:

        ns = parse_namespace(namespace)
        for name, props in self.state.namespaces:
            if name == ns:
                return dict(props)
        raise NotFound(f"Cannot load namespace {'.'.join(ns)} at position {self.position}: it did not exist")

    def list_tables(self, namespace: str | Sequence[str]) -> list[tuple[str, ...]]:
        from engine.errors import NamespaceNotFound

        ns = parse_namespace(namespace)
        if not self.state.has_namespace(ns):
            raise NamespaceNotFound(f"Cannot list tables at position {self.position}: namespace {'.'.join(ns)} "
                                    f"did not exist")
        return [t.namespace + (t.name,) for t in self.state.tables if t.namespace == ns]

    def table_exists(self, identifier: str | Sequence[str]) -> bool:

        ns, name = parse_identifier(identifier)
        return self.state.table(ns, name) is not None

    def load_table(self, identifier: str | Sequence[str]) -> HistoricalTable:

        ns, name = parse_identifier(identifier)
        entry = self.state.table(ns, name)
        if entry is None:
            raise TableNotFound(f"Cannot load table {'.'.join(ns + (name,))} at position {self.position}: "
                                f"it did not exist")
        version = version_at_position(self.catalog.log, entry.table_uuid, self.position)
        if version == 0:
            raise TableNotFound(f"Cannot load table {'.'.join(ns + (name,))} at position {self.position}: "
                                f"its stream has no events yet")
        state = self.catalog.store.table(entry.table_uuid, version)
        return HistoricalTable(self.catalog, ns, name, entry.table_uuid, state)

    def log(self, since: int = 0) -> list[LogEntry]:
        """The catalog's events after position ``since`` up to this view's position (as ``Catalog.log``)."""
        since = _check_since(since)
        return _entries(self.catalog.log, self.catalog.log.read_since(since, self.position))

    def __getattr__(self, name: str) -> Any:
        if name in ("create_namespace", "create_table", "register_table", "transaction", "publish",
                    "drop_table", "rename_table", "drop_namespace"):
            raise ValidationError(f"Cannot {name.replace('_', ' ')} at position {self.position}: {READ_ONLY}")
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")


def catalog_as_of(catalog: Any, position: int | None = None, time: Any = None) -> HistoricalCatalog:
    """The catalog read-only, as it was right after log ``position`` or at ``time`` (the longest log prefix
    committed at or before it). Namespaces and table names come from folding the catalog stream up to there.

    :raises NotFound: a position past the end of the log
    :raises ValidationError: both or neither given, a malformed position or time
    """
    log: Log = catalog.log
    if (position is None) == (time is None):
        raise ValidationError("Cannot travel in the catalog: give a position or a time (exactly one)")
    end = last_position(log)
    if position is not None:
        position = _check_int(position, "position")
        if position < 0:
            raise ValidationError(f"Cannot travel to position {position}: positions start at 0")
        if position > end:
            raise NotFound(f"Cannot travel to position {position}: the log ends at position {end}")
    else:
        position = log.position_at(to_time_ms(time))
    state = CatalogState()
    for e in log.read_stream(CATALOG_STREAM):
        if e.position > position:
            break
        state = apply(decode(e.type, e.type_version, e.payload, position=e.position), state, position_of(e))
    return HistoricalCatalog(catalog, state, position)


# ---------------------------------------------------------------- the log itself


def _entries(log: Log, events: Sequence[Any]) -> list[LogEntry]:
    messages = log.messages_of(e.commit_id for e in events)
    return [LogEntry(position=e.position, version=e.version, stream=e.stream, type=e.type, time_ms=e.time_ms,
                     actor=e.actor, message=messages.get(e.commit_id), commit_id=e.commit_id,
                     payload=_payload(e)) for e in events]


def _payload(e: Any) -> Any:
    try:
        return json.loads(e.payload)
    except ValueError as err:
        raise IntegrityError(f"Cannot read the event at log position {e.position}: its payload is damaged ({err})",
                             position=e.position) from err


def table_log(table: Any) -> list[LogEntry]:
    """Every event of the table's stream, oldest first."""
    return _entries(table.catalog.log, table.catalog.log.read_stream(table.uuid))


def catalog_log(catalog: Any, since: int = 0) -> list[LogEntry]:
    """Every event of the whole catalog after position ``since``, in log order."""
    return entries_since(catalog.log, since)


def entries_since(log: Any, since: int = 0) -> list[LogEntry]:
    """Every event of a catalog's log after position ``since`` (what ``catalog.log(since=...)`` returns)."""
    return _entries(log, log.read_since(_check_since(since)))


def _check_since(since: Any) -> int:
    since = _check_int(since, "position")
    if since < 0:
        raise ValidationError(f"Cannot read the log since position {since}: positions start at 0")
    return since


# ---------------------------------------------------------------- changes between versions


def _changes(catalog: Any, table_uuid: str, from_version: int, to_version: int, *, limit: int, name: str,
             branch: str) -> Changes:
    from_version = _check_int(from_version, "version")
    to_version = _check_int(to_version, "version")
    if from_version < 0 or to_version < 0:
        raise ValidationError(f"Cannot list changes of table {name}: versions start at 0")
    if from_version > to_version:
        raise ValidationError(f"Cannot list changes of table {name}: from version {from_version} is after to "
                              f"version {to_version}")
    if to_version > limit:
        raise NotFound(f"Cannot list changes of table {name} up to version {to_version}: its log ends at "
                       f"version {limit}")
    store = catalog.store

    def live(version: int) -> dict[str, DataFile]:
        if version == 0:
            return {}
        state = store.table(table_uuid, version)
        ref = state.ref(branch)
        if ref is None:
            return {}
        # by key, not path: one Puffin file holds the deletion vectors of many data files
        return {e.file.key: e.file for e in store.live_entries(state, ref.snapshot_id)}

    before, after = live(from_version), live(to_version)
    return Changes(added=tuple(f for p, f in after.items() if p not in before),
                   removed=tuple(f for p, f in before.items() if p not in after))


def table_changes(table: Any, from_version: int, to_version: int | None = None, *,
                  branch: str = MAIN_BRANCH) -> Changes:
    """The data and delete files live in ``branch`` at ``to_version`` (default: the head) but not at
    ``from_version`` (added), and the reverse (removed). Net: a file added and removed in between is in neither;
    a rollback shows the files it took away as removed."""
    head = table.catalog.log.head(table.uuid)
    return _changes(table.catalog, table.uuid, from_version, head if to_version is None else to_version,
                    limit=head, name=".".join(table.identifier), branch=branch)
