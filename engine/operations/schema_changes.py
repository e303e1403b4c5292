"""The changes a schema update asks for, and how they apply to a base schema: the requests (add, delete, rename,
update, move a column, set identifier fields, union by name) recorded by name, the type rules (Iceberg types from
names or Arrow types, promotions), and :class:`SchemaChanges`, which replays the requests on a base state, checks
each against Iceberg's rules and builds the new schema. The builder, ``UpdateSchema``, is in
engine.operations.update_schema.

Layer: engine.operations (pure: values and table states in, a schema or a ValidationError out; pyarrow for type
conversion only).
"""

from __future__ import annotations

from typing import Any, Iterable, Sequence

import attrs
import pyarrow as pa

from engine.errors import UnsupportedTypeError, ValidationError
from engine.model.arrow_schema import schema_from_arrow
from engine.model.schema import Schema, assign_fresh_ids, check_schema_for_format
from engine.model.types import (
    DecimalType,
    DoubleType,
    FloatType,
    IcebergType,
    IntegerType,
    ListType,
    LongType,
    MapType,
    NestedField,
    PrimitiveType,
    StructType,
    UnknownType,
    parse_type,
)
from engine.model.values import value_from_python, value_to_json
from engine.state.table_state import TableState

#: The parent key of top-level fields (struct children are keyed by the id of the field holding the struct).
ROOT = -1

MOVE_FIRST = "first"
MOVE_BEFORE = "before"
MOVE_AFTER = "after"

Path = str | tuple[str, ...]
TypeLike = str | IcebergType | pa.DataType


# -- requests: what the caller asked for, by name (replayed on every base) ----------------------------------------


@attrs.frozen(kw_only=True)
class AddColumn:
    path: tuple[str, ...]
    field_type: IcebergType
    doc: str | None
    required: bool
    default: Any = None


@attrs.frozen(kw_only=True)
class DeleteColumn:
    name: str


@attrs.frozen(kw_only=True)
class RenameColumn:
    name: str
    new_name: str


@attrs.frozen(kw_only=True)
class UpdateColumn:
    name: str
    field_type: IcebergType | None
    required: bool | None
    doc: str | None


@attrs.frozen(kw_only=True)
class MoveColumn:
    name: str
    op: str
    other: str | None


@attrs.frozen(kw_only=True)
class SetIdentifierFields:
    names: tuple[str, ...]


@attrs.frozen(kw_only=True)
class UnionByName:
    schema: Schema


SchemaRequest = (AddColumn | DeleteColumn | RenameColumn | UpdateColumn | MoveColumn | SetIdentifierFields
            | UnionByName)


def full_name(path: Path) -> str:
    if isinstance(path, tuple):
        if not path or not all(isinstance(p, str) and p for p in path):
            raise ValidationError(f"Cannot use column path {path!r}: expected non-empty names")
        return ".".join(path)
    if not isinstance(path, str) or not path:
        raise ValidationError(f"Cannot use column path {path!r}: expected a name or a tuple of names")
    return path


def add_path(path: Path) -> tuple[str, ...]:
    """A name, a dotted name (``"location.alt"``: ``alt`` inside ``location``) or a tuple of names."""
    if isinstance(path, tuple):
        full_name(path)
        return path
    full_name(path)
    parts = tuple(path.split("."))
    if not all(parts):
        raise ValidationError(f"Cannot use column path {path!r}: a dotted name needs a non-empty name on each side "
                              f"of every dot")
    return parts


def to_iceberg_type(field_type: TypeLike, *, column: str) -> IcebergType:
    """The Iceberg type of an Iceberg type string, an engine type or a pyarrow type.

    :param field_type: ``"long"``, ``"decimal(10,2)"``, ``LongType()``, ``pa.int64()``, ``pa.struct([...])``...
    :param column: the column the type is for (named in errors)
    :raises ValidationError: for an unknown type string or a type Iceberg cannot hold
    """
    if isinstance(field_type, IcebergType):
        return field_type
    if isinstance(field_type, str):
        try:
            return parse_type(field_type)
        except UnsupportedTypeError as e:
            raise UnsupportedTypeError(f"{e} (column {column!r})") from e
        except ValidationError as e:
            raise ValidationError(f"Cannot use type {field_type!r} for column {column!r}: not an Iceberg primitive "
                                  "type string (nested types may be given as engine or pyarrow types)") from e
    if isinstance(field_type, pa.DataType):
        try:
            return schema_from_arrow(pa.schema([pa.field(column, field_type)])).fields[0].field_type
        except ValidationError as e:
            raise ValidationError(f"Cannot use type {field_type} for column {column!r}: {e}") from e
    raise ValidationError(f"Cannot use type {field_type!r} for column {column!r}: expected an Iceberg type string, "
                          "an engine type or a pyarrow type")


