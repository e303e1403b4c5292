"""The catalog's own database is never opened as data: not by name, symlink, hard link or URI, not its WAL or
shared memory, whatever the Python API, a registration or a REST client names (issue 9, point 4).

Layer: tests. Real catalogs and real processes. The last test replays the reported loss: a process that opened
the database as data dropped SQLite's locks, another process then removed the WAL, and an acknowledged commit
vanished after a SIGKILL.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pyarrow as pa
import pytest
import requests

from engine import Catalog
from engine.errors import IcelogError, ValidationError
from storage.errors import ProtectedFileError
from storage.files import FileIO, check_not_database
from tools.rest_server import running_server

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = pa.schema([("id", pa.int64())])


def rows(ids: list[int]) -> pa.Table:
    return pa.table({"id": pa.array(ids, pa.int64())})


def head(cat: Catalog) -> int:
    return max((e.position for e in cat.log(since=0)), default=0)


@pytest.fixture
def cat(tmp_path: Path):
    catalog = Catalog.open(tmp_path / "wh")
    catalog.create_namespace("db")
    catalog.create_table("db.t", SCHEMA).append(rows([1]))
    yield catalog
    catalog.close()


def spellings(tmp_path: Path) -> list[str]:
    """Names of the open catalog database and its companions, by every route a caller could take."""
    db = tmp_path / "wh" / "catalog.db"
    os.symlink(db, tmp_path / "link.parquet")
    os.link(db, tmp_path / "hardlink.parquet")
    os.link(str(db) + "-wal", tmp_path / "hardlink-of-the-wal.avro")
    os.symlink(tmp_path / "wh", tmp_path / "linked-folder")
    return [str(db), f"file://{db}", str(tmp_path / "wh" / "db" / ".." / "catalog.db"), str(tmp_path / "link.parquet"),
            str(tmp_path / "hardlink.parquet"), str(tmp_path / "hardlink-of-the-wal.avro"), str(db) + "-wal",
            str(db) + "-shm", str(db) + "-writer-lock",
            str(tmp_path / "linked-folder" / "catalog.db"), str(tmp_path / "linked-folder" / "catalog.db-wal")]


def test_file_io_refuses_the_open_database_by_every_name(cat, tmp_path):
    io = FileIO()
    ordinary = tmp_path / "ordinary.bin"
    ordinary.write_bytes(b"data")
    assert io.read_bytes(str(ordinary)) == b"data"
    for name in spellings(tmp_path):
        with pytest.raises(ProtectedFileError, match="catalog database"):
            check_not_database(name)
        with pytest.raises(ProtectedFileError):
            io.read_bytes(name)
        with pytest.raises(ProtectedFileError):
            io.delete(name)
        with pytest.raises(ProtectedFileError):
            io.write_bytes(name, b"x")
    assert (tmp_path / "wh" / "catalog.db").stat().st_size > 0


def test_a_file_with_one_name_that_is_no_database_name_is_cleared_by_its_own_stat(cat, tmp_path, monkeypatch):
    """Every file operation checks its path: a file whose only name is none of a database's cannot be a database
    file nor a hard link of one, so it is cleared without a stat of the database's five files (a hard link, with
    two names, is compared by inode, as the test above shows)."""
    import storage.files as files_module

    ordinary = tmp_path / "wh" / "db" / "t" / "data" / "ordinary.parquet"
    ordinary.parent.mkdir(parents=True, exist_ok=True)
    ordinary.write_bytes(b"data")
    stats: list[str] = []
    real_stat = os.stat
    monkeypatch.setattr(files_module.os, "stat", lambda path, *a, **k: stats.append(path) or real_stat(path, *a, **k))
    check_not_database(str(ordinary))
    assert stats == []
    os.link(ordinary, tmp_path / "second-name.parquet")
    check_not_database(str(ordinary))
    assert len(stats) >= 5  # two names now: compared with the database's files by inode


def test_append_files_and_register_refuse_the_database(cat, tmp_path):
    table = cat.load_table("db.t")
    position = head(cat)
    for name in spellings(tmp_path):
        with pytest.raises(ValidationError, match="catalog"):
            table.append_files([name])
        with pytest.raises(IcelogError):
            cat.register_table("db.r", name)
    assert head(cat) == position
    assert table.scan().to_arrow().column("id").to_pylist() == [1]


def test_a_rest_commit_naming_the_database_as_manifest_list_gets_400(tmp_path):
    with Catalog.open(tmp_path / "wh") as cat:
        cat.create_namespace("db")
        cat.create_table("db.t", SCHEMA)
    with running_server(tmp_path / "wh", "tok") as server:
        position = None
        for target in (str(tmp_path / "wh" / "catalog.db"), str(tmp_path / "wh" / "catalog.db-wal")):
            body = {"requirements": [], "updates": [
                {"action": "add-snapshot", "snapshot": {
                    "snapshot-id": 77, "sequence-number": 1, "timestamp-ms": int(time.time() * 1000),
                    "manifest-list": target, "summary": {"operation": "append"}, "schema-id": 0}}]}
            with Catalog.open(tmp_path / "wh") as cat:
                position = head(cat)
            r = requests.post(f"{server.uri}/v1/namespaces/db/tables/t", json=body,
                              headers={"Authorization": "Bearer tok"})
            assert r.status_code == 400, r.text
            assert "catalog" in r.json()["error"]["message"]
            with Catalog.open(tmp_path / "wh") as cat:
                assert head(cat) == position


WRITER = textwrap.dedent("""
    import sys
    import pyarrow as pa
    from engine import Catalog
    from engine.errors import IcelogError

    warehouse = sys.argv[1]
    cat = Catalog.open(warehouse)
    table = cat.load_table("db.t")
    try:
        table.append_files([warehouse + "/catalog.db"])
        print("accepted", flush=True)
    except IcelogError:
        print("refused", flush=True)
    sys.stdin.readline()                      # the other process has opened and closed the catalog
    table.append(pa.table({"id": pa.array([42], pa.int64())}))
    print("acked", flush=True)
    sys.stdin.readline()                      # wait to be killed
""")


def test_an_acknowledged_commit_survives_a_sigkill_after_another_process_opened_the_catalog(tmp_path):
    warehouse = tmp_path / "wh"
    with Catalog.open(warehouse) as cat:
        cat.create_namespace("db")
        cat.create_table("db.t", SCHEMA).append(rows([1]))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(warehouse)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True, env=env, cwd=ROOT)
    try:
        assert writer.stdout.readline().strip() == "refused"
        subprocess.run([sys.executable, "-c", "import sys; from engine import Catalog; "
                        "Catalog.open(sys.argv[1]).close()", str(warehouse)], check=True, env=env, cwd=ROOT,
                       timeout=60)
        writer.stdin.write("go\n")
        writer.stdin.flush()
        assert writer.stdout.readline().strip() == "acked"
        writer.send_signal(signal.SIGKILL)
        writer.wait(timeout=30)
    finally:
        if writer.poll() is None:
            writer.kill()
    with Catalog.open(warehouse) as cat:
        assert sorted(cat.load_table("db.t").scan().to_arrow().column("id").to_pylist()) == [1, 42]
        assert cat.log.verify() == []


def test_the_cli_refuses_to_append_the_database(cat, tmp_path, capsys):
    from tools.cli import main as cli

    position = head(cat)
    code = cli(["--warehouse", str(tmp_path / "wh"), "append", "db.t", str(tmp_path / "wh" / "catalog.db")])
    err = capsys.readouterr().err
    assert code == 1 and "catalog" in err and len(err.strip().splitlines()) == 1
    assert head(cat) == position
