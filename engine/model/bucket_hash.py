"""The spec's bucket hash (Appendix B): 32-bit Murmur3 of a value's bytes, for one value and vectorized over Arrow.

Layer: engine.model (pure functions; imports the standard library, mmh3, pyarrow, engine.errors and
engine.model.types / values). The bucket transform (engine.model.transforms) is its user.
"""

from __future__ import annotations

import struct
import uuid
from typing import Any

import mmh3
import pyarrow as pa
import pyarrow.compute as pc

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
    NANO_TIMESTAMPS,
    StringType,
    TimestampType,
    TimestamptzType,
    TimeType,
    UUIDType,
)
from engine.model.values import NANOS_PER_MICRO, decimal_min_bytes, decimal_unscaled

#: The types whose values hash as an 8-byte little-endian long (what :func:`arrow_hash_longs` vectorizes).
LONG_HASHED_TYPES = (IntegerType, LongType, DateType, TimeType, TimestampType, TimestamptzType) + NANO_TIMESTAMPS

_LONG = struct.Struct("<q")
_DOUBLE = struct.Struct("<d")


def hash_value(t: IcebergType, v: Any) -> int:
    """The spec's 32-bit Murmur3 hash (x86, seed 0) of a canonical value, as a signed int (Appendix B).

    int, long, date, time and timestamps hash their value as an 8-byte little-endian long; decimals their
    unscaled value's minimal big-endian two's complement; strings their UTF-8; uuids their 16 big-endian
    bytes; fixed and binary their bytes; booleans 0/1 as a long (the spec's test value); floats and doubles
    the double's bits.

    :raises ValidationError: for a null or a type without a hash
    """
    if v is None:
        raise ValidationError(f"Cannot hash value: null ({t})")
    if isinstance(t, NANO_TIMESTAMPS):
        return mmh3.hash(_LONG.pack(v // NANOS_PER_MICRO))  # the spec hashes microseconds (Java's floorDiv)
    if isinstance(t, LONG_HASHED_TYPES):
        return mmh3.hash(_LONG.pack(v))
    if isinstance(t, StringType):
        # Java (Guava) encodes lone surrogates as '?'.
        return mmh3.hash(v.encode("utf-8", "replace"))
    if isinstance(t, (FixedType, BinaryType)):
        return mmh3.hash(bytes(v))
    if isinstance(t, UUIDType):
        return mmh3.hash(v.bytes if isinstance(v, uuid.UUID) else bytes(v))
    if isinstance(t, DecimalType):
        return mmh3.hash(decimal_min_bytes(decimal_unscaled(v, t.scale)))
    if isinstance(t, BooleanType):
        return mmh3.hash(_LONG.pack(1 if v else 0))  # the spec's test value is hashLong(1)
    if isinstance(t, (FloatType, DoubleType)):
        f = float(v)
        if f != f:
            return mmh3.hash(_LONG.pack(0x7FF8000000000000))  # Java's doubleToLongBits canonical NaN
        return mmh3.hash(_DOUBLE.pack(f))
    raise ValidationError(f"Cannot hash value: type {t} has no hash")


_C1 = 0xCC9E2D51
_C2 = 0x1B873593


def arrow_hash_longs(longs: pa.Array) -> pa.Array:
    """Murmur3 x86_32 of each int64 as 8 little-endian bytes, vectorized in uint32 arithmetic (wrapping)."""
    u32 = pa.uint32()

    def c(x: int) -> pa.Scalar:
        return pa.scalar(x, u32)

    def rotl(x: pa.Array, r: int) -> pa.Array:
        return pc.bit_wise_or(pc.shift_left(x, c(r)), pc.shift_right(x, c(32 - r)))

    mask = pa.scalar(0xFFFFFFFF, pa.int64())
    low = pc.cast(pc.bit_wise_and(longs, mask), u32)
    high = pc.cast(pc.bit_wise_and(pc.shift_right(longs, pa.scalar(32, pa.int64())), mask), u32)
    h = None
    for k in (low, high):
        k = pc.multiply(rotl(pc.multiply(k, c(_C1)), 15), c(_C2))
        h = k if h is None else pc.bit_wise_xor(h, k)
        h = pc.add(pc.multiply(rotl(h, 13), c(5)), c(0xE6546B64))
    h = pc.bit_wise_xor(h, c(8))
    h = pc.bit_wise_xor(h, pc.shift_right(h, c(16)))
    h = pc.multiply(h, c(0x85EBCA6B))
    h = pc.bit_wise_xor(h, pc.shift_right(h, c(13)))
    h = pc.multiply(h, c(0xC2B2AE35))
    return pc.bit_wise_xor(h, pc.shift_right(h, c(16)))
