"""Conversions between Iceberg schemas and Arrow schemas, with Parquet field ids.

Layer: engine.model (pure values; imports pyarrow, attrs and engine.model / engine.errors; touches no file).

:func:`schema_to_arrow` gives the Arrow schema the engine writes Parquet with: every field, list elements and
map keys and values included, carries ``PARQUET:field_id`` metadata, which pyarrow writes as the Parquet field
id that Iceberg readers (Java/Spark, PyIceberg) project by. Format v3 types: ``timestamp_ns``/``timestamptz_ns``
map to nanosecond timestamps (an Arrow nanosecond timestamp still reads as ``timestamp``/``timestamptz``, as
before, since older tables cannot hold nanoseconds), ``unknown`` to Arrow's null type and ``variant`` to the
unshredded (metadata, value) struct marked ``arrow.parquet.variant`` (:mod:`engine.model.variant`). ``uuid`` maps
to Arrow's canonical ``arrow.uuid`` extension type (``pa.uuid()``), which is what PyIceberg 0.12 maps uuid to;
pyarrow writes it as a 16-byte FIXED_LEN_BYTE_ARRAY with the Parquet UUID logical type, as Iceberg Java does.

:func:`schema_from_arrow` reads an Arrow schema back: with the field ids it carries, or, when it carries none,
with fresh ids assigned like Java's ``TypeUtil.assignFreshIds``.
"""

from __future__ import annotations

from typing import Any

import attrs
import pyarrow as pa

from engine.errors import ValidationError
from engine.model.schema import Schema, assign_fresh_ids
from engine.model.types import (
    BinaryType,
    BooleanType,
    DateType,
    DecimalType,
    DoubleType,
    FixedType,
    FloatType,
    IcebergType,
    IntegerType,
    ListType,
    LongType,
    MapType,
    NestedField,
    StringType,
    StructType,
    TimestampNsType,
    TimestampType,
    TimestamptzNsType,
    TimestamptzType,
    TimeType,
    UnknownType,
    UUIDType,
    VariantType,
)
from engine.model.variant import VARIANT_FIELD_METADATA, VARIANT_STORAGE_TYPE, is_variant_field

#: The Arrow field-metadata key pyarrow reads and writes Parquet field ids under.
FIELD_ID_KEY = b"PARQUET:field_id"
#: The Arrow field-metadata key for a field's doc string (PyIceberg uses the same key).
DOC_KEY = b"doc"

_ELEMENT = "element"
_KEY = "key"
_VALUE = "value"
_NO_ID = -1

_PRIMITIVES: dict[type, pa.DataType] = {
    BooleanType: pa.bool_(),
    IntegerType: pa.int32(),
    LongType: pa.int64(),
    FloatType: pa.float32(),
    DoubleType: pa.float64(),
    DateType: pa.date32(),
    TimeType: pa.time64("us"),
    TimestampType: pa.timestamp("us"),
    TimestamptzType: pa.timestamp("us", tz="UTC"),
    TimestampNsType: pa.timestamp("ns"),
    TimestamptzNsType: pa.timestamp("ns", tz="UTC"),
    UnknownType: pa.null(),
    VariantType: VARIANT_STORAGE_TYPE,
    StringType: pa.string(),
    UUIDType: pa.uuid(),
    BinaryType: pa.binary(),
}


# -- Iceberg -> Arrow --------------------------------------------------------------------------------------------


def arrow_field_id(f: pa.Field) -> int | None:
    """The Iceberg field id a pyarrow field carries in its ``PARQUET:field_id`` metadata (None when absent or
    not a number)."""
    raw = (f.metadata or {}).get(FIELD_ID_KEY)
    try:
        return int(raw) if raw is not None else None
    except ValueError:
        return None


def arrow_children(t: pa.DataType) -> list[pa.Field]:
    """The child fields of a nested pyarrow type (struct fields, map key and item, list element); none for a
    primitive."""
    if pa.types.is_struct(t):
        return [t.field(i) for i in range(t.num_fields)]
    if pa.types.is_map(t):
        return [t.key_field, t.item_field]
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        return [t.value_field]
    return []


