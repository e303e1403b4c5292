"""The row-filter expression tree: column terms, predicates, AND / OR / NOT, and their text form.

Layer: engine.model (pure values and functions). Imports the standard library, attrs, engine.errors and
engine.model.types / values. No I/O.

An expression is a frozen value. Unbound expressions name columns (:class:`Reference`); binding resolves them
against a :class:`~engine.model.schema.Schema` into :class:`BoundReference` terms (field id, name, type) and
converts every literal to the field's canonical Python value (see engine.model.values). Bound expressions use
the same classes as unbound ones; only their terms differ.

Usage::

    expr = EqualTo("category", "books") & LessThan("price", Decimal("10.5"))
    expr = and_(EqualTo("a", 1), EqualTo("b", 2), EqualTo("c", 3))   # a balanced chain
    str(expr)                                                           # "category = 'books' AND price < 10.5"

What works on expressions, one module each::

    engine.model.expression_parser     parse_expression(text): the text syntax
    engine.model.expression_binding    bind(expr, schema); negate and rewrite_not (they need bound terms)
    engine.model.row_evaluation        evaluate_arrow(bound, table): the rows of Arrow data a filter selects
    engine.model.metrics_evaluation    metrics_might_match / metrics_must_match: one data file's metrics
    engine.model.partition_filters     project_inclusive / project_strict onto a partition spec,
                                       evaluate_partition, residual, file_might_match / file_must_match
    engine.model.manifest_evaluation   manifest_might_match: a manifest list's partition summaries

Semantics follow SQL's three-valued logic: a comparison with null is null, ``NOT null`` is null, and a row is
selected only when the filter is true. ``IS NULL`` / ``IS NOT NULL`` / ``IS NAN`` / ``IS NOT NAN`` are never
null. NaN compares false with everything (``=``, ``<``, ``<=``, ``>``, ``>=``, ``IN``) and so ``!=`` and
``NOT IN`` are true for NaN, as in IEEE 754 and in ``NOT (x = v)``. NaN literals are refused: use ``IS NAN``.

``str(expr)`` prints text that :func:`~engine.model.expression_parser.parse_expression` reads back to an
equal expression (for unbound ones built from the literal types it reads).

Depth: a chain of one operator (``a OR b OR c ...``) is built as a balanced tree, so a filter of thousands of
terms stays about log2(n) levels deep. The parser and binding refuse an expression deeper than
:data:`MAX_DEPTH` levels (nested parentheses, NOT, and the balanced chains) with a ValidationError, so no walk
over an accepted expression can exhaust Python's recursion limit.
"""

from __future__ import annotations

import datetime
import math
import re
import uuid
from decimal import Decimal
from typing import Any, Union

import attrs

from engine.errors import ValidationError
from engine.model import values
from engine.model.types import NANO_TIMESTAMPS, DateType, IcebergType, TimeType, TimestampType, TimestamptzType

#: The deepest expression the parser and binding accept: levels of parentheses and NOT in text, and levels of
#: the expression tree once each AND / OR chain is a balanced tree.
MAX_DEPTH = 200


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
"""A :class:`BooleanExpression` whose terms are all :class:`BoundReference` (what
:func:`~engine.model.expression_binding.bind` returns)."""


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


def rebalance(expr: BooleanExpression) -> BooleanExpression:
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
    require_bound(expr, "collect field ids")
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


def require_bound(expr: BooleanExpression, action: str) -> None:
    """Refuse an expression with an unbound term.

    :param action: what the caller cannot do, for the message (``"evaluate expression"``)
    :raises ValidationError: naming the first unbound column
    """
    for t in _terms(expr):
        if not isinstance(t, BoundReference):
            raise ValidationError(f"Cannot {action}: column {t.name!r} is not bound; bind the expression first")


# -- text --------------------------------------------------------------------------------------------------------

#: Words of the filter syntax; a column with such a name is printed in quotes.
KEYWORDS = frozenset({"and", "or", "not", "is", "null", "nan", "in", "like", "between", "true", "false"})
_BARE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def _name_text(name: str) -> str:
    parts = name.split(".")
    if all(_BARE_NAME.match(p) and p.lower() not in KEYWORDS for p in parts):
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
