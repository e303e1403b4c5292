"""Iceberg data types: the spec's primitive and nested types as frozen values.

Layer: engine.model (pure values; imports only the standard library and attrs).
Each type prints its spec string (``str(t)``) and parses back from it
(:func:`parse_type`); :func:`type_to_json` / :func:`type_from_json` give the
JSON form of the spec's Appendix C.
"""

from __future__ import annotations

import re
from typing import Any

import attrs

from engine.errors import UnsupportedTypeError, ValidationError


@attrs.frozen
class IcebergType:
    """Base of every Iceberg type."""

    @property
    def is_primitive(self) -> bool:
        return isinstance(self, PrimitiveType)

    @property
    def is_nested(self) -> bool:
        return not self.is_primitive


@attrs.frozen
class PrimitiveType(IcebergType):
    """A type with no children; its identity is its spec string."""

    def __str__(self) -> str:
        return _PRIMITIVE_NAMES[type(self)]


@attrs.frozen
class BooleanType(PrimitiveType):
    pass


@attrs.frozen
class IntegerType(PrimitiveType):
    pass


@attrs.frozen
class LongType(PrimitiveType):
    pass


def is_int(value: Any) -> bool:
    """Whether ``value`` is an int an Iceberg int holds (32 bits, signed: ids are Java ints); a bool is not one."""
    return isinstance(value, int) and not isinstance(value, bool) and -(2**31) <= value < 2**31


def is_long(value: Any) -> bool:
    """Whether ``value`` is an int an Iceberg long holds (64 bits, signed); a bool is not one."""
    return isinstance(value, int) and not isinstance(value, bool) and -(2**63) <= value < 2**63


@attrs.frozen
class FloatType(PrimitiveType):
    pass


@attrs.frozen
class DoubleType(PrimitiveType):
    pass


@attrs.frozen
class DateType(PrimitiveType):
    pass


@attrs.frozen
class TimeType(PrimitiveType):
    pass


@attrs.frozen
class TimestampType(PrimitiveType):
    pass


@attrs.frozen
class TimestamptzType(PrimitiveType):
    pass


@attrs.frozen
class TimestampNsType(PrimitiveType):
    """Nanoseconds since 1970-01-01T00:00:00, no zone (format v3)."""


@attrs.frozen
class TimestamptzNsType(PrimitiveType):
    """Nanoseconds since 1970-01-01T00:00:00 UTC (format v3)."""


@attrs.frozen
class StringType(PrimitiveType):
    pass


@attrs.frozen
class UUIDType(PrimitiveType):
    pass


@attrs.frozen
class BinaryType(PrimitiveType):
    pass


@attrs.frozen
class UnknownType(PrimitiveType):
    """A column whose type is not known yet (format v3): always optional and null, never stored in data files,
    promotable to any type."""


@attrs.frozen
class VariantType(PrimitiveType):
    """Semi-structured values in the Variant binary encoding (format v3): no bounds, no partitioning, no sorting.
    Taken as primitive here because it has no child fields in the schema."""


@attrs.frozen
class DecimalType(PrimitiveType):
    precision: int
    scale: int

    def __attrs_post_init__(self) -> None:
        if not 1 <= self.precision <= 38:
            raise ValidationError(f"Cannot create decimal type: precision {self.precision} is not in 1..38")
        if not 0 <= self.scale <= self.precision:
            raise ValidationError(f"Cannot create decimal type: scale {self.scale} is not in 0..{self.precision}")

    def __str__(self) -> str:
        return f"decimal({self.precision}, {self.scale})"


@attrs.frozen
class FixedType(PrimitiveType):
    length: int

    def __attrs_post_init__(self) -> None:
        if self.length < 1:
            raise ValidationError(f"Cannot create fixed type: length {self.length} must be positive")

    def __str__(self) -> str:
        return f"fixed[{self.length}]"


