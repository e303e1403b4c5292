"""Tables shaped the way Apache Impala writes them are registered in icelog; icelog's scan of every snapshot equals
Spark's read of the original, and Spark reads icelog's projection with the same rows.

Layer: tests (Spark and its JVM through py4j, pyarrow, engine). Impala cannot run here, but it commits through
Iceberg's Java library, so the tables are built with the same calls Impala's catalog makes
(``org.apache.impala.service.IcebergCatalogOpExecutor``, ``catalog.iceberg.IcebergHadoopTables``):

- ``iceberg.catalog=hadoop.tables``: ``HadoopTables.create(schema, spec, properties, location)``, so the metadata is
  ``vN.metadata.json`` plus ``version-hint.text`` in the table folder; the location is a bare path while the data
  and delete files are recorded as full URIs (Impala prefixes the file system: ``hdfs://nn:port/...``, here
  ``file:/...``);
- Impala's table properties (``engine.hive.enabled``, ``write.format.default=parquet``, ``iceberg.catalog``,
  ``storage_handler``, and for v2 tables the merge-on-read modes) and, in every DML transaction, the
  ``impala.events.catalogServiceId`` / ``impala.events.catalogVersion`` properties set beside the data change;
- data files written by Impala itself (here pyarrow): Parquet with field ids, INT64 timestamps, named
  ``data/<partition path>/<query id>_<n>_data.0.parq``, added with ``DataFiles.builder(spec)`` with column metrics
  (sizes, value and null counts, bounds; no NaN counts) and the partition tuple;
- INSERT: ``newAppend``; INSERT OVERWRITE: ``newReplacePartitions`` (dynamic overwrite); TRUNCATE:
  ``newDelete().deleteFromRowFilter(alwaysTrue)``; DROP PARTITION: ``newDelete().deleteFile`` of the partition's
  files (given here as DataFile objects: given as path strings through py4j, the file also vanished from disk,
  apparently another ``deleteFile`` overload was picked);
- DELETE: ``newRowDelta().addDeletes`` of position delete files (``file_path``, ``pos``; no ``row`` column)
  named ``delete-<query id>_<n>_data.0.parq`` in the partition folder of the data they delete from, one per
  partition, partitioned (spec and tuple) like that data; UPDATE: one RowDelta adding position deletes and the new
  rows; OPTIMIZE: ``newRewrite`` removing every data and delete file and adding the compacted files;
- ``ALTER TABLE SET PARTITION SPEC``: ``updateSpec()`` removing every field and adding the new terms (a v1 table
  keeps removed fields as ``void`` transforms).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import random
import shutil
import struct
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import mmh3
import pyarrow as pa
import pyarrow.parquet as pq

from engine import Catalog
from engine.model.data_file import DataFileContent

FIELD_ID = b"PARQUET:field_id"
FILE_PATH_ID, POS_ID = 2147483546, 2147483545
SCHEMA = {"type": "struct", "schema-id": 0, "fields": [
    {"id": 1, "name": "id", "required": False, "type": "long"},
    {"id": 2, "name": "category", "required": False, "type": "string"},
    {"id": 3, "name": "ts", "required": False, "type": "timestamp"},
    {"id": 4, "name": "v", "required": False, "type": "string"}]}
ARROW_TYPES = {"id": pa.int64(), "category": pa.string(), "ts": pa.timestamp("us"), "v": pa.string()}


def canon(rows: list[dict[str, Any]]) -> list[tuple]:
    return sorted(tuple((k, (v is None, str(v))) for k, v in sorted(r.items())) for r in rows)


def spark_rows(spark, table: str, snapshot_id: int | None = None) -> list[tuple]:
    reader = spark.read.format("iceberg")
    if snapshot_id is not None:
        reader = reader.option("snapshot-id", str(snapshot_id))
    return canon([r.asDict(recursive=True) for r in reader.load(table).collect()])


def ids_of(canonical: list[tuple]) -> list[int]:
    """The ``id`` values of rows in :func:`canon` form."""
    return sorted(int(dict(r)["id"][1]) for r in canonical)


def day(d: int) -> dt.datetime:
    return dt.datetime(2024, 3, 20) + dt.timedelta(days=d, hours=d + 1, microseconds=7)


class ImpalaTable:
    """An Iceberg table created and written through the Java API calls Impala's catalog makes."""

    def __init__(self, spark, location: Path, *, format_version: int, partitioned_by: Sequence[dict]) -> None:
        self.spark, self.jvm, self.location = spark, spark._jvm, location
        self.catalog_version = 1000
        self.service_id = "6f6c7a12e3a4d5b6-9a8b7c6d5e4f3a2b"
        self.query = random.Random(hash(str(location)) & 0xFFFF)
        ice = self.jvm.org.apache.iceberg
        schema = ice.SchemaParser.fromJson(json.dumps(SCHEMA))
        spec = ice.PartitionSpecParser.fromJson(schema, json.dumps({"spec-id": 0, "fields": list(partitioned_by)}))
        props = {"engine.hive.enabled": "true", "write.format.default": "parquet",
                 "iceberg.catalog": "hadoop.tables", "external.table.purge": "TRUE",
                 "storage_handler": "org.apache.iceberg.mr.hive.HiveIcebergStorageHandler",
                 "OBJCAPABILITIES": "EXTREAD,EXTWRITE", "format-version": str(format_version)}
        if format_version >= 2:
            props.update({"write.delete.mode": "merge-on-read", "write.update.mode": "merge-on-read",
                          "write.merge.mode": "merge-on-read"})
        java_props = self.jvm.java.util.HashMap()
        for k, v in props.items():
            java_props.put(k, v)
        tables = self.jvm.org.apache.iceberg.hadoop.HadoopTables(spark._jsc.hadoopConfiguration())
        self.table = tables.create(schema, spec, java_props, str(location))

    # ------------------------------------------------------------ files Impala's backend writes

    def _query_id(self) -> str:
        return f"{self.query.getrandbits(64):016x}-{self.query.getrandbits(32):08x}{self.query.randrange(8):08x}"

    def partition(self, row: dict, spec: Any) -> tuple[str, Any]:
        """The folder (``name=value`` per field, as Impala lays it out) and the partition tuple of ``row``."""
        parts, values = [], []
        for field in spec.fields():
            transform = str(field.transform())
            value = row[self.table.schema().findField(field.sourceId()).name()]
            if transform == "void" or value is None:
                value = None
            elif transform == "day":
                value = (value.date() - dt.date(1970, 1, 1)).days
            elif transform.startswith("bucket["):
                value = self._bucket(value, int(transform[len("bucket["):-1]))
            else:
                assert transform == "identity", transform
            text = "null" if value is None else (
                (dt.date(1970, 1, 1) + dt.timedelta(days=value)).isoformat() if transform == "day" else str(value))
            parts.append(f"{field.name()}={text}")
            values.append(value)
        record = self.jvm.org.apache.iceberg.data.GenericRecord.create(spec.partitionType())
        for i, v in enumerate(values):
            record.set(i, v)
        return "/".join(parts), record

    @staticmethod
    def _bucket(value: int, n: int) -> int:
        """Iceberg's bucket of a long: 32-bit Murmur3 of its 8 little-endian bytes, sign bit cleared, modulo n."""
        return (mmh3.hash(struct.pack("<q", value)) & 0x7FFFFFFF) % n

    def _metrics(self, path: str, *, position_deletes: bool = False) -> Any:
        """Column sizes, value and null counts and bounds of a written file, without NaN counts (as Impala's)."""
        ice = self.jvm.org.apache.iceberg
        config = (ice.MetricsConfig.forPositionDelete(self.table) if position_deletes
                  else ice.MetricsConfig.forTable(self.table))
        m = ice.parquet.ParquetUtil.fileMetrics(self.table.io().newInputFile(path), config)
        return ice.Metrics(m.recordCount(), m.columnSizes(), m.valueCounts(), m.nullValueCounts(), None,
                           m.lowerBounds(), m.upperBounds())

    def _write(self, rows: pa.Table, partition_path: str, name: str) -> str:
        folder = self.location / "data" / partition_path if partition_path else self.location / "data"
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / name
        pq.write_table(rows, path)
        return f"file:{path}"

    def data_files(self, rows: list[dict], spec_id: int | None = None) -> list[Any]:
        """One Impala data file per partition of ``rows``, described for the Java API (partition path form)."""
        spec = self.table.spec() if spec_id is None else self.table.specs().get(spec_id)
        by_partition: dict[str, list[dict]] = {}
        records: dict[str, Any] = {}
        for r in rows:
            ppath, records[ppath] = self.partition(r, spec)
            by_partition.setdefault(ppath, []).append(r)
        qid, out = self._query_id(), []
        schema = pa.schema([pa.field(f["name"], ARROW_TYPES[f["name"]], metadata={FIELD_ID: str(f["id"]).encode()})
                            for f in SCHEMA["fields"]])
        for ppath, prows in by_partition.items():
            table = pa.Table.from_pylist(prows, schema=schema)
            uri = self._write(table, ppath, f"{qid}_{self.query.getrandbits(31)}_data.0.parq")
            builder = (self.jvm.org.apache.iceberg.DataFiles.builder(spec)
                       .withMetrics(self._metrics(uri)).withPath(uri)
                       .withFormat(self.jvm.org.apache.iceberg.FileFormat.PARQUET)
                       .withRecordCount(table.num_rows).withFileSizeInBytes(os.path.getsize(uri[len("file:"):])))
            if ppath:
                builder = builder.withPartition(records[ppath])
            out.append(builder.build())
        return out

    def position_deletes(self, deleted: Sequence[tuple[Any, int]]) -> list[Any]:
        """Impala's DELETE output for (data file, position) pairs: one position delete file per partition, rows
        sorted by file_path and pos, no ``row`` column, in the data's partition folder with the data's spec."""
        groups: dict[tuple[int, str], list[tuple[str, int]]] = {}
        partitions: dict[tuple[int, str], Any] = {}
        for f, pos in deleted:
            spec = self.table.specs().get(f.specId())
            key = (f.specId(), spec.partitionToPath(f.partition()) if not spec.isUnpartitioned() else "")
            partitions[key] = f.partition()
            groups.setdefault(key, []).append((str(f.path()), pos))
        qid, out = self._query_id(), []
        schema = pa.schema([
            pa.field("file_path", pa.string(), nullable=False, metadata={FIELD_ID: str(FILE_PATH_ID).encode()}),
            pa.field("pos", pa.int64(), nullable=False, metadata={FIELD_ID: str(POS_ID).encode()})])
        for (spec_id, ppath), pairs in groups.items():
            pairs.sort()
            table = pa.table({"file_path": [p for p, _ in pairs], "pos": [n for _, n in pairs]}, schema=schema)
            uri = self._write(table, ppath, f"delete-{qid}_{self.query.getrandbits(31)}_data.0.parq")
            spec = self.table.specs().get(spec_id)
            builder = (self.jvm.org.apache.iceberg.FileMetadata.deleteFileBuilder(spec).ofPositionDeletes()
                       .withMetrics(self._metrics(uri, position_deletes=True)).withPath(uri)
                       .withFormat(self.jvm.org.apache.iceberg.FileFormat.PARQUET)
                       .withRecordCount(table.num_rows).withFileSizeInBytes(os.path.getsize(uri[len("file:"):])))
            if ppath:
                builder = builder.withPartition(partitions[(spec_id, ppath)])
            out.append(builder.build())
        return out

    # ------------------------------------------------------------ Impala's statements

    def _commit(self, change) -> None:
        """One Impala DML: the data change and the catalog version properties in one transaction."""
        txn = self.table.newTransaction()
        change(txn)
        self.catalog_version += 1
        (txn.updateProperties().set("impala.events.catalogServiceId", self.service_id)
         .set("impala.events.catalogVersion", str(self.catalog_version)).commit())
        txn.commitTransaction()
        self.table.refresh()

    def insert(self, rows: list[dict]) -> list[Any]:
        files = self.data_files(rows)

        def append(txn):
            a = txn.newAppend()
            for f in files:
                a.appendFile(f)
            a.commit()
        self._commit(append)
        return files

    def insert_overwrite(self, rows: list[dict]) -> list[Any]:
        files = self.data_files(rows)
        start = self.table.currentSnapshot().snapshotId()

        def overwrite(txn):
            r = txn.newReplacePartitions()
            for f in files:
                r.addFile(f)
            r.validateFromSnapshot(start).validateNoConflictingData().validateNoConflictingDeletes().commit()
        self._commit(overwrite)
        return files

    def delete(self, deleted: Sequence[tuple[Any, int]]) -> None:
        deletes = self.position_deletes(deleted)

        def row_delta(txn):
            d = txn.newRowDelta()
            for f in deletes:
                d.addDeletes(f)
            d.commit()
        self._commit(row_delta)

    def update(self, deleted: Sequence[tuple[Any, int]], new_rows: list[dict]) -> list[Any]:
        deletes, files = self.position_deletes(deleted), self.data_files(new_rows)

        def row_delta(txn):
            d = txn.newRowDelta()
            for f in deletes:
                d.addDeletes(f)
            for f in files:
                d.addRows(f)
            d.commit()
        self._commit(row_delta)
        return files

    def optimize(self, live_rows: list[dict]) -> list[Any]:
        """OPTIMIZE: every data and delete file of the current snapshot replaced by files of the live rows."""
        files = self.data_files(live_rows)
        scan_tasks = java_list(self.table.newScan().planFiles())
        old_data = {str(t.file().path()): t.file() for t in scan_tasks}
        old_deletes = {str(d.path()): d for t in scan_tasks for d in t.deletes()}
        start = self.table.currentSnapshot().snapshotId()

        def rewrite(txn):
            r = txn.newRewrite()
            for f in old_data.values():
                r.deleteFile(f)
            for f in old_deletes.values():
                r.deleteFile(f)
            for f in files:
                r.addFile(f)
            r.validateFromSnapshot(start).commit()
        self._commit(rewrite)
        return files

    def data_files_live(self) -> list[Any]:
        return [t.file() for t in java_list(self.table.newScan().planFiles())]

    def drop_partition(self, files: Sequence[Any]) -> None:
        def delete(txn):
            d = txn.newDelete()
            for f in files:
                d.deleteFile(f)
            d.commit()
        self._commit(delete)

    def truncate(self) -> None:
        self._commit(lambda txn: txn.newDelete().deleteFromRowFilter(
            self.jvm.org.apache.iceberg.expressions.Expressions.alwaysTrue()).commit())

    def set_partition_spec(self, terms: Sequence[Any]) -> None:
        """ALTER TABLE SET PARTITION SPEC: remove every field of the current spec, add the new terms."""
        txn = self.table.newTransaction()
        update = txn.updateSpec()
        for field in self.table.spec().fields():
            update = update.removeField(field.name())
        for term in terms:
            update = update.addField(term)
        update.commit()
        txn.commitTransaction()
        self.table.refresh()

    def term(self, kind: str, column: str, arg: int | None = None) -> Any:
        e = self.jvm.org.apache.iceberg.expressions.Expressions
        return {"identity": lambda: e.ref(column), "day": lambda: e.day(column),
                "bucket": lambda: e.bucket(column, arg), "truncate": lambda: e.truncate(column, arg)}[kind]()


