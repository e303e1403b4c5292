"""Partition evolution: add, remove and rename partition fields (Iceberg's UpdatePartitionSpec).

Layer: engine.operations (pure: builds events from a base state; imports engine.model, engine.state.events,
engine.state.table_state and the builder base).

::

    with table.update_spec() as update:
        update.add_field("ts", "day")                 # ts_day
        update.add_field("id", "bucket[16]")          # id_bucket_16 (Java's name for an added bucket)
        update.remove_field("category")
        update.rename_field("name_trunc", "name_prefix")

The requests are kept and replayed on every base the commit loop hands to :meth:`UpdateSpec.events`,
following Iceberg Java's ``BaseUpdatePartitionSpec``:

- a v2 table gives added fields new ids after the table's last partition field id, except that a field
  re-added with the source and transform of a field of an earlier spec (and its name, when one is given)
  gets that field back, id and name;
- a v1 table never drops or reorders fields: a removed field stays, with the ``void`` transform, and new
  fields go at the end with the next ids, so ids stay sequential from 1000 as v1 readers assume;
- removing a field and adding the same transform back in one update undoes the removal;
- a field whose name an added field wants is renamed ``<name>_<field id>`` when it is void (v1) or removed;
- the new spec reuses the id of an existing spec with the same fields (source, transform, name, in order),
  else takes the largest spec id plus one; an update that changes nothing commits nothing.
"""

from __future__ import annotations

from typing import Any, Sequence

import attrs

from engine.errors import ValidationError
from engine.state.events import DefaultSpecSet, Event, SpecAdded
from engine.model.partitioning import (
    PARTITION_DATA_ID_START,
    PartitionField,
    PartitionSpec,
)
from engine.model.schema import Schema
from engine.model.transforms import (
    Bucket,
    Identity,
    Transform,
    Truncate,
    UnknownTransform,
    Void,
    parse_transform,
)
from engine.model.types import PrimitiveType
from engine.operations.commit import CommitContext
from engine.operations.pending import CommitsEvents, PendingUpdate
from engine.state.table_state import TableState

_ADD = "add"
_REMOVE = "remove"
_RENAME = "rename"


def to_transform(value: Any) -> Transform:
    """A transform from a :class:`Transform`, its spec string (``"bucket[16]"``, ``"day"``) or any object that
    prints as one (PyIceberg's transforms do).

    :raises ValidationError: when the value does not name a known transform
    """
    if isinstance(value, Transform):
        transform = value
    elif isinstance(value, str):
        transform = parse_transform(value)
    elif value is None:
        raise ValidationError("Cannot parse transform: None")
    else:
        transform = parse_transform(str(value))
    if isinstance(transform, UnknownTransform):
        raise ValidationError(f"Cannot use transform: unknown transform {value!s}")
    return transform


def added_field_name(transform: Transform, column: str) -> str:
    """Java's name for a partition field added by a spec update (``BaseUpdatePartitionSpec``): the column for
    identity, ``<column>_bucket_<N>``, ``<column>_trunc_<W>``, ``_year``, ``_month``, ``_day``, ``_hour`` or
    ``_null``. (A spec built at table creation names buckets and truncates without the argument.)"""
    if isinstance(transform, Identity):
        return column
    if isinstance(transform, Bucket):
        return f"{column}_bucket_{transform.num_buckets}"
    if isinstance(transform, Truncate):
        return f"{column}_trunc_{transform.width}"
    if isinstance(transform, Void):
        return f"{column}_null"
    return f"{column}_{transform}"  # year, month, day, hour


def _same_fields(a: Sequence[PartitionField], b: Sequence[PartitionField]) -> bool:
    """Java's ``PartitionSpec.compatibleWith``: same source, transform and name per position (ids aside)."""
    return len(a) == len(b) and all(
        x.source_id == y.source_id and str(x.transform) == str(y.transform) and x.name == y.name
        for x, y in zip(a, b))


@attrs.frozen(kw_only=True)
class _Request:
    kind: str
    name: str | None = None
    column: str | None = None
    transform: Transform | None = None
    new_name: str | None = None


