"""Summary statistics shared by the benchmarks: p50 and p95 of a list of timings.

Layer: tools. Imports nothing of ours, so every benchmark (tools/bench.py and the bench_* modules it
runs) can use it without importing another benchmark back.
"""

from __future__ import annotations

import statistics


def percentiles(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)

    def pick(q: float) -> float:
        return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]

    return {"p50": round(statistics.median(ordered), 3), "p95": round(pick(0.95), 3), "n": len(ordered)}
