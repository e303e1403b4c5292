"""tools/run, the one entry point: a folder at the venv's path that is not a venv is never deleted."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_a_folder_that_is_not_a_venv_is_refused_and_kept(tmp_path: Path) -> None:
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "notes.txt").write_text("keep me")
    done = subprocess.run(["bash", str(ROOT / "tools" / "run"), "setup"], cwd=ROOT, capture_output=True, text=True,
                          env={**os.environ, "ICELOG_VENV": str(folder)}, timeout=120)
    assert done.returncode == 1 and "exists and is not a venv" in done.stderr
    assert (folder / "notes.txt").read_text() == "keep me" and sorted(p.name for p in folder.iterdir()) == ["notes.txt"]
