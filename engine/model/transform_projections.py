"""How a row predicate on a column reads through one partition transform: each transform's inclusive and strict
projection of a bound predicate onto its partition field, with Iceberg Java's rules (``Transform.project`` /
``projectStrict`` and ``ProjectionUtil``).

Layer: engine.model (pure functions; imports the standard library, engine.errors and engine.model.expressions /
transforms / types / values). engine.model.partition_filters applies these rules field by field to a whole
filter and a whole partition spec.

Usage::

    project_predicate(Day(), "ts_day", bound_predicate)          # inclusive: may the partition hold a match?
    project_predicate_strict(Day(), "ts_day", bound_predicate)   # strict: does every row of it match?

The notes on each rule say where icelog widens Java's result to stay sound.
"""

from __future__ import annotations

from typing import Any, Callable

from engine.errors import ValidationError
from engine.model.expressions import (
    AlwaysFalse,
    And,
    BooleanExpression,
    BoundReference,
    EqualTo,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    IsNull,
    LessThan,
    LessThanOrEqual,
    LiteralPredicate,
    NotEqualTo,
    NotIn,
    NotNull,
    NotStartsWith,
    Or,
    Predicate,
    Reference,
    SetPredicate,
    StartsWith,
    UnaryPredicate,
)
from engine.model.transforms import Bucket, Day, Hour, Identity, Month, Transform, Truncate, Year
from engine.model.types import DateType, DecimalType, IcebergType, IntegerType, LongType
from engine.model.values import decimal_from_unscaled, decimal_unscaled


# -- projecting one predicate through one transform --------------------------------------------------------------


def project_predicate(transform: Transform, name: str, pred: Predicate) -> BooleanExpression | None:
    """Inclusive projection of a bound predicate on the transform's source column onto the partition field
    ``name``: an expression over ``Reference(name)`` (or AlwaysFalse when no row can match) that is true for
    the partition value of every row the predicate selects. None when no partition value can be ruled out
    (Java's null: always true), as for void and unknown transforms. Literals are canonical values of the
    transform's result type.

    :raises ValidationError: when the predicate is not bound, or the transform cannot apply to its column
    """
    rule = _rule(_INCLUSIVE, transform)
    if rule is None:
        _source_type(pred, transform)
        return None
    return rule(transform, name, pred)


def project_predicate_strict(transform: Transform, name: str, pred: Predicate) -> BooleanExpression | None:
    """Strict projection of a bound predicate onto the partition field ``name``: an expression over
    ``Reference(name)`` that is true only for partition values all of whose rows the predicate selects
    (null partition values never satisfy it unless it tests for null). None when no partition value
    guarantees that (Java's null: always false), as for void and unknown transforms.

    :raises ValidationError: when the predicate is not bound, or the transform cannot apply to its column
    """
    rule = _rule(_STRICT, transform)
    if rule is None:
        _source_type(pred, transform)
        return None
    return rule(transform, name, pred)


# -- shared rules (Java's ProjectionUtil) ------------------------------------------------------------------------

_Step = Callable[[Any, int], Any]
"""The source value one step above (+1) or below (-1) a value, or None outside the source type's range."""


def _source_type(pred: Predicate, transform: Transform) -> IcebergType:
    if not isinstance(pred, Predicate) or not isinstance(pred.term, BoundReference):
        raise ValidationError(f"Cannot project {pred} by {transform}: the predicate is not bound")
    return pred.term.field_type


def _retarget(pred: Predicate, name: str) -> Predicate:
    """The same predicate on the partition field ``name``."""
    ref = Reference(name)
    if isinstance(pred, SetPredicate):
        return type(pred)(ref, pred.literals)
    if isinstance(pred, LiteralPredicate):
        return type(pred)(ref, pred.literal)
    return type(pred)(ref)


def _null_test(pred: Predicate, name: str) -> BooleanExpression | None:
    """IS [NOT] NULL carries over: every transform but void maps null, and only null, to null."""
    if isinstance(pred, (IsNull, NotNull)):
        return type(pred)(Reference(name))
    return None


def _set(name: str, values: Any, positive: bool) -> BooleanExpression:
    """``name IN (...)`` (or NOT IN) over the distinct values; one value gives ``=`` (or ``!=``)."""
    ref = Reference(name)
    kept = sorted(set(values))
    if len(kept) == 1:
        return EqualTo(ref, kept[0]) if positive else NotEqualTo(ref, kept[0])
    return In(ref, tuple(kept)) if positive else NotIn(ref, tuple(kept))


