"""Tables with equality deletes committed through Iceberg's Java API (as Flink and other writers do), and tables
whose metadata files are named the way Trino names them, are registered in icelog; icelog's scan of every
snapshot equals Spark's read of the original, and Spark reads icelog's projection with the same rows.

Layer: tests (Spark and its JVM through py4j, pyarrow, engine). The delete and data files are written with
pyarrow (with field ids) and committed with ``org.apache.iceberg.hadoop.HadoopTables`` on the shared session.
"""

from __future__ import annotations

import os
import re
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from engine import Catalog
from engine.model.data_file import DataFileContent

FIELD_ID = b"PARQUET:field_id"


def canon(rows: list[dict[str, Any]]) -> list[tuple]:
    return sorted(tuple((k, (v is None, str(v))) for k, v in sorted(r.items())) for r in rows)


def spark_rows(spark, table: str, snapshot_id: int | None = None) -> list[tuple]:
    reader = spark.read.format("iceberg")
    if snapshot_id is not None:
        reader = reader.option("snapshot-id", str(snapshot_id))
    return canon([r.asDict(recursive=True) for r in reader.load(table).collect()])


def spark_snapshots(spark, table: str) -> list[int]:
    return [r["snapshot_id"] for r in spark.sql(f"SELECT snapshot_id FROM {table}.snapshots "
                                                f"ORDER BY committed_at").collect()]


def icelog_rows(t, snapshot_id: int) -> list[tuple]:
    return canon(t.scan(snapshot_id=snapshot_id).to_arrow().to_pylist())


class JavaTable:
    """An Iceberg table loaded by path through the Java API of the shared Spark session."""

    def __init__(self, spark, location: Path) -> None:
        self.spark = spark
        self.jvm = spark._jvm
        self.location = location
        tables = self.jvm.org.apache.iceberg.hadoop.HadoopTables(spark._jsc.hadoopConfiguration())
        self.table = tables.load(str(location))

    def field_id(self, name: str) -> int:
        return self.table.schema().findField(name).fieldId()

    def spec(self, spec_id: int | None = None) -> Any:
        return self.table.spec() if spec_id is None else self.table.specs().get(spec_id)

    def _ints(self, values: Sequence[int]) -> Any:
        arr = self.spark.sparkContext._gateway.new_array(self.jvm.int, len(values))
        for i, v in enumerate(values):
            arr[i] = v
        return arr

    def _parquet(self, rows: pa.Table, kind: str, partition_path: str) -> tuple[str, int]:
        folder = self.location / "data" / partition_path if partition_path else self.location / "data"
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{kind}-{uuid.uuid4()}.parquet"
        pq.write_table(rows, path)
        return str(path), os.path.getsize(path)

    def with_ids(self, rows: pa.Table) -> pa.Table:
        """The rows with each column carrying the table's field id of its name."""
        fields = [pa.field(f.name, f.type, nullable=f.name != "id",
                           metadata={FIELD_ID: str(self.field_id(f.name)).encode()}) for f in rows.schema]
        return pa.Table.from_arrays(rows.columns, schema=pa.schema(fields))

    def equality_delete_file(self, ids: Sequence[int], *, spec_id: int | None = None,
                             partition_path: str = "") -> Any:
        """An equality delete file on ``id`` holding ``ids``, written with pyarrow and described for the Java API."""
        rows = self.with_ids(pa.table({"id": pa.array(ids, pa.int64())}))
        path, size = self._parquet(rows, "eq-deletes", partition_path)
        builder = (self.jvm.org.apache.iceberg.FileMetadata.deleteFileBuilder(self.spec(spec_id))
                   .ofEqualityDeletes(self._ints([self.field_id("id")]))
                   .withPath(path).withFormat(self.jvm.org.apache.iceberg.FileFormat.PARQUET)
                   .withFileSizeInBytes(size).withRecordCount(rows.num_rows))
        if partition_path:
            builder = builder.withPartitionPath(partition_path)
        return builder.build()

    def data_file(self, rows: pa.Table, partition_path: str) -> Any:
        """A data file of ``rows`` written with pyarrow (field ids set), described for the Java API."""
        rows = self.with_ids(rows)
        path, size = self._parquet(rows, "data", partition_path)
        return (self.jvm.org.apache.iceberg.DataFiles.builder(self.spec())
                .withPath(path).withFormat(self.jvm.org.apache.iceberg.FileFormat.PARQUET)
                .withFileSizeInBytes(size).withRecordCount(rows.num_rows)
                .withPartitionPath(partition_path).build())

    def row_delta(self, *, deletes: Sequence[Any] = (), data: Sequence[Any] = (),
                  summary: dict[str, str] | None = None) -> None:
        delta = self.table.newRowDelta()
        for f in data:
            delta = delta.addRows(f)
        for f in deletes:
            delta = delta.addDeletes(f)
        for k, v in (summary or {}).items():
            delta = delta.set(k, v)
        delta.commit()
        self.table.refresh()


