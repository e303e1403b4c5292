"""Transactions: several changes, on one table or several, landing as one commit or not at all.

Layer: engine.operations (pure). A transaction keeps the pure ``build(base, ctx)`` functions of
the changes made through it; at commit they run again, in order, each on the state the previous
ones produced, so the whole transaction re-validates on a fresh base after a conflict.

Two rules make that sound (as Iceberg Java's BaseTransaction, which re-commits every pending update on
the refreshed metadata):

- the operations of a transaction read the table as it was at one log version (the transaction's base)
  plus what the transaction staged before them; the snapshots it staged carry their file changes
  (``Snapshot.staged_changes``), so scans, deletes, upserts and compactions inside the transaction see
  the staged files;
- on a retry every operation validates against every snapshot the log recorded after the transaction's
  base (``CommitContext.staged_on_version``), not only against the snapshots after the one it started
  from: that one may be a snapshot the transaction staged, which the retry rebuilds on top of the
  commits that landed meanwhile.
"""

from __future__ import annotations

from typing import Callable, Sequence

import attrs

from engine.state.events import Event, SnapshotAdded
from engine.operations.commit import CommitContext, apply_in_commit
from engine.state.table_state import TableState

Build = Callable[[TableState, CommitContext], Sequence[Event]]


def run_staged(base: TableState, builds: Sequence[Build], ctx: CommitContext, *,
               staged_on_version: int | None = None) -> tuple[list[Event], TableState]:
    """The events of ``builds`` applied in order from ``base``, and the state they lead to.

    Events get provisional log positions; the log assigns the real ones when the commit lands. The snapshots
    the builds add keep their file changes (``Snapshot.staged_changes``), so later builds can read them.

    :param staged_on_version: the table version the transaction's operations read (its base); each build
        validates against every snapshot recorded after it
    """
    if staged_on_version is not None:
        ctx = attrs.evolve(ctx, staged_on_version=staged_on_version)
    state = base
    events: list[Event] = []
    for build in builds:
        for event in build(state, ctx):
            state = apply_in_commit(event, state, ctx)
            if isinstance(event, SnapshotAdded):
                state = _with_staged_changes(state, event)
            events.append(event)
    return events, state


def _with_staged_changes(state: TableState, event: SnapshotAdded) -> TableState:
    snapshots = tuple(attrs.evolve(s, staged_changes=tuple(event.changes)) if s.snapshot_id == event.snapshot_id
                      else s for s in state.snapshots)
    return attrs.evolve(state, snapshots=snapshots)
