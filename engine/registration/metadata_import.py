"""Reading an existing Iceberg table's metadata into icelog events (for ``register_table``).

Layer: projections (reads files through storage.files.FileIO and parses them with the pure
readers beside it; builds engine.state.events values; never commits, never writes: rewriting delete
files for ``relocate`` is the caller's, see below). The whole history becomes events: a
TableCreated with the table's first schema, spec and sort order and its final properties, the
other schemas, specs and sort orders (SchemaAdded, SpecAdded, SortOrderAdded), one SnapshotAdded
per snapshot in commit order with the ORIGINAL snapshot ids, parents, sequence numbers,
timestamps, operations and summaries, then the current schema, spec and sort order and the refs
(RefSet).

A snapshot's file changes are the difference between the files live in it and the files live in
its parent (both read from their manifests), so manifest rewrites, merges and writers that do
not mark ADDED/DELETED entries faithfully still give the right live set at every snapshot. An
added file whose data sequence number is not its snapshot's (``rewrite_data_files`` keeping the
starting sequence number, files of a snapshot whose parent is gone) keeps it as the change's
explicit data sequence number, so delete files apply to it exactly as in the original.

A snapshot whose parent was expired from the metadata before the import keeps that parent id, as
Iceberg Java does; its changes add every file live in it (the projector renders it without a
parent manifest list).

With ``relocate``, every path read is rewritten (metadata, manifest lists, manifests, data and delete
files, a position delete file's ``file_path`` bounds). The rows of a position delete file still name
data files by their original paths: the caller passes a rewriter (``engine.registration.register`` does) that
copies each such file with its paths relocated, and the events record the copy; without one, such a
file is refused.

Format version 3 tables import as format version 3: deletion vectors (each a blob of a Puffin file, known by
its path and offset) and row lineage are kept: the table's ``next-row-id``, each snapshot's ``first-row-id`` and
``added-rows``, and every data file's ``first_row_id``, made explicit by the spec's inheritance (a file without
one takes its manifest's ``first_row_id`` plus the rows of the live data files before it in that manifest that
had none). A file that first gets a row id after an upgrade to v3 is recorded as replaced by itself with the
id. Default values and encryption are refused with a typed error naming the field.

What the events cannot carry is reported in :attr:`ImportedTable.notes`:

- a ``last-column-id`` above the only schema's highest field id (icelog continues from the latter).

Metadata locations: a ``*.metadata.json`` / ``*.gz.metadata.json`` file, or a table folder (or its
``metadata`` folder): ``version-hint.text`` when present and valid, else the highest
``vN[.gz].metadata.json``, else the highest ``NNNNN-<uuid>[.gz].metadata.json`` (catalogs that
name files that way and write no hint: Trino, Hive, JDBC, PyIceberg's SqlCatalog).
"""

from __future__ import annotations

import gzip
import json
import os
import re
import uuid as uuid_mod
import zlib
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import attrs

from engine.errors import CorruptFileError, NotFound, ValidationError
from engine.ownership import refuse_nul
from engine.state.events import (
    CurrentSchemaSet,
    DefaultSortOrderSet,
    DefaultSpecSet,
    Event,
    FileChange,
    RefRemoved,
    RefSet,
    SchemaAdded,
    SnapshotAdded,
    SnapshotLogSet,
    SortOrderAdded,
    SpecAdded,
    TableCreated,
)
from engine.model import types as T
from engine.model.data_file import (
    DataFile,
    DataFileContent,
    EntryStatus,
    ManifestEntry,
    ManifestFile,
    deletion_vector_problem,
)
from engine.model.partitioning import PartitionSpec
from engine.model.schema import Schema, check_schema_for_format
from engine.model.sort_order import UNSORTED_ORDER, SortOrder
from engine.model.values import from_bytes, to_bytes
from engine.model.paths import normalize_path
from projections.manifest_reader import inherit_first_row_ids, read_manifest, read_manifest_list
from storage.errors import FileError, FileNotFound, LogError
from storage.files import FileIO

MAIN = "main"
#: the branch that carries snapshots no ref reaches (rolled back, staged); removed at the end of the import
ORPHANS_BRANCH = "icelog-import-unreferenced"
DELETE_FILE_PATH_ID = 2147483546
SUPPORTED_FORMAT_VERSIONS = (1, 2, 3)

