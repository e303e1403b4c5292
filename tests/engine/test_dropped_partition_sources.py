"""A column that only an older partition spec uses may be dropped, as Java keeps such specs: Spark's
``CREATE OR REPLACE TABLE ... AS`` with a new partitioning, and ``DROP COLUMN`` after ``DROP PARTITION FIELD``. The
older spec's files keep their partition values, typed by the schema they were written with.

Layer: tests (real catalogs and files; icelog's scan, PyIceberg's StaticTable and DuckDB's iceberg_scan read the
result).
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from engine import Catalog
from engine.errors import ValidationError
from engine.operations.commit import CommitContext
from engine.operations.table_commit import parse_table_commit
from engine.operations.table_updates import commit_events
from tests.conftest import duckdb_connect

SCHEMA = pa.schema([("id", pa.int64()), ("cat", pa.string())])


def _rows(ids: list[int], cat: str) -> pa.Table:
    return pa.table({"id": pa.array(ids, pa.int64()), "cat": [cat] * len(ids)})


def _ids_everywhere(t) -> list[list[int]]:
    from pyiceberg.table import StaticTable

    icelog = sorted(t.scan().to_arrow().column("id").to_pylist())
    pyiceberg = sorted(StaticTable.from_metadata(t.metadata_location).scan().to_arrow().column("id").to_pylist())
    con = duckdb_connect()
    duck = sorted(r[0] for r in con.execute(f"SELECT id FROM iceberg_scan('{t.metadata_location}')").fetchall())
    con.close()
    return [icelog, pyiceberg, duck]


def test_drop_column_after_drop_partition_field(tmp_path: Path) -> None:
    with Catalog.open(tmp_path / "wh") as cat:
        cat.create_namespace("db")
        t = cat.create_table("db.t", schema=SCHEMA, partition_by=["cat"])
        t.append(_rows([1, 2], "a"))
        t.append(_rows([3], "b"))
        with pytest.raises(ValidationError, match="partition source .* of the default spec"):
            t.update_schema().delete_column("cat").commit()  # the spec writes use: refused
        t.update_spec().remove_field("cat").commit()
        t.update_schema().delete_column("cat").commit()
        t.append(pa.table({"id": pa.array([4], pa.int64())}))
        assert _ids_everywhere(t) == [[1, 2, 3, 4]] * 3
        assert sorted(t.scan("id > 1").to_arrow().column("id").to_pylist()) == [2, 3, 4]
        t.delete("id = 2")
        t.rewrite_data_files()
        assert _ids_everywhere(t) == [[1, 3, 4]] * 3
        first = t.snapshots()[0].snapshot_id
        assert sorted(t.scan(snapshot_id=first).to_arrow().column("cat").to_pylist()) == ["a", "a"]
        assert cat.verify("db.t") == []


def test_a_client_replacing_schema_and_partitioning_in_one_commit(tmp_path: Path) -> None:
    """Spark's RTAS with a new partitioning: the new schema is set current before the new spec is the default (a
    check at set-current-schema refused it with 400); the commit's final default spec must fit its final schema."""
    with Catalog.open(tmp_path / "wh") as cat:
        cat.create_namespace("db")
        t = cat.create_table("db.t", schema=SCHEMA, partition_by=["cat"])
        t.append(_rows([1], "a"))
        schema = {"type": "struct", "schema-id": 1, "fields": [{"id": 3, "name": "id", "required": False,
                                                                 "type": "long"}]}

        def commit(*updates: dict) -> list:
            return commit_events(t.state, parse_table_commit([], list(updates)), CommitContext(commit_id="c", time_ms=1),
                                 client_snapshots={}, live_entries=cat.store.live_entries,
                                 live_files=cat.store.live_files_by_key, stream=t.uuid)

        new_schema = [{"action": "add-schema", "schema": schema, "last-column-id": 3},
                      {"action": "set-current-schema", "schema-id": -1}]
        with pytest.raises(ValidationError, match="default partition spec 0 does not fit the current schema"):
            commit(*new_schema)
        events = commit(*new_schema, {"action": "add-spec", "spec": {"spec-id": 1, "fields": []}},
                        {"action": "set-default-spec", "spec-id": -1})
        assert [type(e).__name__ for e in events] == ["SchemaAdded", "CurrentSchemaSet", "SpecAdded", "DefaultSpecSet"]
