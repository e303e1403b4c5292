"""The Spark write benchmark runs end to end on a tiny DataFrame and prints its JSON (in a process of its own:
it starts its own Spark session and icelog's REST server).

Layer: tests (runs tools.bench_spark_write as a subprocess; needs Java).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tools.spark import SOURCE_ROOT


@pytest.mark.spark
def test_bench_spark_write_prints_both_writers_figures(tmp_path):
    if os.environ.get("ICELOG_SKIP_SPARK") == "1":
        pytest.skip("ICELOG_SKIP_SPARK=1")
    done = subprocess.run([sys.executable, "-m", "tools.bench_spark_write", "--rows", "4000", str(tmp_path)],
                          cwd=SOURCE_ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout)
    assert result["rows"] == 4000 and result["partitions"] == 32
    assert result["icelog_write"]["data_files"] == 32 and result["icelog_write"]["rows_per_second"] > 0
    assert result["spark_iceberg_writer"]["catalog"] == "rest"
    assert result["spark_iceberg_writer"]["data_files"] == 32
    assert result["icelog_vs_spark_rows_per_second"] > 0
