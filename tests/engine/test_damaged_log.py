"""A damaged log says so: an empty or foreign catalog file is refused, a flipped byte is an IntegrityError naming
the position, verify reports gaps and a projection behind the log, and `icelog publish` catches it up (issue 9,
point 6).

Layer: tests. Real SQLite files, damaged with real byte flips after the catalog is closed (its WAL checkpointed).
"""

from __future__ import annotations

import os
import sqlite3
import time
from pathlib import Path

import pyarrow as pa
import pytest

from engine import Catalog
from engine.errors import IntegrityError
from tools.cli import main as cli

SCHEMA = pa.schema([("id", pa.int64())])
MARKER = "flip-me-marker-value"


def rows(ids: list[int]) -> pa.Table:
    return pa.table({"id": pa.array(ids, pa.int64())})


def make_catalog(warehouse: Path) -> None:
    with Catalog.open(warehouse) as cat:
        cat.create_namespace("db")
        table = cat.create_table("db.t", SCHEMA)
        table.append(rows([1, 2]))
        table.set_properties({"note": MARKER})
        table.append(rows([3]))


def flip(path: Path, offset: int, value: int) -> None:
    data = bytearray(path.read_bytes())
    data[offset] = value
    path.write_bytes(bytes(data))


def marker_offset(path: Path) -> int:
    data = path.read_bytes()
    assert data.count(MARKER.encode()) == 1
    return data.find(MARKER.encode())


def one_line_failure(capsys, *args: str) -> str:
    code = cli(list(args))
    out, err = capsys.readouterr()
    assert code == 1, (out, err)
    text = err or out  # verify lists its problems on stdout
    assert "Traceback" not in text and len(text.strip().splitlines()) == 1, text
    return text


# ---------------------------------------------------------------- opening


def test_an_empty_catalog_file_is_refused_unless_create_is_asked(tmp_path, capsys):
    warehouse = tmp_path / "wh"
    warehouse.mkdir()
    (warehouse / "catalog.db").write_bytes(b"")
    with pytest.raises(IntegrityError, match="empty"):
        Catalog.open(warehouse)
    assert "empty" in one_line_failure(capsys, "--warehouse", str(warehouse), "tables")
    assert (warehouse / "catalog.db").stat().st_size == 0
    with Catalog.open(warehouse, create=True) as cat:
        cat.create_namespace("db")
    assert cli(["--warehouse", str(warehouse), "tables"]) == 0


def test_the_cli_create_flag_initializes_an_empty_file(tmp_path, capsys):
    warehouse = tmp_path / "wh"
    warehouse.mkdir()
    (warehouse / "catalog.db").write_bytes(b"")
    assert cli(["--warehouse", str(warehouse), "--create", "create-namespace", "db"]) == 0
    with Catalog.open(warehouse) as cat:
        assert cat.list_namespaces() == [("db",)]


def test_a_file_that_is_not_sqlite_is_refused_and_never_overwritten(tmp_path, capsys):
    warehouse = tmp_path / "wh"
    warehouse.mkdir()
    garbage = b"PAR1 this is not a database" * 100
    (warehouse / "catalog.db").write_bytes(garbage)
    for create in (False, True):
        with pytest.raises(IntegrityError, match="not an SQLite database"):
            Catalog.open(warehouse, create=create)
    one_line_failure(capsys, "--warehouse", str(warehouse), "--create", "tables")
    assert (warehouse / "catalog.db").read_bytes() == garbage


def test_a_new_catalog_file_is_never_seen_empty(tmp_path):
    with Catalog.open(tmp_path / "wh") as cat:
        cat.create_namespace("db")
    assert (tmp_path / "wh" / "catalog.db").read_bytes().startswith(b"SQLite format 3\x00")


# ---------------------------------------------------------------- flipped bytes


def test_a_byte_that_is_not_utf8_names_the_position(tmp_path, capsys):
    warehouse = tmp_path / "wh"
    make_catalog(warehouse)
    db = warehouse / "catalog.db"
    flip(db, marker_offset(db) + 3, 0xFF)
    with Catalog.open(warehouse) as cat:
        with pytest.raises(IntegrityError, match="position") as caught:
            cat.load_table("db.t").scan().to_arrow()
        position = caught.value.position
        assert position is not None and position > 1
        with pytest.raises(IntegrityError, match=f"position {position}"):
            cat.log(since=0)
        problems = cat.verify("db.t")
        assert len(problems) == 1 and f"position {position}" in problems[0]
    wh = str(warehouse)
    for args in (["log", "db.t"], ["verify", "db.t"], ["scan", "db.t"], ["snapshots", "db.t"]):
        assert f"position {position}" in one_line_failure(capsys, "--warehouse", wh, *args)


