"""Benchmark: 10-row commits, icelog against DuckLake and PyIceberg, the systems in turns. Prints JSON.

Layer: tools. Each system gets a fresh folder and commits the same 10-row Arrow batches to one
table, ``--commits`` times in one run, Parquet file included: icelog's ``Table.append`` with
synchronous projection (manifest, manifest list, metadata.json and pointer published before it
returns), DuckLake's ``INSERT`` (the ``duckdb-ext-ducklake`` extension, a DuckDB file as its
catalog, data files in a local folder), and PyIceberg's ``table.append`` on its SqlCatalog (SQLite).
The systems take turns, one commit each, so a machine whose speed changes during the run (a virtual
machine whose page cache grows into memory it never touched writes files several times slower) changes
every system's figures alike. For each: p50 and p95 of the first and the last 100 commits, in
milliseconds, and the ratio of the last p50 to the first (flat is 1.0); the same ratio of the CPU time
the process spent per commit.
"""

from __future__ import annotations

import argparse
import contextlib
import glob
import json
import os
import shutil
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import attrs
import pyarrow as pa

from tools.bench_stats import percentiles

WINDOW = 100


def batch(i: int) -> pa.Table:
    ids = pa.array(range(i * 10, i * 10 + 10), pa.int64())
    return pa.table({"id": ids, "name": pa.array([f"row-{n}" for n in range(i * 10, i * 10 + 10)]),
                     "x": pa.array([n * 0.5 for n in range(10)], pa.float64())})


@attrs.frozen
class Committer:
    """One system's table, open: ``commit(batch)`` commits a batch, ``rows()`` counts the table's rows."""

    commit: Callable[[pa.Table], Any]
    rows: Callable[[], int]


def run_commits(commit: Callable[[pa.Table], Any], commits: int) -> dict[str, Any]:
    """Wall-clock milliseconds per commit, p50 and p95 of the first and last window, and the CPU milliseconds this
    process spent per commit (p50 of each window): a second view when the machine's speed changes during a run,
    though CPU time follows that speed too (appending to an old and a new table in turns tells growth best)."""
    return run_in_turns({"one": commit}, commits)["one"]


def run_in_turns(commits_of: dict[str, Callable[[pa.Table], Any]], commits: int) -> dict[str, dict[str, Any]]:
    """:func:`run_commits` for several systems at once: commit ``i`` of each system, then commit ``i + 1`` of each."""
    samples: dict[str, list[float]] = {name: [] for name in commits_of}
    cpu_samples: dict[str, list[float]] = {name: [] for name in commits_of}
    for i in range(commits):
        data = batch(i)
        for name, commit in commits_of.items():
            started, cpu_started = time.perf_counter(), time.process_time()
            commit(data)
            samples[name].append((time.perf_counter() - started) * 1000)
            cpu_samples[name].append((time.process_time() - cpu_started) * 1000)
    return {name: _summary(samples[name], cpu_samples[name]) for name in commits_of}


def _summary(samples: list[float], cpu_samples: list[float]) -> dict[str, Any]:
    window = min(WINDOW, len(samples))
    first, last = percentiles(samples[:window]), percentiles(samples[-window:])
    cpu_first, cpu_last = percentiles(cpu_samples[:window])["p50"], percentiles(cpu_samples[-window:])["p50"]
    return {"commits": len(samples), f"first_{window}": first, f"last_{window}": last,
            "last_over_first_p50": round(last["p50"] / first["p50"], 2) if first["p50"] else None,
            "cpu_ms_p50": {f"first_{window}": cpu_first, f"last_{window}": cpu_last},
            "cpu_last_over_first_p50": round(cpu_last / cpu_first, 2) if cpu_first else None}


@contextlib.contextmanager
def icelog_table(root: str, catalog_dir: str | None = None) -> Iterator[Committer]:
    """icelog's appends; the log in ``catalog_dir`` (a folder, or a ``postgresql://`` URL; default ``<root>/catalog``)."""
    from engine import Catalog

    catalog = Catalog.open(catalog_dir or os.path.join(root, "catalog"), warehouse=os.path.join(root, "warehouse"))
    try:
        catalog.create_namespace("bench")
        table = catalog.create_table("bench.events", batch(0).schema)
        yield Committer(commit=table.append, rows=lambda: table.scan().count())
    finally:
        catalog.close()


def bench_icelog(root: str, commits: int, catalog_dir: str | None = None) -> dict[str, Any]:
    """:func:`run_commits` of icelog's appends (see :func:`icelog_table`)."""
    with icelog_table(root, catalog_dir) as table:
        result = run_commits(table.commit, commits)
        result["rows"] = table.rows()
        return result


