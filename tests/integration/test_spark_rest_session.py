"""Spark reading icelog tables through icelog's REST catalog server: tools.spark.rest_catalog in the shared
session, and tools.spark.session in a process of its own (it starts and stops the server).

Layer: tests (icelog's public API, tools.spark and Spark with the Iceberg runtime; the REST server runs as a
subprocess, as the session helper starts it).
"""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import sys
import textwrap
import time

import pyarrow as pa

from engine import Catalog
from tools.spark import SOURCE_ROOT, rest_catalog, rest_config_status
from tools.spark_write import write

SCHEMA = pa.schema([("id", pa.int64()), ("ts", pa.timestamp("us", tz="UTC")), ("category", pa.string())])


def batch(start: int, stop: int) -> pa.Table:
    return pa.table({"id": pa.array(range(start, stop), pa.int64()),
                     "ts": pa.array([dt.datetime(2026, 1, 1, i % 24, tzinfo=dt.timezone.utc)
                                     for i in range(start, stop)], pa.timestamp("us", tz="UTC")),
                     "category": ["ab"[i % 2] for i in range(start, stop)]})


def test_reads_time_travel_branches_and_metadata_tables_through_the_rest_catalog(spark, tmp_warehouse):
    cat = Catalog.open(tmp_warehouse)
    cat.create_namespace("db")
    t = cat.create_table("db.events", schema=SCHEMA, partition_by=["category", "bucket(4, id)"])
    first = t.append(batch(0, 10))
    while int(time.time() * 1000) <= first.timestamp_ms + 2:
        time.sleep(0.005)
    second = t.append(batch(10, 25))
    t.manage_snapshots().create_branch(first.snapshot_id, "audit").commit()
    between = dt.datetime.fromtimestamp((first.timestamp_ms + 1) / 1000, dt.timezone.utc)

    name, server = rest_catalog(spark, tmp_warehouse)
    try:
        assert server.started_here and rest_config_status(server.url, server.token) == 200
        table = f"{name}.db.events"

        def count(sql: str) -> int:
            return spark.sql(sql).collect()[0][0]

        assert spark.table(table).count() == 25
        assert count(f"SELECT count(*) FROM {table} VERSION AS OF {first.snapshot_id}") == 10
        assert count(f"SELECT count(*) FROM {table} VERSION AS OF {second.snapshot_id}") == 25
        assert count(f"SELECT count(*) FROM {table} TIMESTAMP AS OF "
                     f"'{between.strftime('%Y-%m-%d %H:%M:%S.%f')}'") == 10
        assert count(f"SELECT count(*) FROM {table} FOR VERSION AS OF 'audit'") == 10
        snapshots = spark.sql(f"SELECT snapshot_id, operation FROM {table}.snapshots ORDER BY committed_at").collect()
        assert [(r[0], r[1]) for r in snapshots] == [(first.snapshot_id, "append"), (second.snapshot_id, "append")]
        assert count(f"SELECT sum(record_count) FROM {table}.files") == 25
        history = spark.sql(f"SELECT snapshot_id, is_current_ancestor FROM {table}.history").collect()
        assert sorted((r[0], r[1]) for r in history) == sorted([(first.snapshot_id, True),
                                                                 (second.snapshot_id, True)])

        # a DataFrame written by tools.spark_write.write is seen through the REST catalog at once, and a Spark append
        # through it lands in the log
        df = spark.createDataFrame([(100 + i, dt.datetime(2026, 2, 1), "c") for i in range(7)],
                                   "id long, ts timestamp, category string")
        write(df, cat.load_table("db.events"))
        assert spark.table(table).count() == 32
        df.writeTo(table).append()
        assert cat.load_table("db.events").scan().to_arrow().num_rows == 39
        assert cat.verify("db.events") == []
    finally:
        server.stop()
    assert rest_config_status(server.url, server.token) is None
    cat.close()


SESSION_SCRIPT = textwrap.dedent("""
    import json, sys
    sys.path.insert(0, {root!r})   # the driver finds icelog this way; the workers only through the session
    import pyarrow as pa
    from engine import Catalog
    from tools.spark import rest_server, rest_config_status, session
    from tools.spark_write import write

    warehouse = {warehouse!r}
    with Catalog.open(warehouse) as cat:
        cat.create_namespace("db")
        t = cat.create_table("db.t", schema=pa.schema([("id", pa.int64()), ("part", pa.string())]),
                             partition_by=["bucket(3, id)"])
        t.append(pa.table({{"id": pa.array([1, 2, 3], pa.int64()), "part": ["x", "y", "z"]}}))
        spark = session(warehouse, shuffle_partitions=2, **{{"spark.sql.ansi.enabled": "true"}})
        server = rest_server(spark)
        write(spark.createDataFrame([(4, "w"), (5, "v")], "id long, part string"), cat.load_table("db.t"))
        rows = sorted(r.id for r in spark.table("icelog.db.t").collect())
        ansi = spark.conf.get("spark.sql.ansi.enabled")
        answered = rest_config_status(server.url, server.token)
        started = server.started_here
        spark.stop()
        print(json.dumps({{"rows": rows, "ansi": ansi, "answered": answered, "started": started,
                          "after_stop": rest_config_status(server.url, server.token)}}))
""")


def test_session_starts_the_server_and_stops_it_with_the_session(tmp_path):
    script = tmp_path / "job.py"
    script.write_text(SESSION_SCRIPT.format(root=SOURCE_ROOT, warehouse=str(tmp_path / "warehouse")))
    done = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result == {"rows": [1, 2, 3, 4, 5], "ansi": "true", "answered": 200, "started": True,
                      "after_stop": None}
