"""`icelog bench` takes tools.bench's own options (the README's `icelog bench --sizes ... --samples ...`) and prints
its JSON, and `icelog demo` works in the folder --warehouse names, through the installed ``icelog`` script."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ICELOG = os.path.join(os.path.dirname(sys.executable), "icelog")


def test_bench_passes_its_options_to_the_benchmarks_and_prints_json(tmp_path: Path) -> None:
    done = subprocess.run([ICELOG, "bench", "--sizes", "1,3", "--samples", "2", "--history", "2", "--skip-pyiceberg",
                           "--commits", "0", "--writers", "", "--skip-operations", "--skip-s3"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["settings"]["sizes"] == [1, 3] and result["settings"]["samples"] == 2
    assert result["icelog"]["append_1_file"]["3"]["log_commit_ms"]["n"] == 2
    assert "pyiceberg" not in result and "commits_side_by_side" not in result


def test_bench_help_is_the_benchmarks_own_and_a_wrong_option_is_named(tmp_path: Path) -> None:
    helped = subprocess.run([ICELOG, "bench", "--help"], capture_output=True, text=True, timeout=60)
    assert helped.returncode == 0 and helped.stdout.startswith("usage: icelog bench")
    assert "--sizes" in helped.stdout and "--writers" in helped.stdout
    wrong = subprocess.run([ICELOG, "bench", "--sizez", "1"], capture_output=True, text=True, timeout=60)
    assert wrong.returncode == 2 and wrong.stdout == "" and "unrecognized arguments: --sizez 1" in wrong.stderr


def test_demo_works_in_the_warehouse_given_before_or_after_the_command(tmp_path: Path) -> None:
    # a folder the demo did not make is refused by name, before Spark starts: proof the demo looked there
    kept = tmp_path / "kept"
    kept.mkdir()
    (kept / "precious.txt").write_text("keep me")
    for args in (["--warehouse", str(kept), "demo"], ["demo", "--warehouse", str(kept)]):
        done = subprocess.run([ICELOG, *args], cwd=tmp_path, capture_output=True, text=True, timeout=120)
        assert done.returncode == 1 and done.stdout == ""
        assert done.stderr.strip() == f"icelog demo: {kept} exists and is not a demo warehouse; pass another --warehouse"
    assert (kept / "precious.txt").read_text() == "keep me"
    assert sorted(os.listdir(tmp_path)) == ["kept"]  # no ./warehouse was made or touched
