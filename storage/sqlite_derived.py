"""The derived tables other layers keep beside the log, in the log's own SQLite file.

Layer: storage. May touch: the log's SQLite connection (through :class:`storage.log.Log`) and ``storage.errors``;
it knows nothing of Iceberg. Implements :class:`storage.contract.DerivedTables` for the SQLite log.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from storage.errors import LogError
from storage.sqlite_file import wrong_thread

if TYPE_CHECKING:
    from storage.log import Log


class SqliteDerived:
    """The derived tables (:class:`storage.contract.DerivedTables`) in the log's SQLite file. Their transactions
    run without an fsync of their own: the rows are rebuildable from the log, and the next log commit's fsync makes
    them durable anyway (WAL frames are synced in order)."""

    def __init__(self, log: Log) -> None:
        self._log = log

    @contextlib.contextmanager
    def _errors(self) -> Iterator[None]:
        try:
            yield
        except sqlite3.Error as e:
            raise wrong_thread(e, self._log.path, "the derived tables") or \
                LogError(f"Cannot use the derived tables of {self._log.path}: {e}") from e

    def create(self, statement: str) -> None:
        with self._errors():
            self._log.db.execute(statement)

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        with self._errors():
            return self._log.db.execute(sql, list(params)).fetchall()

    def execute(self, sql: str, params: Sequence[Any] = ()) -> None:
        with self._errors():
            self._log.db.execute(sql, list(params))

    def insert_missing(self, table: str, columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> None:
        marks = ", ".join("?" for _ in columns)
        with self._errors():
            self._log.write_rows(f"INSERT OR IGNORE INTO {table} ({', '.join(columns)}) VALUES ({marks})", list(rows))

    def upsert(self, table: str, keys: Sequence[str], row: dict[str, Any]) -> None:
        self.upsert_many(table, keys, list(row), [list(row.values())])

    def upsert_many(self, table: str, keys: Sequence[str], columns: Sequence[str],
                    rows: Iterable[Sequence[Any]]) -> None:
        marks = ", ".join("?" for _ in columns)
        with self._errors():
            self._log.write_rows(f"INSERT OR REPLACE INTO {table} ({', '.join(columns)}) VALUES ({marks})",
                                 list(rows))

    def one_of(self, column: str) -> str:
        return f"{column} IN (SELECT value FROM json_each(?))"

    def list_value(self, values: Sequence[Any]) -> Any:
        return json.dumps(list(values))

    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        """A write transaction of derived rows, committed without an fsync when it is the outermost one (inside
        another, that one's commit decides)."""
        log = self._log
        db = log.db
        relaxed = log.synchronous in ("FULL", "EXTRA") and not db.conn.in_transaction
        if relaxed:
            db.execute("PRAGMA synchronous = NORMAL")
        try:
            with log.transaction():
                yield
        finally:
            if relaxed:
                db.execute(f"PRAGMA synchronous = {log.synchronous}")
