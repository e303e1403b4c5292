"""Scan planning: which data files of a snapshot a filter needs, with the delete files that apply to each, and
reading them into Arrow.

Layer: engine (reads the log through the state store, data and delete files through engine.read.reader).
The live files come from the log, not from the published manifests, so a scan never depends on a projection
being up to date; engine.read.file_index keeps them decoded per snapshot, so planning after a commit decodes only
that commit's files, and the first plan in a process reads each commit's file block (engine.read.file_blocks, written
at commit time): a filtered plan skips the commits whose partition summaries rule the filter out, as a reader
of manifest lists skips manifests, and builds only the files whose partition might match. A filter prunes data
files first by their partition, through the inclusive projection of the filter on each file's OWN spec (specs
evolve), evaluated once per distinct value of the partition fields
the filter touches, then by column metrics (bounds, null and NaN counts) against the residual, the part of the
filter the partition does not settle; the residual is what each task's rows must still pass. Delete files whose
metrics rule the filter out are skipped too; :meth:`Scan.plan_stats` counts what was skipped. Each remaining
data file gets the delete files the spec's scoping rules apply to it:

- a position delete file applies to data files in the same partition (spec id and partition tuple) whose data
  sequence number is less than or equal to its own; when its ``file_path`` bounds are equal (or it names a
  ``referenced_data_file``) it names a single data file, and applies to that file alone;
- a deletion vector (format version 3) applies to its ``referenced_data_file`` under the same sequence number
  rule; its positions are read from its blob in a Puffin file (engine.formats.deletion_vectors);
- an equality delete file applies to data files whose data sequence number is strictly smaller than its own, in
  the same partition, or in every partition when the delete file's spec is unpartitioned.

A time-travel scan (a ``snapshot_id``, an ``as_of_timestamp_ms`` looked up in the snapshot log, or a tag) reads
with the schema that snapshot was written with, as Iceberg Java and PyIceberg do; a scan of the current state or
of a branch head reads with the current schema.
"""

from __future__ import annotations

import bisect
import collections
import operator
import os
from collections import defaultdict
from concurrent.futures import Future, ThreadPoolExecutor
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import attrs
import pyarrow as pa

from engine.errors import CorruptFileError, NotFound, ValidationError
from engine.model.paths import normalize_path
from engine.read.file_index import FileIndex, FileItem, collector_paused
from engine.model import types as T
from engine.model.arrow_schema import empty_arrow_table
from engine.model.data_file import DataFile, DataFileContent, FieldSummary, LiveEntry
from engine.model.delete_overlap import FileMetrics
from engine.model.expression_binding import bind
from engine.model.expression_parser import parse_expression
from engine.model.expressions import AlwaysFalse, AlwaysTrue, BooleanExpression, referenced_field_ids
from engine.model.manifest_evaluation import summaries_might_match
from engine.model.partitioning import partition_key
from engine.model.metrics_evaluation import metrics_might_match, metrics_must_match
from engine.model.partition_filters import evaluate_partition, project_inclusive, residual
from engine.model.name_mapping import NAME_MAPPING_PROPERTY
from engine.model.schema import LINEAGE_COLUMNS, Schema
from engine.model.values import from_bytes
from engine.read.raw_file import parse_name_mapping
from engine.read.reader import DELETE_FILE_PATH_ID, DeleteLoader, lineage_field, read_data_file
from engine.state.table_state import TableState
from engine.state.store import StateStore
from storage.files import LOCAL_FILES, FileIO

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
    """The one data file a position delete file refers to: a deletion vector's ``referenced_data_file``, or when its
    ``file_path`` bounds are equal, the path they name."""
    if delete_file.referenced_data_file is not None:
        return normalize_path(delete_file.referenced_data_file)
    lower = dict(delete_file.lower_bounds or ()).get(DELETE_FILE_PATH_ID)
    upper = dict(delete_file.upper_bounds or ()).get(DELETE_FILE_PATH_ID)
    if lower is None or lower != upper:
        return None
    return normalize_path(from_bytes(T.StringType(), lower))


