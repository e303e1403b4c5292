"""Spark reads Parquet files that icelog registered with append_files, including files without field ids."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq

from engine import Catalog


def test_spark_reads_registered_files_without_field_ids(spark, tmp_warehouse, tmp_path, warehouse_catalog):
    plain = pa.table({"id": pa.array([1, 2, 3], pa.int64()), "name": ["x", None, "ü"]})
    paths = []
    for i in range(2):
        p = tmp_path / f"plain-{i}.parquet"
        pq.write_table(plain, p)  # pyarrow writes no Iceberg field ids
        paths.append(str(p))
    with Catalog.open(tmp_warehouse) as cat:
        cat.create_namespace("db")
        t = cat.create_table("db.files", schema=plain.schema)
        snap = t.append_files(paths)
        location = t.location
        assert "schema.name-mapping.default" in t.properties
    rows = spark.read.format("iceberg").load(location).orderBy("id", "name").collect()
    assert [(r["id"], r["name"]) for r in rows] == sorted([(1, "x"), (2, None), (3, "ü")] * 2,
                                                           key=lambda r: (r[0], r[1] or ""))
    n = spark.sql(f"SELECT count(*) AS n FROM {warehouse_catalog}.db.files WHERE id >= 2").collect()[0]["n"]
    assert n == 4
    assert snap.summary_value("added-data-files") == "2"


def test_a_file_appended_twice_is_refused_and_spark_pyiceberg_and_icelog_count_alike(spark, tmp_warehouse, tmp_path):
    import pytest
    from pyiceberg.table import StaticTable

    from engine.errors import ValidationError

    path = tmp_path / "once.parquet"
    pq.write_table(pa.table({"id": pa.array([1, 2, 3], pa.int64())}), path)
    with Catalog.open(tmp_warehouse) as cat:
        cat.create_namespace("db")
        t = cat.create_table("db.once", schema=pa.schema([("id", pa.int64())]))
        t.append_files([str(path)])
        with pytest.raises(ValidationError, match="already in table db.once"):
            t.append_files([str(path)])
        counts = {"icelog": t.scan().count(),
                  "pyiceberg": StaticTable.from_metadata(t.metadata_location).scan().to_arrow().num_rows,
                  "spark": spark.read.format("iceberg").load(t.location).count()}
    assert counts == {"icelog": 3, "pyiceberg": 3, "spark": 3}
