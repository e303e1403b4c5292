"""Shared table builders and row normalisers for the reader integration tests (Spark and PyIceberg).

Layer: tests (imports engine's public API, pyarrow, attrs, pytest and the standard library; writes icelog
warehouses under folders pytest hands in; imports no Spark and no PyIceberg).

Every table has a required ``id int`` column, unique per row, and its rows are known in Python, so a reader's
result is compared row by row after :func:`normalise_rows` has brought both sides to one representation::

    built = build_warehouse(tmp_path / "wh", spark_cases())
    t = built["identity_int"]
    expected = expected_rows(t)                       # the rows of the current snapshot, normalised
    assert normalise_rows(spark_dicts, t.schema) == expected

A :class:`Case` names its table, its rows, its partition terms and format version, how many appends deliver
the rows (time travel reads each snapshot) and the filters a reader must answer exactly (they exercise the
partition values and column bounds icelog writes, which readers use to prune).

:func:`shared_warehouse` builds every case once per test run for both reader modules, and
:data:`KNOWN_FAILURES` lists the tests that fail for a known reason (an icelog bug or a reader's), applied as
strict xfails by :func:`case_params` / :func:`filter_params`.
"""

from __future__ import annotations

import datetime as dt
import math
import struct
import traceback
import uuid
from collections.abc import Iterable
from decimal import Decimal
from pathlib import Path
from typing import Any

import attrs
import pyarrow as pa
import pytest

UTC = dt.timezone.utc
NAMESPACE = "db"

# -- values ---------------------------------------------------------------------------------------------------------


@attrs.frozen
class Filter:
    """``column op value``: op is ``=``, ``<`` or ``is null``; ``sql`` is the Spark SQL literal of ``value``."""

    column: str
    op: str
    value: Any = None
    sql: str = ""

    @property
    def spark_sql(self) -> str:
        if self.op == "is null":
            return f"{self.column} IS NULL"
        return f"{self.column} {self.op} {self.sql}"

    def matches(self, row: dict[str, Any]) -> bool:
        v = row[self.column]
        if self.op == "is null":
            return v is None
        if v is None:
            return False
        if self.op == "=":
            return v == self.value
        if self.op == "<":
            return v < self.value
        raise AssertionError(f"unknown filter op {self.op!r}")

    def __str__(self) -> str:
        return self.spark_sql


@attrs.frozen
class ValueSet:
    """Values of one Iceberg type as Python input (None included), and literals for an `=` and a `<` filter."""

    name: str
    arrow_type: pa.DataType
    values: tuple[Any, ...]
    eq: tuple[str, Any] | None = None
    lt: tuple[str, Any] | None = None
    spark: bool = True

    def filters(self, column: str = "v") -> tuple[Filter, ...]:
        out = []
        if self.eq is not None:
            out.append(Filter(column, "=", self.eq[1], self.eq[0]))
        if self.lt is not None:
            out.append(Filter(column, "<", self.lt[1], self.lt[0]))
        out.append(Filter(column, "is null"))
        return tuple(out)


def _ts(*args: int, tz: dt.tzinfo | None = None) -> dt.datetime:
    return dt.datetime(*args, tzinfo=tz)


_TIMESTAMPS = (
    (1900, 1, 1, 0, 0, 0),
    (1969, 12, 31, 12, 0, 0),
    (1969, 12, 31, 23, 0, 0),
    (1969, 12, 31, 23, 59, 59, 999999),
    (1970, 1, 1, 0, 0, 0),
    (1970, 1, 1, 0, 59, 59),
    (2024, 1, 2, 10, 0, 0),
    (2024, 1, 2, 10, 30, 0, 123456),
    (2024, 1, 2, 11, 0, 0),
    (2024, 3, 1, 0, 0, 0),
)