class _Plan:
    """One replay of the requests on one base: the bookkeeping of Java's ``BaseUpdatePartitionSpec``."""

    def __init__(self, base: TableState, case_sensitive: bool) -> None:
        spec = base.spec
        unknown = [f for f in spec.fields if isinstance(f.transform, UnknownTransform)]
        if unknown:
            raise ValidationError(f"Cannot update partition spec with unknown transform: {unknown[0].name} "
                                  f"({unknown[0].transform})")
        self.base = base
        self.schema: Schema = base.schema
        self.spec = spec
        self.case_sensitive = case_sensitive
        self.v1 = base.format_version < 2
        self.name_to_field = {f.name: f for f in spec.fields}
        self.transform_to_field = {(f.source_id, str(f.transform)): f for f in spec.fields}
        self.last_assigned = max(base.last_partition_id, spec.last_assigned_field_id)
        self.adds: list[PartitionField] = []
        self.added_time_fields: dict[int, PartitionField] = {}
        self.transform_to_added: dict[tuple[int, str], PartitionField] = {}
        self.name_to_added: dict[str, PartitionField] = {}
        self.deletes: set[int] = set()
        self.renames: dict[str, str] = {}

    # ------------------------------------------------------------ requests
    def add(self, column: str, transform: Transform, name: str | None) -> None:
        if name is not None and name in self.name_to_added:
            raise ValidationError(f"Cannot add duplicate partition field name: {name!r}")
        source = self._source(column, transform)
        key = (source.field_id, str(transform))
        existing = self.transform_to_field.get(key)
        if existing is not None and existing.field_id in self.deletes:
            # removing a field and adding it back undoes the removal (keeping its id)
            self.deletes.discard(existing.field_id)
            if name is not None and name != existing.name:
                self.rename(existing.name, name)
            return
        if existing is not None:
            raise ValidationError(f"Cannot add duplicate partition field {transform}({column}): it conflicts with "
                                  f"{existing.name!r}")
        added = self.transform_to_added.get(key)
        if added is not None:
            raise ValidationError(f"Cannot add duplicate partition field {transform}({column}): already added as "
                                  f"{added.name!r}")
        new_field = self._recycle_or_create(source.field_id, transform, name)
        if transform.dedup_name == "time":
            other = self.added_time_fields.get(source.field_id)
            if other is not None:
                raise ValidationError(f"Cannot add redundant partition field {new_field.name!r} "
                                      f"({transform}({column})): it conflicts with {other.name!r} ({other.transform})")
            self.added_time_fields[source.field_id] = new_field
        self.transform_to_added[key] = new_field
        clash = self.name_to_field.get(new_field.name)
        if clash is not None and clash.field_id not in self.deletes:
            if clash.transform.is_void:
                self.rename(clash.name, f"{clash.name}_{clash.field_id}")
            else:
                raise ValidationError(f"Cannot add duplicate partition field name: {new_field.name!r}")
        elif clash is not None:
            self.renames[clash.name] = f"{clash.name}_{clash.field_id}"
        if new_field.name in self.name_to_added:
            raise ValidationError(f"Cannot add duplicate partition field name: {new_field.name!r}")
        self._check_schema_clash(new_field.name, transform, source.field_id)
        self.name_to_added[new_field.name] = new_field
        self.adds.append(new_field)

    def remove(self, name: str) -> None:
        if name in self.name_to_added:
            raise ValidationError(f"Cannot delete newly added partition field: {name!r}")
        if name in self.renames:
            raise ValidationError(f"Cannot rename and delete partition field: {name!r}")
        field = self.name_to_field.get(name)
        if field is None:
            raise ValidationError(f"Cannot find partition field to remove: {name!r} (fields: "
                                  f"{', '.join(repr(f.name) for f in self.spec.fields) or 'none'})")
        self.deletes.add(field.field_id)

    def rename(self, name: str, new_name: str) -> None:
        if not isinstance(new_name, str) or not new_name:
            raise ValidationError(f"Cannot rename partition field {name!r}: the new name is empty")
        occupant = self.name_to_field.get(new_name)
        if occupant is not None and occupant.transform.is_void and occupant.name != name:
            self.rename(occupant.name, f"{occupant.name}_{occupant.field_id}")
        if name in self.name_to_added:
            raise ValidationError(f"Cannot rename newly added partition field: {name!r}")
        field = self.name_to_field.get(name)
        if field is None:
            raise ValidationError(f"Cannot find partition field to rename: {name!r} (fields: "
                                  f"{', '.join(repr(f.name) for f in self.spec.fields) or 'none'})")
        if field.field_id in self.deletes:
            raise ValidationError(f"Cannot delete and rename partition field: {name!r}")
        self._check_schema_clash(new_name, field.transform, field.source_id)
        self.renames[name] = new_name

    # ------------------------------------------------------------ helpers
    def _source(self, column: str, transform: Transform) -> Any:
        if not isinstance(column, str) or not column:
            raise ValidationError(f"Cannot add partition field: {column!r} is not a column name")
        try:
            source = self.schema.find_field(column, case_sensitive=self.case_sensitive)
        except ValidationError as e:
            raise ValidationError(f"Cannot add partition field {transform}({column}): column {column!r} is not in "
                                  f"the table schema") from e
        if self.schema.is_in_list_or_map(source.field_id):
            raise ValidationError(f"Cannot add partition field {transform}({column}): the column is inside a list "
                                  f"or map")
        if not isinstance(source.field_type, PrimitiveType):
            raise ValidationError(f"Cannot add partition field {transform}({column}): {source.field_type} is not a "
                                  f"primitive type")
        if not transform.can_transform(source.field_type):
            raise ValidationError(f"Cannot add partition field {transform}({column}): {transform} cannot apply to "
                                  f"type {source.field_type}")
        return source

    def _recycle_or_create(self, source_id: int, transform: Transform, name: str | None) -> PartitionField:
        if not self.v1:
            for spec in self.base.specs:
                for f in spec.fields:
                    if f.source_id == source_id and str(f.transform) == str(transform) and (
                            name is None or f.name == name):
                        return PartitionField(source_id=source_id, field_id=f.field_id, transform=transform,
                                              name=f.name)
        self.last_assigned += 1
        if name is None:
            name = added_field_name(transform, self.schema.find_column_name(source_id))
        return PartitionField(source_id=source_id, field_id=self.last_assigned, transform=transform, name=name)

    def _check_unique(self, f: PartitionField, seen: set[str]) -> None:
        if not f.name:
            raise ValidationError(f"Cannot use empty partition name for field {f.field_id}")
        if f.name in seen:
            raise ValidationError(f"Cannot use partition name more than once: {f.name!r}")
        seen.add(f.name)

    def _check_schema_clash(self, name: str, transform: Transform, source_id: int) -> None:
        try:
            column = self.schema.find_field(name, case_sensitive=self.case_sensitive)
        except ValidationError:
            return
        # PyIceberg's rule: identity and void fields may share their own source column's name, no other may
        if not ((transform.is_identity or transform.is_void) and column.field_id == source_id):
            raise ValidationError(f"Cannot create partition from name that exists in schema: {name!r}")

    def _check_compatible(self, f: PartitionField) -> None:
        if f.transform.is_void:
            return
        try:
            source = self.schema.find_field(f.source_id)
        except ValidationError as e:
            raise ValidationError(f"Cannot find source column for partition field {f.name!r}: id {f.source_id} is "
                                  f"not in the current schema") from e
        if not isinstance(source.field_type, PrimitiveType) or not f.transform.can_transform(source.field_type):
            raise ValidationError(f"Cannot partition by {f.transform} of field {f.name!r}: invalid source type "
                                  f"{source.field_type}")

    # ------------------------------------------------------------ result
    def fields(self) -> tuple[PartitionField, ...]:
        out: list[PartitionField] = []
        for f in self.spec.fields:
            name = self.renames.get(f.name, f.name)
            if f.field_id not in self.deletes:
                out.append(attrs.evolve(f, name=name))
            elif self.v1:
                out.append(PartitionField(source_id=f.source_id, field_id=f.field_id, transform=Void(), name=name))
        out.extend(self.adds)
        seen: set[str] = set()
        for f in out:
            self._check_unique(f, seen)
            self._check_compatible(f)
        if self.v1:
            for i, f in enumerate(out):
                if f.field_id != PARTITION_DATA_ID_START + i:
                    raise ValidationError(f"Cannot update partition spec of a v1 table: field {f.name!r} has id "
                                          f"{f.field_id}, v1 needs sequential ids from {PARTITION_DATA_ID_START}")
        return tuple(out)


