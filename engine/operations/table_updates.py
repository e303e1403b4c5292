"""Iceberg REST commits as icelog events: a ``requirements`` + ``updates`` list checked and applied on a base state.

Layer: engine.operations (pure: the event building runs inside the log's write transaction; what the client wrote
was read before, by engine.operations.client_files).

A REST client (Spark's ``RESTSessionCatalog``, PyIceberg's ``RestCatalog``) commits a table change as JSON: the
requirements its base must still meet (``assert-ref-snapshot-id``, ...) and the metadata updates to apply
(``add-snapshot``, ``set-snapshot-ref``, ``add-schema``, ...). They become the log's typed events in three steps:

- ``parse_table_commit`` (engine.operations.table_commit) checks the JSON's shape (``ValidationError`` naming the
  culprit: HTTP 400);
- ``load_client_snapshots`` (engine.operations.client_files) reads, before the commit, what the client wrote for
  each ``add-snapshot``: its manifest list and the manifests that are not icelog's own;
- :func:`commit_events`, here, checks the requirements against the base (``RequirementFailed``: HTTP 409, the
  client reloads and retries; a pure append whose branch head moved on is rebased onto it instead,
  ``client_files.rebase_append``) and builds the events, updating a running state so ``-1`` ("the last one
  added") and later updates see earlier ones. A staged create (``assert-create`` + the full table definition)
  becomes a ``TableCreated`` followed by the rest of the updates. :func:`upgrade_events` is the format-version
  upgrade the Python API shares.

Decisions: ``set-statistics`` / ``set-partition-statistics`` are refused (icelog keeps no statistics files);
``remove-statistics`` / ``remove-partition-statistics`` are no-ops (there is nothing to remove);
``remove-partition-specs`` / ``remove-schemas`` are refused; ``set-location`` may not move an existing table;
``assign-uuid`` may not change an existing table's uuid; a snapshot whose sequence number is not above the table's
last one, or whose parent is gone, failed a requirement in effect (409, so the client retries on the new base).
"""

from __future__ import annotations

import functools
from typing import Any, Callable, Mapping, Sequence

import attrs

from engine.errors import RequirementFailed, ValidationError
from engine.state.events import (
    CurrentSchemaSet,
    DefaultSortOrderSet,
    DefaultSpecSet,
    Event,
    FileChange,
    FormatVersionUpgraded,
    PropertiesRemoved,
    PropertiesSet,
    RefRemoved,
    RefSet,
    SchemaAdded,
    SnapshotAdded,
    SnapshotsRemoved,
    SortOrderAdded,
    SpecAdded,
    TableCreated,
)
from engine.model.data_file import DataFile
from engine.model.partitioning import PARTITION_DATA_ID_START, UNPARTITIONED_SPEC, PartitionSpec, check_spec_binds
from engine.model.schema import Schema, check_lineage_names, check_schema_for_format
from engine.model.sort_order import UNSORTED_ORDER, SortOrder
from engine.model.table_properties import check_property_values
from engine.model.types import is_long
from engine.operations.client_files import ClientSnapshot, LiveFilesOf, client_file_changes, rebase_append
from engine.operations.commit import CommitContext, apply_in_commit
from engine.operations.schema_changes import is_promotion
from engine.operations.snapshot import row_id_backfill_events
from engine.operations.table_commit import TableCommit, check_requirements, need_field
from engine.state.table_state import MAIN_BRANCH, UNREFERENCED_BRANCH, SnapshotRef, TableState

SUPPORTED_FORMAT_VERSIONS = (1, 2, 3)
#: the reserved table property that names the format version (Java's TableProperties.FORMAT_VERSION)
FORMAT_VERSION_PROPERTY = "format-version"


# ---------------------------------------------------------------- updates


