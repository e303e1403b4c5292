"""ManageSnapshots on real tables: branches, tags, rollback, current snapshot, cherry-pick, and errors that commit
nothing (the table stream's head does not move)."""

from __future__ import annotations

import json
import time

import pyarrow as pa
import pytest

from engine import Catalog
from engine.errors import NotFound, ValidationError
from engine.state.events import RefRemoved, RefSet, SnapshotAdded
from engine.operations.commit import CommitContext
from engine.operations.manage_snapshots import ManageSnapshots
from engine.operations.snapshot import snapshot_events
from engine.state.table_state import SnapshotRef

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), ("category", pa.string())])


def rows(ids, category="a") -> pa.Table:
    return pa.table({"id": pa.array(ids, pa.int64()), "category": pa.array([category] * len(ids))}, schema=SCHEMA)


def ids_of(table, snapshot_id=None) -> list[int]:
    return sorted(table.scan(snapshot_id=snapshot_id).to_arrow()["id"].to_pylist())


def head(table) -> int:
    return table.catalog.log.head(table.uuid)


def commits(table) -> int:
    return len({e.commit_id for e in table.catalog.log.read_stream(table.uuid)})


def published_refs(table) -> dict:
    with open(table.metadata_location, encoding="utf-8") as f:
        meta = json.load(f)
    return meta["refs"], meta.get("current-snapshot-id")


@pytest.fixture
def catalog(tmp_path):
    cat = Catalog.open(tmp_path / "warehouse")
    cat.create_namespace("db")
    yield cat
    cat.close()


@pytest.fixture
def table(catalog):
    """Three appends on main: s1 = [1, 2], s2 = [3], s3 = [4]; distinct commit times."""
    t = catalog.create_table("db.t", schema=SCHEMA, partition_by=["category"])
    t.snaps = []
    for ids in ([1, 2], [3], [4]):
        t.snaps.append(t.append(rows(ids)))
        time.sleep(0.005)
    return t


def ref(table, name) -> SnapshotRef | None:
    return table.state.ref(name)


# ---------------------------------------------------------------- branches and tags


def test_create_branch_and_tag_in_one_commit_with_retention(table):
    s1, s2, _ = table.snaps
    before = commits(table)
    table.manage_snapshots().create_branch(s1.snapshot_id, "audit", max_ref_age_ms=10_000, max_snapshot_age_ms=20_000,
                                           min_snapshots_to_keep=3).create_tag(s2.snapshot_id, "v2",
                                                                               max_ref_age_ms=5_000).commit()
    assert commits(table) == before + 1
    assert ref(table, "audit") == SnapshotRef(snapshot_id=s1.snapshot_id, type="branch", min_snapshots_to_keep=3,
                                              max_snapshot_age_ms=20_000, max_ref_age_ms=10_000)
    assert ref(table, "v2") == SnapshotRef(snapshot_id=s2.snapshot_id, type="tag", max_ref_age_ms=5_000)
    refs, current = published_refs(table)
    assert refs["audit"] == {"snapshot-id": s1.snapshot_id, "type": "branch", "min-snapshots-to-keep": 3,
                             "max-snapshot-age-ms": 20_000, "max-ref-age-ms": 10_000}
    assert refs["v2"] == {"snapshot-id": s2.snapshot_id, "type": "tag", "max-ref-age-ms": 5_000}
    assert current == table.snaps[2].snapshot_id


def test_context_manager_commits_and_create_branch_defaults_to_current(table):
    with table.manage_snapshots() as ms:
        ms.create_branch(None, "dev")
    assert ref(table, "dev") == SnapshotRef(snapshot_id=table.snaps[2].snapshot_id, type="branch")


def test_context_manager_commits_nothing_when_the_block_raises(table):
    h = head(table)
    with pytest.raises(RuntimeError):
        with table.manage_snapshots() as ms:
            ms.create_tag(table.snaps[0].snapshot_id, "v1")
            raise RuntimeError("boom")
    assert head(table) == h and ref(table, "v1") is None


def test_remove_branch_and_tag(table):
    s1 = table.snaps[0]
    table.manage_snapshots().create_branch(s1.snapshot_id, "b").create_tag(s1.snapshot_id, "t").commit()
    table.manage_snapshots().remove_branch("b").remove_tag("t").commit()
    assert [name for name, _ in table.state.refs] == ["main"]
    assert list(published_refs(table)[0]) == ["main"]


def test_replace_branch_keeps_retention(table):
    s1, s2, s3 = table.snaps
    table.manage_snapshots().create_branch(s3.snapshot_id, "b", min_snapshots_to_keep=2).commit()
    table.manage_snapshots().replace_branch("b", s1.snapshot_id).commit()
    assert ref(table, "b") == SnapshotRef(snapshot_id=s1.snapshot_id, type="branch", min_snapshots_to_keep=2)
    table.manage_snapshots().create_tag(s2.snapshot_id, "t").commit()
    table.manage_snapshots().replace_branch("b", to_ref="t").commit()
    assert ref(table, "b").snapshot_id == s2.snapshot_id
    assert ids_of(table, ref(table, "b").snapshot_id) == [1, 2, 3]


def test_replace_branch_to_the_same_snapshot_commits_nothing(table):
    table.manage_snapshots().create_branch(table.snaps[0].snapshot_id, "b").commit()
    h = head(table)
    table.manage_snapshots().replace_branch("b", table.snaps[0].snapshot_id).commit()
    assert head(table) == h


