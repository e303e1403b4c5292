"""Tests for strict metrics evaluation (metrics_must_match) and for file_must_match / file_might_match, which add
the file's partition: hand-computed tables, then a brute-force check that a file the metrics say must match
holds only matching rows."""

from __future__ import annotations

import random

import pyarrow as pa
import pytest

from engine.errors import CorruptFileError, ValidationError
from engine.model import values
from engine.model.data_file import DataFile
from engine.model.expression_binding import bind
from engine.model.expression_parser import parse_expression
from engine.model.expressions import (
    AlwaysTrue,
    And,
    BooleanExpression,
    EqualTo,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    IsNaN,
    IsNull,
    LessThan,
    LessThanOrEqual,
    Not,
    NotEqualTo,
    NotIn,
    NotNaN,
    NotNull,
    NotStartsWith,
    Or,
    StartsWith,
)
from engine.model.metrics_evaluation import metrics_might_match, metrics_must_match
from engine.model.partition_filters import file_might_match, file_must_match
from engine.model.row_evaluation import evaluate_arrow
from engine.model.partitioning import build_spec
from engine.model.schema import Schema
from engine.model.types import (
    DateType,
    DoubleType,
    IcebergType,
    IntegerType,
    LongType,
    NestedField,
    StringType,
    TimestampType,
)

NAN = float("nan")
SCHEMA = Schema((
    NestedField(field_id=1, name="id", field_type=IntegerType(), required=False),
    NestedField(field_id=2, name="f", field_type=DoubleType(), required=False),
    NestedField(field_id=3, name="s", field_type=StringType(), required=False),
    NestedField(field_id=4, name="r", field_type=IntegerType(), required=True),
    NestedField(field_id=5, name="d", field_type=DateType(), required=False),
    NestedField(field_id=6, name="ts", field_type=TimestampType(), required=False),
))
TYPES: dict[int, IcebergType] = {f.field_id: f.field_type for f in SCHEMA.columns}


def data_file(*, record_count: int = 10, counts: dict | None = None, nulls: dict | None = None,
              nans: dict | None = None, lower: dict | None = None, upper: dict | None = None,
              partition: tuple = ()) -> DataFile:
    def encode(bounds):
        return None if bounds is None else {k: values.to_bytes(TYPES[k], v) for k, v in bounds.items()}

    return DataFile(file_path="/w/data/f.parquet", record_count=record_count, file_size_in_bytes=100,
                    partition=partition, value_counts=counts, null_value_counts=nulls, nan_value_counts=nans,
                    lower_bounds=encode(lower), upper_bounds=encode(upper))


NO_NULLS = data_file(counts={1: 10}, nulls={1: 0}, lower={1: 5}, upper={1: 9})
CONSTANT = data_file(counts={1: 10}, nulls={1: 0}, lower={1: 7}, upper={1: 7})
SOME_NULLS = data_file(counts={1: 10}, nulls={1: 2}, lower={1: 5}, upper={1: 9})
ALL_NULL = data_file(counts={1: 10}, nulls={1: 10})
NO_NULL_COUNTS = data_file(counts={1: 10}, lower={1: 5}, upper={1: 9})
NO_VALUE_COUNTS = data_file(nulls={1: 10})  # the record count stands in for the value count
REQUIRED = data_file(lower={4: 1}, upper={4: 3})
FLOATS = data_file(counts={2: 10}, nulls={2: 0}, nans={2: 0}, lower={2: -1.0}, upper={2: 2.0})
SOME_NANS = data_file(counts={2: 10}, nulls={2: 0}, nans={2: 3}, lower={2: -1.0}, upper={2: 2.0})
ALL_NANS = data_file(counts={2: 10}, nulls={2: 0}, nans={2: 10})
NO_NAN_COUNTS = data_file(counts={2: 10}, nulls={2: 0}, lower={2: -1.0}, upper={2: 2.0})
NULL_FLOATS = data_file(counts={2: 10}, nulls={2: 10})
STRINGS = data_file(counts={3: 10}, nulls={3: 0}, lower={3: "abc"}, upper={3: "abd"})
TRUNCATED = data_file(counts={3: 10}, nulls={3: 0}, lower={3: "ab"}, upper={3: "ac"})  # from 'abxxx'..'abyyy'
DATES = data_file(counts={5: 10}, nulls={5: 0}, lower={5: 100}, upper={5: 102})
EMPTY = data_file(record_count=0)


