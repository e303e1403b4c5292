"""Iceberg REST commits as icelog events: a ``requirements`` + ``updates`` list checked and applied on a base state.

Layer: engine.operations (reads the client's manifest lists and manifests through projections.manifest_reader and
storage.files before the commit; the event building itself is pure and runs inside the log's write transaction).

A REST client (Spark's ``RESTSessionCatalog``, PyIceberg's ``RestCatalog``) commits a table change as JSON: the
requirements its base must still meet (``assert-ref-snapshot-id``, ...) and the metadata updates to apply
(``add-snapshot``, ``set-snapshot-ref``, ``add-schema``, ...). This module turns them into the log's typed events:

- :func:`parse_table_commit` checks the JSON's shape (``ValidationError`` naming the culprit: HTTP 400);
- :func:`load_client_snapshots` reads, before the commit, what the client wrote for each ``add-snapshot``: its
  manifest list and the manifests that are not icelog's own (icelog's are in the parent's published list), so a
  commit reads only the manifests that changed;
- :func:`commit_events` checks the requirements against the base (``RequirementFailed``: HTTP 409, the client
  reloads and retries; a pure append whose branch head moved on is rebased onto it instead, :func:`rebase_append`)
  and builds the events, updating a running state so ``-1`` ("the last one added") and later
  updates see earlier ones. A staged create (``assert-create`` + the full table definition) becomes a
  ``TableCreated`` followed by the rest of the updates.

A snapshot's file changes come from comparing the client's snapshot with its parent as the log has it: files of
the client's new manifests that the parent does not have are added (ADDED entries keep an explicit data sequence
number when it differs from the snapshot's, as ``rewrite_data_files`` writes), and files of the parent that the
client's snapshot no longer has (DELETED entries, or gone with a manifest icelog published) are removed.

Decisions: ``set-statistics`` / ``set-partition-statistics`` are refused (icelog keeps no statistics files);
``remove-statistics`` / ``remove-partition-statistics`` are no-ops (there is nothing to remove);
``remove-partition-specs`` / ``remove-schemas`` are refused; ``set-location`` may not move an existing table;
``assign-uuid`` may not change an existing table's uuid; a snapshot whose sequence number is not above the table's
last one, or whose parent is gone, failed a requirement in effect (409, so the client retries on the new base).
"""

from __future__ import annotations

import os
from typing import Any, Callable, Mapping, Sequence

import attrs

from engine.errors import CorruptFileError, RequirementFailed, ValidationError
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
from engine.model.data_file import (
    DataFile,
    DataFileContent,
    EntryStatus,
    ManifestEntry,
    ManifestFile,
    deletion_vector_problem,
)
from engine.model.partitioning import UNPARTITIONED_SPEC, PartitionSpec
from engine.model.schema import Schema, check_schema_for_format
from engine.model.sort_order import UNSORTED_ORDER, SortOrder
from engine.operations.commit import CommitContext, apply_in_commit
from engine.operations.snapshot import row_id_backfill_events
from engine.operations.update_schema import is_promotion
from engine.state.table_state import SnapshotRef, TableState
from projections import layout
from engine.registration.metadata_import import read_file_bytes
from projections.manifest_reader import inherit_first_row_ids, read_manifest, read_manifest_list
from storage.errors import LogError
from storage.files import FileIO

SUPPORTED_FORMAT_VERSIONS = (1, 2, 3)
#: the reserved table property that names the format version (Java's TableProperties.FORMAT_VERSION)
FORMAT_VERSION_PROPERTY = "format-version"
#: the branch a snapshot is added on when no branch of the same commit points at it (removed in the same commit)
UNREFERENCED_BRANCH = "icelog-rest-unreferenced"

REQUIREMENTS = ("assert-create", "assert-table-uuid", "assert-ref-snapshot-id", "assert-last-assigned-field-id",
                "assert-current-schema-id", "assert-last-assigned-partition-id", "assert-default-spec-id",
                "assert-default-sort-order-id")
UPDATES = ("assign-uuid", "upgrade-format-version", "add-schema", "set-current-schema", "add-spec",
           "set-default-spec", "add-sort-order", "set-default-sort-order", "set-location", "set-properties",
           "remove-properties", "add-snapshot", "set-snapshot-ref", "remove-snapshot-ref", "remove-snapshots",
           "set-statistics", "remove-statistics", "set-partition-statistics", "remove-partition-statistics",
           "remove-partition-specs", "remove-schemas")


