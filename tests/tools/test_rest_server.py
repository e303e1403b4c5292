"""The REST catalog server against real clients over real HTTP: PyIceberg's RestCatalog and raw requests.

Layer: tests. Every commit a client sends must land in the log as typed events; icelog's own scan must equal
PyIceberg's read; bad requests are refused with the spec's error model and change nothing.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest
import requests
from pyiceberg.catalog.rest import RestCatalog
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.exceptions import NoSuchTableError
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.transforms import IdentityTransform
from pyiceberg.types import LongType, NestedField, StringType, TimestamptzType

from engine import Catalog
from tools.rest_server import running_server

TOKEN = "s3cret-token"


@pytest.fixture
def server(tmp_warehouse: Path) -> Iterator[str]:
    with running_server(tmp_warehouse, TOKEN) as running:
        yield running.uri


@pytest.fixture
def client(server: str) -> RestCatalog:
    return RestCatalog("icelog", uri=server, token=TOKEN)


def _auth() -> dict[str, str]:
    return {"Authorization": f"Bearer {TOKEN}"}


SCHEMA = Schema(NestedField(1, "id", LongType(), required=False), NestedField(2, "ts", TimestamptzType(), required=False),
                NestedField(3, "name", StringType(), required=False))
# identity only: PyIceberg's bucket and day transforms need pyiceberg-core (Spark's tests cover those)
SPEC = PartitionSpec(PartitionField(3, 1000, IdentityTransform(), "name"))


def _rows(ids: list[int], name: str = "x") -> pa.Table:
    base = datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc)
    return pa.table({"id": pa.array(ids, pa.int64()),
                     "ts": pa.array([base + datetime.timedelta(days=i % 3) for i in ids], pa.timestamp("us", "UTC")),
                     "name": pa.array([f"{name}{i}" for i in ids], pa.string())})


def _sorted(t: pa.Table) -> list[dict]:
    return sorted(t.to_pylist(), key=lambda r: r["id"])


def _event_types(warehouse: Path, identifier: str) -> list[str]:
    with Catalog.open(warehouse) as cat:
        return [e.type for e in cat.load_table(identifier).log()]


def _icelog_rows(warehouse: Path, identifier: str) -> list[dict]:
    with Catalog.open(warehouse) as cat:
        return _sorted(cat.load_table(identifier).scan().to_arrow())


def test_config_needs_the_token(server: str) -> None:
    assert requests.get(f"{server}/v1/config", headers=_auth()).status_code == 200
    for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": f"Basic {TOKEN}"}):
        r = requests.get(f"{server}/v1/config", headers=headers)
        assert r.status_code == 401
        assert r.json()["error"]["type"] == "NotAuthorizedException"
        assert r.json()["error"]["code"] == 401


def test_pyiceberg_writes_land_in_the_log_and_read_back_the_same(client: RestCatalog, tmp_warehouse: Path) -> None:
    client.create_namespace("db", {"owner": "etl"})
    table = client.create_table("db.events", schema=SCHEMA, partition_spec=SPEC)
    table.append(_rows([1, 2, 3, 4]))
    table.append(_rows([5, 6]))
    table.delete("id = 2")
    table.overwrite(_rows([7, 8], name="o"), overwrite_filter="id >= 5")
    with table.update_schema() as update:
        update.add_column("note", StringType())
    table = client.load_table("db.events")
    table.append(pa.table({"id": pa.array([9], pa.int64()),
                           "ts": pa.array([datetime.datetime(2026, 1, 2, tzinfo=datetime.timezone.utc)],
                                          pa.timestamp("us", "UTC")),
                           "name": pa.array(["n9"]), "note": pa.array(["hello"])}))

    pyiceberg_rows = _sorted(client.load_table("db.events").scan().to_arrow())
    assert [r["id"] for r in pyiceberg_rows] == [1, 3, 4, 7, 8, 9]
    assert pyiceberg_rows[-1]["note"] == "hello"
    assert _icelog_rows(tmp_warehouse, "db.events") == pyiceberg_rows
    types = _event_types(tmp_warehouse, "db.events")
    assert types[0] == "create-table"
    assert types.count("add-snapshot") >= 5 and "add-schema" in types and "set-current-schema" in types
    with Catalog.open(tmp_warehouse) as cat:
        assert cat.verify("db.events") == []
        t = cat.load_table("db.events")
        assert t.schema().find_field("note").field_id == 4
        assert t.current_snapshot().snapshot_id == client.load_table("db.events").current_snapshot().snapshot_id
        # the manifests PyIceberg wrote were staged: orphan removal deletes them, icelog's own stay
        client_files = {p for p, _ in cat.log.staged_files(t.uuid) if p.endswith(".avro")}
        assert client_files and all(Path(p).exists() for p in client_files)
        removed = set(t.remove_orphan_files(older_than_ms=int(datetime.datetime.now().timestamp() * 1000) + 60_000))
        assert client_files <= removed
        assert cat.verify("db.events") == []
    assert _sorted(client.load_table("db.events").scan().to_arrow()) == pyiceberg_rows


def test_list_rename_drop_register(client: RestCatalog, tmp_warehouse: Path, tmp_path: Path) -> None:
    client.create_namespace("db")
    client.create_namespace(("db", "inner"))
    client.create_namespace("other")
    assert sorted(client.list_namespaces()) == [("db",), ("other",)]
    assert client.list_namespaces("db") == [("db", "inner")]
    t = client.create_table("db.a", schema=SCHEMA)
    t.append(_rows([1, 2]))
    client.create_table(("db", "inner", "b"), schema=SCHEMA)
    assert client.list_tables("db") == [("db", "a")]
    assert client.list_tables(("db", "inner")) == [("db", "inner", "b")]
    assert client.table_exists("db.a") and not client.table_exists("db.zz")

    client.rename_table("db.a", "other.a2")
    assert client.list_tables("db") == []
    assert _sorted(client.load_table("other.a2").scan().to_arrow()) == _icelog_rows(tmp_warehouse, "other.a2")

    client.drop_table("other.a2")
    with pytest.raises(NoSuchTableError):
        client.load_table("other.a2")

    # register: a table another catalog wrote (PyIceberg's SqlCatalog) becomes an icelog table with its history
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    sql = SqlCatalog("foreign", uri=f"sqlite:///{foreign}/pyiceberg.db", warehouse=f"file://{foreign}")
    sql.create_namespace("src")
    source = sql.create_table("src.t", schema=SCHEMA)
    source.append(_rows([1, 2]))
    source.append(_rows([3]))
    registered = client.register_table("db.back", sql.load_table("src.t").metadata_location)
    assert [r["id"] for r in _sorted(registered.scan().to_arrow())] == [1, 2, 3]
    assert _icelog_rows(tmp_warehouse, "db.back") == _sorted(registered.scan().to_arrow())
    assert _event_types(tmp_warehouse, "db.back").count("add-snapshot") == 2

    client.purge_table(("db", "inner", "b"))
    assert not (tmp_warehouse / "db" / "inner" / "b").exists()


def test_namespace_properties_and_drop(client: RestCatalog, server: str, tmp_warehouse: Path) -> None:
    client.create_namespace("db", {"a": "1", "b": "2"})
    summary = client.update_namespace_properties("db", removals={"b", "zz"}, updates={"c": "3"})
    assert (sorted(summary.updated), sorted(summary.removed), sorted(summary.missing)) == (["c"], ["b"], ["zz"])
    assert client.load_namespace_properties("db") == {"a": "1", "c": "3"}
    assert requests.head(f"{server}/v1/namespaces/db", headers=_auth()).status_code == 204
    assert requests.head(f"{server}/v1/namespaces/nope", headers=_auth()).status_code == 404
    client.create_table("db.t", schema=SCHEMA)
    r = requests.delete(f"{server}/v1/namespaces/db", headers=_auth())
    assert r.status_code == 409 and r.json()["error"]["type"] == "NamespaceNotEmptyException"
    client.drop_table("db.t")
    client.drop_namespace("db")
    assert client.list_namespaces() == []
    with Catalog.open(tmp_warehouse) as cat:
        types = [e.type for e in cat.log(since=0)]
    assert "update-namespace-properties" in types and types[-1] == "drop-namespace"


def test_staged_create_commits_the_whole_definition(client: RestCatalog, tmp_warehouse: Path) -> None:
    client.create_namespace("db")
    with client.create_table_transaction("db.staged", schema=SCHEMA, partition_spec=SPEC,
                                         properties={"k": "v"}) as tx:
        tx.append(_rows([1, 2, 3]))
    table = client.load_table("db.staged")
    assert table.properties["k"] == "v"
    assert [f.name for f in table.spec().fields] == ["name"]
    assert _icelog_rows(tmp_warehouse, "db.staged") == _sorted(table.scan().to_arrow())
    assert _event_types(tmp_warehouse, "db.staged")[:2] == ["create-table", "add-snapshot"]
    with Catalog.open(tmp_warehouse) as cat:
        assert cat.verify("db.staged") == []


def test_a_client_creates_a_v3_table_and_a_v3_type_needs_it(client: RestCatalog, server: str,
                                                              tmp_warehouse: Path) -> None:
    client.create_namespace("db")
    table = client.create_table("db.v3", schema=SCHEMA, properties={"format-version": "3"})
    assert table.metadata.format_version == 3
    with Catalog.open(tmp_warehouse) as cat:
        assert cat.load_table("db.v3").state.format_version == 3
    body = {"name": "ns_v2", "schema": {"type": "struct", "schema-id": 0, "fields": [
        {"id": 1, "name": "ts", "required": False, "type": "timestamp_ns"}]}, "properties": {"format-version": "2"}}
    answer = requests.post(f"{server}/v1/namespaces/db/tables", json=body, headers=_auth(), timeout=10)
    assert answer.status_code == 400 and "format version 3" in answer.json()["error"]["message"]
    assert not client.table_exists("db.ns_v2")


def test_stale_requirement_is_409_and_changes_nothing(client: RestCatalog, server: str, tmp_warehouse: Path) -> None:
    client.create_namespace("db")
    client.create_table("db.t", schema=SCHEMA)
    first = client.load_table("db.t")
    second = client.load_table("db.t")
    first.append(_rows([1]))
    with Catalog.open(tmp_warehouse) as cat:
        head = cat.log.head(cat.load_table("db.t").uuid)
    stale = {"requirements": [{"type": "assert-ref-snapshot-id", "ref": "main", "snapshot-id": None}],
             "updates": [{"action": "set-properties", "updates": {"x": "y"}}]}
    r = requests.post(_table_url(server, "db", "t"), headers=_auth(), json=stale)
    assert (r.status_code, r.json()["error"]["type"]) == (409, "CommitFailedException")
    assert "Requirement failed" in r.json()["error"]["message"]
    with Catalog.open(tmp_warehouse) as cat:
        assert cat.log.head(cat.load_table("db.t").uuid) == head
    # PyIceberg's stale handle gets the same 409, reloads and retries: both appends land, nothing is lost
    second.append(_rows([2]))
    assert [r["id"] for r in _icelog_rows(tmp_warehouse, "db.t")] == [1, 2]
    assert [r["id"] for r in _sorted(client.load_table("db.t").scan().to_arrow())] == [1, 2]


def test_a_commit_answers_with_the_metadata_it_published(client: RestCatalog, server: str,
                                                         tmp_warehouse: Path) -> None:
    import json

    client.create_namespace("db")
    client.create_table("db.t", schema=SCHEMA).append(_rows([1, 2]))
    client.load_table("db.t").append(_rows([3]))
    r = requests.post(_table_url(server, "db", "t"), headers=_auth(),
                      json={"requirements": [], "updates": [{"action": "set-properties", "updates": {"x": "ü"}}]})
    assert r.status_code == 200 and r.headers["content-type"] == "application/json"
    answer = r.json()
    with Catalog.open(tmp_warehouse) as cat:
        table = cat.load_table("db.t")
        assert answer["metadata-location"] == table.metadata_location
    assert answer["metadata"] == json.loads(Path(answer["metadata-location"]).read_bytes())
    assert answer["metadata"]["properties"]["x"] == "ü" and len(answer["metadata"]["snapshots"]) == 2


def test_a_table_loads_with_the_bytes_of_its_published_metadata(client: RestCatalog, server: str) -> None:
    """The metadata a load answers with is the published file's bytes, placed as they are (the renderer extends its
    last render), not the file's JSON decoded and encoded again (which would write "ü" where the file has
    "\\u00fc")."""
    client.create_namespace("db")
    client.create_table("db.t", schema=SCHEMA, properties={"comment": "ü"}).append(_rows([1, 2]))
    r = requests.get(_table_url(server, "db", "t"), headers=_auth())
    assert r.status_code == 200 and r.headers["content-type"] == "application/json"
    answer = r.json()
    published = Path(answer["metadata-location"]).read_bytes()
    assert b'"metadata":' + published + b"," in r.content
    assert answer["metadata"]["properties"]["comment"] == "ü" and len(answer["metadata"]["snapshots"]) == 1
    assert set(answer) == {"metadata-location", "metadata", "config"}


def _table_url(server: str, ns: str, name: str) -> str:
    return f"{server}/v1/namespaces/{ns}/tables/{name}"


def test_bad_and_unauthenticated_requests_change_nothing(client: RestCatalog, server: str,
                                                         tmp_warehouse: Path) -> None:
    client.create_namespace("db")
    client.create_table("db.t", schema=SCHEMA).append(_rows([1]))
    with Catalog.open(tmp_warehouse) as cat:
        before = cat.log.head("catalog"), len(cat.log(since=0))
    url = _table_url(server, "db", "t")
    cases = [
        (None, "not json{", 401, "NotAuthorizedException"),
        (_auth(), "not json{", 400, "BadRequestException"),
        (_auth(), "[1, 2]", 400, "BadRequestException"),
        (_auth(), '{"requirements": [], "updates": [{"action": "explode"}]}', 400, "BadRequestException"),
        (_auth(), '{"requirements": [{"type": "assert-nothing"}], "updates": []}', 400, "BadRequestException"),
        (_auth(), '{"requirements": [], "updates": [{"action": "set-properties", "updates": 3}]}', 400,
         "BadRequestException"),
        (_auth(), '{"requirements": [], "updates": [{"action": "set-current-schema", "schema-id": 42}]}', 400,
         "BadRequestException"),
        (_auth(), '{"requirements": [], "updates": [{"action": "add-snapshot", "snapshot": {"snapshot-id": 5, '
                  '"timestamp-ms": 1, "manifest-list": "/nowhere/snap.avro", "sequence-number": 9}}]}', 400,
         "BadRequestException"),
        (_auth(), '{"requirements": [{"type": "assert-current-schema-id", "current-schema-id": 7}], '
                  '"updates": [{"action": "set-properties", "updates": {"x": "y"}}]}', 409, "CommitFailedException"),
        ({"Authorization": "Bearer nope"}, '{"requirements": [], "updates": [{"action": "set-properties", '
                                            '"updates": {"x": "y"}}]}', 401, "NotAuthorizedException"),
    ]
    for headers, body, code, kind in cases:
        r = requests.post(url, data=body, headers=headers or {})
        assert (r.status_code, r.json()["error"]["type"]) == (code, kind), body
        assert r.json()["error"]["message"]
    r = requests.post(f"{server}/v1/namespaces/db/tables/missing", headers=_auth(),
                      json={"requirements": [], "updates": []})
    assert (r.status_code, r.json()["error"]["type"]) == (404, "NoSuchTableException")
    r = requests.post(f"{server}/v1/namespaces/nope/tables", headers=_auth(), json={"name": "x", "schema": {
        "type": "struct", "fields": [], "schema-id": 0}})
    assert (r.status_code, r.json()["error"]["type"]) == (404, "NoSuchNamespaceException")
    r = requests.post(f"{server}/v1/namespaces", headers=_auth(), json={"namespace": ["db"]})
    assert (r.status_code, r.json()["error"]["type"]) == (409, "AlreadyExistsException")
    r = requests.delete(url, headers={"Authorization": "Bearer nope"})
    assert r.status_code == 401
    with Catalog.open(tmp_warehouse) as cat:
        assert (cat.log.head("catalog"), len(cat.log(since=0))) == before
        assert cat.table_exists("db.t")


def test_oauth_client_credentials(server: str) -> None:
    r = requests.post(f"{server}/v1/oauth/tokens", data={"grant_type": "client_credentials", "client_id": "me",
                                                          "client_secret": "wrong"})
    assert r.status_code == 401 and r.json()["error"] == "invalid_client"
    catalog = RestCatalog("icelog", uri=server, credential=f"me:{TOKEN}",
                          **{"oauth2-server-uri": f"{server}/v1/oauth/tokens"})
    catalog.create_namespace("db")
    assert catalog.list_namespaces() == [("db",)]


def test_multi_table_transaction_is_atomic(client: RestCatalog, server: str, tmp_warehouse: Path) -> None:
    client.create_namespace("db")
    client.create_table("db.a", schema=SCHEMA)
    client.create_table("db.b", schema=SCHEMA)

    def change(name: str, requirement_schema: int) -> dict:
        return {"identifier": {"namespace": ["db"], "name": name},
                "requirements": [{"type": "assert-current-schema-id", "current-schema-id": requirement_schema}],
                "updates": [{"action": "set-properties", "updates": {"owner": "tx"}}]}

    r = requests.post(f"{server}/v1/transactions/commit", headers=_auth(),
                      json={"table-changes": [change("a", 0), change("b", 5)]})
    assert (r.status_code, r.json()["error"]["type"]) == (409, "CommitFailedException")
    assert "owner" not in client.load_table("db.a").properties
    r = requests.post(f"{server}/v1/transactions/commit", headers=_auth(),
                      json={"table-changes": [change("a", 0), change("b", 0)]})
    assert r.status_code == 204
    assert client.load_table("db.a").properties["owner"] == "tx" == client.load_table("db.b").properties["owner"]
    with Catalog.open(tmp_warehouse) as cat:
        last_a = cat.load_table("db.a").log()[-1]
        last_b = cat.load_table("db.b").log()[-1]
    assert last_a.type == last_b.type == "set-properties" and last_a.commit_id == last_b.commit_id


@pytest.mark.parametrize("second", ["same", "inside"])
def test_a_transaction_never_creates_two_tables_in_one_folder(client: RestCatalog, server: str,
                                                             tmp_warehouse: Path, second: str) -> None:
    """Each create of a multi-table transaction was placed against the catalog alone: two at one location both
    landed (the second could never be published, and a purge of the first deleted its metadata from the shared
    folder), and one inside the other too. Refused with 400, nothing lands."""
    import uuid

    client.create_namespace("db")
    shared = str(tmp_warehouse / "shared")

    def create(name: str, location: str) -> dict:
        schema = {"type": "struct", "schema-id": 0, "fields": [{"id": 1, "name": "id", "required": False,
                                                                 "type": "long"}]}
        return {"identifier": {"namespace": ["db"], "name": name}, "requirements": [{"type": "assert-create"}],
                "updates": [{"action": "assign-uuid", "uuid": str(uuid.uuid4())},
                            {"action": "add-schema", "schema": schema, "last-column-id": 1},
                            {"action": "set-current-schema", "schema-id": -1},
                            {"action": "set-location", "location": location}]}

    inner = shared if second == "same" else f"{shared}/inner"
    r = requests.post(f"{server}/v1/transactions/commit", headers=_auth(),
                      json={"table-changes": [create("n1", shared), create("n2", inner)]})
    assert r.status_code == 400 and "db.n2" in r.json()["error"]["message"]
    with Catalog.open(tmp_warehouse) as cat:
        assert cat.list_tables("db") == []


@pytest.mark.parametrize(("requirement", "holds"), [
    ({"type": "assert-table-uuid", "uuid": "00000000-0000-0000-0000-000000000000"}, None),
    ({"type": "assert-ref-snapshot-id", "ref": "main", "snapshot-id": 123}, None),
    ({"type": "assert-last-assigned-field-id", "last-assigned-field-id": 7}, 3),
    ({"type": "assert-current-schema-id", "current-schema-id": 1}, 0),
    ({"type": "assert-last-assigned-partition-id", "last-assigned-partition-id": 1000}, 999),
    ({"type": "assert-default-spec-id", "default-spec-id": 1}, 0),
    ({"type": "assert-default-sort-order-id", "default-sort-order-id": 1}, 0),
    ({"type": "assert-create"}, None),
])
def test_each_requirement_is_checked_against_the_log(client: RestCatalog, server: str, requirement: dict,
                                                     holds: int | None) -> None:
    """A requirement that holds lets the commit land; one that does not is a 409 and nothing lands."""
    client.create_namespace("db")
    client.create_table("db.t", schema=SCHEMA)
    table_uuid = str(client.load_table("db.t").metadata.table_uuid)
    body = {"requirements": [requirement], "updates": [{"action": "set-properties", "updates": {"k": "v"}}]}
    r = requests.post(_table_url(server, "db", "t"), headers=_auth(), json=body)
    assert (r.status_code, r.json()["error"]["type"]) == (409, "CommitFailedException"), r.text
    assert "k" not in client.load_table("db.t").properties
    if requirement["type"] == "assert-create":
        return
    good = dict(requirement)
    key = next(k for k in good if k not in ("type", "ref"))
    good[key] = {"assert-table-uuid": table_uuid, "assert-ref-snapshot-id": None}.get(requirement["type"], holds)
    r = requests.post(_table_url(server, "db", "t"), headers=_auth(), json={**body, "requirements": [good]})
    assert r.status_code == 200, r.text
    assert r.json()["metadata"]["properties"]["k"] == "v"
    assert r.json()["metadata-location"].endswith(".metadata.json")
    assert client.load_table("db.t").properties["k"] == "v"


def test_cli_serve_answers_config_with_the_token(tmp_warehouse: Path) -> None:
    """``icelog --warehouse DIR serve --host --port --token``: ready when GET /v1/config with the token is 200."""
    import subprocess
    import sys
    import time

    from tools.ports import free_port

    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "tools.cli", "--warehouse", str(tmp_warehouse), "serve",
                             "--host", "127.0.0.1", "--port", str(port), "--token", TOKEN],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        url = f"http://127.0.0.1:{port}/v1/config"
        deadline = time.monotonic() + 60
        while True:
            try:
                r = requests.get(url, headers=_auth(), timeout=5)
                break
            except requests.ConnectionError:
                assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
                assert time.monotonic() < deadline, "icelog serve did not start"
                time.sleep(0.1)
        assert r.status_code == 200 and "GET /v1/{prefix}/namespaces" in r.json()["endpoints"]
        assert requests.get(url, timeout=5).status_code == 401
        RestCatalog("cli", uri=f"http://127.0.0.1:{port}", token=TOKEN).create_namespace("db")
        with Catalog.open(tmp_warehouse) as cat:
            assert cat.list_namespaces() == [("db",)]
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_cli_serve_needs_a_token(tmp_warehouse: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    from tools.cli import main

    monkeypatch.delenv("ICELOG_TOKEN", raising=False)
    assert main(["--warehouse", str(tmp_warehouse), "serve", "--port", "1"]) == 1
    assert "--token" in capsys.readouterr().err


def test_names_with_spaces_and_pluses_reach_their_table_however_the_client_encodes_them(
        server: str, client: RestCatalog, tmp_warehouse: Path) -> None:
    """Iceberg Java (Spark) encodes path segments with URLEncoder (a space is ``+``, a ``+`` is ``%2B``), PyIceberg
    and DuckDB with percent-escapes (``%20``, ``%2B``): both reach namespace ``my db`` and table ``a+b``."""
    client.create_namespace("my db")
    client.create_table(("my db", "a+b"), SCHEMA)
    for ns, table in (("my+db", "a%2Bb"), ("my%20db", "a%2Bb")):
        assert requests.head(f"{server}/v1/namespaces/{ns}", headers=_auth()).status_code == 204, ns
        assert requests.head(f"{server}/v1/namespaces/{ns}/tables/{table}", headers=_auth()).status_code == 204
        loaded = requests.get(f"{server}/v1/namespaces/{ns}/tables/{table}", headers=_auth())
        assert loaded.status_code == 200, (ns, loaded.text)
    assert requests.head(f"{server}/v1/namespaces/my+db/tables/a+b", headers=_auth()).status_code == 404  # "a b"
    r = requests.post(f"{server}/v1/namespaces/my+db/tables", headers=_auth(), json={
        "name": "from java", "schema": {"type": "struct", "schema-id": 0, "fields": [
            {"id": 1, "name": "id", "type": "long", "required": False}]}})
    assert r.status_code == 200, r.text
    client.load_table(("my db", "a+b")).append(_rows([1]))
    with Catalog.open(tmp_warehouse) as cat:
        assert sorted(".".join(t) for t in cat.list_tables("my db")) == ["my db.a+b", "my db.from java"]
        assert cat.load_table(("my db", "a+b")).scan().to_arrow().num_rows == 1


def test_a_parent_that_only_prefixes_namespaces_lists_them(server: str, client: RestCatalog) -> None:
    """The spec's listNamespaces: with accounting.tax created (and accounting never), ``parent=accounting`` gives
    ["accounting", "tax"]; Spark's CREATE NAMESPACE a.b and PyIceberg create no parents. A parent with no
    namespace at all under it is still 404."""
    client.create_namespace(("accounting", "tax"))
    assert client.list_namespaces("accounting") == [("accounting", "tax")]
    r = requests.get(f"{server}/v1/namespaces", params={"parent": "accounting"}, headers=_auth())
    assert r.status_code == 200 and r.json()["namespaces"] == [["accounting", "tax"]]
    r = requests.get(f"{server}/v1/namespaces", params={"parent": "nothing"}, headers=_auth())
    assert r.status_code == 404 and r.json()["error"]["type"] == "NoSuchNamespaceException"


def test_registering_a_metadata_file_that_is_not_there_is_a_bad_request(server: str, client: RestCatalog,
                                                                        tmp_path: Path) -> None:
    """The spec's only 404 of registerTable is a missing namespace: Java reads any other 404 as NoSuchTable."""
    client.create_namespace("db")
    r = requests.post(f"{server}/v1/namespaces/db/register", headers=_auth(), json={
        "name": "t", "metadata-location": str(tmp_path / "nowhere" / "v1.metadata.json")})
    assert r.status_code == 400 and r.json()["error"]["type"] == "BadRequestException", r.text
    assert "does not exist" in r.json()["error"]["message"]
    r = requests.post(f"{server}/v1/namespaces/nope/register", headers=_auth(), json={
        "name": "t", "metadata-location": str(tmp_path / "nowhere" / "v1.metadata.json")})
    assert r.status_code == 404 and r.json()["error"]["type"] == "NoSuchNamespaceException"
