"""icelog's metadata tables equal Spark's metadata tables over the same published table.

One table gets appends, a merge-on-read delete, partition evolution (bucket and day fields added), a branch with
its own append and a tag; every metadata table Spark offers (``<location>#<kind>``) is compared with
``t.inspect.<kind>()``: the same column names in the same order (Spark's ``readable_metrics`` aside, which icelog
omits) and the same rows, values equal (ids, counts, paths, operations, summaries, partition values, metrics maps,
timestamps as microseconds).
"""

from __future__ import annotations

import datetime as dt
import time
from typing import Any

import pyarrow as pa
import pytest

from engine import Catalog

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), ("category", pa.string()), ("d", pa.date32())])

KINDS = ("snapshots", "history", "refs", "manifests", "all_manifests", "entries", "files", "data_files",
         "delete_files", "partitions", "metadata_log_entries")

# how rows are ordered before comparing (neither side promises an order)
SORT_KEYS = {
    "snapshots": ("snapshot_id",),
    "history": ("made_current_at", "snapshot_id"),
    "refs": ("name",),
    "manifests": ("path",),
    "all_manifests": ("reference_snapshot_id", "path"),
    "entries": ("data_file.file_path",),
    "files": ("file_path",),
    "data_files": ("file_path",),
    "delete_files": ("file_path",),
    "partitions": ("partition",),
    "metadata_log_entries": ("file",),
}


def rows(ids: list[int], category: str, day: int) -> pa.Table:
    return pa.table({"id": pa.array(ids, pa.int64()), "category": [category] * len(ids),
                     "d": pa.array([dt.date(2024, 1, day)] * len(ids), pa.date32())}, schema=SCHEMA)


@pytest.fixture(scope="module")
def table(tmp_path_factory):
    cat = Catalog.open(tmp_path_factory.mktemp("metadata_tables") / "warehouse")
    cat.create_namespace("db")
    t = cat.create_table("db.meta", schema=SCHEMA, partition_by=["category"])
    t.snaps = [t.append(rows([1, 2, 3], "a", 1))]
    time.sleep(0.002)
    t.snaps.append(t.append(rows([4, 5], "b", 2)))
    time.sleep(0.002)
    t.set_properties({"write.delete.mode": "merge-on-read"})
    t.delete("id = 2")
    time.sleep(0.002)
    t.update_spec().add_field("id", "bucket[4]").add_field("d", "day").commit()
    t.append(rows([6, 7, 8], "a", 3))
    time.sleep(0.002)
    t.manage_snapshots().create_branch(t.snaps[1].snapshot_id, "audit").create_tag(
        t.snaps[0].snapshot_id, "v1").commit()
    t.append(rows([9], "c", 4), branch="audit")
    yield t
    cat.close()


def _norm(v: Any) -> Any:
    """Spark's side: binary as bytes, nested rows already dicts."""
    if isinstance(v, (bytes, bytearray)):
        return bytes(v)
    if isinstance(v, dict):
        return {k: _norm(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_norm(x) for x in v]
    return v


def _from_arrow(v: Any, t: pa.DataType) -> Any:
    """icelog's side, by Arrow type: maps (pairs in Arrow's Python form) as dicts, timestamps as microseconds."""
    if v is None:
        return None
    if pa.types.is_map(t):
        return {k: _from_arrow(x, t.item_type) for k, x in v}
    if pa.types.is_struct(t):
        return {f.name: _from_arrow(v[f.name], f.type) for f in t}
    if pa.types.is_list(t):
        return [_from_arrow(x, t.value_type) for x in v]
    if pa.types.is_timestamp(t):
        return int(v.timestamp() * 1_000_000) if t.unit == "us" else v
    return v


def _icelog_rows(tbl: pa.Table) -> list[dict[str, Any]]:
    cols = [col.cast(pa.int64()) if pa.types.is_timestamp(col.type) else col for col in tbl.columns]
    plain = pa.table(cols, names=tbl.column_names)
    return [{f.name: _from_arrow(r[f.name], f.type) for f in plain.schema} for r in plain.to_pylist()]


def _spark_rows(spark, location: str, kind: str) -> tuple[list[str], list[dict[str, Any]]]:
    df = spark.read.format("iceberg").load(f"{location}#{kind}")
    columns = [c for c in df.columns if c != "readable_metrics"]
    exprs = []
    for f in df.schema.fields:
        if f.name == "readable_metrics":
            continue
        if f.dataType.typeName() == "timestamp":
            exprs.append(f"unix_micros({f.name}) AS {f.name}")
        else:
            exprs.append(f"`{f.name}`")
    got = [_norm(r.asDict(recursive=True)) for r in df.selectExpr(*exprs).collect()]
    return columns, got


def _sort(rows_: list[dict[str, Any]], keys: tuple[str, ...]) -> list[dict[str, Any]]:
    def get(r: dict[str, Any], path: str) -> Any:
        for part in path.split("."):
            r = r[part]
        return r if not isinstance(r, dict) else sorted((k, str(v)) for k, v in r.items())

    return sorted(rows_, key=lambda r: tuple(str(get(r, k)) for k in keys))


@pytest.mark.parametrize("kind", KINDS)
def test_metadata_table_equals_spark(spark, table, kind):
    spark_columns, spark_rows = _spark_rows(spark, table.location, kind)
    mine = getattr(table.inspect, kind)()
    assert mine.column_names == spark_columns
    assert spark_rows, f"Spark's {kind} table is empty: the test table does not exercise it"
    assert _sort(_icelog_rows(mine), SORT_KEYS[kind]) == _sort(spark_rows, SORT_KEYS[kind])


def test_scenario_is_what_the_comparison_needs(table):
    """The comparison above covers a delete file, two specs, a branch-only snapshot and a tag."""
    files = table.inspect.files().to_pylist()
    assert {f["content"] for f in files} == {0, 1}
    assert {f["spec_id"] for f in files} == {0, 1}
    refs = {r["name"]: r["type"] for r in table.inspect.refs().to_pylist()}
    assert refs == {"audit": "BRANCH", "main": "BRANCH", "v1": "TAG"}
    history = table.inspect.history().to_pylist()
    assert all(h["is_current_ancestor"] for h in history)
    assert len(table.inspect.snapshots()) == len(history) + 1  # the branch's own append is not in main's log