@attrs.frozen(kw_only=True)
class TableCommit:
    """One table's REST commit, its JSON shape checked.

    :param requirements: the requirement objects, each with a known ``type``
    :param updates: the update objects, each with a known ``action``
    """

    requirements: tuple[Mapping[str, Any], ...]
    updates: tuple[Mapping[str, Any], ...]

    @property
    def creates(self) -> bool:
        return any(r["type"] == "assert-create" for r in self.requirements)

    def snapshots(self) -> list[Mapping[str, Any]]:
        return [u["snapshot"] for u in self.updates if u["action"] == "add-snapshot"]

    def requested_location(self) -> str | None:
        """The location the commit's last ``set-location`` asks for (None when it sets none)."""
        found = [u.get("location") for u in self.updates if u.get("action") == "set-location"]
        return str(found[-1]) if found and found[-1] else None

    def assigned_uuid(self) -> str | None:
        for u in self.updates:
            if u["action"] == "assign-uuid":
                return str(u["uuid"])
        return None


def _need(obj: Mapping[str, Any], key: str, kind: type | tuple[type, ...], what: str, *,
          optional: bool = False) -> Any:
    if key not in obj or obj[key] is None:
        if optional:
            return None
        raise ValidationError(f"Cannot apply {what}: field '{key}' is missing")
    value = obj[key]
    kinds = kind if isinstance(kind, tuple) else (kind,)
    if (isinstance(value, bool) and bool not in kinds) or not isinstance(value, kinds):
        raise ValidationError(f"Cannot apply {what}: field '{key}' has the wrong type: {value!r}")
    return value


def _check_values(u: Mapping[str, Any], action: str) -> None:
    """Property values and removals are strings and removed snapshot ids integers, as in Iceberg's parsers."""
    if action == "set-properties":
        for k, v in _need(u, "updates", dict, action).items():
            if not isinstance(v, str):
                raise ValidationError(f"Cannot apply {action}: the value of {k!r} is not a string: {v!r}")
    elif action == "remove-properties":
        if not all(isinstance(k, str) for k in _need(u, "removals", list, action)):
            raise ValidationError(f"Cannot apply {action}: 'removals' must be a list of strings")
    elif action == "remove-snapshots":
        ids = _need(u, "snapshot-ids", list, action)
        if not all(isinstance(i, int) and not isinstance(i, bool) for i in ids):
            raise ValidationError(f"Cannot apply {action}: 'snapshot-ids' must be a list of integers")
    elif action in ("remove-statistics", "remove-partition-statistics"):
        _need(u, "snapshot-id", int, action)


def parse_table_commit(requirements: Any, updates: Any) -> TableCommit:
    """Check the shape of a commit's ``requirements`` and ``updates`` lists.

    :raises ValidationError: a list that is not a list, an entry that is not an object, an unknown requirement
        type or update action, a field missing or of the wrong type
    """
    requirements = [] if requirements is None else requirements
    if not isinstance(requirements, list):
        raise ValidationError(f"Cannot commit: 'requirements' is not a list: {requirements!r}")
    if not isinstance(updates, list):
        raise ValidationError(f"Cannot commit: 'updates' is not a list: {updates!r}")
    for r in requirements:
        if not isinstance(r, dict):
            raise ValidationError(f"Cannot commit: requirement {r!r} is not an object")
        if r.get("type") not in REQUIREMENTS:
            raise ValidationError(f"Cannot commit: unknown requirement type {r.get('type')!r}")
    for u in updates:
        if not isinstance(u, dict):
            raise ValidationError(f"Cannot commit: update {u!r} is not an object")
        action = u.get("action")
        if action not in UPDATES:
            raise ValidationError(f"Cannot commit: unknown update action {action!r}")
        _check_values(u, action)
        if action == "add-snapshot":
            snap = _need(u, "snapshot", dict, "add-snapshot")
            _need(snap, "snapshot-id", int, "add-snapshot")
            _need(snap, "timestamp-ms", int, "add-snapshot")
            _need(snap, "manifest-list", str, "add-snapshot")
            _need(snap, "parent-snapshot-id", int, "add-snapshot", optional=True)
            _need(snap, "sequence-number", int, "add-snapshot", optional=True)
            _need(snap, "schema-id", int, "add-snapshot", optional=True)
            _need(snap, "summary", dict, "add-snapshot", optional=True)
    return TableCommit(requirements=tuple(requirements), updates=tuple(updates))


# ---------------------------------------------------------------- the client's files (read before the commit)


@attrs.frozen(kw_only=True)
class ClientSnapshot:
    """What the client wrote for one new snapshot, read before the commit.

    :param snapshot_id: the client's snapshot id
    :param manifest_list: the client's manifest list path
    :param manifests: the manifests the list names
    :param entries: entries of the manifests read (those not in ``parent_manifests``), by manifest path, spec ids
        taken from the list
    :param parent_manifests: the manifest paths of the parent's published manifest list, or None when that list
        could not be read (then every manifest was read, and the client's live set is complete)
    :param gone_entries: entries of the parent's manifests the client's list dropped
    """

    snapshot_id: int
    manifest_list: str
    manifests: tuple[ManifestFile, ...]
    entries: Mapping[str, tuple[ManifestEntry, ...]]
    parent_manifests: frozenset[str] | None
    gone_entries: tuple[ManifestEntry, ...] = ()

    def written_files(self) -> list[str]:
        """The client's files icelog records as staged: the manifest list and the manifests it wrote for this
        snapshot (a list also names older manifests, icelog's own among them)."""
        return [self.manifest_list] + [m.manifest_path for m in self.manifests
                                       if m.added_snapshot_id == self.snapshot_id]


