"""Schema evolution: add, delete, rename, retype, reorder columns and set identifier fields, in one commit.

Layer: engine.operations (pure: builds events from a base state; imports engine.model, engine.state.events,
engine.state.table_state, engine.errors and pyarrow for type conversion only). The requests, the type rules and
their application to a base schema are in engine.operations.schema_changes; this module is the builder.

The builder follows PyIceberg's ``UpdateSchema`` (method names, argument order, semantics)::

    with table.update_schema() as update:
        update.add_column("note", "string", doc="free text")
        update.add_column(("location", "alt"), "double")      # into the struct ``location``
        update.rename_column("data", "payload")
        update.update_column("id", field_type="long")          # int -> long
        update.move_first("data")                           # names refer to the starting schema
    table.update_schema().delete_column("note").commit()

Names given to ``delete_column``, ``rename_column``, ``update_column`` and the moves refer to the schema the
update starts from, as in PyIceberg (a column added in the same update can be moved by its new name);
``set_identifier_fields`` names columns of the new schema. Requests are recorded by name and applied all at
once in :meth:`UpdateSchema.events` on the base the commit loop hands in. Each request is also checked at once
against the state the builder started from, so a bad request raises where it is made, as in PyIceberg; checks
on the whole new schema (identifier fields, partition and sort order sources) run when it is built. As Iceberg
Java and PyIceberg do (``AssertCurrentSchemaId``, ``AssertLastAssignedFieldId``), a commit whose base has
another current schema or another last column id than the one the builder started from fails with
:class:`~engine.errors.CommitConflict` instead of applying names to a schema they were not written for.

Rules (Iceberg's, each broken one raises :class:`~engine.errors.ValidationError` naming the column, and
nothing is committed): new columns get fresh ids from the table's ``last_column_id + 1`` (nested types too,
in Java's ``assignFreshIds`` order); a required column can be added, or an optional one made required, only
with ``allow_incompatible_changes``; types change only by promotion (int -> long, float -> double,
decimal(P, S) -> decimal(P', S) with P' >= P), whatever ``allow_incompatible_changes`` says, because data
files already written must still read; a partition source (of any spec, since every spec's partition type
is derived from the current schema) or a default sort order source cannot be deleted; a column deleted in an
update cannot be renamed, updated, moved or added to in the same update; list elements and map keys and
values keep their names and cannot be deleted; map keys cannot change at all; identifier fields follow
Iceberg's rules (checked by :class:`~engine.model.schema.Schema`).
"""

from __future__ import annotations

import json
from typing import Any

import pyarrow as pa

from engine.errors import CommitConflict, ValidationError
from engine.state.events import CurrentSchemaSet, Event, PropertiesRemoved, PropertiesSet, SchemaAdded
from engine.model.arrow_schema import schema_from_arrow
from engine.model.name_mapping import NAME_MAPPING_PROPERTY, updated_name_mapping
from engine.model.schema import Schema
from engine.operations.commit import CommitContext
from engine.operations.pending import PendingUpdate
from engine.operations.schema_changes import (
    MOVE_AFTER,
    MOVE_BEFORE,
    MOVE_FIRST,
    AddColumn,
    DeleteColumn,
    MoveColumn,
    Path,
    RenameColumn,
    SchemaChanges,
    SchemaRequest,
    SetIdentifierFields,
    TypeLike,
    UnionByName,
    UpdateColumn,
    add_path,
    full_name,
    to_iceberg_type,
)
from engine.state.table_state import TableState


def _same_structure(a: Schema, b: Schema) -> bool:
    return a.fields == b.fields and a.identifier_field_ids == b.identifier_field_ids


