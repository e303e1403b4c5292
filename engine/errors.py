"""The icelog exception hierarchy: one root, a small tree, every error names its culprit.

Layer: engine (imported by every engine module; imports nothing of ours).
"""

from __future__ import annotations

from typing import Any


class IcelogError(Exception):
    """Root of every error icelog raises on purpose.

    Errors pickle with their attributes (keyword-only constructor arguments included), so one raised in a worker
    process reaches the parent whole: a multiprocessing pool whose worker raises an unpicklable error hangs.
    """

    def __reduce__(self) -> tuple[Any, ...]:
        return _rebuild_error, (type(self), self.args, dict(self.__dict__))


def _rebuild_error(cls: type[IcelogError], args: tuple[Any, ...], attributes: dict[str, Any]) -> IcelogError:
    error = cls.__new__(cls)
    Exception.__init__(error, *args)
    error.__dict__.update(attributes)
    return error


class ValidationError(IcelogError):
    """Bad input: a wrong type, an invalid schema or spec, a value that cannot be used. Nothing was committed."""


class UnsupportedTypeError(ValidationError):
    """A type the spec defines that icelog does not support yet (the format v3 types ``geometry`` and
    ``geography``), or a format v3 type in a table of an older format version."""


class NotFound(IcelogError):
    """A namespace, table, snapshot or ref that does not exist."""


class NamespaceNotFound(NotFound):
    pass


class TableNotFound(NotFound):
    pass


class AlreadyExists(IcelogError):
    """A namespace or table that already exists."""


class NamespaceNotEmpty(IcelogError):
    """A namespace that cannot be dropped because it still holds tables."""


class CommitConflict(IcelogError):
    """A commit was built on a stale base; another commit won. Retryable.

    :param stream: the stream (table uuid or catalog stream) that moved on
    :param expected_version: the version the commit was built on
    :param actual_version: the version found at commit time
    :param winner: the commit id of the first commit that landed after the expected version, when known
    """

    def __init__(self, message: str, *, stream: str, expected_version: int, actual_version: int,
                 winner: str | None = None) -> None:
        super().__init__(message)
        self.stream = stream
        self.expected_version = expected_version
        self.actual_version = actual_version
        self.winner = winner


class CommitStateUnknown(IcelogError):
    """The outcome of a commit could not be determined (re-send it with the same commit id to learn it)."""


class CorruptFileError(IcelogError):
    """A file that is missing, unreadable, or not what it claims to be.

    :param path: the file
    """

    def __init__(self, message: str, *, path: str) -> None:
        super().__init__(message)
        self.path = path


class MissingFileError(CorruptFileError):
    """A file that does not exist: a mistyped path, or a file deleted behind the table's back.

    :param path: the file
    """


class StorageError(IcelogError):
    """A file could not be read, written or deleted for a reason outside the file itself: the store is
    unreachable, refuses the credentials, lacks the bucket, or answers errors. Nothing was committed.
    The message names the location, never a secret.

    :param path: the file or folder
    """

    def __init__(self, message: str, *, path: str) -> None:
        super().__init__(message)
        self.path = path


class PublishFailed(StorageError):
    """A commit landed in the log (its outcome is known: it is committed, and re-sending it is not needed), but its
    files could not be published, so readers of the metadata files still see the previous version. The next
    ``publish()`` (or commit) completes the projection from the log.

    :param table: the table's name
    :param version: the committed log version
    """

    def __init__(self, message: str, *, path: str, table: str, version: int) -> None:
        super().__init__(message, path=path)
        self.table = table
        self.version = version


def storage_error(e: Exception, path: str) -> IcelogError:
    """The engine error for a storage ``FileError``: a missing file is a :class:`MissingFileError` (the caller or
    the table names a file that is not there), anything else a :class:`StorageError`."""
    from storage.errors import FileNotFound

    if isinstance(e, FileNotFound):
        return MissingFileError(f"Cannot read file: {path} does not exist", path=path)
    return StorageError(str(e), path=path)


class IntegrityError(IcelogError):
    """The log or its projections do not match what they should be (tampering, damage, foreign writers).

    :param position: the log position where the damage shows, when known
    """

    def __init__(self, message: str, *, position: int | None = None) -> None:
        super().__init__(message)
        self.position = position


class ValidationConflict(IcelogError):
    """A concurrent commit changed what an operation read in a way its isolation level forbids. Not retryable.

    :param commit_id: the commit that caused the conflict
    :param snapshot_id: its snapshot, when it made one
    """

    def __init__(self, message: str, *, commit_id: str, snapshot_id: int | None = None) -> None:
        super().__init__(message)
        self.commit_id = commit_id
        self.snapshot_id = snapshot_id


class ForeignWriterError(IntegrityError):
    """A table's metadata folder holds a metadata file icelog did not publish (another writer committed behind
    the log's back, say a Spark job through a Hadoop catalog). Nothing was committed; the file is left alone.

    :param path: the foreign metadata file (or version hint)
    """

    def __init__(self, message: str, *, path: str) -> None:
        super().__init__(message)
        self.path = path


class PublishTimeout(IcelogError, TimeoutError):
    """A table's published projection did not catch up with a log version in time.

    :param table: the table's identifier (``db.events``)
    :param version: the log version waited for
    :param published: the published version when the wait gave up
    """

    def __init__(self, message: str, *, table: str, version: int, published: int) -> None:
        super().__init__(message)
        self.table = table
        self.version = version
        self.published = published


class RequirementFailed(CommitConflict):
    """A requirement of a commit (Iceberg REST's ``assert-*``) does not hold on the table's current state: the
    client built its change on a stale base. Retryable after reloading the table.

    :param stream: the table stream (or catalog stream) whose state failed the requirement
    """

    def __init__(self, message: str, *, stream: str) -> None:
        super().__init__(message, stream=stream, expected_version=-1, actual_version=-1)
