"""A snapshot's ancestry walked one parent at a time (``TableState.iter_ancestors``): the same snapshots as the
whole list, in histories added in order, imported out of order, and running into expired snapshots; a caller that
stops early looks only as far back as it walks."""

from __future__ import annotations

import attrs
import pyarrow as pa

from engine import Catalog
from engine.state.table_state import Snapshot, TableState

SCHEMA = pa.schema([("id", pa.int64())])


def snapshot(snapshot_id: int, parent: int | None) -> Snapshot:
    return Snapshot(snapshot_id=snapshot_id, parent_snapshot_id=parent, sequence_number=snapshot_id,
                    timestamp_ms=snapshot_id, operation="append", summary=(), schema_id=0, commit_id=f"c{snapshot_id}",
                    log_position=snapshot_id, log_version=snapshot_id)


def state_with(tmp_path, snapshots: list[Snapshot], expired: list[Snapshot] = ()) -> TableState:
    with Catalog.open(tmp_path / "wh") as cat:
        cat.create_namespace("db")
        state = cat.create_table("db.t", schema=SCHEMA).state
    return attrs.evolve(state, snapshots=tuple(snapshots), expired_snapshots=tuple(expired))


def ids(snaps) -> list[int]:
    return [s.snapshot_id for s in snaps]


def test_a_walk_gives_the_chain_of_parents_newest_first(tmp_path):
    # two branches off 2: 3 and 5 on one, 4 on the other
    state = state_with(tmp_path, [snapshot(1, None), snapshot(2, 1), snapshot(3, 2), snapshot(4, 2), snapshot(5, 3)])
    assert ids(state.iter_ancestors(5)) == ids(state.ancestors(5)) == [5, 3, 2, 1]
    assert ids(state.iter_ancestors(4)) == [4, 2, 1]
    assert ids(state.iter_ancestors(None)) == [] and ids(state.iter_ancestors(99)) == []


def test_a_history_imported_out_of_order_is_walked_whole(tmp_path):
    # a parent listed after its child (a registered table's metadata may list them so)
    state = state_with(tmp_path, [snapshot(3, 2), snapshot(1, None), snapshot(4, 3), snapshot(2, 1)])
    assert ids(state.iter_ancestors(4)) == [4, 3, 2, 1]


def test_expired_ancestors_are_walked_only_when_asked(tmp_path):
    state = state_with(tmp_path, [snapshot(3, 2), snapshot(4, 3)], expired=[snapshot(1, None), snapshot(2, 1)])
    assert ids(state.iter_ancestors(4)) == [4, 3]
    assert ids(state.iter_ancestors(4, through_expired=True)) == ids(state.ancestors(4, through_expired=True)) \
        == [4, 3, 2, 1]


def test_a_walk_that_stops_early_looks_at_the_newest_snapshots_only(tmp_path):
    chain = [snapshot(1, None)] + [snapshot(i, i - 1) for i in range(2, 2001)]
    looked = []

    class Watched(tuple):
        def __getitem__(self, i):
            looked.append(i)
            return tuple.__getitem__(self, i)

    state = state_with(tmp_path, chain)
    object.__setattr__(state, "snapshots", Watched(state.snapshots))
    walk = state.iter_ancestors(2000)
    assert ids([next(walk), next(walk), next(walk)]) == [2000, 1999, 1998]
    assert min(looked) >= 1990, min(looked)


def test_appends_plan_from_the_parents_kept_live_set(tmp_path):
    """The live files of a new snapshot come from its parent's kept set: the same files as a fresh fold."""
    with Catalog.open(tmp_path / "wh") as cat:
        cat.create_namespace("db")
        t = cat.create_table("db.t", schema=SCHEMA)
        for i in range(30):
            t.append(pa.table({"id": pa.array([i], pa.int64())}))
        live = {f.file_path for f in cat.store.live_files(t.state, t.state.current_snapshot.snapshot_id)}
    with Catalog.open(tmp_path / "wh") as fresh:
        state = fresh.load_table("db.t").state
        assert {f.file_path for f in fresh.store.live_files(state, state.current_snapshot.snapshot_id)} == live
    assert len(live) == 30
