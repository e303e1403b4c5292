"""Filters with thousands of terms and deeply nested filters (issue 9, point 5).

A chain of one operator becomes a balanced tree, so every walk (bind, Arrow, metrics, partition projection,
printing) handles a 2,000-term filter; anything nested deeper than MAX_DEPTH is a ValidationError, never a
RecursionError.
"""

from __future__ import annotations

import pyarrow as pa
import pytest

from engine.errors import ValidationError
from engine.model import values
from engine.model.data_file import DataFile
from engine.model.expression_binding import bind
from engine.model.expression_parser import parse_expression
from engine.model.expressions import MAX_DEPTH, And, EqualTo, Not, Or, and_, depth, or_
from engine.model.metrics_evaluation import metrics_might_match, metrics_must_match
from engine.model.partition_filters import (
    file_might_match,
    file_must_match,
    project_inclusive,
    project_strict,
    residual,
)
from engine.model.row_evaluation import evaluate_arrow
from engine.model.partitioning import build_spec
from engine.model.schema import Schema
from engine.model.types import LongType, NestedField, StringType

SCHEMA = Schema((
    NestedField(field_id=1, name="id", field_type=LongType(), required=True),
    NestedField(field_id=2, name="s", field_type=StringType()),
))
N = 2000
ROWS = pa.table({"id": pa.array(range(0, 2 * N, 3), pa.int64()),
                 "s": pa.array([f"v{i}" for i in range(0, 2 * N, 3)])})

OR_TEXT = " or ".join(f"id = {i}" for i in range(N))
AND_TEXT = " and ".join(f"id != {i}" for i in range(N))
IN_TEXT = "id in (" + ", ".join(str(i) for i in range(N)) + ")"
EXPECTED = {  # which ids of ROWS each filter keeps
    OR_TEXT: [i for i in ROWS["id"].to_pylist() if i < N],
    AND_TEXT: [i for i in ROWS["id"].to_pylist() if i >= N],
    IN_TEXT: [i for i in ROWS["id"].to_pylist() if i < N],
}


def _file(lower: int, upper: int) -> DataFile:
    return DataFile(file_path="/tmp/w/data/f.parquet", record_count=10, file_size_in_bytes=100,
                    value_counts={1: 10}, null_value_counts={1: 0},
                    lower_bounds={1: values.to_bytes(LongType(), lower)},
                    upper_bounds={1: values.to_bytes(LongType(), upper)})


@pytest.mark.parametrize("text", [OR_TEXT, AND_TEXT, IN_TEXT], ids=["or", "and", "in"])
def test_2000_terms_parse_bind_and_evaluate(text):
    expr = parse_expression(text)
    assert depth(expr) <= 12  # log2(2000) + 1, not 2000
    bound = bind(expr, SCHEMA)
    assert ROWS.filter(evaluate_arrow(bound, ROWS))["id"].to_pylist() == EXPECTED[text]
    # printing gives text that parses back to the same tree
    assert parse_expression(str(expr)) == expr
    assert bind(parse_expression(str(bound)), SCHEMA) == bound


def test_2000_terms_metrics_inclusive_and_strict():
    or_bound = bind(parse_expression(OR_TEXT), SCHEMA)
    and_bound = bind(parse_expression(AND_TEXT), SCHEMA)
    assert metrics_might_match(or_bound, _file(10, 20), SCHEMA)
    assert not metrics_might_match(or_bound, _file(N, N + 10), SCHEMA)
    assert metrics_must_match(or_bound, _file(7, 7), SCHEMA)
    assert not metrics_must_match(or_bound, _file(N - 1, N), SCHEMA)
    assert metrics_must_match(and_bound, _file(N, N + 10), SCHEMA)
    assert not metrics_must_match(and_bound, _file(3, 3), SCHEMA)


