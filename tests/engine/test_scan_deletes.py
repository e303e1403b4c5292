"""Scans apply delete files: which delete files reach which data files (sequence numbers, partitions, file
scope), and the rows that survive position and equality deletes."""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa
import pytest

from engine import Catalog
from engine.write.data_writer import write_data_files
from engine.write.delete_files import write_equality_deletes, write_position_deletes
from engine.state.events import CurrentSchemaSet, SchemaAdded, SpecAdded
from engine.model import types as T
from engine.model.data_file import DataFile
from engine.model.partitioning import PartitionSpec
from engine.model.schema import Schema
from engine.operations.snapshot import new_snapshot_id
from engine.operations.snapshot import snapshot_events
from engine.read.scan import FileScanTask


@pytest.fixture
def catalog(tmp_path):
    cat = Catalog.open(tmp_path / "warehouse")
    cat.create_namespace("db")
    yield cat
    cat.close()


def rows(ids: Sequence[int], category: str | Sequence[str | None] = "a", name: Sequence[str | None] | None = None
         ) -> pa.Table:
    cats = [category] * len(ids) if isinstance(category, str) else list(category)
    return pa.table({"id": pa.array(ids, pa.int64()), "category": pa.array(cats, pa.string()),
                     "name": pa.array(name if name is not None else [f"n{i}" for i in ids], pa.string())})


def commit(t, files: Sequence[DataFile], operation: str = "delete") -> int:
    sid = new_snapshot_id()
    t.commit_events(lambda base, ctx: snapshot_events(base, ctx, operation=operation, snapshot_id=sid,
                                                      added=list(files)))
    return sid


def ids(t, **scan) -> list[int]:
    return sorted(t.scan(**scan).to_arrow().column("id").to_pylist())


def data_task(t, partition: tuple) -> FileScanTask:
    [task] = [x for x in t.scan().plan_files() if x.partition == partition]
    return task


@pytest.fixture
def table(catalog):
    t = catalog.create_table("db.t", schema=rows([]).schema, partition_by=["category"])
    t.append(pa.concat_tables([rows(range(0, 5), "a"), rows(range(10, 15), "b")]))
    return t


# -- position deletes -----------------------------------------------------------------------------------------


def test_position_deletes_remove_rows_by_position(table):
    a = data_task(table, ("a",))
    before = table.current_snapshot().snapshot_id
    commit(table, [write_position_deletes(table.state, {a.file_path: [1, 3]}, spec_id=0, partition=("a",))])
    assert ids(table) == [0, 2, 4, 10, 11, 12, 13, 14]
    assert table.scan().count() == 8
    # time travel to before the delete
    assert ids(table, snapshot_id=before) == [0, 1, 2, 3, 4, 10, 11, 12, 13, 14]
    # and a second delete file on top
    commit(table, [write_position_deletes(table.state, {a.file_path: [0, 1]}, spec_id=0, partition=("a",))])
    assert ids(table) == [2, 4, 10, 11, 12, 13, 14]


def test_position_delete_paths_in_any_local_spelling(table):
    a = data_task(table, ("a",))
    b = data_task(table, ("b",))
    commit(table, [write_position_deletes(table.state, {f"file://{a.file_path}": [0]}, spec_id=0, partition=("a",)),
                   write_position_deletes(table.state, {f"file:{b.file_path}": [4]}, spec_id=0, partition=("b",))])
    assert ids(table) == [1, 2, 3, 4, 10, 11, 12, 13]


def test_position_deletes_apply_to_data_of_the_same_commit(table):
    staged = write_data_files(table.state, rows([20, 21, 22], "a"))
    [new] = staged
    deletes = write_position_deletes(table.state, {new.file_path: [0, 2]}, spec_id=0, partition=("a",))
    commit(table, staged + [deletes], operation="overwrite")
    assert ids(table) == [0, 1, 2, 3, 4, 10, 11, 12, 13, 14, 21]


