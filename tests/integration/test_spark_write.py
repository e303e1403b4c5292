"""tools.spark_write.write: a DataFrame into an icelog table from Spark's executors, one snapshot per write.

Layer: tests (icelog's public API, tools.spark, Spark with the Iceberg runtime and PyIceberg on real files).

Partition values are checked against Spark's own Iceberg writer (``df.writeTo(...).append()`` into a Hadoop
catalog table with the same spec) through both tables' ``partitions`` metadata tables; rows are read back by
Spark (by path), by icelog's scan and by PyIceberg, after an append, an overwrite with a filter and a dynamic
overwrite. A job that fails half-way commits nothing, and orphan removal finds the files it wrote.
"""

from __future__ import annotations

import datetime as dt
import decimal
import os
from pathlib import Path

import pyarrow as pa
import pytest

from engine import Catalog
from engine.errors import ValidationError
from tools.spark import hadoop_catalog
from tools.spark_write import write

UTC = dt.timezone.utc
SPARK_SCHEMA = "id long, ts timestamp, d date, name string, category string, amount decimal(10,2)"
ARROW_SCHEMA = pa.schema([("id", pa.int64()), ("ts", pa.timestamp("us", tz="UTC")), ("d", pa.date32()),
                          ("name", pa.string()), ("category", pa.string()), ("amount", pa.decimal128(10, 2))])

# (icelog partition terms, the same spec in Spark SQL)
SPECS = {
    "bucket_truncate_day_identity": (["bucket(16, id)", "truncate(4, name)", "day(ts)", "category"],
                                     "bucket(16, id), truncate(4, name), days(ts), category"),
    "hour_month_bucket_truncate": (["hour(ts)", "month(d)", "bucket(7, name)", "truncate(10, id)",
                                    "truncate(50, amount)"],
                                   "hours(ts), months(d), bucket(7, name), truncate(10, id), truncate(50, amount)"),
    "year_identity_date": (["year(ts)", "d"], "years(ts), d"),
    "bucket_of_time_date_decimal": (["bucket(5, ts)", "bucket(3, d)", "bucket(6, amount)", "day(d)"],
                                    "bucket(5, ts), bucket(3, d), bucket(6, amount), days(d)"),
}


def sample_rows(n: int, start: int = 0) -> list[tuple]:
    base = dt.datetime(2024, 12, 30, 21, tzinfo=UTC)
    out = []
    for i in range(start, start + n):
        out.append((
            i * 7919 - 1000,                                   # negative ids too: bucket hashes the long
            base + dt.timedelta(hours=5 * i, minutes=i % 60),
            dt.date(1969, 12, 1) + dt.timedelta(days=13 * i),  # before and after the epoch
            None if i % 11 == 0 else f"náme-{i % 9}-{'x' * (i % 5)}",
            "abc"[i % 3],
            decimal.Decimal(i * 37 - 500) / 4,
        ))
    return out


def make_table(warehouse: Path, name: str, partition_by: list[str]):
    cat = Catalog.open(warehouse)
    if ("db",) not in cat.list_namespaces():
        cat.create_namespace("db")
    return cat, cat.create_table(f"db.{name}", schema=ARROW_SCHEMA, partition_by=partition_by)


def as_tuples(row_dicts) -> list[tuple]:
    def norm(v):
        if isinstance(v, dt.datetime):
            return v.replace(tzinfo=UTC) if v.tzinfo is None else v.astimezone(UTC)
        return v

    return sorted((tuple(norm(r[c]) for c in ARROW_SCHEMA.names) for r in row_dicts), key=repr)


def spark_rows(spark, location: str) -> list[tuple]:
    return as_tuples(r.asDict() for r in spark.read.format("iceberg").load(location).collect())


def pyiceberg_rows(metadata_location: str) -> list[tuple]:
    from pyiceberg.table import StaticTable

    return as_tuples(StaticTable.from_metadata(metadata_location).scan().to_arrow().to_pylist())


