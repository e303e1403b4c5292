"""Tests for engine.model.schema: validation, lookups, Appendix C JSON, fresh id assignment."""

from __future__ import annotations

import json

import attrs
import pytest

from engine.errors import ValidationError
from engine.model.schema import Schema, assign_fresh_ids
from engine.model.types import (
    BinaryType,
    BooleanType,
    DateType,
    DecimalType,
    DoubleType,
    FixedType,
    FloatType,
    IntegerType,
    ListType,
    LongType,
    MapType,
    NestedField,
    StringType,
    StructType,
    TimestampType,
    TimestamptzType,
    TimeType,
    UUIDType,
)


def req(field_id: int, name: str, t, doc: str | None = None) -> NestedField:
    return NestedField(field_id=field_id, name=name, field_type=t, required=True, doc=doc)


def opt(field_id: int, name: str, t, doc: str | None = None) -> NestedField:
    return NestedField(field_id=field_id, name=name, field_type=t, required=False, doc=doc)


PRIMITIVES = [
    ("boolean", BooleanType()), ("int", IntegerType()), ("long", LongType()), ("float", FloatType()),
    ("double", DoubleType()), ("date", DateType()), ("time", TimeType()), ("timestamp", TimestampType()),
    ("timestamptz", TimestamptzType()), ("string", StringType()), ("uuid", UUIDType()), ("fixed[16]", FixedType(16)),
    ("binary", BinaryType()), ("decimal(9, 2)", DecimalType(9, 2)),
]


def nested_schema() -> Schema:
    """id, data, points: list<struct<x, y>>, props: map<string, struct<lat, long>>, loc: struct<city, zip>."""
    return Schema((
        req(1, "id", LongType()),
        opt(2, "data", StringType(), doc="free text"),
        opt(3, "points", ListType(element_id=6, element_required=True,
                                  element_type=StructType((req(7, "x", LongType()), opt(8, "y", DoubleType()))))),
        opt(4, "props", MapType(key_id=9, key_type=StringType(), value_id=10, value_required=False,
                                value_type=StructType((opt(11, "lat", FloatType()), opt(12, "long", FloatType()))))),
        req(5, "loc", StructType((req(13, "city", StringType()), opt(14, "zip", IntegerType())))),
    ), schema_id=3, identifier_field_ids=(1, 13))


# -- JSON ----------------------------------------------------------------------------------------------------


def test_spec_example_json_exactly() -> None:
    # Appendix C's struct, list and map examples, combined, with Java's key order.
    schema = Schema((
        req(1, "id", UUIDType()),
        opt(2, "data", ListType(element_id=3, element_type=StringType(), element_required=True)),
        opt(6, "m", MapType(key_id=4, key_type=StringType(), value_id=5, value_type=DoubleType())),
    ), schema_id=0, identifier_field_ids=(1,))
    expected = (
        '{"type": "struct", "schema-id": 0, "identifier-field-ids": [1], "fields": ['
        '{"id": 1, "name": "id", "required": true, "type": "uuid"}, '
        '{"id": 2, "name": "data", "required": false, "type": '
        '{"type": "list", "element-id": 3, "element": "string", "element-required": true}}, '
        '{"id": 6, "name": "m", "required": false, "type": '
        '{"type": "map", "key-id": 4, "key": "string", "value-id": 5, "value": "double", "value-required": false}}'
        ']}'
    )
    assert json.dumps(schema.to_json()) == expected
    assert Schema.from_json(json.loads(expected)) == schema


def test_identifier_field_ids_left_out_when_empty_and_doc_written_last() -> None:
    schema = Schema((opt(1, "a", StringType(), doc="a doc"),), schema_id=7)
    assert json.dumps(schema.to_json()) == (
        '{"type": "struct", "schema-id": 7, "fields": '
        '[{"id": 1, "name": "a", "required": false, "type": "string", "doc": "a doc"}]}')


@pytest.mark.parametrize(("text", "t"), PRIMITIVES)
def test_every_primitive_round_trips(text: str, t) -> None:
    schema = Schema((opt(1, "c", t),))
    js = schema.to_json()
    assert js["fields"][0]["type"] == text
    assert Schema.from_json(json.loads(json.dumps(js))) == schema


