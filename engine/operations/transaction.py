"""Transactions: several changes, on one table or several, landing as one commit or not at all.

Layer: engine.operations (pure). A transaction keeps the pure ``build(base, ctx)`` functions of
the changes made through it; at commit they run again, in order, each on the state the previous
ones produced, so the whole transaction re-validates on a fresh base after a conflict.
"""

from __future__ import annotations

from typing import Callable, Sequence

from engine.events import Event
from engine.operations.commit import CommitContext
from engine.state import LogPosition, TableState, apply

Build = Callable[[TableState, CommitContext], Sequence[Event]]


def run_staged(base: TableState, builds: Sequence[Build], ctx: CommitContext) -> tuple[list[Event], TableState]:
    """The events of ``builds`` applied in order from ``base``, and the state they lead to.

    Events get provisional log positions; the log assigns the real ones when the commit lands.
    """
    state = base
    events: list[Event] = []
    for build in builds:
        for event in build(state, ctx):
            at = LogPosition(position=0, version=state.version + 1, commit_id=ctx.commit_id, time_ms=ctx.time_ms)
            state = apply(event, state, at)
            events.append(event)
    return events, state
