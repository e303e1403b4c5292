"""A row filter seen through a partition spec: its inclusive and strict projections onto the partition tuple
(Iceberg Java's ``Projections``), its value on one partition tuple, the residual it leaves for one partition's
rows (``ResidualEvaluator``), and file pruning by partition and metrics together.

Layer: engine.model (pure functions; imports the standard library, engine.errors and engine.model.expressions /
expression_binding / metrics_evaluation / partitioning / transform_projections / data_file / schema / types).
No I/O.

Usage::

    project_inclusive(expr, spec, schema)       # over the partition struct: true wherever a row may match
    project_strict(expr, spec, schema)          # true only where every row matches
    evaluate_partition(projected, spec.partition_type(schema), data_file.partition)
    partition_might_match(expr, spec, schema, partition) / partition_must_match(...)
    residual(expr, spec, schema, partition)     # the filter left for one partition's rows
    file_might_match(expr, data_file, spec, schema) / file_must_match(...)   # partition and metrics together
"""

from __future__ import annotations

import math
from typing import Any, Callable

from engine.errors import ValidationError
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
    SetPredicate,
    StartsWith,
    Term,
)
from engine.model.metrics_evaluation import metrics_might_match, metrics_must_match
from engine.model.partitioning import PartitionField, PartitionSpec
from engine.model.schema import Schema
from engine.model.transform_projections import project_predicate, project_predicate_strict
from engine.model.types import StructType


def _bound_nnf(expr: BooleanExpression, schema: Schema, case_sensitive: bool) -> BooleanExpression:
    if not isinstance(expr, BooleanExpression):
        raise ValidationError(f"Cannot project expression: {expr!r} is not an expression")
    return bound_nnf(expr, schema, case_sensitive)


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
        projected = project_predicate_strict(transform, part.name, pred) if strict else \
            project_predicate(transform, part.name, pred)
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
