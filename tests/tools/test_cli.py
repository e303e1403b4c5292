"""The icelog CLI: every command against a real warehouse, errors as one line and exit 1, and README coverage."""

from __future__ import annotations

import json
import os
import re

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tools.cli import build_parser, main

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def run(capsys, *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def data_file(tmp_path):
    path = tmp_path / "batch.parquet"
    pq.write_table(pa.table({"id": pa.array([1, 2, 3], pa.int64()), "name": ["a", "b", "c"]}), path)
    return str(path)


@pytest.fixture
def second_file(tmp_path):
    path = tmp_path / "batch2.parquet"
    pq.write_table(pa.table({"id": pa.array([2, 3, 4], pa.int64()), "name": ["b", "c", "d"]}), path)
    return str(path)


def test_cli_end_to_end(tmp_path, capsys, data_file, second_file):
    wh = str(tmp_path / "wh")
    assert run(capsys, "--warehouse", wh, "create-namespace", "db")[0] == 0
    code, out, _ = run(capsys, "--warehouse", wh, "create-table", "db.t", "--schema-from", data_file)
    assert code == 0 and out.startswith("create-table db.t: created at ")
    code, out, _ = run(capsys, "--warehouse", wh, "append", "db.t", data_file, second_file)
    assert code == 0 and "(append): +2 data files, +6 rows" in out
    code, out, _ = run(capsys, "--warehouse", wh, "tables")
    assert out.split() == ["db.t"]
    code, out, _ = run(capsys, "--warehouse", wh, "log", "db.t")
    lines = out.strip().splitlines()
    assert lines[0].split("\t") == ["position", "version", "type", "operation", "actor", "time", "commit_id",
                                    "summary"]
    assert [line.split("\t")[2] for line in lines[1:]] == ["create-table", "set-properties", "add-snapshot"]
    snapshot = lines[-1].split("\t")
    assert snapshot[3] == "append" and snapshot[7] == "+2 data files, +6 rows"   # an append tells itself apart
    code, out, _ = run(capsys, "--warehouse", wh, "snapshots", "db.t")
    assert len(out.strip().splitlines()) == 2 and "\tappend\t6\t2" in out
    code, out, err = run(capsys, "--warehouse", wh, "scan", "db.t", "--where", "id >= 2", "--columns", "id")
    assert sorted(json.loads(line)["id"] for line in out.splitlines()) == [2, 2, 3, 3, 4]
    assert "(5 row(s))" in err
    into = str(tmp_path / "rebuilt")
    code, out, _ = run(capsys, "--warehouse", wh, "rebuild", "db.t", "--into", into)
    assert code == 0 and os.path.exists(os.path.join(into, "metadata", "version-hint.text"))
    code, out, _ = run(capsys, "--warehouse", wh, "verify", "db.t")
    assert code == 0 and out.startswith("ok")


def test_cli_errors_are_one_line_and_exit_1(tmp_path, capsys, data_file):
    wh = str(tmp_path / "wh")
    code, out, err = run(capsys, "--warehouse", wh, "append", "db.missing", data_file)
    assert code == 1 and err.count("\n") == 1 and f"there is none at {wh}" in err  # a typo never makes a catalog
    assert not os.path.exists(wh)
    run(capsys, "--warehouse", wh, "create-namespace", "db")
    code, out, err = run(capsys, "--warehouse", wh, "append", "db.missing", data_file)
    assert code == 1 and err.count("\n") == 1 and "db.missing" in err
    run(capsys, "--warehouse", wh, "create-table", "db.t", "--schema-from", data_file)
    code, _, err = run(capsys, "--warehouse", wh, "append", "db.t", str(tmp_path / "absent.parquet"))
    assert code == 1 and "absent.parquet" in err
    code, _, err = run(capsys, "--warehouse", wh, "append", "db.t", data_file, data_file)
    assert code == 1 and "listed twice" in err
    code, _, err = run(capsys, "--warehouse", wh, "scan", "db.t", "--where", "nosuch = 1")
    assert code == 1 and "nosuch" in err
    code, _, err = run(capsys, "--warehouse", wh, "create-table", "db.u", "--schema", "{not json")
    assert code == 1 and "--schema" in err


def test_verify_exits_1_on_tampering(tmp_path, capsys, data_file):
    wh = str(tmp_path / "wh")
    run(capsys, "--warehouse", wh, "create-namespace", "db")
    run(capsys, "--warehouse", wh, "create-table", "db.t", "--schema-from", data_file)
    run(capsys, "--warehouse", wh, "append", "db.t", data_file)
    hint = os.path.join(wh, "db", "t", "metadata", "version-hint.text")
    meta = os.path.join(wh, "db", "t", "metadata", f"v{open(hint).read()}.metadata.json")
    with open(meta, "ab") as f:
        f.write(b" ")
    code, out, _ = run(capsys, "--warehouse", wh, "verify", "db.t")
    assert code == 1 and "differs" in out


def test_every_cli_command_is_in_the_readme():
    readme = open(os.path.join(ROOT, "README.md"), encoding="utf-8").read()
    parser = build_parser()
    commands = next(a for a in parser._actions if a.dest == "command").choices
    missing = [c for c in commands if not re.search(rf"icelog[^\n`]* {re.escape(c)}\b", readme)]
    assert missing == []
    for name, sub in commands.items():
        assert sub.description, f"{name} has no help text"


def test_cli_deep_filter_exits_1_with_one_line(tmp_path, capsys, data_file):
    wh = str(tmp_path / "wh")
    run(capsys, "--warehouse", wh, "create-namespace", "db")
    run(capsys, "--warehouse", wh, "create-table", "db.t", "--schema-from", data_file)
    run(capsys, "--warehouse", wh, "append", "db.t", data_file)
    deep = "(" * 5000 + "id = 1" + ")" * 5000
    code, out, err = run(capsys, "--warehouse", wh, "scan", "db.t", "--where", deep)
    assert code == 1 and out == ""
    assert err.count("\n") == 1 and "limit of 200" in err and "Traceback" not in err and len(err) < 1000
    wide = " or ".join(f"id = {i}" for i in range(2000))
    code, out, err = run(capsys, "--warehouse", wh, "scan", "db.t", "--where", wide, "--columns", "id")
    assert code == 0 and sorted(json.loads(line)["id"] for line in out.splitlines()) == [1, 2, 3]


def test_log_copy_moves_a_catalog_log_to_postgresql_and_back(tmp_path, capsys, data_file, postgres_url):
    wh = str(tmp_path / "wh")
    assert run(capsys, "--warehouse", wh, "create-namespace", "db")[0] == 0
    assert run(capsys, "--warehouse", wh, "create-table", "db.t", "--schema-from", data_file)[0] == 0
    assert run(capsys, "--warehouse", wh, "append", "db.t", data_file)[0] == 0
    code, out, _ = run(capsys, "log", "copy", wh, postgres_url)
    assert code == 0 and "the copy verifies" in out
    events = int(out.split()[1])
    from engine import Catalog

    with Catalog.open(postgres_url, warehouse=wh) as moved:  # the catalog now runs on the copy
        table = moved.load_table("db.t")
        table.publish()                                          # the derived tables rebuilt from the log
        assert moved.verify("db.t") == [] and table.scan().count() == 3
    code, back, _ = run(capsys, "log", "copy", postgres_url, str(tmp_path / "back.db"))
    assert code == 0 and back.split()[1] == str(events) and back.split()[-4] == out.split()[-4]  # the same head
    code, _, err = run(capsys, "log", "copy", wh, postgres_url)  # the target holds events now
    assert code == 1 and "already holds events" in err
    code, _, err = run(capsys, "--warehouse", wh, "log", "copy", wh)
    assert code == 1 and "give SRC and DST" in err


def test_the_cli_keeps_a_catalog_log_in_postgresql(tmp_path, capsys, data_file, postgres_url):
    wh = str(tmp_path / "lake")
    base = ["--warehouse", wh, "--catalog-dir", postgres_url]
    assert run(capsys, *base, "create-namespace", "db")[0] == 0
    assert run(capsys, *base, "create-table", "db.t", "--schema-from", data_file)[0] == 0
    assert run(capsys, *base, "append", "db.t", data_file)[0] == 0
    code, out, _ = run(capsys, *base, "tables")
    assert code == 0 and out.split() == ["db.t"]
    code, out, _ = run(capsys, *base, "verify", "db.t")
    assert code == 0 and out.startswith("ok")
    assert not os.path.exists(os.path.join(wh, "catalog.db"))  # the log is in the database, not beside the tables


def test_catalog_options_are_taken_before_or_after_the_subcommand(tmp_path, capsys, data_file):
    wh = str(tmp_path / "wh")
    assert run(capsys, "create-namespace", "db", "--warehouse", wh)[0] == 0
    assert run(capsys, "create-table", "db.t", "--schema-from", data_file, "--warehouse", wh)[0] == 0
    code, out, _ = run(capsys, "tables", "--warehouse", wh)
    assert code == 0 and out.split() == ["db.t"]
    code, out, _ = run(capsys, "--warehouse", str(tmp_path / "elsewhere"), "tables", "--warehouse", wh)
    assert code == 0 and out.split() == ["db.t"]                    # after the subcommand, it wins
    code, _, err = run(capsys, "tables", "--warehouse", str(tmp_path / "typo"))
    assert code == 1 and "there is none at" in err
    assert run(capsys, "tables", "--warehouse", str(tmp_path / "new"), "--create")[0] == 0
