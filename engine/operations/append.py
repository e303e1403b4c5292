"""Append: one snapshot that adds data files to a branch (Iceberg's AppendFiles).

Layer: engine.operations (pure: builds events from a base state). The snapshot summary
carries Java's keys; totals come from the parent snapshot's summary, so an append costs
O(files it adds), never O(table).
"""

from __future__ import annotations

import uuid
from typing import Mapping, Sequence

from engine.events import FileChange, SnapshotAdded
from engine.model.data_file import DataFile, DataFileContent
from engine.operations.commit import CommitContext
from engine.state import MAIN_BRANCH, Snapshot, TableState

TOTAL_KEYS = ("total-records", "total-files-size", "total-data-files", "total-delete-files",
              "total-position-deletes", "total-equality-deletes")


def new_snapshot_id() -> int:
    """A positive 63-bit id, as Java derives it from a random UUID."""
    u = uuid.uuid4().int
    return ((u >> 64) ^ (u & (2**64 - 1))) & (2**63 - 1)


def parent_totals(parent: Snapshot | None) -> dict[str, int]:
    totals = {k: 0 for k in TOTAL_KEYS}
    if parent is not None:
        for k in TOTAL_KEYS:
            totals[k] = int(parent.summary_value(k, "0") or 0)
    return totals


def append_summary(files: Sequence[DataFile], parent: Snapshot | None,
                   extra: Mapping[str, str] | None = None) -> list[tuple[str, str]]:
    data = [f for f in files if f.content == DataFileContent.DATA]
    records = sum(f.record_count for f in data)
    size = sum(f.file_size_in_bytes for f in data)
    partitions = {(f.spec_id, f.partition) for f in data}
    totals = parent_totals(parent)
    totals["total-records"] += records
    totals["total-files-size"] += size
    totals["total-data-files"] += len(data)
    summary = [("added-data-files", str(len(data))), ("added-records", str(records)),
               ("added-files-size", str(size)), ("changed-partition-count", str(len(partitions)))]
    summary += [(k, str(totals[k])) for k in TOTAL_KEYS]
    summary += sorted((extra or {}).items())
    return summary


def append_events(base: TableState, files: Sequence[DataFile], ctx: CommitContext, *, snapshot_id: int,
                  branch: str = MAIN_BRANCH, summary_extra: Mapping[str, str] | None = None) -> list[SnapshotAdded]:
    """The events of an append of ``files`` on ``base`` (none when there is nothing to add)."""
    if not files:
        return []
    ref = base.ref(branch)
    parent = base.snapshot_by_id(ref.snapshot_id) if ref is not None else None
    sequence_number = base.last_sequence_number + 1 if base.format_version >= 2 else 0
    return [SnapshotAdded(
        snapshot_id=snapshot_id,
        parent_snapshot_id=parent.snapshot_id if parent is not None else None,
        sequence_number=sequence_number,
        timestamp_ms=max(ctx.time_ms, base.last_updated_ms),
        operation="append",
        summary=append_summary(files, parent, summary_extra),
        schema_id=base.current_schema_id,
        branch=branch,
        changes=tuple(FileChange(added=True, file=f) for f in files),
        partition_types={s.spec_id: s.partition_type(base.schema) for s in base.specs},
    )]
