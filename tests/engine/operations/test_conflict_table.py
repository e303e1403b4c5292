"""The conflict table: an operation staged on one snapshot, another committed meanwhile, and whether the first still
lands, case by case as Iceberg Java decides it (MergingSnapshotProducer's validations as BaseRowDelta,
BaseOverwriteFiles and BaseRewriteFiles call them). Every case runs both ways: the concurrent commit touches what the
operation read (a conflict, ``ValidationConflict`` naming the commit, nothing of the operation lands) or something
disjoint from it (both land, and the table equals the two applied one after the other).

=====================================================  ===========================================================
Java validation                                        cases
=====================================================  ===========================================================
validateAddedDataFiles (serializable, by filter)       delete, overwrite and upsert against an append in or out of
                                                       their filter; snapshot isolation never conflicts; a dynamic
                                                       overwrite by the partitions it replaces (all when unpartitioned)
validateDeletedDataFiles / files must still be live    copy-on-write delete, compaction and merge-on-read delete
                                                       against a delete that removed their file or another one (a
                                                       merge-on-read delete skips whole-file deletes, as Java's
                                                       DELETE does)
validateNoNewDeletesForDataFiles                       copy-on-write delete against position deletes (by file) and
                                                       equality deletes (by partition and column bounds); a
                                                       compaction keeping sequence numbers ignores equality deletes
validateNoNewDeleteFiles for referenced files          merge-on-read delete against another one on the same file;
                                                       an equality delete is no conflict for it
validateNoNewDeleteFiles (ReplacePartitions)            a dynamic overwrite under snapshot isolation against an
                                                       equality delete in a partition it replaces or in another
dropPartition / deleteByRowFilter on the new base       overwrites under snapshot isolation replace data added
                                                       meanwhile into what they replace (a file the filter matches
                                                       in part conflicts)
validateNoConflictingDeleteFiles (UPDATE, MERGE)       a v3 upsert under snapshot isolation against an equality
                                                       delete of its key or of another one; an upsert against a
                                                       position delete in a file that may hold its key or not
(icelog's own) rows still reach their equality deletes  delete by key and upsert with equality deletes of an older
                                                       spec's partitions against a compaction into the current
                                                       spec (Java writes no such deletes)
=====================================================  ===========================================================

Layer: tests (real SQLite log and Parquet files; the interleaving is a transaction staged before the other commit).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs
import pyarrow as pa
import pytest

from engine import Catalog
from engine.errors import ValidationConflict, ValidationError

SCHEMA = pa.schema([("id", pa.int64()), ("cat", pa.string())])


def rows(ids: list[int], cat: str) -> pa.Table:
    return pa.table({"id": pa.array(ids, pa.int64()), "cat": [cat] * len(ids)})


def ids_of(t: Any) -> list[int]:
    return sorted(t.scan().to_arrow().column("id").to_pylist())


@attrs.frozen
class Case:
    """``staged`` runs in a transaction begun on the table (files: ids 0-9 in cat a, 100-109 in cat b); then
    ``concurrent`` commits directly; then the transaction commits."""

    name: str
    staged: Callable[[Any], Any]
    concurrent: Callable[[Any], Any]
    conflicts: bool
    partitioned: bool = False
    properties: dict[str, str] = attrs.field(factory=dict)
    #: the rows after both landed, when not those of a serial replay (snapshot isolation keeps rows the operation
    #: never read)
    expected: list[int] | None = None
    format_version: int = 2


MOR = {"write.delete.mode": "merge-on-read"}
SNAPSHOT_ISOLATION = {"write.delete.isolation-level": "snapshot"}


def _position_delete(t: Any, row_id: int) -> Any:
    """A merge-on-read delete of one row through a row delta (ids 0-9 and 100-109 sit at positions 0-9)."""
    path = next(task.file.file_path for task in t.scan(f"id = {row_id}").plan_files())
    with t.row_delta() as delta:
        delta.add_position_deletes({path: [row_id % 100]})
    return t.current_snapshot()


def _rewrite(tx: Any) -> Any:
    return tx.rewrite_data_files()


NO_CAT_METRICS = {"write.metadata.metrics.column.cat": "none"}
UPDATE_SNAPSHOT_ISOLATION = {"write.update.isolation-level": "snapshot"}


def _delete_and_insert(key: int) -> Callable[[Any], Any]:
    """Another writer's update of ``key`` by an equality delete and a new row (as Flink writes one)."""
    def update(t: Any) -> Any:
        with t.transaction() as tx:
            tx.delete_by_key(rows([key], "x").select(["id"]), ["id"])
            tx.append(rows([key], "other"))
        return t.current_snapshot()
    return update

