"""icelog's storage layer: the append-only event log (SQLite, or PostgreSQL for many hosts) and warehouse file IO.

Layer: storage. Imports nothing else of ours and knows nothing of Iceberg; ``engine`` and ``projections`` build on it.

::

    from storage import Log, NewEvent, StreamWrite, FileIO

    with Log.open("warehouse/catalog.db") as log:
        event = NewEvent(stream="t1", type="table-created", type_version=1, payload="{}")
        log.commit("c-1", (StreamWrite(stream="t1", expected_version=0, events=(event,)),), time_ms=0)
"""

from storage.errors import (
    FileAlreadyExists,
    FileError,
    FileNotFound,
    InvalidWrite,
    LogBusy,
    LogClosed,
    LogError,
    LogIntegrityError,
    StreamVersionConflict,
    TransactionFailed,
    WrongThread,
)
from storage.contract import (
    APPEND_ONLY_MESSAGE,
    GENESIS_HASH,
    CommitResult,
    EventLog,
    NewEvent,
    StoredEvent,
    StreamWrite,
    event_hash,
)
from storage.files import FileIO
from storage.log import Log

__all__ = [
    "APPEND_ONLY_MESSAGE",
    "GENESIS_HASH",
    "CommitResult",
    "EventLog",
    "FileAlreadyExists",
    "FileError",
    "FileIO",
    "FileNotFound",
    "InvalidWrite",
    "Log",
    "LogBusy",
    "LogClosed",
    "LogError",
    "LogIntegrityError",
    "NewEvent",
    "StoredEvent",
    "StreamVersionConflict",
    "StreamWrite",
    "TransactionFailed",
    "WrongThread",
    "event_hash",
]
