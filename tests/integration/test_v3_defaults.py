"""Format v3 default values: ``update_schema().add_column(..., default=...)`` records ``initial-default`` and
``write-default``; rows written before the column existed read as the initial default (icelog, Spark), rows
appended without the column get the write default; defaults that cannot hold are refused before anything lands.

Layer: tests (Spark reads what icelog writes).
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from engine import Catalog
from engine.errors import UnsupportedTypeError, ValidationError
from engine.model.schema import Schema, check_schema_for_format


def test_defaults_fill_old_rows_and_missing_columns(spark: Any, tmp_path: Path) -> None:
    with Catalog.open(tmp_path / "wh") as cat:
        cat.create_namespace("db")
        t = cat.create_table("db.t", schema=pa.schema([("id", pa.int64())]), format_version=3)
        t.append(pa.table({"id": [1, 2]}))
        t.update_schema().add_column("score", "int", default=5) \
            .add_column("day", "date", default=dt.date(2024, 3, 1)) \
            .add_column("label", "string", required=True, default="none").commit()
        field = t.state.schema.find_field("score")
        assert (field.initial_default, field.write_default) == (5, 5)
        assert t.state.schema.find_field("day").initial_default == "2024-03-01"
        t.append(pa.table({"id": [3], "score": [9], "label": ["given"]}))   # day and label: write defaults
        rows = sorted(t.scan().to_arrow().to_pylist(), key=lambda r: r["id"])
        assert rows == [
            {"id": 1, "score": 5, "day": dt.date(2024, 3, 1), "label": "none"},
            {"id": 2, "score": 5, "day": dt.date(2024, 3, 1), "label": "none"},
            {"id": 3, "score": 9, "day": dt.date(2024, 3, 1), "label": "given"}]
        meta = json.loads(Path(t.metadata_location.removeprefix("file://")).read_text())
        published = t.metadata_location
    fields = {f["name"]: f for f in meta["schemas"][-1]["fields"]}
    assert fields["score"]["initial-default"] == 5 and fields["score"]["write-default"] == 5
    assert fields["day"]["initial-default"] == "2024-03-01" and fields["label"]["required"] is True
    got = sorted((r["id"], r["score"], r["day"], r["label"]) for r in
                 spark.read.format("iceberg").load(published).collect())
    assert got == [(1, 5, dt.date(2024, 3, 1), "none"), (2, 5, dt.date(2024, 3, 1), "none"),
                   (3, 9, dt.date(2024, 3, 1), "given")]


def test_defaults_that_cannot_hold_are_refused_and_nothing_lands(tmp_path: Path) -> None:
    with Catalog.open(tmp_path / "wh") as cat:
        cat.create_namespace("db")
        v2 = cat.create_table("db.v2", schema=pa.schema([("id", pa.int64())]))
        v3 = cat.create_table("db.v3", schema=pa.schema([("id", pa.int64()), ("s", pa.struct([("a", pa.int32())]))]),
                              format_version=3)
        before = (v2.state.version, v3.state.version)
        with pytest.raises(ValidationError, match="format version 3"):
            v2.update_schema().add_column("x", "int", default=1).commit()
        with pytest.raises(ValidationError, match="'x' with default 'abc'"):
            v3.update_schema().add_column("x", "int", default="abc").commit()
        with pytest.raises(ValidationError, match="out of range|not a int"):
            v3.update_schema().add_column("x", "int", default=2**40).commit()
        with pytest.raises(ValidationError, match="primitive"):
            v3.update_schema().add_column("t", pa.struct([("a", pa.int32())]), default={"a": 1}).commit()
        for not_a_json_number in (float("nan"), float("inf"), float("-inf")):  # Java and PyIceberg read no other
            with pytest.raises(ValidationError, match="'x' with default .*finite number"):
                v3.update_schema().add_column("x", "double", default=not_a_json_number).commit()
        with pytest.raises(ValidationError, match="initial-default 'NaN' of column 'x'"):  # as a REST client sends
            check_schema_for_format(Schema.from_json({"type": "struct", "schema-id": 1, "fields": [
                {"id": 1, "name": "x", "type": "float", "required": False, "initial-default": "NaN"}]}), 3)
        assert (v2.state.version, v3.state.version) == before
        # a required column without a default still needs allow_incompatible_changes
        with pytest.raises(ValidationError, match="required"):
            v3.update_schema().add_column("y", "int", required=True).commit()


@pytest.mark.parametrize("type_name", ["geometry", "geography(OGC:CRS84, spherical)"])
def test_v3_types_icelog_does_not_support_are_refused_with_a_typed_error(tmp_path: Path, type_name: str) -> None:
    from engine.model.schema import Schema

    with Catalog.open(tmp_path / "wh") as cat:
        cat.create_namespace("db")
        t = cat.create_table("db.t", schema=pa.schema([("id", pa.int64())]), format_version=3)
        version = t.state.version
        with pytest.raises(UnsupportedTypeError, match=f"Cannot use type '{type_name.split('(')[0]}.*format v3 type"):
            t.update_schema().add_column("x", type_name).commit()
        assert t.state.version == version
        with pytest.raises(UnsupportedTypeError, match="format v3 type"):
            Schema.from_json({"type": "struct", "schema-id": 0, "fields": [
                {"id": 1, "name": "x", "required": False, "type": type_name}]})


def test_a_filter_on_a_nested_default_reads_it_in_files_older_than_the_field(tmp_path: Path) -> None:
    """The filter's columns are read first (late materialization): the struct of a field added later is read by
    its own id, so the field reads as its initial default there, as in a full scan (and PyIceberg, DuckDB)."""
    from pyiceberg.table import StaticTable

    schema = pa.schema([("id", pa.int64()), ("st", pa.struct([("a", pa.int32())])), ("s", pa.string())])
    with Catalog.open(tmp_path / "wh") as cat:
        cat.create_namespace("db")
        t = cat.create_table("db.t", schema=schema, format_version=3)
        t.append(pa.table({"id": [1, 2], "st": [{"a": 1}, {"a": 2}], "s": ["x", "y"]}, schema=schema))
        t.update_schema().add_column(("st", "c"), "int", default=4).commit()
        assert t.scan(where="st.c = 4").to_arrow().num_rows == 2  # with the string column it does not name
        assert t.scan(where="st.c is null").to_arrow().num_rows == 0
        assert StaticTable.from_metadata(t.metadata_location).scan(row_filter="st.c = 4").to_arrow().num_rows == 2
        t.delete("st.c = 4")
        assert t.scan().to_arrow().num_rows == 0


def test_pyiceberg_and_duckdb_read_initial_defaults(tmp_path: Path) -> None:
    from pyiceberg.table import StaticTable

    from tests.conftest import duckdb_connect

    with Catalog.open(tmp_path / "wh") as cat:
        cat.create_namespace("db")
        t = cat.create_table("db.t", schema=pa.schema([("id", pa.int64())]), format_version=3)
        t.append(pa.table({"id": [1, 2]}))
        t.update_schema().add_column("score", "int", default=5).commit()
        t.append(pa.table({"id": [3], "score": [7]}))
        location = t.metadata_location
    expected = [(1, 5), (2, 5), (3, 7)]
    rows = StaticTable.from_metadata(location).scan().to_arrow().to_pylist()
    assert sorted((r["id"], r["score"]) for r in rows) == expected
    con = duckdb_connect()
    try:
        assert sorted(con.execute(f"SELECT id, score FROM iceberg_scan('{location}')").fetchall()) == expected
    finally:
        con.close()


def test_defaults_inside_structs_fill_old_rows_and_missing_fields(spark: Any, tmp_path: Path) -> None:
    """A field added to a struct (at any depth of structs) with a default: rows written before read it (icelog and
    Spark), appends whose struct lacks the field write it; a null struct stays null; inside a list it is refused."""
    with Catalog.open(tmp_path / "wh") as cat:
        cat.create_namespace("db")
        t = cat.create_table("db.t", schema=pa.schema([
            ("id", pa.int64()), ("s", pa.struct([("a", pa.int32()), ("inner", pa.struct([("x", pa.string())]))]))]),
            format_version=3)
        t.append(pa.table({"id": [1, 2], "s": [{"a": 1, "inner": {"x": "p"}}, None]}))
        t.update_schema().add_column("s.b", "int", default=7).add_column("s.inner.y", "string", default="none") \
            .commit()
        assert t.state.schema.find_field("s.inner.y").initial_default == "none"
        t.append(pa.table({"id": [3], "s": [{"a": 3, "inner": {"x": "q"}}]}))                  # b and y: defaults
        t.append(pa.table({"id": [4], "s": [{"a": 4, "b": 40, "inner": {"x": "r", "y": "given"}}]}))
        expected = [(1, {"a": 1, "inner": {"x": "p", "y": "none"}, "b": 7}), (2, None),
                    (3, {"a": 3, "inner": {"x": "q", "y": "none"}, "b": 7}),
                    (4, {"a": 4, "inner": {"x": "r", "y": "given"}, "b": 40})]
        assert sorted((r["id"], r["s"]) for r in t.scan().to_arrow().to_pylist()) == expected
        version = t.state.version
        with pytest.raises(ValidationError, match="field\\(s\\) 'zz' of column 's' are not in the table schema"):
            t.append(pa.table({"id": [5], "s": [{"a": 5, "zz": 1}]}))
        lists = cat.create_table("db.l", schema=pa.schema([("l", pa.list_(pa.struct([("a", pa.int32())])))]),
                                 format_version=3)
        with pytest.raises(ValidationError, match="'l.element.b' has an initial-default; icelog takes default values "
                                                  "of primitive columns at the top level or inside structs only"):
            lists.update_schema().add_column("l.element.b", "int", default=1).commit()
        assert t.state.version == version and lists.state.version == 1
        published = t.metadata_location
    got = sorted((r["id"], None if r["s"] is None else r["s"].asDict(recursive=True))
                 for r in spark.read.format("iceberg").load(published).collect())
    assert got == expected


@pytest.mark.parametrize("how", ["delete_by_key", "upsert"])
def test_an_equality_delete_on_a_column_older_rows_predate_matches_its_initial_default(tmp_path: Path,
                                                                                       how: str) -> None:
    """The rows written before ``k`` existed read as k = 7; an equality delete of k = 7 deletes them too (the spec
    compares the row's values). Before, the key read as null there, and the rows came back."""
    with Catalog.open(tmp_path / "wh") as cat:
        cat.create_namespace("db")
        t = cat.create_table("db.t", schema=pa.schema([("id", pa.int64())]), format_version=3,
                             properties={"write.delete.mode": "merge-on-read"})
        t.append(pa.table({"id": pa.array([1, 2], pa.int64())}))
        t.update_schema().add_column("k", "int", default=7).commit()
        keys = pa.table({"k": pa.array([7], pa.int32())})
        if how == "delete_by_key":
            t.delete_by_key(keys, ["k"])
            expected: list[dict] = []
        else:
            t.upsert(pa.table({"id": pa.array([9], pa.int64()), "k": pa.array([7], pa.int32())}), ["k"])
            expected = [{"id": 9, "k": 7}]
        assert t.scan().to_arrow().to_pylist() == expected
        assert t.scan("id = 1").to_arrow().to_pylist() == [] and t.scan().count() == len(expected)
        t.rewrite_data_files()                                        # compaction applies the delete the same way
        assert t.scan().to_arrow().to_pylist() == expected
