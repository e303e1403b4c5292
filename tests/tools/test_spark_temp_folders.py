"""tools.spark's helpers leave nothing in the temporary folder: a session's scratch folder, the function catalog's
warehouse and the zip of icelog's sources go when the session stops, or when the process exits at the latest.

Layer: tests (runs tools.spark in a subprocess with a private TMPDIR, so the count is exact; starts a JVM there).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tools.spark import SOURCE_ROOT
from tools.spark_jars import jar_cache

# Two sessions, one after the other: the first is stopped (its folders must be gone right after), the second is
# left running when the script ends (its folders must be gone once the process has exited).
SCRIPT = """
import json, os, sys
import pyarrow as pa
from engine import Catalog
from tools.spark import local_session
from tools.spark_write import partition_expressions, ship_sources

def ours():
    return sorted(n for n in os.listdir(os.environ["TMPDIR"]) if n.startswith("icelog-"))

with Catalog.open(sys.argv[1]) as cat:
    cat.create_namespace("db")
    state = cat.create_table("db.t", schema=pa.schema([("id", pa.int64())]), partition_by=["bucket(4, id)"]).state
seen = {}
for name in ("stopped", "left running"):
    spark = local_session(None, app_name="icelog-temp-folders")
    partition_expressions(spark, state)          # the function catalog, on an empty folder of its own
    ship_sources(spark)                          # the zip of icelog's sources for the workers
    seen[name] = ours()
    if name == "stopped":
        spark.stop()
        seen["after stop"] = ours()
print(json.dumps(seen))
"""


@pytest.mark.spark
def test_spark_helpers_remove_their_temp_folders_at_stop_and_at_exit(tmp_path):
    if os.environ.get("ICELOG_SKIP_SPARK") == "1":
        pytest.skip("ICELOG_SKIP_SPARK=1")
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    jars = sorted(p.name for p in jar_cache().glob("*.jar"))
    env = dict(os.environ, TMPDIR=str(tmp), PYTHONPATH=SOURCE_ROOT)
    done = subprocess.run([sys.executable, "-c", SCRIPT, str(tmp_path / "wh")], cwd=SOURCE_ROOT, env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    for name in ("stopped", "left running"):            # the helpers did make their folders there
        assert [n.rsplit("-", 1)[0] for n in seen[name]] == ["icelog-functions", "icelog-pyfiles", "icelog-spark"]
    assert seen["after stop"] == []
    assert [n for n in os.listdir(tmp) if n.startswith("icelog-")] == []
    assert sorted(p.name for p in jar_cache().glob("*.jar")) == jars     # cached jars stay
    assert Path(tmp_path / "wh" / "catalog.db").is_file()