_VERSIONED = re.compile(r"^v(\d+)(\.gz)?\.metadata\.json$")
_NUMBERED = re.compile(r"^(\d+)-[0-9a-fA-F-]+(\.gz)?\.metadata\.json$")


@attrs.frozen(kw_only=True)
class ImportedTable:
    """An existing table read as events.

    :param metadata_location: the metadata file read (as found, before relocation)
    :param table_uuid: the table's uuid (from the metadata; a fresh one for v1 tables without one)
    :param location: the table location after relocation
    :param events: the table stream's events, TableCreated first
    :param notes: what the events could not carry exactly (see the module docstring)
    :param original_format_version: the format version of the metadata read
    """

    metadata_location: str
    table_uuid: str
    location: str
    events: tuple[Event, ...]
    notes: tuple[str, ...] = ()
    original_format_version: int = 2


# ---------------------------------------------------------------- relocation


class Relocator:
    """Rewrites path prefixes; ``file:/x``, ``file:///x`` and ``/x`` spell the same local path when matching.

    :param mapping: old prefix -> new prefix (longest prefix wins)
    """

    def __init__(self, mapping: Mapping[str, str] | None) -> None:
        self.rules = sorted(((str(k), str(v)) for k, v in (mapping or {}).items()), key=lambda kv: -len(kv[0]))
        self.normalized = [(normalize_path(k), v) for k, v in self.rules]
        #: the original table location: a relative path in the metadata is relative to it
        self.base: str | None = None

    def absolute(self, path: str) -> str:
        """``path`` made absolute against the original table location when it is relative (no scheme, no
        leading slash), as some writers put paths in metadata and manifests."""
        if self.base and path and not path.startswith("/") and "://" not in path and ":" not in path.split("/")[0]:
            return f"{self.base.rstrip('/')}/{path}"
        return path

    def __call__(self, path: str) -> str:
        path = self.absolute(path)
        for old, new in self.rules:  # a whole leading path: /w/t does not move /w/t_ext/f.parquet
            if path.startswith(old) and (len(path) == len(old) or old.endswith("/") or path[len(old)] == "/"):
                return new + path[len(old):]
        # every spelling of the same place: file: forms, another name node authority, s3a/s3n, escapes
        key = normalize_path(path)
        for old, new in self.normalized:
            if key.startswith(old) and (len(key) == len(old) or old.endswith("/") or key[len(old)] == "/"):
                return new + _rest_as_written(path, old, key[len(old):])
        return path

    def __bool__(self) -> bool:
        return bool(self.rules)


def _rest_as_written(path: str, prefix: str, rest: str) -> str:
    """What follows the leading part of ``path`` that normalizes to ``prefix``, as ``path`` writes it: a key keeps
    its escapes (``cat=a%3Ab`` is another object than ``cat=a:b``); ``rest`` (the normalized remainder) when no
    leading part matches."""
    for cut in [i for i, c in enumerate(path) if c == "/"] + [len(path)]:
        if normalize_path(path[:cut]).rstrip("/") == prefix.rstrip("/"):
            written = path[cut:]
            return written[1:] if prefix.endswith("/") and written.startswith("/") else written
    return rest


def _bare(path: str) -> str:
    """A local path without its ``file:`` scheme (``file:/x``, ``file:///x``, ``file://localhost/x`` -> ``/x``)."""
    for prefix in ("file://localhost/", "file:///", "file:/"):
        if path.startswith(prefix):
            return "/" + path[len(prefix):]
    return path


def relocate_file(f: DataFile, relocate: Callable[[str], str]) -> DataFile:
    """The file with its path (and a position delete file's ``file_path`` bounds, a deletion vector's referenced data
    file) relocated."""
    new_path = relocate(f.file_path)
    if f.referenced_data_file is not None:
        f = attrs.evolve(f, referenced_data_file=relocate(f.referenced_data_file))
    if f.content != DataFileContent.POSITION_DELETES or not (f.lower_bounds or f.upper_bounds):
        return f if new_path == f.file_path else attrs.evolve(f, file_path=new_path)

    def bounds(pairs: tuple[tuple[int, bytes], ...] | None) -> tuple[tuple[int, bytes], ...] | None:
        if pairs is None:
            return None
        out = []
        for k, v in pairs:
            if k == DELETE_FILE_PATH_ID:
                v = to_bytes(T.StringType(), relocate(from_bytes(T.StringType(), v)))
            out.append((k, v))
        return tuple(out)

    return attrs.evolve(f, file_path=new_path, lower_bounds=bounds(f.lower_bounds),
                        upper_bounds=bounds(f.upper_bounds))


