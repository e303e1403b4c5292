"""Typed, versioned events: the facts the log records, and their canonical encoding.

Layer: engine.state.events (pure values; imports engine.model only). Every event is a frozen
attrs class with a stable wire name (``TYPE``, Iceberg's metadata-update action name
where Iceberg has one) and a type version (``VERSION``). ``encode`` turns an event into
canonical JSON (sorted keys, no whitespace) plus its bulk parts (one JSON text per data
or delete file a snapshot adds or removes); ``decode`` reads them back, upcasting
older type versions. Python class paths never reach the log.
"""

from __future__ import annotations

import json
from typing import Any, ClassVar, Iterable, Mapping

import attrs

from engine.errors import IntegrityError, ValidationError
from engine.model.data_file import DataFile, data_file_from_json, data_file_to_json
from engine.model.partitioning import PartitionSpec
from engine.model.schema import Schema
from engine.model.sort_order import SortOrder
from engine.model.types import StructType
from engine.model.values import value_from_json, value_to_json

CATALOG_STREAM = "catalog"


def canonical_json(obj: Any) -> str:
    """The one JSON spelling of a value: sorted keys, no whitespace, UTF-8 kept as is."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def _names(value: Iterable[str]) -> tuple[str, ...]:
    """A namespace (or a list of names) as a tuple: typed, so that type checkers see what the field takes."""
    return tuple(value)


def _frozen_pairs(value: Mapping[str, str] | tuple[tuple[str, str], ...]) -> tuple[tuple[str, str], ...]:
    items = value.items() if isinstance(value, Mapping) else value
    return tuple(sorted((str(k), str(v)) for k, v in items))


@attrs.frozen(kw_only=True)
class Event:
    """Base of all events."""

    TYPE: ClassVar[str] = ""
    VERSION: ClassVar[int] = 1

    def payload(self) -> dict[str, Any]:
        raise NotImplementedError

    def parts(self) -> tuple[str, ...]:
        return ()


# ---------------------------------------------------------------- catalog stream


@attrs.frozen(kw_only=True)
class NamespaceCreated(Event):
    TYPE: ClassVar[str] = "create-namespace"
    namespace: tuple[str, ...] = attrs.field(converter=_names)
    properties: tuple[tuple[str, str], ...] = attrs.field(default=(), converter=_frozen_pairs)

    def payload(self) -> dict[str, Any]:
        return {"namespace": list(self.namespace), "properties": dict(self.properties)}

    @classmethod
    def from_payload(cls, p: dict[str, Any], parts: list[str]) -> NamespaceCreated:
        return cls(namespace=p["namespace"], properties=p["properties"])


@attrs.frozen(kw_only=True)
class NamespaceDropped(Event):
    """An empty namespace removed from the catalog."""

    TYPE: ClassVar[str] = "drop-namespace"
    namespace: tuple[str, ...] = attrs.field(converter=_names)

    def payload(self) -> dict[str, Any]:
        return {"namespace": list(self.namespace)}

    @classmethod
    def from_payload(cls, p: dict[str, Any], parts: list[str]) -> NamespaceDropped:
        return cls(namespace=p["namespace"])


@attrs.frozen(kw_only=True)
class NamespacePropertiesUpdated(Event):
    """A namespace's properties set (``updates``) and removed (``removals``)."""

    TYPE: ClassVar[str] = "update-namespace-properties"
    namespace: tuple[str, ...] = attrs.field(converter=_names)
    updates: tuple[tuple[str, str], ...] = attrs.field(default=(), converter=_frozen_pairs)
    removals: tuple[str, ...] = attrs.field(default=(), converter=lambda v: tuple(sorted(v)))

    def payload(self) -> dict[str, Any]:
        return {"namespace": list(self.namespace), "updates": dict(self.updates), "removals": list(self.removals)}

    @classmethod
    def from_payload(cls, p: dict[str, Any], parts: list[str]) -> NamespacePropertiesUpdated:
        return cls(namespace=p["namespace"], updates=p["updates"], removals=p["removals"])


@attrs.frozen(kw_only=True)
class TableRegistered(Event):
    """A table name now points at a table stream (the catalog's half of creating a table)."""

    TYPE: ClassVar[str] = "register-table"
    namespace: tuple[str, ...] = attrs.field(converter=_names)
    name: str
    table_uuid: str

    def payload(self) -> dict[str, Any]:
        return {"namespace": list(self.namespace), "name": self.name, "table-uuid": self.table_uuid}

    @classmethod
    def from_payload(cls, p: dict[str, Any], parts: list[str]) -> TableRegistered:
        return cls(namespace=p["namespace"], name=p["name"], table_uuid=p["table-uuid"])


