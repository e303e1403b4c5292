"""Tests for the expression tree and its text form, parsing (expression_parser), binding (expression_binding),
Arrow evaluation (row_evaluation) and metrics pruning (metrics_evaluation)."""

from __future__ import annotations

import datetime
import math
import random
import struct
import uuid
from decimal import Decimal

import pyarrow as pa
import pytest

from engine.errors import CorruptFileError, ValidationError
from engine.model import values
from engine.model.data_file import DataFile
from engine.model.expression_binding import bind, negate, rewrite_not
from engine.model.expression_parser import parse_expression
from engine.model.expressions import (
    AlwaysFalse,
    AlwaysTrue,
    And,
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
    and_,
    is_bound,
    or_,
    referenced_field_ids,
    referenced_names,
)
from engine.model.metrics_evaluation import metrics_might_match
from engine.model.row_evaluation import evaluate_arrow
from engine.model.schema import Schema
from engine.model.types import (
    BinaryType,
    BooleanType,
    DateType,
    DecimalType,
    DoubleType,
    FixedType,
    FloatType,
    IntegerType,
    ListType,
    LongType,
    MapType,
    NestedField,
    StringType,
    StructType,
    TimestampNsType,
    TimestampType,
    TimestamptzType,
    TimeType,
    UUIDType,
)

NAN = float("nan")


def _f(field_id: int, name: str, t, required: bool = False) -> NestedField:
    return NestedField(field_id=field_id, name=name, field_type=t, required=required)


SCHEMA = Schema((
    _f(1, "id", LongType(), required=True),
    _f(2, "i", IntegerType()),
    _f(3, "f", FloatType()),
    _f(4, "d", DoubleType()),
    _f(5, "s", StringType()),
    _f(6, "dec", DecimalType(10, 2)),
    _f(7, "day", DateType()),
    _f(8, "t", TimeType()),
    _f(9, "ts", TimestampType()),
    _f(10, "tstz", TimestamptzType()),
    _f(11, "u", UUIDType()),
    _f(12, "bin", BinaryType()),
    _f(13, "fx", FixedType(3)),
    _f(14, "flag", BooleanType()),
    _f(15, "loc", StructType((_f(16, "lat", DoubleType(), required=True), _f(17, "name", StringType())))),
    _f(18, "tags", ListType(element_id=19, element_type=StringType())),
    _f(20, "props", MapType(key_id=21, key_type=StringType(), value_id=22, value_type=LongType())),
    _f(23, "Mixed", StringType()),
    _f(24, "req", StructType((_f(25, "x", IntegerType(), required=True),)), required=True),
))


def ref(name: str) -> BoundReference:
    """The bound reference ``bind`` makes for an optional column of SCHEMA."""
    return bind(IsNull(name), SCHEMA).term


F32_0_1 = struct.unpack("<f", struct.pack("<f", 0.1))[0]


# -- parsing ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("text, expected", [
    ("a = 1", EqualTo("a", 1)),
    ("a == 1", EqualTo("a", 1)),
    ("a != 'x'", NotEqualTo("a", "x")),
    ("a <> 'x'", NotEqualTo("a", "x")),
    ("a < -2", LessThan("a", -2)),
    ("a <= 2.50", LessThanOrEqual("a", Decimal("2.50"))),
    ("a > 1e3", GreaterThan("a", 1000.0)),
    ("a >= -.5", GreaterThanOrEqual("a", Decimal("-0.5"))),
    ("5 < a", GreaterThan("a", 5)),
    ("5 >= a", LessThanOrEqual("a", 5)),
    ("'x' = a", EqualTo("a", "x")),
    ("a IS NULL", IsNull("a")),
    ("a is not null", NotNull("a")),
    ("a IS NAN", IsNaN("a")),
    ("a IS NOT NaN", NotNaN("a")),
    ("isnan(a)", IsNaN("a")),
    ("NOT isnan(a)", Not(IsNaN("a"))),
    ("a IN (1, 2, 3)", In("a", (1, 2, 3))),
    ("a NOT IN ('x')", NotIn("a", ("x",))),
    ("a BETWEEN 1 AND 5", And(GreaterThanOrEqual("a", 1), LessThanOrEqual("a", 5))),
    ("a NOT BETWEEN 1 AND 5", Not(And(GreaterThanOrEqual("a", 1), LessThanOrEqual("a", 5)))),
    ("a LIKE 'ab%'", StartsWith("a", "ab")),
    ("a NOT LIKE 'ab%'", NotStartsWith("a", "ab")),
    ("a LIKE '50\\%\\_x%'", StartsWith("a", "50%_x")),
    ("a LIKE 'exact'", EqualTo("a", "exact")),
    ("a NOT LIKE 'exact'", NotEqualTo("a", "exact")),
    ("a = 'it''s'", EqualTo("a", "it's")),
    ("a = ''", EqualTo("a", "")),
    ("a = X'00fF'", EqualTo("a", b"\x00\xff")),
    ("a = true AND b = FALSE", And(EqualTo("a", True), EqualTo("b", False))),
    ("flag", EqualTo("flag", True)),
    ("NOT flag", Not(EqualTo("flag", True))),
    ("true", AlwaysTrue()),
    ("FALSE", AlwaysFalse()),
    ("a.b.c = 1", EqualTo("a.b.c", 1)),
    ('"my col" = 1', EqualTo("my col", 1)),
    ('"say ""hi""" = 1', EqualTo('say "hi"', 1)),
    ("`order` = 1", EqualTo("order", 1)),
    ('loc."the name" = 1', EqualTo("loc.the name", 1)),
    ('"and" = 1', EqualTo("and", 1)),
    ("date = 1", EqualTo("date", 1)),
    ("d = DATE '2024-02-29'", EqualTo("d", datetime.date(2024, 2, 29))),
    ("t = TIME '10:11:12.5'", EqualTo("t", datetime.time(10, 11, 12, 500000))),
    ("ts = TIMESTAMP '2024-01-02 03:04:05'", EqualTo("ts", datetime.datetime(2024, 1, 2, 3, 4, 5))),
    ("ts = TIMESTAMP '2024-01-02T03:04:05+02:00'",
     EqualTo("ts", datetime.datetime(2024, 1, 2, 3, 4, 5, tzinfo=datetime.timezone(datetime.timedelta(hours=2))))),
    ("ts = TIMESTAMPTZ '2024-01-02 03:04:05'",
     EqualTo("ts", datetime.datetime(2024, 1, 2, 3, 4, 5, tzinfo=datetime.timezone.utc))),
    ("d = DATE '+10000-01-01'", EqualTo("d", "+10000-01-01")),  # beyond Python's dates: left to bind
    ("a = 1 OR b = 2 AND c = 3", Or(EqualTo("a", 1), And(EqualTo("b", 2), EqualTo("c", 3)))),
    ("(a = 1 OR b = 2) AND c = 3", And(Or(EqualTo("a", 1), EqualTo("b", 2)), EqualTo("c", 3))),
    ("a = 1 AND b = 2 AND c = 3", And(And(EqualTo("a", 1), EqualTo("b", 2)), EqualTo("c", 3))),
    ("NOT NOT a = 1", Not(Not(EqualTo("a", 1)))),
    ("NOT a = 1 AND b = 2", And(Not(EqualTo("a", 1)), EqualTo("b", 2))),
    ("  ( ( a=1 ) )  ", EqualTo("a", 1)),
    ("a BETWEEN 1 AND 2 AND b = 3", And(And(GreaterThanOrEqual("a", 1), LessThanOrEqual("a", 2)), EqualTo("b", 3))),
])
def test_parse(text, expected):
    assert parse_expression(text) == expected


