"""Schema evolution: the UpdateSchema builder on real tables' states, its events, its errors, and own-scan reads.

Layer: tests (icelog's public API, engine.operations.update_schema, engine.state.events; real catalogs under tmp_path).
"""

from __future__ import annotations

import decimal

import attrs
import pyarrow as pa
import pytest

from engine import Catalog
from engine.errors import CommitConflict, ValidationError
from engine.state.events import CurrentSchemaSet, SchemaAdded
from engine.model.schema import Schema
from engine.model.sort_order import SortField, SortOrder
from engine.model.types import (
    DecimalType,
    DoubleType,
    IntegerType,
    ListType,
    LongType,
    MapType,
    NestedField,
    StringType,
    StructType,
)
from engine.operations.commit import CommitContext
from engine.operations.schema_changes import is_promotion, to_iceberg_type
from engine.operations.update_schema import UpdateSchema

CTX = CommitContext(commit_id="c-test", time_ms=1_700_000_000_000)

ARROW_SCHEMA = pa.schema([
    pa.field("id", pa.int32(), nullable=False),                                   # 1
    pa.field("price", pa.float32()),                                              # 2
    pa.field("name", pa.string()),                                                # 3
    pa.field("amount", pa.decimal128(9, 2)),                                      # 4
    pa.field("loc", pa.struct([pa.field("lat", pa.float64()),                     # 5: 9, 10
                               pa.field("lon", pa.float64())])),
    pa.field("pts", pa.list_(pa.struct([pa.field("x", pa.int32())]))),            # 6: element 11, x 12
    pa.field("attrs", pa.map_(pa.string(), pa.int32())),                          # 7: key 13, value 14
    pa.field("category", pa.string()),                                            # 8
])


@pytest.fixture
def catalog(tmp_path):
    cat = Catalog.open(tmp_path / "warehouse")
    cat.create_namespace("db")
    yield cat
    cat.close()


@pytest.fixture
def table(catalog):
    return catalog.create_table("db.t", schema=ARROW_SCHEMA, partition_by=["bucket(4, id)", "category"])


def new_schema(events) -> Schema:
    assert [type(e) for e in events] == [SchemaAdded, CurrentSchemaSet]
    assert events[1].schema_id == events[0].schema.schema_id
    return events[0].schema


def names(schema: Schema) -> list[str]:
    return [f.name for f in schema.fields]


# -- the starting point ------------------------------------------------------------------------------------------


def test_fixture_ids(table):
    s = table.state
    assert s.last_column_id == 14
    assert [s.schema.find_field(n).field_id for n in ("id", "loc.lat", "pts.element", "pts.element.x",
                                                      "attrs.key", "attrs.value", "category")] == [1, 9, 11, 12,
                                                                                                    13, 14, 8]


# -- add ---------------------------------------------------------------------------------------------------------


def test_add_column_assigns_next_id_and_schema_id(table):
    base = table.state
    events = UpdateSchema(table).add_column("note", "string", doc="free text").events(base, CTX)
    schema = new_schema(events)
    assert schema.schema_id == 1
    assert schema.fields[-1] == NestedField(field_id=15, name="note", field_type=StringType(), required=False,
                                            doc="free text")
    assert schema.fields[:-1] == base.schema.fields
    assert events[0].last_column_id == 15


@pytest.mark.parametrize("given, expected", [
    ("long", LongType()),
    ("decimal(10,2)", DecimalType(10, 2)),
    (" Decimal(10, 2) ", DecimalType(10, 2)),
    (LongType(), LongType()),
    (pa.int64(), LongType()),
    (pa.large_string(), StringType()),
    (pa.decimal128(12, 3), DecimalType(12, 3)),
])
def test_add_column_type_forms(table, given, expected):
    schema = new_schema(UpdateSchema(table).add_column("c", given).events(table.state, CTX))
    assert schema.find_field("c").field_type == expected


def test_add_nested_types_get_fresh_ids_in_java_order(table):
    struct = pa.struct([pa.field("a", pa.int32()), pa.field("b", pa.list_(pa.string())),
                        pa.field("c", pa.map_(pa.string(), pa.int64()))])
    update = UpdateSchema(table).add_column("s", struct).add_column("after", "int")
    schema = new_schema(update.events(table.state, CTX))
    # the field first, then its struct's fields level by level, then the list element, then key and value
    assert schema.find_field("s").field_id == 15
    assert [schema.find_field(n).field_id for n in ("s.a", "s.b", "s.c", "s.b.element", "s.c.key", "s.c.value")] \
        == [16, 17, 18, 19, 20, 21]
    assert schema.find_field("after").field_id == 22
    assert update.events(table.state, CTX)[0].last_column_id == 22


