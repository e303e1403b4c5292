"""Group commit on the SQLite log: writers of one file in one process that wait at the same time share one
transaction (one COMMIT, one fsync), each keeping its own events, compare-and-swap, result and errors."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from storage import CommitResult, Log, LogBusy, NewEvent, StreamVersionConflict, StreamWrite, TransactionFailed


def write(stream: str, expected: int) -> StreamWrite:
    return StreamWrite(stream=stream, expected_version=expected,
                       events=(NewEvent(stream=stream, type="thing-happened", type_version=1,
                                        payload=json.dumps({"expected": expected})),))


def run_queued_behind_a_held_lock(path: Path, works: list[Callable[[Log], Any]],
                                  modes: list[str] | None = None, keep_open: threading.Event | None = None
                                  ) -> tuple[list[Any], tuple[int, int]]:
    """Run each work on its own thread and its own Log (``PRAGMA synchronous`` from ``modes``, default FULL) while
    another handle holds the write lock, so that all of them are queued when it is released; their outcomes
    (results, errors or interrupts) and the group counts it added. With ``keep_open``, the threads keep their Log
    open until it is set (and are not waited for)."""
    holder = Log.open(path)
    outcomes: list[Any] = [None] * len(works)
    finished = [threading.Event() for _ in works]
    before = holder.group_commit_counts()
    group = holder._write_lock.group
    queued_before = len(group.waiting)

    def run(i: int) -> None:  # a sqlite3 connection belongs to the thread that opened it: one Log per thread
        with Log.open(path, synchronous=(modes or ["FULL"] * len(works))[i]) as log:
            try:
                outcomes[i] = log.run_in_transaction(lambda: works[i](log))
            except BaseException as e:  # noqa: BLE001 - an interrupt is an outcome too
                outcomes[i] = e
            finished[i].set()
            if keep_open is not None:
                keep_open.wait(30)

    with holder.transaction():
        threads = [threading.Thread(target=run, args=(i,)) for i in range(len(works))]
        for t in threads:
            t.start()
        deadline = time.monotonic() + 30
        while len(group.waiting) < queued_before + len(works):
            assert time.monotonic() < deadline, "the writers never queued"
            time.sleep(0.001)
    for t, done in zip(threads, finished):
        if keep_open is None:
            t.join(30)
        assert done.wait(30)
    after = holder.group_commit_counts()
    holder.close()
    return outcomes, (after[0] - before[0], after[1] - before[1])


def append_at_head(commit_id: str, stream: str = "s") -> Callable[[Log], Any]:
    return lambda log: log.commit(commit_id, (write(stream, log.head(stream)),), time_ms=1)


def test_writers_waiting_together_share_one_transaction_and_each_sees_the_others_appends(tmp_path: Path) -> None:
    path = tmp_path / "catalog.db"
    outcomes, (transactions, works) = run_queued_behind_a_held_lock(
        path, [append_at_head(f"c{i}") for i in range(5)])
    assert (transactions, works) == (1, 5)
    assert sorted(dict(result.heads)["s"] for result in outcomes) == [1, 2, 3, 4, 5]
    with Log.open(path) as log:
        assert log.head("s") == 5 and log.verify() == []
        assert {e.commit_id for e in log.read_stream("s")} == {f"c{i}" for i in range(5)}


def test_a_failing_work_is_rolled_back_alone_and_its_writer_gets_its_error(tmp_path: Path) -> None:
    def append_then_fail(log: Log) -> None:
        append_at_head("doomed")(log)
        raise ZeroDivisionError("the build failed")

    def stale(log: Log) -> Any:  # built on version 0 whatever the head is: a compare-and-swap that must fail
        return log.commit("stale", (write("t", 0),), time_ms=1)

    path = tmp_path / "catalog.db"
    Log.open(path).commit("first", (write("t", 0),), time_ms=1)
    outcomes, (transactions, works) = run_queued_behind_a_held_lock(
        path, [append_at_head("a"), append_then_fail, stale, append_at_head("b")])
    assert (transactions, works) == (1, 4)
    assert isinstance(outcomes[1], ZeroDivisionError)
    assert isinstance(outcomes[2], StreamVersionConflict) and outcomes[2].winner_commit_id == "first"
    with Log.open(path) as log:
        assert [e.commit_id for e in log.read_stream("s")] in (["a", "b"], ["b", "a"])
        assert log.commit_of("doomed") is None and log.commit_of("stale") is None
        assert log.head("t") == 1 and log.verify() == []


def test_a_writer_alone_leads_its_own_transaction(tmp_path: Path) -> None:
    with Log.open(tmp_path / "catalog.db") as log:
        before = log.group_commit_counts()
        for i in range(3):
            log.run_in_transaction(lambda: append_at_head(f"c{i}")(log))
        after = log.group_commit_counts()
        assert (after[0] - before[0], after[1] - before[1]) == (3, 3)
        with pytest.raises(ValueError):
            log.run_in_transaction(lambda: (_ for _ in ()).throw(ValueError("no")))
        assert log.head("s") == 3 and log.group_commit_counts()[0] - before[0] == 4  # one that committed nothing


def test_a_writer_interrupted_while_queued_never_runs(tmp_path: Path) -> None:
    """A queued writer whose thread is interrupted before a leader takes its work leaves the queue: its work never
    runs later on a log its thread has moved on from."""
    path = tmp_path / "catalog.db"
    holder = Log.open(path)
    group = holder._write_lock.group
    ran: list[str] = []
    interrupted: list[BaseException] = []

    class Interrupt(BaseException):
        pass

    def waiter() -> None:
        with Log.open(path) as log:
            original = group.changed.wait

            def interrupted_wait(timeout: float | None = None) -> bool:
                group.changed.wait = original  # type: ignore[method-assign]
                raise Interrupt

            try:
                group.leading = True  # as if another writer were leading: this one queues and waits
                group.changed.wait = interrupted_wait  # type: ignore[method-assign]
                log.run_in_transaction(lambda: ran.append("ran"))
            except Interrupt as e:
                interrupted.append(e)
            finally:
                group.leading = False

    t = threading.Thread(target=waiter)
    t.start()
    t.join(30)
    assert interrupted and ran == [] and group.waiting == []
    holder.run_in_transaction(lambda: append_at_head("after")(holder))  # the group still works
    assert holder.head("s") == 1
    holder.close()


def test_a_shared_transaction_rolled_back_under_a_work_lands_nothing_and_tells_every_writer(tmp_path: Path) -> None:
    """SQLite may roll a whole transaction back (disk full, I/O error) under a work that swallows the error: the
    works after it must not run in transactions of their own, and no writer may hear of success."""
    def append_then_lose_the_transaction(log: Log) -> None:
        append_at_head("b")(log)
        log._live().execute("ROLLBACK")  # what SQLite does itself on SQLITE_FULL

    path = tmp_path / "catalog.db"
    outcomes, (transactions, _) = run_queued_behind_a_held_lock(
        path, [append_at_head("a"), append_then_lose_the_transaction, append_at_head("c")])
    assert transactions == 0
    assert all(isinstance(o, TransactionFailed) for o in outcomes), outcomes
    with Log.open(path) as log:
        assert log.head("s") == 0 and all(log.commit_of(c) is None for c in "abc") and log.verify() == []


def test_writers_share_a_transaction_only_with_their_own_durability(tmp_path: Path) -> None:
    path = tmp_path / "catalog.db"
    outcomes, (transactions, works) = run_queued_behind_a_held_lock(
        path, [append_at_head(f"c{i}") for i in range(4)], modes=["FULL", "OFF", "FULL", "OFF"])
    assert not [o for o in outcomes if isinstance(o, Exception)], outcomes
    assert (transactions, works) == (2, 4)  # the FULL writers in one COMMIT, the OFF ones in another
    with Log.open(path) as log:
        assert log.head("s") == 4 and log.verify() == []


def test_a_queued_writer_gives_up_after_its_busy_timeout(tmp_path: Path) -> None:
    path = tmp_path / "catalog.db"
    with Log.open(path, busy_timeout_ms=50) as log:
        group = log._write_lock.group
        group.leading = True  # as if another writer led a transaction that never ends
        try:
            started = time.monotonic()
            with pytest.raises(LogBusy):
                log.run_in_transaction(lambda: append_at_head("late")(log))
            assert time.monotonic() - started < 5 and group.waiting == []
        finally:
            group.leading = False
        assert log.head("s") == 0


class Interrupt(BaseException):
    """Stands for KeyboardInterrupt or SystemExit reaching the thread that leads a shared transaction."""


def test_an_interrupt_after_the_shared_commit_leaves_every_writer_the_outcome_it_had(tmp_path: Path,
                                                                                      monkeypatch) -> None:
    """The leader interrupted just after its COMMIT: every work landed, so no writer may hear that nothing did (its
    files would be deleted under a commit in the log); the leader's own call gets the interrupt."""
    from storage.write_lock import WriteGroup

    def interrupt_once_counted(self: WriteGroup, value: int) -> None:
        self.__dict__["counted"] = value
        if value:
            raise Interrupt

    monkeypatch.setattr(WriteGroup, "transactions", property(lambda self: self.__dict__.get("counted", 0),
                                                             interrupt_once_counted), raising=False)
    path = tmp_path / "catalog.db"
    outcomes, _ = run_queued_behind_a_held_lock(path, [append_at_head(c) for c in "abcd"])
    assert sum(isinstance(o, Interrupt) for o in outcomes) == 1, outcomes
    assert sum(isinstance(o, CommitResult) for o in outcomes) == 3, outcomes
    with Log.open(path) as log:
        assert log.head("s") == 4 and all(log.commit_of(c) is not None for c in "abcd") and log.verify() == []


