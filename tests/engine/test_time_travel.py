"""Time travel on the log: tables and the catalog as they were after a version, a position or a moment, the log's
entries, and the files that changed between two versions (engine/state/time_travel.py)."""

from __future__ import annotations

import datetime as dt
import json
import os

import pyarrow as pa
import pytest

from engine import Catalog
from engine.errors import (
    CorruptFileError,
    NamespaceNotFound,
    NotFound,
    TableNotFound,
    ValidationError,
)
from engine.state.events import PropertiesSet
from engine.operations.commit import RetryPolicy, commit_streams
from engine.state.table_state import fold
from engine.state.store import decoded
from engine.state.time_travel import (
    Changes,
    HistoricalTable,
    LogEntry,
    catalog_as_of,
    catalog_log,
    table_changes,
    table_log,
)

SCHEMA = pa.schema([pa.field("id", pa.int64()), pa.field("name", pa.string())])


def rows(n: int, start: int = 0) -> pa.Table:
    return pa.table({"id": pa.array(range(start, start + n), pa.int64()),
                     "name": pa.array([f"n{i}" for i in range(start, start + n)])})


def ids(table: pa.Table) -> list[int]:
    return sorted(table.column("id").to_pylist())


@pytest.fixture
def catalog(tmp_path):
    cat = Catalog.open(tmp_path / "warehouse")
    cat.create_namespace("db")
    yield cat
    cat.close()


@pytest.fixture
def history(catalog):
    """A table whose versions hold: 1 create, 2 append 0..4, 3 set a property, 4-5 add column ``x`` (one commit),
    6 append 5..7 with x, 7 remove the property."""
    t = catalog.create_table("db.t", SCHEMA)
    t.append(rows(5))
    t.set_properties(owner="ann")
    with t.update_schema() as u:
        u.add_column("x", pa.int32())
    t.append(pa.table({"id": pa.array([5, 6, 7], pa.int64()), "name": ["n5", "n6", "n7"],
                       "x": pa.array([1, 2, 3], pa.int32())}))
    t.remove_properties("owner")
    assert catalog.log.head(t.uuid) == 7
    return t


def columns(h: HistoricalTable) -> list[str]:
    return [f.name for f in h.schema().columns]


# ---------------------------------------------------------------- as_of(version=)


def test_as_of_version_shows_schema_properties_and_rows_at_every_version(history):
    t = history
    expected = {
        1: (["id", "name"], {}, [], 0),
        2: (["id", "name"], {}, [0, 1, 2, 3, 4], 1),
        3: (["id", "name"], {"owner": "ann"}, [0, 1, 2, 3, 4], 1),
        5: (["id", "name", "x"], {"owner": "ann"}, [0, 1, 2, 3, 4], 1),
        6: (["id", "name", "x"], {"owner": "ann"}, list(range(8)), 2),
        7: (["id", "name", "x"], {}, list(range(8)), 2),
    }
    for version, (cols, props, row_ids, n_snapshots) in expected.items():
        h = t.as_of(version=version)
        assert isinstance(h, HistoricalTable)
        assert h.version == version
        assert columns(h) == cols, version
        assert {k: v for k, v in h.properties.items() if k == "owner"} == props, version
        assert len(h.snapshots()) == n_snapshots
        assert len(h.history()) == n_snapshots
        assert ids(h.scan().to_arrow()) == row_ids, version
        assert h.scan().to_arrow().column_names == cols
    # version 3 (a property change, no snapshot) reads the snapshot of version 2
    assert t.as_of(version=3).current_snapshot() == t.as_of(version=2).current_snapshot()
    # version 4 is inside the schema commit: the schema was added, not yet current
    mid = t.as_of(version=4)
    assert columns(mid) == ["id", "name"] and len(mid.state.schemas) == 2


def test_as_of_scan_filters_and_projects(history):
    h = history.as_of(version=6)
    got = h.scan(where="id >= 3", columns=["id", "x"]).to_arrow()
    assert got.column_names == ["id", "x"]
    assert sorted(zip(got.column("id").to_pylist(), got.column("x").to_pylist())) == [
        (3, None), (4, None), (5, 1), (6, 2), (7, 3)]
    first = h.snapshots()[0].snapshot_id
    assert ids(h.scan(snapshot_id=first).to_arrow()) == [0, 1, 2, 3, 4]


