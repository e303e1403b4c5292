"""The snapshot log (the table's history: which snapshot was current on main from when) follows the spec and Java,
so a read as of a time answers with the snapshot a reader of the metadata saw then:

- the whole log is read and the last entry at or before the time wins (Java's SnapshotUtil.snapshotIdAsOfTime): a
  REST client's clock may date a snapshot before the one under it (Java accepts a minute of skew);
- an expired snapshot's entry takes every entry before it along (the spec; Java's updateSnapshotLog);
- a table read as of an old version is named as the catalog named it then.

Layer: tests (real SQLite log; PyIceberg through ``icelog serve`` for the clients' own timestamps).
"""

from __future__ import annotations

import json
import time
import types

import pyarrow as pa
import pyiceberg.table.snapshots as pyiceberg_snapshots
import pytest
from pyiceberg.catalog.rest import RestCatalog
from pyiceberg.table import StaticTable

from engine import Catalog
from engine.errors import NotFound
from tools.rest_server import running_server

SCHEMA = pa.schema([("id", pa.int64())])


def rows(i: int) -> pa.Table:
    return pa.table({"id": pa.array([i], pa.int64())})


def client_clock(monkeypatch: pytest.MonkeyPatch, *timestamps_ms: int) -> None:
    """PyIceberg's snapshots take these timestamps, as a client whose clock is elsewhere would send them."""
    clock = iter(timestamps_ms)
    monkeypatch.setattr(pyiceberg_snapshots, "time", types.SimpleNamespace(time=lambda: next(clock) / 1000))


def test_a_snapshot_a_client_dated_before_the_one_under_it_is_found_by_time(tmp_path, monkeypatch) -> None:
    with Catalog.open(tmp_path / "wh") as cat:
        cat.create_namespace("db")
        first = cat.create_table("db.t", schema=SCHEMA).append(rows(1))
    client_clock(monkeypatch, first.timestamp_ms - 30_000)
    with running_server(tmp_path / "wh", "tok") as server:
        RestCatalog("r", uri=server.uri, token="tok").load_table("db.t").append(rows(2))
    with Catalog.open(tmp_path / "wh") as cat:
        t = cat.load_table("db.t")
        second = t.current_snapshot()
        when = first.timestamp_ms - 10_000
        assert StaticTable.from_metadata(t.metadata_location).snapshot_as_of_timestamp(when).snapshot_id == \
            second.snapshot_id                                        # PyIceberg, on the published metadata
        assert t.scan(as_of_timestamp_ms=when).snapshot.snapshot_id == second.snapshot_id


def test_expiring_a_rolled_back_snapshot_drops_the_history_before_it(tmp_path) -> None:
    with Catalog.open(tmp_path / "wh") as cat:
        cat.create_namespace("db")
        t = cat.create_table("db.t", schema=SCHEMA)
        a = t.append(rows(1))
        time.sleep(0.005)
        b = t.append(rows(2))
        time.sleep(0.005)
        t.manage_snapshots().rollback_to_snapshot(a.snapshot_id).commit()   # a current again
        time.sleep(0.005)
        c = t.append(rows(3))
        t.expire_snapshots(older_than_ms=c.timestamp_ms + 1, retain_last=2)  # keeps a and c, expires b
        with open(t.metadata_location, encoding="utf-8") as f:
            logged = [e["snapshot-id"] for e in json.load(f)["snapshot-log"]]
        assert logged == [a.snapshot_id, c.snapshot_id]                      # a's first entry went with b's
        with pytest.raises(NotFound):                                        # b was current then, and is gone
            t.scan(as_of_timestamp_ms=b.timestamp_ms)
        assert cat.verify("db.t") == []


def test_a_table_as_of_a_version_before_a_rename_is_named_as_it_was(tmp_path) -> None:
    with Catalog.open(tmp_path / "wh") as cat:
        cat.create_namespace("db")
        cat.create_table("db.old", schema=SCHEMA).append(rows(1))
        cat.rename_table("db.old", "db.new")
        t = cat.load_table("db.new")
        assert t.as_of(version=2).identifier == ("db", "old") and t.identifier == ("db", "new")
