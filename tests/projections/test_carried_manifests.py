"""A merge carries a merged manifest's entries over as record bytes (projections.carried_manifests): the same bytes
as decoding and encoding them, no reading back in a process that did not write it, and decoding whenever it cannot."""

from __future__ import annotations

import pyarrow as pa
import pytest

import projections.commit_renderer as renderer_module
from engine import Catalog
from projections.carried_manifests import StoredRecordLengths, carried_records, split_records
from projections.manifest_list_index import MemoryIndex
from projections.manifests import manifest_entry_schema_text
from projections.metadata_json import MetadataRenderer
from projections.commit_renderer import Renderer, WrittenEntries
from projections.projector import render_all, write_commit


class KeepsNothing(WrittenEntries):
    """What a process that wrote none of the manifests it merges has at hand."""

    def put(self, m, entries):  # noqa: ANN001, ANN201
        pass


def render_cold(states, changes_of) -> dict[str, bytes]:
    """Every file of the projection, rendered as :func:`render_all` does, by a renderer that never has the entries of
    the manifests it merges at hand."""
    files: dict[str, bytes] = {}
    renderer = Renderer(files.__getitem__, KeepsNothing())
    index, metadata = MemoryIndex(), MetadataRenderer(max_tables=1)
    for state in states:
        write_commit(state, renderer, index, changes_of, files.__setitem__, metadata)
    return files


def appended(tmp_path, appends: int):  # noqa: ANN001, ANN201
    """A catalog and a table that merges every third manifest, after ``appends`` one-row appends."""
    cat = Catalog.open(tmp_path / "wh")
    cat.create_namespace("db")
    t = cat.create_table("db.t", schema=pa.schema([("id", pa.int64())]),
                         properties={"commit.manifest.min-count-to-merge": "3"})
    for i in range(appends):
        t.append(pa.table({"id": pa.array([i], pa.int64())}))
    return cat, t


@pytest.fixture
def carried(monkeypatch):
    """For each merged manifest a merge packed: whether it was carried over as bytes (else decoded)."""
    outcomes: list[bool] = []
    real = Renderer._carried

    def recording(self, state, snap, m, spec_id):  # noqa: ANN001, ANN202
        out = real(self, state, snap, m, spec_id)
        if m.existing_files_count:
            outcomes.append(out is not None)
        return out

    monkeypatch.setattr(Renderer, "_carried", recording)
    return outcomes


@pytest.mark.parametrize("format_version", [2, 3])
def test_carrying_records_writes_the_bytes_decoding_writes(tmp_path, carried, format_version):
    """Merges of merged manifests, with partitions whose summaries combine (NaN, -0.0, nulls), deletes (a merged
    manifest with DELETED entries is decoded), upserts, compaction's older sequence numbers and, at v2, an upgrade
    to v3 (the entry schema changes: decoded): every file the cold renderer writes is the bytes of the renderer that
    keeps its entries, and most merges carried the last merged manifest."""
    cat = Catalog.open(tmp_path / "wh")
    cat.create_namespace("db")
    schema = pa.schema([("id", pa.int64()), ("x", pa.float64()), ("name", pa.string())])
    t = cat.create_table("db.t", schema=schema, partition_by=["bucket(id, 3)", "x"], format_version=format_version,
                         properties={"commit.manifest.min-count-to-merge": "3", "write.delete.mode": "merge-on-read"})
    xs = [0.5, float("nan"), None, -0.0, 0.0, -2.5]
    for i in range(24):
        t.append(pa.table({"id": pa.array([i, i + 100], pa.int64()), "x": pa.array([xs[i % 6], xs[(i + 1) % 6]]),
                           "name": pa.array([f"n{i}", None])}, schema=schema))
        if i == 9:
            t.delete("id = 3")
        if i == 13:
            t.upsert(pa.table({"id": pa.array([5], pa.int64()), "x": pa.array([1.5]), "name": pa.array(["u"])},
                              schema=schema), ["id"])
        if i == 16:
            t.rewrite_data_files()
        if i == 18 and format_version == 2:
            t.upgrade_format_version(3)
    store = cat.store
    states = store.commits_between(t.uuid, 0, store.log.head(t.uuid))
    kept = {path: data for path, data in render_all(states, store.file_changes_of).items()
            if not path.endswith("version-hint.text")}
    carried.clear()
    assert render_cold(states, store.file_changes_of) == kept
    assert carried.count(True) >= 6 and False in carried  # carried most, decoded some
    assert cat.verify("db.t") == []
    cat.close()


