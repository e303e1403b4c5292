"""Tests for partition projections: project_predicate / project_predicate_strict per transform and predicate
(transform_projections), projections over a spec, evaluation on partition tuples and residuals
(partition_filters), and manifest pruning by partition summaries (manifest_evaluation).

Hand-computed tables check Java's rules; brute-force tests generate rows, compute their partitions with the
transforms and check that an inclusive projection never excludes a matching row and a strict projection never
includes a row that does not match.
"""

from __future__ import annotations

import random
from decimal import Decimal

import pyarrow as pa
import pytest

from engine.errors import CorruptFileError, ValidationError
from engine.model import values
from engine.model.data_file import FieldSummary
from engine.model.expression_binding import bind
from engine.model.expression_parser import parse_expression
from engine.model.expressions import (
    AlwaysFalse,
    AlwaysTrue,
    And,
    BooleanExpression,
    BoundReference,
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
    Reference,
    StartsWith,
)
from engine.model.manifest_evaluation import manifest_might_match, summaries_might_match
from engine.model.partition_filters import (
    evaluate_partition,
    partition_might_match,
    partition_must_match,
    project_inclusive,
    project_strict,
    residual,
)
from engine.model.row_evaluation import evaluate_arrow
from engine.model.partitioning import PartitionField, PartitionSpec, build_spec
from engine.model.schema import Schema
from engine.model.transform_projections import project_predicate, project_predicate_strict
from engine.model.transforms import (
    Bucket,
    Day,
    Hour,
    Identity,
    Month,
    Transform,
    Truncate,
    UnknownTransform,
    Void,
    Year,
)
from engine.model.types import (
    BinaryType,
    DateType,
    DecimalType,
    DoubleType,
    IcebergType,
    IntegerType,
    LongType,
    NestedField,
    StringType,
    StructType,
    TimestampType,
    TimestamptzType,
)

DAY = 86_400_000_000
HOUR = 3_600_000_000
INT_MIN, INT_MAX = -(2**31), 2**31 - 1
LONG_MIN = -(2**63)


def ref(t: IcebergType, name: str = "x", field_id: int = 1) -> BoundReference:
    return BoundReference(field_id=field_id, name=name, field_type=t, path=(name,))


def text(expr: BooleanExpression | None) -> str | None:
    return None if expr is None else str(expr)


# -- hand-computed tables ----------------------------------------------------------------------------------------

I = ref(IntegerType())
L = ref(LongType())
S = ref(StringType())
B = ref(BinaryType())
DEC = ref(DecimalType(9, 2))
TS = ref(TimestampType())
TSTZ = ref(TimestamptzType())
D = ref(DateType())

D_2024_01_01 = 19723  # days since 1970-01-01
TS_2024_01_02 = (D_2024_01_01 + 1) * DAY
MONTH_2024_03 = (2024 - 1970) * 12 + 2

