"""Partition evolution through ``table.update_spec()``: ids, names, v1's void rule, spec reuse, errors that
commit nothing, replays on a fresh base, and reads across specs."""

from __future__ import annotations

import datetime as dt
import json

import pyarrow as pa
import pytest

from engine import Catalog
from engine.errors import ValidationError
from engine.state.events import DefaultSpecSet, SpecAdded
from engine.model.partitioning import PartitionField, PartitionSpec
from engine.model.transforms import Bucket, Day, Hour, Identity, Truncate, Void
from engine.operations.commit import CommitContext
from engine.operations.update_spec import UpdateSpec, added_field_name

UTC = dt.timezone.utc
CTX = CommitContext(commit_id="test", time_ms=1)

SCHEMA = pa.schema([
    pa.field("id", pa.int64(), nullable=False),
    pa.field("ts", pa.timestamp("us", tz="UTC")),
    pa.field("d", pa.date32()),
    pa.field("category", pa.string()),
    pa.field("name", pa.string()),
    pa.field("point", pa.struct([pa.field("x", pa.float64()), pa.field("y", pa.int32())])),
    pa.field("tags", pa.list_(pa.string())),
])
# field ids: id 1, ts 2, d 3, category 4, name 5, point 6 (x 8, y 9), tags 7 (element 10)


def rows(n: int, start: int = 0) -> pa.Table:
    base = dt.datetime(2026, 1, 1, tzinfo=UTC)
    ids = range(start, start + n)
    return pa.table({
        "id": pa.array(ids, pa.int64()),
        "ts": pa.array([base + dt.timedelta(hours=11 * i) for i in ids], pa.timestamp("us", tz="UTC")),
        "d": pa.array([dt.date(2026, 1, 1) + dt.timedelta(days=i) for i in ids], pa.date32()),
        "category": pa.array(["a", "b", "c"][i % 3] for i in ids),
        "name": pa.array(f"name-{i:03d}" for i in ids),
        "point": pa.array([{"x": i / 2, "y": i} for i in ids],
                          pa.struct([pa.field("x", pa.float64()), pa.field("y", pa.int32())])),
        "tags": pa.array([[str(i)] for i in ids], pa.list_(pa.string())),
    }, schema=SCHEMA)


@pytest.fixture
def catalog(tmp_path):
    cat = Catalog.open(tmp_path / "warehouse")
    cat.create_namespace("db")
    yield cat
    cat.close()


@pytest.fixture(params=[1, 2], ids=["v1", "v2"])
def format_version(request) -> int:
    return request.param


def make(catalog, partition_by=("category",), format_version=2, name="t"):
    return catalog.create_table(f"db.{name}", schema=SCHEMA, partition_by=list(partition_by),
                                format_version=format_version)


def spec_fields(spec: PartitionSpec) -> list[tuple[int, str, str, int]]:
    return [(f.field_id, f.name, str(f.transform), f.source_id) for f in spec.fields]


# -- adding --------------------------------------------------------------------------------------------------------


def test_add_field_emits_the_new_spec_then_sets_it_default(catalog, format_version):
    t = make(catalog, format_version=format_version)
    update = t.update_spec().add_field("ts", "day")

    events = update.events(t.state, CTX)

    expected = PartitionSpec(spec_id=1, fields=(
        PartitionField(source_id=4, field_id=1000, transform=Identity(), name="category"),
        PartitionField(source_id=2, field_id=1001, transform=Day(), name="ts_day")))
    assert events == [SpecAdded(spec=expected), DefaultSpecSet(spec_id=1)]
    state = update.commit()
    assert state.spec == expected
    assert state.default_spec_id == 1
    assert state.last_partition_id == 1001
    assert [s.spec_id for s in state.specs] == [0, 1]


@pytest.mark.parametrize(("column", "transform", "name"), [
    ("category", "identity", "category"),
    ("id", "bucket[16]", "id_bucket_16"),
    ("name", "truncate[4]", "name_trunc_4"),
    ("ts", "year", "ts_year"),
    ("ts", "month", "ts_month"),
    ("ts", "day", "ts_day"),
    ("ts", "hour", "ts_hour"),
    ("d", "day", "d_day"),
    ("point.y", "bucket[4]", "point.y_bucket_4"),
    ("id", "void", "id_null"),
])
def test_added_fields_get_javas_update_names(catalog, column, transform, name):
    t = make(catalog, partition_by=())
    state = t.update_spec().add_field(column, transform).commit()
    assert [f.name for f in state.spec.fields] == [name]
    assert str(state.spec.fields[0].transform) == transform
    assert state.spec.fields[0].field_id == 1000


