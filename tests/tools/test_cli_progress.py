"""Long CLI steps draw a progress bar on standard error when it is a terminal (a real pseudo-terminal here), and
nothing at all when it is not (a pipe), through the installed ``icelog`` script."""

from __future__ import annotations

import os
import pty
import subprocess
import sys
from pathlib import Path

import pyarrow as pa

from engine import Catalog

ICELOG = os.path.join(os.path.dirname(sys.executable), "icelog")
#: the bar at once, so a compaction of a few small files (well under the default half second) draws one
NO_DELAY = {**os.environ, "ICELOG_PROGRESS_DELAY_S": "0"}


def _table_of_small_files(warehouse: Path, files: int) -> None:
    with Catalog.open(warehouse) as cat:
        cat.create_namespace("db")
        t = cat.create_table("db.t", pa.schema([("id", pa.int64())]))
        for i in range(files):
            t.append(pa.table({"id": pa.array([i], pa.int64())}))


def test_no_progress_output_when_stderr_is_not_a_terminal(tmp_path: Path) -> None:
    _table_of_small_files(tmp_path / "wh", 4)
    for args in (["compact", "db.t"], ["expire-snapshots", "db.t", "--older-than-ms", "9999999999999"]):
        done = subprocess.run([ICELOG, "--warehouse", str(tmp_path / "wh"), *args], env=NO_DELAY,
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 0 and done.stderr == ""
        assert done.stdout.startswith(f"{args[0].split('-')[0]}")


def test_a_bar_is_drawn_on_a_terminal_and_the_report_still_goes_to_stdout(tmp_path: Path) -> None:
    _table_of_small_files(tmp_path / "wh", 6)
    terminal, terminal_end = pty.openpty()
    try:
        compact = subprocess.Popen([ICELOG, "--warehouse", str(tmp_path / "wh"), "compact", "db.t"], env=NO_DELAY,
                                   stdout=subprocess.PIPE, stderr=terminal_end, stdin=subprocess.DEVNULL)
        os.close(terminal_end)
        drawn = b""
        while True:
            try:
                chunk = os.read(terminal, 4096)
            except OSError:  # EIO: the child closed its end of the terminal
                break
            if not chunk:
                break
            drawn += chunk
        out = compact.stdout.read().decode()
        assert compact.wait(120) == 0
    finally:
        os.close(terminal)
    assert b"compact db.t" in drawn and b"file" in drawn  # the bar: its description and unit
    assert b"Traceback" not in drawn
    assert out.startswith("compact db.t: snapshot ") and "-6 data files" in out


def _stderr_on_a_terminal(args: list[str]) -> tuple[int, bytes, str]:
    """Run the icelog script with its stderr on a new pseudo-terminal: (exit code, what it drew, its stdout)."""
    terminal, terminal_end = pty.openpty()
    try:
        run = subprocess.Popen([ICELOG, *args], env=NO_DELAY, stdout=subprocess.PIPE, stderr=terminal_end,
                               stdin=subprocess.DEVNULL)
        os.close(terminal_end)
        drawn = b""
        while True:
            try:
                chunk = os.read(terminal, 4096)
            except OSError:
                break
            if not chunk:
                break
            drawn += chunk
        out = run.stdout.read().decode()
        return run.wait(120), drawn, out
    finally:
        os.close(terminal)


def test_register_and_publish_draw_their_bars_on_a_terminal(tmp_path: Path) -> None:
    _table_of_small_files(tmp_path / "source", 5)
    with Catalog.open(tmp_path / "source") as cat:
        folder = cat.load_table("db.t").location
    subprocess.run([ICELOG, "--warehouse", str(tmp_path / "wh"), "create-namespace", "db"], check=True,
                   capture_output=True, timeout=120)
    code, drawn, out = _stderr_on_a_terminal(["--warehouse", str(tmp_path / "wh"), "register", "db.r", folder,
                                              "--location", str(tmp_path / "wh" / "db" / "r")])
    assert code == 0 and out.startswith("registered db.r: 5 snapshot(s)"), (out, drawn)
    assert b"register db.r: read" in drawn and b"register db.r: publish" in drawn and b"snapshot" in drawn

    with Catalog.open(tmp_path / "wh", project=False) as cat:  # commits whose files wait for a publish
        t = cat.load_table("db.r")
        for i in range(3):
            t.append(pa.table({"id": pa.array([100 + i], pa.int64())}))
    code, drawn, out = _stderr_on_a_terminal(["--warehouse", str(tmp_path / "wh"), "publish", "db.r"])
    assert code == 0 and out.startswith("db.r: published versions"), (out, drawn)
    assert b"publish db.r" in drawn and b"Traceback" not in drawn
