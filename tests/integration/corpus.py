"""A corpus of Iceberg tables written by other engines, for registration tests: each entry is a table folder, the
writer's own read of every snapshot, and how the table was made.

Layer: tests (helpers; no test functions). Writers: Spark 3.5.6 with the Iceberg 1.10.2 runtime through a Hadoop
catalog (format v1, v2 and v3; copy-on-write and merge-on-read; partition and schema evolution; compaction and
expiry; gzip metadata; snappy, zstd and uncompressed manifests; tables migrated from Hive files), PyIceberg 0.12
through a SqlCatalog, Iceberg's Java API called directly (HadoopTables; v2 and v3), and DuckDB 1.4.4 through icelog's REST catalog (its data files and manifests, copied
elsewhere so they are taken over with ``relocate``).
"""

from __future__ import annotations

import datetime as dt
import decimal
import shutil
from pathlib import Path
from typing import Any, Callable

import attrs
import pyarrow as pa
import pyarrow.orc as orc


@attrs.frozen(kw_only=True)
class CorpusTable:
    """One table of the corpus.

    :param name: what it is
    :param writer: who wrote it
    :param folder: the table folder (its metadata/ holds the writer's metadata files)
    :param metadata: the writer's newest metadata file
    :param expected: snapshot id -> the writer's own rows at that snapshot (canonical, sorted)
    :param relocate: old prefix -> new prefix, for a table copied away from where it was written
    """

    name: str
    writer: str
    folder: str
    metadata: str
    expected: dict[int, list[tuple]]
    relocate: dict[str, str] | None = None


def canon_value(v: Any) -> Any:
    if isinstance(v, dict):
        return tuple(sorted((k, canon_value(x)) for k, x in v.items()))
    if isinstance(v, (list, tuple)):
        return tuple(canon_value(x) for x in v)
    if isinstance(v, dt.datetime):
        if v.tzinfo is not None:
            v = v.astimezone(dt.timezone.utc).replace(tzinfo=None)
        return v.isoformat()
    if isinstance(v, (dt.date, dt.time)):
        return v.isoformat()
    if isinstance(v, decimal.Decimal):
        return str(v.normalize())
    if isinstance(v, float):
        return round(v, 9)
    if hasattr(v, "asDict"):
        return canon_value(v.asDict(recursive=True))
    return v


def canon_rows(rows: list[dict[str, Any]]) -> list[tuple]:
    return sorted((tuple(sorted((k, canon_value(v)) for k, v in r.items())) for r in rows), key=repr)


# ---------------------------------------------------------------- Spark


def _spark_table(spark: Any, catalog: str, warehouse: Path, table: str, statements: list[str],
                 writer: str = "spark") -> CorpusTable:
    full = f"{catalog}.db.{table}"
    for sql in statements:
        spark.sql(sql.format(t=full, c=catalog, n=f"db.{table}")).collect()
    snapshots = [r["snapshot_id"] for r in spark.sql(f"SELECT snapshot_id FROM {full}.snapshots").collect()]
    expected = {sid: canon_rows([r.asDict(recursive=True) for r in
                                 spark.sql(f"SELECT * FROM {full} VERSION AS OF {sid}").collect()])
                for sid in snapshots}
    folder = warehouse / "db" / table
    hint = int((folder / "metadata" / "version-hint.text").read_text())
    metadata = next(str(p) for p in (folder / "metadata").glob(f"v{hint}.*metadata.json"))
    return CorpusTable(name=table, writer=writer, folder=str(folder), metadata=metadata, expected=expected)