# ---------------------------------------------------------------- metadata files


def read_file_bytes(io: FileIO, path: str, what: str) -> bytes:
    """The bytes of ``path``; a missing or unreadable file is a CorruptFileError naming ``what`` it should be."""
    try:
        return io.read_bytes(path)
    except FileNotFound as e:
        raise CorruptFileError(f"Cannot read {what} {path}: it does not exist", path=path) from e
    except LogError as e:
        raise CorruptFileError(f"Cannot read {what} {path}: {e}", path=path) from e


def resolve_metadata_location(io: FileIO, location: str) -> str:
    """The metadata file to read for ``location`` (a metadata file, a table folder or its ``metadata`` folder).

    :raises NotFound: when nothing there looks like table metadata
    """
    refuse_nul(location, "register table")
    location = location.rstrip("/") if len(location) > 1 else location
    if location.endswith(".json"):
        if not io.exists(location):
            raise NotFound(f"Cannot register table: metadata file {location} does not exist")
        return location
    if not io.exists(location):
        raise NotFound(f"Cannot register table: {location} does not exist")
    folder = location
    if os.path.basename(_bare(location)) != "metadata" and io.exists(f"{location}/metadata"):
        folder = f"{location}/metadata"
    try:
        names = {os.path.basename(p): p for p in io.list_dir(folder)}
    except FileError as e:  # a file that is neither a metadata file nor a folder (a data file, a database)
        raise NotFound(f"Cannot register table: {location} is not a metadata file (*.metadata.json) nor a table "
                       f"folder") from e
    hint = names.get("version-hint.text")
    if hint is not None:
        try:
            text = io.read_bytes(hint).decode("utf-8").strip()
            version = int(text)
        except (ValueError, UnicodeDecodeError, LogError):
            version = None  # an unreadable hint: fall back to listing, as Java's HadoopTableOperations does
        if version is not None:
            for name in (f"v{version}.metadata.json", f"v{version}.gz.metadata.json"):
                if name in names:
                    return names[name]
    versioned = [(int(m.group(1)), n) for n in names if (m := _VERSIONED.match(n))]
    if versioned:
        return names[max(versioned)[1]]
    numbered = [(int(m.group(1)), n) for n in names if (m := _NUMBERED.match(n))]
    if numbered:
        return names[max(numbered)[1]]
    raise NotFound(f"Cannot register table: no metadata file (vN.metadata.json, NNNNN-<uuid>.metadata.json) "
                   f"in {folder}")


def read_metadata_json(io: FileIO, path: str) -> dict[str, Any]:
    """Parse a table metadata file, gzip-compressed or not.

    :raises CorruptFileError: when it is missing, truncated or not a JSON object
    """
    data = read_file_bytes(io, path, "table metadata")
    if data[:2] == b"\x1f\x8b":
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError, zlib.error) as e:
            raise CorruptFileError(f"Cannot read table metadata {path}: bad gzip data: {e}", path=path) from e
    try:
        obj = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise CorruptFileError(f"Cannot read table metadata {path}: not valid JSON: {e}", path=path) from e
    if not isinstance(obj, dict):
        raise CorruptFileError(f"Cannot read table metadata {path}: not a JSON object", path=path)
    return obj


class _Fields:
    """Typed access to a metadata object's fields, naming the file and field in every error."""

    def __init__(self, obj: Mapping[str, Any], path: str, where: str = "") -> None:
        self.obj, self.path, self.where = obj, path, where

    def fail(self, field: str, why: str) -> ValidationError:
        return ValidationError(f"Cannot import table metadata {self.path}: field '{self.where}{field}' {why}")

    def get(self, field: str, kind: type | tuple[type, ...], default: Any = None, *, required: bool = False) -> Any:
        if field not in self.obj or self.obj[field] is None:
            if required:
                raise self.fail(field, "is missing")
            return default
        v = self.obj[field]
        if isinstance(v, bool) and kind is not bool and bool not in (kind if isinstance(kind, tuple) else (kind,)):
            raise self.fail(field, f"is not {_kind_name(kind)}: {v!r}")
        if not isinstance(v, kind):
            raise self.fail(field, f"is not {_kind_name(kind)}: {v!r}")
        return v

    def parse(self, field: str, value: Any, parser: Callable[[Any], Any]) -> Any:
        try:
            return parser(value)
        except ValidationError as e:
            raise self.fail(field, f"cannot be read: {e}") from e
        except (TypeError, KeyError, ValueError, AttributeError) as e:
            raise self.fail(field, f"cannot be read: {type(e).__name__}: {e}") from e


