"""Partitions of a float or double identity column compare as Java's PartitionSet does (Double.compare): a NaN
partition is one partition and -0.0 another than 0.0. Dynamic overwrites and replace_partitions replace exactly
the partitions of the data, serializable validation sees data added to a replaced NaN partition, and the
deletes of a NaN partition apply to its data files.

Layer: tests (engine's public API on real SQLite and Parquet files).
"""

from __future__ import annotations

import pyarrow as pa
import pytest

from engine import Catalog
from engine.errors import ValidationConflict
from engine.write.data_writer import write_data_files

SCHEMA = pa.schema([("id", pa.int64()), ("f", pa.float64())])
NAN = float("nan")


def rows(ids: list[int], f: float) -> pa.Table:
    return pa.table({"id": pa.array(ids, pa.int64()), "f": pa.array([f] * len(ids), pa.float64())})


def ids_of(t) -> list[int]:
    return sorted(t.scan().to_arrow().column("id").to_pylist())


@pytest.mark.parametrize("format_version", [2, 3])
def test_a_dynamic_overwrite_replaces_the_nan_partition_and_keeps_zero_apart_from_minus_zero(catalog,
                                                                                              format_version):
    t = catalog.create_table("db.t", schema=SCHEMA, partition_by=["f"], format_version=format_version)
    t.append(rows([1, 2], NAN))
    t.append(rows([3], 1.0))
    t.append(rows([4], 0.0))
    t.dynamic_overwrite(rows([10], NAN))
    assert ids_of(t) == [3, 4, 10]
    t.dynamic_overwrite(rows([11], -0.0))  # another partition than 0.0: 4 stays
    assert ids_of(t) == [3, 4, 10, 11]
    t.replace_partitions(write_data_files(t.state, rows([12], NAN), stage=t.stage_file, io=t.catalog.io))
    assert ids_of(t) == [3, 4, 11, 12]
    assert catalog.verify("db.t") == []


def test_data_added_to_a_replaced_nan_partition_meanwhile_conflicts(catalog):
    t = catalog.create_table("db.t", schema=SCHEMA, partition_by=["f"])
    t.append(rows([1], NAN))
    with Catalog.open(catalog.warehouse) as other:
        with pytest.raises(ValidationConflict):
            with t.transaction() as tx:
                tx.dynamic_overwrite(rows([10], NAN))
                other.load_table("db.t").append(rows([2], NAN))
    assert ids_of(t) == [1, 2]


def test_deletes_of_a_nan_partition_apply_to_its_files(catalog):
    t = catalog.create_table("db.t", schema=SCHEMA, partition_by=["f"], format_version=2)
    t.append(rows([1, 2], NAN))
    t.upsert(rows([1], NAN), ["id"])  # the old row 1 goes by a delete file of the NaN partition
    deletes = [f for f in catalog.store.live_files(t.state, t.state.current_snapshot.snapshot_id) if f.content != 0]
    assert deletes and all(f.partition[0] != f.partition[0] for f in deletes)  # NaN
    assert ids_of(t) == [1, 2]
    with Catalog.open(catalog.warehouse) as fresh:  # decoded from the log anew: its NaN objects are other ones
        assert ids_of(fresh.load_table("db.t")) == [1, 2]


@pytest.mark.parametrize("mode", ["merge-on-read", "copy-on-write"])
def test_deletes_and_compaction_keep_zero_and_minus_zero_apart(catalog, mode):
    """Position deletes of partition-wide granularity and compaction groups: a file of 0.0 and one of -0.0 never
    share a delete file or an output file (the rows of one would move to, or be deleted through, the other)."""
    t = catalog.create_table("db.t", schema=SCHEMA, partition_by=["f"], format_version=2,
                             properties={"write.delete.mode": mode, "write.delete.granularity": "partition"})
    for ids, f in (([1, 2], 0.0), ([3, 4], -0.0), ([5], 0.0), ([6], -0.0)):
        t.append(rows(ids, f))
    t.delete("id = 1 or id = 3")
    assert ids_of(t) == [2, 4, 5, 6]
    t.rewrite_data_files()
    assert ids_of(t) == [2, 4, 5, 6]
    signs = {r["id"]: str(r["f"]) for r in t.scan().to_arrow().to_pylist()}
    assert signs == {2: "0.0", 4: "-0.0", 5: "0.0", 6: "-0.0"}
    t.delete_by_key(pa.table({"id": pa.array([4], pa.int64())}), ["id"])
    assert ids_of(t) == [2, 5, 6]
    assert catalog.verify("db.t") == []
