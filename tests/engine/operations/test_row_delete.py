"""Row-level deletes and overwrites, and their conflict validation against commits that land meanwhile."""

from __future__ import annotations

import os

import pyarrow as pa
import pytest

from engine import Catalog
from engine.errors import ValidationConflict, ValidationError
from engine.operations.row_delete import bind_filter, delete_mode, plan_row_delete

SCHEMA = pa.schema([("id", pa.int64()), ("part", pa.string())])


def rows(ids, part="a") -> pa.Table:
    return pa.table({"id": pa.array(list(ids), pa.int64()), "part": [part] * len(list(ids))})


@pytest.fixture
def cat(tmp_path):
    c = Catalog.open(tmp_path / "wh")
    c.create_namespace("db")
    yield c
    c.close()


def ids(table) -> list[int]:
    return sorted(table.scan().to_arrow().column("id").to_pylist())


def test_copy_on_write_delete_rewrites_partly_matched_files(cat):
    t = cat.create_table("db.t", schema=SCHEMA, partition_by=["part"])
    t.append(rows(range(10), "a"))
    t.append(rows(range(10, 20), "b"))
    snap = t.delete("id >= 5 and id < 12")
    assert snap.operation == "overwrite"  # rewrote survivors
    assert ids(t) == [0, 1, 2, 3, 4] + list(range(12, 20))
    assert snap.summary_value("deleted-data-files") == "2" and snap.summary_value("added-data-files") == "2"
    assert snap.summary_value("total-records") == "13"
    assert sorted(t.scan(snapshot_id=snap.parent_snapshot_id).to_arrow().column("id").to_pylist()) == list(range(20))
    assert cat.verify("db.t") == []


def test_whole_files_are_dropped_without_reading_them(cat):
    t = cat.create_table("db.t", schema=SCHEMA, partition_by=["part"])
    t.append(rows(range(10), "a"))
    t.append(rows(range(10, 20), "b"))
    [covered] = [f for f in t.scan().plan_files() if f.partition == ("b",)]
    os.remove(covered.file_path)  # reading it would fail: the strict metrics must decide alone
    snap = t.delete("part = 'b'")
    assert snap.operation == "delete" and snap.summary_value("deleted-records") == "10"
    assert ids(t) == list(range(10))


def test_delete_matching_nothing_commits_nothing(cat):
    t = cat.create_table("db.t", schema=SCHEMA)
    t.append(rows(range(5)))
    head = cat.log.head(t.uuid)
    assert t.delete("id > 100") is None
    assert cat.log.head(t.uuid) == head
    with pytest.raises(ValidationError, match="nosuch"):
        t.delete("nosuch = 1")
    assert cat.log.head(t.uuid) == head


def test_overwrite_with_filter_and_whole_table(cat):
    t = cat.create_table("db.t", schema=SCHEMA, partition_by=["part"])
    t.append(rows(range(10), "a"))
    t.append(rows(range(10, 15), "b"))
    snap = t.overwrite(rows([100, 101], "b"), where="part = 'b'")
    assert snap.operation == "overwrite"
    assert ids(t) == list(range(10)) + [100, 101]
    t.overwrite(rows([7], "c"))
    assert ids(t) == [7]


def test_dynamic_overwrite_replaces_only_partitions_present(cat):
    t = cat.create_table("db.t", schema=SCHEMA, partition_by=["part"])
    t.append(rows(range(3), "a"))
    t.append(rows(range(3, 6), "b"))
    t.dynamic_overwrite(rows([50, 51], "b"))
    assert ids(t) == [0, 1, 2, 50, 51]


def race_delete(t, where: str, concurrent) -> object:
    """Plan a delete, let ``concurrent`` commit meanwhile, then commit the delete."""
    state = t.state
    start = state.branch_head("main")
    changes = plan_row_delete(t.catalog.store, state, bind_filter(state, where), start, mode=delete_mode(state))
    concurrent()
    return t._commit_rows(changes, "delete", "main", isolation_for="delete")


def test_delete_vs_append_into_the_filtered_range(cat):
    t = cat.create_table("db.t", schema=SCHEMA, partition_by=["part"])
    t.append(rows(range(10), "a"))
    winner = []
    with pytest.raises(ValidationConflict) as info:
        race_delete(t, "id < 5", lambda: winner.append(t.append(rows([1, 2], "a"))))
    assert info.value.commit_id == winner[0].commit_id and winner[0].commit_id in str(info.value)
    assert ids(t) == sorted(list(range(10)) + [1, 2])  # nothing of the delete landed


def test_delete_vs_append_elsewhere_lands(cat):
    t = cat.create_table("db.t", schema=SCHEMA, partition_by=["part"])
    t.append(rows(range(10), "a"))
    race_delete(t, "part = 'a' and id < 5", lambda: t.append(rows([100], "z")))
    assert ids(t) == [5, 6, 7, 8, 9, 100]


def test_snapshot_isolation_lets_the_delete_land(cat):
    t = cat.create_table("db.t", schema=SCHEMA, partition_by=["part"],
                         properties={"write.delete.isolation-level": "snapshot"})
    t.append(rows(range(10), "a"))
    race_delete(t, "id < 5", lambda: t.append(rows([1, 2], "a")))
    assert ids(t) == [1, 2, 5, 6, 7, 8, 9]  # the concurrent rows were not seen by the delete


def test_two_deletes_of_the_same_rows_never_lose_data(cat):
    t = cat.create_table("db.t", schema=SCHEMA)
    t.append(rows(range(10)))
    with pytest.raises(ValidationConflict):
        race_delete(t, "id < 3", lambda: t.delete("id < 3"))
    assert ids(t) == list(range(3, 10))
    assert t.current_snapshot().summary_value("total-records") == "7"


def test_deletes_after_merge_on_read_deletes_keep_deleted_rows_deleted(cat):
    t = cat.create_table("db.t", schema=SCHEMA, properties={"write.delete.mode": "merge-on-read"})
    t.append(rows(range(10)))
    t.delete("id < 3")
    s = t.delete("id < 5")  # only rows 3 and 4 are new deletes
    assert s.summary_value("added-position-deletes") == "2"
    t.set_properties({"write.delete.mode": "copy-on-write"})
    t.delete("id = 9")  # rewrites the file: rows deleted before must not come back
    assert ids(t) == [5, 6, 7, 8]
    assert t.current_snapshot().summary_value("total-records") == "4"
