"""Metadata tables without Spark: Java's column names and order, and values taken from the table's own API."""

from __future__ import annotations

import datetime as dt
import json
import os

import pyarrow as pa
import pytest

from engine import Catalog
from engine.errors import ValidationError
from engine.read.metadata_tables import KINDS, inspect_kind, to_json_lines

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), ("category", pa.string()), ("d", pa.date32())])

FILE_COLUMNS = ["content", "file_path", "file_format", "spec_id", "partition", "record_count", "file_size_in_bytes",
                "column_sizes", "value_counts", "null_value_counts", "nan_value_counts", "lower_bounds",
                "upper_bounds", "key_metadata", "split_offsets", "equality_ids", "sort_order_id", "first_row_id",
                "referenced_data_file", "content_offset", "content_size_in_bytes"]
MANIFEST_COLUMNS = ["content", "path", "length", "partition_spec_id", "added_snapshot_id", "added_data_files_count",
                    "existing_data_files_count", "deleted_data_files_count", "added_delete_files_count",
                    "existing_delete_files_count", "deleted_delete_files_count", "partition_summaries"]
COLUMNS = {
    "snapshots": ["committed_at", "snapshot_id", "parent_id", "operation", "manifest_list", "summary"],
    "history": ["made_current_at", "snapshot_id", "parent_id", "is_current_ancestor"],
    "refs": ["name", "type", "snapshot_id", "max_reference_age_in_ms", "min_snapshots_to_keep",
             "max_snapshot_age_in_ms"],
    "manifests": MANIFEST_COLUMNS,
    "all_manifests": MANIFEST_COLUMNS + ["reference_snapshot_id"],
    "entries": ["status", "snapshot_id", "sequence_number", "file_sequence_number", "data_file"],
    "files": FILE_COLUMNS,
    "data_files": FILE_COLUMNS,
    "delete_files": FILE_COLUMNS,
    "partitions": ["partition", "spec_id", "record_count", "file_count", "total_data_file_size_in_bytes",
                   "position_delete_record_count", "position_delete_file_count", "equality_delete_record_count",
                   "equality_delete_file_count", "last_updated_at", "last_updated_snapshot_id"],
    "metadata_log_entries": ["timestamp", "file", "latest_snapshot_id", "latest_schema_id", "latest_sequence_number"],
    "log": ["position", "version", "type", "time", "actor", "message", "commit_id", "payload"],
}


def rows(ids, category, day=1) -> pa.Table:
    return pa.table({"id": pa.array(ids, pa.int64()), "category": [category] * len(ids),
                     "d": pa.array([dt.date(2024, 1, day)] * len(ids), pa.date32())}, schema=SCHEMA)


@pytest.fixture
def catalog(tmp_warehouse):
    cat = Catalog.open(tmp_warehouse)
    cat.create_namespace("db")
    yield cat
    cat.close()


@pytest.fixture
def table(catalog):
    t = catalog.create_table("db.t", schema=SCHEMA, partition_by=["category"])
    t.s1 = t.append(rows([1, 2, 3], "a"))
    t.s2 = t.append(rows([4, 5], "b"))
    t.set_properties({"write.delete.mode": "merge-on-read"})
    t.s3 = t.delete("id = 2")
    t.update_spec().add_field("d", "day").commit()
    t.s4 = t.append(rows([6], "a", day=7))
    return t


@pytest.mark.parametrize("kind", KINDS)
def test_column_names_and_order_are_javas(table, kind):
    assert inspect_kind(table, kind).column_names == COLUMNS[kind]


@pytest.mark.parametrize("kind", KINDS)
def test_a_table_without_snapshots_gives_empty_tables_with_full_schemas(catalog, kind):
    t = catalog.create_table("db.empty", schema=SCHEMA, partition_by=["category"])
    got = inspect_kind(t, kind)
    assert got.column_names == COLUMNS[kind]
    if kind not in ("metadata_log_entries", "log"):
        assert got.num_rows == 0
    else:
        assert got.num_rows == 1


def test_snapshots_rows(table):
    got = table.inspect.snapshots().to_pylist()
    snaps = table.snapshots()
    assert [r["snapshot_id"] for r in got] == [s.snapshot_id for s in snaps]
    assert [r["parent_id"] for r in got] == [s.parent_snapshot_id for s in snaps]
    assert [r["operation"] for r in got] == ["append", "append", "delete", "append"]
    assert [r["committed_at"] for r in got] == [
        dt.datetime.fromtimestamp(s.timestamp_ms / 1000, dt.timezone.utc) for s in snaps]
    assert all(os.path.exists(r["manifest_list"]) for r in got)
    assert dict(got[0]["summary"])["added-records"] == "3"
    assert "operation" not in dict(got[0]["summary"])


