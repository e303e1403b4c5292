"""Conflict validation: what a write must check against the snapshots that landed after the one it read.

Layer: engine.operations (reads file changes through the state store; no writes). Iceberg's
rules (MergingSnapshotProducer's validations), scoped by the operation's filter and by file
identity, never table-wide, so disjoint work does not conflict:

- files an operation removes must still be live (a concurrent delete or compaction took them);
- serializable isolation: no data file added since that might hold rows matching the filter;
- no delete file added since that applies to a data file the operation rewrites or removes (scoped as a scan
  scopes them, by the starting snapshot's sequence number); a compaction whose new files keep the starting data
  sequence number ignores equality deletes there, since those still apply to the new files (Java's
  ``validateNoNewDeletesForDataFiles`` with ``ignoreEqualityDeletes``), but never position deletes;
- position deletes added by the operation must reference data files that are still live;
- an update by key: no equality delete added since for its keys (by partition and bounds), at both levels;
- equality deletes written for the partitions of some specs must still reach the rows they delete: no rewrite
  since moved such rows into a file of another spec.
"""

from __future__ import annotations

from typing import Any, Iterable, Sequence

from engine.errors import ValidationConflict, ValidationError
from engine.model.data_file import DataFile, DataFileContent, LiveEntry
from engine.model.metrics_evaluation import metrics_might_match
from engine.model.partition_filters import partition_might_match
from engine.model.partitioning import partition_key
from engine.model.paths import normalize_path
from engine.read.scan import DeleteIndex, referenced_path
from engine.state.table_state import Snapshot, TableState
from engine.state.store import StateStore

SERIALIZABLE = "serializable"
# Java's VALIDATE_ADDED_FILES_OPERATIONS: a compaction (replace) adds files but no rows
ADDS_ROWS = ("append", "overwrite")
SNAPSHOT = "snapshot"


def isolation_level(state: TableState, operation: str) -> str:
    """``write.<operation>.isolation-level`` (delete, update, merge), serializable by default as in Java."""
    level = (state.prop(f"write.{operation}.isolation-level") or SERIALIZABLE).strip().lower()
    if level not in (SERIALIZABLE, SNAPSHOT):
        from engine.errors import ValidationError
        raise ValidationError(f"Cannot read write.{operation}.isolation-level: {level!r} is not serializable or "
                              f"snapshot")
    return level


def file_might_match(bound: Any, f: DataFile, state: TableState) -> bool:
    """Whether data file ``f`` may hold rows ``bound`` matches, by its partition (in its own spec) and its column
    metrics, as Java's ManifestGroup.filterData prunes (a file without metrics may match)."""
    if bound is None:
        return True
    spec = state.spec_by_id(f.spec_id)
    try:
        if not spec.is_unpartitioned and not partition_might_match(bound, spec, state.schema, f.partition):
            return False
    except ValidationError:  # a spec over a column dropped since: no pruning by it
        pass
    return metrics_might_match(bound, f, state.schema)


def snapshots_since(state: TableState, start_snapshot_id: int | None, branch_head: int | None) -> list[Snapshot]:
    """Snapshots on the branch after ``start_snapshot_id`` up to its head, oldest first."""
    out = []
    for snap in state.iter_ancestors(branch_head):
        if snap.snapshot_id == start_snapshot_id:
            break
        out.append(snap)
    return list(reversed(out))


def landed_under(state: TableState, snapshot_id: int | None, staged_on_version: int) -> tuple[list[Snapshot],
                                                                                                int | None]:
    """For an operation of a transaction that started from a snapshot the transaction staged: the snapshots the
    log recorded after the transaction's base version that lie under it (the retry rebuilt the staged snapshots
    on top of them), oldest first, and the newest ancestor the transaction read (None: none)."""
    out = []
    read = None
    for snap in state.iter_ancestors(snapshot_id):
        if snap.is_staged:
            continue
        if snap.log_version <= staged_on_version:
            read = snap.snapshot_id
            break
        out.append(snap)
    return list(reversed(out)), read


