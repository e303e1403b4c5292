"""Spark with the Iceberg runtime reads what snapshot management and expiry publish: branches and tags by name,
rollbacks, cherry-picks, and a table after expiry (by path, plus SQL through a Hadoop catalog)."""

from __future__ import annotations

import time

import pyarrow as pa
import pytest

from engine import Catalog
from engine.operations.expire import expire_snapshots

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), ("category", pa.string())])
FUTURE = 2**62


def rows(ids, category="a") -> pa.Table:
    return pa.table({"id": pa.array(ids, pa.int64()), "category": pa.array([category] * len(ids))}, schema=SCHEMA)


def spark_ids(spark, location, **options) -> list[int]:
    reader = spark.read.format("iceberg")
    for k, v in options.items():
        reader = reader.option(k, str(v))
    return sorted(r["id"] for r in reader.load(location).select("id").collect())


@pytest.fixture
def catalog(tmp_warehouse):
    cat = Catalog.open(tmp_warehouse)
    cat.create_namespace("db")
    yield cat
    cat.close()


@pytest.fixture
def table(catalog):
    t = catalog.create_table("db.refs", schema=SCHEMA, partition_by=["category"])
    t.snaps = []
    for ids in ([1, 2], [3], [4]):
        t.snaps.append(t.append(rows(ids)))
        time.sleep(0.005)
    return t


def test_spark_reads_a_branch_and_a_tag(spark, table, warehouse_catalog):
    s1, s2, _ = table.snaps
    table.manage_snapshots().create_branch(s1.snapshot_id, "audit").create_tag(s2.snapshot_id, "v2").commit()
    assert spark_ids(spark, table.location, branch="audit") == [1, 2]
    assert spark_ids(spark, table.location, tag="v2") == [1, 2, 3]
    assert spark_ids(spark, table.location) == [1, 2, 3, 4]
    got = spark.sql(f"SELECT id FROM {warehouse_catalog}.db.refs VERSION AS OF 'v2'").collect()
    assert sorted(r["id"] for r in got) == [1, 2, 3]
    got = spark.sql(f"SELECT id FROM {warehouse_catalog}.db.refs.branch_audit").collect()
    assert sorted(r["id"] for r in got) == [1, 2]
    refs = spark.sql(f"SELECT name, type, snapshot_id FROM {warehouse_catalog}.db.refs.refs ORDER BY name").collect()
    assert [(r["name"], r["type"], r["snapshot_id"]) for r in refs] == [
        ("audit", "BRANCH", s1.snapshot_id), ("main", "BRANCH", table.snaps[2].snapshot_id),
        ("v2", "TAG", s2.snapshot_id)]


def test_spark_reads_moved_refs(spark, table):
    s1, s2, s3 = table.snaps
    table.manage_snapshots().create_branch(s1.snapshot_id, "b").create_tag(s1.snapshot_id, "t").commit()
    table.manage_snapshots().fast_forward("b", "main").replace_tag("t", s2.snapshot_id).commit()
    table.manage_snapshots().rename_branch("b", "b2").commit()
    assert spark_ids(spark, table.location, branch="b2") == [1, 2, 3, 4]
    assert spark_ids(spark, table.location, tag="t") == [1, 2, 3]
    table.manage_snapshots().remove_branch("b2").remove_tag("t").commit()
    with pytest.raises(Exception, match="b2"):
        spark_ids(spark, table.location, branch="b2")


def test_spark_reads_rollbacks(spark, table):
    s1, s2, s3 = table.snaps
    table.manage_snapshots().rollback_to_snapshot(s1.snapshot_id).commit()
    assert spark_ids(spark, table.location) == [1, 2]
    assert spark_ids(spark, table.location, **{"snapshot-id": s3.snapshot_id}) == [1, 2, 3, 4]
    table.manage_snapshots().set_current_snapshot(s3.snapshot_id).commit()
    table.manage_snapshots().rollback_to_timestamp(s3.timestamp_ms).commit()
    assert table.current_snapshot().snapshot_id == s2.snapshot_id
    assert spark_ids(spark, table.location) == [1, 2, 3]
    # a write after a rollback starts from the rolled-back snapshot
    table.append(rows([9], "b"))
    assert spark_ids(spark, table.location) == [1, 2, 3, 9]


def test_spark_reads_a_cherry_pick(spark, table):
    s1, s2, s3 = table.snaps
    table.manage_snapshots().rollback_to_snapshot(s1.snapshot_id).commit()
    table.append(rows([5], "b"))
    table.manage_snapshots().cherrypick_snapshot(s3.snapshot_id).commit()
    assert spark_ids(spark, table.location) == [1, 2, 4, 5]
    snaps = spark.read.format("iceberg").load(f"{table.location}#snapshots").collect()
    picked = [r for r in snaps if r["snapshot_id"] == table.current_snapshot().snapshot_id]
    assert picked[0]["operation"] == "append"
    assert picked[0]["summary"]["source-snapshot-id"] == str(s3.snapshot_id)


def test_spark_reads_a_table_after_expiry(spark, table, warehouse_catalog):
    s1, s2, s3 = table.snaps
    table.manage_snapshots().create_tag(s1.snapshot_id, "first").commit()
    path = [c.file.file_path for c in table.catalog.store.file_changes_of(table.state, s2) if c.added][0]
    s4 = table.delete_files([path])
    s5 = table.append(rows([6], "b"))
    result = expire_snapshots(table, older_than_ms=FUTURE, retain_last=2)
    assert set(result.expired_snapshot_ids) == {s2.snapshot_id, s3.snapshot_id}
    assert result.deleted_data_files == (path,)
    assert spark_ids(spark, table.location) == [1, 2, 4, 6]
    assert spark_ids(spark, table.location, **{"snapshot-id": s4.snapshot_id}) == [1, 2, 4]
    assert spark_ids(spark, table.location, tag="first") == [1, 2]
    ids = [r["snapshot_id"] for r in spark.sql(
        f"SELECT snapshot_id FROM {warehouse_catalog}.db.refs.snapshots ORDER BY committed_at").collect()]
    assert ids == [s1.snapshot_id, s4.snapshot_id, s5.snapshot_id]
    with pytest.raises(Exception, match=str(s2.snapshot_id)):
        spark_ids(spark, table.location, **{"snapshot-id": s2.snapshot_id})
    got = spark.sql(f"SELECT count(*) AS n FROM {warehouse_catalog}.db.refs").collect()[0]["n"]
    assert got == 4
