"""Table and catalog state as immutable values: ``TableState = fold(events)``.

Layer: engine.state.table_state (pure; imports engine.model and engine.state.events only). One ``apply``
per event type folds a logged event into a new state. States serialize to JSON so that
checkpoints (derived, disposable) make loading a table cheap without replaying its whole
history.
"""

from __future__ import annotations

import json
from functools import singledispatch
from typing import Any, Iterable, Iterator, Mapping

import attrs

from engine.errors import ValidationError
from engine.state.events import (
    CurrentSchemaSet,
    DefaultSortOrderSet,
    DefaultSpecSet,
    Event,
    FormatVersionUpgraded,
    NamespaceCreated,
    NamespaceDropped,
    NamespacePropertiesUpdated,
    PropertiesRemoved,
    PropertiesSet,
    RefRemoved,
    RefSet,
    SchemaAdded,
    SnapshotAdded,
    SnapshotLogSet,
    SnapshotsRemoved,
    SortOrderAdded,
    SpecAdded,
    TableCreated,
    TableDropped,
    TableRegistered,
    TableRenamed,
)
from engine.model.data_file import DataFile
from engine.model.kept_values import KeptForObjects
from engine.model.partitioning import PartitionSpec
from engine.model.schema import Schema
from engine.model.sort_order import SortOrder
from engine.model.types import StructType

MAIN_BRANCH = "main"
#: the branch a REST snapshot is added on when no branch of the same commit points at it (removed in the same
#: commit): a name no ref of a user's may take
UNREFERENCED_BRANCH = "icelog-rest-unreferenced"


@attrs.frozen(kw_only=True)
class LogPosition:
    """Where an event sits in the log: the values a fold needs besides the event itself."""

    position: int
    version: int
    commit_id: str
    time_ms: int


@attrs.frozen(kw_only=True)
class Snapshot:
    """A snapshot as table metadata lists it, plus where the log recorded it."""

    snapshot_id: int
    parent_snapshot_id: int | None
    sequence_number: int
    timestamp_ms: int
    operation: str
    summary: tuple[tuple[str, str], ...]
    schema_id: int
    commit_id: str
    log_position: int
    log_version: int
    #: format version 3 row lineage: the first row id the snapshot could assign, and how many it assigned
    first_row_id: int | None = None
    added_rows: int | None = None
    #: a snapshot staged in a transaction, not in the log yet: the file changes its event carries (None for a
    #: snapshot the log recorded; never compared, never serialized)
    staged_changes: tuple[Any, ...] | None = attrs.field(default=None, eq=False, repr=False)

    @property
    def is_staged(self) -> bool:
        """Staged in a transaction: its files are in ``staged_changes``, not in the log."""
        return self.staged_changes is not None

    def summary_value(self, key: str, default: str | None = None) -> str | None:
        for k, v in self.summary:
            if k == key:
                return v
        return default


@attrs.frozen(kw_only=True)
class SnapshotRef:
    snapshot_id: int
    type: str = "branch"
    min_snapshots_to_keep: int | None = None
    max_snapshot_age_ms: int | None = None
    max_ref_age_ms: int | None = None