def java_list(iterable: Any) -> list[Any]:
    """The items of a Java Iterable (a scan's CloseableIterable is not iterable from Python)."""
    it, out = iterable.iterator(), []
    while it.hasNext():
        out.append(it.next())
    return out


def rows(ids: Sequence[int], category: str, d: int, v: str = "x") -> list[dict]:
    return [{"id": i, "category": category, "ts": day(d), "v": f"{v}{i}"} for i in ids]


def positions_of(spark, folder: Path, ids: set[int]) -> list[tuple[Any, int]]:
    """(data file, row position) of every live row whose id is in ``ids``, read from the data files (as Impala's
    DELETE finds them through INPUT__FILE__NAME and FILE__POSITION)."""
    java = spark._jvm.org.apache.iceberg.hadoop.HadoopTables(spark._jsc.hadoopConfiguration()).load(str(folder))
    out = []
    for task in java_list(java.newScan().planFiles()):
        f = task.file()
        table = pq.read_table(str(f.path())[len("file:"):], columns=["id"])
        for pos, i in enumerate(table.column("id").to_pylist()):
            if i in ids:
                out.append((f, pos))
    return out


def register_and_compare(spark, folder: Path, tmp_path: Path, name: str):
    """Register the table at ``folder`` and check every snapshot against Spark's read of the original."""
    original = str(folder)
    snapshots = _snapshot_ids(spark, folder)
    expected = {sid: spark_rows(spark, original, sid) for sid in snapshots}
    cat = Catalog.open(tmp_path / "icelog")
    cat.create_namespace("db")
    t = cat.register_table(f"db.{name}", original, location=str(tmp_path / "projection" / name))
    assert t.import_notes == ()
    assert [s.snapshot_id for s in t.snapshots()] == snapshots
    for sid in snapshots:
        assert canon(t.scan(snapshot_id=sid).to_arrow().to_pylist()) == expected[sid], f"icelog, snapshot {sid}"
        assert spark_rows(spark, t.metadata_location, sid) == expected[sid], f"projection, snapshot {sid}"
    return cat, t, expected


