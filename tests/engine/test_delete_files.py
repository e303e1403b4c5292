"""Writing position and equality delete files: layout, reserved field ids, sort order, metrics, validation."""

from __future__ import annotations

import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from engine import Catalog
from engine.write.delete_files import (
    equality_schema,
    write_equality_deletes,
    write_position_deletes,
)
from engine.errors import ValidationError
from engine.model import types as T
from engine.model.data_file import DataFileContent
from engine.model.values import from_bytes, to_bytes


def field_ids(schema: pa.Schema) -> dict[str, int]:
    out = {}

    def visit(prefix: str, f: pa.Field) -> None:
        name = f"{prefix}{f.name}"
        out[name] = int(f.metadata[b"PARQUET:field_id"])
        if pa.types.is_struct(f.type):
            for i in range(f.type.num_fields):
                visit(f"{name}.", f.type.field(i))

    for f in schema:
        visit("", f)
    return out


@pytest.fixture
def catalog(tmp_path):
    cat = Catalog.open(tmp_path / "warehouse")
    cat.create_namespace("db")
    yield cat
    cat.close()


SCHEMA = pa.schema([
    pa.field("id", pa.int64(), nullable=False),
    ("category", pa.string()),
    ("score", pa.float64()),
    ("point", pa.struct([("x", pa.int32()), ("y", pa.float32())])),
    ("tags", pa.list_(pa.string())),
    ("attrs", pa.map_(pa.string(), pa.int32())),
])


@pytest.fixture
def table(catalog):
    return catalog.create_table("db.t", schema=SCHEMA, partition_by=["category"])


def test_position_deletes_file_layout_and_metrics(table):
    b = f"{table.location}/data/category=a/b.parquet"
    a = f"{table.location}/data/category=a/a.parquet"
    f = write_position_deletes(table.state, {b: [9, 2], a: [5, 0, 3]}, spec_id=0, partition=("a",))
    assert f.content == DataFileContent.POSITION_DELETES
    assert f.file_path.startswith(f"{table.location}/data/category=a/") and f.file_path.endswith(".parquet")
    assert f.record_count == 5 and f.file_size_in_bytes == os.path.getsize(f.file_path)
    assert f.spec_id == 0 and f.partition == ("a",) and f.equality_ids is None
    read = pq.read_table(f.file_path)
    assert field_ids(read.schema) == {"file_path": 2147483546, "pos": 2147483545}
    assert [fld.nullable for fld in read.schema] == [False, False]
    assert read.schema.field("pos").type == pa.int64()
    # sorted by file_path, then pos
    assert read.to_pylist() == [{"file_path": a, "pos": 0}, {"file_path": a, "pos": 3}, {"file_path": a, "pos": 5},
                                {"file_path": b, "pos": 2}, {"file_path": b, "pos": 9}]
    # full metrics on both columns, whatever the table's mode: paths are longer than 16 characters, not truncated
    lower, upper = dict(f.lower_bounds), dict(f.upper_bounds)
    assert from_bytes(T.StringType(), lower[2147483546]) == a
    assert from_bytes(T.StringType(), upper[2147483546]) == b
    assert lower[2147483545] == to_bytes(T.LongType(), 0) and upper[2147483545] == to_bytes(T.LongType(), 9)
    assert dict(f.value_counts) == {2147483546: 5, 2147483545: 5}
    assert dict(f.null_value_counts) == {2147483546: 0, 2147483545: 0}


def test_position_deletes_of_one_data_file_have_equal_path_bounds(table):
    path = f"{table.location}/data/category=b/some-long-data-file-name.parquet"
    f = write_position_deletes(table.state, {path: [1]}, spec_id=0, partition=("b",))
    assert dict(f.lower_bounds)[2147483546] == dict(f.upper_bounds)[2147483546] == path.encode()
    assert "/data/category=b/" in f.file_path


def test_position_deletes_unpartitioned_folder(catalog):
    t = catalog.create_table("db.u", schema=SCHEMA)
    f = write_position_deletes(t.state, {"/x.parquet": [0]}, spec_id=0, partition=())
    assert os.path.dirname(f.file_path) == f"{t.location}/data"