CASES = [
    # validateAddedDataFiles: serializable isolation, the operation's filter against data added meanwhile, the
    # files pruned by partition as well as by metrics (a column without metrics still has partition values)
    Case("cow delete / append into its partition, no metrics", lambda tx: tx.delete("cat = 'a' and id = 3"),
         lambda t: t.append(rows([3], "a")), True, partitioned=True, properties=NO_CAT_METRICS),
    Case("cow delete / append into another partition, no metrics", lambda tx: tx.delete("cat = 'a' and id = 3"),
         lambda t: t.append(rows([3], "b")), False, partitioned=True, properties=NO_CAT_METRICS),
    Case("mor delete / append into another partition, no metrics", lambda tx: tx.delete("cat = 'a' and id = 3"),
         lambda t: t.append(rows([3], "b")), False, partitioned=True, properties=MOR | NO_CAT_METRICS),
    Case("cow delete / append into its filter", lambda tx: tx.delete("id < 5"),
         lambda t: t.append(rows([3], "c")), True),
    Case("cow delete / append outside its filter", lambda tx: tx.delete("id < 5"),
         lambda t: t.append(rows([50], "c")), False),
    Case("cow delete under snapshot isolation / append into its filter", lambda tx: tx.delete("id < 5"),
         lambda t: t.append(rows([3], "c")), False, properties=SNAPSHOT_ISOLATION,
         expected=[3, *range(5, 10), *range(100, 110)]),
    Case("overwrite / append into its filter", lambda tx: tx.overwrite(rows([1], "a"), "id < 5"),
         lambda t: t.append(rows([4], "c")), True),
    Case("overwrite / append outside its filter", lambda tx: tx.overwrite(rows([1], "a"), "id < 5"),
         lambda t: t.append(rows([60], "c")), False),
    Case("upsert / append of one of its keys", lambda tx: tx.upsert(rows([7], "new"), ["id"]),
         lambda t: t.append(rows([7], "c")), True),
    Case("upsert / append of another key", lambda tx: tx.upsert(rows([7], "new"), ["id"]),
         lambda t: t.append(rows([70], "c")), False),
    Case("upsert / upsert of the same key", lambda tx: tx.upsert(rows([7], "new"), ["id"]),
         lambda t: t.upsert(rows([7], "other"), ["id"]), True),
    Case("upsert / upsert of another key", lambda tx: tx.upsert(rows([7], "new"), ["id"]),
         lambda t: t.upsert(rows([105], "other"), ["id"]), False),
    # validateNoConflictingDeleteFiles (UPDATE and MERGE, both isolation levels): position deletes that may reach its
    # keys, judged by the data file they name (Java refuses any; the other file's bounds exclude the key)
    Case("upsert / merge-on-read delete of its key", lambda tx: tx.upsert(rows([7], "new"), ["id"]),
         lambda t: t.delete("id = 7"), True, properties=MOR),
    Case("upsert under snapshot isolation / merge-on-read delete of its key",
         lambda tx: tx.upsert(rows([7], "new"), ["id"]), lambda t: t.delete("id = 7"), True,
         properties=MOR | UPDATE_SNAPSHOT_ISOLATION),
    Case("upsert / merge-on-read delete in another key range's file", lambda tx: tx.upsert(rows([7], "new"), ["id"]),
         lambda t: t.delete("id = 102"), False, properties=MOR),
    # validateNoConflictingDeleteFiles (UPDATE and MERGE, both isolation levels): equality deletes of its keys; a
    # v3 upsert deletes by deletion vector, and the other writer's new row of the key would stay beside its own
    Case("v3 upsert under snapshot isolation / equality delete and insert of its key",
         lambda tx: tx.upsert(rows([7], "new"), ["id"]), _delete_and_insert(7), True,
         properties=UPDATE_SNAPSHOT_ISOLATION, format_version=3),
    Case("v3 upsert under snapshot isolation / equality delete and insert of another key",
         lambda tx: tx.upsert(rows([7], "new"), ["id"]), _delete_and_insert(105), False,
         properties=UPDATE_SNAPSHOT_ISOLATION, format_version=3),
    # the files an operation rewrites or references must still be live
    Case("cow delete / delete that removed its file", lambda tx: tx.delete("id = 1"),
         lambda t: t.delete("id >= 0 and id < 10"), True),
    Case("cow delete / delete that removed another file", lambda tx: tx.delete("id = 1"),
         lambda t: t.delete("id >= 100"), False),
    Case("compaction / delete that removed a file it rewrites", _rewrite,
         lambda t: t.delete("id >= 100"), True),
    Case("mor delete / delete that removed its file", lambda tx: tx.delete("id = 1"),
         lambda t: t.overwrite(rows([0], "a"), "id < 10"), True, properties=MOR),
    Case("mor delete / delete that removed another file", lambda tx: tx.delete("id = 1"),
         lambda t: t.overwrite(rows([100], "b"), "id >= 100"), False, properties=MOR),
    # Java's DELETE skips removals by 'delete' snapshots (validateDataFilesExist with skipDeletes): the rows are gone,
    # and icelog drops its deletes of them instead of leaving them dangling
    Case("mor delete / delete that removed its whole file", lambda tx: tx.delete("id = 1"),
         lambda t: t.delete("id >= 0 and id < 10"), False, properties=MOR),
    Case("v3 mor delete / delete that removed its whole file", lambda tx: tx.delete("id = 1"),
         lambda t: t.delete("id >= 0 and id < 10"), False, properties=MOR, format_version=3),
    # Java's DELETE validates no new delete files; icelog refuses position deletes of the same file (counted twice)
    Case("mor delete / equality delete in its file's bounds", lambda tx: tx.delete("id = 1"),
         lambda t: t.delete_by_key(rows([2], "a").select(["id"]), ["id"]), False, properties=MOR),
    # validateNoNewDeletesForDataFiles: delete files added meanwhile for the files an operation rewrites
    Case("cow delete / position deletes in its file", lambda tx: tx.delete("id = 1"),
         lambda t: _position_delete(t, 2), True),
    Case("cow delete / position deletes in another file", lambda tx: tx.delete("id = 1"),
         lambda t: _position_delete(t, 102), False),
    Case("cow delete / equality deletes overlapping its file", lambda tx: tx.delete("id = 1"),
         lambda t: t.delete_by_key(rows([2], "a").select(["id"]), ["id"]), True),
    Case("cow delete / equality deletes outside its file's bounds", lambda tx: tx.delete("id = 1"),
         lambda t: t.delete_by_key(rows([104], "b").select(["id"]), ["id"]), False),
    Case("cow delete / equality deletes in another partition", lambda tx: tx.delete("id = 1"),
         lambda t: t.delete_by_key(rows([104], "b").select(["id", "cat"]), ["id", "cat"]), False, partitioned=True),
    Case("cow delete / equality deletes in its partition and bounds", lambda tx: tx.delete("id = 1"),
         lambda t: t.delete_by_key(rows([2], "a").select(["id", "cat"]), ["id", "cat"]), True, partitioned=True),
    Case("compaction / equality deletes in its files", _rewrite,
         lambda t: t.delete_by_key(rows([2], "a").select(["id"]), ["id"]), False),
    Case("compaction / position deletes in its files", _rewrite,
         lambda t: t.delete("id = 2"), True, properties=MOR),
    # validateAddedDataFiles for a dynamic overwrite (BaseReplacePartitions): the partitions it replaces, or the
    # whole table when its spec is unpartitioned, whatever spec the data added meanwhile was written with
    Case("dynamic overwrite / append into a partition it replaces", lambda tx: tx.dynamic_overwrite(rows([1], "a")),
         lambda t: t.append(rows([3], "a")), True, partitioned=True),
    Case("dynamic overwrite / append into another partition", lambda tx: tx.dynamic_overwrite(rows([1], "a")),
         lambda t: t.append(rows([3], "c")), False, partitioned=True),
    Case("unpartitioned dynamic overwrite / append in the older partitioned spec",
         lambda tx: (tx.update_spec().remove_field("cat").commit(), tx.dynamic_overwrite(rows([1], "a"))),
         lambda t: t.append(rows([3], "c")), True, partitioned=True),
    # validateNoNewDeleteFiles of a dynamic overwrite (BaseReplacePartitions), at both isolation levels: delete files
    # added to the partitions it replaces, even ones that reach none of the files it read
    Case("dynamic overwrite under snapshot isolation / equality delete in a partition it replaces",
         lambda tx: tx.dynamic_overwrite(rows([1], "a")),
         lambda t: t.delete_by_key(rows([50], "a").select(["id", "cat"]), ["id", "cat"]), True, partitioned=True,
         properties=UPDATE_SNAPSHOT_ISOLATION),
    Case("dynamic overwrite under snapshot isolation / equality delete in another partition",
         lambda tx: tx.dynamic_overwrite(rows([1], "a")),
         lambda t: t.delete_by_key(rows([105], "b").select(["id", "cat"]), ["id", "cat"]), False, partitioned=True,
         properties=UPDATE_SNAPSHOT_ISOLATION),
    # snapshot isolation: an overwrite decides what it replaces on the base it commits on, as Java's do
    # (ReplacePartitions drops its partitions, overwriteByRowFilter deletes by its filter), so data added meanwhile
    # into what it replaces goes too; a file its filter matches only in part cannot be sorted out at commit
    Case("dynamic overwrite under snapshot isolation / append into a partition it replaces",
         lambda tx: tx.dynamic_overwrite(rows([1], "a")), lambda t: t.append(rows([5], "a")), False,
         partitioned=True, properties=UPDATE_SNAPSHOT_ISOLATION),
    Case("unpartitioned dynamic overwrite under snapshot isolation / append",
         lambda tx: tx.dynamic_overwrite(rows([1], "a")), lambda t: t.append(rows([50], "c")), False,
         properties=UPDATE_SNAPSHOT_ISOLATION),
    Case("overwrite under snapshot isolation / append its filter matches in full",
         lambda tx: tx.overwrite(rows([1], "a"), "id < 5"), lambda t: t.append(rows([3], "c")), False,
         properties=UPDATE_SNAPSHOT_ISOLATION),
    Case("overwrite under snapshot isolation / append its filter matches in part",
         lambda tx: tx.overwrite(rows([1], "a"), "id < 5"), lambda t: t.append(rows([3, 60], "c")), True,
         properties=UPDATE_SNAPSHOT_ISOLATION),
    Case("overwrite under snapshot isolation / append outside its filter",
         lambda tx: tx.overwrite(rows([1], "a"), "id < 5"), lambda t: t.append(rows([60], "c")), False,
         properties=UPDATE_SNAPSHOT_ISOLATION),
    Case("whole-table overwrite under snapshot isolation / append",
         lambda tx: tx.overwrite(rows([1], "a")), lambda t: t.append(rows([50], "c")), False,
         properties=UPDATE_SNAPSHOT_ISOLATION),
    # merge-on-read deletes of one file: a second delete of the same file would count rows twice
    Case("mor delete / mor delete of the same file", lambda tx: tx.delete("id = 1"),
         lambda t: t.delete("id = 2"), True, properties=MOR),
    Case("mor delete / mor delete of another file", lambda tx: tx.delete("id = 1"),
         lambda t: t.delete("id = 102"), False, properties=MOR),
]


