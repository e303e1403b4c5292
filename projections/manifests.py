"""Render Avro manifests and manifest lists: pure functions, values in and bytes out.

Layer: projections (pure; imports engine.model, engine.errors and projections.avro_schemas; no I/O).
Rendering is deterministic: the caller passes the Avro sync marker (derived from the file's
path, see projections.layout), the schemas come from :mod:`projections.avro_schemas`, the
key-value metadata is written in a fixed order, and the codec is ``deflate`` (zlib output is
stable for a given zlib build) or ``null``. Parsing, of ours and every other writer's files, is
:mod:`projections.manifest_reader`.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import io
import json
import math
import operator
import struct
import uuid
import zlib
from collections.abc import Callable, Sequence
from decimal import Decimal
from typing import Any

import attrs
import fastavro

from engine.errors import ValidationError
from engine.model.data_file import (
    DataFile,
    DataFileContent,
    EntryStatus,
    FieldSummary,
    ManifestContent,
    ManifestEntry,
    ManifestFile,
)
from engine.model.kept_values import KeptValues, KeptWhileAlive
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
from engine.model.values import from_bytes, to_bytes
from projections.avro_schemas import (
    FORMAT_VERSIONS,
    V1_BLOCK_SIZE_IN_BYTES,
    decimal_required_bytes,
    manifest_entry_schema,
    manifest_file_schema,
    partition_avro_schema,
)

PartitionFields = Sequence[tuple[int, str, IcebergType]]

CODECS = ("deflate", "null")
DEFAULT_CODEC = "deflate"
SYNC_MARKER_SIZE = 16
MANIFEST_CONTENT_NAMES = {ManifestContent.DATA: "data", ManifestContent.DELETES: "deletes"}

_INT_RANGE = (-(2**31), 2**31 - 1)
_LONG_RANGE = (-(2**63), 2**63 - 1)


# ---------------------------------------------------------------------------------------------
# Partition values: canonical Python values (engine.model.values) -> what fastavro writes
# ---------------------------------------------------------------------------------------------

def _check_int(v: Any, bounds: tuple[int, int]) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        raise TypeError(f"expected an integer, got {type(v).__name__}")
    if not bounds[0] <= v <= bounds[1]:
        raise ValueError(f"{v} is out of range")
    return v


def _check_float(v: Any) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise TypeError(f"expected a float, got {type(v).__name__}")
    return float(v)


def _check_bool(v: Any) -> bool:
    if not isinstance(v, bool):
        raise TypeError(f"expected a boolean, got {type(v).__name__}")
    return v


def _check_str(v: Any) -> str:
    if not isinstance(v, str):
        raise TypeError(f"expected a string, got {type(v).__name__}")
    return v


def _check_bytes(v: Any) -> bytes:
    if not isinstance(v, (bytes, bytearray, memoryview)):
        raise TypeError(f"expected bytes, got {type(v).__name__}")
    return bytes(v)


def _uuid_bytes(v: Any) -> bytes:
    if isinstance(v, uuid.UUID):
        return v.bytes
    raise TypeError(f"expected a uuid.UUID, got {type(v).__name__}")


def _decimal_fixed(t: DecimalType) -> Callable[[Any], bytes]:
    size = decimal_required_bytes(t.precision)
    limit = 10**t.precision

    def encode(v: Any) -> bytes:
        if isinstance(v, bool) or not isinstance(v, (Decimal, int)):
            raise TypeError(f"expected a Decimal, got {type(v).__name__}")
        d = Decimal(v)
        if not d.is_finite():
            raise ValueError(f"{d} is not finite")
        sign, digits, exponent = d.as_tuple()
        shift = int(exponent) + t.scale
        unscaled = int("".join(map(str, digits)) or "0")
        if shift >= 0:
            unscaled *= 10**shift
        else:
            unscaled, rest = divmod(unscaled, 10**-shift)
            if rest:
                raise ValueError(f"{d} has more than {t.scale} digits after the point")
        if unscaled >= limit:
            raise ValueError(f"{d} does not fit in {t}")
        return (-unscaled if sign else unscaled).to_bytes(size, "big", signed=True)

    return encode


def _fixed_encoder(length: int) -> Callable[[Any], bytes]:
    def encode(v: Any) -> bytes:
        b = _check_bytes(v)
        if len(b) != length:
            raise ValueError(f"expected {length} bytes, got {len(b)}")
        return b

    return encode


def _partition_encoder(t: IcebergType) -> Callable[[Any], Any]:
    """A function from one canonical value (not None) to the value fastavro writes for ``t``."""
    if isinstance(t, BooleanType):
        return _check_bool
    if isinstance(t, (IntegerType, DateType)):
        return lambda v: _check_int(v, _INT_RANGE)
    if isinstance(t, (LongType, TimeType, TimestampType, TimestamptzType, TimestampNsType, TimestamptzNsType)):
        return lambda v: _check_int(v, _LONG_RANGE)
    if isinstance(t, (FloatType, DoubleType)):
        return _check_float
    if isinstance(t, DecimalType):
        return _decimal_fixed(t)
    if isinstance(t, StringType):
        return _check_str
    if isinstance(t, UUIDType):
        return _uuid_bytes
    if isinstance(t, FixedType):
        return _fixed_encoder(t.length)
    if isinstance(t, BinaryType):
        return _check_bytes
    raise ValidationError(f"Cannot store partition value: type {t} is not a primitive type")


def _partition_writer(partition_fields: PartitionFields,
                      avro_names: Sequence[str]) -> Callable[[tuple[Any, ...]], dict[str, Any]]:
    encoders = [(_partition_encoder(t), name, avro_name, t)
                for (_, name, t), avro_name in zip(partition_fields, avro_names)]
    count = len(encoders)

    def write(values: tuple[Any, ...]) -> dict[str, Any]:
        if len(values) != count:
            raise ValidationError(f"Cannot render manifest: partition tuple {values!r} has {len(values)} values, "
                                  f"the spec has {count} fields")
        out: dict[str, Any] = {}
        for (encode, name, avro_name, t), v in zip(encoders, values):
            if v is None:
                out[avro_name] = None
                continue
            try:
                out[avro_name] = encode(v)
            except (TypeError, ValueError, OverflowError) as e:
                raise ValidationError(f"Cannot render manifest: partition value {v!r} for field {name!r} "
                                      f"({t}): {e}") from e
        return out

    return write


# ---------------------------------------------------------------------------------------------
# Rendering
# ---------------------------------------------------------------------------------------------

def _check_common(format_version: int, sync_marker: bytes, codec: str, what: str) -> None:
    if format_version not in FORMAT_VERSIONS:
        raise ValidationError(f"Cannot render {what}: unsupported format version {format_version!r}")
    if not isinstance(sync_marker, bytes) or len(sync_marker) != SYNC_MARKER_SIZE:
        raise ValidationError(f"Cannot render {what}: the sync marker must be {SYNC_MARKER_SIZE} bytes, "
                              f"got {sync_marker!r}")
    if codec not in CODECS:
        raise ValidationError(f"Cannot render {what}: unsupported codec {codec!r} (use one of {CODECS})")


@attrs.frozen
class _AvroSchema:
    """An Avro schema prepared once for the files written with it: its header text and fastavro's parsed form."""

    #: the schema as ``fastavro.writer`` puts it in a file's header (``json.dumps`` of the schema)
    json_text: str
    #: ``fastavro.parse_schema``'s form, which encodes records without parsing the schema again
    parsed: Any

    @classmethod
    def of(cls, schema: dict[str, Any]) -> _AvroSchema:
        return cls(json.dumps(schema), fastavro.parse_schema(copy.deepcopy(schema)))