def test_add_engine_nested_type_ids_are_replaced(table):
    t = StructType((NestedField(field_id=1, name="x", field_type=IntegerType()),
                    NestedField(field_id=1, name="y", field_type=ListType(element_id=1, element_type=LongType()))))
    schema = new_schema(UpdateSchema(table).add_column("s", t).events(table.state, CTX))
    assert schema.find_field("s").field_type == StructType((
        NestedField(field_id=16, name="x", field_type=IntegerType()),
        NestedField(field_id=17, name="y", field_type=ListType(element_id=18, element_type=LongType()))))


@pytest.mark.parametrize("path", ["loc.alt", ("loc", "alt")])
def test_add_into_struct(table, path):
    schema = new_schema(UpdateSchema(table).add_column(path, "double").events(table.state, CTX))
    assert [f.name for f in schema.find_field("loc").field_type.fields] == ["lat", "lon", "alt"]
    assert schema.find_field("loc.alt").field_id == 15


def test_add_into_list_element_struct(table):
    schema = new_schema(UpdateSchema(table).add_column(("pts", "y"), "long").events(table.state, CTX))
    element = schema.find_field("pts").field_type
    assert isinstance(element, ListType) and element.element_id == 11
    assert [f.name for f in element.element_type.fields] == ["x", "y"]
    assert schema.find_field("pts.element.y").field_id == 15


def test_add_into_map_value_struct(catalog):
    t = catalog.create_table("db.m", schema=pa.schema([
        pa.field("m", pa.map_(pa.string(), pa.struct([pa.field("a", pa.int32())])))]))
    schema = new_schema(UpdateSchema(t).add_column("m.b", "string").events(t.state, CTX))
    value = schema.find_field("m").field_type
    assert isinstance(value, MapType)
    assert [f.name for f in value.value_type.fields] == ["a", "b"]


def test_add_name_with_a_dot_at_top_level_by_tuple(table):
    schema = new_schema(UpdateSchema(table).add_column(("a.b",), "int").events(table.state, CTX))
    assert schema.fields[-1].name == "a.b"


@pytest.mark.parametrize("path, message", [
    ("name", "Cannot add column 'name': a column with that name already exists"),
    ("loc.lat", "Cannot add column 'loc.lat': a column with that name already exists"),
    ("nope.x", "Cannot add column 'nope.x': column 'nope' does not exist"),
    ("name.x", "Cannot add column 'name.x': 'name' is a string, not a struct"),
    ("attrs.x", "Cannot add column 'attrs.x': 'attrs' is a map<string, int>, not a struct"),
])
def test_add_errors(table, path, message):
    with pytest.raises(ValidationError) as e:
        UpdateSchema(table).add_column(path, "int")
    assert str(e.value) == message


def test_add_twice_in_one_update_is_refused(table):
    update = UpdateSchema(table).add_column("c", "int")
    with pytest.raises(ValidationError, match="Cannot add column 'c': a column with that name already exists"):
        update.add_column("c", "long")
    # the refused request is not kept: the builder still works
    assert new_schema(update.events(table.state, CTX)).find_field("c").field_type == IntegerType()


def test_add_unknown_type_string(table):
    with pytest.raises(ValidationError, match="Cannot use type 'struct<a: int>' for column 'c'"):
        UpdateSchema(table).add_column("c", "struct<a: int>")
    with pytest.raises(ValidationError, match="Cannot use type uint32 for column 'c'"):
        UpdateSchema(table).add_column("c", pa.uint32())


def test_add_required_needs_allow_incompatible(table):
    with pytest.raises(ValidationError, match="Cannot add column 'k': it is required"):
        UpdateSchema(table).add_column("k", "long", required=True)
    schema = new_schema(UpdateSchema(table, allow_incompatible_changes=True)
                        .add_column("k", "long", required=True).events(table.state, CTX))
    assert schema.find_field("k").required


def test_add_after_deleting_same_name_gets_new_id(table):
    schema = new_schema(UpdateSchema(table).delete_column("name").add_column("name", "long").events(table.state, CTX))
    field = schema.find_field("name")
    assert (field.field_id, field.field_type) == (15, LongType())


# -- delete ------------------------------------------------------------------------------------------------------


def test_delete_top_level_and_nested(table):
    schema = new_schema(UpdateSchema(table).delete_column("name").delete_column("loc.lon").events(table.state, CTX))
    assert names(schema) == ["id", "price", "amount", "loc", "pts", "attrs", "category"]
    assert [f.name for f in schema.find_field("loc").field_type.fields] == ["lat"]
    assert schema.highest_field_id == 14  # ids are never reused; last_column_id stays
    assert UpdateSchema(table).delete_column("name").events(table.state, CTX)[0].last_column_id == 14


