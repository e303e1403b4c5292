"""Partition transforms: identity, bucket[N], truncate[W], year, month, day, hour, void, with Java's semantics.

Layer: engine.model (pure values and functions; imports the standard library, attrs, mmh3, pyarrow,
engine.errors and engine.model.types / values / expressions).

Each transform prints its spec string (``str(t)``), parses back with :func:`parse_transform` (an unknown
string becomes :class:`UnknownTransform`, so foreign metadata round-trips), binds once to a source type
(:meth:`Transform.bind` for one canonical value, :meth:`Transform.bind_arrow` for an Arrow array) and renders
partition values the way Java does in partition paths (:meth:`Transform.to_human_string`).

Each transform also projects a bound row predicate onto its partition field (:meth:`Transform.project`,
inclusive: true for the partition of every row the predicate may select; :meth:`Transform.project_strict`:
true only for partitions all of whose rows the predicate selects), with Iceberg Java's rules
(``Transform.project`` / ``projectStrict`` and ``ProjectionUtil``); see the notes on those methods for where
icelog widens Java's result to stay sound.

Results match Iceberg Java 1.10 value for value, including its corner cases: truncate wraps around on int and
long overflow, and year/month/day/hour of a timestamp before 1970 floor toward negative infinity except at
``hh:00:00.999999`` in the first second of a unit, where Java (``DateTimeUtil.convertMicros``) gives one unit
less (``.999999999`` for nanosecond timestamps, ``convertNanos``). Nanosecond timestamps hash their microseconds
(floor), so a value buckets alike in both units. icelog reproduces that so that Java's partition pruning agrees
with the partitions icelog writes.
"""

from __future__ import annotations

import base64
import decimal
import re
import struct
import uuid
from typing import Any, Callable

import attrs
import mmh3
import pyarrow as pa
import pyarrow.compute as pc

from engine.errors import ValidationError
from engine.model.expressions import (
    AlwaysFalse,
    And,
    BooleanExpression,
    BoundReference,
    EqualTo,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    IsNull,
    LessThan,
    LessThanOrEqual,
    LiteralPredicate,
    NotEqualTo,
    NotIn,
    NotNull,
    NotStartsWith,
    Or,
    Predicate,
    Reference,
    SetPredicate,
    StartsWith,
    UnaryPredicate,
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
    PrimitiveType,
    StringType,
    NANO_TIMESTAMPS,
    TimestampNsType,
    TimestampType,
    TimestamptzNsType,
    TimestamptzType,
    TimeType,
    UnknownType,
    UUIDType,
    VariantType,
)
from engine.model.values import (
    MICROS_PER_SECOND,
    NANOS_PER_MICRO,
    NANOS_PER_SECOND,
    civil_from_days,
    days_from_civil,
    decimal_from_unscaled,
    decimal_min_bytes,
    decimal_unscaled,
    float32_shortest,
    format_timestamp,
    format_timestamp_ns,
)

IDENTITY = "identity"
VOID = "void"
YEAR = "year"
MONTH = "month"
DAY = "day"
HOUR = "hour"
BUCKET = "bucket"
TRUNCATE = "truncate"

_EPOCH_YEAR = 1970
_LONG = struct.Struct("<q")
_DOUBLE = struct.Struct("<d")

_LONG_HASHED = (IntegerType, LongType, DateType, TimeType, TimestampType, TimestamptzType) + NANO_TIMESTAMPS
_BUCKET_SOURCES = _LONG_HASHED + (DecimalType, StringType, UUIDType, FixedType, BinaryType)
_TRUNCATE_SOURCES = (IntegerType, LongType, DecimalType, StringType, BinaryType)
_TIMESTAMP_SOURCES = (TimestampType, TimestamptzType) + NANO_TIMESTAMPS
_DATE_SOURCES = (DateType,) + _TIMESTAMP_SOURCES


def _ticks_per_second(t: IcebergType) -> int:
    """The unit of a timestamp type's values: micro- or nanoseconds per second."""
    return NANOS_PER_SECOND if isinstance(t, NANO_TIMESTAMPS) else MICROS_PER_SECOND

# -- hashing (Appendix B) ----------------------------------------------------------------------------------------


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
    if isinstance(t, _LONG_HASHED):
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


def _arrow_hash_longs(longs: pa.Array) -> pa.Array:
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


# -- Java arithmetic helpers -------------------------------------------------------------------------------------


def _wrap(v: int, bits: int) -> int:
    half = 1 << (bits - 1)
    return ((v + half) % (1 << bits)) - half


def _java_rem(a: int, b: int) -> int:
    r = abs(a) % abs(b)
    return -r if a < 0 else r


def _truncate_integral(v: int, width: int, bits: int) -> int:
    # Java: value - (((value % width) + width) % width), in wrapping int/long arithmetic.
    r = _java_rem(_wrap(_java_rem(v, width) + width, bits), width)
    return _wrap(v - r, bits)


def _ticks_floor(ticks: int, unit: int, per_second: int) -> int:
    # Java's convertMicros/convertNanos: floor, but one less for a negative value at the last tick of the first
    # second of its unit.
    result = ticks // unit
    if ticks < 0 and ticks % unit == per_second - 1:
        result -= 1
    return result


