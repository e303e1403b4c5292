"""Append: one snapshot that adds data files to a branch (Iceberg's AppendFiles).

Layer: engine.operations (pure: builds events from a base state).
"""

from __future__ import annotations

from typing import Mapping, Sequence

from engine.state.events import SnapshotAdded
from engine.model.data_file import DataFile
from engine.operations.commit import CommitContext
from engine.operations.snapshot import snapshot_events
from engine.state.table_state import MAIN_BRANCH, TableState


def append_events(base: TableState, files: Sequence[DataFile], ctx: CommitContext, *, snapshot_id: int,
                  branch: str = MAIN_BRANCH, summary_extra: Mapping[str, str] | None = None) -> list[SnapshotAdded]:
    """The events of an append of ``files`` on ``base`` (none when there is nothing to add)."""
    return snapshot_events(base, ctx, operation="append", snapshot_id=snapshot_id, added=files, branch=branch,
                           summary_extra=summary_extra)