VALUE_SETS: dict[str, ValueSet] = {
    v.name: v
    for v in (
        ValueSet("int", pa.int32(), (-1000, -17, -5, -1, 0, 1, 3, 4, 15, 16, 100, 2_147_483_647, None),
                 eq=("15", 15), lt=("-3", -3)),
        ValueSet("long", pa.int64(),
                 (-(10**12), -123_456_789_012, -7, -1, 0, 1, 9, 10, 2**40, 10**15, 2**63 - 1, None),
                 eq=("1099511627776", 2**40), lt=("0", 0)),
        ValueSet("decimal", pa.decimal128(9, 2),
                 tuple(Decimal(x) for x in ("-1234.56", "-10.05", "-1.00", "-0.01", "0.00", "0.01", "1.50",
                                            "9.99", "10.00", "12345.67")) + (None,),
                 eq=("CAST('1.50' AS DECIMAL(9, 2))", Decimal("1.50")),
                 lt=("CAST('-0.01' AS DECIMAL(9, 2))", Decimal("-0.01"))),
        ValueSet("date", pa.date32(),
                 tuple(dt.date(*d) for d in ((1900, 1, 1), (1960, 6, 15), (1969, 12, 31), (1970, 1, 1),
                                             (1970, 1, 2), (1999, 12, 31), (2000, 2, 29), (2024, 1, 2),
                                             (2024, 1, 3), (2024, 7, 15))) + (None,),
                 eq=("DATE '1969-12-31'", dt.date(1969, 12, 31)), lt=("DATE '1970-01-01'", dt.date(1970, 1, 1))),
        ValueSet("timestamp", pa.timestamp("us"), tuple(_ts(*t) for t in _TIMESTAMPS) + (None,),
                 eq=("TIMESTAMP_NTZ '2024-01-02 10:30:00.123456'", _ts(2024, 1, 2, 10, 30, 0, 123456)),
                 lt=("TIMESTAMP_NTZ '1970-01-01 00:00:00'", _ts(1970, 1, 1))),
        ValueSet("timestamptz", pa.timestamp("us", tz="UTC"), tuple(_ts(*t, tz=UTC) for t in _TIMESTAMPS) + (None,),
                 eq=("TIMESTAMP '2024-01-02 10:30:00.123456'", _ts(2024, 1, 2, 10, 30, 0, 123456, tz=UTC)),
                 lt=("TIMESTAMP '1970-01-01 00:00:00'", _ts(1970, 1, 1, tz=UTC))),
        # Partition paths must survive '/', ' ', '%', '=', '+' and non-ASCII text.
        ValueSet("string", pa.string(),
                 ("", "a", "abc", "abcd", "abcdef", "abd", "b", "zzzz", "a/b", "x y", "100%", "k=v", "a+b",
                  "héllo wörld", "日本語テキスト", "🎉 party", None),
                 eq=("'abcd'", "abcd"), lt=("'abd'", "abd")),
        ValueSet("boolean", pa.bool_(), (True, False, None, True, False), eq=("true", True)),
        ValueSet("binary", pa.binary(),
                 (b"", b"\x00", b"\x00\x01", b"\x00\x01\x02\x03", b"\x7f", b"\x80\x00", b"\xff\xfe\xfd", b"abc",
                  None),
                 eq=("X'00010203'", b"\x00\x01\x02\x03"), lt=("X'7F'", b"\x7f")),
        ValueSet("uuid", pa.uuid(),
                 tuple(uuid.UUID(u) for u in ("00000000-0000-0000-0000-000000000000",
                                              "f79c3e09-677c-4bbd-a479-3f349cb785e7",
                                              "0d4f1d3e-8e0b-4bb2-9b0a-6e2c0f7c1d11",
                                              "7fffffff-ffff-ffff-ffff-ffffffffffff",
                                              "80000000-0000-0000-0000-000000000000",
                                              "ffffffff-ffff-ffff-ffff-ffffffffffff")) + (None,),
                 # Spark reads uuid as string: only equality (string order is not Iceberg's uuid order).
                 eq=("'f79c3e09-677c-4bbd-a479-3f349cb785e7'", uuid.UUID("f79c3e09-677c-4bbd-a479-3f349cb785e7"))),
        ValueSet("fixed", pa.binary(4),
                 (b"\x00\x00\x00\x00", b"\x00\x00\x00\x01", b"abcd", b"\x7f\xff\xff\xff", b"\x80\x00\x00\x00",
                  b"\xff\xff\xff\xff", None),
                 eq=("X'61626364'", b"abcd"), lt=("X'80000000'", b"\x80\x00\x00\x00")),
        ValueSet("time", pa.time64("us"),
                 (dt.time(0, 0), dt.time(0, 0, 0, 1), dt.time(9, 15), dt.time(12, 30, 45, 123456),
                  dt.time(23, 59, 59, 999999), None),
                 eq=("", dt.time(12, 30, 45, 123456)), lt=("", dt.time(9, 15)), spark=False),
    )
}

