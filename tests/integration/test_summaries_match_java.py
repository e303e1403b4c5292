"""Snapshot summaries icelog writes match what Iceberg Java writes for the same operations on the same data.

Spark (Iceberg Java 1.10) runs append, whole-partition delete, row-level copy-on-write delete and merge-on-read
delete on a Hadoop-catalog table; icelog runs the same on its own table. Keys must be the same (Spark adds its own
engine keys, and Java counts file sizes of its own files), and every count must be equal.
"""

from __future__ import annotations

import pyarrow as pa
import pytest

from engine import Catalog

IGNORED = {"spark.app.id", "engine-name", "engine-version", "iceberg-version", "app-id"}
SIZES = {"added-files-size", "removed-files-size", "total-files-size"}


def comparable(summary: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in summary.items() if k not in IGNORED and k not in SIZES}


@pytest.mark.parametrize("mode", ["copy-on-write", "merge-on-read"])
def test_summaries_match_java(spark, tmp_path, warehouse_catalog, mode):
    rows = [(i, "a" if i < 6 else "b") for i in range(10)]
    java = f"{warehouse_catalog}.db.java"
    spark.sql(f"CREATE TABLE {java} (id bigint, cat string) USING iceberg PARTITIONED BY (cat) "
              f"TBLPROPERTIES ('format-version'='2', 'write.delete.mode'='{mode}', "
              f"'write.update.mode'='{mode}', 'write.merge.mode'='{mode}')")
    spark.createDataFrame(rows, "id bigint, cat string").coalesce(1).sortWithinPartitions("cat") \
        .writeTo(java).append()
    spark.sql(f"DELETE FROM {java} WHERE cat = 'b'")             # a whole partition: metadata-only
    spark.sql(f"DELETE FROM {java} WHERE id = 2")                # row-level: rewrite or position delete
    java_summaries = [r["summary"] for r in spark.sql(
        f"SELECT summary FROM {java}.snapshots ORDER BY committed_at").collect()]
    java_ops = [r["operation"] for r in spark.sql(
        f"SELECT operation FROM {java}.snapshots ORDER BY committed_at").collect()]

    with Catalog.open(tmp_path / "icelog") as cat:
        cat.create_namespace("db")
        t = cat.create_table("db.ours", schema=pa.schema([("id", pa.int64()), ("cat", pa.string())]),
                             partition_by=["cat"], properties={"write.delete.mode": mode})
        t.append(pa.table({"id": pa.array([r[0] for r in rows], pa.int64()), "cat": [r[1] for r in rows]}))
        t.delete("cat = 'b'")
        t.delete("id = 2")
        ours = t.snapshots()

    assert [s.operation for s in ours] == java_ops
    for java_summary, snap in zip(java_summaries, ours):
        expected = comparable(dict(java_summary))
        got = comparable(dict(snap.summary))
        assert got == expected, (snap.operation, got, expected)