def _serial(cat: Any, case: Case) -> list[int]:
    """The rows when the concurrent commit lands first and the staged operation runs after it."""
    t = _table(cat, "db.serial", case)
    case.concurrent(t)
    with t.transaction() as tx:
        case.staged(tx)
    return ids_of(t)


def _table(cat: Any, name: str, case: Case) -> Any:
    t = cat.create_table(name, schema=SCHEMA, partition_by=["cat"] if case.partitioned else None,
                         properties=case.properties, format_version=case.format_version)
    t.append(rows(list(range(10)), "a"))
    t.append(rows(list(range(100, 110)), "b"))
    return t


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_conflict_table(tmp_path, case: Case) -> None:
    with Catalog.open(tmp_path / "wh") as cat:
        cat.create_namespace("db")
        t = _table(cat, "db.t", case)
        tx = t.transaction()
        case.staged(tx)
        landed = case.concurrent(t)
        after_concurrent = ids_of(t)
        if case.conflicts:
            with pytest.raises(ValidationConflict) as info:
                tx.commit_transaction()
            assert info.value.commit_id == landed.commit_id and landed.commit_id in str(info.value)
            assert ids_of(t) == after_concurrent                      # nothing of the operation landed
        else:
            tx.commit_transaction()
            assert ids_of(t) == (case.expected if case.expected is not None else _serial(cat, case))
        assert cat.verify("db.t") == []


