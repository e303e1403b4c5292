"""Row lineage on a v3 branch moved onto a snapshot from before the upgrade to v3 (a rollback, a branch created
from it): its files carry no first row id, and the rows must still get ids no other row has, for icelog's scan and
for every reader of the published manifests (which give an entry without an id the ids after its manifest's
``first_row_id``)."""

from __future__ import annotations

import json
from collections import Counter

import fastavro
import pyarrow as pa
import pytest

from engine import Catalog
from engine.state.events import RefSet

SCHEMA = pa.schema([("id", pa.int64()), ("cat", pa.string())])


@pytest.fixture
def cat(tmp_path):
    with Catalog.open(tmp_path / "wh") as catalog:
        catalog.create_namespace("db")
        yield catalog


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
