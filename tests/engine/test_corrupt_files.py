"""Reading data files: ORC and Avro data files read like Parquet ones, and corrupt, truncated or missing data
files raise CorruptFileError naming the file."""

from __future__ import annotations

import datetime as dt
import decimal
import os

import fastavro
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyarrow import orc

from engine import Catalog
from engine.errors import CorruptFileError
from engine.model.data_file import DataFile
from engine.operations.snapshot import new_snapshot_id
from engine.operations.snapshot import snapshot_events

SCHEMA = pa.schema([pa.field("id", pa.int64()), pa.field("name", pa.string()), pa.field("day", pa.date32()),
                    pa.field("amount", pa.decimal128(9, 2)), pa.field("ts", pa.timestamp("us", tz="UTC"))])


def sample(n: int = 4) -> pa.Table:
    return pa.table({"id": pa.array(range(n), pa.int64()),
                     "name": pa.array([None if i == 1 else f"n{i}" for i in range(n)], pa.string()),
                     "day": pa.array([dt.date(2024, 1, 1) + dt.timedelta(days=i) for i in range(n)], pa.date32()),
                     "amount": pa.array([decimal.Decimal(f"{i}.25") for i in range(n)], pa.decimal128(9, 2)),
                     "ts": pa.array([dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc) + dt.timedelta(hours=i)
                                     for i in range(n)], pa.timestamp("us", tz="UTC"))})


@pytest.fixture
def catalog(tmp_path):
    cat = Catalog.open(tmp_path / "warehouse")
    cat.create_namespace("db")
    yield cat
    cat.close()


@pytest.fixture
def table(catalog):
    return catalog.create_table("db.t", schema=SCHEMA)


def add_file(table, path: str, file_format: str, record_count: int) -> None:
    f = DataFile(file_path=path, file_format=file_format, spec_id=0, partition=(), record_count=record_count,
                 file_size_in_bytes=os.path.getsize(path))
    sid = new_snapshot_id()
    table.commit_events(lambda base, ctx: snapshot_events(base, ctx, operation="append", snapshot_id=sid,
                                                          added=[f]))


def test_orc_data_file(table, tmp_path):
    path = str(tmp_path / "data.orc")
    orc.write_table(sample(), path)
    add_file(table, path, "ORC", 4)
    got = table.scan().to_arrow()
    assert got.sort_by("id").to_pylist() == sample().to_pylist()
    assert table.scan(where="id >= 2").to_arrow().column("id").to_pylist() == [2, 3]


def _avro_schema(id_name: str) -> dict:
    return {"type": "record", "name": "r1", "fields": [
        {"name": id_name, "type": ["null", "long"], "field-id": 1},
        {"name": "name", "type": ["null", "string"], "field-id": 2},
        {"name": "day", "type": ["null", {"type": "int", "logicalType": "date"}], "field-id": 3},
        {"name": "amount", "type": ["null", {"type": "fixed", "name": "dec", "size": 4, "logicalType": "decimal",
                                             "precision": 9, "scale": 2}], "field-id": 4},
        {"name": "ts", "type": ["null", {"type": "long", "logicalType": "timestamp-micros", "adjust-to-utc": True}],
         "field-id": 5}]}


def test_avro_data_file_matched_by_field_id(table, tmp_path):
    path = str(tmp_path / "data.avro")
    records = [{**r, "old_id": r.pop("id")} for r in sample().to_pylist()]
    with open(path, "wb") as fo:  # the id column written under another name: found by its field id
        fastavro.writer(fo, fastavro.parse_schema(_avro_schema("old_id")), records)
    add_file(table, path, "AVRO", 4)
    got = table.scan().to_arrow()
    assert got.sort_by("id").to_pylist() == sample().to_pylist()
    assert table.scan(where="name is null").to_arrow().column("id").to_pylist() == [1]


def test_formats_mixed_with_parquet(table, tmp_path):
    table.append(sample(2))
    path = str(tmp_path / "more.orc")
    orc.write_table(sample(4).slice(2), path)
    add_file(table, path, "ORC", 2)
    assert sorted(table.scan().to_arrow().column("id").to_pylist()) == [0, 1, 2, 3]


def _parquet(tmp_path, name: str = "good.parquet") -> str:
    path = str(tmp_path / name)
    pq.write_table(sample(), path)
    return path


@pytest.mark.parametrize("damage", ["truncated", "garbage", "empty", "tail_cut"])
def test_corrupt_parquet_names_the_file(table, tmp_path, damage):
    path = _parquet(tmp_path, f"{damage}.parquet")
    with open(path, "rb") as fi:
        data = fi.read()
    broken = {"truncated": data[: len(data) // 2], "garbage": os.urandom(len(data)), "empty": b"",
              "tail_cut": data[:-3]}[damage]
    with open(path, "wb") as fo:
        fo.write(broken)
    add_file(table, path, "PARQUET", 4)
    with pytest.raises(CorruptFileError) as e:
        table.scan().to_arrow()
    assert e.value.path == path and path in str(e.value)


def test_missing_data_file_names_the_file(table, tmp_path):
    path = _parquet(tmp_path)
    add_file(table, path, "PARQUET", 4)
    os.remove(path)
    with pytest.raises(CorruptFileError, match="does not exist") as e:
        table.scan().to_arrow()
    assert e.value.path == path


@pytest.mark.parametrize("fmt,suffix", [("ORC", "orc"), ("AVRO", "avro")])
def test_corrupt_orc_and_avro_name_the_file(table, tmp_path, fmt, suffix):
    path = str(tmp_path / f"bad.{suffix}")
    with open(path, "wb") as fo:
        fo.write(b"not a data file at all" * 10)
    add_file(table, path, fmt, 4)
    with pytest.raises(CorruptFileError) as e:
        table.scan().to_arrow()
    assert e.value.path == path


def test_truncated_avro_names_the_file(table, tmp_path):
    path = str(tmp_path / "cut.avro")
    records = sample(50).to_pylist()
    with open(path, "wb") as fo:
        fastavro.writer(fo, fastavro.parse_schema(_avro_schema("id")), records)
    with open(path, "rb") as fi:
        data = fi.read()
    with open(path, "wb") as fo:
        fo.write(data[: len(data) - 40])
    add_file(table, path, "AVRO", 50)
    with pytest.raises(CorruptFileError) as e:
        table.scan().to_arrow()
    assert e.value.path == path
