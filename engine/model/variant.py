"""Variant values: Python values to and from the Variant binary encoding, and their Arrow form.

Layer: engine.model (pure functions; imports the standard library, pyarrow, engine.errors and engine.model.values).

A variant (format v3 ``variant`` type) is two byte strings: the *metadata* (a dictionary of the object keys the
value uses) and the *value* (a header byte, then the value; objects and arrays nest). This module encodes and
decodes the unshredded form the Parquet Variant encoding specifies (version 1), which is what icelog writes and
reads; shredded columns are not read.

=========================  ======================================================
Python                     variant primitive
=========================  ======================================================
None                       null
bool                       boolean
int                        int8 / int16 / int32 / int64 (the narrowest that fits)
float                      double
decimal.Decimal            decimal4 / decimal8 / decimal16 (by precision)
str                        short string (under 64 bytes) or string
bytes                      binary
datetime.date              date
datetime.datetime          timestamp_ntz (naive) or timestamp (aware, as UTC), micros
datetime.time              time (naive), micros
uuid.UUID                  uuid
list, tuple                array
dict with str keys         object
=========================  ======================================================

In Arrow a variant column is ``struct<metadata: binary not null, value: binary not null>``
(:data:`VARIANT_STORAGE_TYPE`) whose field is marked ``arrow.parquet.variant`` (:data:`VARIANT_FIELD_METADATA`);
:func:`variant_array` builds one from Python values and :func:`variant_values` reads one back.
"""

from __future__ import annotations

import datetime as _dt
import decimal
import struct
import uuid
from typing import Any

import pyarrow as pa

from engine.errors import ValidationError
from engine.model.values import decimal_from_unscaled, decimal_unscaled

_VERSION = 1
_PRIMITIVE, _SHORT_STRING, _OBJECT, _ARRAY = 0, 1, 2, 3
(_NULL, _TRUE, _FALSE, _INT8, _INT16, _INT32, _INT64, _DOUBLE, _DECIMAL4, _DECIMAL8, _DECIMAL16, _DATE,
 _TIMESTAMP, _TIMESTAMP_NTZ, _FLOAT, _BINARY, _STRING, _TIME, _TIMESTAMP_NANOS, _TIMESTAMP_NTZ_NANOS,
 _UUID) = range(21)
_EPOCH = _dt.datetime(1970, 1, 1)
_EPOCH_UTC = _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc)
_EPOCH_DATE = _dt.date(1970, 1, 1)
_INT_RANGES = ((_INT8, 1), (_INT16, 2), (_INT32, 4), (_INT64, 8))
_MAX_NESTING = 128


def _size_for(n: int) -> int:
    """Bytes needed for an unsigned offset or id up to ``n`` (1 to 4)."""
    return 1 if n < 1 << 8 else 2 if n < 1 << 16 else 3 if n < 1 << 24 else 4


def _uint(n: int, size: int) -> bytes:
    return n.to_bytes(size, "little")


def _read_uint(b: bytes, at: int, size: int) -> int:
    if at + size > len(b):
        raise ValidationError("Cannot read variant: truncated")
    return int.from_bytes(b[at:at + size], "little")


# -- encoding -----------------------------------------------------------------------------------------------------


def encode_variant(value: Any) -> tuple[bytes, bytes]:
    """The (metadata, value) bytes of a Python value.

    :raises ValidationError: for a value with no variant form (naming its Python type), an object key that is not
        a string, or an int beyond 64 bits
    """
    keys: dict[str, int] = {}
    _collect_keys(value, keys, 0)
    names = sorted(keys)
    ids = {name: i for i, name in enumerate(names)}
    encoded = [n.encode("utf-8") for n in names]
    offsets = [0]
    for e in encoded:
        offsets.append(offsets[-1] + len(e))
    size = _size_for(max(offsets[-1], len(names)))
    header = _VERSION | (1 << 4 if names else 0) | ((size - 1) << 6)  # sorted_strings when keys are present
    metadata = bytes([header]) + _uint(len(names), size) + b"".join(_uint(o, size) for o in offsets) + b"".join(encoded)
    return metadata, _encode_value(value, ids)