def arrow_carries_field_ids(schema: pa.Schema) -> bool:
    """Whether any field of ``schema``, at any depth, carries an Iceberg field id."""
    stack = list(schema)
    while stack:
        f = stack.pop()
        if arrow_field_id(f) is not None:
            return True
        stack += arrow_children(f.type)
    return False


def schema_to_arrow(schema: Schema) -> pa.Schema:
    """The Arrow schema for writing a schema's rows to Parquet, field ids on every field.

    :param schema: the Iceberg schema
    """
    return pa.schema([_arrow_field(f) for f in schema.fields])


def empty_arrow_table(schema: Schema) -> pa.Table:
    """A table with no rows in :func:`schema_to_arrow`'s schema.

    Use this rather than ``pa.Schema.empty_table()``, which pyarrow 26 refuses for ``uuid`` inside a list,
    map or struct.

    :param schema: the Iceberg schema
    """
    target = schema_to_arrow(schema)
    return pa.Table.from_arrays([pa.nulls(0, type=f.type) for f in target], schema=target)


def arrow_type_for(iceberg_type: IcebergType) -> pa.DataType:
    """The Arrow type that holds an Iceberg type (nested children carry their field ids).

    :param iceberg_type: any Iceberg type
    :raises ValidationError: for a type Arrow cannot hold
    """
    t = iceberg_type
    primitive = _PRIMITIVES.get(type(t))
    if primitive is not None:
        return primitive
    if isinstance(t, DecimalType):
        return pa.decimal128(t.precision, t.scale)
    if isinstance(t, FixedType):
        return pa.binary(t.length)
    if isinstance(t, StructType):
        return pa.struct([_arrow_field(f) for f in t.fields])
    if isinstance(t, ListType):
        return pa.list_(_arrow_field(t.element_field))
    if isinstance(t, MapType):
        return pa.map_(_arrow_field(t.key_field), _arrow_field(t.value_field))
    raise ValidationError(f"Cannot convert type to Arrow: {t!r}")


def _arrow_field(field: NestedField) -> pa.Field:
    metadata = {FIELD_ID_KEY: str(field.field_id).encode()}
    if field.doc is not None:
        metadata[DOC_KEY] = field.doc.encode()
    if isinstance(field.field_type, VariantType):
        metadata.update(VARIANT_FIELD_METADATA)
    return pa.field(field.name, arrow_type_for(field.field_type), nullable=not field.required, metadata=metadata)


# -- Arrow -> Iceberg --------------------------------------------------------------------------------------------


def schema_from_arrow(pa_schema: pa.Schema, *, schema_id: int = 0) -> Schema:
    """The Iceberg schema of an Arrow schema.

    When every field (list elements and map keys and values included) carries ``PARQUET:field_id`` those ids
    are used; when none does, ids are assigned from 1 in the order of Java's ``assignFreshIds``. Non-nullable
    fields become required.

    :param pa_schema: the Arrow schema
    :param schema_id: the id of the resulting schema
    :raises ValidationError: for a type Iceberg cannot hold (unsigned ints, float16, durations, ...) naming the
        field, for field ids on some fields but not others, and for an invalid resulting schema
    """
    if not isinstance(pa_schema, pa.Schema):
        raise ValidationError(f"Cannot convert Arrow schema: expected a pyarrow.Schema, got {type(pa_schema).__name__}")
    converter = _FromArrow()
    fields = tuple(converter.field(f, f.name) for f in pa_schema)
    if converter.with_id and converter.without_id:
        raise ValidationError(
            "Cannot convert Arrow schema: some fields carry PARQUET:field_id and some do not, "
            f"e.g. {converter.without_id[0]!r} has none")
    if converter.without_id:
        return assign_fresh_ids(fields, start=1, schema_id=schema_id)
    return Schema(fields, schema_id=schema_id)