def test_a_leader_interrupted_inside_the_shared_transaction_lands_nothing_and_says_the_outcome_is_unknown(
        tmp_path: Path) -> None:
    """An interrupt in the leader's thread while it runs the works (or commits them): the writers cannot be told
    that nothing landed (the COMMIT may have been under way), so each hears that the outcome is unknown, and looks
    its commit up by its id (engine.operations.commit settles it so)."""
    from storage.errors import SharedTransactionInterrupted, TransactionOutcomeUnknown

    def append_then_interrupt(log: Log) -> None:
        append_at_head("b")(log)
        raise Interrupt  # runs on the leader's thread, whichever writer's work it is

    path = tmp_path / "catalog.db"
    outcomes, _ = run_queued_behind_a_held_lock(path, [append_at_head("a"), append_then_interrupt,
                                                     append_at_head("c")])
    assert sum(isinstance(o, Interrupt) for o in outcomes) == 1, outcomes
    unknown = [o for o in outcomes if not isinstance(o, Interrupt)]
    assert len(unknown) == 2 and all(isinstance(o, SharedTransactionInterrupted) for o in unknown), outcomes
    assert all(isinstance(o, TransactionOutcomeUnknown) and isinstance(o, LogBusy) for o in unknown)
    with Log.open(path) as log:
        assert log.head("s") == 0 and all(log.commit_of(c) is None for c in "abc") and log.verify() == []