def test_history_marks_ancestors_of_the_current_snapshot(table):
    table.manage_snapshots().set_current_snapshot(table.s2.snapshot_id).commit()
    got = table.inspect.history().to_pylist()
    ids = [table.s1.snapshot_id, table.s2.snapshot_id, table.s3.snapshot_id, table.s4.snapshot_id,
           table.s2.snapshot_id]
    assert [r["snapshot_id"] for r in got] == ids
    assert [r["is_current_ancestor"] for r in got] == [True, True, False, False, True]
    assert got[2]["parent_id"] == table.s2.snapshot_id


def test_refs(table):
    table.manage_snapshots().create_tag(table.s1.snapshot_id, "v1").create_branch(
        table.s2.snapshot_id, "dev", max_ref_age_ms=1000).commit()
    got = table.inspect.refs().to_pylist()
    assert [(r["name"], r["type"], r["snapshot_id"], r["max_reference_age_in_ms"]) for r in got] == [
        ("dev", "BRANCH", table.s2.snapshot_id, 1000), ("main", "BRANCH", table.s4.snapshot_id, None),
        ("v1", "TAG", table.s1.snapshot_id, None)]


def test_files_split_by_content_with_unified_partitions(table):
    files = table.inspect.files().to_pylist()
    data = table.inspect.data_files().to_pylist()
    deletes = table.inspect.delete_files().to_pylist()
    assert len(files) == 4 and len(data) == 3 and len(deletes) == 1
    assert {f["file_path"] for f in files} == {f["file_path"] for f in data + deletes}
    assert deletes[0]["content"] == 1 and deletes[0]["record_count"] == 1
    assert sorted(((f["partition"]["category"], f["partition"]["d_day"], f["spec_id"]) for f in data), key=str) == [
        ("a", None, 0), ("a", dt.date(2024, 1, 7), 1), ("b", None, 0)]
    assert sum(f["record_count"] for f in data) == 6
    assert all(os.path.exists(f["file_path"]) for f in files)
    assert dict(data[0]["value_counts"])[1] == data[0]["record_count"]


def test_files_at_an_older_snapshot_and_unknown_snapshot(table):
    assert [f["record_count"] for f in table.inspect.files(snapshot_id=table.s1.snapshot_id).to_pylist()] == [3]
    with pytest.raises(ValidationError, match="Cannot inspect snapshot"):
        table.inspect.files(snapshot_id=12345)


def test_partitions_aggregate_data_and_delete_files(table):
    got = {(r["partition"]["category"], r["partition"]["d_day"]): r for r in table.inspect.partitions().to_pylist()}
    assert set(got) == {("a", None), ("b", None), ("a", dt.date(2024, 1, 7))}
    a = got[("a", None)]
    assert (a["record_count"], a["file_count"], a["position_delete_file_count"], a["position_delete_record_count"],
            a["equality_delete_file_count"], a["spec_id"]) == (3, 1, 1, 1, 0, 0)
    assert a["last_updated_snapshot_id"] == table.s3.snapshot_id
    new = got[("a", dt.date(2024, 1, 7))]
    assert (new["spec_id"], new["record_count"], new["last_updated_snapshot_id"]) == (1, 1, table.s4.snapshot_id)


def test_unpartitioned_table_has_no_partition_column(catalog):
    t = catalog.create_table("db.flat", schema=SCHEMA)
    t.append(rows([1, 2], "a"))
    t.append(rows([3], "b"))
    assert "partition" not in t.inspect.files().column_names
    data_file_type = t.inspect.entries().schema.field("data_file").type
    assert "partition" not in [f.name for f in data_file_type]
    parts = t.inspect.partitions().to_pylist()
    assert len(parts) == 1 and parts[0]["record_count"] == 3 and parts[0]["file_count"] == 2
    summaries = t.inspect.manifests().column("partition_summaries").to_pylist()
    assert summaries == [[], []]


def test_manifests_and_entries_come_from_the_published_files(table):
    manifests = table.inspect.manifests().to_pylist()
    assert sorted(m["content"] for m in manifests) == [0, 0, 0, 1]
    assert all(os.path.getsize(m["path"]) == m["length"] for m in manifests)
    delete_manifest = next(m for m in manifests if m["content"] == 1)
    assert (delete_manifest["added_delete_files_count"], delete_manifest["added_data_files_count"]) == (1, 0)
    assert delete_manifest["partition_summaries"] == [
        {"contains_null": False, "contains_nan": False, "lower_bound": "a", "upper_bound": "a"}]
    new = next(m for m in manifests if m["partition_spec_id"] == 1)
    assert new["partition_summaries"][1]["lower_bound"] == "2024-01-07"
    entries = table.inspect.entries().to_pylist()
    assert len(entries) == 4
    by_snapshot = {e["snapshot_id"]: e["sequence_number"] for e in entries}
    assert by_snapshot == {s.snapshot_id: s.sequence_number for s in (table.s1, table.s2, table.s3, table.s4)}