@attrs.frozen(kw_only=True)
class TableState:
    """Everything table metadata says about one table at one stream version."""

    table_uuid: str
    location: str
    format_version: int
    schemas: tuple[Schema, ...]
    current_schema_id: int
    last_column_id: int
    specs: tuple[PartitionSpec, ...]
    default_spec_id: int
    last_partition_id: int
    sort_orders: tuple[SortOrder, ...]
    default_sort_order_id: int
    properties: tuple[tuple[str, str], ...] = ()
    snapshots: tuple[Snapshot, ...] = ()
    expired_snapshots: tuple[Snapshot, ...] = ()
    refs: tuple[tuple[str, SnapshotRef], ...] = ()
    snapshot_log: tuple[tuple[int, int], ...] = ()
    metadata_log: tuple[tuple[int, int], ...] = ()
    last_sequence_number: int = 0
    last_updated_ms: int = 0
    version: int = 0
    commit_id: str = ""
    #: added to a stream version to name its metadata file: a table registered in place whose folder already
    #: holds the original writer's ``v<N>.metadata.json`` files publishes icelog's versions after them
    metadata_base: int = 0
    #: format version 3: the row id the next snapshot's first added row gets (None before v3)
    next_row_id: int | None = None

    # ------------------------------------------------------------ lookups
    def metadata_number(self, version: int | None = None) -> int:
        """The N of ``v<N>.metadata.json`` for a stream version (default: this state's)."""
        return (self.version if version is None else version) + self.metadata_base

    @property
    def schema(self) -> Schema:
        return self.schema_by_id(self.current_schema_id)

    def schema_by_id(self, schema_id: int) -> Schema:
        for s in self.schemas:
            if s.schema_id == schema_id:
                return s
        raise ValidationError(f"Cannot find schema: no schema with id {schema_id}")

    def partition_type_of(self, spec: PartitionSpec, schema: Schema | None = None) -> StructType:
        """A spec's partition struct, typed by ``schema`` (default: the current one), or when a source column is gone
        from it (an older spec, its column dropped since: Java keeps such specs) by the newest schema holding every
        source, as the files written under the spec typed their values.

        :raises ValidationError: no schema of the table holds every source column of the spec
        """
        try:
            return spec.partition_type(schema if schema is not None else self.schema)
        except ValidationError as first:
            for older in reversed(self.schemas):
                try:
                    return spec.partition_type(older)
                except ValidationError:
                    continue
            raise first

    @property
    def spec(self) -> PartitionSpec:
        return self.spec_by_id(self.default_spec_id)

    def spec_by_id(self, spec_id: int) -> PartitionSpec:
        for s in self.specs:
            if s.spec_id == spec_id:
                return s
        raise ValidationError(f"Cannot find partition spec: no spec with id {spec_id}")

    def partition_constants(self, data_file: DataFile) -> dict[int, Any]:
        """What a reader fills a column the data file does not have with, before its default: the file's identity
        partition values by source field id (spec "Column Projection", rule 1)."""
        return self.spec_by_id(data_file.spec_id).identity_values(data_file.partition)

    @property
    def sort_order(self) -> SortOrder:
        for o in self.sort_orders:
            if o.order_id == self.default_sort_order_id:
                return o
        raise ValidationError(f"Cannot find sort order: no order with id {self.default_sort_order_id}")

    def prop(self, key: str, default: str | None = None) -> str | None:
        for k, v in self.properties:
            if k == key:
                return v
        return default

    def int_property(self, key: str, default: int) -> int:
        """An integer property, or ``default`` when unset or not an integer: such a value is refused where it is
        set (engine.model.table_properties), and one that came in with a registered table's metadata must not stop
        every later fold, commit or publish of the table (the log cannot be rewritten)."""
        value = self.prop(key)
        if value is None:
            return default
        try:
            return int(value)
        except ValueError:
            return default

    def bool_property(self, key: str, default: bool) -> bool:
        value = self.prop(key)
        return default if value is None else value.strip().lower() == "true"

    def ref(self, name: str) -> SnapshotRef | None:
        for k, r in self.refs:
            if k == name:
                return r
        return None

    def branch_head(self, branch: str) -> int | None:
        """The snapshot a write to ``branch`` builds on: the ref's snapshot, or for a branch that does not exist yet
        main's, so a new branch starts from the current snapshot (Java's ``SnapshotUtil.latestSnapshot``)."""
        ref = self.ref(branch)
        if ref is None:
            ref = self.ref(MAIN_BRANCH)
        return ref.snapshot_id if ref is not None else None

    def snapshot_by_id(self, snapshot_id: int) -> Snapshot | None:
        for s in reversed(self.snapshots):
            if s.snapshot_id == snapshot_id:
                return s
        return None

    def logged_snapshot(self, snapshot_id: int) -> Snapshot | None:
        """A snapshot the log holds, live or expired since (an expiry removes it from the metadata, not from the
        log: its sequence number is still known)."""
        found = self.snapshot_by_id(snapshot_id)
        if found is None:
            found = next((s for s in reversed(self.expired_snapshots) if s.snapshot_id == snapshot_id), None)
        return found

    @property
    def current_snapshot(self) -> Snapshot | None:
        main = self.ref(MAIN_BRANCH)
        return None if main is None else self.snapshot_by_id(main.snapshot_id)

    def ancestors(self, snapshot_id: int | None, *, through_expired: bool = False) -> list[Snapshot]:
        """The snapshot and its ancestors, newest first (stops where expired history ends, unless
        ``through_expired``: the files live in a snapshot still come from its expired ancestors)."""
        return list(self.iter_ancestors(snapshot_id, through_expired=through_expired))

    def iter_ancestors(self, snapshot_id: int | None, *, through_expired: bool = False) -> Iterator[Snapshot]:
        """:meth:`ancestors` one at a time, for a caller that stops at the first it looks for: a snapshot is added
        after its parent, so each parent is found looking back from its child, in the time the walk takes rather
        than the history's; a parent found nowhere before its child (an expired one, or a history imported out of
        order) is looked up by id once the walk gets there."""
        snaps = self.snapshots
        position = len(snaps)
        while snapshot_id is not None:
            i = position - 1
            while i >= 0 and snaps[i].snapshot_id != snapshot_id:
                i -= 1
            if i < 0:
                break
            position = i
            yield snaps[i]
            snapshot_id = snaps[i].parent_snapshot_id
        if snapshot_id is None:
            return
        by_id = {s.snapshot_id: s for s in snaps}
        if through_expired:
            by_id.update((s.snapshot_id, s) for s in self.expired_snapshots)
        walked = 0
        while snapshot_id is not None and snapshot_id in by_id and walked <= len(by_id):
            snap = by_id[snapshot_id]
            walked += 1
            yield snap
            snapshot_id = snap.parent_snapshot_id