def test_all_types_nested_round_trip() -> None:
    struct = StructType(tuple(opt(100 + i, f"c{i}", t) for i, (_, t) in enumerate(PRIMITIVES)))
    schema = Schema((
        req(1, "s", struct),
        opt(2, "l", ListType(element_id=3, element_type=ListType(element_id=4, element_type=DecimalType(38, 10)))),
        opt(5, "m", MapType(key_id=6, key_type=StructType((req(7, "k", IntegerType()),)), value_id=8,
                            value_type=MapType(key_id=9, key_type=DateType(), value_id=10, value_type=BinaryType(),
                                               value_required=True), value_required=True)),
    ), schema_id=12)
    assert Schema.from_json(json.loads(json.dumps(schema.to_json()))) == schema
    assert nested_schema() == Schema.from_json(nested_schema().to_json())


def test_from_json_defaults_schema_id_and_accepts_spaced_decimal() -> None:
    schema = Schema.from_json({"type": "struct", "fields": [
        {"id": 1, "name": "d", "required": True, "type": "decimal(9,2)"}]})
    assert schema.schema_id == 0
    assert schema.identifier_field_ids == ()
    assert schema.find_type("d") == DecimalType(9, 2)
    assert schema.to_json()["fields"][0]["type"] == "decimal(9, 2)"


def test_json_matches_pyiceberg_both_ways() -> None:
    pyiceberg_schema = pytest.importorskip("pyiceberg.schema")
    ours = nested_schema()
    theirs = pyiceberg_schema.Schema.model_validate_json(json.dumps(ours.to_json()))
    assert theirs.schema_id == 3
    assert theirs.identifier_field_ids == [1, 13]
    assert theirs.find_field("points.element.x").field_id == 7
    assert Schema.from_json(json.loads(theirs.model_dump_json())) == ours


@pytest.mark.parametrize("bad", [
    [],
    {"type": "list", "fields": []},
    {"type": "struct"},
    {"type": "struct", "fields": {}},
    {"type": "struct", "fields": [{"id": 1, "name": "a", "required": True}]},
    {"type": "struct", "fields": [{"id": 1, "name": "a", "required": True, "type": "varchar"}]},
    {"type": "struct", "schema-id": "1", "fields": []},
    {"type": "struct", "identifier-field-ids": 1, "fields": []},
    {"type": "struct", "fields": ["a"]},
])
def test_from_json_rejects_malformed(bad) -> None:
    with pytest.raises(ValidationError, match="^Cannot parse"):
        Schema.from_json(bad)


# -- structure and lookups ---------------------------------------------------------------------------------


def test_columns_struct_and_highest_id() -> None:
    schema = nested_schema()
    assert [f.name for f in schema.columns] == ["id", "data", "points", "props", "loc"]
    assert schema.as_struct() == StructType(schema.fields)
    assert schema.highest_field_id == 14
    assert Schema(()).highest_field_id == 0


def test_index_by_id_includes_elements_keys_and_values() -> None:
    index = nested_schema().index_by_id()
    assert sorted(index) == list(range(1, 15))
    assert index[6] == NestedField(field_id=6, name="element", required=True,
                                   field_type=StructType((req(7, "x", LongType()), opt(8, "y", DoubleType()))))
    assert index[9] == req(9, "key", StringType())
    assert index[10].name == "value" and index[10].required is False
    assert index[13] == req(13, "city", StringType())


def test_find_field_by_id_full_and_short_names() -> None:
    schema = nested_schema()
    assert schema.find_field(2).name == "data"
    assert schema.find_field("loc.city").field_id == 13
    assert schema.find_field("points.element").field_id == 6
    assert schema.find_field("points.element.x").field_id == 7
    assert schema.find_field("points.x").field_id == 7
    assert schema.find_field("props.key").field_id == 9
    assert schema.find_field("props.value.lat").field_id == 11
    assert schema.find_field("props.lat").field_id == 11
    assert schema.find_type("loc.zip") == IntegerType()


def test_find_field_case_insensitive() -> None:
    schema = nested_schema()
    assert schema.find_field("LOC.City", case_sensitive=False).field_id == 13
    with pytest.raises(ValidationError, match="'LOC.City'"):
        schema.find_field("LOC.City")
    ambiguous = Schema((opt(1, "a", IntegerType()), opt(2, "A", IntegerType())))
    assert ambiguous.find_field("A").field_id == 2
    with pytest.raises(ValidationError, match="more than one field"):
        ambiguous.find_field("a", case_sensitive=False)


