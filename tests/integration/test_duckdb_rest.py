"""DuckDB 1.4.4 as a full client of ``icelog serve``: CREATE TABLE, INSERT, DELETE, UPDATE, CREATE TABLE AS and
DROP become log events; after each, icelog's scan, Spark and PyIceberg read the same rows and ``verify`` is
clean. A commit the server refuses leaves no "foreign" file behind: its files are the table's orphans.

Layer: tests. DuckDB loads its extensions from the files of the duckdb-ext-* packages (the ``duckdb_connection``
fixture).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterator

import pyarrow as pa
import pytest
import requests

from engine import Catalog
from tools.rest_server import RunningServer, running_server
from tools.spark import hadoop_catalog


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[Path, RunningServer]]:
    warehouse = tmp_path / "warehouse"
    with Catalog.open(warehouse) as cat:
        cat.create_namespace("db")
    with running_server(warehouse) as server:
        yield warehouse, server


def _attach(con: Any, server: RunningServer) -> None:
    con.execute(f"ATTACH 'warehouse' AS ice (TYPE iceberg, ENDPOINT '{server.uri}', AUTHORIZATION_TYPE 'oauth2', "
                f"TOKEN '{server.token}')")


def _three_ways(warehouse: Path, server: RunningServer, spark: Any, table: str) -> list[list[tuple]]:
    """The rows of ``db.<table>`` read by icelog's scan, Spark (Hadoop catalog on the warehouse) and PyIceberg
    (through the server); verify must be clean."""
    from pyiceberg.catalog.rest import RestCatalog

    with Catalog.open(warehouse) as cat:
        assert cat.verify(f"db.{table}") == []
        ours = sorted((r["id"], r["name"]) for r in cat.load_table(f"db.{table}").scan().to_arrow().to_pylist())
    name = hadoop_catalog(spark, warehouse)
    spark_rows = sorted((r["id"], r["name"]) for r in spark.sql(f"SELECT id, name FROM {name}.db.{table}").collect())
    py = RestCatalog("icelog", uri=server.uri, token=server.token).load_table(f"db.{table}")
    py_rows = sorted((r["id"], r["name"]) for r in py.scan().to_arrow().to_pylist())
    return [ours, spark_rows, py_rows]


def test_every_duckdb_statement_becomes_log_events(served: tuple[Path, RunningServer], duckdb_connection: Any,
                                                   spark: Any) -> None:
    warehouse, server = served
    con = duckdb_connection
    _attach(con, server)

    def check(table: str, expected: list[tuple]) -> None:
        duck = sorted(con.execute(f"SELECT id, name FROM ice.db.{table}").fetchall())
        assert duck == expected
        assert _three_ways(warehouse, server, spark, table) == [expected] * 3

    con.execute("CREATE TABLE ice.db.t (id BIGINT, name VARCHAR)")
    with Catalog.open(warehouse) as cat:
        assert cat.table_exists("db.t")
    con.execute("INSERT INTO ice.db.t VALUES (1, 'a'), (2, 'b'), (3, 'c')")
    check("t", [(1, "a"), (2, "b"), (3, "c")])
    con.execute("DELETE FROM ice.db.t WHERE id = 2")
    check("t", [(1, "a"), (3, "c")])
    con.execute("UPDATE ice.db.t SET name = 'z' WHERE id = 3")
    check("t", [(1, "a"), (3, "z")])
    con.execute("CREATE TABLE ice.db.copy AS SELECT * FROM ice.db.t")
    check("copy", [(1, "a"), (3, "z")])
    with Catalog.open(warehouse) as cat:
        log = cat.load_table("db.t").log()
        assert [e.actor for e in log if e.type == "add-snapshot"] == ["rest"] * 3
        assert [e.payload.get("operation") for e in log if e.type == "add-snapshot"][0] == "append"
    con.execute("DROP TABLE ice.db.copy")
    with Catalog.open(warehouse) as cat:
        assert not cat.table_exists("db.copy")
        assert cat.list_tables("db") == [("db", "t")]


@pytest.mark.parametrize("statement", ["INSERT INTO ice.db.pe VALUES (3, 'c')", "DELETE FROM ice.db.pe WHERE id = 1"])
def test_a_manifest_whose_header_and_list_disagree_on_its_spec_is_refused(served: tuple[Path, RunningServer],
                                                                           duckdb_connection: Any,
                                                                           statement: str) -> None:
    """DuckDB 1.4.4 writes a manifest of the current (unpartitioned) spec 1 into its list as spec 0 after a
    partition field was removed: the commit is refused before it lands (it landed and could never be published:
    the table then failed to load), and the table takes commits as before."""
    warehouse, server = served
    with Catalog.open(warehouse) as cat:
        t = cat.create_table("db.pe", schema=pa.schema([("id", pa.int64()), ("c", pa.string())]),
                             partition_by=["c"], properties={"write.delete.mode": "merge-on-read"})
        t.append(pa.table({"id": [1, 2], "c": ["a", "b"]}))
        t.update_spec().remove_field("c").commit()
        before = cat.store.log.head(t.uuid)
    _attach(duckdb_connection, server)
    with pytest.raises(Exception, match="its own header spec 1"):
        duckdb_connection.execute(statement)
    load = requests.get(f"{server.uri}/v1/namespaces/db/tables/pe", timeout=30,
                        headers={"Authorization": f"Bearer {server.token}"})
    assert load.status_code == 200, load.text
    with Catalog.open(warehouse) as cat:
        t = cat.load_table("db.pe")
        assert cat.store.log.head(t.uuid) == before and cat.verify("db.pe") == []
        t.append(pa.table({"id": [9], "c": ["z"]}))
        assert sorted(t.scan().to_arrow().column("id").to_pylist()) == [1, 2, 9]


def test_a_refused_commit_leaves_orphans_not_foreign_files(served: tuple[Path, RunningServer]) -> None:
    warehouse, server = served
    with Catalog.open(warehouse) as cat:
        t = cat.create_table("db.t", schema=pa.schema([("id", pa.int64())]))
        location = t.state.location
    bogus = Path(location) / "metadata" / "snap-123-1-bogus.avro"
    bogus.write_bytes(b"not an avro file")  # a client's manifest list the server cannot read
    body = {"requirements": [], "updates": [{"action": "add-snapshot", "snapshot": {
        "snapshot-id": 123, "timestamp-ms": 1_700_000_000_000, "manifest-list": str(bogus),
        "summary": {"operation": "append"}, "schema-id": 0}}]}
    answer = requests.post(f"{server.uri}/v1/namespaces/db/tables/t", data=json.dumps(body), timeout=30,
                           headers={"Authorization": f"Bearer {server.token}"})
    assert answer.status_code == 400, answer.text
    with Catalog.open(warehouse) as cat:
        table = cat.load_table("db.t")
        assert table.state.current_snapshot is None  # nothing committed
        assert cat.verify("db.t") == []  # the refused commit's file is an orphan, not a foreign writer's
        assert table.remove_orphan_files(older_than_ms=2**62) == [str(bogus)]
    assert not bogus.exists()
