"""Scan planning: partition pruning through each file's own spec, metrics pruning, residuals, the counts of
skipped files, snapshot selection (id, timestamp, ref) and the file index that keeps planning incremental."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pytest

from engine import Catalog
from engine.errors import NotFound, ValidationError
from engine.state.events import decode_file_change
from engine.read.file_index import FileIndex
from engine.model.expressions import AlwaysTrue
from engine.read.scan import Scan

DAY = dt.datetime(2024, 3, 1)


def rows(ids, category, day_offset=0) -> pa.Table:
    ids = list(ids)
    return pa.table({"id": pa.array(ids, pa.int64()), "category": pa.array([category] * len(ids), pa.string()),
                     "ts": pa.array([DAY + dt.timedelta(days=day_offset, minutes=i) for i in ids],
                                    pa.timestamp("us"))})


@pytest.fixture
def catalog(tmp_path):
    cat = Catalog.open(tmp_path / "warehouse")
    cat.create_namespace("db")
    yield cat
    cat.close()


@pytest.fixture
def table(catalog):
    """Six data files: categories a, b, c (identity) under spec 0, then three more under spec 1 (+ day(ts))."""
    t = catalog.create_table("db.t", schema=rows([], "a").schema, partition_by=["category"])
    for n, cat in enumerate("abc"):
        t.append(rows(range(n * 100, n * 100 + 10), cat))
    t.update_spec().add_field("ts", "day").commit()
    for n, cat in enumerate("abc"):
        t.append(rows(range(1000 + n * 100, 1000 + n * 100 + 10), cat, day_offset=n + 1))
    return t


def test_partition_pruning_counts_skipped_files(table):
    scan = table.scan(where="category = 'b'")
    tasks = scan.plan_files()
    stats = scan.plan_stats()
    assert stats.data_files == 6
    assert stats.skipped_by_partition == 4
    assert stats.skipped_by_metrics == 0
    assert stats.planned == len(tasks) == 2 and stats.skipped == 4
    assert {t.partition[0] for t in tasks} == {"b"}
    # every row of a category partition matches: the residual is settled by the partition
    assert all(isinstance(t.residual, AlwaysTrue) for t in tasks)
    assert scan.count() == 20


def test_pruning_through_each_files_own_spec(table):
    # day(ts) prunes the files of spec 1; the files of spec 0 (no day field) are pruned by their ts bounds
    scan = table.scan(where="ts >= '2024-03-03T00:00:00' and ts < '2024-03-04T00:00:00'")
    tasks = scan.plan_files()
    stats = scan.plan_stats()
    assert [(t.spec_id, t.partition) for t in tasks] == [(1, ("b", (DAY.date() - dt.date(1970, 1, 1)).days + 2))]
    assert stats.skipped_by_partition == 2  # spec 1: categories a and c, other days
    assert stats.skipped_by_metrics == 3  # spec 0: all on 2024-03-01, by the ts bounds
    assert sorted(scan.to_arrow().column("id").to_pylist()) == list(range(1100, 1110))


def test_metrics_pruning_and_residuals(table):
    scan = table.scan(where="id >= 105 and id < 200 and category = 'b'")
    tasks = scan.plan_files()
    stats = scan.plan_stats()
    assert stats.skipped_by_partition == 4 and stats.skipped_by_metrics == 1
    [task] = tasks
    assert task.partition == ("b",)
    assert "id" in str(task.residual) and "category" not in str(task.residual)
    assert sorted(scan.to_arrow().column("id").to_pylist()) == list(range(105, 110))
    assert scan.count() == 5


def test_filter_unknown_column_and_no_filter(table):
    with pytest.raises(ValidationError, match="nope"):
        table.scan(where="nope = 1")
    scan = table.scan()
    assert len(scan.plan_files()) == 6 and scan.plan_stats().skipped == 0
    assert all(t.residual is None for t in scan.plan_files())
    assert scan.count() == 60


def test_snapshot_by_id_timestamp_and_ref(table, catalog):
    snaps = table.state.snapshots
    first, third = snaps[0], snaps[2]
    assert table.scan(snapshot_id=first.snapshot_id).count() == 10
    store = catalog.store
    by_time = Scan(store, table.state, as_of_timestamp_ms=third.timestamp_ms)
    assert by_time.snapshot.snapshot_id == max((s for s in snaps if s.timestamp_ms <= third.timestamp_ms),
                                               key=lambda s: s.sequence_number).snapshot_id
    with pytest.raises(NotFound):
        Scan(store, table.state, as_of_timestamp_ms=first.timestamp_ms - 1)
    table.manage_snapshots().create_tag(first.snapshot_id, "v1").commit()
    assert Scan(store, table.state, ref="v1").count() == 10
    assert Scan(store, table.state, ref="main").count() == 60
    with pytest.raises(NotFound, match="nope"):
        Scan(store, table.state, ref="nope")
    with pytest.raises(ValidationError, match="one of"):
        Scan(store, table.state, ref="main", snapshot_id=first.snapshot_id)


def reference_live(store, state, snapshot_id) -> list:
    """The live files of a snapshot straight from the log with the events module's decoder, newest add winning."""
    types = {s.spec_id: s.partition_type(state.schema) for s in state.specs}
    live: dict = {}
    removed: set = set()
    for snap in state.ancestors(snapshot_id, through_expired=True):
        for text in store.log.read_parts(snap.log_position):
            change = decode_file_change(text, types)
            path = change.file.file_path
            if not change.added:
                removed.add(path)
            elif path not in removed and path not in live:
                live[path] = (path, change.file, snap.sequence_number, snap.snapshot_id)
    return sorted(live.values(), key=lambda x: x[0])


