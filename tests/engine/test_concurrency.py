"""Writers racing on one table: several processes appending at once (every append lands exactly once, nothing is
lost), and a compaction racing row-level deletes committed through another catalog handle (its own SQLite
connection): equality deletes land beside the compaction, position deletes of a file it rewrites fail it."""

from __future__ import annotations

import multiprocessing
import os

import pyarrow as pa

import pytest

from engine import Catalog
from engine.errors import ValidationConflict
from engine.operations.rewrite import commit_rewrite, plan_rewrite

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


def _keyed_table(cat: Catalog, name: str, properties: dict[str, str] | None = None):
    """A table of ids 0..59 in three appends, unpartitioned (keyed deletes write equality deletes)."""
    t = cat.create_table(name, schema=pa.schema([("id", pa.int64()), ("v", pa.string())]), properties=properties)
    for i in range(3):
        ids = list(range(i * 20, i * 20 + 20))
        t.append(pa.table({"id": pa.array(ids, pa.int64()), "v": [f"v{j}" for j in ids]}))
    return t


def _rows(t) -> list[tuple[int, str]]:
    got = t.scan().to_arrow()
    return sorted(zip(got.column("id").to_pylist(), got.column("v").to_pylist()))


def test_compaction_and_an_upsert_from_another_catalog_both_land(tmp_path):
    warehouse = str(tmp_path / "wh")
    changes = pa.table({"id": pa.array([3, 25, 70], pa.int64()), "v": ["new3", "new25", "new70"]})
    with Catalog.open(warehouse) as cat:
        cat.create_namespace("db")
        serial = _keyed_table(cat, "db.serial")
        serial.rewrite_data_files()
        serial.upsert(changes, ["id"])
        t = _keyed_table(cat, "db.t")
        plan = plan_rewrite(cat.store, t.state)  # the compaction reads and writes its files ...
        with Catalog.open(warehouse) as other:  # ... while another writer upserts (equality deletes + rows)
            upsert = other.load_table("db.t").upsert(changes, ["id"])
        snap = commit_rewrite(t, plan)
        assert snap.parent_snapshot_id == upsert.snapshot_id
        assert _rows(t) == _rows(serial)
        assert (3, "new3") in _rows(t) and (3, "v3") not in _rows(t)
        assert cat.verify("db.t") == []


def test_compaction_fails_when_another_catalog_deletes_positions_in_a_file_it_rewrites(tmp_path):
    warehouse = str(tmp_path / "wh")
    with Catalog.open(warehouse) as cat:
        cat.create_namespace("db")
        t = _keyed_table(cat, "db.t", properties={"write.delete.mode": "merge-on-read"})
        plan = plan_rewrite(cat.store, t.state)
        with Catalog.open(warehouse) as other:
            winner = other.load_table("db.t").delete("id = 30")  # a position delete file naming a rewritten file
        with pytest.raises(ValidationConflict, match="position delete file") as info:
            commit_rewrite(t, plan)
        assert info.value.commit_id == winner.commit_id and winner.commit_id in str(info.value)
        assert t.current_snapshot().snapshot_id == winner.snapshot_id
        assert [r[0] for r in _rows(t)] == [i for i in range(60) if i != 30]


def test_threads_appending_at_once_publish_every_version_once(tmp_path):
    """Writers queue on the table's publish lock; whoever holds it publishes every commit waiting, and a writer
    whose commit was published meanwhile writes nothing: each vN.metadata.json is written once, by icelog."""
    import threading

    warehouse = str(tmp_path / "wh")
    with Catalog.open(warehouse) as cat:
        cat.create_namespace("db")
        cat.create_table("db.t", schema=pa.schema([("worker", pa.int32()), ("seq", pa.int32())]))
    errors: list[BaseException] = []
    barrier = threading.Barrier(4)

    def appender(worker: int) -> None:
        try:
            with Catalog.open(warehouse) as own:
                table = own.load_table("db.t")
                barrier.wait()
                for i in range(10):
                    table.append(pa.table({"worker": pa.array([worker], pa.int32()),
                                           "seq": pa.array([i], pa.int32())}))
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=appender, args=(w,)) for w in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    with Catalog.open(warehouse) as cat:
        table = cat.load_table("db.t")
        head = cat.log.head(table.uuid)
        assert cat.projector.published_version(table.uuid) == head
        metadata = sorted(p.name for p in (tmp_path / "wh" / "db" / "t" / "metadata").glob("*.metadata.json"))
        assert len(metadata) == head
        assert cat.verify("db.t") == []
        assert table.scan().to_arrow().num_rows == 40


def test_a_writer_whose_commit_another_published_writes_nothing(tmp_path):
    warehouse = str(tmp_path / "wh")
    with Catalog.open(warehouse, project=False) as quiet, Catalog.open(warehouse) as publisher:
        quiet.create_namespace("db")
        table = quiet.create_table("db.t", schema=pa.schema([("id", pa.int32())]))
        table.append(pa.table({"id": pa.array([1], pa.int32())}))
        version = quiet.log.head(table.uuid)
        other = publisher.load_table("db.t")
        assert other.publish() is not None  # publishes the quiet handle's commits
        location = other.metadata_location
        before = os.stat(location).st_mtime_ns
        assert other._publish(check_foreign=False, version=version) is None
        assert other.publish() is None and os.stat(location).st_mtime_ns == before
