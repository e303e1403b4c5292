"""Reading what a REST client wrote for a commit: the parent's manifests come from the projector's index, so only
the client's new manifests are read."""

from __future__ import annotations

import os
import shutil

import attrs
import pyarrow as pa

from engine import Catalog
from engine.operations.client_files import load_client_snapshots
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
