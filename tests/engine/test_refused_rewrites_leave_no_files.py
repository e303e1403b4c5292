"""Validate, then write, for the operations that rewrite files: compaction (every strategy), overwrite_data_files,
equality deletes and rewrite_manifests check their arguments before they write, and remove the files they wrote
when their commit is refused. Each test counts the files under the table's ``data/`` before and after.

Layer: tests (engine's public API on real SQLite and Parquet files; no JVM).

A refusal after writing comes from a real concurrent commit: the table handle's ``commit_events`` is wrapped so
that another catalog on the same warehouse commits just before the operation's own commit, after its files are
written (as a writer in another process would).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator

import pyarrow as pa
import pytest

from engine import Catalog
from engine.write.data_writer import write_data_files
from engine.errors import ForeignWriterError, ValidationConflict, ValidationError
from projections import layout

SCHEMA = pa.schema([("id", pa.int64()), ("category", pa.string()), ("x", pa.int64())])


def rows(ids: range, category: str) -> pa.Table:
    return pa.table({"id": pa.array(list(ids), pa.int64()), "category": [category] * len(ids),
                     "x": pa.array([i * 7 % 11 for i in ids], pa.int64())})


def files_under(folder: str) -> set[str]:
    """Every file below ``folder``."""
    return {os.path.join(root, name) for root, _, names in os.walk(folder) for name in names}


@pytest.fixture
def catalogs(tmp_path) -> Iterator[tuple[Catalog, Catalog]]:
    """Two catalogs on one warehouse: the writer under test and a concurrent one."""
    with Catalog.open(tmp_path / "wh") as cat, Catalog.open(tmp_path / "wh") as other:
        cat.create_namespace("db")
        yield cat, other


def racing(table, concurrent: Callable[[], None], seen: list[set[str]]) -> None:
    """Make ``concurrent`` commit right before the table's next commit (once), noting the files under data/ then."""
    commit_events = table.commit_events

    def commit_after_a_concurrent_one(*args, **kwargs):
        if not seen:
            seen.append(files_under(os.path.join(table.location, "data")))
            concurrent()
        return commit_events(*args, **kwargs)

    table.commit_events = commit_after_a_concurrent_one


def two_file_table(cat: Catalog, *, format_version: int = 2, partition_by=()):
    t = cat.create_table("db.t", schema=SCHEMA, partition_by=list(partition_by), format_version=format_version)
    t.append(rows(range(0, 10), "a"))
    t.append(rows(range(10, 20), "a"))
    return t


@pytest.mark.parametrize("strategy, arguments", [
    ("binpack", {}),
    ("sort", {"sort_order": ["x", "id DESC"]}),
    ("zorder", {"zorder_columns": ["id", "x"]}),
])
def test_a_compaction_refused_by_a_concurrent_commit_removes_what_it_wrote(catalogs, strategy, arguments):
    cat, other = catalogs
    t = two_file_table(cat)
    data = os.path.join(t.location, "data")
    before, head = files_under(data), cat.log.head(t.uuid)
    doomed = t.inspect.files().column("file_path")[0].as_py()
    seen: list[set[str]] = []
    racing(t, lambda: other.load_table("db.t").delete_files([doomed]), seen)
    with pytest.raises(ValidationConflict, match="rewrite data files"):
        t.rewrite_data_files(strategy=strategy, **arguments)
    assert len(seen[0] - before) >= 1                      # the compaction had written its files when refused
    assert files_under(data) == before                     # and they are gone (the deleted file stays: not ours)
    assert cat.log.head(t.uuid) == head + 1                # only the concurrent commit landed
    assert not {p for p, _ in cat.log.staged_files(t.uuid)} & (seen[0] - before)
    assert t.scan().count() == 10 and cat.verify("db.t") == []