@attrs.frozen(kw_only=True)
class TableEntry:
    namespace: tuple[str, ...]
    name: str
    table_uuid: str


@attrs.frozen(kw_only=True)
class CatalogState:
    """Namespaces and the table names that point at table streams."""

    namespaces: tuple[tuple[tuple[str, ...], tuple[tuple[str, str], ...]], ...] = ()
    tables: tuple[TableEntry, ...] = ()
    version: int = 0

    def has_namespace(self, namespace: tuple[str, ...]) -> bool:
        return any(ns == namespace for ns, _ in self.namespaces)

    def namespace_properties(self, namespace: tuple[str, ...]) -> dict[str, str] | None:
        """The namespace's properties, or None when it does not exist."""
        for ns, props in self.namespaces:
            if ns == namespace:
                return dict(props)
        return None

    def table(self, namespace: tuple[str, ...], name: str) -> TableEntry | None:
        for t in self.tables:
            if t.namespace == namespace and t.name == name:
                return t
        return None

    def entry_of(self, table_uuid: str) -> TableEntry | None:
        """The table the catalog names with this uuid now; None when it names it no more (dropped)."""
        return next((t for t in self.tables if t.table_uuid == table_uuid), None)


# ---------------------------------------------------------------- folding table events


@singledispatch
def apply(event: Event, state: Any, at: LogPosition) -> Any:
    raise ValidationError(f"Cannot apply event: no rule for {type(event).__name__} on {type(state).__name__}")


def _committed(state: TableState, at: LogPosition, **changes: Any) -> TableState:
    """``state`` with ``changes`` and the start of a new commit (the previous metadata version goes to the metadata
    log), in one copy: a fold makes one per event."""
    if state.commit_id == at.commit_id or state.version == 0:
        return attrs.evolve(state, version=at.version, commit_id=at.commit_id, last_updated_ms=at.time_ms, **changes)
    keep = max(0, state.int_property("write.metadata.previous-versions-max", 100))
    log = (state.metadata_log + ((state.last_updated_ms, state.version),))[-keep:] if keep else ()
    return attrs.evolve(state, metadata_log=log, version=at.version, commit_id=at.commit_id,
                        last_updated_ms=at.time_ms, **changes)


