"""icelog's engine: the Iceberg model, events, state, operations, scans and the public Catalog API.

Layer: engine (package root). ``from engine import Catalog`` is the entry point.
"""

from engine.catalog import Catalog, Table
from engine.errors import (
    AlreadyExists,
    CommitConflict,
    CommitStateUnknown,
    CorruptFileError,
    IcelogError,
    IntegrityError,
    MissingFileError,
    NamespaceNotFound,
    NotFound,
    TableNotFound,
    UnsupportedTypeError,
    ValidationError,
)

__all__ = ["Catalog", "Table", "IcelogError", "ValidationError", "CommitConflict", "CommitStateUnknown",
           "CorruptFileError", "NotFound", "NamespaceNotFound", "TableNotFound", "AlreadyExists", "IntegrityError",
           "UnsupportedTypeError", "MissingFileError"]