def test_position_deletes_do_not_apply_to_later_data(table):
    [staged] = write_data_files(table.state, rows([20, 21, 22], "a"))
    # the delete file names the staged file, but lands first: a data file newer than a delete file is untouched
    commit(table, [write_position_deletes(table.state, {staged.file_path: [0]}, spec_id=0, partition=("a",))])
    commit(table, [staged], operation="append")
    assert ids(table) == [0, 1, 2, 3, 4, 10, 11, 12, 13, 14, 20, 21, 22]
    tasks = {t.file_path: t for t in table.scan().plan_files()}
    assert tasks[staged.file_path].deletes == ()


def test_position_delete_file_scope(table):
    """A delete file naming one data file (equal path bounds) reaches only that file; one naming several
    reaches every data file of its partition."""
    table.append(rows([5, 6], "a"))
    old, new = sorted((t for t in table.scan().plan_files() if t.partition == ("a",)), key=lambda t: t.record_count,
                      reverse=True)
    one = write_position_deletes(table.state, {old.file_path: [0]}, spec_id=0, partition=("a",))
    both = write_position_deletes(table.state, {old.file_path: [1], new.file_path: [1]}, spec_id=0,
                                  partition=("a",))
    commit(table, [one, both])
    tasks = {t.file_path: t for t in table.scan().plan_files()}
    assert {d.file_path for d in tasks[old.file_path].deletes} == {one.file_path, both.file_path}
    assert {d.file_path for d in tasks[new.file_path].deletes} == {both.file_path}
    assert tasks[data_task(table, ("b",)).file_path].deletes == ()
    assert ids(table) == [2, 3, 4, 5, 10, 11, 12, 13, 14]


def test_position_deletes_stay_in_their_partition(table):
    a = data_task(table, ("a",))
    # a (wrongly placed) delete file in partition b that names a's file does not reach it
    commit(table, [write_position_deletes(table.state, {a.file_path: [0], "/elsewhere.parquet": [0]}, spec_id=0,
                                          partition=("b",))])
    assert ids(table) == [0, 1, 2, 3, 4, 10, 11, 12, 13, 14]


# -- equality deletes -----------------------------------------------------------------------------------------


def test_equality_deletes_remove_matching_rows(table):
    before = table.current_snapshot().snapshot_id
    commit(table, [write_equality_deletes(table.state, pa.table({"id": [1, 3, 12]}), equality_ids=[1], spec_id=0,
                                          partition=("a",))])
    # 12 lives in partition b: the delete file of partition a does not reach it
    assert ids(table) == [0, 2, 4, 10, 11, 12, 13, 14]
    assert table.scan().count() == 8
    assert ids(table, snapshot_id=before) == [0, 1, 2, 3, 4, 10, 11, 12, 13, 14]


def test_equality_deletes_do_not_apply_to_data_of_the_same_commit_or_later(table):
    [staged] = write_data_files(table.state, rows([1, 2], "a"))
    deletes = write_equality_deletes(table.state, pa.table({"id": [1]}), equality_ids=[1], spec_id=0,
                                     partition=("a",))
    commit(table, [staged, deletes], operation="overwrite")  # an upsert: the old 1 goes, the new 1 stays
    assert ids(table) == [0, 1, 2, 2, 3, 4, 10, 11, 12, 13, 14]
    table.append(rows([1], "a"))
    assert ids(table) == [0, 1, 1, 2, 2, 3, 4, 10, 11, 12, 13, 14]


def test_unpartitioned_equality_deletes_apply_everywhere(table):
    # the table gets an unpartitioned spec (id 1); equality deletes written with it are global
    table.commit_events(lambda base, ctx: [SpecAdded(spec=PartitionSpec(spec_id=1, fields=()))])
    commit(table, [write_equality_deletes(table.state, pa.table({"id": [2, 11, 99]}), equality_ids=[1], spec_id=1,
                                          partition=())])
    assert ids(table) == [0, 1, 3, 4, 10, 12, 13, 14]
    assert all(len(t.deletes) == 1 for t in table.scan().plan_files())


def test_equality_deletes_in_an_unpartitioned_table(catalog):
    t = catalog.create_table("db.u", schema=rows([]).schema)
    t.append(rows([1, 2, 3], "a"))
    t.append(rows([2, 3, 4], "b"))
    commit(t, [write_equality_deletes(t.state, pa.table({"id": [3]}), equality_ids=[1], spec_id=0, partition=())])
    assert ids(t) == [1, 2, 2, 4]


