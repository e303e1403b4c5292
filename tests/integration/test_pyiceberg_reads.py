"""PyIceberg 0.12 reads exactly the rows icelog wrote, from the metadata file and through the SQL catalog.

Layer: tests (icelog's public API through tests/integration/tables.py, and PyIceberg; reads the warehouse the
Spark tests read, built once per run under pytest's temporary folder; needs no JVM).

Every table is read with ``StaticTable.from_metadata(metadata_location)`` and with
``SqlCatalog("icelog", uri=sqlite:///<warehouse>/catalog.db, ...).load_table("db.<name>")``, which finds it
through icelog's ``iceberg_tables`` row. Besides the Spark tables this covers the ``time`` type (identity and
bucket partitions, a time column and a list of times). Filters, time travel, snapshot lineage and partition
values (against PyIceberg's own transforms) are checked too.
"""

from __future__ import annotations

import uuid

import datetime as dt
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from tests.integration import tables as T

PYICEBERG_CASES = T.pyiceberg_cases()
SERIES = [c for c in PYICEBERG_CASES if c.name.startswith("appends_")]
TRANSFORM_CASES = [c for c in PYICEBERG_CASES if c.name.split("_")[0] in T.TRANSFORMS]


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory: pytest.TempPathFactory) -> dict[str, T.Built]:
    return T.shared_warehouse(tmp_path_factory)


@pytest.fixture(scope="module")
def sql_catalog(warehouse: dict[str, T.Built]):
    from pyiceberg.catalog.sql import SqlCatalog

    folder = next(iter(warehouse.values())).warehouse
    catalog = SqlCatalog("icelog", uri=f"sqlite:///{folder}/catalog.db", warehouse=f"file://{folder}")
    yield catalog
    catalog.engine.dispose()


def static_table(built: T.Built):
    from pyiceberg.table import StaticTable

    return StaticTable.from_metadata(built.metadata_location)


def rows_of(arrow_table, built: T.Built) -> list[tuple[Any, ...]]:
    assert arrow_table.column_names == built.schema.names
    return T.normalise_rows(arrow_table.to_pylist(), built.schema)


def _lists_of_structs(schema: pa.Schema) -> list[str]:
    return [f.name for f in schema if pa.types.is_list(f.type) and pa.types.is_struct(f.type.value_type)]


def pyiceberg_expected(built: T.Built, rows: int | None = None) -> list[tuple[Any, ...]]:
    """The expected rows, except that a null top-level list<struct> is expected as [].

    PyIceberg 0.12 rebuilds list<struct> arrays without their validity bitmap, so it reads a null list of
    structs as an empty list (apache/iceberg-python#3833, open). Spark reads the same files as null, and
    test_null_lists_of_structs_are_null_in_the_data_files proves icelog wrote nulls.
    """
    data = built.case.data if rows is None else built.case.data.slice(0, rows)
    columns = _lists_of_structs(built.schema)
    dicts = data.to_pylist()
    for row in dicts:
        for name in columns:
            if row[name] is None:
                row[name] = []
    return T.normalise_rows(dicts, built.schema)


# -- full reads -----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("case", T.case_params("pyiceberg", "static", PYICEBERG_CASES))
def test_pyiceberg_static_table_reads(warehouse: dict[str, T.Built], case: T.Case) -> None:
    built = warehouse[case.name].require()
    table = static_table(built)

    assert table.format_version == case.format_version
    assert rows_of(table.scan().to_arrow(), built) == pyiceberg_expected(built)


@pytest.mark.parametrize("case", T.case_params("pyiceberg", "version_hint", PYICEBERG_CASES))
def test_pyiceberg_finds_the_current_metadata_through_the_version_hint(warehouse: dict[str, T.Built],
                                                                        case: T.Case) -> None:
    from pyiceberg.table import StaticTable

    built = warehouse[case.name].require()
    table = StaticTable.from_metadata(built.location)  # reads <location>/metadata/version-hint.text

    assert Path(table.metadata_location) == Path(built.metadata_location)
    assert table.current_snapshot().snapshot_id == built.snapshots[-1][0]


@pytest.mark.parametrize("case", T.case_params("pyiceberg", "sql_catalog", PYICEBERG_CASES))
def test_pyiceberg_sql_catalog_reads(warehouse: dict[str, T.Built], sql_catalog, case: T.Case) -> None:
    built = warehouse[case.name].require()
    table = sql_catalog.load_table(built.identifier)

    # found through the iceberg_tables row icelog wrote, which points at the newest metadata file
    assert table.name() == (T.NAMESPACE, case.name)
    assert table.metadata_location == built.metadata_location
    assert rows_of(table.scan().to_arrow(), built) == pyiceberg_expected(built)