# (transform, predicate, inclusive, strict): the projections printed on the partition field "p"
CASES = [
    # identity keeps every predicate
    (Identity(), LessThan(I, 5), "p < 5", "p < 5"),
    (Identity(), NotEqualTo(I, 5), "p != 5", "p != 5"),
    (Identity(), In(I, (1, 2)), "p IN (1, 2)", "p IN (1, 2)"),
    (Identity(), IsNull(I), "p IS NULL", "p IS NULL"),
    (Identity(), StartsWith(S, "ab"), "p LIKE 'ab%'", "p LIKE 'ab%'"),
    (Identity(), IsNaN(ref(DoubleType())), "p IS NAN", "p IS NAN"),
    (Identity(), NotNaN(ref(DoubleType())), "p IS NOT NAN", "p IS NOT NAN"),
    # bucket: only = and IN inclusive, only != and NOT IN strict (Appendix B: hash(34) = 2017239379 -> 3 of 16,
    # hash("iceberg") = 1210000089 -> 9, hash(14.20) = -500754589 -> 3, hash(2017-11-16) = -653330422 -> 10)
    (Bucket(16), EqualTo(I, 34), "p = 3", None),
    (Bucket(16), EqualTo(L, 34), "p = 3", None),
    (Bucket(16), EqualTo(S, "iceberg"), "p = 9", None),
    (Bucket(16), EqualTo(DEC, Decimal("14.20")), "p = 3", None),
    (Bucket(16), EqualTo(D, 17486), "p = 10", None),
    (Bucket(16), NotEqualTo(I, 34), None, "p != 3"),
    (Bucket(16), In(I, (34, 34)), "p = 3", None),
    (Bucket(16), NotIn(S, ("iceberg",)), None, "p != 9"),
    (Bucket(16), LessThan(I, 34), None, None),
    (Bucket(16), GreaterThanOrEqual(I, 34), None, None),
    (Bucket(16), IsNull(I), "p IS NULL", "p IS NULL"),
    (Bucket(16), NotNull(S), "p IS NOT NULL", "p IS NOT NULL"),
    # truncate[16] on int: 16 divides 2^31, so nothing wraps and Java's rules apply as they are
    (Truncate(16), LessThan(I, 35), "p <= 32", "p < 32"),
    (Truncate(16), LessThanOrEqual(I, 35), "p <= 32", "p < 32"),
    (Truncate(16), LessThan(I, 32), "p <= 16", "p < 32"),
    (Truncate(16), LessThanOrEqual(I, 31), "p <= 16", "p < 32"),
    (Truncate(16), GreaterThan(I, 35), "p >= 32", "p > 32"),
    (Truncate(16), GreaterThanOrEqual(I, 35), "p >= 32", "p > 32"),
    (Truncate(16), GreaterThanOrEqual(I, 32), "p >= 32", "p > 16"),
    (Truncate(16), GreaterThan(I, 31), "p >= 32", "p > 16"),
    (Truncate(16), EqualTo(I, 35), "p = 32", None),
    (Truncate(16), NotEqualTo(I, 35), None, "p != 32"),
    (Truncate(16), In(I, (1, 17, 20)), "p IN (0, 16)", None),
    (Truncate(16), NotIn(I, (1, 17, 20)), None, "p NOT IN (0, 16)"),
    (Truncate(16), LessThan(I, -1), "p <= -16", "p < -16"),
    (Truncate(16), LessThan(I, INT_MIN), "false", f"p < {INT_MIN}"),
    (Truncate(16), GreaterThan(I, INT_MAX), "false", f"p > {INT_MAX - 15}"),
    (Truncate(16), LessThanOrEqual(I, INT_MAX), f"p <= {INT_MAX - 15}", "p IS NOT NULL"),
    (Truncate(16), GreaterThanOrEqual(I, INT_MIN), f"p >= {INT_MIN}", "p IS NOT NULL"),
    (Truncate(16), IsNull(I), "p IS NULL", "p IS NULL"),
    # truncate[10] on int: Java wraps [-2^31, -2^31 + 1] to 2^31 - 2; icelog's projections account for it
    (Truncate(10), EqualTo(I, 35), "p = 30", None),
    (Truncate(10), EqualTo(I, INT_MIN), f"p = {INT_MAX - 1}", None),
    (Truncate(10), LessThan(I, 35), f"p <= 30 OR p = {INT_MAX - 1}", "p < 30"),
    (Truncate(10), LessThanOrEqual(I, INT_MIN + 1), f"p = {INT_MAX - 1}", None),
    (Truncate(10), GreaterThanOrEqual(I, 35), "p >= 30", f"p > 30 AND p != {INT_MAX - 1}"),
    (Truncate(10), GreaterThan(I, INT_MIN), None, f"p > {INT_MAX - 1}"),
    (Truncate(10), NotEqualTo(I, 35), None, "p != 30"),
    # truncate on long and decimal (width in unscaled units: 0.50 at scale 2)
    (Truncate(16), LessThan(L, 35), "p <= 32", "p < 32"),
    (Truncate(16), LessThan(L, LONG_MIN), "false", f"p < {LONG_MIN}"),
    (Truncate(50), LessThan(DEC, Decimal("12.34")), "p <= 12.00", "p < 12.00"),
    (Truncate(50), LessThan(DEC, Decimal("12.00")), "p <= 11.50", "p < 12.00"),
    (Truncate(50), LessThanOrEqual(DEC, Decimal("12.49")), "p <= 12.00", "p < 12.50"),
    (Truncate(50), GreaterThan(DEC, Decimal("12.49")), "p >= 12.50", "p > 12.00"),
    (Truncate(50), GreaterThanOrEqual(DEC, Decimal("12.50")), "p >= 12.50", "p > 12.00"),
    (Truncate(50), EqualTo(DEC, Decimal("-0.01")), "p = -0.50", None),
    (Truncate(50), NotEqualTo(DEC, Decimal("-0.01")), None, "p != -0.50"),
    # truncate[3] on strings, including LIKE 'prefix%' below, at and beyond the width
    (Truncate(3), LessThan(S, "abcdef"), "p <= 'abc'", "p < 'abc'"),
    (Truncate(3), LessThanOrEqual(S, "ab"), "p <= 'ab'", "p < 'ab'"),
    (Truncate(3), GreaterThan(S, "abc"), "p >= 'abc'", "p > 'abc'"),
    (Truncate(3), GreaterThanOrEqual(S, "ab"), "p >= 'ab'", "p > 'ab'"),
    (Truncate(3), EqualTo(S, "abcd"), "p = 'abc'", None),
    (Truncate(3), NotEqualTo(S, "abcd"), None, "p != 'abc'"),
    (Truncate(3), In(S, ("abcd", "abce", "x")), "p IN ('abc', 'x')", None),
    (Truncate(3), NotIn(S, ("abcd", "x")), None, "p NOT IN ('abc', 'x')"),
    (Truncate(3), StartsWith(S, "ab"), "p LIKE 'ab%'", "p LIKE 'ab%'"),
    (Truncate(3), StartsWith(S, "abc"), "p = 'abc'", "p = 'abc'"),
    (Truncate(3), StartsWith(S, "abcd"), "p LIKE 'abc%'", None),
    (Truncate(3), NotStartsWith(S, "ab"), "p NOT LIKE 'ab%'", "p NOT LIKE 'ab%'"),
    (Truncate(3), NotStartsWith(S, "abc"), "p != 'abc'", "p != 'abc'"),
    (Truncate(3), NotStartsWith(S, "abcd"), None, "p NOT LIKE 'abc%'"),
    (Truncate(2), LessThan(B, b"\x01\x02\x03"), "p <= X'0102'", "p < X'0102'"),
    (Truncate(2), EqualTo(B, b"\x01\x02\x03"), "p = X'0102'", None),
    (Truncate(2), NotEqualTo(B, b"\x01"), None, "p != X'01'"),
    # day / hour / month / year on timestamps after 1970
    (Day(), LessThan(TS, TS_2024_01_02), "p <= 19723", "p < 19724"),
    (Day(), LessThanOrEqual(TS, TS_2024_01_02), "p <= 19724", "p < 19724"),
    (Day(), GreaterThan(TS, TS_2024_01_02), "p >= 19724", "p > 19724"),
    (Day(), GreaterThanOrEqual(TS, TS_2024_01_02), "p >= 19724", "p > 19723"),
    (Day(), EqualTo(TS, TS_2024_01_02 + 10 * HOUR), "p = 19724", None),
    (Day(), NotEqualTo(TS, TS_2024_01_02 + 10 * HOUR), None, "p != 19724"),
    (Day(), In(TS, (TS_2024_01_02 + HOUR, TS_2024_01_02 + 2 * HOUR, TS_2024_01_02 + 3 * DAY)),
     "p IN (19724, 19727)", None),
    (Day(), NotIn(TS, (TS_2024_01_02, TS_2024_01_02 + 3 * DAY)), None, "p NOT IN (19724, 19727)"),
    (Day(), IsNull(TSTZ), "p IS NULL", "p IS NULL"),
    (Hour(), GreaterThanOrEqual(TS, TS_2024_01_02 + 10 * HOUR), "p >= 473386", "p > 473385"),
    (Hour(), LessThan(TSTZ, TS_2024_01_02 + 10 * HOUR + 1), "p <= 473386", "p < 473386"),
    (Month(), EqualTo(TS, values.parse_timestamp("2024-03-15T10:00:00", with_zone=False)), f"p = {MONTH_2024_03}",
     None),
    (Month(), GreaterThan(TS, values.parse_timestamp("2024-03-31T23:59:59.999999", with_zone=False)),
     f"p >= {MONTH_2024_03 + 1}", f"p > {MONTH_2024_03}"),
    (Year(), LessThan(TS, values.parse_timestamp("2024-01-01T00:00:00", with_zone=False)), "p <= 53", "p < 54"),
    # day / month / year on dates, and Java's fix for values written by Iceberg 0.10.0 and earlier before 1970
    (Day(), LessThan(D, 5), "p <= 4", "p < 5"),
    (Day(), GreaterThan(D, 4), "p >= 5", "p > 4"),
    (Day(), LessThan(D, -2), "p <= -2", "p < -2"),  # <= -3 widened to the next day
    (Day(), EqualTo(D, -1), "p IN (-1, 0)", None),
    (Day(), In(D, (-3, 10)), "p IN (-3, -2, 10)", None),
    (Day(), GreaterThanOrEqual(D, -2), "p >= -2", "p > -2"),  # strict > -3 raised by one
    (Day(), GreaterThan(D, -1), "p >= 0", "p > 0"),
    (Day(), NotEqualTo(D, -1), None, "p NOT IN (-1, 0)"),
    (Day(), NotIn(D, (-5, 3)), None, "p NOT IN (-5, -4, 3)"),
    (Year(), EqualTo(D, values.parse_date("2024-03-15")), "p = 54", None),
    (Month(), LessThan(D, values.parse_date("1969-12-01")), "p <= -1", "p < -1"),
    # icelog widens Java's result where Java's transform puts x.999999 of a unit's first second before 1970
    # in the previous unit: day(1969-12-31T00:00:00.999999) is -2
    (Day(), GreaterThanOrEqual(TS, -DAY), "p >= -2", "p > -1"),  # Java: p >= -1
    (Day(), GreaterThanOrEqual(TS, -DAY + 999_999), "p >= -2", "p > 0"),  # the quirk value itself: as Java
    (Day(), LessThan(TS, -DAY + 500_000), "p <= 0", "p < -2"),  # Java strict: p < -1
    (Day(), LessThan(TS, -5), "p <= 0", "p < -1"),  # quirk value of day -1 precedes the bound: as Java
    (Hour(), GreaterThanOrEqual(TS, -HOUR), "p >= -2", "p > -1"),  # Java: p >= -1
    # void and unknown transforms never project
    (Void(), EqualTo(I, 1), None, None),
    (Void(), IsNull(I), None, None),
    (UnknownTransform("zorder"), EqualTo(I, 1), None, None),
]


