"""Spark (Iceberg 1.10 runtime) and PyIceberg read tables with icelog's position and equality delete files and
see exactly the rows icelog's own scan sees, now and before the deletes (time travel).

PyIceberg 0.12 cannot read equality deletes, so it reads the position-delete tables only.
"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa
import pytest

from engine import Catalog
from engine.write.data_writer import write_data_files
from engine.write.delete_files import write_equality_deletes, write_position_deletes
from engine.state.events import SpecAdded
from engine.model.data_file import DataFile
from engine.model.partitioning import PartitionSpec
from engine.operations.snapshot import new_snapshot_id
from engine.operations.snapshot import snapshot_events


def rows(ids: Sequence[int], category: str | Sequence[str | None] = "a",
         name: Sequence[str | None] | None = None) -> pa.Table:
    cats = [category] * len(ids) if isinstance(category, str) else list(category)
    return pa.table({"id": pa.array(ids, pa.int64()), "category": pa.array(cats, pa.string()),
                     "name": pa.array(name if name is not None else [f"n{i}" for i in ids], pa.string())})


def commit(t, files: Sequence[DataFile], operation: str = "delete") -> int:
    sid = new_snapshot_id()
    t.commit_events(lambda base, ctx: snapshot_events(base, ctx, operation=operation, snapshot_id=sid,
                                                      added=list(files)))
    return sid


def _sorted(items) -> list[tuple]:
    return sorted(items, key=lambda r: (r[0], r[1] or "", r[2] is not None, r[2] or ""))


def triples(table: pa.Table) -> list[tuple]:
    return _sorted((r["id"], r["category"], r["name"]) for r in table.to_pylist())


class Built:
    """A table icelog wrote, with the rows each of its snapshots holds according to icelog."""

    def __init__(self, t) -> None:
        self.location = t.location
        self.metadata_location = t.metadata_location
        self.expected = {s.snapshot_id: triples(t.scan(snapshot_id=s.snapshot_id).to_arrow()) for s in t.snapshots()}
        self.current = t.current_snapshot().snapshot_id


def position_deletes_table(cat: Catalog) -> Built:
    t = cat.create_table("db.pos", schema=rows([]).schema, partition_by=["category"])
    t.append(pa.concat_tables([rows(range(0, 6), "a"), rows(range(10, 16), "b")]))
    t.append(rows([6, 7, 8], "a"))
    a_old, a_new = sorted((x for x in t.scan().plan_files() if x.partition == ("a",)),
                          key=lambda x: -x.record_count)
    [b] = [x for x in t.scan().plan_files() if x.partition == ("b",)]
    # one delete file for one data file, one for two data files of a partition (paths spelled exactly as the
    # manifests spell them: Java and PyIceberg match them as strings, so a file:// spelling would not apply there)
    commit(t, [write_position_deletes(t.state, {a_old.file_path: [0, 5]}, spec_id=0, partition=("a",)),
               write_position_deletes(t.state, {a_old.file_path: [2], a_new.file_path: [1]}, spec_id=0,
                                      partition=("a",))])
    commit(t, [write_position_deletes(t.state, {b.file_path: [3]}, spec_id=0, partition=("b",))])
    # data and a position delete on it in one commit (same sequence number: applies) ...
    [staged] = write_data_files(t.state, rows([20, 21, 22], "b"))
    commit(t, [staged, write_position_deletes(t.state, {staged.file_path: [1]}, spec_id=0, partition=("b",))],
           operation="overwrite")
    # ... and a delete file committed before the data file it names (older: does not apply)
    [later] = write_data_files(t.state, rows([30, 31], "a"))
    commit(t, [write_position_deletes(t.state, {later.file_path: [0]}, spec_id=0, partition=("a",))])
    commit(t, [later], operation="append")
    built = Built(t)
    assert [r[0] for r in built.expected[built.current]] == [1, 3, 4, 6, 8, 10, 11, 12, 14, 15, 20, 22, 30, 31]
    return built


def equality_deletes_table(cat: Catalog) -> Built:
    t = cat.create_table("db.eq", schema=rows([]).schema, partition_by=["category"])
    t.append(pa.concat_tables([rows(range(0, 5), "a"), rows(range(10, 15), "b")]))
    t.append(rows([1, 2, 11], ["a", "a", "b"], name=[None, "x", None]))
    # partition-scoped: 1 and 12 named in partition a; 12 lives in b and stays
    commit(t, [write_equality_deletes(t.state, pa.table({"id": [3, 12]}), equality_ids=[1], spec_id=0,
                                      partition=("a",))])
    # two columns with a null: (1, null name) deletes only the row of id 1 whose name IS NULL
    commit(t, [write_equality_deletes(t.state, pa.table({"id": [1, 2], "name": [None, "x"]}), equality_ids=[1, 3],
                                      spec_id=0, partition=("a",))])
    # an upsert: the new row and the delete of the old one in one commit; the new row survives
    [staged] = write_data_files(t.state, rows([4], "a", name=["new"]))
    commit(t, [staged, write_equality_deletes(t.state, pa.table({"id": [4]}), equality_ids=[1], spec_id=0,
                                              partition=("a",))], operation="overwrite")
    # global: an unpartitioned spec's equality deletes reach every partition
    t.commit_events(lambda base, ctx: [SpecAdded(spec=PartitionSpec(spec_id=1, fields=()))])
    commit(t, [write_equality_deletes(t.state, pa.table({"name": [None, "n13"]}), equality_ids=[3], spec_id=1,
                                      partition=())])
    t.append(rows([13], "b"))  # newer than every delete: stays
    built = Built(t)
    assert built.expected[built.current] == [
        (0, "a", "n0"), (1, "a", "n1"), (2, "a", "n2"), (4, "a", "new"), (10, "b", "n10"), (11, "b", "n11"),
        (12, "b", "n12"), (13, "b", "n13"), (14, "b", "n14")]
    return built


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory):
    path = tmp_path_factory.mktemp("deletes-warehouse")
    with Catalog.open(path) as cat:
        cat.create_namespace("db")
        yield {"pos": position_deletes_table(cat), "eq": equality_deletes_table(cat)}


def spark_rows(spark, built: Built, snapshot_id: int | None = None) -> list[tuple]:
    reader = spark.read.format("iceberg")
    if snapshot_id is not None:
        reader = reader.option("snapshot-id", str(snapshot_id))
    return _sorted((r["id"], r["category"], r["name"]) for r in reader.load(built.location).collect())


@pytest.mark.parametrize("name", ["pos", "eq"])
def test_spark_reads_surviving_rows(spark, warehouse, name):
    built = warehouse[name]
    assert spark_rows(spark, built) == built.expected[built.current]


@pytest.mark.parametrize("name", ["pos", "eq"])
def test_spark_time_travels_across_deletes(spark, warehouse, name):
    built = warehouse[name]
    for snapshot_id, expected in built.expected.items():
        assert spark_rows(spark, built, snapshot_id) == expected, snapshot_id


def test_spark_filters_with_deletes(spark, warehouse):
    built = warehouse["eq"]
    got = spark.read.format("iceberg").load(built.location).where("id >= 2 AND id <= 12").orderBy("id").collect()
    assert [r["id"] for r in got] == [r[0] for r in built.expected[built.current] if 2 <= r[0] <= 12]


def test_pyiceberg_reads_position_deletes(warehouse):
    from pyiceberg.table import StaticTable

    built = warehouse["pos"]
    table = StaticTable.from_metadata(built.metadata_location)
    assert triples(table.scan().to_arrow()) == built.expected[built.current]
    for snapshot_id, expected in built.expected.items():
        assert triples(table.scan(snapshot_id=snapshot_id).to_arrow()) == expected, snapshot_id
