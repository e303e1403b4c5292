"""Spark 3.5.6 with the Iceberg 1.10.2 runtime and Hadoop's S3A connector on S3 warehouses (moto's server on the
loopback interface): a Hadoop catalog on ``s3a://`` writing and reading, Spark reading icelog's S3 tables through
a Hadoop catalog and through ``icelog serve`` at the current and earlier snapshots, Spark writing through the
REST catalog, and ``tools.spark_write.write`` jobs whose executors write Parquet straight to S3.

Layer: tests. One Spark session for the run (the ``spark`` fixture); each test registers catalogs under fresh
names and sets S3A per bucket, so the endpoint of the loopback server reaches only its own buckets.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from engine import Catalog
from engine.errors import ValidationError
from storage.files import FileIO, S3Settings
from tools.spark import configure_s3a, hadoop_catalog, rest_catalog
from tools.spark_jars import SparkSetupError, s3a_jars
from tools.spark_write import write

SCHEMA = pa.schema([("id", pa.int64()), ("cat", pa.string())])


def rows(ids: list[int], cat: str = "a") -> pa.Table:
    return pa.table({"id": pa.array(ids, pa.int64()), "cat": [cat] * len(ids)})


@pytest.fixture
def settings(s3_properties: dict[str, str]) -> S3Settings:
    return S3Settings.from_properties(s3_properties)


@pytest.fixture
def s3_spark(spark: Any, s3_bucket: str, settings: S3Settings) -> Any:
    """The shared session, with S3A set up for this test's bucket."""
    configure_s3a(spark, settings, s3_bucket)
    return spark


@pytest.fixture
def lake(tmp_path: Path, s3_bucket: str, s3_properties: dict[str, str]) -> Any:
    with Catalog.open(tmp_path / "catalog", warehouse=f"s3://{s3_bucket}/lake", properties=s3_properties) as cat:
        cat.create_namespace("db")
        yield cat


def ids(df: Any) -> list[int]:
    return sorted(r["id"] for r in df.collect())


def test_a_hadoop_catalog_on_s3a_writes_and_reads(s3_spark: Any, s3_bucket: str, settings: S3Settings) -> None:
    name = hadoop_catalog(s3_spark, f"s3a://{s3_bucket}/hadoop-wh")
    s3_spark.sql(f"CREATE TABLE {name}.db.t (id bigint, cat string) USING iceberg "
                 f"TBLPROPERTIES ('format-version'='2')")
    s3_spark.sql(f"INSERT INTO {name}.db.t VALUES (1, 'a'), (2, 'b')")
    assert ids(s3_spark.table(f"{name}.db.t")) == [1, 2]
    objects = [p for p, _ in FileIO(settings).list_files(f"s3://{s3_bucket}/hadoop-wh/db/t")]
    assert any(p.endswith("version-hint.text") for p in objects)
    assert any(p.endswith(".parquet") for p in objects)


def test_spark_reads_icelog_s3_tables_through_a_hadoop_catalog(s3_spark: Any, s3_bucket: str, lake: Catalog) -> None:
    t = lake.create_table("db.t", schema=SCHEMA, partition_by=["identity(cat)"],
                          properties={"format-version": "2", "write.delete.mode": "merge-on-read"})
    first = t.append(rows([1, 2, 3]))
    t.append(rows([4], cat="b"))
    t.delete("id = 2")
    name = hadoop_catalog(s3_spark, f"s3a://{s3_bucket}/lake")
    assert ids(s3_spark.table(f"{name}.db.t")) == [1, 3, 4]
    assert ids(s3_spark.sql(f"SELECT * FROM {name}.db.t VERSION AS OF {first.snapshot_id}")) == [1, 2, 3]