#: Partition transforms and the types each accepts (the identity list is what Spark reads back).
TRANSFORMS: dict[str, tuple[str, tuple[str, ...]]] = {
    "identity": ("v", ("int", "long", "decimal", "date", "timestamp", "timestamptz", "string", "boolean", "binary",
                       "uuid", "fixed", "time")),
    "bucket": ("bucket(8, v)", ("int", "long", "decimal", "date", "timestamp", "timestamptz", "string", "uuid",
                                "fixed", "binary", "time")),
    "truncate": ("truncate({width}, v)", ("int", "long", "decimal", "string", "binary")),
    "year": ("year(v)", ("date", "timestamp", "timestamptz")),
    "month": ("month(v)", ("date", "timestamp", "timestamptz")),
    "day": ("day(v)", ("date", "timestamp", "timestamptz")),
    "hour": ("hour(v)", ("timestamp", "timestamptz")),
}
_TRUNCATE_WIDTH = {"int": 10, "long": 10, "decimal": 100, "string": 3, "binary": 2}

# -- cases ----------------------------------------------------------------------------------------------------------


@attrs.frozen
class Case:
    """One table to build: its rows (``id`` first), partition terms, format version, appends and filters."""

    name: str
    data: pa.Table
    partition_by: tuple[str, ...] = ()
    format_version: int = 2
    appends: int = 1
    filters: tuple[Filter, ...] = ()
    spark: bool = True
    properties: tuple[tuple[str, str], ...] = ()

    def __str__(self) -> str:
        return self.name

    def chunks(self) -> list[pa.Table]:
        """The rows of each append, in order (as even as possible, never empty)."""
        n, k = self.data.num_rows, self.appends
        assert n >= k, f"{self.name}: {n} rows cannot fill {k} appends"
        bounds = [round(i * n / k) for i in range(k + 1)]
        return [self.data.slice(bounds[i], bounds[i + 1] - bounds[i]) for i in range(k)]


def _id_field() -> pa.Field:
    return pa.field("id", pa.int32(), nullable=False)


def transform_case(transform: str, type_name: str) -> Case:
    """The table ``<transform>_<type>``: ``id`` and ``v`` (every value of the type twice), partitioned by the
    transform of ``v``."""
    values = VALUE_SETS[type_name]
    rows = list(values.values) * 2
    data = pa.table(
        [pa.array(range(len(rows)), pa.int32()), pa.array(rows, values.arrow_type)],
        schema=pa.schema([_id_field(), pa.field("v", values.arrow_type)]),
    )
    term = TRANSFORMS[transform][0].format(width=_TRUNCATE_WIDTH.get(type_name))
    return Case(name=f"{transform}_{type_name}", data=data, partition_by=(term,), filters=values.filters(),
                spark=values.spark)


def transform_cases(*, spark: bool) -> list[Case]:
    """Every (transform, accepted type) table; without ``time`` when ``spark``."""
    return [transform_case(transform, type_name)
            for transform, (_, type_names) in TRANSFORMS.items()
            for type_name in type_names
            if VALUE_SETS[type_name].spark or not spark]


def _events(n: int, *, seed: int = 0) -> pa.Table:
    """``n`` event rows: id, category (3 values and null), ts (timestamptz, spanning 1969..2024), amount decimal,
    name string."""
    categories = ("alpha", "beta", "γάμμα", None)
    base = dt.datetime(1969, 12, 30, 22, 0, tzinfo=UTC)
    ids = list(range(seed, seed + n))
    return pa.table(
        {
            "id": pa.array(ids, pa.int32()),
            "category": pa.array([categories[i % 4] for i in ids], pa.string()),
            "ts": pa.array([None if i % 7 == 6 else base + dt.timedelta(hours=13 * i, microseconds=i) for i in ids],
                           pa.timestamp("us", tz="UTC")),
            "amount": pa.array([None if i % 5 == 4 else Decimal(i * 37 - 500) / 100 for i in ids],
                               pa.decimal128(10, 2)),
            "name": pa.array([f"event-{i}" if i % 9 else None for i in ids], pa.string()),
        },
        schema=pa.schema([_id_field(), pa.field("category", pa.string()), pa.field("ts", pa.timestamp("us", "UTC")),
                          pa.field("amount", pa.decimal128(10, 2)), pa.field("name", pa.string())]),
    )


