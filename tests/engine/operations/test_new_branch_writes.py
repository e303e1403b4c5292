"""A write to a branch that does not exist yet creates it on top of the current snapshot, as Java's
``SnapshotProducer`` does (``SnapshotUtil.latestSnapshot``): the branch sees main's rows, and main is left as it
was. Appends, deletes (copy-on-write and merge-on-read), upserts and compactions alike.

Layer: tests (engine's public API on real SQLite and Parquet files).
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from engine import Catalog
from engine.errors import ValidationError

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), ("category", pa.string())])


def rows(ids: list[int], category: str = "a") -> pa.Table:
    return pa.table({"id": pa.array(ids, pa.int64()), "category": pa.array([category] * len(ids))}, schema=SCHEMA)


def ids_at(table, snapshot_id: int) -> list[int]:
    return sorted(table.scan(snapshot_id=snapshot_id).to_arrow()["id"].to_pylist())


@pytest.fixture(params=["copy-on-write", "merge-on-read"])
def table(request, tmp_path):
    with Catalog.open(tmp_path / "warehouse") as cat:
        cat.create_namespace("db")
        t = cat.create_table("db.t", schema=SCHEMA, partition_by=["category"],
                             properties={"write.delete.mode": request.param})
        t.append(rows([1, 2]))
        yield t


def test_an_append_to_a_new_branch_starts_from_main(table):
    main = table.state.current_snapshot.snapshot_id
    snap = table.append(rows([3]), branch="audit")
    assert snap.parent_snapshot_id == main
    assert ids_at(table, table.state.ref("audit").snapshot_id) == [1, 2, 3]
    assert table.state.current_snapshot.snapshot_id == main


def test_a_delete_on_a_new_branch_deletes_mains_rows_there_only(table):
    main = table.state.current_snapshot.snapshot_id
    snap = table.delete("id = 1", branch="audit")
    assert snap is not None and snap.parent_snapshot_id == main
    assert ids_at(table, table.state.ref("audit").snapshot_id) == [2]
    assert ids_at(table, table.state.current_snapshot.snapshot_id) == [1, 2]


def test_an_upsert_and_a_compaction_on_a_new_branch_start_from_main(table):
    main = table.state.current_snapshot.snapshot_id
    table.upsert(rows([2, 5], "b"), ["id"], branch="audit")
    audit = table.state.ref("audit").snapshot_id
    assert table.state.snapshot_by_id(audit).parent_snapshot_id == main
    got = {r["id"]: r["category"] for r in table.scan(snapshot_id=audit).to_arrow().to_pylist()}
    assert got == {1: "a", 2: "b", 5: "b"}
    table.append(rows([3]))  # a second file in partition a: binpack has something to do
    main = table.state.current_snapshot.snapshot_id
    table.rewrite_data_files(branch="fresh")
    fresh = table.state.ref("fresh").snapshot_id
    assert table.state.snapshot_by_id(fresh).parent_snapshot_id == main
    assert ids_at(table, fresh) == [1, 2, 3]
    assert table.state.current_snapshot.snapshot_id == main


@pytest.mark.parametrize("branch", ["", None])
def test_a_write_to_a_branch_without_a_name_is_refused_and_leaves_no_file(table, branch):
    version, files = table.state.version, sorted(p.name for p in (Path(table.location) / "data").rglob("*.parquet"))
    with pytest.raises(ValidationError, match="branch name must be a non-empty string"):
        table.append(rows([9]), branch=branch)
    with pytest.raises(ValidationError, match="branch name must be a non-empty string"):
        table.delete("id = 1", branch=branch)
    assert table.state.version == version
    assert sorted(p.name for p in (Path(table.location) / "data").rglob("*.parquet")) == files