class UpdateSchema(PendingUpdate):
    """Evolve a table's schema: PyIceberg's builder, committed as one ``add-schema`` + ``set-current-schema``.

    ::

        with table.update_schema() as update:
            update.add_column("tags", pa.list_(pa.string()))
            update.update_column("price", field_type="decimal(12, 2)")
        table.update_schema(allow_incompatible_changes=True).add_column("k", "long", required=True).commit()

    :param table: the table handle (``Table.update_schema()`` passes it)
    :param allow_incompatible_changes: allow adding a required column and making an optional column required
        (type changes other than promotions are refused regardless)
    :param case_sensitive: match column names with their case (default) or ignoring it
    """

    def __init__(self, table: Any, *, allow_incompatible_changes: bool = False, case_sensitive: bool = True) -> None:
        super().__init__(table)
        self._allow_incompatible_changes = allow_incompatible_changes
        self._case_sensitive = case_sensitive
        self._requests: list[SchemaRequest] = []
        # the state the requests are written against (None for a table handle without state)
        self._start: TableState | None = getattr(table, "state", None)

    # -- the builder (PyIceberg's names) ---------------------------------------------------------------------------

    def case_sensitive(self, case_sensitive: bool) -> UpdateSchema:
        """Match column names with (True) or without (False) their case."""
        self._case_sensitive = case_sensitive
        self._check()
        return self

    def add_column(self, path: Path, field_type: TypeLike, doc: str | None = None,
                   required: bool = False, default: Any = None) -> UpdateSchema:
        """Add a column at the end of its struct.

        :param path: a name, a dotted name (``"location.alt"`` adds ``alt`` to the struct ``location``; a list's
            element struct or a map's value struct is reached through the list or map name) or a tuple of names
        :param field_type: an Iceberg type string, an engine type or a pyarrow type (nested types get fresh ids)
        :param doc: the column's doc string
        :param required: whether the column is required (needs ``allow_incompatible_changes`` unless it has a
            default)
        :param default: format v3: the column's value in rows written before it existed (``initial-default``) and
            in rows appended without it (``write-default``); a Python value of the column's primitive type
        """
        names = add_path(path)
        return self._record(AddColumn(path=names, field_type=to_iceberg_type(field_type, column=".".join(names)),
                                       doc=doc, required=bool(required), default=default))

    def delete_column(self, path: Path) -> UpdateSchema:
        """Delete a column (and everything nested in it).

        :param path: the column's name, dotted name or tuple of names
        """
        return self._record(DeleteColumn(name=full_name(path)))

    def rename_column(self, path_from: Path, new_name: str) -> UpdateSchema:
        """Rename a column in place (its id stays, so data files still read).

        :param path_from: the column's name, dotted name or tuple of names
        :param new_name: the new name (the last part only, not a path)
        """
        return self._record(RenameColumn(name=full_name(path_from), new_name=new_name))

    def update_column(self, path: Path, field_type: TypeLike | None = None, required: bool | None = None,
                      doc: str | None = None) -> UpdateSchema:
        """Promote a column's type, make it optional (or required, with ``allow_incompatible_changes``), set its doc.

        :param path: the column's name, dotted name or tuple of names
        :param field_type: the new type: int -> long, float -> double, decimal(P, S) -> decimal(P', S), P' >= P
        :param required: False makes the column optional
        :param doc: the new doc string
        """
        name = full_name(path)
        new_type = None if field_type is None else to_iceberg_type(field_type, column=name)
        return self._record(UpdateColumn(name=name, field_type=new_type,
                                          required=None if required is None else bool(required), doc=doc))

    def make_column_optional(self, path: Path) -> UpdateSchema:
        """Make a required column optional."""
        return self.update_column(path, required=False)

    def move_first(self, path: Path) -> UpdateSchema:
        """Move a column to the start of its struct."""
        return self._record(MoveColumn(name=full_name(path), op=MOVE_FIRST, other=None))

    def move_before(self, path: Path, before_path: Path) -> UpdateSchema:
        """Move a column just before another column of the same struct."""
        return self._record(MoveColumn(name=full_name(path), op=MOVE_BEFORE, other=full_name(before_path)))

    def move_after(self, path: Path, after_path: Path) -> UpdateSchema:
        """Move a column just after another column of the same struct."""
        return self._record(MoveColumn(name=full_name(path), op=MOVE_AFTER, other=full_name(after_path)))

    def set_identifier_fields(self, *fields: str) -> UpdateSchema:
        """Replace the identifier fields by these columns (names in the new schema; none clears them)."""
        return self._record(SetIdentifierFields(names=tuple(full_name(f) for f in fields)))

    def union_by_name(self, new_schema: Schema | pa.Schema) -> UpdateSchema:
        """Merge another schema in by column name: add the columns it has and the table lacks, promote types it
        widens, make optional what it has optional; columns it lacks are kept.

        :param new_schema: an engine Schema or a pyarrow schema (its field ids, if any, are ignored)
        """
        if isinstance(new_schema, pa.Schema):
            new_schema = schema_from_arrow(new_schema)
        elif not isinstance(new_schema, Schema):
            raise ValidationError(f"Cannot union schema: expected an engine Schema or a pyarrow schema, got "
                                  f"{type(new_schema).__name__}")
        return self._record(UnionByName(schema=new_schema))

    # -- applying ----------------------------------------------------------------------------------------------------

    def _record(self, request: SchemaRequest) -> UpdateSchema:
        self._requests.append(request)
        try:
            self._check()
        except ValidationError:
            self._requests.pop()
            raise
        return self

    def _check(self) -> None:
        if self._start is not None:
            self._changes(self._start)

    def _changes(self, base: TableState) -> SchemaChanges:
        changes = SchemaChanges(base, allow_incompatible_changes=self._allow_incompatible_changes,
                           case_sensitive=self._case_sensitive)
        for request in self._requests:
            changes.apply(request)
        return changes

    def apply(self, base: TableState | None = None) -> Schema:
        """The schema the update would make (not committed), with the id it would get.

        :param base: the state to apply the changes to (default: the table's current state)
        """
        base = base if base is not None else self._table.state
        return self._changes(base).build(max(s.schema_id for s in base.schemas) + 1)

    def events(self, base: TableState, ctx: CommitContext) -> list[Event]:
        """``[SchemaAdded, CurrentSchemaSet]`` for a new schema; only ``CurrentSchemaSet`` when an earlier schema
        is the same; nothing when the current one is.

        :raises ValidationError: for a change Iceberg forbids (naming the column)
        :raises CommitConflict: when the current schema changed since the builder was made
        """
        start = self._start
        if start is not None and start.table_uuid == base.table_uuid and (
                base.current_schema_id != start.current_schema_id or base.last_column_id != start.last_column_id):
            raise CommitConflict(
                f"Cannot update schema: the current schema changed from {start.current_schema_id} to "
                f"{base.current_schema_id} (last column id {start.last_column_id} -> {base.last_column_id}) since "
                "this update began", stream=base.table_uuid, expected_version=start.version,
                actual_version=base.version)
        changes = self._changes(base)
        new_schema = changes.build(max(s.schema_id for s in base.schemas) + 1)
        if _same_structure(new_schema, base.schema):
            return []
        for existing in base.schemas:
            if _same_structure(new_schema, existing):
                return [CurrentSchemaSet(schema_id=existing.schema_id), *_carried_properties(base, existing)]
        last_column_id = max(base.last_column_id, new_schema.highest_field_id)
        return [SchemaAdded(schema=new_schema, last_column_id=last_column_id),
                CurrentSchemaSet(schema_id=new_schema.schema_id), *_carried_properties(base, new_schema)]


