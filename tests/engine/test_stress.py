"""4 processes x 50 mixed operations on one table, each on its own key range: nothing lost, nothing applied twice,
no operation fails, and the final table equals a serial replay of each process's work. Partitioned by worker or not:
on one unpartitioned table the workers' deletes and upserts meet in the same files' neighbourhood (global equality
deletes, copy-on-write rewrites), and only column bounds tell them apart, as in Iceberg Java's validation."""

from __future__ import annotations

import multiprocessing
import random

import pyarrow as pa
import pytest

from engine import Catalog

PROCESSES = 4
OPERATIONS = 50
SCHEMA = pa.schema([("worker", pa.int32()), ("id", pa.int64()), ("v", pa.int64())])


def plan(worker: int) -> list[tuple]:
    """The worker's operations, and (by replaying them serially) the rows it must leave behind."""
    rng = random.Random(worker)
    ops = []
    next_id = worker * 1_000_000
    for i in range(OPERATIONS):
        kind = rng.choice(["append", "append", "delete", "upsert"])
        if kind == "append":
            n = rng.randint(1, 5)
            ops.append(("append", list(range(next_id, next_id + n)), i))
            next_id += n
        elif kind == "delete":
            lo = worker * 1_000_000 + rng.randint(0, max(1, next_id - worker * 1_000_000))
            ops.append(("delete", lo, lo + rng.randint(1, 4)))
        else:
            ids = sorted({worker * 1_000_000 + rng.randint(0, max(1, next_id - worker * 1_000_000))
                          for _ in range(rng.randint(1, 3))})
            ops.append(("upsert", ids, i))
            next_id = max(next_id, ids[-1] + 1)
    return ops


def replay(worker: int) -> dict[int, int]:
    rows: dict[int, int] = {}
    for op in plan(worker):
        if op[0] == "append":
            rows.update({k: op[2] for k in op[1]})
        elif op[0] == "delete":
            for k in [k for k in rows if op[1] <= k < op[2]]:
                del rows[k]
        else:
            rows.update({k: op[2] for k in op[1]})
    return rows


def table_of(worker: int, ids: list[int], v: int) -> pa.Table:
    return pa.table({"worker": pa.array([worker] * len(ids), pa.int32()), "id": pa.array(ids, pa.int64()),
                     "v": pa.array([v] * len(ids), pa.int64())})


def open_catalog(warehouse: str, log: str | None) -> Catalog:
    """The catalog of ``warehouse``, its log in ``catalog.db`` there or in the PostgreSQL database ``log``."""
    return Catalog.open(log, warehouse=warehouse) if log else Catalog.open(warehouse)


def run_worker(warehouse: str, worker: int, barrier, log: str | None = None) -> list[str]:
    done = []
    with open_catalog(warehouse, log) as cat:
        t = cat.load_table("db.t")
        barrier.wait()
        for op in plan(worker):
            if op[0] == "append":
                snap = t.append(table_of(worker, op[1], op[2]))
            elif op[0] == "delete":
                snap = t.delete(f"worker = {worker} and id >= {op[1]} and id < {op[2]}")
            else:
                snap = t.upsert(table_of(worker, op[1], op[2]), ["worker", "id"])
            if snap is not None:
                done.append(snap.commit_id)
    return done


LAYOUTS = {
    "partitioned-merge-on-read": (["worker"], "merge-on-read"),
    "unpartitioned-copy-on-write": ([], "copy-on-write"),
    "unpartitioned-merge-on-read": ([], "merge-on-read"),
}


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_four_processes_mixed_operations(tmp_path, layout):
    check_mixed_operations(str(tmp_path / "wh"), layout, None)


def test_four_processes_mixed_operations_on_a_postgresql_log(tmp_path, postgres_url):
    check_mixed_operations(str(tmp_path / "wh"), "unpartitioned-merge-on-read", postgres_url)


def check_mixed_operations(warehouse: str, layout: str, log: str | None) -> None:
    partition_by, delete_mode = LAYOUTS[layout]
    with open_catalog(warehouse, log) as cat:
        cat.create_namespace("db")
        cat.create_table("db.t", schema=SCHEMA, partition_by=partition_by,
                         properties={"write.delete.mode": delete_mode})
    ctx = multiprocessing.get_context("spawn")
    with ctx.Manager() as manager:
        barrier = manager.Barrier(PROCESSES)
        with ctx.Pool(PROCESSES) as pool:
            commits = pool.starmap(run_worker, [(warehouse, w, barrier, log) for w in range(PROCESSES)])
    landed = [c for cs in commits for c in cs]
    assert len(landed) == len(set(landed))
    with open_catalog(warehouse, log) as cat:
        t = cat.load_table("db.t")
        events = cat.log.read_stream(t.uuid)
        assert [e.version for e in events] == list(range(1, len(events) + 1))
        assert {e.commit_id for e in events if e.type == "add-snapshot"} == set(landed)
        rows = t.scan().to_arrow()
        got = {(w, i): v for w, i, v in zip(rows.column("worker").to_pylist(), rows.column("id").to_pylist(),
                                            rows.column("v").to_pylist())}
        assert len(got) == rows.num_rows  # no key twice
        expected = {(w, k): v for w in range(PROCESSES) for k, v in replay(w).items()}
        assert got == expected
        t.publish()
        assert cat.verify("db.t") == []