def test_spark_reads_and_writes_through_icelog_serve(s3_spark: Any, s3_bucket: str, lake: Catalog,
                                                     tmp_path: Path, s3_properties: dict[str, str]) -> None:
    t = lake.create_table("db.t", schema=SCHEMA, properties={"format-version": "2"})
    first = t.append(rows([1, 2]))
    name, server = rest_catalog(s3_spark, f"s3://{s3_bucket}/lake", catalog_dir=tmp_path / "catalog",
                                properties=s3_properties)
    try:
        assert ids(s3_spark.table(f"{name}.db.t")) == [1, 2]
        s3_spark.sql(f"INSERT INTO {name}.db.t VALUES (3, 'c')")
        s3_spark.sql(f"DELETE FROM {name}.db.t WHERE id = 1")
        assert ids(s3_spark.table(f"{name}.db.t")) == [2, 3]
        assert ids(s3_spark.sql(f"SELECT * FROM {name}.db.t VERSION AS OF {first.snapshot_id}")) == [1, 2]
        s3_spark.sql(f"CREATE TABLE {name}.db.made_by_spark USING iceberg AS SELECT * FROM {name}.db.t")
        assert ids(s3_spark.table(f"{name}.db.made_by_spark")) == [2, 3]
    finally:
        server.stop()
    table = lake.load_table("db.t")
    assert sorted(table.scan().to_arrow().column("id").to_pylist()) == [2, 3]
    assert table.state.location == f"s3://{s3_bucket}/lake/db/t"
    made = lake.load_table("db.made_by_spark")
    assert made.state.location.startswith(f"s3://{s3_bucket}/lake/db/made_by_spark")
    assert sorted(made.scan().to_arrow().column("id").to_pylist()) == [2, 3]


def test_a_spark_job_writes_to_s3_and_commits_once(s3_spark: Any, lake: Catalog, settings: S3Settings) -> None:
    t = lake.create_table("db.t", schema=SCHEMA, partition_by=["identity(cat)"])
    df = s3_spark.createDataFrame([(i, "abc"[i % 3]) for i in range(30)], "id bigint, cat string").repartition(3)
    before = len(t.state.snapshots)
    snap = write(df, t)
    t = lake.load_table("db.t")
    assert len(t.state.snapshots) == before + 1 and t.state.current_snapshot.snapshot_id == snap.snapshot_id
    assert sorted(t.scan().to_arrow().column("id").to_pylist()) == list(range(30))
    files = [e.file.file_path for e in lake.store.live_entries(t.state, snap.snapshot_id)]
    assert len(files) >= 3 and all(f.startswith(f"{t.state.location}/data/spark-") for f in files)
    assert all(FileIO(settings).is_file(f) for f in files)


def test_a_failed_spark_job_commits_nothing_and_its_files_are_orphans(s3_spark: Any, lake: Catalog,
                                                                      settings: S3Settings) -> None:
    from pyspark.sql import functions as F

    t = lake.create_table("db.t", schema=pa.schema([pa.field("id", pa.int64(), nullable=False),
                                                    ("cat", pa.string())]))
    t.append(rows([100]))
    head = lake.log.head(t.uuid)
    # task 0 writes its files; the other task meets a null in a required column and fails the job
    df = s3_spark.range(0, 20, numPartitions=2).select(
        F.when(F.col("id") == 19, F.lit(None)).otherwise(F.col("id")).cast("bigint").alias("id"),
        F.lit("x").alias("cat"))
    with pytest.raises((ValidationError, Exception)):
        write(df, t)
    assert lake.log.head(t.uuid) == head
    io = FileIO(settings)
    written = [p for p, _ in io.list_files(f"{t.state.location}/data") if "/spark-" in p]
    removed = t.remove_orphan_files(older_than_ms=2**62)
    assert sorted(removed) == sorted(written)
    assert not [p for p, _ in io.list_files(f"{t.state.location}/data") if "/spark-" in p]
    assert sorted(t.scan().to_arrow().column("id").to_pylist()) == [100]


def test_the_s3a_jars_are_checked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    jars = s3a_jars()
    for path in jars:
        assert Path(path).is_file()
    cache = tmp_path / "jars"
    cache.mkdir()
    for path in jars:
        (cache / Path(path).name).symlink_to(path)
    bad = cache / "hadoop-aws-3.3.1.jar"
    bad.unlink()
    data = bytearray(Path(jars[0]).read_bytes())
    data[100] ^= 0xFF
    bad.write_bytes(bytes(data))
    assert hashlib.sha256(bad.read_bytes()).hexdigest() != hashlib.sha256(Path(jars[0]).read_bytes()).hexdigest()
    monkeypatch.setenv("ICELOG_JAR_CACHE", str(cache))
    with pytest.raises(SparkSetupError, match="hadoop-aws-3.3.1.jar: its sha256"):
        s3a_jars()
