"""Iceberg table schemas: a frozen struct of fields with a schema id and identifier fields.

Layer: engine.model (pure values; imports only the standard library, attrs and engine.model / engine.errors).

A :class:`Schema` is validated when it is built (unique field ids, unique names per struct, valid
identifier fields) and indexes its fields once, so lookups by id or by dotted name are dictionary reads.
Names follow Iceberg Java: a nested field's full name joins its parents' names with dots, a list element is
``<list>.element``, and map keys and values are ``<map>.key`` and ``<map>.value``. Lookups also accept the
short names Java accepts, which leave out ``element`` and ``value`` (``points.x`` for ``points.element.x``).

:func:`assign_fresh_ids` numbers fields the way Java's ``TypeUtil.assignFreshIds`` does: all fields of a struct
first, in order, then each field's children; a list's element, and a map's key then value, before their types.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from typing import Any

import attrs

from engine.errors import UnsupportedTypeError, ValidationError
from engine.model.types import (
    DoubleType,
    FloatType,
    IcebergType,
    ListType,
    MapType,
    NestedField,
    is_int,
    PrimitiveType,
    V3_TYPES,
    StructType,
    UnknownType,
    field_from_json,
    field_to_json,
)
from engine.model.values import value_from_json

#: Field ids above this are reserved for metadata columns (``_file``, ``_pos``, delete-file columns).
MAX_USER_FIELD_ID = 2_147_483_447
#: Format v3 row lineage: the reserved metadata columns of every row's id and the sequence number of the commit
#: that last changed it (spec "Row Lineage"); written into data files only for rows a rewrite carries over.
ROW_ID_COLUMN = "_row_id"
ROW_ID_FIELD_ID = 2147483540
LAST_UPDATED_SEQUENCE_NUMBER_COLUMN = "_last_updated_sequence_number"
LAST_UPDATED_SEQUENCE_NUMBER_FIELD_ID = 2147483539
LINEAGE_FIELD_IDS = {ROW_ID_COLUMN: ROW_ID_FIELD_ID,
                     LAST_UPDATED_SEQUENCE_NUMBER_COLUMN: LAST_UPDATED_SEQUENCE_NUMBER_FIELD_ID}
LINEAGE_COLUMNS = tuple(LINEAGE_FIELD_IDS)

SCHEMA_TYPE = "struct"
SCHEMA_ID = "schema-id"
IDENTIFIER_FIELD_IDS = "identifier-field-ids"
FIELDS = "fields"

_ELEMENT = "element"
_KEY = "key"
_VALUE = "value"


@attrs.frozen
class _Position:
    """Where a field sits: its full name, its parent field id and whether a list or map encloses it."""

    full_name: str
    parent_id: int | None
    in_list_or_map: bool
    under_optional_struct: bool


@attrs.frozen
class Schema:
    """An Iceberg schema: the table's top-level fields, its id and its row-identifier fields.

    Usage::

        schema = Schema((NestedField(field_id=1, name="id", field_type=LongType(), required=True),
                         NestedField(field_id=2, name="data", field_type=StringType())),
                        schema_id=0, identifier_field_ids=(1,))
        schema.find_field("id").field_id  # 1
        Schema.from_json(schema.to_json()) == schema  # True

    :param fields: the top-level fields, in order
    :param schema_id: the schema's id in its table
    :param identifier_field_ids: ids of the required primitive fields that identify a row
    :raises ValidationError: on a duplicate field id, a duplicate name in one struct, or an invalid identifier field
    """

    fields: tuple[NestedField, ...] = attrs.field(converter=tuple)
    schema_id: int = 0
    identifier_field_ids: tuple[int, ...] = attrs.field(default=(), converter=tuple)
    _by_id: dict[int, NestedField] = attrs.field(init=False, eq=False, repr=False, hash=False)
    _positions: dict[int, _Position] = attrs.field(init=False, eq=False, repr=False, hash=False)
    _by_name: dict[str, int] = attrs.field(init=False, eq=False, repr=False, hash=False)
    _by_lower_name: dict[str, int | None] = attrs.field(init=False, eq=False, repr=False, hash=False)

    def __attrs_post_init__(self) -> None:
        by_id: dict[int, NestedField] = {}
        positions: dict[int, _Position] = {}
        full_names: dict[str, int] = {}
        short_names: dict[str, int] = {}
        for field, position, short_name in _walk(self.fields):
            if field.field_id in by_id:
                raise ValidationError(
                    f"Cannot create schema: field id {field.field_id} is used by both "
                    f"{positions[field.field_id].full_name!r} and {position.full_name!r}")
            if position.full_name in full_names:
                raise ValidationError(
                    f"Cannot create schema: more than one field is named {position.full_name!r} "
                    f"(ids {full_names[position.full_name]} and {field.field_id})")
            by_id[field.field_id] = field
            positions[field.field_id] = position
            full_names[position.full_name] = field.field_id
            if short_name != position.full_name:
                short_names.setdefault(short_name, field.field_id)
        by_name = dict(full_names)
        for name, field_id in short_names.items():
            by_name.setdefault(name, field_id)
        by_lower: dict[str, int | None] = {}
        for name, field_id in by_name.items():
            key = name.lower()
            # None marks a name that differs only in case from another: ambiguous without case.
            by_lower[key] = field_id if by_lower.get(key, field_id) == field_id else None
        object.__setattr__(self, "_by_id", by_id)
        object.__setattr__(self, "_positions", positions)
        object.__setattr__(self, "_by_name", by_name)
        object.__setattr__(self, "_by_lower_name", by_lower)
        self._check_identifier_fields()

    def _check_identifier_fields(self) -> None:
        seen: set[int] = set()
        for field_id in self.identifier_field_ids:
            if field_id in seen:
                raise ValidationError(f"Cannot use identifier field: id {field_id} is listed twice")
            seen.add(field_id)
            field = self._by_id.get(field_id)
            if field is None:
                raise ValidationError(f"Cannot use identifier field: id {field_id} is not in the schema")
            position = self._positions[field_id]
            name = position.full_name
            if not isinstance(field.field_type, PrimitiveType):
                raise ValidationError(
                    f"Cannot use identifier field: {name!r} is a {field.field_type}, not a primitive type")
            if isinstance(field.field_type, (FloatType, DoubleType)):
                raise ValidationError(f"Cannot use identifier field: {name!r} is a {field.field_type}")
            if not field.required:
                raise ValidationError(f"Cannot use identifier field: {name!r} is optional")
            if position.in_list_or_map:
                raise ValidationError(f"Cannot use identifier field: {name!r} is nested in a list or map")
            if position.under_optional_struct:
                raise ValidationError(f"Cannot use identifier field: {name!r} is nested in an optional struct")

    # -- structure -------------------------------------------------------------------------------------------

    def as_struct(self) -> StructType:
        """The schema's fields as a struct type."""
        return StructType(self.fields)

    @property
    def columns(self) -> tuple[NestedField, ...]:
        """The top-level fields."""
        return self.fields

    @property
    def highest_field_id(self) -> int:
        """The largest field id anywhere in the schema (0 for an empty schema)."""
        return max(self._by_id, default=0)

    @property
    def identifier_field_names(self) -> tuple[str, ...]:
        """Full names of the identifier fields, in the order of their ids in :attr:`identifier_field_ids`."""
        return tuple(self._positions[i].full_name for i in self.identifier_field_ids)

    # -- lookups ---------------------------------------------------------------------------------------------

    def index_by_id(self) -> dict[int, NestedField]:
        """Every field by id, list elements and map keys and values included (as NestedFields). A new dict."""
        return dict(self._by_id)

    def index_by_name(self) -> dict[str, int]:
        """Field ids by full dotted name, plus Java's short names (without ``element`` / ``value``). A new dict."""
        return dict(self._by_name)

    def find_field(self, name_or_id: str | int, *, case_sensitive: bool = True) -> NestedField:
        """The field with this id, or with this dotted name.

        :param name_or_id: a field id, or a full or short dotted name (``"location.lat"``)
        :param case_sensitive: when False, match names ignoring case
        :raises ValidationError: when no field matches
        """
        if isinstance(name_or_id, bool) or not isinstance(name_or_id, (int, str)):
            raise ValidationError(f"Cannot find field: {name_or_id!r} is neither a field id nor a name")
        if isinstance(name_or_id, int):
            field = self._by_id.get(name_or_id)
            if field is None:
                raise ValidationError(f"Cannot find field: id {name_or_id} is not in schema {self.schema_id}")
            return field
        if case_sensitive:
            field_id = self._by_name.get(name_or_id)
        else:
            field_id = self._by_lower_name.get(name_or_id.lower())
            if field_id is None and name_or_id.lower() in self._by_lower_name:
                raise ValidationError(f"Cannot find field: {name_or_id!r} matches more than one field ignoring case")
        if field_id is None:
            raise ValidationError(f"Cannot find field: {name_or_id!r} is not in schema {self.schema_id}")
        return self._by_id[field_id]

    def find_type(self, name_or_id: str | int, *, case_sensitive: bool = True) -> IcebergType:
        """The type of :meth:`find_field`'s field."""
        return self.find_field(name_or_id, case_sensitive=case_sensitive).field_type

    def find_column_name(self, field_id: int) -> str:
        """The full dotted name of a field (``"points.element.x"``).

        :raises ValidationError: when the id is not in the schema
        """
        position = self._positions.get(field_id)
        if position is None:
            raise ValidationError(f"Cannot find column name: id {field_id} is not in schema {self.schema_id}")
        return position.full_name

    def parent_id(self, field_id: int) -> int | None:
        """The id of the field that contains this one (a struct, list or map field), or None at the top level."""
        self.find_field(field_id)
        return self._positions[field_id].parent_id

    def is_in_list_or_map(self, field_id: int) -> bool:
        """Whether a list or a map encloses the field (such fields cannot be partition or identifier sources)."""
        self.find_field(field_id)
        return self._positions[field_id].in_list_or_map

    # -- JSON ------------------------------------------------------------------------------------------------

    def to_json(self) -> dict[str, Any]:
        """The Appendix C JSON object, keys in Java's order; ``identifier-field-ids`` only when there are some."""
        out: dict[str, Any] = {"type": SCHEMA_TYPE, SCHEMA_ID: self.schema_id}
        if self.identifier_field_ids:
            out[IDENTIFIER_FIELD_IDS] = list(self.identifier_field_ids)
        out[FIELDS] = [field_to_json(f) for f in self.fields]
        return out

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> Schema:
        """Parse the Appendix C JSON object (``schema-id`` defaults to 0, as in v1 metadata).

        :raises ValidationError: when the object is not a schema or the schema is invalid
        """
        if not isinstance(obj, dict) or obj.get("type") != SCHEMA_TYPE:
            raise ValidationError(f"Cannot parse schema: not a struct object: {obj!r}")
        fields = obj.get(FIELDS)
        if not isinstance(fields, list):
            raise ValidationError(f"Cannot parse schema: 'fields' is not a list: {fields!r}")
        schema_id = obj.get(SCHEMA_ID)
        identifier_ids = obj.get(IDENTIFIER_FIELD_IDS)
        if identifier_ids is not None and not isinstance(identifier_ids, list):
            raise ValidationError(f"Cannot parse schema: 'identifier-field-ids' is not a list: {identifier_ids!r}")
        for f in fields:
            if not isinstance(f, dict):
                raise ValidationError(f"Cannot parse schema field: not an object: {f!r}")
        return cls(tuple(field_from_json(f) for f in fields),
                   schema_id=0 if schema_id is None else _as_int(schema_id, SCHEMA_ID),
                   identifier_field_ids=tuple(_as_int(i, IDENTIFIER_FIELD_IDS) for i in identifier_ids or ()))

    def __str__(self) -> str:
        lines = [f"  {f.field_id}: {f.name}: {'required' if f.required else 'optional'} {f.field_type}"
                 for f in self.fields]
        return "table {\n" + "\n".join(lines) + ("\n" if lines else "") + "}"


