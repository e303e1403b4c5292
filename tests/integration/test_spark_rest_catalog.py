"""Spark SQL through icelog's REST catalog server: every statement commits through the log.

Layer: tests. Spark (Iceberg 1.10 runtime, ``type=rest``) talks to a real server over HTTP; after each
statement the log holds the commit as typed events, and icelog's own scan and PyIceberg's read equal Spark's.
"""

from __future__ import annotations

import datetime
import itertools
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest
from pyiceberg.catalog.rest import RestCatalog

from engine import Catalog
from engine.state.events import FileChange
from tools.rest_server import running_server

TOKEN = "spark-token"
_names = itertools.count()


def rest_catalog(spark: Any, url: str) -> str:
    """Register a fresh REST catalog on the shared session (a new name per test: Spark caches catalogs)."""
    name = f"rest{next(_names)}"
    conf = {"": "org.apache.iceberg.spark.SparkCatalog", ".type": "rest", ".uri": url, ".token": TOKEN,
            ".cache-enabled": "false"}
    for key, value in conf.items():
        spark.conf.set(f"spark.sql.catalog.{name}{key}", value)
    return name


@pytest.fixture
def server(tmp_warehouse: Path) -> Iterator[str]:
    with running_server(tmp_warehouse, TOKEN) as running:
        yield running.uri


def _norm(value: Any) -> Any:
    if isinstance(value, datetime.datetime) and value.tzinfo is not None:
        return value.astimezone(datetime.timezone.utc).replace(tzinfo=None)
    return value


def _rows(records: list[dict]) -> list[tuple]:
    return sorted(tuple(_norm(v) for v in r.values()) for r in records)


class Checker:
    """Runs statements and compares Spark's read with icelog's scan and PyIceberg's read after each one."""

    def __init__(self, spark: Any, warehouse: Path, url: str, catalog: str, table: str) -> None:
        self.spark, self.warehouse, self.catalog, self.table = spark, warehouse, catalog, table
        self.pyiceberg = RestCatalog("py", uri=url, token=TOKEN)

    @property
    def full(self) -> str:
        return f"{self.catalog}.{self.table}"

    def sql(self, statement: str) -> list[Any]:
        return self.spark.sql(statement.format(t=self.full, c=self.catalog)).collect()

    def events(self) -> list[str]:
        with Catalog.open(self.warehouse) as cat:
            return [e.type for e in cat.load_table(self.table).log()]

    def new_events(self, statement: str) -> list[str]:
        before = len(self.events())
        self.sql(statement)
        return self.events()[before:]

    def same_everywhere(self) -> list[tuple]:
        spark_rows = _rows([r.asDict() for r in self.sql("SELECT * FROM {t}")])
        with Catalog.open(self.warehouse) as cat:
            icelog_rows = _rows(cat.load_table(self.table).scan().to_arrow().to_pylist())
        pyiceberg_rows = _rows(self.pyiceberg.load_table(self.table).scan().to_arrow().to_pylist())
        assert icelog_rows == spark_rows
        assert pyiceberg_rows == spark_rows
        return spark_rows

    def verify(self) -> list[str]:
        with Catalog.open(self.warehouse) as cat:
            return cat.verify(self.table)


def _ids(rows: list[tuple]) -> list[int]:
    return [r[0] for r in rows]


