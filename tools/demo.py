"""The main job behind the README's first command: a PySpark pipeline whose every commit lands in icelog's log.

Layer: tools. On a fresh local warehouse (``./warehouse`` by default, recreated on each run) it:

1. creates ``db.events`` through the Python API (partitioned by day and by a user bucket, merge-on-read);
2. starts Spark with the Iceberg runtime and the ``icelog`` REST catalog (``tools.spark.session``), and
   ingests one day of synthetic events in four six-hour batches through ``tools.spark_write.write``;
3. runs Spark SQL DML through the REST catalog: a ``MERGE INTO`` of late corrections and new events, a
   ``DELETE FROM`` of bot traffic, then ``ALTER TABLE ... ADD COLUMN``;
4. compacts (``CALL icelog.system.rewrite_data_files``) and expires old snapshots (``CALL ... expire_snapshots``);
5. prints the log, reads the table as of an earlier log version (schema and rows as they were), and reads every
   snapshot through Spark, checking each count against icelog's own scan. Any mismatch ends the job with an error.

With ``--s3`` the same pipeline runs on an S3 warehouse: a loopback S3 server (moto's) that the job starts and
stops itself, or a real bucket (``--s3 s3://bucket/prefix``, reached with ``--property s3.*`` settings or the AWS
environment variables). The log stays in the local ``--warehouse-dir``; tables, data and metadata go to S3, and
Spark's executors write their Parquet files straight there.
"""

from __future__ import annotations

import os
import shutil
from typing import Any

import pyarrow as pa

MARKER = ".icelog-demo"
BATCHES = 4

EVENTS_SCHEMA = pa.schema([
    pa.field("event_id", pa.int64(), nullable=False),
    pa.field("user_id", pa.int64(), nullable=False),
    pa.field("ts", pa.timestamp("us", tz="UTC"), nullable=False),
    pa.field("event_type", pa.string()),
    pa.field("amount", pa.decimal128(10, 2)),
    pa.field("country", pa.string()),
])


def fresh_warehouse(warehouse: str) -> str:
    """An empty demo warehouse: a folder this job made earlier is cleared, any other non-empty folder refused."""
    warehouse = os.path.abspath(warehouse)
    if os.path.exists(os.path.join(warehouse, MARKER)):
        shutil.rmtree(warehouse)
    elif os.path.exists(warehouse) and os.listdir(warehouse):
        raise SystemExit(f"icelog demo: {warehouse} exists and is not a demo warehouse; pass another --warehouse")
    os.makedirs(warehouse, exist_ok=True)
    open(os.path.join(warehouse, MARKER), "w").close()
    return warehouse


def events_frame(spark: Any, first_id: int, rows: int, day_start_s: int, span_s: int) -> Any:
    """``rows`` synthetic events with ids from ``first_id``, spread evenly over ``span_s`` seconds from
    ``day_start_s`` (epoch seconds). Deterministic: the same arguments give the same rows."""
    from pyspark.sql import functions as F

    kinds = F.array(*[F.lit(k) for k in ("view", "view", "view", "click", "cart", "purchase", "bot")])
    countries = F.array(*[F.lit(c) for c in ("DE", "FR", "US", "JP", "BR")])
    n = F.col("id")
    return spark.range(first_id, first_id + rows).select(
        n.alias("event_id"),
        (F.abs(F.xxhash64(n)) % 5000).alias("user_id"),
        F.timestamp_seconds(F.lit(day_start_s) + ((n - first_id) * span_s / rows).cast("long")).alias("ts"),
        F.element_at(kinds, (F.abs(F.xxhash64(n, F.lit(1))) % 7 + 1).cast("int")).alias("event_type"),
        ((F.abs(F.xxhash64(n, F.lit(2))) % 100000) / 100).cast("decimal(10,2)").alias("amount"),
        F.element_at(countries, (F.abs(F.xxhash64(n, F.lit(3))) % 5 + 1).cast("int")).alias("country"),
    )


LOOPBACK = "loopback"
LOOPBACK_BUCKET = "icelog-demo"


def run_demo(warehouse: str, rows: int = 200_000, spark: Any = None, *, s3: str | None = None,
             properties: dict[str, str] | None = None) -> dict[str, Any]:
    """Run the pipeline; returns what it checked (row counts per snapshot, the log's length, ...).

    :param warehouse: the local warehouse folder (with ``s3``: the folder of the log, catalog.db)
    :param rows: events ingested for the day
    :param spark: an existing SparkSession to use (tests share one); default: ``tools.spark.session``
    :param s3: ``"loopback"`` for a loopback S3 server started and stopped here, or an ``s3://bucket/prefix``
        warehouse on a real store (reached with ``properties`` or the AWS environment)
    :param properties: FileIO properties of the S3 warehouse (``s3.endpoint``, ...)
    """
    if s3 == LOOPBACK:
        from tools.s3_server import LoopbackS3

        with LoopbackS3() as server:
            server.create_bucket(LOOPBACK_BUCKET)
            print(f"started a loopback S3 server at {server.endpoint} (bucket {LOOPBACK_BUCKET})")
            return run_demo(warehouse, rows, spark, s3=f"s3://{LOOPBACK_BUCKET}/warehouse",
                            properties={**server.properties(), **(properties or {})})
    return _run(fresh_warehouse(warehouse), rows, spark, s3, properties)