def duckdb_extension(name: str) -> str:
    """The file of DuckDB 1.4.4's extension ``name`` as its PyPI package (``duckdb-ext-<name>``) installs it."""
    import duckdb_ext  # type: ignore[import-not-found]

    found = [path for base in duckdb_ext.__path__
             for path in glob.glob(os.path.join(base, "extensions", "v1.4.4", "*", f"{name}.duckdb_extension"))]
    if not found:
        raise RuntimeError(f"duckdb-ext-{name} 1.4.4 is not installed (pip install -e .[test])")
    return found[0]


@contextlib.contextmanager
def ducklake_table(root: str) -> Iterator[Committer]:
    import duckdb

    con = duckdb.connect()
    try:
        con.execute(f"LOAD '{duckdb_extension('ducklake')}'")
        data_path = os.path.join(root, "data") + os.sep
        con.execute(f"ATTACH 'ducklake:{os.path.join(root, 'catalog.ducklake')}' AS lake (DATA_PATH '{data_path}')")
        con.execute("CREATE TABLE lake.events (id BIGINT, name VARCHAR, x DOUBLE)")

        def insert(data: pa.Table) -> None:
            con.register("batch", data)
            con.execute("INSERT INTO lake.events SELECT * FROM batch")
            con.unregister("batch")

        yield Committer(commit=insert, rows=lambda: con.execute("SELECT count(*) FROM lake.events").fetchone()[0])
    finally:
        con.close()


@contextlib.contextmanager
def pyiceberg_table(root: str) -> Iterator[Committer]:
    from pyiceberg.catalog.sql import SqlCatalog

    warnings.filterwarnings("ignore")
    warehouse = os.path.join(root, "warehouse")
    os.makedirs(warehouse)
    catalog = SqlCatalog("bench", uri=f"sqlite:///{os.path.join(root, 'catalog.db')}",
                         warehouse=f"file://{warehouse}")
    catalog.create_namespace("bench")
    table = catalog.create_table("bench.events", batch(0).schema)

    def append(data: pa.Table) -> None:
        table.append(data)

    yield Committer(commit=append, rows=lambda: catalog.load_table("bench.events").scan().to_arrow().num_rows)


SYSTEMS: dict[str, Callable[[str], contextlib.AbstractContextManager[Committer]]] = {
    "icelog": icelog_table, "ducklake": ducklake_table, "pyiceberg": pyiceberg_table}


def run(commits: int, systems: list[str], parent: str | None = None) -> dict[str, Any]:
    """The systems' commits in turns, each system in a folder of its own; the folders are deleted only once every
    system is done (or left in ``parent`` for its owner to delete, after the benchmarks that follow). An ext4
    without a journal (this project's test machine) skips inodes freed in the last minutes when it makes a file:
    after thousands of files were deleted, each new file took 0.1-0.35 ms instead of 0.013 for minutes."""
    out: dict[str, Any] = {"commits": commits, "rows_per_commit": 10, "systems_in_turns": True}
    roots: list[str] = []
    try:
        with contextlib.ExitStack() as stack:
            tables: dict[str, Committer] = {}
            for name in systems:
                roots.append(tempfile.mkdtemp(prefix=f"icelog-bench-commits-{name}-", dir=parent))
                tables[name] = stack.enter_context(SYSTEMS[name](roots[-1]))
            results = run_in_turns({name: table.commit for name, table in tables.items()}, commits)
            for name, table in tables.items():
                out[name] = {**results[name], "rows": table.rows()}
    finally:
        if parent is None:
            for root in roots:
                shutil.rmtree(root, ignore_errors=True)
    if "icelog" in out and "ducklake" in out:
        window = f"last_{min(WINDOW, commits)}"
        out["icelog_p50_over_ducklake_p50"] = {
            key: round(out["icelog"][key]["p50"] / out["ducklake"][key]["p50"], 2)
            for key in (f"first_{min(WINDOW, commits)}", window)}
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="icelog bench-commits", description=__doc__)
    parser.add_argument("--commits", type=int, default=1000, help="commits per system (the systems commit in turns)")
    parser.add_argument("--systems", default=",".join(SYSTEMS), help="comma-separated: " + ", ".join(SYSTEMS))
    args = parser.parse_args(argv)
    systems = [s for s in args.systems.split(",") if s]
    unknown = [s for s in systems if s not in SYSTEMS]
    if unknown:
        parser.error(f"unknown systems: {', '.join(unknown)}")
    json.dump(run(args.commits, systems), sys.stdout, indent=2)
    print()


if __name__ == "__main__":
    main()