#: prefixes of table properties that name a column after them (Java's SchemaUpdate renames and drops these with
#: their column: PropertyUtil.applySchemaChanges)
COLUMN_PROPERTY_PREFIXES = ("write.metadata.metrics.column.", "write.parquet.bloom-filter-enabled.column.",
                            "write.parquet.stats-enabled.column.")


def _carried_properties(base: TableState, schema: Schema) -> list[Event]:
    """The properties a schema change carries along in its commit: the name mapping, and the properties named after
    a column, which follow its new name (a parent's rename included) or go with it when it is deleted."""
    return [*_mapping_update(base, schema), *_column_property_changes(base, schema)]


def _column_property_changes(base: TableState, schema: Schema) -> list[Event]:
    old_names = {fid: base.schema.find_column_name(fid) for fid in base.schema.index_by_id()}
    new_ids = schema.index_by_id()
    renamed = {name: schema.find_column_name(fid) for fid, name in old_names.items()
               if fid in new_ids and schema.find_column_name(fid) != name}
    deleted = {name for fid, name in old_names.items() if fid not in new_ids}
    updates: dict[str, str] = {}
    removals: list[str] = []
    for key, value in base.properties:
        prefix = next((p for p in COLUMN_PROPERTY_PREFIXES if key.startswith(p)), None)
        column = key[len(prefix):] if prefix is not None else None
        if column in renamed:
            updates[prefix + renamed[column]] = value  # type: ignore[operator]
            removals.append(key)
        elif column in deleted:
            removals.append(key)
    removals = [k for k in removals if k not in updates]
    return ([PropertiesSet(updates=updates)] if updates else []) + \
        ([PropertiesRemoved(removals=removals)] if removals else [])


def _mapping_update(base: TableState, schema: Schema) -> list[Event]:
    """The table's name mapping brought up to ``schema`` (Java's ``SchemaUpdate`` does this in the same commit):
    files without field ids added after a rename or an added column then map by their names too."""
    text = base.prop(NAME_MAPPING_PROPERTY)
    if text is None:
        return []
    try:
        entries = json.loads(text)
    except ValueError:
        return []  # a mapping no reader can parse stays as it is: reading refuses it, naming the property
    if not isinstance(entries, list):
        return []
    updated = json.dumps(updated_name_mapping(entries, schema), separators=(",", ":"))
    return [] if updated == text else [PropertiesSet(updates={NAME_MAPPING_PROPERTY: updated})]