#: a format v3 table whose history has every deletion vector case Spark writes: one Puffin file holding the vectors
#: of several data files, a vector replaced by a merged one, an update (row lineage carried), compaction (vectors
#: removed, row ids kept in the rewritten file) and an append after it
V3_STATEMENTS = [
    "CREATE TABLE {t} (id bigint, v string) USING iceberg TBLPROPERTIES ('format-version'='3', "
    "'write.delete.mode'='merge-on-read', 'write.update.mode'='merge-on-read', 'write.merge.mode'='merge-on-read')",
    "INSERT INTO {t} SELECT /*+ REPARTITION(3) */ id, cast(id as string) FROM range(30)",
    "DELETE FROM {t} WHERE id % 4 = 0",
    "DELETE FROM {t} WHERE id = 5",
    "UPDATE {t} SET v = 'x' WHERE id = 7",
    "CALL {c}.system.rewrite_data_files(table => '{n}', options => map('min-input-files', '1'))",
    "INSERT INTO {t} VALUES (100, 'new')",
]


def spark_tables(spark: Any, catalog: str, warehouse: Path, scratch: Path) -> list[CorpusTable]:
    out = []
    out.append(_spark_table(spark, catalog, warehouse, "v2_merge_on_read", [
        "CREATE TABLE {t} (id bigint, cat string, ts timestamp, amount decimal(10,2)) USING iceberg "
        "PARTITIONED BY (cat, bucket(4, id)) TBLPROPERTIES ('format-version'='2', "
        "'write.delete.mode'='merge-on-read', 'write.update.mode'='merge-on-read')",
        "INSERT INTO {t} VALUES (1, 'a', TIMESTAMP '2024-01-01 10:00:00', 1.50), "
        "(2, 'b', TIMESTAMP '2024-01-02 11:00:00', 2.25), (3, 'a', TIMESTAMP '2024-01-03 12:00:00', 3.00)",
        "DELETE FROM {t} WHERE id = 2",
        "UPDATE {t} SET amount = 9.99 WHERE id = 3",
        "ALTER TABLE {t} ADD COLUMN note string",
        "INSERT INTO {t} VALUES (4, 'c', TIMESTAMP '2024-01-04 13:00:00', 4.00, 'late')",
    ]))
    out.append(_spark_table(spark, catalog, warehouse, "v2_copy_on_write", [
        "CREATE TABLE {t} (id bigint, name string) USING iceberg TBLPROPERTIES ('format-version'='2')",
        "INSERT INTO {t} VALUES (1, 'a'), (2, 'b'), (3, 'c')",
        "DELETE FROM {t} WHERE id = 1",
        "MERGE INTO {t} t USING (SELECT 3 AS id, 'z' AS name UNION ALL SELECT 5, 'e') s ON t.id = s.id "
        "WHEN MATCHED THEN UPDATE SET t.name = s.name WHEN NOT MATCHED THEN INSERT *",
    ]))
    out.append(_spark_table(spark, catalog, warehouse, "v1_overwrite", [
        "CREATE TABLE {t} (id bigint, day date) USING iceberg PARTITIONED BY (day) "
        "TBLPROPERTIES ('format-version'='1')",
        "INSERT INTO {t} VALUES (1, DATE '2024-01-01'), (2, DATE '2024-01-02')",
        "INSERT OVERWRITE {t} VALUES (3, DATE '2024-01-02')",
    ]))
    out.append(_spark_table(spark, catalog, warehouse, "compacted_and_expired", [
        "CREATE TABLE {t} (id bigint, cat string) USING iceberg TBLPROPERTIES ('format-version'='2', "
        "'write.delete.mode'='merge-on-read')",
        "INSERT INTO {t} VALUES (1, 'a')", "INSERT INTO {t} VALUES (2, 'b')", "INSERT INTO {t} VALUES (3, 'a')",
        "DELETE FROM {t} WHERE id = 3",
        "CALL {c}.system.rewrite_data_files(table => '{n}', options => map('min-input-files', '1', "
        "'delete-file-threshold', '1'))",
        "CALL {c}.system.expire_snapshots(table => '{n}', older_than => TIMESTAMP '2999-01-01 00:00:00', "
        "retain_last => 2)",
    ]))
    out.append(_spark_table(spark, catalog, warehouse, "partition_evolution", [
        "CREATE TABLE {t} (id bigint, ts timestamp) USING iceberg TBLPROPERTIES ('format-version'='2')",
        "INSERT INTO {t} VALUES (1, TIMESTAMP '2024-01-01 00:00:00')",
        "ALTER TABLE {t} ADD PARTITION FIELD days(ts)",
        "INSERT INTO {t} VALUES (2, TIMESTAMP '2024-02-01 00:00:00')",
        "ALTER TABLE {t} DROP PARTITION FIELD days(ts)",
        "ALTER TABLE {t} ADD PARTITION FIELD bucket(2, id)",
        "INSERT INTO {t} VALUES (3, TIMESTAMP '2024-03-01 00:00:00')",
    ]))
    out.append(_spark_table(spark, catalog, warehouse, "gzip_metadata_snappy_manifests", [
        "CREATE TABLE {t} (id bigint) USING iceberg TBLPROPERTIES ('format-version'='2', "
        "'write.metadata.compression-codec'='gzip', 'write.avro.compression-codec'='snappy')",
        "INSERT INTO {t} VALUES (1), (2)",
        "ALTER TABLE {t} SET TBLPROPERTIES ('write.avro.compression-codec'='zstd')",
        "INSERT INTO {t} VALUES (3)",
        "ALTER TABLE {t} SET TBLPROPERTIES ('write.avro.compression-codec'='uncompressed')",
        "DELETE FROM {t} WHERE id = 1",
    ]))
    out.append(_spark_table(spark, catalog, warehouse, "v3_deletion_vectors", [
        "CREATE TABLE {t} (id bigint, cat string) USING iceberg TBLPROPERTIES ('format-version'='3', "
        "'write.delete.mode'='merge-on-read')",
        "INSERT INTO {t} SELECT id, CASE WHEN id % 2 = 0 THEN 'even' ELSE 'odd' END FROM range(20)",
        "DELETE FROM {t} WHERE id % 5 = 0",
        "DELETE FROM {t} WHERE id = 7",
    ]))
    out.append(_spark_table(spark, catalog, warehouse, "v3_multi_blob_puffin_compaction", V3_STATEMENTS))
    hive = scratch / "hive_orc"
    hive.mkdir(parents=True, exist_ok=True)
    orc.write_table(pa.table({"id": pa.array([1, 2], pa.int64()),
                              "info": pa.array([{"k": "a"}, None], pa.struct([("k", pa.string())]))}),
                    str(hive / "000000_0"))
    out.append(_spark_table(spark, catalog, warehouse, "migrated_from_hive", [
        "CREATE TABLE {t} (id bigint, info struct<k: string>) USING iceberg TBLPROPERTIES ('format-version'='2')",
        f"CALL {{c}}.system.add_files(table => '{{n}}', source_table => '`orc`.`{hive}`')",
        "INSERT INTO {t} VALUES (3, named_struct('k', 'c'))",
    ]))
    return out


