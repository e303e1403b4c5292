"""Row deltas: data files, position delete files and equality delete files in one commit; delete by key; upsert.

Layer: engine.operations (I/O once, up front: the builder's methods write the data and delete files they are
given as they are called, and ``delete_by_key`` / ``upsert`` read the rows their keys match when they must; the
commit step, :meth:`RowDelta.events`, is pure and re-validates on every retry). Iceberg Java's RowDelta is the
model: the snapshot's operation is ``append`` (data only), ``delete`` (deletes only) or ``overwrite`` (both).

::

    with table.row_delta() as delta:
        delta.add_rows(new_rows)
        delta.add_position_deletes({data_file.file_path: [0, 7]})
        delta.add_equality_deletes(pa.table({"id": [3, 9]}), ["id"])
    table.delete_by_key(pa.table({"id": [3, 9]}), ["id"])
    table.upsert(rows, ["id"])

How keys become delete files (``add_equality_deletes``, ``delete_by_key``, ``upsert``): equality delete files
per spec where the keys say the partition, position delete files where they do not; see
engine.operations.key_deletes, which plans them.

Validation on retry (against every snapshot that landed on the branch since the one the builder read, or since
``validate_from_snapshot``): the data files that position deletes refer to must still be live (a compaction or
copy-on-write delete that removed one fails the delta), and no position delete file may have been added for them
meanwhile (two deletes of the same rows: the second fails instead of counting them twice). ``delete_by_key`` and
``upsert`` under serializable isolation (``write.delete.isolation-level`` / ``write.update.isolation-level``, the
default) also fail when a data file added meanwhile (by an append or overwrite; a compaction's ``replace`` adds no
rows) might hold one of the keys, judged from its column metrics against an ``IN`` (or range) filter on the key
columns, so appends of other keys never conflict; a builder's
``conflict_detection_filter(where)`` asks for the same check with its own filter. Equality deletes themselves
need no check: they apply to whatever older data holds the keys, rewritten or not.
"""

from __future__ import annotations

import contextlib
import os
from typing import Any, Iterable, Iterator, Mapping, Sequence

import pyarrow as pa
import pyarrow.compute as pc

from engine.written_files import may_have_landed
from engine.write.data_writer import conform, write_data_files
from engine.write.delete_files import paths_in_position_deletes, write_row_deletes
from engine.errors import ValidationConflict, ValidationError
from engine.model.data_file import DataFile, DataFileContent
from engine.model.expressions import BooleanExpression
from engine.model.expression_binding import bind
from engine.model.expression_parser import parse_expression
from engine.model.partitioning import PartitionGroups, partition_key
from engine.model.schema import LAST_UPDATED_SEQUENCE_NUMBER_COLUMN, ROW_ID_COLUMN
from engine.operations.snapshot import new_snapshot_id
from engine.operations.commit import CommitContext
from engine.operations.key_deletes import (
    KeyDeletes,
    conform_keys,
    distinct_keys,
    groupable,
    key_fields,
    plan_key_deletes,
)
from engine.operations.pending import PendingUpdate
from engine.operations.snapshot import snapshot_events
from engine.operations.validation import SERIALIZABLE, Validator, isolation_level
from engine.model.paths import normalize_path
from engine.read.reader import lineage_field
from engine.read.scan import Scan, referenced_path
from engine.state.table_state import MAIN_BRANCH, Snapshot, TableState

APPEND = "append"
DELETE = "delete"
OVERWRITE = "overwrite"


# -- the builder -------------------------------------------------------------------------------------------------


