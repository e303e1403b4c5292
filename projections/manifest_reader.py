"""Parse Avro manifests and manifest lists, whoever wrote them: pure functions, bytes in and values out.

Layer: projections (pure; imports engine.model, engine.errors and projections.avro_schemas; no I/O). Parsing
accepts files written by Iceberg Java, PyIceberg, DuckDB and others as well as ours: fields are looked up by field
id, not by name, partition values come back canonical (engine.model.values), and corrupt bytes raise
:class:`CorruptFileError` naming the file. Rendering is :mod:`projections.manifests`.
"""

from __future__ import annotations

import datetime
import io
import json
import struct
import uuid
import zlib
from collections.abc import Mapping, Sequence
from typing import Any

import attrs
import fastavro
from fastavro.read import SchemaResolutionError
from fastavro.schema import SchemaParseException

from engine.errors import CorruptFileError
from engine.model.data_file import (
    DataFile,
    DataFileContent,
    EntryStatus,
    FieldSummary,
    ManifestContent,
    ManifestEntry,
    ManifestFile,
)
from engine.model.types import (
    BinaryType,
    BooleanType,
    DateType,
    DecimalType,
    DoubleType,
    FixedType,
    FloatType,
    IcebergType,
    IntegerType,
    LongType,
    StringType,
    TimestampNsType,
    TimestampType,
    TimestamptzNsType,
    TimestamptzType,
    TimeType,
    UUIDType,
)
from projections.avro_schemas import (
    DATA_FILE_IDS,
    FIELD_ID_PROP,
    FIELD_SUMMARY_IDS,
    MANIFEST_ENTRY_IDS,
    MANIFEST_FILE_IDS,
)

_EPOCH_DATE = datetime.date(1970, 1, 1)
_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)
_ONE_MICRO = datetime.timedelta(microseconds=1)

# What a damaged Avro file makes fastavro (or our own decoding of its records) raise.
_DECODE_ERRORS = (ValueError, EOFError, OverflowError, IndexError, KeyError, TypeError, AttributeError,
                  struct.error, zlib.error, SchemaParseException, SchemaResolutionError)


# ---------------------------------------------------------------------------------------------
# Partition values: what fastavro reads -> canonical Python values (engine.model.values)
# ---------------------------------------------------------------------------------------------

def _avro_type_to_iceberg(avro_type: Any, named: dict[str, Any]) -> IcebergType:
    """The Iceberg type of a partition field from its Avro type (as Java, PyIceberg or icelog wrote it)."""
    if isinstance(avro_type, list):
        branches = [b for b in avro_type if b != "null"]
        if len(branches) != 1:
            raise ValueError(f"unsupported union {avro_type!r}")
        return _avro_type_to_iceberg(branches[0], named)
    if isinstance(avro_type, str):
        simple: dict[str, IcebergType] = {
            "boolean": BooleanType(), "int": IntegerType(), "long": LongType(), "float": FloatType(),
            "double": DoubleType(), "string": StringType(), "bytes": BinaryType(),
        }
        if avro_type in simple:
            return simple[avro_type]
        if avro_type in named:
            return _avro_type_to_iceberg(named[avro_type], named)
        raise ValueError(f"unknown Avro type {avro_type!r}")
    if not isinstance(avro_type, dict):
        raise ValueError(f"unknown Avro type {avro_type!r}")
    kind = avro_type.get("type")
    logical = avro_type.get("logicalType")
    if kind == "fixed" and "name" in avro_type:
        named.setdefault(avro_type["name"], avro_type)
    if logical == "date" and kind == "int":
        return DateType()
    if logical == "time-micros" and kind == "long":
        return TimeType()
    if logical == "timestamp-micros" and kind == "long":
        return TimestamptzType() if avro_type.get("adjust-to-utc", True) in (True, "true") else TimestampType()
    if logical == "local-timestamp-micros" and kind == "long":
        return TimestampType()
    if logical == "timestamp-nanos" and kind == "long":
        return TimestamptzNsType() if avro_type.get("adjust-to-utc", True) in (True, "true") else TimestampNsType()
    if logical == "local-timestamp-nanos" and kind == "long":
        return TimestampNsType()
    if logical == "decimal":
        return DecimalType(int(avro_type["precision"]), int(avro_type.get("scale", 0)))
    if logical == "uuid":
        return UUIDType()
    if kind == "fixed":
        return FixedType(int(avro_type["size"]))
    if isinstance(kind, (str, dict, list)):
        return _avro_type_to_iceberg(kind, named)
    raise ValueError(f"unknown Avro type {avro_type!r}")


