"""The CLI through its installed console script, as a user runs it: `icelog serve` says where it listens and how
to connect, a reader that goes away early ends a scan quietly, and a missing extra is one line naming it."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import requests

from engine import Catalog
from tools.ports import free_port

ROOT = str(Path(__file__).resolve().parents[2])
ICELOG = [sys.executable, "-m", "tools.cli"]
ENV = {**os.environ, "PYTHONPATH": ROOT}


def _table(warehouse: Path, rows: int) -> None:
    with Catalog.open(warehouse) as cat:
        cat.create_namespace("db")
        cat.create_table("db.t", pa.schema([("id", pa.int64())])).append(
            pa.table({"id": pa.array(range(rows), pa.int64())}))


def test_serve_prints_its_address_and_ready_to_paste_client_settings(tmp_path: Path) -> None:
    _table(tmp_path / "wh", 3)
    port = free_port()
    server = subprocess.Popen([*ICELOG, "--warehouse", str(tmp_path / "wh"), "serve", "--token", "s3cret",
                               "--port", str(port)], cwd=ROOT, env=ENV, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    try:
        banner = [server.stdout.readline() for _ in range(4)]
        uri = f"http://127.0.0.1:{port}"
        assert banner[0].startswith(f"icelog REST catalog on {uri}") and str(tmp_path / "wh") in banner[0]
        assert f"spark.sql.catalog.icelog.uri={uri}" in banner[1] and "token=s3cret" in banner[1]
        assert f"RestCatalog('icelog', uri='{uri}', token='s3cret')" in banner[2]
        assert f"ENDPOINT '{uri}'" in banner[3] and "TOKEN 's3cret'" in banner[3]
        deadline = time.monotonic() + 30
        while True:
            try:
                answer = requests.get(f"{uri}/v1/config", headers={"Authorization": "Bearer s3cret"}, timeout=1)
                break
            except requests.ConnectionError:
                assert time.monotonic() < deadline
                time.sleep(0.1)
        assert answer.ok
    finally:
        server.terminate()
        server.wait(30)


def test_a_scan_whose_reader_goes_away_ends_quietly(tmp_path: Path) -> None:
    _table(tmp_path / "wh", 50_000)
    scan = subprocess.Popen([*ICELOG, "--warehouse", str(tmp_path / "wh"), "scan", "db.t"], cwd=ROOT, env=ENV,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    first = scan.stdout.readline()                  # as `| head -1` reads one line and closes the pipe
    scan.stdout.close()
    _, err = scan.communicate(timeout=120)
    assert first.startswith(b'{"id": ') and scan.returncode == 0
    assert b"Traceback" not in err and b"BrokenPipeError" not in err


def test_a_missing_extra_is_one_line_naming_it(tmp_path: Path) -> None:
    code = ("import sys; sys.modules['uvicorn'] = None; sys.modules['starlette'] = None; "
            "from tools.cli import main; sys.exit(main(sys.argv[1:]))")
    done = subprocess.run([sys.executable, "-c", code, "--warehouse", str(tmp_path / "wh"), "serve", "--token",
                           "t"], cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [
        "icelog: serve needs starlette, which is not installed: pip install 'icelog[server]'"]


def test_a_key_value_option_without_a_value_is_one_line_naming_it_and_creates_nothing(tmp_path: Path) -> None:
    schema = '{"type": "struct", "schema-id": 0, "fields": [{"id": 1, "name": "id", "required": false, "type": "long"}]}'
    for args, option in ((["create-table", "db.t", "--schema", schema, "--property", "owner"], "--property"),
                         (["register", "db.r", str(tmp_path), "--relocate", "/old"], "--relocate")):
        done = subprocess.run([*ICELOG, "--warehouse", str(tmp_path / "wh"), *args], cwd=ROOT, env=ENV,
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 1 and done.stderr.count("\n") == 1, done.stderr
        assert f"Cannot read {option}" in done.stderr and "expected KEY=VALUE" in done.stderr
    assert not (tmp_path / "wh").exists()
    _table(tmp_path / "wh", 1)
    done = subprocess.run([*ICELOG, "--warehouse", str(tmp_path / "wh"), "set-properties", "db.t", "owner"],
                          cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1 and "Cannot read set-properties 'owner'" in done.stderr