def _entries(io: FileIO, m: ManifestFile, what: str) -> tuple[ManifestEntry, ...]:
    _, entries = read_manifest(read_file_bytes(io, m.manifest_path, what), m.manifest_path)
    return tuple(e if e.data_file.spec_id == m.partition_spec_id else
                 attrs.evolve(e, data_file=attrs.evolve(e.data_file, spec_id=m.partition_spec_id)) for e in entries)


def load_client_snapshots(io: FileIO, commit: TableCommit, base: TableState | None,
                          check_path: Callable[[str], None] | None = None) -> dict[int, ClientSnapshot]:
    """Read the manifest list of each snapshot the commit adds and the manifests in it that are not the parent's.

    :param check_path: called with each manifest list and manifest path before it is read; raises to refuse it
        (a file the table does not own)
    :raises CorruptFileError: a manifest list or manifest that is missing or unreadable
    """
    check = check_path or (lambda path: None)
    out: dict[int, ClientSnapshot] = {}
    for snap in commit.snapshots():
        list_path = snap["manifest-list"]
        check(list_path)
        manifests = tuple(read_manifest_list(read_file_bytes(io, list_path, "the client's manifest list"), list_path))
        for m in manifests:
            check(m.manifest_path)
        parent_id = snap.get("parent-snapshot-id")
        parent_manifests: dict[str, ManifestFile] | None = None
        if base is not None and parent_id is not None:
            parent = base.snapshot_by_id(parent_id)
            if parent is not None:
                published = layout.manifest_list_file(base.location, parent.snapshot_id, parent.commit_id)
                try:
                    parent_manifests = {m.manifest_path: m for m in read_manifest_list(io.read_bytes(published),
                                                                                       published)}
                except (LogError, CorruptFileError):
                    parent_manifests = None  # not published: read every manifest of the client's list
        listed = {m.manifest_path for m in manifests}
        entries = {m.manifest_path: _entries(io, m, "the client's manifest") for m in manifests
                   if parent_manifests is None or m.manifest_path not in parent_manifests}
        gone: list[ManifestEntry] = []
        if parent_manifests is not None:
            for path, m in parent_manifests.items():
                if path not in listed:
                    gone.extend(_entries(io, m, "parent manifest"))
        out[snap["snapshot-id"]] = ClientSnapshot(
            snapshot_id=snap["snapshot-id"], manifest_list=list_path, manifests=manifests, entries=entries,
            parent_manifests=None if parent_manifests is None else frozenset(parent_manifests),
            gone_entries=tuple(gone))
    return out


# ---------------------------------------------------------------- requirements


def check_requirements(base: TableState | None, commit: TableCommit, stream: str) -> None:
    """Raise RequirementFailed for the first requirement ``base`` (None: no such table) does not meet."""
    for r in commit.requirements:
        kind = r["type"]
        if kind == "assert-create":
            if base is not None:
                raise RequirementFailed("Requirement failed: table already exists", stream=stream)
            continue
        if base is None:
            raise RequirementFailed(f"Requirement failed: {kind}: the table does not exist", stream=stream)
        if kind == "assert-table-uuid":
            if str(r.get("uuid")) != base.table_uuid:
                raise RequirementFailed(f"Requirement failed: UUID does not match: expected {base.table_uuid} "
                                        f"!= {r.get('uuid')}", stream=stream)
        elif kind == "assert-ref-snapshot-id":
            name = _need(r, "ref", str, kind)
            expected = _need(r, "snapshot-id", int, kind, optional=True)
            ref = base.ref(name)
            if expected is None and ref is not None:
                raise RequirementFailed(f"Requirement failed: ref {name!r} was created concurrently "
                                        f"(it points at {ref.snapshot_id})", stream=stream)
            if expected is not None and ref is None:
                raise RequirementFailed(f"Requirement failed: ref {name!r} is missing, expected {expected}",
                                        stream=stream)
            if expected is not None and ref is not None and ref.snapshot_id != expected:
                raise RequirementFailed(f"Requirement failed: {ref.type} {name!r} has changed: expected id "
                                        f"{expected} != {ref.snapshot_id}", stream=stream)
        else:
            key, actual = {
                "assert-last-assigned-field-id": ("last-assigned-field-id", base.last_column_id),
                "assert-current-schema-id": ("current-schema-id", base.current_schema_id),
                "assert-last-assigned-partition-id": ("last-assigned-partition-id", base.last_partition_id),
                "assert-default-spec-id": ("default-spec-id", base.default_spec_id),
                "assert-default-sort-order-id": ("default-sort-order-id", base.default_sort_order_id),
            }[kind]
            expected = _need(r, key, int, kind)
            if expected != actual:
                raise RequirementFailed(f"Requirement failed: {key} changed: expected {expected} != {actual}",
                                        stream=stream)


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
        self.live: dict[int, dict[str, DataFile]] = {}
        #: a rebased append's snapshot id -> the files it adds (found against the snapshot the client built on)
        self.rebased: dict[int, tuple[FileChange, ...]] = {}

    def add(self, event: Event) -> None:
        self.state = apply_in_commit(event, self.state, self.ctx)
        self.events.append(event)