def _collect_keys(value: Any, keys: dict[str, int], depth: int) -> None:
    if depth > _MAX_NESTING:
        raise ValidationError(f"Cannot encode variant: nested deeper than {_MAX_NESTING} levels")
    if isinstance(value, dict):
        for k, v in value.items():
            if not isinstance(k, str):
                raise ValidationError(f"Cannot encode variant: object key {k!r} is not a string")
            keys[k] = 0
            _collect_keys(v, keys, depth + 1)
    elif isinstance(value, (list, tuple)):
        for v in value:
            _collect_keys(v, keys, depth + 1)


def _primitive(type_id: int, payload: bytes = b"") -> bytes:
    return bytes([(type_id << 2) | _PRIMITIVE]) + payload


def _encode_value(value: Any, ids: dict[str, int]) -> bytes:
    if value is None:
        return _primitive(_NULL)
    if isinstance(value, bool):
        return _primitive(_TRUE if value else _FALSE)
    if isinstance(value, int):
        for type_id, width in _INT_RANGES:
            if -(1 << (8 * width - 1)) <= value < 1 << (8 * width - 1):
                return _primitive(type_id, value.to_bytes(width, "little", signed=True))
        raise ValidationError(f"Cannot encode variant: int {value} does not fit 64 bits")
    if isinstance(value, float):
        return _primitive(_DOUBLE, struct.pack("<d", value))
    if isinstance(value, decimal.Decimal):
        return _encode_decimal(value)
    if isinstance(value, str):
        raw = value.encode("utf-8")
        if len(raw) < 64:
            return bytes([(len(raw) << 2) | _SHORT_STRING]) + raw
        return _primitive(_STRING, _uint(len(raw), 4) + raw)
    if isinstance(value, (bytes, bytearray, memoryview)):
        raw = bytes(value)
        return _primitive(_BINARY, _uint(len(raw), 4) + raw)
    if isinstance(value, _dt.datetime):
        if value.tzinfo is not None and value.utcoffset() is not None:
            micros = (value - _EPOCH_UTC) // _dt.timedelta(microseconds=1)
            return _primitive(_TIMESTAMP, struct.pack("<q", micros))
        micros = (value - _EPOCH) // _dt.timedelta(microseconds=1)
        return _primitive(_TIMESTAMP_NTZ, struct.pack("<q", micros))
    if isinstance(value, _dt.date):
        return _primitive(_DATE, struct.pack("<i", (value - _EPOCH_DATE).days))
    if isinstance(value, _dt.time):
        if value.tzinfo is not None:
            raise ValidationError(f"Cannot encode variant: time {value} has a zone (a variant time has none)")
        micros = ((value.hour * 60 + value.minute) * 60 + value.second) * 1_000_000 + value.microsecond
        return _primitive(_TIME, struct.pack("<q", micros))
    if isinstance(value, uuid.UUID):
        return _primitive(_UUID, value.bytes)
    if isinstance(value, (list, tuple)):
        return _container(_ARRAY, [_encode_value(v, ids) for v in value], None)
    if isinstance(value, dict):
        fields = sorted(value.items(), key=lambda kv: kv[0])
        return _container(_OBJECT, [_encode_value(v, ids) for _, v in fields], [ids[k] for k, _ in fields])
    raise ValidationError(f"Cannot encode variant: a {type(value).__name__} has no variant form")


def _encode_decimal(value: decimal.Decimal) -> bytes:
    exponent = value.as_tuple().exponent
    if not isinstance(exponent, int):
        raise ValidationError(f"Cannot encode variant: decimal {value} is not finite")
    scale = max(0, -exponent)
    unscaled = decimal_unscaled(value, scale)
    precision = max(len(str(abs(unscaled))), scale)
    if scale > 38 or precision > 38:
        raise ValidationError(f"Cannot encode variant: decimal {value} has more than 38 digits")
    type_id, width = (_DECIMAL4, 4) if precision <= 9 else (_DECIMAL8, 8) if precision <= 18 else (_DECIMAL16, 16)
    return _primitive(type_id, bytes([scale]) + unscaled.to_bytes(width, "little", signed=True))


def _container(basic_type: int, children: list[bytes], field_ids: list[int] | None) -> bytes:
    offsets = [0]
    for c in children:
        offsets.append(offsets[-1] + len(c))
    offset_size = _size_for(offsets[-1])
    is_large = len(children) > 255
    count = _uint(len(children), 4 if is_large else 1)
    if field_ids is None:
        header = (offset_size - 1) | (int(is_large) << 2)
        body = count + b"".join(_uint(o, offset_size) for o in offsets)
    else:
        id_size = _size_for(max(field_ids, default=0))
        header = (offset_size - 1) | ((id_size - 1) << 2) | (int(is_large) << 4)
        body = count + b"".join(_uint(i, id_size) for i in field_ids) + b"".join(_uint(o, offset_size)
                                                                                  for o in offsets)
    return bytes([(header << 2) | basic_type]) + body + b"".join(children)