@pytest.mark.parametrize("transform, pred, inclusive, strict", CASES, ids=lambda v: str(v))
def test_transform_projection_table(transform: Transform, pred, inclusive, strict):
    assert text(project_predicate(transform, "p", pred)) == inclusive
    assert text(project_predicate_strict(transform, "p", pred)) == strict


def test_projection_terms_are_references_to_the_partition_field():
    projected = project_predicate(Truncate(16), "id_trunc", LessThan(I, 35))
    assert projected == LessThanOrEqual(Reference("id_trunc"), 32)
    assert project_predicate_strict(Bucket(4), "b", NotIn(S, ("a", "b", "c"))).term == Reference("b")


def test_projection_refuses_unbound_predicates():
    with pytest.raises(ValidationError, match="not bound"):
        project_predicate(Identity(), "p", EqualTo("x", 1))
    with pytest.raises(ValidationError, match="not bound"):
        project_predicate_strict(Void(), "p", EqualTo("x", 1))


# -- brute force per transform -----------------------------------------------------------------------------------

def one_field(name: str, t: IcebergType) -> StructType:
    return StructType((NestedField(field_id=1 if name == "x" else 1000, name=name, field_type=t, required=False),))


def holds(expr: BooleanExpression | None, struct: StructType, value, *, default: bool) -> bool:
    """SQL truth of ``expr`` for one value of the struct's only field (``default`` when there is no expr)."""
    return default if expr is None else evaluate_partition(expr, struct, (value,))


