"""Manifests and manifest lists: render, read back with fastavro, icelog and PyIceberg, for v1 and v2."""

from __future__ import annotations

import datetime
import io
import json
import math
import struct
import uuid
from decimal import Decimal
from typing import Any

import attrs
import fastavro
import pytest
from pyiceberg.io.pyarrow import PyArrowFileIO
from pyiceberg.manifest import read_manifest_list as pyiceberg_read_manifest_list

from engine.errors import CorruptFileError, ValidationError
from engine.model.data_file import (
    DataFile,
    DataFileContent,
    EntryStatus,
    FieldSummary,
    ManifestContent,
    ManifestEntry,
    ManifestFile,
)
from engine.model.types import (
    BinaryType,
    BooleanType,
    DateType,
    DecimalType,
    DoubleType,
    FixedType,
    FloatType,
    IntegerType,
    LongType,
    StringType,
    TimestampType,
    TimestamptzType,
    TimeType,
    UUIDType,
)
from engine.model.values import to_bytes
from projections.avro_schemas import (
    avro_field_name,
    decimal_required_bytes,
    manifest_entry_schema,
    manifest_file_schema,
    partition_avro_schema,
)
from projections.manifest_reader import read_manifest, read_manifest_list
from projections.manifests import (
    avro_long,
    partition_summaries,
    render_manifest,
    render_manifest_list,
)

SYNC = bytes(range(16))
LIST_SYNC = bytes(range(16, 32))
SCHEMA_JSON = '{"type":"struct","schema-id":3,"fields":[{"id":1,"name":"id","required":true,"type":"long"}]}'
SPEC_JSON = '[{"name":"id","transform":"identity","source-id":1,"field-id":1000}]'
SNAPSHOT_ID = 8_000_000_000_000_000_001
OLD_SNAPSHOT_ID = 7_000_000_000_000_000_007
UID = uuid.UUID("f79c3e09-677c-4bbd-a479-3f349cb785e7")

# Every partition result type, a sanitized name and a repeated fixed type (decimal(10, 2) twice).
PARTITION_FIELDS = (
    (1000, "b", BooleanType()),
    (1001, "i", IntegerType()),
    (1002, "l", LongType()),
    (1003, "f", FloatType()),
    (1004, "d", DoubleType()),
    (1005, "dec", DecimalType(10, 2)),
    (1006, "dec38", DecimalType(38, 10)),
    (1007, "dt", DateType()),
    (1008, "tm", TimeType()),
    (1009, "ts", TimestampType()),
    (1010, "tstz", TimestamptzType()),
    (1011, "s", StringType()),
    (1012, "u", UUIDType()),
    (1013, "fx", FixedType(3)),
    (1014, "bin", BinaryType()),
    (1015, "ts-day", DateType()),
    (1016, "dec_again", DecimalType(10, 2)),
)
VALUES_A = (True, -(2**31), 2**40, 1.5, -2.25, Decimal("-123.45"), Decimal("1234567890123456789012345678.0123456789"),
            -719162, 86_399_999_999, -1, 1_700_000_000_123_456, "héllo ✓", UID, b"\x00\xff\x10", b"\x00\x01",
            19_000, Decimal("0.01"))
# Doubles here are exact in float32: PyIceberg 0.12's Cython decoder narrows Avro doubles to float32
# (fixed upstream in apache/iceberg-python#3808); full precision is checked with fastavro below.
VALUES_B = (False, 2**31 - 1, -(2**63), -0.0, 2.0**100, Decimal("99999999.99"), Decimal("-0.0000000001"),
            2_932_896, 0, 253_402_300_799_999_999, -62_135_596_800_000_000, "", uuid.UUID(int=0), b"abc", b"",
            -1, Decimal("-99999999.99"))
VALUES_NULL = (None,) * len(PARTITION_FIELDS)


def data_file(path: str, partition: tuple[Any, ...], *, content: DataFileContent = DataFileContent.DATA,
              metrics: bool = True, equality_ids: tuple[int, ...] | None = None, spec_id: int = 5) -> DataFile:
    if not metrics:
        return DataFile(file_path=path, spec_id=spec_id, partition=partition, record_count=1, file_size_in_bytes=100,
                        content=content)
    return DataFile(
        file_path=path, file_format="PARQUET", spec_id=spec_id, partition=partition, record_count=42, file_size_in_bytes=4096,
        content=content, column_sizes={1: 100, 2: 200}, value_counts={1: 42, 2: 42}, null_value_counts={1: 0, 2: 3},
        nan_value_counts={2: 1}, lower_bounds={1: b"\x01\x00\x00\x00", 2: b"a"},
        upper_bounds={1: b"\x09\x00\x00\x00", 2: b"z"}, split_offsets=(4, 1024), equality_ids=equality_ids,
        sort_order_id=None if content == DataFileContent.POSITION_DELETES else 0, key_metadata=b"\xca\xfe",
    )


def entries(format_version: int) -> list[ManifestEntry]:
    added = ManifestEntry(status=EntryStatus.ADDED, snapshot_id=None, data_sequence_number=None,
                          file_sequence_number=None, data_file=data_file("s3://b/t/data/a.parquet", VALUES_A))
    existing = ManifestEntry(status=EntryStatus.EXISTING, snapshot_id=OLD_SNAPSHOT_ID, data_sequence_number=3,
                             file_sequence_number=4,
                             data_file=data_file("s3://b/t/data/b.parquet", VALUES_B, metrics=False))
    deleted = ManifestEntry(status=EntryStatus.DELETED, snapshot_id=SNAPSHOT_ID, data_sequence_number=2,
                            file_sequence_number=2, data_file=data_file("s3://b/t/data/c.parquet", VALUES_NULL))
    return [added, existing, deleted]


def expected_entries(format_version: int) -> list[ManifestEntry]:
    """What icelog's reader returns: v1 stores the snapshot id always and no sequence numbers."""
    if format_version == 2:
        return entries(2)
    out = []
    for e in entries(1):
        out.append(ManifestEntry(status=e.status, snapshot_id=e.snapshot_id or SNAPSHOT_ID, data_sequence_number=None,
                                 file_sequence_number=None, data_file=e.data_file))
    return out


def render(format_version: int, es: list[ManifestEntry] | None = None, **kw: Any) -> bytes:
    args: dict[str, Any] = dict(format_version=format_version, content=ManifestContent.DATA, schema_json=SCHEMA_JSON,
                                schema_id=3, spec_id=5, spec_fields_json=SPEC_JSON, partition_fields=PARTITION_FIELDS,
                                sync_marker=SYNC, snapshot_id_for_v1=SNAPSHOT_ID)
    args.update(kw)
    return render_manifest(entries(format_version) if es is None else es, **args)


def manifest_file(path: str, length: int, format_version: int, es: list[ManifestEntry]) -> ManifestFile:
    return ManifestFile(
        manifest_path=path, manifest_length=length, partition_spec_id=5, content=ManifestContent.DATA,
        sequence_number=9 if format_version == 2 else 0, min_sequence_number=2 if format_version == 2 else 0,
        added_snapshot_id=SNAPSHOT_ID, added_files_count=1, existing_files_count=1, deleted_files_count=1,
        added_rows_count=42, existing_rows_count=1, deleted_rows_count=42,
        partitions=partition_summaries(PARTITION_FIELDS, es), key_metadata=b"\x01\x02",
    )