def test_entries_show_deleted_entries(catalog):
    t = catalog.create_table("db.cow", schema=SCHEMA, partition_by=["category"])
    t.append(rows([1], "a"))
    t.append(rows([2], "b"))
    s = t.delete("category = 'b'")
    statuses = sorted((e["status"], e["snapshot_id"] == s.snapshot_id) for e in t.inspect.entries().to_pylist())
    assert (2, True) in statuses
    assert len(t.inspect.files()) == 1


def test_all_manifests_lists_every_snapshot(table):
    got = table.inspect.all_manifests().to_pylist()
    per_snapshot = {}
    for r in got:
        per_snapshot.setdefault(r["reference_snapshot_id"], []).append(r["path"])
    assert set(per_snapshot) == {s.snapshot_id for s in table.snapshots()}
    assert len(per_snapshot[table.s1.snapshot_id]) == 1
    assert sorted(per_snapshot[table.s4.snapshot_id]) == sorted(
        m["path"] for m in table.inspect.manifests().to_pylist())


def test_metadata_log_entries(table):
    got = table.inspect.metadata_log_entries().to_pylist()
    assert got[-1]["file"] == table.metadata_location
    assert got[0]["latest_snapshot_id"] is None
    assert got[-1]["latest_snapshot_id"] == table.s4.snapshot_id
    assert got[-1]["latest_sequence_number"] == table.s4.sequence_number
    assert all(os.path.exists(r["file"]) for r in got)
    assert [r["timestamp"] for r in got] == sorted(r["timestamp"] for r in got)


def test_log_is_the_tables_event_stream(table):
    got = table.inspect.log().to_pylist()
    assert [r["version"] for r in got] == list(range(1, len(got) + 1))
    assert [r["position"] for r in got] == sorted(r["position"] for r in got)
    assert got[0]["type"] == "create-table"
    assert sum(r["type"] == "add-snapshot" for r in got) == 4
    assert all(isinstance(json.loads(r["payload"]), dict) for r in got)
    assert got[-1]["commit_id"] == table.snapshots()[-1].commit_id


def test_json_lines_for_the_cli(table):
    lines = list(to_json_lines(table.inspect.files()))
    first = json.loads(lines[0])
    assert first["file_path"] and isinstance(first["value_counts"], dict)
    assert isinstance(json.loads(next(to_json_lines(table.inspect.snapshots())))["committed_at"], str)
    with pytest.raises(ValidationError, match="unknown metadata table"):
        inspect_kind(table, "nope")


def test_partition_summaries_without_bounds_show_the_string_null(catalog):
    # Java's ManifestsTable renders a missing bound through the transform too, and every transform renders null
    # as "null": a partition of null values only, and a v1 void field
    null_bounds = [{"contains_null": True, "contains_nan": False, "lower_bound": "null", "upper_bound": "null"}]
    t = catalog.create_table("db.nulls", schema=SCHEMA, partition_by=["category"])
    t.append(rows([1], None))
    assert t.inspect.manifests().column("partition_summaries").to_pylist() == [null_bounds]
    assert t.inspect.all_manifests().column("partition_summaries").to_pylist() == [null_bounds]
    v1 = catalog.create_table("db.void", schema=SCHEMA, partition_by=["category"], format_version=1)
    v1.update_spec().remove_field("category").commit()  # v1 keeps the field, as void
    v1.append(rows([1], "a"))
    assert v1.inspect.manifests().column("partition_summaries").to_pylist() == [null_bounds]


def test_partitions_of_an_unpartitioned_table_have_javas_columns(catalog):
    # Java's PartitionsTable.schema() keeps neither partition nor spec_id for an unpartitioned table
    t = catalog.create_table("db.flat", schema=SCHEMA)
    t.append(rows([1, 2], "a"))
    got = t.inspect.partitions()
    assert got.column_names == COLUMNS["partitions"][2:]
    assert got.to_pylist()[0]["record_count"] == 2
    empty = catalog.create_table("db.flat_empty", schema=SCHEMA)
    assert empty.inspect.partitions().column_names == COLUMNS["partitions"][2:]


def test_entries_read_first_row_ids_as_javas_reader(catalog):
    # a v3 data manifest with only DELETED entries (a whole file deleted) has no first_row_id in icelog's list;
    # Java's reader (ManifestReader.idAssigner) then gives every entry of it a null first_row_id, and so does
    # entries(): Spark shows the same
    t = catalog.create_table("db.v3", schema=SCHEMA, partition_by=["category"], format_version=3)
    t.append(rows([1, 2], "a"))
    t.append(rows([3], "b"))
    t.delete("category = 'a'")
    got = {(e["status"], e["data_file"]["first_row_id"]) for e in t.inspect.entries().to_pylist()}
    assert got == {(2, None), (1, 2)}
    assert catalog.verify("db.v3") == []
