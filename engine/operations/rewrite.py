"""Compaction: rewrite_data_files (bin-pack, sort, Z-order) and rewrite_manifests.

Layer: engine.operations (I/O once, up front: plans with engine.read.scan, reads the chosen data files with their
delete files applied through engine.read.reader, writes the replacements with engine.write.data_writer; the commit step
is pure and re-validates on every retry, as engine.operations.row_delete does).

::

    snap = table.rewrite_data_files(strategy="sort", sort_order=["id", "ts DESC"], target_file_size_bytes=64 << 20)
    snap.operation   # "replace"

What it does, following Iceberg Java's RewriteDataFiles:

- selects the live data files of the branch head that might hold rows matching ``where`` (partition
  values and column metrics, inclusive: whole files only), and groups them by partition. Files written under
  an older partition spec form one group of their own and are rewritten into the current spec's partitions;
- reads each group's rows with the delete files that apply to them, orders them (``binpack``: concatenated,
  sorted by the table's sort order when it has one, as every icelog write is; ``sort``: by the given or the
  table's sort order; ``zorder``: by the Z-value of ``zorder_columns``, see engine.write.zorder) and writes files of
  about the target size (``target_file_size_bytes``, default ``write.target-file-size-bytes``);
- commits one ``replace`` snapshot that removes the rewritten data files and the delete files left with
  nothing to do: a position delete file whose referenced data files are all rewritten (or gone), an equality
  delete file whose every data file in scope is rewritten. Other delete files stay.

A group holding one data file with no deletes, written in the current spec and no larger than the target, is
left alone by ``binpack`` (rewriting it would change nothing); ``sort`` and ``zorder`` rewrite every selected
file. Java's other selection options (min-input-files, file size thresholds, partial progress) are not offered.

Sequence numbers (Java's ``use-starting-sequence-number`` option, on by default): the new files' file changes
carry an explicit data sequence number, the sequence number of the snapshot the compaction started from, while
the ``replace`` snapshot (and so the files' file sequence number) takes the table's next one. Equality deletes
committed meanwhile have higher sequence numbers, so they still apply to the rewritten rows and the compaction lands beside them. Position deletes committed meanwhile
name the old files by path and would be lost, so the commit step refuses any that apply to a file it rewrites
(ValidationConflict naming the commit), as it refuses a rewritten file that was removed meanwhile. Files of an
older spec are rewritten into the current spec's partitions, where equality deletes scoped to their old
partition no longer reach them: for those, equality deletes committed meanwhile conflict too. With the option
off, the new files take the snapshot's own sequence number and any delete committed meanwhile for a rewritten
file conflicts. Format version 1 has no sequence numbers and no deletes: the option changes nothing there.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

import attrs
import pyarrow as pa

from engine.model.paths import normalize_path
from engine.write.data_writer import (
    DEFAULT_TARGET_FILE_SIZE,
    conform,
    split_by_partition,
    write_partition_files,
)
from engine.write.delete_files import paths_in_position_deletes
from engine.errors import CorruptFileError, ValidationConflict, ValidationError
from engine.state.events import Event, SnapshotAdded
from engine.model import types as T
from engine.model.types import is_long
from engine.model.data_file import DataFile, DataFileContent
from engine.model.name_mapping import NAME_MAPPING_PROPERTY
from engine.model.partitioning import PartitionGroups, PartitionSpec
from engine.model.sort_order import UNSORTED_ORDER, SortOrder, build_sort_order
from engine.operations.snapshot import new_snapshot_id
from engine.operations.commit import CommitContext
from engine.operations.row_delete import bind_filter
from engine.operations.snapshot import snapshot_events, snapshot_summary
from engine.operations.validation import Validator, file_might_match
from engine.read.raw_file import parse_name_mapping
from engine.read.reader import DeleteLoader, read_data_file
from engine.read.scan import FileScanTask, Scan
from engine.write.sort_rows import sort_table
from engine.state.table_state import MAIN_BRANCH, Snapshot, TableState
from engine.state.store import StateStore
from engine.write.zorder import zorder_table
from storage.files import LOCAL_FILES, FileIO

BINPACK = "binpack"
SORT = "sort"
ZORDER = "zorder"
STRATEGIES = (BINPACK, SORT, ZORDER)
REPLACE = "replace"
TARGET_FILE_SIZE_PROPERTY = "write.target-file-size-bytes"
USE_STARTING_SEQUENCE_NUMBER = "use-starting-sequence-number"
OPTIONS = (USE_STARTING_SEQUENCE_NUMBER,)
_ACTION = "rewrite data files"


@attrs.frozen(kw_only=True)
class FileGroup:
    """Data files rewritten together.

    :param spec_id: their partition spec (None: files of older specs, rewritten into the current spec)
    :param partition: their partition tuple (``()`` for the older-spec group)
    :param tasks: the files, each with the delete files that apply to it
    """

    spec_id: int | None
    partition: tuple[Any, ...]
    tasks: tuple[FileScanTask, ...]


@attrs.frozen(kw_only=True)
class RewritePlan:
    """What a compaction read and wrote, before it is committed.

    :param start_snapshot_id: the snapshot the compaction read (the head of its branch)
    :param rewritten: the data files it replaces
    :param dropped_deletes: the delete files it removes (they apply to rewritten files only)
    :param added: the new data files
    :param use_starting_sequence_number: the new files take the starting snapshot's sequence number as their
        data sequence number (looked up when committing: in a transaction a staged snapshot's number can change
        on a retry), not the new snapshot's own
    :param repartitioned: the rewritten files of older specs, whose rows the new files hold in the current
        spec's partitions
    """

    start_snapshot_id: int
    rewritten: tuple[DataFile, ...] = ()
    dropped_deletes: tuple[DataFile, ...] = ()
    added: tuple[DataFile, ...] = ()
    use_starting_sequence_number: bool = True
    repartitioned: tuple[DataFile, ...] = ()

    @property
    def removed(self) -> tuple[DataFile, ...]:
        return self.rewritten + self.dropped_deletes


# ------------------------------------------------------------ arguments


def resolve_sort_order(state: TableState, sort_order: Any) -> tuple[SortOrder, int]:
    """The order a ``sort`` rewrite uses, and the sort order id its files record (the id of the table's order
    with the same fields, else 0: unsorted as far as metadata can say).

    :param sort_order: a SortOrder, a list of terms such as ``["id", "ts DESC NULLS LAST", "bucket(4, id)"]``, one
        such term, or None for the table's default sort order
    :raises ValidationError: when no order is given and the table has none, or a term does not bind
    """
    if sort_order is None:
        order = state.sort_order
        if order.is_unsorted:
            raise ValidationError("Cannot rewrite data files with strategy 'sort': no sort order given and the "
                                  "table has no default sort order")
        return order, order.order_id
    if isinstance(sort_order, SortOrder):
        order = sort_order
        for f in order.fields:
            state.schema.find_field(f.source_id)  # raises, naming the id, for an unknown column
    elif isinstance(sort_order, str):
        order = build_sort_order(state.schema, [sort_order])
    elif isinstance(sort_order, (list, tuple)) and all(isinstance(t, str) for t in sort_order):
        order = build_sort_order(state.schema, list(sort_order))
    else:
        raise ValidationError(f"Cannot rewrite data files: sort_order must be a SortOrder or a list of terms "
                              f"such as ['id', 'ts DESC'], got {type(sort_order).__name__}")
    if order.is_unsorted:
        raise ValidationError("Cannot rewrite data files with strategy 'sort': the sort order has no fields")
    same = next((o for o in state.sort_orders if o.fields == order.fields), None)
    return order, same.order_id if same is not None else 0


def resolve_zorder_columns(state: TableState, columns: Sequence[str] | None) -> tuple[str, ...]:
    """The Z-order columns (dotted names resolved by the schema), without identity partition columns of the
    current spec (constant within a partition), as Java drops them.

    :raises ValidationError: for no columns, an unknown or repeated column, a non-primitive one, or only identity
        partition columns
    """
    if isinstance(columns, str):
        columns = [columns]
    if not columns:
        raise ValidationError("Cannot rewrite data files with strategy 'zorder': no zorder_columns given")
    schema = state.schema
    identity = {pf.source_id for pf in state.spec.fields if str(pf.transform) == "identity"}
    out: list[str] = []
    seen: set[int] = set()
    for name in columns:
        if not isinstance(name, str):
            raise ValidationError(f"Cannot Z-order by {name!r}: expected a column name")
        field = schema.find_field(name)
        if schema.is_in_list_or_map(field.field_id):
            raise ValidationError(f"Cannot Z-order by column {name!r}: it is inside a list or map")
        if field.field_id in seen:
            raise ValidationError(f"Cannot Z-order by column {name!r}: it is listed twice")
        seen.add(field.field_id)
        if not isinstance(field.field_type, T.PrimitiveType):
            raise ValidationError(f"Cannot Z-order by column {name!r}: {field.field_type} is not a primitive type")
        if field.field_id not in identity:
            out.append(schema.find_column_name(field.field_id))
    if not out:
        raise ValidationError(f"Cannot Z-order by {', '.join(map(repr, columns))}: they are all identity partition "
                              f"columns (constant within each partition)")
    return tuple(out)


def use_starting_sequence_number(options: Mapping[str, Any] | None) -> bool:
    """The ``use-starting-sequence-number`` option (default true, as in Java's RewriteDataFiles).

    :param options: Java's option names to ``"true"``/``"false"`` (or bools)
    :raises ValidationError: for an unknown option or a value that is not a boolean
    """
    if options is not None and not isinstance(options, Mapping):
        raise ValidationError(f"Cannot rewrite data files: options must be a mapping of option names to values, got "
                              f"{options!r}")
    options = dict(options or {})
    unknown = sorted(set(options) - set(OPTIONS))
    if unknown:
        raise ValidationError(f"Cannot rewrite data files: unknown option {unknown[0]!r} (supported: "
                              f"{', '.join(OPTIONS)})")
    value = options.get(USE_STARTING_SEQUENCE_NUMBER, True)
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    if isinstance(value, bool):
        return value
    raise ValidationError(f"Cannot rewrite data files: option {USE_STARTING_SEQUENCE_NUMBER} is {value!r}, not "
                          f"true or false")


def _target_size(state: TableState, target_file_size_bytes: int | None) -> int:
    if target_file_size_bytes is None:
        return state.int_property(TARGET_FILE_SIZE_PROPERTY, DEFAULT_TARGET_FILE_SIZE)
    if not is_long(target_file_size_bytes) or target_file_size_bytes <= 0:
        raise ValidationError(f"Cannot rewrite data files: target_file_size_bytes {target_file_size_bytes!r} is "
                              f"not a positive 64-bit integer")
    return target_file_size_bytes


def _writer_state(state: TableState, target: int, sort_order_id: int) -> TableState:
    """``state`` as the writer should see it: the target file size, and the sort order id the files record."""
    props = dict(state.properties)
    props[TARGET_FILE_SIZE_PROPERTY] = str(target)
    orders = state.sort_orders
    if not any(o.order_id == sort_order_id for o in orders):
        orders = orders + (UNSORTED_ORDER,)
    return attrs.evolve(state, properties=tuple(sorted(props.items())), sort_orders=orders,
                        default_sort_order_id=sort_order_id)


# ------------------------------------------------------------ planning


def group_files(state: TableState, tasks: Sequence[FileScanTask]) -> list[FileGroup]:
    """``tasks`` grouped by partition of the current spec; files of older specs form one group (Java groups them
    under an empty partition and repartitions them on write)."""
    current = state.default_spec_id
    groups: PartitionGroups[list[FileScanTask]] = PartitionGroups(list)
    for t in tasks:
        current_spec = t.file.spec_id == current
        groups.of(t.file.spec_id if current_spec else None, t.file.partition if current_spec else ()).append(t)
    return [FileGroup(spec_id=spec_id, partition=partition, tasks=tuple(v)) for spec_id, partition, v in groups]


def _needs_rewrite(group: FileGroup, strategy: str, target: int) -> bool:
    if strategy != BINPACK or len(group.tasks) != 1 or group.spec_id is None:
        return True
    task = group.tasks[0]
    return bool(task.deletes) or task.file.file_size_in_bytes > target


def _order_rows(rows: pa.Table, state: TableState, strategy: str, order: SortOrder | None,
                zorder_columns: Sequence[str]) -> pa.Table:
    if strategy == ZORDER:
        return zorder_table(rows, zorder_columns, state.schema)
    if strategy == SORT:
        assert order is not None
        return sort_table(rows, order, state.schema)
    return sort_table(rows, state.sort_order, state.schema)  # binpack: the table's order, as every write


def _write_group(writer: TableState, group: FileGroup, rows: pa.Table,
                 stage: Callable[[str], None] | None = None, io: FileIO = LOCAL_FILES) -> list[DataFile]:
    if rows.num_rows == 0:
        return []
    spec: PartitionSpec = writer.spec
    if group.spec_id is not None:
        return write_partition_files(writer, rows, spec=writer.spec_by_id(group.spec_id), partition=group.partition,
                                     stage=stage, io=io)
    files: list[DataFile] = []
    for values, part in split_by_partition(rows, writer.schema, spec):
        files += write_partition_files(writer, part, spec=spec, partition=values, stage=stage, io=io)
    return files


def _referenced_paths(delete_file: DataFile, io: FileIO) -> set[str] | None:
    """The data files a position delete file names (None when it cannot be read: then it is kept)."""
    try:
        return set(paths_in_position_deletes(delete_file, io=io))
    except CorruptFileError:
        return None


def droppable_deletes(all_tasks: Sequence[FileScanTask], rewritten: Sequence[FileScanTask], *,
                      io: FileIO = LOCAL_FILES) -> list[DataFile]:
    """The delete files applying to a rewritten file that apply to no data file left live afterwards.

    An equality delete file goes only when every data file it applies to (same partition, or every partition
    for an unpartitioned spec, older data sequence number) is rewritten; a position delete file also when the
    data files it names that stay are none (it may be scoped to its partition but name only rewritten files).
    """
    gone = {t.file.file_path for t in rewritten}
    applies: dict[str, set[str]] = {}
    for t in all_tasks:
        for d in t.deletes:
            applies.setdefault(d.key, set()).add(t.file.file_path)
    candidates: dict[str, DataFile] = {}
    for t in rewritten:
        for d in t.deletes:
            candidates.setdefault(d.key, d)
    out = []
    for key, d in candidates.items():
        others = applies.get(key, set()) - gone
        if not others:
            out.append(d)
        elif d.content == DataFileContent.POSITION_DELETES:
            named = _referenced_paths(d, io)
            if named is not None and not named & {normalize_path(p) for p in others}:
                out.append(d)
    return out


def plan_rewrite(store: StateStore, state: TableState, *, where: str | None = None, strategy: str = BINPACK,
                 sort_order: Any = None, zorder_columns: Sequence[str] | None = None,
                 target_file_size_bytes: int | None = None,
                 stage: Callable[[str], None] | None = None, branch: str = MAIN_BRANCH,
                 options: Mapping[str, Any] | None = None, io: FileIO = LOCAL_FILES,
                 progress: Callable[[int, int], None] | None = None) -> RewritePlan | None:
    """Read and rewrite the files to compact (staged, not committed); None when there is nothing to do.

    :param store: the catalog's state store
    :param state: the table state to compact (the head of ``branch``)
    :param options: Java's rewrite options; ``use-starting-sequence-number`` (default true)
    :param progress: called with (files rewritten, files to rewrite) before the first group and after each
    :raises ValidationError: for a bad strategy, sort order, Z-order column, target size, filter or option
    """
    if strategy not in STRATEGIES:
        raise ValidationError(f"Cannot rewrite data files: unknown strategy {strategy!r} (expected one of "
                              f"{', '.join(STRATEGIES)})")
    if sort_order is not None and strategy != SORT:
        raise ValidationError(f"Cannot rewrite data files: sort_order applies to strategy 'sort', not {strategy!r}")
    if zorder_columns is not None and strategy != ZORDER:
        raise ValidationError(f"Cannot rewrite data files: zorder_columns apply to strategy 'zorder', not "
                              f"{strategy!r}")
    if not isinstance(branch, str) or not branch:
        raise ValidationError(f"Cannot rewrite data files: the branch name must be a non-empty string, got {branch!r}")
    keep_sequence_number = use_starting_sequence_number(options)
    target = _target_size(state, target_file_size_bytes)
    order: SortOrder | None = None
    order_id = state.default_sort_order_id
    columns: tuple[str, ...] = ()
    if strategy == SORT:
        order, order_id = resolve_sort_order(state, sort_order)
    elif strategy == ZORDER:
        columns = resolve_zorder_columns(state, zorder_columns)
        order_id = 0
    bound = bind_filter(state, where)
    head = state.branch_head(branch)
    snapshot = state.snapshot_by_id(head) if head is not None else None
    if snapshot is None:
        return None
    all_tasks = Scan(store, state, snapshot_id=snapshot.snapshot_id).plan_files()
    selected = [t for t in all_tasks if file_might_match(bound, t.file, state)]
    groups = [g for g in group_files(state, selected) if _needs_rewrite(g, strategy, target)]
    if not groups:
        return None
    writer = _writer_state(state, target, order_id)
    mapping = parse_name_mapping(state.prop(NAME_MAPPING_PROPERTY))
    schema = state.schema
    loader = DeleteLoader(mapping, io=io, fields=schema.index_by_id())
    added: list[DataFile] = []
    rewritten: list[FileScanTask] = []
    total = sum(len(g.tasks) for g in groups)
    if progress is not None:
        progress(0, total)
    for group in groups:
        # v3: rows keep their _row_id and _last_updated_sequence_number in the files they move to
        lineage = state.format_version >= 3
        parts = [read_data_file(t.file, schema, deletes=t.deletes, name_mapping_entries=mapping, loader=loader,
                                partition_constants=state.partition_constants(t.file),
                                with_lineage=lineage, data_sequence_number=t.data_sequence_number)
                 for t in group.tasks]
        rows = conform(pa.concat_tables(parts), schema, keep_lineage=lineage, action=_ACTION)
        rows = _order_rows(rows, writer, strategy, order, columns)
        added += _write_group(writer, group, rows, stage, io)
        rewritten += group.tasks
        if progress is not None:
            progress(len(rewritten), total)
    repartitioned = tuple(t.file for g in groups if g.spec_id is None for t in g.tasks)
    return RewritePlan(start_snapshot_id=snapshot.snapshot_id, rewritten=tuple(t.file for t in rewritten),
                       dropped_deletes=tuple(droppable_deletes(all_tasks, rewritten, io=io)), added=tuple(added),
                       use_starting_sequence_number=keep_sequence_number, repartitioned=repartitioned)


# ------------------------------------------------------------ committing


def rewrite_events(store: StateStore, base: TableState, ctx: CommitContext, plan: RewritePlan, *,
                   snapshot_id: int, branch: str = MAIN_BRANCH) -> list[Event]:
    """The ``replace`` snapshot of a planned compaction on ``base``, after checking what landed since it read:
    every file it removes must still be live, and no delete file may have been added for the data it rewrites
    that would not reach the new files (position deletes always; equality deletes unless the new files keep the
    starting data sequence number and partition). With ``plan.use_starting_sequence_number`` (and format version
    2 or later) the new files' changes carry the starting snapshot's sequence number as it is in ``base``.

    :raises ValidationConflict: naming the commit that conflicts
    """
    head = base.branch_head(branch)
    # the starting snapshot may have been expired meanwhile: the log still knows its sequence number
    start = base.logged_snapshot(plan.start_snapshot_id)
    keep = plan.use_starting_sequence_number and base.format_version >= 2 and start is not None
    v = Validator(store, base, plan.start_snapshot_id, head, ctx.staged_on_version)  # refuses a start that left the branch
    if v.new:
        v.files_still_live(plan.removed, _ACTION)
        moved = {f.file_path for f in plan.repartitioned}
        v.no_new_deletes_for([f for f in plan.rewritten if f.file_path not in moved], _ACTION,
                             ignore_equality_deletes=keep)
        v.no_new_deletes_for(plan.repartitioned, _ACTION)
    events = snapshot_events(base, ctx, operation=REPLACE, snapshot_id=snapshot_id, added=plan.added,
                             removed=plan.removed, branch=branch)
    if not keep or start is None:
        return list(events)
    return [attrs.evolve(e, changes=tuple(attrs.evolve(c, data_sequence_number=start.sequence_number)
                                          if c.added else c for c in e.changes)) for e in events]


def commit_rewrite(table: Any, plan: RewritePlan | None, branch: str = MAIN_BRANCH) -> Snapshot | None:
    """Commit a planned compaction on ``table`` (re-validated on every retry); the new snapshot."""
    if plan is None:
        return None
    snapshot_id = new_snapshot_id()
    store = table.catalog.store
    state = table.commit_events(lambda base, ctx: rewrite_events(store, base, ctx, plan, snapshot_id=snapshot_id,
                                                                 branch=branch))
    return state.snapshot_by_id(snapshot_id)


def rewrite_data_files(table: Any, where: str | None = None, strategy: str = BINPACK, sort_order: Any = None,
                       zorder_columns: Sequence[str] | None = None,
                       target_file_size_bytes: int | None = None, branch: str = MAIN_BRANCH,
                       options: Mapping[str, Any] | None = None,
                       progress: Callable[[int, int], None] | None = None) -> Snapshot | None:
    """Compact the live data files of the head of ``branch`` that might match ``where``, as one ``replace``
    snapshot; None when there is nothing to rewrite.

    ::

        table.rewrite_data_files()                                       # bin-pack everything
        table.rewrite_data_files(where="day = '2024-01-02'", strategy="sort", sort_order=["id"])
        table.rewrite_data_files(strategy="zorder", zorder_columns=["x", "y"], target_file_size_bytes=1 << 27)
        table.rewrite_data_files(options={"use-starting-sequence-number": "false"})

    :param table: the table handle (engine.table.Table)
    :param where: a row filter; files that might hold matching rows are rewritten whole
    :param strategy: ``binpack``, ``sort`` or ``zorder``
    :param sort_order: for ``sort``: a SortOrder or terms such as ``["id", "ts DESC"]`` (default: the table's)
    :param zorder_columns: for ``zorder``: the columns to interleave
    :param target_file_size_bytes: the size to split output files at (default ``write.target-file-size-bytes``)
    :param branch: the branch to compact
    :param options: Java's option names: ``use-starting-sequence-number`` (default ``"true"``) gives the new files
        the data sequence number of the snapshot the compaction started from, so equality deletes committed
        meanwhile still apply to them and do not conflict
    :param progress: called with (files rewritten, files to rewrite) as the compaction reads and writes them
    :raises ValidationError: for bad arguments
    :raises ValidationConflict: a concurrent commit removed a file it rewrites or added deletes for one that would
        not reach the new files
    """
    # every argument is checked before the first file is written; the files written are removed again when the
    # commit is refused (a conflict, a foreign writer), kept when it landed or may have
    with table.removing_written_on_failure():
        plan = plan_rewrite(table.catalog.store, table.state, where=where, strategy=strategy, sort_order=sort_order,
                            zorder_columns=zorder_columns, target_file_size_bytes=target_file_size_bytes,
                            stage=table.stage_file, branch=branch, options=options, io=table.catalog.io,
                            progress=progress)
        return commit_rewrite(table, plan, branch)


# ------------------------------------------------------------ manifests


def manifest_rewrite_events(base: TableState, ctx: CommitContext, *, snapshot_id: int,
                            branch: str = MAIN_BRANCH) -> list[Event]:
    """The event of a manifest rewrite on ``base``: a ``replace`` snapshot with no file changes (the data is the
    parent's), which a projector that knows the convention renders by packing every manifest group into as few
    manifests as ``commit.manifest.target-size-bytes`` allows. None when the branch has no snapshot."""
    head = base.branch_head(branch)
    parent = base.snapshot_by_id(head) if head is not None else None
    if parent is None:
        return []
    return [SnapshotAdded(
        snapshot_id=snapshot_id, parent_snapshot_id=parent.snapshot_id,
        sequence_number=base.last_sequence_number + 1 if base.format_version >= 2 else 0,
        timestamp_ms=max(ctx.time_ms, base.last_updated_ms), operation=REPLACE,
        summary=snapshot_summary((), (), parent), schema_id=base.current_schema_id, branch=branch, changes=(),
        partition_types={s.spec_id: base.partition_type_of(s) for s in base.specs},
        # v3: the files keep their row ids, so the snapshot assigns none
        first_row_id=base.next_row_id if base.format_version >= 3 else None,
        added_rows=0 if base.format_version >= 3 else None)]


def rewrite_manifests(table: Any) -> Snapshot | None:
    """Rewrite the current snapshot's manifests into as few as ``commit.manifest.target-size-bytes`` allows.

    The log records a ``replace`` snapshot without file changes (the data is the parent's); the projector
    renders it by packing the parent's live manifests, so entries keep their snapshot ids and sequence numbers.
    Returns None when the table has no snapshot.
    """
    sid = new_snapshot_id()
    state = table.commit_events(lambda base, ctx: manifest_rewrite_events(base, ctx, snapshot_id=sid))
    return state.snapshot_by_id(sid)
