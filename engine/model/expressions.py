"""Row filters: build or parse them, bind them to a schema, evaluate them on Arrow, prune files by metrics,
project them onto partitions.

Layer: engine.model (pure values and functions). Imports the standard library, attrs, pyarrow (compute only,
for :func:`evaluate_arrow`), engine.errors and engine.model (types, schema, values, data_file; partitioning
for type hints only, since transforms import this module). No I/O.

An expression is a frozen value. Unbound expressions name columns (:class:`Reference`); :func:`bind` resolves
them against a :class:`~engine.model.schema.Schema` into :class:`BoundReference` terms (field id, name, type)
and converts every literal to the field's canonical Python value (see engine.model.values). Bound expressions
use the same classes as unbound ones; only their terms differ.

Usage::

    expr = parse_expression("category = 'books' AND price < 10.5 AND ts >= '2024-01-01'")
    expr = EqualTo("category", "books") & LessThan("price", Decimal("10.5"))     # the same, built in Python
    bound = bind(expr, schema)
    mask = evaluate_arrow(bound, table)          # pa.BooleanArray; table.filter(mask) keeps matching rows
    metrics_might_match(bound, data_file, schema)  # False only when the file's metrics prove no row matches
    metrics_must_match(bound, data_file, schema)   # True only when they prove every row matches

Partitions (Iceberg Java's Projections, ResidualEvaluator and ManifestEvaluator)::

    project_inclusive(expr, spec, schema)       # over the partition struct: true wherever a row may match
    project_strict(expr, spec, schema)          # true only where every row matches
    evaluate_partition(projected, spec.partition_type(schema), data_file.partition)
    partition_might_match(expr, spec, schema, partition) / partition_must_match(...)
    residual(expr, spec, schema, partition)     # the filter left for one partition's rows
    file_might_match(expr, data_file, spec, schema) / file_must_match(...)   # partition and metrics together
    manifest_might_match(expr, spec, schema, manifest_file.partitions)      # manifest-list summaries

Semantics follow SQL's three-valued logic: a comparison with null is null, ``NOT null`` is null, and a row is
selected only when the filter is true. ``IS NULL`` / ``IS NOT NULL`` / ``IS NAN`` / ``IS NOT NAN`` are never
null. NaN compares false with everything (``=``, ``<``, ``<=``, ``>``, ``>=``, ``IN``) and so ``!=`` and
``NOT IN`` are true for NaN, as in IEEE 754 and in ``NOT (x = v)``. NaN literals are refused: use ``IS NAN``.

Text syntax (:func:`parse_expression`), keywords case-insensitive:

- ``a AND b``, ``a OR b``, ``NOT a``, parentheses; ``true`` and ``false``
- ``col = v``, ``!=`` / ``<>``, ``<``, ``<=``, ``>``, ``>=``; the literal may come first (``5 < col``)
- ``col IS [NOT] NULL``, ``col IS [NOT] NAN``, ``isnan(col)``
- ``col [NOT] IN (v, ...)``, ``col [NOT] BETWEEN v AND w``, ``col [NOT] LIKE 'prefix%'`` (starts-with;
  ``\\`` escapes ``%``, ``_`` and itself; a pattern without ``%`` is an equality)
- a bare column stands for ``col = true``
- literals: ``42``, ``-1.25`` (a Decimal), ``1e3`` (a float), ``'it''s'``, ``true``, ``false``,
  ``X'00ff'`` (bytes), ``DATE '2024-01-02'``, ``TIME '10:00:00'``, ``TIMESTAMP '2024-01-02 10:00:00[+01:00]'``;
  strings compared with date, time, timestamp, uuid and decimal columns are converted when bound
- columns: ``name``, ``a.b`` (nested struct field), ``"any name"`` or ```any name``` (doubled quote escapes)

``str(expr)`` prints text that parses back to an equal expression (for unbound ones built from the literal
types above).

Depth: a chain of one operator (``a OR b OR c ...``) is built as a balanced tree, so a filter of thousands of
terms stays about log2(n) levels deep. The parser and :func:`bind` refuse an expression deeper than
:data:`MAX_DEPTH` levels (nested parentheses, NOT, and the balanced chains) with a ValidationError, so no walk
over an accepted expression can exhaust Python's recursion limit.
"""

from __future__ import annotations

import datetime
import math
import re
import struct
import uuid
from decimal import Decimal
from typing import TYPE_CHECKING, Any, Callable, Union

import attrs
import pyarrow as pa
import pyarrow.compute as pc

from engine.errors import CorruptFileError, ValidationError
from engine.model import values
from engine.model.data_file import DataFile, FieldSummary
from engine.model.schema import Schema
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
    NANO_TIMESTAMPS,
    PrimitiveType,
    StringType,
    StructType,
    TimestampType,
    TimestamptzType,
    TimeType,
    UUIDType,
)

if TYPE_CHECKING:  # transforms and partitioning import this module; they reach it through spec values only
    from engine.model.partitioning import PartitionField, PartitionSpec

#: Java's limit on IN lists the metrics evaluator checks literal by literal; longer lists might match.
IN_PREDICATE_LIMIT = 200

#: The deepest expression :func:`parse_expression` and :func:`bind` accept: levels of parentheses and NOT in
#: text, and levels of the expression tree once each AND / OR chain is a balanced tree.
MAX_DEPTH = 200

_INT_RANGE = {IntegerType: (-(2**31), 2**31 - 1), LongType: (-(2**63), 2**63 - 1)}


# -- terms -------------------------------------------------------------------------------------------------------


@attrs.frozen
class Reference:
    """An unbound column reference by (dotted) name."""

    name: str

    def __str__(self) -> str:
        return _name_text(self.name)


@attrs.frozen(kw_only=True)
class BoundReference:
    """A column resolved against a schema.

    :param field_id: the field's id
    :param name: the field's full dotted name in the schema it was bound to
    :param field_type: the field's type
    :param path: the field names from the top-level column down to the field (to find it in Arrow data)
    :param required: whether the field and every struct enclosing it are required (the value is never null)
    """

    field_id: int
    name: str
    field_type: IcebergType
    path: tuple[str, ...] = attrs.field(converter=tuple)
    required: bool = False

    def __str__(self) -> str:
        return _name_text(self.name)


Term = Union[Reference, BoundReference]


def _to_term(value: Any) -> Term:
    if isinstance(value, (Reference, BoundReference)):
        return value
    if isinstance(value, str):
        return Reference(value)
    raise ValidationError(f"Cannot build predicate: a term must be a column name, got {value!r}")


# -- expressions -------------------------------------------------------------------------------------------------


@attrs.frozen
class BooleanExpression:
    """Base of every filter expression. ``a & b``, ``a | b`` and ``~a`` build And, Or and Not."""

    def __and__(self, other: BooleanExpression) -> BooleanExpression:
        return And(self, other)

    def __or__(self, other: BooleanExpression) -> BooleanExpression:
        return Or(self, other)

    def __invert__(self) -> BooleanExpression:
        return Not(self)

    def __str__(self) -> str:
        return _to_text(self)


@attrs.frozen
class AlwaysTrue(BooleanExpression):
    """Selects every row."""


@attrs.frozen
class AlwaysFalse(BooleanExpression):
    """Selects no row."""


def _check_expr(_: Any, attribute: attrs.Attribute, value: Any) -> None:
    if not isinstance(value, BooleanExpression):
        raise ValidationError(f"Cannot build expression: {attribute.name} must be an expression, got {value!r}")


@attrs.frozen
class And(BooleanExpression):
    left: BooleanExpression = attrs.field(validator=_check_expr)
    right: BooleanExpression = attrs.field(validator=_check_expr)


@attrs.frozen
class Or(BooleanExpression):
    left: BooleanExpression = attrs.field(validator=_check_expr)
    right: BooleanExpression = attrs.field(validator=_check_expr)


@attrs.frozen
class Not(BooleanExpression):
    child: BooleanExpression = attrs.field(validator=_check_expr)


@attrs.frozen
class Predicate(BooleanExpression):
    """A test on one column; ``term`` accepts a column name."""

    term: Term = attrs.field(converter=_to_term)


@attrs.frozen
class UnaryPredicate(Predicate):
    pass


@attrs.frozen
class IsNull(UnaryPredicate):
    pass


@attrs.frozen
class NotNull(UnaryPredicate):
    pass


@attrs.frozen
class IsNaN(UnaryPredicate):
    """True for NaN values; false for null and every other value."""


@attrs.frozen
class NotNaN(UnaryPredicate):
    """False for NaN values; true for null and every other value."""


@attrs.frozen
class LiteralPredicate(Predicate):
    literal: Any


@attrs.frozen
class EqualTo(LiteralPredicate):
    pass


@attrs.frozen
class NotEqualTo(LiteralPredicate):
    pass


@attrs.frozen
class LessThan(LiteralPredicate):
    pass


@attrs.frozen
class LessThanOrEqual(LiteralPredicate):
    pass