@attrs.frozen(kw_only=True)
class NestedField:
    """A named, id-carrying field of a struct (or of a schema).

    ``initial_default`` and ``write_default`` (format v3) are kept in their JSON single-value form (spec Appendix
    D), as the schema JSON carries them: the value of the field in rows written before it existed, and the value a
    writer gives rows that lack it. None means no default (nulls).
    """

    field_id: int
    name: str
    field_type: IcebergType
    required: bool = False
    doc: str | None = None
    initial_default: Any = None
    write_default: Any = None

    @property
    def optional(self) -> bool:
        return not self.required


@attrs.frozen
class StructType(IcebergType):
    fields: tuple[NestedField, ...] = attrs.field(converter=tuple)

    def field_by_id(self, field_id: int) -> NestedField | None:
        for f in self.fields:
            if f.field_id == field_id:
                return f
        return None

    def field_by_name(self, name: str) -> NestedField | None:
        for f in self.fields:
            if f.name == name:
                return f
        return None

    def __str__(self) -> str:
        return "struct<" + ", ".join(f"{f.name}: {f.field_type}" for f in self.fields) + ">"


@attrs.frozen(kw_only=True)
class ListType(IcebergType):
    element_id: int
    element_type: IcebergType
    element_required: bool = False

    @property
    def element_field(self) -> NestedField:
        return NestedField(field_id=self.element_id, name="element", field_type=self.element_type,
                           required=self.element_required)

    def __str__(self) -> str:
        return f"list<{self.element_type}>"


@attrs.frozen(kw_only=True)
class MapType(IcebergType):
    key_id: int
    key_type: IcebergType
    value_id: int
    value_type: IcebergType
    value_required: bool = False

    @property
    def key_field(self) -> NestedField:
        return NestedField(field_id=self.key_id, name="key", field_type=self.key_type, required=True)

    @property
    def value_field(self) -> NestedField:
        return NestedField(field_id=self.value_id, name="value", field_type=self.value_type,
                           required=self.value_required)

    def __str__(self) -> str:
        return f"map<{self.key_type}, {self.value_type}>"


_PRIMITIVE_NAMES: dict[type, str] = {
    BooleanType: "boolean",
    IntegerType: "int",
    LongType: "long",
    FloatType: "float",
    DoubleType: "double",
    DateType: "date",
    TimeType: "time",
    TimestampType: "timestamp",
    TimestamptzType: "timestamptz",
    TimestampNsType: "timestamp_ns",
    TimestamptzNsType: "timestamptz_ns",
    UnknownType: "unknown",
    VariantType: "variant",
    StringType: "string",
    UUIDType: "uuid",
    BinaryType: "binary",
}
_PRIMITIVES_BY_NAME: dict[str, PrimitiveType] = {name: cls() for cls, name in _PRIMITIVE_NAMES.items()}
_PRIMITIVES_BY_NAME["integer"] = IntegerType()
#: types a table may hold from format version 3 on
V3_TYPES = (TimestampNsType, TimestamptzNsType, UnknownType, VariantType)
#: timestamps with a nanosecond unit
NANO_TIMESTAMPS = (TimestampNsType, TimestamptzNsType)
_DECIMAL = re.compile(r"^decimal\(\s*(\d+)\s*,\s*(\d+)\s*\)$")
_FIXED = re.compile(r"^fixed\[\s*(\d+)\s*\]$")


def parse_type(text: str) -> PrimitiveType:
    """Parse a primitive type from its spec string (``"long"``, ``"decimal(10,2)"``, ``"fixed[16]"``)."""
    if not isinstance(text, str):
        raise ValidationError(f"Cannot parse type: expected a string, got {type(text).__name__} {text!r}")
    key = text.strip().lower()
    if key in _PRIMITIVES_BY_NAME:
        return _PRIMITIVES_BY_NAME[key]
    if m := _DECIMAL.match(key):
        return DecimalType(int(m.group(1)), int(m.group(2)))
    if m := _FIXED.match(key):
        return FixedType(int(m.group(1)))
    if key.startswith(("geometry", "geography")):
        raise UnsupportedTypeError(f"Cannot use type {text!r}: it is a format v3 type icelog does not support yet")
    raise ValidationError(f"Cannot parse type: unknown type {text!r}")


