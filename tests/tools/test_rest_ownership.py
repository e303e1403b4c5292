"""The REST server keeps every table inside what it owns: hostile names, locations and borrowed files are refused
with 4xx and commit nothing (issue 9, points 1 to 3).

Layer: tests. A real server on 127.0.0.1, raw HTTP requests and PyIceberg's RestCatalog; a sentinel tree around
the warehouse proves no file outside it is created or deleted.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import requests
from pyiceberg.catalog.rest import RestCatalog
from pyiceberg.exceptions import BadRequestError

from engine import Catalog
from tools.rest_server import running_server

TOKEN = "owner-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
SCHEMA_JSON = {"type": "struct", "schema-id": 0,
               "fields": [{"id": 1, "name": "id", "type": "long", "required": False}]}


def files_under(root: Path) -> dict[str, bytes]:
    out = {}
    for folder, _, names in os.walk(root):
        for name in names:
            if "catalog.db" not in name:
                path = os.path.join(folder, name)
                with open(path, "rb") as f:
                    out[path] = f.read()
    return out


def head(warehouse: Path) -> int:
    with Catalog.open(warehouse) as cat:
        return max((e.position for e in cat.log(since=0)), default=0)


@pytest.fixture
def site(tmp_path: Path) -> Path:
    (tmp_path / "sentinel.txt").write_text("outside")
    (tmp_path / "wh").mkdir()
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "mine.txt").write_text("a user's folder")
    with Catalog.open(tmp_path / "wh") as cat:
        cat.create_namespace("db")
        victim = cat.create_table("db.victim", pa.schema([("id", pa.int64())]))
        victim.append(pa.table({"id": pa.array([1, 2, 3], pa.int64())}))
    return tmp_path


@pytest.fixture
def server(site: Path) -> Iterator[str]:
    with running_server(site / "wh", TOKEN) as running:
        yield running.uri


def test_hostile_names_are_refused_with_400(server, site):
    before, position = files_under(site), head(site / "wh")
    for namespace in ([".."], ["db", "../x"], ["a\x00b"], ["x" * 300]):
        r = requests.post(f"{server}/v1/namespaces", json={"namespace": namespace}, headers=AUTH)
        assert r.status_code == 400, (namespace, r.text)
    for name in ("..", "../../escape2", "a/b", "nul\x00", "x" * 1000):
        r = requests.post(f"{server}/v1/namespaces/db/tables", json={"name": name, "schema": SCHEMA_JSON},
                          headers=AUTH)
        assert r.status_code == 400, (name, r.text)
        assert r.json()["error"]["type"] == "BadRequestException"
    r = requests.post(f"{server}/v1/namespaces/{quote('..', safe='')}/tables",
                      json={"name": "t", "schema": SCHEMA_JSON}, headers=AUTH)
    assert 400 <= r.status_code < 500
    assert head(site / "wh") == position
    assert files_under(site) == before


def test_purging_a_dot_dot_table_deletes_nothing(server, site):
    before = files_under(site)
    for path in ("%2E%2E", "..", "%2E"):
        r = requests.delete(f"{server}/v1/namespaces/db/tables/{path}?purgeRequested=true", headers=AUTH)
        assert 400 <= r.status_code < 500, (path, r.status_code)
    r = requests.delete(f"{server}/v1/namespaces/%2E%2E/tables/wh?purgeRequested=true", headers=AUTH)
    assert 400 <= r.status_code < 500
    assert files_under(site) == before
    assert (site / "wh" / "catalog.db").exists()


def test_locations_onto_the_warehouse_another_table_or_a_full_folder_are_refused(server, site):
    with Catalog.open(site / "wh") as cat:
        victim_location = cat.load_table("db.victim").location
    before, position = files_under(site), head(site / "wh")
    for location in (str(site / "wh"), str(site), victim_location, victim_location + "/data/x",
                     str(site / "full"), str(site / "wh" / "catalog.db")):
        for stage in (False, True):
            r = requests.post(f"{server}/v1/namespaces/db/tables",
                              json={"name": "t", "schema": SCHEMA_JSON, "location": location, "stage-create": stage},
                              headers=AUTH)
            assert r.status_code == 400, (location, r.text)
    assert head(site / "wh") == position
    assert files_under(site) == before


def test_a_commit_naming_another_tables_manifest_list_is_refused(server, site):
    with Catalog.open(site / "wh") as cat:
        victim = cat.load_table("db.victim")
        snap = victim.current_snapshot()
        victim_list = victim.inspect.snapshots().column("manifest_list").to_pylist()[-1]
        cat.create_table("db.thief", pa.schema([("id", pa.int64())]))
    position = head(site / "wh")
    body = {"requirements": [], "updates": [
        {"action": "add-snapshot", "snapshot": {
            "snapshot-id": 4242, "sequence-number": 1, "timestamp-ms": int(time.time() * 1000),
            "manifest-list": victim_list, "summary": {"operation": "append"}, "schema-id": 0}},
        {"action": "set-snapshot-ref", "ref-name": "main", "type": "branch", "snapshot-id": 4242}]}
    r = requests.post(f"{server}/v1/namespaces/db/tables/thief", json=body, headers=AUTH)
    assert r.status_code == 400, r.text
    assert "belongs to db.victim" in r.json()["error"]["message"]
    assert head(site / "wh") == position
    with Catalog.open(site / "wh") as cat:
        thief = cat.load_table("db.thief")
        assert thief.current_snapshot() is None
        thief.expire_snapshots(older_than_ms=int(time.time() * 1000) + 3_600_000)
        victim = cat.load_table("db.victim")
        assert victim.current_snapshot().snapshot_id == snap.snapshot_id
        assert sorted(victim.scan().to_arrow().column("id").to_pylist()) == [1, 2, 3]
        assert cat.verify("db.victim") == []


def test_a_client_adding_another_tables_data_file_is_refused(server, site):
    with Catalog.open(site / "wh") as cat:
        victim_file = cat.load_table("db.victim").inspect.files().column("file_path").to_pylist()[0]
    client = RestCatalog("icelog", uri=server, token=TOKEN)
    thief = client.create_table("db.thief2", schema=pq.read_schema(victim_file))
    position = head(site / "wh")
    with pytest.raises(BadRequestError, match="belongs to db.victim"):
        thief.add_files([victim_file])
    assert head(site / "wh") == position
    outside = site / "outside.parquet"
    pq.write_table(pa.table({"id": pa.array([9], pa.int64())}), outside)
    with pytest.raises(BadRequestError, match="not under the table location"):
        thief.add_files([str(outside)])
    assert head(site / "wh") == position
    with Catalog.open(site / "wh") as cat:
        assert sorted(cat.load_table("db.victim").scan().to_arrow().column("id").to_pylist()) == [1, 2, 3]


def test_a_staged_create_makes_folders_only_where_the_table_may_live(site: Path) -> None:
    """A staged create (DuckDB's and Spark's CTAS) makes the table's folder before its commit: only at a location
    the table may own; a hostile location is refused with 4xx and nothing is made or committed."""
    before = files_under(site)
    position = head(site / "wh")
    folders = {p for p, _, _ in os.walk(site)}
    with running_server(site / "wh", token=TOKEN) as server:
        url = f"{server.uri}/v1/namespaces/db/tables"
        for location in (str(site / "wh"), str(site / "wh" / "db" / "victim"),
                         str(site / "wh" / "db" / "victim" / "inside"), str(site / "full"),
                         str(site / "wh" / "db" / "victim" / ".." / "victim")):
            answer = requests.post(url, json={"name": "staged", "schema": SCHEMA_JSON, "stage-create": True,
                                              "location": location}, headers=AUTH, timeout=30)
            assert 400 <= answer.status_code < 500, (location, answer.text)
        assert {p for p, _, _ in os.walk(site)} == folders  # no folder made for a refused location
        # an allowed location outside the warehouse: the staged table owns nothing yet, so nothing is made there
        outside = str(site / "wh" / "x" / ".." / ".." / "elsewhere")
        answer = requests.post(url, json={"name": "outside", "schema": SCHEMA_JSON, "stage-create": True,
                                          "location": outside}, headers=AUTH, timeout=30)
        assert answer.status_code == 200, answer.text
        assert not (site / "elsewhere").exists() and {p for p, _, _ in os.walk(site)} == folders
        answer = requests.post(url, json={"name": "staged", "schema": SCHEMA_JSON, "stage-create": True},
                               headers=AUTH, timeout=30)
        assert answer.status_code == 200, answer.text
        made = Path(answer.json()["metadata"]["location"])
    assert made.is_relative_to(site / "wh") and (made / "metadata").is_dir()
    assert not any((made / "metadata").iterdir())  # empty folders, no file
    assert files_under(site) == before and head(site / "wh") == position  # nothing written, nothing committed


def test_a_refused_commit_never_stages_another_tables_files(site: Path) -> None:
    """A commit refused while its files are read stages them as the table's orphans only when the table owns
    them: a manifest list named in another table's folder is neither staged nor ever deleted."""
    with Catalog.open(site / "wh") as cat:
        cat.create_table("db.thief", pa.schema([("id", pa.int64())]))
        victim_location = Path(cat.load_table("db.victim").state.location)
    borrowed = next((victim_location / "metadata").glob("snap-*.avro"))
    keep = borrowed.read_bytes()
    body = {"requirements": [], "updates": [{"action": "add-snapshot", "snapshot": {
        "snapshot-id": 77, "timestamp-ms": 1_700_000_000_000, "manifest-list": str(borrowed),
        "summary": {"operation": "append"}, "schema-id": 0}}]}
    with running_server(site / "wh", token=TOKEN) as server:
        answer = requests.post(f"{server.uri}/v1/namespaces/db/tables/thief", json=body, headers=AUTH, timeout=30)
    assert 400 <= answer.status_code < 500, answer.text
    with Catalog.open(site / "wh") as cat:
        thief = cat.load_table("db.thief")
        assert cat.log.staged_files(thief.uuid) == []
        assert thief.remove_orphan_files(older_than_ms=2**62) == []
        assert cat.verify("db.victim") == []
    assert borrowed.read_bytes() == keep
