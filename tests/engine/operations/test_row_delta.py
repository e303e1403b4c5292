"""Row deltas, equality deletes, delete by key and upsert: what a scan sees after each, sequence-number semantics,
how keys become delete files, key validation, and conflict validation against commits that land meanwhile."""

from __future__ import annotations

import datetime
import decimal
import uuid

import pyarrow as pa
import pytest

from engine import Catalog
from engine.errors import ValidationConflict, ValidationError
from engine.model.data_file import DataFileContent
from engine.model.metrics_evaluation import metrics_might_match
from engine.operations import row_delta as rd
from engine.operations.key_deletes import conform_keys, distinct_keys, key_fields, key_filter
from engine.operations.row_delta import RowDelta

SCHEMA = pa.schema([("id", pa.int64()), ("part", pa.string()), ("v", pa.string())])


def rows(ids, part="a", tag="x") -> pa.Table:
    ids = list(ids)
    return pa.table({"id": pa.array(ids, pa.int64()), "part": pa.array([part] * len(ids), pa.string()),
                     "v": pa.array([f"{tag}{i}" for i in ids], pa.string())})


@pytest.fixture
def cat(tmp_path):
    c = Catalog.open(tmp_path / "wh")
    c.create_namespace("db")
    yield c
    c.close()


def ids(t, snapshot_id=None) -> list:
    return sorted(t.scan(snapshot_id=snapshot_id).to_arrow().column("id").to_pylist(),
                  key=lambda x: (x is None, x))


def records(t, snapshot_id=None) -> list[tuple]:
    return sorted(((r["id"], r["part"], r["v"]) for r in t.scan(snapshot_id=snapshot_id).to_arrow().to_pylist()),
                  key=lambda r: (r[0] is None, r[0] or 0, r[1] or "", r[2] or ""))


def added_files(t, snap):
    store = t.catalog.store
    return [c.file for c in store.file_changes_of(t.state, t.state.snapshot_by_id(snap.snapshot_id)) if c.added]


def kinds(files) -> list[DataFileContent]:
    return sorted(f.content for f in files)


def table(cat, name="db.t", partition_by=None, **props):
    return cat.create_table(name, schema=SCHEMA, partition_by=partition_by, properties=props or None)


# -- delete by key -----------------------------------------------------------------------------------------------


def test_delete_by_key_writes_one_global_equality_delete_file(cat):
    t = table(cat)
    s1 = t.append(rows(range(10)))
    snap = t.delete_by_key(pa.table({"id": [3, 7, 7, 42]}), ["id"])
    assert snap.operation == "delete" and snap.parent_snapshot_id == s1.snapshot_id
    assert ids(t) == [0, 1, 2, 4, 5, 6, 8, 9]
    assert ids(t, s1.snapshot_id) == list(range(10))  # time travel: the deletes are newer
    [eq] = added_files(t, snap)
    assert eq.content == DataFileContent.EQUALITY_DELETES and eq.equality_ids == (1,)
    assert eq.spec_id == 0 and eq.partition == () and eq.record_count == 3  # keys deduplicated
    summary = dict(snap.summary)
    assert summary["added-equality-delete-files"] == "1" and summary["added-equality-deletes"] == "3"
    assert summary["total-delete-files"] == "1" and summary["total-records"] == "10"  # records are not rows read
    assert cat.verify("db.t") == []


@pytest.mark.parametrize("format_version", [2, 3])
def test_delete_by_key_with_a_repeated_key_deletes_every_key(cat, format_version):
    """Keys are deduplicated before the deletes are written; the deduplication took the first rows of the keys
    instead of the first row of each key, so a repeated key pushed the last keys out and they were not deleted."""
    t = table(cat, **{"format-version": str(format_version)})
    t.append(rows(range(1, 5)))
    t.delete_by_key(pa.table({"id": [2, 2, 3]}), ["id"])
    assert ids(t) == [1, 4]
    keys = pa.table({"id": [5, 5, None, 7, None, 5], "s": ["a", "a", "b", "c", "b", "z"]})
    assert distinct_keys(keys).to_pylist() == [{"id": 5, "s": "a"}, {"id": None, "s": "b"}, {"id": 7, "s": "c"},
                                               {"id": 5, "s": "z"}]