@pytest.mark.parametrize("case", sorted(SPECS))
def test_partition_values_equal_sparks_own_iceberg_writer(spark, tmp_warehouse, tmp_path, warehouse_catalog, case):
    partition_by, spark_spec = SPECS[case]
    df = spark.createDataFrame(sample_rows(300), SPARK_SCHEMA)
    cat, t = make_table(tmp_warehouse, "events", partition_by)
    snap = write(df, t)
    assert snap.summary_value("added-records") == "300"

    reference = hadoop_catalog(spark, tmp_path / "reference")
    spark.sql(f"CREATE TABLE {reference}.db.events ({SPARK_SCHEMA}) USING iceberg PARTITIONED BY ({spark_spec})")
    df.writeTo(f"{reference}.db.events").append()

    def partitions(table: str) -> list[tuple]:
        got = spark.sql(f"SELECT partition, record_count FROM {table}.partitions").collect()
        return sorted(((tuple(r["partition"]), r["record_count"]) for r in got), key=repr)

    ours, theirs = partitions(f"{warehouse_catalog}.db.events"), partitions(f"{reference}.db.events")
    assert len(ours) > 10
    assert ours == theirs
    # and each file's own partition tuple (the files table) equals Spark's, file by file per partition
    ours_files = spark.sql(f"SELECT partition, record_count FROM {warehouse_catalog}.db.events.files").collect()
    assert sum(r["record_count"] for r in ours_files) == 300
    assert {tuple(r["partition"]) for r in ours_files} == {p for p, _ in theirs}
    cat.close()


@pytest.mark.parametrize("arrow_type, spark_type, partition, rows, where", [
    (pa.string(), "int", "bucket(4, c)", [(1, 123), (2, 456)], "c = '123'"),
    (pa.timestamp("us", tz="UTC"), "date", "c", [(1, dt.date(2024, 3, 5)), (2, dt.date(2024, 3, 6))],
     "c = '2024-03-05T00:00:00+00:00'"),
    (pa.decimal128(10, 2), "decimal(9,1)", "truncate(100, c)",
     [(1, decimal.Decimal("1.5")), (2, decimal.Decimal("7.0"))], "c = 1.5"),
], ids=["int-into-string", "date-into-timestamptz", "decimal-scale"])
def test_partition_values_come_from_the_values_written(spark, tmp_warehouse, arrow_type, spark_type, partition,
                                                       rows, where):
    """A DataFrame column of another type than the table's is cast to it before its partition values are
    computed, as Spark casts what it writes: a filter finds the rows, in icelog and in Spark."""
    with Catalog.open(tmp_warehouse) as cat:
        cat.create_namespace("db")
        t = cat.create_table("db.cast", schema=pa.schema([("id", pa.int64()), ("c", arrow_type)]),
                             partition_by=[partition])
        write(spark.createDataFrame(rows, f"id long, c {spark_type}"), t)
        assert [r["id"] for r in t.scan(where=where).to_arrow().to_pylist()] == [1]
        assert [r["id"] for r in spark.read.format("iceberg").load(t.location).where(where).collect()] == [1]


def test_a_partition_source_whose_cast_could_lose_values_is_refused_before_the_job(spark, tmp_warehouse):
    """Spark's own cast of 'abc' to int is null: such a column is refused, naming it, and nothing is written."""
    with Catalog.open(tmp_warehouse) as cat:
        cat.create_namespace("db")
        t = cat.create_table("db.lossy", schema=pa.schema([("id", pa.int64()), ("c", pa.int32())]),
                             partition_by=["c"])
        with pytest.raises(ValidationError, match="partition source 'c' is a string, the table's column a int"):
            write(spark.createDataFrame([(1, "abc")], "id long, c string"), t)
        assert t.state.current_snapshot is None and not list(Path(t.location, "data").rglob("*.parquet"))


def test_append_overwrite_and_dynamic_overwrite_read_back_everywhere(spark, tmp_warehouse):
    cat, t = make_table(tmp_warehouse, "events", ["category", "bucket(4, id)"])
    first = sample_rows(120)
    write(spark.createDataFrame(first, SPARK_SCHEMA), t)
    expected = as_tuples(dict(zip(ARROW_SCHEMA.names, r)) for r in first)

    def check() -> None:
        assert spark_rows(spark, t.location) == expected
        assert as_tuples(t.scan().to_arrow().to_pylist()) == expected
        assert pyiceberg_rows(t.metadata_location) == expected
        assert cat.verify("db.events") == []

    check()
    assert len(t.snapshots()) == 1

    # overwrite the rows of category 'a' with new rows of category 'a'
    new_a = [r for r in sample_rows(30, start=1000) if r[4] == "a"]
    snap = write(spark.createDataFrame(new_a, SPARK_SCHEMA), t, mode="overwrite", where="category = 'a'")
    assert snap.operation == "overwrite"
    first = [r for r in first if r[4] != "a"] + new_a
    expected = as_tuples(dict(zip(ARROW_SCHEMA.names, r)) for r in first)
    check()

    # dynamic overwrite: only the (category, bucket) partitions present in the new rows are replaced
    new_b = [r for r in sample_rows(6, start=2000) if r[4] == "b"]
    write(spark.createDataFrame(new_b, SPARK_SCHEMA), t, mode="dynamic_overwrite")
    replaced = {partition_of(t, r) for r in new_b}
    kept = [r for r in first if partition_of(t, r) not in replaced]
    assert len(kept) < len(first)
    expected = as_tuples(dict(zip(ARROW_SCHEMA.names, r)) for r in kept + new_b)
    check()
    assert len(t.snapshots()) == 3

    # a whole-table overwrite
    write(spark.createDataFrame(sample_rows(5, start=5000), SPARK_SCHEMA), t, mode="overwrite")
    expected = as_tuples(dict(zip(ARROW_SCHEMA.names, r)) for r in sample_rows(5, start=5000))
    check()
    cat.close()