@attrs.frozen(eq=False)
class _ManifestEntryAvro:
    """The Avro schemas a manifest of one format version and partition type is written with."""

    #: the ``manifest_entry`` schema (the file's header holds it)
    entry: _AvroSchema
    #: its ``data_file`` record alone, to encode a data file's part of an entry
    data_file: _AvroSchema
    #: the partition fields' Avro names
    partition_names: list[str]


@functools.lru_cache(maxsize=256)
def _manifest_entry_avro(format_version: int,
                         partition_fields: tuple[tuple[int, str, IcebergType], ...]) -> _ManifestEntryAvro:
    """The schemas of manifests for a format version and partition type."""
    partition_schema = partition_avro_schema(partition_fields)
    entry_schema = manifest_entry_schema(format_version, partition_schema)
    (data_file_schema,) = [f["type"] for f in entry_schema["fields"] if f["name"] == "data_file"]
    return _ManifestEntryAvro(_AvroSchema.of(entry_schema), _AvroSchema.of(data_file_schema),
                              [f["name"] for f in partition_schema["fields"]])


#: the Avro encoding of recently rendered data files (an entry's ``data_file`` record), by file object and the
#: schemas it was encoded for, while the file object lives (the kept entries of written manifests hold the files a
#: merge packs)
_ENCODED_DATA_FILES: KeptWhileAlive[bytes] = KeptWhileAlive(50_000)


