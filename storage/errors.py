"""The storage exception tree: one root, ``LogError``, for everything the log and the file IO raise.

Layer: storage (imports nothing of ours). The engine catches these and re-raises its own errors ``from e``.
Messages follow "Cannot <action>: <culprit>".
"""

from __future__ import annotations


class LogError(Exception):
    """Root of every error the storage layer raises on purpose (the event log and file IO)."""


class LogClosed(LogError):
    """The log was used after :meth:`storage.Log.close`."""


class WrongThread(LogError):
    """A log handle on SQLite was used from a thread other than the one that opened it. Each thread opens its own
    handle (writers of one process that wait at the same moment still share one transaction)."""


class LogBusy(LogError):
    """The write lock could not be taken within the busy timeout. Nothing was written; retry later."""


class TransactionFailed(LogError):
    """A write transaction could not be committed and was rolled back: nothing written inside it landed, and any
    state read inside it (including other writers' work it was shared with, see :meth:`storage.Log.run_in_transaction`)
    is void."""


class TransactionOutcomeUnknown(LogBusy):
    """A write transaction may or may not have committed. Look the commit id up (``commit_of``), or re-send the
    commit with the same id (commit ids are idempotent); any state read inside the transaction is void."""


class ConnectionLost(TransactionOutcomeUnknown):
    """The connection to a log server broke during a write transaction: it may or may not have committed. Look the
    commit id up (``commit_of``) on a new connection, or re-send the commit with the same id (commit ids are
    idempotent)."""


class SharedTransactionInterrupted(TransactionOutcomeUnknown):
    """The writer leading a transaction shared with this one (group commit) was interrupted (``KeyboardInterrupt``,
    ``SystemExit``) while it ran or committed the transaction: this writer's work may or may not have landed."""


class InvalidWrite(LogError):
    """A commit request the log refuses before touching anything: no events, a stream named twice, an event
    whose stream differs from its write, a commit id re-used for a different write."""


class StreamVersionConflict(LogError):
    """A stream was not at the version a commit was built on. Nothing was written; reload and retry.

    ::

        try:
            log.commit("c-2", (StreamWrite(stream="s", expected_version=3, events=events),), time_ms=now)
        except StreamVersionConflict as e:
            e.actual_version, e.winner_commit_id  # 5, "c-1"

    :param stream: the stream that moved on
    :param expected_version: the version the commit was built on
    :param actual_version: the stream's head at commit time
    :param winner_commit_id: the commit id of the first event after ``expected_version``; ``None`` when the stream
        is behind ``expected_version`` (nothing "won", the caller's base is in the future)
    :param commit_id: the commit id that was refused, when known
    """

    def __init__(self, *, stream: str, expected_version: int, actual_version: int,
                 winner_commit_id: str | None, commit_id: str | None = None) -> None:
        attempt = f"commit {commit_id!r}" if commit_id is not None else "commit"
        winner = f" (commit {winner_commit_id!r} landed first)" if winner_commit_id is not None else ""
        super().__init__(f"Cannot {attempt}: stream {stream!r} is at version {actual_version}, "
                         f"not {expected_version}{winner}")
        self.stream = stream
        self.expected_version = expected_version
        self.actual_version = actual_version
        self.winner_commit_id = winner_commit_id
        self.commit_id = commit_id


class LogIntegrityError(LogError):
    """The log does not hold what its invariants promise (a foreign writer, tampering, a broken chain).

    :param position: the log position where the problem shows
    :param reason: what is wrong there
    """

    def __init__(self, *, position: int, reason: str) -> None:
        super().__init__(f"Cannot trust the log at position {position}: {reason}")
        self.position = position
        self.reason = reason


class LogDamaged(LogError):
    """The log's database file is damaged (SQLite reports a malformed image, or the file is not a database, or a
    stored text is not valid UTF-8); names the file and, where one is known, the first damaged position.

    :param path: the database file
    :param position: the first log position found damaged, or None
    """

    def __init__(self, message: str, *, path: str, position: int | None = None) -> None:
        super().__init__(message)
        self.path = path
        self.position = position


class FileError(LogError):
    """A file operation failed.

    :param path: the path or URI the caller passed
    """

    def __init__(self, message: str, *, path: str) -> None:
        super().__init__(message)
        self.path = path


class FileNotFound(FileError):
    """The file or directory does not exist."""


class FileAlreadyExists(FileError):
    """The file exists and the operation refuses to replace it."""


class ProtectedFileError(FileError):
    """The location is a catalog database this process has open (or its ``-wal``, ``-shm`` or ``-journal``), under
    whatever name, symlink or hard link: it is never opened as data, since closing any descriptor on it releases
    SQLite's locks for the whole process."""