def predicates(r: BoundReference, literals: list, rng: random.Random) -> list:
    out = []
    for v in literals:
        out += [LessThan(r, v), LessThanOrEqual(r, v), GreaterThan(r, v), GreaterThanOrEqual(r, v), EqualTo(r, v),
                NotEqualTo(r, v)]
        others = rng.sample(literals, min(3, len(literals)))
        out += [In(r, tuple(sorted({v, *others}))), NotIn(r, tuple(sorted({v, *others})))]
        if isinstance(r.field_type, StringType):
            for n in range(0, min(len(v), 5) + 1):
                out += [StartsWith(r, v[:n]), NotStartsWith(r, v[:n])]
    return out + [IsNull(r), NotNull(r)]


def check_sound(transform: Transform, t: IcebergType, rows: list, literals: list, seed: int = 1) -> None:
    rng = random.Random(seed)
    row_struct = one_field("x", t)
    partition_struct = one_field("p", transform.result_type(t))
    fn = transform.bind(t)
    groups: dict = {}
    for x in rows:
        groups.setdefault(fn(x), []).append(x)
    for pred in predicates(ref(t), literals, rng):
        inclusive = project_predicate(transform, "p", pred)
        strict = project_predicate_strict(transform, "p", pred)
        for p, xs in groups.items():
            matches = [holds(pred, row_struct, x, default=False) for x in xs]
            if any(matches):
                assert holds(inclusive, partition_struct, p, default=True), (transform, pred, p, inclusive)
            if holds(strict, partition_struct, p, default=False):
                assert all(matches), (transform, pred, p, strict)


def ints_around(points: list[int], spread: int, low: int, high: int) -> list[int]:
    return sorted({min(high, max(low, p + d)) for p in points for d in range(-spread, spread + 1)})


@pytest.mark.parametrize("transform", [Bucket(3), Truncate(10), Truncate(16), Truncate(7)], ids=str)
def test_brute_force_int(transform):
    rows = ints_around([INT_MIN, -100, -17, 0, 9, 33, INT_MAX], 20, INT_MIN, INT_MAX) + [None]
    literals = ints_around([INT_MIN, -16, 0, 10, 35, INT_MAX], 2, INT_MIN, INT_MAX)
    check_sound(transform, IntegerType(), rows, literals)


@pytest.mark.parametrize("transform", [Bucket(5), Truncate(10), Truncate(1000)], ids=str)
def test_brute_force_long(transform):
    long_max = 2**63 - 1
    rows = ints_around([LONG_MIN, -1000, 0, 999, long_max], 12, LONG_MIN, long_max) + [None]
    literals = ints_around([LONG_MIN, -1000, 5, long_max], 2, LONG_MIN, long_max)
    check_sound(transform, LongType(), rows, literals)


def test_brute_force_decimal():
    t = DecimalType(9, 2)
    rows = [Decimal(n).scaleb(-2) for n in range(-260, 260, 7)] + [None]
    literals = [Decimal(n).scaleb(-2) for n in (-251, -250, -249, -1, 0, 1, 49, 50, 51, 199)]
    for transform in (Truncate(50), Truncate(3), Bucket(4), Identity()):
        check_sound(transform, t, rows, literals)


def test_brute_force_string():
    rng = random.Random(7)
    alphabet = "ab\u00e9\U0001f600"
    rows = sorted({"".join(rng.choice(alphabet) for _ in range(rng.randint(0, 5))) for _ in range(100)}) + [None]
    literals = rng.sample(rows[:-1], 10) + ["", "ab", "aba", "abab", "b\U0001f600"]
    for transform in (Truncate(1), Truncate(2), Truncate(3), Bucket(4)):
        check_sound(transform, StringType(), rows, literals)


def test_brute_force_binary():
    rng = random.Random(8)
    rows = sorted({bytes(rng.choice((0, 1, 255)) for _ in range(rng.randint(0, 4))) for _ in range(80)}) + [None]
    literals = rng.sample(rows[:-1], 8)
    for transform in (Truncate(2), Bucket(4), Identity()):
        check_sound(transform, BinaryType(), rows, literals)


def _timestamp_rows() -> list[int]:
    points = [0, -1, -DAY, -DAY + 999_999, -HOUR + 999_999, -2 * HOUR + 999_999, -DAY - 1,
              values.parse_timestamp("1969-12-01T00:00:00.999999", with_zone=False),
              values.parse_timestamp("1969-01-01T00:00:00.999999", with_zone=False),
              values.parse_timestamp("1968-03-01T00:00:00", with_zone=False),
              TS_2024_01_02, TS_2024_01_02 + 999_999, TS_2024_01_02 - 1,
              values.parse_timestamp("2024-03-01T00:00:00", with_zone=False)]
    rows = set()
    for p in points:
        for d in (-1_000_001, -1_000_000, -999_999, -500_000, -2, -1, 0, 1, 2, 500_000, 999_999, 1_000_000):
            rows.add(p + d)
    return sorted(rows)


@pytest.mark.parametrize("transform", [Year(), Month(), Day(), Hour(), Bucket(3)], ids=str)
@pytest.mark.parametrize("t", [TimestampType(), TimestamptzType()], ids=str)
def test_brute_force_timestamps(transform, t):
    rows = _timestamp_rows()
    literals = sorted(set(random.Random(3).sample(rows, 25) + [-DAY, -DAY + 999_999, -DAY + 1_000_000, 0, -1]))
    check_sound(transform, t, rows + [None], literals)


