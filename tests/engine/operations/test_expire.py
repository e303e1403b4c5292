"""Snapshot expiry (Iceberg Java's RemoveSnapshots rules) and orphan-file removal, asserted on the file system."""

from __future__ import annotations

import json
import os
import time

import attrs
import pyarrow as pa
import pytest

from engine import Catalog
from engine.errors import ValidationError
from engine.state.events import PropertiesSet
from engine.operations.commit import now_ms
from engine.operations.expire import (
    ExpireResult,
    expire_snapshots,
    plan_expiry,
    remove_orphan_files,
)
from engine.state.table_state import Snapshot, SnapshotRef, TableState
from projections import layout
from projections.manifest_reader import read_manifest_list

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), ("category", pa.string())])
DAY = 24 * 60 * 60 * 1000
FUTURE = 2**62  # an older-than cutoff every snapshot is older than


def rows(ids, category="a") -> pa.Table:
    return pa.table({"id": pa.array(ids, pa.int64()), "category": pa.array([category] * len(ids))}, schema=SCHEMA)


def ids_of(table, snapshot_id=None) -> list[int]:
    return sorted(table.scan(snapshot_id=snapshot_id).to_arrow()["id"].to_pylist())


def files_under(path) -> set[str]:
    out = set()
    for root, _, names in os.walk(path):
        out.update(os.path.join(root, n) for n in names)
    return out


def added_paths(table, snap) -> list[str]:
    return [c.file.file_path for c in table.catalog.store.file_changes_of(table.state, snap) if c.added]


def listed_manifests(table, snap) -> set[str]:
    """The manifests a published manifest list names, read back from the Avro file."""
    path = layout.manifest_list_file(table.location, snap.snapshot_id, snap.commit_id)
    with open(path, "rb") as f:
        return {m.manifest_path for m in read_manifest_list(f.read(), path)}


def manifest_list(table, snap) -> str:
    return layout.manifest_list_file(table.location, snap.snapshot_id, snap.commit_id)


@pytest.fixture
def catalog(tmp_path):
    cat = Catalog.open(tmp_path / "warehouse")
    cat.create_namespace("db")
    yield cat
    cat.close()


def make_table(catalog, appends=((1, 2), (3,), (4,)), properties=None):
    t = catalog.create_table("db.t", schema=SCHEMA, properties=properties or {})
    t.snaps = []
    for ids in appends:
        t.snaps.append(t.append(rows(list(ids))))
        time.sleep(0.003)
    return t


# ---------------------------------------------------------------- plan_expiry: the rules, on synthetic states


def state_of(catalog, snapshots, refs, properties=()) -> TableState:
    name = f"db.plan{len(catalog.list_tables('db'))}"
    base = catalog.create_table(name, schema=SCHEMA).state
    snaps = tuple(Snapshot(snapshot_id=i, parent_snapshot_id=p, sequence_number=n, timestamp_ms=ts, operation="append",
                           summary=(), schema_id=0, commit_id=f"c{i}", log_position=n, log_version=n)
                  for n, (i, p, ts) in enumerate(snapshots, 1))
    return attrs.evolve(base, snapshots=snaps, refs=tuple(sorted(refs.items())), properties=tuple(properties))


NOW = 100 * DAY


def chain(n: int, step: int = DAY, start: int = NOW - 10 * DAY):
    """Snapshots 1..n, each the parent of the next, ``step`` apart."""
    return [(i, i - 1 if i > 1 else None, start + (i - 1) * step) for i in range(1, n + 1)]


def test_plan_default_keeps_five_days_and_one_snapshot(catalog):
    st = state_of(catalog, chain(10), {"main": SnapshotRef(snapshot_id=10)})
    # timestamps NOW-10d .. NOW-1d: 6 sits exactly at the cutoff NOW-5d and is kept
    assert plan_expiry(st, NOW) == ((1, 2, 3, 4, 5), ())


def test_plan_older_than_and_retain_last(catalog):
    st = state_of(catalog, chain(5), {"main": SnapshotRef(snapshot_id=5)})
    assert plan_expiry(st, NOW, older_than_ms=FUTURE) == ((1, 2, 3, 4), ())
    assert plan_expiry(st, NOW, older_than_ms=FUTURE, retain_last=3) == ((1, 2), ())
    assert plan_expiry(st, NOW, older_than_ms=0) == ((), ())
    with pytest.raises(ValidationError, match="retain_last must be at least 1, got 0"):
        plan_expiry(st, NOW, retain_last=0)