def test_a_later_append_of_a_deleted_key_survives(cat):
    t = table(cat)
    t.append(rows(range(5)))
    t.delete_by_key(pa.table({"id": [1, 2]}), ["id"])
    t.append(rows([1], tag="again"))
    assert records(t) == [(0, "a", "x0"), (1, "a", "again1"), (3, "a", "x3"), (4, "a", "x4")]
    # deleting the key again deletes the new row: the new delete file is newer than it
    t.delete_by_key(pa.table({"id": [1]}), ["id"])
    assert ids(t) == [0, 3, 4]


def test_keys_covering_the_partition_write_one_file_per_partition(cat):
    t = table(cat, partition_by=["part"])
    t.append(pa.concat_tables([rows(range(5), "a"), rows(range(5, 10), "b"), rows(range(10, 12), "c")]))
    snap = t.delete_by_key(pa.table({"id": [1, 6, 7, 1], "part": ["a", "b", "b", "z"]}), ["id", "part"])
    files = added_files(t, snap)
    assert kinds(files) == [DataFileContent.EQUALITY_DELETES] * 3
    assert sorted((f.partition, f.record_count) for f in files) == [(("a",), 1), (("b",), 2), (("z",), 1)]
    assert ids(t) == [0, 2, 3, 4, 5, 8, 9, 10, 11]


def test_bucketed_keys_compute_their_partition_from_the_key(cat):
    t = table(cat, partition_by=["bucket(4, id)"])
    t.append(rows(range(20)))
    snap = t.delete_by_key(pa.table({"id": list(range(0, 20, 3))}), ["id"])
    files = added_files(t, snap)
    assert {f.content for f in files} == {DataFileContent.EQUALITY_DELETES}
    assert sum(f.record_count for f in files) == 7 and len(files) == len({f.partition for f in files}) > 1
    assert ids(t) == [i for i in range(20) if i % 3]


def test_keys_not_covering_the_partition_fall_back_to_position_deletes(cat):
    t = table(cat, partition_by=["part"])
    t.append(pa.concat_tables([rows(range(5), "a"), rows(range(5, 10), "b")]))
    t.delete("id = 4")  # copy-on-write: the fallback reads the live rows
    snap = t.delete_by_key(pa.table({"id": [1, 4, 8, 99]}), ["id"])
    files = added_files(t, snap)
    assert kinds(files) == [DataFileContent.POSITION_DELETES] * 2
    assert sum(f.record_count for f in files) == 2
    assert ids(t) == [0, 2, 3, 5, 6, 7, 9]
    # nothing left to delete: nothing is committed
    head = cat.log.head(t.uuid)
    assert t.delete_by_key(pa.table({"id": [1, 99]}), ["id"]) is None
    assert cat.log.head(t.uuid) == head


def test_an_unpartitioned_spec_with_live_data_makes_the_deletes_global(cat):
    t = table(cat)
    t.append(rows(range(5), "a"))
    t.update_spec().add_identity("part").commit()
    t.append(rows(range(5, 10), "b"))
    snap = t.delete_by_key(pa.table({"id": [2, 7]}), ["id"])
    [eq] = added_files(t, snap)
    assert eq.content == DataFileContent.EQUALITY_DELETES and eq.spec_id == 0 and eq.partition == ()
    assert ids(t) == [0, 1, 3, 4, 5, 6, 8, 9]


def test_every_live_spec_gets_its_own_deletes(cat):
    t = table(cat, partition_by=["part"])
    t.append(rows(range(5), "a"))
    t.update_spec().add_field("id", "bucket[2]").commit()
    t.append(rows(range(5, 10), "b"))
    snap = t.delete_by_key(pa.table({"id": [1, 6], "part": ["a", "b"]}), ["id", "part"])
    files = added_files(t, snap)
    assert {f.spec_id for f in files} == {0, 1} and {f.content for f in files} == {DataFileContent.EQUALITY_DELETES}
    assert ids(t) == [0, 2, 3, 4, 5, 7, 8, 9]


