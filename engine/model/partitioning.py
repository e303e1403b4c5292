"""Partition specs: fields, their JSON form, building specs from terms, and partition paths.

Layer: engine.model (pure values and functions; imports the standard library, attrs, engine.errors and
engine.model.types / schema / transforms / values).

Usage::

    spec = build_spec(schema, ["day(ts)", "bucket(16, id)"])
    spec.to_json()   # {"spec-id": 0, "fields": [{"name": "ts_day", "transform": "day", "source-id": 4, ...}, ...]}
    partition_path(spec, schema, (19724, 3))   # "ts_day=2024-01-02/id_bucket=3"
"""

from __future__ import annotations

import re
import struct
from typing import Any, Callable, Generic, Iterator, Sequence, TypeVar, Union
from urllib.parse import quote_plus

import attrs

from engine.errors import ValidationError
from engine.model.schema import Schema
from engine.model.transforms import (
    Bucket,
    Day,
    Hour,
    Identity,
    Month,
    Transform,
    Truncate,
    UnknownTransform,
    Void,
    Year,
    parse_transform,
)
from engine.model.types import NestedField, PrimitiveType, StructType, is_int

PARTITION_DATA_ID_START = 1000
SPEC_ID = "spec-id"
FIELDS = "fields"
NAME = "name"
TRANSFORM = "transform"
SOURCE_ID = "source-id"
FIELD_ID = "field-id"

V = TypeVar("V")


def _to_transform(value: Any) -> Transform:
    return value if isinstance(value, Transform) else parse_transform(value)


@attrs.frozen
class PartitionField:
    """One field of a partition spec: ``transform`` applied to the column ``source_id`` gives the partition
    tuple's field ``field_id``, called ``name``.

    :param source_id: the source column's field id
    :param field_id: the partition field's id (from 1000, unique across the table's specs)
    :param transform: a :class:`Transform` (a spec string is parsed)
    :param name: the partition field's name (used in partition paths)
    """

    source_id: int
    field_id: int
    transform: Transform = attrs.field(converter=_to_transform)
    name: str

    def to_json(self) -> dict[str, Any]:
        """Java's key order: name, transform, source-id, field-id."""
        return {NAME: self.name, TRANSFORM: str(self.transform), SOURCE_ID: self.source_id, FIELD_ID: self.field_id}


