"""Spark and PyIceberg read what compaction commits: the same rows before and after, sorted and Z-ordered files,
no delete files left live, and equality deletes committed while a compaction ran applied to its files (they keep
the starting snapshot's data sequence number)."""

from __future__ import annotations

import random

import pyarrow as pa
import pytest
from pyiceberg.table import StaticTable

from engine import Catalog
from engine.model.data_file import DataFileContent
from engine.operations.rewrite import commit_rewrite, plan_rewrite

SCHEMA = pa.schema([("id", pa.int64()), ("part", pa.string()), ("x", pa.int32()), ("y", pa.float64())])


def rows(ids, part):
    ids = list(ids)
    return pa.table({"id": pa.array(ids, pa.int64()), "part": [part] * len(ids),
                     "x": pa.array([i % 50 for i in ids], pa.int32()),
                     "y": pa.array([(i * 7 % 101) / 4 for i in ids], pa.float64())})


def spark_rows(spark, location, snapshot_id=None):
    reader = spark.read.format("iceberg")
    if snapshot_id is not None:
        reader = reader.option("snapshot-id", snapshot_id)
    return sorted((r["id"], r["part"], r["x"], r["y"]) for r in reader.load(location).collect())


def icelog_rows(t, snapshot_id=None):
    table = t.scan(snapshot_id=snapshot_id).to_arrow()
    return sorted(zip(*(table.column(c).to_pylist() for c in ("id", "part", "x", "y"))))


@pytest.mark.parametrize("strategy, kwargs", [
    ("binpack", {}),
    ("sort", {"sort_order": ["x DESC", "id"]}),
    ("zorder", {"zorder_columns": ["x", "y"]}),
])
def test_compaction_reads_the_same_everywhere(spark, tmp_warehouse, strategy, kwargs):
    ids = list(range(600))
    random.Random(3).shuffle(ids)
    with Catalog.open(tmp_warehouse) as cat:
        cat.create_namespace("db")
        t = cat.create_table("db.t", schema=SCHEMA, partition_by=["part"],
                             properties={"write.delete.mode": "merge-on-read"})
        for i in range(12):
            chunk = ids[i * 50:(i + 1) * 50]
            t.append(pa.concat_tables([rows([j for j in chunk if j % 2], "odd"),
                                       rows([j for j in chunk if not j % 2], "even")]))
        t.delete("id < 40")
        t.delete("x = 7")
        before = t.current_snapshot()
        kinds = {f.content for f in t.catalog.store.live_files(t.state, before.snapshot_id)}
        assert DataFileContent.POSITION_DELETES in kinds
        expected = icelog_rows(t)
        assert len(expected) == 600 - 40 - len([i for i in range(40, 600) if i % 50 == 7])
        target = t.scan().to_arrow().nbytes // 6 + 1
        snap = t.rewrite_data_files(strategy=strategy, target_file_size_bytes=target, **kwargs)
        assert snap.operation == "replace"
        after = t.catalog.store.live_files(t.state, snap.snapshot_id)
        assert {f.content for f in after} == {DataFileContent.DATA}
        assert icelog_rows(t) == expected == icelog_rows(t, before.snapshot_id)
        n_files = len(after)
        location, meta = t.location, t.metadata_location
        assert cat.verify("db.t") == []
    assert spark_rows(spark, location) == expected
    assert spark_rows(spark, location, before.snapshot_id) == expected
    files = spark.read.format("iceberg").load(f"{location}#files").select("content", "record_count").collect()
    assert len(files) == n_files < 24 and {r["content"] for r in files} == {0}
    assert sum(r["record_count"] for r in files) == len(expected)
    summary = spark.read.format("iceberg").load(f"{location}#snapshots").where(
        f"snapshot_id = {snap.snapshot_id}").select("operation", "summary").collect()[0]
    assert summary["operation"] == "replace"
    assert summary["summary"]["total-delete-files"] == "0"
    table = StaticTable.from_metadata(meta).scan().to_arrow()
    assert sorted(zip(*(table.column(c).to_pylist() for c in ("id", "part", "x", "y")))) == expected


