"""Benchmark: scan planning (``plan_files``) on large tables, icelog against PyIceberg's SqlCatalog. Prints JSON.

Layer: tools. ``python -m tools.bench_scan [--sizes 20000 100000] [--skip-pyiceberg]``. For each size it builds
the same table twice from synthetic data file entries (no data is written; planning never opens data files):
columns ``id long, category string, ts timestamp, value double``, partitioned by ``category`` (100 values) and
``day(ts)`` (100 days), appended in commits of 500 files (icelog: log commits; PyIceberg: fast appends, one
manifest per commit). It then times ``plan_files()`` with no filter, with ``category = 'c042'`` (1% of
partitions), with a one-day range on ``ts`` (1%), and at the snapshot in the middle of the history. icelog is
timed cold (a fresh catalog: each commit's file block, written at commit time, is read once; a filtered plan
skips the commits whose partition summaries rule it out) and warm (the index already built, as in a long-lived
process), PyIceberg on a freshly loaded table each time.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import struct
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from typing import Any

COMMIT_FILES = 500
CATEGORIES = 100
DAYS = 100
DAY_US = 86_400_000_000
START_DAY = 19_723  # 2024-01-01
ROWS_PER_FILE = 1000

FILTERS = {
    "no_filter": None,
    "category_1pct": "category = 'c042'",
    "time_range_1pct": "ts >= '2024-02-12T00:00:00' and ts < '2024-02-13T00:00:00'",
}
PY_FILTERS = {
    "no_filter": None,
    "category_1pct": "category == 'c042'",
    "time_range_1pct": "ts >= '2024-02-12T00:00:00' and ts < '2024-02-13T00:00:00'",
}


def _file_values(i: int) -> tuple[str, int, int, int]:
    """(category, day, ts lower, ts upper) of synthetic file ``i``: categories cycle fastest, then days."""
    category = f"c{i % CATEGORIES:03d}"
    day = START_DAY + (i // CATEGORIES) % DAYS
    lower = day * DAY_US + (i % 7) * 1_000_000
    return category, day, lower, lower + 3_600_000_000


def _timed(fn: Callable[[], Any], repeat: int) -> tuple[float, Any]:
    """Median seconds over ``repeat`` runs, and the last result."""
    times, result = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    return round(statistics.median(times), 4), result


def _arrow_schema() -> Any:
    import pyarrow as pa

    return pa.schema([pa.field("id", pa.int64()), pa.field("category", pa.string()),
                      pa.field("ts", pa.timestamp("us")), pa.field("value", pa.float64())])


# ---------------------------------------------------------------- icelog


def build_icelog(warehouse: str, size: int) -> tuple[float, int]:
    """The table ``db.t`` of ``size`` files; (build seconds, the middle snapshot id)."""
    from engine import Catalog
    from engine.model.data_file import DataFile
    from engine.operations.append import append_events
    from engine.operations.snapshot import new_snapshot_id
    from engine.operations.commit import RetryPolicy, commit_streams

    cat = Catalog.open(warehouse, project=False)
    cat.create_namespace("db")
    table = cat.create_table("db.t", schema=_arrow_schema(), partition_by=["category", "day(ts)"])
    location = table.location

    def data_file(i: int) -> DataFile:
        category, day, lower, upper = _file_values(i)
        cat_bytes = category.encode()
        return DataFile(file_path=f"{location}/data/category={category}/f-{i:07d}.parquet", spec_id=0,
                        partition=(category, day), record_count=ROWS_PER_FILE, file_size_in_bytes=20_000,
                        value_counts=((1, ROWS_PER_FILE), (2, ROWS_PER_FILE), (3, ROWS_PER_FILE), (4, ROWS_PER_FILE)),
                        null_value_counts=((1, 0), (2, 0), (3, 0), (4, 0)), nan_value_counts=((4, 0),),
                        lower_bounds=((1, struct.pack("<q", i * ROWS_PER_FILE)), (2, cat_bytes),
                                      (3, struct.pack("<q", lower)), (4, struct.pack("<d", 0.0))),
                        upper_bounds=((1, struct.pack("<q", i * ROWS_PER_FILE + ROWS_PER_FILE - 1)), (2, cat_bytes),
                                      (3, struct.pack("<q", upper)), (4, struct.pack("<d", 1.0))))

    start = time.perf_counter()
    middle = 0
    commits = (size + COMMIT_FILES - 1) // COMMIT_FILES
    for c in range(commits):
        files = [data_file(i) for i in range(c * COMMIT_FILES, min(size, (c + 1) * COMMIT_FILES))]
        sid = new_snapshot_id()
        commit_streams(cat.store, lambda ctx, files=files, sid=sid: [
            (table.uuid, cat.store.table(table.uuid).version,
             append_events(cat.store.table(table.uuid), files, ctx, snapshot_id=sid))], policy=RetryPolicy())
        if c == commits // 2 - 1:
            middle = sid
    build_s = time.perf_counter() - start
    cat.close()
    return round(build_s, 2), middle


def time_icelog(warehouse: str, middle: int, repeat: int) -> dict[str, Any]:
    from engine import Catalog

    out: dict[str, Any] = {}
    cases = [(name, where, None) for name, where in FILTERS.items()] + [("middle_snapshot", None, middle)]
    for name, where, snapshot_id in cases:
        def cold(where: str | None = where, snapshot_id: int | None = snapshot_id) -> int:
            cat = Catalog.open(warehouse, project=False)
            try:
                return len(cat.load_table("db.t").scan(where=where, snapshot_id=snapshot_id).plan_files())
            finally:
                cat.close()

        cold_s, n = _timed(cold, repeat)
        cat = Catalog.open(warehouse, project=False)
        table = cat.load_table("db.t")
        table.scan(where=where, snapshot_id=snapshot_id).plan_files()  # build the index
        warm_s, _ = _timed(lambda t=table, w=where, s=snapshot_id: len(t.scan(where=w, snapshot_id=s).plan_files()),
                           repeat)
        stats = table.scan(where=where, snapshot_id=snapshot_id).plan_stats()
        cat.close()
        out[name] = {"cold_seconds": cold_s, "warm_seconds": warm_s, "files": n,
                     "skipped_by_partition": stats.skipped_by_partition, "skipped_by_metrics": stats.skipped_by_metrics,
                     "commits_not_decoded": stats.skipped_commits}
    return out


# ---------------------------------------------------------------- PyIceberg


def build_pyiceberg(warehouse: str, size: int) -> tuple[float, int]:
    from pyiceberg.catalog.sql import SqlCatalog
    from pyiceberg.manifest import DataFile, DataFileContent, FileFormat
    from pyiceberg.partitioning import PartitionField, PartitionSpec
    from pyiceberg.schema import Schema
    from pyiceberg.transforms import DayTransform, IdentityTransform
    from pyiceberg.typedef import Record
    from pyiceberg.types import (
        DoubleType,
        LongType,
        NestedField,
        StringType,
        TimestampType,
    )

    os.makedirs(warehouse, exist_ok=True)
    cat = SqlCatalog("bench", uri=f"sqlite:///{warehouse}/pyiceberg.db", warehouse=f"file://{warehouse}")
    cat.create_namespace("db")
    schema = Schema(NestedField(1, "id", LongType(), required=False),
                    NestedField(2, "category", StringType(), required=False),
                    NestedField(3, "ts", TimestampType(), required=False),
                    NestedField(4, "value", DoubleType(), required=False))
    spec = PartitionSpec(PartitionField(source_id=2, field_id=1000, transform=IdentityTransform(), name="category"),
                         PartitionField(source_id=3, field_id=1001, transform=DayTransform(), name="ts_day"))
    table = cat.create_table("db.t", schema=schema, partition_spec=spec)
    location = table.location()

    def data_file(i: int) -> Any:
        category, day, lower, upper = _file_values(i)
        cat_bytes = category.encode()
        return DataFile.from_args(
            content=DataFileContent.DATA, file_path=f"{location}/data/category={category}/f-{i:07d}.parquet",
            file_format=FileFormat.PARQUET, partition=Record(category, day), record_count=ROWS_PER_FILE,
            file_size_in_bytes=20_000, column_sizes={1: 100, 2: 100, 3: 100, 4: 100},
            value_counts={1: ROWS_PER_FILE, 2: ROWS_PER_FILE, 3: ROWS_PER_FILE, 4: ROWS_PER_FILE},
            null_value_counts={1: 0, 2: 0, 3: 0, 4: 0}, nan_value_counts={4: 0},
            lower_bounds={1: struct.pack("<q", i * ROWS_PER_FILE), 2: cat_bytes, 3: struct.pack("<q", lower),
                          4: struct.pack("<d", 0.0)},
            upper_bounds={1: struct.pack("<q", i * ROWS_PER_FILE + ROWS_PER_FILE - 1), 2: cat_bytes,
                          3: struct.pack("<q", upper), 4: struct.pack("<d", 1.0)},
            split_offsets=[4], sort_order_id=None, spec_id=0, equality_ids=None, key_metadata=None)

    start = time.perf_counter()
    middle = 0
    commits = (size + COMMIT_FILES - 1) // COMMIT_FILES
    for c in range(commits):
        with table.transaction() as tx, tx.update_snapshot().fast_append() as append:
            for i in range(c * COMMIT_FILES, min(size, (c + 1) * COMMIT_FILES)):
                append.append_data_file(data_file(i))
        if c == commits // 2 - 1:
            table = cat.load_table("db.t")
            middle = table.current_snapshot().snapshot_id
    return round(time.perf_counter() - start, 2), middle


def time_pyiceberg(warehouse: str, middle: int, repeat: int) -> dict[str, Any]:
    from pyiceberg.catalog.sql import SqlCatalog

    cat = SqlCatalog("bench", uri=f"sqlite:///{warehouse}/pyiceberg.db", warehouse=f"file://{warehouse}")
    out: dict[str, Any] = {}
    cases = [(name, where, None) for name, where in PY_FILTERS.items()] + [("middle_snapshot", None, middle)]
    for name, where, snapshot_id in cases:
        def plan(where: str | None = where, snapshot_id: int | None = snapshot_id) -> int:
            table = cat.load_table("db.t")
            kwargs: dict[str, Any] = {"snapshot_id": snapshot_id}
            if where is not None:
                kwargs["row_filter"] = where
            return len(list(table.scan(**kwargs).plan_files()))

        seconds, n = _timed(plan, repeat)
        out[name] = {"seconds": seconds, "files": n}
    return out


# ---------------------------------------------------------------- driver


def bench_plan_files(root: str, sizes: tuple[int, ...] = (20000, 100000), *, repeat: int = 3,
                     pyiceberg: bool = True, pyiceberg_max_size: int | None = None) -> dict[str, Any]:
    """Build both tables at each size under ``root`` and time ``plan_files``; the figures as a dict.

    :param pyiceberg_max_size: skip PyIceberg for larger sizes (its build is slow)
    """
    result: dict[str, Any] = {}
    for size in sizes:
        entry: dict[str, Any] = {}
        warehouse = os.path.join(root, f"icelog-{size}")
        build_s, middle = build_icelog(warehouse, size)
        entry["icelog"] = {"build_seconds": build_s, **time_icelog(warehouse, middle, repeat)}
        if pyiceberg and (pyiceberg_max_size is None or size <= pyiceberg_max_size):
            py_warehouse = os.path.join(root, f"pyiceberg-{size}")
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                py_build, py_middle = build_pyiceberg(py_warehouse, size)
                entry["pyiceberg"] = {"build_seconds": py_build, **time_pyiceberg(py_warehouse, py_middle, repeat)}
            entry["speedup"] = {
                name: {"cold": round(entry["pyiceberg"][name]["seconds"] / max(entry["icelog"][name]["cold_seconds"],
                                                                                1e-6), 1),
                       "warm": round(entry["pyiceberg"][name]["seconds"] / max(entry["icelog"][name]["warm_seconds"],
                                                                                1e-6), 1)}
                for name in ("no_filter", "category_1pct", "time_range_1pct", "middle_snapshot")}
        result[str(size)] = entry
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[20000, 100000])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--skip-pyiceberg", action="store_true")
    parser.add_argument("--pyiceberg-max-size", type=int, default=None)
    parser.add_argument("--root", default=None, help="build under this folder (default: a temporary one)")
    args = parser.parse_args(argv)
    if args.root:
        result = bench_plan_files(args.root, tuple(args.sizes), repeat=args.repeat,
                                  pyiceberg=not args.skip_pyiceberg, pyiceberg_max_size=args.pyiceberg_max_size)
    else:
        with tempfile.TemporaryDirectory(prefix="icelog-bench-scan-") as root:
            result = bench_plan_files(root, tuple(args.sizes), repeat=args.repeat,
                                      pyiceberg=not args.skip_pyiceberg, pyiceberg_max_size=args.pyiceberg_max_size)
    json.dump(result, sys.stdout, indent=2)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