def _as_int(value: Any, key: str) -> int:
    if not is_int(value):
        raise ValidationError(f"Cannot parse schema: {key!r} holds {value!r}, not a 32-bit integer")
    return value


def _walk(fields: tuple[NestedField, ...]) -> Iterator[tuple[NestedField, _Position, str]]:
    """Every field depth first with its position and Java's short name; element/key/value as NestedFields."""

    def visit_struct(struct_fields: tuple[NestedField, ...], prefix: str, short_prefix: str, parent_id: int | None,
                     in_list_or_map: bool, under_optional: bool) -> Iterator[tuple[NestedField, _Position, str]]:
        names: set[str] = set()
        for field in struct_fields:
            if not isinstance(field, NestedField):
                raise ValidationError(f"Cannot create schema: {field!r} in {prefix[:-1] or '<root>'!r} is not a "
                                      "NestedField")
            if field.name in names:
                raise ValidationError(f"Cannot create schema: struct {prefix[:-1] or '<root>'!r} has two fields named "
                                      f"{field.name!r}")
            names.add(field.name)
            yield from visit_field(field, prefix + field.name, short_prefix + field.name, parent_id, in_list_or_map,
                                   under_optional)

    def visit_field(field: NestedField, full_name: str, short_name: str, parent_id: int | None, in_list_or_map: bool,
                    under_optional: bool) -> Iterator[tuple[NestedField, _Position, str]]:
        yield field, _Position(full_name, parent_id, in_list_or_map, under_optional), short_name
        t = field.field_type
        if isinstance(t, StructType):
            yield from visit_struct(t.fields, full_name + ".", short_name + ".", field.field_id, in_list_or_map,
                                    under_optional or not field.required)
        elif isinstance(t, ListType):
            # Java's short names drop "element"
            yield from visit_field(t.element_field, f"{full_name}.{_ELEMENT}", short_name, field.field_id, True,
                                   under_optional)
        elif isinstance(t, MapType):
            # Java's short names keep "key" but drop "value"
            yield from visit_field(t.key_field, f"{full_name}.{_KEY}", f"{short_name}.{_KEY}", field.field_id, True,
                                   under_optional)
            yield from visit_field(t.value_field, f"{full_name}.{_VALUE}", short_name, field.field_id, True,
                                   under_optional)
        elif not isinstance(t, PrimitiveType):
            raise ValidationError(f"Cannot create schema: field {full_name!r} has an unknown type {t!r}")

    return visit_struct(tuple(fields), "", "", None, False, False)