def test_plan_table_properties(catalog):
    st = state_of(catalog, chain(5), {"main": SnapshotRef(snapshot_id=5)},
                  [("history.expire.max-snapshot-age-ms", str(8 * DAY + 1)),
                   ("history.expire.min-snapshots-to-keep", "1")])
    assert plan_expiry(st, NOW) == ((1, 2), ())  # NOW-10d and NOW-9d are older than NOW-8d-1ms
    st = state_of(catalog, chain(5), {"main": SnapshotRef(snapshot_id=5)},
                  [("history.expire.min-snapshots-to-keep", "4")])
    assert plan_expiry(st, NOW, older_than_ms=FUTURE) == ((1,), ())
    assert plan_expiry(st, NOW, older_than_ms=FUTURE, retain_last=2) == ((1, 2, 3), ())  # the argument wins


def test_plan_branch_retention_overrides_the_defaults(catalog):
    # main: 1..5; branch b forks at 3: 6, 7
    snaps = chain(5) + [(6, 3, NOW - 2 * DAY), (7, 6, NOW - DAY)]
    refs = {"main": SnapshotRef(snapshot_id=5, min_snapshots_to_keep=2),
            "b": SnapshotRef(snapshot_id=7, max_snapshot_age_ms=int(1.5 * DAY))}
    st = state_of(catalog, snaps, refs)
    # main keeps 5, 4 (min 2); b keeps 7 (age 1d <= 1.5d) but not 6 (2d) with one snapshot minimum
    assert plan_expiry(st, NOW, older_than_ms=FUTURE) == ((1, 2, 3, 6), ())


def test_plan_tags_keep_their_snapshot_and_unreferenced_young_snapshots_stay(catalog):
    snaps = chain(4) + [(9, 2, NOW - 1000)]  # 9: a young snapshot no ref reaches (a removed branch)
    refs = {"main": SnapshotRef(snapshot_id=4), "t": SnapshotRef(snapshot_id=1, type="tag")}
    st = state_of(catalog, snaps, refs)
    assert plan_expiry(st, NOW) == ((2, 3), ())
    assert plan_expiry(st, NOW, older_than_ms=FUTURE) == ((2, 3, 9), ())


def test_plan_removes_refs_past_their_max_ref_age_but_never_main(catalog):
    snaps = chain(4)
    refs = {"main": SnapshotRef(snapshot_id=1, max_ref_age_ms=1),
            "old-tag": SnapshotRef(snapshot_id=2, type="tag", max_ref_age_ms=DAY),
            "young-tag": SnapshotRef(snapshot_id=3, type="tag", max_ref_age_ms=30 * DAY),
            "old-branch": SnapshotRef(snapshot_id=4, max_ref_age_ms=DAY)}
    st = state_of(catalog, snaps, refs)
    assert plan_expiry(st, NOW, older_than_ms=FUTURE) == ((2, 4), ("old-branch", "old-tag"))
    # the table-wide default applies to refs without their own
    st = state_of(catalog, snaps, {"main": SnapshotRef(snapshot_id=4), "t": SnapshotRef(snapshot_id=1, type="tag")},
                  [("history.expire.max-ref-age-ms", str(DAY))])
    assert plan_expiry(st, NOW, older_than_ms=FUTURE) == ((1, 2, 3), ("t",))


def test_plan_empty_table(catalog):
    assert plan_expiry(catalog.create_table("db.empty", schema=SCHEMA).state, NOW) == ((), ())


# ---------------------------------------------------------------- expiry on real tables


def test_nothing_to_expire_commits_nothing(catalog):
    t = make_table(catalog)
    h = catalog.log.head(t.uuid)
    before = files_under(t.location)
    assert expire_snapshots(t) == ExpireResult()  # everything is younger than 5 days
    assert catalog.log.head(t.uuid) == h
    assert files_under(t.location) == before


