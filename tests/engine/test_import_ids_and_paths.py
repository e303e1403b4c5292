"""Imported metadata as other writers produce it: snapshot ids past a signed 64-bit long (the unsigned range some
writers use in metadata.json) round-trip through events and projections; manifest lists, manifests and data
files named by paths relative to the table location are found.

Layer: tests. Sources are icelog tables whose metadata is then rewritten the way those writers spell it.
"""

from __future__ import annotations

import json
from pathlib import Path

import fastavro
import pyarrow as pa

from engine import Catalog


def _source(folder: Path) -> tuple[str, list[int]]:
    with Catalog.open(folder / "src") as cat:
        cat.create_namespace("db")
        t = cat.create_table("db.t", schema=pa.schema([("id", pa.int64())]), properties={"format-version": "2"})
        first = t.append(pa.table({"id": pa.array([1, 2], pa.int64())}))
        second = t.append(pa.table({"id": pa.array([3], pa.int64())}))
        return t.metadata_location, [first.snapshot_id, second.snapshot_id]


def _rewrite_json(path: str, fix) -> str:
    doc = fix(json.loads(Path(path).read_text()))
    out = path.replace(".metadata.json", "0.metadata.json")  # a later version number than the source's
    Path(out).write_text(json.dumps(doc))
    return out


def test_snapshot_ids_past_a_signed_long_round_trip(tmp_path: Path) -> None:
    from pyiceberg.table import StaticTable

    metadata, ids = _source(tmp_path)
    unsigned = {i: i + (1 << 63) for i in ids}

    def fix(o):
        if isinstance(o, dict):
            return {k: (unsigned.get(v, v) if k in ("snapshot-id", "parent-snapshot-id", "current-snapshot-id")
                        else fix(v)) for k, v in o.items()}
        return [fix(x) for x in o] if isinstance(o, list) else o

    big = _rewrite_json(metadata, fix)
    with Catalog.open(tmp_path / "dst") as cat:
        cat.create_namespace("db")
        t = cat.register_table("db.t", big, location=str(tmp_path / "proj"))
        assert [s.snapshot_id for s in t.snapshots()] == [unsigned[i] for i in ids]
        assert sorted(t.scan(snapshot_id=unsigned[ids[0]]).to_arrow().column("id").to_pylist()) == [1, 2]
        t.append(pa.table({"id": pa.array([9], pa.int64())}))
        assert cat.verify("db.t") == []
        published = json.loads(Path(t.metadata_location).read_text())
        assert {s["snapshot-id"] for s in published["snapshots"]} >= set(unsigned.values())  # as the writer had them
        assert sorted(StaticTable.from_metadata(t.metadata_location).scan().to_arrow()
                      .column("id").to_pylist()) == [1, 2, 3, 9]


def test_relative_paths_resolve_against_the_table_location(tmp_path: Path) -> None:
    metadata, _ = _source(tmp_path)
    doc = json.loads(Path(metadata).read_text())
    location = doc["location"].rstrip("/")

    def relative(path: str) -> str:
        return path[len(location) + 1:] if path.startswith(location + "/") else path

    for snap in doc["snapshots"]:
        list_path = snap["manifest-list"]
        with open(list_path, "rb") as stream:
            reader = fastavro.reader(stream)
            schema, records = reader.writer_schema, list(reader)
        for r in records:
            manifest = r["manifest_path"]
            with open(manifest, "rb") as stream:
                m_reader = fastavro.reader(stream)
                m_schema, entries, meta = m_reader.writer_schema, list(m_reader), dict(m_reader.metadata)
            for e in entries:
                e["data_file"]["file_path"] = relative(e["data_file"]["file_path"])
            with open(manifest, "wb") as out:
                fastavro.writer(out, m_schema, entries, metadata={k: v for k, v in meta.items()
                                                                   if not k.startswith("avro.")})
            r["manifest_path"] = relative(manifest)
            r["manifest_length"] = Path(manifest).stat().st_size
        with open(list_path, "wb") as out:
            fastavro.writer(out, schema, records)
        snap["manifest-list"] = relative(list_path)
    Path(metadata).write_text(json.dumps(doc))
    with Catalog.open(tmp_path / "dst") as cat:
        cat.create_namespace("db")
        t = cat.register_table("db.t", metadata, location=str(tmp_path / "proj"))
        files = [e.file.file_path for e in cat.store.live_entries(t.state, t.state.current_snapshot.snapshot_id)]
        assert files and all(f.startswith(location + "/data/") for f in files)
        assert sorted(t.scan().to_arrow().column("id").to_pylist()) == [1, 2, 3]
        assert cat.verify("db.t") == []
