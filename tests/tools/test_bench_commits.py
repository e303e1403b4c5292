"""The side-by-side commit benchmark: the systems commit in turns, and no system's files are deleted until
every system is done."""

from __future__ import annotations

import contextlib
import os
import tempfile

import tools.bench_commits as bench_commits


def test_the_systems_commit_in_turns_beside_each_others_files_and_nothing_is_left(monkeypatch, tmp_path):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    turns: list[tuple[str, int, list[str]]] = []

    def recording(name):
        real = bench_commits.SYSTEMS[name]

        @contextlib.contextmanager
        def table(root):
            with real(root) as opened:
                def commit(data):
                    # the roots that exist while this system commits
                    turns.append((name, data["id"][0].as_py(), sorted(os.listdir(tmp_path))))
                    return opened.commit(data)
                yield bench_commits.Committer(commit=commit, rows=opened.rows)
        return table

    for name in ("icelog", "ducklake"):
        monkeypatch.setitem(bench_commits.SYSTEMS, name, recording(name))
    result = bench_commits.run(3, ["icelog", "ducklake"])

    assert result["icelog"]["rows"] == result["ducklake"]["rows"] == 30
    assert result["icelog"]["commits"] == result["ducklake"]["commits"] == 3 and result["systems_in_turns"]
    # one commit of each system in turn, the same batch: a machine that slows down mid-run slows both alike
    assert [(name, first_id) for name, first_id, _ in turns] == [
        ("icelog", 0), ("ducklake", 0), ("icelog", 10), ("ducklake", 10), ("icelog", 20), ("ducklake", 20)]
    # no system's folder (thousands of files in a real run) was deleted while another committed: on an ext4 without
    # a journal the others' file creations would have paid for the cleanup
    assert all(len(roots) == 2 for _, _, roots in turns)
    assert os.listdir(tmp_path) == []


def test_folders_in_a_given_parent_are_left_for_its_owner(tmp_path):
    result = bench_commits.run(2, ["icelog"], str(tmp_path))

    assert result["icelog"]["rows"] == 20
    (left,) = os.listdir(tmp_path)  # tools.bench deletes its whole folder after the benchmarks that follow
    assert left.startswith("icelog-bench-commits-icelog-") and os.listdir(tmp_path / left)