# -- fresh ids -------------------------------------------------------------------------------------------------


def assign_fresh_ids(schema_or_fields: Schema | tuple[NestedField, ...], *, start: int = 1,
                     schema_id: int | None = None) -> Schema:
    """Renumber every field from ``start`` in the order of Java's ``TypeUtil.assignFreshIds``.

    The input ids may be anything (even duplicates) when a tuple of fields is given. Identifier fields of a
    Schema follow their fields to the new ids.

    :param schema_or_fields: a Schema, or top-level fields whose ids are to be replaced
    :param start: the first id to hand out
    :param schema_id: the new schema's id (default: the input schema's id, or 0)
    """
    next_id = itertools.count(start).__next__

    if isinstance(schema_or_fields, Schema):
        old = schema_or_fields
        fields = _fresh_struct_fields(old.fields, next_id)
        new_schema = Schema(fields, schema_id=old.schema_id if schema_id is None else schema_id)
        if not old.identifier_field_ids:
            return new_schema
        names = old.identifier_field_names
        return attrs.evolve(new_schema,
                            identifier_field_ids=tuple(new_schema.find_field(n).field_id for n in names))
    fields = _fresh_struct_fields(tuple(schema_or_fields), next_id)
    return Schema(fields, schema_id=0 if schema_id is None else schema_id)


