"""The log contract suite: append, CAS conflict, idempotent re-send, multi-stream commits, reads, protection,
verification, concurrency. Every test runs against a real SQLite file."""

from __future__ import annotations

import json
import multiprocessing
import sqlite3
import time
from pathlib import Path

import pytest

from storage import (
    APPEND_ONLY_MESSAGE,
    GENESIS_HASH,
    CommitResult,
    InvalidWrite,
    Log,
    LogBusy,
    LogClosed,
    LogError,
    LogIntegrityError,
    NewEvent,
    StoredEvent,
    StreamVersionConflict,
    StreamWrite,
    event_hash,
)
from storage.log import (
    _SELECT_CHECKPOINT,
    _SELECT_CHECKPOINT_VERSION,
    _SELECT_COMMIT,
    _SELECT_COMMIT_AT,
    _SELECT_COMMIT_STREAMS,
    _SELECT_HEAD,
    _SELECT_HEADS,
    _SELECT_PARTS,
    _SELECT_PARTS_MANY,
    _SELECT_POSITION_AT,
    _SELECT_SINCE,
    _SELECT_STREAM,
    _SELECT_TAIL,
)


def ev(stream: str, n: int = 0, parts: tuple[str, ...] = ()) -> NewEvent:
    return NewEvent(stream=stream, type="thing-happened", type_version=1, payload=json.dumps({"n": n}), parts=parts)


def write(stream: str, expected: int, *events: NewEvent) -> StreamWrite:
    return StreamWrite(stream=stream, expected_version=expected, events=events or (ev(stream),))


def raw(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(path, isolation_level=None)


# --- opening -------------------------------------------------------------------------------------------------------

def test_open_creates_parent_directory_wal_and_pragmas(log_path):
    with Log.open(log_path, synchronous="off", busy_timeout_ms=1234) as log:
        conn = log.db.conn
        assert log_path.exists()
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        assert conn.execute("PRAGMA synchronous").fetchone() == (0,)
        assert conn.execute("PRAGMA foreign_keys").fetchone() == (1,)
        assert conn.execute("PRAGMA busy_timeout").fetchone() == (1234,)
        assert conn.isolation_level is None
        assert {"events", "event_parts", "commits", "checkpoints"} <= set(log.db.table_names())
        assert {t.name for t in log.db.triggers} == {
            f"{table}_no_{action}" for table in ("events", "event_parts", "commits") for action in ("update", "delete")}
    with Log.open(log_path) as log:
        assert log.db.conn.execute("PRAGMA synchronous").fetchone() == (2,)


def test_open_rejects_an_unknown_synchronous_mode(log_path):
    with pytest.raises(LogError, match="Cannot open the log: synchronous must be one of"):
        Log.open(log_path, synchronous="SOMETIMES")


def test_open_refuses_a_file_that_is_not_a_database(tmp_path):
    path = tmp_path / "catalog.db"
    path.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(LogError, match="Cannot open the log: .*catalog.db"):
        Log.open(path)


def test_an_open_that_fails_leaves_the_file_unregistered(tmp_path):
    """A handle is counted among the process's open databases before it connects; one that fails to open is not
    left there (the file would be refused as a catalog database, and its header never checked again)."""
    from storage.files import OPEN_DATABASES

    path = tmp_path / "catalog.db"
    path.write_bytes(b"this is not sqlite" * 100)
    for _ in range(2):  # the second open still reads the header and refuses it
        with pytest.raises(LogError, match="not an SQLite database"):
            Log.open(path)
        assert OPEN_DATABASES.database_of(str(path)) is None
    Log.open(tmp_path / "other.db").close()
    assert OPEN_DATABASES.database_of(str(tmp_path / "other.db")) is None


def _commit_and_close(path: str) -> None:
    """Runs in another process: one commit through a handle of its own, closed after."""
    with Log.open(path) as log:
        log.commit("c-other", (write("t", 0),), time_ms=5)


def test_opening_another_handle_keeps_the_sqlite_locks_of_the_open_ones(log_path, monkeypatch):
    """SQLite's POSIX locks belong to the process, and closing any descriptor of the file drops them all: a second
    handle's opening (which reads the file's header) must not close one while the first is open. Else another
    process closing its connection finds no lock left, takes itself for the last and removes the WAL under this
    process's connections (SQLite's "how to corrupt a database file", 2.2)."""
    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[2]))
    with Log.open(log_path) as first:
        first.commit("c1", (write("s", 0),), time_ms=1)
        with Log.open(log_path):
            other = multiprocessing.get_context("spawn").Process(target=_commit_and_close, args=(str(log_path),))
            other.start()
            other.join(60)
            assert other.exitcode == 0
            assert Path(str(log_path) + "-wal").exists()  # the other process knew it was not the last
            first.commit("c2", (write("s", 1),), time_ms=2)
            assert first.head("s") == 2 and first.head("t") == 1 and first.verify() == []


def test_reopen_keeps_events_and_continues_the_chain(log_path):
    with Log.open(log_path) as log:
        log.commit("c1", (write("s", 0),), time_ms=1)
    with Log.open(log_path) as log:
        result = log.commit("c2", (write("s", 1),), time_ms=2)
        assert result.positions == (2,)
        assert [e.version for e in log.read_stream("s")] == [1, 2]
        assert log.verify() == []


