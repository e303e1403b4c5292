"""Name mapping: how readers find the columns of data files written without Iceberg field ids.

Layer: engine.model (pure). ``schema.name-mapping.default`` is a JSON list of
``{"field-id", "names", "fields"}`` entries that map column names (at every nesting level) to
field ids, as the spec's "Column Projection" section describes.
"""

from __future__ import annotations

import json
from typing import Any

from engine.model import types as T
from engine.model.schema import Schema

NAME_MAPPING_PROPERTY = "schema.name-mapping.default"


def _fields(struct_fields: tuple[T.NestedField, ...]) -> list[dict[str, Any]]:
    return [_entry(f.field_id, f.name, f.field_type) for f in struct_fields]


def _entry(field_id: int, name: str, t: T.IcebergType) -> dict[str, Any]:
    out: dict[str, Any] = {"field-id": field_id, "names": [name]}
    if isinstance(t, T.StructType):
        out["fields"] = _fields(t.fields)
    elif isinstance(t, T.ListType):
        out["fields"] = [_entry(t.element_id, "element", t.element_type)]
    elif isinstance(t, T.MapType):
        out["fields"] = [_entry(t.key_id, "key", t.key_type), _entry(t.value_id, "value", t.value_type)]
    return out


def name_mapping(schema: Schema) -> list[dict[str, Any]]:
    """The name mapping that maps each column of ``schema`` by its current name."""
    return _fields(schema.columns)


def name_mapping_json(schema: Schema) -> str:
    return json.dumps(name_mapping(schema), separators=(",", ":"))