def _schema_of(update: Mapping[str, Any], format_version: int) -> Schema:
    try:
        schema = Schema.from_json(_need(update, "schema", dict, "add-schema"))
    except (KeyError, TypeError, ValueError) as e:
        raise ValidationError(f"Cannot apply add-schema: the schema cannot be read: {e}") from e
    check_schema_for_format(schema, format_version, "add-schema")
    return schema


def _check_spec(spec: PartitionSpec, schema: Schema) -> None:
    """Every partition field's transform applies to its source column (``day`` of a long does not)."""
    spec.partition_type(schema)
    for f in spec.fields:
        source = schema.find_field(f.source_id)
        if not f.transform.can_transform(source.field_type):
            raise ValidationError(f"Cannot add partition spec: field {f.name!r}: {f.transform} cannot apply to column "
                                  f"{schema.find_column_name(f.source_id)!r} of type {source.field_type}")


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


def _check_schema_change(state: TableState, new: Schema) -> None:
    """A new schema keeps every existing field readable, as Iceberg's schema evolution does: a type changes only
    by promotion, an optional field stays optional, and a new required field needs a table without rows."""
    old_fields = state.schema.index_by_id()
    has_rows = any(int(dict(s.summary).get("total-records", "0") or 0) > 0 for s in state.snapshots)
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
    obj = dict(_need(update, "spec", dict, "add-spec"))
    obj.setdefault("spec-id", 0)
    return PartitionSpec.from_json(obj)


def _order_of(update: Mapping[str, Any]) -> SortOrder:
    obj = dict(_need(update, "sort-order", dict, "add-sort-order"))
    if not obj.get("fields"):
        return UNSORTED_ORDER
    obj["order-id"] = max(1, obj.get("order-id") or 1)
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
            table_uuid = str(_need(u, "uuid", str, action))
        elif action == "upgrade-format-version":
            fmt = _need(u, "format-version", int, action)
        elif action == "add-schema" and schema is None:
            schema = attrs.evolve(_schema_of(u, fmt), schema_id=0)
        elif action == "add-spec" and spec is None:
            spec = attrs.evolve(_spec_of(u), spec_id=0)
        elif action == "add-sort-order" and order is None:
            order = _order_of(u)
        elif action == "set-location":
            location = str(_need(u, "location", str, action)).rstrip("/")
        elif action == "set-properties":
            props.update({str(k): str(v) for k, v in _need(u, "updates", dict, action).items()})
        elif action == "remove-properties":
            for k in _need(u, "removals", list, action):
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
    _check_spec(spec, schema)
    _check_order(order or UNSORTED_ORDER, schema)
    created = TableCreated(table_uuid=table_uuid or default_uuid, location=location, format_version=fmt,
                           schema=schema, spec=spec, sort_order=order or UNSORTED_ORDER, properties=props)
    return created, rest


def commit_events(base: TableState | None, commit: TableCommit, ctx: CommitContext, *,
                  client_snapshots: Mapping[int, ClientSnapshot],
                  live_entries: Callable[[TableState, int | None], Sequence[Any]],
                  stream: str, default_location: str = "") -> list[Event]:
    """The events of ``commit`` on ``base`` (None: the table does not exist yet and the commit creates it).

    :param client_snapshots: what :func:`load_client_snapshots` read for the commit's snapshots
    :param live_entries: the files live in a snapshot of a state (``StateStore.live_entries``)
    :param stream: the table's stream id (a created table's uuid when the commit assigns none)
    :param default_location: the location of a created table when the commit sets none
    :raises RequirementFailed: a requirement does not hold (or a snapshot was built on a stale base)
    :raises ValidationError: an update that is invalid on the table
    """
    rebased: dict[int, tuple[FileChange, ...]] = {}
    try:
        check_requirements(base, commit, stream)
    except RequirementFailed:
        found = rebase_append(base, commit, client_snapshots, live_entries, stream)
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
        _apply_update(run, u, updates[i + 1:], client_snapshots, live_entries, stream)
    return run.events