def _snapshot_ids(spark, folder: Path) -> list[int]:
    java = spark._jvm.org.apache.iceberg.hadoop.HadoopTables(spark._jsc.hadoopConfiguration()).load(str(folder))
    return [s.snapshotId() for s in sorted(java.snapshots(), key=lambda s: (s.sequenceNumber(), s.timestampMillis()))]


def test_impala_v1_table_with_overwrite_partition_evolution_and_truncate(spark, tmp_path: Path) -> None:
    folder = tmp_path / "warehouse" / "impala_v1"
    impala = ImpalaTable(spark, folder, format_version=1, partitioned_by=[
        {"name": "ts_day", "transform": "day", "source-id": 3, "field-id": 1000},
        {"name": "category", "transform": "identity", "source-id": 2, "field-id": 1001}])
    impala.insert(rows([1, 2], "a", 0) + rows([3], "b", 1))
    impala.insert(rows([4, 5], "b", 1) + rows([6], "c", 2, "null-cat") + [
        {"id": 7, "category": None, "ts": None, "v": "nulls"}])
    impala.insert_overwrite(rows([8, 9], "b", 1, "over"))            # replaces partition (day 1, b) only
    impala.set_partition_spec([impala.term("bucket", "id", 4)])      # v1: the old fields become void
    assert [str(f.transform()) for f in impala.table.spec().fields()] == ["void", "void", "bucket[4]"]
    impala.insert(rows([10, 11, 12, 13], "d", 3))
    impala.truncate()
    impala.insert(rows([20, 21], "e", 4, "after"))

    metadata = folder / "metadata"
    assert (metadata / "version-hint.text").read_text().strip() == "8"
    assert max(int(p.name[1:-len(".metadata.json")]) for p in metadata.glob("v*.metadata.json")) == 8
    assert all(p.name.endswith("_data.0.parq") for p in (folder / "data").rglob("*.parq"))
    assert len(list((folder / "data").rglob("*.parq"))) == 11

    _, t, expected = register_and_compare(spark, folder, tmp_path, "impala_v1")
    assert t.state.format_version == 1
    assert t.properties["iceberg.catalog"] == "hadoop.tables"
    assert t.properties["impala.events.catalogVersion"] == str(impala.catalog_version)
    assert [s.operation for s in t.snapshots()] == ["append", "append", "overwrite", "append", "delete", "append"]
    assert [len(v) for v in expected.values()] == [3, 7, 6, 10, 0, 2]
    assert [str(f.transform) for f in t.spec().fields] == ["void", "void", "bucket[4]"]