def test_sorted_files_prune_in_spark_too(spark, tmp_warehouse):
    ids = list(range(2000))
    random.Random(5).shuffle(ids)
    with Catalog.open(tmp_warehouse) as cat:
        cat.create_namespace("db")
        t = cat.create_table("db.t", schema=SCHEMA)
        for i in range(8):
            t.append(rows(ids[i * 250:(i + 1) * 250], "p"))
        target = t.scan().to_arrow().nbytes // 8 + 1
        t.rewrite_data_files(strategy="sort", sort_order=["id"], target_file_size_bytes=target)
        assert len(t.scan(where="id = 1234").plan_files()) == 1
        location = t.location
    frame = spark.read.format("iceberg").load(location).where("id = 1234")
    assert [r["id"] for r in frame.collect()] == [1234]
    assert spark.read.format("iceberg").load(f"{location}#files").count() == 8


@pytest.mark.parametrize("strategy, kwargs", [
    ("binpack", {}),
    ("zorder", {"zorder_columns": ["x", "y"]}),
])
def test_equality_deletes_committed_during_a_compaction_apply_in_spark(spark, tmp_warehouse, strategy, kwargs):
    with Catalog.open(tmp_warehouse) as cat:
        cat.create_namespace("db")
        t = cat.create_table("db.t", schema=SCHEMA, partition_by=["part"])
        for i in range(4):
            t.append(pa.concat_tables([rows(range(i * 50, i * 50 + 25), "even"),
                                       rows(range(i * 50 + 25, i * 50 + 50), "odd")]))
        start = t.current_snapshot()
        plan = plan_rewrite(cat.store, t.state, strategy=strategy, **kwargs)
        # meanwhile: equality deletes by key in both partitions, then an upsert (equality deletes + new rows)
        keys = pa.table({"id": pa.array([3, 30, 111, 180], pa.int64()), "part": ["even", "odd", "even", "odd"]})
        deleted = t.delete_by_key(keys, ["id", "part"])
        changes = pa.concat_tables([rows([4, 500], "even"), rows([199], "odd")])
        upserted = t.upsert(changes.set_column(2, "x", pa.array([-1, -1, -1], pa.int32())), ["id", "part"])
        snap = commit_rewrite(t, plan)
        assert snap.parent_snapshot_id == upserted.snapshot_id and deleted.parent_snapshot_id == start.snapshot_id
        kinds = {f.content for f in cat.store.live_files(t.state, snap.snapshot_id)}
        assert DataFileContent.EQUALITY_DELETES in kinds  # still live: they apply to the compaction's files
        expected = icelog_rows(t)
        gone = {3, 30, 111, 180}
        assert [r[0] for r in expected] == sorted((set(range(200)) - gone) | {500})
        assert [r[:3] for r in expected if r[2] == -1] == [(4, "even", -1), (199, "odd", -1), (500, "even", -1)]
        new_files = {e.file.file_path: e.data_sequence_number for e in cat.store.live_entries(t.state, snap.snapshot_id)
                     if e.snapshot_id == snap.snapshot_id}
        assert new_files and set(new_files.values()) == {start.sequence_number}
        history = [(s.snapshot_id, icelog_rows(t, s.snapshot_id)) for s in t.snapshots()]
        location = t.location
        assert cat.verify("db.t") == []
    assert spark_rows(spark, location) == expected
    for snapshot_id, rows_then in history:
        assert spark_rows(spark, location, snapshot_id) == rows_then, snapshot_id
    entries = {r["data_file"]["file_path"]: (r["sequence_number"], r["file_sequence_number"])
               for r in spark.read.format("iceberg").load(f"{location}#entries").collect()
               if r["status"] == 1 and r["data_file"]["content"] == 0 and r["snapshot_id"] == snap.snapshot_id}
    assert entries == {path: (start.sequence_number, snap.sequence_number) for path in new_files}