@attrs.frozen
class GreaterThan(LiteralPredicate):
    pass


@attrs.frozen
class GreaterThanOrEqual(LiteralPredicate):
    pass


@attrs.frozen
class StartsWith(LiteralPredicate):
    """A string column starts with the literal prefix."""


@attrs.frozen
class NotStartsWith(LiteralPredicate):
    pass


@attrs.frozen
class SetPredicate(Predicate):
    literals: tuple[Any, ...] = attrs.field(converter=tuple)


@attrs.frozen
class In(SetPredicate):
    pass


@attrs.frozen
class NotIn(SetPredicate):
    pass


BoundExpression = BooleanExpression
"""A :class:`BooleanExpression` whose terms are all :class:`BoundReference` (what :func:`bind` returns)."""

_NEGATIONS: dict[type, type] = {
    IsNull: NotNull, NotNull: IsNull, IsNaN: NotNaN, NotNaN: IsNaN,
    EqualTo: NotEqualTo, NotEqualTo: EqualTo, LessThan: GreaterThanOrEqual, GreaterThanOrEqual: LessThan,
    LessThanOrEqual: GreaterThan, GreaterThan: LessThanOrEqual, StartsWith: NotStartsWith,
    NotStartsWith: StartsWith, In: NotIn, NotIn: In,
}
_ORDERINGS = (LessThan, LessThanOrEqual, GreaterThan, GreaterThanOrEqual)


def and_(*exprs: BooleanExpression) -> BooleanExpression:
    """All of the expressions (AlwaysTrue for none), as the balanced tree the parser builds for
    ``a AND b AND c ...`` (three terms give ``And(And(a, b), c)``)."""
    if not exprs:
        return AlwaysTrue()
    return _balanced(And, list(exprs))


def or_(*exprs: BooleanExpression) -> BooleanExpression:
    """Any of the expressions (AlwaysFalse for none), balanced like :func:`and_`."""
    if not exprs:
        return AlwaysFalse()
    return _balanced(Or, list(exprs))


def _balanced(cls: type, items: list[BooleanExpression]) -> BooleanExpression:
    """``items`` joined by ``cls`` (And or Or) as a balanced tree, the left half taking the odd item: depth
    stays log2(len(items)) whatever the length."""
    if len(items) == 1:
        return items[0]
    mid = (len(items) + 1) // 2
    return cls(_balanced(cls, items[:mid]), _balanced(cls, items[mid:]))


def _chain(expr: BooleanExpression) -> list[BooleanExpression]:
    """The operands of the chain of ``type(expr)`` (And or Or) rooted at ``expr``, in order (no recursion)."""
    cls = type(expr)
    out: list[BooleanExpression] = []
    stack = [expr]
    while stack:
        e = stack.pop()
        if type(e) is cls:
            stack += [e.right, e.left]  # type: ignore[attr-defined]
        else:
            out.append(e)
    return out


def _rebalance(expr: BooleanExpression) -> BooleanExpression:
    """The expression with every AND / OR chain rebuilt as a balanced tree (no recursion, so a chain of any
    length built in Python is accepted)."""
    todo: list[tuple[BooleanExpression, int]] = [(expr, -1)]  # -1: not visited; n >= 0: combine n results
    done: list[BooleanExpression] = []
    while todo:
        e, n = todo.pop()
        if isinstance(e, (And, Or)):
            if n < 0:
                operands = _chain(e)
                todo.append((e, len(operands)))
                todo += [(o, -1) for o in reversed(operands)]
            else:
                operands = done[len(done) - n:]
                del done[len(done) - n:]
                done.append(_balanced(type(e), operands))
        elif isinstance(e, Not):
            if n < 0:
                todo += [(e, 1), (e.child, -1)]
            else:
                done.append(Not(done.pop()))
        else:
            done.append(e)
    return done[0]


def depth(expr: BooleanExpression) -> int:
    """The number of levels of an expression tree (a predicate is 1; ``a AND b`` is 2)."""
    deepest = 0
    stack = [(expr, 1)]
    while stack:
        e, d = stack.pop()
        deepest = max(deepest, d)
        if isinstance(e, (And, Or)):
            stack += [(e.left, d + 1), (e.right, d + 1)]
        elif isinstance(e, Not):
            stack.append((e.child, d + 1))
    return deepest


def is_bound(expr: BooleanExpression) -> bool:
    """Whether every term of the expression is a :class:`BoundReference`."""
    return all(isinstance(t, BoundReference) for t in _terms(expr))


def referenced_names(expr: BooleanExpression) -> frozenset[str]:
    """The column names an expression refers to (full names for bound terms)."""
    return frozenset(t.name for t in _terms(expr))


def referenced_field_ids(expr: BooleanExpression) -> frozenset[int]:
    """The field ids a bound expression refers to.

    :raises ValidationError: when the expression is not bound
    """
    _require_bound(expr, "collect field ids")
    return frozenset(t.field_id for t in _terms(expr))  # type: ignore[union-attr]


def _terms(expr: BooleanExpression) -> list[Term]:
    out: list[Term] = []
    stack = [expr]
    while stack:
        e = stack.pop()
        if isinstance(e, (And, Or)):
            stack += [e.right, e.left]
        elif isinstance(e, Not):
            stack.append(e.child)
        elif isinstance(e, Predicate):
            out.append(e.term)
    return out


def _require_bound(expr: BooleanExpression, action: str) -> None:
    for t in _terms(expr):
        if not isinstance(t, BoundReference):
            raise ValidationError(f"Cannot {action}: column {t.name!r} is not bound; bind the expression first")


# -- negation ----------------------------------------------------------------------------------------------------


def negate(expr: BooleanExpression) -> BooleanExpression:
    """An expression without a top-level NOT that selects exactly the rows ``NOT expr`` selects.

    Works on bound expressions: for float and double columns ``NOT (x < v)`` becomes ``x >= v OR x IS NAN``,
    since NaN fails every ordering comparison.

    :raises ValidationError: when the expression is not bound
    """
    _require_bound(expr, "negate expression")
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
    _require_bound(expr, "rewrite NOT")
    return _rewrite_not(expr)


def _rewrite_not(expr: BooleanExpression) -> BooleanExpression:
    if isinstance(expr, And):
        return And(_rewrite_not(expr.left), _rewrite_not(expr.right))
    if isinstance(expr, Or):
        return Or(_rewrite_not(expr.left), _rewrite_not(expr.right))
    if isinstance(expr, Not):
        return _negate(expr.child)
    return expr


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
    expr = _rebalance(expr)
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


# -- Arrow evaluation --------------------------------------------------------------------------------------------

ArrowData = Union[pa.Array, pa.ChunkedArray]


def evaluate_arrow(expr: BooleanExpression, table: pa.Table | pa.RecordBatch) -> pa.BooleanArray:
    """The rows of ``table`` a bound expression selects, as a mask with no nulls (``table.filter(mask)``).

    Columns are found by name: the table's column names must be the schema's (nested struct fields under their
    parent struct column). Dictionary, view and extension (uuid) columns are read through their values.

    :raises ValidationError: when the expression is not bound or a column is missing from the table
    """
    _require_bound(expr, "evaluate expression")
    evaluator = _ArrowEvaluator(table)
    result = pc.fill_null(evaluator.eval(expr), False)
    if isinstance(result, pa.ChunkedArray):
        result = result.combine_chunks()
    return result


class _ArrowEvaluator:
    """Three-valued evaluation: every intermediate result is a boolean array whose nulls mean unknown."""

    def __init__(self, table: pa.Table | pa.RecordBatch) -> None:
        self._table = table
        self._columns: dict[int, ArrowData] = {}

    def eval(self, expr: BooleanExpression) -> ArrowData:
        if isinstance(expr, AlwaysTrue):
            return pa.repeat(pa.scalar(True), self._table.num_rows)
        if isinstance(expr, AlwaysFalse):
            return pa.repeat(pa.scalar(False), self._table.num_rows)
        if isinstance(expr, And):
            return pc.and_kleene(self.eval(expr.left), self.eval(expr.right))
        if isinstance(expr, Or):
            return pc.or_kleene(self.eval(expr.left), self.eval(expr.right))
        if isinstance(expr, Not):
            return pc.invert(self.eval(expr.child))
        if isinstance(expr, Predicate):
            return self._predicate(expr)
        raise ValidationError(f"Cannot evaluate expression: unknown expression {expr!r}")

    def _column(self, ref: BoundReference) -> ArrowData:
        col = self._columns.get(ref.field_id)
        if col is not None:
            return col
        names = self._table.column_names
        if ref.path[0] not in names:
            raise ValidationError(f"Cannot evaluate filter: column {ref.name!r} is not in the data "
                                  f"(columns: {', '.join(names)})")
        col = self._table.column(ref.path[0])
        for name in ref.path[1:]:
            try:
                col = pc.struct_field(col, name)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError, KeyError) as e:
                raise ValidationError(f"Cannot evaluate filter: column {ref.name!r} is not in the data") from e
        col = _plain(col)
        self._columns[ref.field_id] = col
        return col

    def _predicate(self, pred: Predicate) -> ArrowData:
        ref = pred.term
        assert isinstance(ref, BoundReference)
        col = self._column(ref)
        if isinstance(pred, IsNull):
            return pc.is_null(col)
        if isinstance(pred, NotNull):
            return pc.is_valid(col)
        if isinstance(pred, IsNaN):
            return pc.fill_null(pc.is_nan(col), False)
        if isinstance(pred, NotNaN):
            return pc.invert(pc.fill_null(pc.is_nan(col), False))
        if isinstance(pred, StartsWith):
            return pc.starts_with(col, pattern=pred.literal)
        if isinstance(pred, NotStartsWith):
            return pc.invert(pc.starts_with(col, pattern=pred.literal))
        if isinstance(pred, SetPredicate):
            value_set = _arrow_value_set(ref.field_type, col.type, pred.literals)
            found = pc.is_in(col, value_set=value_set)
            if isinstance(pred, NotIn):
                found = pc.invert(found)
            # is_in answers false for null; SQL answers null
            return pc.if_else(pc.is_valid(col), found, pa.scalar(None, pa.bool_()))
        if isinstance(pred, LiteralPredicate):
            scalar = _arrow_scalar(ref.field_type, col.type, pred.literal)
            return _COMPARE[type(pred)](col, scalar)
        raise ValidationError(f"Cannot evaluate expression: unknown predicate {pred!r}")


