"""The CLI's operation commands against a real warehouse: each one commits and the table shows it."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from engine import Catalog
from tools.cli import main


def run(capsys, *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def wh(tmp_path, capsys):
    wh = str(tmp_path / "wh")
    a, b = tmp_path / "a.parquet", tmp_path / "b.parquet"
    pq.write_table(pa.table({"id": pa.array([1, 2], pa.int64()), "cat": ["a", "a"]}), a)
    pq.write_table(pa.table({"id": pa.array([3, 4], pa.int64()), "cat": ["b", "b"]}), b)
    assert run(capsys, "--warehouse", wh, "create-namespace", "db")[0] == 0
    assert run(capsys, "--warehouse", wh, "create-table", "db.t", "--schema-from", str(a),
               "--partition-by", "cat")[0] == 0
    assert run(capsys, "--warehouse", wh, "append", "db.t", str(a), str(b))[0] == 0
    return wh


def ids(wh: str, where: str | None = None) -> list[int]:
    with Catalog.open(wh) as cat:
        return sorted(cat.load_table("db.t").scan(where=where).to_arrow().column("id").to_pylist())


def test_delete_overwrite_and_dynamic_overwrite(wh, tmp_path, capsys):
    code, out, _ = run(capsys, "--warehouse", wh, "delete", "db.t", "--where", "id = 1")
    assert code == 0 and "delete" in out and ids(wh) == [2, 3, 4]
    new = tmp_path / "new.parquet"
    pq.write_table(pa.table({"id": pa.array([10], pa.int64()), "cat": ["b"]}), new)
    assert run(capsys, "--warehouse", wh, "overwrite", "db.t", str(new), "--where", "cat = 'b'")[0] == 0
    assert ids(wh) == [2, 10]
    other = tmp_path / "other.parquet"
    pq.write_table(pa.table({"id": pa.array([20], pa.int64()), "cat": ["a"]}), other)
    assert run(capsys, "--warehouse", wh, "dynamic-overwrite", "db.t", str(other))[0] == 0
    assert ids(wh) == [10, 20]
    code, _, err = run(capsys, "--warehouse", wh, "delete", "db.t", "--where", "nosuch = 1")
    assert code == 1 and "nosuch" in err


def test_schema_partition_sort_and_properties(wh, capsys):
    assert run(capsys, "--warehouse", wh, "add-column", "db.t", "note", "string", "--doc", "free text")[0] == 0
    assert run(capsys, "--warehouse", wh, "rename-column", "db.t", "note", "comment")[0] == 0
    assert run(capsys, "--warehouse", wh, "update-column", "db.t", "comment", "--doc", "changed")[0] == 0
    assert run(capsys, "--warehouse", wh, "add-partition-field", "db.t", "bucket(4, id)")[0] == 0
    assert run(capsys, "--warehouse", wh, "rename-partition-field", "db.t", "cat", "category")[0] == 0
    assert run(capsys, "--warehouse", wh, "set-sort-order", "db.t", "id DESC")[0] == 0
    assert run(capsys, "--warehouse", wh, "set-properties", "db.t", "owner=etl", "team=data")[0] == 0
    assert run(capsys, "--warehouse", wh, "remove-properties", "db.t", "team")[0] == 0
    assert run(capsys, "--warehouse", wh, "drop-column", "db.t", "comment")[0] == 0
    with Catalog.open(wh) as cat:
        t = cat.load_table("db.t")
        assert [f.name for f in t.schema().columns] == ["id", "cat"]
        assert [f.name for f in t.spec().fields] == ["category", "id_bucket_4"]
        assert t.state.sort_order.order_id != 0
        assert t.properties["owner"] == "etl" and "team" not in t.properties
    code, _, err = run(capsys, "--warehouse", wh, "update-column", "db.t", "id", "--type", "int")
    assert code == 1 and "id" in err
    code, _, err = run(capsys, "--warehouse", wh, "drop-column", "db.t", "cat")
    assert code == 1 and "partition" in err


def test_upgrade_format_version(tmp_path, capsys):
    wh = str(tmp_path / "wh")
    batch = tmp_path / "b.parquet"
    pq.write_table(pa.table({"id": pa.array([1], pa.int64())}), batch)
    run(capsys, "--warehouse", wh, "create-namespace", "db")
    run(capsys, "--warehouse", wh, "create-table", "db.v1", "--schema-from", str(batch), "--format-version", "1")
    assert run(capsys, "--warehouse", wh, "upgrade-format-version", "db.v1", "2")[0] == 0
    with Catalog.open(wh) as cat:
        t = cat.load_table("db.v1")
        assert t.state.format_version == 2
        assert json.load(open(t.metadata_location))["format-version"] == 2


def test_refs_rollback_and_expiry(wh, tmp_path, capsys):
    with Catalog.open(wh) as cat:
        first = cat.load_table("db.t").current_snapshot().snapshot_id
    assert run(capsys, "--warehouse", wh, "create-tag", "db.t", "v1")[0] == 0
    assert run(capsys, "--warehouse", wh, "create-branch", "db.t", "audit")[0] == 0
    assert run(capsys, "--warehouse", wh, "delete", "db.t", "--where", "id = 1", "--branch", "audit")[0] == 0
    assert ids(wh) == [1, 2, 3, 4]  # main untouched
    assert run(capsys, "--warehouse", wh, "fast-forward", "db.t", "main", "audit")[0] == 0
    assert ids(wh) == [2, 3, 4]
    code, out, _ = run(capsys, "--warehouse", wh, "rollback", "db.t", str(first))
    assert code == 0 and str(first) in out and ids(wh) == [1, 2, 3, 4]
    assert run(capsys, "--warehouse", wh, "remove-branch", "db.t", "audit")[0] == 0
    assert run(capsys, "--warehouse", wh, "remove-tag", "db.t", "v1")[0] == 0
    code, _, err = run(capsys, "--warehouse", wh, "remove-branch", "db.t", "nosuch")
    assert code == 1 and "nosuch" in err
    code, out, _ = run(capsys, "--warehouse", wh, "expire-snapshots", "db.t")        # defaults: 5 days
    assert code == 0 and out.startswith("expire snapshots: nothing expired") and "--older-than-ms" in out
    code, out, _ = run(capsys, "--warehouse", wh, "expire-snapshots", "db.t", "--older-than-ms", str(2**62),
                       "--retain-last", "1", "--json")
    expired = json.loads(out)
    assert code == 0 and len(expired["expired_snapshot_ids"]) >= 1 and expired["deleted_files"]["manifest_lists"] >= 1
    with Catalog.open(wh) as cat:
        t = cat.load_table("db.t")
        assert [s.snapshot_id for s in t.snapshots()] == [first]
        assert cat.verify("db.t") == []
    code, out, err = run(capsys, "--warehouse", wh, "remove-orphan-files", "db.t", "--older-than-ms", str(2**62))
    assert code == 0 and "orphan" in err
    assert ids(wh) == [1, 2, 3, 4]


def test_upsert_delete_by_key_compact_and_rewrite_manifests(wh, tmp_path, capsys):
    changes = tmp_path / "changes.parquet"
    pq.write_table(pa.table({"id": pa.array([2, 9], pa.int64()), "cat": ["a", "a"]}), changes)
    code, out, _ = run(capsys, "--warehouse", wh, "upsert", "db.t", str(changes), "--key", "id", "--key", "cat")
    assert code == 0 and "upsert" in out and ids(wh) == [1, 2, 3, 4, 9]
    keys = tmp_path / "keys.parquet"
    pq.write_table(pa.table({"id": pa.array([9], pa.int64()), "cat": ["a"]}), keys)
    assert run(capsys, "--warehouse", wh, "delete-by-key", "db.t", str(keys), "--key", "id", "--key", "cat")[0] == 0
    assert ids(wh) == [1, 2, 3, 4]
    code, out, _ = run(capsys, "--warehouse", wh, "compact", "db.t", "--strategy", "sort", "--sort-by", "id DESC")
    assert code == 0 and out.startswith("compact db.t: snapshot ") and "(replace)" in out and ids(wh) == [1, 2, 3, 4]
    with Catalog.open(wh) as cat:
        t = cat.load_table("db.t")
        assert t.current_snapshot().operation == "replace"
        assert t.current_snapshot().summary_value("total-delete-files") == "0"
    assert run(capsys, "--warehouse", wh, "rewrite-manifests", "db.t")[0] == 0
    assert ids(wh) == [1, 2, 3, 4]
    code, _, err = run(capsys, "--warehouse", wh, "upsert", "db.t", str(changes), "--key", "nosuch")
    assert code == 1 and "nosuch" in err


def test_inspect_prints_metadata_tables(wh, capsys):
    code, out, _ = run(capsys, "--warehouse", wh, "inspect", "db.t", "files")
    rows = [json.loads(line) for line in out.splitlines()]
    assert code == 0 and sorted(r["record_count"] for r in rows) == [2, 2]
    code, out, _ = run(capsys, "--warehouse", wh, "inspect", "db.t", "snapshots")
    assert code == 0 and json.loads(out.splitlines()[0])["operation"] == "append"


def test_register_takes_over_a_table(wh, tmp_path, capsys):
    source = f"{wh}/db/t"
    other = str(tmp_path / "other")
    assert run(capsys, "--warehouse", other, "create-namespace", "db")[0] == 0
    code, out, _ = run(capsys, "--warehouse", other, "register", "db.copy", source)  # in place
    assert code == 0 and "registered db.copy" in out
    with Catalog.open(other) as cat:
        assert sorted(cat.load_table("db.copy").scan().to_arrow().column("id").to_pylist()) == [1, 2, 3, 4]
    third = str(tmp_path / "third")
    assert run(capsys, "--warehouse", third, "create-namespace", "db")[0] == 0
    code, out, _ = run(capsys, "--warehouse", third, "register", "db.copy", source,
                       "--location", str(tmp_path / "copy"))  # or with icelog's metadata in a folder of its own
    assert code == 0 and "registered db.copy" in out


def test_rename_and_drop_table(wh, capsys):
    assert run(capsys, "--warehouse", wh, "rename-table", "db.t", "db.renamed")[0] == 0
    code, out, _ = run(capsys, "--warehouse", wh, "tables")
    assert out.split() == ["db.renamed"]
    assert run(capsys, "--warehouse", wh, "drop-table", "db.renamed")[0] == 0
    code, _, err = run(capsys, "--warehouse", wh, "drop-table", "db.renamed")
    assert code == 1 and "db.renamed" in err


def test_a_required_column_needs_a_default_or_an_explicit_allowance(tmp_path, capsys):
    from pyiceberg.table import StaticTable

    from engine import Catalog

    wh = str(tmp_path / "wh")
    with Catalog.open(wh) as cat:
        cat.create_namespace("db")
        t = cat.create_table("db.t", pa.schema([("id", pa.int64())]), format_version=3)
        t.append(pa.table({"id": pa.array([1, 2], pa.int64())}))
        head = cat.log.head(t.uuid)
    code, _, err = run(capsys, "--warehouse", wh, "add-column", "db.t", "k", "long", "--required")
    assert code == 1 and "rows already written have no value" in err and "allow_incompatible_changes" in err
    code, _, err = run(capsys, "--warehouse", wh, "add-column", "db.t", "k", "long", "--required", "--default", "x")
    assert code == 1 and "--default must be a JSON value" in err
    with Catalog.open(wh) as cat:
        assert cat.log.head(cat.load_table("db.t").uuid) == head       # nothing committed
    assert run(capsys, "--warehouse", wh, "add-column", "db.t", "k", "long", "--required", "--default", "7")[0] == 0
    with Catalog.open(wh) as cat:
        t = cat.load_table("db.t")
        ours = sorted(t.scan().to_arrow().to_pylist(), key=lambda r: r["id"])
        assert ours == [{"id": 1, "k": 7}, {"id": 2, "k": 7}]           # old rows read the default
        theirs = StaticTable.from_metadata(t.metadata_location).scan().to_arrow().to_pylist()
        assert sorted(theirs, key=lambda r: r["id"]) == ours            # and PyIceberg agrees
    code, _, _ = run(capsys, "--warehouse", wh, "add-column", "db.t", "j", "long", "--required",
                     "--allow-incompatible-changes")
    assert code == 0


def test_log_shows_each_events_operation_and_what_it_changed(wh, capsys):
    assert run(capsys, "--warehouse", wh, "delete", "db.t", "--where", "id = 1")[0] == 0
    code, out, _ = run(capsys, "--warehouse", wh, "log", "db.t")
    last = out.strip().splitlines()[-1].split("\t")
    assert code == 0 and last[2] == "add-snapshot" and last[3] in ("delete", "overwrite")
    assert "-1 rows" in last[7] or "-1 data files" in last[7]  # a delete no longer looks like an append
