"""Per-file data sequence numbers: an added file may carry an older data sequence number than its snapshot's (a
compaction that keeps the starting sequence number, an imported entry). The log records it, the scan applies
delete files by it, the projection writes it into the manifest entry, and Spark reading the projection agrees."""

from __future__ import annotations

from collections.abc import Sequence

import attrs
import pyarrow as pa
import pytest

from engine import Catalog
from engine.write.data_writer import write_data_files
from engine.write.delete_files import write_equality_deletes
from engine.state.events import FileChange, decode_file_change
from engine.model.data_file import DataFile
from engine.operations.snapshot import new_snapshot_id
from engine.operations.snapshot import snapshot_events


def rows(ids: Sequence[int], category: str = "a") -> pa.Table:
    return pa.table({"id": pa.array(ids, pa.int64()), "category": pa.array([category] * len(ids), pa.string())})


def commit(t, added: Sequence[DataFile], removed: Sequence[DataFile] = (), operation: str = "delete",
           data_sequence_numbers: dict[str, int] | None = None) -> int:
    """Commit one snapshot; files named in ``data_sequence_numbers`` get that explicit data sequence number."""
    sid = new_snapshot_id()
    seqs = data_sequence_numbers or {}

    def build(base, ctx):
        events = snapshot_events(base, ctx, operation=operation, snapshot_id=sid, added=list(added),
                                 removed=list(removed))
        return [attrs.evolve(e, changes=tuple(
            attrs.evolve(c, data_sequence_number=seqs.get(c.file.file_path)) if c.added else c
            for c in e.changes)) for e in events]

    t.commit_events(build)
    return sid


def ids(t, **scan) -> list[int]:
    return sorted(t.scan(**scan).to_arrow().column("id").to_pylist())


def test_file_change_encodes_its_data_sequence_number_only_when_set(tmp_path):
    with Catalog.open(tmp_path / "wh") as cat:
        cat.create_namespace("db")
        t = cat.create_table("db.t", schema=rows([]).schema)
        [f] = write_data_files(t.state, rows([1]))
        ptype = t.state.spec.partition_type(t.state.schema)
        plain = FileChange(added=True, file=f).encode(ptype)
        assert "data-sequence-number" not in plain
        explicit = FileChange(added=True, file=f, data_sequence_number=7).encode(ptype)
        assert '"data-sequence-number":7' in explicit
        assert decode_file_change(explicit, {0: ptype}).data_sequence_number == 7
        assert decode_file_change(plain, {0: ptype}).data_sequence_number is None


@pytest.fixture
def compacted(tmp_path):
    """A table whose compaction (snapshot 3) keeps the starting data sequence number 1 for its output.

    seq 1: append ids 1..6 (file A); seq 2: equality delete id 2; seq 3: replace A by B (ids 1..6 again, the
    compaction did not apply the delete) with data sequence number 1, and append C (ids 2, 20) with the
    snapshot's own; seq 4: equality delete id 3. Per the spec an equality delete applies to files with a
    strictly smaller data sequence number: both deletes reach B, neither reaches C's 2 (seq 3 > 2).
    """
    cat = Catalog.open(tmp_path / "wh")
    cat.create_namespace("db")
    t = cat.create_table("db.t", schema=rows([]).schema, partition_by=["category"])
    t.append(rows(range(1, 7)))
    [a] = [task.file for task in t.scan().plan_files()]
    commit(t, [write_equality_deletes(t.state, pa.table({"id": [2]}), equality_ids=[1], spec_id=0,
                                      partition=("a",))])
    [b] = write_data_files(t.state, rows(range(1, 7)))
    [c] = write_data_files(t.state, rows([2, 20]))
    compaction = commit(t, [b, c], [a], operation="overwrite", data_sequence_numbers={b.file_path: 1})
    commit(t, [write_equality_deletes(t.state, pa.table({"id": [3]}), equality_ids=[1], spec_id=0,
                                      partition=("a",))])
    yield cat, t, b, c, compaction
    cat.close()