def _canonical(t: IcebergType, v: Any) -> Any:
    """fastavro's reading of a partition value (dates, datetimes, ...) back to the canonical value."""
    if v is None:
        return None
    if isinstance(t, DateType) and isinstance(v, datetime.date):
        return (v - _EPOCH_DATE).days
    if isinstance(t, TimeType) and isinstance(v, datetime.time):
        return ((v.hour * 60 + v.minute) * 60 + v.second) * 1_000_000 + v.microsecond
    if isinstance(t, (TimestampType, TimestamptzType)) and isinstance(v, datetime.datetime):
        aware = v if v.tzinfo is not None else v.replace(tzinfo=datetime.timezone.utc)
        return (aware - _EPOCH) // _ONE_MICRO
    if isinstance(t, UUIDType):
        if isinstance(v, uuid.UUID):
            return v
        return uuid.UUID(bytes=bytes(v)) if isinstance(v, (bytes, bytearray)) else uuid.UUID(str(v))
    if isinstance(t, (FixedType, BinaryType)):
        return bytes(v)
    return v


# ---------------------------------------------------------------------------------------------
# Parsing
# ---------------------------------------------------------------------------------------------

def _non_null(avro_type: Any) -> Any:
    """The branch of a ``["null", T]`` union that is not null (writers such as DuckDB make list elements and
    records optional that way); any other type unchanged."""
    if isinstance(avro_type, list):
        branches = [b for b in avro_type if b != "null"]
        if len(branches) == 1:
            return branches[0]
    return avro_type


def _names_by_id(record_schema: Any) -> dict[int, str]:
    record_schema = _non_null(record_schema)
    if not isinstance(record_schema, dict) or record_schema.get("type") != "record":
        raise ValueError(f"expected a record schema, got {record_schema!r}")
    return {int(f[FIELD_ID_PROP]): f["name"] for f in record_schema["fields"] if FIELD_ID_PROP in f}


def _field_type(record_schema: dict[str, Any], field_id: int) -> Any:
    for f in _non_null(record_schema)["fields"]:
        if f.get(FIELD_ID_PROP) == field_id:
            return _non_null(f["type"])
    raise KeyError(f"field id {field_id}")


def _read_avro(data: bytes) -> tuple[dict[str, str], dict[str, Any], list[dict[str, Any]]]:
    reader = fastavro.reader(io.BytesIO(data))
    metadata = {k: (v.decode("utf-8") if isinstance(v, bytes) else v) for k, v in reader.metadata.items()}
    schema = json.loads(metadata["avro.schema"])
    records = list(reader)
    user_meta = {k: v for k, v in metadata.items() if not k.startswith("avro.")}
    return user_meta, schema, records


def _pairs(records: list[dict[str, Any]] | None) -> tuple[tuple[int, Any], ...] | None:
    if records is None:
        return None
    return tuple(_pair(r) for r in records)


def _pair(record: dict[str, Any]) -> tuple[int, Any]:
    """A map record's key and value: the spec names them key and value; other writers' names go by position."""
    if "key" in record:
        return int(record["key"]), record["value"]
    key, value = list(record.values())[:2]
    return int(key), value


def _get(record: dict[str, Any], names: dict[int, str], field_id: int, default: Any = None) -> Any:
    name = names.get(field_id)
    return default if name is None else record.get(name, default)


