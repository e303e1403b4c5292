"""A Spark job committing through a Hadoop catalog on an icelog table: verify reports it and the next icelog
commit refuses to overwrite it.

Layer: tests (icelog's public API and Spark with the Iceberg runtime on real files).
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from engine import Catalog
from engine.errors import ForeignWriterError
from projections import layout


def test_a_hadoop_catalog_insert_is_reported_and_refused(spark, tmp_warehouse, warehouse_catalog):
    cat = Catalog.open(tmp_warehouse)
    cat.create_namespace("db")
    t = cat.create_table("db.t", schema=pa.schema([("id", pa.int64()), ("name", pa.string())]))
    t.append(pa.table({"id": pa.array([1, 2], pa.int64()), "name": ["a", "b"]}))
    version, published = t.state.version, cat.projector.published_version(t.uuid)
    assert cat.verify("db.t") == []

    spark.sql(f"INSERT INTO {warehouse_catalog}.db.t VALUES (3, 'behind the log')")
    foreign = layout.metadata_file(t.location, published + 1)
    assert Path(foreign).exists()
    assert Path(layout.version_hint_file(t.location)).read_text().strip() == str(published + 1)
    foreign_bytes = Path(foreign).read_bytes()

    problems = cat.verify("db.t")
    assert any(p.startswith(foreign) and "foreign writer" in p for p in problems)
    with pytest.raises(ForeignWriterError, match=f"{Path(foreign).name} was not published by icelog") as caught:
        t.append(pa.table({"id": pa.array([4], pa.int64()), "name": ["c"]}))
    assert caught.value.path == foreign
    with pytest.raises(ForeignWriterError):
        t.set_properties(owner="etl")
    assert t.state.version == version
    assert Path(foreign).read_bytes() == foreign_bytes
    assert sorted(t.scan().to_arrow().column("id").to_pylist()) == [1, 2]
    cat.close()


def test_a_rest_commit_after_a_hadoop_catalog_insert_is_refused(spark, tmp_warehouse, warehouse_catalog):
    from tools.spark import rest_catalog

    cat = Catalog.open(tmp_warehouse)
    cat.create_namespace("db")
    t = cat.create_table("db.t", schema=pa.schema([("id", pa.int64())]),
                         properties={"commit.retry.num-retries": "0"})
    t.append(pa.table({"id": pa.array([1], pa.int64())}))
    published = cat.projector.published_version(t.uuid)
    spark.sql(f"INSERT INTO {warehouse_catalog}.db.t VALUES (2)")
    foreign = layout.metadata_file(t.location, published + 1)
    version = t.state.version
    name, server = rest_catalog(spark, tmp_warehouse)
    try:
        with pytest.raises(Exception, match=f"{Path(foreign).name} was not published by icelog"):
            spark.sql(f"INSERT INTO {name}.db.t VALUES (3)")
    finally:
        server.stop()
    assert t.state.version == version
    assert sorted(t.scan().to_arrow().column("id").to_pylist()) == [1]
    cat.close()
