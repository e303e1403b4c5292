"""The writer lock and the write group (group commit) of an SQLite log file, one of each per file per process.

Layer: storage. May touch: the companion lock file ``<database>-writer-lock`` (``flock`` and POSIX record locks)
and thread locks; it imports nothing of ours outside ``storage`` and knows nothing of Iceberg.

Writers of a log file queue here before SQLite's ``BEGIN IMMEDIATE``: threads of one process on a per-file Python
lock, processes on a ``flock`` of the companion file, so the next writer starts as soon as the lock is free instead
of sleeping in SQLite's busy handler. Writers of one file in one process that wait at the same time share one
transaction (:meth:`WriteGroup.run`): one ``COMMIT`` and one fsync for all of them. :class:`storage.log.Log` takes
its file's lock with :func:`writer_lock`; named locks (:meth:`WriterLock.named`) back ``Log.exclusive``.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

try:
    import fcntl
except ImportError:  # not a POSIX system: SQLite's lock alone serializes writers
    fcntl = None  # type: ignore[assignment]

from storage.errors import LogBusy, SharedTransactionInterrupted, TransactionFailed
from storage.files import WRITER_LOCK_SUFFIX

if TYPE_CHECKING:
    from storage.log import Log

T = TypeVar("T")

#: how often a waiter for a named lock asks its ``until`` question (a query under contention costs about as much
#: CPU as a small publish; the release wakes a waiter at once anyway, so the question is only for leaving together).
#: Eight processes appending to one table landed 5-12% more commits a second asking every 100 ms than every 16 ms
#: (twelve runs of each, in turns): what a waiter waits for ends with the holder's publish, whose release lets it
#: go anyway, and the questions asked meanwhile took the processor from that publish
UNTIL_EVERY_S = 0.1
#: the longest sleep between two tries of a busy lock that is polled (when the kernel refuses to block on it): the
#: first is 50 µs, each next twice as long
POLL_AT_MOST_S = 0.001


class WriterLock:
    """The lock this process's writers of one log file take before SQLite's: a thread lock, and, for the thread
    holding it, an exclusive ``flock`` on the file's companion :data:`WRITER_LOCK_SUFFIX` shared by every process.

    Waiting on SQLite's own lock means its busy handler, which sleeps 1, 2, 5, 10, ... 100 ms between tries: with a
    few processes committing at once most of the time goes to sleeping. A busy file lock is waited for in the
    kernel instead (:class:`_FlockWaiter`), so the next writer starts as soon as the last one is done.
    """

    def __init__(self, path: Path) -> None:
        self.thread_lock = threading.RLock()
        self._path = str(path) + WRITER_LOCK_SUFFIX
        self._fd: int | None = None
        self._guard = threading.Lock()
        self._named: dict[str, threading.Lock] = {}
        self._depth = 0  # how many times the thread holding thread_lock holds this lock (the file lock once)
        self._waiter: _FlockWaiter | None = None  # made at the first busy file lock
        self._flock_works = True  # False once the file system refused to flock the lock file
        #: this process's writers of the file waiting to share a transaction (Log.run_in_transaction)
        self.group = WriteGroup()

    def acquire(self, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        if not self.thread_lock.acquire(timeout=timeout_s):
            return False
        if self._depth:
            self._depth += 1
            return True
        fd = None
        try:
            fd = self._file() if self._flock_works else None
            if fd is not None and not self._take_file_lock(fd, deadline):
                self.thread_lock.release()
                return False
        except BaseException as e:
            if fd is not None:
                self._drop_file_lock(fd)  # an interrupt just after the kernel granted it must not leave it held
            if isinstance(e, OSError) and not isinstance(e, BlockingIOError):
                # a file system that cannot flock this file (ENOLCK, EOPNOTSUPP): SQLite's lock alone serializes
                # this process's writers from now on, as where the lock file cannot be made
                self._flock_works = False
                self._depth = 1
                return True
            self.thread_lock.release()
            raise
        self._depth = 1
        return True

    def _take_file_lock(self, fd: int, deadline: float) -> bool:
        """Take the file's ``flock`` by ``deadline`` (the caller holds the thread lock): at once when it is free,
        else through the waiter thread, which blocks in the kernel until the holder releases it."""
        waiter = self._waiter
        if waiter is None:
            if _try_flock(fd):
                return True
            waiter = self._waiter = _FlockWaiter(fd)
        else:
            # under the waiter's lock: a wait of its own still pending would make the descriptor's lock (and so
            # this try) succeed, and its release of an abandoned lock is not half done while the try runs
            with waiter.changed:
                if not waiter.busy and _try_flock(fd):
                    return True
        taken = waiter.wait(deadline)
        if taken is None:  # the kernel refused to block: poll for the time left
            return _poll(lambda: _try_flock(fd), deadline)
        return taken

    def _drop_file_lock(self, fd: int) -> None:
        """Let the file's ``flock`` go after an acquire that failed part way, unless a pending wait of the waiter
        thread is on it (that thread lets go of what it gets for no one)."""
        waiter = self._waiter
        with waiter.changed if waiter is not None else contextlib.nullcontext():
            if waiter is None or not waiter.busy:
                with contextlib.suppress(OSError):
                    fcntl.flock(fd, fcntl.LOCK_UN)

    def release(self) -> None:
        try:
            self._depth -= 1
            if self._depth == 0 and self._fd is not None and self._flock_works:
                fcntl.flock(self._fd, fcntl.LOCK_UN)
        finally:
            self.thread_lock.release()

    @contextlib.contextmanager
    def named(self, key: str, timeout_s: float, until: Callable[[], bool] | None = None) -> Iterator[bool]:
        """Hold the lock named ``key``: a thread lock of this process, and a POSIX record lock on one byte of the
        lock file (chosen by the key's hash) shared by every process. Yields whether it was taken in time. A busy
        record lock is waited for in the kernel (:class:`_RecordLockWait`), so the release wakes the waiter.

        :param until: asked every :data:`UNTIL_EVERY_S` while the lock is busy: once it answers true the wait
            ends, untaken (what the lock was wanted for has been done by its holder)
        """
        with self._guard:
            thread_lock = self._named.setdefault(key, threading.Lock())
        deadline = time.monotonic() + timeout_s
        if not _acquire_thread_lock(thread_lock, deadline, until):
            yield False
            return
        handed_over = False  # an abandoned blocking wait releases the thread lock itself, once it is over
        try:
            fd = self._file()
            offset = 1 + int.from_bytes(hashlib.sha256(key.encode()).digest()[:5], "big")
            try:
                taken = fd is None or _try_record_lock(fd, offset)
                if fd is not None and not taken and time.monotonic() < deadline:  # (timeout 0: one try, no wait)
                    waiting = _RecordLockWait(fd, offset, thread_lock)
                    try:
                        taken = waiting.wait(deadline, until)
                    finally:
                        handed_over = waiting.handed_over
            except BaseException:
                if fd is not None and not handed_over:  # an interrupt just after the kernel granted the lock
                    fcntl.lockf(fd, fcntl.LOCK_UN, 1, offset)
                raise
            try:
                yield taken
            finally:
                if taken and fd is not None:
                    fcntl.lockf(fd, fcntl.LOCK_UN, 1, offset)
        finally:
            if not handed_over:
                thread_lock.release()

    def _file(self) -> int | None:
        """The lock file's descriptor, opened once per process and never closed (closing a descriptor of a file
        drops every POSIX record lock the process holds on it); None where it cannot be made (a read-only folder:
        then SQLite's lock alone serializes writers, and named locks are this process's only)."""
        with self._guard:
            return self._open()

    def _open(self) -> int | None:
        if self._fd is None and fcntl is not None:
            try:
                self._fd = os.open(self._path, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o644)
            except OSError:
                return None
        return self._fd


class _FlockWaiter:
    """A thread of this process that waits in the kernel for the lock file's ``flock`` on behalf of the writer
    holding the process's thread lock, so that the release by another process wakes the next writer at once.

    Polling the lock instead (a try every 50 µs to 1 ms) left it idle until a waiter woke, and the wakeups of eight
    processes took the processor from the writer holding it: eight processes appending to one table landed about
    4% more commits a second, for 8% less CPU a commit, with the waits in the kernel. The thread lives as long as
    the process, so a wait costs two wakeups, not a thread. A writer whose deadline passes leaves its wait to the
    thread, which lets the lock go as soon as it gets it, unless a writer has taken the wait over by then.
    """

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.changed = threading.Condition(threading.Lock())
        self.wanted = False  # a writer waits for the lock
        self.busy = False  # the thread is in the kernel's wait: the descriptor may get the lock at any moment
        self.held = False  # the thread got the lock for the writer waiting; it is the writer's now
        self.refused = False  # the kernel refused to block
        threading.Thread(target=self._serve, name="icelog-writer-lock-wait", daemon=True).start()

    def wait(self, deadline: float) -> bool | None:
        """Wait for the lock until ``deadline``; whether it was taken, or None when the kernel refused to block."""
        with self.changed:
            self.wanted = True
            self.changed.notify_all()
            try:
                while not self.held and not self.refused:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        self.wanted = False  # the thread lets the lock go when it comes, unless wanted again by then
                        return False
                    self.changed.wait(left)
            except BaseException:  # interrupted: no one is left to take the lock
                self.wanted = False
                if self.held:
                    self.held = False
                    fcntl.flock(self.fd, fcntl.LOCK_UN)
                raise
            if self.refused:
                self.refused = False
                return None
            self.held = False
            return True

    def _serve(self) -> None:
        while True:
            with self.changed:
                while not self.wanted:
                    self.changed.wait()
                self.busy = True
            try:
                fcntl.flock(self.fd, fcntl.LOCK_EX)
                refused = False
            except OSError:
                refused = True
            with self.changed:
                self.busy = False
                if refused:  # told to the writer waiting, if any: a later one tries the lock itself first
                    self.refused, self.wanted = self.wanted, False
                elif self.wanted:
                    self.held, self.wanted = True, False
                else:  # the writer gave up meanwhile
                    fcntl.flock(self.fd, fcntl.LOCK_UN)
                self.changed.notify_all()


class _RecordLockWait:
    """A wait for a busy POSIX record lock that the kernel ends: a helper thread blocks in ``lockf`` while the
    caller asks its ``until`` question now and then, so no waiter polls the lock (with eight processes queueing
    for a publish, polling cost more CPU than the publish it waited for).

    A record lock belongs to the process, not the thread, so only one thread of a process may try for a key at a
    time (the key's thread lock). A caller that stops waiting (its question answered, or its deadline past)
    hands that thread lock to the helper, which releases the record lock as soon as it gets it and then the
    thread lock: no other thread of the process can take the key while a try for it is still pending."""

    def __init__(self, fd: int, offset: int, thread_lock: threading.Lock) -> None:
        self.fd = fd
        self.offset = offset
        self.thread_lock = thread_lock
        self.settled = threading.Lock()
        self.over = threading.Event()
        self.taken = False
        self.abandoned = False
        self.failed = False
        #: whether the caller gave the thread lock to the helper (it must not release it then)
        self.handed_over = False

    def wait(self, deadline: float, until: Callable[[], bool] | None) -> bool:
        """Wait for the lock until ``deadline`` or until ``until()`` answers true; returns whether it was taken.
        If ``until`` raises, the wait is given up (and a lock that came meanwhile let go) before it propagates."""
        threading.Thread(target=self._block, name="icelog-lock-wait", daemon=True).start()
        try:
            while True:
                left = deadline - time.monotonic()
                if self.over.wait(max(0.0, min(UNTIL_EVERY_S, left))):
                    if self.failed:  # the kernel refused to block (a deadlock it saw): poll for the time left
                        return _poll(lambda: _try_record_lock(self.fd, self.offset), deadline, until)
                    return True
                if left <= 0 or (until is not None and until()):
                    return self._give_up()  # a lock that came just now is kept: the caller checks anyway
        except BaseException:
            if self._give_up():
                fcntl.lockf(self.fd, fcntl.LOCK_UN, 1, self.offset)
            raise

    def _give_up(self) -> bool:
        """Stop waiting: True when the lock came already (the caller has it), else the pending try (and the
        thread lock) is left to the helper, unless the helper is gone."""
        with self.settled:
            if self.taken or self.failed:
                return self.taken
            self.abandoned = self.handed_over = True
            return False

    def _block(self) -> None:
        try:
            fcntl.lockf(self.fd, fcntl.LOCK_EX, 1, self.offset)
        except OSError:
            with self.settled:
                self.failed = True
                abandoned = self.abandoned
            self.over.set()
            if abandoned:
                self.thread_lock.release()
            return
        with self.settled:
            self.taken = not self.abandoned
        if self.taken:
            self.over.set()
            return
        fcntl.lockf(self.fd, fcntl.LOCK_UN, 1, self.offset)
        self.thread_lock.release()


def _try_flock(fd: int) -> bool:
    """Take the file's ``flock`` without waiting; whether it was free."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False


def _try_record_lock(fd: int, offset: int) -> bool:
    """Take the record lock on byte ``offset`` without waiting; whether it was free."""
    try:
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, offset)
        return True
    except OSError:
        return False