def test_fast_forward_moves_a_branch_to_a_descendant(table):
    s1, _, s3 = table.snaps
    table.manage_snapshots().create_branch(s1.snapshot_id, "b", max_ref_age_ms=99).commit()
    table.manage_snapshots().fast_forward("b", "main").commit()
    assert ref(table, "b") == SnapshotRef(snapshot_id=s3.snapshot_id, type="branch", max_ref_age_ms=99)


def test_replace_tag_and_rename_branch(table):
    s1, s2, _ = table.snaps
    table.manage_snapshots().create_tag(s1.snapshot_id, "t").create_branch(s1.snapshot_id, "old",
                                                                           max_snapshot_age_ms=7).commit()
    table.manage_snapshots().replace_tag("t", s2.snapshot_id).rename_branch("old", "new").commit()
    assert ref(table, "t") == SnapshotRef(snapshot_id=s2.snapshot_id, type="tag")
    assert ref(table, "old") is None
    assert ref(table, "new") == SnapshotRef(snapshot_id=s1.snapshot_id, type="branch", max_snapshot_age_ms=7)


def test_retention_setters(table):
    s1 = table.snaps[0]
    table.manage_snapshots().create_branch(s1.snapshot_id, "b").create_tag(s1.snapshot_id, "t").commit()
    (table.manage_snapshots().set_min_snapshots_to_keep("b", 4).set_max_snapshot_age_ms("b", 1000)
     .set_max_ref_age_ms("b", 2000).set_max_ref_age_ms("t", 3000).commit())
    assert ref(table, "b") == SnapshotRef(snapshot_id=s1.snapshot_id, type="branch", min_snapshots_to_keep=4,
                                          max_snapshot_age_ms=1000, max_ref_age_ms=2000)
    assert ref(table, "t") == SnapshotRef(snapshot_id=s1.snapshot_id, type="tag", max_ref_age_ms=3000)


def test_events_are_the_ref_changes_only(table):
    s1 = table.snaps[0]
    table.manage_snapshots().create_branch(s1.snapshot_id, "old").commit()
    base = table.state
    ctx = CommitContext(commit_id="c", time_ms=1)
    assert ManageSnapshots(table).rename_branch("old", "new").events(base, ctx) == [
        RefRemoved(name="old"), RefSet(name="new", snapshot_id=s1.snapshot_id, ref_type="branch")]
    # created then removed in one builder: nothing to record, nothing committed
    ms = ManageSnapshots(table).create_tag(s1.snapshot_id, "tmp").remove_tag("tmp")
    assert ms.events(base, ctx) == []
    h = head(table)
    ms.commit()
    assert head(table) == h


# ---------------------------------------------------------------- current snapshot


def test_rollback_to_snapshot(table):
    s1, _, s3 = table.snaps
    table.manage_snapshots().rollback_to_snapshot(s1.snapshot_id).commit()
    assert table.current_snapshot().snapshot_id == s1.snapshot_id
    assert ids_of(table) == [1, 2]
    assert table.state.snapshot_log[-1][1] == s1.snapshot_id
    assert published_refs(table)[1] == s1.snapshot_id
    assert ids_of(table, s3.snapshot_id) == [1, 2, 3, 4]  # the rolled-off snapshot stays readable


def test_rollback_to_timestamp_takes_the_newest_strictly_older_ancestor(table):
    s1, s2, s3 = table.snaps
    table.manage_snapshots().rollback_to_timestamp(s2.timestamp_ms).commit()
    assert table.current_snapshot().snapshot_id == s1.snapshot_id
    table.manage_snapshots().set_current_snapshot(s3.snapshot_id).commit()
    table.manage_snapshots().rollback_to_timestamp(s2.timestamp_ms + 1).commit()
    assert table.current_snapshot().snapshot_id == s2.snapshot_id
    assert ids_of(table) == [1, 2, 3]


def test_set_current_snapshot_by_id_and_by_ref(table):
    s1, s2, s3 = table.snaps
    table.manage_snapshots().rollback_to_snapshot(s1.snapshot_id).commit()
    table.manage_snapshots().set_current_snapshot(snapshot_id=s3.snapshot_id).commit()  # not an ancestor: allowed
    assert ids_of(table) == [1, 2, 3, 4]
    table.manage_snapshots().create_tag(s2.snapshot_id, "t").commit()
    table.manage_snapshots().set_current_snapshot(ref_name="t").commit()
    assert table.current_snapshot().snapshot_id == s2.snapshot_id


def test_main_keeps_its_retention_when_moved(table):
    table.manage_snapshots().set_min_snapshots_to_keep("main", 5).commit()
    table.manage_snapshots().rollback_to_snapshot(table.snaps[0].snapshot_id).commit()
    assert ref(table, "main") == SnapshotRef(snapshot_id=table.snaps[0].snapshot_id, min_snapshots_to_keep=5)


# ---------------------------------------------------------------- cherry-pick


