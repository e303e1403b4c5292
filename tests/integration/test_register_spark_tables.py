"""Tables written by Spark (Iceberg 1.10 runtime, Hadoop catalog) and by PyIceberg are registered in icelog, and
icelog's scan of every snapshot equals the writer's read of the original at that snapshot; Spark then reads
icelog's own projection of the table with the same rows.

Layer: tests (Spark, PyIceberg, engine).
"""

from __future__ import annotations

import shutil
from datetime import datetime, timezone
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa

from engine import Catalog
from engine.errors import ValidationError
from engine.model.data_file import DataFileContent


def _value(v: Any) -> tuple:
    if isinstance(v, datetime) and v.tzinfo is not None:  # Spark collects timestamptz as naive UTC (session TZ)
        v = v.astimezone(timezone.utc).replace(tzinfo=None)
    return (v is None, str(v))


def _key(row: dict[str, Any]) -> tuple:
    return tuple((k, _value(v)) for k, v in sorted(row.items()))


def canon(rows: list[dict[str, Any]]) -> list[tuple]:
    return sorted(_key(r) for r in rows)


def spark_rows(spark, table: str, snapshot_id: int | None = None) -> list[tuple]:
    reader = spark.read.format("iceberg")
    if snapshot_id is not None:
        reader = reader.option("snapshot-id", str(snapshot_id))
    df = reader.load(table)
    return canon([r.asDict(recursive=True) for r in df.collect()])


def spark_snapshots(spark, table: str) -> list[int]:
    return [r["snapshot_id"] for r in spark.sql(f"SELECT snapshot_id FROM {table}.snapshots "
                                                f"ORDER BY committed_at").collect()]


def icelog_rows(t, snapshot_id: int) -> list[tuple]:
    return canon(t.scan(snapshot_id=snapshot_id).to_arrow().to_pylist())


def build_evolving_table(spark, name: str) -> None:
    """Several transforms, partition and schema evolution, merge-on-read deletes, a branch and a tag."""
    spark.sql(f"""CREATE TABLE {name} (id bigint, ts timestamp, category string, amount decimal(10,2), note string)
                  USING iceberg PARTITIONED BY (days(ts), bucket(4, id))
                  TBLPROPERTIES ('format-version'='2', 'write.delete.mode'='merge-on-read',
                                 'write.update.mode'='merge-on-read')""")
    spark.sql(f"""INSERT INTO {name} VALUES
        (1, TIMESTAMP '2024-01-01 10:00:00', 'alpha', 1.50, 'a'),
        (2, TIMESTAMP '2024-01-01 11:00:00', 'beta', 2.25, NULL),
        (3, TIMESTAMP '2024-01-02 09:30:00', 'gamma', 3.00, 'c'),
        (4, NULL, 'alpha', NULL, 'd')""")
    spark.sql(f"""INSERT INTO {name} VALUES
        (5, TIMESTAMP '2024-01-03 00:00:00', 'delta', 5.55, 'e'),
        (6, TIMESTAMP '2024-01-03 23:59:59', 'beta', 6.00, 'f')""")
    spark.sql(f"ALTER TABLE {name} ADD PARTITION FIELD truncate(2, category)")
    spark.sql(f"ALTER TABLE {name} DROP PARTITION FIELD bucket(4, id)")
    spark.sql(f"""INSERT INTO {name} VALUES
        (7, TIMESTAMP '2024-02-01 08:00:00', 'alpha', 7.00, 'g'),
        (8, TIMESTAMP '2024-02-02 08:00:00', 'epsilon', 8.80, 'h')""")
    spark.sql(f"ALTER TABLE {name} ADD COLUMN extra int")
    spark.sql(f"ALTER TABLE {name} RENAME COLUMN note TO label")
    spark.sql(f"""INSERT INTO {name} VALUES
        (9, TIMESTAMP '2024-02-03 08:00:00', 'beta', 9.90, 'i', 90),
        (10, TIMESTAMP '2024-01-01 12:00:00', 'alpha', 10.00, 'j', 100)""")
    spark.sql(f"DELETE FROM {name} WHERE id IN (2, 7, 10)")  # merge-on-read: position delete files
    spark.sql(f"UPDATE {name} SET amount = 99.99 WHERE id = 5")
    spark.sql(f"ALTER TABLE {name} CREATE TAG before_branch")
    spark.sql(f"ALTER TABLE {name} CREATE BRANCH audit")
    spark.sql(f"INSERT INTO {name}.branch_audit VALUES (11, TIMESTAMP '2024-03-01 00:00:00', 'zeta', 11.0, 'k', 1)")
    spark.sql(f"INSERT INTO {name} VALUES (12, TIMESTAMP '2024-03-02 00:00:00', 'eta', 12.0, 'l', 2)")
    spark.sql(f"ALTER TABLE {name} DROP COLUMN extra")


