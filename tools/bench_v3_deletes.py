"""Bench: a merge-on-read delete of 1% of a table's rows, spread over every data file, written as format v3
deletion vectors against format v2 position delete files, and Spark's own v3 delete of the same rows; each write
followed by a full scan. Prints JSON.

Layer: tools (uses engine's public API and tools.spark; starts a local Spark session and icelog's REST server).

The same rows go into three tables (``id long, bucket int, value double``; ``bucket = id % 100``), one data file
per append: ``v2`` (format 2), ``v3`` and ``spark_v3`` (format 3), all ``write.delete.mode=merge-on-read``. The
delete is ``bucket = 7``: 1% of the rows, in every file. icelog deletes from ``v2`` (one position delete file per
data file, ``write.delete.granularity=file`` as Java) and ``v3`` (one Puffin file of one vector per data file); Spark 3.5 with the Iceberg 1.10 runtime
deletes from ``spark_v3`` through icelog's REST catalog (``DELETE FROM``). Each full scan reads every column of
every live row: icelog's ``scan().to_arrow()``, Spark's ``write.format("noop")``.

    python -m tools.bench_v3_deletes [--rows 10000000] [--files 100] [--skip-spark] [root]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from typing import Any

DEFAULT_ROWS = 10_000_000
DEFAULT_FILES = 100
BUCKETS = 100
DELETE_WHERE = "bucket = 7"


def _batch(start: int, rows: int) -> Any:
    import pyarrow as pa
    import pyarrow.compute as pc

    ids = pa.array(range(start, start + rows), pa.int64())
    buckets = pc.subtract(ids, pc.multiply(pc.divide(ids, BUCKETS), BUCKETS))  # id % 100 (integer division)
    return pa.table({"id": ids, "bucket": buckets.cast(pa.int32()),
                     "value": pc.multiply(ids.cast(pa.float64()), 0.5)})


def _fill(table: Any, rows: int, files: int) -> None:
    per_file = rows // files
    for i in range(files):
        table.append(_batch(i * per_file, per_file if i < files - 1 else rows - i * per_file))


def _delete_files(table: Any) -> tuple[int, int, int]:
    """The live delete entries of the table's current snapshot: (entries, distinct files, bytes of those files)."""
    from engine.model.data_file import DataFileContent

    live = table.catalog.store.live_entries(table.state, table.current_snapshot().snapshot_id)
    entries = [e.file for e in live if e.file.content == DataFileContent.POSITION_DELETES]
    sizes = {f.file_path: f.file_size_in_bytes for f in entries}
    return len(entries), len(sizes), sum(sizes.values())


def _icelog_run(table: Any, rows: int) -> dict[str, Any]:
    start = time.perf_counter()
    table.delete(DELETE_WHERE)
    delete_s = time.perf_counter() - start
    entries, files, size = _delete_files(table)
    start = time.perf_counter()
    scanned = table.scan().to_arrow()
    scan_s = time.perf_counter() - start
    assert scanned.num_rows == rows - rows // BUCKETS, scanned.num_rows
    return {"delete_seconds": round(delete_s, 3), "delete_entries": entries, "delete_files": files,
            "delete_bytes": size, "scan_seconds": round(scan_s, 3), "scan_rows": scanned.num_rows}


