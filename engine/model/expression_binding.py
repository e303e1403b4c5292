"""Binding a filter to a schema (names to field ids and types, literals to canonical values), and the rewrites
that need bound terms: negate and rewrite_not.

Layer: engine.model (pure functions; imports the standard library, engine.errors and engine.model.expressions /
schema / types / values). No I/O.

Usage::

    bound = bind(parse_expression("price < 10.5"), schema)
    negate(bound)        # price >= 10.5 (OR price IS NAN for float and double columns)
    bound_nnf(expr, schema)   # bound (unless it already is), with every NOT pushed into its predicates
"""

from __future__ import annotations

import math
import struct
from decimal import Decimal
from typing import Any

from engine.errors import ValidationError
from engine.model import values
from engine.model.expressions import (
    MAX_DEPTH,
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
    LiteralPredicate,
    Not,
    NotEqualTo,
    NotIn,
    NotNaN,
    NotNull,
    NotStartsWith,
    Or,
    Predicate,
    SetPredicate,
    StartsWith,
    depth,
    is_bound,
    rebalance,
    require_bound,
)
from engine.model.schema import Schema
from engine.model.types import (
    BooleanType,
    DoubleType,
    FloatType,
    IcebergType,
    IntegerType,
    LongType,
    PrimitiveType,
    StringType,
)

_INT_RANGE = {IntegerType: (-(2**31), 2**31 - 1), LongType: (-(2**63), 2**63 - 1)}

_NEGATIONS: dict[type, type] = {
    IsNull: NotNull, NotNull: IsNull, IsNaN: NotNaN, NotNaN: IsNaN,
    EqualTo: NotEqualTo, NotEqualTo: EqualTo, LessThan: GreaterThanOrEqual, GreaterThanOrEqual: LessThan,
    LessThanOrEqual: GreaterThan, GreaterThan: LessThanOrEqual, StartsWith: NotStartsWith,
    NotStartsWith: StartsWith, In: NotIn, NotIn: In,
}
_ORDERINGS = (LessThan, LessThanOrEqual, GreaterThan, GreaterThanOrEqual)


# -- binding -----------------------------------------------------------------------------------------------------


class _Out(int):
    """Marks an integer literal outside the column type's range: +1 above the maximum, -1 below the minimum."""


def bind(expr: BooleanExpression, schema: Schema, case_sensitive: bool = True) -> BooleanExpression:
    """Resolve every column of an expression against a schema and convert its literals.

    Literals become the field's canonical Python value (engine.model.values.value_from_python): ISO strings
    are accepted for date, time, timestamp and timestamptz columns (a timestamptz string without an offset is
    UTC; a timestamp string with one is refused), UUID strings for uuid columns, numbers and numeric strings
    for decimal columns (without losing digits), whole numbers for int and long columns, and float literals
    for float columns are rounded to single precision as the column stores them. The result is simplified:
    IS NULL on a required column is AlwaysFalse, an integer literal beyond the column type's range decides
    the comparison, ``IN`` lists are deduplicated and sorted, and constant branches of AND / OR / NOT fold away.

    :param expr: an unbound (or already bound) expression
    :param schema: the schema to bind to
    :param case_sensitive: when False, column names match ignoring case
    :raises ValidationError: naming the column for an unknown column, a field inside a list or map, a predicate
        the column's type does not support, or a literal that does not convert to the column's type; or when
        the expression, with its AND / OR chains balanced, is more than :data:`MAX_DEPTH` levels deep
    """
    if not isinstance(expr, BooleanExpression):
        raise ValidationError(f"Cannot bind expression: {expr!r} is not an expression")
    expr = rebalance(expr)
    levels = depth(expr)
    if levels > MAX_DEPTH:
        raise ValidationError(f"Cannot bind expression: it is nested {levels} levels deep (AND / OR chains "
                              f"counted as balanced trees), more than the limit of {MAX_DEPTH}")
    try:
        return _bind(expr, schema, case_sensitive)
    except RecursionError as e:  # not expected below MAX_DEPTH; never let it escape untyped
        raise ValidationError(f"Cannot bind expression: it is nested too deeply (limit {MAX_DEPTH} levels)") from e