def test_spark_table_registers_with_every_snapshot(spark, tmp_warehouse: Path, warehouse_catalog: str,
                                                  tmp_path: Path) -> None:
    name = f"{warehouse_catalog}.db.events"
    build_evolving_table(spark, name)
    snapshots = spark_snapshots(spark, name)
    expected = {sid: spark_rows(spark, name, sid) for sid in snapshots}
    current = spark_rows(spark, name)
    audit = spark_rows(spark, f"{name}.branch_audit")
    refs = {r["name"]: (r["type"], r["snapshot_id"]) for r in spark.sql(f"SELECT * FROM {name}.refs").collect()}
    folder = tmp_warehouse / "db" / "events"
    original_files = sorted(p.name for p in (folder / "metadata").iterdir())

    cat = Catalog.open(tmp_path / "icelog")
    cat.create_namespace("db")
    # Spark wrote v1..v16.metadata.json; the import commit holds more events than that, so icelog's first
    # version (v<events>) lands beside them without a clash and the version hint moves to it
    t = cat.register_table("db.events", str(folder))
    assert t.location.endswith("/db/events") and t.import_notes == ()
    published = int(t.metadata_location.rsplit("/v", 1)[1].split(".")[0])
    assert published > max(int(n[1:].split(".")[0]) for n in original_files if n.endswith(".metadata.json") and n.startswith("v"))
    assert (folder / "metadata" / "version-hint.text").read_text() == str(published)

    assert [s.snapshot_id for s in t.snapshots()] == snapshots
    assert {k: (r.type, r.snapshot_id) for k, r in t.refs().items()} == {k: (ty.lower(), s) for k, (ty, s) in refs.items()}
    for sid in snapshots:
        assert icelog_rows(t, sid) == expected[sid], f"snapshot {sid}"
    assert canon(t.scan().to_arrow().to_pylist()) == current
    kinds = {f.content for f in cat.store.live_files(t.state, t.current_snapshot().snapshot_id)}
    assert DataFileContent.POSITION_DELETES in kinds
    assert [f.name for f in t.schema().columns] == ["id", "ts", "category", "amount", "label"]
    assert len(t.state.specs) == 3
    # the original files are untouched
    assert sorted(p.name for p in (folder / "metadata").iterdir() if p.name in original_files) == original_files

    # Spark reads icelog's projection: every snapshot, the branch, the current state
    meta = t.metadata_location
    for sid in snapshots:
        assert spark_rows(spark, meta, sid) == expected[sid], f"projection, snapshot {sid}"
    assert spark_rows(spark, meta) == current
    audit_df = spark.read.format("iceberg").option("branch", "audit").load(meta)
    assert canon([r.asDict() for r in audit_df.collect()]) == audit
    assert cat.verify("db.events") == []  # the original writer's files were known at registration


def test_copied_v1_gzip_table_without_hint_registers_with_relocate(spark, tmp_warehouse: Path,
                                                                   warehouse_catalog: str, tmp_path: Path) -> None:
    name = f"{warehouse_catalog}.db.legacy"
    spark.sql(f"""CREATE TABLE {name} (id int, day date, s string) USING iceberg PARTITIONED BY (months(day))
                  TBLPROPERTIES ('format-version'='1', 'write.metadata.compression-codec'='gzip')""")
    spark.sql(f"INSERT INTO {name} VALUES (1, DATE '2024-01-05', 'a'), (2, DATE '2024-02-05', 'b')")
    spark.sql(f"INSERT INTO {name} VALUES (3, DATE '2024-02-06', 'c')")
    spark.sql(f"DELETE FROM {name} WHERE id = 1")  # v1: copy-on-write
    snapshots = spark_snapshots(spark, name)
    expected = {sid: spark_rows(spark, name, sid) for sid in snapshots}
    src = tmp_warehouse / "db" / "legacy"
    assert any(p.name.endswith(".gz.metadata.json") for p in (src / "metadata").iterdir())
    copy = tmp_path / "moved" / "legacy"
    shutil.copytree(src, copy)
    (copy / "metadata" / "version-hint.text").unlink()
    shutil.rmtree(src)  # the original is gone: every path must be relocated

    cat = Catalog.open(tmp_path / "icelog")
    cat.create_namespace("db")
    projection = tmp_path / "projection" / "legacy"
    t = _register_relocated(cat, src, copy, projection)
    assert t.state.format_version == 1
    assert [s.snapshot_id for s in t.snapshots()] == snapshots
    for sid in snapshots:
        assert icelog_rows(t, sid) == expected[sid]
    paths = [f.file_path for f in cat.store.live_files(t.state, snapshots[-1])]
    assert paths and all(str(copy) in p for p in paths)
    for sid in snapshots:
        assert spark_rows(spark, t.metadata_location, sid) == expected[sid]