@pytest.mark.parametrize("column, message", [
    ("id", "Cannot delete column 'id': it is a partition source (field 'id_bucket' of the default spec 0)"),
    ("category", "Cannot delete column 'category': it is a partition source (field 'category' of the default spec 0)"),
])
def test_delete_partition_source_is_refused(table, column, message):
    update = UpdateSchema(table).delete_column(column)  # recorded, refused when the schema is built
    with pytest.raises(ValidationError) as e:
        update.events(table.state, CTX)
    assert str(e.value) == message


def test_delete_struct_holding_a_partition_source_names_the_struct(catalog):
    t = catalog.create_table("db.p", schema=ARROW_SCHEMA, partition_by=["loc.lat"])
    with pytest.raises(ValidationError, match=r"^Cannot delete column 'loc': it is a partition source"):
        UpdateSchema(t).delete_column("loc").events(t.state, CTX)


def test_delete_sort_order_source_is_refused(table):
    base = table.state
    order = SortOrder(order_id=1, fields=(SortField(source_id=3),))
    base = attrs.evolve(base, sort_orders=base.sort_orders + (order,), default_sort_order_id=1)
    with pytest.raises(ValidationError, match="^Cannot delete column 'name': it is a source of the default sort "
                                              "order 1$"):
        UpdateSchema(table).delete_column("name").events(base, CTX)


@pytest.mark.parametrize("column, message", [
    ("nope", "Cannot delete column 'nope': column 'nope' does not exist"),
    ("pts.element", "Cannot delete column 'pts.element': list elements and map keys and values cannot be deleted"),
    ("attrs.key", "Cannot delete column 'attrs.key': list elements and map keys and values cannot be deleted"),
])
def test_delete_errors(table, column, message):
    with pytest.raises(ValidationError) as e:
        UpdateSchema(table).delete_column(column)
    assert str(e.value) == message


@pytest.mark.parametrize("then, message", [
    (lambda u: u.rename_column("name", "n"), "Cannot rename column 'name': column 'name' is deleted in this update"),
    (lambda u: u.update_column("name", doc="d"), "Cannot update column 'name': column 'name' is deleted in this "
                                                  "update"),
    (lambda u: u.move_first("name"), "Cannot move column 'name' first: column 'name' is deleted in this update"),
    (lambda u: u.move_after("price", "name"), "Cannot move column 'price' after 'name': column 'name' is deleted "
                                              "in this update"),
])
def test_deleted_column_cannot_be_used(table, then, message):
    update = UpdateSchema(table).delete_column("name")
    with pytest.raises(ValidationError) as e:
        then(update)
    assert str(e.value) == message


def test_deleted_struct_cannot_get_columns(table):
    with pytest.raises(ValidationError, match="^Cannot add column 'loc.alt': column 'loc' is deleted in this update$"):
        UpdateSchema(table).delete_column("loc").add_column("loc.alt", "int")


@pytest.mark.parametrize("first, message", [
    (lambda u: u.rename_column("name", "n"), "Cannot delete column 'name': it is also renamed or updated in this "
                                             "update"),
    (lambda u: u.update_column("name", doc="d"), "Cannot delete column 'name': it is also renamed or updated in "
                                                 "this update"),
    (lambda u: u.move_first("name"), "Cannot delete column 'name': it is also moved in this update"),
])
def test_used_column_cannot_be_deleted(table, first, message):
    update = first(UpdateSchema(table))
    with pytest.raises(ValidationError) as e:
        update.delete_column("name")
    assert str(e.value) == message


def test_struct_with_additions_cannot_be_deleted(table):
    with pytest.raises(ValidationError, match="^Cannot delete column 'loc': columns are added to it in this update$"):
        UpdateSchema(table).add_column("loc.alt", "int").delete_column("loc")


# -- rename ------------------------------------------------------------------------------------------------------


def test_rename_keeps_id_and_type(table):
    base = table.state
    schema = new_schema(UpdateSchema(table).rename_column("name", "label").rename_column(("loc", "lat"), "latitude")
                        .events(base, CTX))
    assert schema.find_field("label") == attrs.evolve(base.schema.find_field("name"), name="label")
    assert schema.find_field("loc.latitude").field_id == 9


@pytest.mark.parametrize("column, new, struct", [("name", "price", "<root>"), ("loc.lat", "lon", "loc")])
def test_a_rename_onto_a_name_still_taken_at_the_end_is_refused(table, column, new, struct):
    with pytest.raises(ValidationError, match=f"Cannot change the schema: .*struct '{struct}' has two fields named "
                                              f"'{new}'"):
        UpdateSchema(table).rename_column(column, new).events(table.state, CTX)


def test_two_names_swap_in_one_update(table):
    """Java's renameColumn checks names only in the schema it builds: a swap is one update."""
    base = table.state
    schema = new_schema(UpdateSchema(table).rename_column("name", "price").rename_column("price", "name")
                        .events(base, CTX))
    assert schema.find_field("price").field_id == 3 and schema.find_field("name").field_id == 2