def rows_of(ids: Sequence[int], category: str, v: str = "x") -> pa.Table:
    return pa.table({"id": pa.array(ids, pa.int64()), "category": pa.array([category] * len(ids)),
                     "v": pa.array([f"{v}{i}" for i in ids])})


def register_and_compare(spark, name: str, folder: Path, tmp_path: Path, table_name: str):
    """Register the table at ``folder`` and check every snapshot against Spark's read of the original; returns the
    icelog table."""
    snapshots = spark_snapshots(spark, name)
    expected = {sid: spark_rows(spark, name, sid) for sid in snapshots}
    cat = Catalog.open(tmp_path / "icelog")
    cat.create_namespace("db")
    t = cat.register_table(f"db.{table_name}", str(folder), location=str(tmp_path / "projection" / table_name))
    assert t.import_notes == ()
    assert [s.snapshot_id for s in t.snapshots()] == snapshots
    for sid in snapshots:
        assert icelog_rows(t, sid) == expected[sid], f"icelog, snapshot {sid}"
        assert spark_rows(spark, t.metadata_location, sid) == expected[sid], f"projection, snapshot {sid}"
    return cat, t, expected


def create_keyed_table(spark, name: str) -> None:
    spark.sql(f"""CREATE TABLE {name} (id bigint NOT NULL, category string, v string) USING iceberg
                  PARTITIONED BY (category) TBLPROPERTIES ('format-version'='2')""")
    spark.sql(f"ALTER TABLE {name} SET IDENTIFIER FIELDS id")


def test_equality_deletes_committed_through_the_java_api(spark, tmp_warehouse: Path, warehouse_catalog: str,
                                                         tmp_path: Path) -> None:
    name = f"{warehouse_catalog}.db.keyed"
    create_keyed_table(spark, name)
    spark.sql(f"INSERT INTO {name} VALUES (1, 'a', 'x1'), (2, 'a', 'x2'), (3, 'b', 'x3'), (4, 'b', 'x4')")
    folder = tmp_warehouse / "db" / "keyed"
    java = JavaTable(spark, folder)
    # deletes id 2 in partition a; id 3 is named in a's file but lives in b, so it stays
    java.row_delta(deletes=[java.equality_delete_file([2, 3], partition_path="category=a")])
    spark.sql(f"INSERT INTO {name} VALUES (2, 'a', 'again'), (5, 'b', 'x5')")  # newer than the delete: stays
    java.row_delta(deletes=[java.equality_delete_file([4, 5], partition_path="category=b")])
    assert sorted(r["id"] for r in spark.read.format("iceberg").load(name).collect()) == [1, 2, 3]

    cat, t, _ = register_and_compare(spark, name, folder, tmp_path, "keyed")
    deletes = [f for f in cat.store.live_files(t.state, t.current_snapshot().snapshot_id)
               if f.content == DataFileContent.EQUALITY_DELETES]
    assert len(deletes) == 2 and all(f.equality_ids == (java.field_id("id"),) for f in deletes)
    assert list(t.state.schema.identifier_field_ids) == [java.field_id("id")]


def test_global_equality_deletes_on_a_partitioned_table(spark, tmp_warehouse: Path, warehouse_catalog: str,
                                                        tmp_path: Path) -> None:
    name = f"{warehouse_catalog}.db.global"
    create_keyed_table(spark, name)
    spark.sql(f"INSERT INTO {name} VALUES (1, 'a', 'x1'), (2, 'a', 'x2'), (3, 'b', 'x3')")
    # give the table an unpartitioned spec (its id 1), then partition by category again (spec 0 is reused)
    spark.sql(f"ALTER TABLE {name} DROP PARTITION FIELD category")
    spark.sql(f"ALTER TABLE {name} ADD PARTITION FIELD category")
    folder = tmp_warehouse / "db" / "global"
    java = JavaTable(spark, folder)
    unpartitioned = [sid for sid, s in dict(java.table.specs()).items() if s.isUnpartitioned()]
    assert unpartitioned and not java.spec().isUnpartitioned()
    # one delete file of the unpartitioned spec reaches every partition
    java.row_delta(deletes=[java.equality_delete_file([2, 3], spec_id=unpartitioned[0])])
    spark.sql(f"INSERT INTO {name} VALUES (3, 'c', 'later')")
    assert sorted(r["id"] for r in spark.read.format("iceberg").load(name).collect()) == [1, 3]

    cat, t, _ = register_and_compare(spark, name, folder, tmp_path, "global")
    [delete] = [f for f in cat.store.live_files(t.state, t.current_snapshot().snapshot_id)
                if f.content == DataFileContent.EQUALITY_DELETES]
    assert t.state.spec_by_id(delete.spec_id).is_unpartitioned


