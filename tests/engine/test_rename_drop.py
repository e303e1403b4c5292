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


def pointer(cat, namespace: str, name: str) -> str | None:
    con = sqlite3.connect(os.path.join(cat.warehouse, "catalog.db"))
    rows = con.execute("SELECT metadata_location FROM iceberg_tables WHERE table_namespace = ? AND table_name = ?",
                       [namespace, name]).fetchall()
    return rows[0][0] if rows else None


def test_a_handle_loaded_before_a_rename_publishes_under_the_new_name(cat):
    """The pointer row goes under the name the catalog gives the table now: a SQL-catalog reader (PyIceberg's
    SqlCatalog, Java's JdbcCatalog) never finds the table under its old name, nor the new name behind."""
    t = cat.create_table("db.t", ROWS.schema)
    t.append(ROWS)
    cat.rename_table("db.t", "archive.t2")
    t.append(ROWS)  # the handle still says db.t
    assert pointer_rows(cat) == [("archive", "t2")]
    assert pointer(cat, "archive", "t2") == cat.load_table("archive.t2").metadata_location
    assert cat.load_table("archive.t2").scan().count() == 4


def test_a_handle_of_a_dropped_table_never_points_its_name_at_the_dropped_files(cat):
    """A table dropped and its name given to a new one: publishing through a handle of the dropped table is
    refused, and the name keeps pointing at the new table."""
    old = cat.create_table("db.t", ROWS.schema)
    old.append(ROWS)
    cat.drop_table("db.t")
    new = cat.create_table("db.t", ROWS.schema)
    new.append(ROWS)
    with pytest.raises(TableNotFound, match="Cannot publish db.t: the table was dropped"):
        old.publish()
    assert pointer(cat, "db", "t") == new.metadata_location
    con = sqlite3.connect(os.path.join(cat.warehouse, "catalog.db"))
    assert con.execute("SELECT count(*) FROM projection_status WHERE table_uuid = ?", [old.uuid]).fetchone() == (0,)


def test_a_drop_leaves_the_row_of_a_table_created_under_its_name_since(cat, monkeypatch):
    """Between the drop's commit and the removal of its pointer row, another writer creates a table of that name
    and publishes it: the drop removes only the dropped table's own row."""
    cat.create_table("db.t", ROWS.schema).append(ROWS)
    other = Catalog.open(cat.warehouse)
    created = []
    drop_rows = cat.projector.publish_drop

    def created_meanwhile(table_uuid):
        created.append(other.create_table("db.t", ROWS.schema))
        created[0].append(ROWS)
        drop_rows(table_uuid)

    monkeypatch.setattr(cat.projector, "publish_drop", created_meanwhile)
    try:
        cat.drop_table("db.t")
        assert pointer_rows(cat) == [("db", "t")]
        assert pointer(cat, "db", "t") == created[0].metadata_location
    finally:
        other.close()


@pytest.mark.parametrize("change", ["drop", "rename"])
def test_a_publish_that_read_the_name_before_a_catalog_change_points_where_the_catalog_says(cat, monkeypatch,
                                                                                           change):
    """A publish reads the table's name, then writes its files; meanwhile the table is dropped and its name given
    to a new table (which publishes), or renamed. The stale publish must not point the name back at the dropped
    table's files (SQL-catalog readers would see them, and the drop would then leave the name without a row), and
    a renamed table's row must reach its new name at its newest metadata."""
    from engine.publishing import TablePublisher

    cat.create_table("db.t", ROWS.schema).append(ROWS)
    real = TablePublisher._registered_name
    read: list[int] = []

    def read_before_the_change(self):  # the first read is the stale one; the later ones see the catalog
        read.append(1)
        return (("db",), "t") if len(read) == 1 else real(self)

    with Catalog.open(cat.warehouse, project=False) as quiet:
        stale = quiet.load_table("db.t")
        stale.append(ROWS)  # in the log, not published yet
        if change == "drop":
            cat.drop_table("db.t")
            new = cat.create_table("db.t", ROWS.schema)
            new.append(ROWS)
        else:
            cat.rename_table("db.t", "archive.t2")
        monkeypatch.setattr(TablePublisher, "_registered_name", read_before_the_change)
        stale.publish()
    if change == "drop":
        assert pointer_rows(cat) == [("db", "t")] and pointer(cat, "db", "t") == new.metadata_location
    else:
        assert pointer_rows(cat) == [("archive", "t2")]
        assert pointer(cat, "archive", "t2") == cat.load_table("archive.t2").metadata_location
        assert cat.load_table("archive.t2").scan().count() == 4


