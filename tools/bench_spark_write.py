"""Bench: rows per second ingested by ``tools.spark_write.write`` against Spark's own Iceberg writer, on the same
DataFrame of N rows (10M by default) and the same partition spec.

Layer: tools (uses engine's public API and tools.spark; starts a local Spark session and, when icelog's REST
server is available, the server; writes warehouses under the folder it is given).

Spark's writer is ``df.writeTo(<catalog>.db.t).append()`` through icelog's REST catalog (``catalog: rest``)
when ``tools.rest_server`` exists, else through a Hadoop catalog on a separate warehouse (``catalog: hadoop``);
the figures say which. Both writers get the same lazy DataFrame (generated from ``spark.range``, so generation
costs the same on both sides), the same spec and the same local[2] session::

    from tools.bench_spark_write import bench_spark_write
    bench_spark_write("/tmp/bench", rows=1_000_000)
    # {"rows": 1000000, "icelog_write": {"seconds": .., "rows_per_second": ..}, "spark_iceberg_writer": {...}}

Run alone with ``python -m tools.bench_spark_write [--rows N] [root]`` (prints JSON).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import tempfile
import time
from typing import Any

DEFAULT_ROWS = 10_000_000
PARTITION_BY = ["category", "bucket(8, id)"]
SPARK_PARTITION_BY = "category, bucket(8, id)"
SPARK_SCHEMA = "id bigint, ts timestamp, name string, category string, amount double"


def _dataframe(spark: Any, rows: int) -> Any:
    from pyspark.sql import functions as F

    return spark.range(rows).select(
        F.col("id"),
        F.timestamp_seconds(F.lit(1_767_225_600) + F.col("id") % 864_000).alias("ts"),
        F.concat(F.lit("name-"), (F.col("id") % 1000).cast("string")).alias("name"),
        F.element_at(F.array(*[F.lit(c) for c in "abcd"]), (F.col("id") % 4 + 1).cast("int")).alias("category"),
        (F.col("id") * 0.25).alias("amount"),
    )


def _arrow_schema() -> Any:
    import pyarrow as pa

    return pa.schema([("id", pa.int64()), ("ts", pa.timestamp("us", tz="UTC")), ("name", pa.string()),
                      ("category", pa.string()), ("amount", pa.float64())])


def bench_spark_write(root: str, rows: int = DEFAULT_ROWS, *, driver_memory: str = "2g") -> dict[str, Any]:
    """Time ``tools.spark_write.write`` and Spark's own Iceberg writer on the same ``rows``-row DataFrame.

    :param root: a folder for the warehouses (created when absent)
    :param rows: the DataFrame's rows
    :param driver_memory: the local Spark driver's memory
    :returns: ``rows``, ``partitions``, ``icelog_write`` and ``spark_iceberg_writer`` (``seconds``,
        ``rows_per_second``, ``data_files``; the latter also ``catalog``: rest or hadoop), and
        ``icelog_vs_spark_rows_per_second``
    """
    from engine import Catalog
    from tools.spark import hadoop_catalog, local_session, rest_catalog
    from tools.spark_write import write

    warehouse = os.path.join(root, "spark-write")
    os.makedirs(warehouse, exist_ok=True)
    with Catalog.open(warehouse) as cat:
        cat.create_namespace("db")
        cat.create_table("db.icelog_write", schema=_arrow_schema(), partition_by=PARTITION_BY)
    rest = importlib.util.find_spec("tools.rest_server") is not None
    spark = local_session(None, app_name="icelog-bench-spark-write", driver_memory=driver_memory,
                          scratch_dir=os.path.join(root, "spark-scratch"))
    server = None
    try:
        if rest:
            catalog, server = rest_catalog(spark, warehouse)
        else:
            catalog = hadoop_catalog(spark, os.path.join(root, "spark-hadoop-warehouse"))
            spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {catalog}.db")
        spark.sql(f"CREATE TABLE {catalog}.db.spark_write ({SPARK_SCHEMA}) USING iceberg "
                  f"PARTITIONED BY ({SPARK_PARTITION_BY})")
        df = _dataframe(spark, rows)
        # warm up both paths on a small frame (JIT, Python workers, catalog functions)
        with Catalog.open(warehouse) as cat:
            cat.create_table("db.warmup", schema=_arrow_schema(), partition_by=PARTITION_BY)
            write(_dataframe(spark, 10_000), cat.load_table("db.warmup"))
        _dataframe(spark, 10_000).writeTo(f"{catalog}.db.spark_write").append()
        spark.sql(f"DELETE FROM {catalog}.db.spark_write")

        with Catalog.open(warehouse) as cat:
            t = cat.load_table("db.icelog_write")
            started = time.perf_counter()
            snap = write(df, t)
            ours = time.perf_counter() - started
            ours_files = int(snap.summary_value("added-data-files") or 0)
            assert int(snap.summary_value("added-records") or 0) == rows

        started = time.perf_counter()
        df.writeTo(f"{catalog}.db.spark_write").append()
        theirs = time.perf_counter() - started
        summary = spark.sql(f"SELECT summary FROM {catalog}.db.spark_write.snapshots "
                            f"ORDER BY committed_at DESC LIMIT 1").collect()[0]["summary"]
        assert int(summary["added-records"]) == rows
        partitions = spark.sql(f"SELECT count(*) AS n FROM {catalog}.db.spark_write.partitions").collect()[0]["n"]
    finally:
        spark.stop()
        if server is not None:
            server.stop()
    return {
        "rows": rows,
        "partitions": partitions,
        "partition_by": PARTITION_BY,
        "spark": "local[2], shuffle partitions 2",
        "icelog_write": {"seconds": round(ours, 2), "rows_per_second": round(rows / ours),
                         "data_files": ours_files},
        "spark_iceberg_writer": {"catalog": "rest" if rest else "hadoop", "seconds": round(theirs, 2),
                                 "rows_per_second": round(rows / theirs),
                                 "data_files": int(summary["added-data-files"])},
        "icelog_vs_spark_rows_per_second": round(theirs / ours, 2),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m tools.bench_spark_write", description=__doc__)
    parser.add_argument("--rows", type=int, default=DEFAULT_ROWS)
    parser.add_argument("root", nargs="?")
    args = parser.parse_args(argv)
    if args.root:
        print(json.dumps(bench_spark_write(args.root, args.rows), indent=2))
        return
    with tempfile.TemporaryDirectory(prefix="icelog-bench-spark-write-") as root:
        print(json.dumps(bench_spark_write(root, args.rows), indent=2))


if __name__ == "__main__":
    main()
