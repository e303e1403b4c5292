"""Spark reads a table whose published metadata keeps only the newest snapshots (icelog.metadata.max-snapshots)."""

from __future__ import annotations

import pyarrow as pa

from engine import Catalog


def test_spark_reads_trimmed_metadata(spark, tmp_warehouse):
    with Catalog.open(tmp_warehouse) as cat:
        cat.create_namespace("db")
        t = cat.create_table("db.t", schema=pa.schema([("id", pa.int64())]),
                             properties={"icelog.metadata.max-snapshots": "2"})
        snaps = [t.append(pa.table({"id": pa.array([i], pa.int64())})) for i in range(6)]
        t.manage_snapshots().create_tag(snaps[0].snapshot_id, "first").commit()
        location = t.location
    assert spark.read.format("iceberg").load(location).count() == 6
    assert spark.read.format("iceberg").option("tag", "first").load(location).count() == 1
    assert spark.read.format("iceberg").option("snapshot-id", snaps[4].snapshot_id).load(location).count() == 5
    listed = spark.read.format("iceberg").load(f"{location}#snapshots").count()
    assert listed == 3  # the two newest plus the tag's head
