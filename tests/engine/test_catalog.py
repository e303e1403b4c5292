"""The Python API end to end on real files: create, append, scan, errors that commit nothing, rebuild, verify."""

from __future__ import annotations

import datetime
import decimal
import json
import os
import sqlite3

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from engine import Catalog
from engine.errors import (
    AlreadyExists,
    CommitConflict,
    CorruptFileError,
    NamespaceNotFound,
    TableNotFound,
    ValidationError,
)


def events_table(n: int = 20, start: int = 0) -> pa.Table:
    base = datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc)
    return pa.table({
        "id": pa.array(range(start, start + n), pa.int64()),
        "ts": pa.array([base + datetime.timedelta(hours=7 * i) for i in range(start, start + n)],
                       pa.timestamp("us", tz="UTC")),
        "category": pa.array(["a" if i % 3 else "b" for i in range(start, start + n)]),
        "name": pa.array([f"name-{i}" for i in range(start, start + n)]),
        "amount": pa.array([decimal.Decimal(i) / 4 for i in range(start, start + n)], pa.decimal128(10, 2)),
    })


@pytest.fixture
def catalog(tmp_path):
    cat = Catalog.open(tmp_path / "warehouse")
    cat.create_namespace("db")
    yield cat
    cat.close()


def test_open_creates_warehouse_and_db(tmp_path):
    with Catalog.open(tmp_path / "wh") as cat:
        assert os.path.exists(tmp_path / "wh" / "catalog.db")
        assert cat.list_namespaces() == []


def test_create_append_scan_round_trip(catalog):
    t = catalog.create_table("db.events", schema=events_table().schema,
                             partition_by=["day(ts)", "bucket(16, id)", "truncate(4, name)", "category"])
    assert t.location == os.path.join(catalog.warehouse, "db", "events")
    assert catalog.list_tables("db") == [("db", "events")]
    assert catalog.list_namespaces() == [("db",)]
    snap = t.append(events_table(20))
    assert snap is not None and snap.summary_value("total-records") == "20"
    t2 = catalog.load_table("db.events")
    assert t2.current_snapshot().snapshot_id == snap.snapshot_id
    rows = t2.scan().to_arrow().sort_by("id")
    assert rows.column("id").to_pylist() == list(range(20))
    assert rows.column("amount").to_pylist()[5] == decimal.Decimal("1.25")
    filtered = t2.scan(where="id > 10 and category = 'a'").to_arrow()
    assert sorted(filtered.column("id").to_pylist()) == [i for i in range(11, 20) if i % 3]
    assert t2.scan(columns=["id"]).to_arrow().column_names == ["id"]
    assert os.path.exists(t2.metadata_location)
    hint = open(os.path.join(t2.location, "metadata", "version-hint.text")).read()
    assert t2.metadata_location.endswith(f"v{hint}.metadata.json")


def test_snapshots_and_time_travel_by_snapshot_id(catalog):
    t = catalog.create_table("db.t", schema=events_table().schema)
    s1 = t.append(events_table(5))
    s2 = t.append(events_table(7, start=5))
    assert [s.snapshot_id for s in t.snapshots()] == [s1.snapshot_id, s2.snapshot_id]
    assert s2.parent_snapshot_id == s1.snapshot_id
    assert s2.sequence_number == s1.sequence_number + 1
    assert t.scan(snapshot_id=s1.snapshot_id).count() == 5
    assert t.scan().count() == 12


def test_pointer_row_matches_pyiceberg_sql_schema(catalog):
    t = catalog.create_table("db.t", schema=events_table().schema)
    t.append(events_table(3))
    con = sqlite3.connect(os.path.join(catalog.warehouse, "catalog.db"))
    rows = con.execute("SELECT catalog_name, table_namespace, table_name, metadata_location, "
                       "previous_metadata_location FROM iceberg_tables").fetchall()
    assert rows == [("icelog", "db", "t", t.metadata_location, rows[0][4])]
    assert rows[0][4] is not None and rows[0][4] != t.metadata_location


def head(cat, t):
    return cat.log.head(t.uuid)


def test_bad_appends_are_typed_and_commit_nothing(catalog, tmp_path):
    t = catalog.create_table("db.t", schema=events_table().schema, partition_by=["day(ts)"])
    t.append(events_table(3))
    before = head(catalog, t)
    with pytest.raises(ValidationError, match="extra_col"):
        t.append(events_table(3).append_column("extra_col", pa.array([1, 2, 3])))
    with pytest.raises(ValidationError, match="'id'"):
        bad = events_table(3).set_column(0, "id", pa.array(["x", "y", "z"]))
        t.append(bad)
    with pytest.raises(CorruptFileError, match="nope.parquet"):
        t.append_files([str(tmp_path / "nope.parquet")])
    junk = tmp_path / "junk.parquet"
    junk.write_bytes(b"this is not parquet")
    with pytest.raises(CorruptFileError, match="junk.parquet"):
        t.append_files([str(junk)])
    with pytest.raises(ValidationError):
        t.append({"id": [1]})
    assert head(catalog, t) == before
    assert t.scan().count() == 3