@pytest.fixture(params=[1, 2], ids=["v1", "v2"])
def format_version(request: pytest.FixtureRequest) -> int:
    return request.param


def avro_header(data: bytes) -> tuple[dict[str, Any], dict[str, str]]:
    reader = fastavro.reader(io.BytesIO(data))
    return json.loads(reader.metadata["avro.schema"]), dict(reader.metadata)


def walk_fields(schema: Any, seen: list[dict[str, Any]]) -> None:
    """Collect every record field of an Avro schema."""
    if isinstance(schema, list):
        for branch in schema:
            walk_fields(branch, seen)
    elif isinstance(schema, dict):
        if schema.get("type") == "record":
            for f in schema["fields"]:
                seen.append(f)
                walk_fields(f["type"], seen)
        elif schema.get("type") == "array":
            walk_fields(schema["items"], seen)


def find_record(schema: Any, name: str) -> dict[str, Any] | None:
    if isinstance(schema, list):
        for branch in schema:
            if (found := find_record(branch, name)) is not None:
                return found
    elif isinstance(schema, dict):
        if schema.get("type") == "record":
            if schema["name"] == name:
                return schema
            for f in schema["fields"]:
                if (found := find_record(f["type"], name)) is not None:
                    return found
        elif schema.get("type") == "array":
            return find_record(schema["items"], name)
    return None


# ----------------------------------------------------------------------------------------------------------
# Schemas
# ----------------------------------------------------------------------------------------------------------

def test_partition_schema_uses_java_avro_types() -> None:
    record = partition_avro_schema(PARTITION_FIELDS)
    assert record["name"] == "r102"
    by_id = {f["field-id"]: f for f in record["fields"]}
    assert [f["field-id"] for f in record["fields"]] == [fid for fid, _, _ in PARTITION_FIELDS]
    for f in record["fields"]:
        assert f["type"][0] == "null" and f["default"] is None
    t = {fid: by_id[fid]["type"][1] for fid in by_id}
    assert t[1000] == "boolean" and t[1001] == "int" and t[1002] == "long"
    assert t[1003] == "float" and t[1004] == "double" and t[1011] == "string" and t[1014] == "bytes"
    assert t[1005] == {"type": "fixed", "name": "decimal_10_2", "size": 5, "logicalType": "decimal",
                       "precision": 10, "scale": 2}
    assert t[1006] == {"type": "fixed", "name": "decimal_38_10", "size": 16, "logicalType": "decimal",
                       "precision": 38, "scale": 10}
    assert t[1007] == {"type": "int", "logicalType": "date"}
    assert t[1008] == {"type": "long", "logicalType": "time-micros"}
    assert t[1009] == {"type": "long", "logicalType": "timestamp-micros", "adjust-to-utc": False}
    assert t[1010] == {"type": "long", "logicalType": "timestamp-micros", "adjust-to-utc": True}
    assert t[1012] == {"type": "fixed", "name": "uuid_fixed", "size": 16, "logicalType": "uuid"}
    # fixed(L) is stored as bytes: Iceberg Java <= 1.11 cannot read a spec-encoded fixed (apache/iceberg#17501).
    assert t[1013] == "bytes"
    # A repeated fixed type gets its own name: Avro forbids redefinition, PyIceberg cannot follow references.
    assert t[1016]["name"] == "decimal_10_2_1016" and t[1016]["size"] == 5
    assert by_id[1015]["name"] == "ts_x2Dday" and by_id[1015]["iceberg-field-name"] == "ts-day"
    assert "iceberg-field-name" not in by_id[1000]


@pytest.mark.parametrize(("name", "expected"), [
    ("ok_name", "ok_name"), ("ts-day", "ts_x2Dday"), ("9lives", "_9lives"), ("a.b", "a_x2Eb"), ("é", "é"),
    ("a b", "a_x20b"), ("😀", "_xD83D_xDE00"),
])
def test_avro_field_name_sanitizes_like_java(name: str, expected: str) -> None:
    assert avro_field_name(name) == expected


@pytest.mark.parametrize(("precision", "size"), [(1, 1), (2, 1), (3, 2), (9, 4), (10, 5), (18, 8), (19, 9),
                                                 (38, 16)])
def test_decimal_required_bytes(precision: int, size: int) -> None:
    assert decimal_required_bytes(precision) == size


def test_manifest_schema_names_ids_and_maps(format_version: int) -> None:
    schema, _ = avro_header(render(format_version))
    assert schema == manifest_entry_schema(format_version, partition_avro_schema(PARTITION_FIELDS))
    assert schema["name"] == "manifest_entry"
    top = [(f["name"], f["field-id"]) for f in schema["fields"]]
    if format_version == 1:
        assert top == [("status", 0), ("snapshot_id", 1), ("data_file", 2)]
        assert schema["fields"][1]["type"] == "long"
    else:
        assert top == [("status", 0), ("snapshot_id", 1), ("sequence_number", 3), ("file_sequence_number", 4),
                       ("data_file", 2)]
        assert schema["fields"][1]["type"] == ["null", "long"]
    r2 = schema["fields"][-1]["type"]
    assert r2["name"] == "r2"
    ids = [f["field-id"] for f in r2["fields"]]
    if format_version == 1:
        assert ids == [100, 101, 102, 103, 104, 105, 108, 109, 110, 137, 125, 128, 131, 132, 140]
    else:
        assert ids == [134, 100, 101, 102, 103, 104, 108, 109, 110, 137, 125, 128, 131, 132, 135, 140]
    fields: list[dict[str, Any]] = []
    walk_fields(schema, fields)
    assert all("field-id" in f for f in fields)
    for f in fields:
        if isinstance(f["type"], list):
            assert f["type"][0] == "null" and f["default"] is None
    lower = find_record(schema, "k126_v127")
    assert lower == {"type": "record", "name": "k126_v127", "fields": [
        {"name": "key", "type": "int", "field-id": 126}, {"name": "value", "type": "bytes", "field-id": 127}]}
    column_sizes = next(f for f in r2["fields"] if f["name"] == "column_sizes")
    assert column_sizes["type"][1]["logicalType"] == "map"
    assert column_sizes["type"][1]["items"]["name"] == "k117_v118"
    split = next(f for f in r2["fields"] if f["name"] == "split_offsets")
    assert split["type"][1] == {"type": "array", "items": "long", "element-id": 133}


def test_manifest_list_schema_names_and_ids(format_version: int) -> None:
    schema = manifest_file_schema(format_version)
    assert schema["name"] == "manifest_file"
    ids = [f["field-id"] for f in schema["fields"]]
    if format_version == 1:
        assert ids == [500, 501, 502, 503, 504, 505, 506, 507, 512, 513, 514, 519]
    else:
        assert ids == [500, 501, 502, 517, 515, 516, 503, 504, 505, 506, 512, 513, 514, 507, 519]
    partitions = next(f for f in schema["fields"] if f["name"] == "partitions")
    array = partitions["type"][1]
    assert array["element-id"] == 508 and array["items"]["name"] == "r508"
    assert [(f["name"], f["field-id"]) for f in array["items"]["fields"]] == [
        ("contains_null", 509), ("contains_nan", 518), ("lower_bound", 510), ("upper_bound", 511)]


