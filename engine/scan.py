"""Scan planning: which data files of a snapshot a filter needs, and reading them into Arrow.

Layer: engine (reads the log through the state store, data files through engine.reader).
The live files come from the log, not from the published manifests, so a scan never depends
on a projection being up to date. Files whose column metrics prove that no row matches are
skipped; the filter is then applied to the rows of the files that remain.
"""

from __future__ import annotations

from typing import Iterator, Sequence

import pyarrow as pa

from engine.errors import NotFound, ValidationError
from engine.model.arrow_schema import empty_arrow_table
from engine.model.data_file import DataFile, DataFileContent
from engine.model.expressions import (
    bind,
    evaluate_arrow,
    metrics_might_match,
    parse_expression,
)
from engine.reader import read_data_file
from engine.state import TableState
from engine.state_store import StateStore


class Scan:
    """A read of one snapshot of a table, optionally filtered and projected.

    :param store: the catalog's state store
    :param state: the table state to read
    :param where: a filter such as ``"id > 10 and category = 'a'"``
    :param columns: the columns to return (default: all)
    :param snapshot_id: the snapshot to read (default: the current one)
    """

    def __init__(self, store: StateStore, state: TableState, *, where: str | None = None,
                 columns: Sequence[str] | None = None, snapshot_id: int | None = None) -> None:
        self.store = store
        self.state = state
        if snapshot_id is None:
            current = state.current_snapshot
            self.snapshot = current
        else:
            self.snapshot = state.snapshot_by_id(snapshot_id)
            if self.snapshot is None:
                raise NotFound(f"Cannot scan: snapshot {snapshot_id} does not exist")
        self.schema = state.schema
        self.filter = bind(parse_expression(where), self.schema) if where else None
        if columns is not None:
            names = {f.name for f in self.schema.columns}
            unknown = [c for c in columns if c not in names]
            if unknown:
                raise ValidationError(f"Cannot scan: unknown column(s) {', '.join(map(repr, unknown))}")
        self.columns = list(columns) if columns is not None else None

    def plan_files(self) -> list[DataFile]:
        """The data files that may hold matching rows."""
        if self.snapshot is None:
            return []
        files = [f for f in self.store.live_files(self.state, self.snapshot.snapshot_id)
                 if f.content == DataFileContent.DATA]
        if self.filter is None:
            return files
        return [f for f in files if metrics_might_match(self.filter, f, self.schema)]

    def to_batches(self) -> Iterator[pa.Table]:
        for f in self.plan_files():
            table = read_data_file(f, self.schema)
            if self.filter is not None:
                table = table.filter(evaluate_arrow(self.filter, table))
            if self.columns is not None:
                table = table.select(self.columns)
            yield table

    def to_arrow(self) -> pa.Table:
        tables = list(self.to_batches())
        if not tables:
            empty = empty_arrow_table(self.schema)
            return empty.select(self.columns) if self.columns is not None else empty
        return pa.concat_tables(tables)

    def count(self) -> int:
        return sum(t.num_rows for t in self.to_batches())