def _kind_name(kind: type | tuple[type, ...]) -> str:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    return " or ".join({int: "an integer", str: "a string", list: "a list", dict: "an object",
                        bool: "a boolean"}.get(k, k.__name__) for k in kinds)


@attrs.frozen(kw_only=True)
class _SnapshotInfo:
    snapshot_id: int
    parent_id: int | None
    sequence_number: int
    timestamp_ms: int
    operation: str
    summary: tuple[tuple[str, str], ...]
    schema_id: int
    manifest_list: str | None
    manifests: tuple[str, ...] | None
    first_row_id: int | None = None
    added_rows: int | None = None


# ---------------------------------------------------------------- the import


#: rewrites a position delete file's rows for relocation: (delete file at its relocated path, relocate, icelog's
#: table location) -> the rewritten file, or None when none of its rows names a relocated path
RelocatePositionDeletes = Callable[[DataFile, Callable[[str], str], str], "DataFile | None"]


def table_identity(io: FileIO, metadata_location: str, *, relocate: Mapping[str, str] | None = None,
                   location: str | None = None) -> tuple[str | None, str]:
    """The table uuid (None when the metadata has none: the import makes a fresh one) and icelog's table location
    that :func:`import_table` will give, from the metadata file alone: what a registration checks before the
    import writes anything.

    :raises NotFound: when there is no metadata at ``metadata_location``
    :raises CorruptFileError: for a truncated or unreadable metadata file
    :raises ValidationError: the metadata has no location
    """
    path = resolve_metadata_location(io, metadata_location)
    f = _Fields(read_metadata_json(io, path), path)
    original_location = f.get("location", str, required=True)
    return f.get("table-uuid", str) or None, (location or Relocator(relocate)(original_location)).rstrip("/")


