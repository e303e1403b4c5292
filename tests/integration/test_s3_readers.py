"""Other engines on an icelog warehouse on S3 (moto's server on the loopback interface): PyIceberg 0.12 through
``icelog serve`` with vended credentials and as a ``StaticTable`` on an ``s3://`` metadata location, and DuckDB
1.4.4 by path (``iceberg_scan``) and through the REST catalog, reading the current and earlier snapshots and
writing through the server.

Layer: tests. Spark on S3 is in test_spark_s3.py.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterator

import pyarrow as pa
import pytest
import requests

from engine import Catalog
from tools.rest_server import RunningServer, running_server

SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string())])


def rows(ids: list[int]) -> pa.Table:
    return pa.table({"id": pa.array(ids, pa.int64()), "name": [f"n{i}" for i in ids]})


@pytest.fixture
def lake(tmp_path: Path, s3_bucket: str, s3_properties: dict[str, str]) -> dict[str, Any]:
    """A catalog on s3://<bucket>/lake (log in tmp_path/catalog) with db.t: two appends, a delete."""
    warehouse = f"s3://{s3_bucket}/lake"
    with Catalog.open(tmp_path / "catalog", warehouse=warehouse, properties=s3_properties) as cat:
        cat.create_namespace("db")
        t = cat.create_table("db.t", schema=SCHEMA, properties={"format-version": "2",
                                                              "write.delete.mode": "merge-on-read"})
        first = t.append(rows([1, 2, 3]))
        first_metadata = t.metadata_location
        t.append(rows([4]))
        t.delete("id = 2")
        return {"warehouse": warehouse, "catalog_dir": tmp_path / "catalog", "first": first.snapshot_id,
                "first_metadata": first_metadata, "metadata": t.metadata_location, "location": t.state.location}


@pytest.fixture
def server(lake: dict[str, Any], s3_properties: dict[str, str]) -> Iterator[RunningServer]:
    with running_server(lake["warehouse"], catalog_dir=lake["catalog_dir"], properties=s3_properties) as running:
        yield running


def icelog_ids(lake: dict[str, Any], s3_properties: dict[str, str]) -> list[int]:
    with Catalog.open(lake["catalog_dir"], warehouse=lake["warehouse"], properties=s3_properties) as cat:
        return sorted(cat.load_table("db.t").scan().to_arrow().column("id").to_pylist())


def test_pyiceberg_needs_only_the_uri_and_a_token(server: RunningServer, lake: dict[str, Any],
                                                  s3_properties: dict[str, str]) -> None:
    from pyiceberg.catalog.rest import RestCatalog

    catalog = RestCatalog("icelog", uri=server.uri, token=server.token)  # no S3 settings: the server vends them
    table = catalog.load_table("db.t")
    assert sorted(table.scan().to_arrow().column("id").to_pylist()) == [1, 3, 4]
    assert sorted(table.scan(snapshot_id=lake["first"]).to_arrow().column("id").to_pylist()) == [1, 2, 3]
    table.append(rows([5]))  # PyIceberg writes its data file and manifests to S3, icelog commits
    assert icelog_ids(lake, s3_properties) == [1, 3, 4, 5]
    created = catalog.create_table("db.made_by_pyiceberg", schema=SCHEMA)
    assert created.location().startswith(f"{lake['warehouse']}/db/made_by_pyiceberg")
    created.append(rows([9]))
    assert created.scan().to_arrow().column("id").to_pylist() == [9]


def test_credentials_are_vended_only_when_asked_for(server: RunningServer, lake: dict[str, Any],
                                                    s3_properties: dict[str, str]) -> None:
    secret = s3_properties["s3.secret-access-key"]
    auth = {"Authorization": f"Bearer {server.token}"}
    config = requests.get(f"{server.uri}/v1/config", headers=auth, timeout=10).json()
    assert config["defaults"] == {"s3.endpoint": s3_properties["s3.endpoint"], "s3.region": "us-east-1",
                                  "s3.path-style-access": "true"}
    plain = requests.get(f"{server.uri}/v1/namespaces/db/tables/t", headers=auth, timeout=10)
    assert plain.status_code == 200 and secret not in plain.text
    assert plain.json()["config"]["s3.endpoint"] == s3_properties["s3.endpoint"]
    asked = requests.get(f"{server.uri}/v1/namespaces/db/tables/t", timeout=10,
                         headers={**auth, "X-Iceberg-Access-Delegation": "vended-credentials"}).json()
    assert {c["prefix"] for c in asked["storage-credentials"]} == {lake["location"],
                                                                   lake["location"].replace("s3://", "s3a://")}
    assert asked["storage-credentials"][0]["config"]["s3.secret-access-key"] == secret
    vended = requests.get(f"{server.uri}/v1/namespaces/db/tables/t/credentials", headers=auth, timeout=10).json()
    assert vended["storage-credentials"][0]["prefix"] == lake["location"]
    assert vended["storage-credentials"][0]["config"]["s3.access-key-id"] == s3_properties["s3.access-key-id"]
    assert requests.get(f"{server.uri}/v1/namespaces/db/tables/t/credentials", timeout=10).status_code == 401
    assert requests.get(f"{server.uri}/v1/namespaces/db/tables/nope/credentials", headers=auth,
                        timeout=10).status_code == 404
    # metadata on S3 carries no secret either
    with Catalog.open(lake["catalog_dir"], warehouse=lake["warehouse"], properties=s3_properties) as cat:
        assert secret not in cat.io.read_bytes(lake["metadata"]).decode()


