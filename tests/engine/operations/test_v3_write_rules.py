"""The v3 spec's rules, whatever operation writes: at most one deletion vector per data file in a snapshot (a new
one replaces every earlier delete of the file), a data file removed takes its vector with it, a snapshot's sizes
count a vector's blob, not the Puffin file it shares with others (Java's SnapshotSummary); and rows of a branch
moved onto a snapshot from before the upgrade to v3 (a rollback, a branch created from it), whose files carry no
first row id, still get ids no other row has, for icelog's scan and for every reader of the published manifests
(which give an entry without an id the ids after its manifest's ``first_row_id``)."""

from __future__ import annotations

import json
from collections import Counter

import fastavro
import pyarrow as pa
import pytest

from engine import Catalog
from engine.errors import ValidationError
from engine.model.data_file import DataFileContent
from engine.state.events import RefSet
from engine.write.data_writer import write_data_files
from engine.write.delete_files import write_deletion_vectors

SCHEMA = pa.schema([("id", pa.int64()), ("cat", pa.string())])


@pytest.fixture
def cat(tmp_path):
    with Catalog.open(tmp_path / "wh") as catalog:
        catalog.create_namespace("db")
        yield catalog


def live(t):
    return [e.file for e in t.catalog.store.live_entries(t.state, t.current_snapshot().snapshot_id)]


def ids(t) -> list[int]:
    return sorted(t.scan().to_arrow().column("id").to_pylist())


def with_vectors(cat, name="db.t"):
    """Two data files (partitions a and b), each with a vector deleting one row."""
    t = cat.create_table(name, SCHEMA, partition_by=["cat"], format_version=3,
                         properties={"write.delete.mode": "merge-on-read"})
    t.append(pa.table({"id": list(range(6)), "cat": ["a"] * 3 + ["b"] * 3}))
    t.delete("id IN (0, 3)")
    assert sum(f.is_deletion_vector for f in live(t)) == 2
    return t


def data_file(t, partition):
    return next(f for f in live(t) if f.content == DataFileContent.DATA and f.partition == (partition,))


def test_a_vector_for_a_data_file_that_has_deletes_is_refused(cat):
    t = with_vectors(cat)
    a = data_file(t, "a")
    head = cat.log.head(t.uuid)
    second, _ = write_deletion_vectors(t.state, {a.file_path: [1]}, spec_id=a.spec_id, partition=a.partition)
    with pytest.raises(ValidationError, match="already has delete file .*use add_position_deletes"):
        t.row_delta().add_delete_files(second).commit()
    # two vectors for one data file in one call
    plain = cat.create_table("db.plain", SCHEMA, format_version=3)
    plain.append(pa.table({"id": [1, 2, 3], "cat": ["x"] * 3}))
    f = live(plain)[0]
    one, _ = write_deletion_vectors(plain.state, {f.file_path: [0]}, spec_id=0, partition=())
    two, _ = write_deletion_vectors(plain.state, {f.file_path: [1]}, spec_id=0, partition=())
    with pytest.raises(ValidationError, match="already has delete file"):
        plain.row_delta().add_delete_files(one + two).commit()
    assert cat.log.head(t.uuid) == head and ids(t) == [1, 2, 4, 5] and ids(plain) == [1, 2, 3]
    # the way that merges: one vector per data file, holding both deletes
    t.row_delta().add_position_deletes({a.file_path: [1]}).commit()
    vectors = Counter(f.referenced_data_file for f in live(t) if f.is_deletion_vector)
    assert set(vectors.values()) == {1} and ids(t) == [2, 4, 5]
    # an equality delete on the file is no vector: a vector written elsewhere still comes in beside it
    plain.delete_by_key(pa.table({"id": [3]}), ["id"])
    plain.row_delta().add_delete_files(one).commit()
    assert ids(plain) == [2]


@pytest.mark.parametrize("operation", ["overwrite", "dynamic_overwrite", "replace_partitions", "delete_files",
                                       "overwrite_data_files"])
def test_removing_a_data_file_removes_its_vector(cat, operation):
    t = with_vectors(cat)
    a = data_file(t, "a")
    new = pa.table({"id": [10], "cat": ["a"]})
    if operation == "overwrite":
        t.overwrite(new)
        removed_vectors = 2
    elif operation == "dynamic_overwrite":
        t.dynamic_overwrite(new)
        removed_vectors = 1
    elif operation == "replace_partitions":
        t.replace_partitions(write_data_files(t.state, new))
        removed_vectors = 1
    elif operation == "delete_files":
        t.delete_files([a.file_path])
        removed_vectors = 1
    else:
        t.overwrite_data_files(write_data_files(t.state, new))
        removed_vectors = 2
    files = live(t)
    data = {f.file_path for f in files if f.content == DataFileContent.DATA}
    vectors = [f for f in files if f.is_deletion_vector]
    assert all(v.referenced_data_file in data for v in vectors)  # none dangles
    summary = dict(t.current_snapshot().summary)
    assert summary["removed-dvs"] == str(removed_vectors)
    assert summary["total-delete-files"] == str(len(vectors)) == str(2 - removed_vectors)
    assert t.verify_projection() == []


