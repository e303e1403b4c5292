"""Evaluating a filter on one data file's metrics (record, value, null and NaN counts, lower and upper bounds):
inclusive (might any row match?) and strict (must every row match?), as Iceberg Java's
``InclusiveMetricsEvaluator`` and ``StrictMetricsEvaluator``.

Layer: engine.model (pure functions; imports engine.errors and engine.model.expressions / expression_binding /
data_file / schema / types / values). No I/O.

Usage::

    metrics_might_match(expr, data_file, schema)   # False only when the file's metrics prove no row matches
    metrics_must_match(expr, data_file, schema)    # True only when they prove every row matches
"""

from __future__ import annotations

from typing import Any

from engine.errors import CorruptFileError, ValidationError
from engine.model import values
from engine.model.data_file import DataFile
from engine.model.expression_binding import bound_nnf
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
    LiteralPredicate,
    Not,
    NotEqualTo,
    NotIn,
    NotNaN,
    NotNull,
    NotStartsWith,
    Or,
    Predicate,
    StartsWith,
)
from engine.model.schema import Schema
from engine.model.types import (
    NANO_TIMESTAMPS,
    BooleanType,
    DateType,
    DoubleType,
    FloatType,
    IcebergType,
    IntegerType,
    LongType,
    TimeType,
    TimestampType,
    TimestamptzType,
    UUIDType,
)

#: Java's limit on IN lists the metrics evaluator checks literal by literal; longer lists might match.
IN_PREDICATE_LIMIT = 200


def bounds_inverted(t: IcebergType, lower: bytes | None, upper: bytes | None) -> bool:
    """Whether a column's lower and upper bounds are uuids with the lower above the upper in Iceberg's (unsigned)
    order: a writer merged them from row groups in signed order, and they bound nothing (a reader judging by them
    could skip a file that holds the value)."""
    return isinstance(t, UUIDType) and lower is not None and upper is not None and bytes(lower) > bytes(upper)


def metrics_might_match(expr: BooleanExpression, file: DataFile, schema: Schema, *,
                        case_sensitive: bool = True) -> bool:
    """Whether any row of a data file might match, judged from its metrics alone (inclusive evaluation).

    Returns False only when the record count, value / null / NaN counts or lower / upper bounds prove that no
    row matches; missing metrics mean "might match". An unbound expression is bound to ``schema`` first.

    :raises ValidationError: when an unbound expression does not bind
    :raises CorruptFileError: when a bound cannot be decoded for its column's type (names the file)
    """
    expr = bound_nnf(expr, schema, case_sensitive)
    if file.record_count == 0:
        return False
    return _MetricsEvaluator(file).eval(expr)


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
        if bounds_inverted(ref.field_type, self._lower.get(ref.field_id), self._upper.get(ref.field_id)):
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

    Semantics are those of :func:`~engine.model.row_evaluation.evaluate_arrow`: a comparison never selects a null,
    so a column that may hold nulls (its null count is missing or positive, and it is not required) proves no
    comparison; an ordering or equality also never selects NaN, so a float or double column needs a NaN count of 0.
    ``!=`` and ``NOT IN`` do select NaN. Bounds prove ``x < v`` by ``upper < v``, ``x >= v`` by ``lower >= v``,
    ``x = v`` by ``lower = upper = v``, ``x != v`` by ``v`` outside ``[lower, upper]``, ``IN`` by ``lower = upper`` in
    the set (or, for integer-like types, every value of ``[lower, upper]`` in the set), ``NOT IN`` by no listed
    value inside the bounds, ``LIKE 'p%'`` by both bounds starting with ``p`` and ``NOT LIKE 'p%'`` by a bound
    beyond every string starting with ``p``. Truncated string and binary bounds keep all of this sound.

    :raises ValidationError: when an unbound expression does not bind
    :raises CorruptFileError: when a bound cannot be decoded for its column's type (names the file)
    """
    expr = bound_nnf(expr, schema, case_sensitive)
    if file.record_count <= 0:
        return True
    return _StrictMetricsEvaluator(file).eval(expr)


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