def _int_step(bits: int) -> _Step:
    low, high = -(1 << (bits - 1)), (1 << (bits - 1)) - 1

    def step(v: int, d: int) -> int | None:
        w = v + d
        return w if low <= w <= high else None
    return step


def _decimal_step(scale: int) -> _Step:
    def step(v: Any, d: int) -> Any:
        return decimal_from_unscaled(decimal_unscaled(v, scale) + d, scale)
    return step


def _ordered_inclusive(name: str, pred: Predicate, fn: Callable[[Any], Any], step: _Step) -> BooleanExpression | None:
    """Java's truncateInteger / truncateLong / truncateDecimal plus IN, for an order-preserving ``fn`` over a
    discrete source: ``x < v`` becomes ``p <= fn(v - 1)``, ``x > v`` becomes ``p >= fn(v + 1)``, ``=`` and
    ``IN`` map their values. A bound beyond the type's range makes the predicate false for every row."""
    ref = Reference(name)
    if isinstance(pred, In):
        return _set(name, (fn(v) for v in pred.literals), True)
    if not isinstance(pred, LiteralPredicate):
        return None
    v = pred.literal
    if isinstance(pred, LessThan):
        below = step(v, -1)
        return AlwaysFalse() if below is None else LessThanOrEqual(ref, fn(below))
    if isinstance(pred, LessThanOrEqual):
        return LessThanOrEqual(ref, fn(v))
    if isinstance(pred, GreaterThan):
        above = step(v, 1)
        return AlwaysFalse() if above is None else GreaterThanOrEqual(ref, fn(above))
    if isinstance(pred, GreaterThanOrEqual):
        return GreaterThanOrEqual(ref, fn(v))
    if isinstance(pred, EqualTo):
        return EqualTo(ref, fn(v))
    return None


def _ordered_strict(name: str, pred: Predicate, fn: Callable[[Any], Any], step: _Step) -> BooleanExpression | None:
    """Java's truncateIntegerStrict / truncateLongStrict / truncateDecimalStrict plus NOT IN: ``x < v`` becomes
    ``p < fn(v)``, ``x <= v`` becomes ``p < fn(v + 1)``, ``x > v`` becomes ``p > fn(v)``, ``x >= v`` becomes
    ``p > fn(v - 1)``, ``!=`` and ``NOT IN`` map their values; ``=`` has no strict projection."""
    ref = Reference(name)
    if isinstance(pred, NotIn):
        return _set(name, (fn(v) for v in pred.literals), False)
    if not isinstance(pred, LiteralPredicate):
        return None
    v = pred.literal
    if isinstance(pred, LessThan):
        return LessThan(ref, fn(v))
    if isinstance(pred, LessThanOrEqual):
        above = step(v, 1)
        return NotNull(ref) if above is None else LessThan(ref, fn(above))
    if isinstance(pred, GreaterThan):
        return GreaterThan(ref, fn(v))
    if isinstance(pred, GreaterThanOrEqual):
        below = step(v, -1)
        return NotNull(ref) if below is None else GreaterThan(ref, fn(below))
    if isinstance(pred, NotEqualTo):
        return NotEqualTo(ref, fn(v))
    return None


def _array_inclusive(name: str, pred: Predicate, fn: Callable[[Any], Any]) -> BooleanExpression | None:
    """Java's truncateArray plus IN, for string and binary truncation (a prefix keeps the order)."""
    ref = Reference(name)
    if isinstance(pred, In):
        return _set(name, (fn(v) for v in pred.literals), True)
    if not isinstance(pred, LiteralPredicate):
        return None
    v = pred.literal
    if isinstance(pred, (LessThan, LessThanOrEqual)):
        return LessThanOrEqual(ref, fn(v))
    if isinstance(pred, (GreaterThan, GreaterThanOrEqual)):
        return GreaterThanOrEqual(ref, fn(v))
    if isinstance(pred, EqualTo):
        return EqualTo(ref, fn(v))
    if isinstance(pred, StartsWith):
        return StartsWith(ref, fn(v))
    return None