@pytest.mark.parametrize("transform", [Year(), Month(), Day(), Bucket(3), Identity()], ids=str)
def test_brute_force_dates(transform):
    points = [0, -1, -31, -365, -366, -730, 59, 365, 19723, values.parse_date("1969-03-01")]
    rows = sorted({p + d for p in points for d in range(-3, 4)})
    literals = sorted({p + d for p in points for d in (-1, 0, 1)})
    check_sound(transform, DateType(), rows + [None], literals)


def test_java_quirk_rows_are_where_the_widening_needs_them():
    # the rows that make icelog differ from Java: their day is one less than their date
    assert Day().bind(TimestampType())(-DAY + 999_999) == -2
    assert Hour().bind(TimestampType())(-HOUR + 999_999) == -2
    # Java's inclusive projection of ts >= 1969-12-31T00:00:00 (p >= -1) would miss that row
    days = one_field("p", DateType())
    assert not holds(GreaterThanOrEqual(Reference("p"), -1), days, -2, default=True)
    assert holds(project_predicate(Day(), "p", GreaterThanOrEqual(TS, -DAY)), days, -2, default=True)


# -- the scalar evaluator agrees with Arrow ----------------------------------------------------------------------


def test_partition_evaluation_agrees_with_evaluate_arrow():
    rng = random.Random(11)
    schema = Schema((NestedField(field_id=1, name="x", field_type=DoubleType(), required=False),
                     NestedField(field_id=2, name="s", field_type=StringType(), required=False)))
    xs = [rng.choice([None, float("nan"), -1.5, 0.0, 2.0, 3.25]) for _ in range(60)]
    ss = [rng.choice([None, "", "a", "ab", "abc", "b"]) for _ in range(60)]
    table = pa.table({"x": pa.array(xs, pa.float64()), "s": pa.array(ss, pa.string())})
    struct = schema.as_struct()
    texts = ["x < 2", "x >= 0", "x = 2", "x != 2", "x IN (0, 2)", "x NOT IN (0, 2)", "x IS NAN", "x IS NOT NAN",
             "x IS NULL", "s LIKE 'a%'", "s NOT LIKE 'a%'", "NOT (x < 2)", "x < 2 OR s = 'a'",
             "NOT (x > 0 AND s NOT LIKE 'ab%')", "x IS NOT NULL AND NOT (s IN ('a', 'b'))"]
    for t in texts:
        bound = bind(parse_expression(t), schema)
        mask = evaluate_arrow(bound, table).to_pylist()
        assert [evaluate_partition(bound, struct, (x, s)) for x, s in zip(xs, ss)] == mask, t


# -- projections over a spec -------------------------------------------------------------------------------------

SCHEMA = Schema((
    NestedField(field_id=1, name="id", field_type=LongType(), required=True),
    NestedField(field_id=2, name="ts", field_type=TimestampType(), required=False),
    NestedField(field_id=3, name="category", field_type=StringType(), required=False),
    NestedField(field_id=4, name="f", field_type=DoubleType(), required=False),
    NestedField(field_id=5, name="n", field_type=IntegerType(), required=False),
))
SPEC = build_spec(SCHEMA, ["day(ts)", "bucket(16, id)", "truncate(3, category)", "f"])


def test_spec_projection_binds_to_partition_fields():
    projected = project_inclusive(parse_expression("ts >= '2024-01-02' AND id = 34"), SPEC, SCHEMA)
    assert str(projected) == "ts_day >= DATE '2024-01-02' AND id_bucket = 3"
    assert isinstance(projected, And)
    left = projected.left.term
    assert (left.field_id, left.name, left.field_type, left.path) == (1000, "ts_day", DateType(), ("ts_day",))
    assert projected.right.term.field_type == IntegerType()


@pytest.mark.parametrize("where, inclusive, strict", [
    ("id = 34", "id_bucket = 3", "false"),
    ("id != 34", "true", "id_bucket != 3"),
    ("n = 1", "true", "false"),  # no partition field on n
    ("id = 34 OR n = 1", "true", "false"),
    ("id != 34 OR n = 1", "true", "id_bucket != 3"),
    ("id = 34 AND n = 1", "id_bucket = 3", "false"),
    ("NOT (category = 'abcd')", "true", "category_trunc != 'abc'"),
    ("NOT (category LIKE 'ab%' OR f > 1)", "category_trunc NOT LIKE 'ab%' AND (f <= 1.0e0 OR f IS NAN)",
     "category_trunc NOT LIKE 'ab%' AND (f <= 1.0e0 OR f IS NAN)"),
    ("NOT (category LIKE 'abc%' OR n > 1)", "category_trunc != 'abc'", "false"),
    ("ts < '2024-01-02' OR category IS NULL", "ts_day <= DATE '2024-01-01' OR category_trunc IS NULL",
     "ts_day < DATE '2024-01-02' OR category_trunc IS NULL"),
    ("true", "true", "true"),
    ("f IS NAN", "f IS NAN", "f IS NAN"),
])
def test_spec_projection_table(where, inclusive, strict):
    expr = parse_expression(where)
    assert str(project_inclusive(expr, SPEC, SCHEMA)) == inclusive
    assert str(project_strict(expr, SPEC, SCHEMA)) == strict


def test_several_fields_on_one_column_combine():
    spec = PartitionSpec(spec_id=1, fields=(
        PartitionField(source_id=3, field_id=1000, transform=Truncate(3), name="c3"),
        PartitionField(source_id=3, field_id=1001, transform=Identity(), name="c"),
    ))
    assert str(project_inclusive(EqualTo("category", "abcd"), spec, SCHEMA)) == "c3 = 'abc' AND c = 'abcd'"
    assert str(project_strict(StartsWith("category", "abcd"), spec, SCHEMA)) == "c LIKE 'abcd%'"
    assert str(project_strict(LessThan("category", "b"), spec, SCHEMA)) == "c3 < 'b' OR c < 'b'"