def test_a_merge_in_a_process_that_wrote_nothing_reads_no_manifest_back(tmp_path, carried, monkeypatch):
    """With eight writer processes most merges run in a process that did not write the last merged manifest: it
    carries that manifest's records over by the lengths the projector stored beside the log, instead of decoding
    the manifest, and what it publishes is what the log renders."""
    cat, t = appended(tmp_path, 5)
    [merged] = [m for m in cat.projector.index.get(t.uuid, t.current_snapshot().snapshot_id) if m.existing_files_count]
    lengths = StoredRecordLengths(cat.log).get(t.uuid, merged.manifest_path)
    assert lengths is not None and len(lengths) == merged.added_files_count + merged.existing_files_count

    cat.projector.stop_sharing()  # another process: nothing it wrote or rendered before is at hand
    read = []
    real = renderer_module.read_manifest
    monkeypatch.setattr(renderer_module, "read_manifest", lambda data, path: read.append(path) or real(data, path))
    for i in range(5, 12):
        t.append(pa.table({"id": pa.array([i], pa.int64())}))
    assert read == [] and carried.count(True) >= 2
    assert t.scan().count() == 12
    assert cat.verify("db.t") == []
    cat.close()


def test_what_cannot_be_carried_is_decoded(tmp_path):
    """Records are carried only from an uncompressed file with the entry schema of today, cut exactly by the kept
    lengths, and only when no entry is DELETED or the merging snapshot's."""
    cat, t = appended(tmp_path, 3)
    [merged] = cat.projector.index.get(t.uuid, t.current_snapshot().snapshot_id)
    data = open(merged.manifest_path, "rb").read()
    lengths = StoredRecordLengths(cat.log).get(t.uuid, merged.manifest_path)
    text = manifest_entry_schema_text(2, [])
    records = split_records(data, lengths, text)
    assert records is not None and len(records) == 3 and sum(map(len, records)) == sum(lengths)
    assert split_records(data, lengths, manifest_entry_schema_text(3, [])) is None  # another entry schema
    assert split_records(data, lengths[:-1], text) is None  # not the file's records
    assert split_records(data, [lengths[0] + lengths[1], 0, lengths[2]], text) is None  # a block's count is 3
    assert split_records(data[:-3], lengths, text) is None  # cut short
    assert split_records(b"not avro", lengths, text) is None
    assert carried_records(records, merged, merging_snapshot_id=1) is not None
    deleted = bytes([4]) + records[0][1:]  # status DELETED
    assert carried_records([deleted, *records[1:]], merged, merging_snapshot_id=1) is None
    assert carried_records(records, merged, merging_snapshot_id=merged.added_snapshot_id) is None  # its own ADDED
    store = StoredRecordLengths(cat.log)
    long_path = "/w/" + "x" * 2100 + ".avro"  # past what a PostgreSQL index key holds: not kept, decoded instead
    store.put_many(t.uuid, {long_path: [1, 2], "/w/short.avro": [3]})
    assert store.get(t.uuid, long_path) is None and store.get(t.uuid, "/w/short.avro") == [3]
    cat.close()


@pytest.mark.parametrize("damage", ["not,numbers", "1,2,3", ""])
def test_a_damaged_lengths_row_means_decoding(tmp_path, carried, damage):
    """The lengths are derived rows: a row that is not numbers, or whose lengths do not cut the manifest's blocks,
    leaves the merge to decode the manifest, and what it publishes is still what the log renders."""
    cat, t = appended(tmp_path, 5)
    [merged] = [m for m in cat.projector.index.get(t.uuid, t.current_snapshot().snapshot_id) if m.existing_files_count]
    cat.log.derived.execute(f"UPDATE {StoredRecordLengths.TABLE} SET lengths = ? WHERE manifest_path = ?",
                            [damage, merged.manifest_path])
    cat.projector.stop_sharing()
    carried.clear()
    for i in range(5, 8):
        t.append(pa.table({"id": pa.array([i], pa.int64())}))
    assert carried and not carried[0]  # the damaged one was decoded
    assert cat.verify("db.t") == [] and t.scan().count() == 8
    cat.close()