# --- append --------------------------------------------------------------------------------------------------------

def test_first_commit_stores_the_event_with_its_chained_hash(log):
    event = NewEvent(stream="t1", type="table-created", type_version=2, payload='{"a":1}', parts=('{"p":0}', '{"p":1}'))
    result = log.commit("c1", (StreamWrite(stream="t1", expected_version=0, events=(event,)),),
                        time_ms=1_700_000_000_000, actor="alice", message="create")
    assert result == CommitResult(commit_id="c1", time_ms=1_700_000_000_000, positions=(1,), heads=(("t1", 1),),
                                  duplicate=False)
    expected_hash = event_hash(GENESIS_HASH, 1, "t1", 1, "c1", "table-created", 2, 1_700_000_000_000, "alice",
                               '{"a":1}', ('{"p":0}', '{"p":1}'))
    assert log.read_stream("t1") == [StoredEvent(
        position=1, stream="t1", version=1, commit_id="c1", type="table-created", type_version=2,
        time_ms=1_700_000_000_000, actor="alice", payload='{"a":1}', hash=expected_hash)]
    assert log.read_parts(1) == ['{"p":0}', '{"p":1}']
    assert log.db["commits"].get(1) == {"last_position": 1, "first_position": 1, "commit_id": "c1",
                                        "time_ms": 1_700_000_000_000, "clock_ms": 1_700_000_000_000,
                                        "actor": "alice", "message": "create"}


def test_event_hash_is_a_netstring_concatenation():
    import hashlib

    parts_hash = hashlib.sha256(b"xy").hexdigest()
    data = (b"64:" + GENESIS_HASH.encode() + b",1:7,3:s\xc3\xa9,1:3,2:c1,1:t,1:1,2:10,~,2:{},1:1,64:" +
            parts_hash.encode() + b",")
    assert event_hash(GENESIS_HASH, 7, "sé", 3, "c1", "t", 1, 10, None, "{}", ["xy"]) == \
        hashlib.sha256(data).hexdigest()


def test_commits_assign_global_positions_and_per_stream_versions(log):
    log.commit("c1", (write("a", 0, ev("a", 1), ev("a", 2)),), time_ms=1)
    result = log.commit("c2", (write("b", 0, ev("b", 1)),), time_ms=2)
    assert result.positions == (3,) and result.heads == (("b", 1),)
    result = log.commit("c3", (write("a", 2, ev("a", 3)),), time_ms=3)
    assert result.positions == (4,) and result.heads == (("a", 3),)
    assert [(e.position, e.stream, e.version, e.commit_id) for e in log.read_since()] == [
        (1, "a", 1, "c1"), (2, "a", 2, "c1"), (3, "b", 1, "c2"), (4, "a", 3, "c3")]
    assert log.head("a") == 3 and log.head("b") == 1 and log.head("nope") == 0
    assert log.heads(["a", "b", "nope"]) == {"a": 3, "b": 1, "nope": 0}
    assert log.verify() == []


def test_messages_of_returns_each_landed_commits_message(log):
    log.commit("c1", (write("a", 0, ev("a", 1)),), time_ms=1, message="first")
    log.commit("c2", (write("a", 1, ev("a", 2)),), time_ms=2)
    assert log.messages_of(["c2", "c1", "c1", "never-landed"]) == {"c1": "first", "c2": None}
    assert log.messages_of([]) == {}


# --- compare-and-swap ----------------------------------------------------------------------------------------------

def test_stale_expected_version_conflicts_naming_the_winner_and_writes_nothing(log):
    log.commit("c1", (write("s", 0),), time_ms=1)
    log.commit("winner", (write("s", 1),), time_ms=2)
    log.commit("c3", (write("s", 2),), time_ms=3)
    with pytest.raises(StreamVersionConflict) as info:
        log.commit("late", (write("s", 1),), time_ms=4)
    error = info.value
    assert (error.stream, error.expected_version, error.actual_version, error.winner_commit_id, error.commit_id) == \
        ("s", 1, 3, "winner", "late")
    assert str(error) == "Cannot commit 'late': stream 's' is at version 3, not 1 (commit 'winner' landed first)"
    assert log.head("s") == 3
    assert log.commit_of("late") is None
    assert len(log.read_since()) == 3


def test_creating_a_stream_that_exists_conflicts(log):
    log.commit("c1", (write("s", 0),), time_ms=1)
    with pytest.raises(StreamVersionConflict) as info:
        log.commit("c2", (write("s", 0),), time_ms=2)
    assert (info.value.actual_version, info.value.winner_commit_id) == (1, "c1")


def test_expected_version_ahead_of_the_stream_conflicts_without_a_winner(log):
    with pytest.raises(StreamVersionConflict) as info:
        log.commit("c1", (write("s", 5),), time_ms=1)
    assert (info.value.actual_version, info.value.winner_commit_id) == (0, None)
    assert str(info.value) == "Cannot commit 'c1': stream 's' is at version 0, not 5"


