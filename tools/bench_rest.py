"""Benchmark: commit latency of icelog's Iceberg REST server under concurrent clients. Prints JSON.

Layer: tools. Starts ``icelog serve`` on a fresh warehouse, then runs N client processes, each a
PyIceberg ``RestCatalog`` appending small Arrow batches (PyIceberg writes the Parquet file, the
manifest and the manifest list, then POSTs the commit). The figure is the commit request's round
trip as the client sees it (``requests``' ``elapsed``: request sent to response headers), which
covers the server's whole commit: checking the requirements, reading the client's manifests,
the log's compare-and-swap and publishing the new metadata. Two shapes: every client on its own
table, and every client on one shared table (conflicts come back as 409 and the client retries
on the refreshed table, as Iceberg clients do).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import shutil
import sys
import tempfile
import time
from typing import Any

import pyarrow as pa

from tools.bench_stats import percentiles


def _client(uri: str, token: str, table_name: str, commits: int, seed: int, out: Any) -> None:
    """One client process: ``commits`` appends; puts (commit latencies ms, append latencies ms, retries)."""
    import warnings

    warnings.filterwarnings("ignore")
    from pyiceberg.catalog.rest import RestCatalog
    from pyiceberg.exceptions import CommitFailedException

    catalog = RestCatalog("bench", uri=uri, token=token)
    commit_ms: list[float] = []

    def record(response: Any, *args: Any, **kwargs: Any) -> None:
        request = response.request
        if request.method == "POST" and "/tables/" in request.url and not request.url.endswith("/metrics"):
            commit_ms.append(response.elapsed.total_seconds() * 1000)

    catalog._session.hooks["response"].append(record)
    append_ms: list[float] = []
    retries = 0
    for i in range(commits):
        batch = pa.table({"id": pa.array([seed * 1_000_000 + i], pa.int64()), "client": pa.array([seed], pa.int32())})
        started = time.perf_counter()
        while True:
            table = catalog.load_table(table_name)
            try:
                table.append(batch)
                break
            except CommitFailedException:
                retries += 1
        append_ms.append((time.perf_counter() - started) * 1000)
    out.put((commit_ms, append_ms, retries))


def _run_clients(uri: str, token: str, tables: list[str], commits: int) -> dict[str, Any]:
    ctx = multiprocessing.get_context("spawn")
    out = ctx.Queue()
    procs = [ctx.Process(target=_client, args=(uri, token, name, commits, i, out)) for i, name in enumerate(tables)]
    started = time.perf_counter()
    for p in procs:
        p.start()
    results = [out.get(timeout=600) for _ in procs]
    for p in procs:
        p.join(timeout=60)
    wall = time.perf_counter() - started
    commit_ms = [x for r in results for x in r[0]]
    append_ms = [x for r in results for x in r[1]]
    return {"clients": len(tables), "appends": len(append_ms), "commit_requests": len(commit_ms),
            "conflicts_retried": sum(r[2] for r in results),
            "commit_request_ms": percentiles(commit_ms), "pyiceberg_append_ms": percentiles(append_ms),
            "appends_per_second": round(len(append_ms) / wall, 1)}


def bench_rest_commits(root: str, clients: int = 8, commits: int = 25) -> dict[str, Any]:
    """Commit latency with ``clients`` concurrent PyIceberg clients, each doing ``commits`` appends."""
    from engine import Catalog
    from tools.rest_server import running_server

    warehouse = os.path.join(root, "warehouse")
    schema = pa.schema([pa.field("id", pa.int64()), pa.field("client", pa.int32())])
    with Catalog.open(warehouse) as catalog:
        catalog.create_namespace("db")
        for i in range(clients):
            catalog.create_table(f"db.own_{i}", schema=schema)
        catalog.create_table("db.shared", schema=schema)
    with running_server(warehouse) as server:
        own = _run_clients(server.uri, server.token, [f"db.own_{i}" for i in range(clients)], commits)
        shared = _run_clients(server.uri, server.token, ["db.shared"] * clients, commits)
    with Catalog.open(warehouse) as catalog:
        landed = len(catalog.load_table("db.shared").snapshots())
    shared["snapshots_landed"] = landed
    return {"one_table_per_client": own, "one_shared_table": shared}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m tools.bench_rest", description=__doc__)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--commits", type=int, default=25, help="appends per client")
    args = parser.parse_args(argv)
    root = tempfile.mkdtemp(prefix="icelog-bench-rest-")
    try:
        json.dump({"rest_commits": bench_rest_commits(root, args.clients, args.commits)}, sys.stdout, indent=2)
        sys.stdout.write("\n")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