class RowDelta(PendingUpdate):
    """Data files, position delete files and equality delete files that land as one snapshot (Java's RowDelta).

    ::

        delta = table.row_delta()
        delta.add_rows(rows).add_equality_deletes(pa.table({"id": [1, 2]}), ["id"])
        delta.commit()
        table.state.snapshot_by_id(delta.snapshot_id)

    Files are written when the methods are called, with the table as it was when the builder was made; the
    commit validates against what landed on the branch since (see the module docstring) and retries.

    :param table: the table handle
    :param branch: the branch to commit to
    :param action: the operation committing it, as its errors name it (default "commit row delta")
    """

    def __init__(self, table: Any, *, branch: str = MAIN_BRANCH, action: str = "commit row delta") -> None:
        super().__init__(table)
        self.branch = branch
        #: the operation committing this delta, as its errors name it (``upsert``, ``delete by key``)
        self.action = action
        self._state: TableState = table.state
        self._read_snapshot_id: int | None = self._state.branch_head(branch)
        self._validate_from: int | None = self._read_snapshot_id
        #: the id of the snapshot the commit makes (fixed across retries)
        self.snapshot_id: int = new_snapshot_id()
        self._data: list[DataFile] = []
        self._deletes: list[DataFile] = []
        #: delete files of the table the new deletion vectors replace (v3), removed by the commit
        self._replaced: list[DataFile] = []
        self._referenced: dict[str, DataFile] = {}
        self._live: dict[str, DataFile] | None = None
        self._conflict_filter: BooleanExpression | None = None
        self._key_filters: list[tuple[BooleanExpression, str]] = []
        #: the keys' filter and the partition specs of the equality deletes written for them (none global)
        self._equality_scopes: list[tuple[BooleanExpression, frozenset[int]]] = []
        self._committed = False
        #: the files the builder wrote (removed when its commit is refused: nothing is left behind)
        self._written: list[str] = []

    # ------------------------------------------------------------ what the builder reads
    @property
    def state(self) -> TableState:
        """The table state the builder reads and writes files with."""
        return self._state

    def _live_data(self) -> dict[str, DataFile]:
        if self._live is None:
            store = self._table.catalog.store
            self._live = {normalize_path(e.file.file_path): e.file
                          for e in store.live_entries(self._state, self._read_snapshot_id)
                          if e.file.content == DataFileContent.DATA}
        return self._live

    def _deletes_applying(self, data_files: Iterable[DataFile]) -> dict[str, Sequence[DataFile]]:
        """The delete files that apply to each of ``data_files`` (by path) in the snapshot the builder reads, plus
        those this builder already wrote for them (a v3 vector for a file replaces them all)."""
        wanted = {normalize_path(f.file_path) for f in data_files}
        out: dict[str, list[DataFile]] = {}
        if self._read_snapshot_id is not None:
            for task in Scan(self._table.catalog.store, self._state, snapshot_id=self._read_snapshot_id).plan_files():
                if normalize_path(task.file.file_path) in wanted:
                    out[task.file.file_path] = list(task.deletes)
        for d in self._deletes:
            if d.referenced_data_file is not None and normalize_path(d.referenced_data_file) in wanted:
                out.setdefault(d.referenced_data_file, []).append(d)
        return out

    def _pending_data(self) -> dict[str, DataFile]:
        return {normalize_path(f.file_path): f for f in self._data}

    def _check_spec(self, f: DataFile, action: str) -> None:
        if not any(s.spec_id == f.spec_id for s in self._state.specs):
            raise ValidationError(f"Cannot {action}: {f.file_path} has partition spec {f.spec_id}, which the table "
                                  f"does not have")

    def _check_new_paths(self, files: Sequence[DataFile], action: str) -> None:
        known = {f.file_path for f in self._data + self._deletes}
        seen: set[str] = set()
        owned = self._table.catalog.ownership(self._table.uuid) if files else None
        for f in files:
            assert owned is not None
            owned.check_new_file(f.file_path, action)
            if f.file_path in known or f.file_path in seen:
                raise ValidationError(f"Cannot {action}: {f.file_path} is added twice")
            seen.add(f.file_path)

    # ------------------------------------------------------------ data
    def add_rows(self, data: pa.Table) -> RowDelta:
        """Write ``data`` as data files of the table (one or more per partition) and add them."""
        with self._table.tracking_written(self._written):
            self._data += write_data_files(self._state, data, stage=self._table.stage_file,
                                           io=self._table.catalog.io, action=self.action)
        return self

    def add_data_files(self, files: Iterable[DataFile]) -> RowDelta:
        """Add data files already written (as :class:`DataFile` values)."""
        files = list(files)
        action = "add data files"
        for f in files:
            if not isinstance(f, DataFile):
                raise ValidationError(f"Cannot {action}: expected DataFile values, got {type(f).__name__}")
            if f.content != DataFileContent.DATA:
                raise ValidationError(f"Cannot {action}: {f.file_path} is a delete file (use add_delete_files)")
            self._check_spec(f, action)
        self._check_new_paths(files, action)
        self._data += files
        return self

    # ------------------------------------------------------------ deletes
    def add_position_deletes(self, deletes: Mapping[str, Sequence[int]]) -> RowDelta:
        """Write position delete files (one per partition) deleting, in each data file, the rows at the given
        positions (from 0). The data files must be live in the branch, or added by this builder.

        :param deletes: data file path -> row positions
        :raises ValidationError: for an unknown data file, or a position past its last row
        """
        action = "add position deletes"
        if not isinstance(deletes, Mapping):
            raise ValidationError(f"Cannot {action}: expected a mapping of data file path to positions, got "
                                  f"{type(deletes).__name__}")
        live, pending = self._live_data(), self._pending_data()
        groups: PartitionGroups[dict[str, list[int]]] = PartitionGroups(dict)
        referenced: dict[str, DataFile] = {}
        for path, positions in deletes.items():
            key = normalize_path(os.fspath(path))
            data_file = pending.get(key) or live.get(key)
            if data_file is None:
                raise ValidationError(f"Cannot {action}: {path} is not a live data file of branch {self.branch}")
            positions = list(positions)
            for pos in positions:
                if isinstance(pos, bool) or not isinstance(pos, int) or pos < 0:
                    raise ValidationError(f"Cannot {action}: position {pos!r} of {path} is not a row number")
                if pos >= data_file.record_count:
                    raise ValidationError(f"Cannot {action}: position {pos} is past the last row of {path} "
                                          f"({data_file.record_count} rows)")
            if not positions:
                continue
            groups.of(data_file.spec_id, data_file.partition)[data_file.file_path] = positions
            if key not in pending:
                referenced[key] = data_file
        previous = self._deletes_applying(referenced.values()) if self._state.format_version >= 3 else {}
        for spec_id, partition, group in groups:
            with self._table.tracking_written(self._written):
                written, replaced = write_row_deletes(self._state, group, spec_id=spec_id, partition=partition,
                                                      previous=previous, stage=self._table.stage_file,
                                                      io=self._table.catalog.io)
            # a vector this builder wrote before and now merged is dropped (its Puffin file stays staged, an
            # orphan); one the table holds is removed by the commit
            pending = {d.key for d in self._deletes}
            gone = {d.key for d in replaced}
            self._deletes = [d for d in self._deletes if d.key not in gone] + written
            self._replaced += [d for d in replaced if d.key not in pending]
        self._referenced.update(referenced)
        return self

    def add_delete_files(self, files: Iterable[DataFile]) -> RowDelta:
        """Add position or equality delete files already written (as :class:`DataFile` values). The data files a
        position delete file refers to must be live in the branch, or added by this builder."""
        files = list(files)
        action = "add delete files"
        live, pending = self._live_data(), self._pending_data()
        referenced: dict[str, DataFile] = {}
        for f in files:
            if not isinstance(f, DataFile):
                raise ValidationError(f"Cannot {action}: expected DataFile values, got {type(f).__name__}")
            if f.content == DataFileContent.DATA:
                raise ValidationError(f"Cannot {action}: {f.file_path} is a data file (use add_data_files)")
            self._check_spec(f, action)
            if f.content == DataFileContent.EQUALITY_DELETES:
                if not f.equality_ids:
                    raise ValidationError(f"Cannot {action}: equality delete file {f.file_path} has no equality ids")
                continue
            for path in paths_in_position_deletes(f, io=self._table.catalog.io):
                data_file = pending.get(path) or live.get(path)
                if data_file is None:
                    raise ValidationError(f"Cannot {action}: {f.file_path} deletes rows of {path}, which is not a "
                                          f"live data file of branch {self.branch}")
                if path not in pending:
                    referenced[path] = data_file
        if self._state.format_version < 2 and files:
            raise ValidationError(f"Cannot {action}: the table is format version {self._state.format_version} "
                                  f"(row-level deletes need version 2)")
        self._check_one_vector_per_file(files, action)
        self._check_new_paths(files, action)
        self._deletes += files
        self._referenced.update(referenced)
        return self

    def _check_one_vector_per_file(self, files: Sequence[DataFile], action: str) -> None:
        """A data file has at most one deletion vector in a snapshot, and a new one replaces every earlier delete of
        its rows (the v3 spec: readers then ignore its position delete files). A vector written elsewhere cannot be
        merged here, so one for a data file that already has deletes (or a second one) is refused;
        ``add_position_deletes`` merges them.

        :raises ValidationError: naming the data file and the delete file in the way
        """
        vectors = [f for f in files if f.is_deletion_vector]
        if not vectors:
            return
        data_files = {**self._live_data(), **self._pending_data()}
        applying = self._deletes_applying(
            data_files[key] for key in {normalize_path(v.referenced_data_file or "") for v in vectors}
            if key in data_files)
        earlier = {normalize_path(path): positional for path, deletes in applying.items()
                   if (positional := [d for d in deletes if d.content == DataFileContent.POSITION_DELETES])}
        for vector in vectors:
            key = normalize_path(vector.referenced_data_file or "")
            if key in earlier:
                raise ValidationError(
                    f"Cannot {action}: deletion vector {vector.file_path} is for {vector.referenced_data_file}, "
                    f"which already has delete file {earlier[key][0].file_path} (a data file has one vector, holding "
                    f"all its deletes: use add_position_deletes, which merges them)")
            earlier[key] = [vector]

    def add_equality_deletes(self, keys: pa.Table, equality_columns: Sequence[str]) -> RowDelta:
        """Write equality delete files deleting the older rows whose ``equality_columns`` equal a row of ``keys``
        (a null matches a null): one file per partition of the keys, or one global file when a live spec is
        unpartitioned.

        :raises ValidationError: for a bad equality column, or when a spec with live data partitions by a column
            that is not an equality column (the deletes' partitions would be unknown)
        """
        self._delete_keys(keys, equality_columns, action="add equality deletes", fallback=False)
        return self

    def _delete_keys(self, keys: pa.Table, key_columns: Sequence[str], *, action: str, fallback: bool,
                     isolation_for: str | None = None, positions_only: bool = False) -> KeyDeletes:
        state = self._state
        if state.format_version < 2:
            raise ValidationError(f"Cannot {action}: the table is format version {state.format_version} "
                                  f"(row-level deletes need version 2)")
        fields = key_fields(state.schema, key_columns, action)
        conformed = distinct_keys(conform_keys(keys, state.schema, fields, action))
        with self._table.tracking_written(self._written):
            planned = plan_key_deletes(self._table, state, self._read_snapshot_id, conformed, fields,
                                       action=action, fallback=fallback, positions_only=positions_only)
        self._deletes += planned.files
        self._replaced += planned.replaced
        self._referenced.update({normalize_path(f.file_path): f for f in planned.referenced})
        if isolation_for is not None and conformed.num_rows:
            self._key_filters.append((planned.filter, isolation_for))
        scoped = {f.spec_id for f in planned.files if f.content == DataFileContent.EQUALITY_DELETES}
        if scoped and not any(state.spec_by_id(i).is_unpartitioned for i in scoped):
            self._equality_scopes.append((planned.filter, frozenset(scoped)))
        return planned

    # ------------------------------------------------------------ validation
    def validate_from_snapshot(self, snapshot_id: int) -> RowDelta:
        """Validate against every snapshot committed to the branch after ``snapshot_id`` (default: the branch head
        when the builder was made)."""
        if self._state.snapshot_by_id(snapshot_id) is None:
            raise ValidationError(f"Cannot validate from snapshot {snapshot_id}: it does not exist")
        self._validate_from = snapshot_id
        return self

    def conflict_detection_filter(self, where: str) -> RowDelta:
        """Fail the commit if a data file added to the branch since the validation snapshot might hold rows
        matching ``where`` (judged from its column metrics), as Java's ``validateNoConflictingDataFiles`` does
        with a conflict detection filter."""
        if not isinstance(where, str):
            raise ValidationError(f"Cannot set conflict detection filter: expected a filter string, got "
                                  f"{type(where).__name__}")
        self._conflict_filter = bind(parse_expression(where), self._state.schema)
        return self

    def _validate(self, base: TableState, head: int | None, staged_on_version: int | None) -> None:
        action = self.action
        # refuses a start snapshot no longer under the branch head
        v = Validator(self._table.catalog.store, base, self._validate_from, head, staged_on_version)
        referenced = list(self._referenced.values())
        if v.new:
            if self._replaced:
                v.files_still_live(self._replaced, action)
            if referenced:
                v.files_still_live(referenced, action)
                _no_new_position_deletes_for(v, referenced, action)
            if self._conflict_filter is not None:
                v.no_new_matching_data(self._conflict_filter, action)
            for bound, isolation_for in self._key_filters:
                if isolation_level(base, isolation_for) == SERIALIZABLE:
                    v.no_new_matching_data(bound, action)
                if isolation_for == "update":
                    v.no_new_equality_deletes_matching(bound, action)
                    v.no_new_position_deletes_matching(bound, action)
            for bound, specs in self._equality_scopes:  # at every isolation level: these rows were read
                v.no_rows_moved_out_of(specs, bound, action)
        # whatever moved the branch (a rollback under a transaction adds no snapshot to validate), never remove a
        # file it does not hold, nor delete rows of one
        v.files_live([*self._replaced, *referenced], head, action)

    # ------------------------------------------------------------ commit
    def operation(self) -> str:
        """``append`` (data only), ``delete`` (deletes only) or ``overwrite`` (both), as Java's RowDelta."""
        if self._data and not self._deletes:
            return APPEND
        if self._deletes and not self._data:
            return DELETE
        return OVERWRITE

    def events(self, base: TableState, ctx: CommitContext) -> list:
        added = self._data + self._deletes
        if not added:
            return []
        head = base.branch_head(self.branch)
        self._validate(base, head, ctx.staged_on_version)
        return snapshot_events(base, ctx, operation=self.operation(), snapshot_id=self.snapshot_id, added=added,
                               removed=self._replaced, branch=self.branch)

    def commit(self) -> TableState:
        """Land the data and delete files as one snapshot (none when nothing was added). When the commit is
        refused, the files the builder wrote are removed."""
        if self._committed:
            raise ValidationError(f"Cannot commit row delta: snapshot {self.snapshot_id} was committed already")
        try:
            state = super().commit()
        except BaseException as e:
            if not may_have_landed(e):  # it did not land: nothing may stay
                self.discard()
            raise
        self._committed = True
        return state

    def discard(self) -> None:
        """Remove the files the builder wrote, without committing (also what leaving its ``with`` block on an
        error does)."""
        written, self._written = self._written, []
        if written:
            self._table.remove_written(written)

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc_type is not None:
            if not self._committed and not may_have_landed(exc):
                self.discard()
            return
        super().__exit__(exc_type, exc, tb)