def test_identifier_fields_follow_a_rename_in_the_same_update(table):
    """As Java's renameColumn moves the name in its identifier field names."""
    schema = new_schema(UpdateSchema(table).set_identifier_fields("id").rename_column("id", "key")
                        .events(table.state, CTX))
    assert schema.identifier_field_ids == (1,) and schema.find_field("key").field_id == 1


@pytest.mark.parametrize("column, new, message", [
    ("nope", "x", "Cannot rename column 'nope': column 'nope' does not exist"),
    ("pts.element", "e", "Cannot rename column 'pts.element': list elements and map keys and values keep their "
                         "names"),
    ("name", "", "Cannot rename column 'name': the new name '' is not a non-empty string"),
])
def test_rename_errors(table, column, new, message):
    with pytest.raises(ValidationError) as e:
        UpdateSchema(table).rename_column(column, new)
    assert str(e.value) == message


def test_rename_into_the_name_of_a_deleted_column(table):
    schema = new_schema(UpdateSchema(table).delete_column("price").rename_column("name", "price")
                        .events(table.state, CTX))
    assert schema.find_field("price").field_id == 3


def test_rename_then_new_column_with_old_name(table):
    schema = new_schema(UpdateSchema(table).rename_column("name", "label").add_column("name", "int")
                        .events(table.state, CTX))
    assert (schema.find_field("label").field_id, schema.find_field("name").field_id) == (3, 15)


# -- update ------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("old, new, allowed", [
    ("int", "long", True),
    ("float", "double", True),
    ("decimal(9,2)", "decimal(18,2)", True),
    ("decimal(9,2)", "decimal(9,2)", True),
    ("decimal(9,2)", "decimal(8,2)", False),
    ("decimal(9,2)", "decimal(10,3)", False),
    ("long", "int", False),
    ("double", "float", False),
    ("int", "string", False),
    ("int", "double", False),
    ("date", "timestamp", False),
    ("string", "binary", False),
])
def test_is_promotion(old, new, allowed):
    assert is_promotion(to_iceberg_type(old, column="c"), to_iceberg_type(new, column="c")) is allowed


def test_promotions(table):
    schema = new_schema(UpdateSchema(table).update_column("id", "long").update_column("price", field_type="double")
                        .update_column("amount", pa.decimal128(20, 2)).update_column("pts.element.x", "long")
                        .events(table.state, CTX))
    assert schema.find_field("id") == NestedField(field_id=1, name="id", field_type=LongType(), required=True)
    assert schema.find_field("price").field_type == DoubleType()
    assert schema.find_field("amount").field_type == DecimalType(20, 2)
    assert schema.find_field("pts.element.x").field_type == LongType()


def test_promote_map_value_and_make_element_optional(catalog):
    t = catalog.create_table("db.m", schema=pa.schema([
        pa.field("m", pa.map_(pa.string(), pa.field("value", pa.int32(), nullable=False))),
        pa.field("l", pa.list_(pa.field("element", pa.float32(), nullable=False)))]))
    schema = new_schema(UpdateSchema(t).update_column("m.value", "long", required=False)
                        .update_column("l.element", "double", required=False).events(t.state, CTX))
    m, lst = schema.find_field("m").field_type, schema.find_field("l").field_type
    assert (m.value_type, m.value_required) == (LongType(), False)
    assert (lst.element_type, lst.element_required) == (DoubleType(), False)


@pytest.mark.parametrize("column, new_type, message", [
    ("id", "string", "Cannot change the type of column 'id': int cannot be promoted to string"),
    ("price", "int", "Cannot change the type of column 'price': float cannot be promoted to int"),
    ("amount", "decimal(9, 3)", "Cannot change the type of column 'amount': decimal(9, 2) cannot be promoted to "
                                "decimal(9, 3)"),
    ("amount", "decimal(5,2)", "Cannot change the type of column 'amount': decimal(9, 2) cannot be promoted to "
                               "decimal(5, 2)"),
    ("loc", "long", "Cannot change the type of column 'loc': it is a struct<lat: double, lon: double>, not a "
                    "primitive"),
    ("id", pa.struct([("a", pa.int32())]), "Cannot change the type of column 'id': the new type is a "
                                           "struct<a: int>, not a primitive"),
    ("attrs.key", "string", "Cannot update column 'attrs.key': map keys cannot change"),
    ("nope", "long", "Cannot update column 'nope': column 'nope' does not exist"),
])
def test_update_errors(table, column, new_type, message):
    with pytest.raises(ValidationError) as e:
        UpdateSchema(table).update_column(column, new_type)
    assert str(e.value) == message


def test_incompatible_type_change_is_refused_even_when_allowed(table):
    with pytest.raises(ValidationError, match="int cannot be promoted to string"):
        UpdateSchema(table, allow_incompatible_changes=True).update_column("id", "string")