def import_table(io: FileIO, metadata_location: str, *, relocate: Mapping[str, str] | None = None,
                 location: str | None = None,
                 relocate_position_deletes: RelocatePositionDeletes | None = None,
                 progress: Callable[[int, int], None] | None = None) -> ImportedTable:
    """Read a table's whole history into events.

    :param io: reads the metadata, manifest lists and manifests
    :param metadata_location: a metadata file or a table folder (see :func:`resolve_metadata_location`)
    :param relocate: old path prefix -> new path prefix, applied to every path read (metadata, manifest lists,
        manifests, data and delete files) and to the table location
    :param location: the icelog table location (default: the original location, relocated)
    :param relocate_position_deletes: with ``relocate``, rewrites each position delete file whose rows name
        relocated paths (the events then record the rewritten file); without it such a file is refused
    :param progress: called with (snapshots read, snapshots) as the snapshots' manifests are read
    :raises NotFound: when there is no metadata at ``metadata_location``
    :raises CorruptFileError: for a truncated or unreadable metadata file, manifest list or manifest
    :raises ValidationError: for metadata icelog cannot represent (naming the file and field)
    """
    reloc = Relocator(relocate)
    path = resolve_metadata_location(io, metadata_location)
    meta = read_metadata_json(io, path)
    f = _Fields(meta, path)
    fmt = f.get("format-version", int, 1)
    if fmt not in SUPPORTED_FORMAT_VERSIONS:
        raise f.fail("format-version", f"is {fmt}: icelog reads format versions 1, 2 and 3")
    notes: list[str] = []
    for key in ("statistics", "partition-statistics"):
        if meta.get(key):  # the log has no event for them (yet): say so, and the files stay the original writer's
            notes.append(f"{key}: {len(meta[key])} file(s) are not carried (the published metadata lists none; "
                         f"the files stay where they are)")
    next_row_id = None
    if fmt == 3:
        if meta.get("encryption-keys"):
            raise f.fail("encryption-keys", "is set: icelog cannot read encrypted tables")
        next_row_id = f.get("next-row-id", int, 0)
    table_uuid = f.get("table-uuid", str) or str(uuid_mod.uuid4())
    original_location = f.get("location", str, required=True)
    table_location = (location or reloc(original_location)).rstrip("/")
    reloc.base = original_location

    # schemas
    if "schemas" in meta and meta["schemas"] is not None:
        schema_jsons = f.get("schemas", list)
        current_schema_id = f.get("current-schema-id", int, required=True)
    else:
        schema_jsons = [f.get("schema", dict, required=True)]
        current_schema_id = schema_jsons[0].get("schema-id", 0)
    schemas = sorted((f.parse(f"schemas[{i}]", sj, Schema.from_json) for i, sj in enumerate(schema_jsons)),
                     key=lambda s: s.schema_id)
    for s in schemas:
        check_schema_for_format(s, fmt, f"table metadata {metadata_location} (schema {s.schema_id})")
    if not any(s.schema_id == current_schema_id for s in schemas):
        raise f.fail("current-schema-id", f"is {current_schema_id}, which no schema has")
    current_schema = next(s for s in schemas if s.schema_id == current_schema_id)
    last_column_id = f.get("last-column-id", int, 0)

    # partition specs
    if meta.get("partition-specs") is not None:
        specs = [f.parse(f"partition-specs[{i}]", sj, PartitionSpec.from_json)
                 for i, sj in enumerate(f.get("partition-specs", list))]
        default_spec_id = f.get("default-spec-id", int, required=True)
    else:
        specs = [f.parse("partition-spec", f.get("partition-spec", list, required=True), PartitionSpec.from_json)]
        default_spec_id = 0
    specs.sort(key=lambda s: s.spec_id)
    if not any(s.spec_id == default_spec_id for s in specs):
        raise f.fail("default-spec-id", f"is {default_spec_id}, which no partition spec has")
    partition_types: dict[int, T.StructType] = {}
    for s in specs:
        partition_types[s.spec_id] = _partition_type(s, current_schema, schemas, f)

    # sort orders
    orders = [f.parse(f"sort-orders[{i}]", o, SortOrder.from_json)
              for i, o in enumerate(f.get("sort-orders", list, []))] or [UNSORTED_ORDER]
    orders.sort(key=lambda o: o.order_id)
    default_order_id = f.get("default-sort-order-id", int, orders[0].order_id)
    if not any(o.order_id == default_order_id for o in orders):
        raise f.fail("default-sort-order-id", f"is {default_order_id}, which no sort order has")

    properties = {str(k): str(v) for k, v in (f.get("properties", dict, {}) or {}).items()}

    # snapshots
    snapshots = [_snapshot_info(s, i, f, fmt, current_schema_id, reloc)
                 for i, s in enumerate(f.get("snapshots", list, []))]
    by_id = {s.snapshot_id: s for s in snapshots}
    if len(by_id) != len(snapshots):
        raise f.fail("snapshots", "lists a snapshot id twice")
    refs = _refs(meta, f, by_id)
    ordered = _commit_order(snapshots, fmt)
    branch_of = _branch_of(ordered, refs, by_id)

    reader = _ManifestReader(io, reloc, path, table_location, relocate_position_deletes)
    events: list[Event] = [TableCreated(
        table_uuid=table_uuid, location=table_location, format_version=fmt, schema=schemas[0],
        spec=specs[0], sort_order=orders[0], properties=properties, next_row_id=next_row_id)]
    running_last_id = schemas[0].highest_field_id
    for i, s in enumerate(schemas[1:], start=1):
        running_last_id = max(running_last_id, s.highest_field_id)
        if i == len(schemas) - 1:
            running_last_id = max(running_last_id, last_column_id)
        events.append(SchemaAdded(schema=s, last_column_id=running_last_id))
    if len(schemas) == 1 and last_column_id > schemas[0].highest_field_id:
        notes.append(f"last-column-id {last_column_id} is above the only schema's highest field id "
                     f"{schemas[0].highest_field_id}: icelog continues from {schemas[0].highest_field_id}")
    events += [SpecAdded(spec=s) for s in specs[1:]]
    events += [SortOrderAdded(sort_order=o) for o in orders[1:]]

    live: dict[int, dict[str, tuple[DataFile, int]]] = {}
    ref_heads: dict[str, int] = {}
    for done, snap in enumerate(ordered):
        if progress is not None:
            progress(done, len(ordered))
        parent = snap.parent_id
        files = reader.live_files(snap)
        # a parent expired before the import is not in the metadata: the snapshot keeps its parent id (as Java
        # does) and its changes add every file live in it, with their data sequence numbers
        before = live.get(parent, {}) if parent is not None else {}
        # a file that got its row id after an upgrade to v3 is replaced by itself with the id
        relabelled = {p for p, (df, _) in files.items()
                      if p in before and df.first_row_id is not None and before[p][0].first_row_id is None}
        changes = [FileChange(added=False, file=df) for p, (df, _) in before.items()
                   if p not in files or p in relabelled]
        for p, (df, data_seq) in files.items():
            if p in before and p not in relabelled:
                continue
            # a file whose data sequence number is not its snapshot's (compaction keeping the starting
            # sequence number, an entry of an expired parent) keeps it explicitly
            explicit = data_seq if fmt >= 2 and data_seq != snap.sequence_number else None
            changes.append(FileChange(added=True, file=df, data_sequence_number=explicit))
        live[snap.snapshot_id] = files
        branch = branch_of[snap.snapshot_id]
        ref_heads[branch] = snap.snapshot_id
        events.append(SnapshotAdded(
            snapshot_id=snap.snapshot_id, parent_snapshot_id=parent, sequence_number=snap.sequence_number,
            timestamp_ms=snap.timestamp_ms, operation=snap.operation, summary=snap.summary,
            schema_id=snap.schema_id, branch=branch, changes=tuple(changes), partition_types=partition_types,
            first_row_id=snap.first_row_id, added_rows=snap.added_rows if snap.first_row_id is not None else None))

    if current_schema_id != schemas[0].schema_id:
        events.append(CurrentSchemaSet(schema_id=current_schema_id))
    if default_spec_id != specs[0].spec_id:
        events.append(DefaultSpecSet(spec_id=default_spec_id))
    if default_order_id != orders[0].order_id:
        events.append(DefaultSortOrderSet(sort_order_id=default_order_id))
    for name, ref in sorted(refs.items(), key=lambda kv: (kv[0] == MAIN, kv[0])):
        plain = ref.ref_type == "branch" and ref.min_snapshots_to_keep is None and \
            ref.max_snapshot_age_ms is None and ref.max_ref_age_ms is None
        if plain and ref_heads.get(name) == ref.snapshot_id:
            continue  # the snapshots already moved this branch there
        events.append(ref)
    for name in sorted(ref_heads):
        if name not in refs:
            events.append(RefRemoved(name=name))
    # the original's snapshot log (rollbacks at their times), where the imported snapshots and refs make another
    made = [(s.timestamp_ms, s.snapshot_id) for s in ordered if branch_of[s.snapshot_id] == MAIN]
    original = [(e["timestamp-ms"], e["snapshot-id"]) for e in f.get("snapshot-log", list, []) or []
                if isinstance(e, dict) and T.is_long(e.get("timestamp-ms")) and e.get("snapshot-id") in by_id]
    if original and (original != made or any(isinstance(e, RefSet) and e.name == MAIN for e in events)):
        events.append(SnapshotLogSet(entries=original))
    return ImportedTable(metadata_location=path, table_uuid=table_uuid, location=table_location,
                         events=tuple(events), notes=tuple(notes), original_format_version=fmt)


