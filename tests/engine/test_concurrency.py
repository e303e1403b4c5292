"""Several processes appending to one table at once: every append lands exactly once, nothing is lost."""

from __future__ import annotations

import multiprocessing
import os

import pyarrow as pa

from engine import Catalog

PROCESSES = 4
APPENDS_EACH = 25


def _appender(warehouse: str, worker: int, barrier) -> list[int]:
    ids = []
    with Catalog.open(warehouse) as cat:
        table = cat.load_table("db.t")
        barrier.wait()
        for i in range(APPENDS_EACH):
            rows = pa.table({"worker": pa.array([worker], pa.int32()), "seq": pa.array([i], pa.int32())})
            ids.append(table.append(rows).snapshot_id)
    return ids


def test_four_processes_append_concurrently(tmp_path):
    warehouse = str(tmp_path / "wh")
    with Catalog.open(warehouse) as cat:
        cat.create_namespace("db")
        cat.create_table("db.t", schema=pa.schema([("worker", pa.int32()), ("seq", pa.int32())]),
                         partition_by=["worker"])
    ctx = multiprocessing.get_context("spawn")
    with ctx.Manager() as manager:
        barrier = manager.Barrier(PROCESSES)
        with ctx.Pool(PROCESSES) as pool:
            results = pool.starmap(_appender, [(warehouse, w, barrier) for w in range(PROCESSES)])
    landed = [sid for ids in results for sid in ids]
    assert len(landed) == len(set(landed)) == PROCESSES * APPENDS_EACH

    with Catalog.open(warehouse) as cat:
        table = cat.load_table("db.t")
        snapshots = table.snapshots()
        assert sorted(s.snapshot_id for s in snapshots) == sorted(landed)
        # one linear history: each snapshot's parent is the one before, sequence numbers 1..100
        assert [s.sequence_number for s in snapshots] == list(range(1, PROCESSES * APPENDS_EACH + 1))
        assert all(b.parent_snapshot_id == a.snapshot_id for a, b in zip(snapshots, snapshots[1:]))
        events = cat.log.read_stream(table.uuid)
        assert [e.version for e in events] == list(range(1, len(events) + 1))
        rows = table.scan().to_arrow()
        assert sorted(zip(rows.column("worker").to_pylist(), rows.column("seq").to_pylist())) == sorted(
            (w, i) for w in range(PROCESSES) for i in range(APPENDS_EACH))
        assert table.current_snapshot().summary_value("total-records") == str(PROCESSES * APPENDS_EACH)
        table.publish()
        assert table.metadata_location.endswith(f"v{events[-1].version}.metadata.json")
        assert cat.verify("db.t") == []
        assert os.path.exists(table.metadata_location)
