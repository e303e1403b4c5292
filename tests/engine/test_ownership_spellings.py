"""On S3, another spelling of a path never gets past the ownership rules: a location spelled with a doubled slash,
a dot segment or a ``?`` (FileIO strips leading slashes and what follows a ``?``, the S3 client resolves dot
segments) and a file path with ``..`` segments reach another table's objects, so they are refused with a
ValidationError naming them, and the other table's objects stay as they were. A percent-escape is no other
spelling: keys are taken as written, as every Iceberg engine takes them.

Layer: tests. moto's S3 server on the loopback interface (the ``s3_bucket`` fixture of tests/conftest.py); the
REST case drives ``icelog serve`` with PyIceberg's RestCatalog.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from engine import Catalog
from engine.errors import ValidationError
from engine import ownership
from engine.ownership import Ownership, normalize_location
from storage.files import FileIO, S3Settings

SCHEMA = pa.schema([("id", pa.int64())])
SPELLINGS = ["s3://{bucket}//lake/db/b", "s3://{bucket}/lake/db/a/../b", "s3://{bucket}/lake/db/b?x",
             "s3://{bucket}/lake/db/./b"]


@pytest.fixture
def io(s3_properties: dict[str, str]) -> FileIO:
    return FileIO(S3Settings.from_properties(s3_properties))


@pytest.fixture
def catalog(tmp_path: Path, s3_bucket: str, s3_properties: dict[str, str]):
    """A catalog on s3://<bucket>/lake with db.b holding one row (7)."""
    with Catalog.open(tmp_path / "catalog", warehouse=f"s3://{s3_bucket}/lake", properties=s3_properties) as cat:
        cat.create_namespace("db")
        b = cat.create_table("db.b", SCHEMA)
        b.append(pa.table({"id": [7]}))
        assert b.location == f"s3://{s3_bucket}/lake/db/b"
        yield cat


def objects(io: FileIO, prefix: str) -> dict[str, bytes]:
    return {path: io.read_bytes(path) for path, _ in io.list_files(prefix)}


def other_metadata(tmp_path: Path, bucket: str, properties: dict[str, str]) -> str:
    """The metadata.json of a table of another catalog (on s3://<bucket>/src), to register."""
    with Catalog.open(tmp_path / "src", warehouse=f"s3://{bucket}/src", properties=properties) as src:
        src.create_namespace("db")
        s = src.create_table("db.s", SCHEMA)
        s.append(pa.table({"id": [5]}))
        return s.metadata_location


@pytest.mark.parametrize("action", ["register", "create"])
@pytest.mark.parametrize("spelling", SPELLINGS)
def test_a_table_at_another_spelling_of_another_tables_location_is_refused(
        catalog: Catalog, io: FileIO, tmp_path: Path, s3_bucket: str, s3_properties: dict[str, str],
        spelling: str, action: str) -> None:
    b = catalog.load_table("db.b")
    before = objects(io, b.location)
    location = spelling.format(bucket=s3_bucket)
    with pytest.raises(ValidationError) as refused:
        if action == "register":
            catalog.register_table("db.a", other_metadata(tmp_path, s3_bucket, s3_properties), location=location)
        else:
            catalog.create_table("db.a", SCHEMA, location=location)
    assert location in str(refused.value)
    assert objects(io, b.location) == before  # version-hint.text and every other object of db.b untouched
    assert not catalog.table_exists("db.a")
    assert catalog.load_table("db.b").scan().to_arrow().column("id").to_pylist() == [7]


def test_a_file_named_through_dot_segments_is_refused_and_purging_never_deletes_it(
        catalog: Catalog, io: FileIO) -> None:
    b = catalog.load_table("db.b")
    victim = b.inspect.files().column("file_path").to_pylist()[0]
    a = catalog.create_table("db.a", SCHEMA)
    dotted = a.location + "/../b" + victim[len(b.location):]
    before = objects(io, b.location)
    with pytest.raises(ValidationError) as refused:
        a.append_files([dotted])
    assert dotted in str(refused.value)
    assert catalog.load_table("db.a").current_snapshot() is None
    catalog.purge_table("db.a")
    assert io.exists(victim)
    assert objects(io, b.location) == before
    assert catalog.load_table("db.b").scan().to_arrow().column("id").to_pylist() == [7]