def test_expire_deletes_exactly_the_unreachable_files(catalog):
    t = make_table(catalog, appends=((1, 2), (3,), (4,), (5,)))
    s1, s2, s3, s4 = t.snaps
    f1 = added_paths(t, s1)[0]
    s5 = t.delete_files([f1])
    before = files_under(t.location)
    lists_before = {s.snapshot_id: manifest_list(t, s) for s in t.snapshots()}
    manifests_before = set().union(*(listed_manifests(t, s) for s in t.snapshots()))

    result = expire_snapshots(t, older_than_ms=FUTURE, retain_last=1)

    gone = (s1, s2, s3, s4)
    assert result.expired_snapshot_ids == tuple(sorted(s.snapshot_id for s in gone))
    assert [s.snapshot_id for s in t.snapshots()] == [s5.snapshot_id]
    kept_manifests = listed_manifests(t, s5)
    expected = {f1} | {lists_before[s.snapshot_id] for s in gone} | (manifests_before - kept_manifests)
    new_metadata = {layout.metadata_file(t.location, t.state.version)}
    assert before - files_under(t.location) == expected
    assert files_under(t.location) - before == new_metadata
    assert result.deleted_data_files == (f1,)
    assert result.deleted_manifest_lists == tuple(sorted(lists_before[s.snapshot_id] for s in gone))
    assert set(result.deleted_manifests) == manifests_before - kept_manifests
    assert result.deleted_delete_files == () and result.deleted_metadata_files == ()
    # the table still reads, and the published metadata lists only the kept snapshot
    assert ids_of(t) == [3, 4, 5]
    with open(t.metadata_location, encoding="utf-8") as f:
        meta = json.load(f)
    assert [s["snapshot-id"] for s in meta["snapshots"]] == [s5.snapshot_id]
    assert [e["snapshot-id"] for e in meta["snapshot-log"]] == [s5.snapshot_id]


def test_expire_keeps_files_live_in_a_kept_snapshot(catalog):
    t = make_table(catalog, appends=((1, 2), (3,)))
    s1, s2 = t.snaps
    f1 = added_paths(t, s1)[0]
    s3 = t.delete_files([f1])
    result = expire_snapshots(t, older_than_ms=FUTURE, retain_last=2)
    assert result.expired_snapshot_ids == (s1.snapshot_id,)
    assert result.deleted_data_files == () and os.path.exists(f1)
    assert ids_of(t, s2.snapshot_id) == [1, 2, 3]
    assert ids_of(t, s3.snapshot_id) == [3]


def test_expire_keeps_ref_heads_and_their_files(catalog):
    t = make_table(catalog)
    s1, s2, s3 = t.snaps
    t.manage_snapshots().create_tag(s1.snapshot_id, "v1").commit()
    f1 = added_paths(t, s1)[0]
    t.delete_files([f1])
    result = expire_snapshots(t, older_than_ms=FUTURE)
    assert result.expired_snapshot_ids == tuple(sorted((s2.snapshot_id, s3.snapshot_id)))
    assert os.path.exists(f1) and os.path.exists(manifest_list(t, s1))
    assert result.deleted_data_files == ()
    assert ids_of(t, s1.snapshot_id) == [1, 2]
    assert t.state.ref("v1").snapshot_id == s1.snapshot_id


def test_expire_respects_branch_min_snapshots_to_keep(catalog):
    t = make_table(catalog, appends=((1,), (2,), (3,), (4,)))
    t.manage_snapshots().create_branch(t.snaps[2].snapshot_id, "b", min_snapshots_to_keep=2).commit()
    result = expire_snapshots(t, older_than_ms=FUTURE)
    assert result.expired_snapshot_ids == (t.snaps[0].snapshot_id,)
    assert {s.snapshot_id for s in t.snapshots()} == {s.snapshot_id for s in t.snaps[1:]}


def test_expire_respects_the_min_snapshots_property(catalog):
    t = make_table(catalog, appends=((1,), (2,), (3,), (4,)),
                   properties={"history.expire.min-snapshots-to-keep": "3"})
    assert expire_snapshots(t, older_than_ms=FUTURE).expired_snapshot_ids == (t.snaps[0].snapshot_id,)


def test_expire_removes_aged_refs_in_the_same_commit(catalog):
    t = make_table(catalog)
    s1 = t.snaps[0]
    t.manage_snapshots().create_tag(s1.snapshot_id, "short", max_ref_age_ms=1).commit()
    time.sleep(0.01)
    commits = {e.commit_id for e in catalog.log.read_stream(t.uuid)}
    result = expire_snapshots(t, older_than_ms=FUTURE)
    new = [e for e in catalog.log.read_stream(t.uuid) if e.commit_id not in commits]
    assert [e.type for e in new] == ["remove-snapshot-ref", "remove-snapshots"]
    assert result.removed_refs == ("short",)
    assert s1.snapshot_id in result.expired_snapshot_ids
    assert [name for name, _ in t.state.refs] == ["main"]


def test_expire_refuses_when_gc_is_disabled(catalog):
    t = make_table(catalog, properties={"gc.enabled": "false"})
    h = catalog.log.head(t.uuid)
    with pytest.raises(ValidationError, match="Cannot expire snapshots: gc.enabled is false"):
        expire_snapshots(t, older_than_ms=FUTURE)
    with pytest.raises(ValidationError, match="retain_last must be at least 1"):
        expire_snapshots(t, retain_last=0)
    assert catalog.log.head(t.uuid) == h