def partition_of(t, row) -> tuple:
    """A row's partition tuple by icelog's own transforms."""
    from engine.write.data_writer import conform, partition_keys

    one = conform(pa.Table.from_pylist([dict(zip(ARROW_SCHEMA.names, row))], schema=ARROW_SCHEMA), t.schema())
    return tuple(k[0].as_py() for k in partition_keys(one, t.schema(), t.spec()))


def test_a_failed_job_commits_nothing_and_orphan_removal_finds_its_files(spark, tmp_warehouse):
    cat = Catalog.open(tmp_warehouse)
    cat.create_namespace("db")
    t = cat.create_table("db.events", schema=pa.schema([pa.field("id", pa.int64(), nullable=False),
                                                         ("name", pa.string())]),
                         properties={"write.target-file-size-bytes": "1"})  # every batch becomes a file
    write(spark.createDataFrame([(i, "kept") for i in range(5)], "id long, name string"), t)
    version = t.state.version
    # one task; its batches of 10 rows are written one by one until a null reaches the required column
    rows = [(i if i != 95 else None, "lost") for i in range(100)]
    df = spark.createDataFrame(rows, "id long, name string").coalesce(1)
    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "10")
    try:
        with pytest.raises(ValidationError, match="a task failed: Cannot append: required column 'id' has 1 null"):
            write(df, t)
    finally:
        spark.conf.unset("spark.sql.execution.arrow.maxRecordsPerBatch")
    assert t.state.version == version
    assert sorted(t.scan().to_arrow().column("name").to_pylist()) == ["kept"] * 5
    committed = {f.file_path for f in t.catalog.store.live_files(t.state, t.current_snapshot().snapshot_id)}
    leftovers = sorted(str(p) for p in Path(t.location, "data").rglob("*.parquet") if str(p) not in committed)
    assert len(leftovers) >= 9
    assert t.remove_orphan_files(older_than_ms=2**62) == leftovers
    assert all(os.path.exists(p) for p in committed)
    assert sorted(t.scan().to_arrow().column("name").to_pylist()) == ["kept"] * 5
    cat.close()


def test_the_files_of_a_job_whose_commit_is_refused_are_removed(spark, tmp_warehouse):
    cat, t = make_table(tmp_warehouse, "events", ["category"])
    write(spark.createDataFrame(sample_rows(6), SPARK_SCHEMA), t)
    data = Path(t.location, "data")
    before, version = sorted(data.rglob("*.parquet")), t.state.version
    # the job writes rows the filter does not cover: the commit refuses them after the job wrote its files
    with pytest.raises(ValidationError, match="may not match"):
        write(spark.createDataFrame(sample_rows(4, start=10), SPARK_SCHEMA), t, mode="overwrite",
              where="category = 'a'")
    assert sorted(data.rglob("*.parquet")) == before and t.state.version == version
    assert t.scan().count() == 6
    cat.close()


def _store_refuses(batches):
    from engine.errors import StorageError

    raise StorageError("Cannot write file: the store refused it", path="s3://bucket/x.parquet")
    yield  # a generator, as mapInArrow wants


def test_a_task_error_comes_back_as_its_icelog_class(spark):
    """A task's StorageError is a StorageError on the driver (not a PythonException, nor a ValidationError),
    naming what the task said; the job's folder is its path."""
    from engine.errors import StorageError
    from tools.spark_write import _collect, ship_sources

    ship_sources(spark)
    with pytest.raises(StorageError, match="a task failed: Cannot write file: the store refused it") as e:
        _collect(spark.range(1).mapInArrow(_store_refuses, "data_file string"), "/wh/db/t/data/spark-job")
    assert e.value.path == "/wh/db/t/data/spark-job"