def test_equality_deletes_on_several_columns_with_nulls(catalog):
    t = catalog.create_table("db.n", schema=rows([]).schema)
    t.append(rows([1, 1, 2, 2, 3, 3], [None, "a", None, "b", "a", None], name=["x"] * 6))
    deleted = pa.table({"id": [1, 2, 3], "category": [None, "b", None]})
    commit(t, [write_equality_deletes(t.state, deleted, equality_ids=[1, 2], spec_id=0, partition=())])
    out = t.scan().to_arrow().sort_by("id")
    # (1, null) deletes only the row whose category IS NULL; (2, 'b') only 'b'; (3, null) only the null
    assert list(zip(out.column("id").to_pylist(), out.column("category").to_pylist())) == [
        (1, "a"), (2, None), (3, "a")]


def test_equality_deletes_of_null_on_one_column(catalog):
    t = catalog.create_table("db.n1", schema=rows([]).schema)
    t.append(rows([1, 2, 3], "a", name=["x", None, "y"]))
    commit(t, [write_equality_deletes(t.state, pa.table({"name": pa.array([None], pa.string())}), equality_ids=[3],
                                      spec_id=0, partition=())])
    assert ids(t) == [1, 3]
    commit(t, [write_equality_deletes(t.state, pa.table({"name": ["y", "zz"]}), equality_ids=[3], spec_id=0,
                                      partition=())])
    assert ids(t) == [1]


def test_position_and_equality_deletes_with_a_filter(table):
    a = data_task(table, ("a",))
    commit(table, [write_position_deletes(table.state, {a.file_path: [4]}, spec_id=0, partition=("a",)),
                   write_equality_deletes(table.state, pa.table({"id": [13]}), equality_ids=[1], spec_id=0,
                                          partition=("b",))])
    assert ids(table, where="id >= 3") == [3, 10, 11, 12, 14]
    assert table.scan(where="id >= 3", columns=["name"]).to_arrow().column_names == ["name"]
    assert table.scan(where="category = 'b'").count() == 4


def test_delete_files_pruned_by_the_filter(table):
    deletes = write_equality_deletes(table.state, pa.table({"id": [13, 14]}), equality_ids=[1], spec_id=0,
                                     partition=("b",))
    commit(table, [deletes])
    [task] = table.scan(where="id = 10").plan_files()
    assert task.deletes == ()  # its bounds [13, 14] prove it deletes nothing the filter selects
    [task] = table.scan(where="id = 13").plan_files()
    assert [d.file_path for d in task.deletes] == [deletes.file_path]
    assert ids(table, where="id >= 12") == [12]


def test_equality_deletes_on_a_nested_field(catalog):
    data = pa.table({"id": pa.array([1, 2, 3, 4], pa.int64()),
                     "point": pa.array([{"x": 1, "y": "p"}, {"x": 2, "y": "q"}, None, {"x": None, "y": "r"}],
                                       pa.struct([("x", pa.int32()), ("y", pa.string())]))})
    t = catalog.create_table("db.nested", schema=data.schema)
    t.append(data)
    x_id = t.schema().find_field("point.x").field_id
    deleted = pa.table({"point": pa.array([{"x": 2}, {"x": None}], pa.struct([("x", pa.int32())]))})
    commit(t, [write_equality_deletes(t.state, deleted, equality_ids=[x_id], spec_id=0, partition=())])
    # a null parent struct means a null x: rows 3 and 4 match the null, row 2 matches 2
    assert ids(t) == [1]