def test_spark_sql_dml_commits_through_the_log(spark: Any, server: str, tmp_warehouse: Path) -> None:
    cat = rest_catalog(spark, server)
    c = Checker(spark, tmp_warehouse, server, cat, "db.events")
    c.sql("CREATE NAMESPACE {c}.db")
    c.sql("CREATE TABLE {t} (id bigint, ts timestamp, name string) USING iceberg "
          "PARTITIONED BY (bucket(4, id), days(ts))")
    assert c.events() == ["create-table"]
    assert c.new_events("INSERT INTO {t} SELECT id, TIMESTAMP '2026-01-01 10:00:00' + make_interval(0, 0, 0, "
                        "CAST(id % 2 AS INT)), concat('n', id) FROM range(1, 41)") == ["add-snapshot"]
    expected = set(range(1, 41))
    assert _ids(c.same_everywhere()) == sorted(expected)

    c.sql("ALTER TABLE {t} SET TBLPROPERTIES ('write.delete.mode'='merge-on-read', "
          "'write.update.mode'='merge-on-read', 'write.merge.mode'='merge-on-read')")
    assert c.events()[-1] == "set-properties"
    assert c.new_events("DELETE FROM {t} WHERE id = 2") == ["add-snapshot"]
    expected.discard(2)
    assert _ids(c.same_everywhere()) == sorted(expected)
    with Catalog.open(tmp_warehouse) as icelog:
        t = icelog.load_table("db.events")
        assert t.current_snapshot().summary_value("added-position-delete-files") == "1"
        assert t.inspect.delete_files().num_rows == 1

    assert c.new_events("UPDATE {t} SET name = 'z' WHERE id = 1") == ["add-snapshot"]
    c.sql("ALTER TABLE {t} SET TBLPROPERTIES ('write.delete.mode'='copy-on-write', "
          "'write.merge.mode'='copy-on-write')")
    assert c.new_events("DELETE FROM {t} WHERE id IN (3, 5)") == ["add-snapshot"]
    expected -= {3, 5}
    rows = c.same_everywhere()
    assert _ids(rows) == sorted(expected) and rows[0][2] == "z"
    assert c.new_events("MERGE INTO {t} t USING (SELECT 4L id, TIMESTAMP '2026-01-03 11:00:00' ts, 'dd' name "
                        "UNION ALL SELECT 50L, TIMESTAMP '2026-01-04 10:00:00', 'e') s ON t.id = s.id "
                        "WHEN MATCHED THEN UPDATE SET t.name = s.name WHEN NOT MATCHED THEN INSERT *") == \
        ["add-snapshot"]
    expected.add(50)
    rows = c.same_everywhere()
    assert _ids(rows) == sorted(expected)
    assert {r[0]: r[2] for r in rows}[4] == "dd"

    assert c.new_events("ALTER TABLE {t} ADD COLUMN note string") == ["add-schema", "set-current-schema"]
    assert c.new_events("ALTER TABLE {t} ADD PARTITION FIELD name") == ["add-spec", "set-default-spec"]
    assert c.new_events("INSERT INTO {t} VALUES (60, TIMESTAMP '2026-01-05 10:00:00', 'f', 'n')") == \
        ["add-snapshot"]
    expected.add(60)
    rows = c.same_everywhere()
    assert rows[-1] == (60, datetime.datetime(2026, 1, 5, 10), "f", "n")
    with Catalog.open(tmp_warehouse) as icelog:
        t = icelog.load_table("db.events")
        assert [f.name for f in t.spec().fields] == ["id_bucket", "ts_day", "name"]
        assert t.scan(where="name = 'f'").to_arrow().column("id").to_pylist() == [60]

    assert c.new_events("ALTER TABLE {t} CREATE BRANCH audit") == ["set-snapshot-ref"]
    c.sql("INSERT INTO {t}.branch_audit VALUES (70, TIMESTAMP '2026-01-06 10:00:00', 'g', null)")
    audit = _rows([r.asDict() for r in c.sql("SELECT * FROM {t} VERSION AS OF 'audit'")])
    with Catalog.open(tmp_warehouse) as icelog:
        assert _rows(icelog.load_table("db.events").scan(ref="audit").to_arrow().to_pylist()) == audit
    assert _ids(audit) == sorted(expected | {70})
    assert _ids(c.same_everywhere()) == sorted(expected)  # main did not move
    assert c.verify() == []