def test_unpartitioned_projection():
    spec = PartitionSpec()
    assert project_inclusive(parse_expression("id = 1"), spec, SCHEMA) == AlwaysTrue()
    assert project_strict(parse_expression("id = 1"), spec, SCHEMA) == AlwaysFalse()
    assert project_strict(AlwaysTrue(), spec, SCHEMA) == AlwaysTrue()
    assert partition_might_match(parse_expression("id = 1"), spec, SCHEMA, ())
    assert not partition_must_match(parse_expression("id = 1"), spec, SCHEMA, ())


def test_projection_binds_case_insensitively_and_reports_bad_columns():
    assert str(project_inclusive(parse_expression("ID = 34"), SPEC, SCHEMA, case_sensitive=False)) == "id_bucket = 3"
    with pytest.raises(ValidationError, match="nope"):
        project_inclusive(parse_expression("nope = 1"), SPEC, SCHEMA)


# -- partition evaluation ----------------------------------------------------------------------------------------

PTYPE = SPEC.partition_type(SCHEMA)


@pytest.mark.parametrize("where, partition, might, must", [
    ("id = 34", (0, 3, "abc", 1.0), True, False),
    ("id = 34", (0, 4, "abc", 1.0), False, False),
    ("id != 34", (0, 4, "abc", 1.0), True, True),
    ("id != 34", (0, 3, "abc", 1.0), True, False),
    ("ts >= '2024-01-02'", (19724, 0, None, None), True, True),
    ("ts >= '2024-01-02'", (19723, 0, None, None), False, False),
    ("ts >= '2024-01-02T12:00:00'", (19724, 0, None, None), True, False),
    ("ts >= '2024-01-02'", (None, 0, None, None), False, False),
    ("ts IS NULL", (None, 0, None, None), True, True),
    ("ts IS NULL", (19724, 0, None, None), False, False),
    ("category LIKE 'ab%'", (0, 0, "abz", None), True, True),
    ("category LIKE 'abz%'", (0, 0, "abz", None), True, True),
    ("category LIKE 'abzz%'", (0, 0, "abz", None), True, False),
    ("category LIKE 'abzz%'", (0, 0, "aby", None), False, False),
    ("category = 'ab'", (0, 0, "ab", None), True, False),
    ("f > 1", (0, 0, None, float("nan")), False, False),
    ("f != 1", (0, 0, None, float("nan")), True, True),
    ("f IS NOT NAN", (0, 0, None, None), True, True),
    ("f > 1 OR ts < '2024-01-01'", (19000, 0, None, 0.5), True, True),
    ("NOT (id = 34 AND ts > '2024-01-01')", (19000, 3, None, None), True, True),
])
def test_partition_matching(where, partition, might, must):
    expr = parse_expression(where)
    assert partition_might_match(expr, SPEC, SCHEMA, partition) is might
    assert partition_must_match(expr, SPEC, SCHEMA, partition) is must
    assert evaluate_partition(project_inclusive(expr, SPEC, SCHEMA), PTYPE, partition) is might
    assert evaluate_partition(project_strict(expr, SPEC, SCHEMA), PTYPE, partition) is must


def test_evaluate_partition_accepts_unbound_names_and_checks_the_tuple():
    assert evaluate_partition(EqualTo("id_bucket", 3), PTYPE, (None, 3, None, None))
    assert not evaluate_partition(Or(IsNull("ts_day"), GreaterThan("ts_day", 5)), PTYPE, (1, 3, None, None))
    assert evaluate_partition(Not(LessThan("ts_day", 0)), PTYPE, (1, 3, None, None))
    assert not evaluate_partition(Not(LessThan("ts_day", 0)), PTYPE, (None, 3, None, None))  # NOT null is null
    with pytest.raises(ValidationError, match="4 partition fields"):
        evaluate_partition(EqualTo("id_bucket", 3), PTYPE, (1, 2))
    with pytest.raises(ValidationError, match="'nope' is not a partition field"):
        evaluate_partition(EqualTo("nope", 3), PTYPE, (1, 2, 3, 4))


# -- residuals ---------------------------------------------------------------------------------------------------

DAY_SPEC = build_spec(SCHEMA, ["day(ts)"])


@pytest.mark.parametrize("where, partition, expected", [
    ("ts >= '2024-01-02' AND id > 5", (19724,), "id > 5"),
    ("ts >= '2024-01-02' AND id > 5", (19723,), "false"),
    ("ts >= '2024-01-02T12:00:00' AND id > 5", (19724,), "ts >= TIMESTAMP '2024-01-02T12:00:00' AND id > 5"),
    ("ts < '2024-01-02' OR id = 5", (19724,), "id = 5"),
    ("ts < '2024-01-02' OR id = 5", (19723,), "true"),
    ("NOT (ts < '2024-01-02')", (19724,), "true"),
    ("ts IS NULL", (None,), "true"),
    ("ts IS NULL", (19724,), "false"),
    ("ts > '2024-01-02'", (None,), "false"),
    ("ts = '2024-01-02T10:00:00'", (19724,), "ts = TIMESTAMP '2024-01-02T10:00:00'"),
    ("ts = '2024-01-02T10:00:00'", (19725,), "false"),
    ("ts != '2024-01-02T10:00:00'", (19725,), "true"),
    ("id = 1", (19725,), "id = 1"),
])
def test_residual(where, partition, expected):
    assert str(residual(parse_expression(where), DAY_SPEC, SCHEMA, partition)) == expected