def read_manifest(data: bytes, path: str) -> tuple[dict[str, str], list[ManifestEntry]]:
    """Parse a manifest (v1, v2 or v3, any writer) into its key-value metadata and entries.

    Sequence numbers and snapshot ids are returned as written (None when inherited, or absent in v1);
    the data files' spec id is the manifest's ``partition-spec-id`` (0 when missing); partition values
    come back canonical. The metadata excludes the ``avro.*`` keys.

    :param data: the file's bytes
    :param path: the file's location, named in errors
    """
    try:
        metadata, schema, records = _read_avro(data)
        entry_names = _names_by_id(schema)
        file_schema = _field_type(schema, MANIFEST_ENTRY_IDS["data_file"])
        file_names = _names_by_id(file_schema)
        partition_schema = _field_type(file_schema, DATA_FILE_IDS["partition"])
        named: dict[str, Any] = {}
        partition_fields = _names_and_fields(partition_schema)
        if any(FIELD_ID_PROP in f for f in partition_fields):  # a writer's extra fields have no partition field id
            partition_fields = [f for f in partition_fields if FIELD_ID_PROP in f]
        partition_layout = [(f["name"], _avro_type_to_iceberg(f["type"], named)) for f in partition_fields]
        spec_id = int(metadata.get("partition-spec-id", "0"))
        entries = [_entry_from_record(r, entry_names, file_names, partition_layout, spec_id) for r in records]
    except _DECODE_ERRORS as e:
        raise CorruptFileError(f"Cannot read manifest {path}: {type(e).__name__}: {e}", path=path) from e
    return metadata, entries


def _names_and_fields(record_schema: Any) -> list[dict[str, Any]]:
    record_schema = _non_null(record_schema)
    if not isinstance(record_schema, dict) or record_schema.get("type") != "record":
        raise ValueError(f"expected the partition record, got {record_schema!r}")
    return list(record_schema["fields"])


def _entry_from_record(r: dict[str, Any], entry_names: dict[int, str], file_names: dict[int, str],
                       partition_layout: list[tuple[str, IcebergType]], spec_id: int) -> ManifestEntry:
    e, d = MANIFEST_ENTRY_IDS, DATA_FILE_IDS
    f = r[entry_names[e["data_file"]]]
    p = _get(f, file_names, d["partition"]) or {}
    partition = tuple(_canonical(t, p.get(name)) for name, t in partition_layout)
    split_offsets = _get(f, file_names, d["split_offsets"])
    equality_ids = _get(f, file_names, d["equality_ids"])
    data_file = DataFile(
        content=_get(f, file_names, d["content"], DataFileContent.DATA),
        file_path=f[file_names[d["file_path"]]],
        file_format=f[file_names[d["file_format"]]],
        spec_id=spec_id,
        partition=partition,
        record_count=f[file_names[d["record_count"]]],
        file_size_in_bytes=f[file_names[d["file_size_in_bytes"]]],
        column_sizes=_pairs(_get(f, file_names, d["column_sizes"])),
        value_counts=_pairs(_get(f, file_names, d["value_counts"])),
        null_value_counts=_pairs(_get(f, file_names, d["null_value_counts"])),
        nan_value_counts=_pairs(_get(f, file_names, d["nan_value_counts"])),
        lower_bounds=_pairs(_get(f, file_names, d["lower_bounds"])),
        upper_bounds=_pairs(_get(f, file_names, d["upper_bounds"])),
        key_metadata=_get(f, file_names, d["key_metadata"]),
        split_offsets=None if split_offsets is None else tuple(split_offsets),
        equality_ids=None if equality_ids is None else tuple(equality_ids),
        sort_order_id=_get(f, file_names, d["sort_order_id"]),
        first_row_id=_get(f, file_names, d["first_row_id"]),
        referenced_data_file=_get(f, file_names, d["referenced_data_file"]),
        content_offset=_get(f, file_names, d["content_offset"]),
        content_size_in_bytes=_get(f, file_names, d["content_size_in_bytes"]),
    )
    return ManifestEntry(status=r[entry_names[e["status"]]], snapshot_id=_get(r, entry_names, e["snapshot_id"]),
                         data_sequence_number=_get(r, entry_names, e["sequence_number"]),
                         file_sequence_number=_get(r, entry_names, e["file_sequence_number"]),
                         data_file=data_file)


