"""The snapshot producer every write operation shares: file changes in, one SnapshotAdded event out.

Layer: engine.operations (pure). The summary follows Iceberg Java's SnapshotSummary: only
non-zero change counts, then ``changed-partition-count``, then totals carried from the
parent's summary, so a commit costs O(files it changes), never O(table).
"""

from __future__ import annotations

import uuid
from typing import Any, Callable, Iterable, Mapping, Sequence

import attrs

from engine.errors import ValidationError
from engine.state.events import FileChange, SnapshotAdded
from engine.model.data_file import DataFile, DataFileContent
from engine.model.paths import normalize_path
from engine.operations.commit import CommitContext, apply_in_commit
from engine.state.table_state import MAIN_BRANCH, Snapshot, TableState

TOTAL_KEYS = ("total-records", "total-files-size", "total-data-files", "total-delete-files",
              "total-position-deletes", "total-equality-deletes")
_HEAD = object()


def new_snapshot_id() -> int:
    """A positive 63-bit id, as Java derives it from a random UUID."""
    u = uuid.uuid4().int
    return ((u >> 64) ^ (u & (2**64 - 1))) & (2**63 - 1)


def content_size(f: DataFile) -> int:
    """The bytes a file adds to a snapshot's sizes: a deletion vector's blob, not its whole Puffin file (Java's
    ``ScanTaskUtil.contentSizeInBytes``: several vectors share one file)."""
    if f.is_deletion_vector and f.content_size_in_bytes is not None:
        return f.content_size_in_bytes
    return f.file_size_in_bytes


def _counts(files: Sequence[DataFile]) -> dict[str, int]:
    data = [f for f in files if f.content == DataFileContent.DATA]
    pos = [f for f in files if f.content == DataFileContent.POSITION_DELETES]
    eq = [f for f in files if f.content == DataFileContent.EQUALITY_DELETES]
    dvs = sum(1 for f in pos if f.is_deletion_vector)
    return {"data": len(data), "deletes": len(pos) + len(eq), "pos_files": len(pos) - dvs, "dvs": dvs,
            "eq_files": len(eq),
            "records": sum(f.record_count for f in data), "size": sum(map(content_size, files)),
            "pos": sum(f.record_count for f in pos), "eq": sum(f.record_count for f in eq)}


def snapshot_summary(added: Sequence[DataFile], removed: Sequence[DataFile], parent: Snapshot | None,
                     extra: Mapping[str, str] | None = None) -> list[tuple[str, str]]:
    """Java's summary of a snapshot that adds ``added`` and removes ``removed`` on top of ``parent`` (deletion
    vectors count as ``added-dvs``/``removed-dvs``, not as position delete files, as in Java 1.10)."""
    a, r = _counts(added), _counts(removed)
    pairs = [("added-data-files", a["data"]), ("deleted-data-files", r["data"]),
             ("added-delete-files", a["deletes"]), ("added-equality-delete-files", a["eq_files"]),
             ("added-position-delete-files", a["pos_files"]), ("added-dvs", a["dvs"]),
             ("removed-delete-files", r["deletes"]), ("removed-equality-delete-files", r["eq_files"]),
             ("removed-position-delete-files", r["pos_files"]), ("removed-dvs", r["dvs"]),
             ("added-records", a["records"]), ("deleted-records", r["records"]),
             ("added-files-size", a["size"]), ("removed-files-size", r["size"]),
             ("added-position-deletes", a["pos"]), ("removed-position-deletes", r["pos"]),
             ("added-equality-deletes", a["eq"]), ("removed-equality-deletes", r["eq"])]
    summary = [(k, str(v)) for k, v in pairs if v > 0]
    partitions = {(f.spec_id, f.partition) for f in list(added) + list(removed)}
    summary.append(("changed-partition-count", str(len(partitions))))
    changes = {"total-records": a["records"] - r["records"], "total-files-size": a["size"] - r["size"],
               "total-data-files": a["data"] - r["data"], "total-delete-files": a["deletes"] - r["deletes"],
               "total-position-deletes": a["pos"] - r["pos"], "total-equality-deletes": a["eq"] - r["eq"]}
    for k in TOTAL_KEYS:  # Java's updateTotal: a total the parent lacks (another engine's snapshot) stays out
        before = "0" if parent is None else parent.summary_value(k)
        try:
            summary.append((k, str(int(before) + changes[k])))  # type: ignore[arg-type]
        except (TypeError, ValueError):
            continue
    summary += sorted((extra or {}).items())
    return summary