@pytest.mark.parametrize("text", [
    "", "   ", "a =", "a = 1 AND", "(a = 1", "a = 1)", "a = b", "1 = 2", "a = null", "null = a", "a != NULL",
    "a IN ()", "a IN (1, null)", "a IS 1", "a LIKE '%x'", "a LIKE 'a%b%'", "a LIKE 'a_%'", "a LIKE 5",
    "a NOT = 1", "a = 'unterminated", "a = #", "and = 1", "a = X'0g'", "a BETWEEN 1 OR 2", "5", "'x'",
    "a = 1 b = 2", "a.= 1",
])
def test_parse_errors(text):
    with pytest.raises(ValidationError, match="^Cannot parse expression"):
        parse_expression(text)


def test_parse_error_names_position():
    with pytest.raises(ValidationError, match=r"position 6"):
        parse_expression("a = 1 b")


def test_parse_rejects_non_string():
    with pytest.raises(ValidationError):
        parse_expression(5)  # type: ignore[arg-type]


# -- printing --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("expr, text", [
    (EqualTo("a", 1), "a = 1"),
    (NotEqualTo("a", "it's"), "a != 'it''s'"),
    (LessThan("a", 1.5), "a < 1.5e0"),
    (GreaterThan("a", Decimal("100")), "a > 100."),
    (In("a", (1, 2)), "a IN (1, 2)"),
    (NotIn("a", ("x",)), "a NOT IN ('x')"),
    (StartsWith("a", "5%_\\"), "a LIKE '5\\%\\_\\\\%'"),
    (NotStartsWith("a", "p"), "a NOT LIKE 'p%'"),
    (IsNull("my col"), '"my col" IS NULL'),
    (NotNull("and"), '"and" IS NOT NULL'),
    (IsNaN("a"), "a IS NAN"),
    (NotNaN("a"), "a IS NOT NAN"),
    (Or(And(EqualTo("a", 1), EqualTo("b", 2)), Not(EqualTo("c", 3))), "(a = 1 AND b = 2) OR NOT (c = 3)"),
    (And(EqualTo("a", 1), Or(EqualTo("b", 2), EqualTo("c", 3))), "a = 1 AND (b = 2 OR c = 3)"),
    (EqualTo("a", b"\x01"), "a = X'01'"),
    (EqualTo("a", datetime.date(2024, 1, 2)), "a = DATE '2024-01-02'"),
    (AlwaysTrue(), "true"),
])
def test_str(expr, text):
    assert str(expr) == text


@pytest.mark.parametrize("expr", [
    And(And(EqualTo("a", 1), EqualTo("b", 2)), EqualTo("c", 3)),
    And(EqualTo("a", 1), And(EqualTo("b", 2), EqualTo("c", 3))),
    Or(Or(EqualTo("a", 1), EqualTo("b", 2)), EqualTo("c", 3)),
    Or(EqualTo("a", 1), Or(EqualTo("b", 2), EqualTo("c", 3))),
    Not(Not(Or(IsNull("x"), NotNaN("y")))),
    In("a", (1, -2, Decimal("3.25"), 4.5, "x", True, b"\x00")),
    StartsWith('we"ird.name', "50%_\\'"),
    EqualTo("ts", datetime.datetime(2024, 1, 2, 3, 4, 5, 6)),
    EqualTo("ts", datetime.datetime(2024, 1, 2, 3, 4, 5, tzinfo=datetime.timezone.utc)),
    EqualTo("t", datetime.time(1, 2, 3)),
    LessThan("x", -1e-300),
    GreaterThan("x", Decimal("-12345678901234567890.123")),
    AlwaysFalse(),
])
def test_str_parses_back(expr):
    assert parse_expression(str(expr)) == expr


def test_bound_str_renders_values_by_type():
    bound = bind(parse_expression(
        "day = '2024-01-02' AND ts > '2024-01-02T03:04:05.5' AND tstz < '2024-01-02 03:04:05+01:00' "
        "AND t <= '10:00' AND u = '12345678-1234-5678-1234-567812345678' AND dec IN (1.5, 2)"), SCHEMA)
    text = str(bound)
    assert "day = DATE '2024-01-02'" in text
    assert "ts > TIMESTAMP '2024-01-02T03:04:05.5'" in text
    assert "tstz < TIMESTAMPTZ '2024-01-02T02:04:05+00:00'" in text
    assert "t <= TIME '10:00:00'" in text
    assert "dec IN (1.50, 2.00)" in text
    # the text binds back to the same expression
    assert bind(parse_expression(text), SCHEMA) == bound


# -- building --------------------------------------------------------------------------------------------------