def inherits_sequence_numbers(entry: ManifestEntry, manifest: ManifestFile) -> bool:
    """Whether an entry takes its missing sequence numbers from its manifest, as Java's InheritableMetadataFactory
    rules: an ADDED entry does, and every entry of a v1 manifest (sequence number 0: a table upgraded from v1 reads
    its EXISTING and DELETED entries as sequence number 0, not as missing)."""
    return entry.status == EntryStatus.ADDED or manifest.sequence_number == 0


def inherit_first_row_ids(entries: Sequence[ManifestEntry], first_row_id: int | None) -> list[ManifestEntry]:
    """A v3 data manifest's entries with the spec's first row id inheritance made explicit: each live data file
    without a ``first_row_id`` takes the manifest's plus the rows of the live files before it that had none
    (entries come back unchanged when the manifest has no ``first_row_id``)."""
    if first_row_id is None:
        return list(entries)
    out = []
    next_id = first_row_id
    for e in entries:
        f = e.data_file
        if e.status != EntryStatus.DELETED and f.content == DataFileContent.DATA and f.first_row_id is None:
            e = attrs.evolve(e, data_file=attrs.evolve(f, first_row_id=next_id))
            next_id += f.record_count
        out.append(e)
    return out


def read_manifest_list(data: bytes, path: str, known: Mapping[str, ManifestFile] | None = None
                       ) -> list[ManifestFile]:
    """Parse a manifest list (v1, v2 or v3, any writer).

    v1 lists read as DATA manifests with sequence numbers 0, as the spec says. A count that a v1
    writer left null is returned as None (the spec reads it as "not known to be zero").

    :param data: the file's bytes
    :param path: the file's location, named in errors
    :param known: records of manifests the caller holds already, by path: a listed manifest found there is
        returned as that record instead of being decoded (a client's list repeats its parent's manifests)
    """
    try:
        _, schema, records = _read_avro(data)
        names = _names_by_id(schema)
        summary_names: dict[int, str] = {}
        if MANIFEST_FILE_IDS["partitions"] in names:
            summary_names = _names_by_id(_field_type(schema, MANIFEST_FILE_IDS["partitions"])["items"])
        path_name = names[MANIFEST_FILE_IDS["manifest_path"]]
        known = known or {}
        return [known.get(r[path_name]) or _manifest_file_from_record(r, names, summary_names) for r in records]
    except _DECODE_ERRORS as e:
        raise CorruptFileError(f"Cannot read manifest list {path}: {type(e).__name__}: {e}", path=path) from e


def _manifest_file_from_record(r: dict[str, Any], names: dict[int, str],
                               summary_names: dict[int, str]) -> ManifestFile:
    m, s = MANIFEST_FILE_IDS, FIELD_SUMMARY_IDS
    summaries = _get(r, names, m["partitions"])
    partitions = None if summaries is None else tuple(
        FieldSummary(contains_null=x[summary_names[s["contains_null"]]],
                     contains_nan=_get(x, summary_names, s["contains_nan"]),
                     lower_bound=_get(x, summary_names, s["lower_bound"]),
                     upper_bound=_get(x, summary_names, s["upper_bound"]))
        for x in summaries)
    return ManifestFile(
        manifest_path=r[names[m["manifest_path"]]],
        manifest_length=r[names[m["manifest_length"]]],
        partition_spec_id=r[names[m["partition_spec_id"]]],
        content=_get(r, names, m["content"], ManifestContent.DATA),
        sequence_number=_get(r, names, m["sequence_number"], 0),
        min_sequence_number=_get(r, names, m["min_sequence_number"], 0),
        added_snapshot_id=r[names[m["added_snapshot_id"]]],
        added_files_count=_get(r, names, m["added_files_count"]),
        existing_files_count=_get(r, names, m["existing_files_count"]),
        deleted_files_count=_get(r, names, m["deleted_files_count"]),
        added_rows_count=_get(r, names, m["added_rows_count"]),
        existing_rows_count=_get(r, names, m["existing_rows_count"]),
        deleted_rows_count=_get(r, names, m["deleted_rows_count"]),
        partitions=partitions,
        key_metadata=_get(r, names, m["key_metadata"]),
        first_row_id=_get(r, names, m["first_row_id"]),
    )
