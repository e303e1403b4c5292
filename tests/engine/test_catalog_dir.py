"""A catalog whose log lives apart from its warehouse: ``Catalog.open("catalog_dir", warehouse=...)``, the CLI's
``--catalog-dir`` and the REST server's ``catalog_dir`` (issue 10's locations, for local warehouses).

Layer: tests. Real folders; the log must be in the catalog folder, tables in the warehouse, and the catalog's
database never a table's location.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from pyiceberg.table import StaticTable

from engine import Catalog
from engine.errors import ValidationError
from tools.cli import main as cli

SCHEMA = pa.schema([("id", pa.int64())])


def test_the_log_lives_in_the_catalog_dir_and_tables_in_the_warehouse(tmp_path: Path) -> None:
    with Catalog.open(tmp_path / "cat", warehouse=tmp_path / "lake") as cat:
        cat.create_namespace("db")
        table = cat.create_table("db.t", SCHEMA)
        table.append(pa.table({"id": pa.array([1, 2], pa.int64())}))
        assert table.location == str(tmp_path / "lake" / "db" / "t")
        with pytest.raises(ValidationError, match="catalog's database"):
            cat.create_table("db.u", SCHEMA, location=str(tmp_path / "cat"))
        metadata = table.metadata_location
    assert (tmp_path / "cat" / "catalog.db").exists() and not (tmp_path / "lake" / "catalog.db").exists()
    assert StaticTable.from_metadata(metadata).scan().to_arrow().num_rows == 2
    with Catalog.open(tmp_path / "cat", warehouse=tmp_path / "lake") as cat:
        assert cat.load_table("db.t").scan().to_arrow().num_rows == 2
        assert cat.verify("db.t") == []
    with Catalog.open(tmp_path / "lake") as other:  # the warehouse alone holds no catalog
        assert other.list_namespaces() == []


def test_a_warehouse_icelog_cannot_reach_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(ValidationError, match="neither s3.endpoint nor credentials"):
        Catalog.open(tmp_path / "cat", warehouse="s3://bucket/prefix")
    with pytest.raises(ValidationError, match="cannot reach"):
        Catalog.open(tmp_path / "cat", warehouse="gs://bucket/prefix")
    with pytest.raises(ValidationError, match="s3.path-style-access"):
        Catalog.open(tmp_path / "cat", warehouse="s3://bucket/prefix", properties={"s3.path-style-access": "yes"})
    assert not (tmp_path / "cat" / "catalog.db").exists()


def test_the_cli_and_the_rest_server_take_the_catalog_dir(tmp_path: Path, capsys) -> None:
    import requests

    from tools.rest_server import running_server

    args = ["--catalog-dir", str(tmp_path / "cat"), "--warehouse", str(tmp_path / "lake")]
    assert cli([*args, "create-namespace", "db"]) == 0
    assert cli([*args, "create-table", "db.t", "--schema",
                '{"type": "struct", "schema-id": 0, "fields": [{"id": 1, "name": "id", "type": "long", '
                '"required": false}]}']) == 0
    assert f"at {tmp_path / 'lake' / 'db' / 't'}" in capsys.readouterr().out
    assert not (tmp_path / "lake" / "catalog.db").exists()

    with running_server(tmp_path / "lake", "tok", catalog_dir=tmp_path / "cat") as server:
        r = requests.get(f"{server.uri}/v1/namespaces/db/tables/t", headers={"Authorization": "Bearer tok"})
    assert r.status_code == 200
    assert r.json()["metadata"]["location"] == str(tmp_path / "lake" / "db" / "t")
    assert not (tmp_path / "lake" / "catalog.db").exists()


@pytest.mark.parametrize("which", ["warehouse", "catalog_dir"])
def test_a_file_where_a_folder_goes_is_a_validation_error_and_stays(tmp_path, which):
    a_file = tmp_path / "not-a-folder"
    a_file.write_bytes(b"mine")
    args = (a_file,) if which == "catalog_dir" else (tmp_path / "catalog",)
    kwargs = {"warehouse": a_file} if which == "warehouse" else {}
    with pytest.raises(ValidationError, match="not a folder icelog can use"):
        Catalog.open(*args, **kwargs)
    assert a_file.read_bytes() == b"mine"