def test_cherrypick_append_adds_its_files_in_a_new_snapshot(table):
    s1, s2, _ = table.snaps
    table.manage_snapshots().rollback_to_snapshot(s1.snapshot_id).commit()
    s4 = table.append(rows([5]))
    table.manage_snapshots().cherrypick_snapshot(s2.snapshot_id).commit()
    picked = table.current_snapshot()
    assert picked.snapshot_id not in {s.snapshot_id for s in table.snaps} | {s4.snapshot_id}
    assert picked.parent_snapshot_id == s4.snapshot_id
    assert picked.operation == "append"
    summary = dict(picked.summary)
    assert summary["source-snapshot-id"] == str(s2.snapshot_id)
    assert (summary["added-data-files"], summary["added-records"], summary["total-records"]) == ("1", "1", "4")
    assert ids_of(table) == [1, 2, 3, 5]
    changes = table.catalog.store.file_changes_of(table.state, picked)
    assert [c.file.file_path for c in changes] == [
        c.file.file_path for c in table.catalog.store.file_changes_of(table.state, s2)]


def test_cherrypick_never_adds_a_file_main_holds_already(table, tmp_path):
    """An ancestor whose descendants were expired is still an ancestor (the log keeps them); and whatever history
    says, a file live in main is never added again (every reader would count its rows twice)."""
    import pyarrow.parquet as pq

    s1, s2, s3 = table.snaps
    table.manage_snapshots().create_branch(s2.snapshot_id, "audit").commit()
    table.append(rows([5]))
    table.expire_snapshots(older_than_ms=int(time.time() * 1000) + 60_000, retain_last=1)
    assert table.snapshot_by_id(s3.snapshot_id) is None and table.snapshot_by_id(s2.snapshot_id) is not None
    with pytest.raises(ValidationError, match="already an ancestor of the current snapshot"):
        table.manage_snapshots().cherrypick_snapshot(s2.snapshot_id).commit()
    # one file appended in place to a branch and to main: history does not relate the two snapshots
    pq.write_table(rows([9]), tmp_path / "x.parquet")
    picked = table.append_files([str(tmp_path / "x.parquet")], branch="audit")
    table.append_files([str(tmp_path / "x.parquet")])
    position = commits(table)
    with pytest.raises(ValidationError, match="x.parquet is live in the current snapshot already"):
        table.manage_snapshots().cherrypick_snapshot(picked.snapshot_id).commit()
    assert commits(table) == position and ids_of(table) == [1, 2, 3, 4, 5, 9]


def test_cherrypick_whose_parent_is_the_head_fast_forwards(table):
    s1, s2, _ = table.snaps
    table.manage_snapshots().rollback_to_snapshot(s1.snapshot_id).commit()
    n = len(table.snapshots())
    table.manage_snapshots().cherrypick_snapshot(s2.snapshot_id).commit()
    assert table.current_snapshot().snapshot_id == s2.snapshot_id
    assert len(table.snapshots()) == n


def test_two_cherrypicks_and_a_tag_land_in_one_commit(table):
    s1, s2, s3 = table.snaps
    table.manage_snapshots().rollback_to_snapshot(s1.snapshot_id).commit()
    s4 = table.append(rows([5]))
    before = commits(table)
    table.manage_snapshots().cherrypick_snapshot(s2.snapshot_id).cherrypick_snapshot(s3.snapshot_id).create_tag(
        s4.snapshot_id, "before-picks").commit()
    assert commits(table) == before + 1
    second = table.current_snapshot()
    first = table.state.snapshot_by_id(second.parent_snapshot_id)
    assert first.parent_snapshot_id == s4.snapshot_id
    assert second.sequence_number == first.sequence_number + 1
    assert ids_of(table) == [1, 2, 3, 4, 5]
    assert ref(table, "before-picks").snapshot_id == s4.snapshot_id


def dynamic_overwrite(table, remove_category: str, new_ids: list[int]):
    """A ``replace-partitions`` overwrite snapshot on main (built with the snapshot producer directly)."""
    from engine.write.data_writer import write_data_files
    from engine.operations.snapshot import new_snapshot_id

    snapshot_id = new_snapshot_id()
    added = write_data_files(table.state, rows(new_ids, remove_category))

    def build(base, ctx):
        live = table.catalog.store.live_entries(base, base.ref("main").snapshot_id)
        removed = [e.file for e in live if e.file.partition == (remove_category,)]
        return snapshot_events(base, ctx, operation="overwrite", snapshot_id=snapshot_id, added=added,
                               removed=removed, summary_extra={"replace-partitions": "true"})

    return table.commit_events(build).snapshot_by_id(snapshot_id)


def test_cherrypick_dynamic_overwrite(table):
    s3 = table.snaps[2]
    o = dynamic_overwrite(table, "a", [10, 11])
    assert ids_of(table) == [10, 11]
    table.manage_snapshots().rollback_to_snapshot(s3.snapshot_id).commit()
    s5 = table.append(rows([20], "b"))
    table.manage_snapshots().cherrypick_snapshot(o.snapshot_id).commit()
    picked = table.current_snapshot()
    assert picked.operation == "overwrite" and picked.parent_snapshot_id == s5.snapshot_id
    assert picked.summary_value("source-snapshot-id") == str(o.snapshot_id)
    assert picked.summary_value("deleted-data-files") == "3"
    assert ids_of(table) == [10, 11, 20]


def test_cherrypick_dynamic_overwrite_fails_when_its_partition_changed(table):
    s3 = table.snaps[2]
    o = dynamic_overwrite(table, "a", [10])
    table.manage_snapshots().rollback_to_snapshot(s3.snapshot_id).commit()
    table.append(rows([30], "a"))
    h = head(table)
    with pytest.raises(ValidationError, match=rf"Cannot cherry-pick snapshot {o.snapshot_id}: partition \('a',\)"):
        table.manage_snapshots().cherrypick_snapshot(o.snapshot_id)
    assert head(table) == h