_EVENT_FILTERS = (
    Filter("category", "=", "beta", "'beta'"),
    Filter("ts", "<", _ts(1970, 1, 1, tz=UTC), "TIMESTAMP '1970-01-01 00:00:00'"),
    Filter("amount", "<", Decimal("-1.00"), "CAST('-1.00' AS DECIMAL(10, 2))"),
    Filter("category", "is null"),
)


def append_series_cases(format_version: int) -> list[Case]:
    """The same event rows delivered in 1, 5 and 150 appends (150 > commit.manifest.min-count-to-merge = 100, so
    manifests get merged), partitioned by category and day(ts)."""
    suffix = f"_v{format_version}"
    partition_by = ("category", "day(ts)")
    return [
        Case(name=f"appends_1{suffix}", data=_events(20), partition_by=partition_by, format_version=format_version,
             appends=1, filters=_EVENT_FILTERS),
        Case(name=f"appends_5{suffix}", data=_events(20), partition_by=partition_by, format_version=format_version,
             appends=5, filters=_EVENT_FILTERS),
        Case(name=f"appends_150{suffix}", data=_events(150), partition_by=partition_by,
             format_version=format_version, appends=150, filters=_EVENT_FILTERS),
    ]


def unpartitioned_cases() -> list[Case]:
    return [Case(name=f"unpartitioned_v{v}", data=_events(24, seed=-3), format_version=v, filters=_EVENT_FILTERS)
            for v in (1, 2)]


def multi_transform_case(format_version: int) -> Case:
    """One table partitioned by a transform of each family over different columns."""
    data = pa.table(
        {
            "id": pa.array(range(16), pa.int32()),
            "i": pa.array([-40, -11, -1, 0, 1, 9, 10, 11, 55, None, -40, 0, 10, 99, 1000, -1000], pa.int32()),
            "s": pa.array(["a/b", "abc", "", None, "zz", "日本語", "abc", "x y", "k=v", "a", "b", "c", "d", "e", "f",
                           "g"], pa.string()),
            "dec": pa.array([Decimal(x) / 100 for x in range(-800, 800, 100)], pa.decimal128(9, 2)),
            "d": pa.array([dt.date(1969, 12, 31) + dt.timedelta(days=45 * k) if k % 6 else None for k in range(-8, 8)],
                          pa.date32()),
            "ts": pa.array([_ts(1969, 12, 31, 22) + dt.timedelta(minutes=47 * k) for k in range(16)],
                           pa.timestamp("us")),
            "tstz": pa.array([_ts(1968, 6, 1, tz=UTC) + dt.timedelta(days=170 * k) if k != 5 else None
                              for k in range(16)], pa.timestamp("us", "UTC")),
        },
        schema=pa.schema([_id_field(), pa.field("i", pa.int32()), pa.field("s", pa.string()),
                          pa.field("dec", pa.decimal128(9, 2)), pa.field("d", pa.date32()),
                          pa.field("ts", pa.timestamp("us")), pa.field("tstz", pa.timestamp("us", "UTC"))]),
    )
    return Case(
        name=f"multi_v{format_version}", data=data, format_version=format_version,
        partition_by=("i", "bucket(4, s)", "truncate(200, dec)", "month(d)", "hour(ts)", "year(tstz)"),
        filters=(Filter("i", "<", 0, "0"), Filter("s", "=", "abc", "'abc'"),
                 Filter("dec", "<", Decimal("-2.50"), "CAST('-2.50' AS DECIMAL(9, 2))"),
                 Filter("d", "<", dt.date(1970, 1, 1), "DATE '1970-01-01'"),
                 Filter("ts", "<", _ts(1970, 1, 1, 2), "TIMESTAMP_NTZ '1970-01-01 02:00:00'"),
                 Filter("tstz", "<", _ts(1969, 1, 1, tz=UTC), "TIMESTAMP '1969-01-01 00:00:00'")),
    )


