"""A new default sort order for a table (Iceberg's ReplaceSortOrder; PyIceberg's UpdateSortOrder names).

Layer: engine.operations (pure: builds events from a base state; imports engine.model, engine.state.events,
engine.state.table_state and the builder base).

::

    with table.replace_sort_order() as order:
        order.asc("category")
        order.desc("ts", "day", "nulls-first")

The fields are resolved against the schema of every commit attempt. The order reuses the id of an existing
order with the same fields (the unsorted order is id 0), else takes the largest order id plus one, as
Java's ``TableMetadata`` does; replacing the order with the current one commits nothing.
"""

from __future__ import annotations

from typing import Any

import attrs

from engine.errors import ValidationError
from engine.state.events import DefaultSortOrderSet, Event, SortOrderAdded
from engine.model.sort_order import (
    UNSORTED_ORDER_ID,
    NullOrder,
    SortDirection,
    SortField,
    SortOrder,
)
from engine.model.transforms import Identity, Transform
from engine.model.types import PrimitiveType
from engine.operations.commit import CommitContext
from engine.operations.pending import CommitsEvents, PendingUpdate
from engine.operations.update_spec import to_transform
from engine.state.table_state import TableState


def _null_order(value: Any) -> NullOrder:
    raw = getattr(value, "value", value)  # also PyIceberg's NullOrder
    try:
        return NullOrder(raw.lower() if isinstance(raw, str) else raw)
    except ValueError as e:
        raise ValidationError(f"Cannot sort: unknown null order {value!r} (nulls-first or nulls-last)") from e


@attrs.frozen(kw_only=True)
class _Term:
    column: str
    transform: Transform
    direction: SortDirection
    null_order: NullOrder


class ReplaceSortOrder(PendingUpdate):
    """Build the table's new default sort order, most significant field first.

    ::

        table.replace_sort_order().asc("id").desc("ts", "hour").commit()
        table.replace_sort_order().commit()          # back to unsorted (order 0)

    :param table: the table whose order to replace
    :param case_sensitive: whether column names match case-sensitively
    """

    def __init__(self, table: CommitsEvents, *, case_sensitive: bool = True) -> None:
        super().__init__(table)
        self._case_sensitive = case_sensitive
        self._terms: list[_Term] = []

    def asc(self, source_column_name: str, transform: Any = Identity(),
            null_order: Any = NullOrder.NULLS_FIRST) -> ReplaceSortOrder:
        """Sort ascending by ``transform(source_column_name)``.

        :param source_column_name: the column (dotted for a struct field)
        :param transform: a Transform or its spec string (identity by default)
        :param null_order: ``NullOrder.NULLS_FIRST`` (default) or ``NULLS_LAST``, or their strings
        :raises ValidationError: for an unknown column, a non-primitive column or a transform that cannot apply
        """
        return self._add(source_column_name, transform, SortDirection.ASC, null_order)

    def desc(self, source_column_name: str, transform: Any = Identity(),
             null_order: Any = NullOrder.NULLS_LAST) -> ReplaceSortOrder:
        """Sort descending by ``transform(source_column_name)``; nulls last by default. See :meth:`asc`."""
        return self._add(source_column_name, transform, SortDirection.DESC, null_order)

    def _add(self, column: str, transform: Any, direction: SortDirection, null_order: Any) -> ReplaceSortOrder:
        term = _Term(column=column, transform=to_transform(transform), direction=direction,
                     null_order=_null_order(null_order))
        base = getattr(self._table, "state", None)
        if isinstance(base, TableState):
            self._field(base, term)  # fail at once on the current schema
        self._terms.append(term)
        return self

    def _field(self, base: TableState, term: _Term) -> SortField:
        schema = base.schema
        label = f"{term.transform}({term.column})"
        try:
            source = schema.find_field(term.column, case_sensitive=self._case_sensitive)
        except ValidationError as e:
            raise ValidationError(f"Cannot sort by {label}: column {term.column!r} is not in the table "
                                  f"schema") from e
        if schema.is_in_list_or_map(source.field_id):
            raise ValidationError(f"Cannot sort by {label}: the column is inside a list or map")
        if not isinstance(source.field_type, PrimitiveType):
            raise ValidationError(f"Cannot sort by {label}: {source.field_type} is not a primitive type")
        if not term.transform.can_transform(source.field_type):
            raise ValidationError(f"Cannot sort by {label}: {term.transform} cannot apply to type "
                                  f"{source.field_type}")
        return SortField(source_id=source.field_id, transform=term.transform, direction=term.direction,
                         null_order=term.null_order)

    def apply(self, base: TableState) -> SortOrder:
        """The new order on ``base``: an existing order's id when one has the same fields, else the next id."""
        fields = tuple(self._field(base, t) for t in self._terms)
        if not fields:
            return SortOrder(order_id=UNSORTED_ORDER_ID, fields=())
        new_id = 1
        for order in base.sort_orders:
            if order.fields == fields:
                return order
            new_id = max(new_id, order.order_id + 1)
        return SortOrder(order_id=new_id, fields=fields)

    def events(self, base: TableState, ctx: CommitContext) -> list[Event]:
        order = self.apply(base)
        if order.order_id == base.default_sort_order_id:
            return []
        if any(o.order_id == order.order_id for o in base.sort_orders):
            return [DefaultSortOrderSet(sort_order_id=order.order_id)]
        return [SortOrderAdded(sort_order=order), DefaultSortOrderSet(sort_order_id=order.order_id)]