def test_snapshot_sizes_count_a_vector_blob_not_its_puffin_file(cat):
    t = cat.create_table("db.t", SCHEMA, format_version=3, properties={"write.delete.mode": "merge-on-read"})
    t.append(pa.table({"id": [0, 1, 2], "cat": ["a"] * 3}))
    t.append(pa.table({"id": [3, 4, 5], "cat": ["a"] * 3}))
    before = int(dict(t.current_snapshot().summary)["total-files-size"])
    t.delete("id IN (0, 3)")  # one Puffin file holding two vectors
    vectors = [f for f in live(t) if f.is_deletion_vector]
    assert len(vectors) == 2 and len({v.file_path for v in vectors}) == 1
    blobs = sum(v.content_size_in_bytes for v in vectors)
    assert blobs < vectors[0].file_size_in_bytes
    summary = dict(t.current_snapshot().summary)
    assert summary["added-files-size"] == str(blobs)
    assert int(summary["total-files-size"]) - before == blobs
    t.delete_files([vectors[0].file_path])  # the Puffin file's path: both vectors go, each counted by its blob
    summary = dict(t.current_snapshot().summary)
    assert summary["removed-dvs"] == "2" and summary["removed-files-size"] == str(blobs)
    assert not any(f.is_deletion_vector for f in live(t)) and ids(t) == [0, 1, 2, 3, 4, 5]


# ---------------------------------------------------------------- row ids of heads from before the upgrade


def upgraded_with_an_old_snapshot(cat, name):
    """A v2 table of two appends upgraded to v3; returns it and its first snapshot (from before the upgrade)."""
    t = cat.create_table(name, SCHEMA, format_version=2, properties={"commit.manifest.min-count-to-merge": "2"})
    t.append(pa.table({"id": [0, 1, 2], "cat": ["x"] * 3}))
    old = t.current_snapshot().snapshot_id
    t.append(pa.table({"id": [3, 4], "cat": ["x"] * 2}))
    t.upgrade_format_version(3)
    return t, old


def row_ids(t, snapshot_id):
    rows = t.scan(snapshot_id=snapshot_id, columns=["id", "_row_id"]).to_arrow().to_pylist()
    return {r["id"]: r["_row_id"] for r in rows}


def published_manifests(t, snapshot_id):
    """(manifest first_row_id, [(status, first_row_id) of its entries]) of the snapshot's data manifests."""
    doc = json.loads(open(t.metadata_location).read())
    listing = next(s["manifest-list"] for s in doc["snapshots"] if s["snapshot-id"] == snapshot_id)
    out = []
    with open(listing, "rb") as f:
        for m in fastavro.reader(f):
            if m["content"] == 0:
                with open(m["manifest_path"], "rb") as mf:
                    out.append((m["first_row_id"], [(e["status"], e["data_file"]["first_row_id"])
                                                    for e in fastavro.reader(mf)]))
    return out


@pytest.mark.parametrize("how", ["rollback", "branch"])
def test_rows_of_a_head_from_before_the_upgrade_get_unique_ids(cat, how):
    t, old = upgraded_with_an_old_snapshot(cat, f"db.{how}")
    ref = "main"
    if how == "rollback":
        t.manage_snapshots().rollback_to_snapshot(old).commit()
    else:
        t.manage_snapshots().create_branch(old, "b").commit()
        ref = "b"
    assert t.snapshot_by_id(t.state.branch_head(ref)).first_row_id is not None  # labelled in the same commit
    t.append(pa.table({"id": [10, 11], "cat": ["y"] * 2}), branch=ref)
    t.append(pa.table({"id": [12], "cat": ["y"]}), branch=ref)  # merges the manifests
    ids = row_ids(t, t.state.branch_head(ref))
    assert sorted(ids) == [0, 1, 2, 10, 11, 12]
    assert None not in ids.values() and len(set(ids.values())) == 6
    assert all(i < t.state.next_row_id for i in ids.values())
    assert t.verify_projection() == []


def test_a_manifest_with_a_file_without_an_id_carries_no_first_row_id(cat):
    """A branch moved by an event alone (as a REST client's set-snapshot-ref does) keeps unlabelled files: a merged
    manifest holding one must not carry a first_row_id, or readers give that file's rows other rows' ids."""
    t, old = upgraded_with_an_old_snapshot(cat, "db.t")
    t.commit_events(lambda base, ctx: [RefSet(name="main", snapshot_id=old)])
    t.append(pa.table({"id": [10, 11], "cat": ["y"] * 2}))
    t.append(pa.table({"id": [12], "cat": ["y"]}))
    head = t.current_snapshot().snapshot_id
    manifests = published_manifests(t, head)
    assert any(None in [i for status, i in entries if status != 2] for _, entries in manifests)
    for first, entries in manifests:
        live = [i for status, i in entries if status != 2]
        assert first is None if None in live else first == min(live)
    labelled = [i for i in row_ids(t, head).values() if i is not None]
    assert len(labelled) == len(set(labelled)) == 3  # the appended rows; the old ones have none
    assert not [k for k, n in Counter(labelled).items() if n > 1]
    assert t.verify_projection() == []


def test_snapshot_management_labels_only_the_branches_it_moves(cat):
    """A branch left on a snapshot from before the upgrade by another writer (a REST client's set-snapshot-ref) is
    that writer's: a tag created, or another branch moved, gives it no snapshot (its writers assert its head)."""
    t, old = upgraded_with_an_old_snapshot(cat, "db.t")
    t.commit_events(lambda base, ctx: [RefSet(name="side", snapshot_id=old)])
    snapshots = len(t.state.snapshots)
    t.manage_snapshots().create_tag(t.current_snapshot().snapshot_id, "release-1").commit()
    t.manage_snapshots().create_branch(old, "audit").commit()  # moved here: labelled
    assert t.state.branch_head("side") == old
    assert t.snapshot_by_id(t.state.branch_head("audit")).first_row_id is not None
    assert len(t.state.snapshots) == snapshots + 1
