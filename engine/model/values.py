"""Single values: the canonical Python form, the spec's binary (Appendix D) and JSON single-value forms.

Layer: engine.model (pure functions; imports only the standard library, engine.errors and engine.model.types).

The canonical Python representation of a value of each primitive type (used for partition tuples, bounds
before serialization and expression literals):

=================  ==============================================
boolean            ``bool``
int, long          ``int``
float, double      ``float``
decimal(P, S)      ``decimal.Decimal`` with exactly S fraction digits
date               ``int`` days since 1970-01-01
time               ``int`` microseconds since midnight
timestamp(tz)      ``int`` microseconds since 1970-01-01T00:00:00 (UTC)
timestamp(tz)_ns   ``int`` nanoseconds since 1970-01-01T00:00:00 (UTC)
string             ``str``
uuid               ``uuid.UUID``
fixed, binary      ``bytes``
=================  ==============================================

``None`` is null everywhere. Dates and timestamps use integer calendar arithmetic (proleptic Gregorian), so
every int32 day and int64 microsecond is supported, not only Python's years 1..9999.
"""

from __future__ import annotations

import datetime as _dt
import decimal
import math
import re
import struct
import uuid
from typing import Any

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
    UnknownType,
    UUIDType,
    VariantType,
)

MICROS_PER_SECOND = 1_000_000
MICROS_PER_HOUR = 3_600 * MICROS_PER_SECOND
MICROS_PER_DAY = 86_400 * MICROS_PER_SECOND
NANOS_PER_MICRO = 1_000
NANOS_PER_SECOND = 1_000_000_000
NANOS_PER_DAY = 86_400 * NANOS_PER_SECOND
INT_MIN, INT_MAX = -(2**31), 2**31 - 1
LONG_MIN, LONG_MAX = -(2**63), 2**63 - 1

_INT = struct.Struct("<i")
_LONG = struct.Struct("<q")
_FLOAT = struct.Struct("<f")
_DOUBLE = struct.Struct("<d")


# -- calendar arithmetic (proleptic Gregorian, any integer day) --------------------------------------------------


