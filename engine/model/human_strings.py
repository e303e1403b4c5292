"""Partition values as text, the way Iceberg Java renders them in partition paths (``toHumanString``).

Layer: engine.model (pure functions; imports the standard library and engine.model.types / values). The
transforms (engine.model.transforms) render their results with these; partition paths
(engine.model.partitioning) are built from them.
"""

from __future__ import annotations

import base64
import decimal
from typing import Any

from engine.model.types import (
    BinaryType,
    BooleanType,
    DateType,
    DecimalType,
    DoubleType,
    FixedType,
    FloatType,
    IcebergType,
    TimestampNsType,
    TimestampType,
    TimestamptzNsType,
    TimestamptzType,
    TimeType,
)
from engine.model.values import (
    MICROS_PER_SECOND,
    civil_from_days,
    decimal_from_unscaled,
    decimal_unscaled,
    float32_shortest,
    format_timestamp,
    format_timestamp_ns,
)

_EPOCH_YEAR = 1970  # year, month, day and hour ordinals count from 1970-01-01T00:00


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
        return human_day(v)
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


def human_year(ordinal: int) -> str:
    """A year ordinal (years since 1970) as ``yyyy``."""
    return f"{_EPOCH_YEAR + ordinal:04d}"


def human_month(ordinal: int) -> str:
    """A month ordinal (months since 1970-01) as ``yyyy-MM``."""
    years, month = divmod(ordinal, 12)
    return f"{_EPOCH_YEAR + years:04d}-{month + 1:02d}"


def human_day(ordinal: int) -> str:
    """A day ordinal (days since 1970-01-01) as ``yyyy-MM-dd``."""
    y, m, d = civil_from_days(ordinal)
    return f"{y:04d}-{m:02d}-{d:02d}"


def human_hour(ordinal: int) -> str:
    """An hour ordinal (hours since 1970-01-01T00) as ``yyyy-MM-dd-HH``."""
    days, hour = divmod(ordinal, 24)
    return f"{human_day(days)}-{hour:02d}"