def test_gc_disabled_keeps_data_files_from_orphan_removal_and_purge(catalog):
    """gc.enabled=false says the table's files may be other tables' too: orphan removal is refused, as Java's
    DeleteOrphanFiles refuses it, and a purge removes the metadata only, as Java's CatalogUtil.dropTableData. Both
    deleted data files (orphan removal a stray file another writer put under the location)."""
    t = make_table(catalog, properties={"gc.enabled": "false"})
    stray = os.path.join(t.state.location, "data", "other-writer.parquet")
    with open(stray, "wb") as f:
        f.write(b"another writer's bytes")
    os.utime(stray, (0, 0))
    data = sorted(added_paths(t, s)[0] for s in t.snaps)
    h = catalog.log.head(t.uuid)
    with pytest.raises(ValidationError, match="Cannot remove orphan files: gc.enabled is false"):
        remove_orphan_files(t, older_than_ms=FUTURE)
    assert os.path.exists(stray) and catalog.log.head(t.uuid) == h
    metadata = layout.metadata_file_of(t.state, t.state.version)
    deleted = catalog.drop_table("db.t", purge=True)
    assert all(os.path.exists(p) for p in data) and os.path.exists(stray)
    assert metadata in deleted and not os.path.exists(metadata)
    assert not set(data) & set(deleted)


def test_a_second_expiry_deletes_files_added_before_the_first(catalog):
    """Which files a snapshot reaches is computed on the whole lineage, past snapshots expired earlier."""
    t = make_table(catalog, appends=((1,), (2,)))
    s1, s2 = t.snaps
    f1 = added_paths(t, s1)[0]
    expire_snapshots(t, older_than_ms=FUTURE)
    assert os.path.exists(f1)  # still live in s2
    s3 = t.delete_files([f1])
    result = expire_snapshots(t, older_than_ms=FUTURE)
    assert result.expired_snapshot_ids == (s2.snapshot_id,)
    assert result.deleted_data_files == (f1,)
    assert not os.path.exists(f1)
    assert [s.snapshot_id for s in t.snapshots()] == [s3.snapshot_id]
    assert ids_of(t) == [2]


def test_expire_after_rollback_deletes_the_abandoned_files(catalog):
    t = make_table(catalog)
    s1, s2, s3 = t.snaps
    t.manage_snapshots().rollback_to_snapshot(s1.snapshot_id).commit()
    f2, f3 = added_paths(t, s2)[0], added_paths(t, s3)[0]
    result = expire_snapshots(t, older_than_ms=FUTURE)
    assert result.expired_snapshot_ids == tuple(sorted((s2.snapshot_id, s3.snapshot_id)))
    assert result.deleted_data_files == tuple(sorted((f2, f3)))
    assert not os.path.exists(f2) and not os.path.exists(f3)
    assert ids_of(t) == [1, 2]


def test_expire_deletes_metadata_files_that_left_the_log(catalog):
    t = make_table(catalog, appends=((1,), (2,), (3,), (4,)),
                   properties={"write.metadata.delete-after-commit.enabled": "true",
                               "write.metadata.previous-versions-max": "2"})
    before = {p for p in files_under(t.location) if p.endswith(".metadata.json")}
    result = expire_snapshots(t, older_than_ms=FUTURE, retain_last=4)  # expires nothing, cleans metadata
    state = t.state
    kept = {layout.metadata_file(t.location, v) for _, v in state.metadata_log} | {
        layout.metadata_file(t.location, state.version)}
    assert len(state.metadata_log) == 2
    assert {p for p in files_under(t.location) if p.endswith(".metadata.json")} == kept
    assert set(result.deleted_metadata_files) == before - kept
    assert ids_of(t) == [1, 2, 3, 4]


def test_metadata_files_stay_without_delete_after_commit(catalog):
    t = make_table(catalog, properties={"write.metadata.previous-versions-max": "1"})
    before = {p for p in files_under(t.location) if p.endswith(".metadata.json")}
    assert expire_snapshots(t, older_than_ms=FUTURE, retain_last=5).deleted_metadata_files == ()
    assert before <= files_under(t.location)


def test_the_table_stays_consistent_for_later_commits(catalog):
    t = make_table(catalog)
    expire_snapshots(t, older_than_ms=FUTURE)
    t.append(rows([7]))
    t.manage_snapshots().create_tag(t.current_snapshot().snapshot_id, "after").commit()
    assert ids_of(t) == [1, 2, 3, 4, 7]


# ---------------------------------------------------------------- orphans


def _age(path, ms_ago=DAY):
    then = (now_ms() - ms_ago) / 1000
    os.utime(path, (then, then))