def test_build_with_operators_and_helpers():
    a, b, c = EqualTo("a", 1), IsNull("b"), In("c", [1, 2])
    assert a & b == And(a, b)
    assert a | b == Or(a, b)
    assert ~a == Not(a)
    assert and_(a, b, c) == And(And(a, b), c)
    assert or_(a, b, c) == Or(Or(a, b), c)
    assert and_() == AlwaysTrue() and or_() == AlwaysFalse()
    assert c.literals == (1, 2)  # lists become tuples
    assert EqualTo("a", 1).term == Reference("a")
    assert hash(EqualTo("a", 1)) == hash(EqualTo("a", 1))


def test_build_rejects_bad_parts():
    with pytest.raises(ValidationError, match="term must be a column name"):
        EqualTo(5, 1)
    with pytest.raises(ValidationError, match="must be an expression"):
        And(EqualTo("a", 1), "b = 2")


def test_references():
    expr = parse_expression("i = 1 AND (s LIKE 'a%' OR NOT loc.lat > 0)")
    assert referenced_names(expr) == {"i", "s", "loc.lat"}
    assert not is_bound(expr)
    bound = bind(expr, SCHEMA)
    assert is_bound(bound)
    assert referenced_field_ids(bound) == {2, 5, 16}
    with pytest.raises(ValidationError, match="not bound"):
        referenced_field_ids(expr)


# -- binding ---------------------------------------------------------------------------------------------------


def test_bind_reference_carries_id_type_path_and_nullability():
    bound = bind(EqualTo("loc.name", "x"), SCHEMA)
    assert bound == EqualTo(BoundReference(field_id=17, name="loc.name", field_type=StringType(),
                                           path=("loc", "name"), required=False), "x")
    # a required field inside an optional struct can still be null
    assert bind(IsNull("loc.lat"), SCHEMA) == IsNull(BoundReference(
        field_id=16, name="loc.lat", field_type=DoubleType(), path=("loc", "lat"), required=False))
    # required all the way down: never null
    assert bind(IsNull("req.x"), SCHEMA) == AlwaysFalse()
    assert bind(NotNull("req.x"), SCHEMA) == AlwaysTrue()
    assert bind(IsNull("id"), SCHEMA) == AlwaysFalse()
    assert bind(NotNull("id"), SCHEMA) == AlwaysTrue()


@pytest.mark.parametrize("name, literal, expected", [
    ("i", 5, 5),
    ("i", Decimal("5.0"), 5),
    ("id", 2**40, 2**40),
    ("f", Decimal("0.1"), F32_0_1),
    ("f", 0.1, F32_0_1),
    ("f", 1, 1.0),
    ("d", Decimal("0.1"), 0.1),
    ("d", 3, 3.0),
    ("dec", Decimal("1.5"), Decimal("1.50")),
    ("dec", 2, Decimal("2.00")),
    ("dec", "3.25", Decimal("3.25")),
    ("dec", 0.1, Decimal("0.10")),
    ("day", "2024-01-02", 19724),
    ("day", datetime.date(1969, 12, 31), -1),
    ("t", "00:00:01.5", 1_500_000),
    ("t", datetime.time(0, 1), 60_000_000),
    ("ts", "2024-01-02 00:00:00", 19724 * 86_400_000_000),
    ("ts", "2024-01-02", 19724 * 86_400_000_000),
    ("ts", datetime.date(2024, 1, 2), 19724 * 86_400_000_000),
    ("ts", datetime.datetime(1970, 1, 1, 0, 0, 1), 1_000_000),
    ("tstz", "1970-01-01T01:00:00+01:00", 0),
    ("tstz", "1970-01-01 00:00:01", 1_000_000),  # no offset: UTC
    ("tstz", datetime.datetime(1970, 1, 1, 0, 0, 2), 2_000_000),
    ("u", "12345678-1234-5678-1234-567812345678", uuid.UUID("12345678-1234-5678-1234-567812345678")),
    ("u", uuid.UUID(int=7), uuid.UUID(int=7)),
    ("bin", b"\x00", b"\x00"),
    ("fx", b"abc", b"abc"),
    ("flag", False, False),
    ("s", "x", "x"),
])
def test_bind_converts_literals(name, literal, expected):
    bound = bind(EqualTo(name, literal), SCHEMA)
    assert isinstance(bound, EqualTo)
    assert bound.literal == expected
    assert type(bound.literal) is type(expected)


@pytest.mark.parametrize("name, literal, message", [
    ("i", "5", "does not fit column 'i'"),
    ("i", 1.5, "does not fit column 'i'"),
    ("i", True, "does not fit column 'i'"),
    ("s", 5, "does not fit column 's'"),
    ("flag", 1, "does not fit column 'flag'"),
    ("dec", Decimal("1.234"), "does not fit column 'dec'"),
    ("dec", "abc", "does not fit column 'dec'"),
    ("day", "2024-13-01", "does not fit column 'day'"),
    ("day", datetime.datetime(2024, 1, 1), "does not fit column 'day'"),
    ("ts", "2024-01-01T00:00:00+01:00", "does not fit column 'ts'"),
    ("u", "not-a-uuid", "does not fit column 'u'"),
    ("fx", b"ab", "does not fit column 'fx'"),
    ("d", NAN, "use IS NAN"),
    ("d", None, "use IS NULL"),
    ("loc", 1, "not a primitive type"),
    ("nope", 1, "column 'nope' is not in the schema"),
    ("tags.element", "x", "inside a list or map"),
    ("props.value", 1, "inside a list or map"),
    ("props.key", "k", "inside a list or map"),
    ("mixed", "x", "column 'mixed' is not in the schema"),
])
def test_bind_errors_name_the_column(name, literal, message):
    with pytest.raises(ValidationError, match=f"^Cannot bind .*{message}"):
        bind(EqualTo(name, literal), SCHEMA)


def test_bind_predicate_type_errors():
    with pytest.raises(ValidationError, match="column 'i' is int, not float or double"):
        bind(IsNaN("i"), SCHEMA)
    with pytest.raises(ValidationError, match="column 'bin' is binary, not string"):
        bind(StartsWith("bin", "a"), SCHEMA)
    with pytest.raises(ValidationError, match="prefix 5 is not a string"):
        bind(StartsWith("s", 5), SCHEMA)
    with pytest.raises(ValidationError, match="does not fit column 'i'"):
        bind(In("i", (1, "x")), SCHEMA)
    with pytest.raises(ValidationError, match="use IS NULL"):
        bind(NotIn("i", (1, None)), SCHEMA)