def test_a_damaged_payload_is_an_integrity_error_and_breaks_the_chain_at_its_position(tmp_path, capsys):
    warehouse = tmp_path / "wh"
    make_catalog(warehouse)
    db = warehouse / "catalog.db"
    offset = marker_offset(db)
    flip(db, offset + len(MARKER), ord("x"))  # the closing quote of the value: the JSON no longer parses
    with Catalog.open(warehouse) as cat:
        with pytest.raises(IntegrityError, match="position") as caught:
            cat.load_table("db.t").state
        position = caught.value.position
        problems = cat.log.verify()
        assert any(p.startswith(f"position {position}: hash does not match") for p in problems)
    assert "position" in one_line_failure(capsys, "--warehouse", str(warehouse), "scan", "db.t")
    one_line_failure(capsys, "--warehouse", str(warehouse), "verify", "db.t")


def test_a_changed_letter_is_caught_by_the_hash_chain(tmp_path, capsys):
    warehouse = tmp_path / "wh"
    make_catalog(warehouse)
    db = warehouse / "catalog.db"
    flip(db, marker_offset(db), ord("F"))  # still valid JSON, still UTF-8: only the chain can tell
    with Catalog.open(warehouse) as cat:
        problems = cat.verify("db.t")
        assert any("hash does not match" in p for p in problems)
        entry = next(e for e in cat.load_table("db.t").log() if e.type == "set-properties")
        assert any(p.startswith(f"position {entry.position}:") for p in problems)
    code = cli(["--warehouse", str(warehouse), "verify", "db.t"])
    out, _ = capsys.readouterr()
    assert code == 1 and "hash does not match" in out


def test_damaged_pages_are_an_integrity_error(tmp_path, capsys):
    warehouse = tmp_path / "wh"
    make_catalog(warehouse)
    db = warehouse / "catalog.db"
    data = bytearray(db.read_bytes())
    page_size = int.from_bytes(data[16:18], "big")
    for offset in range(page_size, len(data), page_size):  # every page but the first: its B-tree header
        data[offset] = 0xFF
    db.write_bytes(bytes(data))
    with pytest.raises(IntegrityError, match="damaged"):
        with Catalog.open(warehouse) as cat:
            cat.load_table("db.t").scan().to_arrow()
    one_line_failure(capsys, "--warehouse", str(warehouse), "scan", "db.t")


# ---------------------------------------------------------------- verify


def test_verify_reports_a_gap_in_positions_and_versions(tmp_path):
    warehouse = tmp_path / "wh"
    make_catalog(warehouse)
    db = sqlite3.connect(warehouse / "catalog.db", isolation_level=None)
    for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'").fetchall():
        db.execute(f'DROP TRIGGER "{name}"')
    position = db.execute("SELECT position FROM events WHERE type = 'set-properties'").fetchone()[0]
    db.execute("DELETE FROM event_parts WHERE position = ?", (position,))
    db.execute("DELETE FROM events WHERE position = ?", (position,))
    db.close()
    with Catalog.open(warehouse) as cat:
        problems = cat.log.verify()
    assert any("a gap" in p and f"expected position {position}" in p for p in problems)
    assert any("version" in p and "follows version" in p for p in problems)


def test_a_projection_behind_the_log_is_one_line_and_publish_catches_it_up(tmp_path, capsys):
    warehouse = tmp_path / "wh"
    make_catalog(warehouse)
    with Catalog.open(warehouse, project=False) as cat:  # as after a crash between commit and publish
        table = cat.load_table("db.t")
        table.delete("id = 3")
        table.expire_snapshots(older_than_ms=int(time.time() * 1000) + 3_600_000)  # deletes files, publishes
        table.append(rows([4]))
        table.delete("id = 1")
        published = cat.projector.published_version(table.uuid)
        head = table.state.version
        assert cat.verify("db.t") == [f"db.t: projection behind the log at version {published} (log head {head}); "
                                      f"run publish"]
    code = cli(["--warehouse", str(warehouse), "verify", "db.t"])
    out, _ = capsys.readouterr()
    assert code == 1 and out.strip().endswith("run publish") and len(out.strip().splitlines()) == 1
    assert cli(["--warehouse", str(warehouse), "publish"]) == 0
    assert f"db.t: published versions {published + 1}..{head}" in capsys.readouterr().out
    assert cli(["--warehouse", str(warehouse), "verify", "db.t"]) == 0
    assert cli(["--warehouse", str(warehouse), "publish", "db.t"]) == 0
    assert "up to date" in capsys.readouterr().out
    with Catalog.open(warehouse) as cat:
        assert sorted(cat.load_table("db.t").scan().to_arrow().column("id").to_pylist()) == [2, 4]
        assert os.path.exists(cat.load_table("db.t").metadata_location)


def test_the_rest_server_answers_a_damaged_log_with_an_integrity_error(tmp_path):
    import requests

    from tools.rest_server import running_server

    warehouse = tmp_path / "wh"
    make_catalog(warehouse)
    db = warehouse / "catalog.db"
    flip(db, marker_offset(db) + 3, 0xFF)
    with running_server(warehouse, "tok") as server:
        r = requests.get(f"{server.uri}/v1/namespaces/db/tables/t", headers={"Authorization": "Bearer tok"})
    assert r.status_code == 500
    assert r.json()["error"]["type"] == "IntegrityError" and "position" in r.json()["error"]["message"]