@pytest.mark.parametrize("how", ["dynamic_overwrite", "replace_partitions"])
def test_the_apis_dynamic_overwrites_are_marked_and_cherry_pick_as_such(table, how):
    """Java's BaseReplacePartitions marks its snapshot ``replace-partitions=true``: a cherry-pick re-applies it onto
    a main that moved on in another partition."""
    from engine.write.data_writer import write_data_files

    staged_on = table.snaps[2].snapshot_id
    table.manage_snapshots().create_branch(staged_on, "stage").commit()
    if how == "dynamic_overwrite":
        o = table.dynamic_overwrite(rows([10, 11], "a"), branch="stage")
    else:
        o = table.replace_partitions(write_data_files(table.state, rows([10, 11], "a")), branch="stage")
    assert (o.operation, o.summary_value("replace-partitions")) == ("overwrite", "true")
    table.append(rows([20], "b"))  # main moves on in another partition: no fast-forward
    table.manage_snapshots().cherrypick_snapshot(o.snapshot_id).commit()
    assert table.current_snapshot().summary_value("source-snapshot-id") == str(o.snapshot_id)
    assert ids_of(table) == [10, 11, 20]


def test_cherrypick_a_delete_is_refused_unless_it_fast_forwards(table):
    """Java's CherryPickOperation re-applies only appends and dynamic overwrites; a delete whose parent is not the
    current snapshot is refused."""
    s3 = table.snaps[2]
    path = table.catalog.store.file_changes_of(table.state, s3)[0].file.file_path
    d = table.delete_files([path])
    assert d.operation == "delete"
    table.manage_snapshots().rollback_to_snapshot(s3.snapshot_id).commit()
    table.append(rows([5]))  # main moves on: d's parent s3 is no longer the head
    h = head(table)
    with pytest.raises(ValidationError, match=f"Cannot cherry-pick snapshot {d.snapshot_id}: it is a delete snapshot "
                                              f"whose parent {s3.snapshot_id} is not the current snapshot"):
        table.manage_snapshots().cherrypick_snapshot(d.snapshot_id)
    assert head(table) == h
    assert ids_of(table) == [1, 2, 3, 4, 5]


def test_cherrypick_a_delete_whose_parent_is_the_head_fast_forwards(table):
    """Java's CherryPickOperation fast-forwards any operation whose parent is the current snapshot: a delete staged on
    a branch is published by moving main to it."""
    s3 = table.snaps[2]
    table.manage_snapshots().create_branch(s3.snapshot_id, "audit").commit()
    d = table.delete("id = 3", branch="audit")
    assert (d.operation, d.parent_snapshot_id) == ("delete", s3.snapshot_id)
    n = len(table.snapshots())
    table.manage_snapshots().cherrypick_snapshot(d.snapshot_id).commit()
    assert table.current_snapshot().snapshot_id == d.snapshot_id
    assert len(table.snapshots()) == n
    assert ids_of(table) == [1, 2, 4]


def test_cherrypick_fast_forward_of_a_branch_compaction_keeps_its_data_sequence_numbers(table):
    """A compaction can only be fast-forwarded (Java's rule too): main then points at the compaction's own
    snapshot, whose new file keeps the starting snapshot's data sequence number."""
    s3 = table.snaps[2]
    table.manage_snapshots().create_branch(s3.snapshot_id, "compact").commit()
    c = table.rewrite_data_files(branch="compact")
    table.manage_snapshots().cherrypick_snapshot(c.snapshot_id).commit()
    assert table.current_snapshot().snapshot_id == c.snapshot_id
    [entry] = table.catalog.store.live_entries(table.state, c.snapshot_id)
    assert (entry.data_sequence_number, entry.file_sequence_number) == (s3.sequence_number, c.sequence_number)
    entries = table.inspect.entries(c.snapshot_id).to_pylist()
    assert [(e["sequence_number"], e["file_sequence_number"]) for e in entries if e["status"] == 1] == [
        (s3.sequence_number, c.sequence_number)]  # the ADDED entry; the rewritten files' are DELETED
    table.append(rows([9]))
    h = head(table)
    with pytest.raises(ValidationError, match="not an append, a dynamic overwrite, or a fast-forward"):
        table.manage_snapshots().cherrypick_snapshot(c.snapshot_id)
    assert head(table) == h