# ---------------------------------------------------------------- Iceberg's Java API


def java_api_tables(spark: Any, folder: Path) -> list[CorpusTable]:
    """Tables made through Iceberg's Java API itself (HadoopTables, AppendFiles, DeleteFiles, UpdateSchema, through
    the Spark session's JVM), over Parquet files pyarrow wrote with field ids: v2 and v3 (row ids assigned by Java)."""
    import pyarrow.parquet as pq

    jvm = spark._jvm
    iceberg = jvm.org.apache.iceberg
    tables = iceberg.hadoop.HadoopTables(spark._jsc.hadoopConfiguration())
    schema = iceberg.SchemaParser.fromJson(
        '{"type":"struct","schema-id":0,"fields":[{"id":1,"name":"id","required":false,"type":"long"},'
        '{"id":2,"name":"name","required":false,"type":"string"}]}')
    spec = iceberg.PartitionSpec.unpartitioned()
    out = []
    for version in (2, 3):
        location = folder / f"java_api_v{version}"
        (location / "data").mkdir(parents=True)
        props = jvm.java.util.HashMap()
        props.put("format-version", str(version))
        table = tables.create(schema, spec, props, str(location))

        def data_file(name: str, ids: list[int]) -> Any:
            path = location / "data" / name
            arrow_schema = pa.schema([pa.field("id", pa.int64(), metadata={"PARQUET:field_id": "1"}),
                                      pa.field("name", pa.string(), metadata={"PARQUET:field_id": "2"})])
            pq.write_table(pa.table({"id": ids, "name": [f"n{i}" for i in ids]}, schema=arrow_schema), str(path))
            return (iceberg.DataFiles.builder(spec).withPath(str(path)).withFileSizeInBytes(path.stat().st_size)
                    .withRecordCount(len(ids)).withFormat("PARQUET").build())

        first, second, third = data_file("a.parquet", [1, 2]), data_file("b.parquet", [3, 4]), data_file(
            "c.parquet", [5])
        table.newAppend().appendFile(first).appendFile(second).commit()
        table.newFastAppend().appendFile(third).commit()
        table.newDelete().deleteFile(first).commit()
        table.updateSchema().addColumn("extra", getattr(iceberg.types, "Types$StringType").get()).commit()
        table.newOverwrite().deleteFile(second).addFile(data_file("d.parquet", [6, 7])).commit()
        table.refresh()
        snapshots = [s.snapshotId() for s in table.snapshots()]
        expected = {sid: canon_rows([r.asDict(recursive=True) for r in spark.read.format("iceberg").option(
            "snapshot-id", sid).load(str(location)).collect()]) for sid in snapshots}
        hint = int((location / "metadata" / "version-hint.text").read_text())
        out.append(CorpusTable(name=f"java_api_v{version}", writer="iceberg-java-api", folder=str(location),
                               metadata=str(location / "metadata" / f"v{hint}.metadata.json"), expected=expected))
    return out


