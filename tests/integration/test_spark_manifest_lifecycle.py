"""Spark reads every snapshot of the five-snapshot lifecycle (appends and whole-file deletes) by path."""

from __future__ import annotations

import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from engine import Catalog


@pytest.mark.parametrize("merge", ["true", "false"])
@pytest.mark.parametrize("format_version", [1, 2])
def test_spark_reads_each_snapshot_after_deletes(spark, tmp_warehouse, merge, format_version):
    with Catalog.open(tmp_warehouse) as cat:
        cat.create_namespace("db")
        t = cat.create_table("db.t", schema=pa.schema([("name", pa.string())]), format_version=format_version,
                             properties={"commit.manifest-merge.enabled": merge,
                                         "commit.manifest.min-count-to-merge": "2"})
        os.makedirs(f"{t.location}/data", exist_ok=True)

        def files(*names):
            out = []
            for n in names:
                p = f"{t.location}/data/{n}.parquet"
                pq.write_table(pa.table({"name": [n]}), p)
                out.append(p)
            return out

        d1, d2 = files("data1", "data2")
        steps = [(t.append_files([d1, d2]), {"data1", "data2"})]
        steps.append((t.delete_files([d1]), {"data2"}))
        steps.append((t.append_files(files("data3")), {"data2", "data3"}))
        steps.append((t.delete_files([d2]), {"data3"}))
        steps.append((t.append_files(files("data4")), {"data3", "data4"}))
        location = t.location
    for snap, expected in steps:
        rows = spark.read.format("iceberg").option("snapshot-id", snap.snapshot_id).load(location).collect()
        assert {r["name"] for r in rows} == expected and len(rows) == len(expected)
    history = spark.read.format("iceberg").load(f"{location}#snapshots").orderBy("committed_at").collect()
    assert [r["operation"] for r in history] == ["append", "delete", "append", "delete", "append"]