@attrs.frozen(kw_only=True)
class TableRenamed(Event):
    """A table name moved to another (the table stream, its location and its files stay)."""

    TYPE: ClassVar[str] = "rename-table"
    namespace: tuple[str, ...] = attrs.field(converter=_names)
    name: str
    new_namespace: tuple[str, ...] = attrs.field(converter=_names)
    new_name: str
    table_uuid: str

    def payload(self) -> dict[str, Any]:
        return {"namespace": list(self.namespace), "name": self.name, "new-namespace": list(self.new_namespace),
                "new-name": self.new_name, "table-uuid": self.table_uuid}

    @classmethod
    def from_payload(cls, p: dict[str, Any], parts: list[str]) -> TableRenamed:
        return cls(namespace=p["namespace"], name=p["name"], new_namespace=p["new-namespace"],
                   new_name=p["new-name"], table_uuid=p["table-uuid"])


@attrs.frozen(kw_only=True)
class TableDropped(Event):
    """A table name no longer points at its stream (the log keeps the stream for time travel)."""

    TYPE: ClassVar[str] = "drop-table"
    namespace: tuple[str, ...] = attrs.field(converter=_names)
    name: str
    table_uuid: str
    purge: bool = False

    def payload(self) -> dict[str, Any]:
        return {"namespace": list(self.namespace), "name": self.name, "table-uuid": self.table_uuid,
                "purge": self.purge}

    @classmethod
    def from_payload(cls, p: dict[str, Any], parts: list[str]) -> TableDropped:
        return cls(namespace=p["namespace"], name=p["name"], table_uuid=p["table-uuid"], purge=p["purge"])


# ---------------------------------------------------------------- table streams


@attrs.frozen(kw_only=True)
class TableCreated(Event):
    """A new table with its first schema, partition spec, sort order and properties."""

    TYPE: ClassVar[str] = "create-table"
    table_uuid: str
    location: str
    format_version: int
    schema: Schema
    spec: PartitionSpec
    sort_order: SortOrder
    properties: tuple[tuple[str, str], ...] = attrs.field(default=(), converter=_frozen_pairs)
    #: the offset of icelog's metadata file numbers (a table registered in place over existing versions)
    metadata_base: int = 0
    #: the names of the files in the table's metadata folder when it was registered in place: the original
    #: writer's, which icelog never overwrites or deletes and ``verify`` does not call foreign
    original_metadata: tuple[str, ...] = attrs.field(default=(), converter=tuple)
    #: the other files the table's location held when it was registered (paths relative to the location), those
    #: its history takes over excepted: never the table's, so orphan removal leaves them alone
    original_files: tuple[str, ...] = attrs.field(default=(), converter=tuple)
    #: format version 3: the table's next row id when created (0; an imported table's ``next-row-id``)
    next_row_id: int | None = None

    def payload(self) -> dict[str, Any]:
        out = {
            "table-uuid": self.table_uuid,
            "location": self.location,
            "format-version": self.format_version,
            "schema": self.schema.to_json(),
            "partition-spec": self.spec.to_json(),
            "sort-order": self.sort_order.to_json(),
            "properties": dict(self.properties),
        }
        if self.metadata_base:
            out["metadata-base"] = self.metadata_base
        if self.original_metadata:
            out["original-metadata"] = list(self.original_metadata)
        if self.original_files:
            out["original-files"] = list(self.original_files)
        if self.next_row_id is not None:
            out["next-row-id"] = self.next_row_id
        return out

    @classmethod
    def from_payload(cls, p: dict[str, Any], parts: list[str]) -> TableCreated:
        return cls(table_uuid=p["table-uuid"], location=p["location"], format_version=p["format-version"],
                   schema=Schema.from_json(p["schema"]), spec=PartitionSpec.from_json(p["partition-spec"]),
                   sort_order=SortOrder.from_json(p["sort-order"]), properties=p["properties"],
                   metadata_base=int(p.get("metadata-base", 0)),
                   original_metadata=tuple(p.get("original-metadata", ())),
                   original_files=tuple(p.get("original-files", ())), next_row_id=p.get("next-row-id"))


@attrs.frozen(kw_only=True)
class PropertiesSet(Event):
    TYPE: ClassVar[str] = "set-properties"
    updates: tuple[tuple[str, str], ...] = attrs.field(converter=_frozen_pairs)

    def payload(self) -> dict[str, Any]:
        return {"updates": dict(self.updates)}

    @classmethod
    def from_payload(cls, p: dict[str, Any], parts: list[str]) -> PropertiesSet:
        return cls(updates=p["updates"])