def test_nulls_in_keys_match_nulls(cat):
    t = table(cat)
    t.append(pa.table({"id": pa.array([1, None, 3, None], pa.int64()), "part": ["a", "a", None, None],
                       "v": ["p", "q", "r", "s"]}))
    t.delete_by_key(pa.table({"id": pa.array([None], pa.int64())}), ["id"])
    assert records(t) == [(1, "a", "p"), (3, None, "r")]
    t.delete_by_key(pa.table({"id": pa.array([3], pa.int64()), "part": pa.array([None], pa.string())}),
                    ["id", "part"])
    assert records(t) == [(1, "a", "p")]


def test_nulls_in_keys_with_position_deletes(cat):
    t = table(cat, partition_by=["v"])
    t.append(pa.table({"id": pa.array([1, None, 3], pa.int64()), "part": ["a", "a", None], "v": ["p", "q", "q"]}))
    snap = t.delete_by_key(pa.table({"id": [None, 3], "part": [None, None]}), ["id", "part"])
    assert kinds(added_files(t, snap)) == [DataFileContent.POSITION_DELETES]
    assert records(t) == [(1, "a", "p"), (None, "a", "q")]


def test_delete_by_key_on_a_branch_leaves_main_alone(cat):
    t = table(cat)
    s1 = t.append(rows(range(5)))
    t.manage_snapshots().create_branch(s1.snapshot_id, "audit").commit()
    snap = t.delete_by_key(pa.table({"id": [0]}), ["id"], branch="audit")
    assert t.state.ref("audit").snapshot_id == snap.snapshot_id
    assert t.current_snapshot().snapshot_id == s1.snapshot_id
    assert ids(t) == list(range(5)) and ids(t, snap.snapshot_id) == [1, 2, 3, 4]


# -- upsert ------------------------------------------------------------------------------------------------------


def test_upsert_replaces_and_inserts_in_one_overwrite(cat):
    t = table(cat)
    s1 = t.append(rows(range(5)))
    snap = t.upsert(rows([3, 4, 5], tag="new"), ["id"])
    assert snap.operation == "overwrite" and snap.parent_snapshot_id == s1.snapshot_id
    assert kinds(added_files(t, snap)) == [DataFileContent.DATA, DataFileContent.EQUALITY_DELETES]
    # the new rows share the deletes' sequence number: the deletes do not apply to them
    assert records(t) == [(0, "a", "x0"), (1, "a", "x1"), (2, "a", "x2"), (3, "a", "new3"), (4, "a", "new4"),
                          (5, "a", "new5")]
    assert records(t, s1.snapshot_id) == [(i, "a", f"x{i}") for i in range(5)]
    assert cat.verify("db.t") == []


def test_upsert_twice_keeps_one_row_per_key_latest_wins(cat):
    t = table(cat, partition_by=["part"])
    t.append(rows(range(4), "a"))
    t.upsert(rows([1, 2], "a", "second"), ["id", "part"])
    snap = t.upsert(rows([2, 3], "a", "third"), ["id", "part"])
    assert records(t) == [(0, "a", "x0"), (1, "a", "second1"), (2, "a", "third2"), (3, "a", "third3")]
    assert {f.partition for f in added_files(t, snap)} == {("a",)}


def test_upsert_moving_a_row_to_another_partition(cat):
    t = table(cat, partition_by=["part"])
    t.append(pa.concat_tables([rows(range(3), "a"), rows(range(3, 6), "b")]))
    t.upsert(rows([1, 4], "b", "moved"), ["id"])  # keys do not cover `part`: position deletes for the old rows
    t.upsert(rows([1], "c", "again"), ["id"])
    assert records(t) == [(0, "a", "x0"), (1, "c", "again1"), (2, "a", "x2"), (3, "b", "x3"), (4, "b", "moved4"),
                          (5, "b", "x5")]