@apply.register
def _(event: TableCreated, state: None, at: LogPosition) -> TableState:
    if state is not None:
        raise ValidationError(f"Cannot create table {event.table_uuid}: the stream already holds a table")
    return TableState(
        table_uuid=event.table_uuid, location=event.location, format_version=event.format_version,
        schemas=(event.schema,), current_schema_id=event.schema.schema_id,
        last_column_id=event.schema.highest_field_id, specs=(event.spec,), default_spec_id=event.spec.spec_id,
        last_partition_id=max([f.field_id for f in event.spec.fields], default=999),
        sort_orders=(event.sort_order,), default_sort_order_id=event.sort_order.order_id,
        properties=event.properties, version=at.version, commit_id=at.commit_id, last_updated_ms=at.time_ms,
        metadata_base=event.metadata_base,
        next_row_id=(event.next_row_id or 0) if event.format_version >= 3 else None,
    )


@apply.register
def _(event: PropertiesSet, state: TableState, at: LogPosition) -> TableState:
    props = dict(state.properties)
    props.update(event.updates)
    return _committed(state, at, properties=tuple(sorted(props.items())))


@apply.register
def _(event: PropertiesRemoved, state: TableState, at: LogPosition) -> TableState:
    removed = set(event.removals)
    return _committed(state, at, properties=tuple((k, v) for k, v in state.properties if k not in removed))


@apply.register
def _(event: SnapshotAdded, state: TableState, at: LogPosition) -> TableState:
    snap = Snapshot(snapshot_id=event.snapshot_id, parent_snapshot_id=event.parent_snapshot_id,
                    sequence_number=event.sequence_number, timestamp_ms=event.timestamp_ms,
                    operation=event.operation, summary=event.summary, schema_id=event.schema_id,
                    commit_id=at.commit_id, log_position=at.position, log_version=at.version,
                    first_row_id=event.first_row_id, added_rows=event.added_rows)
    next_row_id = state.next_row_id
    if event.first_row_id is not None:
        next_row_id = max(next_row_id or 0, event.first_row_id + (event.added_rows or 0))
    refs = dict(state.refs)
    old = refs.get(event.branch)
    refs[event.branch] = attrs.evolve(old, snapshot_id=event.snapshot_id) if old else SnapshotRef(
        snapshot_id=event.snapshot_id)
    snapshot_log = state.snapshot_log
    if event.branch == MAIN_BRANCH:
        snapshot_log = snapshot_log + ((event.timestamp_ms, event.snapshot_id),)
    return _committed(state, at, snapshots=state.snapshots + (snap,), refs=tuple(sorted(refs.items())),
                      snapshot_log=snapshot_log, next_row_id=next_row_id,
                      last_sequence_number=max(state.last_sequence_number, event.sequence_number))


@apply.register
def _(event: SchemaAdded, state: TableState, at: LogPosition) -> TableState:
    if any(s.schema_id == event.schema.schema_id for s in state.schemas):
        raise ValidationError(f"Cannot add schema: schema id {event.schema.schema_id} already exists")
    return _committed(state, at, schemas=state.schemas + (event.schema,),
                      last_column_id=max(state.last_column_id, event.last_column_id))


@apply.register
def _(event: CurrentSchemaSet, state: TableState, at: LogPosition) -> TableState:
    state.schema_by_id(event.schema_id)
    return _committed(state, at, current_schema_id=event.schema_id)


@apply.register
def _(event: SpecAdded, state: TableState, at: LogPosition) -> TableState:
    if any(s.spec_id == event.spec.spec_id for s in state.specs):
        raise ValidationError(f"Cannot add partition spec: spec id {event.spec.spec_id} already exists")
    last = max([state.last_partition_id] + [f.field_id for f in event.spec.fields])
    return _committed(state, at, specs=state.specs + (event.spec,), last_partition_id=last)


@apply.register
def _(event: DefaultSpecSet, state: TableState, at: LogPosition) -> TableState:
    state.spec_by_id(event.spec_id)
    return _committed(state, at, default_spec_id=event.spec_id)


