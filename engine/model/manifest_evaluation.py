"""Pruning manifests by a manifest list's partition summaries: may a manifest hold a file with a matching row?
(Iceberg Java's ``ManifestEvaluator`` on the inclusive projection of the filter.)

Layer: engine.model (pure functions; imports engine.errors and engine.model.expressions / metrics_evaluation /
partition_filters / partitioning / data_file / schema / types / values). No I/O.

Usage::

    manifest_might_match(expr, spec, schema, manifest_file.partitions)
    summaries_might_match(project_inclusive(expr, spec, schema), spec, manifest_file.partitions)  # project once
"""

from __future__ import annotations

from typing import Any

from engine.errors import CorruptFileError, ValidationError
from engine.model import values
from engine.model.data_file import FieldSummary
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
    NotEqualTo,
    NotIn,
    NotNaN,
    NotNull,
    NotStartsWith,
    Or,
    Predicate,
    StartsWith,
    require_bound,
)
from engine.model.metrics_evaluation import IN_PREDICATE_LIMIT, bounds_inverted
from engine.model.partition_filters import project_inclusive
from engine.model.partitioning import PartitionSpec
from engine.model.schema import Schema
from engine.model.types import DoubleType, FloatType


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
    """:func:`manifest_might_match` for a filter already projected with
    :func:`~engine.model.partition_filters.project_inclusive` (project once, then test many manifests).

    A summary's bounds are the smallest and largest non-null, non-NaN partition values (Appendix D bytes); no
    bounds mean every value is null or NaN. Predicates on fields the summaries do not cover might match.

    :raises ValidationError: when the filter is not bound
    :raises CorruptFileError: when a summary bound cannot be decoded
    """
    require_bound(partition_expr, "evaluate partition summaries")
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
        if bounds_inverted(ref.field_type, s.lower_bound, s.upper_bound):
            return True  # a Java writer's uuid summary (signed order) on both sides of the sign bit
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
