"""icelog's engine: the Iceberg model, events, state, operations, scans and the public Catalog API.

Layer: engine (package root). ``from engine import Catalog`` is the entry point. ``Catalog`` and ``Table`` are
loaded on first use, so that importing a lower layer (``engine.model``, ``engine.state``) loads nothing above it.
"""

from typing import TYPE_CHECKING, Any

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

if TYPE_CHECKING:
    from engine.catalog import Catalog
    from engine.table import Table


def __getattr__(name: str) -> Any:
    if name == "Catalog":
        from engine.catalog import Catalog

        return Catalog
    if name == "Table":
        from engine.table import Table

        return Table
    raise AttributeError(f"module 'engine' has no attribute {name!r}")