def _run(folder: str, rows: int, spark: Any, s3: str | None, properties: dict[str, str] | None) -> dict[str, Any]:
    from engine import Catalog
    from tools import spark as icelog_spark

    day_start_s = 1_763_596_800  # 2025-11-20T00:00:00Z
    warehouse = s3 or folder
    served = {"catalog_dir": folder, "properties": properties} if s3 else {}
    opened = Catalog.open(folder, warehouse=s3, properties=properties) if s3 else Catalog.open(folder)
    with opened as cat:
        cat.create_namespace("db")
        table = cat.create_table("db.events", schema=EVENTS_SCHEMA, partition_by=["day(ts)", "bucket(8, user_id)"],
                                 properties={"write.delete.mode": "merge-on-read",
                                             "write.update.mode": "merge-on-read",
                                             "write.merge.mode": "merge-on-read"})
        print(f"created db.events at {table.location}")

        if spark is None:
            spark = icelog_spark.session(warehouse, **served)
            try:
                return _pipeline(spark, "icelog", cat, table, rows, day_start_s)
            finally:
                spark.stop()  # and the REST server it started
        name, server = icelog_spark.rest_catalog(spark, warehouse, **served)
        try:
            return _pipeline(spark, name, cat, table, rows, day_start_s)
        finally:
            server.stop()


def _pipeline(spark: Any, name: str, cat: Any, table: Any, rows: int, day_start_s: int) -> dict[str, Any]:
    """The steps after the table exists; ``name`` is the Spark catalog served by icelog's REST server."""
    from tools import spark_write

    # -- ingest: one day in four six-hour batches, partition values computed by Spark with Iceberg's transforms
    per_batch = rows // BATCHES
    for b in range(BATCHES):
        df = events_frame(spark, b * per_batch, per_batch, day_start_s + b * 6 * 3600, 6 * 3600)
        snap = spark_write.write(df, table, mode="append")
        print(f"ingest batch {b + 1}: snapshot {snap.snapshot_id}, {snap.summary_value('added-data-files')} files, "
              f"{snap.summary_value('total-records')} rows in the table")
    after_ingest = table.state.version

    # -- Spark SQL through the REST catalog: every statement commits through the log
    corrections = events_frame(spark, 0, 1000, day_start_s, 6 * 3600).withColumn("amount", spark_amount_fix())
    late = events_frame(spark, rows, 500, day_start_s + 23 * 3600, 3600)
    corrections.unionByName(late).createOrReplaceTempView("corrections")
    spark.sql(f"""
        MERGE INTO {name}.db.events t USING corrections c ON t.event_id = c.event_id
        WHEN MATCHED THEN UPDATE SET t.amount = c.amount
        WHEN NOT MATCHED THEN INSERT *""")
    print("MERGE INTO: 1,000 corrected amounts, 500 late events")
    spark.sql(f"DELETE FROM {name}.db.events WHERE event_type = 'bot'")
    print("DELETE FROM: bot events (merge-on-read: position delete files)")
    spark.sql(f"ALTER TABLE {name}.db.events ADD COLUMN channel string")
    before_compaction = table.state.version

    spark.sql(f"CALL {name}.system.rewrite_data_files(table => 'db.events', "
              "options => map('delete-file-threshold', '1', 'min-input-files', '1'))").collect()
    print(f"compaction: {table.current_snapshot().summary_value('deleted-data-files')} files -> "
          f"{table.current_snapshot().summary_value('added-data-files')}")
    keep = 3
    spark.sql(f"CALL {name}.system.expire_snapshots(table => 'db.events', older_than => TIMESTAMP '2999-01-01', "
              f"retain_last => {keep})").collect()
    print(f"expire_snapshots: {len(table.snapshots())} snapshots left in the metadata")

    # -- the log, and the table as of an earlier log version
    entries = table.log()
    print(f"log of db.events: {len(entries)} events")
    for e in entries:
        what = e.payload.get("operation") or e.payload.get("name") or ""
        print(f"  v{e.version:<3} {e.type:<20} {what:<10} by {e.actor or 'python'}")
    past = table.as_of(version=after_ingest)
    past_rows = past.scan().to_arrow()
    bots_then = past.scan(where="event_type = 'bot'").count()
    print(f"as of log version {after_ingest} (after ingest): {past_rows.num_rows} rows read, {bots_then} bot events, "
          f"columns {past_rows.column_names}, {len(past.snapshots())} snapshots")
    before = table.as_of(version=before_compaction)
    bots_now = table.scan(where="event_type = 'bot'").count()
    print(f"as of log version {before_compaction} (before compaction): {before.scan().count()} rows in "
          f"{len(before.scan().plan_files())} data files; now: {table.scan().count()} rows, "
          f"{bots_now} bot events, columns "
          f"{[f.name for f in table.schema().fields]}")

    # -- Spark reads every snapshot, and agrees with icelog's scan
    counts = {}
    for snap in table.snapshots():
        spark_rows = spark.sql(f"SELECT count(*) AS n FROM {name}.db.events VERSION AS OF {snap.snapshot_id}"
                               ).collect()[0]["n"]
        icelog_rows = table.scan(snapshot_id=snap.snapshot_id).count()
        print(f"  snapshot {snap.snapshot_id} ({snap.operation}): Spark {spark_rows} rows, icelog {icelog_rows}")
        if spark_rows != icelog_rows:
            raise SystemExit(f"icelog demo: Spark and icelog disagree on snapshot {snap.snapshot_id}")
        counts[snap.snapshot_id] = spark_rows
    problems = cat.verify("db.events")
    print("verify:", "ok" if not problems else problems)
    if problems:
        raise SystemExit("icelog demo: verify found problems")
    return {"snapshot_rows": counts, "log_events": len(entries), "rows_after_ingest": past_rows.num_rows,
            "bots_after_ingest": bots_then}


def spark_amount_fix() -> Any:
    from pyspark.sql import functions as F

    return (F.col("amount") + F.lit(1)).cast("decimal(10,2)")