def _poll(attempt: Callable[[], bool], deadline: float, until: Callable[[], bool] | None = None) -> bool:
    """Repeat ``attempt()`` (a try of a lock without waiting) every 50 µs to :data:`POLL_AT_MOST_S` until it
    succeeds; False once ``deadline`` passes or ``until()`` (asked every :data:`UNTIL_EVERY_S`) answers true."""
    delay = 0.00005
    ask_at = time.monotonic() + UNTIL_EVERY_S
    while not attempt():
        now = time.monotonic()
        if now >= deadline:
            return False
        if until is not None and now >= ask_at:
            if until():
                return False
            ask_at = now + UNTIL_EVERY_S
        time.sleep(delay)
        delay = min(delay * 2, POLL_AT_MOST_S)
    return True


def _acquire_thread_lock(lock: threading.Lock, deadline: float, until: Callable[[], bool] | None) -> bool:
    """Take a thread lock by ``deadline``, giving up early once ``until()`` is true (asked every
    :data:`UNTIL_EVERY_S` while the lock is held elsewhere)."""
    if until is None:
        return lock.acquire(timeout=max(0.0, deadline - time.monotonic()))
    while True:
        if lock.acquire(timeout=min(UNTIL_EVERY_S, max(0.0, deadline - time.monotonic()))):
            return True
        if time.monotonic() >= deadline or until():
            return False


