"""A catalog whose log lives in PostgreSQL: the same operations, files and guarantees as on SQLite. Tables are
written and read through the Python API, published metadata is read by PyIceberg and Spark, handles see each
other's commits at once, processes append concurrently, and two REST servers on one log serve one catalog."""

from __future__ import annotations

import multiprocessing
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
import requests

from engine import Catalog
from engine.errors import ValidationError

SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string())])


def rows(ids: list[int], name: str = "x") -> pa.Table:
    return pa.table({"id": pa.array(ids, pa.int64()), "name": [f"{name}{i}" for i in ids]})


def ids_of(table: Any) -> list[int]:
    return sorted(table.scan().to_arrow().column("id").to_pylist())


def test_a_catalog_on_postgresql_commits_publishes_and_verifies(postgres_url: str, tmp_path: Path) -> None:
    warehouse = str(tmp_path / "lake")
    with Catalog.open(postgres_url, warehouse=warehouse) as cat:
        cat.create_namespace("db")
        t = cat.create_table("db.t", SCHEMA, partition_by=["name"], properties={"write.delete.mode": "merge-on-read"})
        t.append(rows([1, 2, 3]))
        t.append(rows([4, 5], "y"))
        t.delete("id = 2")
        t.upsert(rows([5, 6], "z"), ["id"])
        assert ids_of(t) == [1, 3, 4, 5, 6]
        assert cat.verify("db.t") == [] and cat.log.verify() == []
        assert t.metadata_location.startswith(warehouse) and Path(t.metadata_location).exists()
        location, uuid = t.metadata_location, t.uuid
        from engine.read.file_blocks import TABLE as FILE_BLOCKS

        snapshots = len(t.snapshots())  # each commit stored its snapshot's file block beside the log
        assert cat.log.derived.query(f"SELECT count(*) FROM {FILE_BLOCKS}")[0][0] == snapshots
    with Catalog.open(postgres_url, warehouse=warehouse) as again:  # a new handle: state from the database
        t = again.load_table("db.t")
        assert t.uuid == uuid and ids_of(t) == [1, 3, 4, 5, 6] and t.metadata_location == location
        assert again.store.file_index.rebuilt_blocks == 0  # the plan read the stored blocks
        types = [e.type for e in again.log()]
        assert types[0] == "create-namespace" and "create-table" in types and "add-snapshot" in types
    from pyiceberg.table import StaticTable

    static = StaticTable.from_metadata(location)
    assert sorted(static.scan().to_arrow().column("id").to_pylist()) == [1, 3, 4, 5, 6]


def test_a_role_with_the_readmes_grants_appends_merges_and_publishes(postgres_url: str, tmp_path: Path) -> None:
    """The README lists what a writer's role needs on the log's and the derived tables: with exactly those grants
    (the tables made first by an owner), appends commit and publish, merges included (the merged manifests'
    record lengths are a derived table too), and a role without them cannot delete from the log."""
    import re

    import psycopg

    readme = (Path(__file__).parents[2] / "README.md").read_text()
    grants = re.findall(r"^GRANT [^;]+;", readme.split("```sql", 1)[1].split("```", 1)[0], flags=re.M | re.S)
    assert len(grants) == 2
    warehouse = str(tmp_path / "lake")
    with Catalog.open(postgres_url, warehouse=warehouse) as cat:  # the owner makes the tables
        cat.create_namespace("db")
        cat.create_table("db.t", SCHEMA, properties={"commit.manifest.min-count-to-merge": "3"})
    with psycopg.connect(postgres_url, autocommit=True) as admin:
        admin.execute("CREATE ROLE icelog_writer LOGIN")
        for grant in grants:
            admin.execute(" ".join(grant.split()))
    writer_url = postgres_url.replace("postgresql://icelog@", "postgresql://icelog_writer@")
    with Catalog.open(writer_url, warehouse=warehouse) as cat:
        t = cat.load_table("db.t")
        for i in range(7):
            t.append(rows([i]))
        assert ids_of(t) == list(range(7)) and cat.verify("db.t") == []
        from projections.carried_manifests import StoredRecordLengths

        assert cat.log.derived.query(f"SELECT count(*) FROM {StoredRecordLengths.TABLE}")[0][0] >= 2
    with psycopg.connect(writer_url, autocommit=True) as conn:
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("DELETE FROM events")


def test_two_handles_see_each_others_commits_at_once(postgres_url: str, tmp_path: Path) -> None:
    warehouse = str(tmp_path / "lake")
    with Catalog.open(postgres_url, warehouse=warehouse) as one, Catalog.open(postgres_url, warehouse=warehouse) as two:
        one.create_namespace("db")
        one.create_table("db.t", SCHEMA).append(rows([1]))
        mine = two.load_table("db.t")
        assert ids_of(mine) == [1]
        mine.append(rows([2]))
        assert ids_of(one.load_table("db.t")) == [1, 2]
        assert one.load_table("db.t").metadata_location == mine.metadata_location


