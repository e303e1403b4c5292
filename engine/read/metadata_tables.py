"""Iceberg's metadata tables as Arrow tables, plus the table's event log: ``table.inspect.snapshots()``...

Layer: engine (reads TableState, the StateStore's log-derived file entries and the storage log; reads the
manifests and manifest lists that the projector published, through projections.manifest_reader and the catalog's
FileIO). Column names, order and types follow Iceberg Java's metadata tables (``SnapshotsTable``,
``HistoryTable``, ``RefsTable``, ``ManifestsTable``, ``AllManifestsTable``, ``ManifestEntriesTable``,
``FilesTable``, ``DataFilesTable``, ``DeleteFilesTable``, ``PartitionsTable``, ``MetadataLogEntriesTable``)
as Spark shows them for Iceberg 1.10, except ``readable_metrics``, which is omitted.

Where the facts live:

- snapshots, history, refs, metadata_log_entries: the table state folded from the log;
- files, data_files, delete_files, partitions: the files live in the snapshot, from the log
  (:meth:`StateStore.live_entries`), so they need no published file;
- manifests, all_manifests, entries: the published manifest lists and manifests (what readers see);
- log: the table's stream in the event log.

Partition structs use the table's unified partition type (every spec's fields, by field id), as Java does,
and the ``partition`` column is left out when that type has no field (and ``partitions()``'s ``spec_id`` too).
"""

from __future__ import annotations

import json
import math
from typing import Any, Iterable, Protocol

import attrs
import pyarrow as pa

from engine.errors import ValidationError
from engine.model.arrow_schema import arrow_type_for
from engine.model.data_file import (
    DataFile,
    DataFileContent,
    ManifestContent,
    ManifestEntry,
    ManifestFile,
)
from engine.model.types import IcebergType, NestedField, StructType, UUIDType
from engine.model.values import NON_FINITE_JSON, from_bytes
from engine.state.store import StateStore
from engine.state.table_state import Snapshot, TableState
from projections import layout
from projections.manifest_reader import (inherit_first_row_ids, inherits_sequence_numbers, read_manifest,
                                        read_manifest_list)
from storage.files import FileIO

TIMESTAMPTZ = pa.timestamp("us", tz="UTC")

SNAPSHOTS_SCHEMA = pa.schema([
    pa.field("committed_at", TIMESTAMPTZ, nullable=False),
    pa.field("snapshot_id", pa.int64(), nullable=False),
    pa.field("parent_id", pa.int64()),
    pa.field("operation", pa.string()),
    pa.field("manifest_list", pa.string()),
    pa.field("summary", pa.map_(pa.string(), pa.string())),
])

HISTORY_SCHEMA = pa.schema([
    pa.field("made_current_at", TIMESTAMPTZ, nullable=False),
    pa.field("snapshot_id", pa.int64(), nullable=False),
    pa.field("parent_id", pa.int64()),
    pa.field("is_current_ancestor", pa.bool_(), nullable=False),
])

REFS_SCHEMA = pa.schema([
    pa.field("name", pa.string(), nullable=False),
    pa.field("type", pa.string(), nullable=False),
    pa.field("snapshot_id", pa.int64(), nullable=False),
    pa.field("max_reference_age_in_ms", pa.int64()),
    pa.field("min_snapshots_to_keep", pa.int32()),
    pa.field("max_snapshot_age_in_ms", pa.int64()),
])

PARTITION_SUMMARY_TYPE = pa.struct([
    pa.field("contains_null", pa.bool_(), nullable=False),
    pa.field("contains_nan", pa.bool_()),
    pa.field("lower_bound", pa.string()),
    pa.field("upper_bound", pa.string()),
])