def test_a_file_named_with_a_trailing_slash_is_refused(catalog: Catalog, io: FileIO, s3_bucket: str) -> None:
    """``s3://b/x.parquet/`` reaches x.parquet through icelog's FileIO, but PyIceberg and Java ask for the key
    ``x.parquet/``: recorded so, the table would read differently in every other engine."""
    import pyarrow.parquet as pq

    a = catalog.create_table("db.a", SCHEMA)
    path = f"s3://{s3_bucket}/landing/p.parquet"
    with io.open_output(path) as out:
        pq.write_table(pa.table({"id": pa.array([1], pa.int64())}), out)
    with pytest.raises(ValidationError, match="ends with '/'"):
        a.append_files([path + "/"])
    assert catalog.load_table("db.a").current_snapshot() is None
    a.append_files([path])
    assert a.scan().to_arrow().column("id").to_pylist() == [1]


def test_ownership_compares_the_object_a_path_reaches() -> None:
    owned = Ownership("s3://bk/lake/db/a", others=[("s3://bk/lake/db/b", "db.b")], catalog_files=())
    for path in ("s3://bk/lake/db/a/../b/data/x.parquet", "s3://bk/lake/db/a/./data/x.parquet", "s3://bk/lake/db/a//data/x.parquet",
                 "s3://bk/lake/db/a/data/x.parquet#y"):
        assert not owned.owns(path), path
        assert not owned.may_delete(path, external=True), path
        with pytest.raises(ValidationError, match="segment|'#'") as refused:
            owned.check_new_file(path, "append file")
        assert path in str(refused.value)
        with pytest.raises(ValidationError):
            owned.check_external_file(path, "append file")
    assert owned.owner_elsewhere("s3://bk/lake/db/a/../b/data/x.parquet") == "db.b"
    assert owned.owner_elsewhere("s3://bk//lake/db/b/data/x.parquet") == "db.b"
    # Iceberg escapes partition values in file paths: the key holds the escape as written, and is the table's
    assert owned.owns("s3://bk/lake/db/a/data/ts=2024-01-01T00%3A00/x.parquet")
    assert owned.owns("s3://bk/lake/db/a/%2E%2E/b/data/x.parquet")  # a folder named %2E%2E, not ..
    assert owned.owner_elsewhere("s3://bk/lake/db/%62/data/x.parquet") is None
    assert ownership.spelling_problem("s3://bk/lake/db/%62") is None
    assert normalize_location("s3a://bk//lake/db/%62/") == "s3://bk/lake/db/%62"


def test_a_percent_escape_in_a_location_is_a_key_of_its_own(catalog: Catalog, io: FileIO, s3_bucket: str) -> None:
    """``%62`` is not ``b``: a table there writes under the literal key, beside db.b and never into it."""
    b = catalog.load_table("db.b")
    before = objects(io, b.location)
    a = catalog.create_table("db.a", SCHEMA, location=f"s3://{s3_bucket}/lake/db/%62")
    a.append(pa.table({"id": [1]}))
    assert objects(io, b.location) == before
    assert all("/lake/db/%62/" in path for path, _ in io.list_files(a.location))
    assert a.scan().to_arrow().column("id").to_pylist() == [1] and catalog.verify("db.a") == []
    assert normalize_location("s3://bk/lake/a%2562") == "s3://bk/lake/a%2562"  # FileIO decodes it to a%62 again


def test_a_rest_client_data_file_with_dot_segments_is_refused(catalog: Catalog, io: FileIO, tmp_path: Path,
                                                              s3_bucket: str, s3_properties: dict[str, str]) -> None:
    from pyiceberg.catalog.rest import RestCatalog
    from pyiceberg.exceptions import BadRequestError

    from tools.rest_server import running_server

    b = catalog.load_table("db.b")
    victim = b.inspect.files().column("file_path").to_pylist()[0]
    before = objects(io, b.location)
    warehouse = f"s3://{s3_bucket}/lake"
    with running_server(warehouse, catalog_dir=tmp_path / "catalog", properties=s3_properties) as server:
        client = RestCatalog("icelog", uri=server.uri, token=server.token)
        thief = client.create_table("db.a", schema=SCHEMA)
        dotted = thief.location().rstrip("/") + "/../b" + victim[len(b.location):]
        with pytest.raises(BadRequestError, match="segment") as refused:
            thief.add_files([dotted])
        assert dotted in str(refused.value)
    with Catalog.open(tmp_path / "catalog", warehouse=warehouse, properties=s3_properties) as cat:
        assert cat.load_table("db.a").current_snapshot() is None
        cat.purge_table("db.a")
        assert objects(io, b.location) == before
        assert cat.load_table("db.b").scan().to_arrow().column("id").to_pylist() == [7]