@attrs.define
class _FromArrow:
    """One conversion: remembers which field paths carried ids and which did not."""

    with_id: list[str] = attrs.field(factory=list)
    without_id: list[str] = attrs.field(factory=list)

    def field_id(self, field: pa.Field, path: str) -> int:
        raw = field.metadata.get(FIELD_ID_KEY) if field.metadata else None
        if raw is None:
            self.without_id.append(path)
            return _NO_ID
        try:
            field_id = int(raw)
        except ValueError as e:
            raise ValidationError(f"Cannot convert Arrow field {path!r}: field id {raw!r} is not an integer") from e
        self.with_id.append(path)
        return field_id

    def field(self, field: pa.Field, path: str) -> NestedField:
        field_id = self.field_id(field, path)
        doc = field.metadata.get(DOC_KEY) if field.metadata else None
        field_type = VariantType() if is_variant_field(field) else self.type(field.type, path)
        return NestedField(field_id=field_id, name=field.name, field_type=field_type,
                           required=not field.nullable, doc=doc.decode() if doc is not None else None)

    def type(self, t: pa.DataType, path: str) -> IcebergType:
        if isinstance(t, pa.UuidType):
            return UUIDType()
        if isinstance(t, pa.BaseExtensionType):
            raise ValidationError(f"Cannot convert Arrow field {path!r}: unsupported extension type {t}")
        if pa.types.is_dictionary(t):
            return self.type(t.value_type, path)
        if pa.types.is_struct(t):
            return StructType(tuple(self.field(t.field(i), f"{path}.{t.field(i).name}") for i in range(t.num_fields)))
        if pa.types.is_map(t):
            key, item = t.key_field, t.item_field
            key_path, value_path = f"{path}.{_KEY}", f"{path}.{_VALUE}"
            key_id = self.field_id(key, key_path)
            value_id = self.field_id(item, value_path)
            return MapType(key_id=key_id, key_type=self.type(key.type, key_path), value_id=value_id,
                           value_type=self.type(item.type, value_path), value_required=not item.nullable)
        if _is_list(t):
            element = t.value_field
            element_path = f"{path}.{_ELEMENT}"
            element_id = self.field_id(element, element_path)
            return ListType(element_id=element_id, element_type=self.type(element.type, element_path),
                            element_required=not element.nullable)
        return _primitive_from_arrow(t, path)


def _is_list(t: pa.DataType) -> bool:
    return (pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t)
            or pa.types.is_list_view(t) or pa.types.is_large_list_view(t))


def _primitive_from_arrow(t: pa.DataType, path: str) -> IcebergType:
    types = pa.types
    if types.is_null(t):
        return UnknownType()
    if types.is_boolean(t):
        return BooleanType()
    if types.is_signed_integer(t):
        return LongType() if t.bit_width == 64 else IntegerType()
    if types.is_floating(t):
        if types.is_float32(t):
            return FloatType()
        if types.is_float64(t):
            return DoubleType()
    elif types.is_decimal(t):
        return _decimal(t, path)
    elif types.is_string(t) or types.is_large_string(t) or types.is_string_view(t):
        return StringType()
    elif types.is_binary(t) or types.is_large_binary(t) or types.is_binary_view(t):
        return BinaryType()
    elif types.is_fixed_size_binary(t):
        return FixedType(t.byte_width)
    elif types.is_date32(t) or types.is_date64(t):
        return DateType()
    elif types.is_time32(t) or types.is_time64(t):
        return TimeType()
    elif types.is_timestamp(t):
        return TimestamptzType() if t.tz is not None else TimestampType()
    raise ValidationError(f"Cannot convert Arrow field {path!r}: type {t} has no Iceberg equivalent")


def _decimal(t: Any, path: str) -> DecimalType:
    try:
        return DecimalType(t.precision, t.scale)
    except ValidationError as e:
        raise ValidationError(f"Cannot convert Arrow field {path!r}: {t} is not a valid Iceberg decimal "
                              "(precision 1..38, scale 0..precision)") from e
