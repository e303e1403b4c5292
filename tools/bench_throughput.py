"""Benchmark: commits per second on one table with 1, 4 and 8 concurrent writers. Prints JSON.

Layer: tools. Four kinds of writers, each appending 10-row batches (Parquet file included) to one shared table:
processes using icelog's Python API on one catalog folder (``Table.append`` with synchronous projection), threads
of one process doing the same with a catalog handle each (their commits share log transactions: group commit),
PyIceberg ``RestCatalog`` clients of ``icelog serve`` (PyIceberg writes the data file and manifests, the server
commits; a client whose commit is refused reloads the table and tries again, as Iceberg clients do), and DuckDB
clients of the same server (its iceberg extension, ``INSERT`` into the attached catalog). Every writer is started
and ready before the clock starts; the figure is the commits that landed over the wall time from the start signal
to the last writer finishing. The table's snapshot count is checked against the commits. The writers' CPU time
per commit (and, for REST, the server's) is reported beside it: on a machine of few cores it says whose work
bounds the figure.
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

from tools.bench_stats import file_create_us

SCHEMA = pa.schema([pa.field("id", pa.int64()), pa.field("writer", pa.int32()), pa.field("x", pa.float64())])


def batch_rows(writer: int, i: int) -> list[tuple[int, int, float]]:
    """Writer ``writer``'s ``i``-th batch: 10 rows (id, writer, x), ids unique across writers."""
    base = (writer * 1_000_000 + i) * 10
    return [(base + j, writer, j * 0.5) for j in range(10)]


def batch(writer: int, i: int) -> pa.Table:
    """:func:`batch_rows` as an Arrow table of :data:`SCHEMA`."""
    ids, writers, xs = zip(*batch_rows(writer, i))
    return pa.table({"id": pa.array(ids, pa.int64()), "writer": pa.array(writers, pa.int32()),
                     "x": pa.array(xs, pa.float64())}, schema=SCHEMA)


def _open_catalog(warehouse: str, catalog_dir: str | None = None) -> Any:
    """The benchmark's catalog: its log in ``catalog_dir`` when given, else in the warehouse."""
    from engine import Catalog

    return Catalog.open(catalog_dir, warehouse=warehouse) if catalog_dir else Catalog.open(warehouse)


def _api_writer(warehouse: str, commits: int, writer: int, ready: Any, go: Any, out: Any,
                catalog_dir: str | None = None) -> None:
    with _open_catalog(warehouse, catalog_dir) as catalog:
        table = catalog.load_table("bench.events")
        ready.put(writer)
        go.wait()
        cpu = time.process_time()
        for i in range(commits):
            table.append(batch(writer, i))
        out.put((writer, commits, 0, time.process_time() - cpu))


def _rest_writer(uri: str, token: str, commits: int, writer: int, ready: Any, go: Any, out: Any) -> None:
    import warnings

    warnings.filterwarnings("ignore")
    from pyiceberg.catalog.rest import RestCatalog
    from pyiceberg.exceptions import CommitFailedException

    catalog = RestCatalog("bench", uri=uri, token=token)
    table = catalog.load_table("bench.events")
    ready.put(writer)
    go.wait()
    cpu = time.process_time()
    refused = 0
    for i in range(commits):
        data = batch(writer, i)
        while True:
            try:
                table.append(data)
                break
            except CommitFailedException:
                refused += 1
                table = catalog.load_table("bench.events")
    out.put((writer, commits, refused, time.process_time() - cpu))


def _duckdb_rest_writer(uri: str, token: str, commits: int, writer: int, ready: Any, go: Any, out: Any) -> None:
    """A DuckDB 1.4.4 client of ``icelog serve`` (its iceberg extension attached to the REST catalog) inserting the
    same batches: a client whose own cost per commit is small, so the figure is the server's."""
    import duckdb

    from tools.bench_commits import duckdb_extension

    con = duckdb.connect()
    for name in ("httpfs", "avro", "iceberg"):
        con.execute(f"LOAD '{duckdb_extension(name)}'")
    con.execute(f"ATTACH 'warehouse' AS ice (TYPE iceberg, ENDPOINT '{uri}', AUTHORIZATION_TYPE 'oauth2', "
                f"TOKEN '{token}')")
    ready.put(writer)
    go.wait()
    cpu = time.process_time()
    for i in range(commits):
        # the rows as literals, made without Arrow: a DuckDB client process that also builds Arrow tables (or
        # inserts from a registered one) spent three times the CPU per INSERT here
        rows = ", ".join(f"({id_}, {w}, {x!r})" for id_, w, x in batch_rows(writer, i))
        con.execute(f"INSERT INTO ice.bench.events VALUES {rows}")
    out.put((writer, commits, 0, time.process_time() - cpu))
    con.close()