# ----------------------------------------------------------------------------------------------------------
# Manifests
# ----------------------------------------------------------------------------------------------------------

def test_manifest_key_value_metadata(format_version: int) -> None:
    _, meta = avro_header(render(format_version))
    user = {k: v for k, v in meta.items() if not k.startswith("avro.")}
    expected = {"schema": SCHEMA_JSON, "schema-id": "3", "partition-spec": SPEC_JSON, "partition-spec-id": "5",
                "format-version": str(format_version)}
    if format_version == 2:
        expected["content"] = "data"
    assert user == expected
    assert list(user) == list(expected)
    assert meta["avro.codec"] == "deflate"


def test_manifest_round_trips_through_icelog_reader(format_version: int) -> None:
    meta, got = read_manifest(render(format_version), "m.avro")
    assert meta["format-version"] == str(format_version)
    want = [ManifestEntry(status=e.status, snapshot_id=e.snapshot_id, data_sequence_number=e.data_sequence_number,
                          file_sequence_number=e.file_sequence_number,
                          data_file=e.data_file)
            for e in expected_entries(format_version)]
    assert got == want


def test_manifest_rows_as_fastavro_reads_them(format_version: int) -> None:
    rows = list(fastavro.reader(io.BytesIO(render(format_version))))
    added, existing, deleted = rows
    if format_version == 2:
        assert (added["snapshot_id"], added["sequence_number"], added["file_sequence_number"]) == (None, None, None)
        assert (existing["snapshot_id"], existing["sequence_number"], existing["file_sequence_number"]) == (
            OLD_SNAPSHOT_ID, 3, 4)
        assert added["data_file"]["content"] == 0
        assert added["data_file"]["equality_ids"] is None
    else:
        assert added["snapshot_id"] == SNAPSHOT_ID and "sequence_number" not in added
        assert added["data_file"]["block_size_in_bytes"] == 64 * 1024 * 1024
    assert [r["status"] for r in rows] == [1, 0, 2]
    f = added["data_file"]
    assert f["column_sizes"] == [{"key": 1, "value": 100}, {"key": 2, "value": 200}]
    assert f["lower_bounds"] == [{"key": 1, "value": b"\x01\x00\x00\x00"}, {"key": 2, "value": b"a"}]
    assert existing["data_file"]["column_sizes"] is None
    assert set(deleted["data_file"]["partition"].values()) == {None}
    assert f["partition"]["ts_x2Dday"].isoformat() == "2022-01-08"


def test_pyiceberg_reads_manifest_and_list(format_version: int, tmp_path: Any) -> None:
    es = entries(format_version)
    manifest_path = str(tmp_path / "m0.avro")
    data = render(format_version, es)
    (tmp_path / "m0.avro").write_bytes(data)
    mf = manifest_file(manifest_path, len(data), format_version, es)
    list_path = tmp_path / "snap-1.avro"
    list_path.write_bytes(render_manifest_list([mf], format_version=format_version, snapshot_id=SNAPSHOT_ID,
                                               parent_snapshot_id=OLD_SNAPSHOT_ID, sequence_number=9,
                                               sync_marker=LIST_SYNC))
    fio = PyArrowFileIO()
    (pm,) = list(pyiceberg_read_manifest_list(fio.new_input(str(list_path))))
    assert pm.manifest_path == manifest_path
    assert pm.manifest_length == len(data)
    assert pm.partition_spec_id == 5
    assert int(pm.content) == 0
    assert (pm.sequence_number, pm.min_sequence_number) == ((9, 2) if format_version == 2 else (0, 0))
    assert pm.added_snapshot_id == SNAPSHOT_ID
    assert (pm.added_files_count, pm.existing_files_count, pm.deleted_files_count) == (1, 1, 1)
    assert (pm.added_rows_count, pm.existing_rows_count, pm.deleted_rows_count) == (42, 1, 42)
    assert pm.key_metadata == b"\x01\x02"
    assert [(s.contains_null, s.contains_nan, s.lower_bound, s.upper_bound) for s in pm.partitions] == [
        (s.contains_null, s.contains_nan, s.lower_bound, s.upper_bound) for s in mf.partitions]

    got = pm.fetch_manifest_entry(fio, discard_deleted=False)
    assert len(got) == 3
    manifest_seq = 9 if format_version == 2 else 0
    for pe, e in zip(got, es):
        assert int(pe.status) == int(e.status)
        if format_version == 2:
            # ADDED entries inherit the manifest's snapshot id and sequence number; the others keep theirs.
            assert pe.snapshot_id == (e.snapshot_id if e.snapshot_id is not None else SNAPSHOT_ID)
            assert pe.sequence_number == (e.data_sequence_number if e.data_sequence_number is not None
                                          else manifest_seq)
            assert pe.file_sequence_number == (e.file_sequence_number if e.file_sequence_number is not None
                                               else manifest_seq)
        else:
            assert pe.snapshot_id == (e.snapshot_id or SNAPSHOT_ID)
            assert (pe.sequence_number, pe.file_sequence_number) == (0, 0)
        f, pf = e.data_file, pe.data_file
        assert int(pf.content) == int(f.content)
        assert pf.file_path == f.file_path
        assert str(pf.file_format.value) == f.file_format
        assert pf.spec_id == 5
        assert pf.record_count == f.record_count
        assert pf.file_size_in_bytes == f.file_size_in_bytes
        assert_same_partition(tuple(pf.partition), f.partition)
        for name in ("column_sizes", "value_counts", "null_value_counts", "nan_value_counts", "lower_bounds",
                     "upper_bounds"):
            want = getattr(f, name)
            assert (dict(getattr(pf, name)) if getattr(pf, name) is not None else None) == (
                None if want is None else dict(want)), name
        assert pf.key_metadata == f.key_metadata
        assert (None if pf.split_offsets is None else tuple(pf.split_offsets)) == f.split_offsets
        assert pf.sort_order_id == f.sort_order_id
        if format_version == 2:
            assert (None if pf.equality_ids is None else tuple(pf.equality_ids)) == f.equality_ids


def assert_same_partition(got: tuple[Any, ...], want: tuple[Any, ...]) -> None:
    assert len(got) == len(want)
    for (_, name, _), g, w in zip(PARTITION_FIELDS, got, want):
        if isinstance(w, float):
            assert g == w and math.copysign(1.0, g) == math.copysign(1.0, w), name
        else:
            assert g == w and type(g) is type(w), (name, g, w)


