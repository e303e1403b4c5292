"""The shape of every change builder: collect changes, then land them as one commit.

Layer: engine.operations (pure apart from the commit hook of the table it was made from).
A builder's ``events(base, ctx)`` must be pure: the commit loop calls it again on a fresh base
after a conflict, so it re-validates against whatever landed meanwhile.

::

    with table.update_schema() as update:      # commits when the block ends without an error
        update.add_column("note", "string")
    table.update_schema().rename_column("note", "comment").commit()
"""

from __future__ import annotations

from typing import Any, Protocol, Sequence

from engine.state.events import Event
from engine.operations.commit import CommitContext
from engine.state.table_state import TableState


class CommitsEvents(Protocol):
    """What a builder needs of a table: a way to commit events built on the current base."""

    def commit_events(self, build: Any) -> TableState: ...


class PendingUpdate:
    """Base of the builders: ``events`` is the pure part; ``commit`` lands it through the table.

    :param table: the table handle the builder came from
    """

    def __init__(self, table: CommitsEvents) -> None:
        self._table = table

    def events(self, base: TableState, ctx: CommitContext) -> Sequence[Event]:
        raise NotImplementedError

    def commit(self) -> TableState:
        """Land the collected changes as one commit (none when they change nothing)."""
        return self._table.commit_events(self.events)

    def __enter__(self) -> PendingUpdate:
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc_type is None:
            self.commit()