class _Running:
    """The state the updates so far lead to, and the events that lead there."""

    def __init__(self, state: TableState, ctx: CommitContext) -> None:
        self.state = state
        self.ctx = ctx
        self.events: list[Event] = []
        self.last_schema_id: int | None = None
        self.last_spec_id: int | None = None
        self.last_order_id: int | None = None
        #: files live in the snapshots this commit adds (their parents may be earlier snapshots of the same commit,
        #: which the log's file index does not know yet)
        self.live: dict[int, Callable[[], Mapping[str, DataFile]]] = {}
        #: a rebased append's snapshot id -> the files it adds (found against the snapshot the client built on)
        self.rebased: dict[int, tuple[FileChange, ...]] = {}
        #: an upgrade to v3 whose row-id labelling waits for the snapshots the commit adds after it
        self.label_rows_at_end = False

    def add(self, event: Event) -> None:
        self.state = apply_in_commit(event, self.state, self.ctx)
        self.events.append(event)


#: the retention fields of a ref (Java's SnapshotRef)
REF_RETENTION = ("min-snapshots-to-keep", "max-snapshot-age-ms", "max-ref-age-ms")
#: a snapshot summary's operations (the spec's; readers such as PyIceberg refuse any other)
SNAPSHOT_OPERATIONS = ("append", "replace", "overwrite", "delete")


def format_version_of(text: str) -> int | str:
    """The format version a ``format-version`` property names (the text itself when it is not a number, for the
    refusal to name)."""
    return int(text) if text.strip().isdigit() else text


def _schema_of(update: Mapping[str, Any], format_version: int) -> Schema:
    try:
        schema = Schema.from_json(need_field(update, "schema", dict, "add-schema"))
    except (KeyError, TypeError, ValueError) as e:
        raise ValidationError(f"Cannot apply add-schema: the schema cannot be read: {e}") from e
    check_schema_for_format(schema, format_version, "add-schema")
    return schema


def _check_spec(spec: PartitionSpec, schema: Schema, format_version: int) -> None:
    """The spec binds to the schema as Java binds a client's (:func:`check_spec_binds`); in v1 its field ids run on
    from 1000, as v1 requires."""
    check_spec_binds(spec, schema)
    if format_version == 1 and any(f.field_id != PARTITION_DATA_ID_START + i for i, f in enumerate(spec.fields)):
        raise ValidationError(f"Cannot add partition spec: a format version 1 table needs sequential field ids "
                              f"from {PARTITION_DATA_ID_START}, got {[f.field_id for f in spec.fields]}")


def _check_order(order: SortOrder, schema: Schema) -> None:
    """Every sort field names a column of the schema and its transform applies to it."""
    ids = schema.index_by_id()
    for f in order.fields:
        source = ids.get(f.source_id)
        if source is None:
            raise ValidationError(f"Cannot add sort order: source column id {f.source_id} is not in the schema")
        if not f.transform.can_transform(source.field_type):
            raise ValidationError(f"Cannot add sort order: {f.transform} cannot apply to column "
                                  f"{schema.find_column_name(f.source_id)!r} of type {source.field_type}")


def _may_hold_rows(snapshot: Any) -> bool:
    """Whether a snapshot may hold rows: its summary counts some, or counts none at all (another engine's)."""
    total = snapshot.summary_value("total-records")
    try:
        return total is None or int(total) > 0
    except ValueError:
        return True


def _check_schema_change(state: TableState, new: Schema) -> None:
    """A new schema keeps every existing field readable, as Iceberg's schema evolution does: a type changes only
    by promotion, an optional field stays optional, and a new required field needs a table without rows."""
    old_fields = state.schema.index_by_id()
    has_rows = any(_may_hold_rows(s) for s in state.snapshots)
    for field_id, field in new.index_by_id().items():
        name = new.find_column_name(field_id)
        old = old_fields.get(field_id)
        if old is None:
            if field.required and has_rows:
                raise ValidationError(f"Cannot add schema: new column {name!r} is required, but the table already "
                                      f"has rows without it")
            continue
        old_type, new_type = old.field_type, field.field_type
        if old_type.is_primitive != new_type.is_primitive or (
                old_type.is_primitive and not is_promotion(old_type, new_type)) or (
                not old_type.is_primitive and type(old_type) is not type(new_type)):
            raise ValidationError(f"Cannot add schema: column {name!r} cannot change from {old_type} to {new_type} "
                                  f"(only int -> long, float -> double and wider decimals)")
        if field.required and not old.required:
            raise ValidationError(f"Cannot add schema: column {name!r} cannot become required (existing rows may "
                                  f"hold nulls)")