MANIFESTS_SCHEMA = pa.schema([
    pa.field("content", pa.int32(), nullable=False),
    pa.field("path", pa.string(), nullable=False),
    pa.field("length", pa.int64(), nullable=False),
    pa.field("partition_spec_id", pa.int32(), nullable=False),
    pa.field("added_snapshot_id", pa.int64(), nullable=False),
    pa.field("added_data_files_count", pa.int32(), nullable=False),
    pa.field("existing_data_files_count", pa.int32(), nullable=False),
    pa.field("deleted_data_files_count", pa.int32(), nullable=False),
    pa.field("added_delete_files_count", pa.int32(), nullable=False),
    pa.field("existing_delete_files_count", pa.int32(), nullable=False),
    pa.field("deleted_delete_files_count", pa.int32(), nullable=False),
    pa.field("partition_summaries", pa.list_(pa.field("item", PARTITION_SUMMARY_TYPE, nullable=False))),
])

ALL_MANIFESTS_SCHEMA = MANIFESTS_SCHEMA.append(pa.field("reference_snapshot_id", pa.int64(), nullable=False))

METADATA_LOG_ENTRIES_SCHEMA = pa.schema([
    pa.field("timestamp", TIMESTAMPTZ, nullable=False),
    pa.field("file", pa.string(), nullable=False),
    pa.field("latest_snapshot_id", pa.int64()),
    pa.field("latest_schema_id", pa.int32()),
    pa.field("latest_sequence_number", pa.int64()),
])

LOG_SCHEMA = pa.schema([
    pa.field("position", pa.int64(), nullable=False),
    pa.field("version", pa.int64(), nullable=False),
    pa.field("type", pa.string(), nullable=False),
    pa.field("time", pa.timestamp("ms", tz="UTC"), nullable=False),
    pa.field("actor", pa.string()),
    pa.field("message", pa.string()),
    pa.field("commit_id", pa.string(), nullable=False),
    pa.field("payload", pa.string(), nullable=False),
])

_INT_LONG_MAP = pa.map_(pa.int32(), pa.int64())
_INT_BINARY_MAP = pa.map_(pa.int32(), pa.binary())


def _micros(ms: int) -> int:
    return ms * 1000


def unified_partition_type(state: TableState) -> StructType:
    """Every spec's partition fields, one per field id (the newest spec's name and type), by field id: the
    ``partition`` struct of Java's files, entries and partitions tables."""
    fields: dict[int, NestedField] = {}
    for spec in state.specs:
        try:
            ptype = state.partition_type_of(spec)
        except ValidationError:
            continue  # a source column dropped since: its partition field cannot be typed with this schema
        for f in ptype.fields:
            fields[f.field_id] = f
    return StructType(tuple(fields[k] for k in sorted(fields)))


def _arrow_partition_value(t: IcebergType, v: Any) -> Any:
    if v is not None and isinstance(t, UUIDType):
        return v.bytes
    return v


class _Partitions:
    """Converts a file's partition tuple (in its own spec's order) to the unified struct as a dict."""

    def __init__(self, state: TableState) -> None:
        self.type = unified_partition_type(state)
        self.arrow_type = pa.struct([pa.field(f.name, arrow_type_for(f.field_type)) for f in self.type.fields])
        self._ids = {spec.spec_id: tuple(f.field_id for f in spec.fields) for spec in state.specs}
        self._by_id = {f.field_id: f for f in self.type.fields}

    @property
    def empty(self) -> bool:
        return not self.type.fields

    def as_dict(self, f: DataFile) -> dict[str, Any]:
        values = dict(zip(self._ids.get(f.spec_id, ()), f.partition))
        return {fld.name: _arrow_partition_value(fld.field_type, values.get(fld.field_id)) for fld in self.type.fields}

    def key(self, f: DataFile) -> tuple[Any, ...]:
        values = dict(zip(self._ids.get(f.spec_id, ()), f.partition))
        return tuple(values.get(fld.field_id) for fld in self.type.fields)


