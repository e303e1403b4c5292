"""The benchmarks' shared figures: percentiles, and the cost of making a file on the benchmark's disk."""

from __future__ import annotations

import os

from tools.bench_stats import file_create_us, percentiles


def test_percentiles_of_timings():
    assert percentiles([float(x) for x in range(1, 101)]) == {"p50": 50.5, "p95": 95.0, "n": 100}


def test_the_file_creation_probe_times_real_files_and_leaves_them_in_the_folder(tmp_path):
    cost = file_create_us(str(tmp_path), files=50)
    assert cost > 0
    probes = [p for p in os.listdir(tmp_path) if p.startswith("file-create-probe-")]
    assert len(probes) == 1 and len(os.listdir(tmp_path / probes[0])) == 50