def test_pyiceberg_static_table_on_s3(lake: dict[str, Any], s3_properties: dict[str, str]) -> None:
    from pyiceberg.table import StaticTable

    current = StaticTable.from_metadata(lake["metadata"], properties=s3_properties)
    assert sorted(current.scan().to_arrow().column("id").to_pylist()) == [1, 3, 4]
    earlier = StaticTable.from_metadata(lake["first_metadata"], properties=s3_properties)
    assert sorted(earlier.scan().to_arrow().column("id").to_pylist()) == [1, 2, 3]
    assert sorted(current.scan(snapshot_id=lake["first"]).to_arrow().column("id").to_pylist()) == [1, 2, 3]


def _duckdb_s3_secret(con: Any, s3_properties: dict[str, str]) -> None:
    host = s3_properties["s3.endpoint"].split("//", 1)[1]
    con.execute(f"CREATE SECRET icelog_s3 (TYPE s3, KEY_ID '{s3_properties['s3.access-key-id']}', "
                f"SECRET '{s3_properties['s3.secret-access-key']}', ENDPOINT '{host}', URL_STYLE 'path', "
                f"USE_SSL false, REGION 'us-east-1')")


def test_duckdb_scans_by_path_on_s3(duckdb_connection: Any, lake: dict[str, Any],
                                    s3_properties: dict[str, str]) -> None:
    con = duckdb_connection
    _duckdb_s3_secret(con, s3_properties)
    current = con.execute(f"SELECT list(id ORDER BY id) FROM iceberg_scan('{lake['metadata']}')").fetchone()[0]
    assert current == [1, 3, 4]
    earlier = con.execute(f"SELECT list(id ORDER BY id) FROM iceberg_scan('{lake['first_metadata']}')").fetchone()
    assert earlier[0] == [1, 2, 3]
    by_snapshot = con.execute(f"SELECT list(id ORDER BY id) FROM iceberg_scan('{lake['metadata']}', "
                              f"snapshot_from_id => {lake['first']})").fetchone()[0]
    assert by_snapshot == [1, 2, 3]


def test_duckdb_reads_and_writes_through_the_rest_catalog(duckdb_connection: Any, server: RunningServer,
                                                          lake: dict[str, Any],
                                                          s3_properties: dict[str, str]) -> None:
    con = duckdb_connection  # no S3 secret: the server vends the credentials with each table
    con.execute(f"ATTACH 'warehouse' AS ice (TYPE iceberg, ENDPOINT '{server.uri}', AUTHORIZATION_TYPE 'oauth2', "
                f"TOKEN '{server.token}')")
    assert con.execute("SELECT list(id ORDER BY id) FROM ice.db.t").fetchone()[0] == [1, 3, 4]
    earlier = con.execute(f"SELECT list(id ORDER BY id) FROM ice.db.t AT (VERSION => {lake['first']})").fetchone()
    assert earlier[0] == [1, 2, 3]
    con.execute("INSERT INTO ice.db.t VALUES (7, 'n7'), (8, 'n8')")
    assert icelog_ids(lake, s3_properties) == [1, 3, 4, 7, 8]
    with Catalog.open(lake["catalog_dir"], warehouse=lake["warehouse"], properties=s3_properties) as cat:
        table = cat.load_table("db.t")
        assert table.state.current_snapshot.operation == "append"
        # DuckDB's files are on S3 under the table, and the published metadata is the log's own
        assert all(e.file.file_path.startswith(lake["location"] + "/")
                   for e in cat.store.live_entries(table.state, table.state.current_snapshot.snapshot_id))
        assert json.loads(cat.io.read_bytes(table.metadata_location))["location"] == lake["location"]