def _data_file_fields(partition: pa.DataType | None) -> list[pa.Field]:
    fields = [
        pa.field("content", pa.int32(), nullable=False),
        pa.field("file_path", pa.string(), nullable=False),
        pa.field("file_format", pa.string(), nullable=False),
        pa.field("spec_id", pa.int32(), nullable=False),
    ]
    if partition is not None:
        fields.append(pa.field("partition", partition, nullable=False))
    fields += [
        pa.field("record_count", pa.int64(), nullable=False),
        pa.field("file_size_in_bytes", pa.int64(), nullable=False),
        pa.field("column_sizes", _INT_LONG_MAP),
        pa.field("value_counts", _INT_LONG_MAP),
        pa.field("null_value_counts", _INT_LONG_MAP),
        pa.field("nan_value_counts", _INT_LONG_MAP),
        pa.field("lower_bounds", _INT_BINARY_MAP),
        pa.field("upper_bounds", _INT_BINARY_MAP),
        pa.field("key_metadata", pa.binary()),
        pa.field("split_offsets", pa.list_(pa.field("element", pa.int64(), nullable=False))),
        pa.field("equality_ids", pa.list_(pa.field("element", pa.int32(), nullable=False))),
        pa.field("sort_order_id", pa.int32()),
        pa.field("first_row_id", pa.int64()),
        pa.field("referenced_data_file", pa.string()),
        pa.field("content_offset", pa.int64()),
        pa.field("content_size_in_bytes", pa.int64()),
    ]
    return fields


def _data_file_row(f: DataFile, parts: _Partitions) -> dict[str, Any]:
    def pairs(v: tuple[tuple[int, Any], ...] | None) -> list[tuple[int, Any]] | None:
        return None if v is None else list(v)

    row: dict[str, Any] = {
        "content": int(f.content), "file_path": f.file_path, "file_format": f.file_format, "spec_id": f.spec_id,
    }
    if not parts.empty:
        row["partition"] = parts.as_dict(f)
    row.update({
        "record_count": f.record_count, "file_size_in_bytes": f.file_size_in_bytes,
        "column_sizes": pairs(f.column_sizes), "value_counts": pairs(f.value_counts),
        "null_value_counts": pairs(f.null_value_counts), "nan_value_counts": pairs(f.nan_value_counts),
        "lower_bounds": pairs(f.lower_bounds), "upper_bounds": pairs(f.upper_bounds),
        "key_metadata": f.key_metadata,
        "split_offsets": None if f.split_offsets is None else list(f.split_offsets),
        "equality_ids": None if f.equality_ids is None else list(f.equality_ids),
        "sort_order_id": f.sort_order_id, "first_row_id": f.first_row_id,
        "referenced_data_file": f.referenced_data_file,
        "content_offset": f.content_offset, "content_size_in_bytes": f.content_size_in_bytes,
    })
    return row


def _java_row_ids(entries: list[ManifestEntry], first_row_id: int | None) -> list[ManifestEntry]:
    """A published manifest's entries with first row ids as Java's ``ManifestReader`` gives them: live data files
    without one inherit from the manifest's ``first_row_id``, and a manifest without one (in its list) gives every
    entry none."""
    if first_row_id is not None:
        return inherit_first_row_ids(entries, first_row_id)
    return [e if e.data_file.first_row_id is None else
            attrs.evolve(e, data_file=attrs.evolve(e.data_file, first_row_id=None)) for e in entries]


