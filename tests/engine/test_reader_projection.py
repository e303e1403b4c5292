"""Reading data files by field id onto an evolved schema: renames, added and dropped fields at every nesting
level, promoted types, list and map element types, files without field ids (name mapping, else names)."""

from __future__ import annotations

import datetime
import decimal
import json
import os
import uuid

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from engine import Catalog
from engine.errors import CorruptFileError
from engine.state.events import CurrentSchemaSet, SchemaAdded
from engine.model import types as T
from engine.model.arrow_schema import schema_to_arrow
from engine.model.data_file import DataFile
from engine.model.schema import Schema
from engine.operations.snapshot import new_snapshot_id
from engine.operations.snapshot import snapshot_events
from engine.formats.parquet_files import read_data_file as describe
from engine.model.paths import normalize_path
from engine.read.raw_file import apply_name_mapping
from engine.read.reader import read_data_file


def F(fid: int, name: str, t: T.IcebergType, required: bool = False) -> T.NestedField:
    return T.NestedField(field_id=fid, name=name, field_type=t, required=required)


OLD = Schema((
    F(1, "id", T.LongType(), True),
    F(2, "point", T.StructType((F(3, "x", T.IntegerType()), F(4, "y", T.IntegerType())))),
    F(5, "tags", T.ListType(element_id=6, element_type=T.StructType((F(7, "a", T.IntegerType()),
                                                                     F(8, "b", T.StringType()))))),
    F(9, "m", T.MapType(key_id=10, key_type=T.StringType(), value_id=11,
                        value_type=T.StructType((F(12, "v", T.IntegerType()),)))),
    F(13, "gone", T.StringType()),
    F(14, "f", T.FloatType()),
    F(15, "d", T.DecimalType(5, 2)),
    F(16, "ints", T.ListType(element_id=17, element_type=T.IntegerType())),
))

NEW = Schema((
    F(1, "ident", T.LongType(), True),
    F(23, "added", T.StructType((F(24, "q", T.IntegerType()),))),
    F(2, "pos", T.StructType((F(4, "y_renamed", T.LongType()), F(20, "z", T.StringType()),
                              F(3, "x", T.IntegerType())))),
    F(5, "tags", T.ListType(element_id=6, element_type=T.StructType((
        F(8, "bee", T.StringType()), F(7, "a", T.LongType()), F(21, "c", T.IntegerType()))))),
    F(9, "m", T.MapType(key_id=10, key_type=T.StringType(), value_id=11,
                        value_type=T.StructType((F(12, "v", T.LongType()), F(22, "w", T.StringType()))))),
    F(14, "f", T.DoubleType()),
    F(15, "d", T.DecimalType(10, 2)),
    F(16, "ints", T.ListType(element_id=17, element_type=T.LongType())),
), schema_id=1)

OLD_ROWS = [
    {"id": 1, "point": {"x": 1, "y": 2}, "tags": [{"a": 1, "b": "p"}, None, {"a": None, "b": "q"}],
     "m": [("k", {"v": 5}), ("n", None)], "gone": "g", "f": 1.5, "d": decimal.Decimal("1.25"), "ints": [1, None]},
    {"id": 2, "point": None, "tags": None, "m": None, "gone": None, "f": None, "d": None, "ints": None},
    {"id": 3, "point": {"x": None, "y": 7}, "tags": [], "m": [], "gone": "h", "f": -2.0,
     "d": decimal.Decimal("-999.99"), "ints": []},
]

NEW_ROWS = [
    {"ident": 1, "added": None, "pos": {"y_renamed": 2, "z": None, "x": 1},
     "tags": [{"bee": "p", "a": 1, "c": None}, None, {"bee": "q", "a": None, "c": None}],
     "m": [("k", {"v": 5, "w": None}), ("n", None)], "f": 1.5, "d": decimal.Decimal("1.25"), "ints": [1, None]},
    {"ident": 2, "added": None, "pos": None, "tags": None, "m": None, "f": None, "d": None, "ints": None},
    {"ident": 3, "added": None, "pos": {"y_renamed": 7, "z": None, "x": None}, "tags": [], "m": [], "f": -2.0,
     "d": decimal.Decimal("-999.99"), "ints": []},
]


