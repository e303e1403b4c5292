"""Values at the edges of what a scan reads: signed zeros under IN and NOT IN (the same rows as = and !=), NaN
and infinities as identity partition values (committed, read back from the log, filtered and deleted), a
projection of no columns (the row count kept), and a column a data file does not have that an identity partition
field gives (spec "Column Projection", rule 1: Hive-style files keep partition columns only in their paths).

Layer: tests (engine's public API on real SQLite and Parquet files).
"""

from __future__ import annotations

import math
import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from engine import Catalog
from engine.write.data_writer import read_data_file
from projections import layout


def _ids(table, where: str | None = None) -> list[int]:
    return sorted(table.scan(where=where).to_arrow().column("i").to_pylist())


@pytest.mark.parametrize("partition_by", [[], ["x"]], ids=["unpartitioned", "identity"])
def test_in_and_not_in_treat_signed_zeros_as_equal_and_unequal_do(catalog, partition_by):
    t = catalog.create_table("db.z", schema=pa.schema([("x", pa.float64()), ("i", pa.int64())]),
                         partition_by=partition_by)
    for i, x in enumerate([-0.0, 0.0, 1.0]):  # one file each: metrics and partitions see one value
        t.append(pa.table({"x": pa.array([x]), "i": pa.array([i], pa.int64())}))
    for zero in ("0.0", "-0.0"):
        assert _ids(t, f"x = {zero}") == [0, 1]
        assert _ids(t, f"x in ({zero}, 5.0)") == _ids(t, f"x = {zero}")
        assert _ids(t, f"x != {zero}") == [2]
        assert _ids(t, f"x not in ({zero}, 5.0)") == _ids(t, f"x != {zero}")


@pytest.mark.parametrize("column_type", [pa.float64(), pa.float32()], ids=["double", "float"])
def test_nan_and_infinities_are_identity_partition_values(catalog, tmp_path, column_type):
    t = catalog.create_table("db.n", schema=pa.schema([("x", column_type), ("i", pa.int64())]), partition_by=["x"])
    t.append(pa.table({"x": pa.array([math.nan, 1.0, math.inf, -math.inf], column_type),
                       "i": pa.array([0, 1, 2, 3], pa.int64())}))
    assert _ids(t) == [0, 1, 2, 3]
    assert _ids(t, "x is nan") == [0]
    assert _ids(t, "x > 1.0") == [2]
    assert _ids(t, "x < 0") == [3]
    partitions = {p[0] for p in (f.partition for f in (e.file for e in catalog.store.live_entries(
        t.state, t.state.current_snapshot.snapshot_id)))}
    assert math.inf in partitions and -math.inf in partitions and any(math.isnan(p) for p in partitions)
    t.delete("x is nan")
    assert _ids(t) == [1, 2, 3]
    assert catalog.verify("db.n") == []
    with Catalog.open(tmp_path / "warehouse") as again:  # decoded from the log, not from memory
        reopened = again.load_table("db.n")
        assert _ids(reopened) == [1, 2, 3]
        assert _ids(reopened, "x > 1.0") == [2] and _ids(reopened, "x < 0") == [3]


def test_a_projection_of_no_columns_keeps_every_row(catalog):
    t = catalog.create_table("db.c", schema=pa.schema([("i", pa.int64())]))
    t.append(pa.table({"i": pa.array([1, 2, 3], pa.int64())}))
    t.append(pa.table({"i": pa.array([4, 5], pa.int64())}))
    rows = t.scan(columns=[]).to_arrow()
    assert (rows.num_rows, rows.num_columns) == (5, 0)
    assert t.scan(where="i > 1", columns=[]).to_arrow().num_rows == 4 == t.scan(where="i > 1").count()
    assert sum(b.num_rows for b in t.scan(columns=[]).to_batches()) == 5


def _file_without(t, region: str, ids: list[int]):
    """A Parquet file under the table's data folder holding only the id and v columns (with their field ids),
    described as a file of the region's identity partition, as Spark's add_files makes of a Hive partition."""
    state = t.state
    folder = f"{layout.data_dir(state.location)}/region={region}"
    path = f"{folder}/000000_0.parquet"
    os.makedirs(folder, exist_ok=True)
    data = pa.table({"id": pa.array(ids, pa.int64()), "v": pa.array([f"v{i}" for i in ids])})
    data = data.cast(pa.schema([pa.field("id", pa.int64(), metadata={"PARQUET:field_id": "1"}),
                                pa.field("v", pa.string(), metadata={"PARQUET:field_id": "2"})]))
    pq.write_table(data, path)
    return read_data_file(path, state.schema, spec_id=state.spec.spec_id, partition=(region,),
                          properties=dict(state.properties))


def test_a_column_the_file_lacks_reads_as_its_identity_partition_value(catalog):
    schema = pa.schema([("id", pa.int64()), ("v", pa.string()), ("region", pa.string())])
    t = catalog.create_table("db.hive", schema=schema, partition_by=["region"],
                         properties={"format-version": "2"})
    t.append_data_files([_file_without(t, "eu", [1, 2]), _file_without(t, "us", [3])])
    by_id = {r["id"]: r["region"] for r in t.scan().to_arrow().to_pylist()}
    assert by_id == {1: "eu", 2: "eu", 3: "us"}
    assert sorted(t.scan(where="region = 'eu' and id > 1").to_arrow().column("id").to_pylist()) == [2]
    assert t.scan(where="region = 'us'").count() == 1
    # the operations that read rows and write them again keep the value (a rewrite must not move rows to null)
    t.delete("id = 1")  # copy-on-write: the eu file's other row is written again
    assert {r["id"]: r["region"] for r in t.scan().to_arrow().to_pylist()} == {2: "eu", 3: "us"}
    t.upsert(pa.table({"id": pa.array([3], pa.int64()), "v": ["w3"], "region": ["us"]}), ["id", "region"])
    t.delete_by_key(pa.table({"id": pa.array([2], pa.int64()), "region": ["eu"]}), ["id", "region"])
    assert {r["id"]: (r["v"], r["region"]) for r in t.scan().to_arrow().to_pylist()} == {3: ("w3", "us")}
    t.append_data_files([_file_without(t, "ap", [7, 8])])
    t.rewrite_data_files()
    rows = {r["id"]: r["region"] for r in t.scan().to_arrow().to_pylist()}
    assert rows == {3: "us", 7: "ap", 8: "ap"}
    assert catalog.verify("db.hive") == []
