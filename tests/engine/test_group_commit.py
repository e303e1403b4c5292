"""Group commit through the engine: threads of one process, each with its own catalog handle, committing to one
table at the same moment share one log transaction; every operation keeps its own validation, snapshot and result,
the published metadata is what the log renders, and an operation that fails validation in the group fails alone."""

from __future__ import annotations

import threading
import time
from typing import Any, Callable

import pyarrow as pa
import pyarrow.parquet as pq

from engine import Catalog
from engine.errors import ValidationError

SCHEMA = pa.schema([("worker", pa.int32()), ("seq", pa.int32())])


def rows(worker: int, seq: int) -> pa.Table:
    return pa.table({"worker": pa.array([worker], pa.int32()), "seq": pa.array([seq], pa.int32())})


def commit_while_the_log_is_held(warehouse: str, operations: list[Callable[[Any], Any]]) -> tuple[list[Any], tuple[int, int]]:
    """Run each operation (given the table) on its own thread and catalog handle while another handle holds the
    log's write lock, so that they all wait together; their outcomes and the group commit counts they added."""
    outcomes: list[Any] = [None] * len(operations)
    ready = threading.Barrier(len(operations) + 1)

    def run(i: int) -> None:
        with Catalog.open(warehouse) as cat:
            table = cat.load_table("db.t")
            ready.wait()
            try:
                outcomes[i] = operations[i](table)
            except Exception as e:
                outcomes[i] = e

    with Catalog.open(warehouse) as holder:
        group = holder.log._write_lock.group
        before = holder.log.group_commit_counts()
        threads = [threading.Thread(target=run, args=(i,)) for i in range(len(operations))]
        for t in threads:
            t.start()
        with holder.log.transaction():
            ready.wait()
            deadline = time.monotonic() + 60
            while len(group.waiting) < len(operations):
                assert time.monotonic() < deadline, "the writers never queued"
                time.sleep(0.001)
        for t in threads:
            t.join(60)
        after = holder.log.group_commit_counts()
    return outcomes, (after[0] - before[0], after[1] - before[1])


def new_table(tmp_path) -> str:
    warehouse = str(tmp_path / "wh")
    with Catalog.open(warehouse) as cat:
        cat.create_namespace("db")
        cat.create_table("db.t", schema=SCHEMA)
    return warehouse


def test_appends_of_many_threads_share_a_transaction_and_all_land_once(tmp_path):
    warehouse = new_table(tmp_path)
    writers = 6
    outcomes, (transactions, works) = commit_while_the_log_is_held(
        warehouse, [lambda table, w=w: table.append(rows(w, 0)) for w in range(writers)])
    assert not [o for o in outcomes if isinstance(o, Exception)], outcomes
    assert transactions == 1 and works == writers  # one COMMIT (one fsync) for six appends
    with Catalog.open(warehouse) as cat:
        table = cat.load_table("db.t")
        snapshots = table.snapshots()
        assert sorted(s.snapshot_id for s in snapshots) == sorted(o.snapshot_id for o in outcomes)
        assert [s.sequence_number for s in snapshots] == list(range(1, writers + 1))
        assert all(b.parent_snapshot_id == a.snapshot_id for a, b in zip(snapshots, snapshots[1:]))
        assert sorted(table.scan().to_arrow().column("worker").to_pylist()) == list(range(writers))
        assert table.current_snapshot().summary_value("total-records") == str(writers)
        assert cat.verify("db.t") == []


def test_the_same_file_appended_by_two_writers_of_one_group_lands_once(tmp_path):
    warehouse = new_table(tmp_path)
    outside = str(tmp_path / "outside.parquet")
    pq.write_table(rows(9, 9), outside)
    data_dir = tmp_path / "wh" / "db" / "t" / "data"
    outcomes, (transactions, works) = commit_while_the_log_is_held(warehouse, [
        lambda table: table.append_files([outside]),
        lambda table: table.append(rows(1, 0)),
        lambda table: table.append_files([outside]),  # the same file: live once the first lands, in the group
    ])
    assert transactions == 1 and works == 3
    refused = [o for o in outcomes if isinstance(o, Exception)]
    assert len(refused) == 1 and isinstance(refused[0], ValidationError) and "outside.parquet" in str(refused[0])
    with Catalog.open(warehouse) as cat:
        table = cat.load_table("db.t")
        assert sorted(table.scan().to_arrow().column("worker").to_pylist()) == [1, 9]
        assert len(table.snapshots()) == 2 and cat.verify("db.t") == []
    assert len([p for p in data_dir.rglob("*.parquet")]) == 1  # the append's file; append_files copies nothing


class Interrupt(BaseException):
    """Stands for KeyboardInterrupt (Ctrl-C in a notebook whose main thread leads the shared transaction)."""


def test_a_leader_interrupted_in_its_build_keeps_no_state_of_the_rolled_back_transaction(tmp_path):
    """The leader's build read the table inside the shared transaction, with another writer's commit that then
    never landed. Its handle must not serve that state afterwards (a different commit lands at its version), nor
    build on it (a snapshot whose parent is not in the table); the other writer learns its commit's outcome is
    unknown, finds it did not land, and commits again."""
    warehouse = new_table(tmp_path)
    main = Catalog.open(warehouse)
    table = main.load_table("db.t")
    group = main.log._write_lock.group
    outcome: dict[str, Any] = {}

    def other_writer() -> None:
        with Catalog.open(warehouse) as cat:
            t = cat.load_table("db.t")
            try:
                outcome["first"] = t.append(rows(1, 0))
                outcome["second"] = t.append(rows(2, 0))
            except BaseException as e:  # noqa: BLE001 - reported below
                outcome["error"] = e

    group.leading = True  # as if a leader were busy: the other writer queues ...
    other = threading.Thread(target=other_writer)
    other.start()
    deadline = time.monotonic() + 60
    while not group.waiting:
        assert time.monotonic() < deadline, "the other writer never queued"
        time.sleep(0.001)
    with group.changed:
        group.leading = False  # ... and the main thread leads next, running the other's work before its own
    read: list[int] = []

    def interrupted_build(base, ctx):
        read.append(base.version)
        raise Interrupt

    try:
        table.commit_events(interrupted_build)
    except Interrupt:
        pass
    other.join(60)
    assert read == [2] and "error" not in outcome  # the build saw the other's commit, which did not land then
    with Catalog.open(warehouse) as fresh:
        fresh.store.stop_sharing()
        landed = fresh.load_table("db.t").state
    assert landed.version == 3
    assert main.store.table(table.uuid) == landed
    main.load_table("db.t").append(rows(3, 0))
    with Catalog.open(warehouse) as fresh:
        fresh.store.stop_sharing()
        t = fresh.load_table("db.t")
        ids = {s.snapshot_id for s in t.snapshots()}
        assert all(s.parent_snapshot_id in ids for s in t.snapshots() if s.parent_snapshot_id is not None)
        assert sorted(t.scan().to_arrow().column("worker").to_pylist()) == [1, 2, 3]
        assert fresh.verify("db.t") == []
    main.close()