def snapshot_events(base: TableState, ctx: CommitContext, *, operation: str, snapshot_id: int,
                    added: Sequence[DataFile] = (), removed: Sequence[DataFile] = (), branch: str = MAIN_BRANCH,
                    parent_snapshot_id: int | None | object = _HEAD,
                    summary_extra: Mapping[str, str] | None = None) -> list[SnapshotAdded]:
    """The event of one snapshot on ``branch`` (its parent: the branch head unless given); none when the snapshot
    would change nothing."""
    if not isinstance(branch, str) or not branch:
        raise ValidationError(f"Cannot commit snapshot: the branch name must be a non-empty string, got {branch!r}")
    if not added and not removed:
        return []
    ref = base.ref(branch)
    if ref is not None and ref.type != "branch":  # as Java's SnapshotProducer: a tag never moves by a commit
        raise ValidationError(f"Cannot commit to {branch}: it is a tag, not a branch (tags cannot be targets for "
                              f"producing snapshots)")
    if parent_snapshot_id is _HEAD:
        head = base.branch_head(branch)
        parent = base.snapshot_by_id(head) if head is not None else None
    else:
        parent = (base.snapshot_by_id(parent_snapshot_id)  # type: ignore[arg-type]
                  if parent_snapshot_id is not None else None)
        if parent_snapshot_id is not None and parent is None:
            raise ValidationError(f"Cannot commit snapshot: parent snapshot {parent_snapshot_id} does not exist")
    if base.format_version < 2 and any(f.content != DataFileContent.DATA for f in added):
        raise ValidationError("Cannot add delete files to a format version 1 table (upgrade it to version 2)")
    keys = [f.key for f in added]
    if len(set(keys)) != len(keys):
        raise ValidationError("Cannot commit snapshot: a file is added twice")
    sequence_number = base.last_sequence_number + 1 if base.format_version >= 2 else 0
    first_row_id = added_rows = None
    if base.format_version >= 3:
        added, first_row_id, added_rows = assign_row_ids(base, added)
    changes = tuple(FileChange(added=True, file=f) for f in added) + tuple(
        FileChange(added=False, file=f) for f in removed)
    return [SnapshotAdded(
        snapshot_id=snapshot_id,
        parent_snapshot_id=parent.snapshot_id if parent is not None else None,
        sequence_number=sequence_number,
        timestamp_ms=max(ctx.time_ms, base.last_updated_ms),
        operation=operation,
        summary=snapshot_summary(added, removed, parent, summary_extra),
        schema_id=base.current_schema_id,
        branch=branch,
        changes=changes,
        partition_types={s.spec_id: base.partition_type_of(s) for s in base.specs},
        first_row_id=first_row_id,
        added_rows=added_rows,
    )]


def vectors_of_removed(live: Iterable[DataFile], removed: Sequence[DataFile]) -> list[DataFile]:
    """The deletion vectors among ``live`` (a snapshot's live files) that apply to a data file ``removed`` removes,
    and that it does not remove already: a writer that removes a data file removes its vector too (the v3 spec;
    Java's ``removeDanglingDeletesFor``), or the vector would dangle in every later snapshot."""
    gone = {normalize_path(f.file_path) for f in removed if f.content == DataFileContent.DATA}
    if not gone:
        return []
    leaving = {f.key for f in removed}
    return [f for f in live if f.is_deletion_vector and f.key not in leaving
            and normalize_path(f.referenced_data_file or "") in gone]