def test_as_of_state_matches_a_full_fold_and_uses_checkpoints(catalog):
    t = catalog.create_table("db.many", SCHEMA)
    for i in range(25):  # 10 events per commit: 251 versions
        t.commit_events(lambda base, ctx, i=i: [PropertiesSet(updates={f"k{j % 3}": f"{i}-{j}"}) for j in range(10)])
    head = catalog.log.head(t.uuid)
    assert head == 251
    assert catalog.log.checkpoint_at_or_before(t.uuid, head) is not None  # loads at the head wrote some
    fresh = Catalog.open(catalog.warehouse)
    try:
        table = fresh.load_table("db.many")
        for version in (1, 99, 100, 101, 155, 200, 251):
            state = table.as_of(version=version).state
            full = fold(decoded(fresh.log.read_stream(t.uuid, up_to_version=version)))
            assert state == full, version
    finally:
        fresh.close()


def test_as_of_version_errors(history):
    t = history
    with pytest.raises(NotFound, match="Cannot travel to version 8 of table db.t: its log ends at version 7"):
        t.as_of(version=8)
    with pytest.raises(ValidationError, match="versions start at 1"):
        t.as_of(version=0)
    with pytest.raises(ValidationError, match="must be a 64-bit integer"):
        t.as_of(version="3")
    with pytest.raises(ValidationError, match="must be a 64-bit integer"):
        t.as_of(version=True)
    with pytest.raises(ValidationError, match="not both"):
        t.as_of(version=2, time=0)
    assert t.as_of().version == 7  # neither: the head


def test_historical_table_is_read_only(history):
    h = history.as_of(version=3)
    for call in (lambda: h.append(rows(1)), lambda: h.set_properties(a="b"), lambda: h.update_schema(),
                 lambda: h.delete("id = 1"), lambda: h.expire_snapshots(), lambda: h.manage_snapshots(),
                 lambda: h.publish(), lambda: h.commit_events(lambda b, c: [])):
        with pytest.raises(ValidationError, match="read-only"):
            call()
    assert history.catalog.log.head(history.uuid) == 7


# ---------------------------------------------------------------- as_of(time=)


def test_as_of_time_takes_the_last_version_committed_by_then(history):
    t = history
    entries = table_log(t)
    times = {e.version: e.time_ms for e in entries}
    for version in (1, 2, 3, 5, 6, 7):
        assert t.as_of(time=times[version]).version == version
    # a time between two commits gives the earlier one
    if times[3] + 1 < times[5]:
        assert t.as_of(time=times[3] + 1).version == 3
    # datetimes (aware, and naive read as UTC)
    when = dt.datetime.fromtimestamp(times[6] / 1000, tz=dt.timezone.utc)
    assert t.as_of(time=when).version >= 6
    assert t.as_of(time=when.replace(tzinfo=None)).version == t.as_of(time=when).version
    assert t.as_of(time=times[7] + 10_000).version == 7
    with pytest.raises(NotFound, match="did not exist yet"):
        t.as_of(time=times[1] - 1)
    with pytest.raises(ValidationError, match="milliseconds since the epoch .* or a datetime"):
        t.as_of(time="yesterday")


# ---------------------------------------------------------------- expiry


def _expire_all_but_last(t):
    return t.expire_snapshots(older_than_ms=t.current_snapshot().timestamp_ms + 1, retain_last=1)


def test_as_of_reads_snapshots_expired_since(catalog):
    t = catalog.create_table("db.e", SCHEMA)
    t.append(rows(3))
    first = t.current_snapshot().snapshot_id
    t.append(rows(2, start=3))
    _expire_all_but_last(t)  # the first file is still live: only metadata goes
    assert [s.snapshot_id for s in t.snapshots()] != [] and t.snapshot_by_id(first) is None
    old = t.as_of(version=2)
    assert [s.snapshot_id for s in old.snapshots()] == [first]
    assert ids(old.scan().to_arrow()) == [0, 1, 2]
    now = t.as_of(version=catalog.log.head(t.uuid))
    assert ids(now.scan().to_arrow()) == [0, 1, 2, 3, 4]
    assert now.snapshot_by_id(first) is None
    assert ids(now.scan(snapshot_id=first).to_arrow()) == [0, 1, 2]  # the log still knows it


def test_as_of_scan_of_data_deleted_by_expiry_names_the_file(catalog):
    t = catalog.create_table("db.gone", SCHEMA)
    t.append(rows(3))
    old_files = [f.file_path for f in t.scan().plan_files()]
    t.overwrite(rows(2, start=10))
    _expire_all_but_last(t)
    assert not any(os.path.exists(p) for p in old_files)  # expiry deleted the replaced file
    old = t.as_of(version=2)
    assert [f.file_path for f in old.scan().plan_files()] == old_files  # planning still works from the log
    with pytest.raises(CorruptFileError) as caught:
        old.scan().to_arrow()
    assert caught.value.path == old_files[0]
    assert ids(t.scan().to_arrow()) == [10, 11]