@attrs.frozen
class RebasedSnapshot:
    """A client's append moved onto the branch head: its id and the files it adds (found against the snapshot the
    client built on; they inherit the new sequence number)."""

    snapshot_id: int
    changes: tuple[FileChange, ...]


def rebase_append(base: TableState | None, commit: TableCommit, client_snapshots: Mapping[int, ClientSnapshot],
                  live_entries: Callable[[TableState, int | None], Sequence[Any]], stream: str
                  ) -> tuple[TableCommit, RebasedSnapshot] | None:
    """A commit whose only failed requirement is its branch's ``assert-ref-snapshot-id``, and which only appends
    data files on that branch, rebased onto the branch's head, as Iceberg Java's own append retries on a refreshed
    base (an append reads nothing, so what landed meanwhile cannot conflict with it). Returns the rebased commit
    and its moved snapshot; None when the commit is not such an append (the requirement's failure stands: 409).

    The rebased snapshot keeps the client's id, files and summary of what it added; it gets the head as parent, the
    next sequence number (its files inherit it) and totals recounted from the head's. Format v1 and v2 tables.
    """
    if base is None or commit.creates or base.format_version >= 3:
        return None  # v3: not yet (the rebased files' row ids would move with it; untested against a v3 client)
    snapshots = [u for u in commit.updates if u["action"] == "add-snapshot"]
    refs = [u for u in commit.updates if u["action"] == "set-snapshot-ref"]
    if len(snapshots) != 1 or len(refs) != 1 or len(commit.updates) != 2:
        return None
    snap, ref = dict(snapshots[0]["snapshot"]), refs[0]
    sid, branch = snap.get("snapshot-id"), ref.get("ref-name")
    if ref.get("snapshot-id") != sid or ref.get("type") != "branch" or not isinstance(branch, str):
        return None
    summary = {str(k): str(v) for k, v in (snap.get("summary") or {}).items()}
    if summary.get("operation", "append") != "append" or sid not in client_snapshots:
        return None
    asserted = [r for r in commit.requirements if r["type"] == "assert-ref-snapshot-id" and r.get("ref") == branch]
    if len(asserted) != 1 or asserted[0].get("snapshot-id") != snap.get("parent-snapshot-id"):
        return None
    built_on = snap.get("parent-snapshot-id")
    head_ref = base.ref(branch)
    if head_ref is None or (built_on is not None and not any(
            s.snapshot_id == built_on for s in base.ancestors(head_ref.snapshot_id))):
        return None  # the branch is gone, or no longer descends from what the client read
    rest = TableCommit(requirements=tuple(r for r in commit.requirements if r is not asserted[0]),
                       updates=commit.updates)
    try:
        check_requirements(base, rest, stream)
    except RequirementFailed:
        return None
    client = client_snapshots[sid]
    # an added entry may spell out the client's own sequence number (DuckDB does), which is inheriting it; any other
    # sequence number of its own cannot move with the snapshot
    client_seq = snap.get("sequence-number")
    moved_entries: dict[str, tuple[ManifestEntry, ...]] = {}
    for path, entries in client.entries.items():
        moved = []
        for e in entries:
            if e.status == EntryStatus.ADDED and (e.data_sequence_number is not None
                                                  or e.file_sequence_number is not None):
                if {e.data_sequence_number, e.file_sequence_number} - {None, client_seq}:
                    return None
                e = attrs.evolve(e, data_sequence_number=None, file_sequence_number=None)
            moved.append(e)
        moved_entries[path] = tuple(moved)
    head = base.snapshot_by_id(head_ref.snapshot_id)
    sequence_number = base.last_sequence_number + 1
    # the client's new manifests move with the snapshot: their entries inherit the new sequence number
    client = attrs.evolve(client, entries=moved_entries, manifests=tuple(
        attrs.evolve(m, sequence_number=sequence_number, min_sequence_number=sequence_number)
        if m.added_snapshot_id == sid else m for m in client.manifests))
    before = {} if built_on is None else {e.file.key: e.file for e in live_entries(base, built_on)}
    try:
        changes = _file_changes(base, client, before, sequence_number)
    except ValidationError:
        return None
    if not changes or any(not c.added or c.file.content != DataFileContent.DATA for c in changes):
        return None
    snap["parent-snapshot-id"] = head.snapshot_id
    snap["sequence-number"] = sequence_number
    snap["summary"] = _totals_from(head, summary)
    requirement = {"type": "assert-ref-snapshot-id", "ref": branch, "snapshot-id": head.snapshot_id}
    updates = tuple({"action": "add-snapshot", "snapshot": snap} if u is snapshots[0] else u for u in commit.updates)
    return (TableCommit(requirements=rest.requirements + (requirement,), updates=updates),
            RebasedSnapshot(snapshot_id=sid, changes=changes))


