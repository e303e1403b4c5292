"""Scan planning: which data files of a snapshot a filter needs, with the delete files that apply to each, and
reading them into Arrow.

Layer: engine (reads the log through the state store, data and delete files through engine.reader).
The live files come from the log, not from the published manifests, so a scan never depends on a projection
being up to date. Files whose column metrics prove that no row matches are skipped (delete files too). Each
remaining data file gets the delete files the spec's scoping rules apply to it:

- a position delete file applies to data files in the same partition (spec id and partition tuple) whose data
  sequence number is less than or equal to its own; when its ``file_path`` bounds are equal it names a single
  data file, and applies to that file alone;
- an equality delete file applies to data files whose data sequence number is strictly smaller than its own, in
  the same partition, or in every partition when the delete file's spec is unpartitioned.

A time-travel scan (``snapshot_id`` given) reads with the schema that snapshot was written with, as Iceberg
Java and PyIceberg do; a scan of the current state reads with the current schema.
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from typing import Any, Iterator, Sequence

import attrs
import pyarrow as pa

from engine.errors import NotFound, ValidationError
from engine.model import types as T
from engine.model.arrow_schema import empty_arrow_table
from engine.model.data_file import DataFile, DataFileContent
from engine.model.expressions import (
    BooleanExpression,
    bind,
    metrics_might_match,
    parse_expression,
)
from engine.model.name_mapping import NAME_MAPPING_PROPERTY
from engine.model.schema import Schema
from engine.model.values import from_bytes
from engine.reader import (
    DELETE_FILE_PATH_ID,
    DeleteLoader,
    normalize_path,
    parse_name_mapping,
    read_data_file,
)
from engine.state import TableState
from engine.state_store import LiveEntry, StateStore

_DATA_FILE_FIELDS = frozenset(a.name for a in attrs.fields(DataFile))


@attrs.frozen(kw_only=True)
class FileScanTask:
    """One data file to read, the delete files to apply to it, and the filter its rows must still pass.

    The data file's attributes read through (``task.file_path``, ``task.record_count``, ``task.partition``,
    ...), so code written against a list of data files keeps working.
    """

    file: DataFile
    deletes: tuple[DataFile, ...] = attrs.field(default=(), converter=tuple)
    residual: BooleanExpression | None = None
    data_sequence_number: int = 0

    def __getattr__(self, name: str) -> Any:
        if name in _DATA_FILE_FIELDS:
            return getattr(self.file, name)
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")


def referenced_path(delete_file: DataFile) -> str | None:
    """The one data file a position delete file refers to, when its ``file_path`` bounds say so."""
    lower = dict(delete_file.lower_bounds or ()).get(DELETE_FILE_PATH_ID)
    upper = dict(delete_file.upper_bounds or ()).get(DELETE_FILE_PATH_ID)
    if lower is None or lower != upper:
        return None
    return normalize_path(from_bytes(T.StringType(), lower))


class DeleteIndex:
    """The live delete files of a snapshot, indexed for the spec's scoping rules.

    :param entries: the live delete entries
    :param unpartitioned_specs: ids of the table's unpartitioned specs (their equality deletes are global)
    """

    def __init__(self, entries: Sequence[LiveEntry], unpartitioned_specs: set[int]) -> None:
        self._pos_by_partition: dict[tuple[int, tuple[Any, ...]], list[tuple[int, int, DataFile]]] = defaultdict(list)
        self._pos_by_path: dict[str, list[tuple[int, int, DataFile]]] = defaultdict(list)
        self._eq_by_partition: dict[tuple[int, tuple[Any, ...]], list[tuple[int, int, DataFile]]] = defaultdict(list)
        self._eq_global: list[tuple[int, int, DataFile]] = []
        for order, e in enumerate(entries):
            item = (e.data_sequence_number, order, e.file)
            f = e.file
            if f.content == DataFileContent.POSITION_DELETES:
                path = referenced_path(f)
                if path is not None:
                    self._pos_by_path[path].append(item)
                else:
                    self._pos_by_partition[(f.spec_id, f.partition)].append(item)
            elif f.content == DataFileContent.EQUALITY_DELETES:
                if f.spec_id in unpartitioned_specs:
                    self._eq_global.append(item)
                else:
                    self._eq_by_partition[(f.spec_id, f.partition)].append(item)
        for bucket in (*self._pos_by_partition.values(), *self._pos_by_path.values(),
                       *self._eq_by_partition.values(), self._eq_global):
            bucket.sort(key=lambda x: (x[0], x[1]))
        self._keys: dict[int, list[int]] = {}

    def __bool__(self) -> bool:
        return bool(self._pos_by_partition or self._pos_by_path or self._eq_by_partition or self._eq_global)

    def _from(self, bucket: list[tuple[int, int, DataFile]], sequence_number: int,
              strictly_newer: bool) -> list[tuple[int, int, DataFile]]:
        """The entries of a bucket (sorted by sequence number) newer than, or as new as, ``sequence_number``."""
        if not bucket:
            return []
        keys = self._keys.get(id(bucket))
        if keys is None:
            keys = self._keys[id(bucket)] = [x[0] for x in bucket]
        find = bisect.bisect_right if strictly_newer else bisect.bisect_left
        return bucket[find(keys, sequence_number):]

    def for_data_file(self, f: DataFile, data_sequence_number: int) -> tuple[DataFile, ...]:
        """The delete files that apply to a data file with this data sequence number, oldest first."""
        key = (f.spec_id, f.partition)
        found = (self._from(self._pos_by_partition.get(key, []), data_sequence_number, False)
                 + self._from(self._pos_by_path.get(normalize_path(f.file_path), []), data_sequence_number, False)
                 + self._from(self._eq_by_partition.get(key, []), data_sequence_number, True)
                 + self._from(self._eq_global, data_sequence_number, True))
        found.sort(key=lambda x: (x[0], x[1]))
        return tuple(x[2] for x in found)


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
        self.schema: Schema = state.schema
        if snapshot_id is None:
            self.snapshot = state.current_snapshot
        else:
            self.snapshot = state.snapshot_by_id(snapshot_id)
            if self.snapshot is None:
                raise NotFound(f"Cannot scan: snapshot {snapshot_id} does not exist")
            if self.snapshot.schema_id is not None and any(s.schema_id == self.snapshot.schema_id
                                                           for s in state.schemas):
                self.schema = state.schema_by_id(self.snapshot.schema_id)
        self.filter = bind(parse_expression(where), self.schema) if where else None
        if columns is not None:
            names = {f.name for f in self.schema.columns}
            unknown = [c for c in columns if c not in names]
            if unknown:
                raise ValidationError(f"Cannot scan: unknown column(s) {', '.join(map(repr, unknown))}")
        self.columns = list(columns) if columns is not None else None

    def _might_match(self, f: DataFile) -> bool:
        return self.filter is None or metrics_might_match(self.filter, f, self.schema)

    def plan_files(self) -> list[FileScanTask]:
        """The data files that may hold matching rows, each with the delete files that apply to it."""
        if self.snapshot is None:
            return []
        entries = self.store.live_entries(self.state, self.snapshot.snapshot_id)
        data = [e for e in entries if e.file.content == DataFileContent.DATA and self._might_match(e.file)]
        deletes = [e for e in entries if e.file.content != DataFileContent.DATA and self._might_match(e.file)]
        unpartitioned = {s.spec_id for s in self.state.specs if s.is_unpartitioned}
        index = DeleteIndex(deletes, unpartitioned)
        return [FileScanTask(file=e.file, deletes=index.for_data_file(e.file, e.data_sequence_number) if index else (),
                             residual=self.filter, data_sequence_number=e.data_sequence_number)
                for e in data]

    def to_batches(self) -> Iterator[pa.Table]:
        """The matching rows, one table per data file."""
        mapping = parse_name_mapping(self.state.prop(NAME_MAPPING_PROPERTY))
        loader = DeleteLoader(mapping)
        for task in self.plan_files():
            table = read_data_file(task.file, self.schema, deletes=task.deletes, name_mapping_entries=mapping,
                                   row_filter=task.residual, loader=loader)
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
