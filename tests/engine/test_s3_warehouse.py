"""Every table operation on a warehouse on S3 (moto's server on the loopback interface), read back by icelog's
scan at the current and earlier snapshots, with the objects checked on the server.

Layer: tests. The log stays a local SQLite file (``catalog_dir``); tables, data files, manifests, manifest lists,
metadata.json and the version hint live on S3. Readers other than icelog are in tests/integration/test_s3_*.py.
"""

from __future__ import annotations

import datetime as dt
import json
import os
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from engine import Catalog
from engine.errors import ValidationError
from storage.files import FileIO, S3Settings

SCHEMA = pa.schema([("id", pa.int64()), ("cat", pa.string()), ("ts", pa.timestamp("us"))])


def rows(ids: list[int], cat: str = "a") -> pa.Table:
    base = dt.datetime(2024, 1, 1)
    return pa.table({"id": pa.array(ids, pa.int64()), "cat": [cat] * len(ids),
                     "ts": pa.array([base + dt.timedelta(days=i % 3) for i in ids], pa.timestamp("us"))})


def ids(table: pa.Table) -> list[int]:
    return sorted(table.column("id").to_pylist())


@pytest.fixture
def catalog(tmp_path: Path, s3_bucket: str, s3_properties: dict[str, str]):
    with Catalog.open(tmp_path / "catalog", warehouse=f"s3://{s3_bucket}/lake", properties=s3_properties) as cat:
        cat.create_namespace("db")
        yield cat


@pytest.fixture
def io(s3_properties: dict[str, str]) -> FileIO:
    """A FileIO of its own, to look at the objects as another process would."""
    return FileIO(S3Settings.from_properties(s3_properties))


def keys(io: FileIO, prefix: str) -> list[str]:
    return [path for path, _ in io.list_files(prefix)]


def test_the_log_is_local_and_every_table_file_is_on_s3(catalog: Catalog, io: FileIO, s3_bucket: str,
                                                        tmp_path: Path) -> None:
    t = catalog.create_table("db.events", schema=SCHEMA, partition_by=["day(ts)"])
    assert t.state.location == f"s3://{s3_bucket}/lake/db/events"
    t.append(rows([1, 2, 3]))
    assert os.path.isfile(tmp_path / "catalog" / "catalog.db")
    assert not (tmp_path / "catalog" / "db").exists()  # nothing of the table lands beside the log
    found = keys(io, t.state.location)
    assert f"{t.state.location}/metadata/v2.metadata.json" in found
    assert f"{t.state.location}/metadata/version-hint.text" in found
    assert sum(p.endswith(".parquet") for p in found) == 3  # one file per day
    assert sum(p.endswith(".avro") for p in found) == 2  # a manifest and a manifest list
    assert io.read_bytes(f"{t.state.location}/metadata/version-hint.text") == b"2"
    assert ids(t.scan().to_arrow()) == [1, 2, 3]
    assert catalog.verify("db.events") == []


def test_credentials_reach_neither_the_log_nor_the_metadata(catalog: Catalog, io: FileIO,
                                                            s3_properties: dict[str, str]) -> None:
    t = catalog.create_table("db.t", schema=SCHEMA)
    t.append(rows([1]))
    secret = s3_properties["s3.secret-access-key"].encode()
    for path in keys(io, t.state.location):
        assert secret not in io.read_bytes(path), path
    assert secret not in Path(catalog.database).read_bytes()
    assert s3_properties["s3.secret-access-key"] not in repr(catalog.io.s3)


