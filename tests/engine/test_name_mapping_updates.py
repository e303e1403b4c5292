"""Files without field ids after schema changes: the table's name mapping follows renames and added columns (as
Java's SchemaUpdate updates it in the same commit), so files appended by their new names map, old files still do,
and a copy-on-write delete reads the rows it writes again through the mapping (never as nulls). PyIceberg reads
the same rows.

Layer: tests (engine's public API on real SQLite and Parquet files without field ids; PyIceberg as a reader).
"""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from engine import Catalog
from engine.model import types as T
from engine.model.name_mapping import NAME_MAPPING_PROPERTY, updated_name_mapping
from engine.model.schema import Schema


@pytest.fixture
def table(tmp_path):
    cat = Catalog.open(tmp_path / "warehouse")
    cat.create_namespace("db")
    t = cat.create_table("db.t", schema=pa.schema([("id", pa.int64()), ("old_name", pa.string())]))
    first = tmp_path / "first.parquet"  # no field ids: the table gets a name mapping from its names
    pq.write_table(pa.table({"id": pa.array([1, 2, 3], pa.int64()), "old_name": ["a", "b", "c"]}), first)
    t.append_files([str(first)])
    yield t
    cat.close()


def _rows(t) -> dict[int, tuple]:
    return {r.pop("id"): tuple(r.values()) for r in t.scan().to_arrow().to_pylist()}


def test_a_copy_on_write_delete_after_a_rename_keeps_the_other_rows(table):
    table.update_schema().rename_column("old_name", "new_name").commit()
    table.delete("id = 1")  # rewrites the file: its rows are read through the mapping, by their old name
    assert _rows(table) == {2: ("b",), 3: ("c",)}


def test_the_mapping_follows_renames_and_added_columns(table, tmp_path):
    table.update_schema().rename_column("old_name", "new_name").commit()
    table.update_schema().add_column("extra", "string").commit()
    mapping = json.loads(table.state.prop(NAME_MAPPING_PROPERTY))
    assert mapping == [{"field-id": 1, "names": ["id"]}, {"field-id": 2, "names": ["old_name", "new_name"]},
                       {"field-id": 3, "names": ["extra"]}]
    later = tmp_path / "later.parquet"
    pq.write_table(pa.table({"id": pa.array([4], pa.int64()), "new_name": ["d"], "extra": ["x"]}), later)
    table.append_files([str(later)])
    assert _rows(table) == {1: ("a", None), 2: ("b", None), 3: ("c", None), 4: ("d", "x")}
    from pyiceberg.table import StaticTable

    read = StaticTable.from_metadata(table.metadata_location).scan().to_arrow().to_pylist()
    assert {r["id"]: (r["new_name"], r["extra"]) for r in read} == {1: ("a", None), 2: ("b", None),
                                                                     3: ("c", None), 4: ("d", "x")}


def test_a_table_without_a_mapping_gets_none_from_a_schema_change(tmp_path):
    with Catalog.open(tmp_path / "warehouse") as cat:
        cat.create_namespace("db")
        t = cat.create_table("db.plain", schema=pa.schema([("id", pa.int64())]))
        t.update_schema().add_column("x", "string").commit()
        assert t.state.prop(NAME_MAPPING_PROPERTY) is None


def test_updated_mapping_moves_a_reused_name_and_maps_nested_additions():
    old = [{"field-id": 1, "names": ["id"]},
           {"field-id": 2, "names": ["b"]},  # dropped below; its name "b" goes to field 3, the entry goes
           {"field-id": 4, "names": ["s"], "fields": [{"field-id": 5, "names": ["x"]}]}]
    def field(field_id: int, name: str, field_type: T.IcebergType) -> T.NestedField:
        return T.NestedField(field_id=field_id, name=name, field_type=field_type)

    schema = Schema(schema_id=1, fields=(
        field(1, "id", T.LongType()),
        field(3, "b", T.StringType()),
        field(4, "s", T.StructType(fields=(field(5, "y", T.IntegerType()), field(6, "z", T.IntegerType())))),
        field(7, "tags", T.ListType(element_id=8, element_type=T.StringType())),
    ))
    assert updated_name_mapping(old, schema) == [
        {"field-id": 1, "names": ["id"]},
        {"field-id": 4, "names": ["s"], "fields": [{"field-id": 5, "names": ["x", "y"]},
                                                   {"field-id": 6, "names": ["z"]}]},
        {"field-id": 3, "names": ["b"]},
        {"field-id": 7, "names": ["tags"], "fields": [{"field-id": 8, "names": ["element"]}]},
    ]