class InspectTable:
    """The metadata tables of one table, read at the table's current state (PyIceberg's ``table.inspect``).

    ::

        t.inspect.snapshots()          # pyarrow.Table: committed_at, snapshot_id, parent_id, operation, ...
        t.inspect.files()              # the live data and delete files of the current snapshot
        t.inspect.entries(snapshot_id=s.snapshot_id)

    ``snapshot_id`` arguments default to the current snapshot of ``main``; a table without one gives empty
    tables with the full schema.

    :param state: the table's state
    :param store: the catalog's state store (live files, and the log)
    :param io: the catalog's FileIO (manifest lists and manifests are read through it)
    """

    def __init__(self, state: TableState, store: StateStore, io: FileIO) -> None:
        self.state = state
        self.store = store
        self.io = io

    # ------------------------------------------------------------ helpers
    def _snapshot(self, snapshot_id: int | None) -> Snapshot | None:
        if snapshot_id is None:
            return self.state.current_snapshot
        snap = self.state.snapshot_by_id(snapshot_id)
        if snap is None:
            raise ValidationError(f"Cannot inspect snapshot: no snapshot with id {snapshot_id}")
        return snap

    def manifest_list_path(self, snap: Snapshot) -> str:
        """Where the projector published ``snap``'s manifest list."""
        return layout.manifest_list_file(self.state.location, snap.snapshot_id, snap.commit_id)

    def _manifest_files(self, snap: Snapshot) -> list[ManifestFile]:
        path = self.manifest_list_path(snap)
        return read_manifest_list(self.io.read_bytes(path), path)

    def _manifest_entries(self, m: ManifestFile) -> list[ManifestEntry]:
        _, entries = read_manifest(self.io.read_bytes(m.manifest_path), m.manifest_path)
        return entries

    def _snapshot_ts(self, snapshot_id: int | None) -> int | None:
        snap = None if snapshot_id is None else self.state.snapshot_by_id(snapshot_id)
        return None if snap is None else _micros(snap.timestamp_ms)

    # ------------------------------------------------------------ from the state
    def snapshots(self) -> pa.Table:
        """Every snapshot of the table metadata, oldest first (Java's ``SnapshotsTable``)."""
        rows = [{
            "committed_at": _micros(s.timestamp_ms), "snapshot_id": s.snapshot_id, "parent_id": s.parent_snapshot_id,
            "operation": s.operation, "manifest_list": self.manifest_list_path(s),
            "summary": [(k, v) for k, v in s.summary if k != "operation"],
        } for s in self.state.snapshots]
        return pa.Table.from_pylist(rows, schema=SNAPSHOTS_SCHEMA)

    def history(self) -> pa.Table:
        """The snapshot log of ``main`` (Java's ``HistoryTable``): when each snapshot became current."""
        state = self.state
        current = state.current_snapshot
        ancestors = {s.snapshot_id for s in state.ancestors(current.snapshot_id if current else None)}
        rows = []
        for ts, snapshot_id in state.snapshot_log:
            snap = state.snapshot_by_id(snapshot_id)
            rows.append({"made_current_at": _micros(ts), "snapshot_id": snapshot_id,
                         "parent_id": None if snap is None else snap.parent_snapshot_id,
                         "is_current_ancestor": snapshot_id in ancestors})
        return pa.Table.from_pylist(rows, schema=HISTORY_SCHEMA)

    def refs(self) -> pa.Table:
        """Branches and tags by name (Java's ``RefsTable``; ``type`` is ``BRANCH`` or ``TAG``)."""
        rows = [{"name": name, "type": ref.type.upper(), "snapshot_id": ref.snapshot_id,
                 "max_reference_age_in_ms": ref.max_ref_age_ms, "min_snapshots_to_keep": ref.min_snapshots_to_keep,
                 "max_snapshot_age_in_ms": ref.max_snapshot_age_ms}
                for name, ref in sorted(self.state.refs)]
        return pa.Table.from_pylist(rows, schema=REFS_SCHEMA)

    def metadata_log_entries(self) -> pa.Table:
        """Every metadata.json the table's metadata log names, then the current one (Java's
        ``MetadataLogEntriesTable``), each with the snapshot that was current at its time."""
        state = self.state
        entries = list(state.metadata_log) + [(state.last_updated_ms, state.version)]
        rows = []
        for ts, version in entries:
            snapshot_id = None
            for log_ts, log_id in state.snapshot_log:
                if log_ts <= ts:
                    snapshot_id = log_id
            snap = None if snapshot_id is None else state.snapshot_by_id(snapshot_id)
            rows.append({"timestamp": _micros(ts), "file": layout.metadata_file_of(state, version),
                         "latest_snapshot_id": snapshot_id,
                         "latest_schema_id": None if snap is None else snap.schema_id,
                         "latest_sequence_number": None if snap is None else snap.sequence_number})
        return pa.Table.from_pylist(rows, schema=METADATA_LOG_ENTRIES_SCHEMA)

    # ------------------------------------------------------------ files, from the log
    def _files_schema(self, parts: _Partitions) -> pa.Schema:
        return pa.schema(_data_file_fields(None if parts.empty else parts.arrow_type))

    def _files(self, snapshot_id: int | None, contents: Iterable[DataFileContent]) -> pa.Table:
        wanted = set(contents)
        parts = _Partitions(self.state)
        snap = self._snapshot(snapshot_id)
        live = self.store.live_entries(self.state, snap.snapshot_id) if snap else []
        rows = [_data_file_row(e.file, parts) for e in live if e.file.content in wanted]
        return pa.Table.from_pylist(rows, schema=self._files_schema(parts))

    def files(self, snapshot_id: int | None = None) -> pa.Table:
        """Data and delete files live in the snapshot (Java's ``FilesTable``, without ``readable_metrics``)."""
        return self._files(snapshot_id, DataFileContent)

    def data_files(self, snapshot_id: int | None = None) -> pa.Table:
        """Data files live in the snapshot (Java's ``DataFilesTable``)."""
        return self._files(snapshot_id, (DataFileContent.DATA,))

    def delete_files(self, snapshot_id: int | None = None) -> pa.Table:
        """Position and equality delete files live in the snapshot (Java's ``DeleteFilesTable``)."""
        return self._files(snapshot_id, (DataFileContent.POSITION_DELETES, DataFileContent.EQUALITY_DELETES))

    def partitions(self, snapshot_id: int | None = None) -> pa.Table:
        """Per partition of the unified partition type: data and delete file counts and sizes, and the newest
        snapshot that added a live file to it (Java's ``PartitionsTable``)."""
        parts = _Partitions(self.state)
        snap = self._snapshot(snapshot_id)
        live = self.store.live_entries(self.state, snap.snapshot_id) if snap else []
        groups: dict[tuple[Any, ...], dict[str, Any]] = {}
        for e in live:
            f = e.file
            key = parts.key(f)
            g = groups.get(key)
            if g is None:
                g = groups[key] = {
                    "partition": parts.as_dict(f), "spec_id": f.spec_id, "record_count": 0, "file_count": 0,
                    "total_data_file_size_in_bytes": 0, "position_delete_record_count": 0,
                    "position_delete_file_count": 0, "equality_delete_record_count": 0,
                    "equality_delete_file_count": 0, "last_updated_at": None, "last_updated_snapshot_id": None}
            g["spec_id"] = f.spec_id
            if f.content == DataFileContent.DATA:
                g["record_count"] += f.record_count
                g["file_count"] += 1
                g["total_data_file_size_in_bytes"] += f.file_size_in_bytes
            elif f.content == DataFileContent.POSITION_DELETES:
                g["position_delete_record_count"] += f.record_count
                g["position_delete_file_count"] += 1
            else:
                g["equality_delete_record_count"] += f.record_count
                g["equality_delete_file_count"] += 1
            ts = self._snapshot_ts(e.snapshot_id)
            if ts is not None and (g["last_updated_at"] is None or ts > g["last_updated_at"]):
                g["last_updated_at"] = ts
                g["last_updated_snapshot_id"] = e.snapshot_id
        # Java's PartitionsTable keeps neither partition nor spec_id when the unified partition type has no field
        fields = [] if parts.empty else [pa.field("partition", parts.arrow_type, nullable=False),
                                         pa.field("spec_id", pa.int32(), nullable=False)]
        fields += [
            pa.field("record_count", pa.int64(), nullable=False),
            pa.field("file_count", pa.int32(), nullable=False),
            pa.field("total_data_file_size_in_bytes", pa.int64(), nullable=False),
            pa.field("position_delete_record_count", pa.int64(), nullable=False),
            pa.field("position_delete_file_count", pa.int32(), nullable=False),
            pa.field("equality_delete_record_count", pa.int64(), nullable=False),
            pa.field("equality_delete_file_count", pa.int32(), nullable=False),
            pa.field("last_updated_at", TIMESTAMPTZ),
            pa.field("last_updated_snapshot_id", pa.int64()),
        ]
        rows = list(groups.values())
        if parts.empty:
            for r in rows:
                del r["partition"], r["spec_id"]
        return pa.Table.from_pylist(rows, schema=pa.schema(fields))

    # ------------------------------------------------------------ from the published manifests
    def _summary_rows(self, m: ManifestFile) -> list[dict[str, Any]] | None:
        if m.partitions is None:
            return None
        spec = self.state.spec_by_id(m.partition_spec_id)
        try:
            ptype = self.state.partition_type_of(spec)
        except ValidationError:
            ptype = None
        out = []
        for i, s in enumerate(m.partitions):
            lower = upper = None
            if ptype is not None and i < len(spec.fields):
                # as Java's ManifestsTable: a missing bound (every value null, a void field) is rendered too, and
                # every transform renders null as "null"
                t, transform = ptype.fields[i].field_type, spec.fields[i].transform
                lower = transform.to_human_string(t, None if s.lower_bound is None else from_bytes(t, s.lower_bound))
                upper = transform.to_human_string(t, None if s.upper_bound is None else from_bytes(t, s.upper_bound))
            out.append({"contains_null": s.contains_null, "contains_nan": s.contains_nan,
                        "lower_bound": lower, "upper_bound": upper})
        return out

    def _manifest_row(self, m: ManifestFile) -> dict[str, Any]:
        data = m.content == ManifestContent.DATA

        def count(v: int | None, want_data: bool) -> int:
            return (v or 0) if data == want_data else 0

        return {
            "content": int(m.content), "path": m.manifest_path, "length": m.manifest_length,
            "partition_spec_id": m.partition_spec_id, "added_snapshot_id": m.added_snapshot_id,
            "added_data_files_count": count(m.added_files_count, True),
            "existing_data_files_count": count(m.existing_files_count, True),
            "deleted_data_files_count": count(m.deleted_files_count, True),
            "added_delete_files_count": count(m.added_files_count, False),
            "existing_delete_files_count": count(m.existing_files_count, False),
            "deleted_delete_files_count": count(m.deleted_files_count, False),
            "partition_summaries": self._summary_rows(m),
        }

    def manifests(self, snapshot_id: int | None = None) -> pa.Table:
        """The manifests of the snapshot's published manifest list (Java's ``ManifestsTable``)."""
        snap = self._snapshot(snapshot_id)
        rows = [self._manifest_row(m) for m in self._manifest_files(snap)] if snap else []
        return pa.Table.from_pylist(rows, schema=MANIFESTS_SCHEMA)

    def all_manifests(self) -> pa.Table:
        """The manifests of every snapshot's manifest list, each with the snapshot that lists it
        (Java's ``AllManifestsTable``; a manifest listed by several snapshots gives several rows)."""
        rows = []
        for snap in self.state.snapshots:
            for m in self._manifest_files(snap):
                rows.append(self._manifest_row(m) | {"reference_snapshot_id": snap.snapshot_id})
        return pa.Table.from_pylist(rows, schema=ALL_MANIFESTS_SCHEMA)

    def entries(self, snapshot_id: int | None = None) -> pa.Table:
        """Every entry (added, existing and deleted) of the snapshot's manifests, with inherited snapshot ids,
        sequence numbers and first row ids filled in (Java's ``ManifestEntriesTable``, without
        ``readable_metrics``)."""
        parts = _Partitions(self.state)
        snap = self._snapshot(snapshot_id)
        rows = []
        for m in self._manifest_files(snap) if snap else []:
            for e in _java_row_ids(self._manifest_entries(m), m.first_row_id):
                inherit = inherits_sequence_numbers(e, m)
                seq = e.data_sequence_number
                file_seq = e.file_sequence_number
                if inherit and seq is None:
                    seq = m.sequence_number
                if inherit and file_seq is None:
                    file_seq = m.sequence_number
                rows.append({
                    "status": int(e.status),
                    "snapshot_id": e.snapshot_id if e.snapshot_id is not None else m.added_snapshot_id,
                    "sequence_number": seq, "file_sequence_number": file_seq,
                    "data_file": _data_file_row(e.data_file, parts),
                })
        data_file_type = pa.struct(_data_file_fields(None if parts.empty else parts.arrow_type))
        schema = pa.schema([
            pa.field("status", pa.int32(), nullable=False),
            pa.field("snapshot_id", pa.int64()),
            pa.field("sequence_number", pa.int64()),
            pa.field("file_sequence_number", pa.int64()),
            pa.field("data_file", data_file_type, nullable=False),
        ])
        return pa.Table.from_pylist(rows, schema=schema)

    # ------------------------------------------------------------ the event log
    def log(self) -> pa.Table:
        """The table's stream in the event log, oldest first: position, version, type, time, actor, message
        (the commit's), commit id and the event's canonical JSON payload."""
        log = self.store.log
        events = log.read_stream(self.state.table_uuid)
        messages = log.messages_of(e.commit_id for e in events)
        rows = [{"position": e.position, "version": e.version, "type": e.type, "time": e.time_ms, "actor": e.actor,
                 "message": messages.get(e.commit_id), "commit_id": e.commit_id, "payload": e.payload}
                for e in events]
        return pa.Table.from_pylist(rows, schema=LOG_SCHEMA)


