"""Benchmarks: latency of a 1-file append as a table grows, icelog against PyIceberg's SqlCatalog. Prints JSON.

Layer: tools. Run ``tools/run bench`` (or ``python -m tools.bench --help``). For each size
(existing files, built in commits of 100), it times 1-file appends on icelog: the log commit
alone (under synchronous=FULL, and under NORMAL to show its cost apart from the disk flush), the
commit with synchronous projection (manifest, manifest list, metadata.json, hint, pointer), and
``append_files`` end to end (footer read included); then the
same appends through PyIceberg's SqlCatalog on SQLite (``add_files``), and PyIceberg's fast
append (``table.append``) at the first commits and after 200 commits, against icelog's; the same 1-file
append on an S3 warehouse (loopback server), with the S3 requests each sends (tools/bench_s3.py); and 1,000
10-row commits side by side with DuckLake and PyIceberg, in turns (tools/bench_commits.py), and commits per
second on one table with concurrent writers through the Python API and the REST server
(tools/bench_throughput.py).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import tempfile
import time
import warnings
from typing import Any, Callable

import pyarrow as pa
import pyarrow.parquet as pq

from tools.bench_stats import percentiles

BUILD_COMMIT_FILES = 100


def timed(fn: Callable[[], Any], samples: int) -> list[float]:
    out = []
    for _ in range(samples):
        start = time.perf_counter()
        fn()
        out.append((time.perf_counter() - start) * 1000)
    return out


def small_table(i: int) -> pa.Table:
    return pa.table({"id": pa.array([i, i + 1], pa.int64()), "name": pa.array(["a", "b"])})


def write_files(folder: str, count: int) -> list[str]:
    """``count`` real one-row-group Parquet files (PyIceberg's add_files reads every footer)."""
    os.makedirs(folder, exist_ok=True)
    template = os.path.join(folder, "template.parquet")
    pq.write_table(small_table(0), template)
    paths = []
    for i in range(count):
        p = os.path.join(folder, f"f-{i:06d}.parquet")
        shutil.copyfile(template, p)
        paths.append(p)
    return paths


# ---------------------------------------------------------------- icelog


def bench_icelog(root: str, sizes: list[int], samples: int, files: list[str]) -> dict[str, Any]:
    from engine import Catalog
    from engine.operations.append import append_events
    from engine.operations.snapshot import new_snapshot_id
    from engine.operations.commit import RetryPolicy, commit_streams
    from engine.formats.parquet_files import read_data_file

    out: dict[str, Any] = {}
    for size in sizes:
        warehouse = os.path.join(root, f"icelog-{size}")
        cat = Catalog.open(warehouse, project=True)
        cat.create_namespace("db")
        table = cat.create_table("db.t", schema=small_table(0).schema)
        state = table.state
        template = read_data_file(files[0], state.schema, spec_id=0, partition=())

        def data_file(i: int) -> Any:
            import attrs
            return attrs.evolve(template, file_path=f"{table.location}/data/synthetic-{i:07d}.parquet")

        counter = iter(range(10**9))

        def commit(n: int) -> None:
            fs = [data_file(next(counter)) for _ in range(n)]
            sid = new_snapshot_id()
            commit_streams(cat.store, lambda ctx: [(table.uuid, cat.store.table(table.uuid).version,
                                                    append_events(cat.store.table(table.uuid), fs, ctx,
                                                                  snapshot_id=sid))],
                           policy=RetryPolicy())

        built = 0
        build_start = time.perf_counter()
        while built < size:
            n = min(BUILD_COMMIT_FILES, size - built)
            commit(n)
            table.publish()
            built += n
        build_s = time.perf_counter() - build_start

        commit_only = timed(lambda: commit(1), samples)
        table.publish()
        # the same commit without a per-commit fsync: what the log itself costs, apart from the disk
        cat.log.db.execute("PRAGMA synchronous = NORMAL")
        commit_only_normal = timed(lambda: commit(1), samples)
        cat.log.db.execute("PRAGMA synchronous = FULL")
        table.publish()

        def commit_and_project() -> None:
            commit(1)
            table.publish()

        with_projection = timed(commit_and_project, samples)
        fresh = iter(files[1:])  # a file already in the table is refused: each append takes a new one
        end_to_end = timed(lambda: table.append_files([next(fresh)]), samples)
        out[str(size)] = {
            "log_commit_ms": percentiles(commit_only),
            "log_commit_synchronous_normal_ms": percentiles(commit_only_normal),
            "commit_and_sync_projection_ms": percentiles(with_projection),
            "append_files_end_to_end_ms": percentiles(end_to_end),
            "build_seconds": round(build_s, 2),
        }
        cat.close()
    return out


def bench_icelog_history(root: str, commits: int, samples: int, files: list[str]) -> dict[str, Any]:
    """icelog's append (data written, committed, projected) at the first commits and after ``commits``."""
    from engine import Catalog

    cat = Catalog.open(os.path.join(root, "icelog-history"))
    cat.create_namespace("db")
    table = cat.create_table("db.t", schema=small_table(0).schema)
    first = timed(lambda: table.append(small_table(1)), samples)
    for i in range(commits - samples):
        table.append(small_table(i))
    later = timed(lambda: table.append(small_table(2)), samples)
    cat.close()
    return {"append_first_commits_ms": percentiles(first), f"append_after_{commits}_commits_ms": percentiles(later)}


# ---------------------------------------------------------------- PyIceberg


def _pyiceberg_table(warehouse: str, name: str, schema: pa.Schema | None = None) -> Any:
    from pyiceberg.catalog.sql import SqlCatalog

    os.makedirs(warehouse, exist_ok=True)
    cat = SqlCatalog("bench", uri=f"sqlite:///{warehouse}/pyiceberg.db", warehouse=f"file://{warehouse}")
    try:
        cat.create_namespace("db")
    except Exception:  # noqa: BLE001 - already there from an earlier size
        pass
    return cat.create_table(f"db.{name}", schema=schema if schema is not None else small_table(0).schema)


def bench_pyiceberg(root: str, sizes: list[int], samples: int, files: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    cursor = 0
    for size in sizes:
        table = _pyiceberg_table(os.path.join(root, "pyiceberg"), f"t{size}")
        built = 0
        build_start = time.perf_counter()
        while built < size:
            n = min(BUILD_COMMIT_FILES, size - built)
            table.add_files(files[cursor:cursor + n])
            cursor += n
            built += n
        build_s = time.perf_counter() - build_start

        def add_one() -> None:
            nonlocal cursor
            table.add_files([files[cursor]])
            cursor += 1

        out[str(size)] = {"add_files_ms": percentiles(timed(add_one, samples)), "build_seconds": round(build_s, 2)}
    return out


def bench_pyiceberg_history(root: str, commits: int, samples: int) -> dict[str, Any]:
    table = _pyiceberg_table(os.path.join(root, "pyiceberg-history"), "history")
    first = timed(lambda: table.append(small_table(1)), samples)
    for i in range(commits - samples):
        table.append(small_table(i))
    later = timed(lambda: table.append(small_table(2)), samples)
    return {"append_first_commits_ms": percentiles(first), f"append_after_{commits}_commits_ms": percentiles(later)}


def row_delete_table(rows: int, seed: int = 7) -> pa.Table:
    """``rows`` rows: a sequential id, a uniform value in [0, 1) (1% of rows have value < 0.01), a category."""
    import pyarrow.compute as pc

    ids = pa.array(range(rows), pa.int64())
    value = pc.divide(pc.cast(pc.bit_wise_and(pc.multiply(ids, 2654435761), 0xFFFFFF), pa.float64()),
                      float(0x1000000))
    return pa.table({"id": ids, "value": value,
                     "category": pc.cast(pc.bit_wise_and(ids, 7), pa.string())})


def bench_row_delete(root: str, rows: int, files: int) -> dict[str, Any]:
    """A delete of the 1% of rows with value < 0.01, spread over every file: icelog's merge-on-read (position
    delete files) against PyIceberg's delete (which can only copy on write)."""
    from engine import Catalog

    data = row_delete_table(rows)
    step = rows // files
    where = "value < 0.01"
    expected = rows - int(pa.compute.sum(pa.compute.less(data.column("value"), 0.01)).as_py())
    out: dict[str, Any] = {"rows": rows, "files": files, "filter": where}

    cat = Catalog.open(os.path.join(root, "icelog-delete"))
    cat.create_namespace("db")
    t = cat.create_table("db.t", schema=data.schema, properties={"write.delete.mode": "merge-on-read"})
    for i in range(files):
        t.append(data.slice(i * step, step))
    start = time.perf_counter()
    snap = t.delete(where)
    out["icelog_merge_on_read_seconds"] = round(time.perf_counter() - start, 3)
    out["icelog_added_position_deletes"] = int(snap.summary_value("added-position-deletes") or 0)
    assert t.scan().count() == expected
    t.set_properties({"write.delete.mode": "copy-on-write"})
    t.manage_snapshots().rollback_to_snapshot(snap.parent_snapshot_id).commit()
    start = time.perf_counter()
    t.delete(where)
    out["icelog_copy_on_write_seconds"] = round(time.perf_counter() - start, 3)
    assert t.scan().count() == expected
    cat.close()

    table = _pyiceberg_table(os.path.join(root, "pyiceberg-delete"), "deletes", data.schema)
    for i in range(files):
        table.append(data.slice(i * step, step))
    start = time.perf_counter()
    table.delete(where)
    out["pyiceberg_copy_on_write_seconds"] = round(time.perf_counter() - start, 3)
    assert table.scan().to_arrow().num_rows == expected
    out["speedup_merge_on_read_vs_pyiceberg"] = round(
        out["pyiceberg_copy_on_write_seconds"] / out["icelog_merge_on_read_seconds"], 1)
    return out


def build_parser() -> argparse.ArgumentParser:
    """The options of ``icelog bench`` and ``tools/run bench`` (one parser for both)."""
    parser = argparse.ArgumentParser(prog="icelog bench", description=__doc__)
    parser.add_argument("--sizes", default="10,1000,10000", help="existing file counts (comma-separated)")
    parser.add_argument("--samples", type=int, default=50, help="timed appends per measurement")
    parser.add_argument("--history", type=int, default=200, help="commits before the 'after N commits' figure")
    parser.add_argument("--skip-pyiceberg", action="store_true")
    parser.add_argument("--delete-rows", type=int, default=1_000_000, help="rows of the row-delete table")
    parser.add_argument("--delete-files", type=int, default=10, help="data files of the row-delete table")
    parser.add_argument("--skip-operations", action="store_true", help="skip the row delete and compaction")
    parser.add_argument("--time-travel-events", type=int, default=100_000, help="log events of the as_of table")
    parser.add_argument("--scan-sizes", default="20000,100000", help="data files of the plan_files tables")
    parser.add_argument("--rest-clients", type=int, default=8, help="concurrent clients of the REST benchmark")
    parser.add_argument("--rest-commits", type=int, default=25, help="appends per REST client")
    parser.add_argument("--s3-history", default="10,200",
                        help="snapshots before each 1-file append figure on the loopback S3 server (comma-separated)")
    parser.add_argument("--s3-samples", type=int, default=20, help="timed appends per S3 figure")
    parser.add_argument("--skip-s3", action="store_true", help="skip the S3 append figures")
    parser.add_argument("--commits", type=int, default=1000,
                        help="10-row commits per system in the icelog / DuckLake / PyIceberg side-by-side (0 skips)")
    parser.add_argument("--writers", default="1,4,8",
                        help="concurrent writer counts of the commits-per-second figure on one table (empty skips)")
    parser.add_argument("--writer-commits", type=int, default=100, help="appends per Python API writer")
    parser.add_argument("--writer-rest-commits", type=int, default=20, help="appends per PyIceberg REST writer")
    parser.add_argument("--spark-write-rows", type=int, default=0,
                        help="rows of the tools.spark_write.write vs Spark's Iceberg writer figure (needs Java; the "
                             "issue's figure is 10000000; 0 skips it)")
    return parser


def main(argv: list[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",") if s]
    warnings.filterwarnings("ignore")
    root = tempfile.mkdtemp(prefix="icelog-bench-")
    try:
        needed = sum(sizes) + 3 * args.samples * len(sizes) + 10
        files = write_files(os.path.join(root, "files"), needed)
        result: dict[str, Any] = {
            "machine": {"python": platform.python_version(), "cpus": os.cpu_count(), "platform": platform.platform()},
            "settings": {"sizes": sizes, "samples": args.samples, "build_commit_files": BUILD_COMMIT_FILES,
                         "sqlite_synchronous": "FULL"},
            "icelog": {"append_1_file": bench_icelog(root, sizes, args.samples, files),
                       "history": bench_icelog_history(root, args.history, args.samples, files)},
        }
        if not args.skip_pyiceberg:
            result["pyiceberg"] = {"add_files_1_file": bench_pyiceberg(root, sizes, args.samples, files),
                                   "history": bench_pyiceberg_history(root, args.history, args.samples)}
            result["speedup"] = speedups(result, sizes, args.history)
        if args.commits > 0:
            from tools.bench_commits import SYSTEMS, run as bench_commits

            systems = [name for name in SYSTEMS if name != "pyiceberg" or not args.skip_pyiceberg]
            # their folders stay in root until the end: deleting thousands of files just before the next
            # benchmark would slow its file creation (see bench_commits.run)
            result["commits_side_by_side"] = bench_commits(args.commits, systems, root)
        writer_counts = [int(w) for w in args.writers.split(",") if w]
        if writer_counts:
            from tools.bench_throughput import run as bench_throughput

            result["commits_per_second_one_table"] = bench_throughput(
                os.path.join(root, "throughput"), writer_counts, args.writer_commits, args.writer_rest_commits)
        if not args.skip_operations:
            from tools.bench_compaction import bench_compaction

            if not args.skip_pyiceberg:
                result["row_delete_1_percent"] = bench_row_delete(root, args.delete_rows, args.delete_files)
            result["compaction_100_files"] = bench_compaction(os.path.join(root, "compaction"))
            from tools.bench_time_travel import bench_as_of

            result["as_of_version"] = bench_as_of(os.path.join(root, "time-travel"), events=args.time_travel_events)
            from tools.bench_scan import bench_plan_files

            scan_sizes = tuple(int(x) for x in args.scan_sizes.split(",") if x)
            result["plan_files"] = bench_plan_files(os.path.join(root, "scan"), scan_sizes,
                                                    pyiceberg=not args.skip_pyiceberg)
            from tools.bench_rest import bench_rest_commits

            result["rest_commits"] = bench_rest_commits(os.path.join(root, "rest"), args.rest_clients,
                                                        args.rest_commits)
        if not args.skip_s3:
            from tools.bench_s3 import bench_s3

            result["s3_append_1_file"] = bench_s3(os.path.join(root, "s3"),
                                                  [int(h) for h in args.s3_history.split(",") if h],
                                                  args.s3_samples, pyiceberg=not args.skip_pyiceberg)
        if args.spark_write_rows > 0:
            from tools.bench_spark_write import bench_spark_write

            result["spark_write"] = bench_spark_write(os.path.join(root, "spark-write"), args.spark_write_rows)
        json.dump(result, sys.stdout, indent=2)
        sys.stdout.write("\n")
    finally:
        shutil.rmtree(root, ignore_errors=True)


def speedups(result: dict[str, Any], sizes: list[int], history: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    ice = result["icelog"]["append_1_file"]
    py = result["pyiceberg"]["add_files_1_file"]
    for size in sizes:
        k = str(size)
        out[f"log_commit_vs_pyiceberg_add_files_p50_at_{k}"] = round(
            py[k]["add_files_ms"]["p50"] / ice[k]["log_commit_ms"]["p50"], 1)
        out[f"log_commit_normal_vs_pyiceberg_add_files_p50_at_{k}"] = round(
            py[k]["add_files_ms"]["p50"] / ice[k]["log_commit_synchronous_normal_ms"]["p50"], 1)
        out[f"commit_and_projection_vs_pyiceberg_add_files_p50_at_{k}"] = round(
            py[k]["add_files_ms"]["p50"] / ice[k]["commit_and_sync_projection_ms"]["p50"], 1)
    key = f"append_after_{history}_commits_ms"
    out[f"append_vs_pyiceberg_append_p50_after_{history}_commits"] = round(
        result["pyiceberg"]["history"][key]["p50"] / result["icelog"]["history"][key]["p50"], 1)
    return out


if __name__ == "__main__":
    main()
