"""Faults of an S3 warehouse: the server stopped or answering 500/503 in the middle of a publish or of a data
upload, wrong credentials, a missing bucket, an unreachable endpoint.

Layer: tests. A fault-injecting proxy (tools/s3_server.py) stands between icelog and the loopback S3 server.
The invariant checked every time: the log stays intact, readers of the published metadata stay on the previous
complete version, and the next ``publish()`` completes what a fault interrupted; an upload that fails commits
nothing; no error message carries the secret.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterator

import pyarrow as pa
import pytest

from engine import Catalog
from engine.errors import IcelogError, PublishFailed, StorageError, ValidationError
from storage.files import FileIO, S3Settings
from tools.s3_server import S3Proxy

SCHEMA = pa.schema([("id", pa.int64())])


def rows(*ids: int) -> pa.Table:
    return pa.table({"id": pa.array(list(ids), pa.int64())})


@pytest.fixture
def proxy(s3_endpoint: str) -> Iterator[S3Proxy]:
    with S3Proxy(s3_endpoint) as running:
        yield running


@pytest.fixture
def faulty(tmp_path: Path, s3_bucket: str, s3_properties: dict[str, str], proxy: S3Proxy) -> Iterator[Catalog]:
    props = {**s3_properties, "s3.endpoint": proxy.endpoint}
    with Catalog.open(tmp_path / "catalog", warehouse=f"s3://{s3_bucket}/lake", properties=props) as cat:
        cat.create_namespace("db")
        yield cat


@pytest.fixture
def direct(s3_properties: dict[str, str]) -> FileIO:
    """The objects as a reader sees them, past the proxy."""
    return FileIO(S3Settings.from_properties(s3_properties))


def published_version(io: FileIO, location: str) -> int:
    return int(io.read_bytes(f"{location}/metadata/version-hint.text"))


def reader_ids(io: FileIO, location: str, s3_properties: dict[str, str]) -> list[int]:
    """The rows a reader of the published metadata finds (PyIceberg on the version hint's metadata.json)."""
    from pyiceberg.table import StaticTable

    version = published_version(io, location)
    table = StaticTable.from_metadata(f"{location}/metadata/v{version}.metadata.json", properties=s3_properties)
    return sorted(table.scan().to_arrow().column("id").to_pylist())


@pytest.mark.parametrize("fault", ["stopped", "500", "503"])
def test_a_publish_interrupted_leaves_readers_on_the_previous_version(faulty: Catalog, proxy: S3Proxy,
                                                                      direct: FileIO, fault: str,
                                                                      s3_properties: dict[str, str]) -> None:
    t = faulty.create_table("db.t", schema=SCHEMA)
    t.append(rows(1))
    before = published_version(direct, t.state.location)
    # the data file and the manifests go up; the metadata.json does not
    picks = (lambda method, path: method == "PUT" and path.endswith(".metadata.json"))
    if fault == "stopped":
        proxy.fail(picks, drop=True)
    else:
        proxy.fail(picks, status=int(fault))
    with pytest.raises(PublishFailed) as raised:
        t.append(rows(2))
    assert raised.value.version == t.state.version  # the outcome is known: committed at this version
    assert s3_properties["s3.secret-access-key"] not in str(raised.value)
    assert published_version(direct, t.state.location) == before
    assert reader_ids(direct, t.state.location, s3_properties) == [1]
    assert faulty.log.verify() == []  # the log is intact and holds the commit
    assert sorted(t.scan().to_arrow().column("id").to_pylist()) == [1, 2]
    proxy.heal()
    assert t.publish() is not None  # the next publish completes it from the log
    assert published_version(direct, t.state.location) == t.state.version
    assert reader_ids(direct, t.state.location, s3_properties) == [1, 2]
    assert faulty.verify("db.t") == []


def test_the_hint_failing_after_the_metadata_is_completed_by_the_next_commit(faulty: Catalog, proxy: S3Proxy,
                                                                             direct: FileIO,
                                                                             s3_properties: dict[str, str]) -> None:
    t = faulty.create_table("db.t", schema=SCHEMA)
    t.append(rows(1))
    proxy.fail(lambda method, path: method == "PUT" and path.endswith("version-hint.text"), status=500)
    with pytest.raises(PublishFailed):
        t.append(rows(2))
    assert reader_ids(direct, t.state.location, s3_properties) == [1]  # the new metadata.json is not pointed at
    proxy.heal()
    t.append(rows(3))  # publishes the interrupted version's files again (the same bytes: no conflict), then its own
    assert reader_ids(direct, t.state.location, s3_properties) == [1, 2, 3]
    assert faulty.verify("db.t") == []


def test_a_failing_data_upload_commits_nothing(faulty: Catalog, proxy: S3Proxy, direct: FileIO,
                                               s3_properties: dict[str, str]) -> None:
    t = faulty.create_table("db.t", schema=SCHEMA)
    t.append(rows(1))
    head = faulty.log.head(t.uuid)
    proxy.fail(lambda method, path: method == "PUT" and path.endswith(".parquet"), status=503)
    with pytest.raises(StorageError) as raised:
        t.append(rows(2))
    assert ".parquet" in str(raised.value) and s3_properties["s3.secret-access-key"] not in str(raised.value)
    assert faulty.log.head(t.uuid) == head
    proxy.heal()
    assert sorted(t.scan().to_arrow().column("id").to_pylist()) == [1]
    assert reader_ids(direct, t.state.location, s3_properties) == [1]


def test_a_server_answering_503_for_a_while_is_retried(faulty: Catalog, proxy: S3Proxy, direct: FileIO,
                                                       s3_properties: dict[str, str]) -> None:
    t = faulty.create_table("db.t", schema=SCHEMA)
    left = {"n": 1}

    def first_put_only(method: str, path: str) -> bool:
        if method == "PUT" and left["n"] > 0:
            left["n"] -= 1
            return True
        return False

    proxy.fail(first_put_only, status=503)
    t.append(rows(1))  # the SDK retries the refused request: the append lands and is published
    assert proxy.failed == 1
    assert reader_ids(direct, t.state.location, s3_properties) == [1]


def test_wrong_credentials_missing_bucket_and_unreachable_endpoint(tmp_path: Path, s3_bucket: str,
                                                                   s3_properties: dict[str, str]) -> None:
    wrong = {**s3_properties, "s3.secret-access-key": "definitely-wrong-secret-4b1"}

    def attempt(props: dict[str, str], warehouse: str, name: str) -> IcelogError:
        with Catalog.open(tmp_path / name, warehouse=warehouse, properties=props) as cat:
            cat.create_namespace("db")
            with pytest.raises(IcelogError) as raised:
                cat.create_table("db.t", schema=SCHEMA).append(rows(1))
            assert not cat.table_exists("db.t") or (name != "missing" and
                                                    cat.load_table("db.t").state.current_snapshot is None)
            return raised.value

    # moto accepts any key pair, so a wrong secret shows as the server refusing: use an unknown bucket for the
    # missing-bucket case and a closed port for the unreachable one; each names the location, never the secret
    missing = attempt(s3_properties, "s3://icelog-no-such-bucket-7f3a/lake", "missing")
    assert isinstance(missing, (StorageError, ValidationError))
    assert "icelog-no-such-bucket-7f3a" in str(missing)
    unreachable = attempt({**wrong, "s3.endpoint": "http://127.0.0.1:9"}, f"s3://{s3_bucket}/lake", "closed")
    assert isinstance(unreachable, (StorageError, ValidationError))
    assert s3_bucket in str(unreachable)
    for error in (missing, unreachable):
        assert "definitely-wrong-secret-4b1" not in str(error)
        assert s3_properties["s3.secret-access-key"] not in str(error)


def test_a_foreign_metadata_file_on_s3_is_never_overwritten(faulty: Catalog, direct: FileIO) -> None:
    t = faulty.create_table("db.t", schema=SCHEMA, properties={"format-version": "2"})
    t.append(rows(1))
    t.catalog.project = False
    t.append(rows(2))  # committed, not published: v3 is free on S3
    planted = json.dumps({"written-by": "another engine"}).encode()
    path = f"{t.state.location}/metadata/v{t.state.version}.metadata.json"
    direct.write_new(path, planted)
    t.catalog.project = True
    with pytest.raises(IcelogError, match="not published by icelog|another writer"):
        t.publish()
    assert direct.read_bytes(path) == planted