def test_cherrypick_append_gives_its_files_the_new_snapshots_sequence_number(table):
    """Java's CherryPickOperation adds the picked files as new ones, so an explicit data sequence number they had in
    the picked snapshot (an imported entry) is not kept: an equality delete committed on main before the pick,
    which never saw those rows, must not delete them."""
    import attrs

    from engine.write.data_writer import write_data_files
    from engine.write.delete_files import write_equality_deletes
    from engine.operations.snapshot import new_snapshot_id

    s1 = table.snaps[0]
    table.manage_snapshots().create_branch(s1.snapshot_id, "staged").commit()
    [f] = write_data_files(table.state, rows([7]))
    staged = new_snapshot_id()

    def build(base, ctx):
        events = snapshot_events(base, ctx, operation="append", snapshot_id=staged, added=[f], branch="staged")
        return [attrs.evolve(e, changes=tuple(attrs.evolve(c, data_sequence_number=s1.sequence_number)
                                              for c in e.changes)) for e in events]

    table.commit_events(build)
    [entry] = [e for e in table.catalog.store.live_entries(table.state, staged) if e.file.file_path == f.file_path]
    assert entry.data_sequence_number == s1.sequence_number
    eq = write_equality_deletes(table.state, pa.table({"id": pa.array([7], pa.int64())}), equality_ids=[1],
                                spec_id=0, partition=("a",))
    deleted = new_snapshot_id()
    table.commit_events(lambda base, ctx: snapshot_events(base, ctx, operation="delete", snapshot_id=deleted,
                                                          added=[eq]))
    table.manage_snapshots().cherrypick_snapshot(staged).commit()
    picked = table.current_snapshot()
    assert picked.parent_snapshot_id == deleted and picked.summary_value("source-snapshot-id") == str(staged)
    [change] = table.catalog.store.file_changes_of(table.state, picked)
    assert change.file.file_path == f.file_path and change.data_sequence_number is None
    [entry] = [e for e in table.catalog.store.live_entries(table.state, picked.snapshot_id)
               if e.file.file_path == f.file_path]
    assert entry.data_sequence_number == picked.sequence_number
    assert ids_of(table) == [1, 2, 3, 4, 7]  # the delete committed before the pick leaves the picked row alone
    assert ids_of(table, staged) == [1, 2, 7]


# ---------------------------------------------------------------- errors commit nothing


def _errors(table):
    s1, s2, s3 = table.snaps
    return [
        (lambda ms: ms.create_branch(424242, "b"), NotFound, "Cannot create branch b: snapshot 424242 does not exist"),
        (lambda ms: ms.create_tag(424242, "t"), NotFound, "Cannot create tag t: snapshot 424242 does not exist"),
        (lambda ms: ms.create_branch(s1.snapshot_id, "main"), ValidationError,
         "Cannot create branch main: ref main already exists"),
        (lambda ms: ms.create_tag(s1.snapshot_id, "tag1"), ValidationError,
         "Cannot create tag tag1: ref tag1 already exists"),
        (lambda ms: ms.create_branch(s1.snapshot_id, "b", min_snapshots_to_keep=0), ValidationError,
         "Cannot create branch b: min_snapshots_to_keep must be a positive integer"),
        (lambda ms: ms.create_tag(s1.snapshot_id, ""), ValidationError, "the tag name must be a non-empty string"),
        (lambda ms: ms.remove_branch("main"), ValidationError,
         "Cannot remove branch main: the main branch cannot be removed"),
        (lambda ms: ms.remove_branch("nope"), NotFound, "Cannot remove branch nope: branch nope does not exist"),
        (lambda ms: ms.remove_branch("tag1"), ValidationError,
         "Cannot remove branch tag1: tag1 is a tag, not a branch"),
        (lambda ms: ms.remove_tag("branch1"), ValidationError,
         "Cannot remove tag branch1: branch1 is a branch, not a tag"),
        (lambda ms: ms.remove_tag("nope"), NotFound, "Cannot remove tag nope: tag nope does not exist"),
        (lambda ms: ms.replace_branch("nope", s1.snapshot_id), NotFound,
         "Cannot replace branch nope: branch nope does not exist"),
        (lambda ms: ms.replace_branch("tag1", s1.snapshot_id), ValidationError, "tag1 is a tag, not a branch"),
        (lambda ms: ms.replace_branch("branch1", to_ref="nope"), NotFound,
         "Cannot replace branch branch1: ref nope does not exist"),
        (lambda ms: ms.replace_branch("branch1"), ValidationError, "give exactly one of snapshot_id and to_ref"),
        (lambda ms: ms.replace_tag("branch1", s1.snapshot_id), ValidationError, "branch1 is a branch, not a tag"),
        (lambda ms: ms.replace_tag("tag1", 424242), NotFound, "snapshot 424242 does not exist"),
        (lambda ms: ms.fast_forward("main", "branch1"), ValidationError,
         f"Cannot fast-forward main: its head {s3.snapshot_id} is not an ancestor of branch1"),
        (lambda ms: ms.fast_forward("tag1", "main"), ValidationError, "tag1 is a tag, not a branch"),
        (lambda ms: ms.rename_branch("main", "x"), ValidationError, "Cannot rename branch main"),
        (lambda ms: ms.rename_branch("branch1", "tag1"), ValidationError,
         "Cannot rename branch branch1: ref tag1 already exists"),
        (lambda ms: ms.rename_branch("tag1", "x"), ValidationError, "tag1 is a tag, not a branch"),
        (lambda ms: ms.set_min_snapshots_to_keep("tag1", 2), ValidationError, "tag1 is a tag, not a branch"),
        (lambda ms: ms.set_max_ref_age_ms("nope", 2), NotFound, "ref nope does not exist"),
        (lambda ms: ms.rollback_to_snapshot(424242), NotFound,
         "Cannot roll back to snapshot 424242: snapshot 424242 does not exist"),
        (lambda ms: ms.rollback_to_snapshot(s_off(table)), ValidationError,
         "is not an ancestor of the current snapshot"),
        (lambda ms: ms.rollback_to_timestamp(s1.timestamp_ms), ValidationError,
         f"Cannot roll back to timestamp {s1.timestamp_ms}: no ancestor of the current snapshot is older"),
        (lambda ms: ms.set_current_snapshot(), ValidationError, "give exactly one of snapshot_id and ref_name"),
        (lambda ms: ms.set_current_snapshot(s1.snapshot_id, "tag1"), ValidationError, "give exactly one"),
        (lambda ms: ms.set_current_snapshot(ref_name="nope"), NotFound, "ref nope does not exist"),
        (lambda ms: ms.set_current_snapshot(snapshot_id=424242), NotFound, "snapshot 424242 does not exist"),
        (lambda ms: ms.cherrypick_snapshot(424242), NotFound,
         "Cannot cherry-pick snapshot 424242: snapshot 424242 does not exist"),
        (lambda ms: ms.cherrypick_snapshot(s2.snapshot_id), ValidationError,
         f"Cannot cherry-pick snapshot {s2.snapshot_id}: it is already an ancestor of the current snapshot"),
    ]