@pytest.mark.parametrize("where, file, expected", [
    # bounds settle comparisons on a column without nulls
    ("id < 10", NO_NULLS, True),
    ("id < 9", NO_NULLS, False),
    ("id <= 9", NO_NULLS, True),
    ("id > 4", NO_NULLS, True),
    ("id > 5", NO_NULLS, False),
    ("id >= 5", NO_NULLS, True),
    ("id = 5", NO_NULLS, False),
    ("id = 7", CONSTANT, True),
    ("id != 4", NO_NULLS, True),
    ("id != 10", NO_NULLS, True),
    ("id != 7", NO_NULLS, False),
    ("id != 7", CONSTANT, False),
    ("id IN (7, 8)", CONSTANT, True),
    ("id IN (5, 6, 7, 8, 9)", NO_NULLS, True),  # every int in [5, 9] is listed
    ("id IN (5, 6, 7, 8, 10)", NO_NULLS, False),
    ("id IN (5, 9)", NO_NULLS, False),
    ("id NOT IN (1, 10)", NO_NULLS, True),
    ("id NOT IN (1, 7)", NO_NULLS, False),
    ("id IS NOT NULL", NO_NULLS, True),
    ("id IS NULL", NO_NULLS, False),
    ("id BETWEEN 5 AND 9", NO_NULLS, True),
    ("NOT (id < 5)", NO_NULLS, True),
    ("NOT (id < 6)", NO_NULLS, False),
    ("id < 10 AND id > 4", NO_NULLS, True),
    ("id < 10 OR id = 100", NO_NULLS, True),
    ("id < 7 OR id >= 7", NO_NULLS, False),  # true, but no single side is proven: strict evaluation is conservative
    ("true", NO_NULLS, True),
    ("false", NO_NULLS, False),
    # nulls are never selected by a comparison, so a column that may hold them proves none
    ("id < 10", SOME_NULLS, False),
    ("id != 100", SOME_NULLS, False),
    ("id NOT IN (100)", SOME_NULLS, False),
    ("id IS NOT NULL", SOME_NULLS, False),
    ("id IS NULL", SOME_NULLS, False),
    ("id < 10", NO_NULL_COUNTS, False),
    ("id IS NULL", ALL_NULL, True),
    ("id IS NOT NULL", ALL_NULL, False),
    ("id != 1", ALL_NULL, False),
    ("id < 10", ALL_NULL, False),
    ("id IS NULL", NO_VALUE_COUNTS, True),
    ("r < 4", REQUIRED, True),  # a required column has no nulls whatever its counts say
    ("r < 3", REQUIRED, False),
    ("r IS NOT NULL", REQUIRED, True),
    # NaN fails every ordering and equality, and passes != and NOT IN
    ("f < 3", FLOATS, True),
    ("f > -2", FLOATS, True),
    ("f IS NOT NAN", FLOATS, True),
    ("f < 3", SOME_NANS, False),
    ("f = 1", SOME_NANS, False),
    ("f IN (1, 2)", SOME_NANS, False),
    ("f != 5", SOME_NANS, True),
    ("f != 1", SOME_NANS, False),
    ("f NOT IN (5, 6)", SOME_NANS, True),
    ("f IS NOT NAN", SOME_NANS, False),
    ("f IS NAN", SOME_NANS, False),
    ("f IS NAN", ALL_NANS, True),
    ("f != 1", ALL_NANS, True),
    ("f NOT IN (1, 2)", ALL_NANS, True),
    ("f < 1", ALL_NANS, False),
    ("f IS NOT NULL", ALL_NANS, True),
    ("f < 3", NO_NAN_COUNTS, False),  # Java says true here; without NaN counts the file may hold NaN
    ("f != 5", NO_NAN_COUNTS, True),
    ("f IS NOT NAN", NO_NAN_COUNTS, False),
    ("f IS NOT NAN", NULL_FLOATS, True),
    ("f IS NAN", NULL_FLOATS, False),
    # strings: prefixes and truncated bounds
    ("s LIKE 'ab%'", STRINGS, True),
    ("s LIKE 'abc%'", STRINGS, False),
    ("s LIKE '%'", STRINGS, True),
    ("s NOT LIKE 'b%'", STRINGS, True),
    ("s NOT LIKE 'aa%'", STRINGS, True),
    ("s NOT LIKE 'ab%'", STRINGS, False),
    ("s NOT LIKE 'abd%'", STRINGS, False),
    ("s > 'ab'", STRINGS, True),
    ("s < 'abd'", STRINGS, False),
    ("s <= 'abd'", STRINGS, True),
    ("s = 'abc'", STRINGS, False),
    ("s LIKE 'ab%'", TRUNCATED, False),  # the upper bound 'ac' is above every 'ab...' value
    ("s < 'ad'", TRUNCATED, True),
    ("s >= 'ab'", TRUNCATED, True),
    ("s NOT LIKE 'ac%'", TRUNCATED, False),
    # dates are discrete too
    ("d IN ('1970-04-11', '1970-04-12', '1970-04-13')", DATES, True),
    ("d IN ('1970-04-11', '1970-04-13')", DATES, False),
    # an empty file matches anything
    ("id = 12345", EMPTY, True),
    ("false", EMPTY, True),
])
def test_metrics_must_match(where, file, expected):
    assert metrics_must_match(bind(parse_expression(where), SCHEMA), file, SCHEMA) is expected