def all_types_case(format_version: int, *, with_time: bool = False) -> Case:
    """Every type Iceberg has (time only ``with_time``: Spark has no TIME), with nulls, NaN, infinities, -0.0,
    unicode, big decimals, and nested struct, list and map values."""
    inner = pa.struct([pa.field("x", pa.float64()), pa.field("y", pa.date32())])
    st = pa.struct([pa.field("a", pa.int32()), pa.field("b", pa.string()), pa.field("inner", inner)])
    kv = pa.struct([pa.field("k", pa.string()), pa.field("v", pa.int64())])
    nan, inf = float("nan"), float("inf")
    columns: list[tuple[pa.Field, list[Any]]] = [
        (_id_field(), [0, 1, 2, 3, 4, 5, 6]),
        (pa.field("b", pa.bool_()), [True, None, False, True, False, None, True]),
        (pa.field("i", pa.int32()), [1, None, -2_147_483_648, 2_147_483_647, 0, -1, 42]),
        (pa.field("l", pa.int64()), [1, None, -(2**63), 2**63 - 1, 0, -1, 10**12]),
        (pa.field("f", pa.float32()), [1.5, None, nan, inf, -inf, -0.0, 3.25]),
        (pa.field("d", pa.float64()), [0.1, None, nan, -inf, 1e308, -0.0, -5e-324]),
        (pa.field("dec_small", pa.decimal128(9, 2)),
         [Decimal("1.10"), None, Decimal("-9999999.99"), Decimal("9999999.99"), Decimal("0.00"), Decimal("-0.01"),
          Decimal("42.42")]),
        (pa.field("dec_mid", pa.decimal128(18, 6)),
         [Decimal("123456789012.123456"), None, Decimal("-999999999999.999999"), Decimal("0.000001"),
          Decimal("0.000000"), Decimal("-1.5"), Decimal("7")]),
        (pa.field("dec_big", pa.decimal128(38, 10)),
         [Decimal("1234567890123456789012345678.0123456789"), None,
          Decimal("-9999999999999999999999999999.9999999999"), Decimal("0.0000000001"), Decimal("0"),
          Decimal("-1"), Decimal("3.1415926535")]),
        (pa.field("dt", pa.date32()),
         [dt.date(2024, 1, 2), None, dt.date(1900, 1, 1), dt.date(9999, 12, 31), dt.date(1970, 1, 1),
          dt.date(1969, 12, 31), dt.date(2000, 2, 29)]),
        (pa.field("ts", pa.timestamp("us")),
         [_ts(2024, 1, 2, 3, 4, 5, 6), None, _ts(1900, 1, 1), _ts(2262, 4, 11, 23, 47, 16, 854775), _ts(1970, 1, 1),
          _ts(1969, 12, 31, 23, 59, 59, 999999), _ts(2000, 2, 29, 12)]),
        (pa.field("tstz", pa.timestamp("us", "UTC")),
         [_ts(2024, 1, 2, 3, 4, 5, 6, tz=UTC), None, _ts(1900, 1, 1, tz=UTC), _ts(2262, 4, 11, tz=UTC),
          _ts(1970, 1, 1, tz=UTC), _ts(1969, 12, 31, 23, 59, 59, 999999, tz=UTC), _ts(2000, 2, 29, 12, tz=UTC)]),
        (pa.field("s", pa.string()),
         ["hello", None, "", "日本語テキスト 🎉", "a\x00b", "Ωmega ünïcødé", "x" * 40]),
        (pa.field("u", pa.uuid()),
         [uuid.UUID("f79c3e09-677c-4bbd-a479-3f349cb785e7"), None, uuid.UUID(int=0), uuid.UUID(int=2**128 - 1),
          uuid.UUID("12345678-1234-5678-1234-567812345678"), uuid.UUID("80000000-0000-0000-0000-000000000000"),
          uuid.UUID("7fffffff-ffff-ffff-ffff-ffffffffffff")]),
        (pa.field("fx", pa.binary(8)),
         [b"abcdefgh", None, b"\x00" * 8, b"\xff" * 8, b"\x80" + b"\x00" * 7, b"12345678", b"\x7f" * 8]),
        (pa.field("bin", pa.binary()),
         [b"\x00\x01\x02", None, b"", b"\xff" * 20, b"abc", b"\x80", bytes(range(256))]),
        (pa.field("st", st),
         [{"a": 1, "b": "one", "inner": {"x": 1.5, "y": dt.date(2024, 1, 2)}}, None,
          {"a": None, "b": None, "inner": None}, {"a": -7, "b": "日本", "inner": {"x": nan, "y": None}},
          {"a": 0, "b": "", "inner": {"x": None, "y": dt.date(1960, 1, 1)}}, None,
          {"a": 2, "b": "two", "inner": {"x": -0.0, "y": dt.date(1970, 1, 1)}}]),
        (pa.field("lst", pa.list_(pa.string())),
         [["a", "b"], None, [], ["x", None, "ü"], [None], ["only"], ["p", "q", "r", "s"]]),
        (pa.field("lst_st", pa.list_(kv)),
         [[{"k": "a", "v": 1}], None, [], [{"k": None, "v": None}, None], [{"k": "z", "v": -(2**63)}], None,
          [{"k": "b", "v": 2}, {"k": "c", "v": 3}]]),
        (pa.field("mp", pa.map_(pa.string(), pa.int32())),
         [[("a", 1), ("b", 2)], None, [], [("ключ", None)], [("x", -1)], [("", 0)], [("k", 7), ("j", 8)]]),
        (pa.field("mp_nested", pa.map_(pa.int32(), pa.list_(pa.float64()))),
         [[(1, [1.0, 2.0])], None, [], [(-5, None), (6, [])], [(0, [nan, None])], [(2, [-0.0])], None]),
    ]
    if with_time:
        columns.append((pa.field("t", pa.time64("us")),
                        [dt.time(12, 30), None, dt.time(0, 0), dt.time(23, 59, 59, 999999), dt.time(0, 0, 0, 1),
                         dt.time(6), dt.time(18, 45, 1, 500)]))
        columns.append((pa.field("t_list", pa.list_(pa.time64("us"))),
                        [[dt.time(1), None], None, [], [dt.time(2, 3)], None, [dt.time(0)], [dt.time(23)]]))
    schema = pa.schema([f for f, _ in columns])
    data = pa.table([pa.array(values, f.type) for f, values in columns], schema=schema)
    filters = (Filter("i", "<", 0, "0"), Filter("s", "=", "hello", "'hello'"),
               Filter("dec_big", "<", Decimal("0.0000000000"), "CAST('0' AS DECIMAL(38, 10))"),
               Filter("ts", "<", _ts(1970, 1, 1), "TIMESTAMP_NTZ '1970-01-01 00:00:00'"),
               Filter("u", "=", uuid.UUID(int=0), "'00000000-0000-0000-0000-000000000000'"),
               Filter("fx", "=", b"12345678", "X'3132333435363738'"),
               Filter("b", "is null"))
    suffix = "_time" if with_time else ""
    return Case(name=f"all_types_v{format_version}{suffix}", data=data, format_version=format_version,
                partition_by=("bucket(4, s)",) if format_version == 2 else (), filters=filters, spark=not with_time)