def _array_strict(name: str, pred: Predicate, fn: Callable[[Any], Any]) -> BooleanExpression | None:
    """Java's truncateArrayStrict plus NOT IN."""
    ref = Reference(name)
    if isinstance(pred, NotIn):
        return _set(name, (fn(v) for v in pred.literals), False)
    if not isinstance(pred, LiteralPredicate):
        return None
    v = pred.literal
    if isinstance(pred, (LessThan, LessThanOrEqual)):
        return LessThan(ref, fn(v))
    if isinstance(pred, (GreaterThan, GreaterThanOrEqual)):
        return GreaterThan(ref, fn(v))
    if isinstance(pred, NotEqualTo):
        return NotEqualTo(ref, fn(v))
    return None


def _with_successors(values: tuple[int, ...]) -> tuple[int, ...]:
    """The values plus ``v + 1`` for each negative ``v``, sorted (Java's fix for pre-0.10.1 writers)."""
    return tuple(sorted(set(values) | {v + 1 for v in values if v < 0}))


def _fix_inclusive_time(projected: BooleanExpression | None) -> BooleanExpression | None:
    """Java's fixInclusiveTimeProjection: Iceberg 0.10.0 and earlier wrote ``unit(x) + 1`` for values before
    1970, so ``<=`` and ``=`` on a negative partition value also accept the next one."""
    if isinstance(projected, LessThanOrEqual) and projected.literal < 0:
        return LessThanOrEqual(projected.term, projected.literal + 1)
    if isinstance(projected, EqualTo) and projected.literal < 0:
        return In(projected.term, (projected.literal, projected.literal + 1))
    if isinstance(projected, In) and any(v < 0 for v in projected.literals):
        return In(projected.term, _with_successors(projected.literals))
    return projected


def _fix_strict_time(projected: BooleanExpression | None) -> BooleanExpression | None:
    """Java's fixStrictTimeProjection, the strict side of :func:`_fix_inclusive_time`."""
    if isinstance(projected, GreaterThan) and projected.literal <= 0:
        return GreaterThan(projected.term, projected.literal + 1)
    if isinstance(projected, NotEqualTo) and projected.literal < 0:
        return NotIn(projected.term, (projected.literal, projected.literal + 1))
    if isinstance(projected, NotIn) and any(v < 0 for v in projected.literals):
        return NotIn(projected.term, _with_successors(projected.literals))
    return projected


# -- each transform's rules -------------------------------------------------------------------------------------


def _identity(t: Identity, name: str, pred: Predicate) -> BooleanExpression | None:
    """The same predicate on the partition field."""
    _source_type(pred, t)
    return _retarget(pred, name)


def _bucket_inclusive(t: Bucket, name: str, pred: Predicate) -> BooleanExpression | None:
    """``IS [NOT] NULL``, ``=`` and ``IN`` (hash the values); nothing else projects."""
    source_type = _source_type(pred, t)
    if isinstance(pred, UnaryPredicate):
        return _null_test(pred, name)
    fn = t.bind(source_type)
    if isinstance(pred, EqualTo):
        return EqualTo(Reference(name), fn(pred.literal))
    if isinstance(pred, In):
        return _set(name, (fn(v) for v in pred.literals), True)
    return None


def _bucket_strict(t: Bucket, name: str, pred: Predicate) -> BooleanExpression | None:
    """``IS [NOT] NULL``, ``!=`` and ``NOT IN`` (a row in another bucket cannot hold the value)."""
    source_type = _source_type(pred, t)
    if isinstance(pred, UnaryPredicate):
        return _null_test(pred, name)
    fn = t.bind(source_type)
    if isinstance(pred, NotEqualTo):
        return NotEqualTo(Reference(name), fn(pred.literal))
    if isinstance(pred, NotIn):
        return _set(name, (fn(v) for v in pred.literals), False)
    return None