def test_multi_stream_commit_is_atomic(log):
    log.commit("c1", (write("a", 0), write("b", 0)), time_ms=1)
    result = log.commit("c2", (write("a", 1, ev("a"), ev("a")), write("b", 1)), time_ms=2)
    assert result.positions == (3, 4, 5) and result.heads == (("a", 3), ("b", 2))
    with pytest.raises(StreamVersionConflict) as info:
        log.commit("c3", (write("a", 3), write("b", 1)), time_ms=3)
    assert info.value.stream == "b" and info.value.winner_commit_id == "c2"
    assert log.heads(["a", "b"]) == {"a": 3, "b": 2}
    assert [e.commit_id for e in log.read_since()] == ["c1", "c1", "c2", "c2", "c2"]


# --- idempotency ---------------------------------------------------------------------------------------------------

def test_resending_a_landed_commit_returns_the_stored_result(log):
    writes = (write("a", 0, ev("a"), ev("a")), write("b", 0))
    first = log.commit("c1", writes, time_ms=10)
    log.commit("c2", (write("a", 2),), time_ms=20)
    again = log.commit("c1", writes, time_ms=99)
    assert again == CommitResult(commit_id="c1", time_ms=10, positions=(1, 2, 3), heads=(("a", 2), ("b", 1)),
                                 duplicate=True)
    assert first.positions == again.positions and first.heads == again.heads and not first.duplicate
    assert len(log.read_since()) == 4
    assert log.commit_of("c1") == CommitResult(commit_id="c1", time_ms=10, positions=(1, 2, 3),
                                               heads=(("a", 2), ("b", 1)), duplicate=False)


def test_resending_a_commit_id_with_a_different_write_is_refused(log):
    log.commit("c1", (write("a", 0),), time_ms=1)
    with pytest.raises(InvalidWrite, match="Cannot commit 'c1': that commit id already landed with a different"):
        log.commit("c1", (write("b", 0),), time_ms=1)
    assert log.head("b") == 0


# --- after hook and transactions -----------------------------------------------------------------------------------

def test_after_runs_inside_the_commit_transaction(log):
    log.db["derived"].create({"position": int, "stream": str}, pk="position")

    def index(conn):
        assert conn.in_transaction
        conn.execute("INSERT INTO derived SELECT position, stream FROM events WHERE commit_id = 'c1'")

    log.commit("c1", (write("s", 0, ev("s"), ev("s")),), time_ms=1, after=index)
    assert list(log.db["derived"].rows) == [{"position": 1, "stream": "s"}, {"position": 2, "stream": "s"}]


def test_an_error_in_after_rolls_the_whole_commit_back(log):
    def fail(conn):
        raise RuntimeError("projection failed")

    with pytest.raises(RuntimeError, match="projection failed"):
        log.commit("c1", (write("s", 0),), time_ms=1, after=fail)
    assert log.head("s") == 0 and log.commit_of("c1") is None and log.read_parts_many([1]) == {1: []}
    assert log.commit("c1", (write("s", 0),), time_ms=1).positions == (1,)


def test_nested_transactions_use_savepoints(log):
    with log.transaction() as conn:
        log.commit("c1", (write("s", 0),), time_ms=1)
        with pytest.raises(StreamVersionConflict):
            log.commit("c2", (write("s", 0),), time_ms=2)
        assert conn.in_transaction
        log.commit("c3", (write("s", 1),), time_ms=3)
    assert [e.commit_id for e in log.read_stream("s")] == ["c1", "c3"]
    with pytest.raises(ZeroDivisionError):
        with log.transaction():
            log.commit("c4", (write("s", 2),), time_ms=4)
            1 / 0
    assert log.head("s") == 2 and not log.db.conn.in_transaction


def test_transaction_takes_the_write_lock_first(log_path):
    with Log.open(log_path, busy_timeout_ms=50) as log, Log.open(log_path, busy_timeout_ms=50) as other:
        with log.transaction():
            with pytest.raises(LogBusy, match="Cannot begin a write transaction"):
                other.commit("c1", (write("s", 0),), time_ms=1)
        assert other.commit("c1", (write("s", 0),), time_ms=1).positions == (1,)


def test_a_foreign_row_in_the_way_raises_log_integrity_error(log, log_path):
    log.commit("c1", (write("s", 0),), time_ms=1)
    with raw(log_path) as conn:
        conn.execute("INSERT INTO commits (last_position, first_position, commit_id, time_ms, clock_ms)"
                     " VALUES (2, 2, 'foreign', 0, 0)")
    with pytest.raises(LogIntegrityError) as info:
        log.commit("c2", (write("s", 1),), time_ms=2)
    assert info.value.position == 2 and "c2" in info.value.reason
    assert log.head("s") == 1


# --- validation ----------------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("commit_id", "writes", "time_ms", "message"), [
    ("", (write("s", 0),), 1, "the commit id must be a non-empty string"),
    ("c", (), 1, "no stream writes"),
    ("c", (write("s", 0), write("s", 0)), 1, "stream 's' is written twice"),
    ("c", (StreamWrite(stream="s", expected_version=0, events=()),), 1, "the write to stream 's' has no events"),
    ("c", (StreamWrite(stream="s", expected_version=-1, events=(ev("s"),)),), 1, "negative"),
    ("c", (StreamWrite(stream="s", expected_version=0, events=(ev("t"),)),), 1, "an event of stream 't'"),
    ("c", (write("s", 0),), 1.5, "time_ms must be an int"),
    ("c", ("s",), 1, "is not a StreamWrite"),
])
def test_malformed_commits_are_refused_before_anything_is_written(log, commit_id, writes, time_ms, message):
    with pytest.raises(InvalidWrite, match=message):
        log.commit(commit_id, writes, time_ms=time_ms)
    assert log.read_since() == []