def write(path: str, table: pa.Table, **kwargs) -> DataFile:
    pq.write_table(table, path, **kwargs)
    return DataFile(file_path=str(path), record_count=table.num_rows, file_size_in_bytes=os.path.getsize(path))


def old_file(tmp_path, rows=OLD_ROWS) -> DataFile:
    return write(str(tmp_path / "old.parquet"), pa.Table.from_pylist(rows, schema=schema_to_arrow(OLD)))


def test_read_evolved_schema_by_field_id(tmp_path):
    f = old_file(tmp_path)
    out = read_data_file(f, NEW)
    assert out.schema == schema_to_arrow(NEW)
    assert out.to_pylist() == NEW_ROWS


def test_read_with_the_old_schema_is_identity(tmp_path):
    f = old_file(tmp_path)
    assert read_data_file(f, OLD).to_pylist() == OLD_ROWS


def test_read_positions_column(tmp_path):
    f = old_file(tmp_path)
    out = read_data_file(f, Schema((NEW.columns[0],)), with_positions=True)
    assert out.column_names == ["ident", "_pos"] and out.column("_pos").to_pylist() == [0, 1, 2]


def test_files_without_field_ids_use_the_name_mapping(tmp_path):
    plain = pa.table({
        "old_id": pa.array([1, 2], pa.int32()),
        "pt": pa.array([{"xx": 1, "other": "o"}, None], pa.struct([("xx", pa.int32()), ("other", pa.string())])),
        "tags": pa.array([[{"a": 1, "b": "p"}], None], pa.list_(pa.struct([("a", pa.int16()), ("b", pa.string())]))),
        "m": pa.array([[("k", {"v": 3})], []], pa.map_(pa.string(), pa.struct([("v", pa.int32())]))),
        "unmapped": ["u", "v"],
    })
    f = write(str(tmp_path / "plain.parquet"), plain)
    mapping = [
        {"field-id": 1, "names": ["id", "old_id"]},
        {"field-id": 2, "names": ["point", "pt"], "fields": [{"field-id": 3, "names": ["x", "xx"]},
                                                               {"field-id": 4, "names": ["y"]}]},
        {"field-id": 5, "names": ["tags"], "fields": [{"field-id": 6, "names": ["element"], "fields": [
            {"field-id": 7, "names": ["a"]}, {"field-id": 8, "names": ["b"]}]}]},
        {"field-id": 9, "names": ["m"], "fields": [{"field-id": 10, "names": ["key"]},
                                                   {"field-id": 11, "names": ["value"], "fields": [
                                                       {"field-id": 12, "names": ["v"]}]}]},
    ]
    out = read_data_file(f, NEW, name_mapping_entries=mapping)
    assert out.to_pylist() == [
        {"ident": 1, "added": None, "pos": {"y_renamed": None, "z": None, "x": 1},
         "tags": [{"bee": "p", "a": 1, "c": None}], "m": [("k", {"v": 3, "w": None})], "f": None, "d": None,
         "ints": None},
        {"ident": 2, "added": None, "pos": None, "tags": None, "m": [], "f": None, "d": None, "ints": None},
    ]
    mapped = apply_name_mapping(plain.schema, mapping)
    assert mapped.field("unmapped").metadata is None
    assert mapped.field("pt").type.field("xx").metadata == {b"PARQUET:field_id": b"3"}


def test_files_without_field_ids_and_no_mapping_match_by_name(tmp_path):
    plain = pa.table({"x": pa.array([1, 2], pa.int32()), "name": ["a", "b"]})
    f = write(str(tmp_path / "plain.parquet"), plain)
    schema = Schema((F(1, "name", T.StringType()), F(2, "x", T.LongType()), F(3, "new", T.StringType())))
    assert read_data_file(f, schema).to_pylist() == [{"name": "a", "x": 1, "new": None},
                                                     {"name": "b", "x": 2, "new": None}]


