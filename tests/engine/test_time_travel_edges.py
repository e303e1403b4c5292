"""Log-level time travel at its edges: changes() between versions lists each deletion vector of a shared Puffin
file (files are told apart by key, not path), a view of a view is named as the table was at its version, and bad
times and positions (NaN, infinities, past a 64-bit long, the wrong type) are ValidationErrors naming them.

Layer: tests (engine's public API on real SQLite, Parquet and Puffin files).
"""
from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pytest

from engine import Catalog
from engine.errors import ValidationError

SCHEMA = pa.schema([pa.field("id", pa.int64()), pa.field("name", pa.string())])


def rows(ids):
    return pa.table({"id": pa.array(ids, pa.int64()), "name": [f"n{i}" for i in ids]})


def _key(f):
    return (f.content, f.file_path, f.referenced_data_file, f.content_offset)


# ------------------------------------------------------------------ 1. changes() and deletion vectors

def test_changes_lists_every_deletion_vector_of_a_shared_puffin_file(catalog):
    """A v3 merge-on-read delete that hits two data files writes ONE Puffin file with two deletion-vector
    blobs: two live delete entries with the same file_path. changes() keys files by path and lists one."""
    t = catalog.create_table("db.t", SCHEMA, format_version=3, properties={"write.delete.mode": "merge-on-read"})
    t.append(rows([1, 2, 3]))
    t.append(rows([4, 5, 6]))
    before = t.state.version
    t.delete("id = 1 or id = 4")
    live_deletes = [e.file for e in catalog.store.live_entries(t.state, t.current_snapshot().snapshot_id)
                    if e.file.content != 0]
    assert len(live_deletes) == 2 and len({f.file_path for f in live_deletes}) == 1  # one Puffin, two vectors
    added = t.changes(before).added
    assert sorted(map(_key, added)) == sorted(map(_key, live_deletes))


def test_changes_reports_a_deletion_vector_replaced_inside_a_shared_puffin_file(catalog):
    """A later delete on data file A writes a new vector for A (carrying the old positions) and removes A's old
    vector, which sat in a Puffin file that still holds B's live vector. changes() must report A's old vector as
    removed; keyed by path it sees the Puffin file still live and reports nothing removed."""
    t = catalog.create_table("db.t", SCHEMA, format_version=3, properties={"write.delete.mode": "merge-on-read"})
    t.append(rows([1, 2, 3]))
    t.append(rows([4, 5, 6]))
    t.delete("id = 1 or id = 4")
    v1 = t.state.version
    old = {_key(e.file) for e in catalog.store.live_entries(t.state, t.current_snapshot().snapshot_id)}
    t.delete("id = 2")
    new = {_key(e.file) for e in catalog.store.live_entries(t.state, t.current_snapshot().snapshot_id)}
    assert old - new  # really removed: the old vector of the file holding id 1
    changes = t.changes(v1)
    assert {_key(f) for f in changes.removed} == old - new


# ------------------------------------------------------------------ 2. the name of a view of a view

def test_as_of_on_a_historical_view_names_the_table_as_it_was_at_the_target_version(catalog):
    t = catalog.create_table("db.t", SCHEMA)
    t.append(rows([1]))
    catalog.rename_table("db.t", "db.u")
    u = catalog.load_table("db.u")
    u.append(rows([2]))
    old = u.as_of(version=1)
    assert old.identifier == ("db", "t")
    head = catalog.log.head(u.uuid)
    again = old.as_of(version=head)  # the same table at its head: it is called db.u there
    assert again.identifier == ("db", "u")


# ------------------------------------------------------------------ 3. untyped errors for bad times/positions

@pytest.mark.parametrize("bad", [float("nan"), float("inf"), 2**63, -2**63 - 1, 1e30])
def test_table_as_of_time_out_of_range_is_a_validation_error(catalog, bad):
    t = catalog.create_table("db.t", SCHEMA)
    t.append(rows([1]))
    with pytest.raises(ValidationError):
        t.as_of(time=bad)


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), 2**63])
def test_catalog_as_of_time_out_of_range_is_a_validation_error(catalog, bad):
    catalog.create_table("db.t", SCHEMA)
    with pytest.raises(ValidationError):
        catalog.as_of(time=bad)


def test_catalog_log_since_past_a_long_is_a_validation_error(catalog):
    catalog.create_table("db.t", SCHEMA)
    with pytest.raises(ValidationError):
        catalog.log(since=2**63)


@pytest.mark.parametrize("bad", [dt.datetime(2030, 1, 1, tzinfo=dt.timezone.utc), "2030-01-01", float("nan"), 2**63])
def test_scan_as_of_timestamp_ms_of_the_wrong_type_is_a_validation_error(catalog, bad):
    t = catalog.create_table("db.t", SCHEMA)
    t.append(rows([1]))
    with pytest.raises(ValidationError):
        t.scan(as_of_timestamp_ms=bad)


# ------------------------------------------------------------------ 4. HistoricalCatalog.log(since=) is not checked

@pytest.mark.parametrize("bad", ["x", None, -1, 1.5, 2**63])
def test_historical_catalog_log_checks_since_as_catalog_log_does(catalog, bad):
    """The historical catalog's log() checks since= as the live catalog's does (it passed the value to SQLite)."""
    catalog.create_table("db.t", SCHEMA).append(rows([1]))
    if bad != 2**63:  # the live catalog refuses these (2**63: see test_catalog_log_since_past_a_long...)
        with pytest.raises(ValidationError):
            catalog.log(since=bad)
    past = catalog.as_of(position=3)
    with pytest.raises(ValidationError):
        past.log(since=bad)


def test_a_dropped_tables_view_is_named_as_it_was_and_times_are_exact_milliseconds(catalog):
    from engine.state.time_travel import to_time_ms

    t = catalog.create_table("db.t", SCHEMA)
    t.append(rows([1]))
    position = catalog.log.position_at(2**62)
    catalog.drop_table("db.t")
    catalog.create_table("db.t", SCHEMA)  # another table takes the name
    old = catalog.as_of(position=position).load_table("db.t")
    assert old.as_of(version=1).identifier == ("db", "t") and old.uuid == t.uuid
    moment = dt.datetime(2039, 6, 1, 12, 0, 0, 2000, tzinfo=dt.timezone.utc)
    assert to_time_ms(moment) == 2190542400002  # timestamp() * 1000 gives ...001
