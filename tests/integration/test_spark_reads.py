"""Spark 3.5.6 with the Iceberg 1.10.2 runtime reads exactly the rows icelog wrote.

Layer: tests (icelog's public API through tests/integration/tables.py, pyspark through the shared `spark`
fixture; reads a warehouse built once per run under pytest's temporary folder).

Every table is read by path (``spark.read.format("iceberg").load(location)``) and through a Hadoop catalog on
the warehouse, and answers filters whose rows are computed in Python: Spark prunes files by the partition
values and column bounds icelog wrote, so a wrong value loses or keeps rows. Partition values are also checked
against Iceberg Java's own transform functions (``<catalog>.system.bucket`` ...), snapshots are read by time
travel, and the 150-append tables prove merged manifests read back.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.integration import tables as T
from tools.spark import hadoop_catalog

SPARK_CASES = T.spark_cases()
SERIES = [c for c in SPARK_CASES if c.name.startswith("appends_")]
TRANSFORM_CASES = [c for c in SPARK_CASES if c.name.split("_")[0] in T.TRANSFORMS]


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory: pytest.TempPathFactory) -> dict[str, T.Built]:
    return T.shared_warehouse(tmp_path_factory)


@pytest.fixture(scope="module")
def catalog(spark, warehouse: dict[str, T.Built]) -> str:
    """A Hadoop catalog on the shared warehouse, registered once for this module."""
    return hadoop_catalog(spark, next(iter(warehouse.values())).warehouse)


def table_name(catalog: str, built: T.Built) -> str:
    return f"{catalog}.{built.identifier}"


def spark_rows(df) -> list[dict[str, Any]]:
    return [row.asDict() for row in df.collect()]


# -- full reads -----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("case", T.case_params("spark", "by_path", SPARK_CASES))
def test_spark_reads_by_path(spark, warehouse: dict[str, T.Built], case: T.Case) -> None:
    built = warehouse[case.name].require()
    df = spark.read.format("iceberg").load(built.location)

    assert df.columns == built.schema.names
    assert T.normalise_rows(spark_rows(df), built.schema) == T.expected_rows(built)
    # count(*) is answered from the manifests' record counts (Iceberg pushes the aggregate down)
    assert df.count() == built.case.data.num_rows


@pytest.mark.parametrize("case", T.case_params("spark", "catalog", SPARK_CASES))
def test_spark_reads_through_hadoop_catalog(spark, warehouse: dict[str, T.Built], catalog: str,
                                            case: T.Case) -> None:
    built = warehouse[case.name].require()
    df = spark.sql(f"SELECT * FROM {table_name(catalog, built)}")

    assert T.normalise_rows(spark_rows(df), built.schema) == T.expected_rows(built)


def test_hadoop_catalog_lists_every_table(spark, warehouse: dict[str, T.Built], catalog: str) -> None:
    listed = {row.tableName for row in spark.sql(f"SHOW TABLES IN {catalog}.{T.NAMESPACE}").collect()}
    assert listed == set(warehouse)  # tables whose append failed exist too


# -- filters: partition values and column bounds drive Spark's pruning -----------------------------------------------


@pytest.mark.parametrize(("case", "where"), T.filter_params("spark", "filter", SPARK_CASES))
def test_spark_filter_matches_python(spark, warehouse: dict[str, T.Built], catalog: str, case: T.Case,
                                     where: T.Filter) -> None:
    built = warehouse[case.name].require()
    name = table_name(catalog, built)
    expected = T.expected_ids(built, where)

    ids = sorted(row.id for row in spark.sql(f"SELECT id FROM {name} WHERE {where.spark_sql}").collect())

    # the rows themselves, not only their count: a wrongly pruned file loses exactly its rows
    assert ids == expected, f"WHERE {where.spark_sql}: {len(ids)} rows, expected {len(expected)}"


# -- partition values against Iceberg Java's transforms -------------------------------------------------------------


def _java_transform(catalog: str, term: str) -> str:
    """A partition term as a call of the Spark catalog's Iceberg system functions (Java's transforms)."""
    if "(" not in term:
        return term
    name, args = term.split("(", 1)
    function = {"bucket": "bucket", "truncate": "truncate", "year": "years", "month": "months", "day": "days",
                "hour": "hours"}[name]
    return f"{catalog}.system.{function}({args}"


@pytest.mark.parametrize("case", T.case_params("spark", "partitions",
                                                [c for c in TRANSFORM_CASES if c.name != "bucket_uuid"]))
def test_spark_partition_values_match_java_transforms(spark, warehouse: dict[str, T.Built], catalog: str,
                                                      case: T.Case) -> None:
    """(bucket_uuid is left out: Spark holds uuid as a string, and its bucket function hashes the string. The
    PyIceberg tests check every partition value against PyIceberg's transforms.)"""
    built = warehouse[case.name].require()
    name = table_name(catalog, built)
    (term,) = case.partition_by
    java = spark.sql(f"SELECT {_java_transform(catalog, term)} AS p, count(*) AS n FROM "
                     f"(SELECT * FROM {name}) GROUP BY 1").collect()
    published = spark.sql(f"SELECT partition, record_count FROM {name}.partitions").collect()

    def key(value: Any) -> Any:
        return bytes(value) if isinstance(value, bytearray) else value

    expected = sorted(((key(r.p), r.n) for r in java), key=repr)
    actual = sorted(((key(r.partition[0]), r.record_count) for r in published), key=repr)
    assert actual == expected
    assert sum(n for _, n in actual) == built.case.data.num_rows


# -- snapshots and time travel --------------------------------------------------------------------------------------


@pytest.mark.parametrize("case", T.case_params("spark", "snapshots", SERIES))
def test_spark_sees_every_snapshot(spark, warehouse: dict[str, T.Built], catalog: str, case: T.Case) -> None:
    built = warehouse[case.name].require()
    name = table_name(catalog, built)
    snapshots = spark.sql(f"SELECT snapshot_id, parent_id, operation, summary FROM {name}.snapshots "
                          f"ORDER BY committed_at, snapshot_id").collect()
    history = spark.sql(f"SELECT snapshot_id, is_current_ancestor FROM {name}.history").collect()

    ids = [sid for sid, _ in built.snapshots]
    assert sorted(r.snapshot_id for r in snapshots) == sorted(ids)
    by_id = {r.snapshot_id: r for r in snapshots}
    for i, (sid, rows) in enumerate(built.snapshots):
        snap = by_id[sid]
        assert snap.parent_id == (ids[i - 1] if i else None)
        assert snap.operation == "append"
        assert int(snap.summary["total-records"]) == rows
    assert [r.snapshot_id for r in history] == ids
    assert all(r.is_current_ancestor for r in history)


@pytest.mark.parametrize("case", T.case_params("spark", "time_travel", [c for c in SERIES if c.appends == 5]))
def test_spark_time_travel_to_each_snapshot(spark, warehouse: dict[str, T.Built], case: T.Case) -> None:
    built = warehouse[case.name].require()
    assert len(built.snapshots) == 5

    for snapshot_id, rows in built.snapshots:
        df = spark.read.format("iceberg").option("snapshot-id", snapshot_id).load(built.location)
        assert df.count() == rows, f"snapshot {snapshot_id}"
        assert T.normalise_rows(spark_rows(df), built.schema) == T.expected_rows(built, rows), \
            f"snapshot {snapshot_id}"


@pytest.mark.parametrize("case", T.case_params("spark", "merged", [c for c in SERIES if c.appends == 150]))
def test_spark_reads_merged_manifests(spark, warehouse: dict[str, T.Built], catalog: str, case: T.Case) -> None:
    built = warehouse[case.name].require()
    name = table_name(catalog, built)
    manifests = spark.sql(f"SELECT added_data_files_count, existing_data_files_count, deleted_data_files_count "
                          f"FROM {name}.manifests").collect()
    files = spark.sql(f"SELECT count(*), sum(record_count) FROM {name}.files").collect()[0]

    # 150 one-append manifests would be 150: merge append (min-count-to-merge 100) must have packed them
    assert len(manifests) < 100, f"{len(manifests)} manifests: icelog did not merge"
    assert sum(m.added_data_files_count + m.existing_data_files_count for m in manifests) == files[0]
    assert all(m.deleted_data_files_count == 0 for m in manifests)
    assert files[1] == built.case.data.num_rows

    # snapshots around the merge point read back exactly (by SQL time travel this time)
    for index in (0, 98, 99, 100, 101, 149):
        snapshot_id, rows = built.snapshots[index]
        df = spark.sql(f"SELECT * FROM {name} VERSION AS OF {snapshot_id}")
        assert T.normalise_rows(spark_rows(df), built.schema) == T.expected_rows(built, rows), \
            f"snapshot #{index + 1} ({snapshot_id})"