def type_to_json(t: IcebergType) -> Any:
    """The JSON form of a type (Appendix C): a string for primitives, an object for nested types."""
    if isinstance(t, PrimitiveType):
        return str(t)
    if isinstance(t, StructType):
        return {"type": "struct", "fields": [field_to_json(f) for f in t.fields]}
    if isinstance(t, ListType):
        return {"type": "list", "element-id": t.element_id, "element": type_to_json(t.element_type),
                "element-required": t.element_required}
    if isinstance(t, MapType):
        return {"type": "map", "key-id": t.key_id, "key": type_to_json(t.key_type), "value-id": t.value_id,
                "value": type_to_json(t.value_type), "value-required": t.value_required}
    raise ValidationError(f"Cannot serialize type: {t!r}")


def field_to_json(f: NestedField) -> dict[str, Any]:
    out: dict[str, Any] = {"id": f.field_id, "name": f.name, "required": f.required, "type": type_to_json(f.field_type)}
    if f.doc is not None:
        out["doc"] = f.doc
    if f.initial_default is not None:
        out["initial-default"] = f.initial_default
    if f.write_default is not None:
        out["write-default"] = f.write_default
    return out


def _member(obj: Any, key: str, kind: type | tuple[type, ...], what: str) -> Any:
    """``obj[key]`` of JSON kind ``kind`` (an int is never a bool, as Java's JsonUtil reads them)."""
    if not isinstance(obj, dict):
        raise ValidationError(f"Cannot parse {what}: expected a JSON object, got {obj!r}")
    if key not in obj:
        raise ValidationError(f"Cannot parse {what}: missing key {key!r} in {obj!r}")
    value = obj[key]
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        names = " or ".join(k.__name__ for k in (kind if isinstance(kind, tuple) else (kind,)))
        raise ValidationError(f"Cannot parse {what}: {key!r} must be a {names}, got {value!r}")
    if kind is int and not is_int(value):  # ids are Java ints: its parser refuses a wider number
        raise ValidationError(f"Cannot parse {what}: {key!r} must be a 32-bit integer, got {value!r}")
    return value


def field_from_json(obj: dict[str, Any]) -> NestedField:
    doc = obj.get("doc") if isinstance(obj, dict) else None
    if doc is not None and not isinstance(doc, str):
        raise ValidationError(f"Cannot parse field: 'doc' must be a str, got {doc!r}")
    return NestedField(field_id=_member(obj, "id", int, "field"), name=_member(obj, "name", str, "field"),
                       field_type=type_from_json(_member(obj, "type", (str, dict), "field")),
                       required=_member(obj, "required", bool, "field"), doc=doc,
                       initial_default=obj.get("initial-default"), write_default=obj.get("write-default"))


def type_from_json(obj: Any) -> IcebergType:
    """Parse a type from its Appendix C JSON form."""
    if isinstance(obj, str):
        return parse_type(obj)
    if not isinstance(obj, dict):
        raise ValidationError(f"Cannot parse type: {obj!r}")
    kind = obj.get("type")
    what = f"{kind} type"
    if kind == "struct":
        return StructType(tuple(field_from_json(f) for f in _member(obj, "fields", list, what)))
    if kind == "list":
        return ListType(element_id=_member(obj, "element-id", int, what),
                        element_type=type_from_json(_member(obj, "element", (str, dict), what)),
                        element_required=_member(obj, "element-required", bool, what))
    if kind == "map":
        return MapType(key_id=_member(obj, "key-id", int, what),
                       key_type=type_from_json(_member(obj, "key", (str, dict), what)),
                       value_id=_member(obj, "value-id", int, what),
                       value_type=type_from_json(_member(obj, "value", (str, dict), what)),
                       value_required=_member(obj, "value-required", bool, what))
    raise ValidationError(f"Cannot parse type: unknown nested type {kind!r}")
