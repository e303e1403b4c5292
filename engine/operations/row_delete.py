"""Row-level deletes and overwrites: delete(where), overwrite(data, where), dynamic_overwrite(data).

Layer: engine.operations (I/O once, up front: reads the data files a filter touches and writes
their replacements or position delete files; the commit step is pure and re-validates on every
retry). Whole files are dropped by strict metrics evaluation, so no data file is read when the
filter covers it. ``write.delete.mode`` picks copy-on-write (rewrite partly matched files, the
default) or merge-on-read (position delete files).
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Any, Callable, Mapping, Sequence

import attrs
import pyarrow as pa
import pyarrow.compute as pc

from engine.model.partitioning import PartitionGroups, partition_key
from engine.model.paths import normalize_path
from engine.write.data_writer import (
    conform,
    split_by_partition,
    write_data_files,
    write_partition_files,
)
from engine.errors import ValidationConflict, ValidationError
from engine.model.data_file import DataFile, DataFileContent
from engine.model.expression_binding import bind
from engine.model.expression_parser import parse_expression
from engine.model.metrics_evaluation import metrics_might_match, metrics_must_match
from engine.model.name_mapping import NAME_MAPPING_PROPERTY
from engine.model.row_evaluation import evaluate_arrow
from engine.operations.commit import CommitContext
from engine.operations.snapshot import snapshot_events, vectors_of_removed
from engine.operations.validation import SERIALIZABLE, Validator, file_might_match, isolation_level
from engine.read.raw_file import parse_name_mapping
from engine.read.reader import POS_COLUMN, read_data_file
from engine.read.scan import DELETE_FILE_PATH_ID, Scan, referenced_path
from engine.state.table_state import TableState
from engine.state.store import StateStore
from storage.files import LOCAL_FILES, FileIO

COPY_ON_WRITE = "copy-on-write"
MERGE_ON_READ = "merge-on-read"


@attrs.frozen(kw_only=True)
class RowChanges:
    """What a row-level write decided, before it is committed.

    :param start_snapshot_id: the branch head the operation read
    :param removed: data files dropped or rewritten
    :param added: new data files (rewritten survivors, new rows) and position delete files
    :param touched: data files whose rows the operation deleted (for conflict checks)
    :param bound_filter: the filter the operation read with (None: the whole table)
    """

    start_snapshot_id: int | None
    removed: tuple[DataFile, ...] = ()
    added: tuple[DataFile, ...] = ()
    touched: tuple[DataFile, ...] = ()
    bound_filter: Any = None
    partitions: frozenset[tuple[int, tuple[Any, ...]]] | None = None


def delete_mode(state: TableState) -> str:
    mode = (state.prop("write.delete.mode") or COPY_ON_WRITE).strip().lower()
    if mode not in (COPY_ON_WRITE, MERGE_ON_READ):
        raise ValidationError(f"Cannot read write.delete.mode: {mode!r} is not copy-on-write or merge-on-read")
    return mode


def dangling_position_deletes(tasks: Sequence[Any], removed: set[str]) -> list[DataFile]:
    """Position delete files every one of whose possible data files is being removed (judged by their
    ``file_path`` bounds over the live data files), and deletion vectors of removed data files: they would only
    dangle, so they go too."""
    from engine.model.types import StringType
    from engine.model.values import from_bytes

    live = sorted(normalize_path(t.file.file_path) for t in tasks)
    out: dict[str, DataFile] = {}
    for task in tasks:
        for d in task.deletes:
            if d.content != DataFileContent.POSITION_DELETES or d.key in out:
                continue
            if d.referenced_data_file is not None:
                if normalize_path(d.referenced_data_file) in removed:
                    out[d.key] = d
                continue
            lo = dict(d.lower_bounds or ()).get(DELETE_FILE_PATH_ID)
            hi = dict(d.upper_bounds or ()).get(DELETE_FILE_PATH_ID)
            if lo is None or hi is None:
                continue
            low, high = normalize_path(from_bytes(StringType(), lo)), normalize_path(from_bytes(StringType(), hi))
            # upper bounds may be truncated and incremented: a prefix range is still an upper limit
            reach = [p for p in live if low <= p <= high or p.startswith(high)]
            if reach and all(p in removed for p in reach):
                out[d.key] = d
    return list(out.values())


def _matching_mask(rows: pa.Table, bound: Any) -> pa.Array:
    """True where the filter holds (null counts as not matching, as in SQL)."""
    return pc.fill_null(evaluate_arrow(bound, rows), False)


def plan_row_delete(store: StateStore, state: TableState, bound: Any, start_snapshot_id: int | None, *,
                    mode: str, stage: Callable[[str], None] | None = None, io: FileIO = LOCAL_FILES
                    ) -> RowChanges:
    """Decide which files to drop, rewrite (copy-on-write) or cover with position deletes (merge-on-read)."""
    schema = state.schema
    # files without field ids read through the table's name mapping, as the scan does (not the current names: a
    # renamed column would read as nulls and be written back so)
    mapping = parse_name_mapping(state.prop(NAME_MAPPING_PROPERTY))
    # every live data file with the delete files that apply to it: rows already deleted stay deleted
    tasks = Scan(store, state, snapshot_id=start_snapshot_id).plan_files() if start_snapshot_id is not None else []
    removed: list[DataFile] = []
    added: list[DataFile] = []
    touched: list[DataFile] = []
    positions: PartitionGroups[dict[str, list[int]]] = PartitionGroups(dict)
    previous: dict[str, Sequence[DataFile]] = {}
    for task in tasks:
        f = task.file
        if metrics_must_match(bound, f, schema):
            removed.append(f)
            touched.append(f)
            continue
        if not metrics_might_match(bound, f, schema):
            continue
        # v3 copy-on-write: surviving rows keep their _row_id and _last_updated_sequence_number in the new file
        lineage = mode != MERGE_ON_READ and state.format_version >= 3
        rows = read_data_file(f, schema, deletes=task.deletes, with_positions=True, io=io, with_lineage=lineage,
                              name_mapping_entries=mapping,
                              partition_constants=state.partition_constants(f),
                              data_sequence_number=task.data_sequence_number)
        physical = rows.column(POS_COLUMN)
        rows = rows.drop_columns([POS_COLUMN])
        mask = _matching_mask(rows, bound)
        hits = int(pc.sum(mask).as_py() or 0)
        if hits == 0:
            continue
        touched.append(f)
        if hits == rows.num_rows:  # no surviving row is left: drop the file
            removed.append(f)
        elif mode == MERGE_ON_READ:
            where = physical.filter(mask).to_pylist()
            positions.of(f.spec_id, f.partition)[f.file_path] = where
            previous[f.file_path] = task.deletes
        else:
            survivors = rows.filter(pc.invert(mask))
            spec = state.spec_by_id(f.spec_id)
            added += write_partition_files(state, survivors, spec=spec, partition=f.partition, stage=stage, io=io)
            removed.append(f)
    gone = {normalize_path(f.file_path) for f in removed}
    removed += dangling_position_deletes(tasks, gone)
    if positions:
        from engine.write.delete_files import write_row_deletes

        for spec_id, partition, deletes in positions:
            written, replaced = write_row_deletes(state, deletes, spec_id=spec_id, partition=partition,
                                                  previous=previous, stage=stage, io=io)
            added += written
            removed += replaced
    return RowChanges(start_snapshot_id=start_snapshot_id, removed=tuple(removed), added=tuple(added),
                      touched=tuple(touched), bound_filter=bound)


#: the summary property of a dynamic overwrite (Java's BaseReplacePartitions sets it; a cherry-pick re-applies a
#: snapshot that has it to the partitions it replaced)
REPLACE_PARTITIONS_SUMMARY: Mapping[str, str] = MappingProxyType({"replace-partitions": "true"})


def row_change_events(store: StateStore, base: TableState, ctx: CommitContext, changes: RowChanges, *,
                      operation: str, snapshot_id: int, branch: str, isolation_for: str,
                      new_rows: Sequence[DataFile] = (), whole_table: bool = False,
                      summary_extra: Mapping[str, str] | None = None) -> list:
    """The snapshot event of a row-level write on ``base``, after validating what landed since it read;
    ``summary_extra``: properties for the snapshot's summary (a dynamic overwrite's ``replace-partitions``)."""
    head = base.branch_head(branch)
    v = Validator(store, base, changes.start_snapshot_id, head, ctx.staged_on_version)
    action = f"{operation} rows"
    rewritten = {f.key for f in changes.removed}
    in_place = [f for f in changes.touched if f.key not in rewritten]  # merge-on-read: rows deleted in place
    # a file a 'delete' removed whole since has no rows left to delete (Java's DELETE skips such removals): its
    # position deletes are dropped instead of refusing the operation
    gone = v.removed_by_deletes(in_place) if v.new else set()
    touched = [f for f in changes.touched if f.key not in gone]
    if v.new:
        v.files_still_live([*changes.removed, *touched], action)
        v.no_new_deletes_for([f for f in touched if f.key in rewritten], action)
        v.no_new_deletes_for([f for f in touched if f.key not in rewritten], action, position_deletes_only=True)
        if changes.partitions is not None or summary_extra is REPLACE_PARTITIONS_SUMMARY:  # a dynamic overwrite
            v.no_new_deletes_in_partitions(set(changes.partitions) if changes.partitions is not None else None,
                                           action)
        if isolation_level(base, isolation_for) == SERIALIZABLE:
            if changes.partitions is not None:
                v.no_new_data_in_partitions(set(changes.partitions), action)
            else:
                v.no_new_matching_data(None if whole_table else changes.bound_filter, action)
    # whatever moved the branch, never remove a file it does not hold, nor delete rows of one
    v.files_live([*changes.removed, *touched], head, action)
    gone_paths = {normalize_path(f.file_path) for f in in_place if f.key in gone}
    added = [f for f in changes.added if not gone_paths or f.content != DataFileContent.POSITION_DELETES
             or referenced_path(f) not in gone_paths] + list(new_rows)
    removed = list(changes.removed)
    if v.new and operation == "overwrite" and isolation_level(base, isolation_for) != SERIALIZABLE:
        removed += _replaced_since(store, base, v, head, changes, whole_table or (
            changes.partitions is None and summary_extra is REPLACE_PARTITIONS_SUMMARY), action)
    if base.format_version >= 3 and head is not None and removed:
        removed += vectors_of_removed((e.file for e in store.live_entries(base, head)), removed)
    op = operation
    if operation == "delete" and any(f.content == DataFileContent.DATA for f in added):
        op = "overwrite"
    return snapshot_events(base, ctx, operation=op, snapshot_id=snapshot_id, added=added,
                           removed=removed, branch=branch, summary_extra=summary_extra)


def _replaced_since(store: StateStore, base: TableState, v: Validator, head: int | None, changes: RowChanges,
                    whole_table: bool, action: str) -> list[DataFile]:
    """Snapshot isolation: the data files added since the start that an overwrite replaces as well, as Java's
    overwrites decide on the base they commit on (ReplacePartitions drops its partitions, an overwrite by filter
    deletes by its row filter): every one for the whole table, those in a replaced partition, those whose rows the
    filter matches in full.

    :raises ValidationConflict: a file added since whose rows the filter may match only in part (Java's "Cannot
        delete file where some, but not all, rows match filter"): its rows cannot be sorted out at commit
    """
    live = store.live_files_by_key(base, head)
    keys = None if changes.partitions is None else {(spec_id, partition_key(p)) for spec_id, p in changes.partitions}
    out: list[DataFile] = []
    for snap, f in v.data_added():
        if f.key not in live:
            continue  # removed again since
        if whole_table or (keys is not None and (f.spec_id, partition_key(f.partition)) in keys):
            out.append(f)
        elif keys is None and changes.bound_filter is not None:
            if metrics_must_match(changes.bound_filter, f, base.schema):
                out.append(f)
            elif file_might_match(changes.bound_filter, f, base):
                raise ValidationConflict(
                    f"Cannot {action}: commit {snap.commit_id} (snapshot {snap.snapshot_id}) added {f.file_path}, "
                    f"whose rows the filter may match only in part", commit_id=snap.commit_id,
                    snapshot_id=snap.snapshot_id)
    return out


def bind_filter(state: TableState, where: str | None) -> Any:
    if where is None:
        return None
    if not isinstance(where, str):
        raise ValidationError(f"Cannot filter rows: expected a filter string, got {type(where).__name__}")
    return bind(parse_expression(where), state.schema)


#: how errors of a dynamic overwrite name it
DYNAMIC_OVERWRITE = "dynamic overwrite"


def plan_dynamic_overwrite(store: StateStore, state: TableState, data: pa.Table, start_snapshot_id: int | None,
                           *, stage: Callable[[str], None] | None = None, io: FileIO = LOCAL_FILES
                           ) -> tuple[RowChanges, list[DataFile]]:
    """Replace exactly the partitions (of the current spec) present in ``data``; no rows replace nothing (no new
    file, as Java's ReplacePartitions without files and Spark's empty dynamic overwrite)."""
    spec = state.spec
    if isinstance(data, pa.Table) and data.num_rows == 0:
        conform(data, state.schema, action=DYNAMIC_OVERWRITE)  # still the table's columns, or a typed error
        return RowChanges(start_snapshot_id=start_snapshot_id), []
    if not spec.is_partitioned:  # no fields, or void ones only (Java's isUnpartitioned)
        files = write_data_files(state, data, stage=stage, io=io, action=DYNAMIC_OVERWRITE)
        # every partition of every spec is replaced: data added meanwhile anywhere conflicts (Java's
        # BaseReplacePartitions validates an unpartitioned spec's overwrite against the whole table)
        live = [e.file for e in store.live_entries(state, start_snapshot_id) if e.file.content == DataFileContent.DATA]
        return RowChanges(start_snapshot_id=start_snapshot_id, removed=tuple(live), touched=tuple(live)), files
    table = conform(data, state.schema, action=DYNAMIC_OVERWRITE)
    partitions = {values for values, _ in split_by_partition(table, state.schema, spec)}
    files = write_data_files(state, data, stage=stage, io=io, action=DYNAMIC_OVERWRITE)
    keys = {partition_key(p) for p in partitions}  # NaN is one partition, -0.0 another than 0.0 (Java's)
    removed = [e.file for e in store.live_entries(state, start_snapshot_id)
               if e.file.content == DataFileContent.DATA and e.file.spec_id == spec.spec_id
               and partition_key(e.file.partition) in keys]
    return RowChanges(start_snapshot_id=start_snapshot_id, removed=tuple(removed), touched=tuple(removed),
                      partitions=frozenset((spec.spec_id, p) for p in partitions)), files