@attrs.frozen(kw_only=True)
class PropertiesRemoved(Event):
    TYPE: ClassVar[str] = "remove-properties"
    removals: tuple[str, ...] = attrs.field(converter=lambda v: tuple(sorted(v)))

    def payload(self) -> dict[str, Any]:
        return {"removals": list(self.removals)}

    @classmethod
    def from_payload(cls, p: dict[str, Any], parts: list[str]) -> PropertiesRemoved:
        return cls(removals=p["removals"])


@attrs.frozen(kw_only=True)
class FileChange:
    """One bulk part of a snapshot event: a data or delete file added or removed.

    ``data_sequence_number`` is an added file's explicit data sequence number (what Java's
    ``ManifestWriter.add(file, dataSequenceNumber)`` records: compaction keeping the starting sequence
    number, imported entries); None means the file takes its snapshot's sequence number. It is encoded
    under ``"data-sequence-number"`` only when set, so parts written before it existed keep their bytes.
    """

    added: bool
    file: DataFile
    data_sequence_number: int | None = None

    def encode(self, partition_type: StructType) -> str:
        """The part's JSON text; a partition tuple that does not fit its spec's partition type is refused (no
        reader or renderer could place it), before anything is written."""
        if len(self.file.partition) != len(partition_type.fields):
            raise ValidationError(f"Cannot record file {self.file.file_path}: its partition has "
                                  f"{len(self.file.partition)} value(s), spec {self.file.spec_id} has "
                                  f"{len(partition_type.fields)} field(s)")
        values = [value_to_json(f.field_type, v) if v is not None else None
                  for f, v in zip(partition_type.fields, self.file.partition)]
        obj: dict[str, Any] = {"change": "add" if self.added else "remove",
                               "file": data_file_to_json(self.file, values)}
        if self.data_sequence_number is not None:
            obj["data-sequence-number"] = self.data_sequence_number
        return canonical_json(obj)


def decode_file_change(text: str, partition_types: Mapping[int, StructType]) -> FileChange:
    """Read one bulk part back; ``partition_types`` maps spec id to its partition struct."""
    obj = json.loads(text)
    f = obj["file"]
    ptype = partition_types[f["spec-id"]]
    values = tuple(value_from_json(field.field_type, v) if v is not None else None
                   for field, v in zip(ptype.fields, f["partition"]))
    seq = obj.get("data-sequence-number")
    if seq is not None and (not isinstance(seq, int) or isinstance(seq, bool)):
        raise ValidationError(f"Cannot decode file change of {f.get('file-path')}: data sequence number {seq!r}")
    return FileChange(added=obj["change"] == "add", file=data_file_from_json(f, values), data_sequence_number=seq)


@attrs.frozen(kw_only=True)
class SnapshotAdded(Event):
    """A snapshot committed to a branch: Iceberg's add-snapshot plus set-snapshot-ref, with its file changes.

    The files themselves travel as bulk parts (``changes``), so the payload stays small and
    a commit costs O(files it changes).
    """

    TYPE: ClassVar[str] = "add-snapshot"
    snapshot_id: int
    parent_snapshot_id: int | None
    sequence_number: int
    timestamp_ms: int
    operation: str
    summary: tuple[tuple[str, str], ...] = attrs.field(converter=lambda v: tuple(
        (str(k), str(x)) for k, x in (v.items() if isinstance(v, Mapping) else v)))
    schema_id: int
    branch: str = "main"
    changes: tuple[FileChange, ...] = attrs.field(default=(), converter=tuple)
    partition_types: Mapping[int, StructType] | None = attrs.field(default=None, eq=False, repr=False)
    #: format version 3 row lineage: the snapshot's first row id and the row ids it assigned (None before v3)
    first_row_id: int | None = None
    added_rows: int | None = None

    def payload(self) -> dict[str, Any]:
        out = {
            "snapshot-id": self.snapshot_id,
            "parent-snapshot-id": self.parent_snapshot_id,
            "sequence-number": self.sequence_number,
            "timestamp-ms": self.timestamp_ms,
            "operation": self.operation,
            "summary": [[k, v] for k, v in self.summary],
            "schema-id": self.schema_id,
            "branch": self.branch,
        }
        if self.first_row_id is not None:  # only in v3: older payloads keep their bytes
            out["first-row-id"] = self.first_row_id
            out["added-rows"] = self.added_rows
        return out

    def parts(self) -> tuple[str, ...]:
        if self.changes and self.partition_types is None:
            raise ValidationError("Cannot encode snapshot: partition types are needed to encode its files")
        return tuple(c.encode(self.partition_types[c.file.spec_id]) for c in self.changes)  # type: ignore[index]

    @classmethod
    def from_payload(cls, p: dict[str, Any], parts: list[str]) -> SnapshotAdded:
        # Files are decoded lazily by the reader that needs them (it knows the partition types).
        return cls(snapshot_id=p["snapshot-id"], parent_snapshot_id=p["parent-snapshot-id"],
                   sequence_number=p["sequence-number"], timestamp_ms=p["timestamp-ms"], operation=p["operation"],
                   summary=p["summary"], schema_id=p["schema-id"], branch=p["branch"],
                   first_row_id=p.get("first-row-id"), added_rows=p.get("added-rows"))