def test_bad_modes_and_columns_are_refused_before_any_job(spark, tmp_warehouse):
    cat, t = make_table(tmp_warehouse, "events", ["category"])
    df = spark.createDataFrame(sample_rows(3), SPARK_SCHEMA)
    with pytest.raises(ValidationError, match="mode 'upsert'"):
        write(df, t, mode="upsert")
    with pytest.raises(ValidationError, match="where= is only for mode='overwrite'"):
        write(df, t, where="id > 1")
    with pytest.raises(ValidationError, match="'extra'"):
        write(df.withColumn("extra", df.id), t)
    with pytest.raises(ValidationError, match="nope"):
        write(df, t, mode="overwrite", where="nope = 1")
    assert t.snapshots() == [] and not Path(t.location, "data").exists()
    cat.close()


def test_nested_columns_carry_field_ids_at_every_level_and_sort_order_holds(spark, tmp_warehouse):
    import pyarrow.parquet as pq

    schema = pa.schema([("id", pa.int64()), ("point", pa.struct([("x", pa.float64()), ("y", pa.float64())])),
                        ("tags", pa.list_(pa.string())), ("attrs", pa.map_(pa.string(), pa.int32())),
                        ("category", pa.string())])
    cat = Catalog.open(tmp_warehouse)
    cat.create_namespace("db")
    t = cat.create_table("db.nested", schema=schema, partition_by=["category"])
    t.replace_sort_order().desc("id").commit()
    rows = [(i, (i * 0.5, float("nan") if i == 3 else -i * 1.0), [f"t{i}", None], {"k": i}, "ab"[i % 2])
            for i in range(40)]
    df = spark.createDataFrame(rows, "id long, point struct<x: double, y: double>, tags array<string>, "
                                     "attrs map<string, int>, category string")
    write(df, t)

    def ids(field: pa.Field) -> list[int | None]:
        own = [int(field.metadata[b"PARQUET:field_id"]) if field.metadata else None]
        t_ = field.type
        children = [t_.field(i) for i in range(t_.num_fields)] if pa.types.is_struct(t_) else \
            [t_.value_field] if pa.types.is_list(t_) else [t_.key_field, t_.item_field] if pa.types.is_map(t_) else []
        return own + [i for c in children for i in ids(c)]

    files = t.catalog.store.live_files(t.state, t.current_snapshot().snapshot_id)
    assert len(files) == 2
    expected_ids = sorted(t.schema().index_by_id())
    for f in files:
        file_schema = pq.read_schema(f.file_path)
        assert sorted(i for field in file_schema for i in ids(field)) == expected_ids
        column = pq.read_table(f.file_path).column("id").to_pylist()
        assert column == sorted(column, reverse=True)
        assert f.sort_order_id == t.state.default_sort_order_id
    nan_counts = {fid: n for f in files for fid, n in (f.nan_value_counts or ())}
    y_id = t.schema().find_field("point.y").field_id
    assert sum(n for fid, n in nan_counts.items() if fid == y_id) == 1
    got = spark.read.format("iceberg").load(t.location).orderBy("id").collect()
    assert [(r["id"], r["tags"], r["attrs"], r["category"]) for r in got] == \
        [(i, [f"t{i}", None], {"k": i}, "ab"[i % 2]) for i in range(40)]
    cat.close()


def test_workers_of_any_session_get_icelog_shipped(spark):
    import zipfile

    from tools.spark_write import ship_sources

    archive = ship_sources(spark)
    assert ship_sources(spark) == archive  # once per context
    names = set(zipfile.ZipFile(archive).namelist())
    assert {"engine/catalog.py", "engine/write/data_writer.py", "projections/layout.py", "storage/log.py",
            "tools/spark.py"} <= names

    def imported(_):
        import engine.write.data_writer

        return engine.write.data_writer.__name__

    assert spark.sparkContext.parallelize([1, 2], 2).map(imported).collect() == ["engine.write.data_writer"] * 2


def test_threads_writing_through_one_session_at_once_ship_icelog_once(spark):
    """Each of them zips the sources and adds the zip unless it was: without a lock between the two, each added its
    own, which Spark's file server on a cluster refuses (one file per name)."""
    import threading

    from tools import spark_write

    context = spark.sparkContext

    def added_files() -> set[str]:
        files = context._jsc.sc().listFiles()  # a Scala Seq of the files added to the context
        return {files.apply(i) for i in range(files.size())}

    spark_write._SHIPPED.pop(id(context._jsc), None)          # as on a session that never shipped them
    added_before = added_files()
    start = threading.Barrier(4)
    archives: list[str] = []

    def ship() -> None:
        start.wait(30)
        archives.append(spark_write.ship_sources(spark))

    threads = [threading.Thread(target=ship) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    added = [f for f in added_files() - added_before if f.endswith("icelog_sources.zip")]
    assert len(archives) == 4 and len(set(archives)) == 1 and len(added) == 1
