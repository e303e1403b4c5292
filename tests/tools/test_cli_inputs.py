"""The CLI's inputs at their edges, through the installed ``icelog`` script: a limit of 0, a snapshot id of 0, a
port out of range, a copy from a log that is not there, empty column lists and empty maps, and floats JSON has no
number for. A refused command prints one line naming the culprit on stderr, exits 1 and commits nothing."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pyarrow as pa
import pytest

from engine import Catalog
from tests.tools.test_cli_change_reports import ICELOG, icelog, state


def strict_json(line: str) -> dict:
    """``line`` parsed as RFC 8259 JSON: NaN, Infinity and -Infinity tokens are refused."""
    def refuse(token: str) -> None:
        raise ValueError(f"not JSON: {token}")
    return json.loads(line, parse_constant=refuse)


def refused(warehouse: Path, *args: str) -> str:
    """Run a command that must be refused; its one stderr line (stdout must be empty)."""
    done = icelog(warehouse, *args, ok=False)
    assert done.returncode == 1 and done.stdout == "", (done.stdout, done.stderr)
    assert len(done.stderr.splitlines()) == 1, done.stderr
    return done.stderr


@pytest.fixture
def wh(tmp_path: Path) -> Path:
    """db.t holding ids 1..3 (and floats 0.5, NaN, Infinity) in one snapshot."""
    warehouse = tmp_path / "wh"
    rows = pa.table({"id": pa.array([1, 2, 3], pa.int64()), "x": [0.5, float("nan"), float("inf")]})
    with Catalog.open(warehouse, create=True) as cat:
        cat.create_namespace("db")
        cat.create_table("db.t", rows.schema).append(rows)
    return warehouse


def test_scan_limit_zero_prints_no_row_and_a_negative_limit_is_refused(wh: Path) -> None:
    done = icelog(wh, "scan", "db.t", "--limit", "0")
    assert done.stdout == "" and "(0 of 3 row(s))" in done.stderr
    done = icelog(wh, "scan", "db.t", "--limit", "2")
    assert len(done.stdout.splitlines()) == 2 and "(2 of 3 row(s))" in done.stderr   # the count says what it printed
    assert "--limit" in refused(wh, "scan", "db.t", "--limit", "-1")


def test_scan_refuses_empty_column_names(wh: Path) -> None:
    assert "--columns" in refused(wh, "scan", "db.t", "--columns", "")
    assert "--columns" in refused(wh, "scan", "db.t", "--columns", "id,")


def test_a_ref_at_snapshot_id_zero_is_refused_and_commits_nothing(wh: Path) -> None:
    before = state(wh).version
    for command in ("create-branch", "create-tag"):
        assert "snapshot 0" in refused(wh, command, "db.t", "r0", "--snapshot-id", "0")
    assert state(wh).version == before


def test_scan_and_inspect_write_nan_and_infinity_as_strings(wh: Path) -> None:
    rows = [strict_json(line) for line in icelog(wh, "scan", "db.t", "--columns", "id,x").stdout.splitlines()]
    assert sorted((r["id"], r["x"]) for r in rows) == [(1, 0.5), (2, "NaN"), (3, "Infinity")]
    with Catalog.open(wh) as cat:
        cat.create_table("db.p", pa.schema([("x", pa.float64())]), partition_by=["x"]).append(
            pa.table({"x": [float("nan"), float("-inf")]}))
    for kind in ("partitions", "files"):
        lines = icelog(wh, "inspect", "db.p", kind).stdout.splitlines()
        partitions = sorted(str(strict_json(line)["partition"]["x"]) for line in lines)
        assert partitions == ["-Infinity", "NaN"], (kind, lines)


def test_inspect_writes_an_empty_map_as_an_object(wh: Path) -> None:
    with Catalog.open(wh) as cat:   # no float column: no NaN counts, an empty map
        cat.create_table("db.i", pa.schema([("id", pa.int64())])).append(pa.table({"id": pa.array([1], pa.int64())}))
    row = strict_json(icelog(wh, "inspect", "db.i", "files").stdout.splitlines()[0])
    assert row["column_sizes"] == {"1": row["column_sizes"]["1"]} and row["nan_value_counts"] == {}
    entry = strict_json(icelog(wh, "inspect", "db.i", "entries").stdout.splitlines()[0])
    assert entry["data_file"]["nan_value_counts"] == {} and isinstance(entry["data_file"]["value_counts"], dict)


def test_log_copy_refuses_a_missing_source_and_creates_nothing(tmp_path: Path, wh: Path) -> None:
    missing, target = tmp_path / "warehuose", tmp_path / "copy.db"
    assert str(missing) in refused(wh, "log", "copy", str(missing), str(target))
    assert not missing.exists() and not target.exists()
    assert str(tmp_path) in refused(wh, "log", "copy", str(tmp_path), str(target))   # a folder without catalog.db
    assert not (tmp_path / "catalog.db").exists()


@pytest.mark.parametrize("port", ["99999", "65536", "-1", "http"])
def test_serve_refuses_a_port_out_of_range_before_starting(wh: Path, port: str) -> None:
    done = subprocess.run([ICELOG, "--warehouse", str(wh), "serve", "--token", "t", "--port", port],
                          capture_output=True, text=True, timeout=30)
    assert done.returncode != 0 and done.stdout == "" and "--port" in done.stderr, (done.stdout, done.stderr)


def test_snapshots_of_a_missing_table_prints_no_header(wh: Path) -> None:
    assert "db.nope" in refused(wh, "snapshots", "db.nope")


def test_expire_snapshots_json_names_its_command_and_table(wh: Path) -> None:
    facts = json.loads(icelog(wh, "expire-snapshots", "db.t", "--json").stdout)
    assert facts["command"] == "expire-snapshots" and facts["table"] == "db.t" and facts["expired_snapshot_ids"] == []


def test_create_branch_on_an_empty_table_works_as_in_the_api(wh: Path) -> None:
    """The CLI passes "no snapshot id" on: on a table with no snapshot the branch starts at a new empty one, as
    ManageSnapshots.create_branch does (Java's createBranch)."""
    with Catalog.open(wh) as cat:
        cat.create_table("db.empty", pa.schema([("id", pa.int64())]))
    icelog(wh, "create-branch", "db.empty", "audit")
    with Catalog.open(wh) as cat:
        t = cat.load_table("db.empty")
        assert t.state.ref("audit") is not None and t.state.ref("main") is None