def _partition_type(spec: PartitionSpec, current: Schema, schemas: list[Schema], f: _Fields) -> T.StructType:
    try:
        return spec.partition_type(current)
    except ValidationError:
        for s in reversed(schemas):
            try:
                spec.partition_type(s)
            except ValidationError:
                continue
            raise f.fail(f"partition-specs[spec-id={spec.spec_id}]",
                         "uses a source column dropped from the current schema, which icelog cannot encode")
        raise f.fail(f"partition-specs[spec-id={spec.spec_id}]", "uses a source column no schema has")


def _snapshot_info(s: Any, i: int, f: _Fields, fmt: int, current_schema_id: int,
                   reloc: Relocator) -> _SnapshotInfo:
    if not isinstance(s, dict):
        raise f.fail(f"snapshots[{i}]", "is not an object")
    sf = _Fields(s, f.path, f"snapshots[{i}].")
    snapshot_id = sf.get("snapshot-id", int, required=True)
    summary = {str(k): str(v) for k, v in (sf.get("summary", dict, {}) or {}).items()}
    operation = summary.pop("operation", None) or "append"
    manifest_list = sf.get("manifest-list", str)
    manifests = sf.get("manifests", list)
    if manifest_list is None and manifests is None:
        raise sf.fail("manifest-list", "is missing (and there is no inline 'manifests' list)")
    # no sequence-number in format version 2 is 0: Java writes none for a snapshot from before an upgrade to v2
    return _SnapshotInfo(
        snapshot_id=snapshot_id, parent_id=sf.get("parent-snapshot-id", int),
        sequence_number=sf.get("sequence-number", int, 0), timestamp_ms=sf.get("timestamp-ms", int, required=True),
        operation=operation, summary=tuple(summary.items()), schema_id=sf.get("schema-id", int, current_schema_id),
        manifest_list=None if manifest_list is None else reloc(manifest_list),
        manifests=None if manifests is None else tuple(reloc(str(m)) for m in manifests),
        first_row_id=sf.get("first-row-id", int) if fmt >= 3 else None,
        added_rows=sf.get("added-rows", int) if fmt >= 3 else None)


