"""Import that is right or refuses: position delete files whose rows name their data files by another spelling of
the same path (a name-node authority, ``file:`` forms, percent-escapes) reach their files, with or without
relocation; a spelling that cannot be matched stops the import with a typed error naming the file, never a scan
that silently keeps deleted rows; relative paths in metadata resolve against the table location.

Layer: tests. The source tables are written by icelog on a local disk, then their delete files are rewritten the
way other engines spell paths (real Parquet files with the spec's field ids).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from engine import Catalog
from engine.errors import ValidationError
from engine.model.data_file import DataFileContent
from engine.model.paths import normalize_path


def _source(folder: Path, name: str = "t") -> tuple[str, str]:
    """A table with one data file and a position delete removing id 2; returns (location, delete file path)."""
    with Catalog.open(folder / "source-catalog") as cat:
        cat.create_namespace("db")
        t = cat.create_table("db." + name, schema=pa.schema([("id", pa.int64())]),
                             location=str(folder / "source" / name),
                             properties={"format-version": "2", "write.delete.mode": "merge-on-read"})
        t.append(pa.table({"id": pa.array([1, 2, 3], pa.int64())}))
        t.delete("id = 2")
        deletes = [e.file.file_path for e in cat.store.live_entries(t.state, t.state.current_snapshot.snapshot_id)
                   if e.file.content == DataFileContent.POSITION_DELETES]
        return t.state.location, deletes[0]


def _respell(delete_file: str, spell) -> None:
    """Rewrite the ``file_path`` values of a position delete file (same columns and field ids)."""
    table = pq.read_table(delete_file)
    paths = pa.array([spell(p) for p in table.column("file_path").to_pylist()], pa.string())
    pq.write_table(table.set_column(0, table.schema.field(0), paths), delete_file)


def _ids(table) -> list[int]:
    return sorted(table.scan().to_arrow().column("id").to_pylist())


def test_a_path_with_escapes_or_a_file_uri_reaches_its_data_file(tmp_path: Path) -> None:
    location, delete_file = _source(tmp_path, "has space")
    _respell(delete_file, lambda p: "file://" + p.replace(" ", "%20"))  # file:///.../has%20space/data/...
    with Catalog.open(tmp_path / "catalog") as cat:
        cat.create_namespace("db")
        t = cat.register_table("db.t", location)
        assert _ids(t) == [1, 3]


def test_relocated_deletes_spelled_with_a_name_node_reach_their_files(tmp_path: Path) -> None:
    location, delete_file = _source(tmp_path)
    # the delete file names its data file as an HDFS writer would: hdfs://namenode:8020/<path>
    _respell(delete_file, lambda p: f"hdfs://namenode:8020{p}")
    moved = str(tmp_path / "moved")
    shutil.copytree(location, moved)
    shutil.rmtree(location)
    with Catalog.open(tmp_path / "catalog") as cat:
        cat.create_namespace("db")
        # the relocation is given in the metadata's spelling; the delete rows' spelling is matched all the same
        t = cat.register_table("db.t", moved, relocate={location: moved}, location=str(tmp_path / "icelog"))
        assert _ids(t) == [1, 3]
        deletes = [e.file for e in cat.store.live_entries(t.state, t.state.current_snapshot.snapshot_id)
                   if e.file.content == DataFileContent.POSITION_DELETES]
        named = pq.read_table(deletes[0].file_path).column("file_path").to_pylist()
        assert named and all(p.startswith(moved) for p in named)


def test_a_delete_that_cannot_reach_its_file_stops_the_import(tmp_path: Path) -> None:
    location, delete_file = _source(tmp_path)
    # another folder's file of the same name: a spelling no rule maps to the table's data file
    _respell(delete_file, lambda p: p.replace("/source/", "/elsewhere/"))
    with Catalog.open(tmp_path / "catalog") as cat:
        cat.create_namespace("db")
        with pytest.raises(ValidationError, match="matches no data file of the table") as raised:
            cat.register_table("db.t", location)
        assert delete_file.rsplit("/", 1)[-1] in str(raised.value)
        assert not cat.table_exists("db.t")  # nothing committed


def test_spellings_normalize_alike() -> None:
    same = ["/w/t/data/a b.parquet", "file:/w/t/data/a%20b.parquet", "file:///w/t/data/a%20b.parquet",
            "file://localhost/w/t/data/a b.parquet", "hdfs://nn:8020/w/t/data/a%20b.parquet",
            "hdfs://other/w//t/data/a b.parquet", "viewfs://cluster/w/t/data/a b.parquet"]
    assert {normalize_path(p) for p in same} == {"/w/t/data/a b.parquet"}
    assert normalize_path("s3a://b/k/x%3Dy.parquet") == normalize_path("s3://b/k/x=y.parquet") == "s3://b/k/x=y.parquet"
    assert normalize_path("/w/t/data/a%20b.parquet") == "/w/t/data/a%20b.parquet"  # a plain path is literal