@apply.register
def _(event: SortOrderAdded, state: TableState, at: LogPosition) -> TableState:
    if any(o.order_id == event.sort_order.order_id for o in state.sort_orders):
        raise ValidationError(f"Cannot add sort order: order id {event.sort_order.order_id} already exists")
    return _committed(state, at, sort_orders=state.sort_orders + (event.sort_order,))


@apply.register
def _(event: DefaultSortOrderSet, state: TableState, at: LogPosition) -> TableState:
    if not any(o.order_id == event.sort_order_id for o in state.sort_orders):
        raise ValidationError(f"Cannot set default sort order: no order with id {event.sort_order_id}")
    return _committed(state, at, default_sort_order_id=event.sort_order_id)


@apply.register
def _(event: FormatVersionUpgraded, state: TableState, at: LogPosition) -> TableState:
    if event.format_version < state.format_version:
        raise ValidationError(f"Cannot downgrade format version from {state.format_version} to "
                              f"{event.format_version}")
    next_row_id = state.next_row_id
    if event.format_version >= 3 and next_row_id is None:
        next_row_id = 0  # rows written before v3 have no row ids; the next commit assigns them (spec: upgrade)
    return _committed(state, at, format_version=event.format_version, next_row_id=next_row_id)


@apply.register
def _(event: RefSet, state: TableState, at: LogPosition) -> TableState:
    if state.snapshot_by_id(event.snapshot_id) is None:
        raise ValidationError(f"Cannot set ref {event.name}: snapshot {event.snapshot_id} does not exist")
    refs = dict(state.refs)
    refs[event.name] = SnapshotRef(snapshot_id=event.snapshot_id, type=event.ref_type,
                                   min_snapshots_to_keep=event.min_snapshots_to_keep,
                                   max_snapshot_age_ms=event.max_snapshot_age_ms, max_ref_age_ms=event.max_ref_age_ms)
    snapshot_log = state.snapshot_log
    if event.name == MAIN_BRANCH:
        snapshot_log = snapshot_log + ((at.time_ms, event.snapshot_id),)
    return _committed(state, at, refs=tuple(sorted(refs.items())), snapshot_log=snapshot_log)


@apply.register
def _(event: SnapshotLogSet, state: TableState, at: LogPosition) -> TableState:
    return _committed(state, at, snapshot_log=event.entries)


@apply.register
def _(event: RefRemoved, state: TableState, at: LogPosition) -> TableState:
    return _committed(state, at, refs=tuple((k, r) for k, r in state.refs if k != event.name))


@apply.register
def _(event: SnapshotsRemoved, state: TableState, at: LogPosition) -> TableState:
    gone = set(event.snapshot_ids)
    snapshot_log: list[tuple[int, int]] = []
    for entry in state.snapshot_log:  # the spec: an expired snapshot's entry takes every entry before it along
        if entry[1] in gone:
            snapshot_log.clear()
        else:
            snapshot_log.append(entry)
    return _committed(state, at, snapshots=tuple(s for s in state.snapshots if s.snapshot_id not in gone),
                      expired_snapshots=state.expired_snapshots + tuple(
                          s for s in state.snapshots if s.snapshot_id in gone),
                      snapshot_log=tuple(snapshot_log))


def fold(events: Iterable[tuple[Event, LogPosition]], state: TableState | None = None) -> TableState | None:
    """Fold table events, oldest first, onto ``state`` (None for a new stream)."""
    for event, at in events:
        state = apply(event, state, at)
    return state


# ---------------------------------------------------------------- folding catalog events


@apply.register
def _(event: NamespaceCreated, state: CatalogState, at: LogPosition) -> CatalogState:
    return attrs.evolve(state, namespaces=state.namespaces + ((event.namespace, event.properties),),
                        version=at.version)


