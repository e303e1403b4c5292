"""Sort orders: fields, defaults, JSON (as Java's SortOrderParser writes it), building from terms."""

from __future__ import annotations

import json

import pytest

from engine.errors import ValidationError
from engine.model.schema import Schema
from engine.model.sort_order import (
    UNSORTED_ORDER,
    NullOrder,
    SortDirection,
    SortField,
    SortOrder,
    build_sort_order,
    parse_sort_term,
)
from engine.model.transforms import Bucket, Day, Identity, UnknownTransform
from engine.model.types import (
    ListType,
    LongType,
    NestedField,
    StringType,
    TimestamptzType,
)


def _schema() -> Schema:
    return Schema((
        NestedField(field_id=1, name="id", field_type=LongType(), required=True),
        NestedField(field_id=2, name="name", field_type=StringType()),
        NestedField(field_id=3, name="ts", field_type=TimestamptzType()),
        NestedField(field_id=4, name="tags", field_type=ListType(element_id=5, element_type=StringType())),
    ))


# SortOrder.builderFor(schema).withOrderId(1).asc("id").desc("ts")
#     .sortBy(bucket("id", 4), DESC, NULLS_FIRST) written by Java 1.10.2's SortOrderParser.toJson
JAVA_JSON = ('{"order-id":1,"fields":[{"transform":"identity","source-id":1,"direction":"asc",'
             '"null-order":"nulls-first"},{"transform":"identity","source-id":3,"direction":"desc",'
             '"null-order":"nulls-last"},{"transform":"bucket[4]","source-id":1,"direction":"desc",'
             '"null-order":"nulls-first"}]}')


def test_build_sort_order_matches_java_json():
    order = build_sort_order(_schema(), ["id", "ts DESC", "bucket(4, id) desc nulls first"])
    assert json.dumps(order.to_json(), separators=(",", ":")) == JAVA_JSON
    assert SortOrder.from_json(json.loads(JAVA_JSON)) == order


def test_spec_example_round_trips():
    fields = [{"transform": "identity", "source-id": 2, "direction": "asc", "null-order": "nulls-first"},
              {"transform": "bucket[4]", "source-id": 3, "direction": "desc", "null-order": "nulls-last"}]
    order = SortOrder.from_json({"order-id": 1, "fields": fields})
    assert order.fields == (SortField(2, Identity(), SortDirection.ASC, NullOrder.NULLS_FIRST),
                            SortField(3, Bucket(4), SortDirection.DESC, NullOrder.NULLS_LAST))
    assert order.to_json() == {"order-id": 1, "fields": fields}


def test_null_order_defaults_follow_the_direction():
    assert SortField(source_id=1).null_order is NullOrder.NULLS_FIRST
    assert SortField(source_id=1, direction="desc").null_order is NullOrder.NULLS_LAST
    assert SortField(source_id=1, direction="DESC", null_order="nulls-first").null_order is NullOrder.NULLS_FIRST
    assert SortField(source_id=1, transform="day").transform == Day()
    assert str(SortDirection.DESC) == "desc" and str(NullOrder.NULLS_LAST) == "nulls-last"


def test_unsorted_order():
    assert UNSORTED_ORDER.is_unsorted
    assert UNSORTED_ORDER.to_json() == {"order-id": 0, "fields": []}
    assert SortOrder.from_json({"order-id": 0, "fields": []}) == UNSORTED_ORDER
    assert build_sort_order(_schema(), []) == UNSORTED_ORDER


def test_order_id_zero_is_reserved_for_unsorted():
    with pytest.raises(ValidationError, match="^Cannot create sort order: order id 0 is reserved"):
        SortOrder(order_id=0, fields=(SortField(source_id=1),))


def test_unknown_transforms_round_trip():
    obj = {"order-id": 2, "fields": [{"transform": "zorder", "source-id": 1, "direction": "asc",
                                      "null-order": "nulls-last"}]}
    order = SortOrder.from_json(obj)
    assert order.fields[0].transform == UnknownTransform("zorder")
    assert order.to_json() == obj


@pytest.mark.parametrize("bad", [
    {"fields": []}, {"order-id": 1}, {"order-id": 1, "fields": [{"transform": "identity"}]},
    {"order-id": 1, "fields": [{"transform": "identity", "source-id": 1, "direction": "up",
                                "null-order": "nulls-first"}]},
    {"order-id": 1, "fields": [{"transform": "identity", "source-id": 1, "direction": "asc",
                                "null-order": "sometimes"}]},
    {"order-id": 1, "fields": ["id"]},
])
def test_from_json_refuses_malformed_orders(bad):
    with pytest.raises(ValidationError, match="^Cannot parse"):
        SortOrder.from_json(bad)


@pytest.mark.parametrize(("text", "expected"), [
    ("id", (Identity(), "id", SortDirection.ASC, None)),
    ("id DESC", (Identity(), "id", SortDirection.DESC, None)),
    ("id asc nulls last", (Identity(), "id", SortDirection.ASC, NullOrder.NULLS_LAST)),
    ("day(ts) NULLS FIRST", (Day(), "ts", SortDirection.ASC, NullOrder.NULLS_FIRST)),
    ("bucket(4, id) desc", (Bucket(4), "id", SortDirection.DESC, None)),
])
def test_parse_sort_term(text, expected):
    assert parse_sort_term(text) == expected


@pytest.mark.parametrize(("terms", "message"), [
    (["missing"], "^Cannot find field: 'missing'"),
    (["day(name)"], r"^Cannot sort by day\(name\): day cannot apply to type string"),
    (["tags"], "^Cannot sort by 'tags': list<string> is not a primitive type"),
])
def test_build_sort_order_errors(terms, message):
    with pytest.raises(ValidationError, match=message):
        build_sort_order(_schema(), terms)