def test_values_check_their_field_types():
    with pytest.raises(TypeError):
        NewEvent(stream="s", type="t", type_version=1, payload=b"{}")
    with pytest.raises(TypeError):
        NewEvent(stream="s", type="t", type_version=1, payload="{}", parts=["{}"])
    with pytest.raises(TypeError):
        NewEvent(stream="s", type="t", type_version=True, payload="{}")
    with pytest.raises(TypeError):
        StreamWrite(stream="s", expected_version=0, events=[ev("s")])


# --- reads ---------------------------------------------------------------------------------------------------------

def test_read_ranges(log):
    for version in range(5):
        log.commit(f"s{version}", (write("s", version, ev("s", version)),), time_ms=version)
        log.commit(f"t{version}", (write("t", version, ev("t", version)),), time_ms=version)
    assert [e.version for e in log.read_stream("s")] == [1, 2, 3, 4, 5]
    assert [e.version for e in log.read_stream("s", after_version=2)] == [3, 4, 5]
    assert [e.version for e in log.read_stream("s", after_version=1, up_to_version=3)] == [2, 3]
    assert [e.payload for e in log.read_stream("t", up_to_version=2)] == ['{"n": 0}', '{"n": 1}']
    assert log.read_stream("s", after_version=5) == [] and log.read_stream("nope") == []
    assert [e.position for e in log.read_since(after_position=7)] == [8, 9, 10]
    assert [e.position for e in log.read_since(after_position=2, up_to_position=4)] == [3, 4]
    assert [e.stream for e in log.read_since(up_to_position=3)] == ["s", "t", "s"]


def test_parts_keep_their_order_and_belong_to_their_event(log):
    parts = tuple(json.dumps({"file": i}) for i in range(12))
    log.commit("c1", (write("s", 0, ev("s", 0, parts), ev("s", 1), ev("s", 2, ("only",))),), time_ms=1)
    assert log.read_parts(1) == list(parts)
    assert log.read_parts(2) == []
    assert log.read_parts_many([3, 1, 2, 99]) == {3: ["only"], 1: list(parts), 2: [], 99: []}
    assert log.read_parts_many([]) == {}


def test_position_at_is_the_end_of_a_log_prefix(log):
    for i, time_ms in enumerate([100, 200, 150, 300]):  # the third writer's clock was behind
        log.commit(f"c{i}", (write("s", i),), time_ms=time_ms)
    assert [log.position_at(t) for t in (99, 100, 149, 150, 199, 200, 299, 300, 10**15)] == [0, 1, 1, 1, 1, 3, 3, 4, 4]
    assert log.read_stream("s")[2].time_ms == 150


def test_checkpoints(log, log_path):
    log.commit("c1", (write("s", 0, ev("s"), ev("s"), ev("s")),), time_ms=1)
    assert log.checkpoint_at_or_before("s", 3) is None
    log.put_checkpoint("s", 1, b"one")
    log.put_checkpoint("s", 3, b"three")
    log.put_checkpoint("s", 3, b"three again")
    assert log.checkpoint_at_or_before("s", 2) == (1, b"one")
    assert log.checkpoint_at_or_before("s", 10) == (3, b"three again")
    assert log.checkpoint_at_or_before("other", 10) is None
    assert [log.checkpoint_version_at_or_before("s", v) for v in (0, 2, 10)] == [0, 1, 3]
    assert log.checkpoint_version_at_or_before("other", 10) == 0
    for version in (0, 4):
        with pytest.raises(InvalidWrite, match=f"stream 's' has no version {version}"):
            log.put_checkpoint("s", version, b"x")
    with raw(log_path) as conn:
        conn.execute("DELETE FROM checkpoints")
    assert log.checkpoint_at_or_before("s", 10) is None
    assert log.verify() == []


def test_closed_log_refuses_every_call(log_path):
    log = Log.open(log_path)
    log.close()
    log.close()
    with pytest.raises(LogClosed, match="Cannot use the log"):
        log.head("s")
    with pytest.raises(LogClosed):
        log.commit("c1", (write("s", 0),), time_ms=1)


# --- protection and verification -----------------------------------------------------------------------------------

@pytest.mark.parametrize("sql", [
    "UPDATE events SET payload = '{}'",
    "DELETE FROM events",
    "UPDATE event_parts SET body = 'x'",
    "DELETE FROM event_parts",
    "UPDATE commits SET message = 'x'",
    "DELETE FROM commits",
])
def test_triggers_refuse_update_and_delete_from_any_connection(log, log_path, sql):
    log.commit("c1", (write("s", 0, ev("s", 0, ("part",))),), time_ms=1)
    with raw(log_path) as conn, pytest.raises(sqlite3.IntegrityError, match=APPEND_ONLY_MESSAGE):
        conn.execute(sql)
    assert log.read_parts(1) == ["part"] and log.verify() == []