def test_upsert_into_an_empty_table_and_with_null_keys(cat):
    t = table(cat)
    t.upsert(pa.table({"id": pa.array([1, None], pa.int64()), "part": ["a", "a"], "v": ["one", "null"]}), ["id"])
    t.upsert(pa.table({"id": pa.array([None], pa.int64()), "part": ["a"], "v": ["null again"]}), ["id"])
    assert records(t) == [(1, "a", "one"), (None, "a", "null again")]


def test_upsert_refuses_repeated_keys_and_commits_nothing(cat):
    t = table(cat)
    t.append(rows(range(3)))
    head = cat.log.head(t.uuid)
    with pytest.raises(ValidationError, match=r"repeat a key.*'id': 1"):
        t.upsert(rows([1, 2, 1]), ["id"])
    with pytest.raises(ValidationError, match="'nope'"):
        t.upsert(rows([1]), ["nope"])
    assert t.upsert(rows([]), ["id"]) is None
    assert cat.log.head(t.uuid) == head and ids(t) == [0, 1, 2]


# -- key validation ----------------------------------------------------------------------------------------------


def test_bad_key_columns_raise_and_commit_nothing(cat):
    schema = pa.schema([("id", pa.int64()), ("f", pa.float64()), ("s", pa.struct([("x", pa.int32())])),
                        ("l", pa.list_(pa.int32()))])
    t = cat.create_table("db.k", schema=schema)
    t.append(pa.table({"id": [1], "f": [1.0], "s": [{"x": 1}], "l": [[1]]}, schema=schema))
    head = cat.log.head(t.uuid)
    keys = pa.table({"id": [1], "f": [1.0]})
    for columns, pattern in [([], "no key columns"), (["nope"], "'nope' is not a top-level column"),
                             (["f"], "floating point"), (["s"], "not a primitive"), (["l"], "not a primitive"),
                             (["s.x"], "'s.x' is not a top-level column"), (["id", "id"], "listed twice")]:
        with pytest.raises(ValidationError, match=pattern):
            t.delete_by_key(keys, columns)
    with pytest.raises(ValidationError, match="missing from the rows"):
        t.delete_by_key(pa.table({"other": [1]}), ["id"])
    with pytest.raises(ValidationError, match="does not fit"):
        t.delete_by_key(pa.table({"id": ["x"]}), ["id"])
    with pytest.raises(ValidationError, match="pyarrow.Table"):
        t.delete_by_key([1], ["id"])
    assert t.delete_by_key(pa.table({"id": pa.array([], pa.int64())}), ["id"]) is None
    assert cat.log.head(t.uuid) == head


def test_format_version_1_refuses_row_deltas(cat):
    t = cat.create_table("db.v1", schema=SCHEMA, format_version=1)
    t.append(rows(range(3)))
    with pytest.raises(ValidationError, match="version 2"):
        t.delete_by_key(pa.table({"id": [1]}), ["id"])
    with pytest.raises(ValidationError, match="version 2"):
        t.upsert(rows([1]), ["id"])


KEY_TYPES = [
    ("int", pa.int32(), [1, 2, None]),
    ("date", pa.date32(), [datetime.date(2024, 1, 2), datetime.date(1969, 12, 31), None]),
    ("ts", pa.timestamp("us"), [datetime.datetime(2024, 1, 2, 3, 4, 5), datetime.datetime(1960, 1, 1), None]),
    ("tstz", pa.timestamp("us", tz="UTC"), [datetime.datetime(2024, 1, 2, tzinfo=datetime.timezone.utc), None,
                                           datetime.datetime(2000, 1, 1, tzinfo=datetime.timezone.utc)]),
    ("dec", pa.decimal128(9, 2), [decimal.Decimal("1.25"), decimal.Decimal("-3.50"), None]),
    ("str", pa.string(), ["a", "", None]),
    ("bin", pa.binary(), [b"\x00", b"zz", None]),
    ("fixed", pa.binary(3), [b"abc", b"xyz", None]),
    ("bool", pa.bool_(), [True, None, False]),
    ("uuid", pa.uuid(), [uuid.UUID(int=1).bytes, uuid.UUID(int=2**100).bytes, None]),
]


