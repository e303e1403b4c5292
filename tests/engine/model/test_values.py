"""Single values: Appendix D bytes, the JSON single-value form, coercion of Python values, truncated bounds.

Expected bytes and JSON strings were produced by Iceberg Java 1.10.2 (``Conversions.toByteBuffer`` and
``SingleValueParser.toJson``) for the same values.
"""

from __future__ import annotations

import datetime as dt
import uuid
from decimal import Decimal

import pytest

from engine.errors import ValidationError
from engine.model.types import (
    BinaryType,
    BooleanType,
    DateType,
    DecimalType,
    DoubleType,
    FixedType,
    FloatType,
    IntegerType,
    LongType,
    StringType,
    StructType,
    TimestampNsType,
    TimestampType,
    TimestamptzNsType,
    TimestamptzType,
    TimeType,
    UUIDType,
)
from engine.model.values import (
    civil_from_days,
    days_from_civil,
    from_bytes,
    to_bytes,
    truncate_lower_bound,
    truncate_upper_bound,
    value_from_json,
    value_from_python,
    value_to_json,
)

UUID = uuid.UUID("f79c3e09-677c-4bbd-a479-3f349cb785e7")

# (type, canonical value, Appendix D bytes as hex)
APPENDIX_D = [
    (BooleanType(), True, "01"),
    (BooleanType(), False, "00"),
    (IntegerType(), 34, "22000000"),
    (IntegerType(), -1, "ffffffff"),
    (LongType(), 34, "2200000000000000"),
    (LongType(), -(2**63), "0000000000000080"),
    (FloatType(), 1.0, "0000803f"),
    (FloatType(), -0.0, "00000080"),
    (DoubleType(), 1.0, "000000000000f03f"),
    (DateType(), 17486, "4e440000"),
    (DateType(), -1, "ffffffff"),
    (TimeType(), 81068000000, "008307e012000000"),
    (TimestampType(), 1510871468000000, "00c3262d215e0500"),
    (TimestamptzType(), -1, "ffffffffffffffff"),
    (StringType(), "iceberg", "69636562657267"),
    (StringType(), "ü😀", "c3bcf09f9880"),
    (StringType(), "", ""),
    (UUIDType(), UUID, "f79c3e09677c4bbda4793f349cb785e7"),
    (FixedType(4), b"\x00\x01\x02\x03", "00010203"),
    (BinaryType(), b"\x00\x01\x02\x03", "00010203"),
    (BinaryType(), b"", ""),
    (DecimalType(9, 2), Decimal("14.20"), "058c"),
    (DecimalType(9, 2), Decimal("-14.20"), "fa74"),
    (DecimalType(9, 2), Decimal("0.00"), "00"),
    (DecimalType(9, 2), Decimal("1.28"), "0080"),
    (DecimalType(9, 2), Decimal("-1.28"), "80"),
    (DecimalType(38, 0), Decimal(10**38 - 1), "4b3b4ca85a86c47a098a223fffffffff"),
    (DecimalType(38, 10), Decimal("-0.0000000001"), "ff"),
]


@pytest.mark.parametrize(("t", "value", "hex_bytes"), APPENDIX_D, ids=[f"{r[0]}-{r[2]}" for r in APPENDIX_D])
def test_appendix_d_round_trip(t, value, hex_bytes):
    assert to_bytes(t, value).hex() == hex_bytes
    back = from_bytes(t, bytes.fromhex(hex_bytes))
    assert back == value
    assert type(back) is type(value)
    if isinstance(t, DecimalType):
        assert back.as_tuple().exponent == -t.scale


def test_float_bytes_keep_the_sign_of_zero_and_nan():
    assert str(from_bytes(DoubleType(), to_bytes(DoubleType(), -0.0))) == "-0.0"
    nan = from_bytes(FloatType(), to_bytes(FloatType(), float("nan")))
    assert nan != nan


def test_from_bytes_reads_bounds_written_before_a_promotion():
    assert from_bytes(LongType(), to_bytes(IntegerType(), -5)) == -5
    assert from_bytes(DoubleType(), to_bytes(FloatType(), 1.5)) == 1.5


def test_boolean_any_non_zero_byte_is_true():
    assert from_bytes(BooleanType(), b"\x07") is True