# ---------------------------------------------------------------- PyIceberg


def pyiceberg_tables(folder: Path) -> list[CorpusTable]:
    from pyiceberg.catalog.sql import SqlCatalog

    folder.mkdir(parents=True, exist_ok=True)
    catalog = SqlCatalog("writer", uri=f"sqlite:///{folder / 'pyiceberg.db'}", warehouse=f"file://{folder}")
    catalog.create_namespace("db")
    out = []
    schema = pa.schema([("id", pa.int64()), ("name", pa.string())])
    t = catalog.create_table("db.appends_and_deletes", schema=schema)
    t.append(pa.table({"id": pa.array([1, 2, 3], pa.int64()), "name": ["a", "b", "c"]}))
    t.delete("id = 2")
    t.overwrite(pa.table({"id": pa.array([9], pa.int64()), "name": ["z"]}))
    t.append(pa.table({"id": pa.array([10], pa.int64()), "name": ["y"]}))
    out.append(_pyiceberg_entry(catalog, "db.appends_and_deletes"))
    t = catalog.create_table("db.schema_evolution", schema=schema)
    t.append(pa.table({"id": pa.array([1], pa.int64()), "name": ["a"]}))
    with t.update_schema() as update:
        update.add_column("score", __import__("pyiceberg.types", fromlist=["DoubleType"]).DoubleType())
        update.rename_column("name", "label")
    t = catalog.load_table("db.schema_evolution")
    t.append(pa.table({"id": pa.array([2], pa.int64()), "label": ["b"], "score": [0.5]}))
    out.append(_pyiceberg_entry(catalog, "db.schema_evolution"))
    return out


def _pyiceberg_entry(catalog: Any, identifier: str) -> CorpusTable:
    t = catalog.load_table(identifier)
    expected = {s.snapshot_id: canon_rows(t.scan(snapshot_id=s.snapshot_id).to_arrow().to_pylist())
                for s in t.snapshots()}
    location = t.location().removeprefix("file://")
    return CorpusTable(name=identifier.split(".")[1], writer="pyiceberg", folder=location,
                       metadata=t.metadata_location.removeprefix("file://"), expected=expected)


# ---------------------------------------------------------------- DuckDB


