"""A data file already live in the table is refused by append_files (as PyIceberg's add_files refuses it), by any
spelling of its path, and nothing is committed: every reader keeps counting its rows once (issue 15)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from engine import Catalog
from engine.errors import ValidationError


def test_a_file_already_in_the_table_is_refused_and_readers_agree(tmp_path: Path) -> None:
    from pyiceberg.table import StaticTable

    data = tmp_path / "batch.parquet"
    pq.write_table(pa.table({"id": pa.array([1, 2, 3], pa.int64())}), data)
    other = tmp_path / "other.parquet"
    pq.write_table(pa.table({"id": pa.array([4], pa.int64())}), other)
    with Catalog.open(tmp_path / "wh") as cat:
        cat.create_namespace("db")
        t = cat.create_table("db.t", pa.schema([("id", pa.int64())]))
        t.append_files([str(data)])
        head = cat.log.head(t.uuid)
        for spelling in (str(data), f"file://{data}", str(tmp_path / "." / "batch.parquet")):
            with pytest.raises(ValidationError, match="batch.parquet is already in table db.t"):
                t.append_files([str(other), spelling])
        assert cat.log.head(t.uuid) == head                     # nothing committed, not even the other file
        assert t.scan().count() == 3
        assert StaticTable.from_metadata(t.metadata_location).scan().to_arrow().num_rows == 3
        t.manage_snapshots().create_branch(None, "audit").commit()
        t.delete_files([t.inspect.files().column("file_path")[0].as_py()])
        t.append_files([str(data)])                              # gone from main: it may come back
        assert t.scan().count() == 3 and cat.verify("db.t") == []
        with pytest.raises(ValidationError, match="branch audit"):
            t.append_files([str(data)], branch="audit")