@attrs.frozen
class PartitionSpec:
    """A table's partition spec: an id and the ordered partition fields.

    :param spec_id: the spec's id in its table (0 for the first)
    :param fields: the partition fields, in partition tuple order
    :raises ValidationError: when two fields share a name or a field id
    """

    spec_id: int = 0
    fields: tuple[PartitionField, ...] = attrs.field(default=(), converter=tuple)

    def __attrs_post_init__(self) -> None:
        names: set[str] = set()
        ids: set[int] = set()
        for f in self.fields:
            if f.name in names:
                raise ValidationError(f"Cannot create partition spec: more than one field is named {f.name!r}")
            if f.field_id in ids:
                raise ValidationError(f"Cannot create partition spec: more than one field has id {f.field_id}")
            names.add(f.name)
            ids.add(f.field_id)

    @property
    def is_unpartitioned(self) -> bool:
        """No partition fields: the partition tuple is empty. Java's ``isUnpartitioned`` is ``not is_partitioned``
        (a spec of void fields only is unpartitioned there): decisions about which files an operation or a delete
        covers use :attr:`is_partitioned`, writers of partition tuples this."""
        return not self.fields

    @property
    def is_partitioned(self) -> bool:
        """At least one field whose transform is not void (Java's ``isPartitioned``)."""
        return any(not f.transform.is_void for f in self.fields)

    @property
    def last_assigned_field_id(self) -> int:
        """The largest partition field id, or 999 when there are none."""
        return max((f.field_id for f in self.fields), default=PARTITION_DATA_ID_START - 1)

    def identity_values(self, partition: tuple[Any, ...]) -> dict[int, Any]:
        """Source field id to value for the identity fields of a partition tuple of this spec (None included: a
        null partition value is a value). The spec's rule 1 for a column a data file does not have: the value of
        its identity partition field (Hive-style files keep partition columns only in their paths)."""
        return {f.source_id: v for f, v in zip(self.fields, partition) if f.transform.is_identity}

    def fields_by_source_id(self, source_id: int) -> tuple[PartitionField, ...]:
        return tuple(f for f in self.fields if f.source_id == source_id)

    def partition_type(self, schema: Schema) -> StructType:
        """The partition tuple's struct: one optional field per partition field, typed by the transform's
        result type.

        :raises ValidationError: when a source column is missing from ``schema``
        """
        out = []
        for f in self.fields:
            source = _source_field(schema, f)
            out.append(NestedField(field_id=f.field_id, name=f.name,
                                   field_type=f.transform.result_type(source.field_type), required=False))
        return StructType(tuple(out))

    def compatible_with(self, other: PartitionSpec) -> bool:
        """Same fields (source, transform, name, id) in the same order, whatever the spec ids."""
        return self.fields == other.fields

    def fields_json(self) -> list[dict[str, Any]]:
        """The field list alone (v1's ``partition-spec`` and manifest metadata)."""
        return [f.to_json() for f in self.fields]

    def to_json(self) -> dict[str, Any]:
        """The Appendix C object: ``{"spec-id": .., "fields": [..]}``."""
        return {SPEC_ID: self.spec_id, FIELDS: self.fields_json()}

    @classmethod
    def from_json(cls, obj: dict[str, Any] | list[Any]) -> PartitionSpec:
        """Parse the spec object, or a bare field list (v1; spec id 0). Missing field ids (v1) are assigned
        from 1000 in order, as Java does.

        :raises ValidationError: when the JSON is not a partition spec
        """
        if isinstance(obj, list):
            spec_id, fields = 0, obj
        elif isinstance(obj, dict) and isinstance(obj.get(FIELDS), list):
            spec_id, fields = obj.get(SPEC_ID, 0), obj[FIELDS]
        else:
            raise ValidationError(f"Cannot parse partition spec: {obj!r}")
        if not is_int(spec_id):
            raise ValidationError(f"Cannot parse partition spec: spec-id {spec_id!r} is not a 32-bit integer")
        out = []
        for i, f in enumerate(fields):
            if not isinstance(f, dict):
                raise ValidationError(f"Cannot parse partition field: not an object: {f!r}")
            try:
                field_id = f.get(FIELD_ID, PARTITION_DATA_ID_START + i)
                out.append(PartitionField(source_id=_int(f[SOURCE_ID], SOURCE_ID), field_id=_int(field_id, FIELD_ID),
                                          transform=parse_transform(f[TRANSFORM]), name=_name(f[NAME])))
            except KeyError as e:
                raise ValidationError(f"Cannot parse partition field: missing {e.args[0]!r} in {f!r}") from e
        return cls(spec_id=spec_id, fields=tuple(out))

    def __str__(self) -> str:
        return "[" + ", ".join(f"{f.field_id}: {f.name}: {f.transform}({f.source_id})" for f in self.fields) + "]"


def _int(value: Any, key: str) -> int:
    if not is_int(value):
        raise ValidationError(f"Cannot parse partition field: {key} {value!r} is not a 32-bit integer")
    return value


def _name(value: Any) -> str:
    if not isinstance(value, str):
        raise ValidationError(f"Cannot parse partition field: name {value!r} is not a string")
    return value


def _source_field(schema: Schema, f: PartitionField) -> NestedField:
    try:
        return schema.find_field(f.source_id)
    except ValidationError as e:
        raise ValidationError(f"Cannot find source column for partition field {f.name!r}: id {f.source_id} is "
                              f"not in schema {schema.schema_id}") from e