def _no_new_position_deletes_for(v: Validator, data_files: Sequence[DataFile], action: str) -> None:
    """No position delete file added since that may delete rows of ``data_files`` (the same rows would be
    deleted, and counted, twice)."""
    paths = {normalize_path(f.file_path) for f in data_files}
    partitions = {(f.spec_id, partition_key(f.partition)) for f in data_files}
    for snap in v.new:
        for change in v.store.file_changes_of(v.base, snap):
            f = change.file
            if not change.added or f.content != DataFileContent.POSITION_DELETES:
                continue
            single = referenced_path(f)
            if (single in paths) if single is not None else ((f.spec_id, partition_key(f.partition)) in partitions):
                raise ValidationConflict(
                    f"Cannot {action}: commit {snap.commit_id} (snapshot {snap.snapshot_id}, {snap.operation}) "
                    f"added position delete file {f.file_path} for a data file whose rows this delta deletes",
                    commit_id=snap.commit_id, snapshot_id=snap.snapshot_id)


@contextlib.contextmanager
def _discarding_on_failure(delta: RowDelta) -> Iterator[None]:
    """An error before the delta's commit lands removes the files it wrote."""
    try:
        yield
    except BaseException as e:
        if not may_have_landed(e):
            delta.discard()
        raise


def _committed_snapshot(delta: RowDelta) -> Snapshot | None:
    state = delta.commit()
    return state.snapshot_by_id(delta.snapshot_id)