def test_row_level_operations(catalog: Catalog) -> None:
    t = catalog.create_table("db.t", schema=SCHEMA, properties={"format-version": "2"})
    first = t.append(rows([1, 2, 3, 4]))
    t.delete("id = 2")  # copy-on-write
    t.set_properties({"write.delete.mode": "merge-on-read"})
    t.delete("id = 3")  # position deletes, on S3
    deletes = [e.file for e in catalog.store.live_entries(t.state, t.state.current_snapshot.snapshot_id)
               if e.file.content.value == 1]
    assert len(deletes) == 1 and deletes[0].file_path.startswith(t.state.location + "/data/")
    assert ids(t.scan().to_arrow()) == [1, 4]
    t.overwrite(rows([10, 11]), where="id = 1")
    assert ids(t.scan().to_arrow()) == [4, 10, 11]
    t.upsert(rows([4, 12], cat="b"), ["id"])
    out = t.scan().to_arrow()
    assert ids(out) == [4, 10, 11, 12]
    assert dict(zip(out.column("id").to_pylist(), out.column("cat").to_pylist()))[4] == "b"
    t.row_delta().add_rows(rows([20])).commit()
    t.delete_by_key(pa.table({"id": pa.array([10], pa.int64())}), ["id"])
    assert ids(t.scan().to_arrow()) == [4, 11, 12, 20]
    t.dynamic_overwrite(rows([30]))  # unpartitioned: replaces everything
    assert ids(t.scan().to_arrow()) == [30]
    assert ids(t.scan(snapshot_id=first.snapshot_id).to_arrow()) == [1, 2, 3, 4]  # time travel by snapshot
    assert ids(t.as_of(version=2).scan().to_arrow()) == [1, 2, 3, 4]  # and by log version


def test_compaction_and_evolution(catalog: Catalog) -> None:
    t = catalog.create_table("db.t", schema=SCHEMA, properties={"format-version": "2",
                                                               "write.delete.mode": "merge-on-read"})
    for i in range(4):
        t.append(rows([i]))
    t.delete("id = 1")
    before = t.state.current_snapshot.snapshot_id
    t.rewrite_data_files()
    assert ids(t.scan().to_arrow()) == [0, 2, 3]
    assert len([e for e in t.catalog.store.live_entries(t.state, t.state.current_snapshot.snapshot_id)
                if e.file.content.value == 0]) == 1
    t.update_schema().add_column("extra", pa.string()).commit()
    t.update_spec().add_field("ts", "day").commit()
    t.append(pa.table({"id": pa.array([5], pa.int64()), "cat": ["c"], "ts": pa.array([dt.datetime(2024, 2, 1)]),
                       "extra": ["x"]}))
    out = t.scan().to_arrow()
    assert ids(out) == [0, 2, 3, 5]
    assert dict(zip(out.column("id").to_pylist(), out.column("extra").to_pylist())) == {0: None, 2: None,
                                                                                         3: None, 5: "x"}
    assert ids(t.scan(snapshot_id=before).to_arrow()) == [0, 2, 3]
    t.rewrite_manifests()
    assert ids(t.scan().to_arrow()) == [0, 2, 3, 5]


def test_branches_and_tags(catalog: Catalog) -> None:
    t = catalog.create_table("db.t", schema=SCHEMA)
    s1 = t.append(rows([1]))
    t.manage_snapshots().create_tag(s1.snapshot_id, "v1").create_branch(s1.snapshot_id, "dev").commit()
    t.append(rows([2]), branch="dev")
    t.append(rows([3]))
    assert ids(t.scan().to_arrow()) == [1, 3]
    assert ids(t.scan(ref="dev").to_arrow()) == [1, 2]
    assert ids(t.scan(ref="v1").to_arrow()) == [1]


def test_expire_and_orphans_delete_s3_objects(catalog: Catalog, io: FileIO) -> None:
    t = catalog.create_table("db.t", schema=SCHEMA)
    t.append(rows([1]))
    t.overwrite(rows([2]))
    old = [p for p in keys(io, f"{t.state.location}/data")]
    assert len(old) == 2
    gone = t.expire_snapshots(older_than_ms=2**62, retain_last=1)
    assert [p for p in old if p not in keys(io, t.state.location)], gone
    assert ids(t.scan().to_arrow()) == [2]
    stray = f"{t.state.location}/data/stray.parquet"
    io.write_bytes(stray, b"left by a job that failed")
    outside = f"{t.state.location.rsplit('/', 1)[0]}/not-the-table.txt"
    io.write_bytes(outside, b"x")
    removed = t.remove_orphan_files(older_than_ms=2**62)
    assert removed == [stray]
    assert not io.exists(stray) and io.exists(outside)
    assert ids(t.scan().to_arrow()) == [2]
    assert catalog.verify("db.t") == []


