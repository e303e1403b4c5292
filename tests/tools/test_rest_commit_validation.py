"""REST commits whose updates would leave a table unreadable are refused with 400 before any event: a transform
that cannot apply to its column, a sort field on nothing, a type change that is no promotion, a column made
required (issue 9, point 5: "REST answers 4xx for every bad input").

Layer: tests. A real server on 127.0.0.1, raw requests for the bad updates and PyIceberg's RestCatalog for the
good ones; after every refusal the log head is unchanged and both PyIceberg and icelog still read the table.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest
import requests
from pyiceberg.catalog.rest import RestCatalog
from pyiceberg.types import LongType

from engine import Catalog
from tools.rest_server import running_server

TOKEN = "validation-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture
def server(tmp_path: Path) -> Iterator[str]:
    with Catalog.open(tmp_path / "wh") as cat:
        cat.create_namespace("db")
        table = cat.create_table("db.t", pa.schema([("id", pa.int64()), ("small", pa.int32()),
                                                    ("flag", pa.bool_()), ("name", pa.string())]))
        table.append(pa.table({"id": pa.array([1, 2], pa.int64()), "small": pa.array([5, 6], pa.int32()),
                               "flag": [True, False], "name": ["a", "b"]}))
    with running_server(tmp_path / "wh", TOKEN) as running:
        yield running.uri


def head(warehouse: Path) -> int:
    with Catalog.open(warehouse) as cat:
        return max(e.position for e in cat.log(since=0))


def current_schema(server: str) -> dict:
    metadata = requests.get(f"{server}/v1/namespaces/db/tables/t", headers=AUTH).json()["metadata"]
    return next(s for s in metadata["schemas"] if s["schema-id"] == metadata["current-schema-id"])


def field(schema: dict, name: str) -> dict:
    return next(f for f in schema["fields"] if f["name"] == name)


def bad_updates(server: str) -> dict[str, list[dict]]:
    schema = current_schema(server)
    metadata = requests.get(f"{server}/v1/namespaces/db/tables/t", headers=AUTH).json()["metadata"]
    head_id = metadata["current-snapshot-id"]
    narrowed = copy.deepcopy(schema)
    field(narrowed, "id")["type"] = "string"
    required = copy.deepcopy(schema)
    field(required, "name")["required"] = True
    new_required = copy.deepcopy(schema)
    new_required["fields"].append({"id": 99, "name": "extra", "type": "long", "required": True})
    ids = {f["name"]: f["id"] for f in schema["fields"]}

    def spec(transform: str, column: str) -> list[dict]:
        return [{"action": "add-spec", "spec": {"fields": [
            {"source-id": ids[column], "field-id": 1000, "name": f"p_{column}", "transform": transform}]}}]

    return {
        "day of a long": spec("day", "id"),
        "bucket of a boolean": spec("bucket[4]", "flag"),
        "truncate of a boolean": spec("truncate[2]", "flag"),
        "sort on no column": [{"action": "add-sort-order", "sort-order": {"order-id": 1, "fields": [
            {"source-id": 77, "transform": "identity", "direction": "asc", "null-order": "nulls-first"}]}}],
        "sort by day of a string": [{"action": "add-sort-order", "sort-order": {"order-id": 1, "fields": [
            {"source-id": ids["name"], "transform": "day", "direction": "asc", "null-order": "nulls-first"}]}}],
        "long to string": [{"action": "add-schema", "schema": narrowed}],
        "optional to required": [{"action": "add-schema", "schema": required}],
        "new required column over rows": [{"action": "add-schema", "schema": new_required}],
        # values icelog reads on every later commit or publish (a table nobody could commit to again)
        "an integer property that is none": [{"action": "set-properties",
                                              "updates": {"write.metadata.previous-versions-max": "abc"}}],
        "an isolation level that is none": [{"action": "set-properties",
                                             "updates": {"write.delete.isolation-level": "lenient"}}],
        # Java's SnapshotRef.Builder: positive retention, and a tag keeps only its own age
        "a negative ref retention": [{"action": "set-snapshot-ref", "ref-name": "main", "snapshot-id": head_id,
                                      "type": "branch", "min-snapshots-to-keep": -3}],
        "a tag keeping snapshots": [{"action": "set-snapshot-ref", "ref-name": "t1", "snapshot-id": head_id,
                                     "type": "tag", "min-snapshots-to-keep": 2}],
        "an operation no reader knows": [
            {"action": "add-snapshot", "snapshot": {
                "snapshot-id": 999, "parent-snapshot-id": head_id, "sequence-number": 99,
                "timestamp-ms": 1700000000000, "manifest-list": metadata["snapshots"][-1]["manifest-list"],
                "summary": {"operation": "bogus"}, "schema-id": 0}},
            {"action": "set-snapshot-ref", "ref-name": "main", "snapshot-id": 999, "type": "branch"}],
    }


def test_updates_that_would_break_readers_are_refused_with_400(server, tmp_path):
    position = head(tmp_path / "wh")
    for what, updates in bad_updates(server).items():
        r = requests.post(f"{server}/v1/namespaces/db/tables/t", json={"requirements": [], "updates": updates},
                          headers=AUTH)
        assert r.status_code == 400, (what, r.status_code, r.text)
        assert r.json()["error"]["type"] == "BadRequestException", what
    assert head(tmp_path / "wh") == position
    client = RestCatalog("icelog", uri=server, token=TOKEN)
    assert client.load_table("db.t").scan().to_arrow().num_rows == 2
    with Catalog.open(tmp_path / "wh") as cat:
        assert cat.load_table("db.t").scan().to_arrow().num_rows == 2
        assert cat.verify("db.t") == []


def test_a_promotion_and_a_new_optional_column_still_commit(server, tmp_path):
    client = RestCatalog("icelog", uri=server, token=TOKEN)
    table = client.load_table("db.t")
    with table.update_schema() as update:
        update.update_column("small", LongType())
        update.add_column("note", LongType())
    with Catalog.open(tmp_path / "wh") as cat:
        rows = cat.load_table("db.t").scan().to_arrow()
    assert rows.schema.field("small").type == pa.int64()
    assert sorted(rows.column("small").to_pylist()) == [5, 6]
    assert rows.column("note").to_pylist() == [None, None]
    assert client.load_table("db.t").scan().to_arrow().num_rows == 2


def test_a_commit_that_landed_but_could_not_be_published_is_never_answered_as_refused(server, tmp_path):
    """A 4xx tells the client its commit failed, and it deletes the files it wrote for it; once the commit is in the
    log, a failing publish answers the spec's CommitStateUnknown instead (the client keeps its files and reloads),
    and the next publish completes the projection."""
    import os

    with Catalog.open(tmp_path / "wh") as cat:
        t = cat.load_table("db.t")
        version = t.state.version
        blocked = os.path.join(t.location, "metadata", f"v{version + 1}.metadata.json")
    os.makedirs(blocked)                                  # the next metadata file cannot be written
    r = requests.post(f"{server}/v1/namespaces/db/tables/t", headers=AUTH, json={
        "requirements": [], "updates": [{"action": "set-properties", "updates": {"owner": "rest"}}]})
    assert r.status_code == 500 and r.json()["error"]["type"] == "CommitStateUnknownException", r.text
    assert f"landed as version {version + 1}" in r.json()["error"]["message"]
    os.rmdir(blocked)
    with Catalog.open(tmp_path / "wh") as cat:
        t = cat.load_table("db.t")
        assert t.state.version == version + 1 and t.properties["owner"] == "rest"
        t.publish()
        assert cat.verify("db.t") == []


@pytest.mark.parametrize("skew_s", [-600, 600], ids=["clock behind", "clock ahead"])
def test_a_snapshot_stamped_by_a_client_clock_minutes_off_is_refused_with_400(server, tmp_path, monkeypatch, skew_s):
    """PyIceberg stamps a snapshot with its own clock, and the snapshot log takes that time: ten minutes before the
    log's last entry (or after the server's time) would leave metadata that Java's TableMetadata refuses to load, so
    the commit is refused as Java's REST server refuses it, naming the timestamp, and nothing lands."""
    import time

    import pyiceberg.table.snapshots as snapshots
    from pyiceberg.exceptions import BadRequestError

    class SkewedClock:
        @staticmethod
        def time() -> float:
            return time.time() + skew_s

    rows = pa.table({"id": pa.array([3], pa.int64()), "small": pa.array([7], pa.int32()), "flag": [True],
                     "name": ["c"]})
    table = RestCatalog("icelog", uri=server, token=TOKEN).load_table("db.t")
    position = head(tmp_path / "wh")
    monkeypatch.setattr(snapshots, "time", SkewedClock)
    with pytest.raises(BadRequestError, match="timestamp-ms .* more than a minute"):
        table.append(rows)
    assert head(tmp_path / "wh") == position
    monkeypatch.undo()
    table = RestCatalog("icelog", uri=server, token=TOKEN).load_table("db.t")
    table.append(rows)  # the same client with its clock right
    with Catalog.open(tmp_path / "wh") as cat:
        t = cat.load_table("db.t")
        assert t.scan().to_arrow().num_rows == 3 and cat.verify("db.t") == []
        entries = [ts for ts, _ in t.state.snapshot_log]
        assert entries == sorted(entries)