# ---------------------------------------------------------------- the log


def test_table_log_lists_every_event_with_commit_messages(history, catalog):
    t = history
    two = [PropertiesSet(updates={"a": "1"}), PropertiesSet(updates={"b": "2"})]
    commit_streams(catalog.store, lambda ctx: [(t.uuid, catalog.log.head(t.uuid), two)],
                   policy=RetryPolicy(), actor="etl", message="nightly load")
    entries = table_log(t)
    assert [e.version for e in entries] == list(range(1, 10))
    assert [e.type for e in entries] == ["create-table", "add-snapshot", "set-properties", "add-schema",
                                         "set-current-schema", "add-snapshot", "remove-properties",
                                         "set-properties", "set-properties"]
    assert all(isinstance(e, LogEntry) and e.stream == t.uuid for e in entries)
    assert entries[2].payload == {"updates": {"owner": "ann"}}
    assert [(e.actor, e.message) for e in entries[-2:]] == [("etl", "nightly load")] * 2
    assert entries[-1].commit_id == entries[-2].commit_id != entries[-3].commit_id
    assert entries[3].commit_id == entries[4].commit_id
    assert [e.position for e in entries] == sorted(e.position for e in entries)
    assert t.log() == entries  # the Table entry point
    assert t.as_of(version=3).log() == entries[:3]


def test_catalog_log_since_a_position(history, catalog):
    everything = catalog_log(catalog, 0)
    assert [e.position for e in everything] == list(range(1, len(everything) + 1))
    assert [e.type for e in everything[:3]] == ["create-namespace", "register-table", "create-table"]
    assert everything[1].payload["name"] == "t" and everything[1].stream == "catalog"
    assert catalog_log(catalog, 3) == everything[3:]
    assert catalog_log(catalog, len(everything)) == []
    with pytest.raises(ValidationError):
        catalog_log(catalog, -1)


# ---------------------------------------------------------------- the catalog in the past


def test_catalog_as_of_position_and_time(catalog):
    a = catalog.create_table("db.a", SCHEMA)
    a.append(rows(2))
    after_a = catalog_log(catalog, 0)[-1].position
    catalog.create_namespace("other")
    b = catalog.create_table("other.b", SCHEMA)
    a.append(rows(2, start=2))
    end = catalog_log(catalog, 0)[-1]

    empty = catalog_as_of(catalog, position=0)
    assert empty.list_namespaces() == []
    first = catalog_as_of(catalog, position=1)
    assert first.list_namespaces() == [("db",)] and first.list_tables("db") == []
    with pytest.raises(TableNotFound):
        first.load_table("db.a")

    then = catalog.as_of(position=after_a)
    assert then.list_namespaces() == [("db",)]
    assert then.list_tables("db") == [("db", "a")]
    assert not then.table_exists("other.b")
    with pytest.raises(NamespaceNotFound):
        then.list_tables("other")
    old_a = then.load_table("db.a")
    assert old_a.version == 2 and ids(old_a.scan().to_arrow()) == [0, 1]

    latest = catalog_as_of(catalog, time=end.time_ms)
    assert latest.position == end.position
    assert latest.list_tables("other") == [("other", "b")]
    assert latest.load_table("other.b").version == catalog.log.head(b.uuid)
    assert ids(latest.load_table("db.a").scan().to_arrow()) == [0, 1, 2, 3]
    assert [e.position for e in then.log()] == list(range(1, after_a + 1))

    with pytest.raises(ValidationError, match="read-only"):
        then.create_table("db.c", SCHEMA)
    with pytest.raises(NotFound, match=f"the log ends at position {end.position}"):
        catalog_as_of(catalog, position=end.position + 1)
    with pytest.raises(ValidationError):
        catalog_as_of(catalog)
    with pytest.raises(ValidationError):
        catalog_as_of(catalog, position=1, time=end.time_ms)


# ---------------------------------------------------------------- changes