def test_staged_files_of_a_failed_write_are_orphans(catalog: Catalog, io: FileIO) -> None:
    from engine.write.data_writer import write_data_files

    t = catalog.create_table("db.t", schema=SCHEMA)
    t.append(rows([1]))
    failed = write_data_files(t.state, rows([2]), stage=t.stage_file, io=catalog.io)
    assert io.exists(failed[0].file_path)
    assert t.remove_orphan_files(older_than_ms=2**62) == [failed[0].file_path]
    assert not io.exists(failed[0].file_path)


def test_append_files_in_place_and_purge_keeps_them(catalog: Catalog, io: FileIO, s3_bucket: str) -> None:
    t = catalog.create_table("db.t", schema=SCHEMA)
    outside = f"s3a://{s3_bucket}/landing/part-0.parquet"
    with catalog.io.open_output(outside) as out:
        pq.write_table(rows([7, 8]), out)
    t.append_files([outside])
    assert ids(t.scan().to_arrow()) == [7, 8]
    with pytest.raises(ValidationError, match="already in table db.t"):  # by any spelling of the key
        t.append_files([outside.replace("s3a://", "s3://")])
    fresh = f"s3a://{s3_bucket}/landing/part-1.parquet"
    with catalog.io.open_output(fresh) as out:
        pq.write_table(rows([10]), out)
    with pytest.raises(ValidationError, match="listed twice"):
        t.append_files([fresh, fresh.replace("s3a://", "s3://")])
    t.append(rows([9]))
    location = t.state.location
    catalog.drop_table("db.t", purge=True)
    assert keys(io, location) == []  # every object the table wrote is gone
    assert io.exists(outside)  # the caller's file stays


def test_new_tables_need_an_empty_prefix(catalog: Catalog, io: FileIO, s3_bucket: str) -> None:
    io.write_bytes(f"s3://{s3_bucket}/lake/db/taken/data/x.parquet", b"someone else's")
    t = catalog.create_table("db.taken", schema=SCHEMA)  # the default prefix is taken: a fresh one beside it
    assert t.state.location.startswith(f"s3://{s3_bucket}/lake/db/taken-")
    with pytest.raises(ValidationError, match="already holds objects"):
        catalog.create_table("db.other", schema=SCHEMA, location=f"s3://{s3_bucket}/lake/db/taken")
    with pytest.raises(ValidationError, match="'..' segment"):
        catalog.create_table("db.other", schema=SCHEMA, location=f"s3://{s3_bucket}/lake/x/../db/taken")
    with pytest.raises(ValidationError, match="is the warehouse"):
        catalog.create_table("db.other", schema=SCHEMA, location=f"s3a://{s3_bucket}/lake/")
    assert not catalog.table_exists("db.other")


def test_rebuild_from_the_log_matches_the_published_objects(catalog: Catalog, io: FileIO, tmp_path: Path) -> None:
    t = catalog.create_table("db.t", schema=SCHEMA, partition_by=["identity(cat)"])
    t.append(rows([1, 2]))
    t.append(rows([3], cat="b"))
    t.delete("id = 1")
    written = t.rebuild(str(tmp_path / "rebuilt"))
    assert written
    for path in written:
        rel = os.path.relpath(path, tmp_path / "rebuilt")
        assert Path(path).read_bytes() == io.read_bytes(f"{t.state.location}/{rel}"), rel
    # and the published metadata is the log's rendering
    assert t.verify_projection() == []


def test_a_view_of_the_past_published_to_s3(catalog: Catalog, io: FileIO, s3_bucket: str) -> None:
    t = catalog.create_table("db.t", schema=SCHEMA)
    t.append(rows([1]))
    version = t.state.version
    t.append(rows([2]))
    view = f"s3://{s3_bucket}/views/t-at-{version}"
    metadata = t.as_of(version=version).publish_view(view)
    assert metadata == f"{view}/metadata/v{version}.metadata.json"
    doc = json.loads(io.read_bytes(metadata))
    assert doc["location"] == view
    with pytest.raises(ValidationError, match="inside the location of table"):
        t.as_of(version=version).publish_view(f"{t.state.location}/view")


