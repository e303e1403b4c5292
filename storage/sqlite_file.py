"""The catalog's SQLite file itself: made atomically when missing, refused when empty or foreign, searched for the
first damaged text when SQLite reports one; a connection used from a thread not its own, told by name.

Layer: storage. May touch: the file at a path (``os``, ``sqlite3``), ``storage.errors`` and the process's registry of
open databases (``storage.files``); nothing of Iceberg. :class:`storage.log.Log` calls these as it opens its
connection, and when a read reports a damaged file.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
import time
from pathlib import Path

import sqlite_utils

from storage.errors import LogDamaged, WrongThread
from storage.files import OPEN_DATABASES

#: the first 16 bytes of every SQLite database file
SQLITE_HEADER = b"SQLite format 3\x00"
#: the SQLite error codes that mean a damaged file or not a database at all
DAMAGE_CODES = (sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB)


def wrong_thread(error: sqlite3.Error, path: str | os.PathLike[str], what: str) -> WrongThread | None:
    """:class:`WrongThread` naming the file when ``error`` is SQLite's refusal of a connection used from a thread
    other than the one that opened it (``what``: the thing used, "the log" or "the derived tables"); else None."""
    if isinstance(error, sqlite3.ProgrammingError) and "same thread" in str(error):
        return WrongThread(f"Cannot use {what} from this thread: {path} was opened by another one, and a catalog "
                           f"handle belongs to the thread that opened it (open one per thread)")
    return None


def create_database_file(path: Path) -> None:
    """Put a new, valid SQLite file at ``path`` when nothing is there, atomically: it is built under a temporary
    name and linked into place, so no process ever sees a half-made (empty) catalog file of icelog's making, and
    of several processes racing to create it one wins and the others open the winner's."""
    if path.exists():
        return
    temp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    try:
        conn = sqlite3.connect(temp, isolation_level=None)
        try:
            conn.execute("PRAGMA user_version = 0")
            conn.execute("CREATE TABLE IF NOT EXISTS _icelog_created (x)")  # a first page: a real header
            conn.execute("DROP TABLE _icelog_created")
        finally:
            conn.close()
        try:
            os.link(temp, path)
        except FileExistsError:
            pass
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temp)


def check_database_file(path: Path, *, create: bool) -> None:
    """Refuse an existing file that is empty (unless ``create``) or that is not an SQLite database at all."""
    try:
        with open(path, "rb") as f:
            header = f.read(len(SQLITE_HEADER))
    except FileNotFoundError:
        return
    except IsADirectoryError as e:
        raise LogDamaged(f"Cannot open the log: {path} is a folder", path=str(path)) from e
    if not header:
        if create:
            return
        raise LogDamaged(f"Cannot open the log: {path} exists but is empty (0 bytes): a catalog that lost its "
                         f"content; restore it, or pass create=True (CLI: --create) to start a new catalog there",
                         path=str(path))
    if header != SQLITE_HEADER:
        raise LogDamaged(f"Cannot open the log: {path} is not an SQLite database (it is never overwritten)",
                         path=str(path))


def register_database_file(path: Path, *, create: bool) -> None:
    """Make the file when missing, and count the connection about to open it in :data:`OPEN_DATABASES` (the
    caller discards it if connecting fails). An existing file is checked (:func:`check_database_file`) only while
    the process holds no other connection to it: closing the descriptor that reads its header would drop their
    locks, and a file another connection holds open is a database already."""
    create_database_file(path)
    OPEN_DATABASES.add(str(path), check=lambda: check_database_file(path, create=create))


def enable_wal(db: sqlite_utils.Database, busy_timeout_ms: int) -> None:
    """Switch the database to WAL. That needs an exclusive lock, and SQLite answers BUSY at once (no busy handler)
    when several connections race to do it: retried until the busy timeout is spent."""
    deadline = time.monotonic() + busy_timeout_ms / 1000
    while True:
        try:
            db.enable_wal()
            return
        except sqlite3.OperationalError as e:
            if e.sqlite_errorcode != sqlite3.SQLITE_BUSY or time.monotonic() >= deadline:
                raise
            time.sleep(0.005)


def first_undecodable_position(path: Path) -> int | None:
    """The first event position whose stored text is not valid UTF-8 (read on a side connection)."""
    try:
        conn = sqlite3.connect(path)
    except sqlite3.Error:
        return None
    try:
        conn.text_factory = bytes
        rows = conn.execute("SELECT * FROM events ORDER BY position")
        for row in rows:
            for value in row:
                if isinstance(value, bytes):
                    try:
                        value.decode("utf-8")
                    except UnicodeDecodeError:
                        return int(row[0])
        for position, body in conn.execute("SELECT position, body FROM event_parts ORDER BY position"):
            try:
                body.decode("utf-8")
            except (UnicodeDecodeError, AttributeError):
                return int(position)
    except sqlite3.Error:
        return None
    finally:
        conn.close()
    return None