def test_pyiceberg_reads_v2_delete_manifest(tmp_path: Any) -> None:
    fields = ((1000, "id_bucket", IntegerType()),)
    deletes = [
        ManifestEntry(status=EntryStatus.ADDED, snapshot_id=None, data_sequence_number=None, file_sequence_number=None,
                      data_file=data_file("/t/d/eq.parquet", (7,), content=DataFileContent.EQUALITY_DELETES,
                                          equality_ids=(1, 2), spec_id=1)),
        ManifestEntry(status=EntryStatus.ADDED, snapshot_id=None, data_sequence_number=None, file_sequence_number=None,
                      data_file=data_file("/t/d/pos.parquet", (None,), content=DataFileContent.POSITION_DELETES,
                                          spec_id=1)),
    ]
    data = render_manifest(deletes, format_version=2, content=ManifestContent.DELETES, schema_json=SCHEMA_JSON,
                           schema_id=3, spec_id=1, spec_fields_json="[]", partition_fields=fields, sync_marker=SYNC)
    path = tmp_path / "d.avro"
    path.write_bytes(data)
    assert avro_header(data)[1]["content"] == "deletes"
    mf = ManifestFile(manifest_path=str(path), manifest_length=len(data), partition_spec_id=1,
                      content=ManifestContent.DELETES, sequence_number=12, min_sequence_number=12,
                      added_snapshot_id=SNAPSHOT_ID, added_files_count=2, existing_files_count=0,
                      deleted_files_count=0, added_rows_count=84, existing_rows_count=0, deleted_rows_count=0,
                      partitions=partition_summaries(fields, deletes))
    list_path = tmp_path / "l.avro"
    list_path.write_bytes(render_manifest_list([mf], format_version=2, snapshot_id=SNAPSHOT_ID,
                                               parent_snapshot_id=None, sequence_number=12, sync_marker=LIST_SYNC))
    fio = PyArrowFileIO()
    (pm,) = list(pyiceberg_read_manifest_list(fio.new_input(str(list_path))))
    assert int(pm.content) == 1
    got = pm.fetch_manifest_entry(fio)
    assert [int(e.data_file.content) for e in got] == [2, 1]
    assert [e.sequence_number for e in got] == [12, 12]
    assert tuple(got[0].data_file.equality_ids) == (1, 2)
    assert got[1].data_file.equality_ids is None and got[1].data_file.sort_order_id is None
    assert [tuple(e.data_file.partition) for e in got] == [(7,), (None,)]
    assert read_manifest(data, "d.avro")[1] == [
        ManifestEntry(status=e.status, snapshot_id=None, data_sequence_number=None, file_sequence_number=None,
                      data_file=e.data_file) for e in deletes]


def test_unpartitioned_manifest_reads_in_pyiceberg(format_version: int, tmp_path: Any) -> None:
    es = [ManifestEntry(status=EntryStatus.ADDED, snapshot_id=None, data_sequence_number=None,
                        file_sequence_number=None, data_file=data_file("/t/d/u.parquet", ()))]
    data = render(format_version, es, partition_fields=())
    assert find_record(avro_header(data)[0], "r102") == {"type": "record", "name": "r102", "fields": []}
    path = tmp_path / "u.avro"
    path.write_bytes(data)
    mf = ManifestFile(manifest_path=str(path), manifest_length=len(data), partition_spec_id=0,
                      sequence_number=1, min_sequence_number=1, added_snapshot_id=SNAPSHOT_ID, added_files_count=1,
                      existing_files_count=0, deleted_files_count=0, added_rows_count=42, existing_rows_count=0,
                      deleted_rows_count=0, partitions=partition_summaries((), es))
    assert mf.partitions == ()
    list_path = tmp_path / "l.avro"
    list_path.write_bytes(render_manifest_list([mf], format_version=format_version, snapshot_id=SNAPSHOT_ID,
                                               parent_snapshot_id=None, sequence_number=1, sync_marker=LIST_SYNC))
    fio = PyArrowFileIO()
    (pm,) = list(pyiceberg_read_manifest_list(fio.new_input(str(list_path))))
    assert pm.partitions == []
    (entry,) = pm.fetch_manifest_entry(fio)
    assert entry.data_file.file_path == "/t/d/u.parquet" and len(entry.data_file.partition) == 0


def test_rendering_is_deterministic(format_version: int) -> None:
    first = render(format_version)
    assert render(format_version) == first
    assert render(format_version, sync_marker=bytes(16)) != first
    assert SYNC in first
    assert first[:4] == b"Obj\x01"
    es = entries(format_version)
    mf = manifest_file("/m.avro", 10, format_version, es)
    kw = dict(format_version=format_version, snapshot_id=1, parent_snapshot_id=None, sequence_number=1,
              sync_marker=LIST_SYNC)
    assert render_manifest_list([mf], **kw) == render_manifest_list([mf], **kw)


def test_double_partition_values_keep_full_precision() -> None:
    fields = ((1000, "d", DoubleType()),)
    es = [ManifestEntry(status=EntryStatus.ADDED, snapshot_id=None, data_sequence_number=None,
                        file_sequence_number=None, data_file=data_file(f"/{v}", (v,), metrics=False))
          for v in (0.1, 1e300, 5e-324, -math.inf)]
    data = render(2, es, partition_fields=fields)
    assert [r["data_file"]["partition"]["d"] for r in fastavro.reader(io.BytesIO(data))] == [0.1, 1e300, 5e-324,
                                                                                              -math.inf]
    assert [e.data_file.partition for e in read_manifest(data, "m.avro")[1]] == [(0.1,), (1e300,), (5e-324,),
                                                                                (-math.inf,)]


def test_null_codec_round_trips(format_version: int) -> None:
    data = render(format_version, codec="null")
    assert avro_header(data)[1]["avro.codec"] == "null"
    assert read_manifest(data, "m.avro")[1] == read_manifest(render(format_version), "m.avro")[1]


def test_v1_entries_with_snapshot_ids_need_no_default() -> None:
    _, got = read_manifest(render(1, entries(1)[1:], snapshot_id_for_v1=None), "m.avro")
    assert [e.snapshot_id for e in got] == [OLD_SNAPSHOT_ID, SNAPSHOT_ID]


# ----------------------------------------------------------------------------------------------------------
# Manifest lists
# ----------------------------------------------------------------------------------------------------------

def test_manifest_list_round_trip_and_metadata(format_version: int) -> None:
    es = entries(format_version)
    first = manifest_file("s3://b/t/metadata/m0.avro", 1234, format_version, es)
    second = ManifestFile(manifest_path="s3://b/t/metadata/m1.avro", manifest_length=99, partition_spec_id=0,
                          sequence_number=first.sequence_number, min_sequence_number=first.min_sequence_number,
                          added_snapshot_id=OLD_SNAPSHOT_ID, added_files_count=0, existing_files_count=3,
                          deleted_files_count=0, added_rows_count=0, existing_rows_count=30, deleted_rows_count=0,
                          partitions=None)
    data = render_manifest_list([first, second], format_version=format_version, snapshot_id=SNAPSHOT_ID,
                                parent_snapshot_id=None, sequence_number=9, sync_marker=LIST_SYNC)
    schema, meta = avro_header(data)
    assert schema == manifest_file_schema(format_version)
    user = {k: v for k, v in meta.items() if not k.startswith("avro.")}
    expected = {"snapshot-id": str(SNAPSHOT_ID), "parent-snapshot-id": "null"}
    if format_version == 2:
        expected["sequence-number"] = "9"
    expected["format-version"] = str(format_version)
    assert user == expected and list(user) == list(expected)
    assert read_manifest_list(data, "l.avro") == [first, second]
    with_parent = render_manifest_list([], format_version=format_version, snapshot_id=2, parent_snapshot_id=1,
                                       sequence_number=2, sync_marker=LIST_SYNC)
    assert avro_header(with_parent)[1]["parent-snapshot-id"] == "1"
    assert read_manifest_list(with_parent, "l.avro") == []