@pytest.mark.parametrize("deletes, spec_id, partition, match", [
    ({}, 0, ("a",), "no positions"),
    ({"/x": []}, 0, ("a",), "no positions"),
    ({"/x": [-1]}, 0, ("a",), "-1"),
    ({"/x": [1.5]}, 0, ("a",), "1.5"),
    ({"/x": [1]}, 7, ("a",), "spec with id 7"),
    ({"/x": [1]}, 0, (), "0 value"),
])
def test_position_deletes_errors(table, deletes, spec_id, partition, match):
    with pytest.raises(ValidationError, match=match):
        write_position_deletes(table.state, deletes, spec_id=spec_id, partition=partition)


def test_delete_files_need_format_version_2(catalog):
    t = catalog.create_table("db.v1", schema=SCHEMA, format_version=1)
    with pytest.raises(ValidationError, match="version 1"):
        write_position_deletes(t.state, {"/x": [1]}, spec_id=0, partition=())
    with pytest.raises(ValidationError, match="version 1"):
        write_equality_deletes(t.state, pa.table({"id": [1]}), equality_ids=[1], spec_id=0, partition=())


def test_equality_deletes_file(table):
    rows = pa.table({"id": pa.array([7, 3], pa.int32()), "category": ["a", None], "score": [1.0, 2.0]})
    f = write_equality_deletes(table.state, rows, equality_ids=[1, 2], spec_id=0, partition=("a",))
    assert f.content == DataFileContent.EQUALITY_DELETES and f.equality_ids == (1, 2)
    assert f.record_count == 2 and f.partition == ("a",) and "/data/category=a/" in f.file_path
    read = pq.read_table(f.file_path)
    # only the equality columns, in table order, typed as the table types them, with the table's field ids
    assert field_ids(read.schema) == {"id": 1, "category": 2}
    assert read.schema.field("id").type == pa.int64() and not read.schema.field("id").nullable
    assert read.to_pylist() == [{"id": 7, "category": "a"}, {"id": 3, "category": None}]
    assert dict(f.null_value_counts) == {1: 0, 2: 1}
    assert dict(f.lower_bounds)[1] == to_bytes(T.LongType(), 3)


def test_equality_deletes_on_a_nested_field(table):
    rows = pa.table({"point": pa.array([{"x": 1}, {"x": None}, None], pa.struct([("x", pa.int32())]))})
    x_id = table.schema().find_field("point.x").field_id
    f = write_equality_deletes(table.state, rows, equality_ids=[x_id], spec_id=0, partition=("b",))
    read = pq.read_table(f.file_path)
    assert field_ids(read.schema) == {"point": table.schema().find_field("point").field_id, "point.x": x_id}
    assert read.column("point").to_pylist() == [{"x": 1}, {"x": None}, None]
    assert f.equality_ids == (x_id,)


def test_equality_schema_keeps_parents(table):
    s = table.schema()
    part = equality_schema(s, [s.find_field("point.x").field_id, 1])
    assert [f.name for f in part.columns] == ["id", "point"]
    assert [f.name for f in part.columns[1].field_type.fields] == ["x"]


@pytest.mark.parametrize("column, match", [
    ("score", "'score' is a double"),
    ("point.y", "'point.y' is a float"),
    ("point", "'point' is a struct"),
    ("tags", "'tags' is a list"),
    ("tags.element", "'tags.element' is inside a list or map"),
    ("attrs.key", "'attrs.key' is inside a list or map"),
])
def test_equality_column_restrictions(table, column, match):
    fid = table.schema().find_field(column).field_id
    with pytest.raises(ValidationError, match=match):
        write_equality_deletes(table.state, pa.table({"id": [1]}), equality_ids=[fid], spec_id=0, partition=("a",))


@pytest.mark.parametrize("rows, ids, match", [
    (pa.table({"id": [1]}), [99], "field id 99 is not in the table schema"),
    (pa.table({"id": [1]}), [1, 1], "field id 1 is listed twice"),
    (pa.table({"id": [1]}), [], "no equality field ids"),
    (pa.table({"category": ["a"]}), [1], "column 'id' is missing"),
    (pa.table({"id": pa.array([None], pa.int64())}), [1], "required column 'id' has 1 null"),
    (pa.table({"id": ["x"]}), [1], "column 'id' of type string does not fit long"),
    (pa.table({"id": pa.array([], pa.int64())}), [1], "no rows"),
])
def test_equality_deletes_errors(table, rows, ids, match):
    with pytest.raises(ValidationError, match=match):
        write_equality_deletes(table.state, rows, equality_ids=ids, spec_id=0, partition=("a",))