def civil_from_days(days: int) -> tuple[int, int, int]:
    """(year, month, day) of a day count since 1970-01-01, for any integer (negative years included)."""
    z = days + 719_468
    era = z // 146_097
    doe = z - era * 146_097
    yoe = (doe - doe // 1_460 + doe // 36_524 - doe // 146_096) // 365
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    day = doy - (153 * mp + 2) // 5 + 1
    month = mp + 3 if mp < 10 else mp - 9
    year = yoe + era * 400 + (1 if month <= 2 else 0)
    return year, month, day


def days_from_civil(year: int, month: int, day: int) -> int:
    """Days since 1970-01-01 of a proleptic Gregorian date (the inverse of :func:`civil_from_days`)."""
    y = year - (1 if month <= 2 else 0)
    era = y // 400
    yoe = y - era * 400
    mp = month - 3 if month > 2 else month + 9
    doy = (153 * mp + 2) // 5 + day - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    return era * 146_097 + doe - 719_468


def _iso_year(year: int) -> str:
    # java.time's ISO formatters: 4 digits, '+' above 9999, '-' and 4 digits below 0.
    if year > 9999:
        return f"+{year}"
    if year < 0:
        return f"-{-year:04d}"
    return f"{year:04d}"


def _iso_fraction(ticks: int, digits: int = 6) -> str:
    # ISO_LOCAL_TIME prints only the fraction digits needed (none when zero).
    return f".{ticks:0{digits}d}".rstrip("0") if ticks else ""


def _format_clock(ticks: int, per_second: int, digits: int) -> str:
    seconds, frac = divmod(ticks, per_second)
    h, rem = divmod(seconds, 3600)
    mi, s = divmod(rem, 60)
    return f"{h:02d}:{mi:02d}:{s:02d}{_iso_fraction(frac, digits)}"


def format_date(days: int) -> str:
    """ISO date as Java's ``ISO_LOCAL_DATE`` prints it (``2017-11-16``, ``+10000-01-01``, ``-0001-12-31``)."""
    y, m, d = civil_from_days(days)
    return f"{_iso_year(y)}-{m:02d}-{d:02d}"


def format_time(micros: int) -> str:
    """ISO time as Java's ``ISO_LOCAL_TIME`` prints it (``22:31:08``, ``22:31:08.1``)."""
    return _format_clock(micros, MICROS_PER_SECOND, 6)


def format_timestamp(micros: int) -> str:
    """ISO local date-time as Java's ``ISO_LOCAL_DATE_TIME`` prints it (``2017-11-16T22:31:08.1``)."""
    days, in_day = divmod(micros, MICROS_PER_DAY)
    return f"{format_date(days)}T{format_time(in_day)}"


def format_timestamptz(micros: int) -> str:
    """ISO UTC date-time with a ``+00:00`` offset, as Iceberg Java writes timestamptz values."""
    return format_timestamp(micros) + "+00:00"


def format_timestamp_ns(nanos: int) -> str:
    """ISO local date-time of nanoseconds since epoch (``2017-11-16T22:31:08.123456789``)."""
    days, in_day = divmod(nanos, NANOS_PER_DAY)
    return f"{format_date(days)}T{_format_clock(in_day, NANOS_PER_SECOND, 9)}"


def format_timestamptz_ns(nanos: int) -> str:
    """ISO UTC date-time of nanoseconds since epoch with a ``+00:00`` offset."""
    return format_timestamp_ns(nanos) + "+00:00"


_DATE_RE = re.compile(r"^([+-]?\d{4,})-(\d{2})-(\d{2})$")
_TIME_RE = re.compile(r"^(\d{2}):(\d{2})(?::(\d{2})(?:\.(\d{1,9}))?)?$")
_OFFSET_RE = re.compile(r"^(.*?)(Z|[+-]\d{2}:\d{2}(?::\d{2})?)$")


def parse_date(text: str) -> int:
    """Days since epoch of an ISO date string (``YYYY-MM-DD``, signed years allowed).

    :raises ValidationError: when the text is not a valid date
    """
    m = _DATE_RE.match(text.strip())
    if not m:
        raise ValidationError(f"Cannot parse date: {text!r}")
    year, month, day = int(m.group(1)), int(m.group(2)), int(m.group(3))
    if not 1 <= month <= 12 or not 1 <= day <= _days_in_month(year, month):
        raise ValidationError(f"Cannot parse date: {text!r} is not a calendar date")
    return days_from_civil(year, month, day)


def _days_in_month(year: int, month: int) -> int:
    if month == 2:
        return 29 if (year % 4 == 0 and year % 100 != 0) or year % 400 == 0 else 28
    return 30 if month in (4, 6, 9, 11) else 31


def parse_time(text: str, *, nanos: bool = False) -> int:
    """Microseconds since midnight of an ISO time string (``HH:MM[:SS[.ffffff]]``); nanoseconds are refused.
    With ``nanos``, nanoseconds since midnight (``HH:MM:SS.fffffffff``).

    :raises ValidationError: when the text is not a valid time or has digits finer than the unit
    """
    digits = 9 if nanos else 6
    m = _TIME_RE.match(text.strip())
    if not m:
        raise ValidationError(f"Cannot parse time: {text!r}")
    h, mi, s = int(m.group(1)), int(m.group(2)), int(m.group(3) or 0)
    frac = m.group(4) or ""
    if h > 23 or mi > 59 or s > 59:
        raise ValidationError(f"Cannot parse time: {text!r} is out of range")
    if len(frac) > digits and int(frac[digits:]) != 0:
        raise ValidationError(f"Cannot parse time: {text!r} has more than {'nano' if nanos else 'micro'}second "
                              "precision")
    ticks = int((frac + "0" * digits)[:digits])
    return ((h * 60 + mi) * 60 + s) * 10**digits + ticks


def parse_timestamp(text: str, *, with_zone: bool, nanos: bool = False) -> int:
    """Microseconds since epoch of an ISO date-time (``T`` or a space between date and time; a date alone is
    midnight), or nanoseconds with ``nanos``. With ``with_zone`` an offset (``Z``, ``+01:00``) is honoured and a
    missing offset means UTC; without it, an offset is refused.

    :raises ValidationError: when the text is not a valid timestamp
    """
    per_second = NANOS_PER_SECOND if nanos else MICROS_PER_SECOND
    raw = text.strip()
    offset_ticks = 0
    m = _OFFSET_RE.match(raw)
    if m and ("T" in m.group(1) or " " in m.group(1)):
        if not with_zone:
            raise ValidationError(f"Cannot parse timestamp: {text!r} has a zone offset; the type is timestamp")
        raw, offset = m.group(1), m.group(2)
        if offset != "Z":
            sign = -1 if offset[0] == "-" else 1
            parts = [int(p) for p in offset[1:].split(":")]
            offset_ticks = sign * (parts[0] * 3600 + parts[1] * 60 + (parts[2] if len(parts) > 2 else 0)) * \
                per_second
    sep = "T" if "T" in raw else (" " if " " in raw else None)
    date_text, time_text = (raw.split(sep, 1) if sep else (raw, "00:00"))
    try:
        days = parse_date(date_text)
        ticks = parse_time(time_text, nanos=nanos)
    except ValidationError as e:
        raise ValidationError(f"Cannot parse timestamp: {text!r}") from e
    return days * 86_400 * per_second + ticks - offset_ticks


# -- floats ----------------------------------------------------------------------------------------------------


def float32_shortest(x: float) -> str:
    """The shortest decimal text that reads back as the same 32-bit float as ``x`` (Python's float syntax)."""
    x32 = _FLOAT.unpack(_FLOAT.pack(x))[0]
    if x32 != x32 or x32 in (float("inf"), float("-inf")):
        return repr(x32)
    for p in range(1, 10):
        text = f"{x32:.{p}g}"
        if _FLOAT.unpack(_FLOAT.pack(float(text)))[0] == x32:
            return text
    return repr(x32)  # pragma: no cover - 9 significant digits always round-trip


# -- decimals ----------------------------------------------------------------------------------------------------


def decimal_unscaled(value: decimal.Decimal, scale: int) -> int:
    """The unscaled integer of ``value`` at ``scale`` (``Decimal("14.2")`` at scale 2 is 1420), computed exactly.

    :raises ValidationError: when the value is not finite or has more fraction digits than ``scale``
    """
    sign, digits, exponent = value.as_tuple()
    if not isinstance(exponent, int):
        raise ValidationError(f"Cannot use decimal value: {value} is not finite")
    unscaled = int("".join(map(str, digits)) or "0")
    shift = exponent + scale
    if shift >= 0:
        unscaled *= 10**shift
    else:
        unscaled, rest = divmod(unscaled, 10**-shift)
        if rest:
            raise ValidationError(f"Cannot use decimal value: {value} has more than {scale} fraction digits")
    return -unscaled if sign else unscaled


def decimal_from_unscaled(unscaled: int, scale: int) -> decimal.Decimal:
    """The Decimal with this unscaled value and exactly ``scale`` fraction digits (never rounded)."""
    digits = tuple(int(c) for c in str(abs(unscaled)))
    return decimal.Decimal((1 if unscaled < 0 else 0, digits, -scale))


def decimal_min_bytes(unscaled: int) -> bytes:
    """Minimal two's-complement big-endian bytes of an integer (Java's ``BigInteger.toByteArray``)."""
    bits = (unscaled if unscaled >= 0 else ~unscaled).bit_length()
    return unscaled.to_bytes(bits // 8 + 1, "big", signed=True)


def _check_decimal(t: DecimalType, value: decimal.Decimal) -> int:
    unscaled = decimal_unscaled(value, t.scale)
    if len(str(abs(unscaled))) > t.precision:
        raise ValidationError(f"Cannot use decimal value: {value} does not fit {t}")
    return unscaled


# -- Appendix D: binary single-value serialization ---------------------------------------------------------------


def to_bytes(t: IcebergType, v: Any) -> bytes:
    """Serialize a canonical value of primitive type ``t`` as Appendix D bytes (for bounds and summaries).

    :raises ValidationError: when the value does not fit the type, or the type has no single-value form
    """
    if v is None:
        raise ValidationError(f"Cannot serialize value: null has no single-value form ({t})")
    try:
        if isinstance(t, BooleanType):
            return b"\x01" if v else b"\x00"
        if isinstance(t, (IntegerType, DateType)):
            return _INT.pack(v)
        if isinstance(t, (LongType, TimeType, TimestampType, TimestamptzType, TimestampNsType, TimestamptzNsType)):
            return _LONG.pack(v)
        if isinstance(t, FloatType):
            return _FLOAT.pack(v)
        if isinstance(t, DoubleType):
            return _DOUBLE.pack(v)
        if isinstance(t, StringType):
            return v.encode("utf-8")
        if isinstance(t, UUIDType):
            return v.bytes
        if isinstance(t, FixedType):
            if len(v) != t.length:
                raise ValidationError(f"Cannot serialize value: {len(v)} bytes do not fit {t}")
            return bytes(v)
        if isinstance(t, BinaryType):
            return bytes(v)
        if isinstance(t, DecimalType):
            return decimal_min_bytes(_check_decimal(t, v))
    except (struct.error, OverflowError, AttributeError, TypeError, UnicodeEncodeError) as e:
        raise ValidationError(f"Cannot serialize value: {v!r} is not a valid {t} ({e})") from e
    raise ValidationError(f"Cannot serialize value: type {t} has no single-value form")


def from_bytes(t: IcebergType, b: bytes) -> Any:
    """Decode Appendix D bytes to the canonical value. Bounds written before a type promotion are read too
    (4-byte int as long, 4-byte float as double).

    :raises ValidationError: when the bytes do not have the length the type needs
    """
    b = bytes(b)
    try:
        if isinstance(t, BooleanType):
            if len(b) != 1:
                raise ValidationError(f"Cannot read boolean value: expected 1 byte, got {len(b)}")
            return b != b"\x00"
        if isinstance(t, (IntegerType, DateType)):
            return _INT.unpack(b)[0]
        if isinstance(t, (LongType, TimeType, TimestampType, TimestamptzType, TimestampNsType, TimestamptzNsType)):
            if len(b) == 4:
                return _INT.unpack(b)[0]
            return _LONG.unpack(b)[0]
        if isinstance(t, FloatType):
            return _FLOAT.unpack(b)[0]
        if isinstance(t, DoubleType):
            if len(b) == 4:
                return _FLOAT.unpack(b)[0]
            return _DOUBLE.unpack(b)[0]
        if isinstance(t, StringType):
            return b.decode("utf-8")
        if isinstance(t, UUIDType):
            return uuid.UUID(bytes=b)
        if isinstance(t, FixedType):
            if len(b) != t.length:
                raise ValidationError(f"Cannot read {t} value: got {len(b)} bytes")
            return b
        if isinstance(t, BinaryType):
            return b
        if isinstance(t, DecimalType):
            if not b:
                raise ValidationError(f"Cannot read {t} value: no bytes")
            return decimal_from_unscaled(int.from_bytes(b, "big", signed=True), t.scale)
    except (struct.error, UnicodeDecodeError) as e:
        raise ValidationError(f"Cannot read {t} value from bytes {b.hex()}: {e}") from e
    except ValueError as e:
        raise ValidationError(f"Cannot read {t} value from bytes {b.hex()}: {e}") from e
    raise ValidationError(f"Cannot read value: type {t} has no single-value form")


def bound_value(t: IcebergType, raw: bytes) -> Any:
    """The canonical value of a column's lower or upper bound (Appendix D bytes) for a column now of type ``t``:
    bounds written before an int -> long or float -> double promotion keep their narrower size; a NaN bound proves
    nothing and reads as None.

    :raises ValidationError: when the bytes are not a value of the type
    """
    if isinstance(t, LongType) and len(raw) == 4:
        t = IntegerType()
    elif isinstance(t, DoubleType) and len(raw) == 4:
        t = FloatType()
    try:
        value = from_bytes(t, raw)
    except (ValueError, TypeError, ArithmeticError, struct.error) as e:
        raise ValidationError(f"Cannot read {t} bound from bytes {bytes(raw).hex()}: {e}") from e
    if isinstance(value, float) and value != value:
        return None
    return value


# -- JSON single-value serialization -----------------------------------------------------------------------------


#: JSON has no NaN or infinities: the strings Jackson (so Java's SingleValueParser) writes, by ``str(value)``
NON_FINITE_JSON = {"nan": "NaN", "inf": "Infinity", "-inf": "-Infinity"}


def value_to_json(t: IcebergType, v: Any) -> Any:
    """The JSON single-value form of a canonical value, as Java's ``SingleValueParser`` writes it: numbers and
    booleans as JSON, dates/times/timestamps as ISO strings (timestamptz with ``+00:00``), decimals as plain
    strings, uuids lower case, fixed and binary as upper-case hex.

    :raises ValidationError: for a nested type or a value that does not fit the type
    """
    if v is None:
        return None
    if isinstance(t, BooleanType):
        return bool(v)
    if isinstance(t, (IntegerType, LongType)):
        return int(v)
    if isinstance(t, (FloatType, DoubleType)) and not math.isfinite(v):
        return NON_FINITE_JSON[str(float(v))]
    if isinstance(t, FloatType):
        return float(float32_shortest(v))  # Java writes the float's own shortest digits ("0.1", not 0.100000001)
    if isinstance(t, DoubleType):
        return float(v)
    if isinstance(t, DateType):
        return format_date(v)
    if isinstance(t, TimeType):
        return format_time(v)
    if isinstance(t, TimestampType):
        return format_timestamp(v)
    if isinstance(t, TimestamptzType):
        return format_timestamptz(v)
    if isinstance(t, TimestampNsType):
        return format_timestamp_ns(v)
    if isinstance(t, TimestamptzNsType):
        return format_timestamptz_ns(v)
    if isinstance(t, StringType):
        return str(v)
    if isinstance(t, UUIDType):
        return str(v)
    if isinstance(t, (FixedType, BinaryType)):
        if isinstance(t, FixedType) and len(v) != t.length:
            raise ValidationError(f"Cannot serialize value: {len(v)} bytes do not fit {t}")
        return bytes(v).hex().upper()
    if isinstance(t, DecimalType):
        unscaled = _check_decimal(t, v)
        return format(decimal_from_unscaled(unscaled, t.scale), "f")
    raise ValidationError(f"Cannot serialize value: type {t} has no JSON single-value form")


def value_from_json(t: IcebergType, j: Any) -> Any:
    """Parse the JSON single-value form back to the canonical value (hex is read in either case).

    :raises ValidationError: when the JSON does not hold a value of the type
    """
    if j is None:
        return None
    if isinstance(t, BooleanType):
        if not isinstance(j, bool):
            raise ValidationError(f"Cannot parse boolean value: {j!r}")
        return j
    if isinstance(t, (IntegerType, LongType)):
        if isinstance(j, bool) or not isinstance(j, int):
            raise ValidationError(f"Cannot parse {t} value: {j!r}")
        return _check_range(t, j)
    if isinstance(t, (FloatType, DoubleType)):
        if isinstance(j, str) and j in NON_FINITE_JSON.values():
            return float(j)  # float() reads Jackson's "NaN", "Infinity" and "-Infinity"
        if isinstance(j, bool) or not isinstance(j, (int, float)):
            raise ValidationError(f"Cannot parse {t} value: {j!r}")
        return value_from_python(t, j)
    if isinstance(t, DecimalType):
        if isinstance(j, bool) or not isinstance(j, (str, int, float)):
            raise ValidationError(f"Cannot parse {t} value: {j!r}")
        return value_from_python(t, decimal.Decimal(str(j)) if not isinstance(j, str) else _parse_decimal(t, j))
    if not isinstance(j, str):
        raise ValidationError(f"Cannot parse {t} value: expected a string, got {j!r}")
    if isinstance(t, DateType):
        return parse_date(j)
    if isinstance(t, TimeType):
        return parse_time(j)
    if isinstance(t, TimestampType):
        return parse_timestamp(j, with_zone=False)
    if isinstance(t, TimestamptzType):
        return parse_timestamp(j, with_zone=True)
    if isinstance(t, TimestampNsType):
        return parse_timestamp(j, with_zone=False, nanos=True)
    if isinstance(t, TimestamptzNsType):
        return parse_timestamp(j, with_zone=True, nanos=True)
    if isinstance(t, StringType):
        return j
    if isinstance(t, UUIDType):
        return value_from_python(t, j)
    if isinstance(t, (FixedType, BinaryType)):
        try:
            raw = bytes.fromhex(j)
        except ValueError as e:
            raise ValidationError(f"Cannot parse {t} value: {j!r} is not hex") from e
        return value_from_python(t, raw)
    raise ValidationError(f"Cannot parse value: type {t} has no JSON single-value form")


def _parse_decimal(t: DecimalType, text: str) -> decimal.Decimal:
    try:
        return decimal.Decimal(text.strip())
    except decimal.InvalidOperation as e:
        raise ValidationError(f"Cannot parse {t} value: {text!r}") from e


# -- coercion of user and Arrow values ---------------------------------------------------------------------------


def _check_range(t: IcebergType, v: int) -> int:
    lo, hi = (INT_MIN, INT_MAX) if isinstance(t, (IntegerType, DateType)) else (LONG_MIN, LONG_MAX)
    if not lo <= v <= hi:
        raise ValidationError(f"Cannot use value {v}: out of range for {t}")
    return v


def _micros_of_datetime(x: _dt.datetime) -> int:
    days = days_from_civil(x.year, x.month, x.day)
    return (days * 86_400 + x.hour * 3600 + x.minute * 60 + x.second) * MICROS_PER_SECOND + x.microsecond


def _micros_of_time(x: _dt.time) -> int:
    return (x.hour * 3600 + x.minute * 60 + x.second) * MICROS_PER_SECOND + x.microsecond


def value_from_python(t: IcebergType, x: Any) -> Any:
    """Coerce a user or Arrow Python value to the canonical representation of type ``t``.

    Accepted: the canonical form itself; ``datetime.date`` for date (and midnight for timestamps);
    ``datetime.time`` for time; ``datetime.datetime`` for timestamps (naive for timestamp; for timestamptz an
    aware one is converted to UTC and a naive one is taken as UTC); ISO strings for date, time and timestamps;
    ``Decimal``, ``int``, ``float`` (by its shortest repr) or a string for decimal, which must fit exactly;
    ``int`` or ``Decimal`` for float and double (float values are rounded to 32 bits); a string, 16 bytes or a
    UUID for uuid; bytes-like values for fixed and binary.

    :raises ValidationError: when the value does not match the type (naming the value and the type)
    """
    if x is None:
        return None
    try:
        return _coerce(t, x)
    except ValidationError:
        raise
    except (ValueError, TypeError, OverflowError, decimal.InvalidOperation) as e:
        raise ValidationError(f"Cannot convert {x!r} to {t}: {e}") from e


def _mismatch(t: IcebergType, x: Any) -> ValidationError:
    return ValidationError(f"Cannot convert {x!r} to {t}: a {type(x).__name__} is not a {t} value")


def _coerce(t: IcebergType, x: Any) -> Any:
    if isinstance(t, BooleanType):
        if isinstance(x, bool):
            return x
        raise _mismatch(t, x)
    if isinstance(t, (IntegerType, LongType)):
        if isinstance(x, int) and not isinstance(x, bool):
            return _check_range(t, int(x))
        raise _mismatch(t, x)
    if isinstance(t, (FloatType, DoubleType)):
        if isinstance(x, bool) or not isinstance(x, (int, float, decimal.Decimal)):
            raise _mismatch(t, x)
        f = float(x)
        if isinstance(t, FloatType):
            try:
                f = _FLOAT.unpack(_FLOAT.pack(f))[0]  # a float value is a 32-bit float
            except OverflowError as e:
                raise ValidationError(f"Cannot convert {x!r} to float: out of range") from e
        return f
    if isinstance(t, DecimalType):
        if isinstance(x, bool):
            raise _mismatch(t, x)
        if isinstance(x, float):
            x = decimal.Decimal(repr(x))
        elif isinstance(x, int):
            x = decimal.Decimal(x)
        elif isinstance(x, str):
            x = _parse_decimal(t, x)
        if not isinstance(x, decimal.Decimal):
            raise _mismatch(t, x)
        return decimal_from_unscaled(_check_decimal(t, x), t.scale)
    if isinstance(t, DateType):
        if isinstance(x, _dt.datetime):
            raise ValidationError(f"Cannot convert {x!r} to date: a datetime is not a date value")
        if isinstance(x, _dt.date):
            return days_from_civil(x.year, x.month, x.day)
        if isinstance(x, int) and not isinstance(x, bool):
            return _check_range(t, x)
        if isinstance(x, str):
            return _check_range(t, parse_date(x))
        raise _mismatch(t, x)
    if isinstance(t, TimeType):
        if isinstance(x, _dt.time):
            if x.tzinfo is not None:
                raise ValidationError(f"Cannot convert {x!r} to time: it has a time zone")
            return _micros_of_time(x)
        if isinstance(x, int) and not isinstance(x, bool):
            if not 0 <= x < MICROS_PER_DAY:
                raise ValidationError(f"Cannot convert {x!r} to time: not within one day of microseconds")
            return x
        if isinstance(x, str):
            return parse_time(x)
        raise _mismatch(t, x)
    if isinstance(t, (TimestampType, TimestamptzType, TimestampNsType, TimestamptzNsType)):
        with_zone = isinstance(t, (TimestamptzType, TimestamptzNsType))
        nanos = isinstance(t, (TimestampNsType, TimestamptzNsType))
        scale = NANOS_PER_MICRO if nanos else 1
        if isinstance(x, _dt.datetime):
            # pandas.Timestamp (a datetime) carries nanoseconds beyond the microsecond
            extra = int(getattr(x, "nanosecond", 0)) if nanos else 0
            if x.tzinfo is not None and x.utcoffset() is not None:
                if not with_zone:
                    zoned = "timestamptz_ns" if nanos else "timestamptz"
                    raise ValidationError(f"Cannot convert {x!r} to {t}: it has a time zone "
                                          f"(use {zoned}, or pass a naive datetime)")
                offset = x.utcoffset()
                micros = _micros_of_datetime(x.replace(tzinfo=None)) - \
                    (offset.days * 86_400 + offset.seconds) * MICROS_PER_SECOND - offset.microseconds
                return _check_range(t, micros * scale + extra)
            return _check_range(t, _micros_of_datetime(x) * scale + extra)
        if isinstance(x, _dt.date):
            return days_from_civil(x.year, x.month, x.day) * MICROS_PER_DAY * scale
        if isinstance(x, int) and not isinstance(x, bool):
            return _check_range(t, x)
        if isinstance(x, str):
            return _check_range(t, parse_timestamp(x, with_zone=with_zone, nanos=nanos))
        raise _mismatch(t, x)
    if isinstance(t, StringType):
        if isinstance(x, str):
            return x
        raise _mismatch(t, x)
    if isinstance(t, UUIDType):
        if isinstance(x, uuid.UUID):
            return x
        if isinstance(x, str):
            return uuid.UUID(x)
        if isinstance(x, (bytes, bytearray, memoryview)):
            return uuid.UUID(bytes=bytes(x))
        raise _mismatch(t, x)
    if isinstance(t, (FixedType, BinaryType)):
        if isinstance(x, (bytes, bytearray, memoryview)):
            b = bytes(x)
            if isinstance(t, FixedType) and len(b) != t.length:
                raise ValidationError(f"Cannot convert {len(b)} bytes to {t}: the length must be {t.length}")
            return b
        raise _mismatch(t, x)
    if isinstance(t, (VariantType, UnknownType)):
        raise ValidationError(f"Cannot convert {x!r} to {t}: a {t} column has no single values to compare or "
                              "partition by (only IS NULL and IS NOT NULL apply)")
    raise ValidationError(f"Cannot convert {x!r}: {t} is not a primitive type")


# -- truncated bounds (column metrics) ---------------------------------------------------------------------------


def truncate_lower_bound(t: IcebergType, v: Any, width: int = 16) -> Any:
    """A lower bound of ``v`` no longer than ``width`` code points (string) or bytes (binary, fixed); other
    types are returned unchanged."""
    if v is None:
        return None
    if isinstance(t, (StringType, BinaryType, FixedType)):
        return v[:width]
    return v


def truncate_upper_bound(t: IcebergType, v: Any, width: int = 16) -> Any:
    """An upper bound of ``v`` no longer than ``width`` code points or bytes: ``v`` itself when short enough,
    else the prefix with its last incrementable code point (byte) incremented; None when there is none.
    Other types are returned unchanged. (Unlike Java, code points never step into the surrogate range.)"""
    if v is None:
        return None
    if isinstance(t, StringType):
        if len(v) <= width:
            return v
        for i in range(width - 1, -1, -1):
            nxt = ord(v[i]) + 1
            if 0xD800 <= nxt <= 0xDFFF:
                nxt = 0xE000
            if nxt <= 0x10FFFF:
                return v[:i] + chr(nxt)
        return None
    if isinstance(t, (BinaryType, FixedType)):
        if len(v) <= width:
            return v
        for i in range(width - 1, -1, -1):
            if v[i] != 0xFF:
                return bytes(v[:i]) + bytes((v[i] + 1,))
        return None
    return v


def uuid_bounds_order_alike(lower: uuid.UUID, upper: uuid.UUID) -> bool:
    """Whether every uuid in ``[lower, upper]`` (unsigned byte order, as the spec and Parquet sort them) keeps the
    same order under Iceberg Java 1.10's signed comparison (two signed longs; apache/iceberg#14216).

    Where the range spans a sign bit, Java would prune files that hold matching rows, so writers leave such bounds
    out and readers scan the file instead.
    """
    lo, hi = lower.bytes, upper.bytes
    if (lo[0] ^ hi[0]) & 0x80:
        return False
    if lo[:8] == hi[:8] and (lo[8] ^ hi[8]) & 0x80:
        return False
    return True
