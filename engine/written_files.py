"""The files an operation writes for a table, followed until its commit decides what they become.

Layer: engine (I/O at the edge: deletes files through FileIO). ``Table.stage_file`` notes each file as it is about
to be written; the operations that may fail after writing collect them here (per thread, per table) and, when the
commit is refused, :func:`remove_unlanded` deletes them: only files the table owns, never another's or a user's.
"""

from __future__ import annotations

import contextlib
import threading
from typing import Iterator, Sequence

from engine.errors import CommitStateUnknown, PublishFailed, StorageError
from engine.ownership import Ownership
from storage import FileError, FileNotFound
from storage.files import FileIO

#: per thread, the operations collecting the files they write: (table uuid, paths), innermost last
_COLLECTING = threading.local()


@contextlib.contextmanager
def collecting(table_uuid: str, written: list[str]) -> Iterator[list[str]]:
    """Add to ``written`` every file this thread notes for the table (:func:`note`) inside the block."""
    stack = _COLLECTING.__dict__.setdefault("stack", [])
    stack.append((table_uuid, written))
    try:
        yield written
    finally:
        stack.pop()


def note(table_uuid: str, path: str) -> None:
    """A file about to be written for the table: every collection of this thread open for it records it."""
    for collecting_uuid, written in getattr(_COLLECTING, "stack", ()):
        if collecting_uuid == table_uuid:
            written.append(path)


def may_have_landed(error: BaseException) -> bool:
    """Whether the commit that ``error`` interrupted may be in the log, so that the files it wrote must stay: it
    landed and only its publish failed (``PublishFailed``), its outcome is unknown (``CommitStateUnknown``), or an
    interrupt (``KeyboardInterrupt``, ``SystemExit``) came at a moment no one can tell."""
    return isinstance(error, (PublishFailed, CommitStateUnknown)) or not isinstance(error, Exception)


def remove_unlanded(io: FileIO, owned: Ownership, paths: Sequence[str]) -> list[str]:
    """Delete files written for a commit that did not land; the paths gone afterwards (deleted or never written).
    A path the table does not own is left alone; one that cannot be deleted now stays (for remove_orphan_files)."""
    gone = []
    for path in paths:
        if not owned.owns(path):
            continue
        try:
            io.delete(path)
            gone.append(path)
        except FileNotFound:
            gone.append(path)
        except (FileError, StorageError, OSError):
            continue
    return gone
