"""Reading what a REST client wrote for a commit: the parent's manifests come from the projector's index, so only
the client's new manifests are read; an append's changes are found by looking up its own files among the parent's
live files, which are decoded only when looked up."""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping

import attrs
import pyarrow as pa
import pytest

from engine import Catalog
from engine.errors import ValidationError
from engine.model.data_file import EntryStatus, ManifestContent, ManifestEntry
from engine.operations.client_files import ClientSnapshot, client_file_changes, load_client_snapshots
from engine.operations.table_commit import parse_table_commit
from projections import layout
from projections.manifests import render_manifest_list

SCHEMA = pa.schema([("id", pa.int64())])


def test_the_parents_manifests_come_from_the_projectors_index(tmp_path) -> None:
    cat = Catalog.open(str(tmp_path / "wh"))
    cat.create_namespace("db")
    table = cat.create_table("db.t", SCHEMA)
    for i in range(3):
        table.append(pa.table({"id": pa.array([i], pa.int64())}, schema=SCHEMA))
    state = table.state
    parent = state.current_snapshot
    parent_manifests = cat.projector.index.get(table.uuid, parent.snapshot_id)
    assert parent_manifests and len(parent_manifests) == 3

    # the client's snapshot: the parent's manifests and one of its own (a copy of one under a new name)
    folder = os.path.join(state.location, "metadata")
    new_manifest = os.path.join(folder, "client-m0.avro")
    shutil.copyfile(parent_manifests[0].manifest_path, new_manifest)
    client_list = os.path.join(folder, "snap-client.avro")
    manifests = [*parent_manifests, attrs.evolve(parent_manifests[0], manifest_path=new_manifest)]
    with open(client_list, "wb") as out:
        out.write(render_manifest_list(manifests, format_version=state.format_version, snapshot_id=42,
                                       parent_snapshot_id=parent.snapshot_id, sequence_number=parent.sequence_number + 1,
                                       sync_marker=bytes(16)))
    commit = parse_table_commit([], [{"action": "add-snapshot", "snapshot": {
        "snapshot-id": 42, "parent-snapshot-id": parent.snapshot_id, "timestamp-ms": 1,
        "manifest-list": client_list, "summary": {"operation": "append"}}}])
    # the parent's published list is gone: only the index can say what it held
    os.remove(layout.manifest_list_file(state.location, parent.snapshot_id, parent.commit_id))

    (client,) = load_client_snapshots(cat.io, commit, state, projected=cat.projector.index.get).values()
    assert client.parent_manifests == {m.manifest_path for m in parent_manifests}
    assert set(client.entries) == {new_manifest}  # the parent's manifests were not read
    # nor their records in the client's list decoded: they are the ones the index holds
    assert [m.manifest_path for m in client.manifests] == [m.manifest_path for m in manifests]
    assert all(a is b for a, b in zip(client.manifests, parent_manifests))
    assert client.manifests[-1] == manifests[-1]

    (unknown,) = load_client_snapshots(cat.io, commit, state).values()
    assert unknown.parent_manifests is None  # without the index and the list: every manifest is read
    assert set(unknown.entries) == {m.manifest_path for m in manifests}
    cat.close()


class _LookupsOnly(Mapping):
    """A parent's live files that answer lookups of one key and refuse to be listed (or copied) whole."""

    def __init__(self, files: dict) -> None:
        self.files, self.looked_up = files, []

    def __getitem__(self, key):
        self.looked_up.append(key)
        return self.files[key]

    def __contains__(self, key) -> bool:
        self.looked_up.append(key)
        return key in self.files

    def __iter__(self):
        raise AssertionError("the parent's whole live set was listed")

    def __len__(self) -> int:
        raise AssertionError("the parent's whole live set was counted")


def _table_of_many_files(tmp_path, files: int):
    cat = Catalog.open(str(tmp_path / "wh"))
    cat.create_namespace("db")
    schema = pa.schema([("id", pa.int64()), ("part", pa.int64())])
    table = cat.create_table("db.t", schema, partition_by=["part"])
    table.append(pa.table({"id": pa.array(range(files), pa.int64()), "part": pa.array(range(files), pa.int64())}))
    return cat, table


def test_an_append_looks_up_only_its_own_files_among_the_parents(tmp_path) -> None:
    """A REST append on a large table: its changes are found by looking up its new files among the parent's, never
    by listing or decoding the parent's whole live set; a commit that drops a parent file still finds it."""
    cat, table = _table_of_many_files(tmp_path, 40)
    state = table.state
    parent = state.current_snapshot
    live = {e.file.key: e.file for e in cat.store.live_entries(state, parent.snapshot_id)}
    manifest = cat.projector.index.get(table.uuid, parent.snapshot_id)[0]
    some = next(iter(live.values()))
    new_file = attrs.evolve(some, file_path=some.file_path.replace(".parquet", "-new.parquet"))
    client = ClientSnapshot(
        snapshot_id=42, manifest_list="list.avro",
        manifests=(attrs.evolve(manifest, manifest_path="new-m0.avro", added_snapshot_id=42),),
        entries={"new-m0.avro": (ManifestEntry(status=EntryStatus.ADDED, snapshot_id=None, data_sequence_number=None,
                                               file_sequence_number=None, data_file=new_file),)},
        parent_manifests=frozenset({manifest.manifest_path}))
    before = _LookupsOnly(live)
    changes = client_file_changes(state, client, before, parent.sequence_number + 1)
    assert [(c.added, c.file.file_path) for c in changes] == [(True, new_file.file_path)]
    assert before.looked_up == [new_file.key]

    # the client's list dropped a manifest of the parent: its files are removed (the whole set is read then)
    dropped = attrs.evolve(client, gone_entries=(ManifestEntry(status=EntryStatus.EXISTING, snapshot_id=1,
                                                               data_sequence_number=1, file_sequence_number=1,
                                                               data_file=some),))
    changes = client_file_changes(state, dropped, live, parent.sequence_number + 1)
    assert sorted((c.added, c.file.file_path) for c in changes) == [(False, some.file_path),
                                                                   (True, new_file.file_path)]
    cat.close()