def _bind(expr: BooleanExpression, schema: Schema, case_sensitive: bool) -> BooleanExpression:
    if isinstance(expr, (AlwaysTrue, AlwaysFalse)):
        return expr
    if isinstance(expr, And):
        left = _bind(expr.left, schema, case_sensitive)
        right = _bind(expr.right, schema, case_sensitive)
        if isinstance(left, AlwaysFalse) or isinstance(right, AlwaysFalse):
            return AlwaysFalse()
        if isinstance(left, AlwaysTrue):
            return right
        if isinstance(right, AlwaysTrue):
            return left
        return And(left, right)
    if isinstance(expr, Or):
        left = _bind(expr.left, schema, case_sensitive)
        right = _bind(expr.right, schema, case_sensitive)
        if isinstance(left, AlwaysTrue) or isinstance(right, AlwaysTrue):
            return AlwaysTrue()
        if isinstance(left, AlwaysFalse):
            return right
        if isinstance(right, AlwaysFalse):
            return left
        return Or(left, right)
    if isinstance(expr, Not):
        child = _bind(expr.child, schema, case_sensitive)
        if isinstance(child, AlwaysTrue):
            return AlwaysFalse()
        if isinstance(child, AlwaysFalse):
            return AlwaysTrue()
        if isinstance(child, Not):
            return child.child
        return Not(child)
    if isinstance(expr, Predicate):
        return _bind_predicate(expr, _bind_term(expr, schema, case_sensitive))
    raise ValidationError(f"Cannot bind expression: unknown expression {expr!r}")


def _bind_term(pred: Predicate, schema: Schema, case_sensitive: bool) -> BoundReference:
    term = pred.term
    if isinstance(term, BoundReference):
        return term
    try:
        field = schema.find_field(term.name, case_sensitive=case_sensitive)
    except ValidationError as e:
        raise ValidationError(f"Cannot bind {pred}: column {term.name!r} is not in the schema ({e})") from e
    full_name = schema.find_column_name(field.field_id)
    if schema.is_in_list_or_map(field.field_id):
        raise ValidationError(f"Cannot bind {pred}: column {full_name!r} is inside a list or map")
    by_id = schema.index_by_id()
    path = [field.name]
    required = field.required
    parent = schema.parent_id(field.field_id)
    while parent is not None:
        parent_field = by_id[parent]
        path.append(parent_field.name)
        required = required and parent_field.required
        parent = schema.parent_id(parent)
    return BoundReference(field_id=field.field_id, name=full_name, field_type=field.field_type,
                          path=tuple(reversed(path)), required=required)


def _bind_predicate(pred: Predicate, ref: BoundReference) -> BooleanExpression:
    t = ref.field_type
    if isinstance(pred, IsNull):
        return AlwaysFalse() if ref.required else IsNull(ref)
    if isinstance(pred, NotNull):
        return AlwaysTrue() if ref.required else NotNull(ref)
    if isinstance(pred, (IsNaN, NotNaN)):
        if not isinstance(t, (FloatType, DoubleType)):
            raise ValidationError(f"Cannot bind {pred}: column {ref.name!r} is {t}, not float or double")
        return type(pred)(ref)
    if not isinstance(t, PrimitiveType):
        raise ValidationError(f"Cannot bind {pred}: column {ref.name!r} is {t}, not a primitive type")
    if isinstance(pred, (StartsWith, NotStartsWith)):
        if not isinstance(t, StringType):
            raise ValidationError(f"Cannot bind {pred}: column {ref.name!r} is {t}, not string")
        if not isinstance(pred.literal, str):
            raise ValidationError(f"Cannot bind {pred}: prefix {pred.literal!r} is not a string")
        return type(pred)(ref, pred.literal)
    if isinstance(pred, LiteralPredicate):
        value = _convert_literal(pred, ref, pred.literal)
        if isinstance(value, _Out):
            return _out_of_range(pred, ref, value)
        return type(pred)(ref, value)
    if isinstance(pred, SetPredicate):
        converted = [_convert_literal(pred, ref, v) for v in pred.literals]
        kept = sorted(set(v for v in converted if not isinstance(v, _Out)))
        if isinstance(pred, In):
            if not kept:
                return AlwaysFalse()
            return EqualTo(ref, kept[0]) if len(kept) == 1 else In(ref, tuple(kept))
        if not kept:
            return AlwaysTrue() if ref.required else NotNull(ref)
        return NotEqualTo(ref, kept[0]) if len(kept) == 1 else NotIn(ref, tuple(kept))
    raise ValidationError(f"Cannot bind expression: unknown predicate {pred!r}")


def _out_of_range(pred: LiteralPredicate, ref: BoundReference, side: _Out) -> BooleanExpression:
    """A comparison with an integer the column cannot hold is decided for every non-null value."""
    every_value_below = side > 0  # the literal is above the maximum
    true_for_all = (LessThan, LessThanOrEqual) if every_value_below else (GreaterThan, GreaterThanOrEqual)
    if isinstance(pred, (NotEqualTo, *true_for_all)):
        return AlwaysTrue() if ref.required else NotNull(ref)
    return AlwaysFalse()