def test_index_matches_the_log_and_is_incremental(table, catalog):
    store = catalog.store
    table.delete_by_key(pa.table({"id": pa.array([1, 101], pa.int64())}), ["id"])  # delete files
    state = table.state
    index = FileIndex.of(store)
    assert FileIndex.of(store) is index
    for snap in state.snapshots:
        got = sorted(((e.file.file_path, e.file, e.data_sequence_number, e.snapshot_id)
                      for e in index.live_entries(state, snap.snapshot_id)), key=lambda x: x[0])
        # the index decodes the log's JSON itself: the same values as the events module's decoder
        assert got == reference_live(store, state, snap.snapshot_id)
    assert any(e.file.content != 0 for e in index.live_entries(state, state.current_snapshot.snapshot_id))
    assert table.scan().count() == 58
    decoded = index.decoded_parts
    table.append(rows(range(5000, 5003), "a", day_offset=9))
    assert table.scan().count() == 61
    assert index.decoded_parts == decoded + 1  # only the new commit's part was decoded
    table.delete("category = 'a'")
    assert table.scan().count() == 39
    assert table.scan(where="category = 'a'").plan_files() == []
    # a fresh index gives the same answer (it is derived data)
    index.clear()
    assert table.scan().count() == 39


def test_middle_snapshot_after_later_commits(table):
    third = table.state.snapshots[2]
    assert table.scan(snapshot_id=third.snapshot_id).count() == 30
    assert table.scan(snapshot_id=third.snapshot_id, where="category = 'c'").plan_stats().skipped_by_partition == 2


@pytest.mark.parametrize("spelling", ["file:{p}", "file://{p}", "hdfs://namenode:8020{p}"])
def test_position_delete_matches_its_data_file_spelled_differently(catalog, tmp_path, spelling):
    import pyarrow.parquet as pq

    from engine.model.data_file import DataFile, DataFileContent
    from engine.operations.snapshot import new_snapshot_id
    from engine.operations.snapshot import snapshot_events
    from engine.model.paths import normalize_path
    from engine.read.raw_file import FIELD_ID
    from engine.read.reader import DELETE_FILE_PATH_ID, DELETE_POS_ID

    t = catalog.create_table("db.u", schema=rows([], "a").schema)
    t.append(rows(range(5), "a"))
    [task] = t.scan().plan_files()
    data_path = normalize_path(task.file_path)
    assert data_path.startswith("/")
    delete_path = str(tmp_path / "pos-deletes.parquet")
    schema = pa.schema([pa.field("file_path", pa.string(), nullable=False,
                                 metadata={FIELD_ID: str(DELETE_FILE_PATH_ID).encode()}),
                        pa.field("pos", pa.int64(), nullable=False, metadata={FIELD_ID: str(DELETE_POS_ID).encode()})])
    pq.write_table(pa.table({"file_path": [spelling.format(p=data_path)] * 2, "pos": [1, 3]}, schema=schema),
                   delete_path)
    f = DataFile(file_path=delete_path, content=DataFileContent.POSITION_DELETES, spec_id=0, partition=(),
                 record_count=2, file_size_in_bytes=1)
    sid = new_snapshot_id()
    t.commit_events(lambda base, ctx: snapshot_events(base, ctx, operation="delete", snapshot_id=sid, added=[f]))
    assert sorted(t.scan().to_arrow().column("id").to_pylist()) == [0, 2, 4]
    assert t.scan().count() == 3


def test_normalize_path_spellings():
    from engine.model.paths import normalize_path

    spellings = ["file:/x/y", "file:///x/y", "/x/y", "file://host/x/y", "hdfs://nn:8020/x/y", "viewfs://c/x/y"]
    assert {normalize_path(p) for p in spellings} == {"/x/y"}
    assert normalize_path("s3a://b/k") == normalize_path("s3://b/k") == "s3://b/k"
    assert normalize_path("gs://b/k") == "gs://b/k"
