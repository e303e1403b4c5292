"""The v3 delete benchmark runs end to end on a small table and prints its JSON (in a process of its own: it
starts its own Spark session and icelog's REST server).

Layer: tests (runs tools.bench_v3_deletes as a subprocess; needs Java).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tools.spark import SOURCE_ROOT


@pytest.mark.spark
def test_bench_v3_deletes_prints_every_writer_figures(tmp_path):
    if os.environ.get("ICELOG_SKIP_SPARK") == "1":
        pytest.skip("ICELOG_SKIP_SPARK=1")
    done = subprocess.run([sys.executable, "-m", "tools.bench_v3_deletes", "--rows", "20000", "--files", "4",
                           str(tmp_path)], cwd=SOURCE_ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout)
    assert result["deleted_rows"] == 200
    v2, v3, spark = (result[k] for k in ("icelog_v2_position_deletes", "icelog_v3_deletion_vectors",
                                         "spark_v3_deletion_vectors"))
    # v2: one position delete file per data file (write.delete.granularity file, as Java)
    assert v2["delete_entries"] == 4 and v3["delete_entries"] == 4 and spark["delete_entries"] == 4
    assert v3["delete_files"] == 1                  # one Puffin file for the commit's one partition
    assert v2["scan_rows"] == v3["scan_rows"] == spark["scan_rows"] == 19_800
    assert all(r["delete_seconds"] > 0 and r["scan_seconds"] > 0 for r in (v2, v3, spark))
    assert set(result["ratios"]) == {"v3_vs_v2_delete_seconds", "v3_vs_v2_scan_seconds",
                                     "icelog_v3_vs_spark_v3_delete_seconds"}