_COMPARE: dict[type, Callable[[Any, Any], Any]] = {
    EqualTo: pc.equal, NotEqualTo: pc.not_equal, LessThan: pc.less, LessThanOrEqual: pc.less_equal,
    GreaterThan: pc.greater, GreaterThanOrEqual: pc.greater_equal,
}


def _plain(col: ArrowData) -> ArrowData:
    """The column with dictionary, extension and view encodings removed."""
    t = col.type
    if isinstance(t, pa.BaseExtensionType):
        if isinstance(col, pa.ChunkedArray):
            col = pa.chunked_array([c.storage for c in col.chunks], type=t.storage_type)
        else:
            col = col.storage
        t = col.type
    if pa.types.is_dictionary(t):
        col = col.cast(t.value_type)
    elif pa.types.is_string_view(t):
        col = col.cast(pa.string())
    elif pa.types.is_binary_view(t):
        col = col.cast(pa.binary())
    return col


def _arrow_python(t: IcebergType, arrow_type: pa.DataType, value: Any) -> tuple[Any, pa.DataType]:
    """A canonical value as a Python value and an Arrow type to compare with a column of ``arrow_type``."""
    if isinstance(t, TimeType):
        return value, pa.int64()  # cast to time64("us") by _arrow_scalar
    if isinstance(t, (TimestampType, TimestamptzType) + NANO_TIMESTAMPS):
        return value, pa.int64()
    if isinstance(t, UUIDType):
        if pa.types.is_string(arrow_type) or pa.types.is_large_string(arrow_type):
            return str(value), arrow_type
        return value.bytes, arrow_type
    if isinstance(t, DecimalType):
        return value, pa.decimal128(t.precision, t.scale) if t.precision <= 38 else pa.decimal256(t.precision, t.scale)
    if isinstance(t, BooleanType):
        return value, pa.bool_()
    if isinstance(t, (IntegerType, LongType)):
        return value, pa.int64()
    if isinstance(t, (FloatType, DoubleType)):
        return value, pa.float64()
    if isinstance(t, (StringType, BinaryType, FixedType)):
        return value, arrow_type
    return value, arrow_type


def _arrow_scalar(t: IcebergType, arrow_type: pa.DataType, value: Any) -> pa.Scalar:
    py, scalar_type = _arrow_python(t, arrow_type, value)
    if isinstance(t, DateType):
        return pa.scalar(py, pa.int32()).cast(pa.date32())
    if isinstance(t, TimeType):
        if pa.types.is_time64(arrow_type) and arrow_type.unit == "ns":
            return pa.scalar(py * 1000, pa.int64()).cast(pa.time64("ns"))
        return pa.scalar(py, pa.int64()).cast(pa.time64("us"))
    if isinstance(t, (TimestampType, TimestamptzType)):
        tz = arrow_type.tz if pa.types.is_timestamp(arrow_type) else None
        if pa.types.is_timestamp(arrow_type) and arrow_type.unit == "ns":
            return pa.scalar(py * 1000, pa.int64()).cast(pa.timestamp("ns", tz=tz))
        return pa.scalar(py, pa.int64()).cast(pa.timestamp("us", tz=tz))
    if isinstance(t, NANO_TIMESTAMPS):
        tz = arrow_type.tz if pa.types.is_timestamp(arrow_type) else None
        return pa.scalar(py, pa.int64()).cast(pa.timestamp("ns", tz=tz))
    return pa.scalar(py, scalar_type)


def arrow_constant(t: IcebergType, arrow_type: pa.DataType, value: Any, length: int) -> pa.Array:
    """``length`` copies of the canonical value ``value`` of ``t`` as an array of ``arrow_type`` (a column's
    default value filled in)."""
    scalar = _arrow_scalar(t, arrow_type, value)
    out = pa.repeat(scalar, length)
    return out if out.type == arrow_type else out.cast(arrow_type)


def _arrow_value_set(t: IcebergType, arrow_type: pa.DataType, literals: tuple[Any, ...]) -> pa.Array:
    scalars = [_arrow_scalar(t, arrow_type, v) for v in literals]
    kept = []
    for s in scalars:
        try:
            kept.append(s.cast(arrow_type))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, OverflowError):
            pass  # a value the column's Arrow type cannot hold matches no row
    return pa.array(kept, type=arrow_type) if kept else pa.array([], type=arrow_type)


# -- metrics evaluation ------------------------------------------------------------------------------------------


def metrics_might_match(expr: BooleanExpression, file: DataFile, schema: Schema, *,
                        case_sensitive: bool = True) -> bool:
    """Whether any row of a data file might match, judged from its metrics alone (inclusive evaluation).

    Returns False only when the record count, value / null / NaN counts or lower / upper bounds prove that no
    row matches; missing metrics mean "might match". An unbound expression is bound to ``schema`` first.

    :raises ValidationError: when an unbound expression does not bind
    :raises CorruptFileError: when a bound cannot be decoded for its column's type (names the file)
    """
    if not is_bound(expr):
        expr = bind(expr, schema, case_sensitive)
    if file.record_count == 0:
        return False
    return _MetricsEvaluator(file).eval(_rewrite_not(expr))