@pytest.mark.parametrize("name,arrow_type,values", KEY_TYPES, ids=[k[0] for k in KEY_TYPES])
def test_every_key_type_deletes_and_filters(cat, name, arrow_type, values):
    if pa.types.is_fixed_size_binary(arrow_type) or isinstance(arrow_type, pa.BaseExtensionType):
        column = pa.array(values, pa.binary(arrow_type.byte_width)).cast(arrow_type)
    else:
        column = pa.array(values, arrow_type)
    schema = pa.schema([("k", arrow_type), ("n", pa.int64())])
    t = cat.create_table("db.types", schema=schema)
    t.append(pa.table({"k": column, "n": [0, 1, 2]}, schema=schema))
    keys = pa.table({"k": column.take([0, 2])})
    fields = key_fields(t.schema(), ["k"], "test")
    bound = key_filter(distinct_keys(conform_keys(keys, t.schema(), fields, "test")), t.schema())
    [task] = t.scan().plan_files()
    assert metrics_might_match(bound, task.file, t.schema())
    t.delete_by_key(keys, ["k"])
    assert t.scan().to_arrow().column("n").to_pylist() == [1]


def test_many_keys_filter_by_their_range(cat):
    t = table(cat)
    t.append(rows(range(1000)))
    keys = conform_keys(pa.table({"id": list(range(0, 1000, 2))}), t.schema(), key_fields(t.schema(), ["id"], "x"),
                        "x")
    bound = key_filter(keys, t.schema())
    assert str(bound) == "id >= 0 AND id <= 998"  # a range, not 500 values
    t.delete_by_key(keys, ["id"])
    assert ids(t) == list(range(1, 1000, 2))


# -- the builder -------------------------------------------------------------------------------------------------


def test_row_delta_adds_data_position_and_equality_deletes_in_one_commit(cat):
    t = table(cat, partition_by=["part"])
    t.append(pa.concat_tables([rows(range(5), "a"), rows(range(5, 10), "b")]))
    [a] = [f for f in t.scan().plan_files() if f.partition == ("a",)]
    with t.row_delta() as delta:
        delta.add_rows(rows([20, 21], "b"))
        delta.add_position_deletes({a.file_path: [0, 4]})
        delta.add_equality_deletes(pa.table({"id": [6, 20], "part": ["b", "b"]}), ["id", "part"])
    snap = t.state.snapshot_by_id(delta.snapshot_id)
    assert snap.operation == "overwrite"
    assert kinds(added_files(t, snap)) == [DataFileContent.DATA, DataFileContent.POSITION_DELETES,
                                           DataFileContent.EQUALITY_DELETES]
    # the new row 20 survives its own commit's equality delete (same sequence number)
    assert ids(t) == [1, 2, 3, 5, 7, 8, 9, 20, 21]


def test_row_delta_operations_follow_what_it_adds(cat):
    t = table(cat)
    t.append(rows(range(3)))
    d1 = t.row_delta().add_rows(rows([7]))
    assert t.state.snapshot_by_id(d1.snapshot_id) is None
    d1.commit()
    assert t.state.snapshot_by_id(d1.snapshot_id).operation == "append"
    d2 = t.row_delta().add_equality_deletes(pa.table({"id": [7]}), ["id"])
    d2.commit()
    assert t.state.snapshot_by_id(d2.snapshot_id).operation == "delete"
    with pytest.raises(ValidationError, match="committed already"):
        d2.commit()
    head = cat.log.head(t.uuid)
    t.row_delta().commit()  # nothing added: nothing committed
    assert cat.log.head(t.uuid) == head and ids(t) == [0, 1, 2]


def test_position_deletes_of_rows_added_by_the_same_delta_apply(cat):
    t = table(cat)
    delta = t.row_delta().add_rows(rows([1, 2, 3]))
    [new] = delta._data
    delta.add_position_deletes({new.file_path: [1]}).commit()
    assert ids(t) == [1, 3]