#: threads that read a scan's data files at once (``ICELOG_READ_THREADS``; default: the cores, at most 8)
READ_THREADS = max(1, int(os.environ.get("ICELOG_READ_THREADS") or min(8, os.cpu_count() or 1)))


class DeleteIndex:
    """The live delete files of a snapshot, indexed for the spec's scoping rules.

    :param entries: the live delete entries
    :param unpartitioned_specs: ids of the table's unpartitioned specs (their equality deletes are global)
    :param schema: the table schema; when given, an equality delete file applies to a data file only if their
        column metrics say it may (:class:`engine.model.delete_overlap.FileMetrics`, Java's rule)
    """

    def __init__(self, entries: Sequence[LiveEntry], unpartitioned_specs: set[int], schema: Schema | None = None
                 ) -> None:
        #: the table schema's fields by id: equality deletes whose metrics cannot touch a data file are left out
        self._fields = schema.index_by_id() if schema is not None else None
        self._delete_metrics: dict[int, FileMetrics] = {}  # by id() of the delete files this index holds
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
                    self._pos_by_partition[(f.spec_id, partition_key(f.partition))].append(item)
            elif f.content == DataFileContent.EQUALITY_DELETES:
                if f.spec_id in unpartitioned_specs:
                    self._eq_global.append(item)
                else:
                    self._eq_by_partition[(f.spec_id, partition_key(f.partition))].append(item)
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

    def _metrics_of(self, delete_file: DataFile) -> FileMetrics:
        metrics = self._delete_metrics.get(id(delete_file))
        if metrics is None:
            metrics = self._delete_metrics[id(delete_file)] = FileMetrics(delete_file)
        return metrics

    def for_data_file(self, f: DataFile, data_sequence_number: int) -> tuple[DataFile, ...]:
        """The delete files that apply to a data file with this data sequence number, oldest first."""
        key = (f.spec_id, partition_key(f.partition))  # a NaN partition is one partition, as in Java
        equality = (self._from(self._eq_by_partition.get(key, []), data_sequence_number, True)
                    + self._from(self._eq_global, data_sequence_number, True))
        if equality and self._fields is not None:
            data = FileMetrics(f)
            equality = [x for x in equality if data.may_hold_rows_deleted_by(self._metrics_of(x[2]), self._fields)]
        found = (self._from(self._pos_by_partition.get(key, []), data_sequence_number, False)
                 + self._from(self._pos_by_path.get(normalize_path(f.file_path), []), data_sequence_number, False)
                 + equality)
        found.sort(key=lambda x: (x[0], x[1]))
        return tuple(x[2] for x in found)


@attrs.frozen(kw_only=True)
class PlanStats:
    """What planning kept and skipped, for one scan.

    :param data_files: live data files in the snapshot
    :param skipped_by_partition: data files whose partition (through their own spec) rules the filter out
    :param skipped_by_metrics: data files whose column metrics rule it out (of those the partition kept)
    :param planned: data files left to read
    :param partitions_evaluated: distinct (spec, partition) pairs the filter was evaluated on
    :param delete_files: live delete files
    :param skipped_delete_files: delete files whose metrics rule the filter out
    :param skipped_commits: commits whose files a cold plan did not decode at all (their partition summaries rule
        the filter out; their data files count in ``skipped_by_partition``)
    """

    data_files: int = 0
    skipped_by_partition: int = 0
    skipped_by_metrics: int = 0
    planned: int = 0
    partitions_evaluated: int = 0
    delete_files: int = 0
    skipped_delete_files: int = 0
    skipped_commits: int = 0

    @property
    def skipped(self) -> int:
        return self.skipped_by_partition + self.skipped_by_metrics