def s_off(table) -> int:
    return table.off.snapshot_id


@pytest.fixture
def error_table(table):
    """The table with a tag ``tag1``, a branch ``branch1`` on s1, and a snapshot ``off`` main no longer reaches."""
    s1, _, s3 = table.snaps
    table.manage_snapshots().create_tag(s1.snapshot_id, "tag1").create_branch(s1.snapshot_id, "branch1").commit()
    table.off = table.append(rows([99]))
    table.manage_snapshots().rollback_to_snapshot(s3.snapshot_id).commit()
    return table


@pytest.mark.parametrize("case", range(33))
def test_invalid_requests_raise_and_commit_nothing(error_table, case):
    cases = _errors(error_table)
    assert len(cases) == 33
    call, error, message = cases[case]
    h = head(error_table)
    refs = error_table.state.refs
    ms = error_table.manage_snapshots()
    with pytest.raises(error) as info:
        call(ms)
    assert message in str(info.value)
    ms.commit()  # the refused request was dropped: nothing left to commit
    assert head(error_table) == h
    assert error_table.state.refs == refs


def test_valid_requests_before_an_invalid_one_are_kept(table):
    s1 = table.snaps[0]
    ms = table.manage_snapshots().create_tag(s1.snapshot_id, "keep")
    with pytest.raises(ValidationError):
        ms.remove_branch("main")
    ms.commit()
    assert ref(table, "keep") == SnapshotRef(snapshot_id=s1.snapshot_id, type="tag")


def test_request_invalidated_by_a_concurrent_commit_fails_at_commit(table, catalog):
    s1 = table.snaps[0]
    ms = table.manage_snapshots().create_tag(s1.snapshot_id, "t")
    other = catalog.load_table("db.t")
    other.manage_snapshots().create_branch(s1.snapshot_id, "t").commit()
    h = head(table)
    with pytest.raises(ValidationError, match="Cannot create tag t: ref t already exists"):
        ms.commit()
    assert head(table) == h
    assert ref(table, "t").type == "branch"


def test_retry_rebuilds_on_the_new_base(table, catalog):
    """A rollback built before a concurrent append still applies after it (the ancestor is still an ancestor)."""
    s1 = table.snaps[0]
    ms = table.manage_snapshots().rollback_to_snapshot(s1.snapshot_id)
    catalog.load_table("db.t").append(rows([7]))
    ms.commit()
    assert ids_of(table) == [1, 2]


def test_snapshot_added_events_carry_the_picked_files(table):
    s1, s2, _ = table.snaps
    table.manage_snapshots().rollback_to_snapshot(s1.snapshot_id).commit()
    table.append(rows([5]))
    events = ManageSnapshots(table).cherrypick_snapshot(s2.snapshot_id).events(
        table.state, CommitContext(commit_id="c", time_ms=table.state.last_updated_ms + 1))
    assert [type(e) for e in events] == [SnapshotAdded]
    assert [c.added for c in events[0].changes] == [True]


def test_a_commit_to_a_tag_is_refused_and_the_tag_stays(table, tmp_path):
    """Java's SnapshotProducer: a tag is never the target of a snapshot; before, the append moved the tag."""
    import os

    table.append(rows([1]))
    tagged = table.current_snapshot().snapshot_id
    table.manage_snapshots().create_tag(tagged, "v1").commit()
    def data_files() -> list[str]:
        return sorted(os.path.join(d, f) for d, _, names in os.walk(os.path.join(table.location, "data"))
                      for f in names)

    files_before = data_files()
    version = table.state.version
    for commit in (lambda: table.append(rows([2], "b"), branch="v1"),
                   lambda: table.delete("id = 1", branch="v1")):
        with pytest.raises(ValidationError, match="Cannot commit to v1: it is a tag, not a branch"):
            commit()
    assert table.state.version == version and table.state.ref("v1").snapshot_id == tagged
    assert data_files() == files_before                               # the refused append's file is gone


# ---------------------------------------------------------------- refs on tables without main