@pytest.mark.parametrize("count", [0, 1, 60, 400])
def test_an_uncompressed_manifest_list_is_byte_for_byte_what_fastavro_writes(format_version: int, count: int) -> None:
    """The null-codec list is assembled from records encoded once (and kept): it must equal fastavro.writer's file
    exactly, blocks split where fastavro splits them (400 manifests cross its 16,000-byte block size)."""
    from projections.manifests import _manifest_file_record

    manifests = [ManifestFile(manifest_path=f"/wh/t/metadata/{uuid.UUID(int=i)}-m0.avro", manifest_length=4000 + i,
                              partition_spec_id=i % 2, sequence_number=i + 1, min_sequence_number=i + 1,
                              added_snapshot_id=SNAPSHOT_ID - i, added_files_count=1, existing_files_count=i,
                              deleted_files_count=0, added_rows_count=10, existing_rows_count=10 * i,
                              deleted_rows_count=0, partitions=(
                                  FieldSummary(contains_null=i % 3 == 0, contains_nan=None if i % 2 else False,
                                               lower_bound=struct.pack("<i", i), upper_bound=struct.pack("<i", 2 * i)),),
                              first_row_id=100 * i if format_version >= 3 else None)
                 for i in range(count)]
    for attempt in range(2):  # the second time from the kept encodings
        data = render_manifest_list(manifests, format_version=format_version, snapshot_id=SNAPSHOT_ID,
                                    parent_snapshot_id=SNAPSHOT_ID - 1, sequence_number=count + 1,
                                    sync_marker=LIST_SYNC, codec="null")
        buf = io.BytesIO()
        metadata = avro_header(data)[1]
        fastavro.writer(buf, manifest_file_schema(format_version), [_manifest_file_record(m, format_version)
                                                                    for m in manifests],
                        codec="null", metadata={k: v for k, v in metadata.items() if not k.startswith("avro.")},
                        sync_marker=LIST_SYNC)
        assert data == buf.getvalue()
        read = read_manifest_list(data, "l.avro")
        assert read == manifests if format_version > 1 else [m.manifest_path for m in read] == [
            m.manifest_path for m in manifests]  # (v1 lists carry no sequence numbers)


def _plain(value: Any) -> Any:
    """A record as a caller of fastavro writes it: optional arrays as lists, not in its tuple notation."""
    if isinstance(value, tuple) and len(value) == 2 and value[0] == "array":
        return [_plain(v) for v in value[1]]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


@pytest.mark.parametrize("codec", ["null", "deflate"])
@pytest.mark.parametrize("format_version", [1, 2, 3])
@pytest.mark.parametrize("repeat", [1, 150])
def test_a_manifest_is_byte_for_byte_what_fastavro_writes(format_version: int, codec: str, repeat: int) -> None:
    """Manifests are encoded with a schema parsed once and written into icelog's own container: the bytes must equal
    fastavro.writer's for plain records (header, every partition type, metrics maps, blocks split and compressed
    where fastavro does: 150 copies of the entries cross its 16,000-byte block size)."""
    from projections.avro_schemas import manifest_entry_schema
    from projections.manifests import _entry_record, _partition_writer

    es = entries(min(format_version, 2)) * repeat
    data = render(format_version, es, codec=codec)
    partition_schema = partition_avro_schema(PARTITION_FIELDS)
    write_partition = _partition_writer(PARTITION_FIELDS, [f["name"] for f in partition_schema["fields"]])
    records = [_plain(_entry_record(e, format_version, ManifestContent.DATA, 5, write_partition(e.data_file.partition),
                                    SNAPSHOT_ID)) for e in es]
    assert all(not isinstance(v, tuple) for r in records for v in r["data_file"].values())
    buf = io.BytesIO()
    metadata = {k: v for k, v in avro_header(data)[1].items() if not k.startswith("avro.")}
    fastavro.writer(buf, manifest_entry_schema(format_version, partition_schema), records, codec=codec,
                    metadata=metadata, sync_marker=SYNC)
    assert data == buf.getvalue()
    assert read_manifest(data, "m.avro")[1][:3] == (expected_entries(2) if format_version > 1 else expected_entries(1))
    assert avro_header(data)[1]["avro.codec"] == codec


def _fastavro_manifest(data: bytes, format_version: int, es: list[ManifestEntry], partition_fields: Any,
                       codec: str = "deflate") -> bytes:
    """What fastavro.writer writes for the entries ``data`` holds, with ``data``'s header metadata."""
    from projections.avro_schemas import manifest_entry_schema
    from projections.manifests import _entry_record, _partition_writer

    partition_schema = partition_avro_schema(partition_fields)
    write_partition = _partition_writer(partition_fields, [f["name"] for f in partition_schema["fields"]])
    records = [_plain(_entry_record(e, format_version, ManifestContent.DATA, 5, write_partition(e.data_file.partition),
                                    SNAPSHOT_ID)) for e in es]
    buf = io.BytesIO()
    metadata = {k: v for k, v in avro_header(data)[1].items() if not k.startswith("avro.")}
    fastavro.writer(buf, manifest_entry_schema(format_version, partition_schema), records, codec=codec,
                    metadata=metadata, sync_marker=SYNC)
    return buf.getvalue()


def test_files_rendered_again_under_new_entries_are_byte_for_byte_what_fastavro_writes() -> None:
    """A merge writes the files of the manifests it packs again, with new statuses, snapshot ids and sequence numbers
    (None, small, past 2**63): each file's encoding is kept from its first render, and every manifest it goes into
    must still be fastavro's bytes, under another format version or partition type too."""
    import projections.manifests as manifests

    first = entries(2)
    render(2, first)
    files = [e.data_file for e in first]
    encoded: list[str] = []
    original = manifests._data_file_record

    def counting(f, format_version, partition):
        encoded.append(f.file_path)
        return original(f, format_version, partition)
    again = [ManifestEntry(status=status, snapshot_id=snapshot_id, data_sequence_number=seq, file_sequence_number=fseq,
                           data_file=f)
             for status, snapshot_id, seq, fseq in [
                 (EntryStatus.EXISTING, 1, 0, 0), (EntryStatus.EXISTING, SNAPSHOT_ID, 2**62, 2**62 + 1),
                 (EntryStatus.DELETED, -5, 7, 300), (EntryStatus.ADDED, None, None, None),
                 (EntryStatus.ADDED, 2**64 - 1, None, 12)]
             for f in files]
    manifests._data_file_record = counting
    try:
        for i, format_version in enumerate((2, 3, 2)):
            data = render(format_version, again)
            made = sorted(encoded)
            encoded.clear()
            # the first v2 render finds every file's encoding kept from entries(2)'s; a new schema makes it once a
            # file, not once an entry
            assert made == ([] if i == 0 else sorted(f.file_path for f in files))
            assert data == _fastavro_manifest(data, format_version, again, PARTITION_FIELDS)
            # read back whole: the entry's own fields as written (ids past 2**63 - 1 as the long with the same bits)
            assert read_manifest(data, "m.avro")[1] == [
                attrs.evolve(e, snapshot_id=avro_long(e.snapshot_id)) for e in again]
            encoded.clear()
    finally:
        manifests._data_file_record = original
    # the same files under a partition type whose float field is now a double: their encoding is made again
    promoted = tuple((field_id, name, DoubleType() if isinstance(t, FloatType) else t)
                     for field_id, name, t in PARTITION_FIELDS)
    data = render(2, again, partition_fields=promoted)
    assert data == _fastavro_manifest(data, 2, again, promoted)
    v1 = [attrs.evolve(e, data_sequence_number=None, file_sequence_number=None) for e in again]
    data = render(1, v1)
    assert data == _fastavro_manifest(data, 1, v1, PARTITION_FIELDS)


