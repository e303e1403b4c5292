"""Errors say which operation refused the input (an overwrite's bad rows say "Cannot overwrite", not "Cannot
append"), and a missing input file is a MissingFileError saying it does not exist; nothing is committed."""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from engine import Catalog, CorruptFileError, MissingFileError, ValidationError
from engine.formats.parquet_files import read_parquet_rows, read_parquet_schema


@pytest.fixture
def table(tmp_path: Path):
    with Catalog.open(tmp_path / "wh") as cat:
        cat.create_namespace("db")
        t = cat.create_table("db.t", pa.schema([("id", pa.int64()), ("cat", pa.string())]), partition_by=["cat"])
        t.append(pa.table({"id": pa.array([1, 2], pa.int64()), "cat": ["a", "b"]}))
        yield t


STRAY = pa.table({"id": pa.array([3], pa.int64()), "cat": ["a"], "stray": [1]})


@pytest.mark.parametrize("operation, run", [
    ("append", lambda t: t.append(STRAY)),
    ("overwrite", lambda t: t.overwrite(STRAY, where="cat = 'a'")),
    ("dynamic overwrite", lambda t: t.dynamic_overwrite(STRAY)),
    ("upsert", lambda t: t.upsert(STRAY, ["id"])),
    ("commit row delta", lambda t: t.row_delta().add_rows(STRAY)),
])
def test_rows_that_do_not_fit_are_refused_in_the_name_of_the_operation(table, operation, run) -> None:
    before = table.state.version
    with pytest.raises(ValidationError) as refused:
        run(table)
    assert str(refused.value) == (f"Cannot {operation}: column(s) 'stray' are not in the table schema (cat, id)")
    assert table.state.version == before


def test_a_missing_file_is_said_not_to_exist(table, tmp_path: Path) -> None:
    missing = str(tmp_path / "nope.parquet")
    before = table.state.version
    with pytest.raises(MissingFileError) as appended:
        table.append_files([missing])
    assert appended.value.path == missing and str(appended.value) == f"Cannot append file: {missing} does not exist"
    for read in (read_parquet_rows, read_parquet_schema):
        with pytest.raises(MissingFileError) as read_error:
            read(missing)
        assert read_error.value.path == missing
        assert str(read_error.value) == f"Cannot read file: {missing} does not exist"
    assert table.state.version == before and not os.path.exists(missing)


def test_a_file_that_is_not_parquet_is_still_called_unreadable(tmp_path: Path) -> None:
    text = tmp_path / "notes.parquet"
    text.write_text("not parquet")
    with pytest.raises(CorruptFileError) as refused:
        read_parquet_rows(str(text))
    assert not isinstance(refused.value, MissingFileError)
    assert str(refused.value).startswith(f"Cannot read {text}: not a readable Parquet file")
    pq.write_table(pa.table({"id": [1]}), text)
    assert read_parquet_rows(str(text)).num_rows == 1