class GroupedWork:
    """One writer's work waiting in a :class:`WriteGroup`, and, once done, its outcome."""

    def __init__(self, log: Log, work: Callable[[], Any]) -> None:
        self.log = log
        self.work = work
        self.done = False
        self.result: Any = None
        self.error: BaseException | None = None

    def run_on(self, leader: Log) -> None:
        """Run the work inside the leader's open transaction, in a savepoint of its own (rolled back alone when
        the work fails); the writer's log answers on the leader's connection meanwhile."""
        try:
            with self.log._sharing_with(leader), self.log.transaction():
                self.result = self.work()
        except Exception as e:
            self.error = e

    def outcome(self) -> Any:
        if self.error is not None:
            raise self.error
        return self.result


class WriteGroup:
    """The writers of one log file in this process waiting to write: one of them (the leader) takes the write lock
    and runs every work queued by then in its own transaction; the others wait for their outcome."""

    def __init__(self) -> None:
        self.changed = threading.Condition(threading.Lock())
        self.waiting: list[GroupedWork] = []
        self.leading = False
        #: how many transactions leaders committed, and how many works they carried (for benchmarks and tests)
        self.transactions = 0
        self.works = 0

    def run(self, log: Log, work: Callable[[], T]) -> T:
        """Run ``work()`` for ``log`` (a writer of this group's file) in a write transaction that may be shared with
        the other writers waiting now: the first to find no leader leads, runs every work queued by then (of logs
        with its ``synchronous`` mode, so none is acknowledged with less durability than it asked for) in its own
        transaction, each in a savepoint, and commits once; the others wait for their outcome, up to their busy
        timeout. See :meth:`storage.log.Log.run_in_transaction`."""
        mine = GroupedWork(log, work)
        with self.changed:
            self.waiting.append(mine)
            self._wait_turn(mine, log)
            if mine.done:
                return mine.outcome()  # type: ignore[no-any-return]
            self.leading = True
        batch: list[GroupedWork] = []
        committed = False
        try:
            with log.transaction():
                with self.changed:
                    batch = [q for q in self.waiting if q.log.synchronous == log.synchronous]
                    self.waiting = [q for q in self.waiting if q.log.synchronous != log.synchronous]
                for queued in batch:
                    if not log._conn.in_transaction:  # SQLite rolled it back under an earlier work (disk full)
                        raise TransactionFailed(f"Cannot write to {log.path}: the shared transaction was rolled back")
                    queued.run_on(log)
            committed = True
            self.transactions += 1
            self.works += len(batch)
        except BaseException as e:
            if committed:  # an interrupt after the COMMIT: every work landed, and keeps its outcome
                mine.error = e
            else:
                self._fail(batch, mine, log, e)
            if not batch:  # the lock was not taken: the others queued stay for the next leader
                mine.error = e
                with self.changed:
                    self.waiting.remove(mine)
        finally:
            with self.changed:
                for queued in batch:
                    queued.done = True
                if batch:  # (an interrupt may have come between taking the batch and shrinking the queue)
                    self.waiting = [q for q in self.waiting if not q.done]
                self.leading = False
                self.changed.notify_all()
        return mine.outcome()  # type: ignore[no-any-return]

    @staticmethod
    def _fail(batch: list[GroupedWork], mine: GroupedWork, log: Log, error: BaseException) -> None:
        """Tell every writer of a batch whose transaction failed (its own error, if any, kept as the context), so
        that states read inside the transaction are dropped: nothing landed, or, when the leader was interrupted
        (perhaps during its COMMIT), no one can tell, and each writer looks its commit up."""
        interrupted = not isinstance(error, Exception)
        for queued in batch:
            failure: BaseException
            if queued is mine and (isinstance(error, TransactionFailed) or interrupted):
                failure = error
            elif interrupted:
                failure = SharedTransactionInterrupted(f"Cannot tell whether the transaction shared with other "
                                                       f"writers of {log.path} committed: its leader was "
                                                       f"interrupted ({type(error).__name__})")
                failure.__cause__ = error
            else:
                failure = shared_failure(log.path, error)
            if queued.error is not None and queued.error is not failure:
                failure.__context__ = queued.error
            queued.error = failure

    def _wait_turn(self, mine: GroupedWork, log: Log) -> None:
        """Wait (holding ``changed``) until ``mine`` is done by a leader or no one leads. Leaves the queue and
        raises LogBusy after the log's busy timeout, or re-raises an interrupt, unless a leader has already taken
        the work: then its outcome decides, and this waits for it."""
        deadline = time.monotonic() + log._busy_timeout_s
        try:
            while self.leading and not mine.done:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise LogBusy(f"Cannot begin a write transaction: {log.path} is locked by another writer")
                self.changed.wait(remaining)
        except BaseException as e:
            if mine in self.waiting:  # not taken by a leader: it never runs
                self.waiting.remove(mine)
                raise
            while not mine.done:  # a leader is running it on this log's behalf
                self.changed.wait()
            if not isinstance(e, LogBusy):
                raise


