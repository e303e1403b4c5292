"""Bench: a 100-file compaction. Builds a table of 100 small data files with merge-on-read deletes on some of
them, then times ``rewrite_data_files`` (bin-pack) end to end: planning, reading with deletes applied,
writing, the commit and its projection.

Layer: tools (uses engine's public API; writes a warehouse under the folder it is given).

::

    from tools.bench_compaction import bench_compaction
    bench_compaction("/tmp/bench")   # {"files_before": 100, "files_after": 4, "seconds": 0.4, ...}

Run alone with ``python -m tools.bench_compaction [root]`` (prints JSON).
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from typing import Any

import pyarrow as pa

FILES = 100
ROWS_PER_FILE = 200
PARTS = ("a", "b", "c", "d")


def _rows(start: int, part: str) -> pa.Table:
    ids = list(range(start, start + ROWS_PER_FILE))
    return pa.table({"id": pa.array(ids, pa.int64()), "part": [part] * len(ids),
                     "value": pa.array([i * 0.5 for i in ids], pa.float64()),
                     "name": pa.array([f"name-{i % 97}" for i in ids], pa.string())})


def bench_compaction(root: str) -> dict[str, Any]:
    """Build the 100-file table under ``root`` and time one bin-pack compaction of it.

    :param root: a folder for the warehouse (created when absent; the table goes into ``root/compaction``)
    :returns: ``files_before`` / ``files_after`` (live data files), ``seconds`` (the compaction), and
        ``delete_files_before``, ``rows``, ``build_seconds`` for context
    """
    from engine import Catalog
    from engine.model.data_file import DataFileContent

    warehouse = os.path.join(root, "compaction")
    started = time.perf_counter()
    with Catalog.open(warehouse, project=False) as cat:
        cat.create_namespace("db")
        t = cat.create_table("db.t", schema=_rows(0, "a").schema, partition_by=["part"],
                             properties={"write.delete.mode": "merge-on-read"})
        for i in range(FILES):
            t.append(_rows(i * ROWS_PER_FILE, PARTS[i % len(PARTS)]))
        # deletes on every 5th file: a few rows each, as position delete files
        hit = [i * ROWS_PER_FILE + k for i in range(0, FILES, 5) for k in (3, 17, 101)]
        t.delete(f"id in ({', '.join(map(str, hit))})")
        cat.publish()
    build_seconds = time.perf_counter() - started

    with Catalog.open(warehouse, project=True) as cat:
        t = cat.load_table("db.t")

        def live() -> list:
            snap = t.current_snapshot()
            return cat.store.live_files(t.state, snap.snapshot_id) if snap is not None else []

        before = live()
        started = time.perf_counter()
        t.rewrite_data_files()
        seconds = time.perf_counter() - started
        after = live()
        rows = t.scan().count()
    return {
        "files_before": sum(f.content == DataFileContent.DATA for f in before),
        "files_after": sum(f.content == DataFileContent.DATA for f in after),
        "delete_files_before": sum(f.content != DataFileContent.DATA for f in before),
        "delete_files_after": sum(f.content != DataFileContent.DATA for f in after),
        "rows": rows,
        "seconds": round(seconds, 3),
        "build_seconds": round(build_seconds, 3),
    }


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    if args:
        print(json.dumps(bench_compaction(args[0]), indent=2))
        return
    with tempfile.TemporaryDirectory(prefix="icelog-bench-compaction-") as root:
        print(json.dumps(bench_compaction(root), indent=2))


if __name__ == "__main__":
    main()