class Validator:
    """Checks one retry's base against what the operation read.

    In a transaction (``staged_on_version`` given) an operation may have started from a snapshot the
    transaction staged, which a retry rebuilds on top of the commits that landed meanwhile; those commits are
    validated as well (Iceberg Java's BaseTransaction re-commits every update on the refreshed metadata), and
    the data the operation read is judged by the sequence number of the last snapshot the transaction read.

    :param store: the catalog's state store
    :param base: the state the retry builds on
    :param start_snapshot_id: the branch head the operation read
    :param branch_head: the branch head in ``base``
    :param staged_on_version: in a transaction, the table version its operations read
    """

    def __init__(self, store: StateStore, base: TableState, start_snapshot_id: int | None,
                 branch_head: int | None, staged_on_version: int | None = None) -> None:
        self.store = store
        self.base = base
        self.start_snapshot_id = start_snapshot_id
        self.new = snapshots_since(base, start_snapshot_id, branch_head)
        #: the snapshot whose sequence number bounds the data the operation read
        self.read_snapshot_id = start_snapshot_id
        start = base.snapshot_by_id(start_snapshot_id) if start_snapshot_id is not None else None
        staged = staged_on_version is not None and start is not None and start.is_staged
        if staged:
            landed, self.read_snapshot_id = landed_under(base, start_snapshot_id, staged_on_version)
        if start_snapshot_id is not None and start_snapshot_id != branch_head and (
                not self.new or self.new[0].parent_snapshot_id != start_snapshot_id):
            # what the operation read is no longer under the branch head (a rollback, or expired): the history
            # between them cannot be validated (Java's MergingSnapshotProducer.validationHistory refuses too)
            raise ValidationConflict(
                f"Cannot validate the commit: snapshot {start_snapshot_id} the operation read is no longer an "
                f"ancestor of the branch head {branch_head} (the table's commit {base.commit_id} or one before it "
                f"moved the branch, or the snapshot expired)", commit_id=base.commit_id, snapshot_id=branch_head)
        if staged:
            self.new = landed + self.new

    def files_live(self, removed: Sequence[DataFile], branch_head: int | None, action: str) -> None:
        """Refuse to remove a file that is not live in the branch head (Java's ``failMissingDeletePaths``): the
        snapshot would remove what no manifest of its parent holds."""
        if not removed:
            return
        live = self.store.live_files_by_key(self.base, branch_head)
        for f in removed:
            if f.key not in live:
                head = self.base.snapshot_by_id(branch_head) if branch_head is not None else None
                commit_id = head.commit_id if head is not None else self.base.commit_id
                raise ValidationConflict(f"Cannot {action}: file {f.file_path} is not in the table at snapshot "
                                         f"{branch_head} (commit {commit_id} removed it, or moved the branch)",
                                         commit_id=commit_id, snapshot_id=branch_head)

    def _changes(self) -> Iterable[tuple[Snapshot, bool, DataFile]]:
        for snap in self.new:
            for c in self.store.file_changes_of(self.base, snap):
                yield snap, c.added, c.file

    def data_added(self) -> Iterable[tuple[Snapshot, DataFile]]:
        """The data files the snapshots since the start added, each with its snapshot."""
        for snap, added, f in self._changes():
            if added and f.content == DataFileContent.DATA:
                yield snap, f

    def removed_by_deletes(self, data_files: Sequence[DataFile]) -> set[str]:
        """The keys of ``data_files`` that a ``delete`` snapshot since removed (whole, rows and all)."""
        keys = {f.key for f in data_files}
        if not keys:
            return set()
        return {f.key for snap, added, f in self._changes()
                if not added and f.key in keys and snap.operation == "delete"}

    def files_still_live(self, removed: Sequence[DataFile], action: str) -> None:
        keys = {f.key for f in removed}
        for snap, added, f in self._changes():
            if not added and f.key in keys:
                raise ValidationConflict(
                    f"Cannot {action}: file {f.file_path} was removed by commit {snap.commit_id} "
                    f"(snapshot {snap.snapshot_id}, {snap.operation})", commit_id=snap.commit_id,
                    snapshot_id=snap.snapshot_id)

    def no_new_matching_data(self, bound_filter: object | None, action: str) -> None:
        """Serializable isolation: no data added since that might match ``bound_filter`` (None: the whole table), by
        partition and by column metrics."""
        for snap, added, f in self._changes():
            if added and f.content == DataFileContent.DATA and snap.operation in ADDS_ROWS and (
                    bound_filter is None or file_might_match(bound_filter, f, self.base)):
                raise ValidationConflict(
                    f"Cannot {action}: commit {snap.commit_id} (snapshot {snap.snapshot_id}, {snap.operation}) "
                    f"added {f.file_path}, which may hold rows the operation's filter matches",
                    commit_id=snap.commit_id, snapshot_id=snap.snapshot_id)

    def no_new_equality_deletes_matching(self, bound_filter: object, action: str) -> None:
        """An update's keys (Java's ``validateNoConflictingDeleteFiles`` for UPDATE and MERGE, at both isolation
        levels): no equality delete file added since whose partition and bounds might match ``bound_filter`` (a
        concurrent update of the same key deleted the row this one replaces, and its new row would stay beside this
        one's). Position deletes are judged by the data files they name."""
        for snap, added, f in self._changes():
            if added and f.content == DataFileContent.EQUALITY_DELETES and file_might_match(bound_filter, f,
                                                                                              self.base):
                raise ValidationConflict(
                    f"Cannot {action}: commit {snap.commit_id} (snapshot {snap.snapshot_id}) added equality delete "
                    f"file {f.file_path}, which may delete rows of the keys the operation replaces",
                    commit_id=snap.commit_id, snapshot_id=snap.snapshot_id)

    def no_new_position_deletes_matching(self, bound_filter: object, action: str) -> None:
        """An update's keys, with :meth:`no_new_equality_deletes_matching` (Java's ``validateNoConflictingDeleteFiles``
        refuses any delete file added since that might match): no position delete file or deletion vector added since
        that may delete a row of the keys (the update would bring back, with its value, a row deleted meanwhile).
        Judged by the data file it names, by partition and column metrics, so deletes of other keys' files do not
        conflict; a delete file naming no single data file, by its own partition."""
        live: Any = None  # the data files at the start by key (decoded only as looked up), and those added since
        for snap, added, f in self._changes():
            if not added or f.content != DataFileContent.POSITION_DELETES or \
                    not file_might_match(bound_filter, f, self.base):
                continue
            target = referenced_path(f)
            if target is not None:
                if live is None:
                    live = (self.store.live_files_by_key(self.base, self.start_snapshot_id),
                            {normalize_path(d.file_path): d for _, d in self.data_added()})
                data = live[0].get(target) or live[1].get(target)  # none found: judged as matching
                if data is not None and not file_might_match(bound_filter, data, self.base):
                    continue
            raise ValidationConflict(
                f"Cannot {action}: commit {snap.commit_id} (snapshot {snap.snapshot_id}) added position delete file "
                f"{f.file_path}, which may delete rows of the keys the operation replaces",
                commit_id=snap.commit_id, snapshot_id=snap.snapshot_id)

    def no_rows_moved_out_of(self, specs: frozenset[int], bound_filter: object, action: str) -> None:
        """Equality deletes scoped to the partitions of ``specs`` (a spec the keys determine) still reach every row
        they were written for: no commit since rewrote a data file of those specs that might hold rows
        ``bound_filter`` matches (removed it, as a compaction or a copy-on-write change does) into a data file of
        another spec that might hold them too, where those deletes do not apply."""
        rewrites = {snap.snapshot_id for snap, added, f in self._changes()
                    if not added and f.content == DataFileContent.DATA and f.spec_id in specs
                    and file_might_match(bound_filter, f, self.base)}
        for snap, added, f in self._changes():
            if added and f.content == DataFileContent.DATA and snap.snapshot_id in rewrites and \
                    f.spec_id not in specs and file_might_match(bound_filter, f, self.base):
                raise ValidationConflict(
                    f"Cannot {action}: commit {snap.commit_id} (snapshot {snap.snapshot_id}, {snap.operation}) "
                    f"rewrote rows into {f.file_path} (partition spec {f.spec_id}), which the operation's "
                    f"equality deletes, written for partition specs {sorted(specs)}, do not reach",
                    commit_id=snap.commit_id, snapshot_id=snap.snapshot_id)

    def no_new_deletes_in_partitions(self, partitions: set[tuple[int, tuple]] | None, action: str) -> None:
        """A dynamic overwrite, at both isolation levels (Java's BaseReplacePartitions ``validateNoNewDeleteFiles``
        over the partitions it replaces): no delete file added since to one of ``partitions``, or anywhere when
        None (an overwrite under an unpartitioned spec replaces the whole table)."""
        keys = None if partitions is None else {(spec_id, partition_key(values)) for spec_id, values in partitions}
        for snap, added, f in self._changes():
            if added and f.content != DataFileContent.DATA and (
                    keys is None or (f.spec_id, partition_key(f.partition)) in keys):
                raise ValidationConflict(
                    f"Cannot {action}: commit {snap.commit_id} (snapshot {snap.snapshot_id}) added delete file "
                    f"{f.file_path} to partition {f.partition} of spec {f.spec_id}, which the operation replaces",
                    commit_id=snap.commit_id, snapshot_id=snap.snapshot_id)

    def no_new_data_in_partitions(self, partitions: set[tuple[int, tuple]], action: str) -> None:
        """Serializable dynamic overwrite: no data added since to a partition the operation replaces (partitions
        compared as Java's PartitionSet does: NaN is one, -0.0 another than 0.0)."""
        keys = {(spec_id, partition_key(values)) for spec_id, values in partitions}
        for snap, added, f in self._changes():
            if added and f.content == DataFileContent.DATA and snap.operation in ADDS_ROWS and (
                    (f.spec_id, partition_key(f.partition)) in keys):
                raise ValidationConflict(
                    f"Cannot {action}: commit {snap.commit_id} (snapshot {snap.snapshot_id}) added {f.file_path} "
                    f"to a partition the operation replaces", commit_id=snap.commit_id, snapshot_id=snap.snapshot_id)

    def _new_deletes(self) -> tuple[DeleteIndex, dict[str, Snapshot]]:
        """The delete files added since the start, indexed as a scan indexes them, and the snapshot adding each."""
        entries: list[LiveEntry] = []
        added_by: dict[str, Snapshot] = {}
        for snap in self.new:
            for c in self.store.file_changes_of(self.base, snap):
                if c.added and c.file.content != DataFileContent.DATA:
                    seq = c.data_sequence_number if c.data_sequence_number is not None else snap.sequence_number
                    entries.append(LiveEntry(file=c.file, data_sequence_number=seq,
                                             file_sequence_number=snap.sequence_number, snapshot_id=snap.snapshot_id))
                    added_by[c.file.key] = snap
        unpartitioned = {s.spec_id for s in self.base.specs if not s.is_partitioned}
        return DeleteIndex(entries, unpartitioned, self.base.schema), added_by

    def _sequence_number_of(self, snapshot_id: int | None) -> int | None:
        """The sequence number of a snapshot the log holds (expired since or not); None when there is none."""
        snap = self.base.logged_snapshot(snapshot_id) if snapshot_id is not None else None
        return snap.sequence_number if snap is not None else None

    def no_new_deletes_for(self, data_files: Sequence[DataFile], action: str, *,
                           ignore_equality_deletes: bool = False, position_deletes_only: bool = False) -> None:
        """No delete file added since that applies to a data file the operation rewrites or removes.

        A delete file applies as in a scan of a file written in the starting snapshot: a position delete file of
        its partition (or naming it alone), an equality delete file of its partition or a global one.

        :param ignore_equality_deletes: the operation's new files keep the starting snapshot's data sequence
            number and the partition of the files they replace, so equality deletes added since with a higher
            sequence number still apply to them; only position deletes conflict, and equality deletes that
            landed under a snapshot a transaction staged (their sequence number is lower than the new files')
        :param position_deletes_only: the operation deletes rows of the files in place (merge-on-read): a position
            delete of the same file would count rows twice, an equality delete is no conflict (Java's DELETE
            validates none)
        """
        if not self.new or not data_files:
            return
        index, added_by = self._new_deletes()
        if not index:
            return
        read_sequence_number = self._sequence_number_of(self.read_snapshot_id) or 0
        kept_sequence_number = self._sequence_number_of(self.start_snapshot_id)
        for f in data_files:
            for d in index.for_data_file(f, read_sequence_number):
                if position_deletes_only and d.content == DataFileContent.EQUALITY_DELETES:
                    continue
                if ignore_equality_deletes and d.content == DataFileContent.EQUALITY_DELETES and (
                        kept_sequence_number is not None and added_by[d.key].sequence_number > kept_sequence_number):
                    continue
                snap = added_by[d.key]
                kind = "position" if d.content == DataFileContent.POSITION_DELETES else "equality"
                raise ValidationConflict(
                    f"Cannot {action}: commit {snap.commit_id} (snapshot {snap.snapshot_id}) added {kind} delete "
                    f"file {d.file_path} for data file {f.file_path}, which the operation rewrites",
                    commit_id=snap.commit_id, snapshot_id=snap.snapshot_id)