def test_residual_uses_every_field_and_unpartitioned_specs_keep_the_filter():
    spec = build_spec(SCHEMA, ["day(ts)", "bucket(16, id)"])
    assert residual(parse_expression("id = 34"), spec, SCHEMA, (0, 3)) == bind(parse_expression("id = 34"), SCHEMA)
    assert residual(parse_expression("id = 34"), spec, SCHEMA, (0, 4)) == AlwaysFalse()
    assert residual(parse_expression("id != 34"), spec, SCHEMA, (0, 4)) == AlwaysTrue()
    expr = parse_expression("NOT (id = 34)")
    assert residual(expr, PartitionSpec(), SCHEMA, ()) == bind(parse_expression("id != 34"), SCHEMA)
    with pytest.raises(ValidationError, match="partition tuple"):
        residual(expr, spec, SCHEMA, (1,))


# -- manifest summaries ------------------------------------------------------------------------------------------


def summary(t: IcebergType, vals: list) -> FieldSummary:
    present = [v for v in vals if v is not None and not (isinstance(v, float) and v != v)]
    return FieldSummary(
        contains_null=any(v is None for v in vals),
        contains_nan=any(isinstance(v, float) and v != v for v in vals) if isinstance(t, DoubleType) else False,
        lower_bound=values.to_bytes(t, min(present)) if present else None,
        upper_bound=values.to_bytes(t, max(present)) if present else None,
    )


def summaries(partitions: list[tuple]) -> tuple[FieldSummary, ...]:
    return tuple(summary(f.field_type, [p[i] for p in partitions]) for i, f in enumerate(PTYPE.fields))


NAN = float("nan")
MANIFEST = summaries([(19724, 3, "abc", 1.0), (19730, 7, "abz", None)])
NULLS = summaries([(None, 3, None, None)])
NANS = summaries([(None, 3, None, NAN)])


@pytest.mark.parametrize("where, parts, expected", [
    ("id = 34", MANIFEST, True),  # bucket 3 in [3, 7]
    ("id IN (34)", NULLS, True),
    ("ts < '2024-01-02'", MANIFEST, False),
    ("ts < '2024-01-02T00:00:01'", MANIFEST, True),
    ("ts > '2024-01-08T23:59:59.999999'", MANIFEST, False),
    ("ts >= '2024-01-08T23:00:00'", MANIFEST, True),
    ("ts = '2024-01-05T00:00:00'", MANIFEST, True),
    ("ts = '2024-01-09T00:00:00'", MANIFEST, False),
    ("ts IN ('2023-01-01T00:00:00', '2024-01-09T00:00:00')", MANIFEST, False),
    ("ts IN ('2023-01-01T00:00:00', '2024-01-03T00:00:00')", MANIFEST, True),
    ("ts IS NULL", MANIFEST, False),
    ("ts IS NULL", NULLS, True),
    ("ts IS NOT NULL", NULLS, False),
    ("ts > '2024-01-02'", NULLS, False),
    ("ts != '2024-01-02T00:00:00'", NULLS, True),  # no strict... inclusive projection of != is true
    ("category LIKE 'abd%'", MANIFEST, True),
    ("category LIKE 'b%'", MANIFEST, False),
    ("category LIKE 'aa%'", MANIFEST, False),
    ("category NOT LIKE 'ab%'", MANIFEST, False),
    ("category NOT LIKE 'abc%'", MANIFEST, True),
    ("category = 'abd'", MANIFEST, True),
    ("category > 'ac'", MANIFEST, False),
    ("f > 1", MANIFEST, False),
    ("f >= 1", MANIFEST, True),
    ("f IS NAN", MANIFEST, False),
    ("f IS NAN", NANS, True),
    ("f IS NOT NAN", NANS, False),
    ("f IS NOT NULL", NANS, True),
    ("f < 5", NANS, False),
    ("f != 5", NANS, True),
    ("f IS NOT NULL", NULLS, False),
    ("f IS NULL OR ts < '2024-01-02'", MANIFEST, True),
    ("f > 1 AND id = 34", MANIFEST, False),
    ("n = 5", NULLS, True),
])
def test_manifest_might_match(where, parts, expected):
    assert manifest_might_match(parse_expression(where), SPEC, SCHEMA, parts) is expected


def test_manifest_summaries_edge_cases():
    expr = parse_expression("ts < '2024-01-02'")
    assert manifest_might_match(expr, SPEC, SCHEMA, None)  # old manifest list without summaries
    assert manifest_might_match(expr, SPEC, SCHEMA, MANIFEST[:2])  # does not fit the spec
    old_float = (MANIFEST[0], MANIFEST[1], MANIFEST[2], FieldSummary(contains_null=True, contains_nan=None))
    assert manifest_might_match(parse_expression("f IS NOT NULL"), SPEC, SCHEMA, old_float)  # NaN unknown
    assert manifest_might_match(parse_expression("f IS NAN"), SPEC, SCHEMA, old_float)
    nan_bound = (*MANIFEST[:3], FieldSummary(contains_null=False, contains_nan=True,
                                             lower_bound=values.to_bytes(DoubleType(), NAN),
                                             upper_bound=values.to_bytes(DoubleType(), NAN)))
    assert manifest_might_match(parse_expression("f > 1"), SPEC, SCHEMA, nan_bound)  # a NaN bound proves nothing
    # a long identity partition whose older manifests hold int bounds
    schema = Schema((NestedField(field_id=1, name="k", field_type=LongType(), required=False),))
    spec = build_spec(schema, ["k"])
    parts = (FieldSummary(contains_null=False, lower_bound=values.to_bytes(IntegerType(), 5),
                          upper_bound=values.to_bytes(IntegerType(), 9)),)
    assert not manifest_might_match(parse_expression("k > 9"), spec, schema, parts)
    assert manifest_might_match(parse_expression("k > 8"), spec, schema, parts)
    bad = (FieldSummary(contains_null=False, lower_bound=b"\x01\x02\x03", upper_bound=b"\x01\x02\x03"),)
    with pytest.raises(CorruptFileError) as e:
        manifest_might_match(parse_expression("k > 8"), spec, schema, bad, manifest_path="/w/m.avro")
    assert e.value.path == "/w/m.avro"
    projected = project_inclusive(parse_expression("k > 9"), spec, schema)
    assert not summaries_might_match(projected, spec, parts)
    with pytest.raises(ValidationError, match="not bound"):
        summaries_might_match(EqualTo("k", 1), spec, parts)