@functools.lru_cache(maxsize=None)
def _manifest_file_avro(format_version: int) -> _AvroSchema:
    return _AvroSchema.of(manifest_file_schema(format_version))


def _encoded(schema: _AvroSchema, record: dict[str, Any], what: str) -> bytes:
    buf = io.BytesIO()
    try:
        fastavro.schemaless_writer(buf, schema.parsed, record)
    except (TypeError, ValueError, OverflowError, struct.error) as e:
        raise ValidationError(f"Cannot render {what}: {e}") from e
    return buf.getvalue()


def _write_avro(schema: _AvroSchema, records: Sequence[bytes], metadata: dict[str, str], sync_marker: bytes,
                codec: str) -> bytes:
    """An Avro object container of encoded records, byte for byte what ``fastavro.writer`` (its compiled writer)
    writes for the same schema, records, metadata, sync marker and codec: the header's metadata, then the codec,
    then the schema; blocks split where it splits them. The schema is parsed once per process, not per file."""
    header = [AVRO_MAGIC, _zigzag_long(len(metadata) + 2)]
    for key, value in (*metadata.items(), ("avro.codec", codec), ("avro.schema", schema.json_text)):
        header += [_avro_bytes(key.encode("utf-8")), _avro_bytes(value.encode("utf-8"))]
    header += [_zigzag_long(0), sync_marker]
    return b"".join(header) + _blocks(records, sync_marker, codec)


def _optional_array(items: list[Any] | None) -> tuple[str, list[Any]] | None:
    """An optional array field's value in fastavro's tuple notation, which names the union branch: fastavro
    otherwise validates every item against each branch before writing it (half the cost of a manifest entry). The
    bytes are the same."""
    return None if items is None else ("array", items)


def _pairs_json(pairs: tuple[tuple[int, Any], ...] | None) -> tuple[str, list[dict[str, Any]]] | None:
    if pairs is None:
        return None
    return _optional_array([{"key": k, "value": v} for k, v in pairs])


