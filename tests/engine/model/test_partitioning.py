"""Partition specs: building from terms, JSON, partition types and partition paths.

The expected JSON and paths were produced by Iceberg Java 1.10.2 (``PartitionSpec.builderFor(schema)``,
``PartitionSpecParser.toJson`` and ``PartitionSpec.partitionToPath``) for the same schema and values.
"""

from __future__ import annotations

import json
from decimal import Decimal

import pytest

from engine.errors import ValidationError
from engine.model.partitioning import (
    UNPARTITIONED_SPEC,
    PartitionField,
    PartitionSpec,
    build_spec,
    parse_partition_term,
    partition_path,
)
from engine.model.schema import Schema
from engine.model.transforms import (
    Bucket,
    Day,
    Hour,
    Identity,
    Month,
    Truncate,
    UnknownTransform,
    Void,
    Year,
)
from engine.model.types import (
    BinaryType,
    DateType,
    DecimalType,
    DoubleType,
    IntegerType,
    ListType,
    LongType,
    NestedField,
    StringType,
    StructType,
    TimestampType,
    TimestamptzType,
    TimeType,
)


def _schema() -> Schema:
    return Schema((
        NestedField(field_id=1, name="id", field_type=LongType(), required=True),
        NestedField(field_id=2, name="name", field_type=StringType()),
        NestedField(field_id=3, name="ts", field_type=TimestamptzType()),
        NestedField(field_id=4, name="d", field_type=DateType()),
        NestedField(field_id=5, name="price", field_type=DecimalType(9, 2)),
        NestedField(field_id=6, name="blob", field_type=BinaryType()),
        NestedField(field_id=7, name="local", field_type=TimestampType()),
        NestedField(field_id=8, name="t", field_type=TimeType()),
    ))


JAVA_TERMS = ["name", "day(ts)", "bucket(16, id)", "truncate(4, name)", "ts", "d", "price", "blob", "local", "t",
              "void(id)"]
JAVA_SPEC_JSON = (
    '{"spec-id":0,"fields":[{"name":"name","transform":"identity","source-id":2,"field-id":1000},{"name":"ts_day",'
    '"transform":"day","source-id":3,"field-id":1001},{"name":"id_bucket","transform":"bucket[16]","source-id":1,'
    '"field-id":1002},{"name":"name_trunc","transform":"truncate[4]","source-id":2,"field-id":1003},{"name":"ts",'
    '"transform":"identity","source-id":3,"field-id":1004},{"name":"d","transform":"identity","source-id":4,'
    '"field-id":1005},{"name":"price","transform":"identity","source-id":5,"field-id":1006},{"name":"blob",'
    '"transform":"identity","source-id":6,"field-id":1007},{"name":"local","transform":"identity","source-id":7,'
    '"field-id":1008},{"name":"t","transform":"identity","source-id":8,"field-id":1009},{"name":"id_null",'
    '"transform":"void","source-id":1,"field-id":1010}]}')


def test_build_spec_matches_java_names_ids_and_json():
    spec = build_spec(_schema(), JAVA_TERMS)
    assert json.dumps(spec.to_json(), separators=(",", ":"), ensure_ascii=False) == JAVA_SPEC_JSON
    assert spec.fields_json() == spec.to_json()["fields"]
    assert PartitionSpec.from_json(json.loads(JAVA_SPEC_JSON)) == spec


def test_partition_path_matches_java():
    spec = build_spec(_schema(), JAVA_TERMS)
    values = ("a b/c=d~e*f.g-h_i+j%k&ü😀", 19724, 3, "a b/", 1704191400123000, -719529, Decimal("-14.20"),
              b"\x00\xff\x10\xfb", -1, 81068100000, None)
    assert partition_path(spec, _schema(), values) == (
        "name=a+b%2Fc%3Dd%7Ee*f.g-h_i%2Bj%25k%26%C3%BC%F0%9F%98%80/ts_day=2024-01-02/id_bucket=3/name_trunc=a+b%2F/"
        "ts=2024-01-02T10%3A30%3A00.123%2B00%3A00/d=-001-12-31/price=-14.20/blob=AP8Q%2Bw%3D%3D/"
        "local=1969-12-31T23%3A59%3A59.999999/t=22%3A31%3A08.100/id_null=null")
    assert partition_path(spec, _schema(), (None,) * 11) == "/".join(
        f"{f.name}=null" for f in spec.fields)