def test_bind_case_insensitive():
    assert bind(EqualTo("MIXED", "x"), SCHEMA, case_sensitive=False).term.name == "Mixed"
    assert bind(EqualTo("LOC.Name", "x"), SCHEMA, case_sensitive=False).term.field_id == 17
    with pytest.raises(ValidationError, match="not in the schema"):
        bind(EqualTo("MIXED", "x"), SCHEMA)


def test_bind_null_checks_on_structs():
    assert bind(IsNull("loc"), SCHEMA).term.field_type == SCHEMA.find_field("loc").field_type


def test_bind_in_lists():
    i = ref("i")
    assert bind(In("i", (3, 1, 3, 2)), SCHEMA) == In(i, (1, 2, 3))
    assert bind(In("i", (7, 7)), SCHEMA) == EqualTo(i, 7)
    assert bind(NotIn("i", (7,)), SCHEMA) == NotEqualTo(i, 7)
    assert bind(NotIn("i", (2, 1)), SCHEMA) == NotIn(i, (1, 2))
    # values an int column cannot hold match nothing
    assert bind(In("i", (2**40, 5)), SCHEMA) == EqualTo(i, 5)
    assert bind(In("i", (2**40,)), SCHEMA) == AlwaysFalse()
    assert bind(NotIn("i", (2**40,)), SCHEMA) == NotNull(i)
    assert bind(NotIn("id", (2**70,)), SCHEMA) == AlwaysTrue()


@pytest.mark.parametrize("text, expected", [
    ("i < 3000000000", "i IS NOT NULL"),
    ("i <= 3000000000", "i IS NOT NULL"),
    ("i != 3000000000", "i IS NOT NULL"),
    ("i > 3000000000", "false"),
    ("i >= 3000000000", "false"),
    ("i = 3000000000", "false"),
    ("i > -3000000000", "i IS NOT NULL"),
    ("i >= -3000000000", "i IS NOT NULL"),
    ("i < -3000000000", "false"),
    ("i = -3000000000", "false"),
    ("id < 9223372036854775808", "true"),  # required long column
    ("i = 2147483647", "i = 2147483647"),
])
def test_bind_out_of_range_integers(text, expected):
    assert str(bind(parse_expression(text), SCHEMA)) == expected


@pytest.mark.parametrize("text, expected", [
    ("i = 1 AND true", "i = 1"),
    ("i = 1 AND false", "false"),
    ("i = 1 OR true", "true"),
    ("i = 1 OR false", "i = 1"),
    ("NOT true", "false"),
    ("NOT NOT i = 1", "i = 1"),
    ("NOT (id IS NULL)", "true"),
    ("i = 1 AND id IS NULL", "false"),
])
def test_bind_folds_constants(text, expected):
    assert str(bind(parse_expression(text), SCHEMA)) == expected


def test_bind_is_idempotent():
    bound = bind(parse_expression("i = 1 AND s LIKE 'a%' AND NOT d IS NAN"), SCHEMA)
    assert bind(bound, SCHEMA) == bound


def test_bind_rejects_non_expressions():
    with pytest.raises(ValidationError):
        bind("i = 1", SCHEMA)  # type: ignore[arg-type]


# -- negation --------------------------------------------------------------------------------------------------


def test_negate_and_rewrite_not():
    i, d, s = ref("i"), ref("d"), ref("s")
    assert negate(LessThan(i, 5)) == GreaterThanOrEqual(i, 5)
    assert negate(EqualTo(i, 5)) == NotEqualTo(i, 5)
    assert negate(In(i, (1, 2))) == NotIn(i, (1, 2))
    assert negate(StartsWith(s, "a")) == NotStartsWith(s, "a")
    assert negate(IsNull(i)) == NotNull(i)
    assert negate(IsNaN(d)) == NotNaN(d)
    # NaN fails every ordering, so the negation of an ordering keeps the NaNs
    assert negate(LessThan(d, 5.0)) == Or(GreaterThanOrEqual(d, 5.0), IsNaN(d))
    assert negate(EqualTo(d, 5.0)) == NotEqualTo(d, 5.0)
    assert negate(And(EqualTo(i, 1), Not(EqualTo(i, 2)))) == Or(NotEqualTo(i, 1), EqualTo(i, 2))
    assert rewrite_not(Not(Or(GreaterThan(i, 1), Not(IsNull(s))))) == And(LessThanOrEqual(i, 1), IsNull(s))
    assert rewrite_not(Not(AlwaysTrue())) == AlwaysFalse()
    with pytest.raises(ValidationError, match="not bound"):
        negate(EqualTo("i", 1))


# -- Arrow evaluation ------------------------------------------------------------------------------------------

ROWS = pa.table({
    "id": pa.array([1, 2, 3, 4, 5, 6], pa.int64()),
    "i": pa.array([1, 2, None, 4, 5, None], pa.int32()),
    "d": pa.array([1.0, NAN, None, 4.0, -0.0, 2.5], pa.float64()),
    "f": pa.array([0.1, NAN, None, 1.5, 2.0, 3.0], pa.float32()),
    "s": pa.array(["apple", "banana", None, "apricot", "", "cherry"], pa.string()),
    "flag": pa.array([True, False, None, True, False, None]),
    "loc": pa.array([{"lat": 1.0, "name": "a"}, {"lat": -1.0, "name": None}, None,
                     {"lat": 3.0, "name": "c"}, None, {"lat": NAN, "name": "f"}],
                    pa.struct([pa.field("lat", pa.float64(), nullable=False), pa.field("name", pa.string())])),
})


def selected(text: str, table: pa.Table = ROWS) -> list[int]:
    mask = evaluate_arrow(bind(parse_expression(text), SCHEMA), table)
    assert isinstance(mask, pa.BooleanArray)
    assert mask.null_count == 0 and len(mask) == table.num_rows
    return table.filter(mask).column("id").to_pylist()


