"""append_files refuses a Parquet file whose columns do not read as the table's schema, before any event is
written, and accepts the promotions Iceberg allows (issue 9, point 5)."""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from engine import Catalog
from engine.errors import ValidationError
from engine.model.schema import Schema
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
    TimestamptzType,
)
from tools.cli import main

SCHEMA = Schema((
    NestedField(field_id=1, name="id", field_type=LongType(), required=True),
    NestedField(field_id=2, name="score", field_type=DoubleType()),
    NestedField(field_id=3, name="price", field_type=DecimalType(10, 2)),
    NestedField(field_id=4, name="name", field_type=StringType()),
))


@pytest.fixture
def catalog(tmp_path: Path):
    cat = Catalog.open(tmp_path / "warehouse")
    cat.create_namespace("db")
    yield cat
    cat.close()


def _write(path: Path, columns: dict, ids: dict[str, int] | None = None) -> str:
    fields = []
    for name, arr in columns.items():
        metadata = {b"PARQUET:field_id": str(ids[name]).encode()} if ids and name in ids else None
        fields.append(pa.field(name, arr.type, metadata=metadata))
    pq.write_table(pa.Table.from_arrays(list(columns.values()), schema=pa.schema(fields)), path)
    return str(path)


def _head(cat: Catalog, table) -> tuple[int, int]:
    return cat.log.head(table.uuid), len(cat.log(since=0))


GOOD = {"id": pa.array([1, 2], pa.int64()), "score": pa.array([0.5, 1.5]),
        "price": pa.array([Decimal("1.25"), Decimal("2.50")], pa.decimal128(10, 2)), "name": pa.array(["a", "b"])}


@pytest.mark.parametrize("column, arr, file_type, table_type", [
    ("id", pa.array(["1", "2"]), "string", "long"),
    ("id", pa.array([1.0, 2.0]), "double", "long"),
    ("id", pa.array([1, 2], pa.uint64()), "uint64", "long"),
    ("score", pa.array(["x", "y"]), "string", "double"),
    ("score", pa.array([1, 2], pa.int64()), "int64", "double"),
    ("price", pa.array([Decimal("1.250"), Decimal("2.5")], pa.decimal128(10, 3)), "decimal128(10, 3)",
     "decimal(10, 2)"),
    ("price", pa.array([Decimal("1.25"), Decimal("2.5")], pa.decimal128(12, 2)), "decimal128(12, 2)",
     "decimal(10, 2)"),
    ("name", pa.array([1, 2], pa.int32()), "int32", "string"),
    ("name", pa.array([["a"], ["b"]]), "list<element: string>", "string"),
])
def test_a_column_of_the_wrong_type_is_refused_naming_file_column_and_types(catalog, tmp_path, column, arr,
                                                                            file_type, table_type):
    table = catalog.create_table("db.t", schema=SCHEMA)
    ok = _write(tmp_path / "ok.parquet", GOOD)
    path = _write(tmp_path / "bad.parquet", {**GOOD, column: arr})
    before = _head(catalog, table)
    with pytest.raises(ValidationError) as e:
        table.append_files([ok, path])
    message = str(e.value)
    assert path in message and repr(column) in message and file_type in message and table_type in message
    assert _head(catalog, table) == before
    assert table.scan().to_arrow().num_rows == 0


def test_the_string_id_of_the_issue_no_longer_breaks_scans(catalog, tmp_path):
    """The report: a string ``id`` in a file for a long column was accepted, every later scan failed, and
    verify said ok. Now nothing is committed and the table keeps scanning."""
    table = catalog.create_table("db.t", schema=SCHEMA)
    table.append_files([_write(tmp_path / "ok.parquet", GOOD)])
    bad = _write(tmp_path / "bad.parquet", {**GOOD, "id": pa.array(["x1", "x2"])})
    with pytest.raises(ValidationError, match="'id' is string in the file, which does not read as the table's long"):
        table.append_files([bad])
    assert sorted(table.scan().to_arrow().column("id").to_pylist()) == [1, 2]
    assert catalog.verify("db.t") == []


