"""Summary statistics shared by the benchmarks: p50 and p95 of a list of timings, and what making a file costs on
the disk the benchmark runs on.

Layer: tools. Imports nothing of ours, so every benchmark (tools/bench.py and the bench_* modules it
runs) can use it without importing another benchmark back.
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time


def percentiles(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)

    def pick(q: float) -> float:
        return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]

    return {"p50": round(statistics.median(ordered), 3), "p95": round(pick(0.95), 3), "n": len(ordered)}


def file_create_us(folder: str, files: int = 200) -> float:
    """Microseconds one empty file takes to make in a new folder under ``folder`` (the median of ``files``); the
    files stay for the caller to delete with ``folder``. A commit makes four or five files, so this says how much
    of a figure is the disk's: on an ext4 without a journal (this project's test machine), a file made in the
    minutes after thousands were deleted took 0.4-1 ms instead of 0.02-0.07."""
    probe = tempfile.mkdtemp(prefix="file-create-probe-", dir=folder)
    times = []
    for i in range(files):
        started = time.perf_counter()
        os.close(os.open(os.path.join(probe, f"f{i}"), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
        times.append(time.perf_counter() - started)
    return round(statistics.median(times) * 1e6, 1)