def test_a_rename_after_a_publish_under_the_new_name_leaves_one_row(cat):
    """A publish that ran between the rename's commit and the move of its pointer row wrote the new name's row
    already: the rename removes the old one instead of moving it onto the new."""
    t = cat.create_table("db.t", ROWS.schema)
    t.append(ROWS)
    con = sqlite3.connect(os.path.join(cat.warehouse, "catalog.db"))
    con.execute("INSERT INTO iceberg_tables (catalog_name, table_namespace, table_name, metadata_location, "
                "previous_metadata_location) SELECT catalog_name, 'archive', 't2', metadata_location, "
                "previous_metadata_location FROM iceberg_tables WHERE table_name = 't'")
    con.commit()
    con.close()
    cat.projector.publish_rename(t.uuid, lambda: (("archive",), "t2"))
    assert pointer_rows(cat) == [("archive", "t2")]
    assert pointer(cat, "archive", "t2") == t.metadata_location


def test_a_catalog_that_does_not_publish_moves_the_pointer_row_on_rename(tmp_path):
    with Catalog.open(tmp_path / "wh") as publishing:
        publishing.create_namespace("db")
        publishing.create_table("db.t", ROWS.schema).append(ROWS)
    with Catalog.open(tmp_path / "wh", project=False) as quiet:
        quiet.rename_table("db.t", "db.u")
        assert pointer_rows(quiet) == [("db", "u")]


def test_a_handle_of_a_purged_table_writes_nothing_where_its_files_were(cat):
    """Purging deleted the table's files, and the catalog no longer names it: publishing through a handle loaded
    before never puts files back into the folder (they would belong to no table)."""
    old = cat.create_table("db.t", ROWS.schema)
    old.append(ROWS)
    cat.purge_table("db.t")
    assert not os.path.exists(old.location)
    with pytest.raises(TableNotFound, match="Cannot publish db.t: the table was dropped"):
        old.publish()
    assert not os.path.exists(old.location)


@pytest.mark.parametrize("meanwhile", ["publish", "rename"])
def test_a_rename_raced_by_a_publish_or_another_rename_leaves_one_row_under_the_catalogs_name(cat, monkeypatch,
                                                                                             meanwhile):
    """Between a rename's commit and the move of its pointer row, another process publishes the table (its row
    under the new name, at a newer metadata file) or renames it again. The old row stayed (it no longer named the
    newest metadata), or the row went under the name of the first rename; SQL-catalog readers listed a table the
    catalog does not have. The table's rows are those naming its metadata files, whatever their name."""
    import engine.catalog

    cat.create_table("db.t", ROWS.schema).append(ROWS)
    other = Catalog.open(cat.warehouse)
    commit = engine.catalog.commit_streams

    raced_once: list[bool] = []

    def raced(*args, **kwargs):  # right after the rename's commit, before its pointer row moves
        landed = commit(*args, **kwargs)
        if raced_once:
            return landed
        raced_once.append(True)
        if meanwhile == "publish":
            other.load_table("db.u").append(ROWS)
        else:
            other.rename_table("db.u", "archive.v")
        return landed

    monkeypatch.setattr(engine.catalog, "commit_streams", raced)
    try:
        renamed = cat.rename_table("db.t", "db.u")
        final = ("db", "u") if meanwhile == "publish" else ("archive", "v")
        assert pointer_rows(cat) == [final]
        assert pointer(cat, *final) == cat.load_table(".".join(final)).metadata_location
        assert renamed.uuid == cat.load_table(".".join(final)).uuid
    finally:
        other.close()