def test_transform_objects_names_and_add_identity(catalog):
    t = make(catalog, partition_by=())
    state = (t.update_spec().add_field("id", Bucket(8), "shard").add_field("name", Truncate(2))
             .add_identity("category").commit())
    assert spec_fields(state.spec) == [(1000, "shard", "bucket[8]", 1), (1001, "name_trunc_2", "truncate[2]", 5),
                                       (1002, "category", "identity", 4)]
    assert added_field_name(Hour(), "ts") == "ts_hour"


def test_pyiceberg_transform_objects_are_accepted(catalog):
    from pyiceberg.transforms import BucketTransform, DayTransform

    t = make(catalog, partition_by=())
    state = t.update_spec().add_field("id", BucketTransform(4)).add_field("ts", DayTransform()).commit()
    assert spec_fields(state.spec) == [(1000, "id_bucket_4", "bucket[4]", 1), (1001, "ts_day", "day", 2)]


def test_case_insensitive_column_names(catalog):
    t = make(catalog, partition_by=())
    with pytest.raises(ValidationError, match="'TS'"):
        t.update_spec().add_field("TS", "day")
    state = t.update_spec(case_sensitive=False).add_field("TS", "day").commit()
    assert spec_fields(state.spec) == [(1001 - 1, "ts_day", "day", 2)]


def test_adding_hour_to_an_existing_day_is_allowed_as_in_java(catalog):
    # Java's testAddHourToDay: redundant time fields are refused only among the fields one update adds
    t = make(catalog, partition_by=["day(ts)"])
    state = t.update_spec().add_field("ts", "hour").commit()
    assert spec_fields(state.spec) == [(1000, "ts_day", "day", 2), (1001, "ts_hour", "hour", 2)]


def test_context_manager_commits_once(catalog):
    t = make(catalog)
    version = t.state.version
    with t.update_spec() as update:
        update.add_field("ts", "month")
        update.rename_field("category", "cat")
    assert t.state.version == version + 2  # one commit: SpecAdded, DefaultSpecSet
    assert spec_fields(t.state.spec) == [(1000, "cat", "identity", 4), (1001, "ts_month", "month", 2)]


# -- removing and renaming ----------------------------------------------------------------------------------------


def test_remove_field_v2_drops_it(catalog):
    t = make(catalog, partition_by=["category", "day(ts)"])
    state = t.update_spec().remove_field("category").commit()
    assert spec_fields(state.spec) == [(1001, "ts_day", "day", 2)]
    assert state.spec.spec_id == 1
    assert state.last_partition_id == 1001


def test_remove_field_v1_keeps_a_void_field_in_place(catalog):
    t = make(catalog, partition_by=["category", "day(ts)"], format_version=1)
    state = t.update_spec().remove_field("category").commit()
    assert spec_fields(state.spec) == [(1000, "category", "void", 4), (1001, "ts_day", "day", 2)]
    # new fields go at the end with the next id, never reusing a place
    state = t.update_spec().add_field("id", "bucket[4]").remove_field("ts_day").commit()
    assert spec_fields(state.spec) == [(1000, "category", "void", 4), (1001, "ts_day", "void", 2),
                                       (1002, "id_bucket_4", "bucket[4]", 1)]
    assert state.last_partition_id == 1002
    assert [s.spec_id for s in state.specs] == [0, 1, 2]


def test_v1_re_adding_a_removed_field_renames_the_void_one(catalog):
    t = make(catalog, partition_by=["category"], format_version=1)
    t.update_spec().remove_field("category").commit()
    state = t.update_spec().add_identity("category").commit()
    assert spec_fields(state.spec) == [(1000, "category_1000", "void", 4), (1001, "category", "identity", 4)]