def test_required_and_optional(table):
    base = table.state
    schema = new_schema(UpdateSchema(table).make_column_optional("id").events(base, CTX))
    assert not schema.find_field("id").required
    with pytest.raises(ValidationError, match="^Cannot make column 'name' required: rows already written may hold "
                                              "nulls"):
        UpdateSchema(table).update_column("name", required=True)
    schema = new_schema(UpdateSchema(table, allow_incompatible_changes=True).update_column("name", required=True)
                        .events(base, CTX))
    assert schema.find_field("name").required
    # asking for what is already so changes nothing
    assert UpdateSchema(table).update_column("id", required=True).events(base, CTX) == []


def test_update_doc_and_type_together(table):
    schema = new_schema(UpdateSchema(table).update_column("price", doc="in euros").update_column("price", "double")
                        .rename_column("price", "cost").events(table.state, CTX))
    assert schema.find_field("cost") == NestedField(field_id=2, name="cost", field_type=DoubleType(), doc="in euros")


def test_update_with_nothing_is_a_noop(table):
    assert UpdateSchema(table).update_column("id").events(table.state, CTX) == []


def test_promoting_a_bucketed_source_keeps_the_spec_valid(table):
    # bucket hashes int and long alike (Appendix B), so the partition spec stays valid
    schema = new_schema(UpdateSchema(table).update_column("id", "long").events(table.state, CTX))
    assert table.state.spec.partition_type(schema).fields[0].field_type == IntegerType()


# -- move --------------------------------------------------------------------------------------------------------


def test_moves(table):
    schema = new_schema(UpdateSchema(table).move_first("category").move_before("name", "id")
                        .move_after("price", "attrs").events(table.state, CTX))
    assert names(schema) == ["category", "name", "id", "amount", "loc", "pts", "attrs", "price"]


def test_move_nested_and_added_columns(table):
    schema = new_schema(UpdateSchema(table).add_column("loc.alt", "double").move_first("loc.alt")
                        .add_column("first", "int").move_first("first").move_after("loc.lat", "loc.lon")
                        .events(table.state, CTX))
    assert names(schema)[0] == "first"
    assert [f.name for f in schema.find_field("loc").field_type.fields] == ["alt", "lon", "lat"]


def test_move_inside_list_element_struct(table):
    schema = new_schema(UpdateSchema(table).add_column("pts.y", "int").move_first("pts.y").events(table.state, CTX))
    assert [f.name for f in schema.find_field("pts").field_type.element_type.fields] == ["y", "x"]


@pytest.mark.parametrize("make, message", [
    (lambda u: u.move_first("nope"), "Cannot move column 'nope' first: column 'nope' does not exist"),
    (lambda u: u.move_before("name", "nope"), "Cannot move column 'name' before 'nope': column 'nope' does not "
                                              "exist"),
    (lambda u: u.move_after("name", "name"), "Cannot move column 'name' after 'name': a column cannot move after "
                                             "itself"),
    (lambda u: u.move_before("loc.lat", "id"), "Cannot move column 'loc.lat' before 'id': the two columns are in "
                                               "different structs"),
    (lambda u: u.move_first("pts.element"), "Cannot move column 'pts.element' first: 'pts.element' is not a field "
                                            "of a struct"),
])
def test_move_errors(table, make, message):
    with pytest.raises(ValidationError) as e:
        make(UpdateSchema(table))
    assert str(e.value) == message


def test_reorder_back_to_the_original_is_no_change(table):
    assert UpdateSchema(table).move_first("name").move_after("name", "price").events(table.state, CTX) == []


# -- identifier fields ---------------------------------------------------------------------------------------------


def test_set_identifier_fields(table):
    schema = new_schema(UpdateSchema(table).set_identifier_fields("id").events(table.state, CTX))
    assert schema.identifier_field_ids == (1,)


def test_identifier_fields_resolve_in_the_new_schema(table):
    update = (UpdateSchema(table, allow_incompatible_changes=True).add_column("k", "string", required=True)
              .rename_column("id", "key").set_identifier_fields("key", "k"))
    assert new_schema(update.events(table.state, CTX)).identifier_field_ids == (1, 15)


@pytest.mark.parametrize("column, message", [
    ("name", "Cannot use identifier field: 'name' is optional"),
    ("nope", "Cannot set identifier fields: column 'nope' does not exist in the new schema"),
    ("loc", "Cannot use identifier field: 'loc' is a struct<lat: double, lon: double>, not a primitive type"),
])
def test_identifier_field_errors(table, column, message):
    update = UpdateSchema(table).set_identifier_fields(column)  # names resolve in the new schema, at commit
    with pytest.raises(ValidationError) as e:
        update.events(table.state, CTX)
    assert str(e.value) == message