def test_must_match_binds_unbound_expressions():
    assert metrics_must_match(parse_expression("id < 10"), NO_NULLS, SCHEMA)
    assert metrics_must_match(parse_expression("ID < 10"), NO_NULLS, SCHEMA, case_sensitive=False)
    with pytest.raises(ValidationError, match="ID"):
        metrics_must_match(parse_expression("ID < 10"), NO_NULLS, SCHEMA)


def test_must_match_reads_bounds_written_before_a_promotion():
    schema = Schema((NestedField(field_id=1, name="id", field_type=LongType(), required=False),))
    file = DataFile(file_path="/w/old.parquet", record_count=3, file_size_in_bytes=10, null_value_counts={1: 0},
                    lower_bounds={1: values.to_bytes(IntegerType(), 1)},
                    upper_bounds={1: values.to_bytes(IntegerType(), 2)})
    assert metrics_must_match(parse_expression("id < 3"), file, schema)
    assert not metrics_must_match(parse_expression("id < 2"), file, schema)


def test_must_match_names_the_file_with_a_bad_bound():
    file = DataFile(file_path="/w/bad.parquet", record_count=3, file_size_in_bytes=10, null_value_counts={3: 0},
                    lower_bounds={3: b"\xff\xfe"}, upper_bounds={3: b"\xff\xfe"})
    with pytest.raises(CorruptFileError) as e:
        metrics_must_match(parse_expression("s < 'a'"), file, SCHEMA)
    assert e.value.path == "/w/bad.parquet"


# -- partition and metrics together ------------------------------------------------------------------------------

DAY_SPEC = build_spec(SCHEMA, ["day(ts)"])
TS_2024_01_02 = values.parse_timestamp("2024-01-02T00:00:00", with_zone=False)


def test_file_must_match_combines_partition_and_metrics():
    file = data_file(counts={1: 10}, nulls={1: 0}, lower={1: 5}, upper={1: 9}, partition=(19724,))
    expr = parse_expression("ts >= '2024-01-02' AND id > 4")
    assert not metrics_must_match(expr, file, SCHEMA)  # no metrics on ts
    assert file_must_match(expr, file, DAY_SPEC, SCHEMA)  # the partition proves ts, the metrics prove id
    assert not file_must_match(parse_expression("ts >= '2024-01-02' AND id > 5"), file, DAY_SPEC, SCHEMA)
    assert not file_must_match(expr, data_file(counts={1: 10}, nulls={1: 0}, lower={1: 5}, upper={1: 9},
                                                partition=(19723,)), DAY_SPEC, SCHEMA)
    assert file_must_match(parse_expression("ts < '2024-01-03' OR id = 1000"), file, DAY_SPEC, SCHEMA)


def test_file_might_match_combines_partition_and_metrics():
    file = data_file(counts={1: 10}, nulls={1: 0}, lower={1: 5}, upper={1: 9}, partition=(19724,))
    assert file_might_match(parse_expression("ts >= '2024-01-02T12:00:00' AND id = 7"), file, DAY_SPEC, SCHEMA)
    assert not file_might_match(parse_expression("ts < '2024-01-02' AND id = 7"), file, DAY_SPEC, SCHEMA)
    assert not file_might_match(parse_expression("ts >= '2024-01-02' AND id = 70"), file, DAY_SPEC, SCHEMA)
    assert not file_might_match(parse_expression("ts IS NULL"), file, DAY_SPEC, SCHEMA)


# -- brute force -------------------------------------------------------------------------------------------------


