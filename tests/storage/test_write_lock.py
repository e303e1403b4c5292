"""The writer lock of an SQLite log file at its edges (storage.write_lock): what its waiter thread lets go is never
taken for held, a refusal of the kernel that no writer waited for is not handed to a later one, an interrupt just
after the kernel grants a lock leaves it free, a file system that cannot ``flock`` leaves SQLite's own lock to
serialize the writers, and a forked child neither keeps its parent's lock nor hangs on a lock of the parent's
threads.

Layer: tests (storage only; real lock files, real processes). The kernel's answers that cannot be had on demand (an
interrupt at one exact instant, ``ENOLCK``) are injected around the real ``fcntl`` calls.
"""

from __future__ import annotations

import errno
import fcntl
import multiprocessing
import os
import threading
import time
from pathlib import Path

import pytest

from storage import Log, NewEvent, StreamWrite
from storage.write_lock import writer_lock
from tests.storage.test_log import _flock_is_free

WAITER_THREAD = "icelog-writer-lock-wait"


def _hold_the_file_lock(path: str, held, release) -> None:
    """Runs in another process: hold the log's writer lock (its ``flock``) until told."""
    lock = writer_lock(Path(path))
    assert lock.acquire(30)
    held.set()
    release.wait(30)
    lock.release()


def _try_named(path: str, key: str, out) -> None:
    """Runs in another process: one try of the named lock ``key``; puts whether it was taken."""
    with writer_lock(Path(path)).named(key, 0) as taken:
        out.put(taken)


@pytest.fixture
def spawn(monkeypatch):
    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[2]))
    return multiprocessing.get_context("spawn")


def _holder(spawn, log_path: Path):
    held, release = spawn.Event(), spawn.Event()
    process = spawn.Process(target=_hold_the_file_lock, args=(str(log_path), held, release))
    process.start()
    assert held.wait(60)
    return process, release


def _wait_idle(lock) -> None:
    for _ in range(200):
        if not lock._waiter.busy:
            return
        time.sleep(0.01)
    raise AssertionError("the waiter thread is still in the kernel's wait")


def test_a_lock_the_waiter_thread_is_letting_go_is_not_taken_for_held(log_path, spawn, monkeypatch):
    """A wait given up is left to the waiter thread, which lets the lock go when it comes. A writer trying the lock
    while that release is under way must not take the descriptor's lock, about to go, for its own."""
    Log.open(log_path).close()
    lock = writer_lock(log_path)
    holder, release = _holder(spawn, log_path)
    assert not lock.acquire(0.1)  # given up: the waiter thread stays in the kernel's wait, for no one now
    letting_go, let_go = threading.Event(), threading.Event()
    real_flock = fcntl.flock

    def slow_release(fd: int, operation: int) -> None:
        if operation == fcntl.LOCK_UN and threading.current_thread().name == WAITER_THREAD:
            letting_go.set()
            time.sleep(0.3)
            real_flock(fd, operation)
            let_go.set()
            return
        real_flock(fd, operation)

    monkeypatch.setattr(fcntl, "flock", slow_release)
    release.set()
    holder.join(30)
    assert letting_go.wait(30)  # the waiter thread got the lock for no one and is letting it go
    assert lock.acquire(5)
    try:
        assert let_go.wait(30)
        assert not _flock_is_free(log_path)  # this writer holds it, after that release too
    finally:
        lock.release()
    assert _flock_is_free(log_path)


def test_a_refusal_no_writer_waited_for_leaves_nothing_held_for_a_later_writer(log_path, spawn, monkeypatch):
    """The kernel refuses the waiter thread's wait (``ENOLCK``) after the writer gave up: the next writer waits as
    usual, and once it is done a writer behind another process's lock is not told it holds it."""
    Log.open(log_path).close()
    lock = writer_lock(log_path)
    holder, release = _holder(spawn, log_path)
    gave_up = threading.Event()
    real_flock = fcntl.flock
    refused: list[int] = []

    def refuse_once(fd: int, operation: int) -> None:
        if operation == fcntl.LOCK_EX and threading.current_thread().name == WAITER_THREAD and not refused:
            refused.append(fd)
            gave_up.wait(30)
            raise OSError(errno.ENOLCK, "No locks available")
        real_flock(fd, operation)

    monkeypatch.setattr(fcntl, "flock", refuse_once)
    try:
        assert not lock.acquire(0.1)
        gave_up.set()
        _wait_idle(lock)
        assert refused
        taken: list[bool] = []

        def next_writer() -> None:
            taken.append(lock.acquire(30))
            lock.release()

        writer = threading.Thread(target=next_writer)
        writer.start()
        time.sleep(0.2)
        release.set()
        holder.join(30)
        writer.join(30)
        assert taken == [True]
    finally:
        release.set()
        holder.join(30)
    holder, release = _holder(spawn, log_path)  # another process holds the lock again
    try:
        assert not lock.acquire(0.3)
    finally:
        release.set()
        holder.join(30)