def test_register_a_table_on_s3_and_relocated(catalog: Catalog, io: FileIO, s3_bucket: str,
                                                       s3_endpoint: str, tmp_path: Path,
                                                       s3_properties: dict[str, str]) -> None:
    import pyarrow.fs as pafs

    # a table written by another catalog on S3
    with Catalog.open(tmp_path / "other", warehouse=f"s3a://{s3_bucket}/elsewhere",
                      properties=s3_properties) as other:
        other.create_namespace("db")
        src = other.create_table("db.src", schema=SCHEMA, properties={"format-version": "2",
                                                                     "write.delete.mode": "merge-on-read"})
        src.append(rows([1, 2, 3]))
        src.delete("id = 2")
        src_metadata = src.metadata_location
        src_location = src.state.location
    # its data stays where it is; icelog's metadata goes to a prefix of its own (issue 11 registers in place)
    t = catalog.register_table("db.in_place", src_metadata, location=f"s3://{s3_bucket}/lake/db/in_place")
    assert ids(t.scan().to_arrow()) == [1, 3]
    t.append(rows([4]))
    assert ids(t.scan().to_arrow()) == [1, 3, 4]

    # copy the objects to another bucket, then register the copy with its paths relocated (s3a -> s3)
    target_bucket = f"{s3_bucket[:50]}-copy"
    fs = pafs.S3FileSystem(access_key=s3_properties["s3.access-key-id"],
                           secret_key=s3_properties["s3.secret-access-key"],
                           endpoint_override=s3_endpoint.split("//")[1], scheme="http", region="us-east-1",
                           allow_bucket_creation=True)
    fs.create_dir(target_bucket)
    source_key = src_location.split("://", 1)[1]
    for path, _ in io.list_files(src_location):
        key = path[len("s3://"):]
        if "/metadata/" in key and key.rsplit("/", 1)[1] > src_metadata.rsplit("/", 1)[1] and key.endswith(".json"):
            continue
        fs.copy_file(key, key.replace(source_key, f"{target_bucket}/copied", 1))
    new_location = f"s3://{target_bucket}/copied"
    metadata_name = src_metadata.rsplit("/", 1)[1]
    with Catalog.open(tmp_path / "third", warehouse=f"s3://{target_bucket}/lake", properties=s3_properties) as third:
        third.create_namespace("db")
        moved = third.register_table("db.moved", f"{new_location}/metadata/{metadata_name}",
                                     relocate={src_location: new_location},
                                     location=f"s3://{target_bucket}/registered")
        assert ids(moved.scan().to_arrow()) == [1, 3]
        paths = sorted(e.file.file_path for e in
                       third.store.live_entries(moved.state, moved.state.current_snapshot.snapshot_id))
        assert paths[0].startswith(f"s3://{target_bucket}/copied/data/")  # the data file where it was copied
        assert paths[1].startswith(f"s3://{target_bucket}/registered/data/relocated-")  # deletes rewritten
        assert third.verify("db.moved") == []


def test_mixed_locations_register_across_stores(tmp_path: Path, s3_bucket: str,
                                                s3_properties: dict[str, str]) -> None:
    # an S3 table taken over by a catalog whose warehouse is a local folder (S3 configured for its FileIO)
    with Catalog.open(tmp_path / "s3-catalog", warehouse=f"s3://{s3_bucket}/lake", properties=s3_properties) as cat:
        cat.create_namespace("db")
        on_s3 = cat.create_table("db.on_s3", schema=SCHEMA)
        on_s3.append(rows([1, 2]))
        s3_metadata = on_s3.metadata_location
    with Catalog.open(tmp_path / "local", properties=s3_properties) as local:
        local.create_namespace("db")
        taken = local.register_table("db.from_s3", s3_metadata, location=f"s3://{s3_bucket}/taken-over")
        assert ids(taken.scan().to_arrow()) == [1, 2]
        taken.append(rows([3]))
        assert taken.state.location == f"s3://{s3_bucket}/taken-over"
        assert ids(taken.scan().to_arrow()) == [1, 2, 3]
        # and the reverse: a local table registered into the S3 catalog
        mine = local.create_table("db.local_table", schema=SCHEMA)
        mine.append(rows([7]))
        local_metadata = mine.metadata_location
        assert not local_metadata.startswith("s3://")
    with Catalog.open(tmp_path / "s3-catalog", warehouse=f"s3://{s3_bucket}/lake", properties=s3_properties) as cat:
        registered = cat.register_table("db.from_local", local_metadata, location=str(tmp_path / "registered"))
        assert ids(registered.scan().to_arrow()) == [7]
        registered.append(rows([8]))
        assert ids(registered.scan().to_arrow()) == [7, 8]
        assert cat.verify("db.from_local") == []