def _same_schema(a: Schema, b: Schema) -> bool:
    return a.fields == b.fields and a.identifier_field_ids == b.identifier_field_ids


def _spec_of(update: Mapping[str, Any]) -> PartitionSpec:
    obj = dict(need_field(update, "spec", dict, "add-spec"))
    obj.setdefault("spec-id", 0)
    return PartitionSpec.from_json(obj)


def _order_of(update: Mapping[str, Any]) -> SortOrder:
    obj = dict(need_field(update, "sort-order", dict, "add-sort-order"))
    if not obj.get("fields"):
        return UNSORTED_ORDER
    order_id = obj.get("order-id")
    if order_id is not None and not is_long(order_id):
        raise ValidationError(f"Cannot apply add-sort-order: order-id must be an integer, got {order_id!r}")
    obj["order-id"] = max(1, order_id or 1)
    return SortOrder.from_json(obj)


def _new_table(updates: Sequence[Mapping[str, Any]], default_location: str, default_uuid: str
               ) -> tuple[TableCreated, list[Mapping[str, Any]]]:
    """The TableCreated a create commit's definition updates make, and the updates left to apply after it."""
    table_uuid = None
    fmt = 2
    schema: Schema | None = None
    spec: PartitionSpec | None = None
    order: SortOrder | None = None
    location = default_location
    props: dict[str, str] = {}
    rest: list[Mapping[str, Any]] = []
    for u in updates:
        action = u["action"]
        if action == "assign-uuid" and table_uuid is None:
            table_uuid = str(need_field(u, "uuid", str, action))
        elif action == "upgrade-format-version":
            fmt = need_field(u, "format-version", int, action)
        elif action == "add-schema" and schema is None:
            schema = attrs.evolve(_schema_of(u, fmt), schema_id=0)
        elif action == "add-spec" and spec is None:
            spec = attrs.evolve(_spec_of(u), spec_id=0)
        elif action == "add-sort-order" and order is None:
            order = _order_of(u)
        elif action == "set-location":
            location = str(need_field(u, "location", str, action)).rstrip("/")
        elif action == "set-properties":
            props.update({str(k): str(v) for k, v in need_field(u, "updates", dict, action).items()})
            check_property_values(props, location or default_location)
        elif action == "remove-properties":
            for k in need_field(u, "removals", list, action):
                props.pop(str(k), None)
        elif action in ("set-current-schema", "set-default-spec", "set-default-sort-order") and \
                u.get({"set-current-schema": "schema-id", "set-default-spec": "spec-id",
                       "set-default-sort-order": "sort-order-id"}[action]) in (-1, 0):
            continue  # the definition's own schema, spec and order are the defaults
        else:
            rest.append(u)
    if schema is None:
        raise ValidationError("Cannot create table: the commit has no add-schema update")
    if fmt not in SUPPORTED_FORMAT_VERSIONS:
        raise ValidationError(f"Cannot create table: format version {fmt} is not supported (1, 2 or 3)")
    spec = spec or UNPARTITIONED_SPEC
    _check_spec(spec, schema, fmt)
    _check_order(order or UNSORTED_ORDER, schema)
    created = TableCreated(table_uuid=table_uuid or default_uuid, location=location, format_version=fmt,
                           schema=schema, spec=spec, sort_order=order or UNSORTED_ORDER, properties=props)
    return created, rest


#: table property: "false" answers 409 to an append built on a moved branch head instead of rebasing it, for tables
#: whose REST clients append after reading (an upsert that matched no row): the request cannot say what was read
REBASE_APPENDS = "icelog.rest.rebase-appends"