def is_promotion(old: IcebergType, new: IcebergType) -> bool:
    """Whether the spec allows promoting ``old`` to ``new`` (equal types count as allowed)."""
    if old == new:
        return True
    if isinstance(old, UnknownType):  # format v3: no file holds a value of an unknown column; the spec promotes it
        return isinstance(new, PrimitiveType)  # to primitives only (no primitive evolves to a struct, list or map)
    if isinstance(old, IntegerType):
        return isinstance(new, LongType)
    if isinstance(old, FloatType):
        return isinstance(new, DoubleType)
    if isinstance(old, DecimalType) and isinstance(new, DecimalType):
        return new.scale == old.scale and new.precision >= old.precision
    return False


@attrs.frozen
class _Move:
    op: str
    field_id: int
    other_id: int | None


class SchemaChanges:
    """One application of the requests to one base: checks each request as it comes, then builds the schema."""

    def __init__(self, base: TableState, *, allow_incompatible_changes: bool, case_sensitive: bool) -> None:
        self.base = base
        self.schema = base.schema
        self.allow_incompatible = allow_incompatible_changes
        self.case_sensitive = case_sensitive
        self.next_id = base.last_column_id + 1
        self.adds: dict[int, list[NestedField]] = {}
        self.added: dict[str, tuple[int, int]] = {}  # full name of an added column -> (id, parent key)
        self.updates: dict[int, NestedField] = {}
        self.deletes: set[int] = set()
        self.moves: dict[int, list[_Move]] = {}
        self.identifier_names: tuple[str, ...] | None = None

    # -- lookups -------------------------------------------------------------------------------------------------

    def _key(self, name: str) -> str:
        return name if self.case_sensitive else name.lower()

    def find(self, name: str, action: str) -> NestedField:
        try:
            return self.schema.find_field(name, case_sensitive=self.case_sensitive)
        except ValidationError as e:
            raise ValidationError(f"Cannot {action}: column {name!r} does not exist") from e

    def name_of(self, field_id: int) -> str:
        return self.schema.find_column_name(field_id)

    def current(self, field: NestedField) -> NestedField:
        return self.updates.get(field.field_id, field)

    def container(self, field_id: int) -> NestedField | None:
        """The list or map field a list element / map key / map value belongs to (None for struct fields)."""
        parent = self.schema.parent_id(field_id)
        if parent is None:
            return None
        holder = self.schema.find_field(parent)
        return holder if isinstance(holder.field_type, (ListType, MapType)) else None

    def is_map_key(self, field_id: int) -> bool:
        holder = self.container(field_id)
        return holder is not None and isinstance(holder.field_type, MapType) and holder.field_type.key_id == field_id

    def parent_key(self, field_id: int) -> int:
        parent = self.schema.parent_id(field_id)
        return ROOT if parent is None else parent

    def struct_of(self, key: int) -> StructType | None:
        """The struct whose fields are keyed by ``key`` (ROOT: the schema), or None when it is not a struct."""
        if key == ROOT:
            return self.schema.as_struct()
        t = self.schema.find_field(key).field_type
        return t if isinstance(t, StructType) else None

    def sibling_names(self, key: int, *, leaving_out: int | None = None) -> dict[str, int]:
        """The names the struct ``key`` will hold so far (renames and adds applied, deletes left out)."""
        struct = self.struct_of(key)
        names: dict[str, int] = {}
        for f in struct.fields if struct is not None else ():
            if f.field_id in self.deletes or f.field_id == leaving_out:
                continue
            names[self._key(self.current(f).name)] = f.field_id
        for f in self.adds.get(key, ()):
            names[self._key(f.name)] = f.field_id
        return names

    def refuse_deleted(self, field: NestedField, name: str, action: str) -> None:
        if field.field_id in self.deletes:
            raise ValidationError(f"Cannot {action}: column {name!r} is deleted in this update")

    # -- requests ------------------------------------------------------------------------------------------------

    def apply(self, request: SchemaRequest) -> None:
        if isinstance(request, AddColumn):
            self.add_column(request.path, request.field_type, request.doc, request.required, request.default)
        elif isinstance(request, DeleteColumn):
            self.delete_column(request.name)
        elif isinstance(request, RenameColumn):
            self.rename_column(request.name, request.new_name)
        elif isinstance(request, UpdateColumn):
            self.update_column(request.name, request.field_type, request.required, request.doc)
        elif isinstance(request, MoveColumn):
            self.move(request.name, request.op, request.other)
        elif isinstance(request, SetIdentifierFields):
            self.identifier_names = request.names
        elif isinstance(request, UnionByName):
            self.union_by_name(request.schema)
        else:  # pragma: no cover - the builder makes only the requests above
            raise ValidationError(f"Cannot update schema: unknown request {request!r}")

    def add_column(self, path: tuple[str, ...], field_type: IcebergType, doc: str | None, required: bool,
                   default: Any = None) -> None:
        full = ".".join(path)
        name = path[-1]
        action = f"add column {full!r}"
        default_json = None
        if default is not None:
            if self.base.format_version < 3:
                raise ValidationError(f"Cannot {action} with a default value: default values need format version 3 "
                                      f"(the table is v{self.base.format_version}; upgrade_format_version(3))")
            if not isinstance(field_type, PrimitiveType):
                raise ValidationError(f"Cannot {action} with a default value: icelog takes defaults of primitive "
                                      f"columns (at the top level or inside structs) only")
            try:
                default_json = value_to_json(field_type, value_from_python(field_type, default))
            except (ValidationError, ValueError, TypeError, OverflowError) as e:
                raise ValidationError(f"Cannot {action} with default {default!r}: it is not a {field_type} "
                                      f"({e})") from e
            if isinstance(default_json, str) and isinstance(field_type, (FloatType, DoubleType)):
                # JSON numbers have no NaN or infinities: Java and PyIceberg read such a default as no number
                raise ValidationError(f"Cannot {action} with default {default!r}: a default must be a finite "
                                      f"number (schema JSON cannot hold NaN or infinities)")
        key = ROOT
        if len(path) > 1:
            parent_name = ".".join(path[:-1])
            parent = self.find(parent_name, action)
            self.refuse_deleted(parent, parent_name, action)
            holder = parent
            if isinstance(parent.field_type, ListType):
                holder = parent.field_type.element_field
            elif isinstance(parent.field_type, MapType):
                holder = parent.field_type.value_field
            if not isinstance(holder.field_type, StructType):
                raise ValidationError(f"Cannot {action}: {parent_name!r} is a {parent.field_type}, not a struct")
            key = holder.field_id
        if self._key(name) in self.sibling_names(key):
            raise ValidationError(f"Cannot {action}: a column with that name already exists")
        if required and default_json is None and not self.allow_incompatible:
            raise ValidationError(f"Cannot {action}: it is required and rows already written have no value for it "
                                  "(pass allow_incompatible_changes=True to add it anyway)")
        new_id = self.next_id
        fresh = assign_fresh_ids((NestedField(field_id=new_id, name=name, field_type=field_type, required=required,
                                              doc=doc, initial_default=default_json, write_default=default_json),),
                                 start=new_id)
        self.next_id = fresh.highest_field_id + 1
        self.adds.setdefault(key, []).append(fresh.fields[0])
        self.added[self._key(full)] = (new_id, key)

    def delete_column(self, name: str) -> None:
        action = f"delete column {name!r}"
        field = self.find(name, action)
        fid = field.field_id
        if self.container(fid) is not None:
            raise ValidationError(f"Cannot {action}: list elements and map keys and values cannot be deleted")
        holder_ids = {fid}
        if isinstance(field.field_type, ListType):
            holder_ids.add(field.field_type.element_id)
        elif isinstance(field.field_type, MapType):
            holder_ids.add(field.field_type.value_id)
        if any(k in self.adds for k in holder_ids):
            raise ValidationError(f"Cannot {action}: columns are added to it in this update")
        if fid in self.updates:
            raise ValidationError(f"Cannot {action}: it is also renamed or updated in this update")
        if any(m.field_id == fid or m.other_id == fid for moves in self.moves.values() for m in moves):
            raise ValidationError(f"Cannot {action}: it is also moved in this update")
        self.deletes.add(fid)

    def rename_column(self, name: str, new_name: str) -> None:
        action = f"rename column {name!r}"
        if not isinstance(new_name, str) or not new_name:
            raise ValidationError(f"Cannot {action}: the new name {new_name!r} is not a non-empty string")
        field = self.find(name, action)
        self.refuse_deleted(field, name, action)
        if self.container(field.field_id) is not None:
            raise ValidationError(f"Cannot {action}: list elements and map keys and values keep their names")
        # a name taken now may be free by the end of the update (Java swaps two names in one update): build checks
        self.updates[field.field_id] = attrs.evolve(self.current(field), name=new_name)
        if self.identifier_names is not None:  # as Java's renameColumn, the identifier fields follow the name
            old_full = self.schema.find_column_name(field.field_id)
            new_full = old_full[:len(old_full) - len(field.name)] + new_name
            self.identifier_names = tuple(new_full if self._key(n) == self._key(old_full) else n
                                          for n in self.identifier_names)

    def update_column(self, name: str, field_type: IcebergType | None, required: bool | None,
                      doc: str | None) -> None:
        if field_type is None and required is None and doc is None:
            return
        action = f"update column {name!r}"
        field = self.find(name, action)
        self.refuse_deleted(field, name, action)
        if self.is_map_key(field.field_id):
            raise ValidationError(f"Cannot {action}: map keys cannot change")
        updated = self.current(field)
        if field_type is not None and field_type != updated.field_type:
            for kind in (updated.field_type, field_type):
                if not isinstance(kind, PrimitiveType):
                    raise ValidationError(f"Cannot change the type of column {name!r}: "
                                          f"{'it' if kind is updated.field_type else 'the new type'} is a {kind}, "
                                          "not a primitive")
            if not is_promotion(updated.field_type, field_type):
                raise ValidationError(f"Cannot change the type of column {name!r}: {updated.field_type} cannot be "
                                      f"promoted to {field_type}")
            updated = attrs.evolve(updated, field_type=field_type)
        if doc is not None:
            updated = attrs.evolve(updated, doc=doc)
        if required is not None and required != updated.required:
            if required and not self.allow_incompatible:
                raise ValidationError(f"Cannot make column {name!r} required: rows already written may hold nulls "
                                      "(pass allow_incompatible_changes=True to do it anyway)")
            updated = attrs.evolve(updated, required=required)
        if updated != field or field.field_id in self.updates:
            self.updates[field.field_id] = updated

    def _find_for_move(self, name: str, action: str) -> tuple[int, int]:
        """The id and parent key of an existing or just-added column."""
        try:
            field = self.schema.find_field(name, case_sensitive=self.case_sensitive)
        except ValidationError:
            added = self.added.get(self._key(name))
            if added is None:
                raise ValidationError(f"Cannot {action}: column {name!r} does not exist") from None
            return added
        self.refuse_deleted(field, name, action)
        key = self.parent_key(field.field_id)
        if self.struct_of(key) is None:
            raise ValidationError(f"Cannot {action}: {name!r} is not a field of a struct")
        return field.field_id, key

    def move(self, name: str, op: str, other: str | None) -> None:
        action = f"move column {name!r}" + (f" {op} {other!r}" if other is not None else " first")
        field_id, key = self._find_for_move(name, action)
        other_id = None
        if other is not None:
            other_id, other_key = self._find_for_move(other, action)
            if other_id == field_id:
                raise ValidationError(f"Cannot {action}: a column cannot move {op} itself")
            if other_key != key:
                raise ValidationError(f"Cannot {action}: the two columns are in different structs")
        self.moves.setdefault(key, []).append(_Move(op, field_id, other_id))

    def union_by_name(self, new: Schema) -> None:
        """PyIceberg's union by name: add what is missing, widen or relax what differs, keep the rest."""
        self._union_struct(new.fields, ROOT, ())

    def _union_struct(self, fields: Sequence[NestedField], key: int, prefix: tuple[str, ...]) -> None:
        existing = self.struct_of(key)
        assert existing is not None
        by_name = {self._key(f.name): f for f in existing.fields}
        for f in fields:
            partner = by_name.get(self._key(f.name))
            if partner is None:
                self.add_column(prefix + (f.name,), f.field_type, f.doc, f.required)
            else:
                self._union_field(f, partner)

    def _union_field(self, new: NestedField, partner: NestedField) -> None:
        name = self.name_of(partner.field_id)
        if new.optional and partner.required:
            self.update_column(name, None, False, None)
        nt, pt = new.field_type, partner.field_type
        if isinstance(nt, PrimitiveType):
            # a narrower incoming type (int into a long column) is a no-op; a wider one is a promotion
            if nt != pt and not is_promotion(nt, pt):
                self.update_column(name, nt, None, None)
        elif isinstance(nt, StructType):
            if not isinstance(pt, StructType):
                raise ValidationError(f"Cannot union column {name!r}: {pt} cannot become a struct")
            self._union_struct(nt.fields, partner.field_id, tuple(self.name_of(partner.field_id).split(".")))
        elif isinstance(nt, ListType):
            if not isinstance(pt, ListType):
                raise ValidationError(f"Cannot union column {name!r}: {pt} cannot become a list")
            self._union_field(nt.element_field, pt.element_field)
        elif isinstance(nt, MapType):
            if not isinstance(pt, MapType):
                raise ValidationError(f"Cannot union column {name!r}: {pt} cannot become a map")
            if nt.key_type != pt.key_type and not is_promotion(nt.key_type, pt.key_type):
                raise ValidationError(f"Cannot union column {name!r}: map keys cannot change ({pt.key_type} -> "
                                      f"{nt.key_type})")
            self._union_field(nt.value_field, pt.value_field)
        if new.doc is not None and new.doc != partner.doc and self.container(partner.field_id) is None:
            self.update_column(name, None, None, new.doc)

    # -- the result ----------------------------------------------------------------------------------------------

    def _struct_fields(self, fields: Iterable[NestedField], key: int) -> tuple[NestedField, ...]:
        out = []
        for f in fields:
            if f.field_id in self.deletes:
                continue
            updated = self.updates.get(f.field_id, f)
            out.append(attrs.evolve(updated, field_type=self._type(f, updated.field_type)))
        out += self.adds.get(key, ())
        for move in self.moves.get(key, ()):
            moving = next(f for f in out if f.field_id == move.field_id)
            out.remove(moving)
            if move.op == MOVE_FIRST:
                out.insert(0, moving)
            else:
                at = next(i for i, f in enumerate(out) if f.field_id == move.other_id)
                out.insert(at if move.op == MOVE_BEFORE else at + 1, moving)
        return tuple(out)

    def _type(self, field: NestedField, field_type: IcebergType) -> IcebergType:
        """``field``'s type with the changes inside it applied (``field_type``: after its own update)."""
        if isinstance(field_type, StructType):
            return StructType(self._struct_fields(field_type.fields, field.field_id))
        if isinstance(field_type, ListType):
            element = self.updates.get(field_type.element_id, field_type.element_field)
            return ListType(element_id=field_type.element_id,
                            element_type=self._type(field_type.element_field, element.field_type),
                            element_required=element.required)
        if isinstance(field_type, MapType):
            value = self.updates.get(field_type.value_id, field_type.value_field)
            return MapType(key_id=field_type.key_id, key_type=field_type.key_type, value_id=field_type.value_id,
                           value_type=self._type(field_type.value_field, value.field_type),
                           value_required=value.required)
        return field_type

    def _deleted_name(self, field_id: int) -> str:
        """The name of the deleted column that takes ``field_id`` away (itself or a struct holding it)."""
        at: int | None = field_id
        while at is not None:
            if at in self.deletes:
                return self.name_of(at)
            at = self.schema.parent_id(at)
        return self.name_of(field_id)

    def build(self, schema_id: int) -> Schema:
        fields = self._struct_fields(self.schema.fields, ROOT)
        # a schema with the changed fields and no identifier fields yet, to resolve names against
        try:
            shape = Schema(fields, schema_id=schema_id)
        except ValidationError as e:  # two columns of one struct under one name (a rename or an add)
            raise ValidationError(f"Cannot change the schema: {e}") from e
        if not self.case_sensitive:
            self._check_names_apart_without_case(shape)
        index = shape.index_by_id()
        if self.identifier_names is None:
            identifier_ids = self.schema.identifier_field_ids
            for fid in identifier_ids:
                if fid not in index:
                    raise ValidationError(f"Cannot delete column {self._deleted_name(fid)!r}: it is an identifier "
                                          "field (set the identifier fields first)")
        else:
            ids = []
            for name in self.identifier_names:
                try:
                    ids.append(shape.find_field(name, case_sensitive=self.case_sensitive).field_id)
                except ValidationError as e:
                    raise ValidationError(f"Cannot set identifier fields: column {name!r} does not exist in the "
                                          "new schema") from e
            identifier_ids = tuple(dict.fromkeys(ids))
        for fid, f in index.items():  # Parquet has no struct without fields (Java leaves this open: a TODO)
            if isinstance(f.field_type, StructType) and not f.field_type.fields:
                raise ValidationError(f"Cannot change the schema: struct {shape.find_column_name(fid)!r} would have "
                                      f"no fields left, which no data file can hold")
        self._check_specs(shape, index)
        self._check_sort_order(index)
        check_schema_for_format(shape, self.base.format_version, "the new schema")
        return Schema(fields, schema_id=schema_id, identifier_field_ids=identifier_ids)

    def _check_names_apart_without_case(self, shape: Schema) -> None:
        """An update that resolves names without case keeps the names it renames or adds apart without case."""
        changed = set(self.updates) | {fid for fid, _ in self.added.values()}
        structs: list[tuple[int, StructType]] = [(ROOT, shape.as_struct())]
        structs += [(fid, f.field_type) for fid, f in shape.index_by_id().items() if isinstance(f.field_type, StructType)]
        for key, struct in structs:
            seen: dict[str, int] = {}
            for f in struct.fields:
                other = seen.setdefault(f.name.lower(), f.field_id)
                if other != f.field_id and (other in changed or f.field_id in changed):
                    where = "<root>" if key == ROOT else shape.find_column_name(key)
                    raise ValidationError(f"Cannot change the schema: struct {where!r} would have two fields whose "
                                          f"names differ only in case ({f.name!r})")

    def _check_specs(self, shape: Schema, index: dict[int, NestedField]) -> None:
        default = self.base.default_spec_id
        for spec in self.base.specs:
            for pf in spec.fields:
                source = index.get(pf.source_id)
                if source is None and spec.spec_id != default:
                    continue  # an older spec keeps its dropped source, as Java keeps it (its files keep their values)
                if source is None:
                    raise ValidationError(f"Cannot delete column {self._deleted_name(pf.source_id)!r}: it is a "
                                          f"partition source (field {pf.name!r} of the default spec {spec.spec_id})")
                if not pf.transform.can_transform(source.field_type):
                    raise ValidationError(
                        f"Cannot change the type of column {self.name_of(pf.source_id)!r}: partition field "
                        f"{pf.name!r} ({pf.transform}) cannot apply to {source.field_type}")
                try:
                    clash = shape.find_field(pf.name)
                except ValidationError:
                    continue
                if not (pf.transform.is_identity and clash.field_id == pf.source_id):
                    raise ValidationError(f"Cannot name column {shape.find_column_name(clash.field_id)!r}: "
                                          f"partition field {pf.name!r} of spec {spec.spec_id} has that name")

    def _check_sort_order(self, index: dict[int, NestedField]) -> None:
        order = self.base.sort_order
        for sf in order.fields:
            source = index.get(sf.source_id)
            if source is None:
                raise ValidationError(f"Cannot delete column {self._deleted_name(sf.source_id)!r}: it is a source "
                                      f"of the default sort order {order.order_id}")
            if not sf.transform.can_transform(source.field_type):
                raise ValidationError(
                    f"Cannot change the type of column {self.name_of(sf.source_id)!r}: the default sort order's "
                    f"{sf.transform} cannot apply to {source.field_type}")