def test_a_compaction_refused_by_a_foreign_writer_removes_what_it_wrote(catalogs):
    cat, _ = catalogs
    t = two_file_table(cat)
    data = os.path.join(t.location, "data")
    before, head = files_under(data), cat.log.head(t.uuid)
    with open(layout.metadata_file(t.location, cat.projector.published_version(t.uuid) + 1), "wb") as out:
        out.write(b'{"written": "by someone else"}')
    with pytest.raises(ForeignWriterError):
        t.rewrite_data_files(strategy="zorder", zorder_columns=["id", "x"])
    assert files_under(data) == before and cat.log.head(t.uuid) == head


@pytest.mark.parametrize("arguments, culprit", [
    ({"strategy": "shuffle"}, "shuffle"),
    ({"strategy": "sort", "sort_order": ["no_such_column"]}, "no_such_column"),
    ({"strategy": "sort", "sort_order": 12}, "sort_order"),
    ({"strategy": "zorder", "zorder_columns": ["id", "nope"]}, "nope"),
    ({"strategy": "binpack", "where": "missing_column = 1"}, "missing_column"),
    ({"strategy": "sort", "sort_order": ["x"], "where": "missing_column = 1"}, "missing_column"),
    ({"strategy": "binpack", "target_file_size_bytes": -5}, "-5"),
    ({"strategy": "binpack", "options": {"no-such-option": "1"}}, "no-such-option"),
])
def test_bad_compaction_arguments_are_refused_before_anything_is_written(catalogs, arguments, culprit):
    cat, _ = catalogs
    t = two_file_table(cat)
    data = os.path.join(t.location, "data")
    before, head = files_under(data), cat.log.head(t.uuid)
    with pytest.raises(ValidationError, match=culprit):
        t.rewrite_data_files(**arguments)
    assert files_under(data) == before and cat.log.head(t.uuid) == head
    assert {p for p, _ in cat.log.staged_files(t.uuid)} <= before


def test_an_overwrite_of_written_files_refused_by_a_concurrent_commit_removes_the_rows_it_kept(catalogs):
    cat, other = catalogs
    t = cat.create_table("db.t", schema=SCHEMA)
    t.append(rows(range(10), "a"))
    data = os.path.join(t.location, "data")
    incoming = write_data_files(t.state, rows(range(100, 103), "a"))  # a job's files: the caller's, not ours
    incoming_paths = {f.file_path.removeprefix("file://") for f in incoming}
    before, head = files_under(data), cat.log.head(t.uuid)
    seen: list[set[str]] = []
    # the overwrite keeps the rows id >= 5 of the live file in a new file; a concurrent append of a row it
    # would have to replace conflicts (serializable, the default)
    racing(t, lambda: other.load_table("db.t").append(rows(range(3, 4), "a")), seen)
    with pytest.raises(ValidationConflict, match="overwrite"):
        t.overwrite_data_files(incoming, where="id < 5 or id >= 100")
    kept = seen[0] - before
    assert len(kept) == 1                                    # the file of the kept rows, written when refused
    after = files_under(data)
    assert not kept & after and before <= after              # it is gone, and nothing else is
    assert len(after - before) == 1                          # but the concurrent append's file
    assert incoming_paths <= after                           # the caller's files are left to the caller
    assert cat.log.head(t.uuid) == head + 1
    assert sorted(t.scan().to_arrow().column("id").to_pylist()) == sorted([*range(10), 3])


def test_bad_overwrite_of_written_files_is_refused_before_anything_is_written(catalogs):
    cat, _ = catalogs
    t = cat.create_table("db.t", schema=SCHEMA)
    t.append(rows(range(10), "a"))
    incoming = write_data_files(t.state, rows(range(100, 103), "a"))
    data = os.path.join(t.location, "data")
    before, head = files_under(data), cat.log.head(t.uuid)
    with pytest.raises(ValidationError, match="missing_column"):
        t.overwrite_data_files(incoming, where="missing_column < 5")
    with pytest.raises(ValidationError, match="may not match"):
        t.overwrite_data_files(incoming, where="id < 5")      # the new rows would escape the overwrite
    assert files_under(data) == before and cat.log.head(t.uuid) == head