def _convert_literal(pred: Predicate, ref: BoundReference, value: Any) -> Any:
    t = ref.field_type
    if value is None:
        raise ValidationError(f"Cannot bind {pred}: null is not a comparable value for column {ref.name!r}; "
                              "use IS NULL or IS NOT NULL")
    try:
        prepared = _prepare_literal(t, value)
        if isinstance(prepared, _Out):
            return prepared
        result = values.value_from_python(t, prepared)
    except ValidationError as e:
        raise ValidationError(f"Cannot bind {pred}: literal {value!r} does not fit column {ref.name!r} ({t}): "
                              f"{e}") from e
    except (TypeError, ValueError, ArithmeticError) as e:
        raise ValidationError(f"Cannot bind {pred}: literal {value!r} does not fit column {ref.name!r} ({t}): "
                              f"{e}") from e
    if isinstance(result, float) and math.isnan(result):
        raise ValidationError(f"Cannot bind {pred}: NaN is not a comparable value for column {ref.name!r}; "
                              "use IS NAN or IS NOT NAN")
    return result


def _prepare_literal(t: IcebergType, value: Any) -> Any:
    """Turn a parsed or user literal into a Python value that value_from_python accepts for ``t``."""
    if isinstance(value, bool) and not isinstance(t, BooleanType):
        raise ValidationError(f"a boolean is not a {t}")
    if isinstance(t, BooleanType):
        if not isinstance(value, bool):
            raise ValidationError(f"{value!r} is not a boolean")
        return value
    if isinstance(t, (IntegerType, LongType)):
        if isinstance(value, (Decimal, float)):
            if not math.isfinite(value) or value != int(value):
                raise ValidationError(f"{value!r} is not an integer")
            value = int(value)
        if isinstance(value, int):
            low, high = _INT_RANGE[type(t)]
            if value > high:
                return _Out(1)
            if value < low:
                return _Out(-1)
        return value
    if isinstance(t, (FloatType, DoubleType)):
        if isinstance(value, (int, Decimal)):
            value = float(value)
        if isinstance(t, FloatType) and isinstance(value, float) and math.isfinite(value):
            # compare as the column stores it: the literal rounded to single precision
            value = struct.unpack("<f", struct.pack("<f", value))[0]
        return value
    # the rest (ISO strings for temporal types, numbers and strings for decimals, UUID strings, bytes) is
    # value_from_python's to convert or refuse
    return value


def bound_nnf(expr: BooleanExpression, schema: Schema, case_sensitive: bool = True) -> BooleanExpression:
    """The expression bound to ``schema`` (an expression already bound is kept as it is) with every NOT pushed
    into its predicates: what the evaluators over metrics, partitions and summaries walk.

    :raises ValidationError: when an unbound expression does not bind
    """
    if not is_bound(expr):
        expr = bind(expr, schema, case_sensitive)
    return _rewrite_not(expr)


# -- negation ----------------------------------------------------------------------------------------------------


def negate(expr: BooleanExpression) -> BooleanExpression:
    """An expression without a top-level NOT that selects exactly the rows ``NOT expr`` selects.

    Works on bound expressions: for float and double columns ``NOT (x < v)`` becomes ``x >= v OR x IS NAN``,
    since NaN fails every ordering comparison.

    :raises ValidationError: when the expression is not bound
    """
    require_bound(expr, "negate expression")
    return _negate(expr)


def _negate(expr: BooleanExpression) -> BooleanExpression:
    if isinstance(expr, AlwaysTrue):
        return AlwaysFalse()
    if isinstance(expr, AlwaysFalse):
        return AlwaysTrue()
    if isinstance(expr, And):
        return Or(_negate(expr.left), _negate(expr.right))
    if isinstance(expr, Or):
        return And(_negate(expr.left), _negate(expr.right))
    if isinstance(expr, Not):
        return _rewrite_not(expr.child)
    if isinstance(expr, Predicate):
        cls = _NEGATIONS[type(expr)]
        negated: BooleanExpression
        if isinstance(expr, LiteralPredicate):
            negated = cls(expr.term, expr.literal)
        elif isinstance(expr, SetPredicate):
            negated = cls(expr.term, expr.literals)
        else:
            negated = cls(expr.term)
        if isinstance(expr, _ORDERINGS) and isinstance(expr.term.field_type, (FloatType, DoubleType)):
            return Or(negated, IsNaN(expr.term))
        return negated
    raise ValidationError(f"Cannot negate expression: {expr!r}")


def rewrite_not(expr: BooleanExpression) -> BooleanExpression:
    """The bound expression with every NOT pushed into its predicates (negation normal form).

    :raises ValidationError: when the expression is not bound
    """
    require_bound(expr, "rewrite NOT")
    return _rewrite_not(expr)


def _rewrite_not(expr: BooleanExpression) -> BooleanExpression:
    if isinstance(expr, And):
        return And(_rewrite_not(expr.left), _rewrite_not(expr.right))
    if isinstance(expr, Or):
        return Or(_rewrite_not(expr.left), _rewrite_not(expr.right))
    if isinstance(expr, Not):
        return _negate(expr.child)
    return expr
