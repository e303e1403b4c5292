"""Registration inputs at their edges: a file that is neither metadata nor a table folder is a typed error naming
it; a relocation moves whole leading paths only (a table at /t does not move a file of /t_ext); statistics files
the log cannot carry are named in the import notes.

Layer: tests (engine's public API on real SQLite, Parquet, Avro and metadata files).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from engine import Catalog
from engine.errors import NotFound

SCHEMA = pa.schema([("id", pa.int64())])


def _source(tmp_path: Path) -> tuple[str, Path]:
    """A table at <tmp>/src/db/t with a file of its own and one appended in place from <tmp>/src/db/t_ext."""
    outside = tmp_path / "src" / "db" / "t_ext" / "f.parquet"
    outside.parent.mkdir(parents=True)
    pq.write_table(pa.table({"id": pa.array([9], pa.int64())}), outside)
    with Catalog.open(tmp_path / "src") as src:
        src.create_namespace("db")
        t = src.create_table("db.t", SCHEMA)
        t.append(pa.table({"id": pa.array([1], pa.int64())}))
        t.append_files([str(outside)])
        return t.metadata_location, Path(t.location.removeprefix("file://"))


def test_a_file_that_is_not_metadata_is_a_typed_error(tmp_path: Path) -> None:
    md, location = _source(tmp_path)
    data_file = next(location.glob("data/*.parquet"))
    with Catalog.open(tmp_path / "icelog") as cat:
        cat.create_namespace("db")
        for path in (data_file, next(location.glob("metadata/snap-*.avro"))):
            with pytest.raises(NotFound, match="is not a metadata file"):
                cat.register_table("db.r", str(path))
        assert cat.list_tables("db") == []


def test_a_relocation_moves_whole_leading_paths_only(tmp_path: Path) -> None:
    md, location = _source(tmp_path)
    moved = tmp_path / "moved"
    shutil.copytree(location, moved)
    copied_md = moved / "metadata" / Path(md).name
    with Catalog.open(tmp_path / "icelog") as cat:
        cat.create_namespace("db")
        t = cat.register_table("db.r", str(copied_md), relocate={str(location): str(moved)})
        paths = {f.file_path for f in cat.store.live_files(t.state, t.state.current_snapshot.snapshot_id)}
        assert str(tmp_path / "src" / "db" / "t_ext" / "f.parquet") in paths  # not .../moved_ext/f.parquet
        assert sorted(t.scan().to_arrow().column("id").to_pylist()) == [1, 9]


def test_statistics_the_log_cannot_carry_are_noted(tmp_path: Path) -> None:
    md, _ = _source(tmp_path)
    meta = json.loads(Path(md).read_text())
    meta["statistics"] = [{"snapshot-id": meta["current-snapshot-id"], "statistics-path": "/x/stats.puffin",
                           "file-size-in-bytes": 1, "file-footer-size-in-bytes": 1, "blob-metadata": []}]
    with_stats = Path(md).parent / "v99.metadata.json"
    with_stats.write_text(json.dumps(meta))
    with Catalog.open(tmp_path / "icelog") as cat:
        cat.create_namespace("db")
        t = cat.register_table("db.r", str(with_stats), location=str(tmp_path / "elsewhere"))
        assert any(n.startswith("statistics: 1 file(s) are not carried") for n in t.import_notes)


def test_a_table_upgraded_from_v1_registers_with_its_snapshots_at_sequence_number_0(tmp_path: Path) -> None:
    """Java writes no ``sequence-number`` for a snapshot of sequence number 0 (one from before an upgrade to v2), and
    reads none as 0: such a table registers, and its history reads as before."""
    with Catalog.open(tmp_path / "src") as src:
        src.create_namespace("db")
        t = src.create_table("db.t", SCHEMA, format_version=1)
        t.append(pa.table({"id": pa.array([1, 2], pa.int64())}))
        t.upgrade_format_version(2)
        t.append(pa.table({"id": pa.array([3], pa.int64())}))
        t.delete("id = 1")
        expected = {s.snapshot_id: sorted(t.scan(snapshot_id=s.snapshot_id).to_arrow().column("id").to_pylist())
                    for s in t.snapshots()}
        md = Path(t.metadata_location)
    meta = json.loads(md.read_text())
    for snap in meta["snapshots"]:
        if snap.get("sequence-number") == 0:
            del snap["sequence-number"]  # as Java writes it
    as_java = md.parent / "v99.metadata.json"
    as_java.write_text(json.dumps(meta))
    with Catalog.open(tmp_path / "icelog") as cat:
        cat.create_namespace("db")
        r = cat.register_table("db.r", str(as_java), location=str(tmp_path / "elsewhere"))
        assert r.snapshots()[0].sequence_number == 0
        assert {s.snapshot_id: sorted(r.scan(snapshot_id=s.snapshot_id).to_arrow().column("id").to_pylist())
                for s in r.snapshots()} == expected
        assert r.verify_projection() == []


def test_a_registered_table_keeps_its_snapshot_log_and_reads_the_same_by_timestamp(tmp_path: Path) -> None:
    """The original's snapshot-log records rollbacks and current-snapshot changes at their times: the registered
    table keeps it (published too), so time travel by timestamp reads what it read before."""
    import time

    with Catalog.open(tmp_path / "src") as src:
        src.create_namespace("db")
        t = src.create_table("db.t", SCHEMA)
        snaps = []
        for ids in ([0], [1], "rollback", [2], [3], "set-current"):
            if ids == "rollback":
                t.manage_snapshots().rollback_to_snapshot(snaps[0].snapshot_id).commit()
            elif ids == "set-current":
                t.manage_snapshots().set_current_snapshot(snaps[1].snapshot_id).commit()
            else:
                snaps.append(t.append(pa.table({"id": pa.array(ids, pa.int64())})))
            time.sleep(0.005)
        log = t.state.snapshot_log
        expected = {ts: sorted(t.scan(as_of_timestamp_ms=ts).to_arrow().column("id").to_pylist()) for ts, _ in log}
        md = t.metadata_location
    assert len(log) == 6 and len({tuple(v) for v in expected.values()}) < 6  # the rollbacks are in it
    with Catalog.open(tmp_path / "icelog") as cat:
        cat.create_namespace("db")
        r = cat.register_table("db.r", md, location=str(tmp_path / "elsewhere"))
        assert r.state.snapshot_log == log
        assert {ts: sorted(r.scan(as_of_timestamp_ms=ts).to_arrow().column("id").to_pylist())
                for ts, _ in log} == expected
        assert json.loads(Path(r.metadata_location).read_text())["snapshot-log"] == \
            json.loads(Path(md).read_text())["snapshot-log"]
        assert r.verify_projection() == []
        plain = cat.register_table("db.plain", _source(tmp_path / "p")[0], location=str(tmp_path / "p2"))
        assert [e.type for e in plain.log()].count("set-snapshot-log") == 0  # nothing to restore: no event