# -- entry points ------------------------------------------------------------------------------------------------


def delete_by_key(table: Any, keys: pa.Table, key_columns: Sequence[str], *,
                  branch: str = MAIN_BRANCH) -> Snapshot | None:
    """Delete the rows of ``branch`` whose ``key_columns`` equal a row of ``keys`` (a null key matches null),
    with equality delete files (position delete files for specs the keys do not partition; see the module
    docstring). Returns the new snapshot (operation ``delete``), or None when there is nothing to delete.

    :raises ValidationError: for a bad key column or ill-typed keys; nothing is committed
    :raises ValidationConflict: a data file that might hold one of the keys landed meanwhile and
        ``write.delete.isolation-level`` is serializable (the default)
    """
    delta = RowDelta(table, branch=branch, action="delete by key")
    with _discarding_on_failure(delta):
        delta._delete_keys(keys, key_columns, action=delta.action, fallback=True, isolation_for="delete")
        if not delta._deletes:
            return None
        return _committed_snapshot(delta)


def upsert(table: Any, data: pa.Table, key_columns: Sequence[str], *, branch: str = MAIN_BRANCH) -> Snapshot | None:
    """Insert the rows of ``data``, replacing the rows of ``branch`` with the same ``key_columns``, as one
    ``overwrite`` snapshot: equality deletes for the keys of ``data`` and ``data`` as new data files. The new
    rows share the deletes' sequence number, so the deletes (which apply only to older data) leave them alone.
    In a v3 table the replaced rows are read and deleted by deletion vectors instead, and each replacing row keeps
    the ``_row_id`` of the row it replaces (row lineage: an update keeps the row's id, as Spark's MERGE does).
    Returns the new snapshot, or None when ``data`` has no rows.

    :raises ValidationError: for a bad key column, rows that do not fit the table, or two rows of ``data`` with
        the same key; nothing is committed
    :raises ValidationConflict: a data file that might hold one of the keys landed meanwhile and
        ``write.update.isolation-level`` is serializable (the default)
    """
    delta = RowDelta(table, branch=branch, action="upsert")
    with _discarding_on_failure(delta):
        return _upsert(table, delta, data, key_columns)