class _MetricsEvaluator:
    def __init__(self, file: DataFile) -> None:
        self._file = file
        self._value_counts = dict(file.value_counts or ())
        self._null_counts = dict(file.null_value_counts or ())
        self._nan_counts = dict(file.nan_value_counts or ())
        self._lower = dict(file.lower_bounds or ())
        self._upper = dict(file.upper_bounds or ())

    #: the answer under a NOT, which rewrite_not never leaves: "might match" (never prune there)
    UNDER_NOT = True

    def eval(self, expr: BooleanExpression) -> bool:
        if isinstance(expr, AlwaysTrue):
            return True
        if isinstance(expr, AlwaysFalse):
            return False
        if isinstance(expr, And):
            return self.eval(expr.left) and self.eval(expr.right)
        if isinstance(expr, Or):
            return self.eval(expr.left) or self.eval(expr.right)
        if isinstance(expr, Not):
            return self.UNDER_NOT
        assert isinstance(expr, Predicate) and isinstance(expr.term, BoundReference)
        return self._predicate(expr, expr.term)

    # counts ---------------------------------------------------------------------------------------------------

    def _all_null(self, field_id: int) -> bool:
        total = self._value_counts.get(field_id)
        nulls = self._null_counts.get(field_id)
        return total is not None and nulls is not None and nulls == total

    def _all_nan(self, field_id: int) -> bool:
        total = self._value_counts.get(field_id)
        nans = self._nan_counts.get(field_id)
        return total is not None and nans is not None and nans == total

    def _all_null_or_nan(self, ref: BoundReference) -> bool:
        """Every value is null or NaN, so every comparison is null or false."""
        total = self._value_counts.get(ref.field_id)
        nulls = self._null_counts.get(ref.field_id)
        if total is None or nulls is None:
            return self._all_nan(ref.field_id)
        if isinstance(ref.field_type, (FloatType, DoubleType)):
            nans = self._nan_counts.get(ref.field_id)
            if nans is None:
                return nulls == total
            return nulls + nans == total
        return nulls == total

    # bounds ---------------------------------------------------------------------------------------------------

    def _bound(self, ref: BoundReference, which: str) -> Any:
        raw = (self._lower if which == "lower" else self._upper).get(ref.field_id)
        if raw is None:
            return None
        try:
            return values.bound_value(ref.field_type, raw)
        except ValidationError as e:
            raise CorruptFileError(f"Cannot read {which} bound of column {ref.name!r} ({ref.field_type}): {e}",
                                   path=self._file.file_path) from e

    # predicates -----------------------------------------------------------------------------------------------

    def _predicate(self, pred: Predicate, ref: BoundReference) -> bool:
        fid = ref.field_id
        if isinstance(pred, IsNull):
            return self._null_counts.get(fid) != 0
        if isinstance(pred, NotNull):
            return not self._all_null(fid)
        if isinstance(pred, IsNaN):
            return self._nan_counts.get(fid) != 0 and not self._all_null(fid)
        if isinstance(pred, NotNaN):
            return not self._all_nan(fid)
        if isinstance(pred, (NotEqualTo, NotIn)):
            return not self._all_null(fid)
        if isinstance(pred, NotStartsWith):
            return self._not_starts_with(ref, pred.literal)
        if self._all_null_or_nan(ref):
            return False
        if isinstance(pred, StartsWith):
            return self._starts_with(ref, pred.literal)
        lower = self._bound(ref, "lower")
        upper = self._bound(ref, "upper")
        if isinstance(pred, In):
            if len(pred.literals) > IN_PREDICATE_LIMIT:
                return True
            return any((lower is None or lower <= v) and (upper is None or v <= upper) for v in pred.literals)
        v = pred.literal  # type: ignore[attr-defined]
        if isinstance(pred, EqualTo):
            return not ((lower is not None and lower > v) or (upper is not None and upper < v))
        if isinstance(pred, LessThan):
            return lower is None or lower < v
        if isinstance(pred, LessThanOrEqual):
            return lower is None or lower <= v
        if isinstance(pred, GreaterThan):
            return upper is None or upper > v
        if isinstance(pred, GreaterThanOrEqual):
            return upper is None or upper >= v
        return True

    def _starts_with(self, ref: BoundReference, prefix: str) -> bool:
        n = len(prefix)
        lower = self._bound(ref, "lower")
        if lower is not None and lower[:n] > prefix:
            return False
        upper = self._bound(ref, "upper")
        if upper is not None and upper[:n] < prefix:
            return False
        return True

    def _not_starts_with(self, ref: BoundReference, prefix: str) -> bool:
        if self._all_null(ref.field_id):
            return False
        if self._null_counts.get(ref.field_id) != 0:
            return True  # unknown nulls: a null row gives null, but other rows may not start with the prefix
        lower = self._bound(ref, "lower")
        upper = self._bound(ref, "upper")
        # the strings that start with a prefix are one contiguous range, so two bounds inside it hold all values
        if lower is not None and upper is not None and lower.startswith(prefix) and upper.startswith(prefix):
            return False
        return True


def metrics_must_match(expr: BooleanExpression, file: DataFile, schema: Schema, *,
                       case_sensitive: bool = True) -> bool:
    """Whether every row of a data file matches, judged from its metrics alone (strict evaluation, Iceberg
    Java's ``StrictMetricsEvaluator``): True only when the counts and bounds prove it, so a delete may drop the
    whole file without reading it. An empty file matches. An unbound expression is bound to ``schema`` first.

    Semantics are :func:`evaluate_arrow`'s: a comparison never selects a null, so a column that may hold nulls
    (its null count is missing or positive, and it is not required) proves no comparison; an ordering or
    equality also never selects NaN, so a float or double column needs a NaN count of 0. ``!=`` and
    ``NOT IN`` do select NaN. Bounds prove ``x < v`` by ``upper < v``, ``x >= v`` by ``lower >= v``, ``x = v``
    by ``lower = upper = v``, ``x != v`` by ``v`` outside ``[lower, upper]``, ``IN`` by ``lower = upper`` in the
    set (or, for integer-like types, every value of ``[lower, upper]`` in the set), ``NOT IN`` by no listed
    value inside the bounds, ``LIKE 'p%'`` by both bounds starting with ``p`` and ``NOT LIKE 'p%'`` by a bound
    beyond every string starting with ``p``. Truncated string and binary bounds keep all of this sound.

    :raises ValidationError: when an unbound expression does not bind
    :raises CorruptFileError: when a bound cannot be decoded for its column's type (names the file)
    """
    if not is_bound(expr):
        expr = bind(expr, schema, case_sensitive)
    if file.record_count <= 0:
        return True
    return _StrictMetricsEvaluator(file).eval(_rewrite_not(expr))


_DISCRETE = (BooleanType, IntegerType, LongType, DateType, TimeType, TimestampType, TimestamptzType) + NANO_TIMESTAMPS


class _StrictMetricsEvaluator(_MetricsEvaluator):
    """The same walk as the inclusive evaluator, but each leaf must hold for every row (and a NOT proves nothing)."""

    UNDER_NOT = False

    def _predicate(self, pred: Predicate, ref: BoundReference) -> bool:
        return self._must(pred, ref)

    def _value_count(self, field_id: int) -> int:
        count = self._value_counts.get(field_id)
        return self._file.record_count if count is None else count

    def _no_nulls(self, ref: BoundReference) -> bool:
        return ref.required or self._null_counts.get(ref.field_id) == 0

    def _no_nans(self, ref: BoundReference) -> bool:
        return not isinstance(ref.field_type, (FloatType, DoubleType)) or self._nan_counts.get(ref.field_id) == 0

    def _only_nulls(self, ref: BoundReference) -> bool:
        nulls = self._null_counts.get(ref.field_id)
        return nulls is not None and nulls == self._value_count(ref.field_id)

    def _only_nans(self, ref: BoundReference) -> bool:
        nans = self._nan_counts.get(ref.field_id)
        return nans is not None and nans == self._value_count(ref.field_id)

    def _must(self, pred: Predicate, ref: BoundReference) -> bool:
        if isinstance(pred, IsNull):
            return self._only_nulls(ref)
        if isinstance(pred, NotNull):
            return self._no_nulls(ref)
        if isinstance(pred, IsNaN):
            return self._only_nans(ref)
        if isinstance(pred, NotNaN):
            return self._nan_counts.get(ref.field_id) == 0 or self._only_nulls(ref)
        if not self._no_nulls(ref):
            return False  # every other predicate leaves a null row out
        if isinstance(pred, (NotEqualTo, NotIn, NotStartsWith)):
            # true for NaN, so only the non-NaN values (which the bounds cover) matter
            if self._only_nans(ref):
                return True
            lower = self._bound(ref, "lower")
            upper = self._bound(ref, "upper")
            if isinstance(pred, NotEqualTo):
                v = pred.literal
                return (lower is not None and lower > v) or (upper is not None and upper < v)
            if isinstance(pred, NotIn):
                if lower is None and upper is None:
                    return False
                inside = [v for v in pred.literals
                          if (lower is None or lower <= v) and (upper is None or v <= upper)]
                return not inside
            prefix = pred.literal
            # the strings starting with the prefix form one range that starts at the prefix itself
            if upper is not None and upper < prefix:
                return True
            return lower is not None and lower > prefix and not lower.startswith(prefix)
        if not self._no_nans(ref):
            return False  # NaN fails every remaining predicate
        if isinstance(pred, StartsWith):
            if pred.literal == "":
                return True
            lower = self._bound(ref, "lower")
            upper = self._bound(ref, "upper")
            return (lower is not None and upper is not None and lower.startswith(pred.literal)
                    and upper.startswith(pred.literal))
        lower = self._bound(ref, "lower")
        upper = self._bound(ref, "upper")
        if isinstance(pred, In):
            if lower is None or upper is None:
                return False
            literals = set(pred.literals)
            if lower == upper:
                return lower in literals
            if isinstance(ref.field_type, _DISCRETE) and upper - lower + 1 <= len(literals):
                return all(v in literals for v in range(lower, upper + 1))
            return False
        if not isinstance(pred, LiteralPredicate):
            return False
        v = pred.literal
        if isinstance(pred, EqualTo):
            return lower is not None and upper is not None and lower == v and upper == v
        if isinstance(pred, LessThan):
            return upper is not None and upper < v
        if isinstance(pred, LessThanOrEqual):
            return upper is not None and upper <= v
        if isinstance(pred, GreaterThan):
            return lower is not None and lower > v
        if isinstance(pred, GreaterThanOrEqual):
            return lower is not None and lower >= v
        return False


# -- partition projections ---------------------------------------------------------------------------------------


def _bound_nnf(expr: BooleanExpression, schema: Schema, case_sensitive: bool) -> BooleanExpression:
    if not isinstance(expr, BooleanExpression):
        raise ValidationError(f"Cannot project expression: {expr!r} is not an expression")
    if not is_bound(expr):
        expr = bind(expr, schema, case_sensitive)
    return _rewrite_not(expr)


