"""A spec whose fields are all ``void`` is unpartitioned, as Java's ``PartitionSpec.isUnpartitioned`` says (it is
``!isPartitioned()``, and a void field partitions nothing): a dynamic overwrite or a replace of partitions under it
replaces the whole table and is validated against data added anywhere (BaseReplacePartitions with
``alwaysTrue``); its equality deletes are global (DeleteFileIndex), in a scan and in conflict validation.

Layer: tests (real SQLite log and Parquet files).
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest

from engine import Catalog
from engine.errors import ValidationConflict
from engine.write.data_writer import write_data_files
from engine.write.delete_files import write_equality_deletes

SCHEMA = pa.schema([("id", pa.int64()), ("cat", pa.string())])


def rows(ids: list[int], cat: str) -> pa.Table:
    return pa.table({"id": pa.array(ids, pa.int64()), "cat": [cat] * len(ids)})


def ids_of(t: Any) -> list[int]:
    return sorted(t.scan().to_arrow().column("id").to_pylist())


def _v1_table_whose_partition_field_became_void(cat: Any) -> Any:
    """A v1 table partitioned by ``cat`` (ids 1, 2 in spec 0), then the field removed: v1 keeps it as void."""
    t = cat.create_table("db.t", schema=SCHEMA, partition_by=["cat"], format_version=1)
    t.append(rows([1, 2], "a"))
    state = t.update_spec().remove_field("cat").commit()
    assert state.spec.fields and not state.spec.is_partitioned
    t.append(rows([3], "b"))                                          # spec 1, partition (None,)
    return t


@pytest.mark.parametrize("how", ["dynamic_overwrite", "replace_partitions"])
def test_replacing_partitions_under_an_all_void_spec_replaces_the_whole_table(tmp_path, how: str) -> None:
    with Catalog.open(tmp_path / "wh") as cat:
        cat.create_namespace("db")
        t = _v1_table_whose_partition_field_became_void(cat)
        if how == "dynamic_overwrite":
            t.dynamic_overwrite(rows([42], "z"))
        else:
            t.replace_partitions(write_data_files(t.state, rows([42], "z")))
        assert ids_of(t) == [42]
        assert cat.verify("db.t") == []


@pytest.mark.parametrize("how", ["dynamic_overwrite", "replace_partitions"])
def test_replacing_partitions_under_an_all_void_spec_conflicts_with_data_added_meanwhile_in_any_spec(
        tmp_path, how: str) -> None:
    """The transaction voids the partition field and replaces partitions; the append that lands meanwhile still
    writes with the partitioned spec, into a partition the transaction's spec cannot name."""
    with Catalog.open(tmp_path / "wh") as cat:
        cat.create_namespace("db")
        t = cat.create_table("db.t", schema=SCHEMA, partition_by=["cat"], format_version=1)
        t.append(rows([1, 2], "a"))
        tx = t.transaction()
        tx.update_spec().remove_field("cat").commit()
        if how == "dynamic_overwrite":
            tx.dynamic_overwrite(rows([42], "z"))
        else:
            tx.replace_partitions(write_data_files(tx.state, rows([42], "z")))
        landed = t.append(rows([7], "c"))                             # spec 0, partition ('c',)
        with pytest.raises(ValidationConflict) as info:
            tx.commit_transaction()
        assert info.value.commit_id == landed.commit_id
        assert ids_of(t) == [1, 2, 7]


def _v2_table_with_an_all_void_spec(cat: Any) -> Any:
    """A v2 table: ids 1, 2 under spec 0 (identity of ``cat``), then a current spec of one void field."""
    t = cat.create_table("db.v", schema=SCHEMA, partition_by=["cat"])
    t.append(rows([1, 2], "a"))
    state = t.update_spec().remove_field("cat").add_field("cat", "void").commit()
    assert state.spec.fields and not state.spec.is_partitioned
    return t


def _equality_delete_in_the_void_spec(t: Any, row_id: int) -> Any:
    """An equality delete file of the all-void spec (partition ``(None,)``), as Spark writes one."""
    state = t.state
    f = write_equality_deletes(state, pa.table({"id": pa.array([row_id], pa.int64())}), equality_ids=[1],
                               spec_id=state.spec.spec_id, partition=(None,))
    with t.row_delta() as delta:
        delta.add_delete_files([f])
    return t.current_snapshot()


def test_equality_deletes_of_an_all_void_spec_apply_to_every_partition(tmp_path) -> None:
    with Catalog.open(tmp_path / "wh") as cat:
        cat.create_namespace("db")
        t = _v2_table_with_an_all_void_spec(cat)
        _equality_delete_in_the_void_spec(t, 1)
        assert ids_of(t) == [2]
        assert cat.verify("db.v") == []


def test_a_rewrite_conflicts_with_a_global_equality_delete_of_an_all_void_spec_landed_meanwhile(tmp_path) -> None:
    """validateNoNewDeletesForDataFiles: the new delete applies to the spec-0 file the copy-on-write delete
    rewrites (its id bounds 1..1 fall within the file's 1..2)."""
    with Catalog.open(tmp_path / "wh") as cat:
        cat.create_namespace("db")
        t = _v2_table_with_an_all_void_spec(cat)
        tx = t.transaction()
        tx.delete("id = 2")
        landed = _equality_delete_in_the_void_spec(t, 1)
        with pytest.raises(ValidationConflict) as info:
            tx.commit_transaction()
        assert info.value.commit_id == landed.commit_id
        assert ids_of(t) == [2]


@pytest.mark.parametrize("spec", ["unpartitioned", "all void"])
def test_a_dynamic_overwrite_of_no_rows_replaces_nothing(tmp_path, spec: str) -> None:
    """No partition is written, so none is replaced (Java's ReplacePartitions without files, Spark's empty dynamic
    overwrite, and ``replace_partitions([])``): before, a table without partitions lost every row. Data of other
    columns is still refused."""
    from engine.errors import ValidationError

    with Catalog.open(tmp_path / "wh") as cat:
        cat.create_namespace("db")
        if spec == "unpartitioned":
            t = cat.create_table("db.t", schema=SCHEMA)
            t.append(rows([1, 2, 3], "a"))
        else:
            t = _v1_table_whose_partition_field_became_void(cat)
        version = t.state.version
        assert t.dynamic_overwrite(rows([], "z")) is None
        assert ids_of(t) == [1, 2, 3] and t.state.version == version
        with pytest.raises(ValidationError):
            t.dynamic_overwrite(pa.table({"other": pa.array([], pa.int64())}))
        assert t.state.version == version