def test_a_log_on_postgresql_needs_a_warehouse(postgres_url: str) -> None:
    with pytest.raises(ValidationError, match="needs a warehouse"):
        Catalog.open(postgres_url)


def _appender(url: str, warehouse: str, worker: int, barrier) -> int:
    with Catalog.open(url, warehouse=warehouse) as cat:
        table = cat.load_table("db.t")
        barrier.wait()
        for i in range(10):
            table.append(rows([worker * 100 + i]))
    return worker


def test_four_processes_append_to_one_table_and_every_append_lands_once(postgres_url: str, tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[2]))
    warehouse = str(tmp_path / "lake")
    with Catalog.open(postgres_url, warehouse=warehouse) as cat:
        cat.create_namespace("db")
        cat.create_table("db.t", SCHEMA)
    ctx = multiprocessing.get_context("spawn")
    with ctx.Manager() as manager:
        barrier = manager.Barrier(4)
        with ctx.Pool(4) as pool:
            assert sorted(pool.starmap(_appender, [(postgres_url, warehouse, w, barrier) for w in range(4)])) == [
                0, 1, 2, 3]
    with Catalog.open(postgres_url, warehouse=warehouse) as cat:
        t = cat.load_table("db.t")
        assert ids_of(t) == sorted(w * 100 + i for w in range(4) for i in range(10))
        snapshots = t.snapshots()
        assert [s.sequence_number for s in snapshots] == list(range(1, 41))
        assert cat.verify("db.t") == [] and cat.log.verify() == []


def test_two_rest_servers_on_one_postgresql_log_serve_one_catalog(postgres_url: str, tmp_path: Path) -> None:
    from pyiceberg.catalog.rest import RestCatalog

    from tools.rest_server import running_server

    warehouse = tmp_path / "lake"
    with running_server(warehouse, "tok", catalog_dir=postgres_url) as first, \
            running_server(warehouse, "tok", catalog_dir=postgres_url) as second:
        one = RestCatalog("one", uri=first.uri, token="tok")
        two = RestCatalog("two", uri=second.uri, token="tok")
        one.create_namespace("db")
        assert ("db",) in two.list_namespaces()                      # at once, through the other server
        one.create_table("db.t", schema=SCHEMA)
        two.load_table("db.t").append(rows([1, 2]))
        one.load_table("db.t").append(rows([3]))
        for client in (one, two):
            assert sorted(client.load_table("db.t").scan().to_arrow().column("id").to_pylist()) == [1, 2, 3]
        answer = requests.get(f"{second.uri}/v1/namespaces/db/tables/t", headers={"Authorization": "Bearer tok"})
        assert len(answer.json()["metadata"]["snapshots"]) == 2
    with Catalog.open(postgres_url, warehouse=str(warehouse)) as cat:
        assert ids_of(cat.load_table("db.t")) == [1, 2, 3] and cat.verify("db.t") == []


@pytest.mark.spark
def test_spark_reads_a_table_whose_log_is_on_postgresql(spark: Any, postgres_url: str, tmp_path: Path) -> None:
    from tools.spark import hadoop_catalog

    warehouse = str(tmp_path / "lake")
    with Catalog.open(postgres_url, warehouse=warehouse) as cat:
        cat.create_namespace("db")
        t = cat.create_table("db.t", SCHEMA)
        t.append(rows([1, 2, 3]))
        t.delete("id = 1")
    name = hadoop_catalog(spark, warehouse)
    assert sorted(r.id for r in spark.sql(f"SELECT id FROM {name}.db.t").collect()) == [2, 3]