def test_spark_procedures_rollback_and_expire(spark: Any, server: str, tmp_warehouse: Path) -> None:
    cat = rest_catalog(spark, server)
    c = Checker(spark, tmp_warehouse, server, cat, "db.p")
    c.sql("CREATE NAMESPACE {c}.db")
    c.sql("CREATE TABLE {t} (id bigint, name string) USING iceberg")
    for i in range(1, 4):
        c.sql(f"INSERT INTO {{t}} VALUES ({i}, 'v{i}')")
    snapshots = [r[0] for r in c.sql("SELECT snapshot_id FROM {t}.snapshots ORDER BY committed_at")]
    assert c.new_events(f"CALL {{c}}.system.rollback_to_snapshot('db.p', {snapshots[0]})") == ["set-snapshot-ref"]
    assert _ids(c.same_everywhere()) == [1]
    c.sql("INSERT INTO {t} VALUES (9, 'v9')")
    expired = c.new_events("CALL {c}.system.expire_snapshots(table => 'db.p', "
                           "older_than => TIMESTAMP '2100-01-01 00:00:00', retain_last => 1)")
    assert expired == ["remove-snapshots"]
    assert _ids(c.same_everywhere()) == [1, 9]
    with Catalog.open(tmp_warehouse) as icelog:
        assert len(icelog.load_table("db.p").snapshots()) == 1
    assert c.verify() == []
    # write-audit-publish: a staged snapshot (no ref points at it), then cherry-picked onto main
    c.sql("ALTER TABLE {t} SET TBLPROPERTIES ('write.wap.enabled'='true')")
    spark.conf.set("spark.wap.id", "audit-1")
    try:
        c.sql("INSERT INTO {t} VALUES (20, 'staged')")
    finally:
        spark.conf.unset("spark.wap.id")
    assert _ids(c.same_everywhere()) == [1, 9]
    staged = [r[0] for r in c.sql("SELECT snapshot_id FROM {t}.snapshots WHERE summary['wap.id'] = 'audit-1'")]
    assert len(staged) == 1
    with Catalog.open(tmp_warehouse) as icelog:
        t = icelog.load_table("db.p")
        assert t.snapshot_by_id(staged[0]) is not None and set(t.refs()) == {"main"}
    c.sql(f"CALL {{c}}.system.cherrypick_snapshot('db.p', {staged[0]})")
    assert _ids(c.same_everywhere()) == [1, 9, 20]
    assert c.verify() == []

    ordered = c.new_events("ALTER TABLE {t} WRITE ORDERED BY id")  # Spark also sets write.distribution-mode
    assert ordered[:2] == ["add-sort-order", "set-default-sort-order"]
    with Catalog.open(tmp_warehouse) as icelog:
        assert str(icelog.load_table("db.p").sort_order()) == str(icelog.load_table("db.p").state.sort_orders[-1])
        assert icelog.load_table("db.p").sort_order().fields[0].source_id == 1

    c.sql("CREATE TABLE {c}.db.v1 (id bigint) USING iceberg TBLPROPERTIES ('format-version'='1')")
    c.sql("INSERT INTO {c}.db.v1 VALUES (1)")
    c.sql("ALTER TABLE {c}.db.v1 SET TBLPROPERTIES ('format-version'='2')")
    c.sql("ALTER TABLE {c}.db.v1 RENAME TO db.v2")  # Spark names the target within the catalog
    with Catalog.open(tmp_warehouse) as icelog:
        assert icelog.load_table("db.v2").state.format_version == 2
        assert [e.type for e in icelog.load_table("db.v2").log()][-1] == "upgrade-format-version"
        location = icelog.load_table("db.v2").location
    assert [r[0] for r in c.sql("SELECT id FROM {c}.db.v2")] == [1]
    c.sql("DROP TABLE {c}.db.v2 PURGE")
    c.sql("DROP TABLE {t}")
    with Catalog.open(tmp_warehouse) as icelog:
        assert icelog.list_tables("db") == []
    assert list(Path(location).rglob("*.parquet")) == []  # Spark deletes the reachable files itself


