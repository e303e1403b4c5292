"""Spark reads tables changed by transactions (one table and several) and by a manifest rewrite."""

from __future__ import annotations

import pyarrow as pa
from pyiceberg.table import StaticTable

from engine import Catalog


def rows(*ids: int) -> pa.Table:
    return pa.table({"id": pa.array(ids, pa.int64())})


def spark_ids(spark, location, snapshot_id=None):
    reader = spark.read.format("iceberg")
    if snapshot_id is not None:
        reader = reader.option("snapshot-id", snapshot_id)
    return sorted(r["id"] for r in reader.load(location).collect())


def test_spark_reads_transactions_and_manifest_rewrites(spark, tmp_warehouse):
    with Catalog.open(tmp_warehouse) as cat:
        cat.create_namespace("db")
        a = cat.create_table("db.a", schema=pa.schema([("id", pa.int64())]),
                             properties={"commit.manifest-merge.enabled": "false"})
        b = cat.create_table("db.b", schema=pa.schema([("id", pa.int64())]))
        first = a.append(rows(1, 2, 3))
        with a.transaction() as tx:
            tx.append(rows(4))
            tx.delete("id = 1")
            tx.update_schema().add_column("note", "string").commit()
        with cat.transaction() as tx:
            tx.load_table("db.a").append(rows(5))
            tx.load_table("db.b").append(rows(10, 11))
        before_rewrite = a.current_snapshot()
        rewrite = a.rewrite_manifests()
        locations = (a.location, b.location, a.metadata_location)
    loc_a, loc_b, meta_a = locations
    assert spark_ids(spark, loc_a) == [2, 3, 4, 5]
    assert spark_ids(spark, loc_a, first.snapshot_id) == [1, 2, 3]
    assert spark_ids(spark, loc_a, before_rewrite.snapshot_id) == [2, 3, 4, 5]
    assert spark_ids(spark, loc_b) == [10, 11]
    columns = spark.read.format("iceberg").load(loc_a).columns
    assert columns == ["id", "note"]
    manifests = spark.read.format("iceberg").load(f"{loc_a}#manifests").count()
    assert rewrite.operation == "replace" and manifests == 1
    assert sorted(StaticTable.from_metadata(meta_a).scan().to_arrow().column("id").to_pylist()) == [2, 3, 4, 5]


def test_spark_reads_a_transaction_whose_operations_change_files_it_staged(spark, tmp_warehouse):
    with Catalog.open(tmp_warehouse) as cat:
        cat.create_namespace("db")
        t = cat.create_table("db.t", schema=pa.schema([("id", pa.int64())]))
        m = cat.create_table("db.m", schema=pa.schema([("id", pa.int64())]),
                             properties={"write.delete.mode": "merge-on-read"})
        t.append(rows(1, 2))
        m.append(rows(1, 2))
        with t.transaction() as tx:
            tx.append(rows(3, 4, 5))
            tx.delete("id = 4")              # rewrites the file appended just before, in the same commit
            tx.upsert(rows(5), ["id"])       # an equality delete for the staged 5 and the new 5
            tx.rewrite_data_files()          # compacts the base and the staged files
        with m.transaction() as tx:
            tx.append(rows(3, 4, 5))
            tx.delete("id = 4")              # a position delete file for the staged file
        snaps = [s.snapshot_id for s in t.snapshots()]
        locations = (t.location, m.location)
        assert cat.verify("db.t") == [] and cat.verify("db.m") == []
    loc_t, loc_m = locations
    assert spark_ids(spark, loc_t) == [1, 2, 3, 5]
    assert [spark_ids(spark, loc_t, s) for s in snaps] == [[1, 2], [1, 2, 3, 4, 5], [1, 2, 3, 5], [1, 2, 3, 5],
                                                           [1, 2, 3, 5]]
    assert spark_ids(spark, loc_m) == [1, 2, 3, 5]