def test_equality_deletes_a_spec_cannot_take_are_refused_before_any_delete_file_is_written(catalogs):
    cat, _ = catalogs
    t = cat.create_table("db.t", schema=SCHEMA, partition_by=["category"])
    t.append(rows(range(10), "a"))
    with t.update_spec() as update:                           # live data in a spec by category, the new by id
        update.remove_field("category")
        update.add_field("id", "bucket[4]")
    data = os.path.join(t.location, "data")
    before, head = files_under(data), cat.log.head(t.uuid)
    delta = t.row_delta()
    with pytest.raises(ValidationError, match="'category'"):
        delta.add_equality_deletes(pa.table({"id": pa.array([3], pa.int64())}), ["id"])
    assert files_under(data) == before                        # not even the current spec's delete file
    delta.commit()                                            # nothing added: nothing committed
    assert cat.log.head(t.uuid) == head and t.scan().count() == 10


def test_a_refused_manifest_rewrite_writes_nothing(catalogs):
    cat, _ = catalogs
    t = two_file_table(cat)
    before = files_under(t.location)
    foreign = layout.metadata_file(t.location, cat.projector.published_version(t.uuid) + 1)
    with open(foreign, "wb") as out:
        out.write(b'{"written": "by someone else"}')
    head = cat.log.head(t.uuid)
    with pytest.raises(ForeignWriterError):
        t.rewrite_manifests()
    assert files_under(t.location) == before | {foreign} and cat.log.head(t.uuid) == head


def test_a_table_transaction_that_does_not_land_removes_every_file_it_wrote(catalogs):
    cat, other = catalogs
    t = cat.create_table("db.t", schema=SCHEMA, properties={"write.delete.mode": "merge-on-read"})
    t.append(rows(range(10), "a"))
    data = os.path.join(t.location, "data")
    before, head = files_under(data), cat.log.head(t.uuid)
    tx = t.transaction()
    tx.append(rows(range(10, 13), "b"))
    tx.delete("id = 3")                                       # a position delete file (merge-on-read)
    tx.upsert(rows(range(20, 22), "c"), ["id"])
    written = files_under(data) - before
    assert len(written) >= 3
    other.load_table("db.t").delete("id = 3")                 # a concurrent delete of the same row
    with pytest.raises(ValidationConflict):
        tx.commit_transaction()
    assert not written & files_under(data) and before <= files_under(data)  # the concurrent delete's file stays
    assert cat.log.head(t.uuid) == head + 1 and t.scan().count() == 9

    before, head = files_under(data), cat.log.head(t.uuid)
    with pytest.raises(RuntimeError):                         # a block that raises: nothing of it lands
        with t.transaction() as tx:
            tx.append(rows(range(30, 33), "d"))
            tx.rewrite_data_files()
            raise RuntimeError("the job failed")
    assert files_under(data) == before and cat.log.head(t.uuid) == head
    assert not {p for p, _ in cat.log.staged_files(t.uuid)} - before


def test_a_catalog_transaction_that_does_not_land_removes_the_files_of_every_table(catalogs):
    cat, other = catalogs
    a = cat.create_table("db.a", schema=SCHEMA)
    b = cat.create_table("db.b", schema=SCHEMA)
    a.append(rows(range(10), "a"))
    b.append(rows(range(10), "a"))
    folders = [os.path.join(x.location, "data") for x in (a, b)]
    before = [files_under(f) for f in folders]
    heads = [cat.log.head(x.uuid) for x in (a, b)]
    with pytest.raises(ValidationConflict):
        with cat.transaction() as tx:
            tx.load_table("db.a").append(rows(range(10, 12), "b"))
            tx.load_table("db.b").delete("id < 5")            # copy-on-write: the kept rows in a new file
            assert all(files_under(f) - old for f, old in zip(folders, before))
            other.load_table("db.b").delete_files([b.inspect.files().column("file_path")[0].as_py()])
    assert [files_under(f) for f in folders] == before
    assert cat.log.head(a.uuid) == heads[0] and cat.log.head(b.uuid) == heads[1] + 1
    assert a.scan().count() == 10 and b.scan().count() == 0
