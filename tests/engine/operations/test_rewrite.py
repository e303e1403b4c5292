"""Compaction: rewrite_data_files (bin-pack, sort, Z-order) with deletes applied and dropped, its validation
against commits that land meanwhile, and the Z-order keys."""

from __future__ import annotations

import datetime as dt
import random

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from engine import Catalog
from engine.write.delete_files import write_equality_deletes
from engine.errors import ValidationConflict, ValidationError
from engine.model import types as T
from engine.model.data_file import DataFileContent
from engine.model.values import from_bytes
from engine.operations.commit import now_ms
from engine.operations.snapshot import new_snapshot_id
from engine.operations.rewrite import (
    commit_rewrite,
    manifest_rewrite_events,
    plan_rewrite,
    rewrite_manifests,
)
from engine.operations.row_delete import bind_filter, delete_mode, plan_row_delete
from engine.operations.snapshot import snapshot_events
from engine.write.zorder import column_key, interleave, zorder_table

SCHEMA = pa.schema([("id", pa.int64()), ("part", pa.string()), ("x", pa.int32()), ("y", pa.int32())])
MOR = {"write.delete.mode": "merge-on-read"}


def rows(ids, part="a") -> pa.Table:
    ids = list(ids)
    return pa.table({"id": pa.array(ids, pa.int64()), "part": [part] * len(ids),
                     "x": pa.array([i % 64 for i in ids], pa.int32()),
                     "y": pa.array([(i // 64) % 64 for i in ids], pa.int32())})


@pytest.fixture
def cat(tmp_path):
    c = Catalog.open(tmp_path / "wh")
    c.create_namespace("db")
    yield c
    c.close()


def ids(t, snapshot_id=None) -> list[int]:
    return sorted(t.scan(snapshot_id=snapshot_id).to_arrow().column("id").to_pylist())


def live(t, content=None):
    files = t.catalog.store.live_files(t.state, t.current_snapshot().snapshot_id)
    return [f for f in files if content is None or f.content == content]


def data_files(t):
    return live(t, DataFileContent.DATA)


def delete_files(t):
    return [f for f in live(t) if f.content != DataFileContent.DATA]


def bounds(f, field_id: int, t=T.LongType()):
    return (from_bytes(t, dict(f.lower_bounds)[field_id]), from_bytes(t, dict(f.upper_bounds)[field_id]))


def shuffled_table(cat, name="db.t", files=10, per_file=100, properties=None, partition_by=None, seed=7):
    """A table whose ``files`` appends each hold ids drawn at random from 0 .. files * per_file - 1."""
    t = cat.create_table(name, schema=SCHEMA, properties=properties, partition_by=partition_by)
    all_ids = list(range(files * per_file))
    random.Random(seed).shuffle(all_ids)
    for i in range(files):
        t.append(rows(all_ids[i * per_file:(i + 1) * per_file]))
    return t


def commit_files(t, added=(), removed=(), operation="delete") -> int:
    sid = new_snapshot_id()
    t.commit_events(lambda base, ctx: snapshot_events(base, ctx, operation=operation, snapshot_id=sid,
                                                      added=list(added), removed=list(removed)))
    return sid


# ------------------------------------------------------------ strategies


def test_binpack_compacts_small_files_into_one(cat):
    t = shuffled_table(cat)
    before = t.current_snapshot()
    snap = t.rewrite_data_files()
    assert snap.operation == "replace" and snap.parent_snapshot_id == before.snapshot_id
    assert len(data_files(t)) == 1
    assert ids(t) == list(range(1000)) == ids(t, before.snapshot_id)
    s = dict(snap.summary)
    assert (s["deleted-data-files"], s["added-data-files"], s["added-records"], s["deleted-records"]) == \
        ("10", "1", "1000", "1000")
    assert (s["total-data-files"], s["total-records"], s["changed-partition-count"]) == ("1", "1000", "1")
    assert "added-delete-files" not in s and "removed-delete-files" not in s
    assert cat.verify("db.t") == []
    assert t.rewrite_data_files() is None  # one file of a fitting size: nothing to do


def test_binpack_splits_by_the_target_size(cat):
    t = shuffled_table(cat, files=4)
    target = t.scan().to_arrow().nbytes // 4 + 1
    t.rewrite_data_files(target_file_size_bytes=target)
    files = data_files(t)
    assert len(files) == 4 and sum(f.record_count for f in files) == 400
    assert ids(t) == list(range(400))


def test_binpack_keeps_partitions_apart(cat):
    t = cat.create_table("db.t", schema=SCHEMA, partition_by=["part"])
    for i in range(3):
        t.append(pa.concat_tables([rows(range(i * 10, i * 10 + 10), "a"), rows(range(100 + i * 10, 110 + i * 10),
                                                                                   "b")]))
    t.append(rows([500], "c"))  # a single fitting file: left alone
    snap = t.rewrite_data_files()
    assert {f.partition: f.record_count for f in data_files(t)} == {("a",): 30, ("b",): 30, ("c",): 1}
    assert snap.summary_value("changed-partition-count") == "2"
    assert ids(t) == list(range(30)) + list(range(100, 130)) + [500]


def test_sort_orders_rows_within_and_across_files(cat):
    t = shuffled_table(cat)
    target = t.scan().to_arrow().nbytes // 5 + 1
    before = t.current_snapshot().snapshot_id
    t.rewrite_data_files(strategy="sort", sort_order=["id DESC"], target_file_size_bytes=target)
    files = data_files(t)
    assert len(files) == 5
    ranges = sorted(bounds(f, 1) for f in files)
    assert all(hi < next_lo for (_, hi), (next_lo, _) in zip(ranges, ranges[1:]))  # disjoint id ranges
    for f in files:
        col = pq.read_table(f.file_path).column("id").to_pylist()
        assert col == sorted(col, reverse=True)
        assert f.sort_order_id == 0  # not one of the table's orders
    assert ids(t) == ids(t, before) == list(range(1000))


def test_sort_by_the_table_order_records_its_id(cat):
    t = shuffled_table(cat, files=3)
    t.replace_sort_order().asc("x").desc("id").commit()
    order_id = t.state.default_sort_order_id
    t.rewrite_data_files(strategy="sort")
    [f] = data_files(t)
    assert f.sort_order_id == order_id
    got = pq.read_table(f.file_path).select(["x", "id"]).to_pylist()
    assert got == sorted(got, key=lambda r: (r["x"], -r["id"]))
    t.rewrite_data_files(strategy="sort", sort_order=["x", "id desc"])
    [f] = data_files(t)
    assert f.sort_order_id == order_id  # the same fields as the table's order


def test_zorder_clusters_both_columns(cat):
    t = shuffled_table(cat, files=16, per_file=256)  # a 64 x 64 grid of (x, y), spread over 16 files
    target = t.scan().to_arrow().nbytes // 16 + 1
    before = t.current_snapshot().snapshot_id
    t.rewrite_data_files(strategy="zorder", zorder_columns=["x", "y"], target_file_size_bytes=target)
    files = data_files(t)
    assert len(files) == 16
    # Morton order: every file is one 16 x 16 square of the grid
    squares = sorted((bounds(f, 3, T.IntegerType()), bounds(f, 4, T.IntegerType())) for f in files)
    assert squares == sorted(((x, x + 15), (y, y + 15)) for x in range(0, 64, 16) for y in range(0, 64, 16))
    assert all(f.sort_order_id == 0 for f in files)
    assert ids(t) == ids(t, before) == list(range(4096))


def test_sort_and_zorder_let_metrics_skip_more_files(cat):
    zt = shuffled_table(cat, "db.z", files=16, per_file=256)
    st = shuffled_table(cat, "db.s", files=16, per_file=256)
    target = zt.scan().to_arrow().nbytes // 16 + 1
    box, column = "x < 16 and y < 16", "y < 8"
    for t in (zt, st):
        assert len(t.scan(where=box).plan_files()) == 16 and len(t.scan(where="id = 2000").plan_files()) == 16
    zt.rewrite_data_files(strategy="zorder", zorder_columns=["x", "y"], target_file_size_bytes=target)
    st.rewrite_data_files(strategy="sort", sort_order=["id"], target_file_size_bytes=target)
    assert len(zt.scan(where=box).plan_files()) == 1
    assert len(zt.scan(where=column).plan_files()) == 4
    assert len(st.scan(where="id = 2000").plan_files()) == 1
    assert len(st.scan(where=column).plan_files()) == 2  # ids are y-major: y < 8 is the first 512 ids
    for t in (zt, st):
        assert t.scan(where=box).count() == 256


def test_where_rewrites_only_the_files_that_might_match(cat):
    t = cat.create_table("db.t", schema=SCHEMA, partition_by=["part"])
    for i in range(3):
        t.append(rows(range(i * 10, i * 10 + 10), "a"))
        t.append(rows(range(100 + i * 10, 110 + i * 10), "b"))
    b_files = {f.file_path for f in data_files(t) if f.partition == ("b",)}
    snap = t.rewrite_data_files(where="part = 'a' and id >= 5")
    assert snap.summary_value("deleted-data-files") == "3"
    assert {f.file_path for f in data_files(t) if f.partition == ("b",)} == b_files
    assert len([f for f in data_files(t) if f.partition == ("a",)]) == 1
    assert t.rewrite_data_files(where="id > 1000") is None


def test_older_specs_are_rewritten_into_the_current_spec(cat):
    t = cat.create_table("db.t", schema=SCHEMA)
    t.append(pa.concat_tables([rows(range(0, 5), "a"), rows(range(5, 10), "b")]))
    t.append(rows(range(10, 15), "b"))
    t.update_spec().add_identity("part").commit()
    t.append(rows(range(15, 20), "a"))
    t.append(rows(range(20, 25), "a"))
    snap = t.rewrite_data_files(strategy="sort", sort_order=["id DESC"])
    spec_id = t.state.default_spec_id
    files = data_files(t)
    # the spec-0 files form one group, split into the new partitions; the spec-1 files of "a" another
    assert sorted((f.spec_id, f.partition, f.record_count) for f in files) == [
        (spec_id, ("a",), 5), (spec_id, ("a",), 10), (spec_id, ("b",), 10)]
    for f in files:
        col = pq.read_table(f.file_path).column("id").to_pylist()
        assert col == sorted(col, reverse=True)
    assert snap.summary_value("deleted-data-files") == "4"
    assert ids(t) == list(range(25))
    assert cat.verify("db.t") == []


# ------------------------------------------------------------ delete files


def test_merge_on_read_deletes_are_applied_and_dropped(cat):
    t = cat.create_table("db.t", schema=SCHEMA, partition_by=["part"], properties=MOR)
    for i in range(4):
        t.append(pa.concat_tables([rows(range(i * 10, i * 10 + 10), "a"), rows(range(100 + i * 10, 110 + i * 10),
                                                                                    "b")]))
    gone = [i for i in list(range(40)) + list(range(100, 140)) if i % 3 == 0]
    t.delete(f"id in ({', '.join(map(str, gone))})")
    t.delete("id > 135")
    expected = [i for i in list(range(40)) + list(range(100, 140)) if i % 3 and i <= 135]
    assert ids(t) == expected
    assert delete_files(t) and all(f.content == DataFileContent.POSITION_DELETES for f in delete_files(t))
    before = t.current_snapshot().snapshot_id
    n_deletes = len(delete_files(t))
    snap = t.rewrite_data_files()
    assert delete_files(t) == []
    assert snap.summary_value("removed-delete-files") == str(n_deletes)
    assert snap.summary_value("total-delete-files") == "0" and snap.summary_value("total-position-deletes") == "0"
    assert snap.summary_value("total-records") == str(len(expected))
    assert len(data_files(t)) == 2
    assert ids(t) == ids(t, before) == expected
    assert cat.verify("db.t") == []


def test_position_deletes_naming_other_files_stay(cat):
    t = cat.create_table("db.t", schema=SCHEMA, partition_by=["part"],
                         properties=MOR | {"write.delete.granularity": "partition"})
    t.append(rows(range(10), "a"))
    t.append(rows(range(10, 20), "a"))
    t.delete("id in (3, 13)")  # one position delete file naming both data files
    [pos] = delete_files(t)
    t.rewrite_data_files(where="id < 10")
    assert delete_files(t) == [pos]  # it still deletes row 13
    assert ids(t) == [i for i in range(20) if i not in (3, 13)]
    t.rewrite_data_files()
    assert delete_files(t) == []
    assert ids(t) == [i for i in range(20) if i not in (3, 13)]


def test_equality_deletes_go_only_when_all_their_files_are_rewritten(cat):
    t = cat.create_table("db.t", schema=SCHEMA, partition_by=["part"])
    t.append(rows(range(10), "a"))
    t.append(rows(range(10, 20), "a"))
    t.append(rows(range(100, 110), "b"))
    eq_a = write_equality_deletes(t.state, pa.table({"id": [2, 15]}), equality_ids=[1],
                                  spec_id=t.state.default_spec_id, partition=("a",))
    commit_files(t, added=[eq_a])
    expected = [i for i in list(range(20)) + list(range(100, 110)) if i not in (2, 15)]
    assert ids(t) == expected
    t.rewrite_data_files(where="id < 10")  # one of the two files the deletes apply to
    assert [f.file_path for f in delete_files(t)] == [eq_a.file_path]
    assert ids(t) == expected
    snap = t.rewrite_data_files(where="part = 'a'")
    assert delete_files(t) == []
    assert snap.summary_value("removed-equality-delete-files") == "1"
    assert ids(t) == expected


def test_global_equality_deletes_stay_while_other_partitions_hold_files(cat):
    t = cat.create_table("db.t", schema=SCHEMA)
    t.append(rows(range(10)))
    t.append(rows(range(10, 20)))
    eq = write_equality_deletes(t.state, pa.table({"id": [4, 14]}), equality_ids=[1], spec_id=0, partition=())
    commit_files(t, added=[eq])
    t.rewrite_data_files()
    assert delete_files(t) == []
    assert ids(t) == [i for i in range(20) if i not in (4, 14)]


# ------------------------------------------------------------ validation against concurrent commits


def race(t, concurrent, **kwargs):
    """Plan a compaction, let ``concurrent`` commit meanwhile, then commit the compaction."""
    plan = plan_rewrite(t.catalog.store, t.state, **kwargs)
    concurrent()
    return commit_rewrite(t, plan)


def test_compaction_vs_delete_of_a_file_it_rewrites_fails(cat):
    t = shuffled_table(cat, files=3)
    winner = []
    with pytest.raises(ValidationConflict) as info:
        race(t, lambda: winner.append(t.delete("id < 10")))  # copy-on-write: rewrites files the compaction read
    assert info.value.commit_id == winner[0].commit_id and winner[0].commit_id in str(info.value)
    assert t.current_snapshot().snapshot_id == winner[0].snapshot_id  # nothing of the compaction landed
    assert len(data_files(t)) == 3 and ids(t) == list(range(10, 300))


def test_compaction_vs_merge_on_read_delete_fails(cat):
    t = shuffled_table(cat, files=3, properties=MOR)
    winner = []
    with pytest.raises(ValidationConflict, match="added position delete file") as info:
        race(t, lambda: winner.append(t.delete("id = 10")))  # adds position deletes the new files would lose
    assert info.value.commit_id == winner[0].commit_id and winner[0].commit_id in str(info.value)
    assert t.current_snapshot().snapshot_id == winner[0].snapshot_id  # nothing of the compaction landed
    assert ids(t) == [i for i in range(300) if i != 10]


def test_compaction_vs_position_deletes_of_a_file_it_does_not_rewrite_lands(cat):
    t = cat.create_table("db.t", schema=SCHEMA, partition_by=["part"], properties=MOR)
    for i in range(3):
        t.append(pa.concat_tables([rows(range(i * 10, i * 10 + 10), "a"), rows(range(100 + i, 101 + i), "b")]))
    b_file = next(f for f in data_files(t) if f.partition == ("b",))
    snap = race(t, lambda: t.row_delta().add_position_deletes({b_file.file_path: [0]}).commit(),
                where="part = 'a'")
    assert snap.operation == "replace"
    gone = pq.read_table(b_file.file_path).column("id").to_pylist()[0]
    assert ids(t) == sorted(set(range(30)) | {100, 101, 102} - {gone})
    assert len([f for f in data_files(t) if f.partition == ("a",)]) == 1


def test_compaction_vs_append_lands(cat):
    t = shuffled_table(cat, files=3)
    snap = race(t, lambda: t.append(rows([1000, 1001])))
    assert snap.operation == "replace"
    assert ids(t) == list(range(300)) + [1000, 1001]
    assert len(data_files(t)) == 2


def test_two_compactions_of_the_same_files_one_wins(cat):
    t = shuffled_table(cat, files=3)
    with pytest.raises(ValidationConflict):
        race(t, lambda: t.rewrite_data_files())
    assert len(data_files(t)) == 1 and ids(t) == list(range(300))


def test_position_delete_vs_compaction_of_its_file_fails(cat):
    t = shuffled_table(cat, files=3, properties=MOR)
    state = t.state
    changes = plan_row_delete(t.catalog.store, state, bind_filter(state, "id = 42"), state.branch_head("main"),
                              mode=delete_mode(state))
    assert changes.touched and not changes.removed  # position deletes for a file the compaction will rewrite
    compaction = t.rewrite_data_files()
    with pytest.raises(ValidationConflict) as info:
        t._commit_rows(changes, "delete", "main", isolation_for="delete")
    assert info.value.commit_id == compaction.commit_id
    assert ids(t) == list(range(300))  # the delete did not land, and nothing was lost


def equality_delete(t, keys, partition=()):
    """Commit an equality delete file of ``keys`` (ids) in ``partition``; the snapshot it lands in."""
    eq = write_equality_deletes(t.state, pa.table({"id": pa.array(keys, pa.int64())}), equality_ids=[1],
                                spec_id=t.state.default_spec_id, partition=partition)
    sid = commit_files(t, added=[eq])
    return t.state.snapshot_by_id(sid)


def all_rows(t, snapshot_id=None):
    table = t.scan(snapshot_id=snapshot_id).to_arrow()
    return sorted(zip(*(table.column(c).to_pylist() for c in ("id", "part", "x", "y"))))


@pytest.mark.parametrize("strategy, kwargs", [
    ("binpack", {}),
    ("sort", {"sort_order": ["x DESC", "id"]}),
    ("zorder", {"zorder_columns": ["x", "y"]}),
])
@pytest.mark.parametrize("partitioned", [False, True])
def test_equality_delete_committed_during_compaction_lands_beside_it(cat, strategy, kwargs, partitioned):
    """The compaction's files keep the starting snapshot's data sequence number, so the equality delete committed
    meanwhile (a higher sequence number) still applies to them: both land, and the rows are those of applying the
    two one after the other."""
    partition_by = ["part"] if partitioned else None
    t = shuffled_table(cat, files=3, partition_by=partition_by)
    serial = shuffled_table(cat, "db.serial", files=3, partition_by=partition_by)
    partition = ("a",) if partitioned else ()
    start = t.current_snapshot()
    deletes = []
    snap = race(t, lambda: deletes.append(equality_delete(t, [5, 6, 250], partition)), strategy=strategy, **kwargs)
    [delete] = deletes
    assert snap.operation == "replace" and snap.parent_snapshot_id == delete.snapshot_id
    assert snap.sequence_number == delete.sequence_number + 1 == start.sequence_number + 2

    serial.rewrite_data_files(strategy=strategy, **kwargs)
    equality_delete(serial, [5, 6, 250], partition)
    expected = all_rows(serial)
    assert [r[0] for r in expected] == [i for i in range(300) if i not in (5, 6, 250)]
    assert all_rows(t) == expected

    entries = cat.store.live_entries(t.state, snap.snapshot_id)
    new = [e for e in entries if e.snapshot_id == snap.snapshot_id]
    assert new and {(e.data_sequence_number, e.file_sequence_number) for e in new} == \
        {(start.sequence_number, snap.sequence_number)}
    assert [e.file.file_path for e in entries if e.file.content != DataFileContent.DATA] == \
        [d.file_path for d in delete_files(t)]  # the equality delete stays live: it applies to the new files
    t.rewrite_data_files()  # compacting again applies the delete and drops it
    assert delete_files(t) == [] and all_rows(t) == expected
    assert cat.verify("db.t") == []


def test_equality_delete_during_compaction_on_a_branch_lands_beside_it(cat):
    t = shuffled_table(cat, files=3)
    t.manage_snapshots().create_branch(t.current_snapshot().snapshot_id, "audit").commit()
    main_before = t.current_snapshot().snapshot_id
    plan = plan_rewrite(t.catalog.store, t.state, branch="audit")
    eq = write_equality_deletes(t.state, pa.table({"id": [7]}), equality_ids=[1], spec_id=0, partition=())
    sid = new_snapshot_id()
    t.commit_events(lambda base, ctx: snapshot_events(base, ctx, operation="delete", snapshot_id=sid, added=[eq],
                                                      branch="audit"))
    snap = commit_rewrite(t, plan, branch="audit")
    assert t.state.ref("audit").snapshot_id == snap.snapshot_id and snap.parent_snapshot_id == sid
    assert t.current_snapshot().snapshot_id == main_before
    assert ids(t, snap.snapshot_id) == [i for i in range(300) if i != 7]
    assert ids(t) == list(range(300))


def test_equality_delete_during_compaction_whose_start_was_expired_meanwhile_still_applies(cat):
    """Another writer deletes rows by equality and expires the snapshot the compaction read before it commits: the
    new files still keep that snapshot's data sequence number (the log knows it), so the delete still reaches them.
    Looking the start up among the live snapshots only gave the new files the new snapshot's number, and the
    deleted rows came back."""
    t = shuffled_table(cat, files=3)
    start = t.current_snapshot()
    other = cat.load_table("db.t")

    def delete_and_expire():
        equality_delete(other, [5, 6])
        other.expire_snapshots(older_than_ms=now_ms() + 1, retain_last=1)
        assert other.state.snapshot_by_id(start.snapshot_id) is None

    snap = race(t, delete_and_expire)
    assert ids(t) == [i for i in range(300) if i not in (5, 6)]
    new = [e for e in cat.store.live_entries(t.state, snap.snapshot_id) if e.snapshot_id == snap.snapshot_id]
    assert new and {e.data_sequence_number for e in new} == {start.sequence_number}


def test_without_the_starting_sequence_number_an_equality_delete_fails_the_compaction(cat):
    t = shuffled_table(cat, files=3)
    options = {"use-starting-sequence-number": "false"}
    deletes = []
    with pytest.raises(ValidationConflict, match="added equality delete file") as info:
        race(t, lambda: deletes.append(equality_delete(t, [5, 6])), options=options)
    assert info.value.commit_id == deletes[0].commit_id and deletes[0].commit_id in str(info.value)
    assert t.current_snapshot().snapshot_id == deletes[0].snapshot_id  # nothing of the compaction landed
    expected = [i for i in range(300) if i not in (5, 6)]
    assert ids(t) == expected
    snap = t.rewrite_data_files(options=options)  # no race: the new files take the snapshot's own number
    entries = [e for e in cat.store.live_entries(t.state, snap.snapshot_id) if e.snapshot_id == snap.snapshot_id]
    assert {e.data_sequence_number for e in entries} == {snap.sequence_number}
    assert all(c.data_sequence_number is None for c in cat.store.file_changes_of(t.state, snap))
    assert delete_files(t) == [] and ids(t) == expected


def test_equality_delete_for_files_rewritten_into_a_new_spec_fails_the_compaction(cat):
    """Files of an older spec are rewritten into the current spec's partitions, where an equality delete scoped to
    their old partition no longer reaches them: that one still conflicts."""
    t = shuffled_table(cat, files=3, partition_by=["part"])
    with t.update_spec() as update:
        update.add_field("id", "bucket[2]")
    old_spec = t.state.spec_by_id(0)
    deletes = []

    def delete_in_old_partition():
        eq = write_equality_deletes(t.state, pa.table({"id": pa.array([5], pa.int64())}), equality_ids=[1],
                                    spec_id=old_spec.spec_id, partition=("a",))
        sid = commit_files(t, added=[eq])
        deletes.append(t.state.snapshot_by_id(sid))

    with pytest.raises(ValidationConflict, match="added equality delete file") as info:
        race(t, delete_in_old_partition)
    assert info.value.commit_id == deletes[0].commit_id
    assert ids(t) == [i for i in range(300) if i != 5]


def test_rewrite_options_are_checked(cat):
    t = shuffled_table(cat, files=2)
    version = t.state.version
    with pytest.raises(ValidationError, match="unknown option 'partial-progress.enabled'"):
        t.rewrite_data_files(options={"partial-progress.enabled": "true"})
    with pytest.raises(ValidationError, match="use-starting-sequence-number is 'yes'"):
        t.rewrite_data_files(options={"use-starting-sequence-number": "yes"})
    assert t.state.version == version  # nothing committed
    snap = t.rewrite_data_files(options={"use-starting-sequence-number": "TRUE"})
    [entry] = [e for e in cat.store.live_entries(t.state, snap.snapshot_id)]
    assert (entry.data_sequence_number, entry.file_sequence_number) == (snap.sequence_number - 1,
                                                                        snap.sequence_number)


def test_format_version_1_compaction_records_no_data_sequence_number(cat):
    t = cat.create_table("db.v1", schema=SCHEMA, format_version=1)
    t.append(rows(range(5)))
    t.append(rows(range(5, 10)))
    snap = t.rewrite_data_files()
    assert all(c.data_sequence_number is None for c in cat.store.file_changes_of(t.state, snap))
    assert ids(t) == list(range(10))


# ------------------------------------------------------------ arguments


def test_bad_arguments_are_refused_before_any_write(cat):
    t = shuffled_table(cat, files=2, partition_by=["part"])
    head = cat.log.head(t.uuid)
    with pytest.raises(ValidationError, match="unknown strategy"):
        t.rewrite_data_files(strategy="shuffle")
    with pytest.raises(ValidationError, match="no sort order given"):
        t.rewrite_data_files(strategy="sort")
    with pytest.raises(ValidationError, match="sort_order applies"):
        t.rewrite_data_files(sort_order=["id"])
    with pytest.raises(ValidationError, match="no zorder_columns"):
        t.rewrite_data_files(strategy="zorder")
    with pytest.raises(ValidationError, match="nosuch"):
        t.rewrite_data_files(strategy="zorder", zorder_columns=["nosuch"])
    with pytest.raises(ValidationError, match="identity partition"):
        t.rewrite_data_files(strategy="zorder", zorder_columns=["part"])
    with pytest.raises(ValidationError, match="target_file_size_bytes"):
        t.rewrite_data_files(target_file_size_bytes=0)
    with pytest.raises(ValidationError, match="nosuch"):
        t.rewrite_data_files(where="nosuch = 1")
    # each was an untyped error (ValueError, Arrow's) or accepted
    with pytest.raises(ValidationError, match="options must be a mapping"):
        t.rewrite_data_files(options="use-starting-sequence-number")
    with pytest.raises(ValidationError, match="expected a column name"):
        t.rewrite_data_files(strategy="zorder", zorder_columns=[1])
    with pytest.raises(ValidationError, match="target_file_size_bytes"):
        t.rewrite_data_files(target_file_size_bytes=1 << 70)
    with pytest.raises(ValidationError, match="branch name must be a non-empty string"):
        t.rewrite_data_files(branch=5)
    with pytest.raises(ValidationError, match="a snapshot id is a 64-bit integer"):
        t.manage_snapshots().create_tag(str(t.current_snapshot().snapshot_id), "v1").commit()
    assert cat.log.head(t.uuid) == head


def test_zorder_refuses_a_column_inside_a_map(cat):
    t = cat.create_table("db.m", schema=pa.schema([("id", pa.int64()), ("m", pa.map_(pa.string(), pa.int64()))]))
    t.append(pa.table({"id": pa.array([1], pa.int64()), "m": pa.array([[("a", 1)]], pa.map_(pa.string(),
                                                                                             pa.int64()))}))
    with pytest.raises(ValidationError, match="inside a list or map"):
        t.rewrite_data_files(strategy="zorder", zorder_columns=["m.key"])


def test_empty_table_has_nothing_to_rewrite(cat):
    t = cat.create_table("db.t", schema=SCHEMA)
    assert t.rewrite_data_files() is None
    assert t.rewrite_data_files(strategy="zorder", zorder_columns=["x"]) is None


def test_all_rows_deleted_leaves_no_data_files(cat):
    t = cat.create_table("db.t", schema=SCHEMA, properties=MOR)
    t.append(rows(range(10)))
    t.append(rows(range(10, 20)))
    t.delete("id >= 0 and id != 3 and id != 13")
    t.delete("id in (3, 13)")
    assert ids(t) == []
    t.rewrite_data_files()
    assert live(t) == [] and ids(t) == []


# ------------------------------------------------------------ manifests


def test_rewrite_manifests_packs_the_manifests(cat):
    import json

    from projections.manifest_reader import read_manifest_list

    def manifests(table):
        meta = json.load(open(table.metadata_location))
        snap = next(x for x in meta["snapshots"] if x["snapshot-id"] == meta["current-snapshot-id"])
        return read_manifest_list(open(snap["manifest-list"], "rb").read(), snap["manifest-list"])

    t = shuffled_table(cat, files=5)
    t.set_properties({"commit.manifest-merge.enabled": "false"})
    for i in range(3):
        t.append(t.scan(where=f"id = {i}").to_arrow())
    before = manifests(t)
    rows = sorted(t.scan().to_arrow().column("id").to_pylist())
    snap = rewrite_manifests(t)
    after = manifests(t)
    assert snap.operation == "replace" and len(before) > 1 and len(after) == 1
    assert after[0].existing_files_count == sum(m.added_files_count + m.existing_files_count for m in before)
    assert sorted(t.scan().to_arrow().column("id").to_pylist()) == rows
    assert cat.verify(t.identifier) == []


def test_manifest_rewrite_event_is_a_replace_without_file_changes(cat):
    t = shuffled_table(cat, files=3)
    parent = t.current_snapshot()
    sid = new_snapshot_id()
    state = t.commit_events(lambda base, ctx: manifest_rewrite_events(base, ctx, snapshot_id=sid))
    snap = state.snapshot_by_id(sid)
    assert snap.operation == "replace" and snap.parent_snapshot_id == parent.snapshot_id
    assert snap.sequence_number == parent.sequence_number + 1
    assert dict(snap.summary)["total-data-files"] == "3" and dict(snap.summary)["total-records"] == "300"
    assert ids(t) == list(range(300)) and len(data_files(t)) == 3
    assert cat.verify("db.t") == []


# ------------------------------------------------------------ Z-order keys


def _reference_zvalue(keys: list[int]) -> int:
    z = 0
    for bit in range(63, -1, -1):
        for key in keys:
            z = z << 1 | (key >> bit & 1)
    return z


@pytest.mark.parametrize("k", [1, 2, 3, 5, 8, 9, 17, 40])
def test_interleave_matches_a_bit_by_bit_reference(k):
    rng = random.Random(k)
    table = [[rng.getrandbits(64) for _ in range(k)] for _ in range(40)]
    words = interleave([pa.array([r[c] for r in table], pa.uint64()) for c in range(k)])
    assert len(words) == k
    for i, r in enumerate(table):
        z = 0
        for w in words:
            z = z << 64 | w[i].as_py()
        assert z == _reference_zvalue(r)


@pytest.mark.parametrize("iceberg_type, arrow_type, values", [
    (T.IntegerType(), pa.int32(), [-2**31, -7, -1, 0, 1, 2**31 - 1]),
    (T.LongType(), pa.int64(), [-2**63, -1, 0, 5, 2**63 - 1]),
    (T.DoubleType(), pa.float64(), [float("-inf"), -2.5, -0.0, 0.0, 1e-300, 3.0, float("inf"), float("nan")]),
    (T.FloatType(), pa.float32(), [-1.5, 0.0, 0.25, 8.0]),
    (T.DateType(), pa.date32(), [dt.date(1900, 1, 1), dt.date(1969, 12, 31), dt.date(1970, 1, 1),
                                 dt.date(2024, 2, 29)]),
    (T.TimestamptzType(), pa.timestamp("us", tz="UTC"), [dt.datetime(1960, 1, 1, tzinfo=dt.timezone.utc),
                                                         dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc)]),
    (T.StringType(), pa.string(), ["", "a", "ab", "abcdefgh", "abcdefghZZ", "b", "é"]),
    (T.BinaryType(), pa.binary(), [b"", b"\x00\x01", b"\x01", b"\xff" * 9]),
    (T.BooleanType(), pa.bool_(), [False, True]),
])
def test_column_keys_preserve_order_and_put_nulls_first(iceberg_type, arrow_type, values):
    keys = column_key(pa.array(values + [None], arrow_type), iceberg_type).to_pylist()
    assert keys[-1] == 0
    assert keys[:-1] == sorted(keys[:-1])


def test_string_keys_use_the_first_eight_bytes():
    [a, b] = column_key(pa.array(["abcdefgh1", "abcdefgh2"]), T.StringType()).to_pylist()
    assert a == b == int.from_bytes(b"abcdefgh", "big")


def test_zorder_table_is_stable_and_rejects_nested_columns(cat):
    t = cat.create_table("db.t", schema=pa.schema([("id", pa.int64()), ("s", pa.struct([("a", pa.int32())])),
                                                   ("l", pa.list_(pa.int32()))]))
    schema = t.state.schema
    data = pa.table({"id": pa.array([3, 1, 3, 2], pa.int64()),
                     "s": pa.array([{"a": 1}, {"a": 9}, {"a": 1}, None], pa.struct([("a", pa.int32())])),
                     "l": pa.array([[1], [2], [3], [4]], pa.list_(pa.int32()))})
    data = data.append_column("row", pa.array(range(4)))
    out = zorder_table(data, ["id", "s.a"], schema)
    assert out.column("row").to_pylist() == [3, 0, 2, 1]  # (2, null) first; equal z-values keep their order
    with pytest.raises(ValidationError, match="'l'"):
        zorder_table(data, ["l"], schema)


def test_bench_compaction_reports_its_numbers(tmp_path):
    from tools.bench_compaction import bench_compaction

    result = bench_compaction(str(tmp_path))
    assert (result["files_before"], result["files_after"]) == (100, 4)
    # one position delete file per data file with deletes (write.delete.granularity file, Java's default)
    assert (result["delete_files_before"], result["delete_files_after"]) == (20, 0)
    assert result["rows"] == 100 * 200 - 60 and result["seconds"] > 0


def test_compaction_on_a_branch_leaves_main_alone(cat):
    t = shuffled_table(cat, files=4)
    main_before = t.current_snapshot().snapshot_id
    t.manage_snapshots().create_branch(main_before, "audit").commit()
    snap = t.rewrite_data_files(branch="audit")
    assert snap.operation == "replace" and t.current_snapshot().snapshot_id == main_before
    assert t.state.ref("audit").snapshot_id == snap.snapshot_id
    assert sorted(t.scan(snapshot_id=snap.snapshot_id).to_arrow().column("id").to_pylist()) == sorted(
        t.scan().to_arrow().column("id").to_pylist())
    assert len(t.scan(snapshot_id=snap.snapshot_id).plan_files()) < len(t.scan().plan_files())