@attrs.frozen(kw_only=True)
class SchemaAdded(Event):
    """A new schema (its id assigned by the builder); ``last_column_id`` is the table's new highest field id."""

    TYPE: ClassVar[str] = "add-schema"
    schema: Schema
    last_column_id: int

    def payload(self) -> dict[str, Any]:
        return {"schema": self.schema.to_json(), "last-column-id": self.last_column_id}

    @classmethod
    def from_payload(cls, p: dict[str, Any], parts: list[str]) -> SchemaAdded:
        return cls(schema=Schema.from_json(p["schema"]), last_column_id=p["last-column-id"])


@attrs.frozen(kw_only=True)
class CurrentSchemaSet(Event):
    TYPE: ClassVar[str] = "set-current-schema"
    schema_id: int

    def payload(self) -> dict[str, Any]:
        return {"schema-id": self.schema_id}

    @classmethod
    def from_payload(cls, p: dict[str, Any], parts: list[str]) -> CurrentSchemaSet:
        return cls(schema_id=p["schema-id"])


@attrs.frozen(kw_only=True)
class SpecAdded(Event):
    TYPE: ClassVar[str] = "add-spec"
    spec: PartitionSpec

    def payload(self) -> dict[str, Any]:
        return {"spec": self.spec.to_json()}

    @classmethod
    def from_payload(cls, p: dict[str, Any], parts: list[str]) -> SpecAdded:
        return cls(spec=PartitionSpec.from_json(p["spec"]))


@attrs.frozen(kw_only=True)
class DefaultSpecSet(Event):
    TYPE: ClassVar[str] = "set-default-spec"
    spec_id: int

    def payload(self) -> dict[str, Any]:
        return {"spec-id": self.spec_id}

    @classmethod
    def from_payload(cls, p: dict[str, Any], parts: list[str]) -> DefaultSpecSet:
        return cls(spec_id=p["spec-id"])


@attrs.frozen(kw_only=True)
class SortOrderAdded(Event):
    TYPE: ClassVar[str] = "add-sort-order"
    sort_order: SortOrder

    def payload(self) -> dict[str, Any]:
        return {"sort-order": self.sort_order.to_json()}

    @classmethod
    def from_payload(cls, p: dict[str, Any], parts: list[str]) -> SortOrderAdded:
        return cls(sort_order=SortOrder.from_json(p["sort-order"]))


@attrs.frozen(kw_only=True)
class DefaultSortOrderSet(Event):
    TYPE: ClassVar[str] = "set-default-sort-order"
    sort_order_id: int

    def payload(self) -> dict[str, Any]:
        return {"sort-order-id": self.sort_order_id}

    @classmethod
    def from_payload(cls, p: dict[str, Any], parts: list[str]) -> DefaultSortOrderSet:
        return cls(sort_order_id=p["sort-order-id"])


@attrs.frozen(kw_only=True)
class FormatVersionUpgraded(Event):
    TYPE: ClassVar[str] = "upgrade-format-version"
    format_version: int

    def payload(self) -> dict[str, Any]:
        return {"format-version": self.format_version}

    @classmethod
    def from_payload(cls, p: dict[str, Any], parts: list[str]) -> FormatVersionUpgraded:
        return cls(format_version=p["format-version"])


