"""The Avro schemas of manifests and manifest lists, per format version, as data.

Layer: projections (pure; imports engine.model.types and engine.errors only). The spec's
tables (manifest_entry, data_file, manifest_file, field_summary) are declared once below as
field tables with the spec's field ids; the builders turn them into the Avro JSON that Iceberg
Java writes: record names ``manifest_entry``, ``r2`` (data_file), ``r102`` (partition),
``manifest_file``, ``r508`` (field_summary); int-keyed maps as arrays of ``k<id>_v<id>``
records with ``logicalType: map``; a ``field-id`` on every field, ``element-id`` on arrays;
optional fields as ``["null", T]`` with a null default. Every builder returns a fresh dict.
Partition values of type ``fixed(L)`` are the one departure from Appendix A: they are stored as
``bytes`` so that Iceberg Java and spec readers both read them (see :func:`partition_value_avro_type`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any

import attrs

from engine.errors import ValidationError
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

FORMAT_VERSIONS = (1, 2, 3)

MANIFEST_ENTRY_RECORD = "manifest_entry"
MANIFEST_FILE_RECORD = "manifest_file"
DATA_FILE_FIELD_ID = 2
PARTITION_FIELD_ID = 102
PARTITIONS_ELEMENT_ID = 508
FIELD_ID_PROP = "field-id"
ELEMENT_ID_PROP = "element-id"
ICEBERG_FIELD_NAME_PROP = "iceberg-field-name"
ADJUST_TO_UTC_PROP = "adjust-to-utc"

# Java writes this constant for the deprecated v1 block_size_in_bytes (64 MiB).
V1_BLOCK_SIZE_IN_BYTES = 64 * 1024 * 1024


@attrs.frozen
class IntMap:
    """An int-keyed map, stored as an array of ``k<key_id>_v<value_id>`` records (values required)."""

    key_id: int
    value_id: int
    value_type: str


@attrs.frozen
class RequiredList:
    """A list with required elements."""

    element_id: int
    element_type: str | Record


@attrs.frozen
class Record:
    """A nested record named ``r<field id>`` as Java names it; its fields are a field table."""

    fields: tuple[Field, ...]


@attrs.frozen
class Partition:
    """Placeholder for the partition record, built per partition spec."""


@attrs.frozen
class Field:
    field_id: int
    name: str
    type: str | IntMap | RequiredList | Record | Partition
    required: bool


def _req(field_id: int, name: str, t: Any) -> Field:
    return Field(field_id, name, t, True)


def _opt(field_id: int, name: str, t: Any) -> Field:
    return Field(field_id, name, t, False)


# data_file (spec "Manifests": data_file struct), field order as Java writes it.
_FILE_PATH = _req(100, "file_path", "string")
_FILE_FORMAT = _req(101, "file_format", "string")
_PARTITION = _req(PARTITION_FIELD_ID, "partition", Partition())
_RECORD_COUNT = _req(103, "record_count", "long")
_FILE_SIZE = _req(104, "file_size_in_bytes", "long")
_BLOCK_SIZE = _req(105, "block_size_in_bytes", "long")
_COLUMN_SIZES = _opt(108, "column_sizes", IntMap(117, 118, "long"))
_VALUE_COUNTS = _opt(109, "value_counts", IntMap(119, 120, "long"))
_NULL_VALUE_COUNTS = _opt(110, "null_value_counts", IntMap(121, 122, "long"))
_NAN_VALUE_COUNTS = _opt(137, "nan_value_counts", IntMap(138, 139, "long"))
_LOWER_BOUNDS = _opt(125, "lower_bounds", IntMap(126, 127, "bytes"))
_UPPER_BOUNDS = _opt(128, "upper_bounds", IntMap(129, 130, "bytes"))
_KEY_METADATA = _opt(131, "key_metadata", "bytes")
_SPLIT_OFFSETS = _opt(132, "split_offsets", RequiredList(133, "long"))
_EQUALITY_IDS = _opt(135, "equality_ids", RequiredList(136, "int"))
_SORT_ORDER_ID = _opt(140, "sort_order_id", "int")
_CONTENT = _req(134, "content", "int")
_FIRST_ROW_ID = _opt(142, "first_row_id", "long")
_REFERENCED_DATA_FILE = _opt(143, "referenced_data_file", "string")
_CONTENT_OFFSET = _opt(144, "content_offset", "long")
_CONTENT_SIZE = _opt(145, "content_size_in_bytes", "long")

DATA_FILE_FIELDS: Mapping[int, tuple[Field, ...]] = MappingProxyType({
    1: (_FILE_PATH, _FILE_FORMAT, _PARTITION, _RECORD_COUNT, _FILE_SIZE, _BLOCK_SIZE, _COLUMN_SIZES,
        _VALUE_COUNTS, _NULL_VALUE_COUNTS, _NAN_VALUE_COUNTS, _LOWER_BOUNDS, _UPPER_BOUNDS, _KEY_METADATA,
        _SPLIT_OFFSETS, _SORT_ORDER_ID),
    2: (_CONTENT, _FILE_PATH, _FILE_FORMAT, _PARTITION, _RECORD_COUNT, _FILE_SIZE, _COLUMN_SIZES,
        _VALUE_COUNTS, _NULL_VALUE_COUNTS, _NAN_VALUE_COUNTS, _LOWER_BOUNDS, _UPPER_BOUNDS, _KEY_METADATA,
        _SPLIT_OFFSETS, _EQUALITY_IDS, _SORT_ORDER_ID),
    3: (_CONTENT, _FILE_PATH, _FILE_FORMAT, _PARTITION, _RECORD_COUNT, _FILE_SIZE, _COLUMN_SIZES,
        _VALUE_COUNTS, _NULL_VALUE_COUNTS, _NAN_VALUE_COUNTS, _LOWER_BOUNDS, _UPPER_BOUNDS, _KEY_METADATA,
        _SPLIT_OFFSETS, _EQUALITY_IDS, _SORT_ORDER_ID, _FIRST_ROW_ID, _REFERENCED_DATA_FILE, _CONTENT_OFFSET,
        _CONTENT_SIZE),
})

# manifest_entry: v1 requires the snapshot id and has no sequence numbers; v2 inherits them when null.
MANIFEST_ENTRY_FIELDS: Mapping[int, tuple[Field, ...]] = MappingProxyType({
    1: (_req(0, "status", "int"), _req(1, "snapshot_id", "long"),
        _req(DATA_FILE_FIELD_ID, "data_file", Record(DATA_FILE_FIELDS[1]))),
    2: (_req(0, "status", "int"), _opt(1, "snapshot_id", "long"), _opt(3, "sequence_number", "long"),
        _opt(4, "file_sequence_number", "long"),
        _req(DATA_FILE_FIELD_ID, "data_file", Record(DATA_FILE_FIELDS[2]))),
    3: (_req(0, "status", "int"), _opt(1, "snapshot_id", "long"), _opt(3, "sequence_number", "long"),
        _opt(4, "file_sequence_number", "long"),
        _req(DATA_FILE_FIELD_ID, "data_file", Record(DATA_FILE_FIELDS[3]))),
})

# field_summary (r508), the element of manifest_file.partitions.
FIELD_SUMMARY_FIELDS: tuple[Field, ...] = (
    _req(509, "contains_null", "boolean"),
    _opt(518, "contains_nan", "boolean"),
    _opt(510, "lower_bound", "bytes"),
    _opt(511, "upper_bound", "bytes"),
)
_PARTITIONS = _opt(507, "partitions", RequiredList(PARTITIONS_ELEMENT_ID, Record(FIELD_SUMMARY_FIELDS)))
_LIST_KEY_METADATA = _opt(519, "key_metadata", "bytes")
_V2_MANIFEST_FILE = (
    _req(500, "manifest_path", "string"), _req(501, "manifest_length", "long"),
    _req(502, "partition_spec_id", "int"), _req(517, "content", "int"),
    _req(515, "sequence_number", "long"), _req(516, "min_sequence_number", "long"),
    _req(503, "added_snapshot_id", "long"),
    _req(504, "added_files_count", "int"), _req(505, "existing_files_count", "int"),
    _req(506, "deleted_files_count", "int"), _req(512, "added_rows_count", "long"),
    _req(513, "existing_rows_count", "long"), _req(514, "deleted_rows_count", "long"),
    _PARTITIONS, _LIST_KEY_METADATA)

MANIFEST_FILE_FIELDS: Mapping[int, tuple[Field, ...]] = MappingProxyType({
    1: (_req(500, "manifest_path", "string"), _req(501, "manifest_length", "long"),
        _req(502, "partition_spec_id", "int"), _req(503, "added_snapshot_id", "long"),
        _opt(504, "added_files_count", "int"), _opt(505, "existing_files_count", "int"),
        _opt(506, "deleted_files_count", "int"), _PARTITIONS,
        _opt(512, "added_rows_count", "long"), _opt(513, "existing_rows_count", "long"),
        _opt(514, "deleted_rows_count", "long"), _LIST_KEY_METADATA),
    2: _V2_MANIFEST_FILE,
    3: _V2_MANIFEST_FILE + (_opt(520, "first_row_id", "long"),),
})


def _ids(*tables: tuple[Field, ...]) -> Mapping[str, int]:
    return MappingProxyType({f.name: f.field_id for table in tables for f in table})


# Field ids by name, for parsers that look fields up by id (names differ between writers).
MANIFEST_ENTRY_IDS = _ids(*MANIFEST_ENTRY_FIELDS.values())
DATA_FILE_IDS = _ids(*DATA_FILE_FIELDS.values())
MANIFEST_FILE_IDS = _ids(*MANIFEST_FILE_FIELDS.values())
FIELD_SUMMARY_IDS = _ids(FIELD_SUMMARY_FIELDS)


def _check_version(format_version: int) -> None:
    if format_version not in FORMAT_VERSIONS:
        raise ValidationError(f"Cannot build manifest schema: unsupported format version {format_version!r}")


def _optional(avro_type: Any) -> list[Any]:
    return ["null", avro_type]


def _field_json(name: str, avro_type: Any, field_id: int, required: bool,
                extra: dict[str, Any] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"name": name, "type": avro_type if required else _optional(avro_type)}
    if not required:
        out["default"] = None
    if extra:
        out.update(extra)
    out[FIELD_ID_PROP] = field_id
    return out


def _type_json(t: Any, field_id: int, partition: dict[str, Any] | None) -> Any:
    if isinstance(t, str):
        return t
    if isinstance(t, IntMap):
        kv = {"type": "record", "name": f"k{t.key_id}_v{t.value_id}", "fields": [
            {"name": "key", "type": "int", FIELD_ID_PROP: t.key_id},
            {"name": "value", "type": t.value_type, FIELD_ID_PROP: t.value_id},
        ]}
        return {"type": "array", "items": kv, "logicalType": "map"}
    if isinstance(t, RequiredList):
        return {"type": "array", "items": _type_json(t.element_type, t.element_id, partition),
                ELEMENT_ID_PROP: t.element_id}
    if isinstance(t, Record):
        return _record_json(f"r{field_id}", t.fields, partition)
    if isinstance(t, Partition):
        if partition is None:
            raise ValidationError("Cannot build manifest schema: no partition record given")
        return partition
    raise ValidationError(f"Cannot build manifest schema: unknown field type {t!r}")


def _record_json(name: str, fields: Sequence[Field], partition: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"type": "record", "name": name, "fields": [
        _field_json(f.name, _type_json(f.type, f.field_id, partition), f.field_id, f.required) for f in fields
    ]}


def manifest_entry_schema(format_version: int, partition_schema: dict[str, Any]) -> dict[str, Any]:
    """The ``manifest_entry`` Avro schema of a manifest for ``format_version``.

    :param format_version: 1, 2 or 3
    :param partition_schema: the ``r102`` record from :func:`partition_avro_schema`
    """
    _check_version(format_version)
    return _record_json(MANIFEST_ENTRY_RECORD, MANIFEST_ENTRY_FIELDS[format_version], partition_schema)


def manifest_file_schema(format_version: int) -> dict[str, Any]:
    """The ``manifest_file`` Avro schema of a manifest list for ``format_version``."""
    _check_version(format_version)
    return _record_json(MANIFEST_FILE_RECORD, MANIFEST_FILE_FIELDS[format_version])


def decimal_required_bytes(precision: int) -> int:
    """The fewest bytes whose two's complement holds every unscaled value of ``precision`` digits (Java's rule)."""
    if not 1 <= precision <= 38:
        raise ValidationError(f"Cannot size decimal: precision {precision} is not in 1..38")
    size = 1
    while 2 ** (8 * size - 1) - 1 < 10**precision - 1:
        size += 1
    return size


def _fixed_name(base: str, field_id: int, used: set[str]) -> str:
    # Avro forbids redefining a name and Java would write a bare reference, which PyIceberg cannot
    # resolve, so a repeated fixed type (two decimal(10, 2) fields) gets a name of its own instead.
    name = base if base not in used else f"{base}_{field_id}"
    used.add(name)
    return name


def partition_value_avro_type(t: IcebergType, *, field_id: int = 0, used_names: set[str] | None = None) -> Any:
    """The Avro type of a partition value of type ``t``: Appendix A, as Java writes it, with one exception.

    ``fixed(L)`` is written as Avro ``bytes``. Iceberg Java (through 1.11, apache/iceberg#17501) writes
    fixed partition values with a length prefix under a ``fixed`` schema and reads them back the same
    way, so it cannot read a spec-encoded ``fixed`` value, while spec readers (PyIceberg, fastavro)
    cannot read Java's. A ``bytes`` schema says what the bytes are, and both read it.

    :param t: the partition field's result type
    :param field_id: the field's id, used only to disambiguate repeated fixed names
    :param used_names: named Avro types already defined in the enclosing schema (updated)
    """
    used = used_names if used_names is not None else set()
    if isinstance(t, BooleanType):
        return "boolean"
    if isinstance(t, IntegerType):
        return "int"
    if isinstance(t, LongType):
        return "long"
    if isinstance(t, FloatType):
        return "float"
    if isinstance(t, DoubleType):
        return "double"
    if isinstance(t, DateType):
        return {"type": "int", "logicalType": "date"}
    if isinstance(t, TimeType):
        return {"type": "long", "logicalType": "time-micros"}
    if isinstance(t, TimestamptzType):
        return {"type": "long", "logicalType": "timestamp-micros", ADJUST_TO_UTC_PROP: True}
    if isinstance(t, TimestampType):
        return {"type": "long", "logicalType": "timestamp-micros", ADJUST_TO_UTC_PROP: False}
    if isinstance(t, TimestamptzNsType):
        return {"type": "long", "logicalType": "timestamp-nanos", ADJUST_TO_UTC_PROP: True}
    if isinstance(t, TimestampNsType):
        return {"type": "long", "logicalType": "timestamp-nanos", ADJUST_TO_UTC_PROP: False}
    if isinstance(t, StringType):
        return "string"
    if isinstance(t, UUIDType):
        return {"type": "fixed", "name": _fixed_name("uuid_fixed", field_id, used), "size": 16, "logicalType": "uuid"}
    if isinstance(t, (FixedType, BinaryType)):
        return "bytes"
    if isinstance(t, DecimalType):
        return {"type": "fixed", "name": _fixed_name(f"decimal_{t.precision}_{t.scale}", field_id, used),
                "size": decimal_required_bytes(t.precision), "logicalType": "decimal",
                "precision": t.precision, "scale": t.scale}
    raise ValidationError(f"Cannot store partition value: type {t} is not a primitive type")


def _valid_avro_name(name: str) -> bool:
    return bool(name) and (name[0].isalpha() or name[0] == "_") and all(c.isalnum() or c == "_" for c in name[1:])


def _sanitize_char(c: str) -> str:
    if c.isdigit():
        return "_" + c
    units = c.encode("utf-16-be")
    # Java sanitizes UTF-16 code units, so a character outside the BMP becomes two escapes.
    return "".join("_x" + f"{int.from_bytes(units[i:i + 2], 'big'):X}" for i in range(0, len(units), 2))


def avro_field_name(name: str) -> str:
    """Java's Avro-compatible spelling of a field name (``AvroSchemaUtil.makeCompatibleName``)."""
    if not name:
        raise ValidationError("Cannot build Avro field name: the name is empty")
    if _valid_avro_name(name):
        return name
    first = name[0] if (name[0].isalpha() or name[0] == "_") else _sanitize_char(name[0])
    return first + "".join(c if (c.isalnum() or c == "_") else _sanitize_char(c) for c in name[1:])


def partition_avro_schema(partition_fields: Sequence[tuple[int, str, IcebergType]]) -> dict[str, Any]:
    """The ``r102`` partition record: one optional field per partition field, ids from the spec.

    :param partition_fields: ``(partition field id, name, result type)`` in spec order
    """
    used: set[str] = set()
    fields = []
    for field_id, name, t in partition_fields:
        avro_name = avro_field_name(name)
        extra = {ICEBERG_FIELD_NAME_PROP: name} if avro_name != name else None
        avro_type = partition_value_avro_type(t, field_id=field_id, used_names=used)
        fields.append(_field_json(avro_name, avro_type, field_id, False, extra))
    return {"type": "record", "name": f"r{PARTITION_FIELD_ID}", "fields": fields}