def _run(target: Any, args: tuple[Any, ...], writers: int, **kwargs: Any) -> tuple[float, int, int, float, float]:
    """Start ``writers`` processes of ``target(*args, writer, ready, go, out, **kwargs)``; (seconds, commits,
    refused, the writers' CPU seconds, this process's CPU seconds: the REST server's, which runs in a thread here)."""
    ctx = multiprocessing.get_context("spawn")
    ready, out, go = ctx.Queue(), ctx.Queue(), ctx.Event()
    procs = [ctx.Process(target=target, args=(*args, w, ready, go, out), kwargs=kwargs) for w in range(writers)]
    for p in procs:
        p.start()
    for _ in procs:
        ready.get(timeout=300)
    started, own_cpu = time.perf_counter(), time.process_time()
    go.set()
    results = [out.get(timeout=900) for _ in procs]
    elapsed, own_cpu = time.perf_counter() - started, time.process_time() - own_cpu
    for p in procs:
        p.join(timeout=60)
    return elapsed, sum(r[1] for r in results), sum(r[2] for r in results), sum(r[3] for r in results), own_cpu


def _fresh_table(warehouse: str, properties: dict[str, str] | None = None, catalog_dir: str | None = None) -> None:
    with _open_catalog(warehouse, catalog_dir) as catalog:
        catalog.create_namespace("bench")
        catalog.create_table("bench.events", SCHEMA, properties=properties)


def _landed(warehouse: str, catalog_dir: str | None = None) -> tuple[int, int]:
    with _open_catalog(warehouse, catalog_dir) as catalog:
        table = catalog.load_table("bench.events")
        return len(table.snapshots()), table.scan().count()


def bench_api(root: str, writer_counts: list[int], commits: int,
              fresh_catalog: Any = None) -> dict[str, Any]:
    """Python API processes on one table, per writer count; ``fresh_catalog(writers)`` gives a new (empty) log's
    location for each count (default: ``catalog.db`` in the warehouse)."""
    out: dict[str, Any] = {}
    for writers in writer_counts:
        warehouse = os.path.join(root, f"api-{writers}")
        catalog_dir = fresh_catalog(writers) if fresh_catalog is not None else None
        _fresh_table(warehouse, catalog_dir=catalog_dir)
        elapsed, landed, _, writers_cpu, _ = _run(_api_writer, (warehouse, commits), writers,
                                                  catalog_dir=catalog_dir)
        snapshots, rows = _landed(warehouse, catalog_dir)
        out[str(writers)] = {"writers": writers, "commits": landed, "seconds": round(elapsed, 3),
                             "commits_per_second": round(landed / elapsed, 1),
                             "writer_cpu_ms_per_commit": round(writers_cpu * 1000 / landed, 2),
                             "snapshots": snapshots, "rows": rows}
    return out


def _run_threads(target: Any, args: tuple[Any, ...], writers: int) -> float:
    """:func:`_run` with threads of this process instead of processes (the same writer functions); seconds."""
    import queue
    import threading

    ready: queue.Queue[int] = queue.Queue()
    out: queue.Queue[tuple[int, int, int, float]] = queue.Queue()
    go = threading.Event()
    threads = [threading.Thread(target=target, args=(*args, w, ready, go, out), daemon=True) for w in range(writers)]
    for t in threads:
        t.start()
    for _ in threads:
        ready.get(timeout=300)
    started = time.perf_counter()
    go.set()
    for _ in threads:
        out.get(timeout=900)
    return time.perf_counter() - started


