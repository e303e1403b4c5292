"""Evaluating a bound filter on rows: the rows of an Arrow table or record batch it selects, in SQL's
three-valued logic (engine.model.expressions describes the semantics).

Layer: engine.model (pure functions; imports the standard library, pyarrow, engine.errors and
engine.model.expressions / types). No I/O.

Usage::

    mask = evaluate_arrow(bind(expr, schema), table)   # pa.BooleanArray; table.filter(mask) keeps matching rows
    arrow_constant(field_type, arrow_type, value, n)   # a column of n copies of a canonical value
"""

from __future__ import annotations

from typing import Any, Callable, Union

import pyarrow as pa
import pyarrow.compute as pc

from engine.errors import ValidationError
from engine.model.expressions import (
    AlwaysFalse,
    AlwaysTrue,
    And,
    BooleanExpression,
    BoundReference,
    EqualTo,
    GreaterThan,
    GreaterThanOrEqual,
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
    require_bound,
)
from engine.model.types import (
    NANO_TIMESTAMPS,
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
    StringType,
    TimeType,
    TimestampType,
    TimestamptzType,
    UUIDType,
)

ArrowData = Union[pa.Array, pa.ChunkedArray]


def evaluate_arrow(expr: BooleanExpression, table: pa.Table | pa.RecordBatch) -> pa.BooleanArray:
    """The rows of ``table`` a bound expression selects, as a mask with no nulls (``table.filter(mask)``).

    Columns are found by name: the table's column names must be the schema's (nested struct fields under their
    parent struct column). Dictionary, view and extension (uuid) columns are read through their values.

    :raises ValidationError: when the expression is not bound or a column is missing from the table
    """
    require_bound(expr, "evaluate expression")
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
        if isinstance(pred, (LiteralPredicate, SetPredicate, StartsWith, NotStartsWith)) and len(ref.path) == 1:
            encoded = self._table.column(ref.path[0]) if ref.path[0] in self._table.column_names else None
            if encoded is not None and pa.types.is_dictionary(encoded.type):
                return self._on_dictionary(pred, encoded)
        col = self._column(ref)
        return self._on_values(pred, col)

    def _on_dictionary(self, pred: Predicate, encoded: ArrowData) -> ArrowData:
        """A predicate over a dictionary-encoded column, evaluated once per distinct value and spread to the rows by
        their indices (a null index gives null, as a null value does). Only for predicates whose answer on null is
        null."""
        chunks = encoded.chunks if isinstance(encoded, pa.ChunkedArray) else [encoded]
        out = []
        for chunk in chunks:
            if len(chunk.dictionary) == 0:
                out.append(pa.nulls(len(chunk), pa.bool_()))
                continue
            per_value = self._on_values(pred, _plain(chunk.dictionary))
            out.append(_spread(per_value, chunk.indices))
        return pa.chunked_array(out, pa.bool_()) if isinstance(encoded, pa.ChunkedArray) else out[0]

    def _on_values(self, pred: Predicate, col: ArrowData) -> ArrowData:
        ref = pred.term
        assert isinstance(ref, BoundReference)
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
            if pa.types.is_floating(col.type):  # is_in hashes bits, = compares values: -0.0 must find 0.0
                col, value_set = _positive_zeros(col), _positive_zeros(value_set)
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


def _spread(per_value: pa.Array, indices: pa.Array) -> pa.Array:
    """Each row's answer from its dictionary value's (``per_value[indices]``, null where the index is null): a
    comparison of the indices when at most one value answers true and none null (a filter on one category),
    else a take."""
    if per_value.null_count == 0:
        hits = pc.indices_nonzero(per_value)
        if len(hits) == 1:
            return pc.equal(indices, pa.scalar(hits[0].as_py(), indices.type))
        if not hits:
            return pc.is_null(indices) if indices.null_count == 0 else \
                pc.if_else(pc.is_valid(indices), False, pa.scalar(None, pa.bool_()))
    return pc.take(per_value, indices)


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


def _positive_zeros(values: Any) -> Any:
    """The values with -0.0 made 0.0 (IEEE: -0.0 + 0.0 is 0.0), nothing else changed."""
    return pc.add(values, pa.scalar(0.0, values.type))


def _arrow_value_set(t: IcebergType, arrow_type: pa.DataType, literals: tuple[Any, ...]) -> pa.Array:
    scalars = [_arrow_scalar(t, arrow_type, v) for v in literals]
    kept = []
    for s in scalars:
        try:
            kept.append(s.cast(arrow_type))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, OverflowError):
            pass  # a value the column's Arrow type cannot hold matches no row
    return pa.array(kept, type=arrow_type) if kept else pa.array([], type=arrow_type)