def _data_file_record(f: DataFile, format_version: int, partition: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if format_version >= 2:
        out["content"] = int(f.content)
    out["file_path"] = f.file_path
    out["file_format"] = f.file_format
    out["partition"] = partition
    out["record_count"] = f.record_count
    out["file_size_in_bytes"] = f.file_size_in_bytes
    if format_version == 1:
        out["block_size_in_bytes"] = V1_BLOCK_SIZE_IN_BYTES
    out["column_sizes"] = _pairs_json(f.column_sizes)
    out["value_counts"] = _pairs_json(f.value_counts)
    out["null_value_counts"] = _pairs_json(f.null_value_counts)
    out["nan_value_counts"] = _pairs_json(f.nan_value_counts)
    out["lower_bounds"] = _pairs_json(f.lower_bounds)
    out["upper_bounds"] = _pairs_json(f.upper_bounds)
    out["key_metadata"] = f.key_metadata
    out["split_offsets"] = None if f.split_offsets is None else _optional_array(list(f.split_offsets))
    if format_version >= 2:
        out["equality_ids"] = None if f.equality_ids is None else _optional_array(list(f.equality_ids))
    out["sort_order_id"] = f.sort_order_id
    if format_version >= 3:
        out["first_row_id"] = f.first_row_id
        out["referenced_data_file"] = f.referenced_data_file
        out["content_offset"] = f.content_offset
        out["content_size_in_bytes"] = f.content_size_in_bytes
    elif f.is_deletion_vector:
        raise ValidationError(f"Cannot render v{format_version} manifest: {f.key} is a deletion vector, which "
                              "needs format version 3")
    return out


def _checked_entry(e: ManifestEntry, format_version: int, content: ManifestContent, spec_id: int,
                   snapshot_id_for_v1: int | None) -> tuple[int, int | None, int | None, int | None]:
    """An entry's status, snapshot id, data and file sequence numbers as its manifest writes them (v1: the snapshot
    id only, the others None), once the entry is known to belong in the manifest."""
    f = e.data_file
    if f.spec_id != spec_id:
        raise ValidationError(f"Cannot render manifest: file {f.file_path} has partition spec {f.spec_id}, "
                              f"the manifest is for spec {spec_id}")
    is_data = f.content == DataFileContent.DATA
    if is_data != (content == ManifestContent.DATA):
        raise ValidationError(f"Cannot render manifest: {f.content.name} file {f.file_path} does not belong "
                              f"in a {MANIFEST_CONTENT_NAMES[content]} manifest")
    if format_version == 1:
        snapshot_id = e.snapshot_id if e.snapshot_id is not None else snapshot_id_for_v1
        if snapshot_id is None:
            raise ValidationError(f"Cannot render v1 manifest: entry for {f.file_path} has no snapshot id "
                                  "and no snapshot_id_for_v1 was given")
        return int(e.status), avro_long(_long(snapshot_id, f, "snapshot id")), None, None
    if e.status != EntryStatus.ADDED and (e.snapshot_id is None or e.data_sequence_number is None):
        raise ValidationError(f"Cannot render manifest: {e.status.name} entry for {f.file_path} needs an explicit "
                              "snapshot id and data sequence number (only ADDED entries inherit them)")
    return (int(e.status), avro_long(_long(e.snapshot_id, f, "snapshot id")),
            avro_long(_long(e.data_sequence_number, f, "data sequence number")),
            avro_long(_long(e.file_sequence_number, f, "file sequence number")))


def _long(value: Any, f: DataFile, what: str) -> int | None:
    """An entry's id or sequence number as a Python int (None stays None): the entry's own fields are encoded here,
    not by fastavro, so whatever is not an integer is refused as fastavro would refuse it."""
    if value is None or type(value) is int:
        return value
    if not isinstance(value, bool):
        with contextlib.suppress(TypeError):
            return operator.index(value)
    raise ValidationError(f"Cannot render manifest: the {what} of the entry for {f.file_path} is not an integer "
                          f"({value!r})")


def _entry_record(e: ManifestEntry, format_version: int, content: ManifestContent, spec_id: int,
                  partition: dict[str, Any], snapshot_id_for_v1: int | None) -> dict[str, Any]:
    """An entry as the record fastavro writes: the tests' reference for :func:`_encoded_entry`'s bytes."""
    status, snapshot_id, sequence_number, file_sequence_number = _checked_entry(
        e, format_version, content, spec_id, snapshot_id_for_v1)
    data_file = _data_file_record(e.data_file, format_version, partition)
    if format_version == 1:
        return {"status": status, "snapshot_id": snapshot_id, "data_file": data_file}
    return {"status": status, "snapshot_id": snapshot_id, "sequence_number": sequence_number,
            "file_sequence_number": file_sequence_number, "data_file": data_file}


def _optional_long(value: int | None) -> bytes:
    """Avro's encoding of a ``["null", "long"]`` union: the branch, then the long."""
    return b"\x00" if value is None else b"\x02" + _zigzag_long(value)


def _encoded_entry(e: ManifestEntry, entry_avro: _ManifestEntryAvro, format_version: int,
                   content: ManifestContent, spec_id: int, write_partition: Callable[[tuple[Any, ...]], dict[str, Any]],
                   snapshot_id_for_v1: int | None) -> bytes:
    """One entry's Avro encoding: its own fields, then its data file's, which are encoded once per file object and
    schema (a merge writes the entries of every manifest it packs again, each with a new status, and with them
    the bytes of every file of the table)."""
    status, snapshot_id, sequence_number, file_sequence_number = _checked_entry(
        e, format_version, content, spec_id, snapshot_id_for_v1)
    if format_version == 1:
        prefix = _zigzag_long(status) + _zigzag_long(snapshot_id)  # type: ignore[arg-type]
    else:
        prefix = encoded_entry_prefix(status, snapshot_id, sequence_number, file_sequence_number)
    f = e.data_file
    data = _ENCODED_DATA_FILES.get(f, entry_avro)
    if data is None:
        data = _encoded(entry_avro.data_file, _data_file_record(f, format_version, write_partition(f.partition)),
                        "manifest")
        _ENCODED_DATA_FILES.put(f, entry_avro, data)
    return prefix + data


def manifest_metadata(*, format_version: int, content: ManifestContent, schema_json: str, schema_id: int,
                      spec_id: int, spec_fields_json: str) -> dict[str, str]:
    """The manifest's Avro key-value metadata, in the order icelog writes it (``content`` only in v2+)."""
    meta = {
        "schema": schema_json,
        "schema-id": str(schema_id),
        "partition-spec": spec_fields_json,
        "partition-spec-id": str(spec_id),
        "format-version": str(format_version),
    }
    if format_version >= 2:
        meta["content"] = MANIFEST_CONTENT_NAMES[ManifestContent(content)]
    return meta


def render_manifest(entries: Sequence[ManifestEntry], *, format_version: int, content: ManifestContent,
                    schema_json: str, schema_id: int, spec_id: int, spec_fields_json: str,
                    partition_fields: PartitionFields, sync_marker: bytes,
                    snapshot_id_for_v1: int | None = None, codec: str = DEFAULT_CODEC) -> bytes:
    """Render one manifest (an Avro file of ``manifest_entry`` records) to bytes.

    :param entries: the entries, written in this order
    :param format_version: 1, 2 or 3
    :param content: DATA or DELETES (DELETES needs v2); every entry's file must match it
    :param schema_json: the table schema as JSON text (metadata key ``schema``)
    :param schema_id: the id of that schema
    :param spec_id: the partition spec id; every entry's file must have it
    :param spec_fields_json: the spec's fields as JSON text (metadata key ``partition-spec``)
    :param partition_fields: ``(partition field id, name, result type)`` in spec order
    :param sync_marker: the 16-byte Avro sync marker (derive it from the path)
    :param snapshot_id_for_v1: v1 only: the snapshot id written for entries whose snapshot id is None
    :param codec: ``"deflate"`` (default) or ``"null"``
    """
    records = encode_manifest_entries(entries, format_version=format_version, content=content, spec_id=spec_id,
                                      partition_fields=partition_fields, snapshot_id_for_v1=snapshot_id_for_v1)
    return render_manifest_records(records, format_version=format_version, content=content, schema_json=schema_json,
                                   schema_id=schema_id, spec_id=spec_id, spec_fields_json=spec_fields_json,
                                   partition_fields=partition_fields, sync_marker=sync_marker, codec=codec)


def encode_manifest_entries(entries: Sequence[ManifestEntry], *, format_version: int, content: ManifestContent,
                            spec_id: int, partition_fields: PartitionFields,
                            snapshot_id_for_v1: int | None = None) -> list[bytes]:
    """The Avro records of manifest entries, as :func:`render_manifest` writes them (see it for the parameters)."""
    content = ManifestContent(content)
    if format_version == 1 and content != ManifestContent.DATA:
        raise ValidationError("Cannot render v1 manifest: format version 1 has no delete manifests")
    partition_fields = tuple(tuple(f) for f in partition_fields)  # type: ignore[misc]
    entry_avro = _manifest_entry_avro(format_version, partition_fields)
    write_partition = _partition_writer(partition_fields, entry_avro.partition_names)
    return [_encoded_entry(e, entry_avro, format_version, content, spec_id, write_partition, snapshot_id_for_v1)
            for e in entries]


def render_manifest_records(records: Sequence[bytes], *, format_version: int, content: ManifestContent,
                            schema_json: str, schema_id: int, spec_id: int, spec_fields_json: str,
                            partition_fields: PartitionFields, sync_marker: bytes,
                            codec: str = DEFAULT_CODEC) -> bytes:
    """A manifest of entries already encoded (:func:`encode_manifest_entries`, or records carried over from a
    manifest written with the same entry schema, :func:`manifest_entry_schema_text`)."""
    _check_common(format_version, sync_marker, codec, "manifest")
    content = ManifestContent(content)
    if format_version == 1 and content != ManifestContent.DATA:
        raise ValidationError("Cannot render v1 manifest: format version 1 has no delete manifests")
    entry_avro = _manifest_entry_avro(format_version, tuple(tuple(f) for f in partition_fields))  # type: ignore[misc]
    metadata = manifest_metadata(format_version=format_version, content=content, schema_json=schema_json,
                                 schema_id=schema_id, spec_id=spec_id, spec_fields_json=spec_fields_json)
    return _write_avro(entry_avro.entry, records, metadata, sync_marker, codec)


def manifest_entry_schema_text(format_version: int, partition_fields: PartitionFields) -> str:
    """The ``avro.schema`` text of the manifests rendered for a format version and partition type: records of a
    manifest whose header holds the same text encode their entries as this renderer would."""
    return _manifest_entry_avro(format_version, tuple(tuple(f) for f in partition_fields)).entry.json_text  # type: ignore[misc]


def encoded_entry_prefix(status: int, snapshot_id: int | None, data_sequence_number: int | None,
                         file_sequence_number: int | None) -> bytes:
    """The fields of a v2 or v3 manifest entry before its data file, as :func:`render_manifest` encodes them."""
    return b"".join((_zigzag_long(status), _optional_long(avro_long(snapshot_id)),
                     _optional_long(avro_long(data_sequence_number)), _optional_long(avro_long(file_sequence_number))))


def avro_long(value: int | None) -> int | None:
    """An id or sequence number as Avro's signed 64-bit long: a value some writers put in metadata.json past
    2**63 - 1 (the unsigned range) is written as the long with the same 64 bits, as Java reads it."""
    if value is None or -(1 << 63) <= value < (1 << 63):
        return value
    return ((value + (1 << 63)) % (1 << 64)) - (1 << 63)


def _manifest_file_record(m: ManifestFile, format_version: int) -> dict[str, Any]:
    partitions = None if m.partitions is None else _optional_array([
        {"contains_null": s.contains_null, "contains_nan": s.contains_nan, "lower_bound": s.lower_bound,
         "upper_bound": s.upper_bound} for s in m.partitions])
    out: dict[str, Any] = {"manifest_path": m.manifest_path, "manifest_length": m.manifest_length,
                           "partition_spec_id": m.partition_spec_id}
    if format_version >= 2:
        out["content"] = int(m.content)
        out["sequence_number"] = avro_long(m.sequence_number)
        out["min_sequence_number"] = avro_long(m.min_sequence_number)
    elif m.content != ManifestContent.DATA:
        raise ValidationError(f"Cannot render v1 manifest list: delete manifest {m.manifest_path} needs v2")
    out.update({
        "added_snapshot_id": avro_long(m.added_snapshot_id),
        "added_files_count": m.added_files_count, "existing_files_count": m.existing_files_count,
        "deleted_files_count": m.deleted_files_count, "added_rows_count": m.added_rows_count,
        "existing_rows_count": m.existing_rows_count, "deleted_rows_count": m.deleted_rows_count,
        "partitions": partitions, "key_metadata": m.key_metadata,
    })
    if format_version >= 3:
        out["first_row_id"] = m.first_row_id
    return out


def manifest_list_metadata(*, format_version: int, snapshot_id: int, parent_snapshot_id: int | None,
                           sequence_number: int | None, first_row_id: int | None = None) -> dict[str, str]:
    """The manifest list's key-value metadata as Java writes it (a missing parent is the text ``null``; v3 adds
    the snapshot's ``first-row-id``)."""
    meta = {"snapshot-id": str(snapshot_id),
            "parent-snapshot-id": "null" if parent_snapshot_id is None else str(parent_snapshot_id)}
    if format_version >= 2:
        if sequence_number is None:
            raise ValidationError(f"Cannot render manifest list: format version {format_version} needs a "
                                  "sequence number")
        meta["sequence-number"] = str(sequence_number)
    if format_version >= 3 and first_row_id is not None:  # (none for a snapshot from before an upgrade to v3)
        meta["first-row-id"] = str(first_row_id)
    meta["format-version"] = str(format_version)
    return meta


def render_manifest_list(manifests: Sequence[ManifestFile], *, format_version: int, snapshot_id: int,
                         parent_snapshot_id: int | None, sequence_number: int | None, sync_marker: bytes,
                         codec: str = DEFAULT_CODEC, first_row_id: int | None = None) -> bytes:
    """Render a snapshot's manifest list (an Avro file of ``manifest_file`` records) to bytes.

    :param manifests: the manifests, written in this order (their sequence numbers already assigned)
    :param format_version: 1, 2 or 3 (v1 writes no content or sequence numbers)
    :param snapshot_id: the snapshot's id
    :param parent_snapshot_id: its parent's id, or None
    :param sequence_number: the snapshot's sequence number (ignored in v1)
    :param first_row_id: v3: the snapshot's first row id (the manifests carry their own ``first_row_id``)
    :param sync_marker: the 16-byte Avro sync marker (derive it from the path)
    :param codec: ``"deflate"`` (default) or ``"null"``
    """
    _check_common(format_version, sync_marker, codec, "manifest list")
    metadata = manifest_list_metadata(format_version=format_version, snapshot_id=snapshot_id,
                                      parent_snapshot_id=parent_snapshot_id, sequence_number=sequence_number,
                                      first_row_id=first_row_id)
    # each record's bytes are encoded once and kept, so a list that grows by one manifest per commit costs one
    # record's encoding, not the whole list's
    return _write_avro(_manifest_file_avro(format_version),
                       [_encoded_manifest_file(m, format_version) for m in manifests], metadata, sync_marker, codec)


#: the Avro encoding of recently rendered manifest list records, by (format version, manifest)
_ENCODED_MANIFEST_FILES: KeptValues[bytes] = KeptValues(8192)
_AVRO_SYNC_INTERVAL = 16_000  # fastavro.writer's default: a block ends once it holds this many bytes
AVRO_MAGIC = b"Obj\x01"


def _encoded_manifest_file(m: ManifestFile, format_version: int) -> bytes:
    return _ENCODED_MANIFEST_FILES.get_or_make((format_version, m), lambda: _encoded(
        _manifest_file_avro(format_version), _manifest_file_record(m, format_version), "manifest list"))


_ONE_BYTE = [bytes((n,)) for n in range(0x80)]


def _zigzag_long(value: int) -> bytes:
    """Avro's zig-zag variable-length encoding of a long."""
    n = (value << 1) ^ (value >> 63)
    if 0 <= n < 0x80:
        return _ONE_BYTE[n]
    out = bytearray()
    while n & ~0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _avro_bytes(data: bytes) -> bytes:
    """Avro's encoding of bytes (or a string's UTF-8): the length, then the bytes."""
    return _zigzag_long(len(data)) + data


def _blocks(records: Sequence[bytes], sync_marker: bytes, codec: str) -> bytes:
    """Encoded records as the data blocks of an Avro container, split where fastavro.writer splits them (after the
    record that brings a block to :data:`_AVRO_SYNC_INTERVAL` bytes) and compressed as it compresses them."""
    out: list[bytes] = []
    block: list[bytes] = []
    size = 0

    def dump() -> None:
        if codec == "null":
            out.extend((_zigzag_long(len(block)), _zigzag_long(size), *block, sync_marker))
            return
        # fastavro's deflate block: zlib's stream without its two-byte header and its last byte
        data = zlib.compress(b"".join(block))[2:-1]
        out.extend((_zigzag_long(len(block)), _zigzag_long(len(data)), data, sync_marker))

    for record in records:
        block.append(record)
        size += len(record)
        if size >= _AVRO_SYNC_INTERVAL:
            dump()
            block, size = [], 0
    if block:
        dump()
    return b"".join(out)


def combine_partition_summaries(partition_fields: PartitionFields, a: Sequence[FieldSummary],
                                b: Sequence[FieldSummary]) -> tuple[FieldSummary, ...]:
    """The summaries :func:`partition_summaries` gives for the entries of two groups together, from each group's:
    nulls and NaNs if either has them, the lower of the lower bounds and the higher of the upper ones."""
    return tuple(FieldSummary(
        contains_null=bool(x.contains_null or y.contains_null),
        contains_nan=isinstance(t, (FloatType, DoubleType)) and bool(x.contains_nan or y.contains_nan),
        lower_bound=_bound(t, x.lower_bound, y.lower_bound, lowest=True),
        upper_bound=_bound(t, x.upper_bound, y.upper_bound, lowest=False))
        for (_, _, t), x, y in zip(tuple(partition_fields), a, b, strict=True))


def _bound(t: IcebergType, u: bytes | None, v: bytes | None, *, lowest: bool) -> bytes | None:
    """The lower (or higher) of two bounds in Appendix D bytes, either of which may be missing."""
    if u is None or v is None:
        return u if v is None else v
    key = _order_key(t)
    ku, kv = key(from_bytes(t, u)), key(from_bytes(t, v))
    return u if (ku <= kv if lowest else ku >= kv) else v


def _is_nan(v: Any) -> bool:
    return isinstance(v, float) and math.isnan(v)


def _order_key(t: IcebergType) -> Callable[[Any], Any]:
    if isinstance(t, (FloatType, DoubleType)):
        # -0.0 sorts before +0.0 (IEEE 754 totalOrder), as the spec asks of bounds.
        return lambda v: (v, math.copysign(1.0, v))
    return lambda v: v


def partition_summaries(partition_fields: PartitionFields,
                        entries: Sequence[ManifestEntry]) -> tuple[FieldSummary, ...]:
    """One :class:`FieldSummary` per partition field over all entries (any status, as Java counts them).

    Bounds are the smallest and largest non-null, non-NaN values, in Appendix D bytes.
    """
    summaries = []
    for i, (_, name, t) in enumerate(tuple(partition_fields)):
        values = []
        for e in entries:
            partition = e.data_file.partition
            if len(partition) <= i:
                raise ValidationError(f"Cannot summarize partitions: {e.data_file.file_path} has no value "
                                      f"for partition field {name!r}")
            values.append(partition[i])
        contains_null = any(v is None for v in values)
        contains_nan = isinstance(t, (FloatType, DoubleType)) and any(_is_nan(v) for v in values)
        present = [v for v in values if v is not None and not _is_nan(v)]
        lower = upper = None
        if present:
            key = _order_key(t)
            lower = to_bytes(t, min(present, key=key))
            upper = to_bytes(t, max(present, key=key))
        summaries.append(FieldSummary(contains_null=contains_null, contains_nan=contains_nan,
                                      lower_bound=lower, upper_bound=upper))
    return tuple(summaries)