def commit_events(base: TableState | None, commit: TableCommit, ctx: CommitContext, *,
                  client_snapshots: Mapping[int, ClientSnapshot],
                  live_entries: Callable[[TableState, int | None], Sequence[Any]],
                  live_files: LiveFilesOf, stream: str, default_location: str = "",
                  rebase_appends: bool = True) -> list[Event]:
    """The events of ``commit`` on ``base`` (None: the table does not exist yet and the commit creates it).

    :param client_snapshots: what :func:`load_client_snapshots` read for the commit's snapshots
    :param live_entries: the files live in a snapshot of a state (``StateStore.live_entries``)
    :param live_files: the same files by ``DataFile.key`` (``StateStore.live_files_by_key``, which decodes only
        the files looked up)
    :param stream: the table's stream id (a created table's uuid when the commit assigns none)
    :param default_location: the location of a created table when the commit sets none
    :param rebase_appends: an append built on a branch head that has moved since is rebased onto the head
        (:func:`rebase_append`), unless the table's :data:`REBASE_APPENDS` property says false; False for a client
        that retries by itself with validations of its own the request does not carry (Iceberg Java's)
    :raises RequirementFailed: a requirement does not hold (or a snapshot was built on a stale base)
    :raises ValidationError: an update that is invalid on the table
    """
    rebased: dict[int, tuple[FileChange, ...]] = {}
    try:
        check_requirements(base, commit, stream)
    except RequirementFailed:
        found = None
        if rebase_appends and base is not None and base.bool_property(REBASE_APPENDS, True):
            found = rebase_append(base, commit, client_snapshots, live_files, stream, time_ms=ctx.time_ms)
        if found is None:
            raise
        commit, moved = found
        rebased = {moved.snapshot_id: moved.changes}
    updates = list(commit.updates)
    prefix: list[Event] = []
    if base is None:
        if not commit.creates:
            raise ValidationError("Cannot commit: the table does not exist and the commit has no assert-create")
        created, updates = _new_table(updates, default_location, stream)
        if created.table_uuid != stream:
            raise ValidationError(f"Cannot create table: assign-uuid {created.table_uuid} is not the staged uuid "
                                  f"{stream}")
        base = apply_in_commit(created, None, ctx)
        prefix = [created]
    run = _Running(base, ctx)
    run.rebased = rebased
    run.events = prefix
    if prefix:
        run.last_schema_id, run.last_spec_id, run.last_order_id = 0, 0, base.default_sort_order_id
    updates = _merged_removals(updates)
    for i, u in enumerate(updates):
        _apply_update(run, u, updates[i + 1:], client_snapshots, live_entries, live_files, stream)
    _check_default_spec(run.state)
    if run.label_rows_at_end:
        for event in row_id_backfill_events(run.state, run.ctx, live_entries, unlabelled_files=True):
            run.add(event)
    return run.events