def _refs(meta: Mapping[str, Any], f: _Fields, by_id: Mapping[int, _SnapshotInfo]) -> dict[str, RefSet]:
    out: dict[str, RefSet] = {}
    for name, r in (f.get("refs", dict, {}) or {}).items():
        rf = _Fields(r if isinstance(r, dict) else {}, f.path, f"refs.{name}.")
        sid = rf.get("snapshot-id", int, required=True)
        if sid not in by_id:
            raise rf.fail("snapshot-id", f"is {sid}, which no snapshot has")
        ref_type = rf.get("type", str, "branch")
        if ref_type not in ("branch", "tag"):
            raise rf.fail("type", f"is {ref_type!r} (branch or tag)")
        out[str(name)] = RefSet(name=str(name), snapshot_id=sid, ref_type=ref_type,
                                min_snapshots_to_keep=rf.get("min-snapshots-to-keep", int),
                                max_snapshot_age_ms=rf.get("max-snapshot-age-ms", int),
                                max_ref_age_ms=rf.get("max-ref-age-ms", int))
    current = meta.get("current-snapshot-id")
    if MAIN not in out and isinstance(current, int) and current != -1:
        if current not in by_id:
            raise f.fail("current-snapshot-id", f"is {current}, which no snapshot has")
        out[MAIN] = RefSet(name=MAIN, snapshot_id=current)
    return out


def _commit_order(snapshots: list[_SnapshotInfo], fmt: int) -> list[_SnapshotInfo]:
    """Snapshots in commit order (sequence number, then timestamp), every parent before its children."""
    ranked = sorted(snapshots, key=lambda s: (s.sequence_number, s.timestamp_ms, s.snapshot_id))
    by_id = {s.snapshot_id: s for s in snapshots}
    done: set[int] = set()
    out: list[_SnapshotInfo] = []
    for s in ranked:
        chain = []
        cur: _SnapshotInfo | None = s
        while cur is not None and cur.snapshot_id not in done:
            chain.append(cur)
            done.add(cur.snapshot_id)
            cur = by_id.get(cur.parent_id) if cur.parent_id is not None else None
        out.extend(reversed(chain))
    return out


def _branch_of(ordered: list[_SnapshotInfo], refs: Mapping[str, RefSet],
               by_id: Mapping[int, _SnapshotInfo]) -> dict[int, str]:
    """The branch each snapshot is added on: main for main's ancestry, else the first ref whose ancestry holds it
    (branches before tags), else a temporary branch removed at the end."""
    out: dict[int, str] = {}
    names = sorted(refs, key=lambda n: (n != MAIN, refs[n].ref_type != "branch", n))
    for name in names:
        sid: int | None = refs[name].snapshot_id
        while sid is not None and sid in by_id and sid not in out:
            out[sid] = name
            sid = by_id[sid].parent_id
    for s in ordered:
        out.setdefault(s.snapshot_id, ORPHANS_BRANCH)
    return out