def test_v2_re_adding_a_field_of_an_earlier_spec_reuses_its_id(catalog):
    t = make(catalog, partition_by=["category"])
    t.update_spec().remove_field("category").add_field("id", "bucket[4]").commit()   # spec 1: [1001 id_bucket_4]
    state = t.update_spec().add_identity("category").commit()
    assert spec_fields(state.spec) == [(1001, "id_bucket_4", "bucket[4]", 1), (1000, "category", "identity", 4)]
    assert state.last_partition_id == 1001
    # with another name it is a new field
    t.update_spec().remove_field("category").commit()
    state = t.update_spec().add_field("category", "identity", "cat").commit()
    assert spec_fields(state.spec) == [(1001, "id_bucket_4", "bucket[4]", 1), (1002, "cat", "identity", 4)]


def test_an_identical_earlier_spec_is_reused(catalog, format_version):
    t = make(catalog, partition_by=["category"], format_version=format_version)
    t.update_spec().add_field("ts", "day").commit()
    update = t.update_spec().remove_field("ts_day")
    if format_version == 1:
        # v1 keeps a void field, so the spec differs from spec 0
        assert [type(e) for e in update.events(t.state, CTX)] == [SpecAdded, DefaultSpecSet]
        return
    assert update.events(t.state, CTX) == [DefaultSpecSet(spec_id=0)]
    state = update.commit()
    assert state.default_spec_id == 0
    assert [s.spec_id for s in state.specs] == [0, 1]
    # and back again: spec 1 is reused, day(ts) gets its id back
    assert t.update_spec().add_field("ts", "day").events(state, CTX) == [DefaultSpecSet(spec_id=1)]


def test_rename_field(catalog, format_version):
    t = make(catalog, partition_by=["category", "truncate(4, name)"], format_version=format_version)
    state = t.update_spec().rename_field("name_trunc", "prefix").commit()
    assert spec_fields(state.spec) == [(1000, "category", "identity", 4), (1001, "prefix", "truncate[4]", 5)]
    state = t.update_spec().rename_field("category", "cat").commit()
    assert [f.name for f in state.spec.fields] == ["cat", "prefix"]


def test_remove_then_add_back_in_one_update_changes_nothing(catalog, format_version):
    t = make(catalog, partition_by=["category", "day(ts)"], format_version=format_version)
    version = t.state.version
    update = t.update_spec().remove_field("ts_day").add_field("ts", "day")
    assert update.events(t.state, CTX) == []
    update.commit()
    assert t.state.version == version


def test_nothing_requested_commits_nothing(catalog):
    t = make(catalog)
    version = t.state.version
    assert t.update_spec().events(t.state, CTX) == []
    t.update_spec().commit()
    assert t.state.version == version


# -- errors ---------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("build", "message"), [
    (lambda u: u.add_field("nope", "day"), "'nope' is not in the table schema"),
    (lambda u: u.add_field("category", "day"), r"day\(category\): day cannot apply to type string"),
    (lambda u: u.add_field("d", "hour"), r"hour cannot apply to type date"),
    (lambda u: u.add_field("point.x", "truncate[2]"), "truncate.2. cannot apply to type double"),
    (lambda u: u.add_field("point", "identity"), "is not a primitive type"),
    (lambda u: u.add_field("tags.element", "identity"), "inside a list or map"),
    (lambda u: u.add_field("id", "zorder"), "unknown transform zorder"),
    (lambda u: u.add_field("category", "identity"), "duplicate partition field identity\\(category\\)"),
    (lambda u: u.add_field("ts", "day").add_field("ts", "day"), "already added as 'ts_day'"),
    (lambda u: u.add_field("ts", "day").add_field("ts", "hour"), "redundant partition field 'ts_hour'"),
    (lambda u: u.add_field("d", "year").add_field("d", "month"), "conflicts with 'd_year'"),
    (lambda u: u.add_field("id", "bucket[4]", "x").add_field("name", "truncate[2]", "x"),
     "duplicate partition field name: 'x'"),
    (lambda u: u.add_field("id", "bucket[4]", "category"), "duplicate partition field name: 'category'"),
    (lambda u: u.add_field("id", "bucket[4]", "name"), "name that exists in schema: 'name'"),
    (lambda u: u.add_field("id", "identity", "name"), "name that exists in schema: 'name'"),
    (lambda u: u.remove_field("nope"), "Cannot find partition field to remove: 'nope'"),
    (lambda u: u.add_field("ts", "day").remove_field("ts_day"), "Cannot delete newly added partition field"),
    (lambda u: u.add_field("ts", "day").rename_field("ts_day", "x"), "Cannot rename newly added"),
    (lambda u: u.rename_field("category", "c").remove_field("category"), "Cannot rename and delete"),
    (lambda u: u.remove_field("category").rename_field("category", "c"), "Cannot delete and rename"),
    (lambda u: u.rename_field("nope", "c"), "Cannot find partition field to rename: 'nope'"),
    (lambda u: u.rename_field("category", "id_bucket"), "partition name more than once: 'id_bucket'"),
    (lambda u: u.rename_field("id_bucket", "ts"), "name that exists in schema: 'ts'"),
    (lambda u: u.rename_field("category", "id"), "name that exists in schema: 'id'"),
    (lambda u: u.rename_field("category", ""), "new name is empty"),
])
def test_invalid_requests_raise_and_commit_nothing(catalog, build, message):
    t = make(catalog, partition_by=["category", "bucket(8, id)"])
    state = t.state
    with pytest.raises(ValidationError, match=message):
        build(t.update_spec()).commit()
    assert t.state.version == state.version
    assert t.state.specs == state.specs == (PartitionSpec(spec_id=0, fields=(
        PartitionField(source_id=4, field_id=1000, transform=Identity(), name="category"),
        PartitionField(source_id=1, field_id=1001, transform=Bucket(8), name="id_bucket"))),)


