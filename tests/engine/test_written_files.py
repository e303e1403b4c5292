"""Data files written outside icelog (by Spark tasks) committed through the engine: append_data_files,
overwrite_data_files, replace_partitions, staged job folders, wait_published and foreign metadata files.

Layer: tests (engine's public API on real SQLite and Parquet files; no JVM).
"""

from __future__ import annotations

import json
import os
import threading
import time

import attrs
import pyarrow as pa
import pytest

from engine import Catalog
from engine.write.data_writer import write_data_files, write_partition_files
from engine.errors import ForeignWriterError, PublishFailed, PublishTimeout, ValidationError
from projections import layout

SCHEMA = pa.schema([("id", pa.int64()), ("category", pa.string())])


def rows(ids: range, category: str) -> pa.Table:
    return pa.table({"id": pa.array(list(ids), pa.int64()), "category": [category] * len(ids)})


@pytest.fixture
def table(tmp_path):
    cat = Catalog.open(tmp_path / "warehouse")
    cat.create_namespace("db")
    t = cat.create_table("db.t", schema=SCHEMA, partition_by=["category"])
    yield t
    cat.close()


def written(table, data: pa.Table, folder: str | None = None):
    """Files a distributed writer would hand back: written under the table, not committed."""
    state = table.state
    if folder is None:
        return write_data_files(state, data)
    return write_partition_files(state, data, spec=state.spec, partition=(data.column("category")[0].as_py(),),
                                 data_folder=folder)


def ids_of(table) -> list[int]:
    return sorted(table.scan().to_arrow().column("id").to_pylist())


def test_append_overwrite_and_replace_partitions_of_written_files(table):
    snap = table.append_data_files(written(table, rows(range(0, 4), "a")) + written(table, rows(range(4, 6), "b")))
    assert snap.operation == "append" and snap.summary_value("added-records") == "6"
    assert ids_of(table) == list(range(6))

    snap = table.replace_partitions(written(table, rows(range(10, 12), "a")))
    assert snap.operation == "overwrite"
    assert ids_of(table) == [4, 5, 10, 11]

    snap = table.overwrite_data_files(written(table, rows(range(20, 21), "b")), where="category = 'b'")
    assert ids_of(table) == [10, 11, 20]
    snap = table.overwrite_data_files(written(table, rows(range(30, 32), "c")))
    assert ids_of(table) == [30, 31]
    assert table.catalog.verify("db.t") == []


def test_bad_written_files_commit_nothing(table, tmp_path):
    good = written(table, rows(range(3), "a"))
    version = table.state.version
    outside = attrs.evolve(good[0], file_path=str(tmp_path / "elsewhere.parquet"))
    cases = {
        "not under the table location": [outside],
        "spec 7": [attrs.evolve(good[0], spec_id=7)],
        "has 2 partition value": [attrs.evolve(good[0], partition=("a", "b"))],
        "bad partition value": [attrs.evolve(good[0], partition=(12,))],
        "not in schema": [attrs.evolve(good[0], value_counts=((99, 3),))],
        "listed twice": good + good,
        "is listed twice": good + [attrs.evolve(good[0], file_path=f"file://{good[0].file_path}")],  # another spelling
    }
    for message, files in cases.items():
        with pytest.raises(ValidationError, match=message):
            table.append_data_files(files)
    with pytest.raises(ValidationError, match="may not match"):
        table.overwrite_data_files(good, where="category = 'b'")
    assert table.state.version == version and table.snapshots() == []


def test_a_written_file_already_live_is_refused_before_and_inside_the_commit(table):
    """append_data_files refuses a file the branch already holds, as append_files does (every reader would count
    its rows twice), also when a writer committing meanwhile landed it; nothing is committed."""
    files = written(table, rows(range(3), "a"))
    table.append_data_files(files)
    version = table.state.version
    with pytest.raises(ValidationError, match="already in table db.t .branch main.; appending it again"):
        table.append_data_files([attrs.evolve(files[0], file_path=f"file://{files[0].file_path}")])
    assert table.state.version == version
    # two handles appending the same files: the second checked before the first landed them
    with Catalog.open(table.catalog.log.path.parent) as catalog:
        other = catalog.load_table("db.t")
        more = written(table, rows(range(10, 12), "b"))
        commit = other._commit_append

        def commit_after_the_first_lands(*args, **kwargs):
            table.append_data_files(more)
            return commit(*args, **kwargs)

        other._commit_append = commit_after_the_first_lands
        with pytest.raises(ValidationError, match="appended by a commit that landed meanwhile"):
            other.append_data_files(more)
    assert ids_of(table) == [0, 1, 2, 10, 11]
    assert table.catalog.verify("db.t") == []