def test_row_delta_refuses_bad_requests(cat):
    t = table(cat, partition_by=["part"])
    t.append(rows(range(3), "a"))
    [a] = t.scan().plan_files()
    delta = t.row_delta()
    with pytest.raises(ValidationError, match="not a live data file"):
        delta.add_position_deletes({"/nowhere.parquet": [0]})
    with pytest.raises(ValidationError, match="past the last row"):
        delta.add_position_deletes({a.file_path: [3]})
    with pytest.raises(ValidationError, match="not a row number"):
        delta.add_position_deletes({a.file_path: [-1]})
    with pytest.raises(ValidationError, match="is a data file"):
        delta.add_delete_files([a.file])
    with pytest.raises(ValidationError, match="do not include"):  # equality deletes whose partition is unknown
        delta.add_equality_deletes(pa.table({"id": [1]}), ["id"])
    with pytest.raises(ValidationError, match="does not exist"):
        delta.validate_from_snapshot(12345)
    other = t.row_delta().add_position_deletes({a.file_path: [0]})
    with pytest.raises(ValidationError, match="is a delete file"):
        delta.add_data_files(other._deletes)
    with pytest.raises(ValidationError, match="added twice"):
        other.add_delete_files(other._deletes)
    assert ids(t) == [0, 1, 2]


def test_row_delta_takes_delete_files_written_elsewhere(cat):
    t = table(cat, partition_by=["part"])
    t.append(pa.concat_tables([rows(range(3), "a"), rows(range(3, 6), "b")]))
    t.append(rows([10, 11], "a"))
    a1, a2 = sorted((f for f in t.scan().plan_files() if f.partition == ("a",)), key=lambda f: -f.record_count)
    from engine.write.delete_files import write_equality_deletes, write_position_deletes

    one = write_position_deletes(t.state, {a1.file_path: [1]}, spec_id=0, partition=("a",))
    two = write_position_deletes(t.state, {a1.file_path: [2], a2.file_path: [0]}, spec_id=0, partition=("a",))
    eq = write_equality_deletes(t.state, pa.table({"id": [4]}), equality_ids=[1], spec_id=0, partition=("b",))
    delta = t.row_delta().add_delete_files([one, two, eq])
    assert set(delta._referenced) == {a1.file_path, a2.file_path}  # the second file's paths are read from it
    delta.commit()
    assert ids(t) == [0, 3, 5, 11]
    with pytest.raises(ValidationError, match="not a live data file"):
        t.row_delta().add_delete_files([write_position_deletes(t.state, {"/gone.parquet": [0]}, spec_id=0,
                                                                partition=("a",))])


# -- races -------------------------------------------------------------------------------------------------------


@pytest.fixture
def race(monkeypatch):
    """``race(concurrent)``: the next RowDelta commit first lets ``concurrent()`` land (once), as a writer that
    committed between the delta's read and its commit."""
    original = RowDelta.commit

    def arm(concurrent):
        pending = [concurrent]

        def commit(self):
            if pending:
                pending.pop()()
            return original(self)

        monkeypatch.setattr(RowDelta, "commit", commit)

    return arm


def test_position_deletes_vs_removal_of_their_data_file_fail(cat):
    t = table(cat)
    t.append(rows(range(10)))
    [f] = t.scan().plan_files()
    delta = t.row_delta().add_position_deletes({f.file_path: [1]})
    winner = t.delete("id = 5")  # copy-on-write rewrites (removes) the file the deletes refer to
    with pytest.raises(ValidationConflict, match="was removed by commit") as info:
        delta.commit()
    assert info.value.commit_id == winner.commit_id and winner.commit_id in str(info.value)
    assert t.current_snapshot().snapshot_id == winner.snapshot_id  # nothing of the delta landed
    assert ids(t) == [0, 1, 2, 3, 4, 6, 7, 8, 9]


def test_position_deletes_vs_a_compaction_of_their_data_file_fail(cat):
    t = table(cat)
    t.append(rows(range(5)))
    t.append(rows(range(5, 10)))
    [f] = t.scan(where="id = 0").plan_files()
    delta = t.row_delta().add_position_deletes({f.file_path: [0]})
    winner = t.rewrite_data_files()
    assert winner is not None and winner.operation == "replace"
    with pytest.raises(ValidationConflict, match="was removed by commit") as info:
        delta.commit()
    assert info.value.commit_id == winner.commit_id
    assert ids(t) == list(range(10))