def test_columns_are_matched_by_field_id_when_the_file_has_ids(catalog, tmp_path):
    table = catalog.create_table("db.t", schema=SCHEMA)
    ids = {"id": 1, "score": 2, "price": 3, "name": 4}
    # the names differ from the table's, the ids match: accepted and read by id
    renamed = {"key": GOOD["id"], "s": GOOD["score"], "p": GOOD["price"], "n": GOOD["name"]}
    table.append_files([_write(tmp_path / "renamed.parquet", renamed, {"key": 1, "s": 2, "p": 3, "n": 4})])
    assert sorted(table.scan().to_arrow().column("id").to_pylist()) == [1, 2]
    # same names, but the id of "name" points at the long column: the string column is checked as id 1
    swapped = _write(tmp_path / "swapped.parquet", {**GOOD, "id": pa.array([5, 6], pa.int64())},
                     {**ids, "id": 99, "name": 1})
    with pytest.raises(ValidationError, match="'id' is string in the file"):
        table.append_files([swapped])


def test_a_missing_required_column_or_nulls_in_it_are_refused(catalog, tmp_path):
    table = catalog.create_table("db.t", schema=SCHEMA)
    before = _head(catalog, table)
    missing = _write(tmp_path / "missing.parquet", {k: v for k, v in GOOD.items() if k != "id"})
    with pytest.raises(ValidationError, match="no column 'id', which the table requires"):
        table.append_files([missing])
    nulls = _write(tmp_path / "nulls.parquet", {**GOOD, "id": pa.array([1, None], pa.int64())})
    with pytest.raises(ValidationError, match=r"column 'id' is required, but the file holds 1 null"):
        table.append_files([nulls])
    assert _head(catalog, table) == before
    # an optional column may be absent or null
    optional = _write(tmp_path / "optional.parquet", {"id": GOOD["id"], "score": pa.array([None, 1.0])})
    table.append_files([optional])
    assert table.scan().to_arrow().column("name").to_pylist() == [None, None]


def test_promotions_iceberg_allows_are_accepted_and_read(catalog, tmp_path):
    schema = Schema((
        NestedField(field_id=1, name="id", field_type=LongType(), required=True),
        NestedField(field_id=2, name="small", field_type=IntegerType()),
        NestedField(field_id=3, name="score", field_type=DoubleType()),
        NestedField(field_id=4, name="price", field_type=DecimalType(12, 2)),
        NestedField(field_id=5, name="name", field_type=StringType()),
        NestedField(field_id=6, name="ts", field_type=TimestamptzType()),
    ))
    table = catalog.create_table("db.p", schema=schema)
    when = dt.datetime(2024, 1, 2, 3, 4, 5, tzinfo=dt.timezone.utc)
    path = _write(tmp_path / "narrow.parquet", {
        "id": pa.array([1, 2], pa.int32()),                                   # int -> long
        "small": pa.array([3, 4], pa.int16()),                                # int16 -> int
        "score": pa.array([0.5, 1.5], pa.float32()),                          # float -> double
        "price": pa.array([Decimal("1.25"), Decimal("9.99")], pa.decimal128(5, 2)),  # decimal(5,2) -> (12,2)
        "name": pa.array(["a", "b"]).dictionary_encode(),                     # dictionary-encoded string
        "ts": pa.array([when, when], pa.timestamp("ms", tz="UTC")),           # milliseconds
    })
    table.append_files([path])
    rows = sorted(table.scan().to_arrow().to_pylist(), key=lambda r: r["id"])
    assert rows[0] == {"id": 1, "small": 3, "score": 0.5, "price": Decimal("1.25"), "name": "a", "ts": when}
    assert rows[1]["price"] == Decimal("9.99")