def test_identifier_float_refused(catalog):
    t = catalog.create_table("db.f", schema=pa.schema([pa.field("f", pa.float64(), nullable=False)]))
    with pytest.raises(ValidationError, match="^Cannot use identifier field: 'f' is a double$"):
        UpdateSchema(t).set_identifier_fields("f").events(t.state, CTX)


def test_identifier_field_follows_rename_and_blocks_delete(table):
    table.update_schema().set_identifier_fields("id").commit()
    schema = new_schema(UpdateSchema(table).rename_column("id", "key").events(table.state, CTX))
    assert schema.identifier_field_ids == (1,)
    assert schema.identifier_field_names == ("key",)
    with pytest.raises(ValidationError, match="^Cannot use identifier field: 'id' is optional$"):
        table.update_schema().make_column_optional("id").commit()
    t2 = table.catalog.create_table("db.i", schema=pa.schema([pa.field("a", pa.int32(), nullable=False),
                                                               pa.field("b", pa.int32(), nullable=False)]))
    t2.update_schema().set_identifier_fields("a").commit()
    with pytest.raises(ValidationError, match="^Cannot delete column 'a': it is an identifier field"):
        t2.update_schema().delete_column("a").commit()
    schema = new_schema(UpdateSchema(t2).set_identifier_fields("b").delete_column("a").events(t2.state, CTX))
    assert (names(schema), schema.identifier_field_ids) == (["b"], (2,))


# -- case sensitivity --------------------------------------------------------------------------------------------


def test_case_insensitive(table):
    with pytest.raises(ValidationError, match="column 'NAME' does not exist"):
        UpdateSchema(table).rename_column("NAME", "label")
    schema = new_schema(UpdateSchema(table, case_sensitive=False).rename_column("NAME", "label")
                        .update_column("Loc.LAT", doc="deg").events(table.state, CTX))
    assert schema.find_field("label").field_id == 3
    assert schema.find_field("loc.lat").doc == "deg"
    with pytest.raises(ValidationError, match="a column with that name already exists"):
        UpdateSchema(table).case_sensitive(False).add_column("Name", "int")


# -- union by name -----------------------------------------------------------------------------------------------


def test_union_by_name(table):
    incoming = pa.schema([
        pa.field("id", pa.int64()),                   # wider and optional: promote, make optional
        pa.field("price", pa.float32()),              # same
        pa.field("amount", pa.decimal128(5, 2)),      # narrower: kept as is
        pa.field("loc", pa.struct([pa.field("lat", pa.float64()), pa.field("alt", pa.float64())])),
        pa.field("extra", pa.list_(pa.string())),
    ])
    schema = new_schema(UpdateSchema(table).union_by_name(incoming).events(table.state, CTX))
    assert schema.find_field("id") == NestedField(field_id=1, name="id", field_type=LongType(), required=False)
    assert schema.find_field("amount").field_type == DecimalType(9, 2)
    assert [f.name for f in schema.find_field("loc").field_type.fields] == ["lat", "lon", "alt"]
    assert schema.find_field("loc.alt").field_id == 15
    assert schema.find_field("extra").field_type == ListType(element_id=17, element_type=StringType())
    assert names(schema)[-1] == "extra" and "name" in names(schema)


def test_union_by_name_refuses_incompatible_types(table):
    with pytest.raises(ValidationError, match="int cannot be promoted to string"):
        UpdateSchema(table).union_by_name(pa.schema([pa.field("id", pa.string(), nullable=False)]))


# -- events, no-ops, earlier schemas -------------------------------------------------------------------------------


def test_no_changes_no_events(table):
    assert UpdateSchema(table).events(table.state, CTX) == []
    assert UpdateSchema(table).rename_column("name", "name").events(table.state, CTX) == []
    before = table.catalog.log.head(table.uuid)
    table.update_schema().commit()
    assert table.catalog.log.head(table.uuid) == before


def test_back_to_an_earlier_schema_sets_it_current(table):
    table.update_schema().rename_column("name", "label").commit()
    assert table.state.current_schema_id == 1
    events = UpdateSchema(table).rename_column("label", "name").events(table.state, CTX)
    assert events == [CurrentSchemaSet(schema_id=0)]
    table.update_schema().rename_column("label", "name").commit()
    state = table.state
    assert (state.current_schema_id, [s.schema_id for s in state.schemas]) == (0, [0, 1])


def test_commit_folds_into_state(table):
    with table.update_schema() as update:
        update.add_column("note", "string")
    with table.update_schema() as update:
        update.delete_column("note")
    state = table.state
    # dropping the added column gives schema 0 back: it becomes current again, no schema is added
    assert [s.schema_id for s in state.schemas] == [0, 1]
    assert state.current_schema_id == 0
    assert state.last_column_id == 15  # a deleted column's id is never handed out again
    table.update_schema().add_column("other", "int").commit()
    state = table.state
    assert state.schema.find_field("other").field_id == 16
    assert (state.current_schema_id, state.last_column_id) == (2, 16)


