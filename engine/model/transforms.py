"""Partition transforms: identity, bucket[N], truncate[W], year, month, day, hour, void, with Java's semantics.

Layer: engine.model (pure values and functions; imports the standard library, attrs, pyarrow, engine.errors
and engine.model.types / values / bucket_hash / human_strings).

Each transform prints its spec string (``str(t)``), parses back with :func:`parse_transform` (an unknown
string becomes :class:`UnknownTransform`, so foreign metadata round-trips), binds once to a source type
(:meth:`Transform.bind` for one canonical value, :meth:`Transform.bind_arrow` for an Arrow array) and renders
partition values the way Java does in partition paths (:meth:`Transform.to_human_string`, from
engine.model.human_strings). Bucket hashes with engine.model.bucket_hash. How a row predicate reads through
a transform (Java's ``Transform.project`` / ``projectStrict``) is engine.model.transform_projections.

Results match Iceberg Java 1.10 value for value, including its corner cases: truncate wraps around on int and
long overflow, and year/month/day/hour of a timestamp before 1970 floor toward negative infinity except at
``hh:00:00.999999`` in the first second of a unit, where Java (``DateTimeUtil.convertMicros``) gives one unit
less (``.999999999`` for nanosecond timestamps, ``convertNanos``). Nanosecond timestamps hash their microseconds
(floor), so a value buckets alike in both units. icelog reproduces that so that Java's partition pruning agrees
with the partitions icelog writes.
"""

from __future__ import annotations

import re
import uuid
from typing import Any, Callable

import attrs
import pyarrow as pa
import pyarrow.compute as pc

from engine.errors import ValidationError
from engine.model.bucket_hash import LONG_HASHED_TYPES, arrow_hash_longs, hash_value
from engine.model.human_strings import human_day, human_hour, human_month, human_string, human_year
from engine.model.types import (
    BinaryType,
    DateType,
    DecimalType,
    FixedType,
    IcebergType,
    IntegerType,
    LongType,
    PrimitiveType,
    StringType,
    NANO_TIMESTAMPS,
    TimestampType,
    TimestamptzType,
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
    decimal_unscaled,
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

_BUCKET_SOURCES = LONG_HASHED_TYPES + (DecimalType, StringType, UUIDType, FixedType, BinaryType)
_TRUNCATE_SOURCES = (IntegerType, LongType, DecimalType, StringType, BinaryType)
_TIMESTAMP_SOURCES = (TimestampType, TimestamptzType) + NANO_TIMESTAMPS
_DATE_SOURCES = (DateType,) + _TIMESTAMP_SOURCES


def _ticks_per_second(t: IcebergType) -> int:
    """The unit of a timestamp type's values: micro- or nanoseconds per second."""
    return NANOS_PER_SECOND if isinstance(t, NANO_TIMESTAMPS) else MICROS_PER_SECOND


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
        if not isinstance(source_type, LONG_HASHED_TYPES):
            return super().bind_arrow(source_type)
        n = pa.scalar(self.num_buckets, pa.uint32())

        def apply(arr: Any) -> pa.Array:
            h = arrow_hash_longs(_to_int64(_as_array(arr)))
            return pc.cast(pc.modulo(pc.bit_wise_and(h, pa.scalar(0x7FFFFFFF, pa.uint32())), n), pa.int32())
        return apply

    def to_human_string(self, result_type: IcebergType, value: Any) -> str:
        return "null" if value is None else str(value)


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

    def _start_seconds(self, ordinal: int) -> int:
        """The first second of the unit ``ordinal``, in seconds since epoch."""
        raise NotImplementedError

    def quirk_tick(self, ordinal: int, source_type: IcebergType) -> int | None:
        """The one timestamp of unit ``ordinal`` that Java's transform puts in unit ``ordinal - 1``: the last
        tick of the unit's first second (``hh:00:00.999999``), before 1970 (see the module docstring). None when
        the unit has no such value (from 1970 on).

        :param source_type: the timestamp type, whose unit (micro- or nanoseconds) the tick is in
        """
        per_second = _ticks_per_second(source_type)
        q = (self._start_seconds(ordinal) + 1) * per_second - 1
        if q >= 0 or self._from_ticks(per_second)(q) != ordinal - 1:
            return None
        return q


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
        return "null" if value is None else human_year(value)


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
        return "null" if value is None else human_month(value)


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
        return "null" if value is None else human_day(value)


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
        return "null" if value is None else human_hour(value)


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