def _merged_removals(updates: list[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """Consecutive ``remove-snapshots`` updates (Java sends one per expired snapshot) as one."""
    out: list[Mapping[str, Any]] = []
    for u in updates:
        if u["action"] == "remove-snapshots" and out and out[-1]["action"] == "remove-snapshots":
            ids = need_field(u, "snapshot-ids", list, "remove-snapshots")
            out[-1] = {"action": "remove-snapshots",
                       "snapshot-ids": list(need_field(out[-1], "snapshot-ids", list, "remove-snapshots")) + ids}
        else:
            out.append(u)
    return out


def _apply_update(run: _Running, u: Mapping[str, Any], later: Sequence[Mapping[str, Any]],
                  client_snapshots: Mapping[int, ClientSnapshot],
                  live_entries: Callable[[TableState, int | None], Sequence[Any]], live_files: LiveFilesOf,
                  stream: str) -> None:
    state = run.state
    action = u["action"]
    if action == "assign-uuid":
        if need_field(u, "uuid", str, action) != state.table_uuid:
            raise ValidationError(f"Cannot assign uuid {u['uuid']}: table {state.table_uuid} keeps its uuid")
    elif action == "upgrade-format-version":
        fmt = need_field(u, "format-version", int, action)
        if fmt == 3 and state.format_version < 3 and any(v["action"] == "add-snapshot" for v in later):
            # a client's snapshot after the upgrade takes the next sequence number and next-row-id 0 (Java's
            # builder adds no snapshot of its own): the files it leaves without row ids are labelled at the end
            run.label_rows_at_end = True
            for event in upgrade_events(state, fmt, run.ctx, live_entries, label_rows=False):
                run.add(event)
        else:
            for event in upgrade_events(state, fmt, run.ctx, live_entries):
                run.add(event)
    elif action == "add-schema":
        schema = _schema_of(u, state.format_version)
        for s in state.schemas:
            if _same_schema(s, schema):
                run.last_schema_id = s.schema_id
                return
        _check_schema_change(state, schema)
        new_id = max(s.schema_id for s in state.schemas) + 1
        last = max(state.last_column_id, schema.highest_field_id, u.get("last-column-id") or 0)
        run.add(SchemaAdded(schema=attrs.evolve(schema, schema_id=new_id), last_column_id=last))
        run.last_schema_id = new_id
    elif action == "set-current-schema":
        sid = _last_or(run.last_schema_id, need_field(u, "schema-id", int, action), "schema")
        state.schema_by_id(sid)  # the default spec is checked against it once the commit's updates are applied
        if sid != state.current_schema_id:
            run.add(CurrentSchemaSet(schema_id=sid))
    elif action == "add-spec":
        spec = _spec_of(u)
        _check_spec(spec, state.schema, state.format_version)
        for s in state.specs:
            if s.compatible_with(spec):
                run.last_spec_id = s.spec_id
                return
        new_id = max(s.spec_id for s in state.specs) + 1
        run.add(SpecAdded(spec=attrs.evolve(spec, spec_id=new_id)))
        run.last_spec_id = new_id
    elif action == "set-default-spec":
        sid = _last_or(run.last_spec_id, need_field(u, "spec-id", int, action), "partition spec")
        state.spec_by_id(sid)
        if sid != state.default_spec_id:
            run.add(DefaultSpecSet(spec_id=sid))
    elif action == "add-sort-order":
        order = _order_of(u)
        _check_order(order, state.schema)
        for o in state.sort_orders:
            if o.fields == order.fields:
                run.last_order_id = o.order_id
                return
        new_id = 0 if order.is_unsorted else max([o.order_id for o in state.sort_orders] + [0]) + 1
        run.add(SortOrderAdded(sort_order=attrs.evolve(order, order_id=new_id)))
        run.last_order_id = new_id
    elif action == "set-default-sort-order":
        oid = _last_or(run.last_order_id, need_field(u, "sort-order-id", int, action), "sort order")
        if not any(o.order_id == oid for o in state.sort_orders):
            raise ValidationError(f"Cannot set default sort order: no order with id {oid}")
        if oid != state.default_sort_order_id:
            run.add(DefaultSortOrderSet(sort_order_id=oid))
    elif action == "set-location":
        location = str(need_field(u, "location", str, action)).rstrip("/")
        if location != state.location.rstrip("/"):
            raise ValidationError(f"Cannot set location {location}: icelog does not move table {state.location}")
    elif action == "set-properties":
        updates = {str(k): str(v) for k, v in need_field(u, "updates", dict, action).items()}
        check_property_values(updates, state.location)
        changed = {k: v for k, v in updates.items() if state.prop(k) != v}
        if changed:
            run.add(PropertiesSet(updates=changed))
    elif action == "remove-properties":
        present = [str(k) for k in need_field(u, "removals", list, action) if state.prop(str(k)) is not None]
        if present:
            run.add(PropertiesRemoved(removals=present))
    elif action == "add-snapshot":
        _add_snapshot(run, u["snapshot"], later, client_snapshots, live_files, stream)
    elif action == "set-snapshot-ref":
        name = need_field(u, "ref-name", str, action)
        sid = need_field(u, "snapshot-id", int, action)
        ref_type = need_field(u, "type", str, action)
        if ref_type not in ("branch", "tag"):
            raise ValidationError(f"Cannot set ref {name}: type {ref_type!r} is not branch or tag")
        if name == MAIN_BRANCH and ref_type != "branch":
            raise ValidationError(f"Cannot set {MAIN_BRANCH} to a tag: it must be a branch")
        if name == UNREFERENCED_BRANCH:
            raise ValidationError(f"Cannot set ref {name}: the name is icelog's own (it marks a snapshot no ref "
                                  f"points at yet, within one commit)")
        if state.snapshot_by_id(sid) is None:
            raise ValidationError(f"Cannot set ref {name}: snapshot {sid} does not exist")
        retention = {key: need_field(u, key, int, action, optional=True) for key in REF_RETENTION}
        for key, value in retention.items():  # Java's SnapshotRef.Builder: positive, and a tag keeps only its age
            if value is not None and value <= 0:
                raise ValidationError(f"Cannot set ref {name}: {key} must be a positive integer, got {value}")
            if value is not None and ref_type == "tag" and key != "max-ref-age-ms":
                raise ValidationError(f"Cannot set ref {name}: a tag has no {key}")
        wanted = SnapshotRef(snapshot_id=sid, type=ref_type, min_snapshots_to_keep=retention["min-snapshots-to-keep"],
                             max_snapshot_age_ms=retention["max-snapshot-age-ms"],
                             max_ref_age_ms=retention["max-ref-age-ms"])
        if state.ref(name) != wanted:
            run.add(RefSet(name=name, snapshot_id=sid, ref_type=ref_type,
                           min_snapshots_to_keep=wanted.min_snapshots_to_keep,
                           max_snapshot_age_ms=wanted.max_snapshot_age_ms, max_ref_age_ms=wanted.max_ref_age_ms))
        if state.ref(UNREFERENCED_BRANCH) is not None:
            run.add(RefRemoved(name=UNREFERENCED_BRANCH))
    elif action == "remove-snapshot-ref":
        name = need_field(u, "ref-name", str, action)
        if state.ref(name) is not None:
            run.add(RefRemoved(name=name))
    elif action == "remove-snapshots":
        ids = need_field(u, "snapshot-ids", list, action)
        present = {int(i) for i in ids if isinstance(i, int) and state.snapshot_by_id(int(i)) is not None}
        for name, ref in state.refs:
            if ref.snapshot_id in present:
                run.add(RefRemoved(name=name))
        if present:
            run.add(SnapshotsRemoved(snapshot_ids=sorted(present)))
    elif action in ("remove-statistics", "remove-partition-statistics"):
        return  # icelog publishes no statistics files: nothing to remove
    elif action in ("set-statistics", "set-partition-statistics"):
        raise ValidationError(f"Cannot apply {action}: icelog does not keep table statistics files")
    elif action in ("remove-partition-specs", "remove-schemas"):
        raise ValidationError(f"Cannot apply {action}: icelog keeps every schema and partition spec of a table")
    else:  # pragma: no cover - parse_table_commit refuses unknown actions
        raise ValidationError(f"Cannot apply update {action!r}")
    return


def upgrade_events(state: TableState, fmt: int, ctx: CommitContext,
                   live_entries: Callable[[TableState, int | None], Sequence[Any]],
                   snapshot_ids: Callable[[str], int] | None = None, *, label_rows: bool = True) -> list[Event]:
    """The events of an upgrade to format version ``fmt`` (none when the table has it already); an upgrade to v3
    of a table with snapshots also gives the rows live in each branch row ids (:func:`row_id_backfill_events`),
    unless ``label_rows`` is false.

    :raises ValidationError: for an unknown version or a downgrade
    """
    if isinstance(fmt, bool) or fmt not in SUPPORTED_FORMAT_VERSIONS:
        raise ValidationError(f"Cannot upgrade to format version {fmt!r}: icelog supports 1, 2 and 3")
    if fmt < state.format_version:
        raise ValidationError(f"Cannot downgrade format version from {state.format_version} to {fmt}")
    if fmt == state.format_version:
        return []
    check_lineage_names(state.schema, fmt, f"the upgrade to format version {fmt}")
    upgrade = FormatVersionUpgraded(format_version=fmt)
    if fmt < 3 or state.format_version >= 3 or not label_rows:
        return [upgrade]
    upgraded = apply_in_commit(upgrade, state, ctx)
    return [upgrade, *row_id_backfill_events(upgraded, ctx, live_entries, snapshot_ids)]


def _check_default_spec(state: TableState) -> None:
    """The spec a commit leaves as the default binds to the schema it leaves current (writes partition by it); an
    older spec may keep a column the schema dropped since, as Java keeps it (RTAS with a new partitioning, DROP
    COLUMN after DROP PARTITION FIELD), its values typed by the schema its files were written with."""
    try:
        check_spec_binds(state.spec, state.schema)
    except ValidationError as e:
        raise ValidationError(f"Cannot commit: the default partition spec {state.spec.spec_id} does not fit the "
                              f"current schema {state.current_schema_id} ({e})") from e
    for spec in state.specs:
        state.partition_type_of(spec)


def _last_or(last: int | None, given: int, what: str) -> int:
    if given != -1:
        return given
    if last is None:
        raise ValidationError(f"Cannot set the {what} to -1 (the last added): this commit added none")
    return last


def _add_snapshot(run: _Running, snap: Mapping[str, Any], later: Sequence[Mapping[str, Any]],
                  client_snapshots: Mapping[int, ClientSnapshot],
                  live_files: LiveFilesOf, stream: str) -> None:
    state = run.state
    sid = snap["snapshot-id"]
    if state.snapshot_by_id(sid) is not None or any(s.snapshot_id == sid for s in state.expired_snapshots):
        raise ValidationError(f"Cannot add snapshot {sid}: a snapshot with that id already exists")
    parent_id = snap.get("parent-snapshot-id")
    if parent_id is not None and state.snapshot_by_id(parent_id) is None:
        raise RequirementFailed(f"Cannot add snapshot {sid}: its parent {parent_id} is no longer in the table",
                                stream=stream)
    seq = 0  # format version 1 has no sequence numbers
    if state.format_version >= 2:
        seq = need_field(snap, "sequence-number", int, f"add-snapshot {sid} (format version {state.format_version})")
        if seq <= state.last_sequence_number:
            raise RequirementFailed(f"Cannot add snapshot {sid}: its sequence number {seq} is not above the table's "
                                    f"last sequence number {state.last_sequence_number} (built on a stale base)",
                                    stream=stream)
    schema_id = snap.get("schema-id")
    schema_id = state.current_schema_id if schema_id is None else schema_id
    state.schema_by_id(schema_id)
    summary = {str(k): str(v) for k, v in (snap.get("summary") or {}).items()}
    operation = summary.pop("operation", None) or "append"
    if operation not in SNAPSHOT_OPERATIONS:
        raise ValidationError(f"Cannot add snapshot {sid}: operation {operation!r} is not one of "
                              f"{', '.join(SNAPSHOT_OPERATIONS)}")
    client = client_snapshots.get(sid)
    if client is None:
        raise ValidationError(f"Cannot add snapshot {sid}: its manifest list was not read")
    if parent_id is None:
        before = {}
    elif parent_id in run.live:
        before = run.live[parent_id]()
    else:
        before = live_files(state, parent_id)
    first_row_id = added_rows = None
    if state.format_version >= 3:
        first_row_id, added_rows = _row_lineage(state, snap, stream)
    # a rebased append adds what it added to the snapshot the client built on (rebase_append found it)
    changes = run.rebased[sid] if sid in run.rebased else client_file_changes(state, client, before, seq)
    run.live[sid] = functools.cache(functools.partial(_live_after, before, changes))
    if state.format_version < 2 and any(c.added and c.file.content != 0 for c in changes):
        raise ValidationError(f"Cannot add snapshot {sid}: delete files need format version 2")
    branch = UNREFERENCED_BRANCH
    for u in later:
        if u["action"] == "set-snapshot-ref" and u.get("snapshot-id") == sid and u.get("type") == "branch":
            branch = str(u["ref-name"])
            break
    if branch == MAIN_BRANCH:
        _check_logged_time(state, sid, snap["timestamp-ms"], run.ctx.time_ms)
    run.add(SnapshotAdded(
        snapshot_id=sid, parent_snapshot_id=parent_id, sequence_number=seq, timestamp_ms=snap["timestamp-ms"],
        operation=operation, summary=tuple(summary.items()), schema_id=schema_id, branch=branch, changes=changes,
        partition_types={s.spec_id: state.partition_type_of(s) for s in state.specs},
        first_row_id=first_row_id, added_rows=added_rows))
    if branch == UNREFERENCED_BRANCH and not any(
            u["action"] == "set-snapshot-ref" and u.get("snapshot-id") == sid for u in later):
        run.add(RefRemoved(name=UNREFERENCED_BRANCH))


#: the clock skew between writers that Java's TableMetadata tolerates in the snapshot log (``ONE_MINUTE``)
CLOCK_SKEW_MS = 60_000


def _check_logged_time(state: TableState, sid: int, timestamp_ms: int, now_ms: int) -> None:
    """A client's snapshot goes into the snapshot log at its own ``timestamp-ms``: refuse one that would put the
    log out of order (more than a minute before its last entry) or ahead of the commit (more than a minute after the
    server's time, which becomes ``last-updated-ms``), as Java's TableMetadata does; Java, iceberg-rust and
    iceberg-go refuse to load metadata whose log is so (a client whose clock is off)."""
    if state.snapshot_log and timestamp_ms < state.snapshot_log[-1][0] - CLOCK_SKEW_MS:
        raise ValidationError(f"Cannot add snapshot {sid}: its timestamp-ms {timestamp_ms} is more than a minute "
                              f"before the table's last snapshot-log entry ({state.snapshot_log[-1][0]}); is the "
                              f"client's clock behind?")
    if timestamp_ms > now_ms + CLOCK_SKEW_MS:
        raise ValidationError(f"Cannot add snapshot {sid}: its timestamp-ms {timestamp_ms} is more than a minute "
                              f"after the server's time ({now_ms}); is the client's clock ahead?")


def _live_after(before: Mapping[str, DataFile], changes: Sequence[FileChange]) -> dict[str, DataFile]:
    """The files live after a snapshot of the commit: made only when a later snapshot of the same commit is its
    child (a copy of the parent's whole set, which a single append never needs)."""
    after = dict(before)
    for c in changes:
        if c.added:
            after[c.file.key] = c.file
        else:
            after.pop(c.file.key, None)
    return after


def _row_lineage(state: TableState, snap: Mapping[str, Any], stream: str) -> tuple[int, int]:
    """A v3 client snapshot's ``first-row-id`` and ``added-rows``, checked against the table's ``next-row-id``."""
    sid = snap["snapshot-id"]
    first, added = snap.get("first-row-id"), snap.get("added-rows")
    for name, value in (("first-row-id", first), ("added-rows", added)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise ValidationError(f"Cannot add snapshot {sid}: a format version 3 snapshot needs {name} (a "
                                  f"non-negative integer), got {value!r}")
    if first < (state.next_row_id or 0):
        raise RequirementFailed(f"Cannot add snapshot {sid}: its first-row-id {first} is below the table's "
                                f"next-row-id {state.next_row_id} (built on a stale base)", stream=stream)
    return first, added