def shared_failure(path: Path, error: BaseException) -> TransactionFailed:
    """What a writer whose work ran in another writer's transaction learns when that transaction failed."""
    failure = TransactionFailed(f"Cannot commit the transaction shared with other writers of {path}: {error}")
    failure.__cause__ = error
    return failure


_WRITE_LOCKS: dict[str, WriterLock] = {}
_WRITE_LOCKS_GUARD = threading.Lock()


def _forget_parents_locks() -> None:
    """In a forked child: start with no writer locks. The parent's would share its lock file's open description
    (and so its ``flock``) and thread locks held by the parent's threads, which never release them here. Their
    descriptors are closed: kept, they would hold the parent's ``flock`` after the parent died holding it, stopping
    every writer of the catalog while the child lives (the child has no record locks on the file yet to drop). A
    handle the child still uses opens the file afresh, and waits without the parent's waiter thread."""
    global _WRITE_LOCKS_GUARD
    for lock in _WRITE_LOCKS.values():
        if lock._fd is not None:
            with contextlib.suppress(OSError):
                os.close(lock._fd)
        lock._fd, lock._waiter, lock._guard = None, None, threading.Lock()
    _WRITE_LOCKS.clear()
    _WRITE_LOCKS_GUARD = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_parents_locks)


def writer_lock(path: Path) -> WriterLock:
    """The process-wide lock that this process's writers of the log file at ``path`` take before SQLite's."""
    key = str(path.resolve())
    with _WRITE_LOCKS_GUARD:
        lock = _WRITE_LOCKS.get(key)
        if lock is None:
            lock = _WRITE_LOCKS[key] = WriterLock(Path(key))
        return lock