def _truncate_inclusive(t: Truncate, name: str, pred: Predicate) -> BooleanExpression | None:
    """Java's rules per source type: ranges and ``=`` / ``IN`` for numbers (``x < v`` gives
    ``p <= truncate(v - 1)``), and for strings and binary also ``LIKE 'prefix%'`` (kept when the prefix is
    shorter than the width, ``p = prefix`` at the width, ``p`` starts with the truncated prefix beyond) and
    ``NOT LIKE`` (kept below the width, ``p != prefix`` at it).

    For int and long, a width that does not divide 2^31 (2^63) makes Java's truncation wrap the lowest
    values of the type (within ``width`` of the minimum) around to one large partition value W; unlike
    Java, the projections here account for W so that no row is ever misjudged.
    """
    source_type = _source_type(pred, t)
    if isinstance(pred, UnaryPredicate):
        return _null_test(pred, name)
    fn = t.bind(source_type)
    if isinstance(source_type, (IntegerType, LongType)):
        return _truncated_integral(t, name, pred, fn, 32 if isinstance(source_type, IntegerType) else 64, False)
    if isinstance(source_type, DecimalType):
        return _ordered_inclusive(name, pred, fn, _decimal_step(source_type.scale))
    if isinstance(pred, (StartsWith, NotStartsWith)):
        prefix = pred.literal
        if len(prefix) < t.width:
            return type(pred)(Reference(name), prefix)
        if len(prefix) == t.width:
            cls = EqualTo if isinstance(pred, StartsWith) else NotEqualTo
            return cls(Reference(name), prefix)
        return StartsWith(Reference(name), fn(prefix)) if isinstance(pred, StartsWith) else None
    return _array_inclusive(name, pred, fn)


def _truncate_strict(t: Truncate, name: str, pred: Predicate) -> BooleanExpression | None:
    """Java's strict rules: ``x < v`` gives ``p < truncate(v)`` (numbers: ``x <= v`` gives
    ``p < truncate(v + 1)``), ``!=`` and ``NOT IN`` map their values, ``=`` and ``IN`` have no strict
    projection; for strings ``LIKE 'prefix%'`` is kept below the width and becomes ``p = prefix`` at it,
    and ``NOT LIKE`` is kept below the width, becomes ``p != prefix`` at it and ``p NOT LIKE
    'truncated%'`` beyond."""
    source_type = _source_type(pred, t)
    if isinstance(pred, UnaryPredicate):
        return _null_test(pred, name)
    fn = t.bind(source_type)
    if isinstance(source_type, (IntegerType, LongType)):
        return _truncated_integral(t, name, pred, fn, 32 if isinstance(source_type, IntegerType) else 64, True)
    if isinstance(source_type, DecimalType):
        return _ordered_strict(name, pred, fn, _decimal_step(source_type.scale))
    if isinstance(pred, (StartsWith, NotStartsWith)):
        prefix = pred.literal
        if len(prefix) < t.width:
            return type(pred)(Reference(name), prefix)
        if len(prefix) == t.width:
            cls = EqualTo if isinstance(pred, StartsWith) else NotEqualTo
            return cls(Reference(name), prefix)
        return NotStartsWith(Reference(name), fn(prefix)) if isinstance(pred, NotStartsWith) else None
    return _array_strict(name, pred, fn)


def _truncated_integral(t: Truncate, name: str, pred: Predicate, fn: Callable[[Any], Any], bits: int,
                        strict: bool) -> BooleanExpression | None:
    """Truncate's rules for an int (``bits`` 32) or long (64) column, ``fn`` the bound truncation."""
    step = _int_step(bits)
    low = -(1 << (bits - 1))
    wrapped = fn(low)
    if wrapped == low or isinstance(pred, (EqualTo, In, NotEqualTo, NotIn)):
        # nothing wraps, or the values map exactly
        return (_ordered_strict if strict else _ordered_inclusive)(name, pred, fn, step)
    ref = Reference(name)

    def in_wrap(v: int) -> bool:
        return fn(v) == wrapped  # the values near the minimum that Java truncates to ``wrapped``

    v = getattr(pred, "literal", None)
    if not strict:
        if isinstance(pred, (LessThan, LessThanOrEqual)):
            bound = step(v, -1) if isinstance(pred, LessThan) else v
            if bound is None:
                return AlwaysFalse()
            if in_wrap(bound):
                return EqualTo(ref, wrapped)  # only wrapped values lie at or below the bound
            return Or(LessThanOrEqual(ref, fn(bound)), EqualTo(ref, wrapped))
        if isinstance(pred, (GreaterThan, GreaterThanOrEqual)):
            bound = step(v, 1) if isinstance(pred, GreaterThan) else v
            if bound is None:
                return AlwaysFalse()
            return None if in_wrap(bound) else GreaterThanOrEqual(ref, fn(bound))
        return None
    if isinstance(pred, (LessThan, LessThanOrEqual)):
        bound = v if isinstance(pred, LessThan) else step(v, 1)
        if bound is None:
            return NotNull(ref)
        return None if in_wrap(bound) else LessThan(ref, fn(bound))
    if isinstance(pred, (GreaterThan, GreaterThanOrEqual)):
        bound = v if isinstance(pred, GreaterThan) else step(v, -1)
        if bound is None:
            return NotNull(ref)
        projected = fn(bound)
        if projected >= wrapped:
            return GreaterThan(ref, projected)
        return And(GreaterThan(ref, projected), NotEqualTo(ref, wrapped))
    return None