def test_equality_deletes_apply_by_the_files_data_sequence_number(compacted):
    cat, t, b, c, compaction = compacted
    assert ids(t) == [1, 2, 4, 5, 6, 20]  # B loses 2 and 3; C keeps its 2
    assert ids(t, snapshot_id=compaction) == [1, 2, 3, 4, 5, 6, 20]
    seqs = {task.file_path: task.data_sequence_number for task in t.scan().plan_files()}
    assert seqs == {b.file_path: 1, c.file_path: 3}
    by_path = {task.file_path: len(task.deletes) for task in t.scan().plan_files()}
    assert by_path == {b.file_path: 2, c.file_path: 1}
    live = {e.file.file_path: (e.data_sequence_number, e.file_sequence_number)
            for e in cat.store.live_entries(t.state, t.current_snapshot().snapshot_id)}
    assert live[b.file_path] == (1, 3) and live[c.file_path] == (3, 3)


def test_the_projection_writes_the_explicit_data_sequence_number(compacted):
    _, t, b, c, compaction = compacted
    entries = t.inspect.entries(compaction).to_pylist()
    seq = {e["data_file"]["file_path"]: (e["status"], e["sequence_number"], e["file_sequence_number"])
           for e in entries if e["data_file"]["content"] == 0}
    assert seq[b.file_path] == (1, 1, 3) and seq[c.file_path] == (1, 3, 3)
    manifests = t.inspect.manifests(compaction).to_pylist()
    data_manifests = [m for m in manifests if m["content"] == 0 and m["added_data_files_count"]]
    assert data_manifests and all(m["added_snapshot_id"] == compaction for m in data_manifests)


def test_the_manifest_lists_min_sequence_number_counts_the_explicit_one(compacted):
    from projections import layout
    from projections.manifest_reader import read_manifest_list

    cat, t, _, _, compaction = compacted
    snap = t.state.snapshot_by_id(compaction)
    path = layout.manifest_list_file(t.state.location, snap.snapshot_id, snap.commit_id)
    new = [m for m in read_manifest_list(cat.io.read_bytes(path), path) if m.added_files_count
           and m.content == 0]
    assert [(m.sequence_number, m.min_sequence_number) for m in new] == [(3, 1)]


def test_spark_applies_deletes_by_the_explicit_data_sequence_number(spark, compacted):
    _, t, b, c, _ = compacted
    for snap in t.snapshots():
        got = sorted(r["id"] for r in spark.read.format("iceberg").option("snapshot-id", str(snap.snapshot_id))
                     .load(t.location).collect())
        assert got == ids(t, snapshot_id=snap.snapshot_id), snap.snapshot_id
    entries = {r["data_file"]["file_path"]: (r["sequence_number"], r["file_sequence_number"])
               for r in spark.read.format("iceberg").load(f"{t.location}#entries").collect()
               if r["data_file"]["content"] == 0}
    assert entries[b.file_path] == (1, 3) and entries[c.file_path] == (3, 3)


def test_merged_manifests_keep_the_explicit_data_sequence_number(tmp_path):
    with Catalog.open(tmp_path / "wh") as cat:
        cat.create_namespace("db")
        t = cat.create_table("db.t", schema=rows([]).schema,
                             properties={"commit.manifest.min-count-to-merge": "2"})
        t.append(rows([1, 2]))
        t.append(rows([3]))
        [b] = write_data_files(t.state, rows([4]))
        sid = commit(t, [b], operation="append", data_sequence_numbers={b.file_path: 1})
        entries = t.inspect.entries(sid).to_pylist()
        assert len(t.inspect.manifests(sid)) == 1  # merged into one
        seq = {e["data_file"]["file_path"]: (e["status"], e["sequence_number"]) for e in entries}
        assert seq[b.file_path] == (1, 1)
        assert sorted(s for _, s in seq.values()) == [1, 1, 2]
