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


def updated_name_mapping(entries: list[dict[str, Any]], schema: Schema) -> list[dict[str, Any]]:
    """A name mapping brought up to a new schema, as Java's ``MappingUtil.update`` after a schema change: a renamed
    field keeps its old names and gains the new one (files written before the rename still map), an added field
    gets an entry, a name now held by another field at the same level leaves the field that held it (an entry left
    without names goes), and entries of dropped fields stay (their files still hold the columns)."""
    return _update_level(entries, schema.columns)


def _update_level(entries: list[dict[str, Any]], fields: tuple[T.NestedField, ...] | list[T.NestedField]
                  ) -> list[dict[str, Any]]:
    current = {f.name: f.field_id for f in fields}
    by_id = {f.field_id: f for f in fields}
    out: list[dict[str, Any]] = []
    seen: set[int] = set()
    for entry in entries:
        fid = entry.get("field-id")
        field = by_id.get(fid) if isinstance(fid, int) else None
        names = [n for n in entry.get("names", []) if current.get(n, fid) == fid]  # names another field took
        updated = dict(entry, names=names)
        if field is not None:
            seen.add(field.field_id)
            if field.name not in names:
                updated["names"] = names + [field.name]
            children = _children(field.field_type)
            if children is not None:
                updated["fields"] = _update_level(list(entry.get("fields") or []), children)
        if updated["names"]:  # an entry left without names goes (PyIceberg refuses one)
            out.append(updated)
    out.extend(_entry(f.field_id, f.name, f.field_type) for f in fields if f.field_id not in seen)
    return out


def _children(t: T.IcebergType) -> list[T.NestedField] | None:
    """The nested fields a mapping entry of type ``t`` lists (list elements and map keys and values by their
    spec names), or None for a primitive."""
    if isinstance(t, T.StructType):
        return list(t.fields)
    if isinstance(t, T.ListType):
        return [t.element_field]
    if isinstance(t, T.MapType):
        return [t.key_field, t.value_field]
    return None