@pytest.mark.parametrize("assigned", ["existing", "catalog", "not-a-uuid"])
def test_a_create_whose_assign_uuid_is_taken_or_no_uuid_is_refused_with_400(server, tmp_path, assigned):
    """A create commit names its table's uuid: one another table's log holds (or the catalog's own stream, or no
    uuid at all) is refused before anything is read or staged, naming assign-uuid, not retried into a 409."""
    with Catalog.open(tmp_path / "wh") as cat:
        existing = cat.load_table("db.t")
        table_uuid = {"existing": existing.uuid, "catalog": "catalog", "not-a-uuid": "x"}[assigned]
        staged = sorted(cat.log.staged_files(existing.uuid))
    position = head(tmp_path / "wh")
    schema = {"type": "struct", "schema-id": 0, "fields": [{"id": 1, "name": "id", "required": False,
                                                             "type": "long"}]}
    r = requests.post(f"{server}/v1/namespaces/db/tables/fresh", headers=AUTH, json={
        "requirements": [{"type": "assert-create"}],
        "updates": [{"action": "assign-uuid", "uuid": table_uuid},
                    {"action": "upgrade-format-version", "format-version": 2},
                    {"action": "add-schema", "schema": schema}, {"action": "set-current-schema", "schema-id": -1},
                    {"action": "add-spec", "spec": {"spec-id": 0, "fields": []}},
                    {"action": "set-default-spec", "spec-id": -1},
                    {"action": "add-sort-order", "sort-order": {"order-id": 0, "fields": []}},
                    {"action": "set-default-sort-order", "sort-order-id": -1}]})
    assert r.status_code == 400, r.text
    assert "assign-uuid" in r.json()["error"]["message"]
    assert head(tmp_path / "wh") == position
    with Catalog.open(tmp_path / "wh") as cat:
        assert cat.list_tables("db") == [("db", "t")]
        assert sorted(cat.log.staged_files(existing.uuid)) == staged