def _upsert(table: Any, delta: RowDelta, data: pa.Table, key_columns: Sequence[str]) -> Snapshot | None:
    action = delta.action
    state = delta.state
    fields = key_fields(state.schema, key_columns, action)
    rows = conform(data, state.schema, action=action)
    if rows.num_rows == 0:
        return None
    keys = rows.select([f.name for f in fields])
    distinct = distinct_keys(keys)
    if distinct.num_rows != keys.num_rows:
        duplicate = _a_duplicate(keys)
        raise ValidationError(f"Cannot {action}: {keys.num_rows - distinct.num_rows} row(s) of the data repeat a "
                              f"key, e.g. {duplicate} (each key may appear once)")
    names = [f.name for f in fields]
    if state.format_version < 3:
        delta._delete_keys(keys, names, action=action, fallback=True, isolation_for="update")
        delta.add_rows(rows)
        return _committed_snapshot(delta)
    # v3: deletion vectors for the rows replaced, and each replacing row keeps the id of the row it replaces (its
    # last-updated sequence number is left to inherit the new snapshot's), as Spark's MERGE does
    planned = delta._delete_keys(keys, names, action=action, fallback=True, isolation_for="update",
                                 positions_only=True)
    rows = rows.append_column(lineage_field(ROW_ID_COLUMN), _replaced_row_ids(rows, names, planned.row_ids)) \
        .append_column(lineage_field(LAST_UPDATED_SEQUENCE_NUMBER_COLUMN), pa.nulls(rows.num_rows, pa.int64()))
    with table.tracking_written(delta._written):
        delta._data += write_data_files(state, rows, keep_lineage=True, stage=table.stage_file, io=table.catalog.io,
                                        action=action)
    return _committed_snapshot(delta)


