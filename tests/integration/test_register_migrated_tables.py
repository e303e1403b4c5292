"""Tables migrated from Hive: Spark's ``add_files`` takes over Parquet and ORC files written without Iceberg field
ids, under Hive's file names (``000000_0``), with nested structs; the table gets a name mapping. icelog registers
such a table in place and scans it (through the name mapping, nested fields included) as Spark does, at every
snapshot, and keeps appending to it.

Layer: tests. The files are real ORC and Parquet files written by pyarrow without field ids.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.orc as orc
import pyarrow.parquet as pq
import pytest

from engine import Catalog

HIVE_ROWS = pa.table({
    "id": pa.array([1, 2, 3], pa.int64()),
    "info": pa.array([{"name": "a", "score": 1.5}, {"name": "b", "score": None}, None],
                     pa.struct([("name", pa.string()), ("score", pa.float64())])),
})


def _canon(rows: list[dict]) -> list[tuple]:
    return sorted((r["id"], None if r["info"] is None else (r["info"]["name"], r["info"]["score"])) for r in rows)


@pytest.mark.parametrize("fmt", ["orc", "parquet"])
def test_a_migrated_hive_table_registers_and_scans(spark, tmp_warehouse: Path, warehouse_catalog: str,
                                                   tmp_path: Path, fmt: str) -> None:
    source = tmp_path / f"hive_{fmt}"
    source.mkdir()
    if fmt == "orc":
        orc.write_table(HIVE_ROWS, str(source / "000000_0"))
    else:
        pq.write_table(HIVE_ROWS, str(source / "000000_0"))
    name = f"{warehouse_catalog}.db.migrated_{fmt}"
    spark.sql(f"CREATE TABLE {name} (id bigint, info struct<name: string, score: double>) USING iceberg "
              f"TBLPROPERTIES ('format-version'='2')")
    spark.sql(f"CALL {warehouse_catalog}.system.add_files(table => 'db.migrated_{fmt}', "
              f"source_table => '`{fmt}`.`{source}`')")
    spark.sql(f"INSERT INTO {name} VALUES (4, named_struct('name', 'd', 'score', 4.0))")
    expected = _canon([r.asDict(recursive=True) for r in spark.table(name).collect()])
    assert len(expected) == 4
    snapshots = [r["snapshot_id"] for r in spark.sql(f"SELECT snapshot_id FROM {name}.snapshots "
                                                         f"ORDER BY committed_at").collect()]
    first = _canon([r.asDict(recursive=True) for r in
                    spark.sql(f"SELECT * FROM {name} VERSION AS OF {snapshots[0]}").collect()])

    with Catalog.open(tmp_path / "icelog") as cat:
        cat.create_namespace("db")
        t = cat.register_table("db.migrated", str(tmp_warehouse / "db" / f"migrated_{fmt}"))  # in place
        assert t.state.prop("schema.name-mapping.default") is not None
        assert _canon(t.scan().to_arrow().to_pylist()) == expected
        assert _canon(t.scan(snapshot_id=snapshots[0]).to_arrow().to_pylist()) == first
        files = [e.file for e in cat.store.live_entries(t.state, t.state.current_snapshot.snapshot_id)]
        assert any(f.file_path.endswith("/000000_0") and f.file_format == fmt.upper() for f in files)
        t.append(pa.table({"id": pa.array([5], pa.int64()), "info": pa.array(
            [{"name": "e", "score": 5.0}], pa.struct([("name", pa.string()), ("score", pa.float64())]))}))
        assert len(t.scan().to_arrow()) == 5
        assert cat.verify("db.migrated") == []
    assert len(spark.table(name).collect()) == 5  # Spark follows the hint to icelog's version