@pytest.mark.parametrize(("t", "value"), [
    (IntegerType(), 2**31),
    (FixedType(3), b"\x00"),
    (DecimalType(3, 2), Decimal("10.00")),
    (DecimalType(9, 2), Decimal("1.234")),
    (FloatType(), 1e39),
    (StructType(()), 1),
])
def test_to_bytes_refuses_values_that_do_not_fit(t, value):
    with pytest.raises(ValidationError, match="^Cannot (serialize|use)"):
        to_bytes(t, value)


def test_from_bytes_refuses_wrong_lengths():
    with pytest.raises(ValidationError, match="Cannot read"):
        from_bytes(IntegerType(), b"\x01\x02")
    with pytest.raises(ValidationError, match="Cannot read"):
        from_bytes(FixedType(4), b"\x01")
    with pytest.raises(ValidationError, match="Cannot read"):
        from_bytes(UUIDType(), b"\x01")


# (type, canonical value, JSON single value as Java writes it)
JSON_VALUES = [
    (BooleanType(), True, True),
    (IntegerType(), -5, -5),
    (LongType(), 2**62, 2**62),
    (FloatType(), value_from_python(FloatType(), 0.1), 0.1),
    (DoubleType(), 1.0, 1.0),
    (DecimalType(9, 2), Decimal("14.20"), "14.20"),
    (DecimalType(9, 2), Decimal("0.00"), "0.00"),
    (DecimalType(38, 10), Decimal("1E-10"), "0.0000000001"),
    (DateType(), 17486, "2017-11-16"),
    (DateType(), 2932897, "+10000-01-01"),
    (DateType(), -719529, "-0001-12-31"),
    (TimeType(), 81068100000, "22:31:08.1"),
    (TimeType(), 81068000000, "22:31:08"),
    (TimeType(), 81060000000, "22:31:00"),
    (TimeType(), 1, "00:00:00.000001"),
    (TimestampType(), 1510871468100000, "2017-11-16T22:31:08.1"),
    (TimestampType(), -62167219200000000, "0000-01-01T00:00:00"),
    (TimestampType(), 253402300800000000, "+10000-01-01T00:00:00"),
    (TimestamptzType(), 1510871468000000, "2017-11-16T22:31:08+00:00"),
    (TimestamptzType(), -1, "1969-12-31T23:59:59.999999+00:00"),
    (StringType(), "iceberg", "iceberg"),
    (UUIDType(), UUID, "f79c3e09-677c-4bbd-a479-3f349cb785e7"),
    (FixedType(3), b"\x00\xff\x10", "00FF10"),
    (BinaryType(), b"\x00\xff\x10", "00FF10"),
]


@pytest.mark.parametrize(("t", "value", "json_value"), JSON_VALUES, ids=[f"{r[0]}-{r[2]}" for r in JSON_VALUES])
def test_json_single_value_round_trip(t, value, json_value):
    assert value_to_json(t, value) == json_value
    assert value_from_json(t, json_value) == value


def test_json_null_and_lenient_reading():
    assert value_to_json(LongType(), None) is None
    assert value_from_json(LongType(), None) is None
    assert value_from_json(BinaryType(), "00ff10") == b"\x00\xff\x10"
    assert value_from_json(TimestamptzType(), "2017-11-16T14:31:08-08:00") == 1510871468000000
    assert value_from_json(TimestamptzType(), "2017-11-16T22:31:08Z") == 1510871468000000
    assert value_from_json(DecimalType(9, 2), "14.2") == Decimal("14.20")


@pytest.mark.parametrize(("t", "json_value"), [
    (BooleanType(), "true"),
    (IntegerType(), 1.5),
    (IntegerType(), 2**31),
    (LongType(), True),
    (DateType(), "2017-02-30"),
    (DateType(), 17486),
    (TimeType(), "25:00:00"),
    (TimestampType(), "2017-11-16T22:31:08+01:00"),
    (FixedType(2), "00FF10"),
    (BinaryType(), "zz"),
    (UUIDType(), "not-a-uuid"),
    (DecimalType(9, 2), "1.234"),
])
def test_json_refuses_bad_values(t, json_value):
    with pytest.raises(ValidationError, match="^Cannot"):
        value_from_json(t, json_value)