def test_equality_deletes_after_a_concurrent_compaction_still_apply(cat, race):
    t = table(cat)
    t.append(rows(range(5)))
    t.append(rows(range(5, 10)))
    race(lambda: t.rewrite_data_files())
    t.delete_by_key(pa.table({"id": [2, 7]}), ["id"])
    assert [s.operation for s in t.snapshots()][-2:] == ["replace", "delete"]
    assert ids(t) == [0, 1, 3, 4, 5, 6, 8, 9]


def test_two_position_deletes_of_one_file_the_second_fails(cat):
    t = table(cat, **{"write.delete.mode": "merge-on-read"})
    t.append(rows(range(10)))
    [f] = t.scan().plan_files()
    delta = t.row_delta().add_position_deletes({f.file_path: [1, 2]})
    winner = t.delete("id = 1")
    with pytest.raises(ValidationConflict, match="position delete file") as info:
        delta.commit()
    assert info.value.commit_id == winner.commit_id
    assert ids(t) == [0] + list(range(2, 10))
    assert t.current_snapshot().summary_value("total-position-deletes") == "1"


def test_position_deletes_land_next_to_unrelated_commits(cat):
    t = table(cat, partition_by=["part"])
    t.append(pa.concat_tables([rows(range(5), "a"), rows(range(5, 10), "b")]))
    [a] = [f for f in t.scan().plan_files() if f.partition == ("a",)]
    delta = t.row_delta().add_position_deletes({a.file_path: [0]})
    t.append(rows([50], "a"))
    t.delete("part = 'b'")
    delta.commit()
    assert ids(t) == [1, 2, 3, 4, 50]


def test_delete_by_key_vs_append_of_the_same_key_fails_when_serializable(cat, race):
    t = table(cat)
    t.append(rows(range(10)))
    winner = []
    race(lambda: winner.append(t.append(rows([3], tag="concurrent"))))
    with pytest.raises(ValidationConflict) as info:
        t.delete_by_key(pa.table({"id": [3, 4]}), ["id"])
    assert info.value.commit_id == winner[0].commit_id and winner[0].commit_id in str(info.value)
    assert t.current_snapshot().snapshot_id == winner[0].snapshot_id
    assert ids(t) == sorted(list(range(10)) + [3])


def test_delete_by_key_vs_append_of_other_keys_lands(cat, race):
    t = table(cat)
    t.append(rows(range(10)))
    race(lambda: t.append(rows([100, 101])))
    t.delete_by_key(pa.table({"id": [3, 4]}), ["id"])
    assert ids(t) == [0, 1, 2, 5, 6, 7, 8, 9, 100, 101]


def test_delete_by_key_under_snapshot_isolation_lands_and_deletes_the_concurrent_row(cat, race):
    t = table(cat, **{"write.delete.isolation-level": "snapshot"})
    t.append(rows(range(5)))
    race(lambda: t.append(rows([3], tag="concurrent")))
    t.delete_by_key(pa.table({"id": [3]}), ["id"])
    # the equality delete is newer than the concurrent append, so it applies to it as well
    assert ids(t) == [0, 1, 2, 4]


def test_delete_by_key_with_position_fallback_vs_append_of_the_key(cat, race):
    t = table(cat, partition_by=["part"])
    t.append(rows(range(5), "a"))
    winner = []
    race(lambda: winner.append(t.append(rows([2], "b"))))
    with pytest.raises(ValidationConflict) as info:
        t.delete_by_key(pa.table({"id": [2]}), ["id"])
    assert info.value.commit_id == winner[0].commit_id


def test_delete_by_key_with_position_fallback_vs_compaction_of_its_file(cat, race):
    t = table(cat, partition_by=["part"], **{"write.delete.isolation-level": "snapshot"})
    t.append(rows(range(5), "a"))
    winner = []
    race(lambda: winner.append(t.delete("id = 0")))  # rewrites the file the position deletes refer to
    with pytest.raises(ValidationConflict, match="was removed by commit") as info:
        t.delete_by_key(pa.table({"id": [2]}), ["id"])
    assert info.value.commit_id == winner[0].commit_id
    assert ids(t) == [1, 2, 3, 4]


