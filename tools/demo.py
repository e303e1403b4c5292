"""The demo pipeline behind the README's first command: commit through icelog, read back through Spark.

Layer: tools. Creates ``./warehouse`` (a demo warehouse is recreated on each run), a
partitioned table, appends a few batches, tags them, deletes rows (merge-on-read), upserts,
evolves the schema and compacts; then starts Spark with the Apache Iceberg runtime and reads
every snapshot by path, the tag, and the table through a Hadoop catalog, printing row counts.
"""

from __future__ import annotations

import datetime
import decimal
import os
import random
import shutil

import pyarrow as pa

MARKER = ".icelog-demo"


def demo_batch(batch: int, rows: int) -> pa.Table:
    rng = random.Random(batch)
    start = datetime.datetime(2026, 11, 1, tzinfo=datetime.timezone.utc)
    return pa.table({
        "id": pa.array([batch * rows + i for i in range(rows)], pa.int64()),
        "ts": pa.array([start + datetime.timedelta(hours=rng.randrange(72), seconds=rng.randrange(3600))
                        for _ in range(rows)], pa.timestamp("us", tz="UTC")),
        "category": pa.array([rng.choice(["books", "games", "music"]) for _ in range(rows)]),
        "amount": pa.array([decimal.Decimal(rng.randrange(100, 100000)) / 100 for _ in range(rows)],
                           pa.decimal128(10, 2)),
        "name": pa.array([f"customer-{rng.randrange(1000):04d}" for _ in range(rows)]),
    })


def live_rows(snap: object) -> int:
    """Rows a snapshot reads as, from its summary: records minus position deletes (equality deletes apply to
    older data only, so their count does not subtract exactly; the demo checks the result against Spark)."""
    value = snap.summary_value  # type: ignore[attr-defined]
    return int(value("total-records", "0")) - int(value("total-position-deletes", "0"))


def run_demo(warehouse: str) -> None:
    from engine import Catalog

    warehouse = os.path.abspath(warehouse)
    if os.path.exists(os.path.join(warehouse, MARKER)):
        shutil.rmtree(warehouse)
    elif os.path.exists(warehouse) and os.listdir(warehouse):
        raise SystemExit(f"icelog demo: {warehouse} exists and is not a demo warehouse; pass --warehouse-dir")
    os.makedirs(warehouse, exist_ok=True)
    open(os.path.join(warehouse, MARKER), "w").close()

    with Catalog.open(warehouse) as cat:
        cat.create_namespace("db")
        table = cat.create_table("db.events", schema=demo_batch(0, 1).schema,
                                 partition_by=["day(ts)", "bucket(4, id)", "category"])
        print(f"created db.events at {table.location}")
        for batch in range(1, 4):
            snap = table.append(demo_batch(batch, 500))
            print(f"append {batch}: snapshot {snap.snapshot_id}, {snap.summary_value('added-data-files')} files, "
                  f"total {snap.summary_value('total-records')} rows")
        table.manage_snapshots().create_tag(snap.snapshot_id, "loaded").commit()
        table.set_properties({"write.delete.mode": "merge-on-read"})
        snap = table.delete("category = 'music' and amount < 100")
        print(f"delete (merge-on-read): {snap.summary_value('added-position-deletes')} position deletes, "
              f"{live_rows(snap)} rows")
        changes = demo_batch(1, 500).slice(0, 20)  # ids 500..519 exist: their rows are replaced
        changes = changes.set_column(2, "category", pa.array(["games"] * 20))
        snap = table.upsert(changes, key_columns=["id"])
        print(f"upsert of 20 existing ids ({snap.operation}): {live_rows(snap)} rows")
        with table.update_schema() as update:
            update.add_column("channel", "string")
        snap = table.rewrite_data_files()
        print(f"compaction: {snap.summary_value('deleted-data-files')} files -> "
              f"{snap.summary_value('added-data-files')}, delete files left: "
              f"{snap.summary_value('total-delete-files')}")
        print(f"metadata: {table.metadata_location}")
        snapshots = table.snapshots()
        location = table.location
        print("log:")
        for e in cat.log.read_stream(table.uuid):
            print(f"  position {e.position} version {e.version} {e.type} commit {e.commit_id}")
        problems = cat.verify("db.events")
        print("verify:", "ok" if not problems else problems)

    from tools.spark import local_session

    spark = local_session(warehouse)
    try:
        print(f"Spark reads {location} by path:")
        for snap in snapshots:
            n = spark.read.format("iceberg").option("snapshot-id", snap.snapshot_id).load(location).count()
            print(f"  snapshot {snap.snapshot_id} ({snap.operation}): {n} rows (icelog says {live_rows(snap)})")
        tagged = spark.read.format("iceberg").option("tag", "loaded").load(location).count()
        print(f"Spark reads tag 'loaded': {tagged} rows")
        current = spark.read.format("iceberg").load(location)
        print("Spark, current snapshot, rows per category:")
        for row in current.groupBy("category").count().orderBy("category").collect():
            print(f"  {row['category']}: {row['count']}")
        n = spark.sql("SELECT count(*) AS n FROM hadoop.db.events").collect()[0]["n"]
        print(f"Spark through a Hadoop catalog on the warehouse: hadoop.db.events has {n} rows")
    finally:
        spark.stop()