def spark_cases() -> list[Case]:
    """Every table the Spark tests read (no ``time`` anywhere)."""
    return (unpartitioned_cases() + transform_cases(spark=True) + [multi_transform_case(1), multi_transform_case(2)]
            + [all_types_case(1), all_types_case(2)] + append_series_cases(1) + append_series_cases(2))


def pyiceberg_cases() -> list[Case]:
    """The Spark tables, plus ``time`` partitioned by identity and bucket, and an all-types table with time."""
    return (spark_cases() + [c for c in transform_cases(spark=False) if not c.spark]
            + [all_types_case(2, with_time=True)])


# -- building -------------------------------------------------------------------------------------------------------


@attrs.frozen(repr=False)
class Built:
    """A table icelog wrote: where it is, its snapshots (id, rows visible) oldest first, and its case."""

    case: Case
    warehouse: Path
    location: str
    metadata_location: str
    snapshots: tuple[tuple[int, int], ...]
    sequence_numbers: tuple[int, ...] = ()
    error: str | None = None

    def require(self) -> Built:
        """This table, or a test failure carrying icelog's error when building it failed."""
        if self.error is not None:
            raise AssertionError(f"icelog could not build table {self.case.name}: {self.error}")
        return self

    @property
    def name(self) -> str:
        return self.case.name

    @property
    def identifier(self) -> str:
        return f"{NAMESPACE}.{self.case.name}"

    @property
    def schema(self) -> pa.Schema:
        return self.case.data.schema

    def __str__(self) -> str:
        return self.case.name

    def __repr__(self) -> str:
        return f"Built({self.case.name!r})"