class UpdateSpec(PendingUpdate):
    """Partition evolution with PyIceberg's names; commit with ``.commit()`` or a ``with`` block.

    ::

        table.update_spec().add_field("ts", "hour").remove_field("ts_day").commit()

    Each request is checked against the current table when it is made (so a bad one raises at once) and
    again, with all the others, on the base of every commit attempt.

    :param table: the table to evolve
    :param case_sensitive: whether column names match case-sensitively
    """

    def __init__(self, table: CommitsEvents, *, case_sensitive: bool = True) -> None:
        super().__init__(table)
        self._case_sensitive = case_sensitive
        self._requests: list[_Request] = []

    def add_field(self, source_column_name: str, transform: Any,
                  partition_field_name: str | None = None) -> UpdateSpec:
        """Partition by ``transform(source_column_name)``.

        :param source_column_name: the source column (dotted for a struct field)
        :param transform: a Transform, or its spec string: ``"identity"``, ``"bucket[16]"``, ``"truncate[4]"``,
            ``"year"``, ``"month"``, ``"day"``, ``"hour"``, ``"void"``
        :param partition_field_name: the field's name; Java's default when omitted
        :raises ValidationError: for an unknown column or transform, a transform that cannot apply to the
            column's type, a field that already exists, or a second time transform added on one column
        """
        if partition_field_name is not None and (not isinstance(partition_field_name, str) or
                                                 not partition_field_name):
            raise ValidationError(f"Cannot add partition field: invalid name {partition_field_name!r}")
        return self._request(_Request(kind=_ADD, column=source_column_name, transform=to_transform(transform),
                                      name=partition_field_name))

    def add_identity(self, source_column_name: str) -> UpdateSpec:
        """Partition by the column's values (``add_field(column, "identity")``)."""
        return self.add_field(source_column_name, Identity())

    def remove_field(self, name: str) -> UpdateSpec:
        """Stop partitioning by the field ``name`` (a v1 table keeps it as a void field).

        :raises ValidationError: when the current spec has no such field, or it was added or renamed here
        """
        return self._request(_Request(kind=_REMOVE, name=name))

    def rename_field(self, name: str, new_name: str) -> UpdateSpec:
        """Rename the partition field ``name``.

        :raises ValidationError: when there is no such field, it was added or removed here, or the new name is
            taken
        """
        return self._request(_Request(kind=_RENAME, name=name, new_name=new_name))

    def _request(self, request: _Request) -> UpdateSpec:
        self._requests.append(request)
        base = getattr(self._table, "state", None)
        if isinstance(base, TableState):
            try:
                self._replay(base)  # the whole spec is checked at commit: names may be swapped in steps
            except ValidationError:
                self._requests.pop()
                raise
        return self

    def _replay(self, base: TableState) -> _Plan:
        plan = _Plan(base, self._case_sensitive)
        for r in self._requests:
            if r.kind == _ADD:
                plan.add(r.column, r.transform, r.name)  # type: ignore[arg-type]
            elif r.kind == _REMOVE:
                plan.remove(r.name)  # type: ignore[arg-type]
            else:
                plan.rename(r.name, r.new_name)  # type: ignore[arg-type]
        return plan

    def apply(self, base: TableState) -> PartitionSpec:
        """The new default spec on ``base`` (its id reused from an identical spec, or the next free id).

        :raises ValidationError: when a request does not hold on ``base``
        """
        fields = self._replay(base).fields()
        new_id = 0
        for spec in base.specs:
            if _same_fields(spec.fields, fields):
                return spec
            new_id = max(new_id, spec.spec_id + 1)
        return PartitionSpec(spec_id=new_id, fields=fields)

    def events(self, base: TableState, ctx: CommitContext) -> list[Event]:
        spec = self.apply(base)
        if spec.spec_id == base.default_spec_id:
            return []
        if any(s.spec_id == spec.spec_id for s in base.specs):
            return [DefaultSpecSet(spec_id=spec.spec_id)]
        return [SpecAdded(spec=spec), DefaultSpecSet(spec_id=spec.spec_id)]