def _and2(a: BooleanExpression, b: BooleanExpression) -> BooleanExpression:
    if isinstance(a, AlwaysFalse) or isinstance(b, AlwaysFalse):
        return AlwaysFalse()
    if isinstance(a, AlwaysTrue):
        return b
    if isinstance(b, AlwaysTrue):
        return a
    return And(a, b)


def _or2(a: BooleanExpression, b: BooleanExpression) -> BooleanExpression:
    if isinstance(a, AlwaysTrue) or isinstance(b, AlwaysTrue):
        return AlwaysTrue()
    if isinstance(a, AlwaysFalse):
        return b
    if isinstance(b, AlwaysFalse):
        return a
    return Or(a, b)


def _with_term(expr: BooleanExpression, ref: BoundReference) -> BooleanExpression:
    """The expression with every predicate's term replaced by ``ref``."""
    if isinstance(expr, (And, Or)):
        return type(expr)(_with_term(expr.left, ref), _with_term(expr.right, ref))
    if isinstance(expr, Not):
        return Not(_with_term(expr.child, ref))
    if isinstance(expr, SetPredicate):
        return type(expr)(ref, expr.literals)
    if isinstance(expr, LiteralPredicate):
        return type(expr)(ref, expr.literal)
    if isinstance(expr, Predicate):
        return type(expr)(ref)
    return expr


def _partition_ref(part: PartitionField, source: BoundReference) -> BoundReference:
    return BoundReference(field_id=part.field_id, name=part.name,
                          field_type=part.transform.result_type(source.field_type), path=(part.name,))


def _project_one(part: PartitionField, pred: Predicate, strict: bool) -> BooleanExpression | None:
    """One partition field's projection of a bound predicate on its source column, bound to the partition
    field; None when the transform says nothing (or cannot apply to the column's current type)."""
    assert isinstance(pred.term, BoundReference)
    transform = part.transform
    try:
        from engine.model.transform_projections import project_predicate, project_predicate_strict  # next commit: no cycle

        projected = project_predicate_strict(transform, part.name, pred) if strict else project_predicate(transform, part.name, pred)
    except (ValidationError, ArithmeticError, ValueError):
        return None
    if projected is None:
        return None
    return _with_term(projected, _partition_ref(part, pred.term))


def _project(expr: BooleanExpression, spec: PartitionSpec, strict: bool) -> BooleanExpression:
    if isinstance(expr, (AlwaysTrue, AlwaysFalse)):
        return expr
    if isinstance(expr, And):
        return _and2(_project(expr.left, spec, strict), _project(expr.right, spec, strict))
    if isinstance(expr, Or):
        return _or2(_project(expr.left, spec, strict), _project(expr.right, spec, strict))
    if isinstance(expr, Predicate) and isinstance(expr.term, BoundReference):
        # inclusive: every field's projection must hold; strict: any field's projection suffices
        result: BooleanExpression = AlwaysFalse() if strict else AlwaysTrue()
        for part in spec.fields_by_source_id(expr.term.field_id):
            projected = _project_one(part, expr, strict)
            if projected is not None:
                result = _or2(result, projected) if strict else _and2(result, projected)
        return result
    raise ValidationError(f"Cannot project expression: {expr!r}")


def project_inclusive(expr: BooleanExpression, spec: PartitionSpec, schema: Schema, *,
                      case_sensitive: bool = True) -> BooleanExpression:
    """A filter over the partition tuple that is true for the partition of every row ``expr`` selects (Iceberg
    Java's ``Projections.inclusive``), for pruning partitions, manifests and files.

    The result is bound to the partition fields: each term is a :class:`BoundReference` whose field id and
    name are the partition field's and whose type is the transform's result type. Predicates on columns that
    no partition field is built from become AlwaysTrue; several fields on one column all apply (AND).
    See engine.model.transform_projections for each transform's rules.

    :param expr: a row filter, bound or unbound (then bound to ``schema``)
    :param spec: the partition spec
    :param schema: the table schema the spec's source ids refer to
    :raises ValidationError: when an unbound expression does not bind
    """
    return _project(_bound_nnf(expr, schema, case_sensitive), spec, False)


def project_strict(expr: BooleanExpression, spec: PartitionSpec, schema: Schema, *,
                   case_sensitive: bool = True) -> BooleanExpression:
    """A filter over the partition tuple that is true only for partitions all of whose rows ``expr`` selects
    (Iceberg Java's ``Projections.strict``), e.g. to drop whole files in a delete.

    Bound like :func:`project_inclusive`; predicates on columns without a partition field become AlwaysFalse,
    and several fields on one column are alternatives (OR).

    :raises ValidationError: when an unbound expression does not bind
    """
    return _project(_bound_nnf(expr, schema, case_sensitive), spec, True)


# -- evaluation on one partition tuple ---------------------------------------------------------------------------


def _is_nan(v: Any) -> bool:
    return isinstance(v, float) and math.isnan(v)


def _test(pred: Predicate, v: Any) -> bool | None:
    """SQL's three-valued result of a predicate on one canonical value (None: unknown)."""
    if isinstance(pred, IsNull):
        return v is None
    if isinstance(pred, NotNull):
        return v is not None
    if isinstance(pred, IsNaN):
        return _is_nan(v)
    if isinstance(pred, NotNaN):
        return not _is_nan(v)
    if v is None:
        return None
    nan = _is_nan(v)
    if isinstance(pred, StartsWith):
        return v.startswith(pred.literal)
    if isinstance(pred, NotStartsWith):
        return not v.startswith(pred.literal)
    if isinstance(pred, In):
        return not nan and v in pred.literals
    if isinstance(pred, NotIn):
        return nan or v not in pred.literals
    if isinstance(pred, NotEqualTo):
        return nan or v != pred.literal
    if nan:
        return False
    if isinstance(pred, EqualTo):
        return v == pred.literal
    if isinstance(pred, LessThan):
        return v < pred.literal
    if isinstance(pred, LessThanOrEqual):
        return v <= pred.literal
    if isinstance(pred, GreaterThan):
        return v > pred.literal
    if isinstance(pred, GreaterThanOrEqual):
        return v >= pred.literal
    raise ValidationError(f"Cannot evaluate expression: unknown predicate {pred!r}")


def _eval_values(expr: BooleanExpression, lookup: Callable[[Term], Any]) -> bool | None:
    """SQL's three-valued result of an expression whose terms ``lookup`` turns into values."""
    if isinstance(expr, AlwaysTrue):
        return True
    if isinstance(expr, AlwaysFalse):
        return False
    if isinstance(expr, And):
        left = _eval_values(expr.left, lookup)
        if left is False:
            return False
        right = _eval_values(expr.right, lookup)
        if right is False:
            return False
        return None if left is None or right is None else True
    if isinstance(expr, Or):
        left = _eval_values(expr.left, lookup)
        if left is True:
            return True
        right = _eval_values(expr.right, lookup)
        if right is True:
            return True
        return None if left is None or right is None else False
    if isinstance(expr, Not):
        child = _eval_values(expr.child, lookup)
        return None if child is None else not child
    if isinstance(expr, Predicate):
        return _test(expr, lookup(expr.term))
    raise ValidationError(f"Cannot evaluate expression: unknown expression {expr!r}")


def _tuple_lookup(field_ids: list[int], names: list[str], partition: tuple[Any, ...]) -> Callable[[Term], Any]:
    if len(partition) != len(field_ids):
        raise ValidationError(f"Cannot evaluate partition filter: the partition tuple {partition!r} has "
                              f"{len(partition)} values for {len(field_ids)} partition fields")
    by_id = {fid: i for i, fid in enumerate(field_ids)}
    by_name = {name: i for i, name in enumerate(names)}

    def lookup(term: Term) -> Any:
        i = by_id.get(term.field_id) if isinstance(term, BoundReference) else by_name.get(term.name)
        if i is None:
            raise ValidationError(f"Cannot evaluate partition filter: {term.name!r} is not a partition field")
        return partition[i]
    return lookup


def _spec_lookup(spec: PartitionSpec, partition: tuple[Any, ...]) -> Callable[[Term], Any]:
    return _tuple_lookup([f.field_id for f in spec.fields], [f.name for f in spec.fields], tuple(partition))


def evaluate_partition(expr: BooleanExpression, partition_type: StructType, partition: tuple[Any, ...]) -> bool:
    """Whether a filter over the partition struct (as :func:`project_inclusive` returns, or unbound with
    partition field names) is true for one partition tuple of canonical values; null gives false.

    :param partition_type: the spec's partition struct (``spec.partition_type(schema)``)
    :param partition: the values in the order of the struct's fields
    :raises ValidationError: when the tuple's length is not the struct's or a term is not a partition field
    """
    fields = partition_type.fields
    lookup = _tuple_lookup([f.field_id for f in fields], [f.name for f in fields], tuple(partition))
    return _eval_values(expr, lookup) is True