def test_a_value_that_cannot_be_partitioned_commits_nothing(catalog):
    schema = pa.schema([("d", pa.decimal128(3, 0))])
    t = catalog.create_table("db.dec", schema=schema, partition_by=["truncate(10, d)"])
    before = head(catalog, t)
    # truncate(10) of -999 is -1000, which decimal(3, 0) cannot hold
    with pytest.raises(ValidationError, match="'d'"):
        t.append(pa.table({"d": pa.array([decimal.Decimal(5), decimal.Decimal(-999)], pa.decimal128(3, 0))}))
    assert head(catalog, t) == before and t.scan().count() == 0


def test_days_past_year_9999_partition(catalog):
    t = catalog.create_table("db.far", schema=pa.schema([("ts", pa.timestamp("us"))]), partition_by=["day(ts)"])
    far = pa.array([253402300800000000 + 86400000000 * 400], pa.timestamp("us"))  # 10001-02-04
    t.append(pa.table({"ts": far}))
    [f] = t.scan().plan_files()
    assert f.partition == (2932897 + 400,)
    assert t.scan().to_arrow().column("ts").cast(pa.int64()).to_pylist() == [253402300800000000 + 86400000000 * 400]


def test_append_files_reads_footer_metrics(catalog, tmp_path):
    t = catalog.create_table("db.t", schema=events_table().schema)
    path = tmp_path / "ext.parquet"
    pq.write_table(events_table(10), path)
    snap = t.append_files([str(path)])
    assert snap.summary_value("added-records") == "10"
    files = t.scan().plan_files()
    assert len(files) == 1 and files[0].record_count == 10
    assert dict(files[0].value_counts)[1] == 10
    assert t.scan(where="id >= 5").count() == 5
    # a file from another writer has no field ids: the table gets a name mapping in the same commit
    mapping = json.loads(t.properties["schema.name-mapping.default"])
    assert [(m["field-id"], m["names"]) for m in mapping] == [(1, ["id"]), (2, ["ts"]), (3, ["category"]),
                                                              (4, ["name"]), (5, ["amount"])]
    assert len(catalog.log.read_stream(t.uuid)) == 3 and catalog.log.read_stream(t.uuid)[-1].commit_id == \
        catalog.log.read_stream(t.uuid)[-2].commit_id


def test_create_errors(catalog):
    schema = events_table().schema
    with pytest.raises(NamespaceNotFound):
        catalog.create_table("nope.t", schema=schema)
    catalog.create_table("db.t", schema=schema)
    with pytest.raises(AlreadyExists):
        catalog.create_table("db.t", schema=schema)
    with pytest.raises(AlreadyExists):
        catalog.create_namespace("db")
    with pytest.raises(TableNotFound):
        catalog.load_table("db.missing")
    with pytest.raises(ValidationError, match="nosuch"):
        catalog.create_table("db.t2", schema=schema, partition_by=["day(nosuch)"])
    with pytest.raises(ValidationError):
        catalog.create_table("db.t3", schema=schema, partition_by=["day(name)"])
    assert not catalog.table_exists("db.t2") and not catalog.table_exists("db.t3")


def test_stale_base_without_retries_names_the_winner(catalog):
    from engine.state.events import PropertiesSet
    from engine.operations.commit import RetryPolicy, commit_streams

    t = catalog.create_table("db.t", schema=events_table().schema,
                             properties={"commit.retry.num-retries": "0"})
    stale = catalog.store.table(t.uuid)
    winner = t.append(events_table(2))
    with pytest.raises(CommitConflict) as info:
        commit_streams(catalog.store,
                       lambda ctx: [(t.uuid, stale.version, [PropertiesSet(updates={"k": "v"})])],
                       policy=RetryPolicy.of(stale))
    assert info.value.actual_version == stale.version + 1
    assert info.value.winner == winner.commit_id
    assert winner.commit_id in str(info.value)


def test_rebuild_is_byte_identical(catalog, tmp_path):
    t = catalog.create_table("db.t", schema=events_table().schema, partition_by=["bucket(4, id)"],
                             properties={"commit.manifest.min-count-to-merge": "3"})
    for i in range(5):
        t.append(events_table(4, start=4 * i))
    out = tmp_path / "rebuilt"
    paths = t.rebuild(str(out))
    assert paths
    for p in paths:
        rel = os.path.relpath(p, out)
        original = os.path.join(t.location, rel)
        with open(p, "rb") as a, open(original, "rb") as b:
            assert a.read() == b.read(), rel
    assert catalog.verify("db.t") == []
    assert t.rebuild(str(out)) == paths                               # again: the same files, left as they are