def test_a_request_that_fails_at_once_is_dropped_from_the_builder(catalog):
    t = make(catalog)
    update = t.update_spec().add_field("id", "bucket[2]")
    with pytest.raises(ValidationError, match="'nope' is not in the table schema"):
        update.add_field("nope", "day")
    state = update.add_field("ts", "day").commit()
    assert [f.name for f in state.spec.fields] == ["category", "id_bucket_2", "ts_day"]


def test_names_may_be_swapped_in_steps(catalog):
    t = make(catalog, partition_by=["bucket(4, id)", "day(ts)"])
    update = t.update_spec().rename_field("id_bucket", "ts_day")   # clashes until the next rename
    with pytest.raises(ValidationError, match="partition name more than once: 'ts_day'"):
        update.events(t.state, CTX)
    state = update.rename_field("ts_day", "id_bucket").commit()
    assert spec_fields(state.spec) == [(1000, "ts_day", "bucket[4]", 1), (1001, "id_bucket", "day", 2)]


def test_a_request_that_no_longer_holds_fails_on_the_fresh_base(catalog):
    t = make(catalog)
    first = t.update_spec().add_field("ts", "day")
    second = t.update_spec().add_field("ts", "day")
    first.commit()
    version = t.state.version
    with pytest.raises(ValidationError, match="duplicate partition field day\\(ts\\)"):
        second.commit()
    assert t.state.version == version


def test_requests_replay_on_the_base_of_the_commit(catalog):
    t = make(catalog)
    first = t.update_spec().add_field("ts", "day")
    second = t.update_spec().add_field("id", "bucket[4]")
    first.commit()
    state = second.commit()
    assert spec_fields(state.spec) == [(1000, "category", "identity", 4), (1001, "ts_day", "day", 2),
                                       (1002, "id_bucket_4", "bucket[4]", 1)]
    assert [s.spec_id for s in state.specs] == [0, 1, 2]


def test_unknown_transform_in_the_current_spec_is_refused(catalog):
    t = make(catalog, partition_by=())
    base = t.state
    odd = PartitionSpec(spec_id=0, fields=(PartitionField(source_id=1, field_id=1000, transform="zorder", name="z"),))
    import attrs
    base = attrs.evolve(base, specs=(odd,))
    with pytest.raises(ValidationError, match="unknown transform"):
        UpdateSpec(t).add_field("ts", "day").events(base, CTX)


# -- data across specs ------------------------------------------------------------------------------------------------