_TOTALS = {"total-records": "added-records", "total-files-size": "added-files-size",
           "total-data-files": "added-data-files"}


def _totals_from(head: Any, summary: Mapping[str, str]) -> dict[str, str]:
    """An append's summary with its totals recounted on a new parent: the parent's totals plus what it adds; totals
    the parent does not have are left out."""
    parent = dict(head.summary) if head is not None else {}
    out = {k: v for k, v in summary.items() if not k.startswith("total-")}
    for total, added in _TOTALS.items():
        try:
            out[total] = str(int(parent[total]) + int(summary.get(added, "0")))
        except (KeyError, ValueError):
            continue
    for total in ("total-delete-files", "total-position-deletes", "total-equality-deletes"):
        if total in parent:
            out[total] = parent[total]
    return out


def _merged_removals(updates: list[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """Consecutive ``remove-snapshots`` updates (Java sends one per expired snapshot) as one."""
    out: list[Mapping[str, Any]] = []
    for u in updates:
        if u["action"] == "remove-snapshots" and out and out[-1]["action"] == "remove-snapshots":
            ids = _need(u, "snapshot-ids", list, "remove-snapshots")
            out[-1] = {"action": "remove-snapshots",
                       "snapshot-ids": list(_need(out[-1], "snapshot-ids", list, "remove-snapshots")) + ids}
        else:
            out.append(u)
    return out


def _apply_update(run: _Running, u: Mapping[str, Any], later: Sequence[Mapping[str, Any]],
                  client_snapshots: Mapping[int, ClientSnapshot],
                  live_entries: Callable[[TableState, int | None], Sequence[Any]],
                  stream: str) -> None:
    state = run.state
    action = u["action"]
    if action == "assign-uuid":
        if _need(u, "uuid", str, action) != state.table_uuid:
            raise ValidationError(f"Cannot assign uuid {u['uuid']}: table {state.table_uuid} keeps its uuid")
    elif action == "upgrade-format-version":
        for event in upgrade_events(state, _need(u, "format-version", int, action), run.ctx, live_entries):
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
        sid = _last_or(run.last_schema_id, _need(u, "schema-id", int, action), "schema")
        schema = state.schema_by_id(sid)
        for spec in state.specs:  # icelog reads every spec's partition tuples through the current schema
            try:
                spec.partition_type(schema)
            except ValidationError as e:
                raise ValidationError(f"Cannot set current schema {sid}: partition spec {spec.spec_id} of the table "
                                      f"uses a column the schema drops, which icelog cannot keep ({e})") from e
        if sid != state.current_schema_id:
            run.add(CurrentSchemaSet(schema_id=sid))
    elif action == "add-spec":
        spec = _spec_of(u)
        _check_spec(spec, state.schema)
        for s in state.specs:
            if s.compatible_with(spec):
                run.last_spec_id = s.spec_id
                return
        new_id = max(s.spec_id for s in state.specs) + 1
        run.add(SpecAdded(spec=attrs.evolve(spec, spec_id=new_id)))
        run.last_spec_id = new_id
    elif action == "set-default-spec":
        sid = _last_or(run.last_spec_id, _need(u, "spec-id", int, action), "partition spec")
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
        oid = _last_or(run.last_order_id, _need(u, "sort-order-id", int, action), "sort order")
        if not any(o.order_id == oid for o in state.sort_orders):
            raise ValidationError(f"Cannot set default sort order: no order with id {oid}")
        if oid != state.default_sort_order_id:
            run.add(DefaultSortOrderSet(sort_order_id=oid))
    elif action == "set-location":
        location = str(_need(u, "location", str, action)).rstrip("/")
        if location != state.location.rstrip("/"):
            raise ValidationError(f"Cannot set location {location}: icelog does not move table {state.location}")
    elif action == "set-properties":
        updates = {str(k): str(v) for k, v in _need(u, "updates", dict, action).items()}
        changed = {k: v for k, v in updates.items() if state.prop(k) != v}
        if changed:
            run.add(PropertiesSet(updates=changed))
    elif action == "remove-properties":
        present = [str(k) for k in _need(u, "removals", list, action) if state.prop(str(k)) is not None]
        if present:
            run.add(PropertiesRemoved(removals=present))
    elif action == "add-snapshot":
        _add_snapshot(run, u["snapshot"], later, client_snapshots, live_entries, stream)
    elif action == "set-snapshot-ref":
        name = _need(u, "ref-name", str, action)
        sid = _need(u, "snapshot-id", int, action)
        ref_type = _need(u, "type", str, action)
        if ref_type not in ("branch", "tag"):
            raise ValidationError(f"Cannot set ref {name}: type {ref_type!r} is not branch or tag")
        if state.snapshot_by_id(sid) is None:
            raise ValidationError(f"Cannot set ref {name}: snapshot {sid} does not exist")
        wanted = SnapshotRef(snapshot_id=sid, type=ref_type,
                             min_snapshots_to_keep=_need(u, "min-snapshots-to-keep", int, action, optional=True),
                             max_snapshot_age_ms=_need(u, "max-snapshot-age-ms", int, action, optional=True),
                             max_ref_age_ms=_need(u, "max-ref-age-ms", int, action, optional=True))
        if state.ref(name) != wanted:
            run.add(RefSet(name=name, snapshot_id=sid, ref_type=ref_type,
                           min_snapshots_to_keep=wanted.min_snapshots_to_keep,
                           max_snapshot_age_ms=wanted.max_snapshot_age_ms, max_ref_age_ms=wanted.max_ref_age_ms))
        if state.ref(UNREFERENCED_BRANCH) is not None:
            run.add(RefRemoved(name=UNREFERENCED_BRANCH))
    elif action == "remove-snapshot-ref":
        name = _need(u, "ref-name", str, action)
        if state.ref(name) is not None:
            run.add(RefRemoved(name=name))
    elif action == "remove-snapshots":
        ids = _need(u, "snapshot-ids", list, action)
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
                   live_entries: Callable[[TableState, int | None], Sequence[Any]]) -> list[Event]:
    """The events of an upgrade to format version ``fmt`` (none when the table has it already); an upgrade to v3
    of a table with snapshots also gives the rows live in each branch row ids (:func:`row_id_backfill_events`).

    :raises ValidationError: for an unknown version or a downgrade
    """
    if isinstance(fmt, bool) or fmt not in SUPPORTED_FORMAT_VERSIONS:
        raise ValidationError(f"Cannot upgrade to format version {fmt!r}: icelog supports 1, 2 and 3")
    if fmt < state.format_version:
        raise ValidationError(f"Cannot downgrade format version from {state.format_version} to {fmt}")
    if fmt == state.format_version:
        return []
    upgrade = FormatVersionUpgraded(format_version=fmt)
    if fmt < 3 or state.format_version >= 3:
        return [upgrade]
    upgraded = apply_in_commit(upgrade, state, ctx)
    return [upgrade, *row_id_backfill_events(upgraded, ctx, live_entries)]


def _last_or(last: int | None, given: int, what: str) -> int:
    if given != -1:
        return given
    if last is None:
        raise ValidationError(f"Cannot set the {what} to -1 (the last added): this commit added none")
    return last


def _add_snapshot(run: _Running, snap: Mapping[str, Any], later: Sequence[Mapping[str, Any]],
                  client_snapshots: Mapping[int, ClientSnapshot],
                  live_entries: Callable[[TableState, int | None], Sequence[Any]], stream: str) -> None:
    state = run.state
    sid = snap["snapshot-id"]
    if state.snapshot_by_id(sid) is not None or any(s.snapshot_id == sid for s in state.expired_snapshots):
        raise ValidationError(f"Cannot add snapshot {sid}: a snapshot with that id already exists")
    parent_id = snap.get("parent-snapshot-id")
    if parent_id is not None and state.snapshot_by_id(parent_id) is None:
        raise RequirementFailed(f"Cannot add snapshot {sid}: its parent {parent_id} is no longer in the table",
                                stream=stream)
    seq = snap.get("sequence-number") or 0
    if state.format_version >= 2 and seq <= state.last_sequence_number:
        raise RequirementFailed(f"Cannot add snapshot {sid}: its sequence number {seq} is not above the table's "
                                f"last sequence number {state.last_sequence_number} (built on a stale base)",
                                stream=stream)
    if state.format_version < 2:
        seq = 0
    schema_id = snap.get("schema-id")
    schema_id = state.current_schema_id if schema_id is None else schema_id
    state.schema_by_id(schema_id)
    summary = {str(k): str(v) for k, v in (snap.get("summary") or {}).items()}
    operation = summary.pop("operation", None) or "append"
    client = client_snapshots.get(sid)
    if client is None:
        raise ValidationError(f"Cannot add snapshot {sid}: its manifest list was not read")
    if parent_id is None:
        before = {}
    elif parent_id in run.live:
        before = run.live[parent_id]
    else:
        before = {e.file.key: e.file for e in live_entries(state, parent_id)}
    first_row_id = added_rows = None
    if state.format_version >= 3:
        first_row_id, added_rows = _row_lineage(state, snap, stream)
    # a rebased append adds what it added to the snapshot the client built on (rebase_append found it)
    changes = run.rebased[sid] if sid in run.rebased else _file_changes(state, client, before, seq)
    after = dict(before)
    for c in changes:
        if c.added:
            after[c.file.key] = c.file
        else:
            after.pop(c.file.key, None)
    run.live[sid] = after
    if state.format_version < 2 and any(c.added and c.file.content != 0 for c in changes):
        raise ValidationError(f"Cannot add snapshot {sid}: delete files need format version 2")
    branch = UNREFERENCED_BRANCH
    for u in later:
        if u["action"] == "set-snapshot-ref" and u.get("snapshot-id") == sid and u.get("type") == "branch":
            branch = str(u["ref-name"])
            break
    run.add(SnapshotAdded(
        snapshot_id=sid, parent_snapshot_id=parent_id, sequence_number=seq, timestamp_ms=snap["timestamp-ms"],
        operation=operation, summary=tuple(summary.items()), schema_id=schema_id, branch=branch, changes=changes,
        partition_types={s.spec_id: s.partition_type(state.schema) for s in state.specs},
        first_row_id=first_row_id, added_rows=added_rows))
    if branch == UNREFERENCED_BRANCH and not any(
            u["action"] == "set-snapshot-ref" and u.get("snapshot-id") == sid for u in later):
        run.add(RefRemoved(name=UNREFERENCED_BRANCH))


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


def _file_changes(state: TableState, client: ClientSnapshot, before: Mapping[str, DataFile],
                  seq: int) -> tuple[FileChange, ...]:
    """Files the client's snapshot adds and removes relative to its parent's live files ``before`` (both keyed by
    ``DataFile.key``); in v3, data files take their first row id by the spec's inheritance."""
    new_live: dict[str, tuple[ManifestEntry, int]] = {}
    deleted: set[str] = set()
    by_path = {m.manifest_path: m for m in client.manifests}
    v3 = state.format_version >= 3
    for path, entries in client.entries.items():
        manifest_seq = by_path[path].sequence_number
        for e in inherit_first_row_ids(entries, by_path[path].first_row_id) if v3 else entries:
            f = e.data_file
            if e.status == EntryStatus.DELETED:
                deleted.add(f.key)
                continue
            data_seq = e.data_sequence_number
            if data_seq is None:
                data_seq = manifest_seq if e.status == EntryStatus.ADDED else seq
            problem = "a Puffin file before format version 3" if not v3 and f.file_format.upper() == "PUFFIN" \
                else deletion_vector_problem(f)
            if problem is not None:
                raise ValidationError(f"Cannot add {f.file_path}: it is {problem}")
            new_live[f.key] = (e, data_seq)
    if client.parent_manifests is None:
        removed = [f for p, f in before.items() if p not in new_live]
    else:
        gone = {e.data_file.key for e in client.gone_entries if e.status != EntryStatus.DELETED}
        removed = [f for p, f in before.items() if (p in gone or p in deleted) and p not in new_live]
    changes: list[FileChange] = []
    for p, (e, data_seq) in sorted(new_live.items()):
        if p in before:
            if not (v3 and before[p].first_row_id is None and e.data_file.first_row_id is not None):
                continue
            # a file that first gets a row id after an upgrade to v3 is replaced by itself with the id
            changes.append(FileChange(added=False, file=before[p]))
        if v3 and e.data_file.content == DataFileContent.POSITION_DELETES and not e.data_file.is_deletion_vector:
            raise ValidationError(f"Cannot add position delete file {e.data_file.file_path} to a format version 3 "
                                  f"table: v3 tables take deletion vectors instead")
        if v3 and e.data_file.content == DataFileContent.DATA and e.data_file.first_row_id is None:
            raise ValidationError(f"Cannot add {e.data_file.file_path} to a format version 3 table: neither the file "
                                  f"nor its manifest has a first_row_id")
        if state.format_version >= 2 and data_seq not in (None, 0, seq):
            changes.append(FileChange(added=True, file=e.data_file, data_sequence_number=data_seq))
        else:
            changes.append(FileChange(added=True, file=e.data_file))
    changes += [FileChange(added=False, file=f) for f in removed]
    return tuple(changes)


def named_files(io: FileIO, commit: TableCommit) -> list[str]:
    """The files a commit names, as far as they can be read: each added snapshot's manifest list and the manifests
    it lists (for a refused commit, whose files become orphans to record)."""
    out: list[str] = []
    for snap in commit.snapshots():
        list_path = snap.get("manifest-list")
        if not isinstance(list_path, str):
            continue
        out.append(list_path)
        try:
            out += [m.manifest_path for m in read_manifest_list(io.read_bytes(list_path), list_path)]
        except (LogError, CorruptFileError, ValueError):
            continue
    return out


def file_paths(commit: TableCommit, client_snapshots: Mapping[int, ClientSnapshot]) -> list[str]:
    """Every file the client wrote for the commit (manifest lists, manifests), to record as staged."""
    out: list[str] = []
    for c in client_snapshots.values():
        out += c.written_files()
    return [os.fspath(p) for p in out]