def _spark_run(root: str, warehouse: str, rows: int, driver_memory: str) -> dict[str, Any]:
    from tools.spark import local_session, rest_catalog

    spark = local_session(None, app_name="icelog-bench-v3-deletes", driver_memory=driver_memory,
                          scratch_dir=os.path.join(root, "spark-scratch"))
    try:
        catalog, server = rest_catalog(spark, warehouse)
        try:
            name = f"{catalog}.db.spark_v3"
            spark.sql(f"SELECT count(*) FROM {name}").collect()  # loads the table and warms the JVM up
            start = time.perf_counter()
            spark.sql(f"DELETE FROM {name} WHERE {DELETE_WHERE}").collect()
            delete_s = time.perf_counter() - start
            start = time.perf_counter()
            spark.table(name).write.format("noop").mode("overwrite").save()
            scan_s = time.perf_counter() - start
            remaining = spark.sql(f"SELECT count(*) AS n FROM {name}").collect()[0]["n"]
            assert remaining == rows - rows // BUCKETS, remaining
            deletes = spark.sql(f"SELECT count(*) AS entries, count(DISTINCT file_path) AS files FROM "
                                f"(SELECT DISTINCT file_path, content_offset FROM {name}.delete_files)").collect()[0]
            sizes = spark.sql(f"SELECT sum(file_size_in_bytes) AS size FROM (SELECT DISTINCT file_path, "
                              f"file_size_in_bytes FROM {name}.delete_files)").collect()[0]["size"]
        finally:
            server.stop()
    finally:
        spark.stop()
    return {"delete_seconds": round(delete_s, 3), "delete_entries": int(deletes["entries"]),
            "delete_files": int(deletes["files"]), "delete_bytes": int(sizes or 0), "scan_seconds": round(scan_s, 3),
            "scan_rows": int(remaining)}


def bench_v3_deletes(root: str, rows: int = DEFAULT_ROWS, files: int = DEFAULT_FILES, *, spark: bool = True,
                     driver_memory: str = "3g") -> dict[str, Any]:
    """Build the three tables under ``root``, delete 1% of the rows from each and scan it; returns the figures."""
    import pyarrow as pa

    from engine import Catalog

    warehouse = os.path.join(root, "v3-deletes")
    schema = pa.schema([("id", pa.int64()), ("bucket", pa.int32()), ("value", pa.float64())])
    props = {"write.delete.mode": "merge-on-read"}
    result: dict[str, Any] = {"rows": rows, "files": files, "deleted_rows": rows // BUCKETS, "where": DELETE_WHERE}
    with Catalog.open(warehouse) as cat:
        cat.create_namespace("db")
        tables = {"v2": cat.create_table("db.v2", schema=schema, properties=props, format_version=2),
                  "v3": cat.create_table("db.v3", schema=schema, properties=props, format_version=3)}
        if spark:
            tables["spark_v3"] = cat.create_table("db.spark_v3", schema=schema, properties=props, format_version=3)
        for table in tables.values():
            _fill(table, rows, files)
        result["icelog_v2_position_deletes"] = _icelog_run(tables["v2"], rows)
        result["icelog_v3_deletion_vectors"] = _icelog_run(tables["v3"], rows)
    if spark:
        result["spark_v3_deletion_vectors"] = _spark_run(root, warehouse, rows, driver_memory)
    v2, v3 = result["icelog_v2_position_deletes"], result["icelog_v3_deletion_vectors"]
    result["ratios"] = {
        "v3_vs_v2_delete_seconds": round(v3["delete_seconds"] / max(v2["delete_seconds"], 1e-9), 3),
        "v3_vs_v2_scan_seconds": round(v3["scan_seconds"] / max(v2["scan_seconds"], 1e-9), 3)}
    if spark:
        theirs = result["spark_v3_deletion_vectors"]
        result["ratios"]["icelog_v3_vs_spark_v3_delete_seconds"] = round(
            v3["delete_seconds"] / max(theirs["delete_seconds"], 1e-9), 3)
    return result


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=DEFAULT_ROWS)
    parser.add_argument("--files", type=int, default=DEFAULT_FILES)
    parser.add_argument("--skip-spark", action="store_true")
    parser.add_argument("root", nargs="?", default=None)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="icelog-bench-v3-") as scratch:
        result = bench_v3_deletes(args.root or scratch, args.rows, args.files, spark=not args.skip_spark)
    json.dump(result, sys.stdout, indent=2)
    print()


if __name__ == "__main__":
    main()
