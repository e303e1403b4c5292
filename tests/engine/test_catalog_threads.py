"""A catalog handle belongs to the thread that opened it: another thread using it gets ``WrongThread`` naming the
catalog, before anything is written; a handle of its own works.

Layer: tests (real SQLite catalog, real threads).
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any, Callable

import pyarrow as pa
from engine import Catalog
from storage import WrongThread

SCHEMA = pa.schema([("id", pa.int64())])


def _files_under(folder: str) -> set[str]:
    return {os.path.join(root, name) for root, _, names in os.walk(folder) for name in names}


def _in_thread(work: Callable[[], Any]) -> Any:
    """What ``work`` returns or raises when run on a thread of its own."""
    outcome: list[Any] = []

    def run() -> None:
        try:
            outcome.append(work())
        except BaseException as e:  # noqa: BLE001 - handed back to the test
            outcome.append(e)

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    return outcome[0]


def test_a_catalog_handle_used_from_another_thread_is_refused_by_name(tmp_path: Path) -> None:
    cat = Catalog.open(tmp_path / "wh")
    cat.create_namespace("db")
    table = cat.create_table("db.t", SCHEMA)
    table.append(pa.table({"id": [1]}, schema=SCHEMA))
    location = table.state.location.removeprefix("file://")
    files = _files_under(location)
    for name, work in [("load", lambda: cat.load_table("db.t")), ("list", lambda: cat.list_tables("db")),
                       ("append", lambda: table.append(pa.table({"id": [2]}, schema=SCHEMA))),
                       ("scan", lambda: table.scan().to_arrow())]:
        refused = _in_thread(work)
        assert isinstance(refused, WrongThread), name
        assert "catalog.db" in str(refused) and "open one per thread" in str(refused)
    assert _files_under(location) == files                          # the refused append wrote nothing
    assert cat.load_table("db.t").scan().to_arrow()["id"].to_pylist() == [1]  # the owner's handle still works

    def own_handle() -> list[int]:
        with Catalog.open(tmp_path / "wh") as mine:
            t = mine.load_table("db.t")
            t.append(pa.table({"id": [3]}, schema=SCHEMA))
            return sorted(t.scan().to_arrow()["id"].to_pylist())

    assert _in_thread(own_handle) == [1, 3]
    cat.close()



def test_a_publish_from_another_thread_is_refused_by_name_too(tmp_path: Path) -> None:
    """A catalog that leaves publishing to ``publish()``: the first thing a publish from another thread touches is
    the derived tables beside the log, and they refuse the same way."""
    cat = Catalog.open(tmp_path / "wh", project=False)
    cat.create_namespace("db")
    table = cat.create_table("db.t", SCHEMA)
    table.append(pa.table({"id": [1]}, schema=SCHEMA))
    refused = _in_thread(table.publish)
    assert isinstance(refused, WrongThread) and "open one per thread" in str(refused)
    assert table.publish() is not None  # the owner's thread publishes
    cat.close()