# -- decoding -----------------------------------------------------------------------------------------------------


def decode_variant(metadata: bytes, value: bytes) -> Any:
    """The Python value of a variant's (metadata, value) bytes.

    :raises ValidationError: for bytes that are not a variant of encoding version 1
    """
    metadata, value = bytes(metadata), bytes(value)
    if not metadata or metadata[0] & 0x0F != _VERSION:
        raise ValidationError("Cannot read variant: the metadata is not of encoding version 1")
    size = (metadata[0] >> 6) + 1
    count = _read_uint(metadata, 1, size)
    start = 1 + size * (count + 2)
    offsets = [_read_uint(metadata, 1 + size * (i + 1), size) for i in range(count + 1)]
    if start + offsets[-1] > len(metadata):
        raise ValidationError("Cannot read variant: truncated metadata")
    names = [metadata[start + offsets[i]:start + offsets[i + 1]].decode("utf-8") for i in range(count)]
    try:
        return _decode_value(value, 0, names, 0)
    except (IndexError, struct.error, UnicodeDecodeError, ValueError) as e:
        raise ValidationError(f"Cannot read variant: {e}") from e


def _decode_value(b: bytes, at: int, names: list[str], depth: int) -> Any:
    if depth > _MAX_NESTING:
        raise ValidationError(f"Cannot read variant: nested deeper than {_MAX_NESTING} levels")
    header = b[at]
    basic, rest = header & 0x03, header >> 2
    body = at + 1
    if basic == _SHORT_STRING:
        return b[body:body + rest].decode("utf-8")
    if basic == _PRIMITIVE:
        return _decode_primitive(rest, b, body)
    if basic == _ARRAY:
        offset_size, is_large = (rest & 0x03) + 1, bool(rest & 0x04)
        count_size = 4 if is_large else 1
        count = _read_uint(b, body, count_size)
        offsets_at = body + count_size
        values_at = offsets_at + offset_size * (count + 1)
        return [_decode_value(b, values_at + _read_uint(b, offsets_at + offset_size * i, offset_size), names,
                              depth + 1) for i in range(count)]
    offset_size, id_size, is_large = (rest & 0x03) + 1, ((rest >> 2) & 0x03) + 1, bool(rest & 0x10)
    count_size = 4 if is_large else 1
    count = _read_uint(b, body, count_size)
    ids_at = body + count_size
    offsets_at = ids_at + id_size * count
    values_at = offsets_at + offset_size * (count + 1)
    out = {}
    for i in range(count):
        name = names[_read_uint(b, ids_at + id_size * i, id_size)]
        out[name] = _decode_value(b, values_at + _read_uint(b, offsets_at + offset_size * i, offset_size), names,
                                  depth + 1)
    return out


