"""One S3 table through many operations, every snapshot read back by every engine and compared with icelog's own
scan: Spark (a Hadoop catalog on ``s3a://`` and ``icelog serve``), PyIceberg (``RestCatalog`` with vended
credentials, ``StaticTable`` on the ``s3://`` metadata) and DuckDB (``iceberg_scan`` by path, and the REST
catalog).

Layer: tests. The table is built once per module on the loopback S3 server: appends into a partitioned table,
a copy-on-write delete, a merge-on-read delete, an overwrite, an upsert, a schema change, a partition change,
a compaction, a branch and a tag. Readers that cannot apply equality deletes (PyIceberg 0.12) skip the
snapshots that carry them, as the issue's brief allows.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any, Iterator

import pyarrow as pa
import pytest

from engine import Catalog
from tools.rest_server import RunningServer, running_server
from tools.spark import configure_s3a, hadoop_catalog, rest_catalog
from storage.files import S3Settings

SCHEMA = pa.schema([("id", pa.int64()), ("cat", pa.string()), ("ts", pa.timestamp("us"))])


def rows(ids: list[int], cat: str = "a") -> pa.Table:
    base = dt.datetime(2024, 3, 1)
    return pa.table({"id": pa.array(ids, pa.int64()), "cat": [cat] * len(ids),
                     "ts": pa.array([base + dt.timedelta(days=i % 4) for i in ids], pa.timestamp("us"))})


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory, s3_endpoint: str) -> Iterator[dict[str, Any]]:
    import uuid

    import pyarrow.fs as pafs

    from tests.conftest import S3_ACCESS_KEY, S3_SECRET_KEY

    bucket = f"icelog-matrix-{uuid.uuid4().hex[:12]}"
    pafs.S3FileSystem(access_key=S3_ACCESS_KEY, secret_key=S3_SECRET_KEY, endpoint_override=s3_endpoint.split("//")[1],
                      scheme="http", region="us-east-1", allow_bucket_creation=True).create_dir(bucket)
    props = {"s3.endpoint": s3_endpoint, "s3.region": "us-east-1", "s3.access-key-id": S3_ACCESS_KEY,
             "s3.secret-access-key": S3_SECRET_KEY, "s3.path-style-access": "true"}
    catalog_dir = tmp_path_factory.mktemp("matrix") / "catalog"
    warehouse = f"s3://{bucket}/lake"
    with Catalog.open(catalog_dir, warehouse=warehouse, properties=props) as cat:
        cat.create_namespace("db")
        t = cat.create_table("db.t", schema=SCHEMA, partition_by=["identity(cat)"],
                             properties={"format-version": "2"})
        t.append(rows([1, 2, 3, 4]))
        t.append(rows([5, 6], cat="b"))
        t.delete("id = 2")                                   # copy-on-write
        t.set_properties({"write.delete.mode": "merge-on-read"})
        t.delete("id = 5")                                   # position deletes
        t.manage_snapshots().create_tag(t.state.current_snapshot.snapshot_id, "before-evolution").commit()
        t.overwrite(rows([7, 8], cat="c"), where="cat = 'c'")
        t.update_schema().add_column("note", pa.string()).commit()
        t.update_spec().add_field("ts", "day").commit()
        t.append(pa.table({"id": pa.array([9], pa.int64()), "cat": ["a"], "ts": pa.array([dt.datetime(2024, 3, 9)]),
                           "note": ["late"]}))
        t.rewrite_data_files()
        t.manage_snapshots().create_branch(t.state.current_snapshot.snapshot_id, "dev").commit()
        t.append(rows([10], cat="d"), branch="dev")
        t.upsert(pa.table({"id": pa.array([3], pa.int64()), "cat": ["a"], "ts": pa.array([dt.datetime(2024, 3, 4)]),
                           "note": ["updated"]}), ["id", "cat", "ts"])  # keys cover the partition: equality deletes
        expected = {}
        with_equality_deletes = set()
        for snap in t.state.snapshots:
            expected[snap.snapshot_id] = sorted(t.scan(snapshot_id=snap.snapshot_id).to_arrow()
                                                .column("id").to_pylist())
            entries = cat.store.live_entries(t.state, snap.snapshot_id)
            if any(e.file.content.value == 2 for e in entries):
                with_equality_deletes.add(snap.snapshot_id)
        operations = {s.snapshot_id: s.operation for s in t.state.snapshots}
        yield {"operations": operations, "catalog_dir": catalog_dir, "warehouse": warehouse, "bucket": bucket, "properties": props,
               "expected": expected, "equality": with_equality_deletes, "metadata": t.metadata_location,
               "dev": sorted(t.scan(ref="dev").to_arrow().column("id").to_pylist()),
               "tag": sorted(t.scan(ref="before-evolution").to_arrow().column("id").to_pylist())}


@pytest.fixture(scope="module")
def server(built: dict[str, Any]) -> Iterator[RunningServer]:
    with running_server(built["warehouse"], catalog_dir=built["catalog_dir"], properties=built["properties"]) as s:
        yield s


def test_the_table_went_through_every_kind_of_snapshot(built: dict[str, Any]) -> None:
    assert len(built["expected"]) >= 9
    assert built["equality"]  # the upsert's equality deletes
    assert 10 in built["dev"]  # the branch's own append
    assert built["tag"] == [1, 3, 4, 6]


def test_pyiceberg_reads_every_snapshot(built: dict[str, Any], server: RunningServer) -> None:
    from pyiceberg.catalog.rest import RestCatalog
    from pyiceberg.table import StaticTable

    static = StaticTable.from_metadata(built["metadata"], properties=built["properties"])
    served = RestCatalog("icelog", uri=server.uri, token=server.token).load_table("db.t")
    for table in (static, served):
        for snapshot_id, ids in built["expected"].items():
            if snapshot_id in built["equality"]:
                continue  # PyIceberg 0.12 does not apply equality deletes
            assert sorted(table.scan(snapshot_id=snapshot_id).to_arrow().column("id").to_pylist()) == ids
        tag = table.metadata.refs["before-evolution"].snapshot_id
        assert sorted(table.scan(snapshot_id=tag).to_arrow().column("id").to_pylist()) == built["tag"]


def test_duckdb_reads_every_snapshot(built: dict[str, Any], server: RunningServer) -> None:
    from tests.conftest import duckdb_connect

    props = built["properties"]
    secret = (f"CREATE SECRET matrix (TYPE s3, KEY_ID '{props['s3.access-key-id']}', "
              f"SECRET '{props['s3.secret-access-key']}', ENDPOINT '{props['s3.endpoint'].split('//')[1]}', "
              f"URL_STYLE 'path', USE_SSL false, REGION 'us-east-1')")
    for snapshot_id, ids in built["expected"].items():
        # a connection per snapshot: DuckDB 1.4.4 answers later snapshots of one table wrongly now and then when a
        # connection has scanned other snapshots of it before (its caches), which is not what is tested here
        con = duckdb_connect()
        con.execute(secret)
        con.execute(f"ATTACH 'wh' AS ice (TYPE iceberg, ENDPOINT '{server.uri}', AUTHORIZATION_TYPE 'oauth2', "
                    f"TOKEN '{server.token}')")
        # DuckDB applies equality deletes only when their columns are selected
        by_path = con.execute(f"SELECT id, cat, ts FROM iceberg_scan('{built['metadata']}', "
                              f"snapshot_from_id => {snapshot_id})").fetchall()
        assert sorted(r[0] for r in by_path) == ids, (snapshot_id, built["operations"][snapshot_id])
        served = con.execute(f"SELECT id, cat, ts FROM ice.db.t AT (VERSION => {snapshot_id})").fetchall()
        assert sorted(r[0] for r in served) == ids, (snapshot_id, built["operations"][snapshot_id])
        con.close()


def test_spark_reads_every_snapshot(built: dict[str, Any], spark: Any) -> None:
    settings = S3Settings.from_properties(built["properties"])
    configure_s3a(spark, settings, built["bucket"])
    hadoop = hadoop_catalog(spark, f"s3a://{built['bucket']}/lake")
    rest, running = rest_catalog(spark, built["warehouse"], catalog_dir=built["catalog_dir"],
                                 properties=built["properties"])
    try:
        for name in (hadoop, rest):
            for snapshot_id, ids in built["expected"].items():
                got = sorted(r["id"] for r in
                             spark.sql(f"SELECT id FROM {name}.db.t VERSION AS OF {snapshot_id}").collect())
                assert got == ids, (name, snapshot_id)
            dev = sorted(r["id"] for r in spark.sql(f"SELECT id FROM {name}.db.t VERSION AS OF 'dev'").collect())
            assert dev == built["dev"]
    finally:
        running.stop()