def test_upsert_vs_upsert_of_the_same_key(cat, race):
    t = table(cat)
    t.append(rows(range(5)))
    winner = []
    race(lambda: winner.append(t.upsert(rows([2], tag="first"), ["id"])))
    with pytest.raises(ValidationConflict) as info:
        t.upsert(rows([2], tag="second"), ["id"])
    assert info.value.commit_id == winner[0].commit_id
    assert records(t) == [(0, "a", "x0"), (1, "a", "x1"), (2, "a", "first2"), (3, "a", "x3"), (4, "a", "x4")]


@pytest.mark.parametrize("format_version", [2, 3])
def test_upsert_vs_upsert_of_the_same_key_under_snapshot_isolation_conflicts(cat, race, format_version):
    """Java's MERGE validates new delete files against its keys at both isolation levels: the second upsert of a
    key is refused, whether it deletes by equality (v2, where it would have deleted the first's new row too) or by
    deletion vector (v3, where both new rows would have stayed)."""
    t = table(cat, **{"write.update.isolation-level": "snapshot", "format-version": str(format_version)})
    t.append(rows(range(5)))
    first = []
    race(lambda: first.append(t.upsert(rows([2], tag="first"), ["id"])))
    with pytest.raises(ValidationConflict) as info:
        t.upsert(rows([2], tag="second"), ["id"])
    assert info.value.commit_id == t.current_snapshot().commit_id
    assert records(t) == [(0, "a", "x0"), (1, "a", "x1"), (2, "a", "first2"), (3, "a", "x3"), (4, "a", "x4")]


def test_disjoint_upserts_and_deletes_do_not_conflict(cat, race):
    t = table(cat)
    t.append(pa.concat_tables([rows(range(0, 10)), rows(range(100, 110))]))
    race(lambda: t.upsert(rows([100, 111], tag="p2"), ["id"]))
    t.upsert(rows([1, 11], tag="p1"), ["id"])
    race(lambda: t.delete_by_key(pa.table({"id": [105]}), ["id"]))
    t.delete_by_key(pa.table({"id": [5]}), ["id"])
    assert ids(t) == [0, 1, 2, 3, 4, 6, 7, 8, 9, 11, 100, 101, 102, 103, 104, 106, 107, 108, 109, 111]
    assert len(ids(t)) == len(set(ids(t)))


def test_conflict_detection_filter_and_validate_from_snapshot(cat):
    t = table(cat)
    s1 = t.append(rows(range(5)))
    s2 = t.append(rows([50]))
    # the builder read s2; validating from s1 also sees s2's append
    delta = t.row_delta().add_rows(rows([7])).validate_from_snapshot(s1.snapshot_id)
    delta.conflict_detection_filter("id >= 40")
    with pytest.raises(ValidationConflict) as info:
        delta.commit()
    assert info.value.commit_id == s2.commit_id
    # a filter that no new file can match lets it land
    ok = t.row_delta().add_rows(rows([7])).validate_from_snapshot(s1.snapshot_id)
    ok.conflict_detection_filter("id < 0").commit()
    assert ids(t) == [0, 1, 2, 3, 4, 7, 50]


def test_rolled_back_start_snapshot_fails_the_delta(cat):
    t = table(cat)
    s1 = t.append(rows(range(3)))
    t.append(rows([3]))
    [newest] = [f for f in t.scan().plan_files() if f.record_count == 1]
    delta = t.row_delta().add_position_deletes({newest.file_path: [0]})
    t.manage_snapshots().rollback_to_snapshot(s1.snapshot_id).commit()
    with pytest.raises(ValidationConflict, match="no longer an ancestor"):
        delta.commit()
    assert ids(t) == [0, 1, 2]


def test_module_exports():
    assert set(rd.__all__) <= set(dir(rd))