def _decode_primitive(type_id: int, b: bytes, at: int) -> Any:
    if type_id == _NULL:
        return None
    if type_id in (_TRUE, _FALSE):
        return type_id == _TRUE
    for int_id, width in _INT_RANGES:
        if type_id == int_id:
            return int.from_bytes(b[at:at + width], "little", signed=True)
    if type_id == _DOUBLE:
        return struct.unpack_from("<d", b, at)[0]
    if type_id == _FLOAT:
        return struct.unpack_from("<f", b, at)[0]
    if type_id in (_DECIMAL4, _DECIMAL8, _DECIMAL16):
        width = {_DECIMAL4: 4, _DECIMAL8: 8, _DECIMAL16: 16}[type_id]
        scale = b[at]
        unscaled = int.from_bytes(b[at + 1:at + 1 + width], "little", signed=True)
        return decimal_from_unscaled(unscaled, scale)
    if type_id == _DATE:
        return _EPOCH_DATE + _dt.timedelta(days=struct.unpack_from("<i", b, at)[0])
    if type_id in (_TIMESTAMP, _TIMESTAMP_NTZ, _TIMESTAMP_NANOS, _TIMESTAMP_NTZ_NANOS):
        ticks = struct.unpack_from("<q", b, at)[0]
        micros = ticks // 1000 if type_id in (_TIMESTAMP_NANOS, _TIMESTAMP_NTZ_NANOS) else ticks
        epoch = _EPOCH_UTC if type_id in (_TIMESTAMP, _TIMESTAMP_NANOS) else _EPOCH
        return epoch + _dt.timedelta(microseconds=micros)
    if type_id == _TIME:
        micros = struct.unpack_from("<q", b, at)[0]
        seconds, us = divmod(micros, 1_000_000)
        return _dt.time(seconds // 3600, seconds // 60 % 60, seconds % 60, us)
    if type_id in (_BINARY, _STRING):
        n = _read_uint(b, at, 4)
        raw = b[at + 4:at + 4 + n]
        if len(raw) != n:
            raise ValidationError("Cannot read variant: truncated")
        return raw.decode("utf-8") if type_id == _STRING else raw
    if type_id == _UUID:
        return uuid.UUID(bytes=b[at:at + 16])
    raise ValidationError(f"Cannot read variant: unknown primitive type id {type_id}")


# -- Arrow ---------------------------------------------------------------------------------------------------------

#: The Arrow field metadata that marks a struct column as a variant: Arrow's canonical Parquet Variant extension,
#: carried as field metadata over its storage type. (A Python ``pa.ExtensionType`` of that name crashes pyarrow
#: 26's Parquet writer, which takes the name for its own C++ type.)
VARIANT_EXTENSION_NAME = b"arrow.parquet.variant"
VARIANT_FIELD_METADATA = {b"ARROW:extension:name": VARIANT_EXTENSION_NAME, b"ARROW:extension:metadata": b""}
#: The unshredded variant: two binaries per row.
VARIANT_STORAGE_TYPE = pa.struct([pa.field("metadata", pa.binary(), nullable=False),
                                  pa.field("value", pa.binary(), nullable=False)])


def is_variant_field(field: pa.Field) -> bool:
    """Whether an Arrow field is marked as a variant column."""
    return (field.metadata or {}).get(b"ARROW:extension:name") == VARIANT_EXTENSION_NAME


def variant_array(values: list[Any]) -> pa.StructArray:
    """An Arrow variant column (:data:`VARIANT_STORAGE_TYPE`) of Python values (None is a null row)."""
    pairs = [(b"", b"") if v is None else encode_variant(v) for v in values]
    return pa.StructArray.from_arrays([pa.array([p[0] for p in pairs], pa.binary()),
                                       pa.array([p[1] for p in pairs], pa.binary())], fields=list(VARIANT_STORAGE_TYPE),
                                      mask=pa.array([v is None for v in values], pa.bool_()))


def null_variants(length: int) -> pa.StructArray:
    """``length`` null rows of a variant column (the children hold empty bytes: they are declared not null)."""
    return variant_array([None] * length)


def as_variant_storage(column: pa.Array | pa.ChunkedArray) -> pa.ChunkedArray:
    """A struct column with binary ``metadata`` and ``value`` children as :data:`VARIANT_STORAGE_TYPE`, null rows'
    children emptied (Parquet refuses nulls in them).

    :raises ValidationError: when the column is not such a struct
    """
    chunks = column.chunks if isinstance(column, pa.ChunkedArray) else [column]
    out = []
    for chunk in chunks:
        t = chunk.type
        names = {t.field(i).name for i in range(t.num_fields)} if pa.types.is_struct(t) else set()
        if not {"metadata", "value"} <= names:
            raise ValidationError(f"Cannot use a {t} column as a variant: expected a struct of binary metadata and "
                                  "value (engine.model.variant.variant_array builds one)")
        parts = []
        for name in ("metadata", "value"):
            child = chunk.field(name).cast(pa.binary())
            parts.append(child.fill_null(b"") if child.null_count else child)
        mask = chunk.is_null() if chunk.null_count else None
        out.append(pa.StructArray.from_arrays(parts, fields=list(VARIANT_STORAGE_TYPE), mask=mask))
    return pa.chunked_array(out, type=VARIANT_STORAGE_TYPE)


def variant_values(array: pa.Array | pa.ChunkedArray) -> list[Any]:
    """The Python values of an Arrow variant column."""
    return [None if row is None else decode_variant(row["metadata"], row["value"]) for row in array.to_pylist()]