def check_spec_binds(spec: PartitionSpec, schema: Schema) -> None:
    """A spec as written elsewhere (a REST client's) binds to ``schema`` as Iceberg Java binds it
    (``UnboundPartitionSpec.bind``): every name is non-empty and used once, a name that is a column's belongs to the
    field's own source, and every field but a void one has a primitive source outside lists and maps whose type
    its transform takes.

    :raises ValidationError: naming the field
    """
    names: set[str] = set()
    ids = schema.index_by_id()
    for f in spec.fields:
        if not f.name:
            raise ValidationError(f"Cannot use empty partition name for field {f.field_id}")
        if f.name in names:
            raise ValidationError(f"Cannot use partition name more than once: {f.name!r}")
        names.add(f.name)
        try:
            clash: NestedField | None = schema.find_field(f.name)
        except ValidationError:
            clash = None
        if clash is not None and clash.field_id != f.source_id and f.source_id in ids:
            raise ValidationError(f"Cannot create partition field {f.name!r} sourced from field id {f.source_id}: "
                                  f"the name is another column's (id {clash.field_id})")
        if f.transform.is_void:
            continue
        source = _source_field(schema, f)
        if not isinstance(source.field_type, PrimitiveType):
            raise ValidationError(f"Cannot partition by non-primitive source field {f.name!r}: {source.field_type}")
        if schema.is_in_list_or_map(f.source_id):
            raise ValidationError(f"Cannot partition by field {f.name!r}: its source column "
                                  f"{schema.find_column_name(f.source_id)!r} is inside a list or map")
        if not f.transform.can_transform(source.field_type):
            raise ValidationError(f"Cannot partition by field {f.name!r}: {f.transform} cannot apply to column "
                                  f"{schema.find_column_name(f.source_id)!r} of type {source.field_type}")


UNPARTITIONED_SPEC = PartitionSpec(spec_id=0, fields=())


# -- building specs from terms -----------------------------------------------------------------------------------

_TERM_WITH_ARG = re.compile(r"^\s*(bucket|truncate)\s*\(\s*(\d+)\s*,\s*(.+?)\s*\)\s*$", re.IGNORECASE)
_TERM_WITH_ARG_AFTER = re.compile(r"^\s*(bucket|truncate)\s*\(\s*(.+?)\s*,\s*(\d+)\s*\)\s*$", re.IGNORECASE)
_TERM_BRACKET = re.compile(r"^\s*(bucket|truncate)\s*\[\s*(\d+)\s*\]\s*\(\s*(.+?)\s*\)\s*$", re.IGNORECASE)
_TERM_SIMPLE = re.compile(r"^\s*(identity|years?|months?|days?|hours?|void)\s*\(\s*(.+?)\s*\)\s*$", re.IGNORECASE)
_SIMPLE_TRANSFORMS: dict[str, Transform] = {
    "identity": Identity(), "year": Year(), "years": Year(), "month": Month(), "months": Month(),
    "day": Day(), "days": Day(), "hour": Hour(), "hours": Hour(), "void": Void()}
_DEFAULT_SUFFIX: dict[type, str] = {Bucket: "bucket", Truncate: "trunc", Year: "year", Month: "month", Day: "day",
                                    Hour: "hour", Void: "null"}

PartitionTerm = Union[str, "tuple[Transform | str, str]"]


def _column_name(text: str) -> str:
    text = text.strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "`\"":
        return text[1:-1]
    if not text:
        raise ValidationError("Cannot parse partition term: empty column name")
    return text