def test_nested_columns_are_checked_field_by_field(catalog, tmp_path):
    schema = Schema((
        NestedField(field_id=1, name="id", field_type=LongType(), required=True),
        NestedField(field_id=2, name="loc", field_type=StructType((
            NestedField(field_id=5, name="lat", field_type=DoubleType(), required=True),
            NestedField(field_id=6, name="label", field_type=StringType()),
        ))),
        NestedField(field_id=3, name="tags", field_type=ListType(element_id=7, element_type=LongType())),
        NestedField(field_id=4, name="props", field_type=MapType(key_id=8, key_type=StringType(), value_id=9,
                                                                 value_type=LongType())),
    ))
    table = catalog.create_table("db.n", schema=schema)

    def nested(loc: pa.Array, tags: pa.Array, props: pa.Array) -> dict:
        return {"id": pa.array([1], pa.int64()), "loc": loc, "tags": tags, "props": props}

    loc = pa.array([{"lat": 1.5, "label": "x"}], pa.struct([("lat", pa.float64()), ("label", pa.string())]))
    tags = pa.array([[1, 2]], pa.list_(pa.int32()))  # int elements for a long element: a promotion
    props = pa.array([[("k", 1)]], pa.map_(pa.string(), pa.int64()))
    table.append_files([_write(tmp_path / "ok.parquet", nested(loc, tags, props))])
    assert table.scan().to_arrow().column("tags").to_pylist() == [[1, 2]]

    bad_lat = pa.array([{"lat": "north", "label": "x"}], pa.struct([("lat", pa.string()), ("label", pa.string())]))
    bad_tags = pa.array([["a"]], pa.list_(pa.string()))
    bad_props = pa.array([[("k", "v")]], pa.map_(pa.string(), pa.string()))
    not_a_struct = pa.array(["x"])
    for i, (columns, where) in enumerate([
        (nested(bad_lat, tags, props), "'loc.lat' is string"),
        (nested(loc, bad_tags, props), "'tags.element' is string"),
        (nested(loc, tags, bad_props), "'props.value' is string"),
        (nested(not_a_struct, tags, props), "'loc' is string"),
        (nested(loc, pa.array([{"a": 1}]), props), "'tags' is struct"),
    ]):
        with pytest.raises(ValidationError, match=where):
            table.append_files([_write(tmp_path / f"bad{i}.parquet", columns)])
    no_lat = pa.array([{"label": "x"}], pa.struct([("label", pa.string())]))
    # lat is required inside an optional struct: a missing field is only refused when its parents are required
    table.append_files([_write(tmp_path / "no_lat.parquet", nested(no_lat, tags, props))])
    assert table.scan().to_arrow().num_rows == 2


def test_cli_append_of_a_mistyped_file_exits_1_and_commits_nothing(tmp_path, capsys):
    wh = str(tmp_path / "wh")
    good = _write(tmp_path / "good.parquet", {"id": pa.array([1, 2], pa.int64()), "name": pa.array(["a", "b"])})
    bad = _write(tmp_path / "bad.parquet", {"id": pa.array(["3"]), "name": pa.array(["c"])})
    assert main(["--warehouse", wh, "create-namespace", "db"]) == 0
    assert main(["--warehouse", wh, "create-table", "db.t", "--schema-from", good]) == 0
    assert main(["--warehouse", wh, "append", "db.t", good]) == 0
    capsys.readouterr()
    assert main(["--warehouse", wh, "log", "db.t"]) == 0
    log_before = capsys.readouterr().out
    assert main(["--warehouse", wh, "append", "db.t", bad]) == 1
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and "bad.parquet" in err and "'id' is string" in err
    assert "Traceback" not in err
    assert main(["--warehouse", wh, "log", "db.t"]) == 0
    assert capsys.readouterr().out == log_before
    assert main(["--warehouse", wh, "scan", "db.t", "--columns", "id"]) == 0
    assert sorted(json.loads(line)["id"] for line in capsys.readouterr().out.splitlines()) == [1, 2]