class _ManifestReader:
    """Reads manifest lists and manifests once each (snapshots share manifests), relocating every path."""

    def __init__(self, io: FileIO, reloc: Relocator, metadata_path: str, table_location: str,
                 relocate_position_deletes: RelocatePositionDeletes | None) -> None:
        self.io, self.reloc, self.metadata_path = io, reloc, metadata_path
        self.table_location = table_location
        self.relocate_position_deletes = relocate_position_deletes
        self._manifests: dict[str, list[ManifestEntry]] = {}
        self._relocated_deletes: dict[str, DataFile] = {}

    def relocated_position_deletes(self, df: DataFile, moved: DataFile, manifest: str) -> DataFile:
        """The position delete file to record for ``df`` (``moved``: its path relocated): a rewrite whose rows name
        the relocated data files, made once per file."""
        found = self._relocated_deletes.get(df.file_path)
        if found is not None:
            return attrs.evolve(found, spec_id=moved.spec_id)
        if self.relocate_position_deletes is None:
            # its rows name data files by their old paths, and the scan would no longer match them
            raise ValidationError(
                f"Cannot import position delete file {df.file_path} (manifest {manifest}) with relocate: its rows "
                f"name data files by their original paths and no rewrite of delete files was given; register it "
                f"with Catalog.register_table, or unmoved")
        rewritten = self.relocate_position_deletes(moved, self.reloc, self.table_location)
        found = moved if rewritten is None else rewritten
        self._relocated_deletes[df.file_path] = found
        return found

    def manifest_list(self, path: str) -> list[ManifestFile]:
        return read_manifest_list(read_file_bytes(self.io, path, "manifest list"), path)

    def entries(self, path: str) -> list[ManifestEntry]:
        found = self._manifests.get(path)
        if found is None:
            _, found = read_manifest(read_file_bytes(self.io, path, "manifest"), path)
            self._manifests[path] = found
        return found

    def live_files(self, snap: _SnapshotInfo) -> dict[str, tuple[DataFile, int]]:
        """Files live in the snapshot: key (``DataFile.key``) -> (file, relocated, its first row id inherited; its
        data sequence number)."""
        if snap.manifest_list is not None:
            manifests = [(self.reloc(m.manifest_path), m.partition_spec_id, m.sequence_number, m.first_row_id)
                         for m in self.manifest_list(snap.manifest_list)]
        else:
            manifests = [(p, None, 0, None) for p in snap.manifests or ()]
        out: dict[str, tuple[DataFile, int]] = {}
        for path, spec_id, manifest_seq, first_row_id in manifests:
            for e in inherit_first_row_ids(self.entries(path), first_row_id):
                if e.status == EntryStatus.DELETED:
                    continue
                df = e.data_file
                problem = deletion_vector_problem(df)
                if problem is not None:
                    raise CorruptFileError(f"Cannot import manifest {path}: {df.file_path} is {problem}", path=path)
                if spec_id is not None and df.spec_id != spec_id:
                    df = attrs.evolve(df, spec_id=spec_id)
                moved = relocate_file(df, self.reloc)
                if self.reloc and df.content == DataFileContent.POSITION_DELETES and not df.is_deletion_vector:
                    moved = self.relocated_position_deletes(df, moved, path)
                df = moved
                if e.data_sequence_number is not None:
                    data_seq = e.data_sequence_number
                else:
                    data_seq = manifest_seq if e.status == EntryStatus.ADDED else 0
                out[df.key] = (df, data_seq)
        return out


def metadata_files_in(io: FileIO, location: str, *, every: bool = False) -> list[str]:
    """Names of the ``vN[.gz].metadata.json`` files under ``<location>/metadata`` (for collision checks), or of
    every file there (``every``)."""
    folder = f"{location.rstrip('/')}/metadata"
    if not io.exists(folder):
        return []
    names = [os.path.basename(p) for p in io.list_dir(folder)]
    return names if every else [n for n in names if _VERSIONED.match(n)]


def versioned_number(name: str) -> int | None:
    m = _VERSIONED.match(name)
    return None if m is None else int(m.group(1))


def all_paths(events: Iterable[Event]) -> list[str]:
    """Every data and delete file path the events add (for checks and tests)."""
    return [c.file.file_path for e in events if isinstance(e, SnapshotAdded) for c in e.changes if c.added]
