"""Spark with the Iceberg runtime reads a past state of a table that ``as_of(...).publish_view(dir)`` materialized:
the rows and schema of that log version, including a version no snapshot records and a snapshot
expired from the table's metadata since."""

from __future__ import annotations

import pyarrow as pa
import pytest

from engine import Catalog

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), ("category", pa.string())])


def rows(ids, category="a") -> pa.Table:
    return pa.table({"id": pa.array(ids, pa.int64()), "category": pa.array([category] * len(ids))}, schema=SCHEMA)


@pytest.fixture
def catalog(tmp_warehouse):
    cat = Catalog.open(tmp_warehouse)
    cat.create_namespace("db")
    yield cat
    cat.close()


def test_spark_reads_published_views_of_past_versions(spark, catalog, tmp_path):
    t = catalog.create_table("db.tt", schema=SCHEMA, partition_by=["category"])
    t.append(rows([1, 2]))                      # v2
    t.append(rows([3], "b"))                    # v3
    t.set_properties(owner="ann")               # v4: no snapshot
    with t.update_schema() as u:                # v5-6: a new column, no snapshot
        u.add_column("score", pa.float64())
    t.delete("category = 'a'")                  # v7: drops the first file
    t.append(pa.table({"id": pa.array([9], pa.int64()), "category": ["c"], "score": [0.5]}))
    head = catalog.log.head(t.uuid)
    first = t.snapshots()[0].snapshot_id
    t.expire_snapshots(older_than_ms=t.snapshots()[0].timestamp_ms + 1, retain_last=2)
    assert t.snapshot_by_id(first) is None  # expired from the metadata (its file is still live at v3/v4)

    expected = {3: ([1, 2, 3], ["id", "category"]),
                4: ([1, 2, 3], ["id", "category"]),
                6: ([1, 2, 3], ["id", "category", "score"]),
                head: ([3, 9], ["id", "category", "score"])}
    for version, (ids, cols) in expected.items():
        view = tmp_path / f"view-v{version}"
        h = t.as_of(version=version)
        h.publish_view(view)
        df = spark.read.format("iceberg").load(str(view))
        assert df.columns == cols, version
        assert sorted(r["id"] for r in df.select("id").collect()) == ids, version
    # Iceberg time travel inside a view: the first snapshot of the v4 view, expired from the live table
    old = spark.read.format("iceberg").option("snapshot-id", str(first)).load(str(tmp_path / "view-v4"))
    assert sorted(r["id"] for r in old.select("id").collect()) == [1, 2]
    # the live table is untouched by publishing views
    assert sorted(t.scan().to_arrow().column("id").to_pylist()) == [3, 9]
