"""Benchmark: 1-file appends on an S3 warehouse (moto's server on the loopback interface), icelog against
PyIceberg 0.12's SqlCatalog on the same server in the same run. Prints JSON.

Layer: tools. For each of icelog (commit with synchronous projection: data file, manifest, manifest list,
metadata.json, version hint) and PyIceberg (``table.append`` through a SqlCatalog on SQLite with an ``s3://``
warehouse), it builds the table up to each history size with 1-file appends, then times ``samples`` more appends
(p50, p95) and counts the S3 requests each append sends, through a counting proxy (tools/s3_server.py).

    python -m tools.bench_s3 --history 10,200 --samples 20
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
import warnings
from typing import Any, Callable

import pyarrow as pa

from tools.s3_server import LoopbackS3, S3Proxy


def _percentiles(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return {"p50": round(statistics.median(ordered), 2), "p95": round(p95, 2), "n": len(ordered)}


def _rows(i: int) -> pa.Table:
    return pa.table({"id": pa.array([i, i + 1], pa.int64()), "name": pa.array(["a", "b"])})


def _measure(append: Callable[[int], Any], proxy: S3Proxy, histories: list[int], samples: int) -> dict[str, Any]:
    """Append until each history size, then time ``samples`` appends and count their requests."""
    out: dict[str, Any] = {}
    done = 0
    for history in histories:
        while done < history:
            append(done)
            done += 1
        times: list[float] = []
        proxy.reset_counts()
        for _ in range(samples):
            start = time.perf_counter()
            append(done)
            times.append((time.perf_counter() - start) * 1000)
            done += 1
        requests = dict(proxy.requests)
        out[str(history)] = {"append_ms": _percentiles(times),
                             "requests_per_append": round(sum(requests.values()) / samples, 2),
                             "requests_by_method": {k: round(v / samples, 2) for k, v in sorted(requests.items())}}
    return out


def bench_s3(root: str, histories: list[int], samples: int, *, pyiceberg: bool = True) -> dict[str, Any]:
    from engine import Catalog

    schema = pa.schema([("id", pa.int64()), ("name", pa.string())])
    result: dict[str, Any] = {"server": "moto ThreadedMotoServer on 127.0.0.1, through a counting proxy",
                              "histories": histories, "samples": samples}
    with LoopbackS3() as server, S3Proxy(server.endpoint) as proxy:
        server.create_bucket("icelog-bench")
        props = {**server.properties(), "s3.endpoint": proxy.endpoint}
        with Catalog.open(os.path.join(root, "icelog-catalog"), warehouse="s3://icelog-bench/icelog",
                          properties=props) as cat:
            cat.create_namespace("db")
            table = cat.create_table("db.t", schema=schema)
            result["icelog"] = _measure(lambda i: table.append(_rows(i)), proxy, histories, samples)
        if pyiceberg:
            from pyiceberg.catalog.sql import SqlCatalog

            catalog = SqlCatalog("bench", uri=f"sqlite:///{os.path.join(root, 'pyiceberg.db')}",
                                 warehouse="s3://icelog-bench/pyiceberg", **props)
            catalog.create_namespace("db")
            py_table = catalog.create_table("db.t", schema=schema)
            result["pyiceberg"] = _measure(lambda i: py_table.append(_rows(i)), proxy, histories, samples)
            result["speedup_p50"] = {
                h: round(result["pyiceberg"][h]["append_ms"]["p50"] / result["icelog"][h]["append_ms"]["p50"], 1)
                for h in result["icelog"]}
    return result


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m tools.bench_s3", description=__doc__)
    parser.add_argument("--history", default="10,200", help="snapshots before each measurement (comma-separated)")
    parser.add_argument("--samples", type=int, default=20, help="timed appends per measurement")
    parser.add_argument("--skip-pyiceberg", action="store_true")
    args = parser.parse_args(argv)
    warnings.filterwarnings("ignore")
    with tempfile.TemporaryDirectory(prefix="icelog-bench-s3-") as root:
        histories = [int(h) for h in args.history.split(",") if h]
        result = bench_s3(root, histories, args.samples, pyiceberg=not args.skip_pyiceberg)
    json.dump(result, sys.stdout, indent=2)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
