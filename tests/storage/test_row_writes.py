"""Writes of rows beside the log (``Log.write_rows``, the derived tables): all rows or none, in the transaction open
or one of their own, with no savepoint around a single statement and no fsync of their own."""

from __future__ import annotations

import sqlite3

import pytest

from storage import Log

INSERT = "INSERT INTO kv (k, v) VALUES (?, ?)"


@pytest.fixture
def kv_log(log: Log) -> Log:
    log.derived.create("CREATE TABLE kv (k TEXT PRIMARY KEY, v INTEGER NOT NULL)")
    return log


def rows(log: Log) -> list[tuple[str, int]]:
    return log.derived.query("SELECT k, v FROM kv ORDER BY k")


def traced(log: Log) -> list[str]:
    statements: list[str] = []
    log.db.conn.set_trace_callback(statements.append)
    return statements


def test_rows_outside_a_transaction_land_in_one_of_their_own(kv_log):
    kv_log.write_rows(INSERT, [("a", 1), ("b", 2)])
    assert rows(kv_log) == [("a", 1), ("b", 2)] and not kv_log.db.conn.in_transaction
    with pytest.raises(sqlite3.IntegrityError):
        kv_log.write_rows(INSERT, [("c", 3), ("a", 9)])  # the second row fails: the first does not land either
    assert rows(kv_log) == [("a", 1), ("b", 2)]
    statements = traced(kv_log)
    kv_log.write_rows(INSERT, [])
    assert statements == []  # no rows: not even a transaction


def test_several_rows_inside_a_transaction_land_together_or_not_at_all(kv_log):
    with kv_log.transaction():
        kv_log.write_rows(INSERT, [("a", 1)])
        with pytest.raises(sqlite3.IntegrityError):
            kv_log.write_rows(INSERT, [("b", 2), ("a", 9)])
        assert rows(kv_log) == [("a", 1)]  # "b" was rolled back with the failing row, "a" of before stays
        kv_log.write_rows(INSERT, [("c", 3), ("d", 4)])
    assert rows(kv_log) == [("a", 1), ("c", 3), ("d", 4)]


def test_one_row_inside_a_transaction_needs_no_savepoint(kv_log):
    with kv_log.transaction():
        kv_log.write_rows(INSERT, [("a", 1)])
        statements = traced(kv_log)
        kv_log.write_rows(INSERT, [("b", 2)])
        kv_log.derived.upsert("kv", ("k",), {"k": "a", "v": 5})
        kv_log.derived.insert_missing("kv", ("k", "v"), [("a", 7)])
        assert not any(s.startswith(("SAVEPOINT", "RELEASE")) for s in statements), statements
        with pytest.raises(sqlite3.IntegrityError):
            kv_log.write_rows(INSERT, [("b", 3)])  # one statement fails alone: the transaction goes on
        assert kv_log.db.conn.in_transaction
    assert rows(kv_log) == [("a", 5), ("b", 2)]


def test_a_staged_file_is_recorded_in_the_transaction_open_without_a_savepoint(kv_log):
    with kv_log.transaction():  # as a commit's own transaction records the files it wrote
        statements = traced(kv_log)
        kv_log.record_staged_many("s", ["/w/t/data/a.parquet"], 1)
        assert not any(s.startswith("SAVEPOINT") for s in statements)
    assert kv_log.staged_files("s") == [("/w/t/data/a.parquet", 1)]


@pytest.mark.parametrize("mode, code", [("FULL", 2), ("EXTRA", 3), ("NORMAL", 1), ("OFF", 0)])
def test_a_derived_transaction_commits_without_an_fsync_and_restores_the_mode(log_path, mode, code):
    with Log.open(log_path, synchronous=mode) as log:
        log.derived.create("CREATE TABLE kv (k TEXT PRIMARY KEY, v INTEGER NOT NULL)")
        conn = log.db.conn
        with log.derived.transaction():
            # relaxed to NORMAL (no fsync at commit in WAL mode) unless the log asked for less
            assert conn.execute("PRAGMA synchronous").fetchone()[0] == min(code, 1)
            log.derived.upsert("kv", ("k",), {"k": "a", "v": 1})
        assert conn.execute("PRAGMA synchronous").fetchone()[0] == code
        with log.transaction():  # nested in a log transaction: that one's commit decides, the mode is not touched
            statements = traced(log)
            with log.derived.transaction():
                log.derived.upsert("kv", ("k",), {"k": "b", "v": 2})
            assert not any("synchronous" in s for s in statements)
        assert conn.execute("PRAGMA synchronous").fetchone()[0] == code
        assert rows(log) == [("a", 1), ("b", 2)]