def _ticks_to_months(ticks: int, per_second: int) -> int:
    per_day = 86_400 * per_second
    y, m, d = civil_from_days(ticks // per_day)
    months = (y - _EPOCH_YEAR) * 12 + m - 1
    if ticks < 0 and d == 1 and ticks % per_day == per_second - 1:
        months -= 1
    return months


def _ticks_to_years(ticks: int, per_second: int) -> int:
    per_day = 86_400 * per_second
    y, m, d = civil_from_days(ticks // per_day)
    if ticks < 0 and m == 1 and d == 1 and ticks % per_day == per_second - 1:
        return y - _EPOCH_YEAR - 1
    return y - _EPOCH_YEAR


def _days_to_months(days: int) -> int:
    y, m, _ = civil_from_days(days)
    return (y - _EPOCH_YEAR) * 12 + m - 1


def _days_to_years(days: int) -> int:
    return civil_from_days(days)[0] - _EPOCH_YEAR


# -- human strings (partition paths) -----------------------------------------------------------------------------


def _java_local_time(micros: int) -> str:
    # java.time.LocalTime.toString: HH:mm, then :ss when seconds or fraction, then .SSS or .SSSSSS
    seconds, frac = divmod(micros, MICROS_PER_SECOND)
    h, rem = divmod(seconds, 3600)
    mi, s = divmod(rem, 60)
    out = f"{h:02d}:{mi:02d}"
    if s or frac:
        out += f":{s:02d}"
        if frac:
            out += f".{frac // 1000:03d}" if frac % 1000 == 0 else f".{frac:06d}"
    return out


def _java_float_string(x: float, *, single: bool) -> str:
    # Java's Float/Double.toString with the shortest round-tripping digits.
    if x != x:
        return "NaN"
    if x in (float("inf"), float("-inf")):
        return "Infinity" if x > 0 else "-Infinity"
    if x == 0:
        return "-0.0" if str(x).startswith("-") else "0.0"
    text = float32_shortest(x) if single else repr(x)
    sign, digits, exponent = decimal.Decimal(text).as_tuple()
    ds = "".join(map(str, digits)).rstrip("0") or "0"
    sci = len(digits) + exponent - 1  # exponent of the leading digit
    prefix = "-" if sign else ""
    if -3 <= sci < 7:
        if sci >= 0:
            int_part = ds[: sci + 1].ljust(sci + 1, "0")
            frac = ds[sci + 1:] or "0"
        else:
            int_part = "0"
            frac = "0" * (-sci - 1) + ds
        return f"{prefix}{int_part}.{frac}"
    return f"{prefix}{ds[0]}.{ds[1:] or '0'}E{sci}"


def human_string(t: IcebergType, v: Any) -> str:
    """A value as Java's identity transform renders it in partition paths (``Identity.toHumanString``)."""
    if v is None:
        return "null"
    if isinstance(t, DateType):
        return _human_day(v)
    if isinstance(t, TimeType):
        return _java_local_time(v)
    if isinstance(t, TimestampType):
        return format_timestamp(v)
    if isinstance(t, TimestamptzType):
        return format_timestamp(v) + "+00:00"
    if isinstance(t, TimestampNsType):
        return format_timestamp_ns(v)
    if isinstance(t, TimestamptzNsType):
        return format_timestamp_ns(v) + "+00:00"
    if isinstance(t, (FixedType, BinaryType)):
        return base64.b64encode(bytes(v)).decode("ascii")
    if isinstance(t, BooleanType):
        return "true" if v else "false"
    if isinstance(t, FloatType):
        return _java_float_string(v, single=True)
    if isinstance(t, DoubleType):
        return _java_float_string(v, single=False)
    if isinstance(t, DecimalType):
        return str(decimal_from_unscaled(decimal_unscaled(v, t.scale), t.scale))
    return str(v)


def _human_year(ordinal: int) -> str:
    return f"{_EPOCH_YEAR + ordinal:04d}"


def _human_month(ordinal: int) -> str:
    years, month = divmod(ordinal, 12)
    return f"{_EPOCH_YEAR + years:04d}-{month + 1:02d}"


def _human_day(ordinal: int) -> str:
    y, m, d = civil_from_days(ordinal)
    return f"{y:04d}-{m:02d}-{d:02d}"


def _human_hour(ordinal: int) -> str:
    days, hour = divmod(ordinal, 24)
    return f"{_human_day(days)}-{hour:02d}"


# -- Arrow helpers -----------------------------------------------------------------------------------------------


def _as_array(arr: Any) -> pa.Array:
    if isinstance(arr, pa.ChunkedArray):
        return arr.combine_chunks() if arr.num_chunks != 1 else arr.chunk(0)
    if not isinstance(arr, pa.Array):
        raise ValidationError(f"Cannot transform: expected an Arrow array, got {type(arr).__name__}")
    return arr


def _to_int64(arr: pa.Array, timestamp_unit: str = "us") -> pa.Array:
    """Canonical integer view of an Arrow column: timestamps as ``timestamp_unit`` ticks (finer values are
    floored), dates as days, times as micros."""
    t = arr.type
    if pa.types.is_timestamp(t):
        if t.unit == "ns" and timestamp_unit == "us":
            return _floor_div(arr.view(pa.int64()), NANOS_PER_MICRO)
        if t.unit != timestamp_unit:
            arr = pc.cast(arr, pa.timestamp(timestamp_unit, tz=t.tz))
        return arr.view(pa.int64()) if hasattr(arr, "view") else pc.cast(arr, pa.int64())
    if pa.types.is_date32(t):
        return pc.cast(arr.view(pa.int32()), pa.int64())
    if pa.types.is_date64(t):
        return pc.cast(pc.cast(arr, pa.date32()).view(pa.int32()), pa.int64())
    if pa.types.is_time(t):
        if t != pa.time64("us"):
            arr = pc.cast(arr, pa.time64("us"))
        return arr.view(pa.int64())
    if pa.types.is_integer(t):
        return pc.cast(arr, pa.int64())
    raise ValidationError(f"Cannot transform: Arrow type {t} is not a date, time, timestamp or integer")


def _floor_div(arr: pa.Array, unit: int) -> pa.Array:
    u = pa.scalar(unit, pa.int64())
    return pc.divide(pc.subtract(arr, pc.modulo(arr, u)), u)


def _java_quirk(ticks: pa.Array, unit: int, per_second: int) -> pa.Array:
    """Rows where Java's convertMicros/convertNanos gives one unit less than the floor (see the module
    docstring)."""
    return pc.and_(pc.less(ticks, pa.scalar(0, pa.int64())),
                   pc.equal(pc.modulo(ticks, pa.scalar(unit, pa.int64())),
                            pa.scalar(per_second - 1, pa.int64())))


def _minus_where(values: pa.Array, mask: pa.Array) -> pa.Array:
    return pc.subtract(values, pc.cast(pc.fill_null(mask, False), values.type))


def _scalar_loop(fn: Callable[[Any], Any], out_type: pa.DataType | None) -> Callable[[Any], pa.Array]:
    """Row-by-row fallback; ``out_type`` None keeps the input's Arrow type."""
    def apply(arr: Any) -> pa.Array:
        a = _as_array(arr)
        try:
            return pa.array([fn(v) for v in a.to_pylist()], type=a.type if out_type is None else out_type)
        except (pa.ArrowInvalid, OverflowError) as e:
            raise ValidationError(f"Cannot transform values of type {a.type}: a result does not fit ({e})") from e
    return apply


def _canonical_from_arrow(t: IcebergType) -> Callable[[Any], Any]:
    """Convert a ``to_pylist`` value of an Arrow column of type ``t`` to the canonical Python value."""
    if isinstance(t, UUIDType):
        return lambda v: None if v is None else (v if isinstance(v, uuid.UUID) else uuid.UUID(bytes=bytes(v)))
    return lambda v: v


# -- projections (Java's Transform.project / projectStrict and ProjectionUtil) ------------------------------------

_Step = Callable[[Any, int], Any]
"""The source value one step above (+1) or below (-1) a value, or None outside the source type's range."""


def _source_type(pred: Predicate, transform: Transform) -> IcebergType:
    if not isinstance(pred, Predicate) or not isinstance(pred.term, BoundReference):
        raise ValidationError(f"Cannot project {pred} by {transform}: the predicate is not bound")
    return pred.term.field_type


def _retarget(pred: Predicate, name: str) -> Predicate:
    """The same predicate on the partition field ``name``."""
    ref = Reference(name)
    if isinstance(pred, SetPredicate):
        return type(pred)(ref, pred.literals)
    if isinstance(pred, LiteralPredicate):
        return type(pred)(ref, pred.literal)
    return type(pred)(ref)


def _null_test(pred: Predicate, name: str) -> BooleanExpression | None:
    """IS [NOT] NULL carries over: every transform but void maps null, and only null, to null."""
    if isinstance(pred, (IsNull, NotNull)):
        return type(pred)(Reference(name))
    return None


def _set(name: str, values: Any, positive: bool) -> BooleanExpression:
    """``name IN (...)`` (or NOT IN) over the distinct values; one value gives ``=`` (or ``!=``)."""
    ref = Reference(name)
    kept = sorted(set(values))
    if len(kept) == 1:
        return EqualTo(ref, kept[0]) if positive else NotEqualTo(ref, kept[0])
    return In(ref, tuple(kept)) if positive else NotIn(ref, tuple(kept))


def _int_step(bits: int) -> _Step:
    low, high = -(1 << (bits - 1)), (1 << (bits - 1)) - 1

    def step(v: int, d: int) -> int | None:
        w = v + d
        return w if low <= w <= high else None
    return step


def _decimal_step(scale: int) -> _Step:
    def step(v: Any, d: int) -> Any:
        return decimal_from_unscaled(decimal_unscaled(v, scale) + d, scale)
    return step


def _ordered_inclusive(name: str, pred: Predicate, fn: Callable[[Any], Any], step: _Step) -> BooleanExpression | None:
    """Java's truncateInteger / truncateLong / truncateDecimal plus IN, for an order-preserving ``fn`` over a
    discrete source: ``x < v`` becomes ``p <= fn(v - 1)``, ``x > v`` becomes ``p >= fn(v + 1)``, ``=`` and
    ``IN`` map their values. A bound beyond the type's range makes the predicate false for every row."""
    ref = Reference(name)
    if isinstance(pred, In):
        return _set(name, (fn(v) for v in pred.literals), True)
    if not isinstance(pred, LiteralPredicate):
        return None
    v = pred.literal
    if isinstance(pred, LessThan):
        below = step(v, -1)
        return AlwaysFalse() if below is None else LessThanOrEqual(ref, fn(below))
    if isinstance(pred, LessThanOrEqual):
        return LessThanOrEqual(ref, fn(v))
    if isinstance(pred, GreaterThan):
        above = step(v, 1)
        return AlwaysFalse() if above is None else GreaterThanOrEqual(ref, fn(above))
    if isinstance(pred, GreaterThanOrEqual):
        return GreaterThanOrEqual(ref, fn(v))
    if isinstance(pred, EqualTo):
        return EqualTo(ref, fn(v))
    return None


def _ordered_strict(name: str, pred: Predicate, fn: Callable[[Any], Any], step: _Step) -> BooleanExpression | None:
    """Java's truncateIntegerStrict / truncateLongStrict / truncateDecimalStrict plus NOT IN: ``x < v`` becomes
    ``p < fn(v)``, ``x <= v`` becomes ``p < fn(v + 1)``, ``x > v`` becomes ``p > fn(v)``, ``x >= v`` becomes
    ``p > fn(v - 1)``, ``!=`` and ``NOT IN`` map their values; ``=`` has no strict projection."""
    ref = Reference(name)
    if isinstance(pred, NotIn):
        return _set(name, (fn(v) for v in pred.literals), False)
    if not isinstance(pred, LiteralPredicate):
        return None
    v = pred.literal
    if isinstance(pred, LessThan):
        return LessThan(ref, fn(v))
    if isinstance(pred, LessThanOrEqual):
        above = step(v, 1)
        return NotNull(ref) if above is None else LessThan(ref, fn(above))
    if isinstance(pred, GreaterThan):
        return GreaterThan(ref, fn(v))
    if isinstance(pred, GreaterThanOrEqual):
        below = step(v, -1)
        return NotNull(ref) if below is None else GreaterThan(ref, fn(below))
    if isinstance(pred, NotEqualTo):
        return NotEqualTo(ref, fn(v))
    return None


def _array_inclusive(name: str, pred: Predicate, fn: Callable[[Any], Any]) -> BooleanExpression | None:
    """Java's truncateArray plus IN, for string and binary truncation (a prefix keeps the order)."""
    ref = Reference(name)
    if isinstance(pred, In):
        return _set(name, (fn(v) for v in pred.literals), True)
    if not isinstance(pred, LiteralPredicate):
        return None
    v = pred.literal
    if isinstance(pred, (LessThan, LessThanOrEqual)):
        return LessThanOrEqual(ref, fn(v))
    if isinstance(pred, (GreaterThan, GreaterThanOrEqual)):
        return GreaterThanOrEqual(ref, fn(v))
    if isinstance(pred, EqualTo):
        return EqualTo(ref, fn(v))
    if isinstance(pred, StartsWith):
        return StartsWith(ref, fn(v))
    return None


def _array_strict(name: str, pred: Predicate, fn: Callable[[Any], Any]) -> BooleanExpression | None:
    """Java's truncateArrayStrict plus NOT IN."""
    ref = Reference(name)
    if isinstance(pred, NotIn):
        return _set(name, (fn(v) for v in pred.literals), False)
    if not isinstance(pred, LiteralPredicate):
        return None
    v = pred.literal
    if isinstance(pred, (LessThan, LessThanOrEqual)):
        return LessThan(ref, fn(v))
    if isinstance(pred, (GreaterThan, GreaterThanOrEqual)):
        return GreaterThan(ref, fn(v))
    if isinstance(pred, NotEqualTo):
        return NotEqualTo(ref, fn(v))
    return None


def _with_successors(values: tuple[int, ...]) -> tuple[int, ...]:
    """The values plus ``v + 1`` for each negative ``v``, sorted (Java's fix for pre-0.10.1 writers)."""
    return tuple(sorted(set(values) | {v + 1 for v in values if v < 0}))


def _fix_inclusive_time(projected: BooleanExpression | None) -> BooleanExpression | None:
    """Java's fixInclusiveTimeProjection: Iceberg 0.10.0 and earlier wrote ``unit(x) + 1`` for values before
    1970, so ``<=`` and ``=`` on a negative partition value also accept the next one."""
    if isinstance(projected, LessThanOrEqual) and projected.literal < 0:
        return LessThanOrEqual(projected.term, projected.literal + 1)
    if isinstance(projected, EqualTo) and projected.literal < 0:
        return In(projected.term, (projected.literal, projected.literal + 1))
    if isinstance(projected, In) and any(v < 0 for v in projected.literals):
        return In(projected.term, _with_successors(projected.literals))
    return projected


def _fix_strict_time(projected: BooleanExpression | None) -> BooleanExpression | None:
    """Java's fixStrictTimeProjection, the strict side of :func:`_fix_inclusive_time`."""
    if isinstance(projected, GreaterThan) and projected.literal <= 0:
        return GreaterThan(projected.term, projected.literal + 1)
    if isinstance(projected, NotEqualTo) and projected.literal < 0:
        return NotIn(projected.term, (projected.literal, projected.literal + 1))
    if isinstance(projected, NotIn) and any(v < 0 for v in projected.literals):
        return NotIn(projected.term, _with_successors(projected.literals))
    return projected


# -- transforms --------------------------------------------------------------------------------------------------


@attrs.frozen
class Transform:
    """Base of every partition / sort transform. Subclasses override the type rules and the binders."""

    def __str__(self) -> str:  # pragma: no cover - every subclass overrides
        raise NotImplementedError

    @property
    def is_identity(self) -> bool:
        return False

    @property
    def is_void(self) -> bool:
        return False

    @property
    def dedup_name(self) -> str:
        """Transforms with the same dedup name on one column make a partition spec redundant (Java's rule)."""
        return str(self)

    @property
    def preserves_order(self) -> bool:
        return False

    def can_transform(self, source_type: IcebergType) -> bool:
        raise NotImplementedError

    def result_type(self, source_type: IcebergType) -> IcebergType:
        raise NotImplementedError

    def _check(self, source_type: IcebergType) -> None:
        if not self.can_transform(source_type):
            raise ValidationError(f"Cannot bind {self} to type {source_type}")

    def bind(self, source_type: IcebergType) -> Callable[[Any], Any]:
        """A function of one canonical value (None gives None).

        :raises ValidationError: when the transform cannot apply to ``source_type``
        """
        raise NotImplementedError

    def bind_arrow(self, source_type: IcebergType) -> Callable[[Any], pa.Array]:
        """A vectorized function of an Arrow array or chunked array of ``source_type`` values (nulls stay null).

        :raises ValidationError: when the transform cannot apply to ``source_type``
        """
        self._check(source_type)
        fn = self.bind(source_type)
        to_canonical = _canonical_from_arrow(source_type)
        same_type = self.result_type(source_type) == source_type
        return _scalar_loop(lambda v: fn(to_canonical(v)), None if same_type else pa.int32())

    def to_human_string(self, result_type: IcebergType, value: Any) -> str:
        """The partition value as Java renders it in partition paths (``"null"`` for null)."""
        return human_string(result_type, value)

    def project(self, name: str, pred: Predicate) -> BooleanExpression | None:
        """Inclusive projection of a bound predicate on this transform's source column onto the partition field
        ``name``: an expression over ``Reference(name)`` (or AlwaysFalse when no row can match) that is true for
        the partition value of every row the predicate selects. None when no partition value can be ruled out
        (Java's null: always true). Literals are canonical values of the transform's result type.

        :raises ValidationError: when the predicate is not bound
        """
        _source_type(pred, self)
        return None

    def project_strict(self, name: str, pred: Predicate) -> BooleanExpression | None:
        """Strict projection of a bound predicate onto the partition field ``name``: an expression over
        ``Reference(name)`` that is true only for partition values all of whose rows the predicate selects
        (null partition values never satisfy it unless it tests for null). None when no partition value
        guarantees that (Java's null: always false).

        :raises ValidationError: when the predicate is not bound
        """
        _source_type(pred, self)
        return None


@attrs.frozen
class Identity(Transform):
    def __str__(self) -> str:
        return IDENTITY

    @property
    def is_identity(self) -> bool:
        return True

    @property
    def preserves_order(self) -> bool:
        return True

    def can_transform(self, source_type: IcebergType) -> bool:
        # a variant has no single-value form; an unknown column holds only nulls
        return isinstance(source_type, PrimitiveType) and not isinstance(source_type, (VariantType, UnknownType))

    def result_type(self, source_type: IcebergType) -> IcebergType:
        return source_type

    def bind(self, source_type: IcebergType) -> Callable[[Any], Any]:
        self._check(source_type)
        return lambda v: v

    def bind_arrow(self, source_type: IcebergType) -> Callable[[Any], pa.Array]:
        self._check(source_type)
        return _as_array

    def project(self, name: str, pred: Predicate) -> BooleanExpression | None:
        """The same predicate on the partition field."""
        _source_type(pred, self)
        return _retarget(pred, name)

    def project_strict(self, name: str, pred: Predicate) -> BooleanExpression | None:
        """The same predicate on the partition field."""
        _source_type(pred, self)
        return _retarget(pred, name)


@attrs.frozen
class Void(Transform):
    def __str__(self) -> str:
        return VOID

    @property
    def is_void(self) -> bool:
        return True

    def can_transform(self, source_type: IcebergType) -> bool:
        return True

    def result_type(self, source_type: IcebergType) -> IcebergType:
        return source_type

    def bind(self, source_type: IcebergType) -> Callable[[Any], Any]:
        return lambda v: None

    def bind_arrow(self, source_type: IcebergType) -> Callable[[Any], pa.Array]:
        def apply(arr: Any) -> pa.Array:
            a = _as_array(arr)
            return pa.nulls(len(a), type=a.type)
        return apply

    def to_human_string(self, result_type: IcebergType, value: Any) -> str:
        return "null"


def _positive(name: str) -> Callable[[Any, attrs.Attribute, int], None]:
    def check(_instance: Any, _attribute: attrs.Attribute, value: int) -> None:
        if isinstance(value, bool) or not isinstance(value, int) or not 0 < value <= 2**31 - 1:
            raise ValidationError(f"Cannot create {name} transform: {value!r} must be a positive int")
    return check


@attrs.frozen
class Bucket(Transform):
    num_buckets: int = attrs.field(validator=_positive("bucket"))

    def __str__(self) -> str:
        return f"{BUCKET}[{self.num_buckets}]"

    def can_transform(self, source_type: IcebergType) -> bool:
        return isinstance(source_type, _BUCKET_SOURCES)

    def result_type(self, source_type: IcebergType) -> IcebergType:
        return IntegerType()

    def bind(self, source_type: IcebergType) -> Callable[[Any], Any]:
        self._check(source_type)
        n = self.num_buckets

        def apply(v: Any) -> int | None:
            return None if v is None else (hash_value(source_type, v) & 0x7FFFFFFF) % n
        return apply

    def bind_arrow(self, source_type: IcebergType) -> Callable[[Any], pa.Array]:
        self._check(source_type)
        if not isinstance(source_type, _LONG_HASHED):
            return super().bind_arrow(source_type)
        n = pa.scalar(self.num_buckets, pa.uint32())

        def apply(arr: Any) -> pa.Array:
            h = _arrow_hash_longs(_to_int64(_as_array(arr)))
            return pc.cast(pc.modulo(pc.bit_wise_and(h, pa.scalar(0x7FFFFFFF, pa.uint32())), n), pa.int32())
        return apply

    def to_human_string(self, result_type: IcebergType, value: Any) -> str:
        return "null" if value is None else str(value)

    def project(self, name: str, pred: Predicate) -> BooleanExpression | None:
        """``IS [NOT] NULL``, ``=`` and ``IN`` (hash the values); nothing else projects."""
        source_type = _source_type(pred, self)
        if isinstance(pred, UnaryPredicate):
            return _null_test(pred, name)
        fn = self.bind(source_type)
        if isinstance(pred, EqualTo):
            return EqualTo(Reference(name), fn(pred.literal))
        if isinstance(pred, In):
            return _set(name, (fn(v) for v in pred.literals), True)
        return None

    def project_strict(self, name: str, pred: Predicate) -> BooleanExpression | None:
        """``IS [NOT] NULL``, ``!=`` and ``NOT IN`` (a row in another bucket cannot hold the value)."""
        source_type = _source_type(pred, self)
        if isinstance(pred, UnaryPredicate):
            return _null_test(pred, name)
        fn = self.bind(source_type)
        if isinstance(pred, NotEqualTo):
            return NotEqualTo(Reference(name), fn(pred.literal))
        if isinstance(pred, NotIn):
            return _set(name, (fn(v) for v in pred.literals), False)
        return None


@attrs.frozen
class Truncate(Transform):
    width: int = attrs.field(validator=_positive("truncate"))

    def __str__(self) -> str:
        return f"{TRUNCATE}[{self.width}]"

    @property
    def preserves_order(self) -> bool:
        return True

    def can_transform(self, source_type: IcebergType) -> bool:
        return isinstance(source_type, _TRUNCATE_SOURCES)

    def result_type(self, source_type: IcebergType) -> IcebergType:
        return source_type

    def bind(self, source_type: IcebergType) -> Callable[[Any], Any]:
        self._check(source_type)
        w = self.width
        if isinstance(source_type, (IntegerType, LongType)):
            bits = 32 if isinstance(source_type, IntegerType) else 64
            return lambda v: None if v is None else _truncate_integral(v, w, bits)
        if isinstance(source_type, DecimalType):
            scale = source_type.scale

            def truncate_decimal(v: Any) -> Any:
                if v is None:
                    return None
                unscaled = decimal_unscaled(v, scale)
                return decimal_from_unscaled(unscaled - unscaled % w, scale)
            return truncate_decimal
        # string (code points) and binary (bytes)
        return lambda v: None if v is None else v[:w]

    def bind_arrow(self, source_type: IcebergType) -> Callable[[Any], pa.Array]:
        self._check(source_type)
        w = self.width
        if isinstance(source_type, (IntegerType, LongType)):
            if isinstance(source_type, IntegerType) and w > 2**30:
                return super().bind_arrow(source_type)  # Java's intermediate overflow: emulate row by row

            def truncate_integral(arr: Any) -> pa.Array:
                a = _as_array(arr)
                width = pa.scalar(w, a.type)
                return pc.subtract(a, pc.modulo(a, width))
            return truncate_integral
        if isinstance(source_type, StringType):
            return lambda arr: pc.utf8_slice_codeunits(_as_array(arr), 0, w)
        if isinstance(source_type, BinaryType):
            return lambda arr: pc.binary_slice(_as_array(arr), 0, w)
        return super().bind_arrow(source_type)

    def project(self, name: str, pred: Predicate) -> BooleanExpression | None:
        """Java's rules per source type: ranges and ``=`` / ``IN`` for numbers (``x < v`` gives
        ``p <= truncate(v - 1)``), and for strings and binary also ``LIKE 'prefix%'`` (kept when the prefix is
        shorter than the width, ``p = prefix`` at the width, ``p`` starts with the truncated prefix beyond) and
        ``NOT LIKE`` (kept below the width, ``p != prefix`` at it).

        For int and long, a width that does not divide 2^31 (2^63) makes Java's truncation wrap the lowest
        values of the type (within ``width`` of the minimum) around to one large partition value W; unlike
        Java, the projections here account for W so that no row is ever misjudged.
        """
        source_type = _source_type(pred, self)
        if isinstance(pred, UnaryPredicate):
            return _null_test(pred, name)
        fn = self.bind(source_type)
        if isinstance(source_type, (IntegerType, LongType)):
            return self._project_integral(name, pred, 32 if isinstance(source_type, IntegerType) else 64, False)
        if isinstance(source_type, DecimalType):
            return _ordered_inclusive(name, pred, fn, _decimal_step(source_type.scale))
        if isinstance(pred, (StartsWith, NotStartsWith)):
            prefix = pred.literal
            if len(prefix) < self.width:
                return type(pred)(Reference(name), prefix)
            if len(prefix) == self.width:
                cls = EqualTo if isinstance(pred, StartsWith) else NotEqualTo
                return cls(Reference(name), prefix)
            return StartsWith(Reference(name), fn(prefix)) if isinstance(pred, StartsWith) else None
        return _array_inclusive(name, pred, fn)

    def project_strict(self, name: str, pred: Predicate) -> BooleanExpression | None:
        """Java's strict rules: ``x < v`` gives ``p < truncate(v)`` (numbers: ``x <= v`` gives
        ``p < truncate(v + 1)``), ``!=`` and ``NOT IN`` map their values, ``=`` and ``IN`` have no strict
        projection; for strings ``LIKE 'prefix%'`` is kept below the width and becomes ``p = prefix`` at it,
        and ``NOT LIKE`` is kept below the width, becomes ``p != prefix`` at it and ``p NOT LIKE
        'truncated%'`` beyond."""
        source_type = _source_type(pred, self)
        if isinstance(pred, UnaryPredicate):
            return _null_test(pred, name)
        fn = self.bind(source_type)
        if isinstance(source_type, (IntegerType, LongType)):
            return self._project_integral(name, pred, 32 if isinstance(source_type, IntegerType) else 64, True)
        if isinstance(source_type, DecimalType):
            return _ordered_strict(name, pred, fn, _decimal_step(source_type.scale))
        if isinstance(pred, (StartsWith, NotStartsWith)):
            prefix = pred.literal
            if len(prefix) < self.width:
                return type(pred)(Reference(name), prefix)
            if len(prefix) == self.width:
                cls = EqualTo if isinstance(pred, StartsWith) else NotEqualTo
                return cls(Reference(name), prefix)
            return NotStartsWith(Reference(name), fn(prefix)) if isinstance(pred, NotStartsWith) else None
        return _array_strict(name, pred, fn)

    def _project_integral(self, name: str, pred: Predicate, bits: int, strict: bool) -> BooleanExpression | None:
        w = self.width
        step = _int_step(bits)

        def fn(v: int) -> int:
            return _truncate_integral(v, w, bits)

        low = -(1 << (bits - 1))
        wrapped = fn(low)
        if wrapped == low or isinstance(pred, (EqualTo, In, NotEqualTo, NotIn)):
            # nothing wraps, or the values map exactly
            return (_ordered_strict if strict else _ordered_inclusive)(name, pred, fn, step)
        ref = Reference(name)

        def in_wrap(v: int) -> bool:
            return fn(v) == wrapped  # the values near the minimum that Java truncates to ``wrapped``

        v = getattr(pred, "literal", None)
        if not strict:
            if isinstance(pred, (LessThan, LessThanOrEqual)):
                bound = step(v, -1) if isinstance(pred, LessThan) else v
                if bound is None:
                    return AlwaysFalse()
                if in_wrap(bound):
                    return EqualTo(ref, wrapped)  # only wrapped values lie at or below the bound
                return Or(LessThanOrEqual(ref, fn(bound)), EqualTo(ref, wrapped))
            if isinstance(pred, (GreaterThan, GreaterThanOrEqual)):
                bound = step(v, 1) if isinstance(pred, GreaterThan) else v
                if bound is None:
                    return AlwaysFalse()
                return None if in_wrap(bound) else GreaterThanOrEqual(ref, fn(bound))
            return None
        if isinstance(pred, (LessThan, LessThanOrEqual)):
            bound = v if isinstance(pred, LessThan) else step(v, 1)
            if bound is None:
                return NotNull(ref)
            return None if in_wrap(bound) else LessThan(ref, fn(bound))
        if isinstance(pred, (GreaterThan, GreaterThanOrEqual)):
            bound = v if isinstance(pred, GreaterThan) else step(v, -1)
            if bound is None:
                return NotNull(ref)
            projected = fn(bound)
            if projected >= wrapped:
                return GreaterThan(ref, projected)
            return And(GreaterThan(ref, projected), NotEqualTo(ref, wrapped))
        return None


@attrs.frozen
class _TimeTransform(Transform):
    @property
    def dedup_name(self) -> str:
        return "time"

    @property
    def preserves_order(self) -> bool:
        return True

    def can_transform(self, source_type: IcebergType) -> bool:
        return isinstance(source_type, _DATE_SOURCES)

    def result_type(self, source_type: IcebergType) -> IcebergType:
        return IntegerType()

    def _from_days(self) -> Callable[[int], int]:
        raise NotImplementedError

    def _from_ticks(self, per_second: int) -> Callable[[int], int]:
        """The unit ordinal of a timestamp of ``per_second`` ticks a second (micro- or nanoseconds)."""
        raise NotImplementedError

    def bind(self, source_type: IcebergType) -> Callable[[Any], Any]:
        self._check(source_type)
        if isinstance(source_type, DateType):
            fn = self._from_days()
        else:
            fn = self._from_ticks(_ticks_per_second(source_type))
        return lambda v: None if v is None else fn(v)

    def bind_arrow(self, source_type: IcebergType) -> Callable[[Any], pa.Array]:
        self._check(source_type)
        from_date = isinstance(source_type, DateType)
        per_second = _ticks_per_second(source_type)
        unit = "ns" if per_second == NANOS_PER_SECOND else "us"

        def apply(arr: Any) -> pa.Array:
            values = _to_int64(_as_array(arr), unit)
            return self._arrow(values, from_date, per_second)
        return apply

    def _arrow(self, values: pa.Array, from_date: bool, per_second: int) -> pa.Array:
        raise NotImplementedError

    def project(self, name: str, pred: Predicate) -> BooleanExpression | None:
        """Java's rules: ``x < v`` gives ``p <= unit(v - 1)``, ``x > v`` gives ``p >= unit(v + 1)``, ``=`` and
        ``IN`` map their values, then Java's fix for old writers (a negative ``<=`` bound or ``=`` value also
        accepts the next unit). For timestamps icelog also lowers a ``>=`` bound P by one when the predicate
        selects the row Java's transform puts in unit P - 1 though it lies in unit P (``.999999`` in the first
        second of a unit before 1970); Java's own projection misses that row."""
        source_type = _source_type(pred, self)
        if isinstance(pred, UnaryPredicate):
            return _null_test(pred, name)
        fn = self.bind(source_type)
        is_timestamp = isinstance(source_type, _TIMESTAMP_SOURCES)
        projected = _fix_inclusive_time(_ordered_inclusive(name, pred, fn, _int_step(64 if is_timestamp else 32)))
        if is_timestamp and isinstance(projected, GreaterThanOrEqual) and \
                self._quirk_selected(projected, pred, _ticks_per_second(source_type)):
            projected = GreaterThanOrEqual(projected.term, projected.literal - 1)
        return projected

    def project_strict(self, name: str, pred: Predicate) -> BooleanExpression | None:
        """Java's rules: ``x < v`` gives ``p < unit(v)``, ``x <= v`` gives ``p < unit(v + 1)``, ``x > v`` gives
        ``p > unit(v)``, ``x >= v`` gives ``p > unit(v - 1)``, ``!=`` and ``NOT IN`` map their values, then Java's
        fix for old writers (a ``>`` bound at or below 0 rises by one; a negative ``!=`` value also excludes the
        next unit). For timestamps icelog also lowers a ``<`` bound P by one when the predicate does not select
        the row of unit P that Java's transform puts in unit P - 1 (see :meth:`project`)."""
        source_type = _source_type(pred, self)
        if isinstance(pred, UnaryPredicate):
            return _null_test(pred, name)
        fn = self.bind(source_type)
        is_timestamp = isinstance(source_type, _TIMESTAMP_SOURCES)
        projected = _fix_strict_time(_ordered_strict(name, pred, fn, _int_step(64 if is_timestamp else 32)))
        if is_timestamp and isinstance(projected, LessThan) and \
                self._quirk_selected(projected, pred, _ticks_per_second(source_type)) is False:
            projected = LessThan(projected.term, projected.literal - 1)
        return projected

    def _start_seconds(self, ordinal: int) -> int:
        """The first second of the unit ``ordinal``, in seconds since epoch."""
        raise NotImplementedError

    def _quirk_selected(self, projected: LiteralPredicate, pred: Predicate, per_second: int) -> bool | None:
        """Whether ``pred`` selects the value that Java's transform puts one unit below the projected unit
        (``hh:00:00.999999`` of the unit's first second, before 1970); None when that unit has no such value."""
        ordinal = projected.literal
        q = (self._start_seconds(ordinal) + 1) * per_second - 1
        if q >= 0 or self._from_ticks(per_second)(q) != ordinal - 1:
            return None
        v = pred.literal  # type: ignore[attr-defined]
        if isinstance(pred, LessThan):
            return q < v
        if isinstance(pred, LessThanOrEqual):
            return q <= v
        if isinstance(pred, GreaterThan):
            return q > v
        if isinstance(pred, GreaterThanOrEqual):
            return q >= v
        return None


def _arrow_months(values: pa.Array, from_date: bool, per_second: int, *, years: bool) -> pa.Array:
    days = values if from_date else _floor_div(values, 86_400 * per_second)
    dates = pc.cast(pc.cast(days, pa.int32()), pa.date32())
    year = pc.cast(pc.subtract(pc.year(dates), pa.scalar(_EPOCH_YEAR, pa.int64())), pa.int32())
    if years:
        result = year
    else:
        result = pc.add(pc.multiply(year, pa.scalar(12, pa.int32())),
                        pc.subtract(pc.cast(pc.month(dates), pa.int32()), pa.scalar(1, pa.int32())))
    if from_date:
        return result
    first = pc.equal(pc.day(dates), pa.scalar(1, pa.int64()))
    if years:
        first = pc.and_(first, pc.equal(pc.month(dates), pa.scalar(1, pa.int64())))
    return _minus_where(result, pc.and_(first, _java_quirk(values, 86_400 * per_second, per_second)))


@attrs.frozen
class Year(_TimeTransform):
    def __str__(self) -> str:
        return YEAR

    def _from_days(self) -> Callable[[int], int]:
        return _days_to_years

    def _from_ticks(self, per_second: int) -> Callable[[int], int]:
        return lambda v: _ticks_to_years(v, per_second)

    def _arrow(self, values: pa.Array, from_date: bool, per_second: int) -> pa.Array:
        return _arrow_months(values, from_date, per_second, years=True)

    def _start_seconds(self, ordinal: int) -> int:
        return days_from_civil(_EPOCH_YEAR + ordinal, 1, 1) * 86_400

    def to_human_string(self, result_type: IcebergType, value: Any) -> str:
        return "null" if value is None else _human_year(value)


@attrs.frozen
class Month(_TimeTransform):
    def __str__(self) -> str:
        return MONTH

    def _from_days(self) -> Callable[[int], int]:
        return _days_to_months

    def _from_ticks(self, per_second: int) -> Callable[[int], int]:
        return lambda v: _ticks_to_months(v, per_second)

    def _arrow(self, values: pa.Array, from_date: bool, per_second: int) -> pa.Array:
        return _arrow_months(values, from_date, per_second, years=False)

    def _start_seconds(self, ordinal: int) -> int:
        years, month = divmod(ordinal, 12)
        return days_from_civil(_EPOCH_YEAR + years, month + 1, 1) * 86_400

    def to_human_string(self, result_type: IcebergType, value: Any) -> str:
        return "null" if value is None else _human_month(value)


@attrs.frozen
class Day(_TimeTransform):
    def __str__(self) -> str:
        return DAY

    def result_type(self, source_type: IcebergType) -> IcebergType:
        return DateType()

    def _from_days(self) -> Callable[[int], int]:
        return lambda d: d

    def _from_ticks(self, per_second: int) -> Callable[[int], int]:
        return lambda v: _ticks_floor(v, 86_400 * per_second, per_second)

    def _arrow(self, values: pa.Array, from_date: bool, per_second: int) -> pa.Array:
        if not from_date:
            day = 86_400 * per_second
            values = _minus_where(_floor_div(values, day), _java_quirk(values, day, per_second))
        return pc.cast(pc.cast(values, pa.int32()), pa.date32())

    def _start_seconds(self, ordinal: int) -> int:
        return ordinal * 86_400

    def to_human_string(self, result_type: IcebergType, value: Any) -> str:
        return "null" if value is None else _human_day(value)


@attrs.frozen
class Hour(_TimeTransform):
    def __str__(self) -> str:
        return HOUR

    def can_transform(self, source_type: IcebergType) -> bool:
        return isinstance(source_type, _TIMESTAMP_SOURCES)

    def _from_ticks(self, per_second: int) -> Callable[[int], int]:
        return lambda v: _ticks_floor(v, 3_600 * per_second, per_second)

    def _arrow(self, values: pa.Array, from_date: bool, per_second: int) -> pa.Array:
        hour = 3_600 * per_second
        hours = _minus_where(_floor_div(values, hour), _java_quirk(values, hour, per_second))
        return pc.cast(hours, pa.int32())

    def _start_seconds(self, ordinal: int) -> int:
        return ordinal * 3_600

    def to_human_string(self, result_type: IcebergType, value: Any) -> str:
        return "null" if value is None else _human_hour(value)


@attrs.frozen
class UnknownTransform(Transform):
    """A transform this version does not know; kept verbatim so foreign metadata round-trips. It cannot be
    applied to values."""

    text: str

    def __str__(self) -> str:
        return self.text

    def can_transform(self, source_type: IcebergType) -> bool:
        return True

    def result_type(self, source_type: IcebergType) -> IcebergType:
        return StringType()

    def bind(self, source_type: IcebergType) -> Callable[[Any], Any]:
        raise ValidationError(f"Cannot apply unknown transform: {self.text}")

    def bind_arrow(self, source_type: IcebergType) -> Callable[[Any], pa.Array]:
        raise ValidationError(f"Cannot apply unknown transform: {self.text}")


_WITH_ARG = re.compile(r"^\s*([A-Za-z_]+)\s*\[\s*(\d+)\s*\]\s*$")
_SIMPLE: dict[str, Transform] = {IDENTITY: Identity(), VOID: Void(), YEAR: Year(), MONTH: Month(), DAY: Day(),
                                 HOUR: Hour()}


def parse_transform(text: str) -> Transform:
    """Parse a transform from its spec string (case-insensitive, as Java); unknown strings give
    :class:`UnknownTransform`.

    :raises ValidationError: for a bucket or truncate whose argument is not positive
    """
    if not isinstance(text, str):
        raise ValidationError(f"Cannot parse transform: expected a string, got {text!r}")
    key = text.strip().lower()
    if key in _SIMPLE:
        return _SIMPLE[key]
    m = _WITH_ARG.match(text)
    if m:
        name, arg = m.group(1).lower(), int(m.group(2))
        if name == BUCKET:
            return Bucket(arg)
        if name == TRUNCATE:
            return Truncate(arg)
    return UnknownTransform(text)