def test_equality_deletes_after_promotion_and_drop(catalog):
    """A data file written with an int column, a delete file written after the column became a long, then the
    column is dropped from the table: the delete still matches by field id and promoted value."""
    data = pa.table({"id": pa.array([1, 2, 3], pa.int64()), "k": pa.array([10, 20, 30], pa.int32())})
    t = catalog.create_table("db.evolve", schema=data.schema)
    t.append(data)
    old = t.schema()
    promoted = Schema((old.columns[0], T.NestedField(field_id=2, name="key", field_type=T.LongType())), schema_id=1)
    t.commit_events(lambda base, ctx: [SchemaAdded(schema=promoted, last_column_id=2), CurrentSchemaSet(schema_id=1)])
    t.append(pa.table({"id": pa.array([4], pa.int64()), "key": pa.array([2**40], pa.int64())}))
    deletes = write_equality_deletes(t.state, pa.table({"key": pa.array([20, 2**40], pa.int64())}),
                                     equality_ids=[2], spec_id=0, partition=())
    commit(t, [deletes])
    assert ids(t) == [1, 3]
    assert t.scan().to_arrow().sort_by("id").column("key").to_pylist() == [10, 30]
    dropped = Schema((old.columns[0],), schema_id=2)
    t.commit_events(lambda base, ctx: [SchemaAdded(schema=dropped, last_column_id=2), CurrentSchemaSet(schema_id=2)])
    assert t.scan().to_arrow().column_names == ["id"]
    assert ids(t) == [1, 3]


def test_plan_files_tasks_read_as_data_files(table):
    commit(table, [write_equality_deletes(table.state, pa.table({"id": [1]}), equality_ids=[1], spec_id=0,
                                          partition=("a",))])
    task = data_task(table, ("a",))
    assert task.record_count == 5 and task.file.record_count == 5 and task.spec_id == 0
    assert task.file_path == task.file.file_path and dict(task.value_counts)[1] == 5
    assert task.data_sequence_number == 1 and len(task.deletes) == 1 and task.residual is None
    with pytest.raises(AttributeError):
        task.no_such_attribute  # noqa: B018


def test_many_deletes_vectorised(catalog):
    n = 50_000
    t = catalog.create_table("db.big", schema=rows([]).schema)
    t.append(rows(range(n), "a"))
    [task] = t.scan().plan_files()
    commit(t, [write_position_deletes(t.state, {task.file_path: list(range(0, n, 2))}, spec_id=0, partition=()),
               write_equality_deletes(t.state, pa.table({"id": list(range(1, n, 4)), "category": ["a"] * (n // 4)}),
                                      equality_ids=[1, 2], spec_id=0, partition=())])
    assert ids(t) == list(range(3, n, 4))


def test_position_deletes_past_the_end_repeated_and_unordered(table):
    """Positions past the end of the file delete nothing; repeated and unordered ones delete their rows once; the
    same with a filter (its columns read first, the deletes applied with it)."""
    a = data_task(table, ("a",))
    commit(table, [write_position_deletes(table.state, {a.file_path: [4, 1, 1, 99, 5]}, spec_id=0,
                                          partition=("a",))])
    assert ids(table) == [0, 2, 3, 10, 11, 12, 13, 14]
    assert ids(table, where="name != 'n2'") == [0, 3, 10, 11, 12, 13, 14]
    assert table.scan().count() == 8


def test_position_mask_over_all_rows_and_over_the_row_groups_read(tmp_path):
    """The mask of deleted positions is the same whether the rows read are the whole file (scattered) or only
    some row groups (looked up)."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    from engine.read.raw_file import RawFile
    from engine.read.reader import position_mask

    path = str(tmp_path / "f.parquet")
    pq.write_table(pa.table({"x": pa.array(range(30), pa.int64())}), path, row_group_size=10)
    deleted = pa.array([29, 3, 3, 12, 40, 0, 25], pa.int64())
    whole = RawFile(path, mapping=[{"field-id": 1, "names": ["x"]}], needed_ids={1})
    assert whole.all_rows
    assert pc.indices_nonzero(position_mask(whole, deleted)).to_pylist() == [0, 3, 12, 25, 29]
    some = RawFile(path, mapping=[{"field-id": 1, "names": ["x"]}], needed_ids={1}, row_groups=lambda md, s: [0, 2])
    assert not some.all_rows and some.positions.to_pylist() == list(range(10)) + list(range(20, 30))
    mask = position_mask(some, deleted)
    assert some.positions.filter(mask).to_pylist() == [0, 3, 25, 29]
    assert position_mask(whole, pa.array([], pa.int64())).to_pylist() == [False] * 30
