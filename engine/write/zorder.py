"""Z-order rows: interleave the bits of several columns so that rows close in every column sort close together.

Layer: engine (pure computation on Arrow tables; imports engine.errors and engine.model, touches no file).

::

    ordered = zorder_table(rows, ["x", "y"], state.schema)

As Iceberg Java's Z-order rewrite does (its ``ZOrderByteUtils``), every column value becomes an 8-byte unsigned
key that orders as the value does: integers, dates, times and timestamps by offset binary (the sign bit
flipped), floats and doubles by the IEEE order-preserving transform (negative values have every bit flipped,
others the sign bit), strings by their first 8 UTF-8 bytes and binary, fixed and uuid values by their first 8
bytes (shorter values padded with zero bytes), booleans as 0 and 1, decimals through their double value. A null
becomes the all-zero key, so nulls come first. The Z-value of a row takes one bit of each column in turn, most
significant bits first; rows sort by it, stably.

Everything runs as vectorised pyarrow compute kernels: the bits are spread with a lookup table, a few bits of
every column at a time, never row by row in Python.
"""

from __future__ import annotations

from typing import Any, Sequence

import pyarrow as pa
import pyarrow.compute as pc

from engine.errors import ValidationError
from engine.model import types as T
from engine.model.schema import Schema

KEY_BYTES = 8
_SIGN = pa.scalar(1 << 63, pa.uint64())
_U64 = pa.uint64()


def _u64(value: int) -> pa.Scalar:
    return pa.scalar(value, _U64)


def _offset_binary(arr: pa.Array) -> pa.Array:
    """Signed integers as unsigned keys in the same order (two's complement with the sign bit flipped)."""
    return pc.bit_wise_xor(pc.cast(arr, pa.int64()).view(_U64), _SIGN)


def _float_key(arr: pa.Array) -> pa.Array:
    doubles = pc.cast(arr, pa.float64())
    doubles = pc.if_else(pc.is_nan(doubles), pa.scalar(float("nan"), pa.float64()), doubles)  # one NaN bit pattern
    bits = doubles.view(_U64)
    negative = pc.greater_equal(bits, _SIGN)
    return pc.if_else(negative, pc.bit_wise_not(bits), pc.bit_wise_xor(bits, _SIGN))


def _byte_swap(x: pa.Array) -> pa.Array:
    """Little-endian uint64 words read as big-endian (the first byte of the value becomes the most significant)."""
    out = None
    for i in range(KEY_BYTES):
        byte = pc.bit_wise_and(pc.shift_right(x, _u64(8 * i)), _u64(0xFF))
        moved = pc.shift_left(byte, _u64(8 * (KEY_BYTES - 1 - i)))
        out = moved if out is None else pc.bit_wise_or(out, moved)
    return out


def _prefix_key(arr: pa.Array) -> pa.Array:
    """The first 8 bytes of string or binary values, zero-padded, as a big-endian unsigned key."""
    binary = pc.fill_null(arr.cast(pa.binary()), b"")
    head = pc.binary_slice(binary, 0, KEY_BYTES)
    padded = pc.binary_slice(pc.binary_join_element_wise(head, pa.scalar(b"\0" * KEY_BYTES, pa.binary()), b""),
                             0, KEY_BYTES)
    fixed = padded.cast(pa.binary(KEY_BYTES))
    words = pa.Array.from_buffers(_U64, len(fixed), [None, fixed.buffers()[1]], null_count=0, offset=fixed.offset)
    return _byte_swap(words)


def column_key(arr: pa.Array | pa.ChunkedArray, field_type: T.IcebergType, name: str = "") -> pa.Array:
    """The unsigned 64-bit Z-order key of each value (0 for null).

    :param arr: the column's values in the table schema's Arrow form
    :param field_type: its Iceberg type
    :param name: the column name, for errors
    :raises ValidationError: for a type that has no Z-order key (nested types)
    """
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    if isinstance(arr.type, pa.BaseExtensionType):
        arr = arr.storage
    if pa.types.is_dictionary(arr.type):
        arr = arr.dictionary_decode()
    if isinstance(field_type, (T.IntegerType, T.LongType, T.DateType, T.TimeType, T.TimestampType,
                               T.TimestamptzType) + T.NANO_TIMESTAMPS):
        if pa.types.is_date32(arr.type):
            arr = arr.cast(pa.int32())
        elif pa.types.is_timestamp(arr.type) or pa.types.is_time(arr.type):
            arr = arr.view(pa.int64()) if arr.type.bit_width == 64 else arr.cast(pa.int64())
        key = _offset_binary(arr)
    elif isinstance(field_type, (T.FloatType, T.DoubleType, T.DecimalType)):
        key = _float_key(arr)
    elif isinstance(field_type, T.BooleanType):
        key = pc.cast(arr, _U64)
    elif isinstance(field_type, (T.StringType, T.BinaryType, T.FixedType, T.UUIDType)):
        key = _prefix_key(arr)
    else:
        raise ValidationError(f"Cannot Z-order by column {name!r}: type {field_type} has no Z-order key")
    return pc.fill_null(key, _u64(0)) if key.null_count or arr.null_count else key