def assign_row_ids(base: TableState, added: Sequence[DataFile]) -> tuple[list[DataFile], int, int]:
    """Format version 3 row lineage of a new snapshot: each added data file without a first row id gets the next ones
    in order, from the table's ``next-row-id``; returns the files, the snapshot's first row id and the row ids it
    assigned (its ``added-rows``).

    :raises ValidationError: for a new position delete file (v3 tables take deletion vectors instead)
    """
    first = next_id = base.next_row_id or 0
    out = []
    for f in added:
        if f.content == DataFileContent.POSITION_DELETES and not f.is_deletion_vector:
            raise ValidationError(f"Cannot add position delete file {f.file_path} to a format version 3 table: v3 "
                                  f"tables take deletion vectors instead")
        if f.content == DataFileContent.DATA and f.first_row_id is None:
            f = attrs.evolve(f, first_row_id=next_id)
            next_id += f.record_count
        out.append(f)
    return out, first, next_id - first


def snapshot_ids_by_branch() -> Callable[[str], int]:
    """A new snapshot id per branch, drawn once: an operation built again (a retry, a transaction's commit) keeps
    the ids its first build gave, which later operations of its transaction read."""
    drawn: dict[str, int] = {}

    def snapshot_id(branch: str) -> int:
        if branch not in drawn:
            drawn[branch] = new_snapshot_id()
        return drawn[branch]

    return snapshot_id


def row_id_backfill_events(state: TableState, ctx: CommitContext,
                           live_entries: Callable[[TableState, int | None], Sequence[Any]],
                           snapshot_ids: Callable[[str], int] | None = None,
                           branches: Iterable[str] | None = None, *,
                           unlabelled_files: bool = False) -> list[SnapshotAdded]:
    """After an upgrade to format version 3: one ``replace`` snapshot per branch whose head was written before v3,
    giving every data file live in it row ids (its ``first_row_id``), so each existing row has a ``_row_id`` and
    every later commit on the branch carries lineage. Nothing else changes: the files keep their manifests' entries
    (EXISTING, same sequence numbers), only their first row ids are new, and the snapshot's ``added-rows`` counts
    them, as the spec's first-row-id assignment for manifests without one does. Iceberg Java assigns the same ids
    lazily with its next commit; icelog records them when the format changes, so its own scans know them at once.

    :param state: the state right after the upgrade event (``next_row_id`` set)
    :param live_entries: the files live in a snapshot of a state (``StateStore.live_entries``)
    :param snapshot_ids: the id of each branch's snapshot, the same on every build of one operation (a later
        operation of its transaction read them); default: new ones
    :param branches: only these branches (default: every one)
    :param unlabelled_files: also heads written after the upgrade whose live data files lack row ids (a REST
        client's first snapshot after an upgrade in the same commit, whose list repeats the older manifests)
    """
    snapshot_ids = snapshot_ids or snapshot_ids_by_branch()
    events: list[SnapshotAdded] = []
    only = None if branches is None else set(branches)
    heads = sorted(((name, ref.snapshot_id) for name, ref in state.refs
                    if ref.type == "branch" and (only is None or name in only)),
                   key=lambda item: (item[0] != MAIN_BRANCH, item[0]))
    for branch, head_id in heads:
        head = state.snapshot_by_id(head_id)
        if head is None or (head.first_row_id is not None and not unlabelled_files):
            continue
        next_id = first = state.next_row_id or 0
        changes: list[FileChange] = []
        for entry in live_entries(state, head_id):
            f = entry.file
            if f.content != DataFileContent.DATA or f.first_row_id is not None:
                continue
            labelled = attrs.evolve(f, first_row_id=next_id)
            next_id += f.record_count
            changes += [FileChange(added=False, file=f),
                        FileChange(added=True, file=labelled, data_sequence_number=entry.data_sequence_number)]
        if not changes:
            continue
        event = SnapshotAdded(
            snapshot_id=snapshot_ids(branch), parent_snapshot_id=head_id,
            sequence_number=state.last_sequence_number + 1, timestamp_ms=max(ctx.time_ms, state.last_updated_ms),
            operation="replace",
            summary=snapshot_summary((), (), head), schema_id=state.current_schema_id, branch=branch,
            changes=tuple(changes), partition_types={s.spec_id: state.partition_type_of(s) for s in state.specs},
            first_row_id=first, added_rows=next_id - first)
        events.append(event)
        state = apply_in_commit(event, state, ctx)
    return events