def test_a_conflict_raised_in_a_worker_process_reaches_the_parent_whole() -> None:
    """Errors with keyword-only attributes pickle, so a process pool re-raises them instead of hanging."""
    import pickle

    from engine.errors import CommitConflict, PublishFailed

    for error in (ValidationConflict("Cannot delete: commit c1 won", commit_id="c1", snapshot_id=7),
                  CommitConflict("moved on", stream="s", expected_version=1, actual_version=3, winner="c2"),
                  PublishFailed("not published", path="/x", table="db.t", version=4)):
        copy = pickle.loads(pickle.dumps(error))
        assert type(copy) is type(error) and str(copy) == str(error) and copy.__dict__ == error.__dict__


def test_v2_position_deletes_name_one_data_file_each_unless_granularity_is_partition(tmp_path) -> None:
    """``write.delete.granularity``: ``file`` (the default, as Java's since 1.8) writes one position delete file per
    data file, so a concurrent rewrite of another file never sees it as its own; ``partition`` one per partition."""
    with Catalog.open(tmp_path / "wh") as cat:
        cat.create_namespace("db")
        for granularity, expected in ((None, 2), ("partition", 1)):
            props = MOR | ({"write.delete.granularity": granularity} if granularity else {})
            t = cat.create_table(f"db.t_{granularity}", schema=SCHEMA, properties=props)
            t.append(rows(list(range(10)), "a"))
            t.append(rows(list(range(100, 110)), "b"))
            t.delete("id in (1, 101)")
            deletes = [f for f in t.inspect.files().to_pylist() if f["content"] == 1]
            assert len(deletes) == expected and ids_of(t) == [i for i in [*range(10), *range(100, 110)]
                                                              if i not in (1, 101)]
        with pytest.raises(ValidationError, match="write.delete.granularity of db.bad: 'row' is not one of"):
            cat.create_table("db.bad", schema=SCHEMA, properties=MOR | {"write.delete.granularity": "row"})
        from engine.state.events import PropertiesSet

        t = cat.create_table("db.bad", schema=SCHEMA, properties=MOR)
        t.commit_events(lambda base, ctx: [PropertiesSet(updates={"write.delete.granularity": "row"})])  # another
        t.append(rows([1, 2], "a"))                                                                 # writer's
        version = t.state.version
        with pytest.raises(ValidationError, match="write.delete.granularity is 'row'"):
            t.delete("id = 1")
        assert t.state.version == version


