"""Partition values that Iceberg escapes in folder names (``a:b`` is ``cat=a%3Ab``, ``x/y`` is ``cat=x%2Fy``,
``100%`` is ``cat=100%25``) name the same object for icelog as for every other engine: the path in the metadata is
the object key (or the local path) as written. icelog decoded the escapes of ``s3://`` and ``file://`` paths, so
PyIceberg and DuckDB could not find the files it wrote there, and icelog could not find the files they wrote.

Layer: tests. moto's S3 server on the loopback interface; PyIceberg 0.12 (``StaticTable``, and its SQL catalog
writing) and DuckDB 1.4.4 (``iceberg_scan``) on real files.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from engine import Catalog
from tests.conftest import duckdb_connect

VALUES = ["a:b", "x/y", "p q", "100%", "plain"]
SCHEMA = pa.schema([("id", pa.int64()), ("cat", pa.string())])
EXPECTED = sorted(enumerate(VALUES))


def rows() -> pa.Table:
    return pa.table({"id": pa.array(range(len(VALUES)), pa.int64()), "cat": VALUES})


def pyiceberg_rows(metadata: str, properties: dict[str, str]) -> list[tuple[int, str]]:
    from pyiceberg.table import StaticTable

    t = StaticTable.from_metadata(metadata, properties=properties).scan().to_arrow()
    return sorted(zip(t.column("id").to_pylist(), t.column("cat").to_pylist()))


def duckdb_rows(metadata: str, properties: dict[str, str]) -> list[tuple[int, str]]:
    con = duckdb_connect()
    try:
        if properties:
            con.execute(f"CREATE SECRET s (TYPE s3, KEY_ID '{properties['s3.access-key-id']}', "
                        f"SECRET '{properties['s3.secret-access-key']}', "
                        f"ENDPOINT '{properties['s3.endpoint'].split('//')[1]}', URL_STYLE 'path', USE_SSL false, "
                        f"REGION 'us-east-1')")
        return sorted(con.execute(f"SELECT id, cat FROM iceberg_scan('{metadata}')").fetchall())
    finally:
        con.close()


def icelog_table(catalog_dir: Path, warehouse: str, properties: dict[str, str], location: str | None) -> str:
    with Catalog.open(catalog_dir, warehouse=warehouse, properties=properties) as cat:
        cat.create_namespace("db")
        t = cat.create_table("db.t", schema=SCHEMA, partition_by=["cat"], location=location)
        t.append(rows())
        paths = t.inspect.files().column("file_path").to_pylist()
        assert any("/cat=a%3Ab/" in p for p in paths) and any("/cat=100%25/" in p for p in paths)
        return t.metadata_location


def pyiceberg_table(tmp_path: Path, warehouse: str, properties: dict[str, str]) -> str:
    from pyiceberg.catalog.sql import SqlCatalog
    from pyiceberg.partitioning import PartitionField, PartitionSpec
    from pyiceberg.schema import Schema
    from pyiceberg.transforms import IdentityTransform
    from pyiceberg.types import LongType, NestedField, StringType

    cat = SqlCatalog("p", uri=f"sqlite:///{tmp_path}/pyiceberg.db", warehouse=warehouse, **properties)
    cat.create_namespace("db")
    t = cat.create_table("db.t", schema=Schema(NestedField(1, "id", LongType()), NestedField(2, "cat", StringType())),
                         partition_spec=PartitionSpec(PartitionField(2, 1000, IdentityTransform(), "cat")))
    t.append(rows())
    return t.metadata_location


def where(kind: str, tmp_path: Path, s3_bucket: str | None, s3_properties: dict[str, str] | None
          ) -> tuple[str, str | None, dict[str, str]]:
    """(warehouse, location of icelog's table, properties) of an S3 or a ``file://`` warehouse."""
    if kind == "s3":
        return f"s3://{s3_bucket}/lake", None, s3_properties or {}
    (tmp_path / "wh").mkdir()
    return str(tmp_path / "wh"), f"file://{tmp_path}/wh/db/t", {}


@pytest.fixture(params=["s3", "file://"])
def store(request: Any, tmp_path: Path) -> tuple[str, str | None, dict[str, str]]:
    if request.param == "s3":
        return where("s3", tmp_path, request.getfixturevalue("s3_bucket"),
                     request.getfixturevalue("s3_properties"))
    return where("file", tmp_path, None, None)


def test_pyiceberg_and_duckdb_read_every_row_icelog_wrote(tmp_path: Path, store) -> None:
    warehouse, location, properties = store
    metadata = icelog_table(tmp_path / "catalog", warehouse, properties, location)
    assert pyiceberg_rows(metadata, properties) == EXPECTED
    assert duckdb_rows(metadata, properties) == EXPECTED


def test_icelog_reads_and_appends_to_what_pyiceberg_wrote(tmp_path: Path, store) -> None:
    warehouse, location, properties = store
    if location is not None:  # PyIceberg writes a file:// table when its warehouse is one
        warehouse = f"file://{warehouse}"
    metadata = pyiceberg_table(tmp_path, warehouse, properties)
    with Catalog.open(tmp_path / "catalog", warehouse=f"{warehouse}/icelog", properties=properties) as cat:
        cat.create_namespace("db")
        t = cat.register_table("db.r", metadata)
        got = t.scan().to_arrow()
        assert sorted(zip(got.column("id").to_pylist(), got.column("cat").to_pylist())) == EXPECTED
        t.append(pa.table({"id": pa.array([99], pa.int64()), "cat": ["a:b"]}))
        assert sorted(t.scan("cat = 'a:b'").to_arrow().column("id").to_pylist()) == [0, 99]
        metadata = t.metadata_location
    assert sorted(r[0] for r in duckdb_rows(metadata, properties)) == [*range(len(VALUES)), 99]