def test_two_icelog_serve_processes_take_appends_at_once_and_each_lands_once(postgres_url: str,
                                                                             tmp_path: Path) -> None:
    import os
    import subprocess
    import sys
    import threading
    import time

    from pyiceberg.catalog.rest import RestCatalog

    from tools.ports import free_port

    warehouse = str(tmp_path / "lake")
    with Catalog.open(postgres_url, warehouse=warehouse) as cat:
        cat.create_namespace("db")
        cat.create_table("db.t", SCHEMA)
    root = str(Path(__file__).resolve().parents[2])
    ports = [free_port(), free_port()]
    servers = [subprocess.Popen([sys.executable, "-m", "tools.cli", "--warehouse", warehouse, "--catalog-dir",
                                 postgres_url, "serve", "--token", "tok", "--port", str(port)], cwd=root,
                                env={**os.environ, "PYTHONPATH": root}, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE) for port in ports]
    try:
        for port in ports:
            deadline = time.monotonic() + 60
            while True:
                try:
                    if requests.get(f"http://127.0.0.1:{port}/v1/config",
                                    headers={"Authorization": "Bearer tok"}, timeout=1).ok:
                        break
                except requests.ConnectionError:
                    pass
                assert time.monotonic() < deadline, "icelog serve did not start"
                time.sleep(0.2)
        errors: list[BaseException] = []

        def client(worker: int) -> None:
            try:
                table = RestCatalog(f"c{worker}", uri=f"http://127.0.0.1:{ports[worker % 2]}",
                                    token="tok").load_table("db.t")
                for i in range(5):
                    table.append(rows([worker * 100 + i]))
            except BaseException as e:  # pragma: no cover - reported below
                errors.append(e)

        threads = [threading.Thread(target=client, args=(w,)) for w in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(300)
        assert errors == []
    finally:
        for server in servers:
            server.terminate()
            server.wait(30)
    with Catalog.open(postgres_url, warehouse=warehouse) as cat:
        t = cat.load_table("db.t")
        assert ids_of(t) == sorted(w * 100 + i for w in range(4) for i in range(5))
        assert len(t.snapshots()) == 20 and cat.verify("db.t") == [] and cat.log.verify() == []


def test_appends_across_a_server_restart_each_land_once(tmp_path: Path) -> None:
    import threading

    from tools.postgres_server import LocalPostgres

    warehouse = str(tmp_path / "lake")
    with LocalPostgres() as server:
        with Catalog.open(server.url, warehouse=warehouse) as cat:
            cat.create_namespace("db")
            cat.create_table("db.t", SCHEMA)
        errors: list[BaseException] = []
        halfway = threading.Barrier(3)

        def appender(worker: int) -> None:
            try:
                with Catalog.open(server.url, warehouse=warehouse) as own:
                    table = own.load_table("db.t")
                    for i in range(10):
                        if i == 5:
                            halfway.wait(60)
                        table.append(rows([worker * 100 + i]))
            except BaseException as e:  # pragma: no cover - reported below
                errors.append(e)

        threads = [threading.Thread(target=appender, args=(w,)) for w in range(2)]
        for t in threads:
            t.start()
        halfway.wait(60)
        server.stop("fast")                       # the server goes away between (and under) commits
        threading.Timer(1.0, server.start).start()
        for t in threads:
            t.join(120)
        assert errors == []
        with Catalog.open(server.url, warehouse=warehouse) as cat:
            t = cat.load_table("db.t")
            assert ids_of(t) == sorted(w * 100 + i for w in range(2) for i in range(10))
            assert len(t.snapshots()) == 20 and cat.verify("db.t") == [] and cat.log.verify() == []


@pytest.mark.parametrize("lost", ["after the commit landed", "before the commit landed"])
def test_an_append_whose_connection_breaks_at_commit_lands_once(postgres_url: str, tmp_path: Path,
                                                                lost: str) -> None:
    import psycopg

    with Catalog.open(postgres_url, warehouse=str(tmp_path / "lake")) as cat:
        cat.create_namespace("db")
        table = cat.create_table("db.t", SCHEMA)
        conn = cat.log._live()
        real_execute = conn.execute
        broken = []

        def execute(sql, *args, **kwargs):
            if sql == "COMMIT" and not broken:
                broken.append(sql)
                if lost == "after the commit landed":
                    real_execute(sql, *args, **kwargs)
                conn.close()  # the server's answer never arrives
                raise psycopg.OperationalError("server closed the connection unexpectedly")
            return real_execute(sql, *args, **kwargs)

        conn.execute = execute  # type: ignore[method-assign]
        table.append(rows([1, 2]))
        assert broken == ["COMMIT"]
        assert ids_of(table) == [1, 2] and len(table.snapshots()) == 1  # landed once, whichever way it broke
        assert cat.verify("db.t") == [] and cat.log.verify() == []


def test_an_append_whose_outcome_cannot_be_read_keeps_its_files_and_says_so(postgres_url: str,
                                                                          tmp_path: Path) -> None:
    """The answer to ``COMMIT`` is lost after the commit landed, and reading its outcome fails with the driver's own
    error (the commits table stays locked past the lock timeout): the append raises ``CommitStateUnknown`` and keeps
    the data file the landed snapshot names. Before, the raw error passed for "nothing landed", and the file went."""
    import psycopg

    from engine.errors import CommitStateUnknown

    warehouse = str(tmp_path / "lake")
    admin = psycopg.connect(postgres_url)  # holds its lock until it rolls back
    try:
        with Catalog.open(postgres_url, warehouse=warehouse) as cat:
            cat.create_namespace("db")
            t = cat.create_table("db.t", SCHEMA)
            t.append(rows([1]))
            conn = cat.log._live()
            real_execute = conn.execute
            cat.log._busy_timeout_s = 1.0  # the next connection's lock timeout

            def execute(sql, *args, **kwargs):
                result = real_execute(sql, *args, **kwargs)
                if sql == "COMMIT":  # landed; its answer is lost, and the commits table is busy for a while
                    admin.execute("LOCK TABLE commits IN ACCESS EXCLUSIVE MODE")
                    conn.close()
                    raise psycopg.OperationalError("server closed the connection unexpectedly")
                return result

            conn.execute = execute  # type: ignore[method-assign]
            with pytest.raises(CommitStateUnknown, match="cannot tell its outcome"):
                t.append(rows([2]))
    finally:
        admin.rollback()
        admin.close()
    with Catalog.open(postgres_url, warehouse=warehouse) as cat:
        t = cat.load_table("db.t")
        assert len(t.snapshots()) == 2 and ids_of(t) == [1, 2]  # landed, and its data file is still there