def _fresh_struct_fields(fields: tuple[NestedField, ...], next_id: Callable[[], int]) -> tuple[NestedField, ...]:
    new_ids = [next_id() for _ in fields]
    return tuple(attrs.evolve(f, field_id=new_id, field_type=_fresh_type(f.field_type, next_id))
                 for f, new_id in zip(fields, new_ids))


def _fresh_type(t: IcebergType, next_id: Callable[[], int]) -> IcebergType:
    if isinstance(t, StructType):
        return StructType(_fresh_struct_fields(t.fields, next_id))
    if isinstance(t, ListType):
        element_id = next_id()
        return attrs.evolve(t, element_id=element_id, element_type=_fresh_type(t.element_type, next_id))
    if isinstance(t, MapType):
        key_id = next_id()
        value_id = next_id()
        key_type = _fresh_type(t.key_type, next_id)
        value_type = _fresh_type(t.value_type, next_id)
        return attrs.evolve(t, key_id=key_id, key_type=key_type, value_id=value_id, value_type=value_type)
    return t


def check_lineage_names(schema: Schema, format_version: int, where: str = "schema") -> None:
    """From format version 3 the top-level names ``_row_id`` and ``_last_updated_sequence_number`` are the row
    lineage columns rewritten data files carry (spec "Reserved Field IDs"): a column of that name would stand beside
    them in a file, which readers refuse (PyIceberg: "multiple fields for name").

    :raises ValidationError: naming the column
    """
    if format_version < 3:
        return
    for f in schema.fields:
        if f.name in LINEAGE_FIELD_IDS:
            raise ValidationError(f"Cannot use {where}: column {f.name!r} has the name of a row lineage column, "
                                  f"which format version 3 reserves")


