"""Spark and PyIceberg read row-level deletes and overwrites icelog commits: copy-on-write and merge-on-read."""

from __future__ import annotations

import pyarrow as pa
import pytest
from pyiceberg.table import StaticTable

from engine import Catalog
from engine.model.data_file import DataFileContent

SCHEMA = pa.schema([("id", pa.int64()), ("part", pa.string()), ("v", pa.float64())])


def rows(ids, part):
    ids = list(ids)
    return pa.table({"id": pa.array(ids, pa.int64()), "part": [part] * len(ids),
                     "v": pa.array([i / 2 for i in ids], pa.float64())})


def spark_ids(spark, location, snapshot_id=None):
    reader = spark.read.format("iceberg")
    if snapshot_id is not None:
        reader = reader.option("snapshot-id", snapshot_id)
    return sorted(r["id"] for r in reader.load(location).select("id").collect())


@pytest.mark.parametrize("mode", ["copy-on-write", "merge-on-read"])
def test_delete_modes_read_the_same_everywhere(spark, tmp_warehouse, mode):
    with Catalog.open(tmp_warehouse) as cat:
        cat.create_namespace("db")
        t = cat.create_table("db.t", schema=SCHEMA, partition_by=["part"], properties={"write.delete.mode": mode})
        s1 = t.append(pa.concat_tables([rows(range(10), "a"), rows(range(10, 20), "b")]))
        s2 = t.delete("id in (0, 3, 6, 9, 12)")
        s3 = t.delete("part = 'b' and id >= 18")
        expected = [i for i in range(20) if not (i % 3 == 0 and i < 15) and not i >= 18]
        assert sorted(t.scan().to_arrow().column("id").to_pylist()) == expected
        kinds = {f.content for f in t.catalog.store.live_files(t.state, s2.snapshot_id)}
        if mode == "merge-on-read":
            assert DataFileContent.POSITION_DELETES in kinds
            assert s2.summary_value("added-position-deletes") == "5"
        else:
            assert kinds == {DataFileContent.DATA}
        location, meta = t.location, t.metadata_location
    assert spark_ids(spark, location) == expected
    assert spark_ids(spark, location, s1.snapshot_id) == list(range(20))
    assert spark_ids(spark, location, s2.snapshot_id) == [i for i in range(20) if not (i % 3 == 0 and i < 15)]
    assert spark_ids(spark, location, s3.snapshot_id) == expected
    assert sorted(StaticTable.from_metadata(meta).scan().to_arrow().column("id").to_pylist()) == expected


def test_overwrites_read_the_same_everywhere(spark, tmp_warehouse):
    with Catalog.open(tmp_warehouse) as cat:
        cat.create_namespace("db")
        t = cat.create_table("db.t", schema=SCHEMA, partition_by=["part"])
        t.append(pa.concat_tables([rows(range(5), "a"), rows(range(5, 10), "b")]))
        s2 = t.overwrite(rows([100, 101], "b"), where="part = 'b'")
        s3 = t.dynamic_overwrite(rows([200], "a"))
        location, meta = t.location, t.metadata_location
    assert spark_ids(spark, location, s2.snapshot_id) == list(range(5)) + [100, 101]
    assert spark_ids(spark, location) == [100, 101, 200]
    assert s3.operation == "overwrite"
    assert sorted(StaticTable.from_metadata(meta).scan().to_arrow().column("id").to_pylist()) == [100, 101, 200]