@pytest.mark.parametrize("bad", [True, 1.5, "7"])
def test_an_entry_id_that_is_no_integer_is_refused_by_name(bad: Any) -> None:
    """An entry's own fields are encoded by icelog, not fastavro: whatever is not an integer is refused as a
    ValidationError naming the file, as fastavro refused it."""
    e = attrs.evolve(entries(2)[1], data_sequence_number=bad)
    with pytest.raises(ValidationError, match="data sequence number of the entry for s3://b/t/data/b.parquet"):
        render(2, [e])


def test_an_entry_id_that_is_an_integer_of_another_type_is_written_as_the_int() -> None:
    import numpy as np

    plain = entries(2)
    typed = [attrs.evolve(e, snapshot_id=None if e.snapshot_id is None else np.int64(e.snapshot_id)) for e in plain]
    assert render(2, typed) == render(2, plain)


def test_v1_manifest_list_reads_with_zero_sequence_numbers() -> None:
    m = ManifestFile(manifest_path="/m.avro", manifest_length=1, partition_spec_id=0, sequence_number=5,
                     min_sequence_number=5, added_snapshot_id=1, added_files_count=1, existing_files_count=0,
                     deleted_files_count=0, added_rows_count=1, existing_rows_count=0, deleted_rows_count=0)
    data = render_manifest_list([m], format_version=1, snapshot_id=1, parent_snapshot_id=None, sequence_number=None,
                                sync_marker=LIST_SYNC)
    (got,) = read_manifest_list(data, "l.avro")
    assert (got.sequence_number, got.min_sequence_number, got.content) == (0, 0, ManifestContent.DATA)
    assert "sequence_number" not in next(fastavro.reader(io.BytesIO(data)))


# ----------------------------------------------------------------------------------------------------------
# Partition summaries
# ----------------------------------------------------------------------------------------------------------

def test_partition_summaries_bounds_nulls_and_nans() -> None:
    fields = ((1000, "x", DoubleType()), (1001, "s", StringType()), (1002, "n", IntegerType()),
              (1003, "u", UUIDType()))
    parts = [(0.0, "b", None, uuid.UUID(int=2**127)), (float("nan"), "a", None, uuid.UUID(int=1)),
             (-0.0, None, None, None), (3.5, "c", None, uuid.UUID(int=5))]
    es = [ManifestEntry(status=EntryStatus.ADDED, snapshot_id=None, data_sequence_number=None,
                        file_sequence_number=None, data_file=data_file(f"/f{i}", p, metrics=False))
          for i, p in enumerate(parts)]
    x, s, n, u = partition_summaries(fields, es)
    assert x == FieldSummary(contains_null=False, contains_nan=True, lower_bound=struct.pack("<d", -0.0),
                             upper_bound=struct.pack("<d", 3.5))
    assert s == FieldSummary(contains_null=True, contains_nan=False, lower_bound=b"a", upper_bound=b"c")
    assert n == FieldSummary(contains_null=True, contains_nan=False, lower_bound=None, upper_bound=None)
    assert u.lower_bound == to_bytes(UUIDType(), uuid.UUID(int=1))
    assert u.upper_bound == uuid.UUID(int=2**127).bytes
    assert partition_summaries(fields, []) == tuple(
        FieldSummary(contains_null=False, contains_nan=False) for _ in fields)


def test_partition_summaries_cover_every_type() -> None:
    es = entries(2)
    summaries = partition_summaries(PARTITION_FIELDS, es)
    for (_, name, t), summary, a, b in zip(PARTITION_FIELDS, summaries, VALUES_A, VALUES_B):
        lo, hi = (b, a) if _less(b, a) else (a, b)
        assert summary.contains_null is True, name
        assert summary.lower_bound == to_bytes(t, lo), name
        assert summary.upper_bound == to_bytes(t, hi), name


def _less(x: Any, y: Any) -> bool:
    if isinstance(x, float) and x == y:
        return math.copysign(1.0, x) < math.copysign(1.0, y)
    return x < y


# ----------------------------------------------------------------------------------------------------------
# Errors
# ----------------------------------------------------------------------------------------------------------

def test_v2_existing_entry_needs_explicit_ids() -> None:
    bad = ManifestEntry(status=EntryStatus.EXISTING, snapshot_id=None, data_sequence_number=None,
                        file_sequence_number=None, data_file=data_file("/x", VALUES_A))
    with pytest.raises(ValidationError, match="EXISTING entry for /x"):
        render(2, [bad])


def test_v1_entry_needs_a_snapshot_id() -> None:
    with pytest.raises(ValidationError, match="no snapshot id"):
        render(1, entries(1), snapshot_id_for_v1=None)


def test_v1_has_no_delete_manifests() -> None:
    with pytest.raises(ValidationError, match="format version 1 has no delete manifests"):
        render(1, [], content=ManifestContent.DELETES)


def test_file_content_must_match_manifest_content() -> None:
    delete = ManifestEntry(status=EntryStatus.ADDED, snapshot_id=None, data_sequence_number=None,
                           file_sequence_number=None,
                           data_file=data_file("/d", VALUES_A, content=DataFileContent.POSITION_DELETES))
    with pytest.raises(ValidationError, match="POSITION_DELETES file /d"):
        render(2, [delete])


@pytest.mark.parametrize(("index", "value", "message"), [
    (0, 1, "field 'b'"), (1, 2**31, "field 'i'"), (1, True, "field 'i'"), (5, Decimal("1.234"), "field 'dec'"),
    (5, Decimal("123456789.00"), "field 'dec'"), (11, b"x", "field 's'"), (12, "not-a-uuid", "field 'u'"),
    (13, b"ab", "field 'fx'"), (3, "1.0", "field 'f'"),
])
def test_bad_partition_values_name_the_field(index: int, value: Any, message: str) -> None:
    values = list(VALUES_A)
    values[index] = value
    e = ManifestEntry(status=EntryStatus.ADDED, snapshot_id=None, data_sequence_number=None,
                      file_sequence_number=None, data_file=data_file("/x", tuple(values)))
    with pytest.raises(ValidationError, match=message):
        render(2, [e])


