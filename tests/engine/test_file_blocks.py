"""File blocks (engine.read.file_blocks) and the cold plan that reads them: written at commit time, rebuilt from the log
when missing, stale or damaged (never trusted blindly), and a plan that skips commits by their partition
summaries gives exactly the plan of the full live set: same files, deletes, residuals, sequence numbers, counts."""

from __future__ import annotations

import datetime as dt
import marshal
import zlib

import pyarrow as pa
import pytest

from engine import Catalog
from engine.read.file_blocks import FORMAT, TABLE, decode_body, decode_head
from engine.read.file_index import FileIndex
from engine.model.data_file import DataFile
from engine.operations.append import append_events
from engine.operations.snapshot import new_snapshot_id
from engine.operations.commit import RetryPolicy, commit_streams

DAY = dt.datetime(2024, 3, 1)
FILTERS = [None, "category = 'b'", "category in ('a', 'c')",
           "ts >= '2024-03-03T00:00:00' and ts < '2024-03-04T00:00:00'", "id >= 1100 and id < 1105",
           "category is null", "category != 'a'", "ts < '2024-03-01T00:00:00'"]


def rows(ids, category, day_offset=0) -> pa.Table:
    ids = list(ids)
    return pa.table({"id": pa.array(ids, pa.int64()), "category": pa.array([category] * len(ids), pa.string()),
                     "ts": pa.array([DAY + dt.timedelta(days=day_offset, minutes=i) for i in ids],
                                    pa.timestamp("us"))})


@pytest.fixture
def warehouse(tmp_path):
    """A table with two specs, overwrites (removals), position and equality deletes, and a tag on an old snapshot."""
    path = tmp_path / "warehouse"
    cat = Catalog.open(path)
    cat.create_namespace("db")
    t = cat.create_table("db.t", schema=rows([], "a").schema, partition_by=["category"])
    for n, c in enumerate("abc"):
        t.append(rows(range(n * 100, n * 100 + 10), c))
    t.update_spec().add_field("ts", "day").commit()
    for n, c in enumerate("abc"):
        t.append(rows(range(1000 + n * 100, 1000 + n * 100 + 10), c, day_offset=n + 1))
    t.delete("category = 'a' and id < 5")  # rewrites a file: a removal and an add
    t.set_properties({"write.delete.mode": "merge-on-read"})
    t.delete("id = 1101")  # a position delete file
    t.delete_by_key(pa.table({"id": pa.array([202, 1203], pa.int64())}), ["id"])  # equality deletes
    t.append(rows(range(2000, 2010), "b", day_offset=9))
    cat.close()
    return path


def plan_key(scan) -> tuple:
    tasks = scan.plan_files()
    stats = scan.plan_stats()
    return (sorted((t.file.file_path, t.file, tuple(d.file_path for d in t.deletes), str(t.residual),
                    t.data_sequence_number) for t in tasks),
            (stats.data_files, stats.skipped_by_partition, stats.skipped_by_metrics, stats.planned,
             stats.delete_files, stats.skipped_delete_files))


def full_plans(path) -> dict:
    """Every (snapshot, filter) plan from the full live set (the live set cached first, so no commit is skipped)."""
    cat = Catalog.open(path)
    t = cat.load_table("db.t")
    out = {}
    for snap in t.state.snapshots:
        t.scan(snapshot_id=snap.snapshot_id).plan_files()  # caches the snapshot's whole live set
        for where in FILTERS:
            out[(snap.snapshot_id, where)] = plan_key(t.scan(where=where, snapshot_id=snap.snapshot_id))
    cat.close()
    return out


def cold_plans(path) -> tuple[dict, int]:
    """The same plans, each from a freshly opened catalog (the cold path); and the blocks rebuilt on the way."""
    out, rebuilt = {}, 0
    cat = Catalog.open(path)
    snapshots = cat.load_table("db.t").state.snapshots
    cat.close()
    for snap in snapshots:
        for where in FILTERS:
            cat = Catalog.open(path)
            out[(snap.snapshot_id, where)] = plan_key(cat.load_table("db.t").scan(where=where,
                                                                                  snapshot_id=snap.snapshot_id))
            rebuilt += FileIndex.of(cat.store).rebuilt_blocks
            cat.close()
    return out, rebuilt


def block_rows(path) -> dict:
    cat = Catalog.open(path)
    found = {p: (f, h, b)
             for p, f, h, b in cat.store.log.db.execute(f"SELECT position, format, head, body FROM {TABLE}")}
    cat.close()
    return found


def test_blocks_are_written_at_commit_time_and_cold_plans_match_the_full_live_set(warehouse):
    cat = Catalog.open(warehouse)
    state = cat.load_table("db.t").state
    cat.close()
    stored = block_rows(warehouse)
    assert set(stored) == {s.log_position for s in state.snapshots}
    assert all(f == FORMAT for f, _, _ in stored.values())
    cold, rebuilt = cold_plans(warehouse)
    assert rebuilt == 0  # every block came from the commit that wrote the snapshot
    assert cold == full_plans(warehouse)
    # and the plans are not empty or trivial: deletes attach, filters prune
    assert any(deletes for files, _ in cold.values() for (_, _, deletes, _, _) in files)
    assert any(stats[1] > 0 for _, stats in cold.values())