def test_files_of_a_staged_job_folder_are_orphans_until_committed(table):
    folder = f"{layout.data_dir(table.location)}/spark-job-1"
    table.stage_folder(folder)
    committed = written(table, rows(range(3), "a"), folder)
    failed = written(table, rows(range(3, 5), "b"), folder)
    table.append_data_files(committed)
    gone = table.remove_orphan_files(older_than_ms=2**62)
    assert gone == sorted(f.file_path for f in failed)
    assert all(os.path.exists(f.file_path) for f in committed)
    assert ids_of(table) == [0, 1, 2]
    with pytest.raises(ValidationError, match="not under"):
        table.stage_folder(table.location + "/metadata")


def test_a_running_jobs_files_written_since_the_cutoff_stay(table):
    """A job folder staged before the cutoff whose files were written after it (a job still running, as Java's
    DeleteOrphanFiles judges by a file's modification time): they stay, and so does the folder's record, so a later
    run removes what the job leaves if it fails."""
    folder = f"{layout.data_dir(table.location)}/spark-job-2"
    table.stage_folder(folder)
    old = written(table, rows(range(2), "a"), folder)
    os.utime(old[0].file_path, (1_000, 1_000))  # written long ago (seconds since the epoch)
    running = written(table, rows(range(2, 4), "b"), folder)
    cutoff = min(os.stat(f.file_path).st_mtime_ns // 1_000_000 for f in running) - 1  # just before the new files
    time.sleep(0.01)
    assert table.remove_orphan_files(older_than_ms=cutoff) == [old[0].file_path]
    assert all(os.path.exists(f.file_path) for f in running)
    table.append_data_files(running)  # the job commits what it wrote
    assert ids_of(table) == [2, 3]
    later = written(table, rows(range(5, 6), "a"), folder)  # and then fails: its next file is an orphan
    assert table.remove_orphan_files(older_than_ms=2**62) == [later[0].file_path]
    assert ids_of(table) == [2, 3]


def test_wait_published_returns_once_another_catalog_publishes(tmp_path):
    warehouse = tmp_path / "warehouse"
    with Catalog.open(warehouse) as cat:
        cat.create_namespace("db")
        cat.create_table("db.t", schema=SCHEMA)
    behind = Catalog.open(warehouse, project=False)
    t = behind.load_table("db.t")
    t.append(rows(range(3), "a"))
    version = t.state.version
    assert behind.projector.published_version(t.uuid) < version
    with pytest.raises(PublishTimeout, match="db.t") as caught:
        t.wait_published(version, timeout_s=0.2)
    assert caught.value.table == "db.t" and caught.value.version == version

    def publish_later() -> None:
        with Catalog.open(warehouse) as other:
            other.load_table("db.t").publish()

    publisher = threading.Thread(target=publish_later)
    publisher.start()
    try:
        assert t.wait_published(version, timeout_s=30.0) >= version
    finally:
        publisher.join()
    hint = open(layout.version_hint_file(t.location)).read()
    assert int(hint) == version
    behind.close()


def test_a_foreign_metadata_file_is_refused_and_kept(table):
    table.append(rows(range(3), "a"))
    published = table.catalog.projector.published_version(table.uuid)
    current = json.loads(open(layout.metadata_file(table.location, published)).read())
    foreign = layout.metadata_file(table.location, published + 1)
    current["last-updated-ms"] += 1
    data = json.dumps(current).encode()
    with open(foreign, "wb") as out:
        out.write(data)
    version = table.state.version
    with pytest.raises(ForeignWriterError, match=os.path.basename(foreign)) as caught:
        table.append(rows(range(3, 6), "b"))
    assert caught.value.path == foreign
    assert table.state.version == version
    assert open(foreign, "rb").read() == data
    assert any("foreign writer" in p for p in table.catalog.verify("db.t"))


def own_metadata_file_unpublished(warehouse):
    """A table with a commit not published yet whose metadata file is there already (as a publish that died, or
    one still running, leaves it before moving the pointer); the catalog that made that commit, and its table."""
    with Catalog.open(warehouse) as cat:
        cat.create_namespace("db")
        cat.create_table("db.t", schema=SCHEMA).append(rows(range(3), "a"))
    behind = Catalog.open(warehouse, project=False)
    t = behind.load_table("db.t")
    t.append(rows(range(3, 6), "a"))
    (path, data), = [(p, d) for p, d in t.render().items()
                     if p == layout.metadata_file(t.location, t.state.version)]
    with open(path, "wb") as out:
        out.write(data)
    return behind, t


def test_an_interrupted_own_publish_is_not_foreign(tmp_path):
    behind, t = own_metadata_file_unpublished(tmp_path / "warehouse")
    t.append(rows(range(6, 9), "a"))
    t.publish()
    assert ids_of(t) == list(range(9))
    behind.close()


def test_a_commit_does_not_wait_for_the_publish_whose_metadata_file_it_finds(tmp_path):
    """A publish in flight has linked the next metadata file but not moved the pointer yet. A commit checking for
    foreign metadata recognises icelog's own rendering there and lands while that publish still holds its lock,
    instead of waiting for it to end."""
    warehouse = tmp_path / "warehouse"
    behind, t = own_metadata_file_unpublished(warehouse)
    held, landed, outcome = threading.Event(), threading.Event(), {}

    def publish_in_flight() -> None:
        with Catalog.open(warehouse, project=False) as other:
            with other.log.exclusive(f"publish {t.uuid}") as taken:
                held.set()
                # bounded well below the busy timeout (30 s), so that a commit waiting for this lock shows as False
                outcome["taken"], outcome["landed while held"] = taken, landed.wait(timeout=20)

    publisher = threading.Thread(target=publish_in_flight)
    publisher.start()
    try:
        assert held.wait(timeout=30)
        version = t.append(rows(range(6, 9), "a")) and t.state.version
        landed.set()
    finally:
        publisher.join()
    assert outcome == {"taken": True, "landed while held": True}
    assert version == behind.log.head(t.uuid)
    t.publish()
    assert ids_of(t) == list(range(9))
    assert t.verify_projection() == []
    behind.close()


def test_a_foreign_file_is_not_overwritten_by_a_later_publish(tmp_path):
    warehouse = tmp_path / "warehouse"
    with Catalog.open(warehouse) as cat:
        cat.create_namespace("db")
        cat.create_table("db.t", schema=SCHEMA).append(rows(range(3), "a"))
    behind = Catalog.open(warehouse, project=False)
    t = behind.load_table("db.t")
    t.append(rows(range(3, 6), "a"))  # committed, not published yet
    foreign = layout.metadata_file(t.location, behind.projector.published_version(t.uuid) + 1)
    with open(foreign, "wb") as out:
        out.write(b'{"written": "by someone else"}')
    with pytest.raises(ForeignWriterError, match="Cannot publish db.t"):
        t.publish()
    assert open(foreign, "rb").read() == b'{"written": "by someone else"}'
    behind.close()


def test_a_foreign_metadata_file_that_slips_in_after_the_commit_check_is_kept_and_the_publish_refused(table):
    """The commit checks for foreign metadata once; a Hadoop-catalog writer that puts v<N+1> there between that check
    and the publish must not be overwritten: the publish writes metadata.json only where no file is. And it stops
    there: it does not take the file for a lost index and render the whole history again (which wrote back every
    manifest list expiry had deleted)."""
    for i in range(3):
        table.append(rows(range(i, i + 1), "a"))
        time.sleep(0.002)
    gone = table.expire_snapshots(older_than_ms=int(time.time() * 1000) + 60_000, retain_last=1)
    assert gone.deleted_manifest_lists
    projector = table.catalog.projector
    foreign = layout.metadata_file(table.location, projector.published_version(table.uuid) + 1)
    publish, calls = projector.publish, []

    def racing_publish(*args, **kwargs):
        calls.append(1)
        if not os.path.exists(foreign):
            with open(foreign, "wb") as out:
                out.write(b'{"written": "by someone else"}')
        return publish(*args, **kwargs)

    projector.publish = racing_publish
    try:
        with pytest.raises(PublishFailed, match="another writer put different metadata there"):
            table.append(rows(range(5, 6), "b"))
    finally:
        projector.publish = publish
    assert open(foreign, "rb").read() == b'{"written": "by someone else"}'
    assert projector.published_version(table.uuid) == table.state.version - 1
    assert len(calls) == 1
    assert not any(os.path.exists(p) for p in gone.deleted_manifest_lists)


def test_files_an_append_writes_are_staged_in_its_commit_and_removed_when_it_is_refused(table):
    table.append(rows(range(3), "a"))
    log = table.catalog.log
    staged_before = {p for p, _ in log.staged_files(table.uuid)}
    table.append(rows(range(3, 6), "a"))
    new = {p for p, _ in log.staged_files(table.uuid)} - staged_before
    state = table.state
    assert new == {c.file.file_path for c in table.catalog.store.file_changes_of(state, state.current_snapshot)}
    # a commit refused after the data file was written: the file is removed, nothing is left staged
    published = table.catalog.projector.published_version(table.uuid)
    with open(layout.metadata_file(table.location, published + 1), "wb") as out:
        out.write(b'{"written": "by someone else"}')
    version, before = table.state.version, {p for p, _ in log.staged_files(table.uuid)}
    data_before = files_under(os.path.join(table.location, "data"))
    with pytest.raises(ForeignWriterError):
        table.append(rows(range(6, 9), "a"))
    assert table.state.version == version
    assert {p for p, _ in log.staged_files(table.uuid)} == before
    assert files_under(os.path.join(table.location, "data")) == data_before


def files_under(folder: str) -> set[str]:
    """Every file below ``folder``."""
    return {os.path.join(root, name) for root, _, names in os.walk(folder) for name in names}


@pytest.mark.parametrize("mode", ["copy-on-write", "merge-on-read"])
def test_refused_operations_leave_no_file_behind(tmp_path, mode):
    from engine.errors import ValidationConflict, ValidationError

    with Catalog.open(tmp_path / "wh") as cat, Catalog.open(tmp_path / "wh") as other:
        cat.create_namespace("db")
        t = cat.create_table("db.t", schema=SCHEMA, properties={"write.delete.mode": mode})
        t.append(rows(range(10), "a"))
        data = os.path.join(t.location, "data")
        before, head = files_under(data), cat.log.head(t.uuid)

        def unchanged() -> bool:
            return files_under(data) == before and cat.log.head(t.uuid) == head

        with pytest.raises(ValidationError):                         # a bad filter: checked before writing
            t.overwrite(rows(range(100, 103), "b"), "no_such_column = 1")
        assert unchanged()
        with pytest.raises(ValidationError):                         # a key column the table lacks
            t.upsert(rows(range(3), "z"), ["nope"])
        assert unchanged()
        delta = t.row_delta()
        delta.add_rows(rows(range(200, 203), "c"))
        delta.add_position_deletes({t.inspect.files().column("file_path")[0].as_py(): [0]})
        builders = files_under(data) - before
        assert len(builders) == 2                                    # the builder wrote its data and delete files
        other.load_table("db.t").delete("id = 0")                    # a concurrent delete of the same row
        with pytest.raises(ValidationConflict):
            delta.commit()
        assert not builders & files_under(data)                      # refused: its files are gone
        head = cat.log.head(t.uuid)
        before = files_under(data)
        with pytest.raises(RuntimeError):                            # leaving the builder's block on an error
            with t.row_delta() as block:
                block.add_rows(rows(range(300, 302), "d"))
                raise RuntimeError("the job failed")
        assert unchanged()
        assert t.scan().count() == 9 and cat.verify("db.t") == []


def test_removing_written_files_never_touches_a_file_the_table_does_not_own(tmp_path):
    with Catalog.open(tmp_path / "wh") as cat:
        cat.create_namespace("db")
        t = cat.create_table("db.t", schema=SCHEMA)
        other = cat.create_table("db.other", schema=SCHEMA)
        other.append(rows(range(3), "a"))
        others_file = other.inspect.files().column("file_path")[0].as_py().removeprefix("file://")
        outside = tmp_path / "mine.parquet"
        outside.write_bytes(b"the user's")
        database = tmp_path / "wh" / "catalog.db"
        head = cat.log.head(t.uuid)
        t.remove_written([others_file, str(outside), str(database), str(tmp_path / "wh" / "db" / "t" / ".." / "other")])
        assert os.path.exists(others_file) and outside.read_bytes() == b"the user's" and database.stat().st_size > 0
        assert other.scan().count() == 3 and cat.log.head(t.uuid) == head and cat.verify("db.other") == []


@pytest.mark.parametrize("operation", ["overwrite", "row_delta", "compaction"])
def test_files_of_a_landed_commit_stay_whatever_error_its_publish_raises(tmp_path, operation):
    """Once the log holds the commit, its files are the table's: a publish failing with any error (here one no
    storage layer raises) is reported as PublishFailed, and none of the operation's files is removed."""
    with Catalog.open(tmp_path / "wh") as cat:
        cat.create_namespace("db")
        t = cat.create_table("db.t", schema=SCHEMA)
        t.append(rows(range(5), "a"))
        t.append(rows(range(5, 10), "a"))

        def broken_publish(*args, **kwargs):
            raise ValueError("a renderer bug")

        real_publish = cat.projector.publish
        cat.projector.publish = broken_publish
        try:
            with pytest.raises(PublishFailed):
                if operation == "overwrite":
                    t.overwrite(rows(range(100, 103), "b"), "id = 1")
                elif operation == "row_delta":
                    with t.row_delta() as delta:
                        delta.add_rows(rows(range(200, 202), "c"))
                        delta.commit()  # landed, publish failed: leaving the block must not discard its files
                else:
                    t.rewrite_data_files()
        finally:
            cat.projector.publish = real_publish
        t.publish()
        live = [p.removeprefix("file://") for p in t.inspect.files().column("file_path").to_pylist()]
        assert live and all(os.path.exists(p) for p in live)
        assert cat.verify("db.t") == []
        expected = {"overwrite": 12, "row_delta": 12, "compaction": 10}[operation]
        assert t.scan().count() == expected