@pytest.mark.parametrize("text, ids", [
    ("true", [1, 2, 3, 4, 5, 6]),
    ("false", []),
    ("i = 2", [2]),
    ("i != 2", [1, 4, 5]),
    ("NOT (i = 2)", [1, 4, 5]),  # NOT null is null: rows with a null i are not selected
    ("NOT NOT (i = 2)", [2]),
    ("i IS NULL", [3, 6]),
    ("NOT (i IS NULL)", [1, 2, 4, 5]),
    ("i IN (1, 5, 99)", [1, 5]),
    ("i NOT IN (1, 5)", [2, 4]),
    ("NOT (i IN (1, 5))", [2, 4]),
    ("i BETWEEN 2 AND 4", [2, 4]),
    ("i NOT BETWEEN 2 AND 4", [1, 5]),
    ("i > 1 OR i IS NULL", [2, 3, 4, 5, 6]),
    ("i > 100 OR s = 'apple'", [1]),
    ("i = 5 OR s = 'cherry'", [5, 6]),  # null OR true is true
    ("NOT (i > 1 AND s LIKE 'a%')", [1, 2, 5, 6]),  # false AND null is false; null AND null is null
    ("NOT (i > 1 OR s LIKE 'b%')", [1]),
    ("i > 3000000000", []),
    ("i < 3000000000", [1, 2, 4, 5]),
    ("i != 3000000000", [1, 2, 4, 5]),
    ("id < 3 OR id IS NULL", [1, 2]),
    ("d < 3", [1, 5, 6]),  # NaN < 3 is false
    ("NOT (d < 3)", [2, 4]),  # ... so NOT (NaN < 3) is true
    ("d >= 3", [4]),
    ("d > 2 OR d <= 2", [1, 4, 5, 6]),  # not NaN, not null
    ("d = 0", [5]),  # -0.0 = 0
    ("d != 1", [2, 4, 5, 6]),  # NaN != 1 is true
    ("d IS NAN", [2]),
    ("d IS NOT NAN", [1, 3, 4, 5, 6]),  # null is not NaN
    ("NOT isnan(d)", [1, 3, 4, 5, 6]),
    ("d IS NAN OR d IS NULL", [2, 3]),
    ("d IN (1, 4)", [1, 4]),
    ("d NOT IN (1, 4)", [2, 5, 6]),
    ("f = 0.1", [1]),  # the literal is rounded to single precision like the column
    ("f < 0.1", []),
    ("f IS NAN", [2]),
    ("f > 1", [4, 5, 6]),
    ("s LIKE 'ap%'", [1, 4]),
    ("s NOT LIKE 'ap%'", [2, 5, 6]),
    ("s LIKE '%'", [1, 2, 4, 5, 6]),
    ("s = ''", [5]),
    ("s >= 'b'", [2, 6]),
    ("s < 'b'", [1, 4, 5]),
    ("flag", [1, 4]),
    ("NOT flag", [2, 5]),
    ("flag = false OR flag IS NULL", [2, 3, 5, 6]),
    ("loc.lat > 0", [1, 4]),  # NaN and null parents excluded
    ("loc.lat IS NULL", [3, 5]),  # a null struct makes its fields null
    ("loc.name IS NULL", [2, 3, 5]),
    ("loc IS NULL", [3, 5]),
    ("loc.lat IS NAN", [6]),
    ("NOT (loc.lat > 0)", [2, 6]),
])
def test_evaluate_arrow_three_valued(text, ids):
    assert selected(text) == ids


def test_evaluate_arrow_chunked_and_empty():
    chunked = pa.concat_tables([ROWS.slice(0, 2), ROWS.slice(2, 3), ROWS.slice(5)])
    assert chunked.column("i").num_chunks == 3
    assert selected("i != 2", chunked) == [1, 4, 5]
    assert selected("true", chunked) == [1, 2, 3, 4, 5, 6]
    empty = ROWS.slice(0, 0)
    assert selected("i = 1", empty) == []
    assert selected("false", empty) == []
    batch = ROWS.to_batches()[0]
    mask = evaluate_arrow(bind(parse_expression("i = 1"), SCHEMA), batch)
    assert mask.to_pylist() == [True, False, False, False, False, False]


def test_evaluate_arrow_encodings_and_temporal_types():
    u1, u2 = uuid.UUID(int=1), uuid.UUID(int=2)
    table = pa.table({
        "id": pa.array([1, 2, 3], pa.int64()),
        "s": pa.array(["x", "y", None]).dictionary_encode(),
        "Mixed": pa.array(["x", "yy", None], pa.large_string()),
        "u": pa.array([u1.bytes, u2.bytes, None], pa.uuid()),
        "ts": pa.array([0, 1_500_000_000, None], pa.timestamp("ns")),  # 1.5 s in nanoseconds
        "tstz": pa.array([0, 2_000, None], pa.timestamp("ms", tz="UTC")),
        "day": pa.array([datetime.date(2024, 1, 1), datetime.date(1969, 12, 31), None], pa.date32()),
        "t": pa.array([1_000, 2_000, None], pa.time32("ms")),
        "dec": pa.array([Decimal("1.50"), Decimal("2.25"), None], pa.decimal128(10, 2)),
        "bin": pa.array([b"\x00", b"\x01\x02", None], pa.binary()),
        "fx": pa.array([b"abc", b"abd", None], pa.binary(3)),
        "i": pa.array([1, 2, None], pa.int16()),
    })
    assert selected("s = 'y'", table) == [2]
    assert selected("s IN ('x', 'z')", table) == [1]
    assert selected("Mixed LIKE 'y%'", table) == [2]
    assert selected("Mixed NOT IN ('x')", table) == [2]
    assert selected(f"u = '{u2}'", table) == [2]
    assert selected(f"u IN ('{u1}', '{uuid.UUID(int=9)}')", table) == [1]
    assert selected("u > '00000000-0000-0000-0000-000000000001'", table) == [2]
    assert selected("ts > '1970-01-01 00:00:01'", table) == [2]
    assert selected("ts = '1970-01-01 00:00:01.5'", table) == [2]
    assert selected("ts IN ('1970-01-01 00:00:01.5', '1970-01-01')", table) == [1, 2]
    assert selected("tstz = '1970-01-01T01:00:02+01:00'", table) == [2]
    assert selected("tstz IN ('1970-01-01T00:00:02.0005')", table) == []  # cannot be held in milliseconds
    assert selected("day < DATE '2000-01-01'", table) == [2]
    assert selected("day = '2024-01-01'", table) == [1]
    assert selected("day IN ('2024-01-01')", table) == [1]
    assert selected("t >= '00:00:01.5'", table) == [2]
    assert selected("t IN ('00:00:01', '00:00:01.0001')", table) == [1]
    assert selected("dec > 2", table) == [2]
    assert selected("dec IN (1.5, 7)", table) == [1]
    assert selected("bin >= X'01'", table) == [2]
    assert selected("fx = X'616264'", table) == [2]
    assert selected("fx IN (X'616263')", table) == [1]
    assert selected("i IN (2, 100000)", table) == [2]  # 100000 does not fit the int16 column and matches nothing
    assert selected("i < 100000", table) == [1, 2]