def test_value_from_python_dates_and_times():
    assert value_from_python(DateType(), dt.date(2017, 11, 16)) == 17486
    assert value_from_python(DateType(), "1969-12-31") == -1
    assert value_from_python(DateType(), 5) == 5
    assert value_from_python(TimeType(), dt.time(22, 31, 8)) == 81068000000
    assert value_from_python(TimeType(), "22:31:08.5") == 81068500000
    assert value_from_python(TimestampType(), dt.datetime(2017, 11, 16, 22, 31, 8)) == 1510871468000000
    assert value_from_python(TimestampType(), dt.datetime(1969, 12, 31, 23, 59, 59, 999999)) == -1
    assert value_from_python(TimestampType(), dt.date(1970, 1, 2)) == 86_400_000_000
    assert value_from_python(TimestampType(), "2017-11-16 22:31:08") == 1510871468000000
    assert value_from_python(TimestampType(), "2017-11-16") == 1510790400000000
    pst = dt.timezone(dt.timedelta(hours=-8))
    assert value_from_python(TimestamptzType(), dt.datetime(2017, 11, 16, 14, 31, 8, tzinfo=pst)) == 1510871468000000
    assert value_from_python(TimestamptzType(), dt.datetime(2017, 11, 16, 22, 31, 8)) == 1510871468000000
    assert value_from_python(TimestamptzType(), "2017-11-16T14:31:08-08:00") == 1510871468000000


def test_value_from_python_numbers_and_bytes():
    assert value_from_python(DecimalType(9, 2), Decimal("14.2")) == Decimal("14.20")
    assert value_from_python(DecimalType(9, 2), Decimal("14.2")).as_tuple().exponent == -2
    assert value_from_python(DecimalType(9, 2), 3) == Decimal("3.00")
    assert value_from_python(DecimalType(9, 2), 0.1) == Decimal("0.10")
    assert value_from_python(DecimalType(9, 2), "-0.5") == Decimal("-0.50")
    assert value_from_python(DecimalType(38, 38), Decimal("0." + "1" * 38)) == Decimal("0." + "1" * 38)
    assert value_from_python(DoubleType(), 3) == 3.0
    assert value_from_python(FloatType(), 0.1) == 0.10000000149011612
    assert value_from_python(UUIDType(), str(UUID)) == UUID
    assert value_from_python(UUIDType(), UUID.bytes) == UUID
    assert value_from_python(FixedType(2), bytearray(b"ab")) == b"ab"
    assert value_from_python(BinaryType(), memoryview(b"ab")) == b"ab"
    assert value_from_python(LongType(), None) is None


@pytest.mark.parametrize(("t", "value"), [
    (IntegerType(), True),
    (IntegerType(), 2**31),
    (LongType(), 1.0),
    (LongType(), "1"),
    (BooleanType(), 1),
    (DecimalType(9, 2), Decimal("1.234")),
    (DecimalType(3, 0), 1000),
    (DecimalType(9, 2), Decimal("NaN")),
    (DateType(), dt.datetime(2017, 1, 1)),
    (TimeType(), 86_400_000_000),
    (TimestampType(), dt.datetime(2017, 1, 1, tzinfo=dt.timezone.utc)),
    (TimestampType(), "2017-01-01T00:00:00Z"),
    (StringType(), b"bytes"),
    (FixedType(3), b"ab"),
    (BinaryType(), "text"),
    (UUIDType(), "nope"),
    (FloatType(), 1e39),
    (StructType(()), 1),
])
def test_value_from_python_refuses_mismatches(t, value):
    with pytest.raises(ValidationError, match="^Cannot"):
        value_from_python(t, value)


def test_calendar_arithmetic_matches_datetime_and_extends_beyond_it():
    epoch = dt.date(1970, 1, 1)
    for days in list(range(-719_162, 2_932_897, 997)) + [-719_162, 2_932_896]:
        d = epoch + dt.timedelta(days=days)
        assert civil_from_days(days) == (d.year, d.month, d.day)
        assert days_from_civil(d.year, d.month, d.day) == days
    assert civil_from_days(-719_529) == (-1, 12, 31)
    assert days_from_civil(*civil_from_days(-(2**31))) == -(2**31)


