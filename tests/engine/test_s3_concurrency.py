"""Four processes appending to one table on S3 at once (moto's server on the loopback interface): every append
lands exactly once, the published metadata holds them all, and it matches the log.

Layer: tests. Each process opens the catalog itself (its own SQLite connection, FileIO and S3 client) and
appends its own range of ids; compare-and-swap on the log orders them, and publishes race only over the same
bytes (metadata.json is written with a conditional PUT).
"""

from __future__ import annotations

import multiprocessing
from pathlib import Path

import pyarrow as pa

from engine import Catalog

PROCESSES = 4
APPENDS = 8


def _appender(catalog_dir: str, warehouse: str, properties: dict[str, str], worker: int) -> None:
    with Catalog.open(catalog_dir, warehouse=warehouse, properties=properties) as cat:
        table = cat.load_table("db.t")
        for i in range(APPENDS):
            row = worker * 1000 + i
            table.append(pa.table({"id": pa.array([row], pa.int64()), "worker": pa.array([worker], pa.int32())}))


def test_four_processes_append_to_one_s3_table(tmp_path: Path, s3_bucket: str,
                                               s3_properties: dict[str, str]) -> None:
    catalog_dir, warehouse = str(tmp_path / "catalog"), f"s3://{s3_bucket}/lake"
    with Catalog.open(catalog_dir, warehouse=warehouse, properties=s3_properties) as cat:
        cat.create_namespace("db")
        cat.create_table("db.t", schema=pa.schema([("id", pa.int64()), ("worker", pa.int32())]))
    context = multiprocessing.get_context("spawn")
    workers = [context.Process(target=_appender, args=(catalog_dir, warehouse, s3_properties, w))
               for w in range(PROCESSES)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(timeout=300)
    assert [w.exitcode for w in workers] == [0] * PROCESSES
    expected = sorted(w * 1000 + i for w in range(PROCESSES) for i in range(APPENDS))
    with Catalog.open(catalog_dir, warehouse=warehouse, properties=s3_properties) as cat:
        table = cat.load_table("db.t")
        assert sorted(table.scan().to_arrow().column("id").to_pylist()) == expected
        assert len(table.state.snapshots) == PROCESSES * APPENDS
        table.publish()
        assert cat.verify("db.t") == []
        from pyiceberg.table import StaticTable

        published = StaticTable.from_metadata(table.metadata_location, properties=s3_properties)
        assert sorted(published.scan().to_arrow().column("id").to_pylist()) == expected