def test_apply_previews_without_committing(table):
    before = table.catalog.log.head(table.uuid)
    preview = table.update_schema().add_column("note", "string").apply()
    assert (preview.schema_id, names(preview)[-1]) == (1, "note")
    assert table.catalog.log.head(table.uuid) == before


def test_error_in_with_block_commits_nothing(table):
    before = table.catalog.log.head(table.uuid)
    with pytest.raises(ValidationError):
        with table.update_schema() as update:
            update.add_column("note", "string")
            update.update_column("name", "long")
    assert table.catalog.log.head(table.uuid) == before
    assert table.state.current_schema_id == 0
    with pytest.raises(ValidationError, match="partition source"):
        table.update_schema().delete_column("category").commit()
    assert table.catalog.log.head(table.uuid) == before


def test_concurrent_schema_change_conflicts(table):
    first = table.update_schema().add_column("a", "int")
    second = table.update_schema().add_column("b", "int")
    first.commit()
    before = table.catalog.log.head(table.uuid)
    with pytest.raises(CommitConflict, match="Cannot update schema: the current schema changed from 0 to 1"):
        second.commit()
    assert table.catalog.log.head(table.uuid) == before


def test_other_commits_in_between_do_not_conflict(table):
    update = table.update_schema().add_column("note", "string")
    table.append(pa.table({"id": pa.array([1], pa.int32()), "category": ["x"]}))
    state = update.commit()
    assert state.schema.find_field("note").field_id == 15
    assert state.current_snapshot is not None


# -- own scan after evolution --------------------------------------------------------------------------------------


def test_scan_reads_old_rows_in_the_new_schema(catalog):
    schema = pa.schema([pa.field("id", pa.int32(), nullable=False), pa.field("price", pa.float32()),
                        pa.field("name", pa.string()), pa.field("gone", pa.string()),
                        pa.field("loc", pa.struct([pa.field("lat", pa.float64())]))])
    t = catalog.create_table("db.e", schema=schema)
    t.append(pa.table({"id": pa.array([1, 2], pa.int32()), "price": pa.array([1.5, 2.5], pa.float32()),
                       "name": ["a", "b"], "gone": ["x", "y"],
                       "loc": pa.array([{"lat": 1.0}, None], schema.field("loc").type)}, schema=schema))
    first = t.current_snapshot().snapshot_id
    with t.update_schema() as u:
        u.add_column("loc.alt", "double").add_column("note", "string")
        u.rename_column("name", "label").update_column("id", "long").update_column("price", "double")
        u.delete_column("gone").move_first("note")
    new = t.schema()
    assert [f.name for f in new.fields] == ["note", "id", "price", "label", "loc"]
    loc_type = pa.struct([pa.field("lat", pa.float64()), pa.field("alt", pa.float64())])
    t.append(pa.table({"note": ["n"], "id": pa.array([3], pa.int64()), "price": pa.array([3.25]),
                       "label": ["c"], "loc": pa.array([{"lat": 3.0, "alt": 30.0}], loc_type)}))
    out = t.scan().to_arrow().sort_by("id")
    assert out.column_names == ["note", "id", "price", "label", "loc"]
    assert out.schema.field("id").type == pa.int64()
    assert out.schema.field("price").type == pa.float64()
    assert out.to_pylist() == [
        {"note": None, "id": 1, "price": 1.5, "label": "a", "loc": {"lat": 1.0, "alt": None}},
        {"note": None, "id": 2, "price": 2.5, "label": "b", "loc": None},
        {"note": "n", "id": 3, "price": 3.25, "label": "c", "loc": {"lat": 3.0, "alt": 30.0}},
    ]
    # time travel to the pre-evolution snapshot reads it with the schema it was written with
    old = t.scan(snapshot_id=first).to_arrow().sort_by("id")
    assert old.column_names == ["id", "price", "name", "gone", "loc"]
    assert old.to_pylist() == [{"id": 1, "price": 1.5, "name": "a", "gone": "x", "loc": {"lat": 1.0}},
                               {"id": 2, "price": 2.5, "name": "b", "gone": "y", "loc": None}]


def test_scan_promoted_decimal(catalog):
    schema = pa.schema([pa.field("amount", pa.decimal128(9, 2))])
    t = catalog.create_table("db.d", schema=schema)
    t.append(pa.table({"amount": pa.array([decimal.Decimal("1.25")], pa.decimal128(9, 2))}))
    t.update_schema().update_column("amount", "decimal(18,2)").commit()
    out = t.scan().to_arrow()
    assert out.schema.field("amount").type == pa.decimal128(18, 2)
    assert out.column("amount").to_pylist() == [decimal.Decimal("1.25")]