def tamper(path: Path, *statements: str) -> None:
    with raw(path) as conn:
        for table in ("events", "event_parts", "commits"):
            for action in ("update", "delete"):
                conn.execute(f"DROP TRIGGER {table}_no_{action}")
        for statement in statements:
            conn.execute(statement)


@pytest.mark.parametrize(("statements", "problem"), [
    (["UPDATE events SET payload = '{\"n\": 9}' WHERE position = 2"],
     "position 2: hash does not match the event (the chain breaks here)"),
    (["UPDATE event_parts SET body = 'forged' WHERE position = 2"],
     "position 2: hash does not match the event (the chain breaks here)"),
    (["UPDATE events SET actor = 'mallory' WHERE position = 3"],
     "position 3: hash does not match the event (the chain breaks here)"),
    (["DELETE FROM event_parts WHERE position = 2 AND ordinal = 0"],
     "position 2: part ordinal 1, expected 0"),
    (["DELETE FROM events WHERE position = 3"],
     "position 4: expected position 3 (a gap)"),
    (["UPDATE events SET version = 7 WHERE position = 4"],
     "position 4: stream 's' version 7 follows version 2"),
    (["UPDATE commits SET commit_id = 'other' WHERE last_position = 3"],
     "position 2: not inside the row of commit 'c2'"),
])
def test_verify_finds_tampering_after_the_triggers_are_dropped(log, log_path, statements, problem):
    log.commit("c1", (write("s", 0),), time_ms=1)
    log.commit("c2", (write("s", 1, ev("s", 1, ("a", "b"))), write("t", 0)), time_ms=2)
    log.commit("c3", (write("s", 2),), time_ms=3)
    assert log.verify() == []
    tamper(log_path, *statements)
    assert problem in log.verify()


def test_verify_finds_a_rewritten_event_with_a_recomputed_hash(log, log_path):
    for i in range(3):
        log.commit(f"c{i}", (write("s", i),), time_ms=i)
    forged = event_hash(log.read_since()[0].hash, 2, "s", 2, "c1", "thing-happened", 1, 1, None, "{}", ())
    tamper(log_path, f"UPDATE events SET payload = '{{}}', hash = '{forged}' WHERE position = 2")
    assert log.verify() == ["position 3: hash does not match the event (the chain breaks here)"]


def test_verify_finds_a_replace_that_bypasses_the_delete_trigger(log, log_path):
    # A plain sqlite3 connection has recursive_triggers off, so REPLACE deletes without firing the trigger.
    log.commit("c1", (write("s", 0),), time_ms=1)
    with raw(log_path) as conn:
        conn.execute("INSERT OR REPLACE INTO events SELECT position, stream, version, commit_id, type, type_version,"
                     " time_ms, actor, '{\"forged\": 1}', hash FROM events WHERE position = 1")
    assert log.verify() == ["position 1: hash does not match the event (the chain breaks here)"]


def test_verify_finds_orphan_parts_and_empty_commits(log, log_path):
    log.commit("c1", (write("s", 0),), time_ms=1)
    tamper(log_path, "PRAGMA foreign_keys = OFF",
           "INSERT INTO event_parts VALUES (5, 0, 'orphan')",
           "INSERT INTO commits (last_position, first_position, commit_id, time_ms, clock_ms)"
           " VALUES (9, 8, 'ghost', 1, 1)")
    assert log.verify() == ["position 5: part 0 belongs to no event",
                            "commit 'ghost': positions 8..9 hold none of its events"]


# --- cost ----------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("sql", [
    _SELECT_COMMIT, _SELECT_HEAD, _SELECT_HEADS, _SELECT_COMMIT_AT, _SELECT_TAIL, _SELECT_COMMIT_STREAMS,
    _SELECT_STREAM, _SELECT_SINCE, _SELECT_PARTS, _SELECT_PARTS_MANY, _SELECT_POSITION_AT, _SELECT_CHECKPOINT,
    _SELECT_CHECKPOINT_VERSION,
])
def test_log_queries_seek_by_index_and_never_scan_a_table(log, sql):
    plan = [row[3] for row in log.db.conn.execute(f"EXPLAIN QUERY PLAN {sql}", ("x",) * sql.count("?"))]
    scans = [step for step in plan if step.startswith("SCAN") and "VIRTUAL TABLE" not in step]
    assert scans == [], plan


# --- concurrency ---------------------------------------------------------------------------------------------------

STREAM = "shared"


