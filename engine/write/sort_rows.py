"""Sort Arrow rows by a table sort order, as Iceberg Java orders values.

Layer: engine (pure computation on Arrow tables; imports engine.errors and engine.model, touches no file).

::

    sorted_rows = sort_table(rows, state.sort_order, state.schema)

Each sort field becomes sort keys computed with pyarrow: the field's transform applied to its source column
(``Transform.bind_arrow``), preceded by a null flag so that every field places its nulls first or last on
its own (pyarrow's ``null_placement`` holds for a whole sort only). Floats and doubles sort by a total-order
integer key, so that ``-0.0 < 0.0`` and NaN comes after ``+inf`` as Java's ``Double.compare`` has it
(descending puts NaN first). Strings and binary compare bytewise (code point order); uuids by their 16
bytes. The sort is stable: rows equal on every key keep their input order.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from engine.errors import ValidationError
from engine.model.schema import Schema
from engine.model.sort_order import NullOrder, SortDirection, SortOrder
from engine.model.types import DoubleType, FloatType, IcebergType

_ASC = "ascending"
_DESC = "descending"
_SIGN_MASK = pa.scalar(0x7FFFFFFFFFFFFFFF, pa.int64())


def _source_column(table: pa.Table, schema: Schema, source_id: int) -> pa.Array:
    """The column of field ``source_id`` (a struct child found by its dotted name; null where a parent is)."""
    name = schema.find_column_name(source_id)
    parts = name.split(".")
    if parts[0] not in table.column_names:
        raise ValidationError(f"Cannot sort rows: column {parts[0]!r} is missing from the data")
    arr: Any = table.column(parts[0])
    arr = arr.combine_chunks() if isinstance(arr, pa.ChunkedArray) else arr
    for depth in range(1, len(parts)):
        if not pa.types.is_struct(arr.type):
            raise ValidationError(f"Cannot sort rows: {'.'.join(parts[:depth])!r} is not a struct in the data")
        arr = pc.struct_field(arr, [parts[depth]])  # null where the struct is null
    return arr


def _float_key(arr: pa.Array) -> pa.Array:
    """int64 keys ordered as Java's ``Double.compare``: -inf < ... < -0.0 < 0.0 < ... < +inf < NaN."""
    doubles = pc.cast(arr, pa.float64())
    doubles = pc.if_else(pc.is_nan(doubles), pa.scalar(float("nan"), pa.float64()), doubles)  # one NaN bit pattern
    bits = doubles.view(pa.int64())
    negative = pc.less(bits, pa.scalar(0, pa.int64()))
    return pc.if_else(negative, pc.bit_wise_xor(bits, _SIGN_MASK), bits)


def _sortable(arr: pa.Array, result_type: IcebergType) -> pa.Array:
    if isinstance(arr.type, pa.BaseExtensionType):
        arr = arr.storage  # uuid: its 16 bytes
    if isinstance(result_type, (FloatType, DoubleType)) or pa.types.is_floating(arr.type):
        return _float_key(arr)
    if pa.types.is_dictionary(arr.type):
        return arr.dictionary_decode()
    return arr


def sort_table(table: pa.Table, order: SortOrder, schema: Schema) -> pa.Table:
    """``table``'s rows sorted by ``order`` (the table itself when the order is unsorted or there are fewer
    than two rows).

    :param table: rows in the table schema's Arrow form (top-level columns named as in ``schema``)
    :param order: the sort order; each field's transform is applied to its source column
    :param schema: the schema the order's source ids refer to
    :raises ValidationError: when a source column is missing or a transform cannot apply to its type
    """
    if order.is_unsorted or table.num_rows < 2:
        return table
    keys: list[pa.Array] = []
    sort_keys: list[tuple[str, str]] = []
    for field in order.fields:
        source = schema.find_field(field.source_id)
        column = _source_column(table, schema, field.source_id)
        try:
            values = field.transform.bind_arrow(source.field_type)(column)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, ValueError, OverflowError, TypeError) as e:
            raise ValidationError(f"Cannot sort rows by {field.transform}({schema.find_column_name(field.source_id)})"
                                  f": {e}") from e
        result_type = field.transform.result_type(source.field_type)
        if values.null_count:
            # the flag orders nulls on their own; within the null group the value key ties
            flag = values.is_valid() if field.null_order is NullOrder.NULLS_FIRST else values.is_null()
            keys.append(pc.cast(flag, pa.int8()))
            sort_keys.append((f"k{len(keys) - 1}", _ASC))
        keys.append(_sortable(values, result_type))
        sort_keys.append((f"k{len(keys) - 1}", _ASC if field.direction is SortDirection.ASC else _DESC))
    index = pa.table(keys, names=[f"k{i}" for i in range(len(keys))])
    try:
        indices = pc.sort_indices(index, sort_keys=sort_keys)
    except (pa.ArrowNotImplementedError, pa.ArrowInvalid) as e:
        raise ValidationError(f"Cannot sort rows by order {order.order_id}: {e}") from e
    return table.take(indices)