def test_remove_orphan_files(catalog):
    t = make_table(catalog)
    s1 = t.snaps[0]
    stray_data = os.path.join(t.location, "data", "stray.parquet")
    stray_nested = os.path.join(t.location, "data", "x=1", "stray2.parquet")
    stray_meta = os.path.join(t.location, "metadata", "stray-m0.avro")
    fresh = os.path.join(t.location, "data", "fresh.parquet")
    for p in (stray_data, stray_nested, stray_meta, fresh):
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "wb") as f:
            f.write(b"x")
    for p in files_under(t.location) - {fresh}:
        _age(p)
    before = files_under(t.location)
    deleted = remove_orphan_files(t, older_than_ms=now_ms() - 60_000)
    assert deleted == sorted([stray_data, stray_nested, stray_meta])
    assert before - files_under(t.location) == {stray_data, stray_nested, stray_meta}
    assert os.path.exists(fresh)
    assert ids_of(t) == [1, 2, 3, 4] and ids_of(t, s1.snapshot_id) == [1, 2]


def test_remove_orphan_files_default_cutoff_is_three_days(catalog):
    t = make_table(catalog)
    stray = os.path.join(t.location, "data", "stray.parquet")
    with open(stray, "wb") as f:
        f.write(b"x")
    _age(stray, DAY)
    assert remove_orphan_files(t) == []
    _age(stray, 4 * DAY)
    assert remove_orphan_files(t) == [stray]


def test_orphans_after_expiry_keep_files_live_through_expired_ancestors(catalog):
    t = make_table(catalog, appends=((1,), (2,)),
                   properties={"write.metadata.previous-versions-max": "1"})
    f1 = added_paths(t, t.snaps[0])[0]
    expire_snapshots(t, older_than_ms=FUTURE)  # s1 expired, its file still live in s2
    old_metadata = layout.metadata_file(t.location, 1)
    assert os.path.exists(old_metadata)
    deleted = remove_orphan_files(t, older_than_ms=FUTURE)
    assert os.path.exists(f1)
    assert old_metadata in deleted  # left the metadata log (previous-versions-max 1)
    state = t.state
    needed = {layout.metadata_file(t.location, state.version), layout.version_hint_file(t.location),
              manifest_list(t, t.current_snapshot())} | listed_manifests(t, t.current_snapshot())
    assert needed <= files_under(t.location)
    assert all(not p.endswith((".parquet",)) for p in deleted)
    assert ids_of(t) == [1, 2]


def test_expiry_reads_properties_committed_since_the_handle_was_made(catalog):
    """A property set through commit_events is honoured by the next expiry (state read fresh)."""
    t = make_table(catalog, appends=((1,), (2,), (3,)))
    t.commit_events(lambda base, ctx: [PropertiesSet(updates={"history.expire.min-snapshots-to-keep": "2"})])
    assert expire_snapshots(t, older_than_ms=FUTURE).expired_snapshot_ids == (t.snaps[0].snapshot_id,)


def test_own_orphans_are_found_from_staging_records_without_listing(tmp_path, monkeypatch):
    """A job that wrote data files and died before its commit: the files were recorded as staged, so orphan
    removal finds them even when storage cannot be listed."""
    import pyarrow as pa

    from engine import Catalog
    from engine.write.data_writer import write_data_files

    with Catalog.open(tmp_path / "wh") as cat:
        cat.create_namespace("db")
        t = cat.create_table("db.t", schema=pa.schema([("id", pa.int64())]))
        t.append(pa.table({"id": pa.array([1], pa.int64())}))
        failed = write_data_files(t.state, pa.table({"id": pa.array([2, 3], pa.int64())}), stage=t.stage_file)
        assert [p for p, _ in cat.log.staged_files(t.uuid)][-1] == failed[0].file_path
        import pyarrow.fs as pafs

        class NoListing:
            """The warehouse filesystem, except that listing a folder finds nothing."""

            def __init__(self, fs):
                self.fs = fs

            def get_file_info(self, what):
                return [] if isinstance(what, pafs.FileSelector) else self.fs.get_file_info(what)

            def __getattr__(self, name):
                return getattr(self.fs, name)

        monkeypatch.setattr(cat.io, "filesystem", NoListing(cat.io.filesystem))
        removed = t.remove_orphan_files(older_than_ms=2**62)
        assert removed == [failed[0].file_path]
        assert not os.path.exists(failed[0].file_path)
        assert t.scan().to_arrow().column("id").to_pylist() == [1]  # the committed file stays
        assert cat.log.staged_files(t.uuid) == []
