"""The projector's manifest layout per snapshot: fast append, merge append and its table properties."""

from __future__ import annotations

import json
import os

import pyarrow as pa
import pytest

from engine import Catalog
from engine.model.data_file import EntryStatus
from projections.manifest_reader import read_manifest, read_manifest_list


def manifest_list(table) -> list:
    meta = json.load(open(table.metadata_location))
    current = next(s for s in meta["snapshots"] if s["snapshot-id"] == meta["current-snapshot-id"])
    path = current["manifest-list"]
    return read_manifest_list(open(path, "rb").read(), path)


def appended(tmp_path, n: int, properties: dict[str, str], format_version: int = 2):
    cat = Catalog.open(tmp_path / "wh")
    cat.create_namespace("db")
    t = cat.create_table("db.t", schema=pa.schema([("id", pa.int64())]), properties=properties,
                         format_version=format_version)
    snaps = [t.append(pa.table({"id": pa.array([i], pa.int64())})) for i in range(n)]
    return cat, t, snaps


def test_fast_append_keeps_one_manifest_per_commit(tmp_path):
    cat, t, _ = appended(tmp_path, 5, {"commit.manifest-merge.enabled": "false"})
    manifests = manifest_list(t)
    assert len(manifests) == 5
    assert [m.added_files_count for m in manifests] == [1] * 5
    assert all(m.existing_files_count == 0 for m in manifests)
    cat.close()


@pytest.mark.parametrize("format_version", [1, 2])
def test_merge_append_merges_at_min_count(tmp_path, format_version):
    cat, t, snaps = appended(tmp_path, 4, {"commit.manifest.min-count-to-merge": "3"}, format_version)
    manifests = manifest_list(t)
    # appends 1, 2 keep their own manifests; append 3 reaches the minimum and merges all three (its own file stays
    # ADDED, the older two become EXISTING); append 4 adds one manifest in front
    assert [(m.added_files_count, m.existing_files_count) for m in manifests] == [(1, 0), (1, 2)]
    merged = manifests[1]
    assert merged.added_snapshot_id == snaps[2].snapshot_id
    _, entries = read_manifest(open(merged.manifest_path, "rb").read(), merged.manifest_path)
    existing = [e for e in entries if e.status == EntryStatus.EXISTING]
    assert sorted(e.snapshot_id for e in existing) == sorted(s.snapshot_id for s in snaps[:2])
    if format_version == 2:
        assert sorted(e.data_sequence_number for e in existing) == [1, 2]
        assert merged.min_sequence_number == 1 and merged.sequence_number == 3
    assert t.scan().count() == 4
    cat.close()


def test_merged_manifest_keeps_this_snapshots_files_added(tmp_path):
    cat, t, snaps = appended(tmp_path, 3, {"commit.manifest.min-count-to-merge": "3"})
    [merged] = manifest_list(t)
    _, entries = read_manifest(open(merged.manifest_path, "rb").read(), merged.manifest_path)
    added = [e for e in entries if e.status == EntryStatus.ADDED]
    assert len(added) == 1 and added[0].snapshot_id is None  # inherited from the manifest list (v2)
    assert merged.added_files_count == 1 and merged.existing_files_count == 2
    cat.close()


def test_target_size_limits_merging(tmp_path):
    cat, t, _ = appended(tmp_path, 4, {"commit.manifest.min-count-to-merge": "2",
                                       "commit.manifest.target-size-bytes": "1"})
    # every manifest is larger than the target: each bin holds one manifest, nothing merges
    assert [m.added_files_count for m in manifest_list(t)] == [1, 1, 1, 1]
    cat.close()


def test_publish_order_leaves_readers_on_a_complete_version(tmp_path):
    cat = Catalog.open(tmp_path / "wh", project=False)
    cat.create_namespace("db")
    t = cat.create_table("db.t", schema=pa.schema([("id", pa.int64())]))
    t.append(pa.table({"id": pa.array([1], pa.int64())}))
    assert not os.path.exists(os.path.join(t.location, "metadata", "version-hint.text"))
    location = t.publish()
    assert location == t.metadata_location and os.path.exists(location)
    hint = open(os.path.join(t.location, "metadata", "version-hint.text")).read()
    assert location.endswith(f"v{hint}.metadata.json")
    for m in manifest_list(t):
        assert os.path.exists(m.manifest_path)
    assert t.publish() is None  # nothing new
    cat.close()