def test_null_lists_of_structs_are_null_in_the_data_files(warehouse: dict[str, T.Built]) -> None:
    import pyarrow.parquet as pq

    built = warehouse["all_types_v2"].require()
    table = static_table(built)
    paths = [task.file.file_path for task in table.scan().plan_files()]
    read = pa.concat_tables([pq.read_table(p, columns=["id", "lst_st"]) for p in paths]).sort_by("id")

    expected = built.case.data.select(["id", "lst_st"]).to_pylist()
    assert [r["lst_st"] for r in read.to_pylist()] == [r["lst_st"] for r in expected]
    assert None in read.column("lst_st").to_pylist()


def test_sql_catalog_lists_what_icelog_wrote(warehouse: dict[str, T.Built], sql_catalog) -> None:
    assert (T.NAMESPACE,) in sql_catalog.list_namespaces()
    assert set(sql_catalog.list_tables(T.NAMESPACE)) == {(T.NAMESPACE, name) for name in warehouse}
    assert sql_catalog.table_exists(f"{T.NAMESPACE}.appends_1_v2")
    assert not sql_catalog.table_exists(f"{T.NAMESPACE}.no_such_table")


# -- filters --------------------------------------------------------------------------------------------------------


def _expression(where: T.Filter):
    from pyiceberg.expressions import EqualTo, IsNull, LessThan

    if where.op == "is null":
        return IsNull(where.column)
    return (EqualTo if where.op == "=" else LessThan)(where.column, where.value)


@pytest.mark.parametrize(("case", "where"), T.filter_params("pyiceberg", "filter", PYICEBERG_CASES))
def test_pyiceberg_filter_matches_python(warehouse: dict[str, T.Built], case: T.Case, where: T.Filter) -> None:
    built = warehouse[case.name].require()
    scan = static_table(built).scan(row_filter=_expression(where), selected_fields=("id",))

    ids = sorted(scan.to_arrow().column("id").to_pylist())
    assert ids == T.expected_ids(built, where), str(where)


# -- partition values against PyIceberg's transforms ----------------------------------------------------------------


def _internal(value: Any) -> Any:
    """A Python value in PyIceberg's internal form (days, micros, UUID, bytes) for transforming and comparing."""
    from pyiceberg.utils.datetime import (
        date_to_days,
        datetime_to_micros,
        time_to_micros,
    )

    if isinstance(value, dt.datetime):
        return datetime_to_micros(value if value.tzinfo else value.replace(tzinfo=dt.timezone.utc))
    if isinstance(value, dt.date):
        return date_to_days(value)
    if isinstance(value, dt.time):
        return time_to_micros(value)
    if isinstance(value, (bytes, bytearray)):
        return bytes(value)
    return value


@pytest.mark.parametrize("case", T.case_params("pyiceberg", "partitions", TRANSFORM_CASES))
def test_pyiceberg_partition_values_match_its_transforms(warehouse: dict[str, T.Built], case: T.Case) -> None:
    built = warehouse[case.name].require()
    table = static_table(built)
    (field,) = table.spec().fields
    source_type = table.schema().find_field(field.source_id).field_type
    transform = field.transform.transform(source_type)

    expected = Counter(None if v is None else transform(_internal(v)) for v in built.case.data.column("v").to_pylist())
    # the partition tuples exactly as icelog wrote them in the manifests (PyIceberg's internal values)
    published: Counter[Any] = Counter()
    for manifest in table.current_snapshot().manifests(table.io):
        for entry in manifest.fetch_manifest_entry(table.io):
            published[_internal(entry.data_file.partition[0])] += entry.data_file.record_count

    assert published == expected


@pytest.mark.parametrize("case", T.case_params("pyiceberg", "summaries",
                                                TRANSFORM_CASES + [c for c in PYICEBERG_CASES
                                                                   if c.name.startswith(("multi_", "appends_"))]))