def _commit_with_retries(path: str, worker: int, commits: int, barrier, results) -> None:
    """Runs in a spawned process: read the head, build on it, CAS, retry on conflict."""
    conflicts = 0
    with Log.open(path) as log:
        barrier.wait()
        for i in range(commits):
            while True:
                head = log.head(STREAM)
                event = NewEvent(stream=STREAM, type="counted", type_version=1,
                                 payload=json.dumps({"worker": worker, "i": i, "base": head}))
                time.sleep(0.002)  # widen the window between reading the head and the CAS
                try:
                    log.commit(f"w{worker}-{i}", (StreamWrite(stream=STREAM, expected_version=head, events=(event,)),),
                               time_ms=time.time_ns() // 1_000_000, actor=f"worker-{worker}")
                    break
                except StreamVersionConflict:
                    conflicts += 1
    results.put((worker, conflicts))


def test_processes_committing_concurrently_all_land_with_contiguous_versions(log_path, monkeypatch):
    workers, commits = 4, 25
    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[2]))  # spawned children import this module
    Log.open(log_path).close()
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(workers)
    results = context.Queue()
    processes = [context.Process(target=_commit_with_retries, args=(str(log_path), w, commits, barrier, results))
                 for w in range(workers)]
    for process in processes:
        process.start()
    reports = dict(results.get(timeout=120) for _ in processes)
    for process in processes:
        process.join(timeout=30)
        assert process.exitcode == 0
    assert sorted(reports) == list(range(workers))
    assert sum(reports.values()) > 0, reports  # writers collided and retried (see the sleep in the worker)

    with Log.open(log_path) as log:
        events = log.read_stream(STREAM)
        assert [e.version for e in events] == list(range(1, workers * commits + 1))
        assert [e.position for e in events] == list(range(1, workers * commits + 1))
        expected_ids = sorted(f"w{w}-{i}" for w in range(workers) for i in range(commits))
        assert sorted(e.commit_id for e in events) == expected_ids
        payloads = [json.loads(e.payload) for e in events]
        assert [p["base"] for p in payloads] == [e.version - 1 for e in events]  # each built on the head it landed on
        for w in range(workers):
            assert [p["i"] for p in payloads if p["worker"] == w] == list(range(commits))
        assert log.verify() == []


def _open_and_commit(path: str, worker: int, barrier) -> None:
    """Runs in a spawned process: open a log file that may not exist yet, then commit to its own stream."""
    barrier.wait()
    with Log.open(path) as log:
        log.commit(f"c{worker}", (write(f"s{worker}", 0),), time_ms=worker)


def test_processes_racing_to_create_the_log_file_all_succeed(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[2]))
    path = tmp_path / "new" / "catalog.db"
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(4)
    processes = [context.Process(target=_open_and_commit, args=(str(path), w, barrier)) for w in range(4)]
    for process in processes:
        process.start()
    for process in processes:
        process.join(timeout=60)
    assert [process.exitcode for process in processes] == [0, 0, 0, 0]
    with Log.open(path) as log:
        assert log.heads([f"s{w}" for w in range(4)]) == {f"s{w}": 1 for w in range(4)}
        assert log.verify() == []


def test_reopening_needs_no_write_lock_but_a_damaged_schema_is_repaired(log_path):
    Log.open(log_path).close()
    writer = sqlite3.connect(log_path, isolation_level=None)
    writer.execute("BEGIN IMMEDIATE")  # another process mid-commit holds the write lock
    try:
        with Log.open(log_path, busy_timeout_ms=100) as reader:  # the schema is there: nothing to create
            assert reader.head("s") == 0
    finally:
        writer.execute("ROLLBACK")
        writer.close()
    with sqlite3.connect(log_path) as conn:
        conn.execute("DROP INDEX commits_clock_ms")
    with Log.open(log_path) as log:
        assert log.db.execute("SELECT count(*) FROM sqlite_master WHERE name = 'commits_clock_ms'").fetchone()[0] == 1


# --- staged files and writers of one process ------------------------------------------------------------------------

def test_staged_files_are_recorded_one_by_one_or_together_and_forgotten(log):
    log.record_staged("s", "/a.parquet", 5)
    log.record_staged_many("s", ["/b.avro", "/c.avro", "/a.parquet"], 7)
    log.record_staged_many("other", [], 8)
    assert log.staged_files("s") == [("/a.parquet", 5), ("/b.avro", 7), ("/c.avro", 7)]
    assert log.staged_files("s", before_ms=6) == [("/a.parquet", 5)]
    log.forget_staged("s", ["/b.avro"])
    assert [p for p, _ in log.staged_files("s")] == ["/a.parquet", "/c.avro"]
    assert log.verify() == []


def test_threads_of_one_process_queue_for_the_write_lock(log_path):
    import threading

    Log.open(log_path).close()
    errors: list[BaseException] = []
    heads: list[tuple[int, int]] = []

    def writer(i: int) -> None:
        try:
            log = Log.open(log_path)
            for k in range(20):
                while True:
                    head = log.head(f"s{i % 2}")
                    try:
                        log.commit(f"c{i}-{k}", (write(f"s{i % 2}", head, ev(f"s{i % 2}", head + 1)),),
                                       time_ms=k)
                        break
                    except StreamVersionConflict:
                        continue
            heads.append((log.head("s0"), log.head("s1")))
            assert log.verify() == []
            log.close()
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    with Log.open(log_path) as log:
        assert log.head("s0") == 80 and log.head("s1") == 80 and log.verify() == []


# --- the writer lock shared by processes ----------------------------------------------------------------------------

def _hold_the_log(path: str, key: str | None, held, release) -> None:
    """Runs in another process: hold the log's write transaction (or the named lock ``key``) until told."""
    with Log.open(path) as log:
        with (log.transaction() if key is None else log.exclusive(key)):
            held.set()
            release.wait(30)


