"""icelog.metadata.max-snapshots keeps the published metadata small while the log keeps the whole history."""

from __future__ import annotations

import json

import pyarrow as pa

from engine import Catalog


def test_metadata_lists_newest_snapshots_and_ref_heads(tmp_path):
    with Catalog.open(tmp_path / "wh") as cat:
        cat.create_namespace("db")
        t = cat.create_table("db.t", schema=pa.schema([("id", pa.int64())]),
                             properties={"icelog.metadata.max-snapshots": "3"})
        snaps = [t.append(pa.table({"id": pa.array([i], pa.int64())})) for i in range(8)]
        t.manage_snapshots().create_tag(snaps[1].snapshot_id, "old").commit()
        meta = json.load(open(t.metadata_location))
        listed = [s["snapshot-id"] for s in meta["snapshots"]]
        assert listed == [snaps[1].snapshot_id] + [s.snapshot_id for s in snaps[-3:]]
        assert {e["snapshot-id"] for e in meta["snapshot-log"]} <= set(listed)
        assert meta["current-snapshot-id"] == snaps[-1].snapshot_id
        # the log still knows every snapshot: icelog time travels to one the metadata no longer lists
        assert t.scan(snapshot_id=snaps[3].snapshot_id).count() == 4
        assert len(t.snapshots()) == 8
        assert cat.verify("db.t") == []
