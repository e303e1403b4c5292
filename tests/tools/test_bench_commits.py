"""The side-by-side commit benchmark deletes no system's files until every system has run."""

from __future__ import annotations

import os
import tempfile

import tools.bench_commits as bench_commits


def test_each_system_runs_beside_the_files_of_those_before_and_nothing_is_left(monkeypatch, tmp_path):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    seen: dict[str, list[str]] = {}

    def recording(name):
        real = bench_commits.SYSTEMS[name]

        def run(root, commits):
            seen[name] = sorted(os.listdir(tmp_path))  # the roots that exist while this system commits
            return real(root, commits)
        return run

    for name in ("icelog", "ducklake"):
        monkeypatch.setitem(bench_commits.SYSTEMS, name, recording(name))
    result = bench_commits.run(3, ["icelog", "ducklake"])

    assert result["icelog"]["rows"] == result["ducklake"]["rows"] == 30
    # DuckLake committed while icelog's folder (thousands of files in a real run) was still there: deleting them
    # first would have made its file creations pay for icelog's cleanup on an ext4 without a journal
    assert [p for p in seen["ducklake"] if p.startswith("icelog-bench-commits-icelog-")]
    assert os.listdir(tmp_path) == []


def test_folders_in_a_given_parent_are_left_for_its_owner(tmp_path):
    result = bench_commits.run(2, ["icelog"], str(tmp_path))

    assert result["icelog"]["rows"] == 20
    (left,) = os.listdir(tmp_path)  # tools.bench deletes its whole folder after the benchmarks that follow
    assert left.startswith("icelog-bench-commits-icelog-") and os.listdir(tmp_path / left)