def test_impala_v2_table_with_deletes_updates_evolution_optimize(spark, tmp_path: Path) -> None:
    folder = tmp_path / "warehouse" / "impala_v2"
    impala = ImpalaTable(spark, folder, format_version=2, partitioned_by=[
        {"name": "category", "transform": "identity", "source-id": 2, "field-id": 1000}])
    impala.insert(rows([1, 2, 3], "a", 0) + rows([4, 5], "b", 1))
    impala.insert(rows([6, 7], "a", 2))
    # DELETE FROM t WHERE id IN (2, 4, 7): position deletes in both partitions, one file each
    impala.delete(positions_of(spark, folder, {2, 4, 7}))
    # UPDATE t SET v = 'upd' WHERE id = 3: a position delete and the new row in one RowDelta
    impala.update(positions_of(spark, folder, {3}), [{"id": 3, "category": "a", "ts": day(0), "v": "upd"}])
    # ALTER TABLE SET PARTITION SPEC (DAY(ts)): v2 drops the category field
    impala.set_partition_spec([impala.term("day", "ts")])
    impala.insert(rows([8, 9], "c", 5) + rows([10], "a", 6))
    # a DELETE spanning both specs: each delete file carries the spec and partition of the data it deletes from
    impala.delete(positions_of(spark, folder, {1, 9}))
    live = [r.asDict() for r in spark.read.format("iceberg").load(str(folder)).collect()]
    assert sorted(r["id"] for r in live) == [3, 5, 6, 8, 10]
    # OPTIMIZE: everything rewritten into the current spec, delete files gone
    impala.optimize(live)
    # ALTER TABLE DROP PARTITION (ts = day 6): the file of that partition removed
    impala.drop_partition([f for f in impala.data_files_live() if "ts_day=2024-03-26" in str(f.path())])
    impala.insert(rows([11], "a", 0, "last"))

    cat, t, expected = register_and_compare(spark, folder, tmp_path, "impala_v2")
    # INSERT, INSERT, DELETE, UPDATE, INSERT, DELETE, OPTIMIZE, DROP PARTITION, INSERT
    assert [s.operation for s in t.snapshots()] == [
        "append", "append", "delete", "overwrite", "append", "delete", "replace", "delete", "append"]
    assert ids_of(expected[t.current_snapshot().snapshot_id]) == [3, 5, 6, 8, 11]
    assert t.state.format_version == 2
    assert t.properties["write.delete.mode"] == "merge-on-read" and t.properties["engine.hive.enabled"] == "true"
    # the delete snapshot across specs: delete files of spec 0 (category) and spec 1 (day)
    cross = t.snapshots()[5].snapshot_id
    deletes = [f for f in cat.store.live_files(t.state, cross) if f.content == DataFileContent.POSITION_DELETES]
    assert sorted({f.spec_id for f in deletes}) == [0, 1]
    assert all(os.path.basename(f.file_path).startswith("delete-") and f.file_path.startswith("file:/")
               for f in deletes)
    assert not [f for f in cat.store.live_files(t.state, t.current_snapshot().snapshot_id)
                if f.content != DataFileContent.DATA]