def test_create_branch_on_an_empty_table_commits_an_empty_snapshot(catalog):
    """Java's SnapshotManager.createBranch(name) with no current snapshot: an empty fast append with no parent on the
    new branch; main stays absent, and the projection (a manifest list naming no manifest) is valid."""
    from pyiceberg.table import StaticTable

    t = catalog.create_table("db.e", schema=SCHEMA, partition_by=["category"])
    before = commits(t)
    t.manage_snapshots().create_branch(None, "audit", min_snapshots_to_keep=2).commit()
    assert commits(t) == before + 1
    assert ref(t, "main") is None and t.current_snapshot() is None
    audit = ref(t, "audit")
    assert (audit.type, audit.min_snapshots_to_keep) == ("branch", 2)
    snap = t.state.snapshot_by_id(audit.snapshot_id)
    assert (snap.parent_snapshot_id, snap.operation) == (None, "append")
    assert dict(snap.summary)["total-records"] == "0"
    assert list(t.catalog.store.file_changes_of(t.state, snap)) == []
    assert ids_of(t, snap.snapshot_id) == []
    refs, current = published_refs(t)
    assert refs == {"audit": {"snapshot-id": snap.snapshot_id, "type": "branch", "min-snapshots-to-keep": 2}}
    assert current == -1  # no current snapshot, as Java writes it
    assert catalog.verify("db.e") == []
    static = StaticTable.from_metadata(t.metadata_location)
    assert static.current_snapshot() is None
    assert static.snapshot_by_name("audit").snapshot_id == snap.snapshot_id
    assert static.scan(snapshot_id=snap.snapshot_id).to_arrow().num_rows == 0
    t.append(rows([1]), branch="audit")  # the branch takes writes on top of its empty snapshot
    assert t.state.snapshot_by_id(ref(t, "audit").snapshot_id).parent_snapshot_id == snap.snapshot_id
    assert ref(t, "main") is None


def test_create_branch_on_an_empty_table_refuses_an_existing_name(catalog):
    t = catalog.create_table("db.e", schema=SCHEMA)
    t.manage_snapshots().create_branch(None, "audit").commit()
    h = head(t)
    with pytest.raises(ValidationError, match="Cannot create branch audit: ref audit already exists"):
        t.manage_snapshots().create_branch(None, "audit")
    assert head(t) == h and len(t.snapshots()) == 1


@pytest.mark.parametrize("fast", [True, False])
def test_replace_branch_to_a_ref_creates_a_missing_branch(table, fast):
    """Java's replaceBranch(from, to) and fastForwardBranch since 1.5: a missing branch is created at the ref's
    snapshot, without retention settings; replace_branch to a snapshot id still needs an existing branch."""
    s1 = table.snaps[0]
    table.manage_snapshots().create_branch(s1.snapshot_id, "branch1", min_snapshots_to_keep=3).commit()
    ms = table.manage_snapshots()
    (ms.fast_forward("new", "branch1") if fast else ms.replace_branch("new", to_ref="branch1")).commit()
    assert ref(table, "new") == SnapshotRef(snapshot_id=s1.snapshot_id, type="branch")
    h = head(table)
    with pytest.raises(NotFound, match="Cannot replace branch other: branch other does not exist"):
        table.manage_snapshots().replace_branch("other", s1.snapshot_id)
    with pytest.raises(NotFound, match="Cannot replace branch other: ref nope does not exist"):
        table.manage_snapshots().fast_forward("other", "nope")
    assert head(table) == h and ref(table, "other") is None


def test_fast_forward_main_when_the_data_is_only_on_a_branch(catalog):
    t = catalog.create_table("db.e", schema=SCHEMA)
    a = t.append(rows([1, 2]), branch="audit")
    assert ref(t, "main") is None
    t.manage_snapshots().fast_forward("main", "audit").commit()
    assert t.current_snapshot().snapshot_id == a.snapshot_id
    assert ids_of(t) == [1, 2]
    refs, current = published_refs(t)
    assert current == a.snapshot_id and refs["main"] == {"snapshot-id": a.snapshot_id, "type": "branch"}


@pytest.mark.parametrize("call", [
    lambda ms, sid: ms.create_tag(sid, "main"),
    lambda ms, sid: ms.replace_tag("main", sid),
])
def test_a_tag_named_main_is_refused(catalog, call):
    """Java's TableMetadata.Builder.setRef: main must be a branch, even on a table whose main does not exist yet."""
    t = catalog.create_table("db.e", schema=SCHEMA)
    a = t.append(rows([1]), branch="audit")
    h = head(t)
    with pytest.raises(ValidationError, match="main must be a branch, not a tag"):
        call(t.manage_snapshots(), a.snapshot_id)
    assert head(t) == h and ref(t, "main") is None


# ---------------------------------------------------------------- cherry-pick: write-audit-publish, v3


def stage_wap(table, branch, ids, wap_id):
    """An append staged on ``branch`` with a ``wap.id``, as Spark's write-audit-publish writes it."""
    from engine.write.data_writer import write_data_files
    from engine.operations.snapshot import new_snapshot_id

    snapshot_id = new_snapshot_id()
    files = write_data_files(table.state, rows(ids))
    table.commit_events(lambda base, ctx: snapshot_events(base, ctx, operation="append", snapshot_id=snapshot_id,
                                                          added=files, branch=branch,
                                                          summary_extra={"wap.id": wap_id}))
    return table.state.snapshot_by_id(snapshot_id)


def test_a_wap_id_fast_forwarded_once_is_not_published_again(table):
    """Java's WapUtil.isWapIdPublished: an ancestor that carries the id as ``wap.id`` (a fast-forwarded staged
    snapshot) published it."""
    s3 = table.snaps[2]
    table.manage_snapshots().create_branch(s3.snapshot_id, "w1").create_branch(s3.snapshot_id, "w2").commit()
    wap1 = stage_wap(table, "w1", [5], "job-1")
    wap2 = stage_wap(table, "w2", [5], "job-1")  # the same job, staged twice
    table.manage_snapshots().cherrypick_snapshot(wap1.snapshot_id).commit()
    assert table.current_snapshot().snapshot_id == wap1.snapshot_id
    h = head(table)
    with pytest.raises(ValidationError, match=f"write-audit-publish id job-1 was already published by snapshot "
                                              f"{wap1.snapshot_id}"):
        table.manage_snapshots().cherrypick_snapshot(wap2.snapshot_id)
    assert head(table) == h
    assert ids_of(table) == [1, 2, 3, 4, 5]


