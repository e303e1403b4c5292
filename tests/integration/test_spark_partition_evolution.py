"""Spark (Iceberg 1.10 runtime) and PyIceberg read tables whose partition spec icelog evolved, v1 and v2.

Layer: tests (icelog's public API, pyspark through the shared `spark` fixture, PyIceberg; writes a warehouse
under pytest's temporary folder once per module).

Each table is written in three specs: ``identity(category)``; then ``day(ts)`` with ``category`` removed (a v1
table keeps it as a void field); then ``bucket[4](id)`` added, ``ts_day`` renamed to ``day`` and, for v1,
``category`` partitioned again (the void field makes room by taking the name ``category_1000``). A sort order
lands on the way. Every snapshot is read back by path (current and by time travel) with exactly the rows of
that snapshot, and filters on the partition columns count the same rows as Python does.
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from pathlib import Path
from typing import Any

import attrs
import pyarrow as pa
import pytest

from tests.integration import tables as T

UTC = dt.timezone.utc
SCHEMA = pa.schema([
    pa.field("id", pa.int64(), nullable=False),
    pa.field("ts", pa.timestamp("us", tz="UTC")),
    pa.field("category", pa.string()),
    pa.field("amount", pa.float64()),
])
BASE = dt.datetime(2026, 2, 27, 5, tzinfo=UTC)


def batch(start: int, n: int) -> pa.Table:
    ids = list(range(start, start + n))
    return pa.table({
        "id": pa.array(ids, pa.int64()),
        "ts": pa.array([None if i % 13 == 0 else BASE + dt.timedelta(hours=7 * i) for i in ids],
                       pa.timestamp("us", tz="UTC")),
        "category": pa.array([None if i % 11 == 0 else "abc"[i % 3] for i in ids]),
        "amount": pa.array([i * 1.25 for i in ids], pa.float64()),
    }, schema=SCHEMA)


@attrs.frozen
class Evolved:
    """One evolved table: where it is, and each snapshot with the rows it holds and the spec it was written in."""

    format_version: int
    location: str
    metadata_location: str
    snapshots: tuple[tuple[int, int], ...]   # (snapshot id, rows so far)
    data: pa.Table
    specs: tuple[dict[str, Any], ...]

    def rows(self, upto: int | None = None) -> list[tuple[Any, ...]]:
        data = self.data if upto is None else self.data.slice(0, upto)
        return T.normalise_rows(data.to_pylist(), SCHEMA)


def build(warehouse: Path, format_version: int) -> Evolved:
    from engine import Catalog

    batches = [batch(0, 40), batch(40, 40), batch(80, 40)]
    snapshots = []
    with Catalog.open(warehouse) as cat:
        if not cat.list_namespaces():
            cat.create_namespace("db")
        t = cat.create_table(f"db.evolved_v{format_version}", schema=SCHEMA, partition_by=["category"],
                             format_version=format_version)
        rows = 0

        def append(data: pa.Table) -> None:
            nonlocal rows
            snap = t.append(data)
            rows += data.num_rows
            snapshots.append((snap.snapshot_id, rows))

        append(batches[0])
        t.update_spec().add_field("ts", "day").remove_field("category").commit()
        t.replace_sort_order().desc("ts", "day").asc("id").commit()
        append(batches[1])
        update = t.update_spec().add_field("id", "bucket[4]").rename_field("ts_day", "day")
        if format_version == 1:
            update.add_identity("category")
        update.commit()
        append(batches[2])
        specs = tuple(s.to_json() for s in t.state.specs)
        return Evolved(format_version=format_version, location=t.location, metadata_location=t.metadata_location,
                       snapshots=tuple(snapshots), data=pa.concat_tables(batches), specs=specs)


@pytest.fixture(scope="module")
def evolved(tmp_path_factory: pytest.TempPathFactory) -> dict[int, Evolved]:
    warehouse = tmp_path_factory.mktemp("evolution") / "warehouse"
    return {v: build(warehouse, v) for v in (1, 2)}


VERSIONS = pytest.mark.parametrize("version", [1, 2], ids=["v1", "v2"])


def spark_rows(df) -> list[tuple[Any, ...]]:
    return T.normalise_rows([r.asDict() for r in df.collect()], SCHEMA)


def test_specs_as_written(evolved):
    v1, v2 = evolved[1].specs, evolved[2].specs
    assert [[(f["field-id"], f["name"], f["transform"]) for f in s["fields"]] for s in v1] == [
        [(1000, "category", "identity")],
        [(1000, "category", "void"), (1001, "ts_day", "day")],
        [(1000, "category_1000", "void"), (1001, "day", "day"), (1002, "id_bucket_4", "bucket[4]"),
         (1003, "category", "identity")],
    ]
    assert [[(f["field-id"], f["name"], f["transform"]) for f in s["fields"]] for s in v2] == [
        [(1000, "category", "identity")],
        [(1001, "ts_day", "day")],
        [(1001, "day", "day"), (1002, "id_bucket_4", "bucket[4]")],
    ]


# -- Spark -----------------------------------------------------------------------------------------------------------


@VERSIONS
def test_spark_reads_every_snapshot_by_path(spark, evolved, version):
    table = evolved[version]
    current = spark.read.format("iceberg").load(table.location)
    assert current.columns == SCHEMA.names
    assert spark_rows(current) == table.rows()
    for snapshot_id, rows in table.snapshots:
        df = spark.read.format("iceberg").option("snapshot-id", str(snapshot_id)).load(table.location)
        assert spark_rows(df) == table.rows(rows), f"snapshot {snapshot_id}"


@VERSIONS
@pytest.mark.parametrize(("where", "matches"), [
    ("category = 'a'", lambda r: r["category"] == "a"),
    ("category IS NULL", lambda r: r["category"] is None),
    ("ts >= TIMESTAMP '2026-03-10 00:00:00+00:00'",
     lambda r: r["ts"] is not None and r["ts"] >= dt.datetime(2026, 3, 10, tzinfo=UTC)),
    ("ts IS NULL", lambda r: r["ts"] is None),
    ("id = 97", lambda r: r["id"] == 97),
    ("id IN (3, 45, 118)", lambda r: r["id"] in (3, 45, 118)),
])
def test_spark_filters_on_partition_columns_match_python(spark, evolved, version, where, matches):
    table = evolved[version]
    df = spark.read.format("iceberg").load(table.location)
    expected = sorted(r["id"] for r in table.data.to_pylist() if matches(r))
    assert sorted(r["id"] for r in df.where(where).select("id").collect()) == expected
    assert df.where(where).count() == len(expected)
    previous_id, previous_rows = table.snapshots[-2]
    old = spark.read.format("iceberg").option("snapshot-id", str(previous_id)).load(table.location)
    assert old.where(where).count() == sum(1 for r in table.data.slice(0, previous_rows).to_pylist() if matches(r))


@VERSIONS
def test_spark_sees_each_files_spec_and_sort_order(spark, evolved, version):
    table = evolved[version]
    files = spark.read.format("iceberg").load(f"{table.location}#files").select(
        "spec_id", "record_count", "sort_order_id").collect()
    assert Counter(r.spec_id for r in files).keys() == {0, 1, 2}
    by_spec = Counter()
    for r in files:
        by_spec[r.spec_id] += r.record_count
    assert dict(by_spec) == {0: 40, 1: 40, 2: 40}
    assert {r.sort_order_id for r in files if r.spec_id == 0} == {0}
    assert {r.sort_order_id for r in files if r.spec_id > 0} == {1}


# -- PyIceberg -------------------------------------------------------------------------------------------------------


@VERSIONS
def test_pyiceberg_reads_every_snapshot(evolved, version):
    from pyiceberg.table import StaticTable

    table = evolved[version]
    static = StaticTable.from_metadata(table.metadata_location)
    assert static.spec().spec_id == 2
    assert [f.name for f in static.spec().fields][-1] == ("category" if version == 1 else "id_bucket_4")
    assert T.normalise_rows(static.scan().to_arrow().to_pylist(), SCHEMA) == table.rows()
    for snapshot_id, rows in table.snapshots:
        got = static.scan(snapshot_id=snapshot_id).to_arrow().to_pylist()
        assert T.normalise_rows(got, SCHEMA) == table.rows(rows), f"snapshot {snapshot_id}"
    expected = sorted(r["id"] for r in table.data.to_pylist() if r["category"] == "a")
    assert sorted(static.scan(row_filter="category == 'a'").to_arrow().column("id").to_pylist()) == expected
    assert static.sort_order().order_id == 1


# -- a v1 table upgraded to v2 ---------------------------------------------------------------------------------------


def test_readers_read_every_snapshot_of_an_upgraded_table(spark, tmp_path):
    from pyiceberg.table import StaticTable

    from engine import Catalog

    data = pa.concat_tables([batch(0, 20), batch(20, 20), batch(40, 20)])
    with Catalog.open(tmp_path / "warehouse") as cat:
        cat.create_namespace("db")
        t = cat.create_table("db.upgraded", schema=SCHEMA, partition_by=["category"], format_version=1)
        t.append(data.slice(0, 20))
        t.update_spec().add_field("id", "bucket[2]").commit()
        t.upgrade_format_version(2)
        t.append(data.slice(20, 20))
        t.update_spec().remove_field("category").commit()          # v2 now: dropped, not void
        t.append(data.slice(40, 20))
        snapshots = [(s.snapshot_id, n) for s, n in zip(t.snapshots(), (20, 40, 60))]
        location, metadata_location = t.location, t.metadata_location
        assert [f.name for f in t.state.spec.fields] == ["id_bucket_2"]

    def expected(n: int) -> list[tuple[Any, ...]]:
        return T.normalise_rows(data.slice(0, n).to_pylist(), SCHEMA)

    static = StaticTable.from_metadata(metadata_location)
    assert static.format_version == 2
    for snapshot_id, n in snapshots:
        df = spark.read.format("iceberg").option("snapshot-id", str(snapshot_id)).load(location)
        assert spark_rows(df) == expected(n)
        assert T.normalise_rows(static.scan(snapshot_id=snapshot_id).to_arrow().to_pylist(), SCHEMA) == expected(n)
    df = spark.read.format("iceberg").load(location)
    assert df.where("category = 'b'").count() == sum(1 for r in data.to_pylist() if r["category"] == "b")