def _two_appends(cat: Any) -> tuple[Any, Any]:
    """``db.t`` with ids 0-9 (its first snapshot, returned with the table) and then ids 100-109."""
    cat.create_namespace("db")
    t = cat.create_table("db.t", schema=SCHEMA)
    first = t.append(rows(list(range(10)), "a"))
    t.append(rows(list(range(100, 110)), "b"))
    return t, first


@pytest.mark.parametrize("moved", ["rollback", "expiry"])
def test_an_operation_whose_snapshot_left_the_branch_is_refused_and_removes_nothing(tmp_path, moved: str) -> None:
    """Java's validationHistory: when the snapshot an operation read is no longer under the branch head (rolled
    back past, or expired after a delete of what it read), the history between them cannot be validated. A
    copy-on-write delete that went on anyway removed a file the head does not hold (an unprojectable snapshot) and
    brought back the rows it rewrote."""
    with Catalog.open(tmp_path / "wh") as cat:
        t, first = _two_appends(cat)
        tx = t.transaction()
        tx.delete("id = 101")                                         # reads the head: ids 0-9 and 100-109
        if moved == "rollback":
            t.manage_snapshots().rollback_to_snapshot(first.snapshot_id).commit()
        else:
            t.delete("id >= 100")
            t.append(rows([500], "c"))
            t.expire_snapshots(older_than_ms=t.current_snapshot().timestamp_ms + 1, retain_last=1)
        before = ids_of(t)
        latest = t.state.commit_id
        with pytest.raises(ValidationConflict) as info:
            tx.commit_transaction()
        assert "no longer an ancestor" in str(info.value) and info.value.commit_id == latest
        assert ids_of(t) == before and 101 not in before
        assert cat.verify("db.t") == []