def test_rebuild_writes_into_no_table_and_over_no_file(catalog, tmp_path):
    """A rebuild into another table's folder (or its own, the warehouse, a folder around a table) would overwrite
    its published files: refused, naming the rule, nothing written. Into a folder of no table, a file already there
    with other bytes stops it before it writes anything."""
    from engine.errors import ValidationError

    a = catalog.create_table("db.a", schema=events_table().schema)
    a.append(events_table(2))
    b = catalog.create_table("db.b", schema=events_table().schema)
    b.append(events_table(3))

    def files(root: str) -> dict[str, bytes]:
        return {os.path.join(d, f): open(os.path.join(d, f), "rb").read()
                for d, _, names in os.walk(root) for f in names}

    before = {**files(a.location), **files(b.location)}
    for into, rule in ((b.location, "location of table db.b"), (a.location, "location of table db.a"),
                       (b.location + "/metadata", "inside the location of table db.b"),
                       (os.path.dirname(b.location), "holds the location of table"), (catalog.warehouse, "")):
        with pytest.raises(ValidationError, match=f"Cannot rebuild db.a into: .*{rule}"):
            a.rebuild(into)
    assert {**files(a.location), **files(b.location)} == before and catalog.verify("db.b") == []
    out = tmp_path / "out"
    (out / "metadata").mkdir(parents=True)
    hint = out / "metadata" / "version-hint.text"
    hint.write_bytes(b"user's")
    with pytest.raises(ValidationError, match="version-hint.text exists with other content"):
        a.rebuild(str(out))
    assert [p.name for p in out.rglob("*") if p.is_file()] == ["version-hint.text"] and hint.read_bytes() == b"user's"


def test_verify_catches_tampered_metadata_and_foreign_files(catalog):
    t = catalog.create_table("db.t", schema=events_table().schema)
    t.append(events_table(2))
    meta = t.metadata_location
    with open(meta, "rb") as f:
        data = f.read()
    with open(meta, "wb") as f:
        f.write(data.replace(b'"total-records":"2"', b'"total-records":"3"'))
    foreign = os.path.join(t.location, "metadata", "v99.metadata.json")
    with open(foreign, "w") as f:
        f.write("{}")
    problems = catalog.verify("db.t")
    assert any(meta in p and "differs" in p for p in problems)
    assert any("v99.metadata.json" in p and "not written by icelog" in p for p in problems)


def test_verify_takes_a_failed_jobs_files_for_orphans_not_a_foreign_writer(catalog):
    """A Spark job that fails on the client side leaves its manifest (and Hadoop's .crc) in the metadata folder, a
    refused compute_table_stats its .stats file: no metadata names them, no commit happened. verify called each
    'not written by icelog (a foreign writer?)' until orphan removal."""
    t = catalog.create_table("db.t", schema=events_table().schema)
    t.append(events_table(2))
    for name in ("0f3c-m0.avro", ".0f3c-m0.avro.crc", "snap-1-0f3c.avro", "42-0f3c.stats"):
        with open(os.path.join(t.location, "metadata", name), "wb") as f:
            f.write(b"a failed job's bytes")
    assert catalog.verify("db.t") == []


def test_log_refuses_update_and_delete_and_verify_catches_tampering(catalog):
    t = catalog.create_table("db.t", schema=events_table().schema)
    t.append(events_table(2))
    db = os.path.join(catalog.warehouse, "catalog.db")
    con = sqlite3.connect(db)
    with pytest.raises(sqlite3.DatabaseError, match="append-only"):
        con.execute("UPDATE events SET payload = '{}' WHERE position = 1")
    with pytest.raises(sqlite3.DatabaseError, match="append-only"):
        con.execute("DELETE FROM events")
    triggers = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'trigger' "
                                          "AND tbl_name = 'events'")]
    for name in triggers:
        con.execute(f"DROP TRIGGER {name}")
    con.execute("UPDATE events SET payload = replace(payload, '\"db\"', '\"xx\"') WHERE position = 1")
    con.commit()
    con.close()
    assert catalog.log.verify() != []


def test_resending_a_commit_returns_its_first_outcome(catalog):
    """A client whose commit timed out re-sends it with the same commit id: it learns the outcome, nothing lands
    twice."""
    from engine.state.events import PropertiesSet
    from engine.operations.commit import RetryPolicy, commit_streams

    t = catalog.create_table("db.t", schema=events_table().schema)
    base = catalog.store.table(t.uuid)

    def build(ctx):
        return [(t.uuid, base.version, [PropertiesSet(updates={"owner": "etl"})])]

    first = commit_streams(catalog.store, build, policy=RetryPolicy(), commit_id="nightly-2026-11-21")
    head = catalog.log.head(t.uuid)
    again = commit_streams(catalog.store, build, policy=RetryPolicy(), commit_id="nightly-2026-11-21")
    assert not first.result.duplicate and again.result.duplicate
    assert again.result.positions == first.result.positions
    assert catalog.log.head(t.uuid) == head and t.properties["owner"] == "etl"