def test_flink_style_upserts(spark, tmp_warehouse: Path, warehouse_catalog: str, tmp_path: Path) -> None:
    """Flink's sink commits each checkpoint as one RowDelta: equality deletes of the upserted keys plus their new
    rows, with the job id and checkpoint in the summary."""
    name = f"{warehouse_catalog}.db.flink"
    create_keyed_table(spark, name)
    spark.sql(f"ALTER TABLE {name} SET TBLPROPERTIES ('write.upsert.enabled'='true')")
    folder = tmp_warehouse / "db" / "flink"
    java = JavaTable(spark, folder)
    job = str(uuid.uuid4())
    checkpoints = [
        {"a": ([1, 2], [1, 2]), "b": ([3], [3])},   # first checkpoint: the deletes find nothing older
        {"a": ([2], [2]), "b": ([3, 4], [3, 4])},    # upserts of 2 and 3, insert of 4
        {"a": ([1], [1])},                           # upsert of 1
    ]
    for n, checkpoint in enumerate(checkpoints, start=1):
        data, deletes = [], []
        for category, (upserted, deleted) in checkpoint.items():
            data.append(java.data_file(rows_of(upserted, category, f"c{n}-"), f"category={category}"))
            deletes.append(java.equality_delete_file(deleted, partition_path=f"category={category}"))
        java.row_delta(data=data, deletes=deletes,
                       summary={"flink.job-id": job, "flink.max-committed-checkpoint-id": str(n),
                                "flink.operator-id": "e883208d19e3c34f8aaf2a3168a63337"})
    got = {r["id"]: r["v"] for r in spark.read.format("iceberg").load(name).collect()}
    assert got == {1: "c3-1", 2: "c2-2", 3: "c2-3", 4: "c2-4"}

    _, t, _ = register_and_compare(spark, name, folder, tmp_path, "flink")
    summary = dict(t.current_snapshot().summary)
    assert summary["flink.job-id"] == job and summary["flink.max-committed-checkpoint-id"] == "3"
    assert [s.operation for s in t.snapshots()] == ["overwrite"] * 3


def test_trino_style_metadata_names(spark, tmp_warehouse: Path, warehouse_catalog: str, tmp_path: Path) -> None:
    """Trino (and other metastore catalogs) names metadata files ``NNNNN-<uuid>.metadata.json`` and writes no
    version hint: the highest number is the current metadata."""
    name = f"{warehouse_catalog}.db.trino"
    create_keyed_table(spark, name)
    spark.sql(f"INSERT INTO {name} VALUES (1, 'a', 'x1'), (2, 'b', 'x2')")
    folder = tmp_warehouse / "db" / "trino"
    java = JavaTable(spark, folder)
    java.row_delta(deletes=[java.equality_delete_file([1], partition_path="category=a")])
    spark.sql(f"INSERT INTO {name} VALUES (3, 'a', 'x3')")
    snapshots = spark_snapshots(spark, name)
    expected = {sid: spark_rows(spark, name, sid) for sid in snapshots}
    metadata = folder / "metadata"
    (metadata / "version-hint.text").unlink()
    for p in metadata.iterdir():
        m = re.fullmatch(r"v(\d+)\.metadata\.json", p.name)
        if m:
            p.rename(metadata / f"{int(m.group(1)):05d}-{uuid.uuid4()}.metadata.json")
    assert not any(p.name.startswith("v") for p in metadata.iterdir())

    cat = Catalog.open(tmp_path / "icelog")
    cat.create_namespace("db")
    t = cat.register_table("db.trino", str(folder), location=str(tmp_path / "projection"))
    assert [s.snapshot_id for s in t.snapshots()] == snapshots
    for sid in snapshots:
        assert icelog_rows(t, sid) == expected[sid], sid
        assert spark_rows(spark, t.metadata_location, sid) == expected[sid], sid
