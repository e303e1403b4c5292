"""Smoke tests of the Spark setup: Java 17, pyspark 3.5.6 and the Iceberg 1.10.2 runtime jar work together.

Layer: tests (tools.spark and the shared `spark` fixture).
"""

from __future__ import annotations

import datetime
import hashlib
import json
from pathlib import Path

import pytest

from tools import spark as tools_spark
from tools import spark_jars
from tools.spark import hadoop_catalog, local_session
from tools.spark_jars import JAR_NAME, JAR_SHA256, SparkSetupError, iceberg_runtime_jar


def test_runtime_jar_is_the_pinned_one(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(spark_jars.JAR_ENV, raising=False)
    jar = Path(iceberg_runtime_jar())
    assert jar.name == JAR_NAME == "iceberg-spark-runtime-3.5_2.12-1.10.2.jar"
    assert jar.parent.parent.name == "snowpark_connect_deps_iceberg"
    assert hashlib.sha256(jar.read_bytes()).hexdigest() == JAR_SHA256


def test_runtime_jar_override_must_exist(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    missing = tmp_path / "nope.jar"
    monkeypatch.setenv(spark_jars.JAR_ENV, str(missing))
    with pytest.raises(SparkSetupError, match="Cannot find the Iceberg Spark runtime jar: ICEBERG_SPARK_JAR="):
        iceberg_runtime_jar()


def test_versions(spark) -> None:
    import pyspark

    assert pyspark.__version__ == "3.5.6"
    assert spark.version == "3.5.6"
    jvm = spark.sparkContext._jvm
    assert jvm.java.lang.System.getProperty("java.specification.version") == "17"
    assert jvm.org.apache.iceberg.IcebergBuild.version() == "1.10.2"
    assert spark.conf.get("spark.sql.extensions") == tools_spark.ICEBERG_EXTENSIONS
    assert spark.conf.get("spark.sql.session.timeZone") == "UTC"


def test_second_session_is_refused(spark) -> None:
    with pytest.raises(SparkSetupError, match="Cannot start Spark: a SparkContext is already running"):
        local_session(None)


def test_create_insert_read_in_a_hadoop_catalog(spark, tmp_warehouse: Path, warehouse_catalog: str) -> None:
    table = f"{warehouse_catalog}.db.events"
    spark.sql(f"CREATE NAMESPACE {warehouse_catalog}.db")
    spark.sql(
        f"CREATE TABLE {table} (id bigint NOT NULL, ts timestamp, name string) USING iceberg "
        "PARTITIONED BY (days(ts)) TBLPROPERTIES ('format-version'='2')"
    )
    spark.sql(
        f"INSERT INTO {table} VALUES (1, TIMESTAMP '2024-01-02 10:00:00', 'a'), "
        "(2, TIMESTAMP '2024-01-03 00:00:00', 'b'), (3, NULL, NULL)"
    )

    rows = [tuple(row) for row in spark.sql(f"SELECT id, ts, name FROM {table} ORDER BY id").collect()]
    assert rows == [
        (1, datetime.datetime(2024, 1, 2, 10, 0), "a"),
        (2, datetime.datetime(2024, 1, 3, 0, 0), "b"),
        (3, None, None),
    ]
    # Hadoop catalog layout: <warehouse>/<namespace>/<table>/metadata/vN.metadata.json + version-hint.text.
    metadata_dir = tmp_warehouse / "db" / "events" / "metadata"
    assert (metadata_dir / "version-hint.text").read_text().strip() == "2"
    metadata = json.loads((metadata_dir / "v2.metadata.json").read_text())
    assert metadata["format-version"] == 2
    assert metadata["partition-specs"][0]["fields"][0]["transform"] == "day"
    partitions = {row[0] for row in spark.sql(f"SELECT partition.ts_day FROM {table}.files").collect()}
    assert partitions == {datetime.date(2024, 1, 2), datetime.date(2024, 1, 3), None}
    # Spark also reads a table by its location, without a catalog.
    by_path = spark.read.format("iceberg").load(str(tmp_warehouse / "db" / "events"))
    assert sorted(row.id for row in by_path.collect()) == [1, 2, 3]


def test_runtime_catalogs_are_isolated_and_uncached(spark, tmp_path: Path) -> None:
    first, second = tmp_path / "wh1", tmp_path / "wh2"
    second.mkdir()
    writer = hadoop_catalog(spark, first)
    reader = hadoop_catalog(spark, first)
    other = hadoop_catalog(spark, second)
    assert len({writer, reader, other}) == 3
    spark.sql(f"CREATE TABLE {writer}.db.t (x int) USING iceberg")
    spark.sql(f"INSERT INTO {writer}.db.t VALUES (1)")
    assert spark.sql(f"SELECT count(*) FROM {reader}.db.t").collect()[0][0] == 1

    # A commit made behind the reader's back (here: through another catalog) is seen at once.
    spark.sql(f"INSERT INTO {writer}.db.t VALUES (2)")
    assert spark.sql(f"SELECT sum(x) FROM {reader}.db.t").collect()[0][0] == 3

    assert spark.sql(f"SHOW NAMESPACES IN {other}").collect() == []
    with pytest.raises(SparkSetupError, match=f"Cannot register Spark catalog: {writer}"):
        hadoop_catalog(spark, second, name=writer)