def test_a_transaction_never_removes_a_file_the_branch_no_longer_holds(tmp_path) -> None:
    """The delete reads a snapshot its own transaction staged, rebuilt on the new head when it commits: with the
    branch rolled back past the file it rewrites, the file is not in the head, and removing it is refused (Java's
    failMissingDeletePaths) instead of landing a snapshot no manifest list can render."""
    with Catalog.open(tmp_path / "wh") as cat:
        t, first = _two_appends(cat)
        tx = t.transaction()
        tx.append(rows([500], "c"))
        tx.delete("id = 101")
        t.manage_snapshots().rollback_to_snapshot(first.snapshot_id).commit()
        with pytest.raises(ValidationConflict) as info:
            tx.commit_transaction()
        assert "is not in the table" in str(info.value)
        assert ids_of(t) == list(range(10)) and cat.verify("db.t") == []


def _mor_delete(tx: Any) -> None:
    tx.delete("id = 101")


def _position_deletes(tx: Any) -> None:
    path = next(task.file.file_path for task in tx.scan("id = 101").plan_files())
    with tx.row_delta() as delta:
        delta.add_position_deletes({path: [1]})


@pytest.mark.parametrize("format_version", [2, 3])
@pytest.mark.parametrize("stage", [_mor_delete, _position_deletes], ids=["merge-on-read delete", "row delta"])
def test_a_transaction_never_deletes_rows_of_a_file_the_branch_no_longer_holds(tmp_path, format_version: int,
                                                                              stage: Callable[[Any], None]) -> None:
    """The same with position deletes (v2) or a deletion vector (v3): the rollback adds no snapshot to validate,
    and the delete would land naming a data file the head does not hold (a dangling delete file)."""
    with Catalog.open(tmp_path / "wh") as cat:
        cat.create_namespace("db")
        t = cat.create_table("db.t", schema=SCHEMA, format_version=format_version, properties=MOR)
        first = t.append(rows(list(range(10)), "a"))
        t.append(rows(list(range(100, 110)), "b"))
        tx = t.transaction()
        tx.append(rows([500], "c"))
        stage(tx)                                                     # reads the snapshot the transaction staged
        t.manage_snapshots().rollback_to_snapshot(first.snapshot_id).commit()
        with pytest.raises(ValidationConflict) as info:
            tx.commit_transaction()
        assert "is not in the table" in str(info.value)
        assert ids_of(t) == list(range(10)) and cat.verify("db.t") == []
        assert [f["content"] for f in t.inspect.files().to_pylist()] == [0]  # no delete file landed


@pytest.mark.parametrize("format_version", [2, 3])
def test_a_row_delta_that_read_a_snapshot_its_transaction_rolled_back_is_refused(tmp_path,
                                                                                 format_version: int) -> None:
    """The row delta was built on the transaction's staged append; the same transaction then moved the branch off
    it. The history between them cannot be validated (Java's validationHistory), so it is refused, as a start
    snapshot that left the branch is for any operation."""
    with Catalog.open(tmp_path / "wh") as cat:
        cat.create_namespace("db")
        t = cat.create_table("db.t", schema=SCHEMA, format_version=format_version, properties=MOR)
        first = t.append(rows(list(range(10)), "a"))
        path = next(task.file.file_path for task in t.scan().plan_files())
        tx = t.transaction()
        tx.append(rows([500], "c"))
        delta = tx.row_delta()                                        # reads the staged append
        delta.add_position_deletes({path: [0]})
        tx.manage_snapshots().rollback_to_snapshot(first.snapshot_id).commit()
        with pytest.raises(ValidationConflict, match="no longer an ancestor"):
            delta.commit()


KEYED = pa.schema([("id", pa.int64()), ("cat", pa.string()), ("v", pa.int64())])


def _keyed_rows(ids: list[int], v: int = 0) -> pa.Table:
    return pa.table({"id": pa.array(ids, pa.int64()), "cat": ["a"] * len(ids), "v": pa.array([v] * len(ids))})


