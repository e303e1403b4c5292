"""Bench: ``table.as_of(version=N)`` on a table with 100,000 log events (issue 4's target: under 50 ms).

Layer: tools (uses engine's public API and the state store; writes a warehouse under the folder it is given).

The table is built cheaply: commits of 1,000 ``set-properties`` events each (keys cycle over a few names, so the
state stays small and the figure measures reaching a version, not folding huge states), a small append in the
middle so there is data to read, then the state store loads every 100th version once, which writes the
checkpoints a long-lived table accumulates as it is loaded. The timing opens a new Catalog (cold: no cached
states) and travels to 20 random versions; a time travel by timestamp and one scan of the past are timed too.

::

    from tools.bench_time_travel import bench_as_of
    bench_as_of("/tmp/bench")   # {"events": 100001, "as_of_ms": {"p50": ..., "p95": ...}, ...}

Run alone with ``python -m tools.bench_time_travel [root]`` (prints JSON).
"""

from __future__ import annotations

import json
import os
import random
import statistics
import sys
import tempfile
import time
from typing import Any

import pyarrow as pa

EVENTS = 100_000
EVENTS_PER_COMMIT = 1_000
SAMPLES = 20
KEYS = 8


def _ms(seconds: float) -> float:
    return round(seconds * 1000, 3)


def _percentiles(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    p95 = ordered[min(len(ordered) - 1, max(0, round(0.95 * len(ordered)) - 1))]
    return {"p50": _ms(statistics.median(ordered)), "p95": _ms(p95), "max": _ms(ordered[-1])}


def build_table(root: str, events: int = EVENTS) -> tuple[str, int]:
    """A warehouse under ``root`` with ``db.history``: ``events`` property events plus a create and an append.
    Returns (warehouse, head version)."""
    from engine import Catalog
    from engine.state.events import PropertiesSet

    warehouse = os.path.join(root, "warehouse")
    cat = Catalog.open(warehouse, synchronous="OFF", project=False)
    try:
        cat.create_namespace("db")
        t = cat.create_table("db.history", pa.schema([pa.field("id", pa.int64())]))
        commits = max(1, events // EVENTS_PER_COMMIT)
        for c in range(commits):
            t.commit_events(lambda base, ctx, c=c: [PropertiesSet(updates={f"key-{i % KEYS}": f"{c}-{i}"})
                                                    for i in range(EVENTS_PER_COMMIT)])
            if c == commits // 2:
                t.append(pa.table({"id": pa.array(range(100), pa.int64())}))
        head = cat.log.head(t.uuid)
        for version in range(100, head + 1, 100):  # the checkpoints loads write as they cross each 100
            cat.store.table(t.uuid, version)
        return warehouse, head
    finally:
        cat.close()


def bench_as_of(root: str, events: int = EVENTS, samples: int = SAMPLES, seed: int = 7) -> dict[str, Any]:
    """Build the table under ``root`` and time ``as_of`` on it from a freshly opened catalog."""
    from engine import Catalog

    started = time.perf_counter()
    warehouse, head = build_table(root, events)
    build_seconds = time.perf_counter() - started
    rng = random.Random(seed)
    versions = [rng.randint(1, head) for _ in range(samples)]
    cat = Catalog.open(warehouse)
    try:
        t = cat.load_table("db.history")
        checkpoints = cat.log.db.execute("SELECT count(*) FROM checkpoints WHERE stream = ?", [t.uuid]).fetchone()[0]
        timings = []
        for version in versions:
            began = time.perf_counter()
            h = t.as_of(version=version)
            timings.append(time.perf_counter() - began)
            assert h.version == version
        mid_time = cat.log.read_stream(t.uuid, after_version=head * 3 // 4, up_to_version=head * 3 // 4 + 1)[0].time_ms
        began = time.perf_counter()
        by_time = t.as_of(time=mid_time)
        as_of_time_ms = _ms(time.perf_counter() - began)
        began = time.perf_counter()
        rows = by_time.scan().count()
        scan_ms = _ms(time.perf_counter() - began)
    finally:
        cat.close()
    return {
        "events": head,
        "events_per_commit": EVENTS_PER_COMMIT,
        "checkpoints": checkpoints,
        "build_seconds": round(build_seconds, 2),
        "samples": samples,
        "as_of_ms": _percentiles(timings),
        "as_of_time_ms": as_of_time_ms,
        "scan_past_ms": scan_ms,
        "scan_past_rows": rows,
        "target_ms": 50,
    }


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if argv:
        result = bench_as_of(argv[0])
    else:
        with tempfile.TemporaryDirectory(prefix="icelog-bench-tt-") as root:
            result = bench_as_of(root)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