def test_partition_path_of_time_transforms():
    spec = build_spec(_schema(), ["year(ts)", "month(local)", "day(d)"], last_partition_id=1004)
    assert [f.field_id for f in spec.fields] == [1005, 1006, 1007]
    assert partition_path(spec, _schema(), (54, -1, 19724)) == "ts_year=2024/local_month=1969-12/d_day=2024-01-02"
    hourly = build_spec(_schema(), ["hour(local)"])
    assert partition_path(hourly, _schema(), (-1,)) == "local_hour=1969-12-31-23"


def test_partition_path_needs_one_value_per_field():
    spec = build_spec(_schema(), ["d"])
    with pytest.raises(ValidationError, match="^Cannot build partition path: 2 values for 1 partition fields"):
        partition_path(spec, _schema(), (1, 2))


def test_partition_type_uses_result_types_and_partition_ids():
    spec = build_spec(_schema(), ["day(ts)", "bucket(16, id)", "truncate(4, name)", "month(d)", "void(price)"],
                      spec_id=3)
    assert spec.spec_id == 3
    assert spec.partition_type(_schema()) == StructType((
        NestedField(field_id=1000, name="ts_day", field_type=DateType()),
        NestedField(field_id=1001, name="id_bucket", field_type=IntegerType()),
        NestedField(field_id=1002, name="name_trunc", field_type=StringType()),
        NestedField(field_id=1003, name="d_month", field_type=IntegerType()),
        NestedField(field_id=1004, name="price_null", field_type=DecimalType(9, 2)),
    ))
    assert all(not f.required for f in spec.partition_type(_schema()).fields)


def test_partition_type_names_a_missing_source_column():
    spec = PartitionSpec(spec_id=0, fields=(PartitionField(99, 1000, Identity(), "gone"),))
    with pytest.raises(ValidationError, match="^Cannot find source column for partition field 'gone': id 99"):
        spec.partition_type(_schema())


def test_unpartitioned_spec():
    assert UNPARTITIONED_SPEC.is_unpartitioned
    assert not UNPARTITIONED_SPEC.is_partitioned
    assert UNPARTITIONED_SPEC.to_json() == {"spec-id": 0, "fields": []}
    assert UNPARTITIONED_SPEC.partition_type(_schema()) == StructType(())
    assert UNPARTITIONED_SPEC.last_assigned_field_id == 999
    only_void = build_spec(_schema(), ["void(id)"])
    assert not only_void.is_unpartitioned and not only_void.is_partitioned


def test_spec_example_from_the_spec_round_trips():
    obj = {"spec-id": 0, "fields": [
        {"source-id": 4, "field-id": 1000, "name": "ts_day", "transform": "day"},
        {"source-id": 1, "field-id": 1001, "name": "id_bucket", "transform": "bucket[16]"}]}
    spec = PartitionSpec.from_json(obj)
    assert spec.fields == (PartitionField(4, 1000, Day(), "ts_day"), PartitionField(1, 1001, Bucket(16), "id_bucket"))
    assert spec.to_json() == {"spec-id": 0, "fields": [
        {"name": "ts_day", "transform": "day", "source-id": 4, "field-id": 1000},
        {"name": "id_bucket", "transform": "bucket[16]", "source-id": 1, "field-id": 1001}]}
    assert list(spec.to_json()["fields"][0]) == ["name", "transform", "source-id", "field-id"]


def test_v1_field_list_gets_ids_from_1000_and_unknown_transforms_survive():
    spec = PartitionSpec.from_json([{"source-id": 1, "name": "a", "transform": "identity"},
                                    {"source-id": 2, "name": "b", "transform": "zorder"}])
    assert spec.spec_id == 0
    assert [f.field_id for f in spec.fields] == [1000, 1001]
    assert spec.fields[1].transform == UnknownTransform("zorder")
    assert spec.to_json()["fields"][1]["transform"] == "zorder"


@pytest.mark.parametrize("bad", [
    {"fields": "nope"}, 5, {"spec-id": "0", "fields": []}, {"spec-id": 0, "fields": [{"source-id": 1}]},
    {"spec-id": 0, "fields": [{"source-id": "1", "field-id": 1000, "name": "x", "transform": "identity"}]},
    {"spec-id": 0, "fields": [7]},
])
def test_from_json_refuses_malformed_specs(bad):
    with pytest.raises(ValidationError, match="^Cannot parse partition"):
        PartitionSpec.from_json(bad)