def test_truncate_string_bounds_count_code_points():
    assert truncate_lower_bound(StringType(), "a😀bcd", 3) == "a😀b"
    assert truncate_upper_bound(StringType(), "a😀bcd", 3) == "a😀c"
    assert truncate_upper_bound(StringType(), "abc", 3) == "abc"
    assert truncate_lower_bound(StringType(), "abc", 16) == "abc"
    # the last code point cannot be incremented: the one before it is
    assert truncate_upper_bound(StringType(), "a\U0010ffff\U0010ffffz", 3) == "b"
    assert truncate_upper_bound(StringType(), "\U0010ffff\U0010ffffz", 2) is None
    # never a lone surrogate
    assert truncate_upper_bound(StringType(), "\ud7ffz", 1) == "\ue000"
    assert truncate_upper_bound(StringType(), None) is None


def test_truncate_binary_bounds():
    assert truncate_lower_bound(BinaryType(), b"\x01\x02\x03", 2) == b"\x01\x02"
    assert truncate_upper_bound(BinaryType(), b"\x01\x02\x03", 2) == b"\x01\x03"
    assert truncate_upper_bound(BinaryType(), b"\x01\xff\x03", 2) == b"\x02"
    assert truncate_upper_bound(BinaryType(), b"\xff\xff\x03", 2) is None
    assert truncate_upper_bound(BinaryType(), b"\xff\xff", 2) == b"\xff\xff"
    assert truncate_upper_bound(BinaryType(), b"x" * 20) == b"x" * 15 + b"y"


def test_truncate_bounds_leave_other_types_alone():
    assert truncate_lower_bound(LongType(), 10**18, 2) == 10**18
    assert truncate_upper_bound(DecimalType(9, 2), Decimal("1.00"), 1) == Decimal("1.00")


# (type, canonical nanoseconds, JSON single value); Iceberg Java's own forms are compared in
# tests/integration/test_v3_types.py
NANO_JSON = [
    (TimestampNsType(), 1_510_871_468_123_456_789, "2017-11-16T22:31:08.123456789"),
    (TimestampNsType(), 1_510_871_468_100_000_000, "2017-11-16T22:31:08.1"),
    (TimestampNsType(), 0, "1970-01-01T00:00:00"),
    (TimestamptzNsType(), -1, "1969-12-31T23:59:59.999999999+00:00"),
    (TimestamptzNsType(), 5, "1970-01-01T00:00:00.000000005+00:00"),
]


@pytest.mark.parametrize(("t", "value", "json_value"), NANO_JSON, ids=[r[2] for r in NANO_JSON])
def test_nanosecond_timestamps_single_values(t, value, json_value):
    assert value_to_json(t, value) == json_value
    assert value_from_json(t, json_value) == value
    assert from_bytes(t, to_bytes(t, value)) == value
    assert to_bytes(t, value) == value.to_bytes(8, "little", signed=True)


def test_nanosecond_timestamps_from_python_values():
    assert value_from_python(TimestampNsType(), dt.datetime(2017, 11, 16, 22, 31, 8, 123456)) == \
        1_510_871_468_123_456_000
    assert value_from_python(TimestamptzNsType(), "2017-11-16T23:31:08.123456789+01:00") == 1_510_871_468_123_456_789
    assert value_from_python(TimestampNsType(), dt.date(1970, 1, 2)) == 86_400 * 10**9
    pandas = pytest.importorskip("pandas")
    assert value_from_python(TimestampNsType(), pandas.Timestamp(1_510_871_468_123_456_789)) == 1_510_871_468_123_456_789
    with pytest.raises(ValidationError, match="has a zone offset"):
        value_from_python(TimestampNsType(), "2017-11-16T22:31:08.123456789+01:00")
    with pytest.raises(ValidationError, match="use timestamptz_ns"):
        value_from_python(TimestampNsType(), dt.datetime(2017, 1, 1, tzinfo=dt.timezone.utc))
    with pytest.raises(ValidationError, match="Cannot parse timestamp"):
        value_from_python(TimestampNsType(), "2017-11-16T22:31:08.1234567891")
    # microsecond timestamps still refuse nanoseconds
    with pytest.raises(ValidationError):
        value_from_python(TimestampType(), "2017-11-16T22:31:08.123456789")
