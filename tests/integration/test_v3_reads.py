"""Format v3 tables written by Spark (Iceberg 1.10.2) registered in place: deletion vectors applied at every snapshot,
row lineage kept, and what icelog publishes read back by Spark with the writer's own ``_row_id`` and
``_last_updated_sequence_number``.

Layer: tests (Spark, real Puffin files).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import fastavro
import pytest

from engine import Catalog
from engine.errors import CorruptFileError
from tests.integration.corpus import V3_STATEMENTS, canon_rows

LINEAGE = ["_row_id", "_last_updated_sequence_number"]


def _spark_v3_table(spark: Any, catalog: str, warehouse: Path, name: str) -> tuple[Path, dict[int, list[tuple]]]:
    """Spark writes the corpus' v3 history; returns the table folder and, per snapshot, Spark's rows with lineage."""
    full = f"{catalog}.db.{name}"
    for sql in V3_STATEMENTS:
        spark.sql(sql.format(t=full, c=catalog, n=f"db.{name}")).collect()
    snapshots = [r["snapshot_id"] for r in spark.sql(f"SELECT snapshot_id FROM {full}.snapshots").collect()]
    expected = {sid: canon_rows([r.asDict() for r in spark.sql(
        f"SELECT id, v, _row_id, _last_updated_sequence_number FROM {full} VERSION AS OF {sid}").collect()])
        for sid in snapshots}
    return warehouse / "db" / name, expected


def _without_lineage(rows: list[tuple]) -> list[tuple]:
    return sorted((tuple(kv for kv in r if kv[0] not in LINEAGE) for r in rows), key=repr)


def _spark_reads(spark: Any, metadata: str, snapshot_id: int) -> list[tuple]:
    df = spark.read.format("iceberg").option("snapshot-id", snapshot_id).load(metadata)
    return canon_rows([r.asDict() for r in df.selectExpr("id", "v", *LINEAGE).collect()])


def _deletion_vector_entries(folder: Path) -> list[dict[str, Any]]:
    out = []
    for manifest in (folder / "metadata").glob("*-m*.avro"):
        with manifest.open("rb") as f:
            out += [r["data_file"] for r in fastavro.reader(f) if r["data_file"]["file_format"] == "PUFFIN"]
    return out


def test_spark_v3_table_registers_in_place_with_vectors_and_lineage(spark: Any, warehouse_catalog: str,
                                                                    tmp_warehouse: Path, tmp_path: Path) -> None:
    folder, expected = _spark_v3_table(spark, warehouse_catalog, tmp_warehouse, "lineage")
    vectors = _deletion_vector_entries(folder)
    shared = {v["file_path"] for v in vectors if sum(w["file_path"] == v["file_path"] for w in vectors) > 1}
    assert shared, "the history must hold a Puffin file with the vectors of several data files"
    original = json.loads(max((folder / "metadata").glob("v*.metadata.json"),
                              key=lambda p: int(p.name[1:].split(".")[0])).read_text())

    with Catalog.open(tmp_path / "cat") as cat:
        cat.create_namespace("db")
        t = cat.register_table("db.lineage", str(folder / "metadata" / f"v{len(original['metadata-log']) + 1}"
                                                                          f".metadata.json"))
        assert t.state.format_version == 3 and t.state.next_row_id == original["next-row-id"]
        for sid, rows in expected.items():
            got = canon_rows(t.scan(snapshot_id=sid).to_arrow().to_pylist())
            assert got == _without_lineage(rows), sid
        assert cat.verify("db.lineage") == []
        published_path = t.metadata_location
        published = json.loads(Path(published_path.removeprefix("file://")).read_text())

    # icelog's own metadata keeps the writer's lineage, field by field
    assert published["format-version"] == 3 and published["next-row-id"] == original["next-row-id"]
    assert [(s["snapshot-id"], s.get("first-row-id"), s.get("added-rows")) for s in published["snapshots"]] == \
        [(s["snapshot-id"], s.get("first-row-id"), s.get("added-rows")) for s in original["snapshots"]]
    # and Spark reading what icelog published sees the rows, row ids and sequence numbers Spark wrote
    for sid, rows in expected.items():
        assert _spark_reads(spark, published_path, sid) == rows, sid


def test_commits_on_an_imported_v3_table_assign_row_ids(spark: Any, warehouse_catalog: str, tmp_warehouse: Path,
                                                        tmp_path: Path) -> None:
    import pyarrow as pa

    folder, _ = _spark_v3_table(spark, warehouse_catalog, tmp_warehouse, "appended")
    with Catalog.open(tmp_path / "cat") as cat:
        cat.create_namespace("db")
        t = cat.register_table("db.appended", str(folder))
        next_row_id = t.state.next_row_id
        t.append(pa.table({"id": pa.array([500, 501], pa.int64()), "v": ["a", "b"]}))
        snap = t.current_snapshot()
        assert (snap.first_row_id, snap.added_rows) == (next_row_id, 2)
        assert t.state.next_row_id == next_row_id + 2
        published = t.metadata_location
    rows = {dict(r)["id"]: dict(r) for r in _spark_reads(spark, published, snap.snapshot_id)}
    assert {rows[500]["_row_id"], rows[501]["_row_id"]} == {next_row_id, next_row_id + 1}
    assert rows[500]["_last_updated_sequence_number"] == snap.sequence_number


def test_merge_on_read_deletes_on_an_imported_v3_table_write_merged_vectors(
        spark: Any, warehouse_catalog: str, tmp_warehouse: Path, tmp_path: Path) -> None:
    folder, expected = _spark_v3_table(spark, warehouse_catalog, tmp_warehouse, "merged")
    with Catalog.open(tmp_path / "cat") as cat:
        cat.create_namespace("db")
        t = cat.register_table("db.merged", str(folder))
        head = t.current_snapshot().snapshot_id
        rows = expected[head]
        t.delete("id IN (1, 100)")  # Spark made the table merge-on-read: deletion vectors, never position files
        snap = t.current_snapshot()
        vectors = [e.file for e in t.catalog.store.live_entries(t.state, snap.snapshot_id)
                   if e.file.content != 0]
        assert vectors and all(v.is_deletion_vector for v in vectors)
        assert len({v.referenced_data_file for v in vectors}) == len(vectors)
        kept = [r for r in rows if dict(r)["id"] not in (1, 100)]
        assert canon_rows(t.scan().to_arrow().to_pylist()) == _without_lineage(kept)
        assert cat.verify("db.merged") == []
        published = t.metadata_location
    # Spark reads icelog's vectors, and every surviving row keeps the id Spark gave it
    assert _spark_reads(spark, published, snap.snapshot_id) == kept


def test_a_damaged_deletion_vector_raises_corrupt_file_error(spark: Any, warehouse_catalog: str,
                                                             tmp_warehouse: Path, tmp_path: Path) -> None:
    folder, expected = _spark_v3_table(spark, warehouse_catalog, tmp_warehouse, "damaged")
    with Catalog.open(tmp_path / "cat") as cat:
        cat.create_namespace("db")
        t = cat.register_table("db.damaged", str(folder))
        with_vectors = [s.snapshot_id for s in t.snapshots() if s.operation in ("delete", "overwrite")]
        puffin = next(p for p in (folder / "data").glob("*.puffin"))
        backup = tmp_path / "backup.puffin"
        shutil.copy(puffin, backup)
        data = bytearray(puffin.read_bytes())
        data[20] ^= 0xFF  # inside the first blob's bitmap: its checksum no longer matches
        puffin.write_bytes(bytes(data))
        failures = []
        for sid in with_vectors:
            try:
                t.scan(snapshot_id=sid).to_arrow()
            except CorruptFileError as e:
                failures.append(str(e))
        assert failures and all(puffin.name in f for f in failures), failures
        shutil.copy(backup, puffin)
        for sid in with_vectors:
            assert canon_rows(t.scan(snapshot_id=sid).to_arrow().to_pylist()) == _without_lineage(expected[sid])


@pytest.mark.parametrize("damage", ["length", "magic", "checksum", "cardinality", "truncated"])
def test_vector_checks(damage: str, tmp_path: Path) -> None:
    import struct

    from engine.formats.deletion_vectors import encode_vector, read_vector
    from engine.model.data_file import DataFile, DataFileContent

    blob = bytearray(encode_vector([1, 5, 9]))
    count = 3
    if damage == "length":
        blob[0:4] = struct.pack(">I", 99)
    elif damage == "magic":
        blob[4] ^= 1
    elif damage == "checksum":
        blob[-1] ^= 1
    elif damage == "cardinality":
        count = 4
    puffin = tmp_path / "x.puffin"
    puffin.write_bytes(b"PFA1" + bytes(blob) + b"PFA1")
    size = len(blob) + (10 if damage == "truncated" else 0)
    dv = DataFile(file_path=str(puffin), file_format="PUFFIN", content=DataFileContent.POSITION_DELETES,
                  record_count=count, file_size_in_bytes=puffin.stat().st_size, referenced_data_file="/d.parquet",
                  content_offset=4, content_size_in_bytes=size)
    with pytest.raises(CorruptFileError, match="x.puffin"):
        read_vector(dv)


def test_vectors_round_trip(tmp_path: Path) -> None:
    from engine.formats.deletion_vectors import encode_vector, read_vector
    from engine.model.data_file import DataFile, DataFileContent

    positions = [0, 3, 70_000, 2**32 + 5]  # several containers, and a position past 32 bits
    blob = encode_vector(positions)
    puffin = tmp_path / "y.puffin"
    puffin.write_bytes(b"PFA1" + blob)
    dv = DataFile(file_path=str(puffin), file_format="PUFFIN", content=DataFileContent.POSITION_DELETES,
                  record_count=4, file_size_in_bytes=len(blob) + 4, referenced_data_file="/d.parquet",
                  content_offset=4, content_size_in_bytes=len(blob))
    assert read_vector(dv).to_pylist() == positions
    assert dv.key == f"{puffin}#4"