def _start_holder(context, log_path, key: str | None):
    """Start a process that holds the log's write transaction (or the named lock ``key``); (process, held, release):
    ``held`` is set once it holds it, setting ``release`` lets it go."""
    held, release = context.Event(), context.Event()
    holder = context.Process(target=_hold_the_log, args=(str(log_path), key, held, release))
    holder.start()
    return holder, held, release


def _flock_is_free(log_path: Path) -> bool:
    import fcntl
    import os

    fd = os.open(str(log_path) + "-writer-lock", os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    finally:
        os.close(fd)  # closing drops the lock if it was taken
    return True


def test_a_writer_in_another_process_holds_the_writer_lock_file(log_path, monkeypatch):
    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[2]))
    Log.open(log_path).close()
    context = multiprocessing.get_context("spawn")
    holder, held, release = _start_holder(context, log_path, None)
    try:
        assert held.wait(60)
        assert not _flock_is_free(log_path)
        with Log.open(log_path, busy_timeout_ms=50) as log:
            with pytest.raises(LogBusy, match="locked by another writer"):
                log.commit("c1", (write("s", 0),), time_ms=1)
            release.set()
            holder.join(30)
            assert holder.exitcode == 0 and _flock_is_free(log_path)
            assert log.commit("c1", (write("s", 0),), time_ms=1).positions == (1,)
    finally:
        release.set()
        holder.join(30)


def test_a_writer_waits_for_another_process_in_the_kernel_and_a_wait_given_up_leaves_nothing_held(log_path,
                                                                                                    monkeypatch):
    """A writer behind another process's transaction waits in the kernel (its waiter thread, no polling) and
    commits once the other lets go; a writer whose busy timeout passes leaves its wait to that thread, which lets
    the lock go as soon as it comes, or hands it to the next writer of the process that waits for it."""
    import threading

    import storage.write_lock as write_lock

    def no_polling(*args, **kwargs):
        raise AssertionError("a busy writer lock was polled")

    monkeypatch.setattr(write_lock, "_poll", no_polling)
    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[2]))
    Log.open(log_path).close()
    context = multiprocessing.get_context("spawn")

    def hold():
        holder, held, release = _start_holder(context, log_path, None)
        assert held.wait(60)
        return holder, release

    with Log.open(log_path, busy_timeout_ms=30_000) as log:
        holder, release = hold()
        try:
            landed: list[object] = []
            committer = threading.Thread(target=_commit_in_thread, args=(log_path, "c1", 0, landed))
            committer.start()
            time.sleep(0.3)
            assert not landed and log._write_lock._waiter is not None and log._write_lock._waiter.busy
            release.set()
            committer.join(30)
            assert landed and log.head("s") == 1
        finally:
            release.set()
            holder.join(30)
        assert _flock_is_free(log_path)

        holder, release = hold()
        try:
            log._busy_timeout_s = 0.1
            with pytest.raises(LogBusy, match="locked by another writer"):
                log.commit("c2", (write("s", 1),), time_ms=2)
            assert log._write_lock._waiter.busy  # still waiting in the kernel for no one
        finally:
            release.set()
            holder.join(30)
        for _ in range(100):  # the waiter thread gets the lock and lets it go
            if _flock_is_free(log_path):
                break
            time.sleep(0.05)
        assert _flock_is_free(log_path) and not log._write_lock._waiter.busy

        holder, release = hold()
        try:
            with pytest.raises(LogBusy):
                log.commit("c2", (write("s", 1),), time_ms=2)
            log._busy_timeout_s = 30
            landed.clear()
            committer = threading.Thread(target=_commit_in_thread, args=(log_path, "c2", 1, landed))
            committer.start()  # takes over the wait given up
            time.sleep(0.3)
            assert not landed
            release.set()
            committer.join(30)
            assert landed and log.head("s") == 2
        finally:
            release.set()
            holder.join(30)
        assert _flock_is_free(log_path) and log.verify() == []


def _commit_in_thread(log_path: Path, commit_id: str, expected: int, landed: list[object]) -> None:
    """A writer thread of this process (with its own handle: a connection serves one thread) waiting long."""
    with Log.open(log_path, busy_timeout_ms=30_000) as own:
        landed.append(own.commit(commit_id, (write("s", expected),), time_ms=expected + 1))


def test_a_forked_child_does_not_inherit_its_parents_writer_lock(log_path):
    with Log.open(log_path, busy_timeout_ms=100) as log:
        log.commit("c0", (write("s", 0),), time_ms=0)  # the lock file is open in this process
        context = multiprocessing.get_context("fork")
        results = context.Queue()

        def child() -> None:  # a new handle of the same file, as a forked worker of a pool would open
            with Log.open(log_path, busy_timeout_ms=100) as own:
                try:
                    own.commit("c-child", (write("s", 1),), time_ms=1)
                    results.put("committed")
                except LogBusy as e:
                    results.put(str(e))

        with log.transaction():
            forked = context.Process(target=child)
            forked.start()
            # the parent is mid-transaction: the child waits on the lock file, not on a copy of the parent's lock
            assert "locked by another writer" in results.get(timeout=30)
            forked.join(30)
        assert log.head("s") == 1