@pytest.mark.parametrize("text", [
    "s = 'apple'", "s != 'apple'", "s < 'b'", "s >= 'banana'", "s IN ('apple', 'cherry')", "s NOT IN ('apple')",
    "s LIKE 'ap%'", "s NOT LIKE 'ap%'", "s IS NULL", "s IS NOT NULL", "NOT (s = 'apple')",
    "s = 'apple' OR i = 2", "s = 'zzz'",
])
def test_evaluate_arrow_on_dictionaries_as_on_their_values(text):
    """A dictionary-encoded string column (as a scan reads a filter's columns) selects the rows its values would:
    per distinct value, spread by the indices (compared when one value or none matches, else taken); null
    indices, unsigned ones, a null in the dictionary, chunks with dictionaries of their own and an empty dictionary
    included."""
    plain = ROWS.select(["id", "i", "s"])
    expected = selected(text, plain)
    values = plain.column("s").combine_chunks()
    encodings = {
        "one dictionary": pa.chunked_array([values.dictionary_encode()]),
        "null in the dictionary": pa.chunked_array([pa.DictionaryArray.from_arrays(
            pa.array([0, 1, 2, 3, 4, 5], pa.int32()), pa.array(["apple", "banana", None, "apricot", "", "cherry"]))]),
        "two chunks": pa.chunked_array([values.slice(0, 3).dictionary_encode(), values.slice(3).dictionary_encode()]),
        "unsigned indices": pa.chunked_array([pa.DictionaryArray.from_arrays(
            values.dictionary_encode().indices.cast(pa.uint8()), values.dictionary_encode().dictionary)]),
    }
    for name, encoded in encodings.items():
        table = plain.set_column(2, "s", encoded)
        assert selected(text, table) == expected, name
    empty = pa.DictionaryArray.from_arrays(pa.array([None] * 6, pa.int32()), pa.array([], pa.string()))
    nulls = plain.set_column(2, "s", pa.chunked_array([empty]))
    assert selected(text, nulls) == selected(text, plain.set_column(2, "s", pa.nulls(6, pa.string())))


def test_evaluate_arrow_errors():
    with pytest.raises(ValidationError, match="not bound"):
        evaluate_arrow(EqualTo("i", 1), ROWS)
    with pytest.raises(ValidationError, match="column 'dec' is not in the data"):
        evaluate_arrow(bind(EqualTo("dec", 1), SCHEMA), ROWS)


# -- metrics ---------------------------------------------------------------------------------------------------

BOUND_TYPES = {2: IntegerType(), 4: DoubleType(), 5: StringType(), 7: DateType(), 6: DecimalType(10, 2),
               11: UUIDType()}


def data_file(*, record_count: int = 10, values_: dict | None = None, nulls: dict | None = None,
              nans: dict | None = None, lower: dict | None = None, upper: dict | None = None) -> DataFile:
    def encode(bounds):
        if bounds is None:
            return None
        return {k: values.to_bytes(BOUND_TYPES[k], v) for k, v in bounds.items()}

    return DataFile(file_path="/tmp/w/data/f.parquet", record_count=record_count, file_size_in_bytes=100,
                    value_counts=values_, null_value_counts=nulls, nan_value_counts=nans,
                    lower_bounds=encode(lower), upper_bounds=encode(upper))


def might(text: str, file: DataFile) -> bool:
    return metrics_might_match(bind(parse_expression(text), SCHEMA), file, SCHEMA)


I_FILE = data_file(values_={2: 10}, nulls={2: 2}, lower={2: 10}, upper={2: 20})


@pytest.mark.parametrize("text, expected", [
    ("i = 9", False), ("i = 10", True), ("i = 20", True), ("i = 21", False), ("i = 15", True),
    ("i < 10", False), ("i < 11", True), ("i <= 9", False), ("i <= 10", True),
    ("i > 20", False), ("i > 19", True), ("i >= 21", False), ("i >= 20", True),
    ("i != 10", True), ("i NOT IN (10, 11)", True),
    ("i IN (1, 2, 30)", False), ("i IN (1, 15)", True),
    ("i IS NULL", True), ("i IS NOT NULL", True),
    ("NOT (i < 30)", False), ("NOT (i >= 5)", False), ("NOT (i > 15)", True),
    ("i < 5 OR i > 25", False), ("i < 5 OR i > 15", True), ("i > 15 AND i < 5", False),
    ("NOT (i > 5 AND i < 30)", False),
    ("i BETWEEN 21 AND 30", False), ("i NOT BETWEEN 0 AND 30", False),
    ("true", True), ("false", False),
])
def test_metrics_int_bounds(text, expected):
    assert might(text, I_FILE) is expected


def test_metrics_counts():
    no_nulls = data_file(values_={2: 10}, nulls={2: 0})
    all_nulls = data_file(values_={2: 10, 4: 10, 5: 10}, nulls={2: 10, 4: 10, 5: 10}, nans={4: 0})
    assert not might("i IS NULL", no_nulls)
    assert might("i IS NOT NULL", no_nulls)
    for text in ("i IS NOT NULL", "i = 1", "i != 1", "i < 1", "i IN (1, 2)", "i NOT IN (1, 2)", "d IS NAN",
                 "s LIKE 'a%'", "s NOT LIKE 'a%'", "d > 1", "NOT (d > 1)"):
        assert not might(text, all_nulls), text
    assert might("i IS NULL", all_nulls)
    assert might("d IS NOT NAN", all_nulls)  # null is not NaN
    # no metrics at all: everything might match
    bare = data_file()
    for text in ("i IS NULL", "i IS NOT NULL", "i = 1", "d IS NAN", "d IS NOT NAN", "s LIKE 'a%'"):
        assert might(text, bare), text
    # an empty file matches nothing
    assert not might("true", data_file(record_count=0))
    assert not might("i IS NULL", data_file(record_count=0))