@pytest.mark.parametrize("missing", ["nope", "loc.nope", 99, "points.element.z"])
def test_find_field_missing_names_the_field(missing) -> None:
    with pytest.raises(ValidationError, match=f"^Cannot find field: .*{missing}"):
        nested_schema().find_field(missing)


def test_find_column_name_is_the_full_dotted_name() -> None:
    schema = nested_schema()
    names = {i: schema.find_column_name(i) for i in range(1, 15)}
    assert names == {1: "id", 2: "data", 3: "points", 4: "props", 5: "loc", 6: "points.element",
                     7: "points.element.x", 8: "points.element.y", 9: "props.key", 10: "props.value",
                     11: "props.value.lat", 12: "props.value.long", 13: "loc.city", 14: "loc.zip"}
    with pytest.raises(ValidationError, match="^Cannot find column name: id 15"):
        schema.find_column_name(15)


def test_parent_and_list_or_map_membership() -> None:
    schema = nested_schema()
    assert schema.parent_id(1) is None
    assert schema.parent_id(7) == 6
    assert schema.parent_id(6) == 3
    assert schema.parent_id(13) == 5
    assert [i for i in range(1, 15) if schema.is_in_list_or_map(i)] == [6, 7, 8, 9, 10, 11, 12]


def test_schema_is_a_hashable_value() -> None:
    a, b = nested_schema(), nested_schema()
    assert a == b and hash(a) == hash(b)
    assert attrs.evolve(a, schema_id=4) != a
    assert {a: 1}[b] == 1
    assert str(Schema((req(1, "id", LongType()),))) == "table {\n  1: id: required long\n}"


# -- validation ----------------------------------------------------------------------------------------------


def test_duplicate_ids_rejected_anywhere() -> None:
    with pytest.raises(ValidationError, match="field id 1 is used by both 'a' and 'b'"):
        Schema((opt(1, "a", IntegerType()), opt(1, "b", IntegerType())))
    with pytest.raises(ValidationError, match="field id 2 is used by both 'l' and 'l.element'"):
        Schema((opt(2, "l", ListType(element_id=2, element_type=IntegerType())),))
    with pytest.raises(ValidationError, match="field id 3 is used by both 'm.key' and 's.x'"):
        Schema((opt(1, "m", MapType(key_id=3, key_type=StringType(), value_id=4, value_type=StringType())),
                opt(2, "s", StructType((opt(3, "x", IntegerType()),)))))


def test_duplicate_names_in_one_struct_rejected() -> None:
    with pytest.raises(ValidationError, match="struct '<root>' has two fields named 'a'"):
        Schema((opt(1, "a", IntegerType()), opt(2, "a", LongType())))
    with pytest.raises(ValidationError, match="struct 's' has two fields named 'x'"):
        Schema((opt(1, "s", StructType((opt(2, "x", IntegerType()), opt(3, "x", IntegerType())))),))
    # the same name in different structs is fine
    assert Schema((opt(1, "x", IntegerType()), opt(2, "s", StructType((opt(3, "x", IntegerType()),))))) is not None


def test_dotted_names_that_collide_rejected() -> None:
    with pytest.raises(ValidationError, match="more than one field is named 'a.b'"):
        Schema((opt(1, "a", StructType((opt(2, "b", IntegerType()),))), opt(3, "a.b", IntegerType())))


def test_non_field_rejected() -> None:
    with pytest.raises(ValidationError, match="is not a NestedField"):
        Schema(("a",))


def test_valid_identifier_fields() -> None:
    schema = nested_schema()
    assert schema.identifier_field_ids == (1, 13)
    assert schema.identifier_field_names == ("id", "loc.city")


@pytest.mark.parametrize(("ids", "message"), [
    ((2,), "'data' is optional"),
    ((5,), "'loc' is a struct<city: string, zip: int>, not a primitive type"),
    ((7,), "'points.element.x' is nested in a list or map"),
    ((9,), "'props.key' is nested in a list or map"),
    ((99,), "id 99 is not in the schema"),
    ((1, 1), "id 1 is listed twice"),
])
def test_invalid_identifier_fields(ids, message) -> None:
    with pytest.raises(ValidationError, match=f"^Cannot use identifier field: {message}"):
        attrs.evolve(nested_schema(), identifier_field_ids=ids)


