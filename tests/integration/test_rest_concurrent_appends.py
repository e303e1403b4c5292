"""A DuckDB client and a Spark client appending to one table through ``icelog serve`` at the same time: every
INSERT lands once, and the table icelog, Spark and DuckDB read afterwards holds all of them.

Layer: tests (DuckDB 1.4.4 and Spark 3.5 with the Iceberg 1.10 runtime as REST clients of one in-process server).
"""

from __future__ import annotations

import threading
import uuid
from pathlib import Path
from typing import Any

from engine import Catalog
from tools.rest_server import running_server

INSERTS = 8


def test_duckdb_and_spark_append_to_one_table_at_once(spark: Any, tmp_path: Path) -> None:
    from tests.conftest import duckdb_connect

    warehouse = tmp_path / "wh"
    with Catalog.open(warehouse) as cat:
        cat.create_namespace("db")
    errors: list[BaseException] = []
    with running_server(warehouse) as server:
        name = f"rest_{uuid.uuid4().hex[:8]}"
        for key, value in {"": "org.apache.iceberg.spark.SparkCatalog", ".type": "rest", ".uri": server.uri,
                           ".token": server.token, ".cache-enabled": "false"}.items():
            spark.conf.set(f"spark.sql.catalog.{name}{key}", value)
        spark.sql(f"CREATE TABLE {name}.db.t (id bigint, writer string) USING iceberg").collect()
        con = duckdb_connect()
        con.execute(f"ATTACH 'warehouse' AS ice (TYPE iceberg, ENDPOINT '{server.uri}', AUTHORIZATION_TYPE 'oauth2', "
                    f"TOKEN '{server.token}')")
        start = threading.Barrier(2)

        def duckdb_inserts() -> None:
            try:
                start.wait()
                for i in range(INSERTS):
                    con.execute(f"INSERT INTO ice.db.t VALUES ({1000 + i}, 'duckdb')")
            except BaseException as e:  # noqa: BLE001 - reported below
                errors.append(e)

        def spark_inserts() -> None:
            try:
                start.wait()
                for i in range(INSERTS):
                    spark.sql(f"INSERT INTO {name}.db.t VALUES ({i}, 'spark')").collect()
            except BaseException as e:  # noqa: BLE001 - reported below
                errors.append(e)

        threads = [threading.Thread(target=duckdb_inserts), threading.Thread(target=spark_inserts)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        assert errors == []
        expected = sorted([(i, "spark") for i in range(INSERTS)] + [(1000 + i, "duckdb") for i in range(INSERTS)])
        assert sorted(con.execute("SELECT id, writer FROM ice.db.t").fetchall()) == expected
        assert sorted((r["id"], r["writer"]) for r in spark.sql(f"SELECT * FROM {name}.db.t").collect()) == expected
        con.close()
    with Catalog.open(warehouse) as cat:
        t = cat.load_table("db.t")
        assert sorted((r["id"], r["writer"]) for r in t.scan().to_arrow().to_pylist()) == expected
        assert len(t.snapshots()) == 2 * INSERTS                      # one snapshot per INSERT, none twice
        assert cat.verify("db.t") == []


def test_a_spark_merge_that_only_inserts_is_never_rebased_over_a_conflicting_append(spark: Any, tmp_path: Path,
                                                                                     monkeypatch) -> None:
    """A MERGE that matched no row commits an append, which Java's retry validates against what landed since its
    scan (serializable isolation). The server must not rebase it: a concurrent append of the same key makes the
    MERGE fail, instead of both rows landing."""
    import pyarrow as pa

    import tools.rest_commits as rest_commits

    schema = pa.schema([("id", pa.int64()), ("v", pa.string())])
    warehouse = tmp_path / "wh"
    with Catalog.open(warehouse) as cat:
        cat.create_namespace("db")
        cat.create_table("db.t", schema=schema).append(pa.table({"id": [1], "v": ["old"]}, schema=schema))
    commit = rest_commits._commit
    landed_meanwhile: list[int] = []

    def another_append_first(cat, prepared):  # between the MERGE's scan and its commit
        if not landed_meanwhile:
            landed_meanwhile.append(1)
            cat.load_table("db.t").append(pa.table({"id": [2], "v": ["concurrent"]}, schema=schema))
        return commit(cat, prepared)

    monkeypatch.setattr(rest_commits, "_commit", another_append_first)
    with running_server(warehouse) as server:
        name = f"rest_{uuid.uuid4().hex[:8]}"
        for key, value in {"": "org.apache.iceberg.spark.SparkCatalog", ".type": "rest", ".uri": server.uri,
                           ".token": server.token, ".cache-enabled": "false"}.items():
            spark.conf.set(f"spark.sql.catalog.{name}{key}", value)
        refused = None
        try:
            spark.sql(f"MERGE INTO {name}.db.t t USING (SELECT 2L AS id, 'merge' AS v) s ON t.id = s.id "
                      f"WHEN MATCHED THEN UPDATE SET v = s.v WHEN NOT MATCHED THEN INSERT *").collect()
        except Exception as e:  # noqa: BLE001 - Spark's Py4J error carries Java's ValidationException
            refused = str(e)
        assert refused is not None and "conflicting files" in refused, refused
        assert sorted(tuple(r) for r in spark.sql(f"SELECT id, v FROM {name}.db.t").collect()) == [
            (1, "old"), (2, "concurrent")]
    with Catalog.open(warehouse) as cat:
        assert cat.verify("db.t") == []