class Scan:
    """A read of one snapshot of a table, optionally filtered and projected.

    At most one of ``snapshot_id``, ``as_of_timestamp_ms`` and ``ref`` picks the snapshot. A scan of a snapshot
    id, a timestamp or a tag reads with the schema that snapshot was written with (as Iceberg Java and PyIceberg
    do); a scan of the current state or of a branch reads with the current schema.

    :param store: the catalog's state store
    :param state: the table state to read
    :param where: a filter such as ``"id > 10 and category = 'a'"`` (or an expression)
    :param columns: the columns to return (default: all); the row lineage metadata columns ``_row_id`` and
        ``_last_updated_sequence_number`` may be among them (null for rows written before the table was v3)
    :param snapshot_id: the snapshot to read (default: the current one)
    :param as_of_timestamp_ms: read the snapshot that was current at this time (the snapshot log)
    :param ref: read the head of this branch or tag
    :raises NotFound: for an unknown snapshot, ref, or a time before the first snapshot
    :raises ValidationError: for unknown columns, a filter that does not bind, or several snapshot selectors
    """

    def __init__(self, store: StateStore, state: TableState, *, where: str | BooleanExpression | None = None,
                 columns: Sequence[str] | None = None, snapshot_id: int | None = None,
                 as_of_timestamp_ms: int | None = None, ref: str | None = None, io: FileIO = LOCAL_FILES) -> None:
        self.store = store
        self.state = state
        #: where the data and delete files are read from
        self.io = io
        self.schema: Schema = state.schema
        given = [n for n, v in (("snapshot_id", snapshot_id), ("as_of_timestamp_ms", as_of_timestamp_ms),
                                ("ref", ref)) if v is not None]
        if len(given) > 1:
            raise ValidationError(f"Cannot scan: give one of snapshot_id, as_of_timestamp_ms and ref, not "
                                  f"{' and '.join(given)}")
        use_snapshot_schema = True
        if ref is not None:
            found = state.ref(ref)
            if found is None:
                raise NotFound(f"Cannot scan: ref {ref!r} does not exist")
            snapshot_id = found.snapshot_id
            use_snapshot_schema = found.type == "tag"
        elif as_of_timestamp_ms is not None:
            snapshot_id = snapshot_as_of(state, as_of_timestamp_ms)
        if snapshot_id is None:
            self.snapshot = state.current_snapshot
        else:
            self.snapshot = state.snapshot_by_id(snapshot_id)
            if self.snapshot is None:
                raise NotFound(f"Cannot scan: snapshot {snapshot_id} does not exist")
            if (use_snapshot_schema and self.snapshot.schema_id is not None
                    and any(s.schema_id == self.snapshot.schema_id for s in state.schemas)):
                self.schema = state.schema_by_id(self.snapshot.schema_id)
        if where is None or isinstance(where, AlwaysTrue):
            self.filter: BooleanExpression | None = None
        else:
            self.filter = bind(parse_expression(where) if isinstance(where, str) else where, self.schema)
            if isinstance(self.filter, AlwaysTrue):
                self.filter = None
        names = {f.name for f in self.schema.columns}
        if columns is not None:
            unknown = [c for c in columns if c not in names and c not in LINEAGE_COLUMNS]
            if unknown:
                raise ValidationError(f"Cannot scan: unknown column(s) {', '.join(map(repr, unknown))}")
        self.columns = list(columns) if columns is not None else None
        #: the row lineage metadata columns were asked for (v3: ``_row_id``, ``_last_updated_sequence_number``)
        self.with_lineage = any(c in LINEAGE_COLUMNS and c not in names for c in columns or ())
        self._tasks: list[FileScanTask] | None = None
        self._projected: dict[int, tuple[BooleanExpression | None, Any]] = {}
        self._stats: PlanStats | None = None

    # ------------------------------------------------------------ planning
    def _might_match(self, f: DataFile) -> bool:
        return self.filter is None or metrics_might_match(self.filter, f, self.schema)

    def _projections(self) -> dict[int, tuple[BooleanExpression | None, Any]]:
        """Per spec id, the filter's inclusive projection and the spec's partition struct (None: no pruning)."""
        assert self.filter is not None
        out: dict[int, tuple[BooleanExpression | None, Any]] = {}
        for spec in self.state.specs:
            if spec.is_unpartitioned:
                out[spec.spec_id] = (None, None)
                continue
            try:
                projected = project_inclusive(self.filter, spec, self.schema)
                out[spec.spec_id] = (None if isinstance(projected, AlwaysTrue) else projected,
                                     spec.partition_type(self.schema))
            except ValidationError:  # a spec over columns this schema no longer has: no pruning by it
                out[spec.spec_id] = (None, None)
        return out

    def plan_files(self) -> list[FileScanTask]:
        """The data files that may hold matching rows, each with the delete files that apply to it and the part
        of the filter its partition does not settle (the residual)."""
        if self._tasks is None:
            self._tasks, self._stats = self._plan()
        return list(self._tasks)

    def plan_stats(self) -> PlanStats:
        """How many files planning kept and skipped (plans first if needed)."""
        if self._stats is None:
            self._tasks, self._stats = self._plan()
        return self._stats

    def _plan(self) -> tuple[list[FileScanTask], PlanStats]:
        if self.snapshot is None:
            return [], PlanStats()
        with collector_paused():  # planning allocates many small acyclic objects
            return self._plan_files()

    def _residuals(self) -> tuple[Callable[[int, tuple[Any, ...]], BooleanExpression | None], list[int]]:
        """A function giving the residual of the filter for a partition of a spec (None: the partition rules the
        filter out), and a one-element list counting the distinct evaluations it made.

        The projection and the residual depend only on the partition fields built from columns the filter names:
        they are evaluated once per distinct value of those fields, not once per file or per partition."""
        assert self.filter is not None
        flt, schema = self.filter, self.schema
        projections = self._projections()
        specs = {s.spec_id: s for s in self.state.specs}
        referenced = referenced_field_ids(flt)
        relevant = {s.spec_id: _key_getter(tuple(i for i, pf in enumerate(s.fields) if pf.source_id in referenced))
                    for s in self.state.specs}
        residuals: dict[tuple[int, Any], BooleanExpression | None] = {}
        evaluated = [0]

        def residual_of(spec_id: int, partition: tuple[Any, ...]) -> BooleanExpression | None:
            getter = relevant.get(spec_id)
            key = (spec_id, partition if getter is None else getter(partition))
            try:
                return residuals[key]
            except KeyError:
                pass
            evaluated[0] += 1
            projected, ptype = projections.get(spec_id, (None, None))
            rest: BooleanExpression | None
            if projected is not None and not evaluate_partition(projected, ptype, partition):
                rest = None
            elif spec_id in specs and not specs[spec_id].is_unpartitioned and ptype is not None:
                rest = residual(flt, specs[spec_id], schema, partition)
                if isinstance(rest, AlwaysFalse):
                    rest = None
            else:
                rest = flt
            residuals[key] = rest
            return rest

        self._projected = projections
        return residual_of, evaluated

    def _commit_might_match(self, summaries: Mapping[int, tuple[FieldSummary, ...]]) -> bool:
        """Whether a commit whose added data files have these partition summaries (by spec id) may add a file the
        filter needs (each spec judged through its own projection, as manifests are)."""
        for spec_id, fields in summaries.items():
            projected, _ = self._projected.get(spec_id, (None, None))
            spec = next((s for s in self.state.specs if s.spec_id == spec_id), None)
            if projected is None or spec is None:
                return True
            try:
                if summaries_might_match(projected, spec, fields):
                    return True
            except (CorruptFileError, ValidationError):
                return True
        return False

    def _plan_files(self) -> tuple[list[FileScanTask], PlanStats]:
        assert self.snapshot is not None
        index = FileIndex.of(self.store)
        snapshot_id = self.snapshot.snapshot_id
        data_content = DataFileContent.DATA
        skipped_partition = skipped_metrics = skipped_commits = 0
        evaluated = [0]
        kept: list[tuple[FileItem, BooleanExpression | None]]
        if self.filter is None:
            items = index.live_items(self.state, snapshot_id)
            data = [i for i in items if i.content is data_content]
            data_count = len(data)
            kept = [(i, None) for i in data]
        else:
            residual_of, evaluated = self._residuals()
            pruned = None
            if not index.has_live_set(self.state, snapshot_id):
                # cold: decode only the commits and build only the files whose partitions might match
                pruned = index.pruned_items(self.state, snapshot_id, self._commit_might_match,
                                            lambda spec_id, partition: residual_of(spec_id, partition) is not None)
            if pruned is not None:
                items = pruned.items
                data = [i for i in items if i.content is data_content]
                data_count = pruned.data_files
                skipped_partition = pruned.skipped_data_files
                skipped_commits = pruned.skipped_commits
            else:
                items = index.live_items(self.state, snapshot_id)
                data = [i for i in items if i.content is data_content]
                data_count = len(data)
            kept = []
            schema = self.schema
            for item in data:
                rest = residual_of(item.spec_id, item.partition)
                if rest is None:
                    skipped_partition += 1
                elif not isinstance(rest, AlwaysTrue) and not metrics_might_match(rest, item.file(), schema):
                    skipped_metrics += 1
                else:
                    kept.append((item, rest))
        all_deletes = [i.entry() for i in items if i.content is not data_content]
        deletes = [e for e in all_deletes if self._might_match(e.file)]
        unpartitioned = {s.spec_id for s in self.state.specs if not s.is_partitioned}  # equality deletes: global
        delete_index = DeleteIndex(deletes, unpartitioned, self.state.schema)
        if delete_index:
            tasks = []
            for item, rest in kept:
                f = item.file()
                sequence_number = item.data_sequence_number
                tasks.append(_task(f, delete_index.for_data_file(f, sequence_number), rest, sequence_number))
        else:
            tasks = [_task(item.file(), (), rest, item.data_sequence_number) for item, rest in kept]
        stats = PlanStats(data_files=data_count, skipped_by_partition=skipped_partition,
                          skipped_by_metrics=skipped_metrics, planned=len(tasks), partitions_evaluated=evaluated[0],
                          delete_files=len(all_deletes), skipped_delete_files=len(all_deletes) - len(deletes),
                          skipped_commits=skipped_commits)
        return tasks, stats

    # ------------------------------------------------------------ reading
    def _read(self, task: FileScanTask, mapping: Any, loader: DeleteLoader) -> pa.Table:
        row_filter = None if task.residual is None or isinstance(task.residual, AlwaysTrue) else task.residual
        table = read_data_file(task.file, self.schema, deletes=task.deletes, name_mapping_entries=mapping,
                               partition_constants=self.state.partition_constants(task.file),
                               row_filter=row_filter, loader=loader, with_lineage=self.with_lineage,
                               data_sequence_number=task.data_sequence_number)
        if self.columns is not None:
            table = table.select(self.columns)
        return table

    def to_batches(self) -> Iterator[pa.Table]:
        """The matching rows, one table per data file, in plan order. Files are read by a few threads at once
        (Parquet decoding releases the GIL), at most ``2 x threads`` files ahead of the consumer, so memory stays
        bounded however large the table."""
        mapping = parse_name_mapping(self.state.prop(NAME_MAPPING_PROPERTY))
        loader = DeleteLoader(mapping, io=self.io, fields=self.schema.index_by_id())
        tasks = self.plan_files()
        if len(tasks) <= 1 or READ_THREADS <= 1:
            for task in tasks:
                yield self._read(task, mapping, loader)
            return
        with ThreadPoolExecutor(max_workers=READ_THREADS, thread_name_prefix="icelog-scan") as pool:
            ahead: collections.deque[Future[pa.Table]] = collections.deque(
                pool.submit(self._read, task, mapping, loader) for task in tasks[:2 * READ_THREADS])
            pending = iter(tasks[2 * READ_THREADS:])
            try:
                while ahead:
                    table = ahead.popleft().result()
                    task = next(pending, None)
                    if task is not None:
                        ahead.append(pool.submit(self._read, task, mapping, loader))
                    yield table
            finally:
                for f in ahead:
                    f.cancel()

    def _empty(self) -> pa.Table:
        empty = empty_arrow_table(self.schema)
        if self.with_lineage:
            for name in LINEAGE_COLUMNS:
                empty = empty.append_column(lineage_field(name), pa.array([], pa.int64()))
        return empty.select(self.columns) if self.columns is not None else empty

    def to_arrow(self) -> pa.Table:
        tables = list(self.to_batches())
        if not tables:
            return self._empty()
        if tables[0].num_columns == 0:  # concat_tables drops the rows of tables without columns
            return pa.table({"rows": pa.nulls(sum(t.num_rows for t in tables))}).select([])
        return pa.concat_tables(tables)

    def to_pandas(self, **kwargs: Any) -> Any:
        """The matching rows as a pandas DataFrame (``pyarrow.Table.to_pandas`` keyword arguments pass through)."""
        return self.to_arrow().to_pandas(**kwargs)

    def count(self) -> int:
        """The number of matching rows: a file with no delete files whose every row matches (its partition or
        its metrics prove it) counts by its record count, without being read."""
        mapping = parse_name_mapping(self.state.prop(NAME_MAPPING_PROPERTY))
        loader = DeleteLoader(mapping, io=self.io, fields=self.schema.index_by_id())
        total = 0
        for task in self.plan_files():
            rest = task.residual
            if not task.deletes and (rest is None or isinstance(rest, AlwaysTrue)
                                     or metrics_must_match(rest, task.file, self.schema)):
                total += task.file.record_count
            else:
                total += self._read(task, mapping, loader).num_rows
        return total