def _group_bits(columns: int) -> int:
    """Bits of each column spread at once: the largest power of two whose spread fits a 64-bit word."""
    for bits in (8, 4, 2, 1):
        if bits * columns <= 64:
            return bits
    raise ValidationError(f"Cannot Z-order by {columns} columns: at most 64 are supported")


def _spread_table(bits: int, stride: int) -> pa.Array:
    """For every ``bits``-bit value, its bits moved ``stride`` apart (bit i to bit i * stride)."""
    out = []
    for v in range(1 << bits):
        spread = 0
        for i in range(bits):
            if v >> i & 1:
                spread |= 1 << (i * stride)
        out.append(spread)
    return pa.array(out, _U64)


def interleave(keys: Sequence[pa.Array]) -> list[pa.Array]:
    """The Z-values of rows whose column keys are ``keys`` (uint64 arrays, one per column, equal lengths), as
    ``len(keys)`` uint64 words per row, most significant word first: bit ``j`` (from the most significant) of
    column ``c`` lands at bit ``j * k + c`` of the Z-value."""
    k = len(keys)
    if k == 0:
        raise ValidationError("Cannot Z-order rows: no columns given")
    n = len(keys[0])
    bits = _group_bits(k)
    spread = _spread_table(bits, k)
    segment = bits * k
    mask = _u64((1 << bits) - 1)
    words: list[Any] = [None] * k

    def put(word: int, value: pa.Array) -> None:
        words[word] = value if words[word] is None else pc.bit_wise_or(words[word], value)

    for c, key in enumerate(keys):
        for group in range(64 // bits):
            value = pc.bit_wise_and(pc.shift_right(key, _u64(64 - bits * (group + 1))), mask)
            seg = pc.shift_left(pc.take(spread, value), _u64(k - 1 - c)) if c != k - 1 else pc.take(spread, value)
            start = group * segment  # the segment's offset from the Z-value's most significant bit
            word, offset = divmod(start, 64)
            if offset + segment <= 64:
                put(word, pc.shift_left(seg, _u64(64 - offset - segment)) if offset + segment < 64 else seg)
            else:  # straddles two words
                low_bits = offset + segment - 64
                put(word, pc.shift_right(seg, _u64(low_bits)))
                low = pc.bit_wise_and(seg, _u64((1 << low_bits) - 1))
                put(word + 1, pc.shift_left(low, _u64(64 - low_bits)))
    return [w if w is not None else pa.repeat(_u64(0), n) for w in words]


def zorder_values(table: pa.Table, columns: Sequence[str], schema: Schema) -> list[pa.Array]:
    """The Z-values of ``table``'s rows over ``columns`` (top-level or dotted struct fields of ``schema``)."""
    keys = []
    for name in columns:
        field = schema.find_field(name)
        parts = schema.find_column_name(field.field_id).split(".")
        if parts[0] not in table.column_names:
            raise ValidationError(f"Cannot Z-order rows: column {parts[0]!r} is missing from the data")
        arr: Any = table.column(parts[0]).combine_chunks()
        for p in parts[1:]:
            arr = pc.struct_field(arr, [p])
        keys.append(column_key(arr, field.field_type, name))
    return interleave(keys)


def zorder_indices(table: pa.Table, columns: Sequence[str], schema: Schema) -> pa.Array:
    """The row order of ``table`` by Z-value over ``columns`` (stable: equal Z-values keep their input order)."""
    words = zorder_values(table, columns, schema)
    index = pa.table(words, names=[f"w{i}" for i in range(len(words))])
    return pc.sort_indices(index, sort_keys=[(f"w{i}", "ascending") for i in range(len(words))])


def zorder_table(table: pa.Table, columns: Sequence[str], schema: Schema) -> pa.Table:
    """``table``'s rows sorted by their Z-value over ``columns``.

    :param table: rows in the table schema's Arrow form (top-level columns named as in ``schema``)
    :param columns: the Z-order columns, most significant first
    :param schema: the schema naming the columns
    :raises ValidationError: for an unknown column or one whose type has no Z-order key
    """
    if table.num_rows < 2:
        return table
    return table.take(zorder_indices(table, columns, schema))