@apply.register
def _(event: NamespaceDropped, state: CatalogState, at: LogPosition) -> CatalogState:
    if any(t.namespace == event.namespace for t in state.tables):
        raise ValidationError(f"Cannot drop namespace {'.'.join(event.namespace)}: it still holds tables")
    return attrs.evolve(state, namespaces=tuple(n for n in state.namespaces if n[0] != event.namespace),
                        version=at.version)


@apply.register
def _(event: NamespacePropertiesUpdated, state: CatalogState, at: LogPosition) -> CatalogState:
    removed = set(event.removals)

    def updated(props: tuple[tuple[str, str], ...]) -> tuple[tuple[str, str], ...]:
        merged = {k: v for k, v in props if k not in removed}
        merged.update(event.updates)
        return tuple(sorted(merged.items()))

    return attrs.evolve(state, namespaces=tuple((ns, updated(props)) if ns == event.namespace else (ns, props)
                                                for ns, props in state.namespaces), version=at.version)


@apply.register
def _(event: TableRegistered, state: CatalogState, at: LogPosition) -> CatalogState:
    entry = TableEntry(namespace=event.namespace, name=event.name, table_uuid=event.table_uuid)
    return attrs.evolve(state, tables=state.tables + (entry,), version=at.version)


@apply.register
def _(event: TableRenamed, state: CatalogState, at: LogPosition) -> CatalogState:
    tables = tuple(TableEntry(namespace=event.new_namespace, name=event.new_name, table_uuid=t.table_uuid)
                   if t.table_uuid == event.table_uuid else t for t in state.tables)
    return attrs.evolve(state, tables=tables, version=at.version)


@apply.register
def _(event: TableDropped, state: CatalogState, at: LogPosition) -> CatalogState:
    return attrs.evolve(state, tables=tuple(t for t in state.tables if t.table_uuid != event.table_uuid),
                        version=at.version)


# ---------------------------------------------------------------- checkpoint codec


def state_to_json(state: TableState, *, with_snapshots: bool = True) -> dict[str, Any]:
    """A lossless JSON form of a table state, for checkpoints (:func:`state_json_text` is its text).

    :param with_snapshots: False leaves out the snapshots and the expired snapshots (the text adds them)
    """
    obj = {
        "table-uuid": state.table_uuid, "location": state.location, "format-version": state.format_version,
        "schemas": [s.to_json() for s in state.schemas], "current-schema-id": state.current_schema_id,
        "last-column-id": state.last_column_id, "specs": [s.to_json() for s in state.specs],
        "default-spec-id": state.default_spec_id, "last-partition-id": state.last_partition_id,
        "sort-orders": [o.to_json() for o in state.sort_orders], "default-sort-order-id": state.default_sort_order_id,
        "properties": [list(p) for p in state.properties],
        "refs": [[name, attrs.asdict(r)] for name, r in state.refs],
        "snapshot-log": [list(e) for e in state.snapshot_log],
        "metadata-log": [list(e) for e in state.metadata_log],
        "last-sequence-number": state.last_sequence_number, "last-updated-ms": state.last_updated_ms,
        "version": state.version, "commit-id": state.commit_id, "metadata-base": state.metadata_base,
        "next-row-id": state.next_row_id,
    }
    if with_snapshots:
        obj["snapshots"] = [_snapshot_to_json(s) for s in state.snapshots]
        obj["expired-snapshots"] = [_snapshot_to_json(s) for s in state.expired_snapshots]
    return obj


def state_json_text(state: TableState) -> str:
    """``state_to_json(state)`` as compact JSON text (what a checkpoint stores), each snapshot's JSON encoded once
    per process: a snapshot never changes, and the states of one table share their snapshot objects, so a
    checkpoint encodes only the snapshots since the last one (the whole history is still joined, not encoded)."""
    obj = state_to_json(state, with_snapshots=False)
    head = json.dumps(obj, separators=(",", ":"))
    return "".join((head[:-1], ',"snapshots":[', ",".join(map(_snapshot_json_text, state.snapshots)),
                    '],"expired-snapshots":[', ",".join(map(_snapshot_json_text, state.expired_snapshots)), "]}"))