def test_an_unknown_column_is_promoted_to_primitives_only(catalog):
    """v3: an unknown column holds no value in any file, so it may become any primitive; never a struct, list or
    map (no primitive evolves to one, and their fields would need fresh ids)."""
    t = catalog.create_table("db.u", schema=pa.schema([("c1", pa.string()), ("u", pa.null())]), format_version=3)
    t.append(pa.table({"c1": ["a", "b"], "u": pa.nulls(2)}))
    version = t.state.version
    for nested in (pa.struct([("a", pa.int32())]), pa.list_(pa.int32())):
        with pytest.raises(ValidationError, match="Cannot change the type of column 'u': the new type is a"):
            t.update_schema().update_column("u", nested).commit()
    assert t.state.version == version
    t.update_schema().update_column("u", "int").commit()
    assert t.scan().to_arrow().column("u").to_pylist() == [None, None]
    assert t.scan(where="u is null").count() == 2


METRICS_COLUMN = "write.metadata.metrics.column."


def test_column_properties_follow_renames_and_go_with_deleted_columns(catalog):
    """Java's SchemaUpdate carries a column's properties (metrics mode, Parquet bloom filter, column stats) to its
    new name and drops them with it; icelog also carries a nested field's when its parent is renamed."""
    t = catalog.create_table("db.p", schema=pa.schema([
        ("id", pa.int64()), ("s", pa.string()), ("x", pa.string()), ("loc", pa.struct([("lat", pa.float64())]))]),
        properties={METRICS_COLUMN + "s": "none", METRICS_COLUMN + "x": "counts", METRICS_COLUMN + "loc.lat": "full",
                    "write.parquet.bloom-filter-enabled.column.id": "true"})
    with t.update_schema() as update:  # a swap of two names, a parent rename, a delete
        update.rename_column("s", "tmp").rename_column("x", "s").rename_column("loc", "place").delete_column("id")
    with t.update_schema() as update:
        update.rename_column("tmp", "x")
    props = {k: v for k, v in t.state.properties if ".column." in k}
    assert props == {METRICS_COLUMN + "x": "none", METRICS_COLUMN + "s": "counts", METRICS_COLUMN + "place.lat": "full"}
    t.append(pa.table({"x": ["b"], "s": ["c"], "place": [{"lat": 1.0}]}))
    (task,) = t.scan().plan_files()
    x_id = t.state.schema.find_field("x").field_id
    assert x_id not in dict(task.file.lower_bounds or ()) and x_id not in dict(task.file.value_counts or ())


# -- what no data file can hold ----------------------------------------------------------------------------------


def test_a_dotted_name_with_an_empty_part_is_refused(table):
    with pytest.raises(ValidationError, match="non-empty name on each side"):
        UpdateSchema(table).add_column("loc.", "int").events(table.state, CTX)


@pytest.mark.parametrize("struct", ["loc", "pts.element"])
def test_deleting_every_field_of_a_struct_is_refused(table, struct):
    """Parquet has no struct without fields: accepted, icelog's scan and every append failed with Arrow errors."""
    fields = {"loc": ["loc.lat", "loc.lon"], "pts.element": ["pts.element.x"]}[struct]
    update = UpdateSchema(table)
    for name in fields:
        update = update.delete_column(name)
    with pytest.raises(ValidationError, match=f"struct '{struct}' would have no fields left"):
        update.events(table.state, CTX)


def test_a_v3_table_keeps_the_row_lineage_names_for_its_lineage_columns(catalog):
    """A column named _row_id beside the lineage column a rewrite writes made a file PyIceberg refuses ("multiple
    fields for name _row_id"), and icelog's scan of _row_id read the user's column."""
    v3 = catalog.create_table("db.v3", schema=pa.schema([("id", pa.int64())]), format_version=3)
    for name in ("_row_id", "_last_updated_sequence_number"):
        with pytest.raises(ValidationError, match=f"'{name}' has the name of a row lineage column"):
            UpdateSchema(v3).add_column(name, "long").events(v3.state, CTX)
    with pytest.raises(ValidationError, match="row lineage column"):
        catalog.create_table("db.v3b", schema=pa.schema([("_row_id", pa.int64())]), format_version=3)
    v2 = catalog.create_table("db.v2", schema=pa.schema([("_row_id", pa.int64())]), format_version=2)
    head = max(e.position for e in catalog.log(since=0))
    with pytest.raises(ValidationError, match="upgrade to format version 3"):
        v2.upgrade_format_version(3)
    assert max(e.position for e in catalog.log(since=0)) == head
    UpdateSchema(v2).add_column("nested", pa.struct([("_row_id", pa.int64())])).events(v2.state, CTX)  # not top-level


def test_a_case_insensitive_rename_onto_another_columns_name_in_other_case_is_refused(table):
    with pytest.raises(ValidationError, match="differ only in case"):
        UpdateSchema(table, case_sensitive=False).rename_column("name", "PRICE").events(table.state, CTX)
