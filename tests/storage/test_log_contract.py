"""The event log contract (storage.contract.EventLog) as one suite run against every backend: the SQLite file
(storage.log) and a real PostgreSQL server (storage.postgres_log). Appends with compare-and-swap, idempotent commit
ids, reads by stream and position, parts, messages, time lookups, staged files, checkpoints, the append-only
guarantee, the hash chain (identical on both backends), verify, and writers racing from threads and processes."""

from __future__ import annotations

import json
import multiprocessing
import sqlite3
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from storage import (
    APPEND_ONLY_MESSAGE,
    GENESIS_HASH,
    EventLog,
    InvalidWrite,
    Log,
    NewEvent,
    StreamVersionConflict,
    StreamWrite,
    event_hash,
)

Opener = Callable[[], EventLog]


def ev(stream: str, n: int = 0, parts: tuple[str, ...] = ()) -> NewEvent:
    return NewEvent(stream=stream, type="thing-happened", type_version=1, payload=json.dumps({"n": n}), parts=parts)


def write(stream: str, expected: int, *events: NewEvent) -> StreamWrite:
    return StreamWrite(stream=stream, expected_version=expected, events=events or (ev(stream),))


def _open(target: str) -> EventLog:
    """A new handle on the log at ``target`` (a file path or a PostgreSQL URL)."""
    if target.startswith("postgresql://"):
        from storage.postgres_log import PostgresLog

        return PostgresLog.open(target)
    return Log.open(target)