def _task(file: DataFile, deletes: tuple[DataFile, ...], rest: BooleanExpression | None, data_sequence_number: int,
          _new: Any = object.__new__, _cls: type = FileScanTask,
          _s: tuple[Any, ...] = tuple(FileScanTask.__dict__[n].__set__
                                      for n in ("file", "deletes", "residual", "data_sequence_number"))
          ) -> FileScanTask:
    """``FileScanTask(file=..., deletes=..., ...)`` with its fields set directly (planning makes one per data file;
    ``deletes`` is a tuple already)."""
    task = _new(_cls)
    _s[0](task, file)
    _s[1](task, deletes)
    _s[2](task, rest)
    _s[3](task, data_sequence_number)
    return task


def _key_getter(positions: tuple[int, ...]) -> Callable[[tuple[Any, ...]], Any]:
    """A function picking the values at ``positions`` out of a partition tuple (cheaply: planning calls it once
    per live data file)."""
    if not positions:
        return lambda partition: ()
    return operator.itemgetter(*positions)


def snapshot_as_of(state: TableState, timestamp_ms: int) -> int:
    """The id of the snapshot that was current on the main branch at ``timestamp_ms``: the last entry of the snapshot
    log at or before it, the whole log read (as Java's SnapshotUtil.snapshotIdAsOfTime: a client's clock may put an
    entry before the one above it).

    :raises NotFound: when no snapshot was current yet
    :raises ValidationError: when ``timestamp_ms`` is not a number of milliseconds
    """
    if isinstance(timestamp_ms, bool) or not isinstance(timestamp_ms, (int, float)) or \
            not -2**63 <= timestamp_ms < 2**63:  # NaN fails the comparison too
        raise ValidationError(f"Cannot scan as of {timestamp_ms!r}: as_of_timestamp_ms must be milliseconds since "
                              f"the epoch")
    found = None
    for ts, sid in state.snapshot_log:
        if ts <= timestamp_ms:
            found = sid
    if found is None:
        raise NotFound(f"Cannot scan: no snapshot was current at {timestamp_ms} ms")
    return found