def test_manifest_schema_text_follows_the_schema_object_not_its_equality() -> None:
    """The schema JSON a manifest carries is kept per schema object: two schemas that compare equal but print
    differently (a default of 0.0 against one of -0.0) each keep their own text."""
    from engine.model.schema import Schema
    from engine.model.types import DoubleType, NestedField
    from projections.commit_renderer import _schema_json_text

    def schema(default: float) -> Schema:
        return Schema((NestedField(field_id=1, name="x", field_type=DoubleType(), initial_default=default),),
                      schema_id=0)

    positive, negative = schema(0.0), schema(-0.0)
    assert positive == negative
    assert '"initial-default":0.0' in _schema_json_text(positive)
    assert '"initial-default":-0.0' in _schema_json_text(negative)
    assert _schema_json_text(positive) is _schema_json_text(positive)


@pytest.mark.parametrize("format_version", [1, 2, 3])
def test_kept_entries_are_what_reading_the_manifest_gives(tmp_path, format_version):
    """The projector keeps the entries of the manifests it writes (new and merged) for its next merge instead of
    reading the files back: what it keeps must be exactly what reading gives, or publishing and a rebuild (which
    reads) would write different bytes. Merges of merged manifests, deletes and partitions included."""
    cat = Catalog.open(tmp_path / "wh")
    cat.create_namespace("db")
    data = pa.table({"id": pa.array([1, 2, 3], pa.int64()), "name": pa.array(["a", None, "c"]),
                     "x": pa.array([0.5, float("nan"), None], pa.float64())})
    t = cat.create_table("db.t", schema=data.schema, partition_by=["bucket(id, 2)"], format_version=format_version,
                         properties={"commit.manifest.min-count-to-merge": "3",
                                     **({"write.delete.mode": "merge-on-read"} if format_version > 1 else {})})
    for i in range(7):
        t.append(data)
        if i % 3 == 1:
            t.delete("id = 2 and name is null")
    kept = cat.projector._written._kept
    assert bool(kept) == (format_version > 1)  # v1 manifests hold no sequence numbers: those are read back
    for (path, _), entries in kept.items():
        assert read_manifest(open(path, "rb").read(), path)[1] == entries, path
    assert cat.verify("db.t") == []
    cat.close()


def test_a_list_read_back_from_the_index_shares_the_records_decoded_before(tmp_path):
    """Another handle's commits are published from lists it reads back from the index: each list shares all but
    its newest manifests with its parent's, so their records are decoded once and reused (the same objects),
    and each list still reads back equal to what was stored."""
    from projections.manifest_list_index import StoredIndex

    cat, t, snaps = appended(tmp_path, 4, {"commit.manifest-merge.enabled": "false"})
    index = StoredIndex(cat.log)  # nothing cached in memory: every list is read from the derived table
    lists = [index.get(t.uuid, s.snapshot_id) for s in snaps]
    assert [len(m) for m in lists] == [1, 2, 3, 4]
    for older, newer in zip(lists, lists[1:]):
        assert all(any(a is b for b in newer) for a in older)  # the parent's records, not copies
    stored = cat.projector.index
    for s, got in zip(snaps, lists):
        assert got == stored.get(t.uuid, s.snapshot_id) == manifest_list_of(t, s.snapshot_id)
    cat.close()


def manifest_list_of(table, snapshot_id: int) -> list:
    meta = json.load(open(table.metadata_location))
    snap = next(s for s in meta["snapshots"] if s["snapshot-id"] == snapshot_id)
    return read_manifest_list(open(snap["manifest-list"], "rb").read(), snap["manifest-list"])


@pytest.mark.parametrize("format_version", [1, 2, 3])
def test_a_merge_reads_back_no_manifest_the_projector_wrote(tmp_path, format_version):
    """Merging packs the manifests of the last commits: those this projector wrote are taken from memory, not read
    back (v1 manifests are read: they hold no sequence numbers, which reading fills in)."""
    cat, t, _ = appended(tmp_path, 3, {"commit.manifest.min-count-to-merge": "4"}, format_version)
    read, reads = cat.projector.io.read_bytes, []
    cat.projector.io.read_bytes = lambda path: reads.append(path) or read(path)
    for i in range(9):
        t.append(pa.table({"id": pa.array([10 + i], pa.int64())}))
    assert len(manifest_list(t)) < 4  # merged, more than once
    manifests = [p for p in reads if p.endswith(".avro")]
    assert (manifests == []) == (format_version > 1), manifests
    assert sorted(t.scan().to_arrow().column("id").to_pylist()) == [0, 1, 2] + list(range(10, 19))
    assert cat.verify("db.t") == []
    cat.close()