def test_an_interrupt_just_after_the_kernel_grants_a_lock_leaves_it_free(log_path, spawn, monkeypatch):
    """A signal that arrives while the kernel grants a lock raises once the call returns: the writer lock's
    ``flock`` and a named lock's record lock are let go, and so is the thread lock."""
    Log.open(log_path).close()
    lock = writer_lock(log_path)
    real_flock, real_lockf = fcntl.flock, fcntl.lockf

    def granted_then_interrupted(real):
        def call(fd: int, operation: int, *args) -> None:
            real(fd, operation, *args)
            if operation == fcntl.LOCK_EX | fcntl.LOCK_NB:
                raise KeyboardInterrupt
        return call

    monkeypatch.setattr(fcntl, "flock", granted_then_interrupted(real_flock))
    with pytest.raises(KeyboardInterrupt):
        lock.acquire(5)
    monkeypatch.setattr(fcntl, "flock", real_flock)
    assert _flock_is_free(log_path)
    assert lock.acquire(5)
    lock.release()

    monkeypatch.setattr(fcntl, "lockf", granted_then_interrupted(real_lockf))
    with pytest.raises(KeyboardInterrupt):
        with lock.named("publish t1", 5):
            raise AssertionError("not taken")
    monkeypatch.setattr(fcntl, "lockf", real_lockf)
    out = spawn.Queue()
    other = spawn.Process(target=_try_named, args=(str(log_path), "publish t1", out))
    other.start()
    try:
        assert out.get(timeout=60) is True  # another process takes it at once
    finally:
        other.join(30)
    with lock.named("publish t1", 5) as taken:
        assert taken


def test_a_file_system_that_cannot_flock_leaves_sqlite_to_serialize_the_writers(log_path, monkeypatch):
    """``flock`` failing with ``ENOLCK`` (a network or FUSE file system) is no error: the writers of the process
    go on behind SQLite's own lock, as where the lock file cannot be made."""
    Log.open(log_path).close()
    real_flock = fcntl.flock
    lock_file = os.path.realpath(str(log_path) + "-writer-lock")

    def no_locks(fd: int, operation: int) -> None:
        if os.path.realpath(f"/proc/self/fd/{fd}") == lock_file:
            raise OSError(errno.ENOLCK, "No locks available")
        real_flock(fd, operation)

    monkeypatch.setattr(fcntl, "flock", no_locks)

    def write(expected: int) -> StreamWrite:
        return StreamWrite(stream="s", expected_version=expected, events=(
            NewEvent(stream="s", type="thing-happened", type_version=1, payload="{}"),))

    with Log.open(log_path) as log:
        assert log.commit("c1", (write(0),), time_ms=1).positions == (1,)
        assert log.commit("c2", (write(1),), time_ms=2).positions == (2,)
        assert log.head("s") == 2 and log.verify() == []


def _hold_fork_and_die(path: str, out) -> None:
    """Runs in another process: take the writer lock, fork a child that lives on, and die holding the lock."""
    lock = writer_lock(Path(path))
    assert lock.acquire(30)
    child = os.fork()
    if child == 0:
        time.sleep(60)
        os._exit(0)
    out.put(child)
    out.close()
    out.join_thread()  # (os._exit does not wait for the queue's thread to send it)
    os._exit(0)  # as a process killed in the middle of a commit


def test_a_forked_child_does_not_keep_the_writer_lock_of_a_parent_that_died_holding_it(log_path, spawn):
    Log.open(log_path).close()
    out = spawn.Queue()
    parent = spawn.Process(target=_hold_fork_and_die, args=(str(log_path), out))
    parent.start()
    child = out.get(timeout=60)
    try:
        for _ in range(600):  # (not join: the child holds the end of the pipe that join waits on)
            if parent.exitcode is not None:
                break
            time.sleep(0.05)
        assert parent.exitcode == 0
        assert _flock_is_free(log_path)  # the child lives on, holding nothing of its parent's
    finally:
        os.kill(child, 9)


def _fork_while_a_database_is_being_opened(path: str, out) -> None:
    """Runs in another process: fork while another thread is between the check and the registration of a new
    connection; the child opens the log (it hangs if the registry's lock stayed taken)."""
    import signal

    from storage.files import OPEN_DATABASES

    checking, go_on = threading.Event(), threading.Event()

    def slow_check() -> None:
        checking.set()
        go_on.wait(30)

    opener = threading.Thread(target=OPEN_DATABASES.add, args=(path + "-other", slow_check))
    opener.start()
    assert checking.wait(30)
    child = os.fork()
    if child == 0:
        signal.alarm(20)  # a hang ends the child with SIGALRM
        Log.open(path).close()
        os._exit(0)
    go_on.set()
    opener.join(30)
    _, status = os.waitpid(child, 0)
    out.put(status)


def test_a_child_forked_while_a_database_is_being_opened_can_open_one(log_path, spawn):
    Log.open(log_path).close()
    out = spawn.Queue()
    process = spawn.Process(target=_fork_while_a_database_is_being_opened, args=(str(log_path), out))
    process.start()
    try:
        assert out.get(timeout=60) == 0
    finally:
        process.join(30)
