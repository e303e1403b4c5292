"""Variant values: the Parquet Variant binary encoding (version 1) of Python values, read back; the byte layouts
the encoding specifies for headers, short strings, objects and arrays; damaged bytes refused. Iceberg Java's own
decoder reads these bytes in tests/integration/test_v3_types.py."""

from __future__ import annotations

import datetime as dt
import decimal
import uuid

import pyarrow as pa
import pytest

from engine.errors import ValidationError
from engine.model.variant import (
    VARIANT_STORAGE_TYPE,
    as_variant_storage,
    decode_variant,
    encode_variant,
    variant_array,
    variant_values,
)

VALUES = [None, True, False, 0, -128, 127, 128, -32769, 2**31, -(2**63), 1.5, float("inf"),
          decimal.Decimal("1.25"), decimal.Decimal("-12345678901.5"), decimal.Decimal("1" * 30),
          "", "é" * 10, "x" * 64, b"", b"\x00\xff", dt.date(1969, 12, 31), dt.datetime(2024, 3, 1, 12, 0, 0, 1),
          dt.datetime(1960, 1, 1, tzinfo=dt.timezone(dt.timedelta(hours=2))), dt.time(23, 59, 59, 999999),
          uuid.UUID(int=2**127 + 5), [], {}, [1, [2, [3, None]]], {"b": 1, "a": {"c": [True]}},
          list(range(300)), {f"k{i:03d}": i for i in range(300)}, {"long": "y" * 70_000}]


@pytest.mark.parametrize("value", VALUES, ids=[repr(v)[:30] for v in VALUES])
def test_python_values_round_trip(value):
    assert decode_variant(*encode_variant(value)) == value


def test_byte_layouts_follow_the_encoding():
    assert encode_variant(None) == (b"\x01\x00\x00", b"\x00")            # empty dictionary; primitive null
    assert encode_variant(1)[1] == b"\x0c\x01"                            # int8 (type 3 << 2), then the byte
    assert encode_variant("abc")[1] == b"\x0d" + b"abc"                   # short string: length << 2 | 1
    metadata, value = encode_variant({"b": 1, "a": 2})
    assert metadata == b"\x11\x02\x00\x01\x02ab"                          # version 1, sorted, 2 keys, offsets
    assert value == b"\x02\x02\x00\x01\x00\x02\x04\x0c\x02\x0c\x01"      # fields in key order: a=2, b=1
    assert encode_variant([True])[1] == b"\x03\x01\x00\x01\x04"           # array of one: offsets 0, 1; true
    big = encode_variant(list(range(300)))[1]
    assert big[0] == (0b101 << 2) | 3 and int.from_bytes(big[1:5], "little") == 300   # is_large, 2-byte offsets


def test_damaged_bytes_and_values_without_a_form_are_refused():
    with pytest.raises(ValidationError, match="encoding version 1"):
        decode_variant(b"\x02\x00\x00", b"\x00")
    with pytest.raises(ValidationError, match="Cannot read variant"):
        decode_variant(b"\x01\x00\x00", b"\x40\x05\x00")                   # a string without its bytes
    with pytest.raises(ValidationError, match="unknown primitive type id 30"):
        decode_variant(b"\x01\x00\x00", bytes([30 << 2]))
    with pytest.raises(ValidationError, match="object key 1 is not a string"):
        encode_variant({1: "a"})
    with pytest.raises(ValidationError, match="does not fit 64 bits"):
        encode_variant(2**64)
    with pytest.raises(ValidationError, match="a set has no variant form"):
        encode_variant({1, 2})


def test_arrow_columns_of_variants():
    column = variant_array([{"a": 1}, None, "x"])
    assert column.type == VARIANT_STORAGE_TYPE and column.null_count == 1
    assert variant_values(column) == [{"a": 1}, None, "x"]
    # a struct a user built (children null in null rows) is taken, children emptied where the row is null
    raw = pa.array([{"metadata": b"\x01\x00\x00", "value": b"\x0c\x01"}, None],
                   pa.struct([("metadata", pa.binary()), ("value", pa.binary())]))
    storage = as_variant_storage(raw)
    assert storage.type == VARIANT_STORAGE_TYPE and variant_values(storage) == [1, None]
    with pytest.raises(ValidationError, match="Cannot use a int64 column as a variant"):
        as_variant_storage(pa.array([1]))