def partition_might_match(expr: BooleanExpression, spec: PartitionSpec, schema: Schema,
                          partition: tuple[Any, ...], *, case_sensitive: bool = True) -> bool:
    """False only when the partition values prove that no row of the partition matches ``expr``.

    :raises ValidationError: when an unbound expression does not bind or the tuple does not fit the spec
    """
    projected = project_inclusive(expr, spec, schema, case_sensitive=case_sensitive)
    return _eval_values(projected, _spec_lookup(spec, partition)) is True


def partition_must_match(expr: BooleanExpression, spec: PartitionSpec, schema: Schema,
                         partition: tuple[Any, ...], *, case_sensitive: bool = True) -> bool:
    """True only when the partition values prove that every row of the partition matches ``expr``.

    :raises ValidationError: when an unbound expression does not bind or the tuple does not fit the spec
    """
    projected = project_strict(expr, spec, schema, case_sensitive=case_sensitive)
    return _eval_values(projected, _spec_lookup(spec, partition)) is True


# -- residuals ---------------------------------------------------------------------------------------------------


def residual(expr: BooleanExpression, spec: PartitionSpec, schema: Schema, partition: tuple[Any, ...], *,
             case_sensitive: bool = True) -> BooleanExpression:
    """What is left of a row filter for the rows of one partition (Iceberg Java's ``ResidualEvaluator``).

    Each predicate becomes AlwaysTrue when a strict projection proves it for the partition, AlwaysFalse when an
    inclusive projection rules it out, and stays otherwise; AND / OR fold the constants. So AlwaysTrue means
    every row of a file in this partition matches and AlwaysFalse means none does. The result is bound to
    ``schema`` with NOT pushed into the predicates.

    :param partition: the file's partition tuple, in the order of ``spec``'s fields
    :raises ValidationError: when an unbound expression does not bind or the tuple does not fit the spec
    """
    bound = _bound_nnf(expr, schema, case_sensitive)
    if not spec.fields:
        return bound
    return _residual(bound, spec, _spec_lookup(spec, partition))


def _residual(expr: BooleanExpression, spec: PartitionSpec, lookup: Callable[[Term], Any]) -> BooleanExpression:
    if isinstance(expr, And):
        return _and2(_residual(expr.left, spec, lookup), _residual(expr.right, spec, lookup))
    if isinstance(expr, Or):
        return _or2(_residual(expr.left, spec, lookup), _residual(expr.right, spec, lookup))
    if isinstance(expr, Predicate) and isinstance(expr.term, BoundReference):
        for part in spec.fields_by_source_id(expr.term.field_id):
            strict = _project_one(part, expr, True)
            if strict is not None and _eval_values(strict, lookup) is True:
                return AlwaysTrue()
            inclusive = _project_one(part, expr, False)
            if inclusive is not None and _eval_values(inclusive, lookup) is not True:
                return AlwaysFalse()
    return expr


def file_might_match(expr: BooleanExpression, file: DataFile, spec: PartitionSpec, schema: Schema, *,
                     case_sensitive: bool = True) -> bool:
    """False only when the file's partition or metrics prove that none of its rows matches.

    :param spec: the spec the file was written with (``file.spec_id``)
    :raises ValidationError: when an unbound expression does not bind
    :raises CorruptFileError: when a bound cannot be decoded
    """
    rest = residual(expr, spec, schema, file.partition, case_sensitive=case_sensitive)
    return metrics_might_match(rest, file, schema)


def file_must_match(expr: BooleanExpression, file: DataFile, spec: PartitionSpec, schema: Schema, *,
                    case_sensitive: bool = True) -> bool:
    """True only when the file's partition and metrics together prove that every row matches: the partition
    settles what it can (:func:`residual`) and the metrics must prove the rest (:func:`metrics_must_match`).

    :param spec: the spec the file was written with (``file.spec_id``)
    :raises ValidationError: when an unbound expression does not bind
    :raises CorruptFileError: when a bound cannot be decoded
    """
    rest = residual(expr, spec, schema, file.partition, case_sensitive=case_sensitive)
    return metrics_must_match(rest, file, schema)


# -- manifest pruning --------------------------------------------------------------------------------------------


def manifest_might_match(expr: BooleanExpression, spec: PartitionSpec, schema: Schema,
                         summaries: tuple[FieldSummary, ...] | None, *, case_sensitive: bool = True,
                         manifest_path: str | None = None) -> bool:
    """Whether a manifest written with ``spec`` may hold a file with rows matching ``expr``, judged from the
    manifest list's partition summaries (Iceberg Java's ``ManifestEvaluator`` on the inclusive projection).

    :param summaries: the manifest's ``partitions`` field summaries, one per spec field (None: might match)
    :param manifest_path: named in errors
    :raises ValidationError: when an unbound expression does not bind
    :raises CorruptFileError: when a summary bound cannot be decoded
    """
    projected = project_inclusive(expr, spec, schema, case_sensitive=case_sensitive)
    return summaries_might_match(projected, spec, summaries, manifest_path=manifest_path)


def summaries_might_match(partition_expr: BooleanExpression, spec: PartitionSpec,
                          summaries: tuple[FieldSummary, ...] | None, *, manifest_path: str | None = None) -> bool:
    """:func:`manifest_might_match` for a filter already projected with :func:`project_inclusive` (project once,
    then test many manifests).

    A summary's bounds are the smallest and largest non-null, non-NaN partition values (Appendix D bytes); no
    bounds mean every value is null or NaN. Predicates on fields the summaries do not cover might match.

    :raises ValidationError: when the filter is not bound
    :raises CorruptFileError: when a summary bound cannot be decoded
    """
    _require_bound(partition_expr, "evaluate partition summaries")
    if summaries is None or len(summaries) != len(spec.fields):
        return True
    index = {f.field_id: i for i, f in enumerate(spec.fields)}
    return _SummaryEvaluator(tuple(summaries), index, manifest_path).eval(partition_expr)


class _SummaryEvaluator:
    def __init__(self, summaries: tuple[FieldSummary, ...], index: dict[int, int], path: str | None) -> None:
        self._summaries = summaries
        self._index = index
        self._path = path

    def eval(self, expr: BooleanExpression) -> bool:
        if isinstance(expr, AlwaysTrue):
            return True
        if isinstance(expr, AlwaysFalse):
            return False
        if isinstance(expr, And):
            return self.eval(expr.left) and self.eval(expr.right)
        if isinstance(expr, Or):
            return self.eval(expr.left) or self.eval(expr.right)
        if isinstance(expr, Predicate) and isinstance(expr.term, BoundReference):
            i = self._index.get(expr.term.field_id)
            if i is None:
                return True
            return self._predicate(expr, expr.term, self._summaries[i])
        return True  # NOT (not produced by the projections) prunes nothing

    def _bound(self, ref: BoundReference, raw: bytes | None) -> Any:
        if raw is None:
            return None
        try:
            return values.bound_value(ref.field_type, raw)
        except ValidationError as e:
            raise CorruptFileError(f"Cannot read partition summary bound of {ref.name!r} ({ref.field_type}): {e}",
                                   path=self._path or "<manifest list>") from e

    @staticmethod
    def _all_null(s: FieldSummary, ref: BoundReference) -> bool:
        if not s.contains_null or s.lower_bound is not None:
            return False
        if isinstance(ref.field_type, (FloatType, DoubleType)):
            return s.contains_nan is False  # without bounds the values might be NaN
        return True

    def _predicate(self, pred: Predicate, ref: BoundReference, s: FieldSummary) -> bool:
        if isinstance(pred, IsNull):
            return s.contains_null
        if isinstance(pred, NotNull):
            return not self._all_null(s, ref)
        if isinstance(pred, IsNaN):
            return s.contains_nan is not False
        if isinstance(pred, NotNaN):
            return not (s.contains_nan is True and not s.contains_null and s.lower_bound is None)
        if isinstance(pred, (NotEqualTo, NotIn)):
            return not self._all_null(s, ref)
        if isinstance(pred, NotStartsWith):
            if s.contains_null:
                return True
            lower = self._bound(ref, s.lower_bound)
            upper = self._bound(ref, s.upper_bound)
            prefix = pred.literal
            return not (lower is not None and upper is not None and lower.startswith(prefix)
                        and upper.startswith(prefix))
        if s.lower_bound is None or s.upper_bound is None:
            return False  # every value is null or NaN: no comparison holds
        lower = self._bound(ref, s.lower_bound)
        upper = self._bound(ref, s.upper_bound)
        if isinstance(pred, StartsWith):
            n = len(pred.literal)
            if lower is not None and lower[:n] > pred.literal:
                return False
            return not (upper is not None and upper[:n] < pred.literal)
        if isinstance(pred, In):
            if len(pred.literals) > IN_PREDICATE_LIMIT:
                return True
            return any((lower is None or lower <= v) and (upper is None or v <= upper) for v in pred.literals)
        if not isinstance(pred, LiteralPredicate):
            return True
        v = pred.literal
        if isinstance(pred, EqualTo):
            return not ((lower is not None and lower > v) or (upper is not None and upper < v))
        if isinstance(pred, LessThan):
            return lower is None or lower < v
        if isinstance(pred, LessThanOrEqual):
            return lower is None or lower <= v
        if isinstance(pred, GreaterThan):
            return upper is None or upper > v
        if isinstance(pred, GreaterThanOrEqual):
            return upper is None or upper >= v
        return True


