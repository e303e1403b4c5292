"""Manifests and manifest lists in every shape the spec allows another writer: each codec (null, deflate, snappy,
zstd), nullable unions around records, lists and list elements, other record names, fields in another order,
optional fields left out, extra fields. icelog's reader finds every field by its field id and reads the same
entries from each.

Layer: tests. The files are icelog's own, re-encoded with fastavro in each shape.
"""

from __future__ import annotations

import copy
import io
from pathlib import Path
from typing import Any, Callable

import fastavro
import pyarrow as pa
import pytest

from engine import Catalog
from projections.manifest_reader import read_manifest, read_manifest_list

Shape = Callable[[dict[str, Any], list[dict[str, Any]]], tuple[dict[str, Any], list[dict[str, Any]]]]


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    folder = tmp_path_factory.mktemp("shapes")
    with Catalog.open(folder / "wh") as cat:
        cat.create_namespace("db")
        t = cat.create_table("db.t", schema=pa.schema([("id", pa.int64()), ("cat", pa.string())]),
                             partition_by=["identity(cat)"], properties={"format-version": "2"})
        t.append(pa.table({"id": pa.array([1, 2, 3], pa.int64()), "cat": ["a", "b", "a"]}))
        snap = t.state.current_snapshot
        list_path = next(str(p) for p in (Path(t.state.location) / "metadata").glob(f"snap-{snap.snapshot_id}-*"))
        manifests = read_manifest_list(Path(list_path).read_bytes(), list_path)
        return {"list": Path(list_path).read_bytes(), "manifest": Path(manifests[0].manifest_path).read_bytes(),
                "manifests": manifests,
                "entries": read_manifest(Path(manifests[0].manifest_path).read_bytes(), "m")[1]}


def _decode(data: bytes) -> tuple[dict[str, Any], list[dict[str, Any]], dict[str, str]]:
    reader = fastavro.reader(io.BytesIO(data))
    meta = {k: v for k, v in reader.metadata.items() if not k.startswith("avro.")}
    return copy.deepcopy(reader.writer_schema), list(reader), meta


def _encode(schema: dict[str, Any], records: list[dict[str, Any]], meta: dict[str, str], codec: str) -> bytes:
    out = io.BytesIO()
    fastavro.writer(out, fastavro.parse_schema(schema), records, codec=codec, metadata=meta)
    return out.getvalue()


def _walk(schema: Any, fn: Callable[[Any], Any]) -> Any:
    """Apply ``fn`` to every record schema (children first)."""
    if isinstance(schema, list):
        return [_walk(s, fn) for s in schema]
    if isinstance(schema, dict):
        if schema.get("type") == "record":
            for f in schema["fields"]:
                f["type"] = _walk(f["type"], fn)
            return fn(schema)
        if schema.get("type") == "array":
            schema["items"] = _walk(schema["items"], fn)
    return schema


def nullable_everywhere(schema, records):
    def wrap(t: Any) -> Any:
        if isinstance(t, list) or t == "null":
            return t
        return ["null", t]

    def record(r: dict[str, Any]) -> dict[str, Any]:
        for f in r["fields"]:
            f["type"] = wrap(f["type"])
            f["default"] = None
            if isinstance(f["type"], list):
                for branch in f["type"]:
                    if isinstance(branch, dict) and branch.get("type") == "array":
                        branch["items"] = wrap(branch["items"])
        return r

    return _walk(schema, record), records


def renamed_records(schema, records):
    counter = iter(range(1000))

    def rename(r: dict[str, Any]) -> dict[str, Any]:
        r["name"] = f"some_writer_record_{next(counter)}"
        return r

    return _walk(schema, rename), records


def reordered_fields(schema, records):
    def reverse(r: dict[str, Any]) -> dict[str, Any]:
        r["fields"] = list(reversed(r["fields"]))
        return r

    return _walk(schema, reverse), records


OPTIONAL = {"column_sizes", "value_counts", "null_value_counts", "nan_value_counts", "lower_bounds", "upper_bounds",
            "key_metadata", "split_offsets", "sort_order_id", "equality_ids", "file_sequence_number"}


def optional_fields_left_out(schema, records):
    def drop(r: dict[str, Any]) -> dict[str, Any]:
        r["fields"] = [f for f in r["fields"] if f["name"] not in OPTIONAL]
        return r

    def strip(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: strip(v) for k, v in value.items() if k not in OPTIONAL}
        return value

    return _walk(schema, drop), [strip(r) for r in records]


def extra_fields(schema, records):
    def add(r: dict[str, Any]) -> dict[str, Any]:
        r["fields"] = r["fields"] + [{"name": "writer_specific", "type": ["null", "string"], "default": None}]
        return r

    def fill(value: Any) -> Any:
        if isinstance(value, dict):
            return {**{k: fill(v) for k, v in value.items()}, "writer_specific": "x"}
        if isinstance(value, list):
            return [fill(v) for v in value]
        return value

    return _walk(schema, add), [fill(r) for r in records]


def as_written(schema, records):
    return schema, records


SHAPES = [as_written, nullable_everywhere, renamed_records, reordered_fields, optional_fields_left_out,
          extra_fields]


def _comparable(entries, *, optional: bool) -> list[tuple]:
    out = []
    for e in entries:
        f = e.data_file
        row = (int(e.status), f.file_path, f.file_format, f.partition, f.record_count, f.file_size_in_bytes)
        if optional:
            row += (f.value_counts, f.null_value_counts, f.lower_bounds, f.upper_bounds, f.split_offsets)
        out.append(row)
    return out


@pytest.mark.parametrize("codec", ["null", "deflate", "snappy", "zstandard"])
@pytest.mark.parametrize("shape", SHAPES, ids=[s.__name__ for s in SHAPES])
def test_every_shape_and_codec_reads_the_same(files: dict[str, Any], shape: Shape, codec: str) -> None:
    schema, records, meta = _decode(files["manifest"])
    shaped = _encode(*shape(schema, records), meta, codec)
    _, entries = read_manifest(shaped, "shaped manifest")
    keeps_optional = shape is not optional_fields_left_out
    assert _comparable(entries, optional=keeps_optional) == _comparable(files["entries"], optional=keeps_optional)

    schema, records, meta = _decode(files["list"])
    shaped = _encode(*shape(schema, records), meta, codec)
    manifests = read_manifest_list(shaped, "shaped manifest list")
    assert [(m.manifest_path, m.added_snapshot_id, m.added_files_count, m.partitions) for m in manifests] == \
        [(m.manifest_path, m.added_snapshot_id, m.added_files_count, m.partitions) for m in files["manifests"]]