@pytest.fixture(params=["sqlite", "postgresql"])
def target(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return str(tmp_path / "catalog.db")
    return str(request.getfixturevalue("postgres_url"))


@pytest.fixture
def log(target: str) -> Iterator[EventLog]:
    opened = _open(target)
    try:
        yield opened
    finally:
        opened.close()


def raw_execute(target: str, sql: str) -> None:
    """Run ``sql`` on the log's database behind its back (a plain connection)."""
    if target.startswith("postgresql://"):
        import psycopg

        with psycopg.connect(target, autocommit=True) as conn:
            conn.execute(sql)
        return
    conn = sqlite3.connect(target, isolation_level=None)
    try:
        conn.execute(sql)
    finally:
        conn.close()


# --- appending and reading -------------------------------------------------------------------------------------------

def test_commits_append_contiguous_positions_and_versions_chained_by_hash(log: EventLog) -> None:
    first = log.commit("c1", (write("a", 0, ev("a", 1), ev("a", 2)), write("b", 0)), time_ms=10, actor="etl",
                       message="first")
    assert first.positions == (1, 2, 3) and first.heads == (("a", 2), ("b", 1)) and not first.duplicate
    second = log.commit("c2", (write("a", 2, ev("a", 3, parts=('{"p":1}', '{"p":2}'))),), time_ms=20)
    assert second.positions == (4,)
    assert log.head("a") == 3 and log.head("b") == 1 and log.head("nothing") == 0
    assert log.heads(["a", "b", "nothing"]) == {"a": 3, "b": 1, "nothing": 0}
    stream = log.read_stream("a")
    assert [(e.position, e.version, e.commit_id) for e in stream] == [(1, 1, "c1"), (2, 2, "c1"), (4, 3, "c2")]
    assert [e.version for e in log.read_stream("a", after_version=1, up_to_version=2)] == [2]
    everything = log.read_since()
    assert [e.position for e in everything] == [1, 2, 3, 4]
    assert [e.position for e in log.read_since(1, 3)] == [2, 3]
    assert everything[0].actor == "etl" and everything[3].actor is None and everything[0].time_ms == 10
    previous = GENESIS_HASH
    for e in everything:  # the chain, recomputed by hand
        parts = log.read_parts(e.position)
        assert e.hash == event_hash(previous, e.position, e.stream, e.version, e.commit_id, e.type, e.type_version,
                                    e.time_ms, e.actor, e.payload, parts)
        previous = e.hash
    assert log.read_parts(4) == ['{"p":1}', '{"p":2}'] and log.read_parts(1) == []
    assert log.read_parts_many([4, 1]) == {4: ['{"p":1}', '{"p":2}'], 1: []}
    assert log.messages_of(["c2", "c1", "never"]) == {"c1": "first", "c2": None}
    assert log.commit_of("c1") == first and log.commit_of("never") is None
    assert log.verify() == []


def test_a_stale_expected_version_is_refused_naming_the_winner_and_nothing_is_written(log: EventLog) -> None:
    log.commit("winner", (write("s", 0),), time_ms=1)
    with pytest.raises(StreamVersionConflict) as info:
        log.commit("loser", (write("other", 0), write("s", 0)), time_ms=2)
    assert (info.value.stream, info.value.expected_version, info.value.actual_version,
            info.value.winner_commit_id) == ("s", 0, 1, "winner")
    assert log.head("other") == 0 and log.commit_of("loser") is None and len(log.read_since()) == 1


def test_a_commit_id_that_landed_returns_its_result_and_refuses_another_write(log: EventLog) -> None:
    landed = log.commit("c1", (write("s", 0, ev("s"), ev("s")),), time_ms=1)
    again = log.commit("c1", (write("s", 0, ev("s"), ev("s")),), time_ms=99)
    assert again.duplicate and again.positions == landed.positions and again.time_ms == 1
    with pytest.raises(InvalidWrite, match="already landed with a different write"):
        log.commit("c1", (write("s", 2),), time_ms=3)
    assert log.head("s") == 2 and log.verify() == []


@pytest.mark.parametrize(("writes", "message"), [
    ((), "no stream writes"),
    ((write("s", 0), write("s", 0)), "written twice"),
    ((StreamWrite(stream="s", expected_version=0, events=()),), "has no events"),
    ((StreamWrite(stream="s", expected_version=-1, events=(ev("s"),)),), "negative"),
])
def test_malformed_commits_are_refused_before_anything_is_written(log: EventLog, writes, message) -> None:
    with pytest.raises(InvalidWrite, match=message):
        log.commit("c", writes, time_ms=1)
    assert log.read_since() == []


def test_position_at_is_a_prefix_even_when_clocks_disagree(log: EventLog) -> None:
    log.commit("c1", (write("s", 0),), time_ms=100)
    log.commit("c2", (write("s", 1),), time_ms=300)
    log.commit("c3", (write("s", 2),), time_ms=200)  # a writer with a slow clock
    assert [log.position_at(t) for t in (50, 100, 250, 300, 1000)] == [0, 1, 1, 3, 3]


def test_a_transaction_that_raises_commits_nothing(log: EventLog) -> None:
    log.commit("c1", (write("s", 0),), time_ms=1)
    with pytest.raises(ZeroDivisionError):
        with log.transaction():
            log.commit("c2", (write("s", 1),), time_ms=2)
            1 / 0
    assert log.head("s") == 1 and log.commit_of("c2") is None
    with log.transaction():
        log.commit("c3", (write("s", 1),), time_ms=3)
        log.commit("c4", (write("s", 2),), time_ms=4)
    assert log.head("s") == 3 and log.verify() == []


def test_run_in_transaction_returns_the_work_result_and_rolls_back_a_failing_work(log: EventLog) -> None:
    def append_at_head(commit_id: str) -> int:
        return dict(log.commit(commit_id, (write("s", log.head("s")),), time_ms=1).heads)["s"]

    assert log.run_in_transaction(lambda: append_at_head("c1")) == 1

    def append_then_fail() -> None:
        append_at_head("c2")
        raise ZeroDivisionError

    with pytest.raises(ZeroDivisionError):
        log.run_in_transaction(append_then_fail)
    assert log.head("s") == 1 and log.commit_of("c2") is None
    with log.transaction():  # nested in an open transaction: a savepoint of it
        assert log.run_in_transaction(lambda: append_at_head("c3")) == 2
    assert log.head("s") == 2 and log.verify() == []


def test_a_log_says_when_its_reads_are_inside_a_write_transaction_and_which_commit_wrote_a_version(
        log: EventLog) -> None:
    """What a state store needs to share states between handles: whether a read may see writes that have not landed
    (inside a transaction of its own, or inside a work of run_in_transaction), and the commit at a stream version."""
    assert not log.in_transaction()
    log.commit("c1", (write("s", 0, ev("s", 1), ev("s", 2)),), time_ms=1)
    with log.transaction():
        assert log.in_transaction()
        log.commit("c2", (write("s", 2),), time_ms=2)
        assert log.commit_id_at("s", 3) == "c2"  # seen inside, not landed yet
    assert log.run_in_transaction(log.in_transaction) is True
    assert not log.in_transaction()
    assert [log.commit_id_at("s", v) for v in (1, 2, 3, 4)] == ["c1", "c1", "c2", None]
    assert log.commit_id_at("other", 1) is None


# --- beside the hashed log -------------------------------------------------------------------------------------------

def test_staged_files_and_checkpoints(log: EventLog) -> None:
    log.record_staged("s", "/a.parquet", 5)
    log.record_staged_many("s", ["/b.avro", "/a.parquet"], 7)
    assert log.staged_files("s") == [("/a.parquet", 5), ("/b.avro", 7)]
    assert log.staged_files("s", before_ms=6) == [("/a.parquet", 5)]
    log.forget_staged("s", ["/a.parquet"])
    assert log.staged_files("s") == [("/b.avro", 7)] and log.staged_files("other") == []
    with pytest.raises(InvalidWrite, match="has no version 1"):
        log.put_checkpoint("s", 1, b"x")
    for version in range(4):
        log.commit(f"c{version}", (write("s", version),), time_ms=version)
    log.put_checkpoint("s", 1, b"one")
    log.put_checkpoint("s", 3, b"three")
    log.put_checkpoint("s", 3, b"three again")
    assert log.checkpoint_at_or_before("s", 2) == (1, b"one")
    assert log.checkpoint_at_or_before("s", 10) == (3, b"three again")
    assert log.checkpoint_at_or_before("other", 10) is None
    assert [log.checkpoint_version_at_or_before("s", v) for v in (0, 2, 10)] == [0, 1, 3]
    assert log.verify() == []


@pytest.mark.parametrize("table", ["events", "event_parts", "commits"])
@pytest.mark.parametrize("statement", ["UPDATE {t} SET {c} = {c}", "DELETE FROM {t}"])
def test_the_log_tables_refuse_update_and_delete(target: str, log: EventLog, table: str, statement: str) -> None:
    log.commit("c1", (write("s", 0, ev("s", parts=('{"p":1}',))),), time_ms=1)
    column = {"events": "payload", "event_parts": "body", "commits": "message"}[table]
    with pytest.raises(Exception, match=APPEND_ONLY_MESSAGE):
        raw_execute(target, statement.format(t=table, c=column))
    assert log.verify() == [] and len(log.read_since()) == 1


def test_damage_behind_the_logs_back_is_found_by_verify(target: str, log: EventLog) -> None:
    log.commit("c1", (write("s", 0),), time_ms=1)
    log.commit("c2", (write("s", 1),), time_ms=2)
    raw_execute(target, "INSERT INTO events (position, stream, version, commit_id, type, type_version, time_ms, "
                        "payload, hash) VALUES (3, 's', 3, 'ghost', 't', 1, 3, '{}', 'bad')")
    problems = log.verify()
    assert "position 3: hash does not match the event (the chain breaks here)" in problems
    assert "position 3: not inside the row of commit 'ghost'" in problems


def test_both_backends_chain_the_same_commits_to_the_same_hashes(tmp_path: Path, postgres_url: str) -> None:
    logs = [_open(str(tmp_path / "catalog.db")), _open(postgres_url)]
    try:
        for log in logs:
            log.commit("c1", (write("a", 0, ev("a", 1, parts=("{}", '{"ü":"☃"}'))), write("b", 0)), time_ms=5,
                       actor="ä", message="m")
            log.commit("c2", (write("a", 1),), time_ms=6)
        sqlite_events, postgres_events = (log.read_since() for log in logs)
        assert sqlite_events == postgres_events and sqlite_events[-1].hash != GENESIS_HASH
        assert [log.read_parts(1) for log in logs] == [["{}", '{"ü":"☃"}']] * 2
    finally:
        for log in logs:
            log.close()


# --- writers racing ----------------------------------------------------------------------------------------------------

def _commit_with_retries(target: str, worker: int, commits: int, barrier, results) -> None:
    """Runs in a thread or a spawned process: append ``commits`` events to one shared stream, retrying conflicts."""
    log = _open(target)
    conflicts = 0
    try:
        barrier.wait()
        for i in range(commits):
            while True:
                head = log.head("shared")
                try:
                    log.commit(f"w{worker}-{i}", (write("shared", head, ev("shared", worker * 1000 + i)),),
                               time_ms=i, actor=f"worker-{worker}")
                    break
                except StreamVersionConflict:
                    conflicts += 1
    finally:
        log.close()
    results.put((worker, conflicts))


def _check_all_landed_once(target: str, workers: int, commits: int) -> None:
    with _open(target) as log:
        events = log.read_stream("shared")
        assert [e.version for e in events] == list(range(1, workers * commits + 1))
        assert sorted(e.commit_id for e in events) == sorted(f"w{w}-{i}" for w in range(workers)
                                                             for i in range(commits))
        assert log.verify() == []


def test_threads_with_their_own_handles_all_land_once(target: str) -> None:
    import queue

    _open(target).close()
    workers, commits = 4, 15
    barrier, results = threading.Barrier(workers), queue.Queue()
    threads = [threading.Thread(target=_commit_with_retries, args=(target, w, commits, barrier, results))
               for w in range(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert results.qsize() == workers
    _check_all_landed_once(target, workers, commits)


def test_processes_all_land_once(target: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[2]))  # spawned children import this module
    _open(target).close()
    workers, commits = 4, 15
    context = multiprocessing.get_context("spawn")
    barrier, results = context.Barrier(workers), context.Queue()
    processes = [context.Process(target=_commit_with_retries, args=(target, w, commits, barrier, results))
                 for w in range(workers)]
    for p in processes:
        p.start()
    reports = dict(results.get(timeout=120) for _ in processes)
    for p in processes:
        p.join(30)
        assert p.exitcode == 0
    assert sorted(reports) == list(range(workers))
    _check_all_landed_once(target, workers, commits)


def test_a_named_lock_excludes_other_handles_for_its_key_only(target: str) -> None:
    with _open(target) as one, _open(target) as other:
        with one.exclusive("publish t1") as taken:
            assert taken
            with other.exclusive("publish t1", timeout_s=0.05) as second:
                assert not second
            with other.exclusive("publish t2", timeout_s=0.05) as third:
                assert third
        with other.exclusive("publish t1", timeout_s=1) as again:
            assert again


def test_a_waiter_for_a_named_lock_leaves_untaken_once_its_question_is_answered(target: str) -> None:
    """``until``: a writer waiting for a busy lock leaves as soon as the holder has done what it wanted (its
    commit published), long before its timeout; without an answer it waits the timeout out."""
    import time

    with _open(target) as one, _open(target) as other, _open(target) as third:
        with one.exclusive("publish t1") as taken:
            assert taken
            asked: list[float] = []
            started = time.monotonic()

            def done() -> bool:
                asked.append(time.monotonic())
                return len(asked) >= 2

            with other.exclusive("publish t1", timeout_s=30, until=done) as second:
                assert not second
            assert len(asked) == 2 and time.monotonic() - started < 5
            started = time.monotonic()
            with third.exclusive("publish t1", timeout_s=0.2, until=lambda: False) as fourth:
                assert not fourth
            assert time.monotonic() - started >= 0.2
        with other.exclusive("publish t1", timeout_s=1, until=lambda: True) as free:
            assert free  # a free lock is taken: the question is only asked while it is busy


# --- copying a log across backends ---------------------------------------------------------------------------------

def test_a_log_copied_to_the_other_backend_and_back_has_the_same_hash_chain_head(tmp_path: Path,
                                                                                 postgres_url: str) -> None:
    from storage.log_copy import copy_log, head_hash, open_log

    with open_log(str(tmp_path)) as source:  # a catalog folder: its catalog.db
        source.commit("c1", (write("a", 0, ev("a", 1, parts=('{"f":1}', '{"f":2}')), ev("a", 2)), write("b", 0)),
                      time_ms=100, actor="etl", message="load")
        source.commit("c2", (write("b", 1),), time_ms=90)  # a slow clock: time lookups must agree too
        for i in range(3, 8):
            source.commit(f"c{i}", (write("a", i - 1),), time_ms=100 + i)
        source.record_staged_many("a", ["/x.parquet", "/y.parquet"], 5)
        with open_log(postgres_url) as middle, open_log(str(tmp_path / "back.db")) as back:
            there = copy_log(source, middle)
            assert (there.events, there.commits, there.staged_files) == (9, 7, 2)
            assert there.head_hash == head_hash(source) == head_hash(middle) != GENESIS_HASH
            assert middle.verify() == [] and middle.read_since() == source.read_since()
            assert middle.messages_of(["c1"]) == {"c1": "load"} and middle.read_parts(1) == ['{"f":1}', '{"f":2}']
            assert [middle.position_at(t) for t in (95, 100, 104)] == [source.position_at(t) for t in (95, 100, 104)]
            assert middle.staged_files("a") == source.staged_files("a")
            home = copy_log(middle, back)
            assert home.head_hash == there.head_hash and back.verify() == [] and back.read_since() == source.read_since()
            with pytest.raises(InvalidWrite, match="already holds events"):
                copy_log(source, middle)