def bench_threads(root: str, writer_counts: list[int], commits: int) -> dict[str, Any]:
    """Threads of one process, each with its own catalog handle, on one table: their commits share log transactions
    when they wait at once (group commit); ``commits_per_transaction`` says how many did on average."""
    from engine import Catalog

    out: dict[str, Any] = {}
    for writers in writer_counts:
        warehouse = os.path.join(root, f"threads-{writers}")
        _fresh_table(warehouse)
        with Catalog.open(warehouse) as catalog:
            before = catalog.log.group_commit_counts()
            elapsed = _run_threads(_api_writer, (warehouse, commits), writers)
            after = catalog.log.group_commit_counts()
        transactions, works = after[0] - before[0], after[1] - before[1]
        snapshots, rows = _landed(warehouse)
        landed = writers * commits
        out[str(writers)] = {"writers": writers, "commits": landed, "seconds": round(elapsed, 3),
                             "commits_per_second": round(landed / elapsed, 1), "log_transactions": transactions,
                             "commits_per_transaction": round(works / transactions, 2) if transactions else None,
                             "snapshots": snapshots, "rows": rows}
    return out


def bench_rest(root: str, writer_counts: list[int], commits: int,
               properties: dict[str, str] | None = None, client: str = "pyiceberg") -> dict[str, Any]:
    """Clients of one in-process ``icelog serve`` on one table: PyIceberg's ``RestCatalog`` (``client="pyiceberg"``)
    or DuckDB's iceberg extension (``"duckdb"``); the clients' and the server's CPU per commit say which side bounds
    the figure."""
    from tools.rest_server import running_server

    writer = {"pyiceberg": _rest_writer, "duckdb": _duckdb_rest_writer}[client]
    out: dict[str, Any] = {}
    for writers in writer_counts:
        warehouse = os.path.join(root, f"rest-{client}-{writers}-{len(properties or ())}")
        _fresh_table(warehouse, properties)
        with running_server(warehouse) as server:
            elapsed, landed, refused, clients_cpu, server_cpu = _run(writer, (server.uri, server.token, commits),
                                                                     writers)
        snapshots, rows = _landed(warehouse)
        out[str(writers)] = {"writers": writers, "commits": landed, "refused_and_retried": refused,
                             "seconds": round(elapsed, 3), "commits_per_second": round(landed / elapsed, 1),
                             "client_cpu_ms_per_commit": round(clients_cpu * 1000 / landed, 2),
                             "server_cpu_ms_per_commit": round(server_cpu * 1000 / landed, 2),
                             "snapshots": snapshots, "rows": rows}
    return out


def run(root: str, writer_counts: list[int], api_commits: int, rest_commits: int) -> dict[str, Any]:
    from projections.metadata_json import MAX_SNAPSHOTS

    os.makedirs(root, exist_ok=True)
    return {"file_create_us_before": file_create_us(root),
            "python_api": bench_api(root, writer_counts, api_commits),
            "python_api_threads_one_process": bench_threads(root, writer_counts, api_commits),
            "rest_pyiceberg": bench_rest(root, writer_counts, rest_commits),
            # PyIceberg deep-copies the whole table metadata several times per append, so its clients slow down
            # as snapshots pile up; with the published metadata listing only the newest 20 they do not
            "rest_pyiceberg_metadata_max_snapshots_20": bench_rest(root, writer_counts, rest_commits,
                                                                   {MAX_SNAPSHOTS: "20"}),
            # the same server with DuckDB clients, whose own CPU per commit is a tenth of PyIceberg's
            "rest_duckdb": bench_rest(root, writer_counts, rest_commits, client="duckdb")}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m tools.bench_throughput", description=__doc__)
    parser.add_argument("--writers", default="1,4,8", help="concurrent writer counts (comma-separated)")
    parser.add_argument("--api-commits", type=int, default=200, help="appends per Python API writer")
    parser.add_argument("--rest-commits", type=int, default=50, help="appends per PyIceberg REST client")
    args = parser.parse_args(argv)
    root = tempfile.mkdtemp(prefix="icelog-bench-throughput-")
    try:
        counts = [int(w) for w in args.writers.split(",") if w]
        json.dump(run(root, counts, args.api_commits, args.rest_commits), sys.stdout, indent=2)
        sys.stdout.write("\n")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