def test_files_must_belong_to_the_manifest_spec() -> None:
    e = ManifestEntry(status=EntryStatus.ADDED, snapshot_id=None, data_sequence_number=None,
                      file_sequence_number=None, data_file=data_file("/x", VALUES_A, spec_id=0))
    with pytest.raises(ValidationError, match="file /x has partition spec 0, the manifest is for spec 5"):
        render(2, [e])


def test_partition_tuple_must_match_the_spec() -> None:
    e = ManifestEntry(status=EntryStatus.ADDED, snapshot_id=None, data_sequence_number=None,
                      file_sequence_number=None, data_file=data_file("/x", (1,)))
    with pytest.raises(ValidationError, match="has 1 values"):
        render(2, [e])


def test_sync_marker_codec_and_version_are_checked() -> None:
    with pytest.raises(ValidationError, match="sync marker"):
        render(2, sync_marker=b"short")
    with pytest.raises(ValidationError, match="codec"):
        render(2, codec="snappy")
    with pytest.raises(ValidationError, match="format version"):
        render(4)
    with pytest.raises(ValidationError, match="sequence number"):
        render_manifest_list([], format_version=2, snapshot_id=1, parent_snapshot_id=None, sequence_number=None,
                             sync_marker=LIST_SYNC)


@pytest.mark.parametrize("damage", ["empty", "garbage", "truncated", "not_a_manifest"])
def test_corrupt_files_raise_corrupt_file_error(damage: str) -> None:
    good = render(2)
    data = {
        "empty": b"",
        "garbage": b"this is not an avro file at all",
        "truncated": good[: len(good) - 40],
        "not_a_manifest": _plain_avro(),
    }[damage]
    with pytest.raises(CorruptFileError) as info:
        read_manifest(data, "s3://b/t/metadata/bad.avro")
    assert info.value.path == "s3://b/t/metadata/bad.avro"
    assert "Cannot read manifest s3://b/t/metadata/bad.avro" in str(info.value)
    with pytest.raises(CorruptFileError) as info:
        read_manifest_list(data, "s3://b/t/metadata/snap.avro")
    assert info.value.path == "s3://b/t/metadata/snap.avro"


def _plain_avro() -> bytes:
    buf = io.BytesIO()
    fastavro.writer(buf, {"type": "record", "name": "x", "fields": [{"name": "a", "type": "int"}]}, [{"a": 1}])
    return buf.getvalue()


# ----------------------------------------------------------------------------------------------------------
# Iceberg Java 1.10 (Spark runtime) reads what we render
# ----------------------------------------------------------------------------------------------------------

def _drop(values: tuple[Any, ...], names: set[str]) -> tuple[Any, ...]:
    return tuple(v for (_, name, _), v in zip(PARTITION_FIELDS, values) if name not in names)


# Spark has no time type, and Iceberg 1.10's Spark metadata tables fail on uuid partition values even
# in manifests Java writes itself; the Java core test below covers both.
_NOT_IN_SPARK = {"tm", "u"}
SPARK_FIELDS = tuple(f for f in PARTITION_FIELDS if f[1] not in _NOT_IN_SPARK)
JAVA_ROWS = (
    VALUES_A,
    (False, 7, -5, 0.5, 2.5, Decimal("1.00"), Decimal("-1.5000000000"), 0, 1, 0, -86_400_000_000, "x",
     uuid.UUID(int=1), b"zzz", b"\xff", 1, Decimal("3.33")),
    VALUES_NULL,
)


def _table_metadata(format_version: int, location: str, manifest_list: str,
                    fields: tuple[Any, ...]) -> dict[str, Any]:
    columns = [{"id": i, "name": name, "required": False, "type": str(t)}
               for i, (_, name, t) in enumerate(fields, start=1)]
    spec = [{"name": name, "transform": "identity", "source-id": i, "field-id": fid}
            for i, (fid, name, _) in enumerate(fields, start=1)]
    snapshot: dict[str, Any] = {"snapshot-id": SNAPSHOT_ID, "timestamp-ms": 1_700_000_000_000,
                                "summary": {"operation": "append"}, "manifest-list": manifest_list, "schema-id": 0}
    metadata: dict[str, Any] = {"format-version": format_version, "table-uuid": str(UID), "location": location}
    if format_version == 2:
        metadata["last-sequence-number"] = 9
        snapshot = {"sequence-number": 9, **snapshot}
    metadata.update({
        "last-updated-ms": 1_700_000_000_000, "last-column-id": len(columns), "current-schema-id": 0,
        "schemas": [{"type": "struct", "schema-id": 0, "fields": columns}], "default-spec-id": 5,
        "partition-specs": [{"spec-id": 5, "fields": spec}], "last-partition-id": fields[-1][0],
        "default-sort-order-id": 0, "sort-orders": [{"order-id": 0, "fields": []}], "properties": {},
        "current-snapshot-id": SNAPSHOT_ID, "refs": {"main": {"snapshot-id": SNAPSHOT_ID, "type": "branch"}},
        "snapshots": [snapshot], "snapshot-log": [{"timestamp-ms": 1_700_000_000_000, "snapshot-id": SNAPSHOT_ID}],
        "metadata-log": [],
    })
    return metadata


def _write_table(table_dir: Any, format_version: int, fields: tuple[Any, ...],
                 rows: tuple[tuple[Any, ...], ...]) -> tuple[list[ManifestEntry], str, int]:
    """A Hadoop-layout table whose one snapshot is one manifest of ADDED, EXISTING and DELETED entries."""
    metadata_dir = table_dir / "metadata"
    metadata_dir.mkdir(parents=True)
    statuses = (EntryStatus.ADDED, EntryStatus.EXISTING, EntryStatus.DELETED)
    es = []
    for i, (status, values) in enumerate(zip(statuses, rows)):
        inherited = status == EntryStatus.ADDED and format_version == 2
        es.append(ManifestEntry(status=status, snapshot_id=None if inherited else OLD_SNAPSHOT_ID + i,
                                data_sequence_number=None if inherited else 3 + i,
                                file_sequence_number=None if inherited else 4 + i,
                                data_file=data_file(f"{table_dir}/data/f{i}.parquet", values)))
    manifest_path = f"{metadata_dir}/m0.avro"
    data = render(format_version, es, partition_fields=fields, snapshot_id_for_v1=SNAPSHOT_ID)
    (metadata_dir / "m0.avro").write_bytes(data)
    mf = ManifestFile(manifest_path=manifest_path, manifest_length=len(data), partition_spec_id=5,
                      sequence_number=9 if format_version == 2 else 0,
                      min_sequence_number=3 if format_version == 2 else 0, added_snapshot_id=SNAPSHOT_ID,
                      added_files_count=1, existing_files_count=1, deleted_files_count=1, added_rows_count=42,
                      existing_rows_count=42, deleted_rows_count=42, partitions=partition_summaries(fields, es))
    list_name = f"snap-{SNAPSHOT_ID}.avro"
    (metadata_dir / list_name).write_bytes(render_manifest_list(
        [mf], format_version=format_version, snapshot_id=SNAPSHOT_ID, parent_snapshot_id=None, sequence_number=9,
        sync_marker=LIST_SYNC))
    metadata = _table_metadata(format_version, str(table_dir), f"{metadata_dir}/{list_name}", fields)
    (metadata_dir / "v1.metadata.json").write_text(json.dumps(metadata))
    (metadata_dir / "version-hint.text").write_text("1")
    return es, manifest_path, len(data)