def metrics_of(rows: list[dict], rng: random.Random) -> DataFile:
    """Exact metrics of the rows, with string bounds sometimes truncated and some counts left out."""
    counts, nulls, nans, lower, upper = {}, {}, {}, {}, {}
    for fid, name in ((1, "id"), (2, "f"), (3, "s"), (4, "r")):
        column = [r[name] for r in rows]
        t = TYPES[fid]
        counts[fid] = len(column)
        nulls[fid] = sum(v is None for v in column)
        if fid == 2:
            nans[fid] = sum(v is not None and v != v for v in column)
        present = [v for v in column if v is not None and v == v]
        if present:
            lo, hi = min(present), max(present)
            if fid == 3 and rng.random() < 0.5:
                lo, hi = values.truncate_lower_bound(t, lo, 2), values.truncate_upper_bound(t, hi, 2)
            lower[fid] = values.to_bytes(t, lo)
            if hi is not None:
                upper[fid] = values.to_bytes(t, hi)
    for counts_map in (nulls, nans, counts):
        if rng.random() < 0.15:
            counts_map.pop(rng.choice([1, 2, 3, 4]), None)
    return DataFile(file_path="/w/f.parquet", record_count=len(rows), file_size_in_bytes=1, value_counts=counts,
                    null_value_counts=nulls, nan_value_counts=nans, lower_bounds=lower, upper_bounds=upper)


def random_rows(rng: random.Random) -> list[dict]:
    null_rate = rng.choice([0.0, 0.0, 0.3, 1.0])
    nan_rate = rng.choice([0.0, 0.0, 0.3, 1.0])
    base = rng.randint(-5, 5)
    rows = []
    for _ in range(rng.randint(1, 6)):
        f = None if rng.random() < null_rate else (NAN if rng.random() < nan_rate else rng.choice([-1.5, 0.0, 2.0]))
        rows.append({
            "id": None if rng.random() < null_rate else base + rng.randint(0, 3),
            "f": f,
            "s": None if rng.random() < null_rate else rng.choice(["", "a", "ab", "abc", "abcd", "abd", "b"]),
            "r": base + rng.randint(0, 2),
        })
    return rows


def random_expr(rng: random.Random, depth: int = 0) -> BooleanExpression:
    if depth < 2 and rng.random() < 0.35:
        kind = rng.choice([And, Or, Not])
        if kind is Not:
            return Not(random_expr(rng, depth + 1))
        return kind(random_expr(rng, depth + 1), random_expr(rng, depth + 1))
    column = rng.choice(["id", "f", "s", "r"])
    if column == "s":
        v = rng.choice(["", "a", "ab", "abc", "abcd", "abd", "b", "c"])
    elif column == "f":
        v = rng.choice([-2.0, -1.5, 0.0, 1.0, 2.0, 3.0])
    else:
        v = rng.randint(-6, 9)
    ops = [LessThan, LessThanOrEqual, GreaterThan, GreaterThanOrEqual, EqualTo, NotEqualTo, In, NotIn]
    ops += [IsNull, NotNull] if column != "r" else []
    ops += [StartsWith, NotStartsWith] if column == "s" else []
    ops += [IsNaN, NotNaN] if column == "f" else []
    op = rng.choice(ops)
    if op in (IsNull, NotNull, IsNaN, NotNaN):
        return op(column)
    if op in (In, NotIn):
        extra = {v + 1, v + 2} if column in ("id", "r") else ({v + 0.5} if column == "f" else {v + "x"})
        return op(column, tuple({v} | set(rng.sample(sorted(extra), rng.randint(0, len(extra))))))
    return op(column, v)


def test_brute_force_strict_and_inclusive_metrics():
    rng = random.Random(42)
    proven = excluded = 0
    for _ in range(400):
        rows = random_rows(rng)
        table = pa.table({
            "id": pa.array([r["id"] for r in rows], pa.int32()),
            "f": pa.array([r["f"] for r in rows], pa.float64()),
            "s": pa.array([r["s"] for r in rows], pa.string()),
            "r": pa.array([r["r"] for r in rows], pa.int32()),
        })
        file = metrics_of(rows, rng)
        for _ in range(15):
            expr = bind(random_expr(rng), SCHEMA)
            mask = evaluate_arrow(expr, table).to_pylist()
            if metrics_must_match(expr, file, SCHEMA):
                proven += 1
                assert all(mask), (str(expr), rows, file)
            if not metrics_might_match(expr, file, SCHEMA):
                excluded += 1
                assert not any(mask), (str(expr), rows, file)
    # the evaluators decide a fair share of the cases, not only the trivial ones
    assert proven > 600 and excluded > 600, (proven, excluded)


def test_always_true_and_not():
    assert metrics_must_match(AlwaysTrue(), NO_NULLS, SCHEMA)
    assert metrics_must_match(Not(parse_expression("id > 9")), NO_NULLS, SCHEMA)
    assert not metrics_must_match(Or(parse_expression("id = 5"), parse_expression("id = 6")), NO_NULLS, SCHEMA)