def test_spec_refuses_duplicate_names_and_ids():
    with pytest.raises(ValidationError, match="more than one field is named 'a'"):
        PartitionSpec(0, (PartitionField(1, 1000, Identity(), "a"), PartitionField(2, 1001, Identity(), "a")))
    with pytest.raises(ValidationError, match="more than one field has id 1000"):
        PartitionSpec(0, (PartitionField(1, 1000, Identity(), "a"), PartitionField(2, 1000, Identity(), "b")))


def test_partition_field_parses_transform_strings():
    assert PartitionField(source_id=1, field_id=1000, transform="bucket[8]", name="x").transform == Bucket(8)


@pytest.mark.parametrize(("text", "expected"), [
    ("category", (Identity(), "category")),
    ("identity(category)", (Identity(), "category")),
    ("day(ts)", (Day(), "ts")),
    ("days(ts)", (Day(), "ts")),
    ("DAY( ts )", (Day(), "ts")),
    ("years(ts)", (Year(), "ts")),
    ("month(ts)", (Month(), "ts")),
    ("hours(ts)", (Hour(), "ts")),
    ("bucket(16, id)", (Bucket(16), "id")),
    ("bucket(id, 16)", (Bucket(16), "id")),
    ("bucket[16](id)", (Bucket(16), "id")),
    ("truncate(4, name)", (Truncate(4), "name")),
    ("void(x)", (Void(), "x")),
    ("location.lat", (Identity(), "location.lat")),
    ("`odd name`", (Identity(), "odd name")),
    ('day("my ts")', (Day(), "my ts")),
])
def test_parse_partition_term(text, expected):
    assert parse_partition_term(text) == expected


@pytest.mark.parametrize("text", ["", "bucket(id)", "explode(x)", "day(ts", "bucket(0, id)"])
def test_parse_partition_term_errors(text):
    with pytest.raises(ValidationError, match="^Cannot"):
        parse_partition_term(text)


def test_build_spec_accepts_pairs_and_named_triples():
    spec = build_spec(_schema(), [(Bucket(8), "id"), ("truncate[2]", "name", "short_name")])
    assert spec.fields == (PartitionField(1, 1000, Bucket(8), "id_bucket"),
                           PartitionField(2, 1001, Truncate(2), "short_name"))


def test_build_spec_nested_struct_column():
    schema = Schema((
        NestedField(field_id=1, name="location", field_type=StructType((
            NestedField(field_id=2, name="lat", field_type=DoubleType()),
            NestedField(field_id=3, name="zone", field_type=StringType())))),
        NestedField(field_id=4, name="tags", field_type=ListType(element_id=5, element_type=StringType())),
    ))
    spec = build_spec(schema, ["location.zone"])
    assert spec.fields == (PartitionField(3, 1000, Identity(), "location.zone"),)
    assert partition_path(spec, schema, ("eu west",)) == "location.zone=eu+west"
    with pytest.raises(ValidationError, match="^Cannot partition by 'tags.element': the column is inside a list"):
        build_spec(schema, ["tags.element"])
    with pytest.raises(ValidationError, match="^Cannot partition by 'location': struct<"):
        build_spec(schema, ["location"])


@pytest.mark.parametrize(("terms", "message"), [
    (["missing"], "^Cannot find field: 'missing'"),
    (["day(name)"], r"^Cannot partition by day\(name\): day cannot apply to type string"),
    (["hour(d)"], r"^Cannot partition by hour\(d\): hour cannot apply to type date"),
    (["bucket(4, id)", "bucket(8, id)"], "^Cannot use partition name more than once: 'id_bucket'"),
    (["id", "id"], "^Cannot use partition name more than once: 'id'"),
    (["day(ts)", "hour(ts)"], r"^Cannot add redundant partition field hour\(ts\): it conflicts with 'ts_day'"),
    ([(Bucket(4), "id"), (Bucket(4), "id", "other")], r"^Cannot add redundant partition field bucket\[4\]\(id\)"),
    ([(Bucket(4), "id", "name")], "^Cannot create partition from name that exists in schema: 'name'"),
    ([(Identity(), "id", "name")], "^Cannot create partition from name that exists in schema: 'name'"),
    ([(UnknownTransform("zorder"), "id")], "^Cannot partition by"),
    ([42], "^Cannot parse partition term: 42"),
])
def test_build_spec_errors(terms, message):
    with pytest.raises(ValidationError, match=message):
        build_spec(_schema(), terms)


def test_build_spec_allows_bucket_and_truncate_side_by_side():
    spec = build_spec(_schema(), [(Bucket(4), "id", "b4"), (Bucket(8), "id", "b8"), "truncate(10, id)", "id"])
    assert [f.name for f in spec.fields] == ["b4", "b8", "id_trunc", "id"]