def test_a_stored_list_is_cut_into_records_and_only_new_ones_are_parsed(monkeypatch):
    """A stored list's text is cut where records meet, and a record's text decoded before is not parsed again;
    any record (partition bounds, v3 row ids, a path holding quotes, braces and the very text that separates two
    records) reads back equal to what was stored, and text of another shape is parsed whole."""
    import projections.manifest_list_index as index_module
    from engine.model.data_file import FieldSummary, ManifestFile

    def record(n: int, path: str, **extra) -> ManifestFile:
        return ManifestFile(manifest_path=path, manifest_length=100 + n, partition_spec_id=0, sequence_number=n,
                            min_sequence_number=n, added_snapshot_id=1000 + n, added_files_count=1,
                            existing_files_count=0, deleted_files_count=0, added_rows_count=10, existing_rows_count=0,
                            deleted_rows_count=0, **extra)

    records = [record(1, "/w/t/metadata/a-m0.avro"),
               record(2, '/w/t/metadata/odd },{"path": "x" {}[]\\ name.avro',
                      partitions=(FieldSummary(contains_null=False, contains_nan=None, lower_bound=b"\x00\x01",
                                               upper_bound=b"}"),)),
               record(3, "/w/t/metadata/c-m0.avro", first_row_id=77, partitions=())]
    text = "[" + ",".join(index_module._manifest_json_text(m) for m in records) + "]"
    parsed = []
    loads = index_module.json.loads
    monkeypatch.setattr(index_module.json, "loads", lambda s: parsed.append(s) or loads(s))
    first = index_module.decode_manifest_list(text)
    assert first == records and len(parsed) == 3  # one parse per record, none of the whole list
    longer = "[" + index_module._manifest_json_text(record(4, "/w/t/metadata/d-m0.avro")) + "," + text[1:]
    parsed.clear()
    again = index_module.decode_manifest_list(longer)
    assert again[1:] == records and len(parsed) == 1  # only the new record is parsed
    assert all(a is b for a, b in zip(again[1:], first))  # the records decoded before, not copies
    assert index_module.decode_manifest_list("[]") == []
    reordered = json.dumps([dict(reversed(list(index_module.manifest_file_to_json(m).items()))) for m in records])
    assert index_module.decode_manifest_list(reordered) == records  # another shape: parsed whole


@pytest.mark.parametrize("format_version", [1, 2, 3])
def test_entries_rebuilt_from_the_log_are_what_reading_the_manifest_gives(tmp_path, format_version):
    """A merge rebuilds from the log the entries of another process's manifests of new files instead of reading
    them: what it rebuilds must be exactly what reading gives (inherited values made explicit), for data and
    delete manifests, several per snapshot, partitions, compaction's older data sequence numbers and v3 row ids.
    Snapshots committed at v1 or under an older schema are read back, never rebuilt."""
    from projections.commit_renderer import Renderer

    cat = Catalog.open(tmp_path / "wh")
    cat.create_namespace("db")
    data = pa.table({"id": pa.array([1, 2, 3], pa.int64()), "name": pa.array(["a", None, "c"])})
    t = cat.create_table("db.t", schema=data.schema, partition_by=["bucket(id, 2)"], format_version=format_version,
                         properties={"commit.manifest-merge.enabled": "false"})
    t.append(data)
    if format_version == 1:
        t.append(data)
        t.upgrade_format_version(2)
    t.append(data)
    before_change = {s.snapshot_id for s in t.state.snapshots}
    t.update_schema().add_column("x", "double").commit()
    t.set_properties({"write.delete.mode": "merge-on-read"})
    more = pa.table({"id": pa.array([5, 6], pa.int64()), "name": pa.array(["e", None]),
                     "x": pa.array([0.5, None], pa.float64())})
    t.append(more)
    t.upsert(more.slice(0, 1), ["id"])  # data and delete files in one snapshot
    t.delete("id = 3")
    t.rewrite_data_files()  # new files keep the older data sequence numbers of the rows they hold
    t.append(more)

    state, read = t.state, cat.io.read_bytes

    class WouldRead(Exception):
        pass

    def refuse(path: str) -> bytes:
        raise WouldRead(path)

    rebuilt, expected = set(), set()
    for snap in state.snapshots:
        for m in manifest_list_of(t, snap.snapshot_id):
            try:
                entries = Renderer(refuse, changes_of=cat.store.file_changes_of).entries_of(m, state)
            except WouldRead:
                continue
            rebuilt.add(m.manifest_path)
            assert entries == Renderer(read).entries_of(m, state), m.manifest_path
        if snap.snapshot_id not in before_change:  # its manifests of new files: in its own list, nothing existing
            expected.update(m.manifest_path for m in manifest_list_of(t, snap.snapshot_id)
                            if m.added_snapshot_id == snap.snapshot_id and m.added_files_count
                            and not m.existing_files_count and not m.deleted_files_count)
    assert rebuilt == expected and len(expected) >= 5
    contents = {int(m.content) for snap in state.snapshots for m in manifest_list_of(t, snap.snapshot_id)
                if m.manifest_path in rebuilt}
    assert contents == {0, 1}  # data and delete manifests
    cat.close()