def test_table_changes_are_net_between_versions(catalog):
    t = catalog.create_table("db.c", SCHEMA)
    t.append(rows(2))  # v2
    f1 = {f.file_path for f in t.scan().plan_files()}
    t.append(rows(2, start=2))  # v3
    f2 = {f.file_path for f in t.scan().plan_files()} - f1
    t.delete("id >= 2")  # v4: drops f2 whole
    t.append(rows(1, start=9))  # v5
    f3 = {f.file_path for f in t.scan().plan_files()} - f1

    all_changes = table_changes(t, 0)
    assert isinstance(all_changes, Changes)
    assert {f.file_path for f in all_changes.added} == f1 | f3 and all_changes.removed == ()
    middle = t.changes(2, 3)
    assert {f.file_path for f in middle.added} == f2 and middle.removed == ()
    gone = t.changes(3, 4)
    assert gone.added == () and {f.file_path for f in gone.removed} == f2
    net = t.changes(2, 5)  # f2 came and went in between: in neither list
    assert {f.file_path for f in net.added} == f3 and net.removed == ()
    assert [f.record_count for f in net.added_data_files] == [1]
    assert t.changes(3, 3) == Changes()
    with pytest.raises(ValidationError, match="from version 4 is after to version 2"):
        t.changes(4, 2)
    with pytest.raises(NotFound, match="its log ends at version 5"):
        t.changes(1, 6)


# ---------------------------------------------------------------- publish_view


def test_publish_view_writes_a_readable_iceberg_tree_for_the_past(history, tmp_path):
    from pyiceberg.table import StaticTable

    target = tmp_path / "view"
    h = history.as_of(version=3)
    metadata = h.publish_view(target)
    assert metadata == f"{target}/metadata/v3.metadata.json"
    written = sorted(os.listdir(target / "metadata"))
    assert "version-hint.text" in written and "v3.metadata.json" in written
    assert (target / "metadata" / "version-hint.text").read_text() == "3"
    meta = json.loads((target / "metadata" / "v3.metadata.json").read_text())
    assert meta["location"] == str(target)
    assert meta["properties"]["owner"] == "ann"
    snapshot = meta["snapshots"][0]
    assert snapshot["manifest-list"].startswith(f"{target}/metadata/")
    # nothing was written under the table's own location for this view, and the live table is unchanged
    assert not any(p.startswith(str(target)) for p in [history.location])
    static = StaticTable.from_metadata(metadata)
    assert sorted(static.scan().to_arrow().column("id").to_pylist()) == [0, 1, 2, 3, 4]
    assert [f.name for f in static.schema().fields] == ["id", "name"]


def test_bench_as_of_runs_on_a_small_table(tmp_path):
    from tools.bench_time_travel import bench_as_of

    result = bench_as_of(str(tmp_path), events=3000, samples=3)
    assert result["events"] == 3002  # create, 3 commits of 1,000, one append
    assert result["checkpoints"] >= 30
    assert set(result["as_of_ms"]) == {"p50", "p95", "max"}
    assert result["scan_past_rows"] == 100


def test_catalog_log_is_callable_and_still_the_storage_log(tmp_path):
    import pyarrow as pa

    from engine import Catalog

    with Catalog.open(tmp_path / "wh") as cat:
        cat.create_namespace("db")
        t = cat.create_table("db.t", schema=pa.schema([("id", pa.int64())]))
        t.append(pa.table({"id": pa.array([1], pa.int64())}))
        entries = cat.log(since=0)
        assert [e.type for e in entries] == ["create-namespace", "register-table", "create-table", "add-snapshot"]
        assert [e.type for e in cat.log(since=entries[1].position)] == ["create-table", "add-snapshot"]
        assert cat.log.head(t.uuid) == 2  # the storage API is still there


def test_publish_view_writes_only_new_files(catalog, history, tmp_path):
    """A view goes into a folder no table of the catalog owns, which may hold anything: another table's metadata
    (a table outside the catalog, a view of another state) is never overwritten, and nothing is written then."""
    folder = tmp_path / "folder"
    other = catalog.create_table("db.other", SCHEMA)
    other.append(rows(2))
    other.as_of(version=2).publish_view(folder)  # stands for a table outside the catalog: v1, v2, a hint
    before = {p: p.read_bytes() for p in folder.rglob("*") if p.is_file()}
    with pytest.raises(ValidationError, match=r"v1\.metadata\.json exists with other content"):
        history.as_of(version=3).publish_view(folder)
    with pytest.raises(ValidationError, match=r"version-hint\.text exists with other content"):
        other.as_of(version=1).publish_view(folder)  # another state of that table: its hint is in the way
    assert {p: p.read_bytes() for p in folder.rglob("*") if p.is_file()} == before
    # the same view again: every file is already there with its bytes
    assert other.as_of(version=2).publish_view(folder) == f"{folder}/metadata/v2.metadata.json"
    assert {p: p.read_bytes() for p in folder.rglob("*") if p.is_file()} == before