def test_deletes_on_s3_remove_objects_and_create_none(catalog: Catalog, s3_bucket: str,
                                                      s3_properties: dict[str, str]) -> None:
    """Expiry, orphan removal and purge delete objects and create none: pyarrow's delete PUTs an empty marker for
    the parent "folder" (outside the table's prefix, for a file appended in place), and a purged table's markers
    sent a new table of its name to another folder."""
    from storage.s3 import S3Client

    client = S3Client.create(S3Settings.from_properties(s3_properties))
    assert client is not None

    def objects() -> set[str]:
        return {o["Key"] for o in client._client.list_objects_v2(Bucket=s3_bucket).get("Contents", [])}

    t = catalog.create_table("db.t", schema=rows([1]).schema, partition_by=["cat"])
    outside = f"s3://{s3_bucket}/landing/sub/part-0.parquet"
    with catalog.io.open_output(outside) as out:
        pq.write_table(rows([7]), out)
    t.append_files([outside])
    t.append(rows([1], "x"))
    t.overwrite(rows([2], "y"))
    before = objects()
    t.expire_snapshots(older_than_ms=2**62, retain_last=1, delete_external_files=True)
    t.remove_orphan_files(older_than_ms=2**62)
    assert objects() - before <= {"lake/db/t/metadata/v6.metadata.json"}  # its own publish only
    assert "landing/sub/part-0.parquet" not in objects() and not any(k.endswith("/") for k in objects())
    catalog.drop_table("db.t", purge=True)
    assert objects() == set()
    assert catalog.create_table("db.t", schema=rows([1]).schema).state.location == f"s3://{s3_bucket}/lake/db/t"


def test_a_relocation_keeps_the_escapes_of_the_keys_it_moves(catalog: Catalog, io: FileIO, s3_bucket: str,
                                                              tmp_path: Path, s3_properties: dict[str, str]) -> None:
    """A relocation prefix spelled otherwise than the metadata's paths (``s3a://`` against ``s3://``) still moves
    them, and the rest of each key stays as written: ``cat=a%3Ab`` is another object than ``cat=a:b`` (which a
    decoy here holds), so decoding it would read other rows."""
    with Catalog.open(tmp_path / "src", warehouse=f"s3://{s3_bucket}/src", properties=s3_properties) as src:
        src.create_namespace("db")
        t = src.create_table("db.t", schema=rows([1]).schema, partition_by=["cat"])
        t.append(pa.concat_tables([rows([1], "a:b"), rows([2], "x")]))
        location, md = t.location, t.metadata_location
    for path, _ in io.list_files(location):
        io.write_bytes(path.replace(f"{location}/", f"s3://{s3_bucket}/dst/"), io.read_bytes(path))
    escaped = [p for p, _ in io.list_files(f"s3://{s3_bucket}/dst/data") if "cat=a%3Ab" in p]
    assert escaped
    decoy = escaped[0].replace("cat=a%3Ab", "cat=a:b")
    buf = pa.BufferOutputStream()
    pq.write_table(rows([666], "a:b"), buf)
    io.write_bytes(decoy, buf.getvalue().to_pybytes())
    moved_md = md.replace(f"{location}/", f"s3://{s3_bucket}/dst/")
    r = catalog.register_table("db.r", moved_md,
                               relocate={location.replace("s3://", "s3a://"): f"s3://{s3_bucket}/dst"})
    assert any("cat=a%3Ab" in p for p in r.inspect.files().column("file_path").to_pylist())
    assert ids(r.scan().to_arrow()) == [1, 2]