# -- text --------------------------------------------------------------------------------------------------------

_KEYWORDS = frozenset({"and", "or", "not", "is", "null", "nan", "in", "like", "between", "true", "false"})
_BARE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def _name_text(name: str) -> str:
    parts = name.split(".")
    if all(_BARE_NAME.match(p) and p.lower() not in _KEYWORDS for p in parts):
        return name
    return '"' + name.replace('"', '""') + '"'


def _quote(s: str) -> str:
    return "'" + s.replace("'", "''") + "'"


def _literal_text(value: Any, t: IcebergType | None = None) -> str:
    """A literal as parseable text; bound (canonical) values are rendered by their column type."""
    if t is not None and value is not None and not isinstance(value, bool):
        if isinstance(t, DateType) and isinstance(value, int):
            return "DATE " + _quote(values.format_date(value))
        if isinstance(t, TimeType) and isinstance(value, int):
            return "TIME " + _quote(values.format_time(value))
        if isinstance(t, TimestampType) and isinstance(value, int):
            return "TIMESTAMP " + _quote(values.format_timestamp(value))
        if isinstance(t, TimestamptzType) and isinstance(value, int):
            return "TIMESTAMPTZ " + _quote(values.format_timestamptz(value))
        if isinstance(t, NANO_TIMESTAMPS) and isinstance(value, int):
            # a plain string: the column's type reads its nanoseconds back when the filter is bound
            return _quote(values.value_to_json(t, value))
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        text = repr(value)
        return text if ("e" in text or not math.isfinite(value)) else text + "e0"
    if isinstance(value, Decimal):
        text = format(value, "f")
        return text if "." in text else text + "."
    if isinstance(value, str):
        return _quote(value)
    if isinstance(value, (bytes, bytearray)):
        return "X'" + bytes(value).hex() + "'"
    if isinstance(value, datetime.datetime):
        return "TIMESTAMP " + _quote(value.isoformat(sep=" "))
    if isinstance(value, datetime.date):
        return "DATE " + _quote(value.isoformat())
    if isinstance(value, datetime.time):
        return "TIME " + _quote(value.isoformat())
    if isinstance(value, uuid.UUID):
        return _quote(str(value))
    return _quote(str(value))


def _like_pattern(prefix: str) -> str:
    return _quote(re.sub(r"([\\%_])", r"\\\1", prefix) + "%")


_SYMBOLS: dict[type, str] = {EqualTo: "=", NotEqualTo: "!=", LessThan: "<", LessThanOrEqual: "<=",
                             GreaterThan: ">", GreaterThanOrEqual: ">="}


def _to_text(expr: BooleanExpression) -> str:
    if isinstance(expr, AlwaysTrue):
        return "true"
    if isinstance(expr, AlwaysFalse):
        return "false"
    if isinstance(expr, (And, Or)):
        word = " AND " if isinstance(expr, And) else " OR "
        # the parser builds a chain as a balanced tree: print a chain flat only when it is that tree, else
        # keep both sides in parentheses so the text parses back to the same shape
        operands = _chain(expr)
        if _balanced(type(expr), operands) != expr:
            operands = [expr.left, expr.right]
        return word.join(f"({_to_text(o)})" if isinstance(o, (And, Or)) else _to_text(o) for o in operands)
    if isinstance(expr, Not):
        return f"NOT ({_to_text(expr.child)})"
    if isinstance(expr, Predicate):
        term = str(expr.term)
        t = expr.term.field_type if isinstance(expr.term, BoundReference) else None
        if isinstance(expr, IsNull):
            return f"{term} IS NULL"
        if isinstance(expr, NotNull):
            return f"{term} IS NOT NULL"
        if isinstance(expr, IsNaN):
            return f"{term} IS NAN"
        if isinstance(expr, NotNaN):
            return f"{term} IS NOT NAN"
        if isinstance(expr, StartsWith):
            return f"{term} LIKE {_like_pattern(str(expr.literal))}"
        if isinstance(expr, NotStartsWith):
            return f"{term} NOT LIKE {_like_pattern(str(expr.literal))}"
        if isinstance(expr, SetPredicate):
            items = ", ".join(_literal_text(v, t) for v in expr.literals)
            return f"{term} {'IN' if isinstance(expr, In) else 'NOT IN'} ({items})"
        if isinstance(expr, LiteralPredicate):
            return f"{term} {_SYMBOLS[type(expr)]} {_literal_text(expr.literal, t)}"
    return repr(expr)


# -- parsing -----------------------------------------------------------------------------------------------------

_TOKEN = re.compile(r"""
    (?P<ws>\s+)
  | (?P<bytes>[xX]'(?P<hex>[^']*)')
  | (?P<number>(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?)
  | (?P<string>'(?:[^']|'')*')
  | (?P<qname>"(?:[^"]|"")*"|`(?:[^`]|``)*`)
  | (?P<name>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<op><=|>=|<>|!=|==|[=<>(),.\-])
""", re.VERBOSE)


@attrs.frozen
class _Token:
    kind: str  # "name", "qname", "number", "string", "bytes", "op", "end"
    value: Any
    pos: int

    def is_word(self, *words: str) -> bool:
        return self.kind == "name" and self.value.lower() in words

    def is_op(self, *ops: str) -> bool:
        return self.kind == "op" and self.value in ops


def _tokenize(text: str) -> list[_Token]:
    tokens: list[_Token] = []
    pos = 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:
            raise ValidationError(f"Cannot parse expression: unexpected {text[pos]!r} at position {pos} in {text!r}")
        kind = next(k for k in ("ws", "bytes", "number", "string", "qname", "name", "op") if m.group(k) is not None)
        raw = m.group(kind)
        if kind == "bytes":
            try:
                tokens.append(_Token("bytes", bytes.fromhex(m.group("hex")), pos))
            except ValueError as e:
                raise ValidationError(f"Cannot parse expression: bad hex literal {raw} at position {pos}") from e
        elif kind == "number":
            tokens.append(_Token("number", raw, pos))
        elif kind == "string":
            tokens.append(_Token("string", raw[1:-1].replace("''", "'"), pos))
        elif kind == "qname":
            q = raw[0]
            tokens.append(_Token("qname", raw[1:-1].replace(q + q, q), pos))
        elif kind in ("name", "op"):
            tokens.append(_Token(kind, raw, pos))
        pos = m.end()
    tokens.append(_Token("end", None, len(text)))
    return tokens


_COMPARISONS: dict[str, tuple[type, type]] = {  # operator -> (class, class when the literal comes first)
    "=": (EqualTo, EqualTo), "==": (EqualTo, EqualTo), "!=": (NotEqualTo, NotEqualTo),
    "<>": (NotEqualTo, NotEqualTo), "<": (LessThan, GreaterThan), "<=": (LessThanOrEqual, GreaterThanOrEqual),
    ">": (GreaterThan, LessThan), ">=": (GreaterThanOrEqual, LessThanOrEqual),
}
_NO_VALUE = object()


def parse_expression(text: str) -> BooleanExpression:
    """Parse a SQL-like filter (see the module docstring for the syntax) into an unbound expression.

    An AND or OR chain becomes a balanced tree (``a AND b AND c`` is ``And(And(a, b), c)``).

    :raises ValidationError: naming the position of the first problem, or when parentheses and NOT nest, or the
        expression tree would be, more than :data:`MAX_DEPTH` levels deep
    """
    if not isinstance(text, str):
        raise ValidationError(f"Cannot parse expression: expected a string, got {text!r}")
    try:
        return _Parser(text).parse()
    except RecursionError as e:  # not expected below MAX_DEPTH; never let it escape untyped
        raise ValidationError(f"Cannot parse expression: it is nested too deeply (limit {MAX_DEPTH} levels)") from e


