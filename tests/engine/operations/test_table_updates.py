"""REST commits as events (engine.operations.table_updates) on real table states, without HTTP.

Layer: tests. The HTTP side and the client-written manifests are covered by tests/tools/test_rest_server.py and
tests/integration/test_spark_rest_catalog.py; here each update's rules: ids assigned as Iceberg Java's metadata
builder does, ``-1`` meaning the last one added, reuse of an equal schema/spec/order, and clear refusals.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from engine import Catalog
from engine.errors import RequirementFailed, ValidationError
from engine.state.events import (
    CurrentSchemaSet,
    DefaultSortOrderSet,
    DefaultSpecSet,
    PropertiesRemoved,
    PropertiesSet,
    SchemaAdded,
    SnapshotsRemoved,
    SortOrderAdded,
    SpecAdded,
)
from engine.operations.commit import CommitContext
from engine.operations.table_commit import parse_table_commit
from engine.operations.table_updates import commit_events

CTX = CommitContext(commit_id="c", time_ms=1)


@pytest.fixture
def table(tmp_warehouse: Path) -> Any:
    cat = Catalog.open(tmp_warehouse)
    cat.create_namespace("db")
    t = cat.create_table("db.t", schema=pa.schema([("id", pa.int64()), ("name", pa.string())]))
    yield t
    cat.close()


def _events(table: Any, updates: list[dict], requirements: list[dict] | None = None) -> list[Any]:
    commit = parse_table_commit(requirements or [], updates)
    return commit_events(table.state, commit, CTX, client_snapshots={},
                         live_entries=table.catalog.store.live_entries,
                         live_files=table.catalog.store.live_files_by_key, stream=table.uuid)


def _schema(*names: str) -> dict:
    return {"type": "struct", "schema-id": 7, "fields": [
        {"id": i + 1, "name": n, "required": False, "type": "long" if n == "id" else "string"}
        for i, n in enumerate(names)]}


def test_add_schema_gets_the_next_id_and_minus_one_selects_it(table: Any) -> None:
    events = _events(table, [{"action": "add-schema", "schema": _schema("id", "name", "note")},
                             {"action": "set-current-schema", "schema-id": -1}])
    assert [type(e) for e in events] == [SchemaAdded, CurrentSchemaSet]
    assert events[0].schema.schema_id == 1 and events[0].last_column_id == 3
    assert events[1].schema_id == 1


def test_a_schema_dropping_a_partition_source_is_refused(table: Any) -> None:
    with table.update_spec() as update:
        update.add_identity("name")
    with pytest.raises(ValidationError, match="default partition spec 1 does not fit the current schema"):
        _events(table, [{"action": "add-schema", "schema": _schema("id")},
                        {"action": "set-current-schema", "schema-id": -1}])


def test_an_equal_schema_is_reused_not_added(table: Any) -> None:
    events = _events(table, [{"action": "add-schema", "schema": _schema("id", "name")},
                             {"action": "set-current-schema", "schema-id": -1}])
    assert events == []


def test_specs_and_sort_orders(table: Any) -> None:
    spec = {"spec-id": 3, "fields": [{"name": "name", "transform": "identity", "source-id": 2, "field-id": 1000}]}
    order = {"order-id": 5, "fields": [{"transform": "identity", "source-id": 1, "direction": "desc",
                                        "null-order": "nulls-last"}]}
    events = _events(table, [{"action": "add-spec", "spec": spec}, {"action": "set-default-spec", "spec-id": -1},
                             {"action": "add-sort-order", "sort-order": order},
                             {"action": "set-default-sort-order", "sort-order-id": -1}])
    assert [type(e) for e in events] == [SpecAdded, DefaultSpecSet, SortOrderAdded, DefaultSortOrderSet]
    assert events[0].spec.spec_id == 1 and events[1].spec_id == 1
    assert events[2].sort_order.order_id == 1 and events[3].sort_order_id == 1
    with pytest.raises(ValidationError, match="source"):
        _events(table, [{"action": "add-spec", "spec": {"fields": [
            {"name": "x", "transform": "identity", "source-id": 99, "field-id": 1000}]}}])


def _spec_field(name: str, source_id: int, transform: str = "identity", field_id: int = 1000) -> dict:
    return {"name": name, "transform": transform, "source-id": source_id, "field-id": field_id}


@pytest.mark.parametrize(("fields", "message"), [
    ([_spec_field("", 1)], "empty partition name"),
    ([_spec_field("name", 1, "bucket[4]")], "the name is another column's"),
    ([_spec_field("tag_part", 4)], "inside a list or map"),
    ([_spec_field("nested", 3)], "non-primitive"),
    ([_spec_field("d", 1, "day")], "cannot apply"),
], ids=["empty-name", "another-columns-name", "source-in-a-list", "struct-source", "bad-transform"])
def test_a_client_spec_binds_to_the_schema_as_java_binds_it(tmp_warehouse: Path, fields: list, message: str) -> None:
    """Java's UnboundPartitionSpec.bind refuses these; accepted, the first made every publish fail (an Avro field
    with no name) and the fourth every write (a partition value inside a list), with the events in the log."""
    with Catalog.open(tmp_warehouse) as cat:
        cat.create_namespace("db")
        t = cat.create_table("db.t", schema=pa.schema([
            ("id", pa.int64()), ("name", pa.string()), ("nested", pa.struct([("a", pa.int64())])),
            ("tags", pa.list_(pa.string()))]))
        element = t.state.schema.find_field("tags").field_type.element_id
        fields = [dict(f, **{"source-id": element}) if f["source-id"] == 4 else f for f in fields]
        with pytest.raises(ValidationError, match=message):
            _events(t, [{"action": "add-spec", "spec": {"fields": fields}}, {"action": "set-default-spec",
                                                                               "spec-id": -1}])


def test_a_client_spec_may_take_its_own_source_columns_name(table: Any) -> None:
    """Java's bind lets any transform of a column take that column's name."""
    events = _events(table, [{"action": "add-spec", "spec": {"fields": [_spec_field("id", 1, "bucket[4]")]}}])
    assert [type(e) for e in events] == [SpecAdded]


def test_a_v1_client_spec_needs_sequential_field_ids(tmp_warehouse: Path) -> None:
    with Catalog.open(tmp_warehouse) as cat:
        cat.create_namespace("db")
        t = cat.create_table("db.t", schema=pa.schema([("id", pa.int64())]), format_version=1)
        with pytest.raises(ValidationError, match="sequential field ids"):
            _events(t, [{"action": "add-spec", "spec": {"fields": [_spec_field("p", 1, field_id=1007)]}}])
        assert [type(e) for e in _events(t, [{"action": "add-spec", "spec": {"fields": [_spec_field("p", 1)]}}])] \
            == [SpecAdded]


def test_main_cannot_become_a_tag(table: Any) -> None:
    snap = table.append(pa.table({"id": [1], "name": ["a"]}))
    with pytest.raises(ValidationError, match="Cannot set main to a tag"):
        _events(table, [{"action": "set-snapshot-ref", "ref-name": "main", "snapshot-id": snap.snapshot_id,
                         "type": "tag"}])


def test_properties_only_record_changes(table: Any) -> None:
    table.set_properties(a="1")
    events = _events(table, [{"action": "set-properties", "updates": {"a": "1", "b": "2"}},
                             {"action": "remove-properties", "removals": ["a", "absent"]}])
    assert events == [PropertiesSet(updates={"b": "2"}), PropertiesRemoved(removals=["a"])]


def test_consecutive_remove_snapshots_become_one_event(table: Any) -> None:
    first = table.append(pa.table({"id": [1], "name": ["a"]}))
    second = table.append(pa.table({"id": [2], "name": ["b"]}))
    table.append(pa.table({"id": [3], "name": ["c"]}))
    events = _events(table, [{"action": "remove-snapshots", "snapshot-ids": [first.snapshot_id]},
                             {"action": "remove-snapshots", "snapshot-ids": [second.snapshot_id]}])
    assert events == [SnapshotsRemoved(snapshot_ids=[first.snapshot_id, second.snapshot_id])]


@pytest.mark.parametrize(("update", "message"), [
    ({"action": "set-location", "location": "/elsewhere"}, "does not move"),
    ({"action": "assign-uuid", "uuid": "00000000-0000-0000-0000-000000000001"}, "keeps its uuid"),
    ({"action": "upgrade-format-version", "format-version": 4}, "supports 1, 2 and 3"),
    ({"action": "upgrade-format-version", "format-version": 1}, "downgrade"),
    ({"action": "set-statistics", "snapshot-id": 1, "statistics": {}}, "statistics"),
    ({"action": "remove-schemas", "schema-ids": [0]}, "keeps every schema"),
    ({"action": "set-current-schema", "schema-id": -1}, "added none"),
    ({"action": "set-snapshot-ref", "ref-name": "b", "snapshot-id": 42, "type": "branch"}, "does not exist"),
    ({"action": "set-snapshot-ref", "ref-name": "b", "snapshot-id": 42, "type": "twig"}, "branch or tag"),
    ({"action": "add-schema"}, "'schema' is missing"),
    ({"action": "add-snapshot", "snapshot": {"snapshot-id": 5, "timestamp-ms": 1, "manifest-list": "/l.avro",
                                             "summary": {"operation": "append"}}}, "'sequence-number' is missing"),
])
def test_invalid_updates_are_refused(table: Any, update: dict, message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        _events(table, [update])


def test_remove_statistics_is_a_no_op(table: Any) -> None:
    assert _events(table, [{"action": "remove-statistics", "snapshot-id": 1}]) == []


def test_unknown_actions_and_requirement_types_are_refused() -> None:
    with pytest.raises(ValidationError, match="unknown update action 'frobnicate'"):
        parse_table_commit([], [{"action": "frobnicate"}])
    with pytest.raises(ValidationError, match="unknown requirement type"):
        parse_table_commit([{"type": "assert-magic"}], [])
    with pytest.raises(ValidationError, match="not a list"):
        parse_table_commit([], {"action": "set-properties"})
    with pytest.raises(ValidationError, match="manifest-list"):
        parse_table_commit([], [{"action": "add-snapshot", "snapshot": {"snapshot-id": 1, "timestamp-ms": 1}}])


def test_failed_requirement_is_a_retryable_conflict(table: Any) -> None:
    with pytest.raises(RequirementFailed, match="current-schema-id changed: expected 3 != 0") as info:
        _events(table, [{"action": "set-properties", "updates": {"x": "y"}}],
                [{"type": "assert-current-schema-id", "current-schema-id": 3}])
    assert info.value.stream == table.uuid


def test_a_requirement_without_its_value_is_bad_input_not_a_conflict(table: Any) -> None:
    """A conflict (409) tells the client to reload and retry, which cannot help a request that lacks a field."""
    with pytest.raises(ValidationError, match="'uuid' is missing") as info:
        _events(table, [{"action": "set-properties", "updates": {"x": "y"}}], [{"type": "assert-table-uuid"}])
    assert not isinstance(info.value, RequirementFailed)


def test_the_ref_name_icelog_keeps_for_itself_is_refused_through_rest_and_the_api(table: Any) -> None:
    """A REST commit removes the ref a snapshot no ref points at is parked on: a user's ref of that name would go."""
    table.append(pa.table({"id": [1], "name": ["a"]}))
    head = table.current_snapshot().snapshot_id
    with pytest.raises(ValidationError, match="icelog's own"):
        _events(table, [{"action": "set-snapshot-ref", "ref-name": "icelog-rest-unreferenced", "snapshot-id": head,
                         "type": "branch"}])
    with pytest.raises(ValidationError, match="keeps for itself"):
        table.manage_snapshots().create_branch(head, "icelog-rest-unreferenced").commit()
    with pytest.raises(ValidationError, match="keeps for itself"):
        table.manage_snapshots().create_tag(head, "icelog-rest-unreferenced").commit()
    assert [name for name, _ in table.state.refs] == ["main"]