def test_foreign_encodings_cast(tmp_path):
    plain = pa.table({
        "ts": pa.array([1_700_000_000_123_456_789], pa.timestamp("ns")),
        "tz": pa.array([1_700_000_000_123], pa.timestamp("ms", tz="America/New_York")),
        "s": pa.array(["a"]).dictionary_encode(),
        "ls": pa.array(["b"], pa.large_string()),
        "u": pa.array([uuid.UUID(int=5).bytes], pa.binary(16)),
        "small": pa.array([3], pa.int8()),
    })
    f = write(str(tmp_path / "foreign.parquet"), plain, coerce_timestamps=None)
    schema = Schema((F(1, "ts", T.TimestampType()), F(2, "tz", T.TimestamptzType()), F(3, "s", T.StringType()),
                     F(4, "ls", T.StringType()), F(5, "u", T.UUIDType()), F(6, "small", T.IntegerType())))
    [row] = read_data_file(f, schema).to_pylist()
    assert row["ts"] == datetime.datetime(2023, 11, 14, 22, 13, 20, 123456)
    assert row["tz"] == datetime.datetime(2023, 11, 14, 22, 13, 20, 123000, tzinfo=datetime.timezone.utc)
    assert (row["s"], row["ls"], row["small"]) == ("a", "b", 3)
    assert row["u"] == uuid.UUID(int=5)


def test_incompatible_column_is_a_corrupt_file(tmp_path):
    f = write(str(tmp_path / "bad.parquet"), pa.table({"x": ["not a number"]}))
    with pytest.raises(CorruptFileError, match="'x'"):
        read_data_file(f, Schema((F(1, "x", T.LongType()),)))
    with pytest.raises(CorruptFileError, match="not a struct"):
        read_data_file(f, Schema((F(1, "x", T.StructType((F(2, "y", T.IntegerType()),))),)))
    with pytest.raises(CorruptFileError, match="does not exist"):
        read_data_file(DataFile(file_path=str(tmp_path / "nope.parquet"), record_count=0, file_size_in_bytes=0),
                       Schema((F(1, "x", T.LongType()),)))


def test_normalize_path():
    assert normalize_path("file:/x/y") == normalize_path("file:///x/y") == normalize_path("/x/y") == "/x/y"
    assert normalize_path("s3://b/k") == "s3://b/k"


def test_scan_reads_an_evolved_table_and_time_travels_with_the_old_schema(tmp_path):
    with Catalog.open(tmp_path / "wh") as cat:
        cat.create_namespace("db")
        t = cat.create_table("db.t", schema=OLD)
        first = t.append(pa.Table.from_pylist(OLD_ROWS, schema=schema_to_arrow(OLD)))
        t.commit_events(lambda base, ctx: [SchemaAdded(schema=NEW, last_column_id=24), CurrentSchemaSet(schema_id=1)])
        t.append(pa.Table.from_pylist([dict(NEW_ROWS[0], ident=4, added={"q": 9})], schema=schema_to_arrow(NEW)))
        out = t.scan().to_arrow().sort_by("ident")
        assert out.to_pylist() == NEW_ROWS + [dict(NEW_ROWS[0], ident=4, added={"q": 9})]
        assert t.scan(where="pos.y_renamed = 7").to_arrow().column("ident").to_pylist() == [3]
        old = t.scan(snapshot_id=first.snapshot_id).to_arrow().sort_by("id")
        assert old.to_pylist() == OLD_ROWS


def test_scan_uses_the_tables_name_mapping(tmp_path):
    plain = pa.table({"legacy": pa.array([1, 2], pa.int64())})
    path = tmp_path / "plain.parquet"
    pq.write_table(plain, path)
    with Catalog.open(tmp_path / "wh") as cat:
        cat.create_namespace("db")
        t = cat.create_table("db.t", schema=Schema((F(1, "id", T.LongType()),)),
                             properties={"schema.name-mapping.default": json.dumps(
                                 [{"field-id": 1, "names": ["id", "legacy"]}])})
        f = describe(str(path), t.schema(), spec_id=0, partition=())
        sid = new_snapshot_id()
        t.commit_events(lambda base, ctx: snapshot_events(base, ctx, operation="append", snapshot_id=sid, added=[f]))
        assert t.scan().to_arrow().column("id").to_pylist() == [1, 2]