def test_a_leader_interrupted_as_it_takes_the_queue_leaves_no_work_queued_to_run_later(tmp_path: Path,
                                                                                    monkeypatch) -> None:
    """An interrupt in the leader's thread just after it took the queued works as its batch, before the queue
    shrank: those writers are told the outcome is unknown, so no later leader may run their works after all."""
    from storage.errors import SharedTransactionInterrupted
    from storage.write_lock import WriteGroup

    def interrupt_once_shrunk(self: WriteGroup, value: list) -> None:
        queued = self.__dict__.get("queued", [])
        if len(value) < len(queued) and not self.__dict__.get("interrupted"):
            self.__dict__["interrupted"] = True
            raise Interrupt
        self.__dict__["queued"] = value

    monkeypatch.setattr(WriteGroup, "waiting", property(lambda self: self.__dict__.get("queued", []),
                                                        interrupt_once_shrunk), raising=False)
    ran: list[str] = []

    def counted(commit_id: str) -> Callable[[Log], Any]:
        def work(log: Log) -> Any:
            ran.append(commit_id)
            return append_at_head(commit_id)(log)
        return work

    path = tmp_path / "catalog.db"
    writers_still_open = threading.Event()  # their handles could run the works, were they queued still
    try:
        outcomes, _ = run_queued_behind_a_held_lock(path, [counted(c) for c in "abc"], keep_open=writers_still_open)
        assert sum(isinstance(o, Interrupt) for o in outcomes) == 1, outcomes
        assert sum(isinstance(o, SharedTransactionInterrupted) for o in outcomes) == 2, outcomes
        outcomes, _ = run_queued_behind_a_held_lock(path, [counted("d")])
    finally:
        writers_still_open.set()
    assert isinstance(outcomes[0], CommitResult)
    assert ran == ["d"]
    with Log.open(path) as log:
        assert log.head("s") == 1 and log.commit_of("d") is not None and log.verify() == []