def test_metrics_nan():
    all_nan = data_file(values_={4: 5}, nulls={4: 0}, nans={4: 5})
    assert not might("d IS NOT NAN", all_nan)
    assert might("d IS NAN", all_nan)
    assert not might("d < 1", all_nan) and not might("d = 1", all_nan) and not might("d IN (1, 2)", all_nan)
    assert might("d != 1", all_nan)  # NaN != 1 is true
    assert might("NOT (d < 1)", all_nan)  # ... and so is NOT (NaN < 1)
    nulls_and_nans = data_file(values_={4: 5}, nulls={4: 2}, nans={4: 3})
    assert not might("d >= 1", nulls_and_nans)
    no_nan = data_file(values_={4: 5}, nulls={4: 0}, nans={4: 0}, lower={4: 1.0}, upper={4: 2.0})
    assert not might("d IS NAN", no_nan)
    assert not might("NOT (d < 5)", no_nan)
    assert not might("NOT (d <= 2) AND d IS NOT NULL", no_nan)
    with_nan = data_file(values_={4: 5}, nulls={4: 0}, nans={4: 1}, lower={4: 1.0}, upper={4: 2.0})
    assert might("d IS NAN", with_nan)
    assert might("NOT (d < 5)", with_nan)  # the NaN row matches
    assert not might("d >= 5", with_nan)
    unknown_nan = data_file(values_={4: 5}, nulls={4: 0}, lower={4: 1.0}, upper={4: 2.0})
    assert might("NOT (d < 5)", unknown_nan)
    # a NaN bound (old writers) proves nothing
    nan_bounds = data_file(lower={4: NAN}, upper={4: NAN})
    for text in ("d = 1", "d < 1", "d > 1", "d IN (1, 2)"):
        assert might(text, nan_bounds), text


def test_metrics_strings_and_prefixes():
    # bounds as a writer truncating to 2 characters would store them
    lower = values.truncate_lower_bound(StringType(), "apple", 2)
    upper = values.truncate_upper_bound(StringType(), "apricot", 2)
    file = data_file(values_={5: 4}, nulls={5: 0}, lower={5: lower}, upper={5: upper})
    assert (lower, upper) == ("ap", "aq")
    assert might("s = 'apple'", file)
    assert might("s = 'aq'", file)
    assert not might("s = 'aqa'", file)
    assert not might("s = 'an'", file)
    assert might("s LIKE 'a%'", file)
    assert might("s LIKE 'apr%'", file)
    assert not might("s LIKE 'b%'", file)
    assert not might("s LIKE 'ab%'", file)
    assert might("s NOT LIKE 'ap%'", file)  # the upper bound "aq" does not start with "ap"
    assert not might("s NOT LIKE 'a%'", file)  # both bounds start with "a": every value does
    exact = data_file(values_={5: 4}, nulls={5: 0}, lower={5: "apple"}, upper={5: "apricot"})
    assert not might("s NOT LIKE 'ap%'", exact)
    assert might("s NOT LIKE 'apr%'", exact)
    with_nulls = data_file(values_={5: 4}, nulls={5: 1}, lower={5: "apple"}, upper={5: "apricot"})
    assert might("s NOT LIKE 'ap%'", with_nulls)


def test_metrics_other_types():
    file = data_file(lower={7: 19000, 6: Decimal("1.50"), 11: uuid.UUID(int=5)},
                     upper={7: 19010, 6: Decimal("9.99"), 11: uuid.UUID(int=9)})
    assert not might("day < '2022-01-08'", file)  # 19000 is 2022-0108
    assert might("day <= '2022-01-08'", file)
    assert not might("dec > 9.99", file)
    assert might("dec >= 9.99", file)
    assert not might(f"u = '{uuid.UUID(int=4)}'", file)
    assert might(f"u = '{uuid.UUID(int=6)}'", file)
    # uuid bounds a writer merged from row groups in signed order come out inverted (unsigned, as Iceberg orders
    # uuids): they prove nothing, and a file holding the value is never skipped
    high, low = uuid.UUID("90000000-0000-0000-0000-000000000000"), uuid.UUID("20000000-0000-0000-0000-000000000000")
    inverted = data_file(lower={11: high}, upper={11: low})
    for text in (f"u = '{uuid.UUID(int=6)}'", f"u > '{uuid.UUID(int=2**127 + 1)}'", f"u < '{low}'"):
        assert might(text, inverted), text


def test_metrics_promoted_bounds_and_unbound_input():
    # a long column whose bounds were written as 4-byte ints before the promotion
    file = DataFile(file_path="/tmp/f.parquet", record_count=3, file_size_in_bytes=10,
                    lower_bounds={1: values.to_bytes(IntegerType(), 5)},
                    upper_bounds={1: values.to_bytes(IntegerType(), 9)})
    assert not metrics_might_match(parse_expression("id > 9"), file, SCHEMA)  # binds an unbound expression
    assert metrics_might_match(parse_expression("id > 8"), file, SCHEMA)
    assert not metrics_might_match(parse_expression("ID > 9"), file, SCHEMA, case_sensitive=False)


def test_metrics_in_list_limit():
    file = data_file(lower={2: 1000}, upper={2: 2000})
    assert not might("i IN (" + ", ".join(str(v) for v in range(200)) + ")", file)
    assert might("i IN (" + ", ".join(str(v) for v in range(201)) + ")", file)  # too long to check


def test_metrics_corrupt_bound_names_the_file():
    file = DataFile(file_path="/tmp/w/bad.parquet", record_count=3, file_size_in_bytes=10,
                    lower_bounds={5: b"\xff\xfe"})
    with pytest.raises(CorruptFileError, match="lower bound of column 's'") as info:
        metrics_might_match(bind(EqualTo("s", "a"), SCHEMA), file, SCHEMA)
    assert info.value.path == "/tmp/w/bad.parquet"