def _replaced_row_ids(rows: pa.Table, key_names: Sequence[str], replaced: pa.Table | None) -> pa.Array:
    """For each row of ``rows``, the ``_row_id`` of the row with its key that it replaces (null for a new key)."""
    if replaced is None or replaced.num_rows == 0:
        return pa.nulls(rows.num_rows, pa.int64())
    def key_tuples(t: pa.Table) -> list[tuple[Any, ...]]:
        return list(zip(*(groupable(t.column(n)).to_pylist() for n in key_names)))
    by_key = dict(zip(key_tuples(replaced), replaced.column(ROW_ID_COLUMN).to_pylist()))
    return pa.array([by_key.get(k) for k in key_tuples(rows)], pa.int64())


def _a_duplicate(keys: pa.Table) -> dict[str, Any]:
    names = [f"k{i}" for i in range(keys.num_columns)]
    proxy = pa.table([groupable(c) for c in keys.columns] + [pa.array(range(keys.num_rows), pa.int64())],
                     names=names + ["row"])
    counts = proxy.group_by(names, use_threads=False).aggregate([("row", "min"), ("row", "count")])
    repeated = counts.filter(pc.greater(counts.column("row_count"), 1))
    row = repeated.column("row_min")[0].as_py()
    return {name: keys.column(name)[row].as_py() for name in keys.column_names}


__all__ = ["RowDelta", "delete_by_key", "upsert"]
