"""Entries of v1 manifests read as sequence number 0, whatever their status, as Java's InheritableMetadataFactory
inherits them (a v1 manifest's sequence number is 0): the entries metadata table shows 0 (Spark does), and a table
upgraded to v2 publishes a commit that deletes a file whose entry is EXISTING in a v1 manifest (the projector
refused it: the commit landed in the log and readers never saw it).

Layer: tests (engine's public API on real SQLite, Parquet and Avro files).
"""

from __future__ import annotations

import pyarrow as pa

from engine import Catalog

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), ("category", pa.string())])


def rows(ids: list[int], category: str) -> pa.Table:
    return pa.table({"id": pa.array(ids, pa.int64()), "category": [category] * len(ids)}, schema=SCHEMA)


def _v1_table(tmp_path):
    cat = Catalog.open(tmp_path / "wh")
    cat.create_namespace("db")
    t = cat.create_table("db.t", schema=SCHEMA, partition_by=["category"], format_version=1)
    t.append(rows([1, 2], "a"))
    t.append(rows([3], "b"))
    return cat, t


def test_every_entry_of_a_v1_table_has_sequence_number_zero(tmp_path):
    cat, t = _v1_table(tmp_path)
    snap = t.overwrite(rows([4], "a"), "category = 'a'")
    got = t.inspect.entries(snapshot_id=snap.snapshot_id).to_pylist()
    assert any(e["status"] == 2 for e in got)  # the replaced file, DELETED
    assert [(e["sequence_number"], e["file_sequence_number"]) for e in got] == [(0, 0)] * len(got)
    cat.close()


def test_an_upgraded_table_deletes_a_file_of_a_v1_manifest_and_publishes(tmp_path):
    cat, t = _v1_table(tmp_path)
    t.rewrite_manifests()  # EXISTING entries in a v1 manifest
    t.upgrade_format_version(2)
    existing = [e for e in t.inspect.entries().to_pylist() if e["status"] == 0]
    assert [(e["sequence_number"], e["file_sequence_number"]) for e in existing] == [(0, 0), (0, 0)]
    snap = t.delete("category = 'b'")
    assert t.metadata_location.endswith(f"v{t.state.version}.metadata.json")  # published
    assert sorted(t.scan().to_arrow().column("id").to_pylist()) == [1, 2]
    deleted = [e for e in t.inspect.entries(snapshot_id=snap.snapshot_id).to_pylist() if e["status"] == 2]
    assert [(e["sequence_number"], e["file_sequence_number"]) for e in deleted] == [(0, 0)]
    assert cat.verify("db.t") == []
    from pyiceberg.table import StaticTable

    assert sorted(StaticTable.from_metadata(t.metadata_location).scan().to_arrow().column("id").to_pylist()) == [1, 2]
    cat.close()
