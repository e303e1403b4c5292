"""Sort orders: directions, null orders, sort fields and their JSON form.

Layer: engine.model (pure values and functions; imports the standard library, attrs, engine.errors and
engine.model.partitioning / schema / transforms / types).

Usage::

    order = build_sort_order(schema, ["id", "ts DESC NULLS LAST", "bucket(4, id)"], order_id=1)
    SortOrder.from_json(order.to_json()) == order   # True
"""

from __future__ import annotations

import enum
import re
from typing import Any, Sequence

import attrs

from engine.errors import ValidationError
from engine.model.partitioning import parse_partition_term
from engine.model.schema import Schema
from engine.model.transforms import (
    Identity,
    Transform,
    UnknownTransform,
    parse_transform,
)
from engine.model.types import PrimitiveType

ORDER_ID = "order-id"
FIELDS = "fields"
TRANSFORM = "transform"
SOURCE_ID = "source-id"
DIRECTION = "direction"
NULL_ORDER = "null-order"
UNSORTED_ORDER_ID = 0


class SortDirection(str, enum.Enum):
    ASC = "asc"
    DESC = "desc"

    def __str__(self) -> str:
        return self.value


class NullOrder(str, enum.Enum):
    NULLS_FIRST = "nulls-first"
    NULLS_LAST = "nulls-last"

    def __str__(self) -> str:
        return self.value


def _to_transform(value: Any) -> Transform:
    return value if isinstance(value, Transform) else parse_transform(value)


def _to_direction(value: Any) -> SortDirection:
    try:
        return SortDirection(value.lower() if isinstance(value, str) else value)
    except ValueError as e:
        raise ValidationError(f"Cannot parse sort direction: {value!r}") from e


def _to_null_order(value: Any) -> NullOrder | None:
    if value is None:
        return None
    try:
        return NullOrder(value.lower() if isinstance(value, str) else value)
    except ValueError as e:
        raise ValidationError(f"Cannot parse null order: {value!r}") from e


@attrs.frozen
class SortField:
    """One sort key: ``transform(source column)`` in ``direction``, nulls placed by ``null_order``.

    :param source_id: the source column's field id
    :param transform: a :class:`Transform` (a spec string is parsed); identity by default
    :param direction: ``asc`` (default) or ``desc``
    :param null_order: ``nulls-first`` / ``nulls-last``; by default nulls first for asc, last for desc (Java)
    """

    source_id: int
    transform: Transform = attrs.field(default=Identity(), converter=_to_transform)
    direction: SortDirection = attrs.field(default=SortDirection.ASC, converter=_to_direction)
    null_order: NullOrder = attrs.field(default=None, converter=_to_null_order)

    def __attrs_post_init__(self) -> None:
        if self.null_order is None:
            default = NullOrder.NULLS_FIRST if self.direction is SortDirection.ASC else NullOrder.NULLS_LAST
            object.__setattr__(self, "null_order", default)

    def to_json(self) -> dict[str, Any]:
        """Java's key order: transform, source-id, direction, null-order."""
        return {TRANSFORM: str(self.transform), SOURCE_ID: self.source_id, DIRECTION: self.direction.value,
                NULL_ORDER: self.null_order.value}

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> SortField:
        if not isinstance(obj, dict):
            raise ValidationError(f"Cannot parse sort field: not an object: {obj!r}")
        try:
            source_id = obj[SOURCE_ID]
            if isinstance(source_id, bool) or not isinstance(source_id, int):
                raise ValidationError(f"Cannot parse sort field: source-id {source_id!r} is not an int")
            return cls(source_id=source_id, transform=parse_transform(obj[TRANSFORM]),
                       direction=obj[DIRECTION], null_order=obj[NULL_ORDER])
        except KeyError as e:
            raise ValidationError(f"Cannot parse sort field: missing {e.args[0]!r} in {obj!r}") from e