class _Parser:
    def __init__(self, text: str) -> None:
        self._text = text
        self._tokens = _tokenize(text)
        self._i = 0

    # helpers --------------------------------------------------------------------------------------------------

    def _peek(self, ahead: int = 0) -> _Token:
        return self._tokens[min(self._i + ahead, len(self._tokens) - 1)]

    def _next(self) -> _Token:
        tok = self._peek()
        self._i += 1
        return tok

    def _fail(self, what: str, tok: _Token | None = None) -> ValidationError:
        tok = tok or self._peek()
        found = "the end" if tok.kind == "end" else repr(self._text[tok.pos:tok.pos + 20])
        text = self._text if len(self._text) <= 200 else self._text[:200] + f"... ({len(self._text)} characters)"
        return ValidationError(f"Cannot parse expression: {what} at position {tok.pos} ({found}) in {text!r}")

    def _expect_op(self, op: str) -> None:
        if not self._peek().is_op(op):
            raise self._fail(f"expected {op!r}")
        self._next()

    def _expect_word(self, word: str) -> None:
        if not self._peek().is_word(word):
            raise self._fail(f"expected {word.upper()}")
        self._next()

    # grammar --------------------------------------------------------------------------------------------------

    def parse(self) -> BooleanExpression:
        if self._peek().kind == "end":
            raise self._fail("empty expression")
        expr, _ = self._or(0)
        if self._peek().kind != "end":
            raise self._fail("unexpected text")
        return expr

    # Each rule returns the expression and its depth; ``nesting`` counts the parentheses and NOTs around it.
    # A parenthesis costs two Python frames (_or, _unary), so MAX_DEPTH bounds the recursion too.

    def _too_deep(self, tok: _Token | None = None) -> ValidationError:
        return self._fail(f"nested more than the limit of {MAX_DEPTH} levels (parentheses, NOT, and AND / OR "
                          "chains counted as balanced trees)", tok)

    def _or(self, nesting: int) -> tuple[BooleanExpression, int]:
        groups: list[tuple[BooleanExpression, int]] = []
        while True:
            terms = [self._unary(nesting)]
            while self._peek().is_word("and"):
                self._next()
                terms.append(self._unary(nesting))
            groups.append(self._join(And, terms))
            if not self._peek().is_word("or"):
                return self._join(Or, groups)
            self._next()

    def _join(self, cls: type, items: list[tuple[BooleanExpression, int]]) -> tuple[BooleanExpression, int]:
        """The items as a balanced chain of ``cls``, with its depth."""
        if len(items) == 1:
            return items[0]
        mid = (len(items) + 1) // 2
        left, left_depth = self._join(cls, items[:mid])
        right, right_depth = self._join(cls, items[mid:])
        levels = max(left_depth, right_depth) + 1
        if levels > MAX_DEPTH:
            raise self._too_deep()
        return cls(left, right), levels

    def _unary(self, nesting: int) -> tuple[BooleanExpression, int]:
        nots = 0
        while self._peek().is_word("not"):
            nots += 1
            if nesting + nots > MAX_DEPTH:
                raise self._too_deep()
            self._next()
        tok = self._peek()
        if tok.is_op("("):
            if nesting + nots + 1 > MAX_DEPTH:
                raise self._too_deep()
            self._next()
            expr, levels = self._or(nesting + nots + 1)
            self._expect_op(")")
        else:
            expr, levels = self._primary(), 1
            if isinstance(expr, (And, Not)):  # BETWEEN
                levels = depth(expr)
        if levels + nots > MAX_DEPTH:
            raise self._too_deep(tok)
        for _ in range(nots):
            expr = Not(expr)
        return expr, levels + nots

    def _primary(self) -> BooleanExpression:
        tok = self._peek()
        if tok.is_word("isnan") and self._peek(1).is_op("("):
            self._next()
            self._next()
            term = self._term()
            self._expect_op(")")
            return IsNaN(term)
        literal = self._literal_or_none()
        if literal is not _NO_VALUE:
            op = self._peek()
            if op.kind == "op" and op.value in _COMPARISONS:
                self._next()
                if self._literal_or_none() is not _NO_VALUE:
                    raise self._fail("cannot compare two literals", op)
                term = self._term()
                if literal is None:
                    raise self._fail("comparison with null is never true; use IS NULL", tok)
                return _COMPARISONS[op.value][1](term, literal)
            if isinstance(literal, bool):
                return AlwaysTrue() if literal else AlwaysFalse()
            raise self._fail("expected a comparison after the literal", op)
        term = self._term()
        return self._after_term(term)

    def _after_term(self, term: Reference) -> BooleanExpression:
        tok = self._peek()
        if tok.kind == "op" and tok.value in _COMPARISONS:
            self._next()
            value_tok = self._peek()
            literal = self._literal_or_none()
            if literal is _NO_VALUE:
                if value_tok.kind in ("name", "qname"):
                    raise self._fail("comparing two columns is not supported", value_tok)
                raise self._fail("expected a literal", value_tok)
            if literal is None:
                raise self._fail("comparison with null is never true; use IS NULL or IS NOT NULL", value_tok)
            return _COMPARISONS[tok.value][0](term, literal)
        if tok.is_word("is"):
            self._next()
            negated = self._peek().is_word("not")
            if negated:
                self._next()
            if self._peek().is_word("null"):
                self._next()
                return NotNull(term) if negated else IsNull(term)
            if self._peek().is_word("nan"):
                self._next()
                return NotNaN(term) if negated else IsNaN(term)
            raise self._fail("expected NULL or NAN after IS")
        negated = False
        if tok.is_word("not") and self._peek(1).is_word("in", "like", "between"):
            self._next()
            negated = True
            tok = self._peek()
        if tok.is_word("in"):
            self._next()
            literals = self._literal_list()
            return NotIn(term, literals) if negated else In(term, literals)
        if tok.is_word("between"):
            self._next()
            low = self._required_literal()
            self._expect_word("and")
            high = self._required_literal()
            expr = And(GreaterThanOrEqual(term, low), LessThanOrEqual(term, high))
            return Not(expr) if negated else expr
        if tok.is_word("like"):
            self._next()
            pattern_tok = self._next()
            if pattern_tok.kind != "string":
                raise self._fail("expected a string pattern after LIKE", pattern_tok)
            prefix, is_prefix = self._like(pattern_tok)
            if is_prefix:
                return NotStartsWith(term, prefix) if negated else StartsWith(term, prefix)
            return NotEqualTo(term, prefix) if negated else EqualTo(term, prefix)
        if negated:
            raise self._fail("expected IN, LIKE or BETWEEN after NOT")
        # a bare column is a boolean test
        return EqualTo(term, True)

    def _like(self, tok: _Token) -> tuple[str, bool]:
        pattern: str = tok.value
        out: list[str] = []
        i = 0
        while i < len(pattern):
            c = pattern[i]
            if c == "\\" and i + 1 < len(pattern):
                out.append(pattern[i + 1])
                i += 2
                continue
            if c == "%":
                if i != len(pattern) - 1:
                    raise self._fail("only LIKE 'prefix%' patterns are supported (% must come last)", tok)
                return "".join(out), True
            if c == "_":
                raise self._fail("only LIKE 'prefix%' patterns are supported (_ is not)", tok)
            out.append(c)
            i += 1
        return "".join(out), False

    def _term(self) -> Reference:
        parts = [self._name_part()]
        while self._peek().is_op("."):
            self._next()
            parts.append(self._name_part())
        return Reference(".".join(parts))

    def _name_part(self) -> str:
        tok = self._peek()
        if tok.kind == "qname":
            self._next()
            return str(tok.value)
        if tok.kind == "name" and tok.value.lower() not in _KEYWORDS:
            self._next()
            return str(tok.value)
        raise self._fail("expected a column name")

    def _literal_list(self) -> tuple[Any, ...]:
        self._expect_op("(")
        items = [self._required_literal()]
        while self._peek().is_op(","):
            self._next()
            items.append(self._required_literal())
        self._expect_op(")")
        return tuple(items)

    def _required_literal(self) -> Any:
        tok = self._peek()
        value = self._literal_or_none()
        if value is _NO_VALUE:
            raise self._fail("expected a literal", tok)
        if value is None:
            raise self._fail("null is not allowed here; use IS NULL", tok)
        return value

    def _literal_or_none(self) -> Any:
        """The literal at the cursor (consumed), or _NO_VALUE when there is none. ``null`` gives None."""
        tok = self._peek()
        if tok.kind == "string":
            self._next()
            return tok.value
        if tok.kind == "bytes":
            self._next()
            return tok.value
        if tok.kind == "number" or (tok.is_op("-") and self._peek(1).kind == "number"):
            sign = 1
            if tok.is_op("-"):
                self._next()
                sign = -1
            raw = self._next().value
            if "e" in raw or "E" in raw:
                return sign * float(raw)
            if "." in raw:
                return sign * Decimal(raw)
            return sign * int(raw)
        if tok.is_word("true", "false"):
            self._next()
            return tok.value.lower() == "true"
        if tok.is_word("null"):
            self._next()
            return None
        if tok.is_word("date", "time", "timestamp", "timestamptz") and self._peek(1).kind == "string":
            self._next()
            text_tok = self._next()
            return self._typed(tok.value.lower(), text_tok)
        return _NO_VALUE

    def _typed(self, kind: str, tok: _Token) -> Any:
        text = str(tok.value).strip()
        try:
            if kind == "date":
                return datetime.date.fromisoformat(text)
            if kind == "time":
                return datetime.time.fromisoformat(text)
            value = datetime.datetime.fromisoformat(text)
            if kind == "timestamptz" and value.tzinfo is None:
                value = value.replace(tzinfo=datetime.timezone.utc)
            return value
        except ValueError:
            # outside Python's datetime range or a form only value_from_python reads: converted when bound
            return text