@pytest.mark.parametrize("term", ["id", "bucket(16, id)", "truncate(10, id)"])
def test_2000_terms_project_through_transforms(term):
    spec = build_spec(SCHEMA, [term])
    for text in (OR_TEXT, AND_TEXT, IN_TEXT):
        expr = parse_expression(text)
        inclusive = project_inclusive(expr, spec, SCHEMA)
        strict = project_strict(expr, spec, SCHEMA)
        assert depth(inclusive) <= 12 and depth(strict) <= 12
    # identity partitions settle the filter without metrics
    spec = build_spec(SCHEMA, ["id"])
    expr = parse_expression(OR_TEXT)
    inside = DataFile(file_path="/tmp/w/data/p.parquet", record_count=10, file_size_in_bytes=100, partition=(5,))
    outside = DataFile(file_path="/tmp/w/data/q.parquet", record_count=10, file_size_in_bytes=100,
                       partition=(N + 5,))
    assert file_must_match(expr, inside, spec, SCHEMA) and file_might_match(expr, inside, spec, SCHEMA)
    assert not file_might_match(expr, outside, spec, SCHEMA)
    assert str(residual(expr, spec, SCHEMA, (5,))) == "true"


def test_chains_built_in_python_are_balanced_when_bound():
    # a left-deep chain as a loop of ``|`` builds it: 5,000 levels before binding
    expr = EqualTo("id", 0)
    for i in range(1, 5000):
        expr = expr | EqualTo("id", i)
    assert depth(expr) == 5000
    bound = bind(expr, SCHEMA)
    assert depth(bound) <= 14
    assert ROWS.filter(evaluate_arrow(bound, ROWS))["id"].to_pylist() == ROWS["id"].to_pylist()
    # the helpers build balanced trees directly
    assert depth(or_(*[EqualTo("id", i) for i in range(N)])) <= 12
    assert depth(and_(*[EqualTo("id", i) for i in range(N)])) <= 12


def test_str_of_an_unbalanced_chain_parses_back_to_it():
    a, b, c, d = (EqualTo("id", i) for i in range(4))
    for expr in (Or(Or(Or(a, b), c), d), And(a, And(b, And(c, d))), Or(Or(a, b), Or(c, d))):
        assert parse_expression(str(expr)) == expr
    assert str(Or(Or(a, b), Or(c, d))) == "id = 0 OR id = 1 OR id = 2 OR id = 3"


@pytest.mark.parametrize("text", [
    "(" * 1000 + "id = 1" + ")" * 1000,
    "(" * 100_000 + "id = 1" + ")" * 100_000,
    "NOT " * 100_000 + "id = 1",
    "id = 0 or (" * 1000 + "id = 1" + ")" * 1000,
    "(" * 100_000,
])
def test_deep_nesting_is_refused_with_the_limit(text):
    with pytest.raises(ValidationError, match=f"Cannot parse expression: nested more than the limit of {MAX_DEPTH}"):
        parse_expression(text)


def test_nesting_up_to_the_limit_is_accepted():
    levels = MAX_DEPTH - 2
    text = "id = 0 or (" * levels + "id = 1" + ")" * levels
    bound = bind(parse_expression(text), SCHEMA)
    assert ROWS.filter(evaluate_arrow(bound, ROWS))["id"].to_pylist() == [0]
    assert bind(parse_expression("NOT " * (MAX_DEPTH - 1) + "id = 1"), SCHEMA) is not None


def test_bind_refuses_deep_trees_built_in_python():
    expr = EqualTo("id", 0)
    for i in range(1, 3 * MAX_DEPTH):  # alternating AND / OR cannot be balanced
        expr = (expr | EqualTo("id", i)) if i % 2 else (expr & EqualTo("id", i))
    with pytest.raises(ValidationError, match=f"more than the limit of {MAX_DEPTH}"):
        bind(expr, SCHEMA)
    nots = EqualTo("id", 1)
    for _ in range(10_000):
        nots = Not(nots)
    with pytest.raises(ValidationError, match=f"more than the limit of {MAX_DEPTH}"):
        bind(nots, SCHEMA)