def test_cold_filtered_plan_skips_commits_by_their_partition_summaries(warehouse):
    cat = Catalog.open(warehouse)
    t = cat.load_table("db.t")
    index = FileIndex.of(cat.store)
    state = t.state
    decoded = index.decoded_parts
    scan = t.scan(where="ts >= '2024-03-10T00:00:00'")
    assert sorted(scan.to_arrow().column("id").to_pylist()) == list(range(2000, 2010))
    # only the commits that add delete files and the last append were decoded, and only the files that might match
    assert index.decoded_parts - decoded < sum(1 for _ in state.snapshots)
    assert scan.plan_stats().skipped_commits > 0
    cat.close()


def test_missing_blocks_are_rebuilt_and_stored_again(warehouse):
    expected = full_plans(warehouse)
    cat = Catalog.open(warehouse)
    FileIndex.of(cat.store).blocks.drop()
    cat.close()
    assert block_rows(warehouse) == {}
    cold, rebuilt = cold_plans(warehouse)
    assert rebuilt > 0 and cold == expected
    assert len(block_rows(warehouse)) > 0  # stored again: the next cold plan reads them
    _, rebuilt_again = cold_plans(warehouse)
    assert rebuilt_again == 0


@pytest.mark.parametrize("damage", ["body_byte", "head_byte", "format", "shape_with_good_checksum"])
def test_damaged_or_stale_blocks_are_never_used(warehouse, damage):
    expected = full_plans(warehouse)
    cat = Catalog.open(warehouse)
    db = cat.store.log.db
    rows_ = db.execute(f"SELECT position, head, body FROM {TABLE}").fetchall()
    with cat.store.log.transaction() as conn:
        for position, head, body in rows_:
            if damage == "body_byte":
                bad = bytearray(body)
                bad[len(bad) // 2] ^= 0xFF
                conn.execute(f"UPDATE {TABLE} SET body = ? WHERE position = ?", [bytes(bad), position])
            elif damage == "head_byte":
                bad = bytearray(head)
                bad[-1] ^= 0x01
                conn.execute(f"UPDATE {TABLE} SET head = ? WHERE position = ?", [bytes(bad), position])
            elif damage == "format":
                conn.execute(f"UPDATE {TABLE} SET format = ? WHERE position = ?", [FORMAT + 1, position])
            else:  # a checksum that matches bytes of the wrong shape
                bad = marshal.dumps(("not", "a", "body"))
                conn.execute(f"UPDATE {TABLE} SET body = ?, body_crc = ? WHERE position = ?",
                             [bad, zlib.crc32(bad), position])
    cat.close()
    cold, rebuilt = cold_plans(warehouse)
    assert rebuilt > 0
    assert cold == expected
    # the rebuilt blocks replaced the damaged ones
    for position, (fmt, head, body) in block_rows(warehouse).items():
        assert fmt == FORMAT
        decode_body(body, zlib.crc32(body), decode_head(head, zlib.crc32(head)))


def test_a_path_added_twice_falls_back_to_the_full_replay(tmp_path):
    """The same path added by two commits (no removal between): the newer add wins, whichever commits a filter
    would skip; the cold plan must not keep the older one."""
    cat = Catalog.open(tmp_path / "w", project=False)
    cat.create_namespace("db")
    t = cat.create_table("db.t", schema=rows([], "a").schema, partition_by=["category"])

    def add(category: str) -> None:
        f = DataFile(file_path=f"{t.location}/data/shared.parquet", spec_id=0, partition=(category,),
                     record_count=1, file_size_in_bytes=10)
        sid = new_snapshot_id()
        commit_streams(cat.store, lambda ctx: [(t.uuid, cat.store.table(t.uuid).version,
                                                append_events(cat.store.table(t.uuid), [f], ctx, snapshot_id=sid))],
                       policy=RetryPolicy())

    add("a")
    add("b")
    cat.close()
    for where, expected in [("category = 'a'", []), ("category = 'b'", [("b",)]), (None, [("b",)])]:
        cold = Catalog.open(tmp_path / "w", project=False)
        scan = cold.load_table("db.t").scan(where=where)
        assert [task.partition for task in scan.plan_files()] == expected
        assert scan.plan_stats().data_files == 1
        cold.close()


def test_explicit_data_sequence_numbers_in_parts_are_kept(tmp_path):
    """A part carrying "data-sequence-number" (interface 1) gives the file that data sequence number."""
    from engine.read.file_blocks import encode_block
    from engine.model.types import StructType

    part = ('{"change":"add","data-sequence-number":3,"file":{"content":0,"file-format":"PARQUET",'
            '"file-path":"/x/a.parquet","file-size-in-bytes":10,"partition":[],"record-count":1,"spec-id":0}}')
    head, body = encode_block([part], {0: StructType(fields=())})
    decoded = decode_body(body, zlib.crc32(body), decode_head(head, zlib.crc32(head)))
    assert decoded.sequence_numbers == (3,)


def heads_of(path) -> list:
    cat = Catalog.open(path, project=False)
    state = cat.load_table("db.t").state
    rows = cat.store.log.db.execute(f"SELECT position, head, head_crc FROM {TABLE}").fetchall()
    cat.close()
    by_position = {p: decode_head(h, crc) for p, h, crc in rows}
    return [by_position[s.log_position] for s in state.snapshots if s.log_position in by_position]


def test_commits_that_add_new_paths_say_so_and_a_re_added_path_does_not(tmp_path):
    cat = Catalog.open(tmp_path / "w", project=False)
    cat.create_namespace("db")
    t = cat.create_table("db.t", schema=rows([], "a").schema, partition_by=["category"])
    t.append(rows(range(3), "a"))
    t.append(rows(range(3, 6), "b"))
    f = t.scan().plan_files()[0].file
    t.delete_files([f.file_path])
    t.append_files([f.file_path])  # the same path again: not new to the log
    cat.close()
    assert [h.fresh for h in heads_of(tmp_path / "w")] == [True, True, True, False]


def test_a_log_whose_path_registry_has_a_gap_stops_claiming_fresh_paths(tmp_path):
    cat = Catalog.open(tmp_path / "w", project=False)
    cat.create_namespace("db")
    t = cat.create_table("db.t", schema=rows([], "a").schema, partition_by=["category"])
    t.append(rows(range(3), "a"))
    with cat.store.log.transaction() as conn:  # as if a commit had been made without registering its paths
        conn.execute("UPDATE file_block_paths_through SET position = position - 1")
    t.append(rows(range(3, 6), "b"))
    t.append(rows(range(6, 9), "c"))
    cat.close()
    assert [h.fresh for h in heads_of(tmp_path / "w")] == [True, False, False]
    cold = Catalog.open(tmp_path / "w", project=False)
    assert cold.load_table("db.t").scan(where="category = 'c'").count() == 3
    cold.close()


def test_planning_leaves_the_garbage_collector_as_it_found_it(warehouse):
    import gc

    cat = Catalog.open(warehouse, project=False)
    t = cat.load_table("db.t")
    try:
        assert gc.isenabled()
        t.scan(where="category = 'b'").plan_files()
        assert gc.isenabled()
        gc.freeze()  # an application that froze its objects (before a fork, say) keeps them frozen
        frozen = gc.get_freeze_count()
        FileIndex.of(cat.store).clear()
        t.scan().plan_files()
        # still frozen (frozen objects freed meanwhile leave the count), and nothing planned was frozen with them
        assert 0 < gc.get_freeze_count() <= frozen and gc.isenabled()
        gc.unfreeze()
        gc.disable()  # and one that turned the collector off keeps it off
        FileIndex.of(cat.store).clear()
        t.scan().plan_files()
        assert not gc.isenabled()
    finally:
        gc.unfreeze()
        gc.enable()
        cat.close()


def test_blocks_of_file_changes_equal_blocks_of_the_parts_they_encode_to(warehouse):
    """A commit encodes its block from its FileChange values; a rebuild from the log's parts gives the same block."""
    from engine.state.events import decode_file_change
    from engine.read.file_blocks import encode_block, encode_changes

    cat = Catalog.open(warehouse, project=False)
    state = cat.load_table("db.t").state
    types = {s.spec_id: s.partition_type(state.schema) for s in state.specs}
    compared = 0
    for snap in state.snapshots:
        parts = cat.store.log.read_parts(snap.log_position)
        changes = [decode_file_change(p, types) for p in parts]
        h1, b1 = encode_block(parts, types)
        h2, b2 = encode_changes(changes, types)
        head1, head2 = decode_head(h1, zlib.crc32(h1)), decode_head(h2, zlib.crc32(h2))
        assert head1 == head2
        assert decode_body(b1, zlib.crc32(b1), head1) == decode_body(b2, zlib.crc32(b2), head2)
        compared += len(parts)
    assert compared > 10
    cat.close()


def test_the_kept_blocks_stay_within_their_bound_and_their_count_stays_true(warehouse, monkeypatch):
    """The index keeps decoded block bodies up to MAX_CACHED_FILES paths, counting them as they come and go (a
    trim never walks the kept blocks to count them); plans stay the same under a bound that forces trimming."""
    import engine.read.file_index as file_index

    expected = full_plans(warehouse)
    monkeypatch.setattr(file_index, "MAX_CACHED_FILES", 3)
    cat = Catalog.open(warehouse)
    index = FileIndex.of(cat.store)
    t = cat.load_table("db.t")
    for snap in t.state.snapshots:
        for where in FILTERS:
            assert plan_key(t.scan(where=where, snapshot_id=snap.snapshot_id)) == expected[(snap.snapshot_id, where)]
            held = sum(len(body.paths) for body in index._bodies.values())
            assert index._held_paths == held
            assert held <= 3 or len(index._bodies) == 1
    index.clear()
    assert index._held_paths == 0
    head = t.state.current_snapshot.snapshot_id
    assert plan_key(t.scan(snapshot_id=head)) == expected[(head, None)]
    assert index._held_paths == sum(len(body.paths) for body in index._bodies.values())
    cat.close()