def test_an_upgrade_to_v3_and_a_snapshot_in_one_commit_lands(server: str, tmp_path: Path) -> None:
    """Java's metadata builder adds no snapshot for an upgrade, so a client's snapshot in the same commit takes the
    next sequence number and first-row-id 0. icelog labelled the rows with a snapshot of its own first, and the
    client's was answered 409 on every retry; now the rows its snapshot leaves without ids are labelled after it."""
    metadata = requests.get(f"{server}/v1/namespaces/db/tables/t", headers=AUTH).json()["metadata"]
    parent = metadata["snapshots"][-1]
    body = {"requirements": [{"type": "assert-ref-snapshot-id", "ref": "main", "snapshot-id": parent["snapshot-id"]}],
            "updates": [
                {"action": "upgrade-format-version", "format-version": 3},
                {"action": "add-snapshot", "snapshot": {
                    "snapshot-id": 4242, "parent-snapshot-id": parent["snapshot-id"],
                    "sequence-number": metadata["last-sequence-number"] + 1,
                    "timestamp-ms": metadata["last-updated-ms"] + 1, "manifest-list": parent["manifest-list"],
                    "summary": {"operation": "append"}, "schema-id": 0, "first-row-id": 0, "added-rows": 0}},
                {"action": "set-snapshot-ref", "ref-name": "main", "snapshot-id": 4242, "type": "branch"}]}
    answer = requests.post(f"{server}/v1/namespaces/db/tables/t", headers=AUTH, json=body)
    assert answer.status_code == 200, answer.text
    with Catalog.open(tmp_path / "wh") as cat:
        table = cat.load_table("db.t")
        state = table.state
        assert state.format_version == 3 and state.snapshot_by_id(4242) is not None
        assert 4242 in [s.snapshot_id for s in state.iter_ancestors(state.current_snapshot.snapshot_id)]
        files = [e.file for e in cat.store.live_entries(state, state.current_snapshot.snapshot_id)]
        assert [f.first_row_id for f in files] == [0] and state.next_row_id == 2
        assert cat.verify("db.t") == []


def test_a_new_required_column_is_refused_over_rows_another_engine_wrote_without_totals(tmp_path: Path) -> None:
    """DuckDB's snapshots carry no totals: rows are still there, so a new required column is refused (it took the
    missing total for 0 rows and accepted it; every reader then failed on the older files)."""
    from tests.conftest import duckdb_connect

    with Catalog.open(tmp_path / "wh") as cat:
        cat.create_namespace("db")
        cat.create_table("db.t", pa.schema([("id", pa.int64())]))
    with running_server(tmp_path / "wh", TOKEN) as running:
        con = duckdb_connect()
        con.execute(f"ATTACH 'warehouse' AS ice (TYPE iceberg, ENDPOINT '{running.uri}', "
                    f"AUTHORIZATION_TYPE 'oauth2', TOKEN '{TOKEN}')")
        con.execute("INSERT INTO ice.db.t VALUES (1)")
        con.close()
        schema = current_schema(running.uri)
        schema["fields"].append({"id": 9, "name": "extra", "type": "long", "required": True})
        before = head(tmp_path / "wh")
        answer = requests.post(f"{running.uri}/v1/namespaces/db/tables/t", headers=AUTH,
                               json={"requirements": [], "updates": [{"action": "add-schema", "schema": schema}]})
        assert answer.status_code == 400 and "extra" in answer.text
        assert head(tmp_path / "wh") == before