def build_warehouse(warehouse: Path, cases: Iterable[Case]) -> dict[str, Built]:
    """Create every case's table in one icelog catalog on ``warehouse`` (namespace ``db``), append its rows,
    close the catalog, and describe what was written.

    A case whose create or append raises is recorded with ``error`` set (the others are still built), so the
    tests of that table fail with icelog's error and the rest of the suite still runs.
    """
    from engine import Catalog

    built: dict[str, Built] = {}
    cat = Catalog.open(warehouse)
    try:
        cat.create_namespace(NAMESPACE)
        for case in cases:
            snapshots: list[tuple[int, int]] = []
            sequence_numbers: list[int] = []
            error = None
            location = metadata_location = ""
            try:
                table = cat.create_table(f"{NAMESPACE}.{case.name}", schema=case.data.schema,
                                         partition_by=list(case.partition_by), properties=dict(case.properties),
                                         format_version=case.format_version)
                rows = 0
                for chunk in case.chunks():
                    snapshot = table.append(chunk)
                    assert snapshot is not None, f"append of {chunk.num_rows} rows made no snapshot"
                    rows += chunk.num_rows
                    snapshots.append((snapshot.snapshot_id, rows))
                    sequence_numbers.append(snapshot.sequence_number)
                location, metadata_location = table.location, table.metadata_location
            except Exception as e:  # noqa: BLE001 - reported by every test of this table
                error = f"{type(e).__name__}: {e}\n{traceback.format_exc()}"
            built[case.name] = Built(case=case, warehouse=warehouse, location=location,
                                     metadata_location=metadata_location, snapshots=tuple(snapshots),
                                     sequence_numbers=tuple(sequence_numbers), error=error)
    finally:
        cat.close()
    return built


# -- expected rows and normalisation --------------------------------------------------------------------------------


def expected_rows(built: Built, rows: int | None = None, where: Filter | None = None) -> list[tuple[Any, ...]]:
    """The first ``rows`` rows written (all by default), those matching ``where``, normalised and sorted by id."""
    data = built.case.data if rows is None else built.case.data.slice(0, rows)
    dicts = data.to_pylist()
    if where is not None:
        dicts = [r for r in dicts if where.matches(r)]
    return normalise_rows(dicts, built.schema)


def expected_ids(built: Built, where: Filter, rows: int | None = None) -> list[int]:
    data = built.case.data if rows is None else built.case.data.slice(0, rows)
    return sorted(r["id"] for r in data.to_pylist() if where.matches(r))


def normalise_rows(rows: Iterable[Any], schema: pa.Schema) -> list[tuple[Any, ...]]:
    """Rows (dicts, or Spark Rows) as tuples of normalised values in ``schema``'s column order, sorted by id."""
    out = []
    for row in rows:
        if hasattr(row, "asDict"):
            row = row.asDict()
        missing = [f.name for f in schema if f.name not in row]
        assert not missing, f"columns {missing} missing from a row with columns {sorted(row)}"
        extra = sorted(set(row) - {f.name for f in schema})
        assert not extra, f"unexpected columns {extra}"
        out.append(tuple(normalise_value(row[f.name], f.type) for f in schema))
    return sorted(out, key=lambda r: r[0])


def normalise_value(value: Any, t: pa.DataType) -> Any:
    """One value in a reader-neutral form, guided by the Arrow type it was written as.

    Spark gives naive UTC datetimes for both timestamp kinds, Rows for structs, dicts for maps, bytearray for
    binary and fixed, str for uuid; Arrow gives aware datetimes for timestamptz, dicts for structs, lists of
    pairs for maps, bytes, uuid.UUID. NaN becomes the string "NaN" (NaN != NaN) and -0.0 the string "-0.0".
    """
    if value is None:
        return None
    if isinstance(t, pa.UuidType):
        if isinstance(value, uuid.UUID):
            return str(value)
        if isinstance(value, (bytes, bytearray)):
            return str(uuid.UUID(bytes=bytes(value)))
        return str(uuid.UUID(value))
    if pa.types.is_struct(t):
        if hasattr(value, "asDict"):
            value = value.asDict()
        return tuple((t.field(i).name, normalise_value(value[t.field(i).name], t.field(i).type))
                     for i in range(t.num_fields))
    if pa.types.is_map(t):
        pairs = value.items() if isinstance(value, dict) else value
        return tuple(sorted(((normalise_value(k, t.key_type), normalise_value(v, t.item_type)) for k, v in pairs),
                            key=repr))
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return tuple(normalise_value(v, t.value_type) for v in value)
    if pa.types.is_timestamp(t):
        assert isinstance(value, dt.datetime), f"expected a datetime for {t}, got {value!r}"
        if value.tzinfo is not None:
            value = value.astimezone(UTC).replace(tzinfo=None)
        return value
    if pa.types.is_binary(t) or pa.types.is_fixed_size_binary(t) or pa.types.is_large_binary(t):
        return bytes(value)
    if pa.types.is_floating(t):
        value = float(value)
        if math.isnan(value):
            return "NaN"
        if value == 0.0 and math.copysign(1.0, value) < 0:
            return "-0.0"
        if pa.types.is_float32(t):
            value = struct.unpack("<f", struct.pack("<f", value))[0]
        return value
    if pa.types.is_decimal(t):
        assert isinstance(value, Decimal), f"expected a Decimal for {t}, got {value!r}"
        return value  # Decimal equality ignores trailing zeros (and quantize would need 38 digits of context)
    return value