def parse_partition_term(text: str) -> tuple[Transform, str]:
    """Parse a partition term: ``"category"`` (identity), ``"day(ts)"`` / ``"days(ts)"``, ``"year(ts)"``,
    ``"month(ts)"``, ``"hour(ts)"``, ``"bucket(16, id)"``, ``"truncate(4, name)"`` (the argument may also come
    second, as in Spark's Scala API), ``"bucket[16](id)"``, ``"void(x)"``, ``"identity(x)"``.
    Column names may be quoted with backticks or double quotes.

    :raises ValidationError: when the term cannot be parsed
    """
    if not isinstance(text, str) or not text.strip():
        raise ValidationError(f"Cannot parse partition term: {text!r}")
    for pattern, arg_first in ((_TERM_WITH_ARG, True), (_TERM_BRACKET, True), (_TERM_WITH_ARG_AFTER, False)):
        m = pattern.match(text)
        if m:
            name = m.group(1).lower()
            arg, column = (m.group(2), m.group(3)) if arg_first else (m.group(3), m.group(2))
            transform: Transform = Bucket(int(arg)) if name == "bucket" else Truncate(int(arg))
            return transform, _column_name(column)
    m = _TERM_SIMPLE.match(text)
    if m:
        return _SIMPLE_TRANSFORMS[m.group(1).lower()], _column_name(m.group(2))
    if "(" in text or ")" in text:
        raise ValidationError(f"Cannot parse partition term: {text!r}")
    return Identity(), _column_name(text)


def default_partition_name(transform: Transform, column: str) -> str:
    """Java's default partition field name (``PartitionSpec.Builder``): the column for identity, else
    ``<column>_bucket``, ``_trunc``, ``_year``, ``_month``, ``_day``, ``_hour`` or ``_null``."""
    if isinstance(transform, Identity):
        return column
    suffix = _DEFAULT_SUFFIX.get(type(transform))
    if suffix is None:
        raise ValidationError(f"Cannot name partition field: unknown transform {transform}")
    return f"{column}_{suffix}"


def build_spec(schema: Schema, terms: Sequence[PartitionTerm], spec_id: int = 0,
               last_partition_id: int = PARTITION_DATA_ID_START - 1) -> PartitionSpec:
    """Build a partition spec from terms, with field ids after ``last_partition_id`` and Java's default names.

    :param schema: the table schema the terms name columns of
    :param terms: strings for :func:`parse_partition_term`, or ``(transform, column)`` pairs (a transform may
        be a spec string such as ``"bucket[16]"``); a term may also be a ``(transform, column, name)`` triple
    :param spec_id: the new spec's id
    :param last_partition_id: the table's last assigned partition field id (999 for a new table)
    :raises ValidationError: for an unknown column, a column in a list or map or not primitive, a transform that
        cannot apply to the column's type, a duplicate name, a name that clashes with another column, or a
        redundant field (the same column twice under one transform, or two time transforms on one column)
    """
    fields: list[PartitionField] = []
    names: set[str] = set()
    dedup: dict[tuple[int, str], str] = {}
    next_id = last_partition_id
    for term in terms:
        name: str | None = None
        if isinstance(term, str):
            transform, column = parse_partition_term(term)
        elif isinstance(term, tuple) and len(term) in (2, 3):
            transform, column = _to_transform(term[0]), str(term[1])
            if len(term) == 3:
                name = str(term[2])
        else:
            raise ValidationError(f"Cannot parse partition term: {term!r}")
        if isinstance(transform, UnknownTransform):
            raise ValidationError(f"Cannot partition by {term!r}: unknown transform {transform}")
        source = schema.find_field(column)
        if schema.is_in_list_or_map(source.field_id):
            raise ValidationError(f"Cannot partition by {column!r}: the column is inside a list or map")
        if not isinstance(source.field_type, PrimitiveType):
            raise ValidationError(f"Cannot partition by {column!r}: {source.field_type} is not a primitive type")
        if not transform.can_transform(source.field_type):
            raise ValidationError(f"Cannot partition by {transform}({column}): {transform} cannot apply to "
                                  f"type {source.field_type}")
        if name is None:
            name = default_partition_name(transform, column)
        _check_name(schema, name, transform, source.field_id)
        if name in names:
            raise ValidationError(f"Cannot use partition name more than once: {name!r}")
        key = (source.field_id, transform.dedup_name)
        if key in dedup and not transform.is_void:
            raise ValidationError(f"Cannot add redundant partition field {transform}({column}): it conflicts with "
                                  f"{dedup[key]!r}")
        if not transform.is_void:
            dedup[key] = name
        names.add(name)
        next_id += 1
        fields.append(PartitionField(source_id=source.field_id, field_id=next_id, transform=transform, name=name))
    return PartitionSpec(spec_id=spec_id, fields=tuple(fields))