def _from_spark(t: Any, v: Any) -> Any:
    if v is None:
        return None
    if isinstance(t, DateType):
        return (v - datetime.date(1970, 1, 1)).days
    if isinstance(t, (TimestampType, TimestamptzType)):
        aware = v if v.tzinfo is not None else v.replace(tzinfo=datetime.timezone.utc)
        epoch = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)
        return (aware - epoch) // datetime.timedelta(microseconds=1)
    if isinstance(t, (FixedType, BinaryType)):
        return bytes(v)
    return v


def test_spark_reads_manifests_and_list(format_version: int, spark: Any, tmp_warehouse: Any,
                                        warehouse_catalog: str) -> None:
    rows = tuple(_drop(r, _NOT_IN_SPARK) for r in JAVA_ROWS)
    es, manifest_path, length = _write_table(tmp_warehouse / "db" / "t", format_version, SPARK_FIELDS, rows)
    table = f"{warehouse_catalog}.db.t"

    (m,) = spark.sql(
        f"SELECT path, length, partition_spec_id, added_snapshot_id, added_data_files_count, "
        f"existing_data_files_count, deleted_data_files_count, partition_summaries FROM {table}.manifests").collect()
    assert (m.path, m.length, m.partition_spec_id, m.added_snapshot_id) == (manifest_path, length, 5, SNAPSHOT_ID)
    assert (m.added_data_files_count, m.existing_data_files_count, m.deleted_data_files_count) == (1, 1, 1)
    assert [s.contains_null for s in m.partition_summaries] == [True] * len(SPARK_FIELDS)

    got = spark.sql(
        "SELECT status, snapshot_id, sequence_number, file_sequence_number, data_file.content AS content, "
        "data_file.file_path AS file_path, data_file.file_format AS file_format, data_file.spec_id AS spec_id, "
        "data_file.partition AS partition, data_file.record_count AS record_count, "
        "data_file.file_size_in_bytes AS size, data_file.column_sizes AS column_sizes, "
        "data_file.value_counts AS value_counts, data_file.null_value_counts AS null_value_counts, "
        "data_file.nan_value_counts AS nan_value_counts, data_file.lower_bounds AS lower_bounds, "
        "data_file.upper_bounds AS upper_bounds, data_file.key_metadata AS key_metadata, "
        "data_file.split_offsets AS split_offsets, data_file.sort_order_id AS sort_order_id "
        f"FROM {table}.entries ORDER BY data_file.file_path").collect()
    assert len(got) == 3
    for row, e in zip(got, es):
        f = e.data_file
        assert row.status == int(e.status)
        assert row.snapshot_id == (e.snapshot_id if e.snapshot_id is not None else SNAPSHOT_ID)
        if format_version == 2:
            assert row.sequence_number == (e.data_sequence_number if e.data_sequence_number is not None else 9)
            assert row.file_sequence_number == (e.file_sequence_number if e.file_sequence_number is not None else 9)
        else:
            assert row.sequence_number == 0
        assert (row.content, row.file_path, row.file_format, row.spec_id) == (0, f.file_path, "PARQUET", 5)
        assert (row.record_count, row.size) == (f.record_count, f.file_size_in_bytes)
        assert tuple(_from_spark(t, v) for (_, _, t), v in zip(SPARK_FIELDS, row.partition)) == f.partition
        assert row.column_sizes == dict(f.column_sizes)
        assert row.value_counts == dict(f.value_counts)
        assert row.null_value_counts == dict(f.null_value_counts)
        assert row.nan_value_counts == dict(f.nan_value_counts)
        assert {k: bytes(v) for k, v in row.lower_bounds.items()} == dict(f.lower_bounds)
        assert {k: bytes(v) for k, v in row.upper_bounds.items()} == dict(f.upper_bounds)
        assert bytes(row.key_metadata) == f.key_metadata
        assert tuple(row.split_offsets) == f.split_offsets
        assert row.sort_order_id == f.sort_order_id

    live = spark.sql(f"SELECT file_path FROM {table}.files ORDER BY file_path").collect()
    assert [r.file_path for r in live] == [es[0].data_file.file_path, es[1].data_file.file_path]


def test_iceberg_java_core_reads_every_partition_type(format_version: int, spark: Any, tmp_path: Any) -> None:
    table_dir = tmp_path / "t"
    es, manifest_path, length = _write_table(table_dir, format_version, PARTITION_FIELDS, JAVA_ROWS)
    jvm = spark.sparkContext._jvm
    table = jvm.org.apache.iceberg.hadoop.HadoopTables(spark._jsc.hadoopConfiguration()).load(str(table_dir))
    manifests = table.currentSnapshot().allManifests(table.io())
    assert manifests.size() == 1
    jm = manifests.get(0)
    assert (jm.path(), jm.length(), jm.partitionSpecId(), jm.snapshotId()) == (manifest_path, length, 5, SNAPSHOT_ID)
    assert (jm.sequenceNumber(), jm.minSequenceNumber()) == ((9, 3) if format_version == 2 else (0, 0))
    assert (jm.addedFilesCount(), jm.existingFilesCount(), jm.deletedFilesCount()) == (1, 1, 1)
    summaries = jm.partitions()
    want_summaries = partition_summaries(PARTITION_FIELDS, es)
    for i, want in enumerate(want_summaries):
        s = summaries.get(i)
        assert (s.containsNull(), s.containsNaN()) == (want.contains_null, want.contains_nan)
        assert bytes(jvm.org.apache.iceberg.util.ByteBuffers.toByteArray(s.lowerBound())) == want.lower_bound
        assert bytes(jvm.org.apache.iceberg.util.ByteBuffers.toByteArray(s.upperBound())) == want.upper_bound

    reader = jvm.org.apache.iceberg.ManifestFiles.read(jm, table.io(), table.specs())
    live = []
    it = reader.iterator()
    while it.hasNext():
        live.append(it.next())
    reader.close()
    assert [f.location() for f in live] == [es[0].data_file.file_path, es[1].data_file.file_path]
    object_class = jvm.java.lang.Object().getClass()
    for jf, e in zip(live, es):
        if format_version == 2:
            assert jf.dataSequenceNumber() == (9 if e.data_sequence_number is None else e.data_sequence_number)
        else:
            assert jf.dataSequenceNumber() == 0
        got = []
        for i, (_, _, t) in enumerate(PARTITION_FIELDS):
            v = jf.partition().get(i, object_class)
            if v is None:
                pass
            elif isinstance(t, DecimalType):
                v = v if isinstance(v, Decimal) else Decimal(v.toString())
            elif isinstance(t, UUIDType):
                v = uuid.UUID(v.toString())
            elif isinstance(t, (FixedType, BinaryType)):
                v = bytes(jvm.org.apache.iceberg.util.ByteBuffers.toByteArray(v))
            elif isinstance(t, StringType):
                v = str(v) if isinstance(v, str) else v.toString()
            got.append(v)
        assert tuple(got) == e.data_file.partition
