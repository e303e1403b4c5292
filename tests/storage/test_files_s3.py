"""FileIO on S3 objects against a real S3 server on the loopback interface (moto's), the first step of issue 10.

Layer: tests. The three spellings ``s3://``, ``s3a://`` and ``s3n://`` name the same objects; writes are whole
objects; no-clobber writes refuse a taken key; errors are storage errors naming the location and never the secret.
"""

from __future__ import annotations

import uuid

import pyarrow.fs as pafs
import pytest

from storage.errors import FileAlreadyExists, FileError, FileNotFound
from storage.files import FileIO, S3Settings

SECRET = "not-a-real-secret-9f2c"


@pytest.fixture
def bucket(s3_endpoint: str) -> str:
    name = f"icelog-test-{uuid.uuid4().hex[:12]}"
    pafs.S3FileSystem(access_key="test", secret_key=SECRET, endpoint_override=s3_endpoint.split("//")[1],
                      scheme="http", region="us-east-1", allow_bucket_creation=True).create_dir(name)
    return name


@pytest.fixture
def io(s3_endpoint: str) -> FileIO:
    return FileIO(S3Settings(endpoint=s3_endpoint, region="us-east-1", access_key_id="test",
                             secret_access_key=SECRET, path_style=True))


def test_objects_round_trip_under_every_spelling(io: FileIO, bucket: str) -> None:
    io.write_bytes(f"s3://{bucket}/t/metadata/version-hint.text", b"3")
    for scheme in ("s3", "s3a", "s3n"):
        assert io.read_bytes(f"{scheme}://{bucket}/t/metadata/version-hint.text") == b"3"
        assert io.exists(f"{scheme}://{bucket}/t/metadata/version-hint.text")
    assert io.size(f"s3a://{bucket}/t/metadata/version-hint.text") == 1
    io.write_bytes(f"s3a://{bucket}/t/metadata/version-hint.text", b"4")  # replace: a whole new object
    assert io.read_bytes(f"s3://{bucket}/t/metadata/version-hint.text") == b"4"


def test_write_new_refuses_a_taken_key(io: FileIO, bucket: str) -> None:
    path = f"s3://{bucket}/t/metadata/v1.metadata.json"
    io.write_new(path, b"{}")
    with pytest.raises(FileAlreadyExists):
        io.write_new(path.replace("s3://", "s3a://"), b"{other}")
    assert io.read_bytes(path) == b"{}"


def test_listing_and_deleting(io: FileIO, bucket: str) -> None:
    io.makedirs(f"s3://{bucket}/t/data")  # nothing to do on S3, and no error
    for name in ("b.parquet", "a.parquet"):
        io.write_bytes(f"s3://{bucket}/t/data/{name}", b"x")
    assert io.list_dir(f"s3://{bucket}/t/data") == [f"s3://{bucket}/t/data/a.parquet",
                                                      f"s3://{bucket}/t/data/b.parquet"]
    io.delete(f"s3://{bucket}/t/data/a.parquet")
    assert not io.exists(f"s3://{bucket}/t/data/a.parquet")
    with pytest.raises(FileNotFound, match="a.parquet"):
        io.delete(f"s3://{bucket}/t/data/a.parquet")


def test_errors_name_the_location_and_never_the_secret(io: FileIO, bucket: str) -> None:
    with pytest.raises(FileNotFound) as missing:
        io.read_bytes(f"s3://{bucket}/nothing/here")
    assert "nothing/here" in str(missing.value) and SECRET not in str(missing.value)
    with pytest.raises(FileError) as no_bucket:
        io.read_bytes("s3://no-such-bucket-icelog/x")
    assert "no-such-bucket-icelog" in str(no_bucket.value) and SECRET not in str(no_bucket.value)
    with pytest.raises(FileError, match="names no bucket"):
        io.read_bytes("s3:///x")
    assert SECRET not in repr(io.s3)
    unreachable = FileIO(S3Settings(endpoint="http://127.0.0.1:9", region="us-east-1", access_key_id="test",
                                    secret_access_key=SECRET, path_style=True))
    with pytest.raises(FileError) as down:
        unreachable.exists(f"s3://{bucket}/x")
    assert bucket in str(down.value) and SECRET not in str(down.value)


def test_write_once_keeps_the_first_bytes(io: FileIO, bucket: str) -> None:
    path = f"s3://{bucket}/t/metadata/v2.metadata.json"
    io.write_once(path, b"first")
    io.write_once(path, b"first")  # the same bytes again: a publish repeated, nothing happens
    with pytest.raises(FileAlreadyExists):
        io.write_once(path.replace("s3://", "s3n://"), b"second")
    assert io.read_bytes(path) == b"first"


def test_racing_no_clobber_writes_have_one_winner(io: FileIO, bucket: str) -> None:
    """Conditional PUTs (If-None-Match: *): of writers racing for one key exactly one succeeds, whatever the
    timing; a check-then-put would let several through."""
    import threading

    path = f"s3://{bucket}/t/metadata/v9.metadata.json"
    io.write_new(f"s3://{bucket}/warm-up", b"")  # the client exists before the race
    start = threading.Barrier(8)
    outcomes: dict[int, str] = {}

    def write(i: int) -> None:
        start.wait()
        try:
            io.write_new(path, f"writer {i}".encode())
            outcomes[i] = "won"
        except FileAlreadyExists:
            outcomes[i] = "refused"

    threads = [threading.Thread(target=write, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    winners = [i for i, outcome in outcomes.items() if outcome == "won"]
    assert len(outcomes) == 8 and len(winners) == 1
    assert io.read_bytes(path) == f"writer {winners[0]}".encode()
