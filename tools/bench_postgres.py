"""Benchmark: the log on SQLite against the log on PostgreSQL, and PyIceberg's SqlCatalog on the same PostgreSQL
server, in one run. Prints JSON.

Layer: tools. Figures: the latency (p50, p95, in ms) of a 10-row append (Parquet file, commit and synchronous
projection) over ``--commits`` commits on each, and commits per second on one table with 1, 4 and 8 concurrent
writer processes (icelog's Python API) on each log. The PostgreSQL server is a throwaway one on this machine
(``tools.postgres_server``), or the one ``--url`` names (each figure gets a new database there, dropped after).

    python -m tools.bench_postgres [--commits 200] [--writers 1,4,8] [--writer-commits 50] [--url URL]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import sys
import tempfile
import uuid
import warnings
from collections.abc import Iterator
from typing import Any

from tools.bench_commits import batch, bench_icelog, run_commits
from tools.bench_throughput import bench_api


@contextlib.contextmanager
def _server(url: str | None) -> Iterator[str]:
    if url:
        yield url
        return
    from tools.postgres_server import LocalPostgres

    with LocalPostgres() as server:
        yield server.url


class _Databases:
    """New, empty databases on one server (each figure starts from an empty log), dropped at the end."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.made: list[str] = []

    def new(self) -> str:
        import psycopg

        name = f"icelog_bench_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name}")
        self.made.append(name)
        return self.url.rsplit("/", 1)[0] + "/" + name

    def drop_all(self) -> None:
        import psycopg

        with psycopg.connect(self.url, autocommit=True) as conn:
            for name in self.made:
                conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def pyiceberg_latency(root: str, commits: int, url: str) -> dict[str, Any]:
    from pyiceberg.catalog.sql import SqlCatalog

    warnings.filterwarnings("ignore")
    warehouse = os.path.join(root, "pyiceberg")
    os.makedirs(warehouse)
    catalog = SqlCatalog("bench", uri=url.replace("postgresql://", "postgresql+psycopg://", 1),
                         warehouse=f"file://{warehouse}")
    catalog.create_namespace("bench")
    table = catalog.create_table("bench.events", batch(0).schema)
    result = run_commits(table.append, commits)
    result["rows"] = catalog.load_table("bench.events").scan().to_arrow().num_rows
    return result


def run(commits: int, writer_counts: list[int], writer_commits: int, url: str | None) -> dict[str, Any]:
    root = tempfile.mkdtemp(prefix="icelog-bench-postgres-")
    try:
        with _server(url) as server_url:
            databases = _Databases(server_url)
            try:
                out: dict[str, Any] = {"commits": commits, "rows_per_commit": 10, "append_latency_ms": {
                    "icelog_sqlite": bench_icelog(os.path.join(root, "sqlite"), commits),
                    "icelog_postgresql": bench_icelog(os.path.join(root, "postgresql"), commits, databases.new()),
                    "pyiceberg_sqlcatalog_postgresql": pyiceberg_latency(root, commits, databases.new()),
                }}
                out["commits_per_second_one_table"] = {
                    "icelog_sqlite": bench_api(os.path.join(root, "api-sqlite"), writer_counts, writer_commits),
                    "icelog_postgresql": bench_api(os.path.join(root, "api-postgresql"), writer_counts,
                                                   writer_commits, fresh_catalog=lambda _: databases.new()),
                }
                return out
            finally:
                databases.drop_all()
    finally:
        shutil.rmtree(root, ignore_errors=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m tools.bench_postgres", description=__doc__)
    parser.add_argument("--commits", type=int, default=200, help="10-row appends per latency figure")
    parser.add_argument("--writers", default="1,4,8", help="concurrent writer counts (comma-separated)")
    parser.add_argument("--writer-commits", type=int, default=50, help="appends per writer process")
    parser.add_argument("--url", help="an existing PostgreSQL server (postgresql://user@host:port/db), on which "
                                      "new databases are made and dropped; default: a throwaway local server")
    args = parser.parse_args(argv)
    counts = [int(w) for w in args.writers.split(",") if w]
    json.dump(run(args.commits, counts, args.writer_commits, args.url), sys.stdout, indent=2)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