# -- known failures -------------------------------------------------------------------------------------------------

JAVA_UUID_SIGNED_SUMMARIES = (
    "Iceberg Java 1.10 compares uuids as signed longs (apache/iceberg#14216, fixed by #14500 after 1.10) when it "
    "checks a manifest's partition summary: an identity(uuid) manifest whose values span a sign bit is pruned for "
    "literals past it. icelog writes spec-correct (unsigned) summaries; a workaround would split such manifests by "
    "sign group")
SPARK_UUID_PARTITIONS = (
    "Iceberg Spark 1.10 metadata tables fail on uuid partition values: 'Wrong class, expected "
    "java.lang.CharSequence, but was java.util.UUID' (apache/iceberg#13703)")
PYICEBERG_UUID_PARTITION_FILTER = (
    "PyIceberg 0.12 compares a uuid partition value (uuid.UUID from Avro) with the literal's bytes, never equal, so "
    "it prunes every file of an identity(uuid) table (apache/iceberg#8248)")

#: (reader, test, parameter id) -> why it fails; reader is "spark", "pyiceberg" or "*", test a short test name
#: or "*". Applied as strict xfails (reasons joined): a fixed cause XPASSes, which fails the run until the entry
#: goes.
KNOWN_FAILURES: dict[tuple[str, str, str], str] = {
    ("pyiceberg", "filter", "identity_uuid-v="): PYICEBERG_UUID_PARTITION_FILTER,
    ("spark", "filter", "identity_uuid-v="): JAVA_UUID_SIGNED_SUMMARIES,
    ("spark", "partitions", "identity_uuid"): SPARK_UUID_PARTITIONS,
}


def _marks(reader: str, test: str, param_id: str) -> list[Any]:
    keys = ((reader, test, param_id), ("*", test, param_id), (reader, "*", param_id), ("*", "*", param_id))
    reasons = list(dict.fromkeys(KNOWN_FAILURES[k] for k in keys if k in KNOWN_FAILURES))
    return [pytest.mark.xfail(strict=True, reason=" AND ".join(reasons))] if reasons else []


def case_params(reader: str, test: str, items: Iterable[Case]) -> list[Any]:
    """One pytest param per case (id = table name), known failures marked."""
    return [pytest.param(case, id=case.name, marks=_marks(reader, test, case.name)) for case in items]


def filter_params(reader: str, test: str, items: Iterable[Case]) -> list[Any]:
    """One pytest param (case, filter) per filter of each case (id = "<table>-<column><op>")."""
    out = []
    for case in items:
        for f in case.filters:
            param_id = f"{case.name}-{f.column}{f.op if f.op != 'is null' else ' is null'}"
            out.append(pytest.param(case, f, id=param_id, marks=_marks(reader, test, param_id)))
    return out


# -- one shared warehouse per test run ------------------------------------------------------------------------------

_SHARED: dict[str, dict[str, Built]] = {}


def shared_warehouse(tmp_path_factory: Any) -> dict[str, Built]:
    """Every case of :func:`pyiceberg_cases` (a superset of the Spark cases) built once per test process in a
    pytest temporary folder, and shared read-only by the Spark and PyIceberg modules."""
    if "all" not in _SHARED:
        _SHARED["all"] = build_warehouse(tmp_path_factory.mktemp("icelog-integration") / "warehouse",
                                         pyiceberg_cases())
    return _SHARED["all"]