@pytest.mark.parametrize("format_version", [2, 3])
def test_a_merge_reads_back_no_manifest_of_new_files_another_process_wrote(tmp_path, format_version):
    """Two handles of one catalog (as two processes) append in turn: each merge packs manifests of both, and the
    other handle's manifests of new files are rebuilt from the log, not read back (its merged manifests are). What
    both publish is still exactly what the log renders."""
    cat, t, _ = appended(tmp_path, 2, {"commit.manifest.min-count-to-merge": "4"}, format_version)
    other = Catalog.open(tmp_path / "wh")
    # another process keeps nothing of this one's: handles of one process share what they keep (next test)
    other.projector.stop_sharing()
    t_other = other.load_table("db.t")
    read, reads = other.projector.io.read_bytes, []
    other.projector.io.read_bytes = lambda path: reads.append(path) or read(path)
    for i in range(12):
        (t if i % 2 else t_other).append(pa.table({"id": pa.array([10 + i], pa.int64())}))
    assert len(manifest_list(t_other)) < 4  # merged, more than once
    merged = {m.manifest_path for snap in t.state.snapshots for m in manifest_list_of(t, snap.snapshot_id)
              if m.existing_files_count}
    read_back = {p for p in reads if p.endswith(".avro")}
    assert read_back and read_back <= merged  # only the other handle's merged manifests
    assert sorted(t_other.scan().to_arrow().column("id").to_pylist()) == [0, 1] + list(range(10, 22))
    assert cat.verify("db.t") == [] and other.verify("db.t") == []
    other.close()
    cat.close()


@pytest.mark.parametrize("format_version", [2, 3])
def test_handles_of_one_process_merge_without_reading_back_what_the_other_wrote(tmp_path, format_version):
    """Two handles of one catalog in one process (a REST server's worker threads, writers of one process) keep
    the entries of the manifests either wrote, and the encoded history either rendered, in one place: appending in
    turn, neither reads back a manifest the other wrote, merged ones included, and what both publish is exactly
    what the log renders."""
    cat, t, _ = appended(tmp_path, 2, {"commit.manifest.min-count-to-merge": "4"}, format_version)
    other = Catalog.open(tmp_path / "wh")
    assert other.projector.metadata is cat.projector.metadata and other.projector._written is cat.projector._written
    t_other = other.load_table("db.t")
    reads = []
    for handle in (cat, other):
        read = handle.projector.io.read_bytes
        handle.projector.io.read_bytes = lambda path, read=read: reads.append(path) or read(path)
    for i in range(12):
        (t if i % 2 else t_other).append(pa.table({"id": pa.array([10 + i], pa.int64())}))
    merged = {m.manifest_path for snap in t.state.snapshots for m in manifest_list_of(t, snap.snapshot_id)
              if m.existing_files_count}
    assert len(merged) >= 2 and len(manifest_list(t_other)) < 4  # merged, more than once
    assert [p for p in reads if p.endswith(".avro")] == []
    assert sorted(t_other.scan().to_arrow().column("id").to_pylist()) == [0, 1] + list(range(10, 22))
    assert cat.verify("db.t") == [] and other.verify("db.t") == []
    other.close()
    cat.close()
    elsewhere = Catalog.open(tmp_path / "other")  # another catalog keeps its own
    assert elsewhere.projector.metadata is not other.projector.metadata
    elsewhere.close()


def test_a_commit_s_snapshots_are_the_last_of_its_state(tmp_path):
    """A commit's files are rendered for the snapshots it added, found from the end of its state's snapshots (a
    commit's own go on the end; an expiry keeps the others' order): the same as picking them out of the whole
    history, after one-snapshot commits, a transaction of three, an expiry and a branch."""
    from projections.projector import commit_snapshots

    with Catalog.open(tmp_path / "wh") as cat:
        cat.create_namespace("db")
        t = cat.create_table("db.t", pa.schema([("id", pa.int64())]))
        table = lambda n: pa.table({"id": pa.array([n], pa.int64())})  # noqa: E731
        for i in range(3):
            t.append(table(i))
        with t.transaction() as tx:
            for i in range(3, 6):
                tx.append(table(i))
        t.expire_snapshots(retain_last=2)
        t.manage_snapshots().create_branch(t.current_snapshot().snapshot_id, "audit").commit()
        t.append(table(6))
        store = cat.store
        states = store.commits_between(t.uuid, 0, store.log.head(t.uuid))
        counts = []
        for state in states:
            expected = tuple(s for s in state.snapshots if s.commit_id == state.commit_id)
            assert commit_snapshots(state) == expected
            counts.append(len(expected))
        assert 3 in counts and counts.count(0) >= 2  # the transaction; the create and the expiry add none
