"""Spark (Iceberg 1.10 runtime, by path) reads exactly the rows icelog's own scan sees after delete_by_key, upsert
and row deltas, at the current snapshot and every earlier one (time travel).

PyIceberg 0.12 cannot read equality deletes, so it reads only the tables whose deletes are position deletes (keys
that do not determine the partition, and row deltas with position deletes).
"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa
import pytest

from engine import Catalog
from engine.model.data_file import DataFileContent

SCHEMA = pa.schema([("id", pa.int64()), ("part", pa.string()), ("v", pa.string())])


def rows(ids: Sequence[int | None], part: str | None = "a", tag: str = "x") -> pa.Table:
    ids = list(ids)
    return pa.table({"id": pa.array(ids, pa.int64()), "part": pa.array([part] * len(ids), pa.string()),
                     "v": pa.array([f"{tag}{i}" for i in ids], pa.string())})


def _sorted(items) -> list[tuple]:
    return sorted(items, key=lambda r: (r[0] is None, r[0] or 0, r[1] or "", r[2] or ""))


def triples(table: pa.Table) -> list[tuple]:
    return _sorted((r["id"], r["part"], r["v"]) for r in table.to_pylist())


class Built:
    """A table icelog wrote, with the rows each of its snapshots holds according to icelog."""

    def __init__(self, t, expected_current: list[tuple]) -> None:
        self.location = t.location
        self.metadata_location = t.metadata_location
        self.expected = {s.snapshot_id: triples(t.scan(snapshot_id=s.snapshot_id).to_arrow()) for s in t.snapshots()}
        self.current = t.current_snapshot().snapshot_id
        self.kinds = {f.content for f in t.catalog.store.live_files(t.state, self.current)}
        self.operations = [s.operation for s in t.snapshots()]
        assert self.expected[self.current] == _sorted(expected_current)
        assert t.catalog.verify(t.identifier) == []


def unpartitioned(cat: Catalog) -> Built:
    t = cat.create_table("db.flat", schema=SCHEMA)
    t.append(pa.concat_tables([rows(range(10)), rows([None], tag="null")]))
    t.delete_by_key(pa.table({"id": [3, 7]}), ["id"])
    t.append(rows([3], tag="back"))  # newer than the delete: survives
    t.upsert(rows([1, 3, 11], tag="up"), ["id"])
    t.upsert(rows([3, 12], tag="again"), ["id"])  # upsert twice: one row per key, the latest
    t.delete_by_key(pa.table({"id": pa.array([None, 5], pa.int64())}), ["id"])  # a null key matches the null row
    return Built(t, [(0, "a", "x0"), (1, "a", "up1"), (2, "a", "x2"), (3, "a", "again3"), (4, "a", "x4"),
                     (6, "a", "x6"), (8, "a", "x8"), (9, "a", "x9"), (11, "a", "up11"), (12, "a", "again12")])


def by_partition(cat: Catalog) -> Built:
    t = cat.create_table("db.parts", schema=SCHEMA, partition_by=["part"])
    t.append(pa.concat_tables([rows(range(5), "a"), rows(range(5, 10), "b")]))
    t.delete_by_key(pa.table({"id": [1, 6, 2], "part": ["a", "b", "b"]}), ["id", "part"])  # (2, b) matches nothing
    t.upsert(pa.concat_tables([rows([2, 20], "a", "up"), rows([7], "b", "up")]), ["id", "part"])
    t.upsert(rows([20], "a", "again"), ["id", "part"])
    return Built(t, [(0, "a", "x0"), (2, "a", "up2"), (3, "a", "x3"), (4, "a", "x4"), (20, "a", "again20"),
                     (5, "b", "x5"), (7, "b", "up7"), (8, "b", "x8"), (9, "b", "x9")])


def bucketed(cat: Catalog) -> Built:
    t = cat.create_table("db.buckets", schema=SCHEMA, partition_by=["bucket(4, id)"])
    t.append(rows(range(12)))
    t.delete_by_key(pa.table({"id": [0, 5, 10]}), ["id"])
    t.upsert(rows([1, 2, 30], tag="up"), ["id"])
    expected = [(i, "a", "up" + str(i) if i in (1, 2) else f"x{i}") for i in range(12) if i not in (0, 5, 10)]
    return Built(t, expected + [(30, "a", "up30")])


def evolved(cat: Catalog) -> Built:
    """Spec 0 is unpartitioned and still has live data: the keys' deletes are global (spec 0) and reach the
    files of spec 1 too."""
    t = cat.create_table("db.evolved", schema=SCHEMA)
    t.append(rows(range(5), "a"))
    t.update_spec().add_identity("part").commit()
    t.append(rows(range(5, 10), "b"))
    t.delete_by_key(pa.table({"id": [1, 8]}), ["id"])
    t.upsert(rows([2, 9], "c", "up"), ["id"])
    return Built(t, [(0, "a", "x0"), (2, "c", "up2"), (3, "a", "x3"), (4, "a", "x4"), (5, "b", "x5"),
                     (6, "b", "x6"), (7, "b", "x7"), (9, "c", "up9")])


def positional(cat: Catalog) -> Built:
    """Keys that do not determine the partition: position deletes of the rows they match (PyIceberg reads it)."""
    t = cat.create_table("db.positional", schema=SCHEMA, partition_by=["part"])
    t.append(pa.concat_tables([rows(range(5), "a"), rows(range(5, 10), "b")]))
    t.delete_by_key(pa.table({"id": [1, 6]}), ["id"])
    t.upsert(rows([2, 7], "b", "up"), ["id"])
    t.upsert(rows([7], "c", "again"), ["id"])
    return Built(t, [(0, "a", "x0"), (2, "b", "up2"), (3, "a", "x3"), (4, "a", "x4"), (5, "b", "x5"),
                     (7, "c", "again7"), (8, "b", "x8"), (9, "b", "x9")])


def builder_positions(cat: Catalog) -> Built:
    """Row deltas with position deletes only: on existing files and on a file added by the same delta."""
    t = cat.create_table("db.delta_pos", schema=SCHEMA, partition_by=["part"])
    t.append(pa.concat_tables([rows(range(5), "a"), rows(range(5, 10), "b")]))
    [a] = [f for f in t.scan().plan_files() if f.partition == ("a",)]
    t.row_delta().add_position_deletes({a.file_path: [0, 3]}).commit()
    delta = t.row_delta().add_rows(rows([20, 21, 22], "b"))
    [new] = delta._data
    delta.add_position_deletes({new.file_path: [1]}).commit()
    return Built(t, [(1, "a", "x1"), (2, "a", "x2"), (4, "a", "x4"), (5, "b", "x5"), (6, "b", "x6"),
                     (7, "b", "x7"), (8, "b", "x8"), (9, "b", "x9"), (20, "b", "x20"), (22, "b", "x22")])


def builder_mixed(cat: Catalog) -> Built:
    """One row delta with new rows, position deletes and equality deletes (one of them naming a new row)."""
    t = cat.create_table("db.delta_mixed", schema=SCHEMA, partition_by=["part"])
    t.append(pa.concat_tables([rows(range(5), "a"), rows(range(5, 10), "b")]))
    [b] = [f for f in t.scan().plan_files() if f.partition == ("b",)]
    with t.row_delta() as delta:
        delta.add_rows(rows([30, 31], "a"))
        delta.add_position_deletes({b.file_path: [4]})
        delta.add_equality_deletes(pa.table({"id": [2, 30], "part": ["a", "a"]}), ["id", "part"])
    return Built(t, [(0, "a", "x0"), (1, "a", "x1"), (3, "a", "x3"), (4, "a", "x4"), (5, "b", "x5"),
                     (6, "b", "x6"), (7, "b", "x7"), (8, "b", "x8"), (30, "a", "x30"), (31, "a", "x31")])


BUILDERS = {"flat": unpartitioned, "parts": by_partition, "buckets": bucketed, "evolved": evolved,
            "positional": positional, "delta_pos": builder_positions, "delta_mixed": builder_mixed}
POSITION_ONLY = ("positional", "delta_pos")


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory):
    path = tmp_path_factory.mktemp("row-delta-warehouse")
    with Catalog.open(path) as cat:
        cat.create_namespace("db")
        yield {name: build(cat) for name, build in BUILDERS.items()}


def spark_rows(spark, built: Built, snapshot_id: int | None = None) -> list[tuple]:
    reader = spark.read.format("iceberg")
    if snapshot_id is not None:
        reader = reader.option("snapshot-id", str(snapshot_id))
    return _sorted((r["id"], r["part"], r["v"]) for r in reader.load(built.location).collect())


def test_the_tables_hold_the_delete_kinds_they_test(warehouse):
    assert DataFileContent.EQUALITY_DELETES in warehouse["flat"].kinds
    assert DataFileContent.EQUALITY_DELETES in warehouse["evolved"].kinds
    assert DataFileContent.POSITION_DELETES in warehouse["delta_mixed"].kinds
    for name in POSITION_ONLY:
        assert DataFileContent.EQUALITY_DELETES not in warehouse[name].kinds
    assert warehouse["flat"].operations == ["append", "delete", "append", "overwrite", "overwrite", "delete"]


@pytest.mark.parametrize("name", list(BUILDERS))
def test_spark_reads_the_current_rows(spark, warehouse, name):
    built = warehouse[name]
    assert spark_rows(spark, built) == built.expected[built.current]


@pytest.mark.parametrize("name", list(BUILDERS))
def test_spark_time_travels_across_row_deltas(spark, warehouse, name):
    built = warehouse[name]
    for snapshot_id, expected in built.expected.items():
        assert spark_rows(spark, built, snapshot_id) == expected, snapshot_id


def test_spark_filters_after_upserts(spark, warehouse):
    built = warehouse["flat"]
    got = spark.read.format("iceberg").load(built.location).where("id >= 3 AND id <= 11").collect()
    assert _sorted((r["id"], r["part"], r["v"]) for r in got) == [
        r for r in built.expected[built.current] if r[0] is not None and 3 <= r[0] <= 11]


@pytest.mark.parametrize("name", POSITION_ONLY)
def test_pyiceberg_reads_position_delete_row_deltas(warehouse, name):
    from pyiceberg.table import StaticTable

    built = warehouse[name]
    table = StaticTable.from_metadata(built.metadata_location)
    assert triples(table.scan().to_arrow()) == built.expected[built.current]
    for snapshot_id, expected in built.expected.items():
        assert triples(table.scan(snapshot_id=snapshot_id).to_arrow()) == expected, snapshot_id