def _check_name(schema: Schema, name: str, transform: Transform, source_id: int) -> None:
    if not name:
        raise ValidationError("Cannot use empty partition name")
    try:
        clash = schema.find_field(name)
    except ValidationError:
        return
    # Java: a partition may share a column's name only when it is the identity of that very column.
    if not (transform.is_identity and clash.field_id == source_id):
        raise ValidationError(f"Cannot create partition from name that exists in schema: {name!r}")


# -- partition paths ---------------------------------------------------------------------------------------------


def partition_key(values: tuple[Any, ...]) -> tuple[Any, ...]:
    """A partition tuple as a set member or dict key that compares as Java's ``PartitionSet`` does (``Double.compare``):
    a float by its bits, so NaN is one value and -0.0 another than 0.0 (Python's ``==`` says neither). Tuples without
    floats come back as they are."""
    if not any(type(v) is float for v in values):
        return values
    return tuple(("float", "NaN" if v != v else struct.pack(">d", v)) if type(v) is float else v for v in values)


class PartitionGroups(Generic[V]):
    """Values grouped by (spec id, partition) as Java's ``PartitionSet`` groups them (:func:`partition_key`), each
    group remembering the partition tuple it was first asked for (what a file written for it records)::

        groups = PartitionGroups(dict)
        groups.of(spec_id, partition)[path] = positions
        for spec_id, partition, value in groups: ...
    """

    def __init__(self, make: Callable[[], V]) -> None:
        self._make = make
        self._groups: dict[tuple[Any, tuple[Any, ...]], tuple[tuple[Any, ...], V]] = {}

    def of(self, spec_id: Any, partition: tuple[Any, ...]) -> V:
        """The group's value, made on first use."""
        key = (spec_id, partition_key(partition))
        found = self._groups.get(key)
        if found is None:
            found = self._groups[key] = (partition, self._make())
        return found[1]

    def __iter__(self) -> Iterator[tuple[Any, tuple[Any, ...], V]]:
        return ((key[0], partition, value) for key, (partition, value) in self._groups.items())

    def __bool__(self) -> bool:
        return bool(self._groups)


def _escape(text: str) -> str:
    # java.net.URLEncoder.encode(text, UTF-8): keeps A-Z a-z 0-9 . - * _, space as '+', the rest %XX;
    # an unpaired surrogate is encoded as '?'.
    return quote_plus(text.encode("utf-8", "replace"), safe="*").replace("~", "%7E")


def partition_path(spec: PartitionSpec, schema: Schema, values: tuple[Any, ...],
                   ptype: StructType | None = None) -> str:
    """The partition's relative path, as Java's ``PartitionSpec.partitionToPath`` writes it:
    ``name=human-value`` per field, joined by ``/``, URL-encoded like ``java.net.URLEncoder``.

    :param values: the partition tuple, canonical values in spec field order
    :param ptype: the spec's partition struct (default: typed by ``schema``; an older spec whose source column
        ``schema`` dropped passes the one its files were written with, ``TableState.partition_type_of``)
    :raises ValidationError: when the tuple does not have one value per field
    """
    if len(values) != len(spec.fields):
        raise ValidationError(f"Cannot build partition path: {len(values)} values for {len(spec.fields)} "
                              f"partition fields of spec {spec.spec_id}")
    ptype = ptype if ptype is not None else spec.partition_type(schema)
    parts = []
    for f, pf, value in zip(spec.fields, ptype.fields, values):
        human = f.transform.to_human_string(pf.field_type, value)
        parts.append(f"{_escape(f.name)}={_escape(human)}")
    return "/".join(parts)