@pytest.mark.parametrize("format_version", [2, 3])
@pytest.mark.parametrize("operation", ["delete_by_key", "upsert"])
@pytest.mark.parametrize("repartitioned", [True, False], ids=["into a spec the deletes miss", "within its spec"])
def test_key_deletes_scoped_to_a_spec_against_a_compaction(tmp_path, format_version: int, operation: str,
                                                          repartitioned: bool) -> None:
    """Keys that determine the partition of an older spec (identity(cat)) but not the current one (bucket(v)):
    the deletes of that spec's rows are equality deletes of its partitions. A compaction committed meanwhile that
    moved those rows into the current spec would leave them out of reach, and the deleted key would live on (twice
    after an upsert): a conflict. A compaction that keeps the rows in their spec lands beside the deletes."""
    def run(name: str, concurrent_first: bool) -> tuple[Any, list[tuple[int, int]], Any]:
        t = cat.create_table(name, schema=KEYED, partition_by=["cat"], format_version=format_version)
        t.append(_keyed_rows(list(range(10))))
        t.append(_keyed_rows(list(range(10, 20))))
        if repartitioned:
            t.update_spec().remove_field("cat").add_field("v", "bucket[2]").commit()
        tx = t.transaction()
        if not concurrent_first:
            if operation == "delete_by_key":
                tx.delete_by_key(_keyed_rows([3]).select(["id", "cat"]), ["id", "cat"])
            else:
                tx.upsert(_keyed_rows([3], v=99), ["id", "cat"])
        landed = t.rewrite_data_files()
        if concurrent_first:
            with t.transaction() as serial:
                if operation == "delete_by_key":
                    serial.delete_by_key(_keyed_rows([3]).select(["id", "cat"]), ["id", "cat"])
                else:
                    serial.upsert(_keyed_rows([3], v=99), ["id", "cat"])
            return t, _rows(t), landed
        return t, _rows(t), (tx, landed)

    def _rows(t: Any) -> list[tuple[int, int]]:
        table = t.scan().to_arrow()
        return sorted(zip(table.column("id").to_pylist(), table.column("v").to_pylist()))

    with Catalog.open(tmp_path / "wh") as cat:
        cat.create_namespace("db")
        _, expected, _ = run("db.serial", concurrent_first=True)
        assert (3, 0) not in expected
        t, after_compaction, (tx, landed) = run("db.t", concurrent_first=False)
        staged_specs = {f.spec_id for s in tx.state.snapshots for c in (s.staged_changes or ()) for f in [c.file]
                        if f.content.name == "EQUALITY_DELETES"}
        # a v3 upsert deletes by deletion vectors, which name the file the compaction removed (Java's
        # validateDataFilesExist refuses that too)
        vectors = operation == "upsert" and format_version >= 3
        if repartitioned and not vectors:
            assert staged_specs == {0}  # the case under test: equality deletes of the older spec's partition
        if repartitioned or vectors:
            with pytest.raises(ValidationConflict) as info:
                tx.commit_transaction()
            assert info.value.commit_id == landed.commit_id
            assert _rows(t) == after_compaction  # nothing of the operation landed
        else:
            tx.commit_transaction()
            assert _rows(t) == expected
        assert cat.verify("db.t") == []


@pytest.mark.parametrize("format_version", [2, 3])
def test_key_deletes_scoped_to_an_older_spec_against_a_compaction_of_the_current_spec_only(tmp_path,
                                                                                          format_version: int) -> None:
    """A compaction that rewrites only files of the current spec moves no row out of the older spec the equality
    deletes are scoped to: both land (the check judged the files a rewrite added, not the ones it removed)."""
    with Catalog.open(tmp_path / "wh") as cat:
        cat.create_namespace("db")
        t = cat.create_table("db.t", schema=KEYED, partition_by=["cat"], format_version=format_version)
        t.append(_keyed_rows(list(range(10))))  # spec 0 (identity cat): holds key 3
        t.update_spec().remove_field("cat").add_field("v", "bucket[2]").commit()
        t.append(_keyed_rows([11, 15], v=7))
        t.append(_keyed_rows([12, 16], v=7))  # spec 1 files, none holds key 3
        tx = t.transaction()
        tx.delete_by_key(_keyed_rows([3]).select(["id", "cat"]), ["id", "cat"])
        t.rewrite_data_files(where="v = 7")
        tx.commit_transaction()
        assert sorted(t.scan().to_arrow().column("id").to_pylist()) == [0, 1, 2, 4, 5, 6, 7, 8, 9, 11, 12, 15, 16]
        assert cat.verify("db.t") == []
