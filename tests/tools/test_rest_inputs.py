"""Bad input to the REST server is a 4xx with the spec's error model and commits nothing (issue 9, point 5).

Layer: tests. A real server on 127.0.0.1 (tools.rest_server.running_server) and real HTTP requests: malformed
bodies on every route with a body, bodies over the size limit (declared by Content-Length or streamed chunked),
and deeply nested JSON. After each, the log's head is what it was.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from engine import Catalog
from tools.rest_requests import DEFAULT_MAX_BODY_BYTES, MAX_JSON_DEPTH
from tools.ports import free_port
from tools.rest_server import running_server

TOKEN = "s3cret-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
SCHEMA = {"type": "struct", "schema-id": 0,
          "fields": [{"id": 1, "name": "id", "type": "long", "required": False},
                     {"id": 2, "name": "s", "type": "string", "required": False}]}
IDENT = {"namespace": ["db"], "name": "t"}

NS = "/v1/namespaces"
PROPS = "/v1/namespaces/db/properties"
CREATE = "/v1/namespaces/db/tables"
TABLE = "/v1/namespaces/db/tables/t"
NEW_TABLE = "/v1/namespaces/db/tables/fresh"
RENAME = "/v1/tables/rename"
REGISTER = "/v1/namespaces/db/register"
TRANSACTION = "/v1/transactions/commit"
BODY_ROUTES = (NS, PROPS, CREATE, TABLE, RENAME, REGISTER, TRANSACTION)


def _create(**extra: Any) -> dict:
    return {"name": "x", "schema": SCHEMA, **extra}


def _update(*updates: Any, requirements: Any = ()) -> dict:
    return {"requirements": list(requirements), "updates": list(updates)}


# (path, body) pairs: a str body is sent as is, anything else as JSON
MALFORMED: list[tuple[str, Any]] = [
    # not a JSON object, on every route that takes a body
    *((path, body) for path in BODY_ROUTES for body in ("", "null", "[1, 2]", '"text"', "5", "{", "\udcff")),
    # namespaces
    (NS, {}), (NS, {"namespace": "db2"}), (NS, {"namespace": [1]}), (NS, {"namespace": []}),
    (NS, {"namespace": [["x"]]}), (NS, {"namespace": ["x"], "properties": []}),
    (NS, {"namespace": ["x"], "properties": "p"}), (NS, {"namespace": ["x"], "properties": {"a": {"b": 1}}}),
    (NS, {"namespace": ["x"], "properties": {"a": None}}), (NS, {"namespace": ["db"]}),
    (PROPS, {"updates": []}), (PROPS, {"removals": "x"}), (PROPS, {"updates": {"a": None}}),
    (PROPS, {"updates": {"a": {"x": 1}}}), (PROPS, {"removals": [None]}), (PROPS, {"removals": [["x"]]}),
    (PROPS, {"updates": {"a": "1"}, "removals": ["a"]}), ("/v1/namespaces/nope/properties", {"updates": {"a": "1"}}),
    # create table
    (CREATE, {}), (CREATE, {"name": 5, "schema": SCHEMA}), (CREATE, {"name": "x"}),
    (CREATE, {"name": "x", "schema": None}), (CREATE, {"name": "x", "schema": "s"}),
    (CREATE, {"name": "x", "schema": []}), (CREATE, {"name": "x", "schema": {"type": "struct", "fields": "x"}}),
    (CREATE, {"name": "x", "schema": {"type": "struct", "fields": [None]}}),
    (CREATE, {"name": "x", "schema": {"type": "struct", "fields": [
        {"id": 1, "name": "a", "type": "nosuch", "required": False}]}}),
    (CREATE, {"name": "x", "schema": {"type": "struct", "fields": [
        {"id": 1, "name": "a", "type": "decimal(x,1)", "required": False}]}}),
    (CREATE, _create(**{"partition-spec": 5})), (CREATE, _create(**{"partition-spec": "x"})),
    (CREATE, _create(**{"partition-spec": {"fields": 5}})), (CREATE, _create(**{"partition-spec": {"fields": [5]}})),
    (CREATE, _create(**{"partition-spec": {"fields": [{"source-id": 99, "transform": "identity", "name": "p"}]}})),
    (CREATE, _create(**{"partition-spec": {"fields": [{"source-id": 1, "transform": "day", "name": "p"}]}})),
    (CREATE, _create(**{"partition-spec": {"fields": [{"transform": "identity", "name": "p"}]}})),
    # Java's UnboundPartitionSpec.bind: a name (not empty) that is no other column's
    (CREATE, _create(**{"partition-spec": {"fields": [{"source-id": 1, "transform": "identity", "name": ""}]}})),
    (CREATE, _create(**{"partition-spec": {"fields": [{"source-id": 1, "transform": "bucket[2]", "name": "s"}]}})),
    (CREATE, _create(**{"write-order": 5})), (CREATE, _create(**{"write-order": {"fields": [5]}})),
    (CREATE, _create(**{"write-order": {"fields": [{"source-id": 99, "transform": "identity", "direction": "asc",
                                                    "null-order": "nulls-first"}]}})),
    (CREATE, _create(properties=[])), (CREATE, _create(properties="x")),
    (CREATE, _create(properties={"format-version": "x"})), (CREATE, _create(properties={"format-version": "9"})),
    (CREATE, _create(properties={"a": {"b": 1}})), (CREATE, _create(location=5)),
    (CREATE, _create(location=["a"])), (CREATE, _create(**{"stage-create": True, "location": 7})),
    (CREATE, {"name": "t", "schema": SCHEMA}), ("/v1/namespaces/nope/tables", _create()),
    # commit to a table
    (TABLE, {}), (TABLE, {"updates": "x"}), (TABLE, {"updates": [None]}), (TABLE, {"updates": [5]}),
    (TABLE, {"requirements": {}, "updates": []}), (TABLE, {"requirements": [None], "updates": []}),
    (TABLE, {"identifier": 5, "updates": []}), (TABLE, {"identifier": {"namespace": "db", "name": "t"}, "updates": []}),
    (TABLE, {"identifier": {"namespace": ["db"], "name": "other"}, "updates": []}),
    (TABLE, _update({"action": "explode"})), (TABLE, _update({})), (TABLE, _update({"action": None})),
    (TABLE, _update({"action": "set-properties"})),
    (TABLE, _update({"action": "set-properties", "updates": {"a": None}})),
    (TABLE, _update({"action": "set-properties", "updates": {"a": [1]}})),
    (TABLE, _update({"action": "remove-properties", "removals": "a"})),
    (TABLE, _update({"action": "remove-properties", "removals": [None]})),
    (TABLE, _update({"action": "add-schema", "schema": 5})), (TABLE, _update({"action": "add-schema"})),
    (TABLE, _update({"action": "add-schema", "schema": {"type": "struct", "fields": [
        {"id": 1, "name": "id", "type": "nosuch", "required": False}]}})),
    (TABLE, _update({"action": "set-current-schema", "schema-id": "x"})),
    (TABLE, _update({"action": "set-current-schema", "schema-id": 42})),
    (TABLE, _update({"action": "add-spec", "spec": 5})),
    (TABLE, _update({"action": "add-spec", "spec": {"fields": [
        {"source-id": "x", "transform": "identity", "name": "p", "field-id": 1000}]}})),
    (TABLE, _update({"action": "add-spec", "spec": {"fields": [
        {"source-id": 99, "transform": "identity", "name": "p", "field-id": 1000}]}})),
    (TABLE, _update({"action": "set-default-spec", "spec-id": 77})),
    # ids are Java ints: wider ones would publish metadata Java cannot parse
    (TABLE, _update({"action": "add-spec", "spec": {"spec-id": 1, "fields": [
        {"source-id": 1, "transform": "identity", "name": "p", "field-id": 2**31}]}})),
    (TABLE, _update({"action": "add-spec", "spec": {"spec-id": 2**40, "fields": []}})),
    (TABLE, _update({"action": "add-spec", "spec": {"spec-id": 1, "fields": [
        {"source-id": 1, "transform": "identity", "name": [], "field-id": 1000}]}})),
    (TABLE, _update({"action": "add-schema", "schema": {"type": "struct", "schema-id": 1, "fields": [
        {"id": 2**40, "name": "big", "type": "long", "required": False}]}})),
    (TABLE, _update({"action": "add-sort-order", "sort-order": 5})),
    (TABLE, _update({"action": "add-sort-order", "sort-order": {"order-id": "x", "fields": [
        {"source-id": 1, "transform": "identity", "direction": "asc", "null-order": "nulls-first"}]}})),
    (TABLE, _update({"action": "add-snapshot", "snapshot": {"snapshot-id": 1, "timestamp-ms": 1, "sequence-number": 1,
                                                            "manifest-list": "/tmp/a\x00b.avro"}})),
    (TABLE, _update(*[{"action": "set-properties", "updates": {f"k{i}": "v"}} for i in range(1001)])),
    (REGISTER, {"name": "r", "metadata-location": "/tmp/a\x00b.metadata.json"}),
    (TABLE, _update({"action": "add-sort-order", "sort-order": {"order-id": 1, "fields": [{"source-id": 1}]}})),
    (TABLE, _update({"action": "set-default-sort-order", "sort-order-id": 55})),
    (TABLE, _update({"action": "set-location", "location": 5})),
    (TABLE, _update({"action": "upgrade-format-version", "format-version": "x"})),
    (TABLE, _update({"action": "upgrade-format-version", "format-version": 99})),
    (TABLE, _update({"action": "assign-uuid", "uuid": "not-a-uuid"})),
    (TABLE, _update({"action": "add-snapshot", "snapshot": None})),
    (TABLE, _update({"action": "add-snapshot", "snapshot": {"snapshot-id": "x"}})),
    (TABLE, _update({"action": "add-snapshot", "snapshot": {"snapshot-id": 1, "timestamp-ms": 1,
                                                            "manifest-list": "/etc/passwd"}})),
    (TABLE, _update({"action": "add-snapshot", "snapshot": {"snapshot-id": 1, "timestamp-ms": 1,
                                                            "manifest-list": "/nowhere/x.avro"}})),
    (TABLE, _update({"action": "set-snapshot-ref", "ref-name": "b", "snapshot-id": "x", "type": "branch"})),
    (TABLE, _update({"action": "set-snapshot-ref", "ref-name": "b", "snapshot-id": 1, "type": "weird"})),
    (TABLE, _update({"action": "set-snapshot-ref", "ref-name": "b", "snapshot-id": 123, "type": "branch"})),
    (TABLE, _update({"action": "remove-snapshot-ref", "ref-name": 5})),
    (TABLE, _update({"action": "remove-snapshots", "snapshot-ids": "x"})),
    (TABLE, _update({"action": "remove-snapshots", "snapshot-ids": ["x"]})),
    (TABLE, _update({"action": "remove-statistics", "snapshot-id": "x"})),
    (TABLE, _update({"action": "set-statistics", "statistics": 5})),
    (TABLE, _update(requirements=[{"type": "assert-ref-snapshot-id", "ref": 5, "snapshot-id": "x"}])),
    (TABLE, _update(requirements=[{"type": "assert-current-schema-id"}])),
    (TABLE, _update(requirements=[{"type": None}])), (TABLE, _update(requirements=[5])),
    ("/v1/namespaces/db/tables/missing", _update()),
    (NEW_TABLE, _update({"action": "assign-uuid", "uuid": "x"}, requirements=[{"type": "assert-create"}])),
    (NEW_TABLE, _update(requirements=[{"type": "assert-create"}])),
    (NEW_TABLE, _update({"action": "add-schema", "schema": SCHEMA}, {"action": "set-current-schema", "schema-id": 3},
                        requirements=[{"type": "assert-create"}])),
    # rename
    (RENAME, {}), (RENAME, {"source": "x", "destination": IDENT}), (RENAME, {"source": IDENT}),
    (RENAME, {"source": IDENT, "destination": None}),
    (RENAME, {"source": {"namespace": "db", "name": "t"}, "destination": IDENT}),
    (RENAME, {"source": IDENT, "destination": {"namespace": [1], "name": 5}}),
    (RENAME, {"source": IDENT, "destination": {"namespace": [None], "name": "u"}}),
    (RENAME, {"source": IDENT, "destination": {"namespace": ["nope"], "name": "u"}}),
    (RENAME, {"source": {"namespace": ["db"], "name": "zz"}, "destination": {"namespace": ["db"], "name": "u"}}),
    (RENAME, {"source": IDENT, "destination": {"namespace": [], "name": "u"}}),
    # register
    (REGISTER, {}), (REGISTER, {"name": "r"}), (REGISTER, {"name": 5, "metadata-location": "/x"}),
    (REGISTER, {"name": "r", "metadata-location": 5}),
    (REGISTER, {"name": "r", "metadata-location": "/nonexistent/v1.metadata.json"}),
    (REGISTER, {"name": "r", "metadata-location": "/etc/passwd"}),
    (REGISTER, {"name": "r", "metadata-location": "/dev/null"}),
    (REGISTER, {"name": "r", "metadata-location": "/tmp"}),
    (REGISTER, {"name": "r", "metadata-location": "s3://bucket/x.json"}),
    (REGISTER, {"name": "r", "metadata-location": "/x", "overwrite": True}),
    ("/v1/namespaces/nope/register", {"name": "r", "metadata-location": "/x"}),
    # transactions
    (TRANSACTION, {}), (TRANSACTION, {"table-changes": []}), (TRANSACTION, {"table-changes": "x"}),
    (TRANSACTION, {"table-changes": None}), (TRANSACTION, {"table-changes": [5]}),
    (TRANSACTION, {"table-changes": [{}]}),
    (TRANSACTION, {"table-changes": [{"identifier": IDENT, "updates": "x"}]}),
    (TRANSACTION, {"table-changes": [{"identifier": IDENT, "updates": [{"action": "nosuch"}]}]}),
    (TRANSACTION, {"table-changes": [{"identifier": IDENT, **_update({"action": "set-properties",
                                                                      "updates": {"k": "v"}})},
                                     {"identifier": {"namespace": ["db"], "name": "zz"}, **_update()}]}),
    (TRANSACTION, {"table-changes": [{"identifier": IDENT, **_update()}, {"identifier": IDENT, **_update()}]}),
    (TRANSACTION, {"table-changes": [{"identifier": {"namespace": ["db"], "name": 5}, **_update()}]}),
]


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("rest-inputs")


@pytest.fixture(scope="module")
def server(warehouse: Path) -> Iterator[str]:
    with running_server(warehouse, TOKEN, max_body_bytes=DEFAULT_MAX_BODY_BYTES) as running:
        uri = running.uri
        requests.post(f"{uri}{NS}", headers=AUTH, json={"namespace": ["db"]}).raise_for_status()
        requests.post(f"{uri}{CREATE}", headers=AUTH, json={"name": "t", "schema": SCHEMA}).raise_for_status()
        yield uri


def _log_head(warehouse: Path) -> tuple[int, int]:
    with Catalog.open(warehouse) as cat:
        return cat.log.head("catalog"), len(cat.log(since=0))


def _post(url: str, body: Any, **kwargs: Any) -> requests.Response:
    if isinstance(body, str):
        data = body.encode("utf-8", "surrogateescape")
    else:
        data = json.dumps(body).encode()
    return requests.post(url, data=data, headers={**AUTH, "Content-Type": "application/json"}, timeout=60, **kwargs)


def _assert_error(r: requests.Response, codes: tuple[int, ...]) -> dict:
    assert r.status_code in codes, (r.status_code, r.text[:500])
    error = r.json()["error"]
    assert error["code"] == r.status_code and error["message"] and error["type"]
    return error


@pytest.mark.parametrize("path, body", MALFORMED, ids=[f"{i}-{p}" for i, (p, _) in enumerate(MALFORMED)])
def test_malformed_bodies_are_4xx_and_commit_nothing(server: str, warehouse: Path, path: str, body: Any) -> None:
    before = _log_head(warehouse)
    r = _post(server + path, body)
    _assert_error(r, (400, 404, 409, 422))
    assert _log_head(warehouse) == before


def test_malformed_bodies_are_400_unless_something_is_missing_or_taken(server: str) -> None:
    """Spot checks of which 4xx: a bad shape is 400, an absent namespace or table 404, a taken name 409."""
    assert _post(server + TABLE, {"updates": "x"}).status_code == 400
    assert _post(server + CREATE, _create(location=5)).status_code == 400
    assert _post(server + CREATE, _create(**{"partition-spec": 5})).status_code == 400
    assert _post(server + REGISTER, {"name": "r", "metadata-location": "/dev/null"}).status_code == 400
    assert _post(server + "/v1/namespaces/nope/tables", _create()).status_code == 404
    assert _post(server + "/v1/namespaces/db/tables/missing", _update()).status_code == 404
    assert _post(server + NS, {"namespace": ["db"]}).status_code == 409
    both = _post(server + PROPS, {"updates": {"a": "1"}, "removals": ["a"]})  # the spec's duplicate-key answer
    assert both.status_code == 422 and both.json()["error"]["type"] == "UnprocessableEntityException"
    report = {"report-type": "commit-report", "table-name": "db.missing", "snapshot-id": 1, "sequence-number": 1,
              "operation": "append", "metrics": {}}
    assert _assert_error(_post(server + "/v1/namespaces/db/tables/missing/metrics", report),
                         (404,))["type"] == "NoSuchTableException"
    assert _post(server + TABLE + "/metrics", dict(report, **{"table-name": "db.t"})).status_code == 204


def test_an_escaped_slash_or_a_non_utf8_escape_in_a_name_is_400_and_reaches_nothing(server: str,
                                                                                    warehouse: Path) -> None:
    """The router matches the decoded path: ``db%2Ftables%2Ft`` (a namespace ``db/tables/t``, as Java's client
    encodes it) looked like table ``db.t``, and a namespace drop dropped the table. Escapes that are not UTF-8
    answered 500."""
    before = _log_head(warehouse)
    for method, path in (("HEAD", "/v1/namespaces/db%2Ftables%2Ft"), ("GET", "/v1/namespaces/db%2Ftables%2Ft"),
                         ("DELETE", "/v1/namespaces/db%2Ftables%2Ft?purgeRequested=true"),
                         ("GET", "/v1/namespaces/db%2Ftables/tables"), ("GET", "/v1/namespaces/%FF"),
                         ("GET", "/v1/namespaces/db/tables/%C0%AE"), ("DELETE", "/v1/namespaces/db/tables/%FF")):
        r = requests.request(method, server + path, headers=AUTH, timeout=60)
        assert r.status_code == 400, (method, path, r.status_code, r.text[:300])
        if method != "HEAD":
            _assert_error(r, (400,))
    assert _log_head(warehouse) == before
    assert requests.get(server + TABLE, headers=AUTH, timeout=60).status_code == 200


def test_the_server_still_commits_after_bad_requests(server: str, warehouse: Path) -> None:
    r = _post(server + TABLE, _update({"action": "set-properties", "updates": {"ok": "yes"}}))
    assert r.status_code == 200, r.text
    with Catalog.open(warehouse) as cat:
        assert cat.load_table("db.t").properties["ok"] == "yes"


def test_a_64_mib_body_is_413_and_nothing_is_stored(server: str, warehouse: Path) -> None:
    before = _log_head(warehouse)
    big = json.dumps(_create(name="huge", properties={"blob": "x" * (64 << 20)})).encode()
    r = requests.post(server + CREATE, data=big, headers={**AUTH, "Content-Type": "application/json"}, timeout=120)
    error = _assert_error(r, (413,))
    assert str(DEFAULT_MAX_BODY_BYTES) in error["message"]
    assert _log_head(warehouse) == before
    with Catalog.open(warehouse) as cat:
        assert not cat.table_exists("db.huge")
    # the same for a commit and the token endpoint
    big_commit = json.dumps(_update({"action": "set-properties", "updates": {"blob": "x" * (8 << 20)}})).encode()
    r = requests.post(server + TABLE, data=big_commit, headers=AUTH, timeout=120)
    _assert_error(r, (413,))
    r = requests.post(server + "/v1/oauth/tokens", data={"grant_type": "client_credentials",
                                                         "client_secret": "x" * (5 << 20)}, timeout=120)
    _assert_error(r, (413,))
    assert _log_head(warehouse) == before


def test_a_chunked_body_over_the_limit_is_413(server: str, warehouse: Path) -> None:
    before = _log_head(warehouse)
    sent = []

    def chunks() -> Iterator[bytes]:
        yield b'{"name": "chunked", "schema": ' + json.dumps(SCHEMA).encode() + b', "properties": {"blob": "'
        for _ in range(12):  # 12 MiB, with no Content-Length
            sent.append(1 << 20)
            yield b"x" * (1 << 20)
        yield b'"}}'

    r = requests.post(server + CREATE, data=chunks(), headers=AUTH, timeout=120)
    assert r.request.headers.get("Transfer-Encoding") == "chunked"
    _assert_error(r, (413,))
    assert _log_head(warehouse) == before
    # a chunked body under the limit is read in full
    small = [json.dumps({"namespace": ["chunked_ok"]}).encode()]
    r = requests.post(server + NS, data=iter(small), headers=AUTH, timeout=60)
    assert r.status_code == 200, r.text


def test_deeply_nested_json_is_400(server: str, warehouse: Path) -> None:
    before = _log_head(warehouse)
    for body in ("[" * 100_000, "[" * 100_000 + "]" * 100_000, '{"a":' * 100_000 + "1" + "}" * 100_000,
                 json.dumps({"namespace": ["n"], "properties": {}, "x": _nested(MAX_JSON_DEPTH + 5)})):
        for path in (NS, TABLE, TRANSACTION):
            r = _post(server + path, body)
            error = _assert_error(r, (400,))
            assert "nested" in error["message"]
    # a schema of structs nested past the limit
    field: dict = {"id": 1, "name": "leaf", "type": "long", "required": False}
    for i in range(2, 200):
        field = {"id": i, "name": f"s{i}", "required": False, "type": {"type": "struct", "fields": [field]}}
    r = _post(server + CREATE, {"name": "deep", "schema": {"type": "struct", "fields": [field]}})
    _assert_error(r, (400,))
    assert _log_head(warehouse) == before


def _nested(levels: int) -> Any:
    value: Any = 1
    for _ in range(levels):
        value = [value]
    return value


def test_the_limit_is_configurable(tmp_path: Path) -> None:
    with running_server(tmp_path / "wh", TOKEN, max_body_bytes=200) as running:
        ok = {"namespace": ["a"], "properties": {"k": "v" * 50}}
        assert _post(running.uri + NS, ok).status_code == 200
        too_big = {"namespace": ["b"], "properties": {"k": "v" * 300}}
        _assert_error(_post(running.uri + NS, too_big), (413,))
        with Catalog.open(tmp_path / "wh") as cat:
            assert cat.list_namespaces() == [("a",)]
    with pytest.raises(Exception, match="max_body_bytes"):
        with running_server(tmp_path / "wh", TOKEN, max_body_bytes=0):
            pass


def test_cli_serve_max_body_bytes(tmp_path: Path) -> None:
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "tools.cli", "--warehouse", str(tmp_path / "wh"), "serve",
                             "--port", str(port), "--token", TOKEN, "--max-body-bytes", "300"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        uri = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while True:
            try:
                requests.get(f"{uri}/v1/config", headers=AUTH, timeout=5)
                break
            except requests.ConnectionError:
                assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
                assert time.monotonic() < deadline, "icelog serve did not start"
                time.sleep(0.1)
        assert _post(uri + NS, {"namespace": ["a"]}).status_code == 200
        _assert_error(_post(uri + NS, {"namespace": ["b"], "properties": {"k": "v" * 400}}), (413,))
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    bad = subprocess.run([sys.executable, "-m", "tools.cli", "serve", "--token", TOKEN, "--max-body-bytes", "-1"],
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "positive integer" in bad.stderr
