"""Where ``icelog log copy`` reads and writes a SQLite log: a folder that does not exist yet is a catalog folder
(its ``catalog.db``, as ``--catalog-dir`` takes it), so the copy can be opened as a catalog right away."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pyarrow as pa

from engine import Catalog
from storage.log_copy import open_log

ICELOG = str(Path(sys.executable).with_name("icelog"))


def test_a_new_folder_is_a_catalog_folder_and_a_name_with_a_suffix_a_file(tmp_path: Path) -> None:
    with open_log(str(tmp_path / "new-folder")) as log:
        assert Path(log.path) == tmp_path / "new-folder" / "catalog.db"
    with open_log(str(tmp_path / "lake.db")) as log:
        assert Path(log.path) == tmp_path / "lake.db"


def test_copy_into_a_folder_that_does_not_exist_opens_as_a_catalog(tmp_path: Path) -> None:
    with Catalog.open(tmp_path / "wh") as cat:
        cat.create_namespace("db")
        cat.create_table("db.t", schema=pa.schema([("id", pa.int64())])).append(
            pa.table({"id": pa.array([1, 2], pa.int64())}))
    done = subprocess.run([ICELOG, "log", "copy", str(tmp_path / "wh"), str(tmp_path / "copy")],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "copy" / "catalog.db").is_file()
    listed = subprocess.run([ICELOG, "--warehouse", str(tmp_path / "wh"), "--catalog-dir", str(tmp_path / "copy"),
                             "tables"], capture_output=True, text=True, timeout=120)
    assert listed.returncode == 0 and "db.t" in listed.stdout, listed.stderr