def _register_relocated(cat: Catalog, src: Path, copy: Path, projection: Path, name: str = "db.legacy"):
    try:
        return cat.register_table(name, str(copy), relocate={str(src): str(copy)})
    except ValidationError as e:
        assert "location=" in str(e)
        return cat.register_table(name, str(copy), relocate={str(src): str(copy)}, location=str(projection))


def test_pyiceberg_table_registers(tmp_path: Path, spark) -> None:
    from pyiceberg.catalog.sql import SqlCatalog

    wh = tmp_path / "pyice"
    wh.mkdir()
    pcat = SqlCatalog("p", uri=f"sqlite:///{wh}/cat.db", warehouse=f"file://{wh}")
    pcat.create_namespace("db")
    schema = pa.schema([("id", pa.int64()), ("cat", pa.string()), ("amount", pa.decimal128(10, 2))])
    pt = pcat.create_table("db.p", schema=schema)
    pt.append(pa.table({"id": [1, 2], "cat": ["a", "b"], "amount": [Decimal("1.00"), Decimal("2.00")]},
                       schema=schema))
    pt.append(pa.table({"id": [3], "cat": ["c"], "amount": [Decimal("3.50")]}, schema=schema))
    pt.delete("id = 2")
    pt = pcat.load_table("db.p")
    expected = {s.snapshot_id: canon(pt.scan(snapshot_id=s.snapshot_id).to_arrow().to_pylist())
                for s in pt.snapshots()}

    cat = Catalog.open(tmp_path / "icelog")
    cat.create_namespace("db")
    t = cat.register_table("db.p", pt.metadata_location)
    assert set(expected) == {s.snapshot_id for s in t.snapshots()}
    for sid, rows in expected.items():
        assert icelog_rows(t, sid) == rows
    assert spark_rows(spark, t.metadata_location) == expected[pt.current_snapshot().snapshot_id]


def _live_entry_sequence_numbers(rows) -> dict[str, tuple[int, int]]:
    """file path -> (data sequence number, file sequence number) of the live entries of an entries table."""
    return {r["data_file"]["file_path"]: (r["sequence_number"], r["file_sequence_number"])
            for r in rows if r["status"] != 2}


def test_compacted_table_keeps_its_data_sequence_numbers(spark, tmp_warehouse: Path, warehouse_catalog: str,
                                                         tmp_path: Path) -> None:
    name = f"{warehouse_catalog}.db.compacted"
    spark.sql(f"""CREATE TABLE {name} (id bigint, category string) USING iceberg PARTITIONED BY (category)
                  TBLPROPERTIES ('format-version'='2', 'write.delete.mode'='merge-on-read')""")
    for i in range(4):
        spark.sql(f"INSERT INTO {name} VALUES ({i}, 'a'), ({i + 10}, 'b')")
    spark.sql(f"DELETE FROM {name} WHERE id = 1")
    spark.sql(f"CALL {warehouse_catalog}.system.rewrite_data_files(table => 'db.compacted', "
              f"options => map('min-input-files', '2', 'use-starting-sequence-number', 'true'))")
    spark.sql(f"INSERT INTO {name} VALUES (20, 'a')")
    snapshots = spark_snapshots(spark, name)
    expected = {sid: spark_rows(spark, name, sid) for sid in snapshots}
    spark_entries = {sid: _live_entry_sequence_numbers(
        spark.read.format("iceberg").option("snapshot-id", str(sid)).load(f"{name}.entries").collect())
        for sid in snapshots}
    rewrite = spark.sql(f"SELECT snapshot_id, operation FROM {name}.snapshots WHERE operation = 'replace'").collect()
    assert len(rewrite) == 1
    rewrite_id = rewrite[0]["snapshot_id"]
    rewrite_seq = max(f for _, f in spark_entries[rewrite_id].values())
    # the compaction's files carry the sequence number it started from, below the snapshot's own
    kept = [d for d, f in spark_entries[rewrite_id].values() if f == rewrite_seq and d < f]
    assert kept, spark_entries[rewrite_id]

    cat = Catalog.open(tmp_path / "icelog")
    cat.create_namespace("db")
    t = cat.register_table("db.compacted", str(tmp_warehouse / "db" / "compacted"),
                           location=str(tmp_path / "projection"))
    assert t.import_notes == ()
    for sid in snapshots:
        assert icelog_rows(t, sid) == expected[sid], sid
        icelog_entries = _live_entry_sequence_numbers(t.inspect.entries(sid).to_pylist())
        assert icelog_entries == spark_entries[sid], sid
        live = {e.file.file_path: (e.data_sequence_number, e.file_sequence_number)
                for e in cat.store.live_entries(t.state, sid)}
        assert live == spark_entries[sid], sid
    # Spark reads icelog's projection, whose entries keep the same sequence numbers
    for sid in snapshots:
        assert spark_rows(spark, t.metadata_location, sid) == expected[sid]
        projected = spark.read.format("iceberg").option("snapshot-id", str(sid)).load(
            f"{t.metadata_location}#entries").collect()
        assert _live_entry_sequence_numbers(projected) == spark_entries[sid], sid