def test_partition_summaries_bound_every_non_null_value(warehouse: dict[str, T.Built], case: T.Case) -> None:
    """The manifest list's partition field summaries, as the spec defines them: a null lower bound means every
    value is null (readers prune a manifest whose summary has no bounds for any comparison)."""
    from pyiceberg.conversions import from_bytes

    built = warehouse[case.name].require()
    table = static_table(built)
    partition_type = table.spec().partition_type(table.schema())
    for manifest in table.current_snapshot().manifests(table.io):
        partitions = [e.data_file.partition for e in manifest.fetch_manifest_entry(table.io)]
        assert manifest.partitions is not None and len(manifest.partitions) == len(partition_type.fields)
        for pos, (summary, field) in enumerate(zip(manifest.partitions, partition_type.fields)):
            values = [p[pos] for p in partitions]
            present = [v for v in values if v is not None]
            where = f"{manifest.manifest_path}: summary of {field.name}"
            assert summary.contains_null == (len(present) < len(values)), where
            if not present:
                assert summary.lower_bound is None and summary.upper_bound is None, where
                continue
            assert summary.lower_bound is not None and summary.upper_bound is not None, \
                f"{where} has no bounds but {len(present)} non-null values"
            lower = from_bytes(field.field_type, summary.lower_bound)
            upper = from_bytes(field.field_type, summary.upper_bound)
            if isinstance(present[0], uuid.UUID):  # PyIceberg's from_bytes gives uuid bounds as raw bytes
                lower, upper = uuid.UUID(bytes=lower), uuid.UUID(bytes=upper)
            assert lower == min(present) and upper == max(present), where


# -- snapshots and time travel --------------------------------------------------------------------------------------


@pytest.mark.parametrize("case", T.case_params("pyiceberg", "snapshots", SERIES))
def test_pyiceberg_sees_every_snapshot(warehouse: dict[str, T.Built], case: T.Case) -> None:
    built = warehouse[case.name].require()
    metadata = static_table(built).metadata

    assert [s.snapshot_id for s in metadata.snapshots] == [sid for sid, _ in built.snapshots]
    assert [s.sequence_number for s in metadata.snapshots] == (
        list(built.sequence_numbers) if case.format_version == 2 else [0] * len(built.snapshots))
    parents = [None] + [sid for sid, _ in built.snapshots[:-1]]
    assert [s.parent_snapshot_id for s in metadata.snapshots] == parents
    assert [int(s.summary["total-records"]) for s in metadata.snapshots] == [rows for _, rows in built.snapshots]
    assert [e.snapshot_id for e in metadata.snapshot_log] == [sid for sid, _ in built.snapshots]
    assert metadata.current_snapshot_id == built.snapshots[-1][0]
    assert metadata.refs["main"].snapshot_id == built.snapshots[-1][0]


@pytest.mark.parametrize("case", T.case_params("pyiceberg", "time_travel",
                                                [c for c in SERIES if c.appends in (5, 150)]))
def test_pyiceberg_time_travel(warehouse: dict[str, T.Built], case: T.Case) -> None:
    built = warehouse[case.name].require()
    table = static_table(built)
    picked = built.snapshots if case.appends == 5 else [built.snapshots[i] for i in (0, 98, 99, 100, 101, 149)]

    for snapshot_id, rows in picked:
        assert rows_of(table.scan(snapshot_id=snapshot_id).to_arrow(), built) == pyiceberg_expected(built, rows), \
            f"snapshot {snapshot_id}"


@pytest.mark.parametrize("case", T.case_params("pyiceberg", "merged", [c for c in SERIES if c.appends == 150]))
def test_pyiceberg_reads_merged_manifests(warehouse: dict[str, T.Built], case: T.Case) -> None:
    built = warehouse[case.name].require()
    table = static_table(built)
    manifests = table.current_snapshot().manifests(table.io)
    entries = [e for m in manifests for e in m.fetch_manifest_entry(table.io, discard_deleted=False)]

    assert len(manifests) < 100, f"{len(manifests)} manifests: icelog did not merge"
    assert sum(e.data_file.record_count for e in entries) == case.data.num_rows
    sequence_of = dict(zip((sid for sid, _ in built.snapshots), built.sequence_numbers))
    order = {sid: i for i, (sid, _) in enumerate(built.snapshots)}
    statuses: Counter[str] = Counter()
    for manifest in manifests:
        for entry in manifest.fetch_manifest_entry(table.io, discard_deleted=False):
            status = entry.status.name
            statuses[status] += 1
            if status == "ADDED":  # snapshot id inherited from the manifest (v2) or written (v1)
                assert entry.snapshot_id == manifest.added_snapshot_id
            else:  # EXISTING entries of a merged manifest keep the snapshot that added them
                assert order[entry.snapshot_id] < order[manifest.added_snapshot_id]
            if case.format_version == 2:
                assert entry.sequence_number == sequence_of[entry.snapshot_id]
    assert statuses["DELETED"] == 0
    assert statuses["EXISTING"] > 0, "no merged manifest carries EXISTING entries"