PROPERTY_FILTERS = [
    "i = {i}", "i != {i}", "i < {i}", "i <= {i}", "i > {i}", "i >= {i}", "i IN ({i}, {i2})", "i NOT IN ({i})",
    "NOT (i < {i})", "NOT (i = {i} OR i > {i2})", "i IS NULL", "i IS NOT NULL", "i BETWEEN {i} AND {i2}",
    "d = {d}", "d < {d}", "d >= {d}", "NOT (d < {d})", "NOT (d >= {d} AND d <= {d2})", "d IS NAN",
    "d IS NOT NAN", "d IN ({d}, {d2})", "d NOT IN ({d})", "d != {d}",
    "s = '{s}'", "s < '{s}'", "s > '{s}'", "s LIKE '{s}%'", "s NOT LIKE '{s}%'", "NOT (s LIKE '{s}%')",
    "s IN ('{s}', '{s2}')", "NOT (s >= '{s}')",
    "i > {i} AND s LIKE '{s}%'", "NOT (i > {i} OR d < {d})",
]


def test_metrics_never_prune_a_matching_file():
    """Whenever Arrow evaluation selects a row, the file's metrics must say it might match."""
    rng = random.Random(20240601)
    pruned = 0
    for _ in range(150):
        n = rng.randint(1, 6)
        ints = [rng.choice([None, rng.randint(-5, 5)]) for _ in range(n)]
        doubles = [rng.choice([None, NAN, float(rng.randint(-3, 3)), rng.uniform(-3, 3)]) for _ in range(n)]
        strings = [rng.choice([None, _word(rng, 4)]) for _ in range(n)]
        table = pa.table({"id": pa.array(range(n), pa.int64()), "i": pa.array(ints, pa.int32()),
                          "d": pa.array(doubles, pa.float64()), "s": pa.array(strings, pa.string())})
        file = _metrics_for(ints, doubles, strings, rng)
        for template in PROPERTY_FILTERS:
            text = template.format(i=rng.randint(-6, 6), i2=rng.randint(-6, 6), d=rng.randint(-4, 4),
                                   d2=rng.randint(-4, 4), s=_word(rng, 3), s2=_word(rng, 3))
            bound = bind(parse_expression(text), SCHEMA)
            matches = evaluate_arrow(bound, table).true_count > 0
            might_match = metrics_might_match(bound, file, SCHEMA)
            assert might_match or not matches, (text, ints, doubles, strings, file)
            pruned += not might_match
    assert pruned > 500  # the metrics do prune


def _word(rng: random.Random, longest: int) -> str:
    return "".join(rng.choice("abc") for _ in range(rng.randint(0, longest)))


def _metrics_for(ints, doubles, strings, rng) -> DataFile:
    def bounds(vals, t, truncate):
        present = [v for v in vals if v is not None and not (isinstance(v, float) and math.isnan(v))]
        if not present:
            return None, None
        lo, hi = min(present), max(present)
        if truncate:
            lo, hi = values.truncate_lower_bound(t, lo, 2), values.truncate_upper_bound(t, hi, 2)
        return lo, hi

    lower, upper = {}, {}
    for fid, vals, t in ((2, ints, IntegerType()), (4, doubles, DoubleType()), (5, strings, StringType())):
        if rng.random() < 0.15:
            continue  # no bounds for this column
        lo, hi = bounds(vals, t, truncate=fid == 5 and rng.random() < 0.5)
        if lo is not None:
            lower[fid] = lo
        if hi is not None:
            upper[fid] = hi
    n = len(ints)
    counts = {2: n, 4: n, 5: n}
    nulls = {2: ints.count(None), 4: doubles.count(None), 5: strings.count(None)}
    nans = {4: sum(1 for v in doubles if v is not None and math.isnan(v))}
    if rng.random() < 0.2:
        nans = {}
    return data_file(record_count=n, values_=counts, nulls=nulls, nans=nans, lower=lower, upper=upper)


def test_evaluate_arrow_constant_branches_built_by_hand():
    chunked = pa.concat_tables([ROWS.slice(0, 4), ROWS.slice(4)])
    i_gt_1 = bind(parse_expression("i > 1"), SCHEMA)
    assert evaluate_arrow(And(AlwaysTrue(), i_gt_1), chunked).to_pylist() == [False, True, False, True, True, False]
    assert evaluate_arrow(Or(i_gt_1, AlwaysFalse()), chunked).to_pylist() == [False, True, False, True, True, False]
    assert evaluate_arrow(Or(Not(i_gt_1), AlwaysTrue()), chunked).true_count == 6
    assert evaluate_arrow(Not(AlwaysTrue()), chunked).true_count == 0


def test_a_typed_timestamp_literal_keeps_its_nanoseconds():
    """``TIMESTAMP '...'`` went through datetime, which keeps six fractional digits: on a nanosecond column the
    literal selected the wrong rows. It binds as the same text in quotes does; a column in microseconds refuses it,
    naming the literal."""
    schema = Schema((_f(1, "id", LongType()), _f(2, "ts", TimestampNsType())))
    base = 1_704_067_200_000_000_000  # 2024-01-01 00:00:00
    table = pa.table({"id": pa.array([0, 1, 2], pa.int64()),
                      "ts": pa.array([base + 5_000, base + 5_653, base + 9_999], pa.timestamp("ns"))})
    for text, ids in [("ts = TIMESTAMP '2024-01-01 00:00:00.000005653'", [1]),
                      ("ts < TIMESTAMP '2024-01-01 00:00:00.000005653'", [0]),
                      ("ts >= TIMESTAMPTZ '2024-01-01 00:00:00.000005001'", [1, 2]),
                      ("ts = '2024-01-01 00:00:00.000005653'", [1])]:
        mask = evaluate_arrow(bind(parse_expression(text), schema), table)
        assert table.filter(mask).column("id").to_pylist() == ids, text
    with pytest.raises(ValidationError, match="000005653"):
        bind(parse_expression("ts = TIMESTAMP '2024-01-01 00:00:00.000005653'"), SCHEMA)