# -- end to end: rows, partitions, files, manifests ---------------------------------------------------------------


def random_rows(rng: random.Random, n: int) -> list[dict]:
    ts_points = [-DAY, -DAY + 999_999, -1, 0, TS_2024_01_02, TS_2024_01_02 + 5 * DAY + 3 * HOUR]
    rows = []
    for i in range(n):
        rows.append({
            "id": rng.choice([rng.randint(-50, 50), 34, INT_MIN]),
            "ts": rng.choice([None, rng.choice(ts_points) + rng.choice([-1, 0, 1, 7 * HOUR, -3 * DAY])]),
            "category": rng.choice([None, "", "a", "abc", "abcd", "abd", "b", "\u00e9t\u00e9"]),
            "f": rng.choice([None, NAN, -1.0, 0.0, 1.0, 2.5]),
            "n": rng.choice([None, 0, 1, 2]),
        })
    return rows


def random_expr(rng: random.Random, rows: list[dict], depth: int = 0) -> BooleanExpression:
    if depth < 2 and rng.random() < 0.45:
        kind = rng.choice([And, Or, Not])
        if kind is Not:
            return Not(random_expr(rng, rows, depth + 1))
        return kind(random_expr(rng, rows, depth + 1), random_expr(rng, rows, depth + 1))
    column = rng.choice(["id", "ts", "category", "f", "n"])
    present = [r[column] for r in rows if r[column] is not None and r[column] == r[column]]
    v = rng.choice(present)
    if column == "ts":
        v += rng.choice([-1, 0, 1, DAY])
    op = rng.choice([LessThan, LessThanOrEqual, GreaterThan, GreaterThanOrEqual, EqualTo, NotEqualTo, In, NotIn,
                     IsNull, NotNull] + ([StartsWith, NotStartsWith] if column == "category" else [])
                    + ([IsNaN, NotNaN] if column == "f" else []))
    if op in (IsNull, NotNull, IsNaN, NotNaN):
        return op(column)
    if op in (In, NotIn):
        return op(column, tuple({v, rng.choice(present)}))
    if op in (StartsWith, NotStartsWith):
        return op(column, v[:rng.randint(0, len(v))])
    return op(column, v)


def test_end_to_end_soundness():
    rng = random.Random(2024)
    spec = build_spec(SCHEMA, ["day(ts)", "bucket(4, id)", "truncate(2, category)", "f"])
    fns = [f.transform.bind(SCHEMA.find_field(f.source_id).field_type) for f in spec.fields]
    names = [SCHEMA.find_field(f.source_id).name for f in spec.fields]
    ptype = spec.partition_type(SCHEMA)
    for _ in range(3):
        rows = random_rows(rng, 120)
        table = pa.table({
            "id": pa.array([r["id"] for r in rows], pa.int64()),
            "ts": pa.array([r["ts"] for r in rows], pa.int64()).cast(pa.timestamp("us")),
            "category": pa.array([r["category"] for r in rows], pa.string()),
            "f": pa.array([r["f"] for r in rows], pa.float64()),
            "n": pa.array([r["n"] for r in rows], pa.int32()),
        })
        partitions = [tuple(fn(r[name]) for fn, name in zip(fns, names)) for r in rows]
        by_partition: dict[tuple, list[int]] = {}
        for i, p in enumerate(partitions):
            by_partition.setdefault(p, []).append(i)
        keys = list(by_partition)
        manifests = [keys[i::3] for i in range(3)]
        for _ in range(50):
            expr = bind(random_expr(rng, rows), SCHEMA)
            mask = evaluate_arrow(expr, table).to_pylist()
            inclusive = project_inclusive(expr, spec, SCHEMA)
            strict = project_strict(expr, spec, SCHEMA)
            for p, idx in by_partition.items():
                any_match = any(mask[i] for i in idx)
                all_match = all(mask[i] for i in idx)
                if any_match:
                    assert evaluate_partition(inclusive, ptype, p), (str(expr), p)
                if evaluate_partition(strict, ptype, p):
                    assert all_match, (str(expr), p)
                rest = residual(expr, spec, SCHEMA, p)
                rest_mask = evaluate_arrow(rest, table.take(idx)).to_pylist()
                assert rest_mask == [mask[i] for i in idx], (str(expr), p, str(rest))
            for keys_ in manifests:
                if any(mask[i] for k in keys_ for i in by_partition[k]):
                    parts = tuple(summary(f.field_type, [k[j] for k in keys_]) for j, f in enumerate(ptype.fields))
                    assert summaries_might_match(inclusive, spec, parts), (str(expr), keys_)