def test_a_published_wap_id_is_refused_before_a_fast_forward(table):
    """Java checks the WAP id of an append before it decides to fast-forward."""
    s3 = table.snaps[2]
    table.manage_snapshots().create_branch(s3.snapshot_id, "w1").commit()
    wap1 = stage_wap(table, "w1", [5], "job-1")
    table.append(rows([6]))  # main moves on: wap1 is re-applied
    table.manage_snapshots().cherrypick_snapshot(wap1.snapshot_id).commit()
    published = table.current_snapshot()
    assert published.summary_value("published-wap-id") == "job-1"
    table.manage_snapshots().create_branch(published.snapshot_id, "w2").commit()
    wap2 = stage_wap(table, "w2", [5], "job-1")  # its parent is main's head
    h = head(table)
    with pytest.raises(ValidationError, match=f"job-1 was already published by snapshot {published.snapshot_id}"):
        table.manage_snapshots().cherrypick_snapshot(wap2.snapshot_id)
    assert head(table) == h
    assert ids_of(table) == [1, 2, 3, 4, 5, 6]


def test_a_delete_file_in_a_replaced_partition_does_not_block_a_dynamic_overwrite(table):
    """Java's validateReplacedPartitions reads only the data files added since the overwrite's parent."""
    from engine.model.data_file import DataFileContent

    s3 = table.snaps[2]
    table.manage_snapshots().create_branch(s3.snapshot_id, "stage").commit()
    o = table.dynamic_overwrite(rows([10, 11], "a"), branch="stage")
    table.set_properties({"write.delete.mode": "merge-on-read"})
    d = table.delete("id = 1")  # a delete file in partition a, no data file
    added = [c.file for c in table.catalog.store.file_changes_of(table.state, d) if c.added]
    assert added and all(f.content != DataFileContent.DATA for f in added)
    table.manage_snapshots().cherrypick_snapshot(o.snapshot_id).commit()
    picked = table.current_snapshot()
    assert picked.parent_snapshot_id == d.snapshot_id
    assert picked.summary_value("source-snapshot-id") == str(o.snapshot_id)
    assert ids_of(table) == [10, 11]


def test_cherrypick_on_a_v3_table_gives_the_picked_rows_new_row_ids(catalog):
    """Java's TestRowLineageAssignment.testCherryPickReassignsRowIds: re-applied files are new files, so they take
    row ids from the table's next-row-id."""
    t = catalog.create_table("db.v3", schema=SCHEMA, partition_by=["category"], format_version=3)
    s1 = t.append(rows([1, 2]))  # row ids 0, 1
    t.manage_snapshots().create_branch(s1.snapshot_id, "branch").commit()
    b = t.append(rows([3, 4, 5]), branch="branch")  # row ids 2..4
    t.append(rows([6]))  # row id 5
    start = t.state.next_row_id
    assert start == 6
    t.manage_snapshots().cherrypick_snapshot(b.snapshot_id).commit()
    picked = t.current_snapshot()
    assert picked.snapshot_id != b.snapshot_id
    assert (picked.first_row_id, picked.added_rows, t.state.next_row_id) == (start, 3, start + 3)
    [f] = [c.file for c in t.catalog.store.file_changes_of(t.state, picked) if c.added]
    assert f.first_row_id == start
    [orig] = [c.file for c in t.catalog.store.file_changes_of(t.state, b) if c.added]
    assert (orig.file_path, orig.first_row_id) == (f.file_path, 2)  # the branch keeps its own lineage
    assert catalog.verify("db.v3") == []


# ---------------------------------------------------------------- argument types


@pytest.mark.parametrize("call, culprit", [
    (lambda t: t.manage_snapshots().rollback_to_timestamp("yesterday"), "timestamp_ms must be a 64-bit integer"),
    (lambda t: t.manage_snapshots().rollback_to_timestamp(None), "timestamp_ms must be a 64-bit integer"),
    (lambda t: t.manage_snapshots().rollback_to_timestamp(True), "timestamp_ms must be a 64-bit integer"),
    (lambda t: t.expire_snapshots(older_than_ms="yesterday"), "older_than_ms must be a 64-bit integer"),
    (lambda t: t.expire_snapshots(older_than_ms=1.5), "older_than_ms must be a 64-bit integer"),
    (lambda t: t.expire_snapshots(retain_last="2"), "retain_last must be a 64-bit integer"),
    (lambda t: t.expire_snapshots(retain_last=1.5), "retain_last must be a 64-bit integer"),
    (lambda t: t.remove_orphan_files(older_than_ms="yesterday"), "older_than_ms must be a 64-bit integer"),
    (lambda t: t.remove_orphan_files(older_than_ms=2**63), "older_than_ms must be a 64-bit integer"),
    (lambda t: t.expire_snapshots(older_than_ms=-2**63 - 1), "older_than_ms must be a 64-bit integer"),
    (lambda t: t.manage_snapshots().rollback_to_timestamp(2**64), "timestamp_ms must be a 64-bit integer"),
])
def test_a_bad_argument_type_is_a_validation_error_naming_it(table, call, culprit):
    h = head(table)
    with pytest.raises(ValidationError, match=culprit):
        call(table)
    assert head(table) == h