def test_appends_use_the_new_spec_and_files_of_both_specs_scan(catalog, format_version):
    t = make(catalog, partition_by=["category"], format_version=format_version)
    t.append(rows(12))
    t.update_spec().add_field("ts", "day").remove_field("category").commit()
    t.append(rows(12, start=100))

    files = t.scan().plan_files()
    assert sorted({f.spec_id for f in files}) == [0, 1]
    new_files = [f for f in files if f.spec_id == 1]
    void = (None,) if format_version == 1 else ()
    base = dt.date(2026, 1, 1).toordinal() - dt.date(1970, 1, 1).toordinal()
    # rows 100..111 at 11-hour steps from 2026-01-01
    expected_days = sorted({(dt.datetime(2026, 1, 1, tzinfo=UTC) + dt.timedelta(hours=11 * i)).date().toordinal()
                            - dt.date(1970, 1, 1).toordinal() for i in range(100, 112)})
    assert sorted(f.partition for f in new_files) == [void + (d,) for d in expected_days]
    assert base < expected_days[0]
    if format_version == 1:
        assert all("/category=null/ts_day=" in f.file_path for f in new_files)
    else:
        assert all("/data/ts_day=" in f.file_path for f in new_files)

    table = t.scan().to_arrow()
    assert sorted(table.column("id").to_pylist()) == list(range(12)) + list(range(100, 112))
    assert sorted(t.scan(where="category = 'a'").to_arrow().column("id").to_pylist()) == [
        i for i in list(range(12)) + list(range(100, 112)) if i % 3 == 0]
    # the previous snapshot still reads its own rows
    first = t.snapshots()[0]
    assert sorted(t.scan(snapshot_id=first.snapshot_id).to_arrow().column("id").to_pylist()) == list(range(12))


def test_published_metadata_lists_every_spec(catalog, format_version):
    t = make(catalog, partition_by=["category"], format_version=format_version)
    t.update_spec().add_field("id", "bucket[4]").commit()
    with open(t.metadata_location) as f:
        metadata = json.load(f)
    assert metadata["default-spec-id"] == 1
    assert metadata["last-partition-id"] == 1001
    assert [s["spec-id"] for s in metadata["partition-specs"]] == [0, 1]
    assert metadata["partition-specs"][1]["fields"][1] == {
        "name": "id_bucket_4", "transform": "bucket[4]", "source-id": 1, "field-id": 1001}
    if format_version == 1:
        assert metadata["partition-spec"] == metadata["partition-specs"][1]["fields"]


def test_void_transform_writes_null_partitions(catalog):
    t = make(catalog, partition_by=["category"], format_version=1)
    t.update_spec().remove_field("category").commit()
    t.append(rows(6))
    files = t.scan().plan_files()
    assert [f.partition for f in files] == [(None,)]
    assert t.state.spec.fields[0].transform == Void()
    assert t.scan().count() == 6


# -- format upgrade ------------------------------------------------------------------------------------------------

def test_upgrade_to_v2_switches_partition_evolution_to_v2_rules(catalog):
    t = make(catalog, partition_by=["category", "bucket(4, id)"], format_version=1)
    t.append(rows(6))
    t.update_spec().remove_field("category").commit()
    version = t.state.version
    assert t.upgrade_format_version(1).version == version      # the current version: nothing to commit
    state = t.upgrade_format_version(2)
    assert state.format_version == 2 and state.version == version + 1
    with pytest.raises(ValidationError, match="Cannot downgrade"):
        t.upgrade_format_version(1)
    with pytest.raises(ValidationError, match="format version 4"):
        t.upgrade_format_version(4)
    # v2 now: a removed field goes away instead of turning void; an earlier field's id comes back
    state = t.update_spec().remove_field("id_bucket").commit()
    assert spec_fields(state.spec) == [(1000, "category", "void", 4)]
    state = t.update_spec().add_field("id", "bucket[4]").commit()
    assert spec_fields(state.spec) == [(1000, "category", "void", 4), (1001, "id_bucket", "bucket[4]", 1)]
    assert state.default_spec_id == 1           # that is spec 1 again
    t.append(rows(6, start=10))
    assert sorted(t.scan().to_arrow().column("id").to_pylist()) == list(range(6)) + list(range(10, 16))
    with open(t.metadata_location) as f:
        metadata = json.load(f)
    assert metadata["format-version"] == 2
    assert [s["sequence-number"] for s in metadata["snapshots"]] == [0, 1]   # snapshots before the upgrade: 0