#: recently encoded snapshots' JSON text, for each very object (comparing snapshots would cost more than encoding
#: them); once full, the oldest encoded goes first (a table of more snapshots than this encodes them all at each
#: checkpoint)
_SNAPSHOT_TEXTS: KeptForObjects[str] = KeptForObjects(20_000)


def _snapshot_json_text(s: Snapshot) -> str:
    return _SNAPSHOT_TEXTS.get_or_make(s, lambda: json.dumps(_snapshot_to_json(s), separators=(",", ":")))


def state_from_json(obj: Mapping[str, Any]) -> TableState:
    return TableState(
        table_uuid=obj["table-uuid"], location=obj["location"], format_version=obj["format-version"],
        schemas=tuple(Schema.from_json(s) for s in obj["schemas"]), current_schema_id=obj["current-schema-id"],
        last_column_id=obj["last-column-id"], specs=tuple(PartitionSpec.from_json(s) for s in obj["specs"]),
        default_spec_id=obj["default-spec-id"], last_partition_id=obj["last-partition-id"],
        sort_orders=tuple(SortOrder.from_json(o) for o in obj["sort-orders"]),
        default_sort_order_id=obj["default-sort-order-id"],
        properties=tuple((k, v) for k, v in obj["properties"]),
        snapshots=tuple(_snapshot_from_json(s) for s in obj["snapshots"]),
        refs=tuple((name, SnapshotRef(**r)) for name, r in obj["refs"]),
        expired_snapshots=tuple(_snapshot_from_json(s) for s in obj.get("expired-snapshots", ())),
        snapshot_log=tuple((a, b) for a, b in obj["snapshot-log"]),
        metadata_log=tuple((a, b) for a, b in obj["metadata-log"]),
        last_sequence_number=obj["last-sequence-number"], last_updated_ms=obj["last-updated-ms"],
        version=obj["version"], commit_id=obj["commit-id"], metadata_base=obj.get("metadata-base", 0),
        next_row_id=obj.get("next-row-id"),
    )


def _snapshot_to_json(s: Snapshot) -> list[Any]:
    out = [s.snapshot_id, s.parent_snapshot_id, s.sequence_number, s.timestamp_ms, s.operation,
           [list(p) for p in s.summary], s.schema_id, s.commit_id, s.log_position, s.log_version]
    if s.first_row_id is not None:
        out += [s.first_row_id, s.added_rows]
    return out


def _snapshot_from_json(s: list[Any]) -> Snapshot:
    return Snapshot(snapshot_id=s[0], parent_snapshot_id=s[1], sequence_number=s[2], timestamp_ms=s[3], operation=s[4],
                    summary=tuple((k, v) for k, v in s[5]), schema_id=s[6], commit_id=s[7], log_position=s[8],
                    log_version=s[9], first_row_id=s[10] if len(s) > 10 else None,
                    added_rows=s[11] if len(s) > 11 else None)


class TableStateReads:
    """PyIceberg's read accessors of a table (``schema()``, ``spec()``, ``properties``, ``snapshots()``, ...),
    answered from ``self.state``; shared by the live table handle and the read-only historical view."""

    state: TableState

    def schema(self) -> Schema:
        return self.state.schema

    def spec(self) -> PartitionSpec:
        return self.state.spec

    def sort_order(self) -> SortOrder:
        return self.state.sort_order

    @property
    def properties(self) -> dict[str, str]:
        return dict(self.state.properties)

    @property
    def location(self) -> str:
        return self.state.location

    def snapshots(self) -> list[Snapshot]:
        return list(self.state.snapshots)

    def current_snapshot(self) -> Snapshot | None:
        return self.state.current_snapshot

    def snapshot_by_id(self, snapshot_id: int) -> Snapshot | None:
        return self.state.snapshot_by_id(snapshot_id)

    def refs(self) -> dict[str, SnapshotRef]:
        return dict(self.state.refs)

    def history(self) -> list[tuple[int, int]]:
        """The snapshot log, as PyIceberg's ``history()``: ``(timestamp_ms, snapshot_id)`` of main, oldest first."""
        return list(self.state.snapshot_log)