def check_schema_for_format(schema: Schema, format_version: int, where: str = "schema") -> None:
    """Refuse what a table of ``format_version`` cannot hold or icelog cannot honour: the names of the row lineage
    columns from version 3 (:func:`check_lineage_names`), format v3 types
    (``timestamp_ns``, ``timestamptz_ns``, ``unknown``, ``variant``) before version 3, a required ``unknown``
    column, and default values (``initial-default``, ``write-default``) before version 3, on a non-primitive field
    or one inside a list or map (icelog fills defaults of primitive fields reached through structs), or not of their
    field's type.

    :raises UnsupportedTypeError: for a v3 type in an older table, naming the column
    :raises ValidationError: naming the field
    """
    check_lineage_names(schema, format_version, where)
    # fields reached through structs only (the top level included): icelog fills their defaults on read and write
    in_structs = {f.field_id for f in schema.fields}
    stack: list[tuple[NestedField, str]] = [(f, f.name) for f in reversed(schema.fields)]  # in schema order
    while stack:
        field, name = stack.pop()
        if isinstance(field.field_type, StructType) and field.field_id in in_structs:
            in_structs.update(c.field_id for c in field.field_type.fields)
        t = field.field_type
        if isinstance(t, V3_TYPES) and format_version < 3:
            raise UnsupportedTypeError(f"Cannot use {where}: column {name!r} is a {t}, which needs format version 3 "
                                       f"(the table is v{format_version})")
        if isinstance(t, UnknownType) and field.required:
            raise ValidationError(f"Cannot use {where}: column {name!r} is of type unknown, which must be optional")
        for key, value in (("initial-default", field.initial_default), ("write-default", field.write_default)):
            if value is None:
                continue
            if format_version < 3:
                raise ValidationError(f"Cannot use {where}: column {name!r} has an {key}, which needs format "
                                      f"version 3 (the table is v{format_version})")
            if field.field_id not in in_structs or not isinstance(t, PrimitiveType):
                raise ValidationError(f"Cannot use {where}: column {name!r} has an {key}; icelog takes default "
                                      f"values of primitive columns at the top level or inside structs only")
            try:
                if isinstance(t, (FloatType, DoubleType)) and isinstance(value, str):
                    raise ValidationError("JSON numbers have no NaN or infinities")  # Java reads no other form
                value_from_json(t, value)
            except (ValidationError, ValueError, TypeError, OverflowError, KeyError) as e:
                raise ValidationError(f"Cannot use {where}: the {key} {value!r} of column {name!r} is not a "
                                      f"{t}") from e
        if isinstance(t, StructType):
            stack += [(c, f"{name}.{c.name}") for c in reversed(t.fields)]
        elif isinstance(t, ListType):
            stack.append((t.element_field, f"{name}.element"))
        elif isinstance(t, MapType):
            stack += [(t.value_field, f"{name}.value"), (t.key_field, f"{name}.key")]