@attrs.frozen(kw_only=True)
class RefSet(Event):
    """A branch or tag now points at a snapshot (Iceberg's set-snapshot-ref), with its retention settings."""

    TYPE: ClassVar[str] = "set-snapshot-ref"
    name: str
    snapshot_id: int
    ref_type: str = "branch"
    min_snapshots_to_keep: int | None = None
    max_snapshot_age_ms: int | None = None
    max_ref_age_ms: int | None = None

    def payload(self) -> dict[str, Any]:
        return {"ref-name": self.name, "snapshot-id": self.snapshot_id, "type": self.ref_type,
                "min-snapshots-to-keep": self.min_snapshots_to_keep,
                "max-snapshot-age-ms": self.max_snapshot_age_ms, "max-ref-age-ms": self.max_ref_age_ms}

    @classmethod
    def from_payload(cls, p: dict[str, Any], parts: list[str]) -> RefSet:
        return cls(name=p["ref-name"], snapshot_id=p["snapshot-id"], ref_type=p["type"],
                   min_snapshots_to_keep=p.get("min-snapshots-to-keep"),
                   max_snapshot_age_ms=p.get("max-snapshot-age-ms"), max_ref_age_ms=p.get("max-ref-age-ms"))


@attrs.frozen(kw_only=True)
class RefRemoved(Event):
    TYPE: ClassVar[str] = "remove-snapshot-ref"
    name: str

    def payload(self) -> dict[str, Any]:
        return {"ref-name": self.name}

    @classmethod
    def from_payload(cls, p: dict[str, Any], parts: list[str]) -> RefRemoved:
        return cls(name=p["ref-name"])


@attrs.frozen(kw_only=True)
class SnapshotsRemoved(Event):
    """Snapshots expired from table metadata (the log keeps them for time travel on the log)."""

    TYPE: ClassVar[str] = "remove-snapshots"
    snapshot_ids: tuple[int, ...] = attrs.field(converter=lambda v: tuple(sorted(v)))

    def payload(self) -> dict[str, Any]:
        return {"snapshot-ids": list(self.snapshot_ids)}

    @classmethod
    def from_payload(cls, p: dict[str, Any], parts: list[str]) -> SnapshotsRemoved:
        return cls(snapshot_ids=p["snapshot-ids"])


@attrs.frozen(kw_only=True)
class SnapshotLogSet(Event):
    """The snapshot log (``snapshot-log``: when each snapshot became current on main) a registered table's metadata
    held, in place of the one its imported snapshots make: rollbacks and current-snapshot changes keep their times,
    so time travel by timestamp reads what it read before."""

    TYPE: ClassVar[str] = "set-snapshot-log"
    entries: tuple[tuple[int, int], ...] = attrs.field(converter=lambda v: tuple((int(t), int(s)) for t, s in v))

    def payload(self) -> dict[str, Any]:
        return {"snapshot-log": [{"timestamp-ms": t, "snapshot-id": s} for t, s in self.entries]}

    @classmethod
    def from_payload(cls, p: dict[str, Any], parts: list[str]) -> SnapshotLogSet:
        return cls(entries=[(e["timestamp-ms"], e["snapshot-id"]) for e in p["snapshot-log"]])


_EVENT_TYPES: dict[str, type[Event]] = {
    cls.TYPE: cls
    for cls in (NamespaceCreated, NamespaceDropped, NamespacePropertiesUpdated, TableRegistered, TableRenamed, TableDropped, TableCreated, PropertiesSet, PropertiesRemoved, SnapshotAdded,
                SchemaAdded, CurrentSchemaSet, SpecAdded, DefaultSpecSet, SortOrderAdded, DefaultSortOrderSet,
                FormatVersionUpgraded, RefSet, RefRemoved, SnapshotsRemoved, SnapshotLogSet)
}


def encode(event: Event) -> tuple[str, int, str, tuple[str, ...]]:
    """``(type, type_version, payload_json, parts)`` for the log."""
    return event.TYPE, event.VERSION, canonical_json(event.payload()), event.parts()


def decode(type_name: str, type_version: int, payload: str, parts: list[str] | None = None, *,
           position: int | None = None) -> Event:
    """Rebuild an event from the log. Older type versions are upcast here, never rewritten in the log.

    :param position: the event's log position, named when its payload cannot be read
    :raises IntegrityError: a payload that is not the event's JSON (a damaged log)
    """
    where = f"at log position {position}" if position is not None else "from the log"
    cls = _EVENT_TYPES.get(type_name)
    if cls is None:
        raise IntegrityError(f"Cannot decode the event {where}: unknown event type {type_name!r}",
                             position=position)
    if type_version > cls.VERSION:
        raise ValidationError(f"Cannot decode event: {type_name} version {type_version} is newer than this icelog")
    try:
        return cls.from_payload(json.loads(payload), parts or [])  # type: ignore[attr-defined]
    except (ValueError, KeyError, TypeError, AttributeError, IndexError) as e:
        raise IntegrityError(f"Cannot decode the {type_name} event {where}: its payload is damaged "
                             f"({type(e).__name__}: {str(e)[:200]})", position=position) from e