def duckdb_tables(folder: Path, connect: Callable[[], Any]) -> list[CorpusTable]:
    """A table DuckDB writes through icelog's REST catalog (its data files and manifests), then copied away."""
    from engine import Catalog
    from tools.rest_server import running_server

    warehouse = folder / "duckdb-warehouse"
    with Catalog.open(warehouse) as cat:
        cat.create_namespace("db")
    with running_server(warehouse) as server:
        con = connect()
        con.execute(f"ATTACH 'wh' AS ice (TYPE iceberg, ENDPOINT '{server.uri}', AUTHORIZATION_TYPE 'oauth2', "
                    f"TOKEN '{server.token}')")
        con.execute("CREATE TABLE ice.db.events (id BIGINT, name VARCHAR)")
        con.execute("INSERT INTO ice.db.events VALUES (1, 'a'), (2, 'b'), (3, 'c')")
        con.execute("DELETE FROM ice.db.events WHERE id = 2")
        con.execute("INSERT INTO ice.db.events VALUES (4, 'd')")
        snapshots = [r[0] for r in con.execute(
            "SELECT snapshot_id FROM iceberg_snapshots(ice.db.events)").fetchall()]
        expected = {sid: canon_rows([{"id": a, "name": b} for a, b in con.execute(
            f"SELECT id, name FROM ice.db.events AT (VERSION => {sid})").fetchall()]) for sid in snapshots}
        con.close()
    with Catalog.open(warehouse) as cat:
        table = cat.load_table("db.events")
        source, metadata = table.state.location, table.metadata_location
    copy = folder / "duckdb-copied" / "events"
    shutil.copytree(source, copy)
    return [CorpusTable(name="events", writer="duckdb", folder=str(copy),
                        metadata=str(copy / "metadata" / Path(metadata).name), expected=expected,
                        relocate={source: str(copy)})]


# ---------------------------------------------------------------- spellings and id ranges of other writers


def respelled_copy(table: CorpusTable, folder: Path) -> CorpusTable:
    """``table`` copied to ``folder``, its position delete files naming their data files as an HDFS writer would
    (``hdfs://namenode:8020/<path>``): taken over with ``relocate`` from the original prefix."""
    import pyarrow.parquet as pq

    copy = folder / Path(table.folder).name
    shutil.copytree(table.folder, copy)
    for delete_file in (copy / "data").rglob("*-deletes.parquet"):
        rows = pq.read_table(delete_file)
        spelled = [f"hdfs://namenode:8020{p.removeprefix('file:')}" for p in rows.column("file_path").to_pylist()]
        pq.write_table(rows.set_column(0, rows.schema.field(0), pa.array(spelled, pa.string())), delete_file)
    return attrs.evolve(table, name=f"{table.name}_respelled", writer=f"{table.writer}+hdfs-spelling",
                        folder=str(copy), metadata=str(copy / "metadata" / Path(table.metadata).name),
                        relocate={table.folder: str(copy)})


def unsigned_ids(table: CorpusTable) -> CorpusTable:
    """``table`` with a newer metadata file whose snapshot ids are past a signed 64-bit long (as some writers
    put them in metadata.json); the manifests are unchanged."""
    import json

    doc = json.loads(Path(table.metadata).read_text())
    shifted = {s["snapshot-id"]: s["snapshot-id"] + (1 << 63) for s in doc["snapshots"]}

    def fix(o: Any) -> Any:
        if isinstance(o, dict):
            return {k: (shifted.get(v, v) if k in ("snapshot-id", "parent-snapshot-id", "current-snapshot-id")
                        else fix(v)) for k, v in o.items()}
        return [fix(x) for x in o] if isinstance(o, list) else o

    path = Path(table.metadata).with_name("v900.metadata.json")
    path.write_text(json.dumps(fix(doc)))
    return attrs.evolve(table, name=f"{table.name}_unsigned_ids", writer=f"{table.writer}+unsigned-ids",
                        metadata=str(path), expected={shifted[k]: v for k, v in table.expected.items()})