def test_table_with_expired_parents_keeps_their_ids(spark, tmp_warehouse: Path, warehouse_catalog: str,
                                                    tmp_path: Path) -> None:
    name = f"{warehouse_catalog}.db.expired"
    spark.sql(f"""CREATE TABLE {name} (id bigint, category string) USING iceberg PARTITIONED BY (category)
                  TBLPROPERTIES ('format-version'='2', 'write.delete.mode'='merge-on-read')""")
    spark.sql(f"INSERT INTO {name} VALUES (1, 'a'), (2, 'a'), (3, 'b')")
    spark.sql(f"INSERT INTO {name} VALUES (4, 'a'), (5, 'b')")
    spark.sql(f"DELETE FROM {name} WHERE id IN (2, 5)")
    spark.sql(f"INSERT INTO {name} VALUES (6, 'b')")
    before = spark_snapshots(spark, name)
    spark.sql(f"CALL {warehouse_catalog}.system.expire_snapshots(table => 'db.expired', "
              f"older_than => TIMESTAMP '2999-01-01 00:00:00', retain_last => 2)")
    snapshots = spark_snapshots(spark, name)
    assert snapshots == before[-2:]
    parents = {r["snapshot_id"]: r["parent_id"] for r in spark.sql(f"SELECT * FROM {name}.snapshots").collect()}
    oldest = snapshots[0]
    assert parents[oldest] == before[-3]  # the parent id stays although the parent is gone
    expected = {sid: spark_rows(spark, name, sid) for sid in snapshots}

    cat = Catalog.open(tmp_path / "icelog")
    cat.create_namespace("db")
    folder = tmp_warehouse / "db" / "expired"
    originals = {p.name: p.read_bytes() for p in (folder / "metadata").iterdir() if p.name != "version-hint.text"}
    # in place: the history left fewer events than Spark's metadata versions, so icelog numbers its own after them
    t = cat.register_table("db.expired", str(folder))
    assert t.import_notes == ()
    highest = max(int(n[1:].split(".")[0]) for n in originals if n.startswith("v") and n.endswith(".metadata.json"))
    assert t.metadata_location.endswith(f"/db/expired/metadata/v{highest + 1}.metadata.json")
    assert {n: (folder / "metadata" / n).read_bytes() for n in originals} == originals
    assert cat.verify("db.expired") == []
    hadoop = f"{warehouse_catalog}.db.expired"  # a Hadoop-catalog reader follows the hint to icelog's version
    assert sorted(spark_snapshots(spark, hadoop)) == sorted(s.snapshot_id for s in t.snapshots())
    assert {s.snapshot_id: s.parent_snapshot_id for s in t.snapshots()} == parents
    for sid in snapshots:
        assert icelog_rows(t, sid) == expected[sid], sid
    projected = {r["snapshot_id"]: r["parent_id"] for r in spark.read.format("iceberg").load(
        f"{t.metadata_location}#snapshots").collect()}
    assert projected == parents
    for sid in snapshots:
        assert spark_rows(spark, t.metadata_location, sid) == expected[sid], sid
    # icelog commits on top of the imported history, and Spark reads that too
    t.append(pa.table({"id": pa.array([7], pa.int64()), "category": ["a"]}))
    assert spark_rows(spark, t.metadata_location) == canon(t.scan().to_arrow().to_pylist())