def test_impala_table_copied_from_another_cluster_registers_with_relocate(spark, tmp_path: Path) -> None:
    """An Impala table copied elsewhere: its location is a bare path and its files full URIs (``file:/...`` here,
    ``hdfs://nn:port/...`` on a cluster); one ``relocate`` rule covers both spellings, and the position delete
    files, whose rows name the data files by their old URIs, are rewritten. The original is removed before the
    reads, so every row comes from the copy."""
    folder = tmp_path / "cluster" / "impala_moved"
    impala = ImpalaTable(spark, folder, format_version=2, partitioned_by=[
        {"name": "category", "transform": "identity", "source-id": 2, "field-id": 1000}])
    impala.insert(rows([1, 2, 3], "a", 0) + rows([4], "b", 1))
    impala.delete(positions_of(spark, folder, {2, 4}))
    impala.update(positions_of(spark, folder, {1}), [{"id": 1, "category": "b", "ts": day(3), "v": "moved"}])
    snapshots = _snapshot_ids(spark, folder)
    expected = {sid: spark_rows(spark, str(folder), sid) for sid in snapshots}
    assert [len(v) for v in expected.values()] == [4, 2, 2]

    copy = tmp_path / "here" / "impala_moved"
    shutil.copytree(folder, copy)
    shutil.rmtree(folder)
    cat = Catalog.open(tmp_path / "icelog")
    cat.create_namespace("db")
    t = cat.register_table("db.moved", str(copy), relocate={str(folder): str(copy)},
                           location=str(tmp_path / "projection"))
    assert [s.snapshot_id for s in t.snapshots()] == snapshots
    for sid in snapshots:
        assert canon(t.scan(snapshot_id=sid).to_arrow().to_pylist()) == expected[sid], f"icelog, snapshot {sid}"
        assert spark_rows(spark, t.metadata_location, sid) == expected[sid], f"projection, snapshot {sid}"
    live = cat.store.live_files(t.state, t.current_snapshot().snapshot_id)
    assert live and not any(str(folder) in f.file_path for f in live)