@pytest.mark.skipif("data_sequence_number" not in attrs.fields_dict(FileChange),
                    reason="needs per-file data sequence numbers (FileChange.data_sequence_number)")
def test_spark_rewrite_data_files(spark: Any, server: str, tmp_warehouse: Path) -> None:
    cat = rest_catalog(spark, server)
    c = Checker(spark, tmp_warehouse, server, cat, "db.r")
    c.sql("CREATE NAMESPACE {c}.db")
    c.sql("CREATE TABLE {t} (id bigint, name string) USING iceberg TBLPROPERTIES ("
          "'write.delete.mode'='merge-on-read')")
    for i in range(1, 5):
        c.sql(f"INSERT INTO {{t}} VALUES ({i}, 'v{i}'), ({i + 10}, 'w{i}')")
    c.sql("DELETE FROM {t} WHERE id = 12")
    before = c.same_everywhere()
    assert c.new_events("CALL {c}.system.rewrite_data_files(table => 'db.r', "
                        "options => map('min-input-files', '2'))") == ["add-snapshot"]
    assert c.same_everywhere() == before
    with Catalog.open(tmp_warehouse) as icelog:
        snap = icelog.load_table("db.r").current_snapshot()
        assert snap.operation == "replace"
        data_files = icelog.load_table("db.r").inspect.data_files().num_rows
    assert data_files == 1
    assert c.verify() == []


def test_spark_ctas_and_replace(spark: Any, server: str, tmp_warehouse: Path) -> None:
    cat = rest_catalog(spark, server)
    c = Checker(spark, tmp_warehouse, server, cat, "db.copy")
    c.sql("CREATE NAMESPACE {c}.db")
    c.sql("CREATE TABLE {c}.db.src (id bigint, name string) USING iceberg")
    c.sql("INSERT INTO {c}.db.src VALUES (1, 'a'), (2, 'b'), (3, 'c')")
    c.sql("CREATE TABLE {t} USING iceberg PARTITIONED BY (name) AS SELECT * FROM {c}.db.src")
    assert c.events()[:2] == ["create-table", "add-snapshot"]
    assert _ids(c.same_everywhere()) == [1, 2, 3]
    # the replacement keeps the partition source column: icelog binds every spec of a table to the current schema
    c.sql("CREATE OR REPLACE TABLE {t} USING iceberg AS SELECT id + 10 AS id, name FROM {c}.db.src WHERE id > 1")
    assert c.same_everywhere() == [(12, "b"), (13, "c")]
    assert c.verify() == []


def test_two_spark_clients_commit_at_once(spark: Any, server: str, tmp_warehouse: Path) -> None:
    # two Spark sessions (each its own catalog instance and table cache) on one SparkContext
    other = spark.newSession()
    first, second = rest_catalog(spark, server), rest_catalog(other, server)
    spark.sql(f"CREATE NAMESPACE {first}.db")
    spark.sql(f"CREATE TABLE {first}.db.c (id bigint, writer string) USING iceberg")
    errors: list[BaseException] = []

    def write(session: Any, catalog: str, start: int) -> None:
        try:
            for i in range(start, start + 3):
                session.sql(f"INSERT INTO {catalog}.db.c VALUES ({i}, '{catalog}')")
        except BaseException as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=write, args=(spark, first, 0)),
               threading.Thread(target=write, args=(other, second, 100))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    with Catalog.open(tmp_warehouse) as icelog:
        t = icelog.load_table("db.c")
        ids = sorted(t.scan().to_arrow().column("id").to_pylist())
        assert ids == [0, 1, 2, 100, 101, 102]
        assert [e.type for e in t.log()].count("add-snapshot") == 6
        assert icelog.verify("db.c") == []
    assert sorted(r[0] for r in other.sql(f"SELECT id FROM {second}.db.c").collect()) == ids
