"""Staged changes to several tables of one catalog, committed together (one log commit over their streams).

Layer: engine (beside engine.catalog and engine.table: stages through Table transaction handles, commits through
the operations' commit loop).

::

    with catalog.transaction() as tx:
        tx.load_table("db.a").append(rows)
        tx.load_table("db.b").delete("id < 10")
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence

from engine.operations.commit import CommitContext, RetryPolicy, commit_streams
from engine.operations.transaction import run_staged
from engine.table import Table

if TYPE_CHECKING:  # the catalog opens transactions: it imports this module
    from engine.catalog import Catalog


class CatalogTransaction:
    """Staged changes to several tables of one catalog, committed together.

    :param catalog: the catalog
    """

    def __init__(self, catalog: Catalog) -> None:
        self.catalog = catalog
        self._tables: dict[str, Table] = {}

    def load_table(self, identifier: str | Sequence[str]) -> Table:
        """A staged handle on a table: its writes and builders are kept until the transaction commits."""
        table = self.catalog.load_table(identifier)
        if table.uuid not in self._tables:
            self._tables[table.uuid] = table.transaction()
        return self._tables[table.uuid]

    def commit(self) -> None:
        staged = {uuid: list(t._staged or []) for uuid, t in self._tables.items()}
        since = {uuid: t._staged_on_version for uuid, t in self._tables.items()}
        store = self.catalog.store

        def build(ctx: CommitContext) -> list:
            out = []
            for stream, builds in staged.items():
                store.check_registered(stream, ".".join(self._tables[stream].identifier))
                base = store.table(stream)
                out.append((stream, base.version, run_staged(base, builds, ctx, staged_on_version=since[stream])[0]))
            return out

        policies = [RetryPolicy.of(store.table(uuid)) for uuid in staged]
        policy = min(policies, key=lambda p: p.num_retries) if policies else RetryPolicy()
        try:
            for t in self._tables.values():
                t.check_foreign_writers()
            landed = commit_streams(store, build, policy=policy)
        except BaseException as e:
            self._end(e)
            raise
        for t in self._tables.values():
            t._staged = []
            t._written_in_transaction = []
            t._staged_on_version = store.log.head(t.uuid)
            Table(self.catalog, t.namespace, t.name, t.uuid)._after_commit(landed)

    def _end(self, error: BaseException) -> None:
        """The transaction did not land: every table's written files go (see Table._end_transaction)."""
        for t in self._tables.values():
            t._staged = []
            t._end_transaction(error)

    def __enter__(self) -> CatalogTransaction:
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc_type is None:
            self.commit()
        else:
            self._end(exc)
