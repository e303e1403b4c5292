"""Every command that changes a table tells what it changed, through the installed ``icelog`` script: one line
(operation, snapshot id, files and rows added and removed, or the metadata it changed), or with ``--json`` the same
facts as one JSON object; a refused command prints nothing on stdout and commits nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from engine import Catalog

ICELOG = os.path.join(os.path.dirname(sys.executable), "icelog")


def icelog(warehouse: Path, *args: str, ok: bool = True) -> subprocess.CompletedProcess:
    done = subprocess.run([ICELOG, "--warehouse", str(warehouse), *args], capture_output=True, text=True,
                          timeout=120)
    assert (done.returncode == 0) == ok, (done.stdout, done.stderr)
    return done


def facts(warehouse: Path, *args: str) -> dict:
    out = icelog(warehouse, *args, "--json").stdout
    assert len(out.splitlines()) == 1
    return json.loads(out)


def state(warehouse: Path):
    with Catalog.open(warehouse) as cat:
        return cat.load_table("db.t").state


@pytest.fixture
def files(tmp_path: Path) -> dict[str, str]:
    out = {}
    for name, ids, cat in (("a", [1, 2], "a"), ("b", [3, 4], "b"), ("c", [5], "b")):
        out[name] = str(tmp_path / f"{name}.parquet")
        pq.write_table(pa.table({"id": pa.array(ids, pa.int64()), "cat": [cat] * len(ids)}), out[name])
    return out


def test_row_commands_tell_operation_snapshot_files_and_rows(tmp_path: Path, files: dict[str, str]) -> None:
    wh = tmp_path / "wh"
    assert icelog(wh, "create-namespace", "db").stdout == "created namespace db\n"
    created = facts(wh, "create-table", "db.t", "--schema-from", files["a"], "--partition-by", "cat")
    assert created["table"] == "db.t" and created["log_version"] == state(wh).version

    line = icelog(wh, "append", "db.t", files["a"], files["b"]).stdout
    snapshot = state(wh).snapshots[-1]
    assert line.startswith(f"append db.t: snapshot {snapshot.snapshot_id} (append): +2 data files, +4 rows")

    replaced = facts(wh, "overwrite", "db.t", files["c"], "--where", "cat = 'b'")
    assert replaced["command"] == "overwrite" and replaced["operation"] == "overwrite"
    assert replaced["snapshot_id"] == state(wh).snapshots[-1].snapshot_id and replaced["branches"] == ["main"]
    assert (replaced["data_files_added"], replaced["data_files_removed"]) == (1, 1)
    assert (replaced["rows_added"], replaced["rows_removed"]) == (1, 2)
    assert (replaced["total_rows"], replaced["total_data_files"]) == (3, 2)

    icelog(wh, "set-properties", "db.t", "write.delete.mode=merge-on-read")
    deleted = facts(wh, "delete", "db.t", "--where", "id = 1")
    assert deleted["operation"] == "delete" and deleted["delete_files_added"] == 1
    assert deleted["position_deletes_added"] == 1 and deleted["rows_added"] == 0

    compacted = icelog(wh, "compact", "db.t").stdout
    after = state(wh)
    # partition a's file and its delete file become one file; partition b's single file stays
    assert compacted == (f"compact db.t: snapshot {after.snapshots[-1].snapshot_id} (replace): +1 data files, "
                         f"-1 data files, -1 delete files, +1 rows, -2 rows, -1 position deletes\n")

    nothing = facts(wh, "delete", "db.t", "--where", "id = 999")
    assert nothing["snapshot_id"] is None and nothing["changes"] == [] and nothing["log_version"] == after.version
    assert icelog(wh, "delete", "db.t", "--where", "id = 999").stdout == "delete db.t: nothing changed\n"


def test_metadata_commands_say_what_changed(tmp_path: Path, files: dict[str, str]) -> None:
    wh = tmp_path / "wh"
    icelog(wh, "create-namespace", "db")
    icelog(wh, "create-table", "db.t", "--schema-from", files["a"], "--partition-by", "cat")
    icelog(wh, "append", "db.t", files["a"])
    first = state(wh).snapshots[-1].snapshot_id
    told = {args[0]: icelog(wh, *args).stdout.strip() for args in (
        ("add-column", "db.t", "note", "string"),
        ("rename-column", "db.t", "note", "comment"),
        ("update-column", "db.t", "comment", "--doc", "free text"),
        ("drop-column", "db.t", "comment"),
        ("add-partition-field", "db.t", "bucket(4, id)"),
        ("rename-partition-field", "db.t", "cat", "category"),
        ("set-sort-order", "db.t", "id DESC"),
        ("set-properties", "db.t", "owner=etl"),
        ("remove-properties", "db.t", "owner"),
        ("create-branch", "db.t", "audit"),
    )}
    assert told == {
        # the table has a name mapping (its files came without field ids): the schema commits update it too
        "add-column": "add-column db.t: added column note string (id 3); schema 1; set schema.name-mapping.default",
        "rename-column": "rename-column db.t: renamed column note to comment (id 3); schema 2; "
                         "set schema.name-mapping.default",
        "update-column": "update-column db.t: column comment (id 3) doc 'free text'; schema 3",
        "drop-column": "drop-column db.t: dropped column comment (id 3); schema 0",  # the same as schema 0
        "add-partition-field": "add-partition-field db.t: added partition field id_bucket_4 (bucket[4]) (id 1001); "
                               "spec 1",
        "rename-partition-field": "rename-partition-field db.t: renamed partition field cat to category; spec 2",
        "set-sort-order": "set-sort-order db.t: sort order 1: id desc nulls-last",
        "set-properties": "set-properties db.t: set owner=etl",
        "remove-properties": "remove-properties db.t: removed property owner",
        "create-branch": f"create-branch db.t: created branch audit at {first}",
    }
    icelog(wh, "append", "db.t", files["c"])
    rolled = facts(wh, "rollback", "db.t", str(first))
    assert rolled["snapshot_id"] is None
    assert rolled["changes"] == [f"branch main moved from {state(wh).snapshots[-1].snapshot_id} to {first}"]
    dropped = facts(wh, "drop-table", "db.t")
    assert dropped["command"] == "drop-table" and dropped["log_version"] is None and dropped["files_deleted"] == 0


def test_a_refused_command_prints_no_report_and_commits_nothing(tmp_path: Path, files: dict[str, str]) -> None:
    wh = tmp_path / "wh"
    icelog(wh, "create-namespace", "db")
    icelog(wh, "create-table", "db.t", "--schema-from", files["a"])
    before = state(wh).version
    refused = icelog(wh, "add-column", "db.t", "id", "long", "--json", ok=False)
    assert refused.stdout == "" and len(refused.stderr.splitlines()) == 1 and "id" in refused.stderr
    assert state(wh).version == before


def test_input_errors_name_the_operation_and_a_missing_file(tmp_path: Path, files: dict[str, str]) -> None:
    wh = tmp_path / "wh"
    icelog(wh, "create-namespace", "db")
    icelog(wh, "create-table", "db.t", "--schema-from", files["a"])
    stray = str(tmp_path / "stray.parquet")
    pq.write_table(pa.table({"id": pa.array([9], pa.int64()), "cat": ["a"], "stray": [1]}), stray)
    missing = str(tmp_path / "nope.parquet")
    before = state(wh).version
    for args, message in (
            (("overwrite", "db.t", stray), "Cannot overwrite: column(s) 'stray' are not in the table schema (cat, id)"),
            (("dynamic-overwrite", "db.t", stray), "Cannot dynamic overwrite: column(s) 'stray' are not in the table "
                                                   "schema (cat, id)"),
            (("upsert", "db.t", stray, "--key", "id"), "Cannot upsert: column(s) 'stray' are not in the table schema "
                                                      "(cat, id)"),
            (("overwrite", "db.t", missing), f"Cannot read file: {missing} does not exist"),
            (("append", "db.t", missing), f"Cannot append file: {missing} does not exist"),
            (("create-table", "db.u", "--schema-from", missing), f"Cannot read file: {missing} does not exist")):
        refused = icelog(wh, *args, ok=False)
        assert (refused.stdout, refused.stderr) == ("", f"icelog: {message}\n")
    assert state(wh).version == before
