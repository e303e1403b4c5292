"""Bench: reading a table, full and filtered, icelog against DuckDB 1.4.4 (``iceberg_scan``) and PyIceberg 0.12 on
the same published metadata. Prints JSON.

Layer: tools (uses engine's public API, duckdb and pyiceberg as readers).

The table: ``id long, cat string, x double`` (``cat`` one of 20 values, ``x`` uniform in [0, 1)), ``--rows`` rows in
``--files`` appends (one data file each), then 1% of the rows deleted by merge-on-read position deletes (one file
per data file). Each reader materialises the result as an Arrow table: the full scan (every column of every live
row) and ``cat = 'c00' and x < 0.1`` (about 0.5% of the rows), each the best of ``--repeat`` runs. icelog also
reports the Arrow memory pool's peak during one full scan (in a fresh process) against the result's size.

    python -m tools.bench_scan_read [--rows 5000000] [--files 50] [--repeat 3] [root]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from typing import Any, Callable

SELECTIVE = "cat = 'c00' and x < 0.1"
CATEGORIES = 20


def build(root: str, rows: int, files: int) -> str:
    """The table under ``root``; returns its published metadata location."""
    import numpy as np
    import pyarrow as pa

    from engine import Catalog

    rng = np.random.default_rng(7)
    per_file = rows // files
    with Catalog.open(os.path.join(root, "wh")) as cat:
        cat.create_namespace("db")
        t = cat.create_table("db.t", schema=pa.schema([("id", pa.int64()), ("cat", pa.string()),
                                                       ("x", pa.float64())]),
                             properties={"write.delete.mode": "merge-on-read"})
        cats = pa.array([f"c{i:02d}" for i in range(CATEGORIES)])
        for f in range(files):
            ids = np.arange(f * per_file, (f + 1) * per_file, dtype=np.int64)
            t.append(pa.table({"id": ids, "cat": cats.take(pa.array(ids % CATEGORIES)),
                               "x": rng.random(per_file)}))
        with t.row_delta() as delta:  # every hundredth row of every file
            delta.add_position_deletes({path: list(range(42, per_file, 100))
                                        for path in t.inspect.files().column("file_path").to_pylist()})
        return t.metadata_location


def best(fn: Callable[[], Any], repeat: int) -> tuple[float, Any]:
    times, out = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - start)
    return round(min(times), 3), out


def _peak_of_full_scan(root: str) -> tuple[int, int]:
    """The Arrow memory pool's peak during one full scan in a fresh process, and the result's size."""
    code = ("import json, sys, pyarrow as pa\n"
            "from engine import Catalog\n"
            "with Catalog.open(sys.argv[1]) as cat:\n"
            "    table = cat.load_table('db.t').scan().to_arrow()\n"
            "print(json.dumps([pa.default_memory_pool().max_memory(), table.nbytes]))\n")
    done = subprocess.run([sys.executable, "-c", code, os.path.join(root, "wh")], capture_output=True, text=True,
                          check=True, cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    peak, size = json.loads(done.stdout)
    return int(peak), int(size)


def run(root: str, rows: int, files: int, repeat: int) -> dict[str, Any]:
    from engine import Catalog

    metadata = build(root, rows, files)
    result: dict[str, Any] = {"rows": rows, "files": files, "selective_filter": SELECTIVE}
    with Catalog.open(os.path.join(root, "wh")) as cat:
        t = cat.load_table("db.t")
        full_s, full_rows = best(lambda: t.scan().to_arrow().num_rows, repeat)
        sel_s, sel_rows = best(lambda: t.scan(SELECTIVE).to_arrow().num_rows, repeat)
    peak, result_bytes = _peak_of_full_scan(root)
    result["icelog"] = {"full_seconds": full_s, "selective_seconds": sel_s, "full_rows": full_rows,
                        "selective_rows": sel_rows, "result_bytes": result_bytes, "pool_peak_bytes": peak}

    from tests.conftest import duckdb_connect

    con = duckdb_connect()
    scan = f"iceberg_scan('{metadata.removeprefix('file://')}')"
    full_s, n_full = best(lambda: con.execute(f"SELECT * FROM {scan}").fetch_arrow_table().num_rows, repeat)
    sel_s, n_sel = best(lambda: con.execute(f"SELECT * FROM {scan} WHERE {SELECTIVE}").fetch_arrow_table().num_rows,
                        repeat)
    result["duckdb"] = {"full_seconds": full_s, "selective_seconds": sel_s, "full_rows": n_full,
                        "selective_rows": n_sel}
    con.close()

    from pyiceberg.expressions import And, EqualTo, LessThan
    from pyiceberg.table import StaticTable

    static = StaticTable.from_metadata(metadata)
    py_filter = And(EqualTo("cat", "c00"), LessThan("x", 0.1))
    full_s, n_full = best(lambda: static.scan().to_arrow().num_rows, repeat)
    sel_s, n_sel = best(lambda: static.scan(row_filter=py_filter).to_arrow().num_rows, repeat)
    result["pyiceberg"] = {"full_seconds": full_s, "selective_seconds": sel_s, "full_rows": n_full,
                           "selective_rows": n_sel}
    ice, duck = result["icelog"], result["duckdb"]
    result["ratios"] = {"icelog_vs_duckdb_full": round(ice["full_seconds"] / max(duck["full_seconds"], 1e-9), 2),
                        "icelog_vs_duckdb_selective":
                            round(ice["selective_seconds"] / max(duck["selective_seconds"], 1e-9), 2),
                        "icelog_peak_vs_result": round(ice["pool_peak_bytes"] / max(ice["result_bytes"], 1), 2)}
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=5_000_000)
    parser.add_argument("--files", type=int, default=50)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("root", nargs="?", help="a folder for the table (default: a temporary one)")
    args = parser.parse_args(argv)
    if args.root:
        print(json.dumps(run(args.root, args.rows, args.files, args.repeat), indent=2))
        return 0
    with tempfile.TemporaryDirectory(prefix="icelog-bench-scan-") as root:
        print(json.dumps(run(root, args.rows, args.files, args.repeat), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