def test_the_live_files_of_a_snapshot_are_decoded_only_when_looked_up(tmp_path) -> None:
    cat, table = _table_of_many_files(tmp_path, 40)
    uuid = table.uuid
    cat.close()
    with Catalog.open(str(tmp_path / "wh")) as cat:  # a cold catalog: nothing decoded yet
        store = cat.store
        state = store.table(uuid)
        sid = state.current_snapshot.snapshot_id
        by_key = store.live_files_by_key(state, sid)
        key = next(iter(by_key))
        assert by_key[key].file_path == key and len(by_key) == 40
        items = store.file_index.live_set(state, sid)
        assert sum(item._file is not None for item in items.values()) == 1  # only the file looked up
        assert dict(by_key) == {e.file.key: e.file for e in store.live_entries(state, sid)}


def test_a_client_snapshot_with_two_vectors_for_one_data_file_is_refused(tmp_path) -> None:
    """The v3 spec allows one deletion vector per data file in a snapshot: a REST client's snapshot adding two
    (Spark's readers then fail, DuckDB's apply one) is refused before anything is committed."""
    from engine.write.delete_files import write_deletion_vectors

    cat = Catalog.open(str(tmp_path / "wh"))
    cat.create_namespace("db")
    table = cat.create_table("db.t", pa.schema([("id", pa.int64())]), format_version=3)
    table.append(pa.table({"id": pa.array(range(5), pa.int64())}))
    state = table.state
    parent = state.current_snapshot
    live = {e.file.key: e.file for e in cat.store.live_entries(state, parent.snapshot_id)}
    data = next(iter(live.values()))
    one, _ = write_deletion_vectors(state, {data.file_path: [0]}, spec_id=0, partition=())
    two, _ = write_deletion_vectors(state, {data.file_path: [1]}, spec_id=0, partition=())
    manifest = cat.projector.index.get(table.uuid, parent.snapshot_id)[0]

    def client_adding(*vectors):
        added = tuple(ManifestEntry(status=EntryStatus.ADDED, snapshot_id=None, data_sequence_number=None,
                                    file_sequence_number=None, data_file=v) for v in vectors)
        return ClientSnapshot(snapshot_id=42, manifest_list="list.avro",
                              manifests=(attrs.evolve(manifest, manifest_path="d-m0.avro", added_snapshot_id=42,
                                                      content=ManifestContent.DELETES),),
                              entries={"d-m0.avro": added}, parent_manifests=frozenset({manifest.manifest_path}))

    changes = client_file_changes(state, client_adding(*one), live, parent.sequence_number + 1)
    assert [c.file.referenced_data_file for c in changes if c.added] == [data.file_path]
    with pytest.raises(ValidationError, match="gets another one in the same snapshot"):
        client_file_changes(state, client_adding(*one, *two), live, parent.sequence_number + 1)
    cat.close()


def test_a_client_vector_for_a_data_file_whose_parent_vector_stays_is_refused(tmp_path) -> None:
    """A data file has one live deletion vector: a REST client's snapshot adding a second one for it while keeping
    the parent's is refused (Java merges the old vector into the new one and removes it); one that removes the old
    vector in the same snapshot lands."""
    from engine.write.delete_files import write_deletion_vectors

    cat = Catalog.open(str(tmp_path / "wh"))
    cat.create_namespace("db")
    table = cat.create_table("db.t", pa.schema([("id", pa.int64())]), format_version=3,
                             properties={"write.delete.mode": "merge-on-read"})
    table.append(pa.table({"id": pa.array(range(5), pa.int64())}))
    table.delete("id = 0")  # the data file's first vector
    state = table.state
    parent = state.current_snapshot
    live = {e.file.key: e.file for e in cat.store.live_entries(state, parent.snapshot_id)}
    (data,) = [f for f in live.values() if not f.is_deletion_vector]
    (old,) = [f for f in live.values() if f.is_deletion_vector]
    new, _ = write_deletion_vectors(state, {data.file_path: [0, 1]}, spec_id=0, partition=())
    manifest = cat.projector.index.get(table.uuid, parent.snapshot_id)[0]

    def client(*entries):
        return ClientSnapshot(snapshot_id=42, manifest_list="list.avro",
                              manifests=(attrs.evolve(manifest, manifest_path="d-m0.avro", added_snapshot_id=42,
                                                      content=ManifestContent.DELETES),),
                              entries={"d-m0.avro": entries},
                              parent_manifests=frozenset(m.manifest_path for m in
                                                         cat.projector.index.get(table.uuid, parent.snapshot_id)))

    added = tuple(ManifestEntry(status=EntryStatus.ADDED, snapshot_id=None, data_sequence_number=None,
                                file_sequence_number=None, data_file=v) for v in new)
    with pytest.raises(ValidationError, match=f"{data.file_path} keeps one from its parent"):
        client_file_changes(state, client(*added), live, parent.sequence_number + 1)
    removed = ManifestEntry(status=EntryStatus.DELETED, snapshot_id=42, data_sequence_number=None,
                            file_sequence_number=None, data_file=old)
    changes = client_file_changes(state, client(*added, removed), live, parent.sequence_number + 1)
    assert {(c.added, c.file.key) for c in changes} == {(True, new[0].key), (False, old.key)}
    cat.close()