def test_the_writer_lock_is_reentrant_and_keeps_the_file_lock_until_the_outer_release(log_path):
    with Log.open(log_path) as log:
        lock = log._write_lock
        assert lock.acquire(1) and lock.acquire(1)
        lock.release()
        assert not _flock_is_free(log_path)
        lock.release()
        assert _flock_is_free(log_path)


def test_a_named_lock_excludes_other_processes_for_its_key_only(log_path, monkeypatch):
    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[2]))
    Log.open(log_path).close()
    context = multiprocessing.get_context("spawn")
    holder, held, release = _start_holder(context, log_path, "publish t1")
    try:
        assert held.wait(60)
        with Log.open(log_path) as log:
            with log.exclusive("publish t1", timeout_s=0.05) as taken:
                assert not taken
            started = time.monotonic()
            with log.exclusive("publish t1", timeout_s=30, until=lambda: True) as taken:
                assert not taken  # the question answered: no waiting the timeout out behind the other process
            assert time.monotonic() - started < 5
            with log.exclusive("publish t2", timeout_s=0.05) as taken:
                assert taken
            assert log.commit("c1", (write("s", 0),), time_ms=1).positions == (1,)  # commits never wait on it
            release.set()
            holder.join(30)
            with log.exclusive("publish t1", timeout_s=5) as taken:
                assert taken
    finally:
        release.set()
        holder.join(30)


def _try_the_named_lock(path: str, key: str, out) -> None:
    """Runs in another process: whether the named lock ``key`` can be taken within half a second."""
    with Log.open(path) as log:
        with log.exclusive(key, timeout_s=0.5) as taken:
            out.put(taken)


def test_a_named_lock_waiter_is_woken_by_the_release_and_an_abandoned_wait_leaves_nothing_held(log_path, monkeypatch):
    """A waiter blocks in the kernel (no polling) and gets the lock as soon as the other process lets it go; a
    waiter that gave up leaves its pending try to a helper, which keeps other threads of the process off the key
    until it is over and then releases everything: another process can take the key afterwards."""
    import threading

    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[2]))
    Log.open(log_path).close()
    context = multiprocessing.get_context("spawn")

    def hold():
        holder, held, release = _start_holder(context, log_path, "publish t1")
        assert held.wait(60)
        return holder, release

    def helpers() -> int:
        return sum(t.name == "icelog-lock-wait" for t in threading.enumerate())

    with Log.open(log_path) as log:
        holder, release = hold()
        try:
            got: list[tuple[bool, float]] = []
            waiter = threading.Thread(target=lambda: got.append(_taken_after(log, "publish t1", 30)))
            waiter.start()
            time.sleep(0.3)
            assert not got and helpers() == 1  # blocked behind the other process
            released_at = time.monotonic()
            release.set()
            waiter.join(30)
            assert got and got[0][0] and got[0][1] - released_at < 2
        finally:
            release.set()
            holder.join(30)
        assert helpers() == 0

        holder, release = hold()
        try:
            with log.exclusive("publish t1", timeout_s=0.1) as taken:
                assert not taken
            assert helpers() == 1  # the try is still pending in the kernel
            with log.exclusive("publish t1", timeout_s=0.2) as taken:
                assert not taken  # and keeps this process's other waiters off the key
        finally:
            release.set()
            holder.join(30)
        for _ in range(100):
            if helpers() == 0:
                break
            time.sleep(0.05)
        assert helpers() == 0
        out = context.Queue()
        checker = context.Process(target=_try_the_named_lock, args=(str(log_path), "publish t1", out))
        checker.start()
        assert out.get(timeout=60) is True  # nothing of this process's waits is left holding the key
        checker.join(30)
        with log.exclusive("publish t1", timeout_s=5) as taken:
            assert taken


def _taken_after(log: Log, key: str, timeout_s: float) -> tuple[bool, float]:
    with log.exclusive(key, timeout_s=timeout_s) as taken:
        return taken, time.monotonic()


def test_a_named_lock_wait_whose_question_fails_leaves_nothing_held(log_path, monkeypatch):
    """The ``until`` question raising (a lost connection) ends the wait with its error; the try still pending in
    the kernel is left to the helper, which lets the lock go once it comes: neither this process nor another
    finds the key held afterwards."""
    import threading

    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[2]))
    Log.open(log_path).close()
    context = multiprocessing.get_context("spawn")
    holder, held, release = _start_holder(context, log_path, "publish t1")

    def question() -> bool:
        raise ConnectionError("the log server went away")

    with Log.open(log_path) as log:
        try:
            assert held.wait(60)
            with pytest.raises(ConnectionError, match="went away"):
                with log.exclusive("publish t1", timeout_s=30, until=question):
                    pass
        finally:
            release.set()
            holder.join(30)
        for _ in range(100):
            if not any(t.name == "icelog-lock-wait" for t in threading.enumerate()):
                break
            time.sleep(0.05)
        out = context.Queue()
        checker = context.Process(target=_try_the_named_lock, args=(str(log_path), "publish t1", out))
        checker.start()
        assert out.get(timeout=60) is True  # checked first: taking it here would also drop a lock held here
        checker.join(30)
        with log.exclusive("publish t1", timeout_s=5) as taken:
            assert taken