@pytest.mark.parametrize("t", [FloatType(), DoubleType()])
def test_float_identifier_fields_rejected(t) -> None:
    with pytest.raises(ValidationError, match=f"'f' is a {t}"):
        Schema((req(1, "f", t),), identifier_field_ids=(1,))


def test_identifier_field_in_optional_struct_rejected() -> None:
    fields = (opt(1, "outer", StructType((req(2, "inner", StructType((req(3, "k", LongType()),))),))),)
    with pytest.raises(ValidationError, match="'outer.inner.k' is nested in an optional struct"):
        Schema(fields, identifier_field_ids=(3,))
    required_outer = (attrs.evolve(fields[0], required=True),)
    assert Schema(required_outer, identifier_field_ids=(3,)).identifier_field_names == ("outer.inner.k",)


# -- fresh ids ------------------------------------------------------------------------------------------------


def test_assign_fresh_ids_follows_java_order() -> None:
    # Java's assignFreshIds: a struct's fields first, then their children; list element; map key, value.
    fields = (
        opt(50, "a", StructType((opt(51, "a1", IntegerType()), opt(52, "a2", ListType(
            element_id=53, element_type=StructType((opt(54, "e", IntegerType()),))))))),
        opt(60, "b", MapType(key_id=61, key_type=StructType((req(62, "k", StringType()),)), value_id=63,
                             value_type=ListType(element_id=64, element_type=LongType()))),
        req(70, "c", LongType()),
    )
    schema = assign_fresh_ids(Schema(fields, schema_id=2, identifier_field_ids=(70,)))
    ids = {schema.find_column_name(i): i for i in range(1, schema.highest_field_id + 1)}
    assert ids == {
        "a": 1, "b": 2, "c": 3,
        "a.a1": 4, "a.a2": 5, "a.a2.element": 6, "a.a2.element.e": 7,
        "b.key": 8, "b.value": 9, "b.key.k": 10, "b.value.element": 11,
    }
    assert schema.schema_id == 2
    assert schema.identifier_field_ids == (3,)
    assert schema.find_field("c").required is True


def test_assign_fresh_ids_tolerates_placeholder_ids_and_start() -> None:
    fields = (opt(-1, "x", IntegerType()), opt(-1, "y", ListType(element_id=-1, element_type=StringType())))
    schema = assign_fresh_ids(fields, start=10, schema_id=1)
    assert [schema.find_column_name(i) for i in (10, 11, 12)] == ["x", "y", "y.element"]
    assert schema.schema_id == 1


def test_assign_fresh_ids_matches_pyiceberg() -> None:
    pyiceberg_schema = pytest.importorskip("pyiceberg.schema")
    scrambled = Schema.from_json(json.loads(json.dumps(nested_schema().to_json())))
    theirs = pyiceberg_schema.assign_fresh_schema_ids(
        pyiceberg_schema.Schema.model_validate_json(json.dumps(scrambled.to_json())))
    ours = assign_fresh_ids(scrambled, schema_id=0)
    assert Schema.from_json(json.loads(theirs.model_dump_json())) == ours


@pytest.mark.parametrize("field, culprit", [
    ({"id": "x", "name": "a", "required": False, "type": "int"}, "'id' must be a int"),
    ({"id": None, "name": "a", "required": False, "type": "int"}, "'id' must be a int"),
    ({"id": True, "name": "a", "required": False, "type": "int"}, "'id' must be a int"),
    ({"id": 1, "name": 5, "required": False, "type": "int"}, "'name' must be a str"),
    ({"id": 1, "name": "a", "required": "false", "type": "int"}, "'required' must be a bool"),
    ({"id": 1, "name": "a", "required": False}, "missing key 'type'"),
    ({"id": 1, "name": "a", "required": False, "type": {"type": "list", "element-id": 2, "element": "int",
                                                        "element-required": "no"}}, "'element-required' must be"),
    ({"id": 1, "name": "a", "required": False, "type": {"type": "struct", "fields": {}}}, "'fields' must be a list"),
])
def test_a_field_of_the_wrong_json_kind_is_refused_naming_the_key(field, culprit) -> None:
    """As Java's JsonUtil reads them: "required": "false" is no boolean (bool("false") would make it required)."""
    with pytest.raises(ValidationError, match=culprit):
        Schema.from_json({"type": "struct", "schema-id": 0, "fields": [field]})