def test_copied_table_with_position_deletes_registers_with_relocate(spark, tmp_warehouse: Path,
                                                                    warehouse_catalog: str, tmp_path: Path) -> None:
    name = f"{warehouse_catalog}.db.moved"
    spark.sql(f"""CREATE TABLE {name} (id bigint, category string) USING iceberg PARTITIONED BY (category)
                  TBLPROPERTIES ('format-version'='2', 'write.delete.mode'='merge-on-read',
                                 'write.update.mode'='merge-on-read')""")
    spark.sql(f"INSERT INTO {name} VALUES (1, 'a'), (2, 'a'), (3, 'b')")
    spark.sql(f"INSERT INTO {name} VALUES (4, 'a'), (5, 'b'), (6, 'b')")
    spark.sql(f"DELETE FROM {name} WHERE id IN (2, 4, 5)")  # one delete file in 'a' names two data files
    spark.sql(f"UPDATE {name} SET category = 'c' WHERE id = 6")
    snapshots = spark_snapshots(spark, name)
    expected = {sid: spark_rows(spark, name, sid) for sid in snapshots}
    src = tmp_warehouse / "db" / "moved"
    copy = tmp_path / "elsewhere" / "moved"
    shutil.copytree(src, copy)
    shutil.rmtree(src)  # nothing may point at the original any more

    cat = Catalog.open(tmp_path / "icelog")
    cat.create_namespace("db")
    t = _register_relocated(cat, src, copy, tmp_path / "projection" / "moved", "db.moved")
    deletes = [f for f in cat.store.live_files(t.state, snapshots[-1])
               if f.content == DataFileContent.POSITION_DELETES]
    assert deletes and all("/data/relocated-" in f.file_path for f in deletes)
    assert all(str(src) not in f.file_path for f in cat.store.live_files(t.state, snapshots[-1]))
    for sid in snapshots:
        assert icelog_rows(t, sid) == expected[sid], sid
        assert spark_rows(spark, t.metadata_location, sid) == expected[sid], sid
    # Spark also sees the same delete files through icelog's projection
    projected = spark.read.format("iceberg").load(f"{t.metadata_location}#delete_files").collect()
    assert sorted(r["file_path"] for r in projected) == sorted(f.file_path for f in deletes)


def test_files_added_from_outside_without_field_ids(spark, tmp_warehouse: Path, warehouse_catalog: str,
                                                    tmp_path: Path) -> None:
    """Spark's add_files takes Parquet files written elsewhere without field ids (a Hive or Impala migration):
    they stay outside the table folder and are read through the name mapping add_files sets."""
    import pyarrow.parquet as pq

    outside = tmp_path / "outside"
    outside.mkdir()
    pq.write_table(pa.table({"id": pa.array([1, 2], pa.int64()), "name": ["one", "two"]}), outside / "a.parquet")
    pq.write_table(pa.table({"id": pa.array([3], pa.int64()), "name": ["three"]}), outside / "b.parquet")
    name = f"{warehouse_catalog}.db.migrated"
    spark.sql(f"CREATE TABLE {name} (id bigint, name string) USING iceberg TBLPROPERTIES ('format-version'='2')")
    spark.sql(f"CALL {warehouse_catalog}.system.add_files(table => 'db.migrated', "
              f"source_table => '`parquet`.`{outside}`')")
    spark.sql(f"ALTER TABLE {name} RENAME COLUMN name TO label")  # the mapping keeps the old name too
    spark.sql(f"INSERT INTO {name} VALUES (4, 'four')")
    snapshots = spark_snapshots(spark, name)
    expected = {sid: spark_rows(spark, name, sid) for sid in snapshots}
    assert len(expected[snapshots[-1]]) == 4

    cat = Catalog.open(tmp_path / "icelog")
    cat.create_namespace("db")
    t = cat.register_table("db.migrated", str(tmp_warehouse / "db" / "migrated"), location=str(tmp_path / "proj"))
    assert "schema.name-mapping.default" in t.properties
    paths = [f.file_path for f in cat.store.live_files(t.state, snapshots[-1])]
    assert sum(str(outside) in p for p in paths) == 2
    for sid in snapshots:
        assert icelog_rows(t, sid) == expected[sid], sid
        assert spark_rows(spark, t.metadata_location, sid) == expected[sid], sid
