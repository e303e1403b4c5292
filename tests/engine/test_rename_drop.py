"""Renaming and dropping tables: the catalog moves on, the pointer row follows, and the log remembers."""

from __future__ import annotations

import os
import sqlite3

import pyarrow as pa
import pytest

from engine import Catalog
from engine.errors import AlreadyExists, NamespaceNotFound, TableNotFound


@pytest.fixture
def cat(tmp_path):
    c = Catalog.open(tmp_path / "wh")
    c.create_namespace("db")
    c.create_namespace("archive")
    yield c
    c.close()


def pointer_rows(cat) -> list[tuple[str, str]]:
    con = sqlite3.connect(os.path.join(cat.warehouse, "catalog.db"))
    return sorted(con.execute("SELECT table_namespace, table_name FROM iceberg_tables").fetchall())


def test_rename_and_drop(cat):
    t = cat.create_table("db.t", schema=pa.schema([("id", pa.int64())]))
    t.append(pa.table({"id": pa.array([1, 2], pa.int64())}))
    before_rename = cat.log.head("catalog") and cat.log(since=0)[-1].position
    moved = cat.rename_table("db.t", "archive.t2")
    assert cat.list_tables("db") == [] and cat.list_tables("archive") == [("archive", "t2")]
    assert moved.scan().count() == 2 and moved.location == t.location
    assert pointer_rows(cat) == [("archive", "t2")]
    with pytest.raises(TableNotFound):
        cat.load_table("db.t")
    with pytest.raises(TableNotFound):
        cat.rename_table("db.t", "db.u")
    cat.create_table("db.other", schema=pa.schema([("id", pa.int64())]))
    with pytest.raises(AlreadyExists):
        cat.rename_table("archive.t2", "db.other")
    with pytest.raises(NamespaceNotFound):
        cat.rename_table("archive.t2", "nope.t")

    before_drop = cat.log(since=0)[-1].position
    cat.drop_table("archive.t2")
    assert cat.list_tables("archive") == [] and pointer_rows(cat) == [("db", "other")]
    assert os.path.exists(t.location)  # drop keeps the files
    with pytest.raises(TableNotFound):
        cat.drop_table("archive.t2")

    # the log remembers: the catalog as it was before the rename, and before the drop
    assert cat.as_of(position=before_rename).list_tables("db") == [("db", "t")]
    past = cat.as_of(position=before_drop)
    assert past.list_tables("archive") == [("archive", "t2")]
    assert past.load_table("archive.t2").scan().count() == 2


def test_purge_deletes_the_folder(cat):
    t = cat.create_table("db.t", schema=pa.schema([("id", pa.int64())]))
    t.append(pa.table({"id": pa.array([1], pa.int64())}))
    cat.purge_table("db.t")
    assert not os.path.exists(t.location) and cat.list_tables("db") == []


ROWS = pa.table({"id": pa.array([1, 2], pa.int64())})


def test_a_handle_of_a_dropped_table_commits_nothing(cat, tmp_path):
    """Its events would land in a stream no reader looks at (and its files under a dropped table): refused, naming
    the table, nothing written. A renamed table's handle still commits (it names the table by its uuid)."""
    stale = cat.create_table("db.b", ROWS.schema)
    kept = cat.create_table("db.c", ROWS.schema)
    cat.drop_table("db.b")
    cat.rename_table("db.c", "db.d")
    head = cat.log.head(stale.uuid)
    with pytest.raises(TableNotFound, match="Cannot commit to db.b: the table was dropped"):
        stale.append(ROWS)
    assert cat.log.head(stale.uuid) == head and not list((tmp_path / "wh" / "db" / "b").rglob("*.parquet"))
    kept.append(ROWS)
    assert cat.load_table("db.d").scan().to_arrow().num_rows == 2


def test_a_catalog_transaction_over_a_table_dropped_meanwhile_lands_nothing(cat, tmp_path):
    a = cat.create_table("db.a", ROWS.schema)
    b = cat.create_table("db.b", ROWS.schema)
    heads = (cat.log.head(a.uuid), cat.log.head(b.uuid))
    with pytest.raises(TableNotFound, match="db.b"):
        with cat.transaction() as tx:
            tx.load_table("db.a").append(ROWS)
            tx.load_table("db.b").append(ROWS)
            cat.drop_table("db.b")                                    # another writer
    assert (cat.log.head(a.uuid), cat.log.head(b.uuid)) == heads
    assert not list((tmp_path / "wh" / "db").rglob("*.parquet"))