def _time_inclusive(t: Year | Month | Day | Hour, name: str, pred: Predicate) -> BooleanExpression | None:
    """Java's rules: ``x < v`` gives ``p <= unit(v - 1)``, ``x > v`` gives ``p >= unit(v + 1)``, ``=`` and
    ``IN`` map their values, then Java's fix for old writers (a negative ``<=`` bound or ``=`` value also
    accepts the next unit). For timestamps icelog also lowers a ``>=`` bound P by one when the predicate
    selects the row Java's transform puts in unit P - 1 though it lies in unit P (``.999999`` in the first
    second of a unit before 1970); Java's own projection misses that row."""
    source_type = _source_type(pred, t)
    if isinstance(pred, UnaryPredicate):
        return _null_test(pred, name)
    fn = t.bind(source_type)
    is_timestamp = not isinstance(source_type, DateType)  # bind accepted a date or a timestamp
    projected = _fix_inclusive_time(_ordered_inclusive(name, pred, fn, _int_step(64 if is_timestamp else 32)))
    if is_timestamp and isinstance(projected, GreaterThanOrEqual) and \
            _quirk_selected(t, projected, pred, source_type):
        projected = GreaterThanOrEqual(projected.term, projected.literal - 1)
    return projected


def _time_strict(t: Year | Month | Day | Hour, name: str, pred: Predicate) -> BooleanExpression | None:
    """Java's rules: ``x < v`` gives ``p < unit(v)``, ``x <= v`` gives ``p < unit(v + 1)``, ``x > v`` gives
    ``p > unit(v)``, ``x >= v`` gives ``p > unit(v - 1)``, ``!=`` and ``NOT IN`` map their values, then Java's
    fix for old writers (a ``>`` bound at or below 0 rises by one; a negative ``!=`` value also excludes the
    next unit). For timestamps icelog also lowers a ``<`` bound P by one when the predicate does not select
    the row of unit P that Java's transform puts in unit P - 1 (see :func:`_time_inclusive`)."""
    source_type = _source_type(pred, t)
    if isinstance(pred, UnaryPredicate):
        return _null_test(pred, name)
    fn = t.bind(source_type)
    is_timestamp = not isinstance(source_type, DateType)  # bind accepted a date or a timestamp
    projected = _fix_strict_time(_ordered_strict(name, pred, fn, _int_step(64 if is_timestamp else 32)))
    if is_timestamp and isinstance(projected, LessThan) and \
            _quirk_selected(t, projected, pred, source_type) is False:
        projected = LessThan(projected.term, projected.literal - 1)
    return projected


def _quirk_selected(t: Year | Month | Day | Hour, projected: LiteralPredicate, pred: Predicate,
                    source_type: IcebergType) -> bool | None:
    """Whether ``pred`` selects the value that Java's transform puts one unit below the projected unit
    (``hh:00:00.999999`` of the unit's first second, before 1970); None when that unit has no such value."""
    q = t.quirk_tick(projected.literal, source_type)
    if q is None:
        return None
    v = pred.literal  # type: ignore[attr-defined]
    if isinstance(pred, LessThan):
        return q < v
    if isinstance(pred, LessThanOrEqual):
        return q <= v
    if isinstance(pred, GreaterThan):
        return q > v
    if isinstance(pred, GreaterThanOrEqual):
        return q >= v
    return None


_Rule = Callable[[Any, str, Predicate], "BooleanExpression | None"]


def _rule(rules: dict[type, _Rule], transform: Transform) -> _Rule | None:
    for cls in type(transform).__mro__:
        if cls in rules:
            return rules[cls]
    return None


_INCLUSIVE: dict[type, _Rule] = {
    Identity: _identity, Bucket: _bucket_inclusive, Truncate: _truncate_inclusive,
    Year: _time_inclusive, Month: _time_inclusive, Day: _time_inclusive, Hour: _time_inclusive,
}
_STRICT: dict[type, _Rule] = {
    Identity: _identity, Bucket: _bucket_strict, Truncate: _truncate_strict,
    Year: _time_strict, Month: _time_strict, Day: _time_strict, Hour: _time_strict,
}
