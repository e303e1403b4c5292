"""Table identifiers and namespaces as users write them: ``"db.events"`` or ``("db", "events")``.

Layer: engine.model (pure values and functions; imports only engine.errors). The catalog, its time travel and
registration all parse names here; what names the warehouse allows is engine.ownership's to check.
"""

from __future__ import annotations

from typing import Sequence

from engine.errors import ValidationError


def parse_identifier(identifier: str | Sequence[str]) -> tuple[tuple[str, ...], str]:
    """``"db.events"`` or ``("db", "events")`` -> ``(("db",), "events")``."""
    parts = tuple(identifier.split(".")) if isinstance(identifier, str) else tuple(identifier)
    if len(parts) < 2 or any(not p for p in parts):
        raise ValidationError(f"Cannot parse table identifier {identifier!r}: expected 'namespace.table'")
    return parts[:-1], parts[-1]


def parse_namespace(namespace: str | Sequence[str]) -> tuple[str, ...]:
    """``"db.sub"`` or ``("db", "sub")`` -> ``("db", "sub")``."""
    parts = tuple(namespace.split(".")) if isinstance(namespace, str) else tuple(namespace)
    if not parts or any(not p for p in parts):
        raise ValidationError(f"Cannot parse namespace {namespace!r}")
    return parts