def to_json_lines(table: pa.Table) -> Iterable[str]:
    """One JSON object per row (for the CLI): timestamps as ISO strings, bytes as hex, maps as objects (an empty
    one too: the column's Arrow type says what is a map), NaN and infinities as Jackson's strings."""
    fields = list(table.schema)
    for row in table.to_pylist():
        yield json.dumps({f.name: _jsonable(row[f.name], f.type) for f in fields}, sort_keys=False, default=str,
                         allow_nan=False)


def _jsonable(v: Any, t: pa.DataType) -> Any:
    """``v``, a value of Arrow type ``t`` as ``to_pylist`` gives it, in the shape JSON can hold."""
    if v is None:
        return None
    if pa.types.is_map(t):
        return {str(_jsonable(k, t.key_type)): _jsonable(x, t.item_type) for k, x in v}
    if pa.types.is_struct(t):
        return {f.name: _jsonable(v.get(f.name), f.type) for f in t}
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        return [_jsonable(x, t.value_type) for x in v]
    if isinstance(v, (bytes, bytearray)):
        return v.hex()
    if isinstance(v, float):
        return non_finite_as_text(v)
    if hasattr(v, "isoformat"):
        return v.isoformat()
    return v


def non_finite_as_text(v: Any) -> Any:
    """``v`` (a value, or dicts, lists and tuples of them, as ``to_pylist`` gives) with each NaN, infinity and
    -infinity float replaced by the string JSON metadata uses for it (:data:`NON_FINITE_JSON`), so
    ``json.dumps(..., allow_nan=False)`` takes it; tuples become lists."""
    if isinstance(v, float):
        return v if math.isfinite(v) else NON_FINITE_JSON[str(v)]
    if isinstance(v, dict):
        return {k: non_finite_as_text(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [non_finite_as_text(x) for x in v]
    return v


KINDS = ("snapshots", "history", "refs", "manifests", "all_manifests", "entries", "files", "data_files",
         "delete_files", "partitions", "metadata_log_entries", "log")


class Inspectable(Protocol):
    """A table whose metadata tables can be read (``engine.table.Table`` is one)."""

    @property
    def inspect(self) -> InspectTable: ...


def inspect_kind(table: Inspectable, kind: str) -> pa.Table:
    """The metadata table ``kind`` (one of :data:`KINDS`) of ``table``."""
    if kind not in KINDS:
        raise ValidationError(f"Cannot inspect table: unknown metadata table {kind!r} (one of {', '.join(KINDS)})")
    result: pa.Table = getattr(table.inspect, kind)()
    return result