@attrs.frozen
class SortOrder:
    """A table sort order: an id and the ordered sort fields. Id 0 is reserved for the unsorted order.

    :param order_id: the order's id in its table
    :param fields: the sort fields, most significant first
    :raises ValidationError: when id 0 has fields, or a sorted order has id 0
    """

    order_id: int = UNSORTED_ORDER_ID
    fields: tuple[SortField, ...] = attrs.field(default=(), converter=tuple)

    def __attrs_post_init__(self) -> None:
        if self.order_id == UNSORTED_ORDER_ID and self.fields:
            raise ValidationError("Cannot create sort order: order id 0 is reserved for the unsorted order")
        if self.order_id < 0:
            raise ValidationError(f"Cannot create sort order: order id {self.order_id} is negative")

    @property
    def is_unsorted(self) -> bool:
        return not self.fields

    def to_json(self) -> dict[str, Any]:
        """``{"order-id": .., "fields": [..]}``."""
        return {ORDER_ID: self.order_id, FIELDS: [f.to_json() for f in self.fields]}

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> SortOrder:
        """:raises ValidationError: when the JSON is not a sort order"""
        if not isinstance(obj, dict) or not isinstance(obj.get(FIELDS), list):
            raise ValidationError(f"Cannot parse sort order: {obj!r}")
        order_id = obj.get(ORDER_ID)
        if isinstance(order_id, bool) or not isinstance(order_id, int):
            raise ValidationError(f"Cannot parse sort order: order-id {order_id!r} is not an int")
        return cls(order_id=order_id, fields=tuple(SortField.from_json(f) for f in obj[FIELDS]))

    def __str__(self) -> str:
        return "[" + ", ".join(f"{f.transform}({f.source_id}) {f.direction} {f.null_order}" for f in self.fields) + "]"


UNSORTED_ORDER = SortOrder(order_id=UNSORTED_ORDER_ID, fields=())

_SORT_TERM = re.compile(r"^\s*(?P<expr>.+?)(?:\s+(?P<dir>asc|desc))?(?:\s+nulls\s+(?P<nulls>first|last))?\s*$",
                        re.IGNORECASE)


def parse_sort_term(text: str) -> tuple[Transform, str, SortDirection, NullOrder | None]:
    """Parse ``"<term> [ASC|DESC] [NULLS FIRST|LAST]"``, where the term is as in partition terms (``"id"``,
    ``"bucket(4, id)"``, ``"day(ts)"``).

    :raises ValidationError: when the text cannot be parsed
    """
    m = _SORT_TERM.match(text) if isinstance(text, str) else None
    if not m:
        raise ValidationError(f"Cannot parse sort term: {text!r}")
    transform, column = parse_partition_term(m.group("expr"))
    direction = SortDirection((m.group("dir") or "asc").lower())
    nulls = m.group("nulls")
    null_order = None if nulls is None else NullOrder(f"nulls-{nulls.lower()}")
    return transform, column, direction, null_order


def build_sort_order(schema: Schema, terms: Sequence[str], order_id: int = 1) -> SortOrder:
    """Build a sort order from terms (see :func:`parse_sort_term`); no terms gives the unsorted order.

    :raises ValidationError: for an unknown column, a non-primitive column, or a transform that cannot apply
    """
    if not terms:
        return UNSORTED_ORDER
    fields = []
    for term in terms:
        transform, column, direction, null_order = parse_sort_term(term)
        source = schema.find_field(column)
        if not isinstance(source.field_type, PrimitiveType):
            raise ValidationError(f"Cannot sort by {column!r}: {source.field_type} is not a primitive type")
        if isinstance(transform, UnknownTransform) or not transform.can_transform(source.field_type):
            raise ValidationError(f"Cannot sort by {transform}({column}): {transform} cannot apply to type "
                                  f"{source.field_type}")
        fields.append(SortField(source_id=source.field_id, transform=transform, direction=direction,
                                null_order=null_order))
    return SortOrder(order_id=order_id, fields=tuple(fields))
