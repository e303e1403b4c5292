"""What a CLI command changed in a table: one line for people, one JSON object (the same facts) for programs.

Layer: tools (the CLI's edge; nothing of ours imports it). It compares the table's state before and after the
command (two ``engine.state.table_state.TableState`` values, read from the log) and says what the command added: the snapshot
it committed (operation, id, branch, data and delete files and rows added and removed, from the snapshot summary)
and every metadata change (columns, partition fields, sort order, properties, refs, format version). One renderer
serves every command, so ``icelog append`` and ``icelog add-column`` tell the same way.
"""

from __future__ import annotations

from typing import Any

import attrs

#: snapshot summary counts, their JSON name, and how the line shows a non-zero value
SNAPSHOT_COUNTS = (("added-data-files", "data_files_added", "+{} data files"),
                   ("deleted-data-files", "data_files_removed", "-{} data files"),
                   ("added-delete-files", "delete_files_added", "+{} delete files"),
                   ("removed-delete-files", "delete_files_removed", "-{} delete files"),
                   ("added-records", "rows_added", "+{} rows"),
                   ("deleted-records", "rows_removed", "-{} rows"),
                   ("added-position-deletes", "position_deletes_added", "+{} position deletes"),
                   ("removed-position-deletes", "position_deletes_removed", "-{} position deletes"),
                   ("added-equality-deletes", "equality_deletes_added", "+{} equality deletes"),
                   ("removed-equality-deletes", "equality_deletes_removed", "-{} equality deletes"))


@attrs.frozen(kw_only=True)
class ChangeReport:
    """What one command changed.

    :param line: the one-line summary a person reads
    :param facts: the same facts as a JSON-ready mapping (``--json`` prints it)
    """

    line: str
    facts: dict[str, Any]


def summary_counts(summary: Any) -> tuple[dict[str, int], str]:
    """A snapshot summary's file and row counts (JSON names, zeros included) and the line's non-zero part
    ("+2 data files, +6 rows").

    :param summary: the summary as (key, value) pairs or a mapping
    """
    values = dict(summary or ())
    counts = {name: int(values.get(key) or 0) for key, name, _ in SNAPSHOT_COUNTS}
    shown = ", ".join(text.format(counts[name]) for _, name, text in SNAPSHOT_COUNTS if counts[name])
    return counts, shown


def describe_change(command: str, table: str, before: Any, after: Any, **facts: Any) -> ChangeReport:
    """The report of ``command`` on ``table``, from its state before and after.

    :param command: the CLI command (``append``, ``add-column``, ...)
    :param table: the table's name as the user gave it
    :param before: the table's state before the command, or None when the command created it
    :param after: its state after, or None when the command dropped it
    :param facts: more facts the command knows (files deleted, a new name, ...); they go into the JSON as given
    """
    out: dict[str, Any] = {"command": command, "table": table}
    parts: list[str] = []
    if before is None and after is not None:
        parts.append(f"created at {after.location}, format version {after.format_version}, "
                     f"{len(after.schema.columns)} column(s), "
                     + (f"partitioned by {', '.join(f.name for f in after.spec.fields)}" if after.spec.fields
                        else "unpartitioned"))
    if after is None:
        parts.append("dropped from the catalog (the log keeps its history)")
    new_snapshots = _new_snapshots(before, after)
    if new_snapshots:
        last = new_snapshots[-1]
        branches = sorted(name for name, ref in after.refs if ref.snapshot_id == last.snapshot_id)
        counts: dict[str, int] = {}
        for snapshot in new_snapshots:
            for name, value in summary_counts(snapshot.summary)[0].items():
                counts[name] = counts.get(name, 0) + value
        shown = ", ".join(text.format(counts[name]) for _, name, text in SNAPSHOT_COUNTS if counts[name])
        where = f" on {', '.join(branches)}" if branches and branches != ["main"] else ""
        parts.append(f"snapshot {last.snapshot_id} ({last.operation}){where}" + (f": {shown}" if shown else ""))
        out.update(operation=last.operation, snapshot_id=last.snapshot_id, branches=branches,
                   snapshots_added=len(new_snapshots), **counts,
                   total_rows=int(last.summary_value("total-records") or 0),
                   total_data_files=int(last.summary_value("total-data-files") or 0))
    else:
        out.update(operation=None, snapshot_id=None, branches=[], snapshots_added=0,
                   **{name: 0 for _, name, _ in SNAPSHOT_COUNTS})
    changes = _metadata_changes(before, after, {s.snapshot_id for s in new_snapshots}) if before and after else []
    parts.extend(changes)
    out["changes"] = changes
    out["log_version"] = after.version if after is not None else None
    out.update(facts)
    if before is not None and after is not None and before.version == after.version and not facts:
        parts = ["nothing changed"]
    return ChangeReport(line=f"{command} {table}: {'; '.join(parts) or 'nothing changed'}", facts=out)


def _new_snapshots(before: Any, after: Any) -> list[Any]:
    if after is None:
        return []
    known = {s.snapshot_id for s in before.snapshots} if before is not None else set()
    return sorted((s for s in after.snapshots if s.snapshot_id not in known), key=lambda s: s.sequence_number)


def _metadata_changes(before: Any, after: Any, new_snapshot_ids: set[int]) -> list[str]:
    """Each metadata change as a short phrase ("added column note (id 7)", "schema 3", "set owner=etl")."""
    changes = _column_changes(before.schema, after.schema)
    if after.current_schema_id != before.current_schema_id:
        changes.append(f"schema {after.current_schema_id}")
    changes += _partition_changes(before.spec, after.spec)
    if after.default_spec_id != before.default_spec_id:
        changes.append(f"spec {after.default_spec_id}")
    if after.default_sort_order_id != before.default_sort_order_id:
        order = after.sort_order
        terms = ", ".join(f"{_term(after.schema, f.source_id, f.transform)} {f.direction} {f.null_order}"
                          for f in order.fields)
        changes.append(f"sort order {order.order_id}: {terms or 'unsorted'}")
    old_props, new_props = dict(before.properties), dict(after.properties)
    changes += [f"set {k}" + (f"={v}" if len(v) <= 40 else "") for k, v in new_props.items()
                if old_props.get(k) != v]
    changes += [f"removed property {k}" for k in old_props if k not in new_props]
    if after.format_version != before.format_version:
        changes.append(f"format version {before.format_version} to {after.format_version}")
    old_refs, new_refs = dict(before.refs), dict(after.refs)
    for name, ref in new_refs.items():
        old = old_refs.get(name)
        if ref.snapshot_id in new_snapshot_ids:
            continue  # the snapshot part says where the new snapshot went
        if old is None:
            changes.append(f"created {ref.type} {name} at {ref.snapshot_id}")
        elif old.snapshot_id != ref.snapshot_id:
            changes.append(f"{ref.type} {name} moved from {old.snapshot_id} to {ref.snapshot_id}")
    changes += [f"removed {ref.type} {name}" for name, ref in old_refs.items() if name not in new_refs]
    expired = len(before.snapshots) + len(new_snapshot_ids) - len(after.snapshots)
    if expired > 0:
        changes.append(f"expired {expired} snapshot(s)")
    return changes


def _column_changes(old: Any, new: Any) -> list[str]:
    old_fields, new_fields = old.index_by_id(), new.index_by_id()
    changes = []
    for field_id, field in new_fields.items():
        name = new.find_column_name(field_id)
        was = old_fields.get(field_id)
        if was is None:
            changes.append(f"added column {name} {field.field_type} (id {field_id})")
            continue
        old_name = old.find_column_name(field_id)
        if old_name != name:
            changes.append(f"renamed column {old_name} to {name} (id {field_id})")
        if str(was.field_type) != str(field.field_type) and not _nested(field):
            changes.append(f"column {name} (id {field_id}) {was.field_type} to {field.field_type}")
        if was.required != field.required:
            changes.append(f"column {name} (id {field_id}) now {'required' if field.required else 'optional'}")
        if was.doc != field.doc:
            changes.append(f"column {name} (id {field_id}) doc {field.doc!r}")
    changes += [f"dropped column {old.find_column_name(field_id)} (id {field_id})" for field_id in old_fields
                if field_id not in new_fields]
    return changes


def _nested(field: Any) -> bool:
    """A struct, list or map column: its type changes whenever a field inside it does (told on its own)."""
    return type(field.field_type).__name__ in ("StructType", "ListType", "MapType")


def _partition_changes(old: Any, new: Any) -> list[str]:
    old_fields = {f.field_id: f for f in old.fields}
    new_fields = {f.field_id: f for f in new.fields}
    changes = [f"added partition field {f.name} ({f.transform}) (id {f.field_id})" for f in new.fields
               if f.field_id not in old_fields]
    changes += [f"renamed partition field {old_fields[f.field_id].name} to {f.name}" for f in new.fields
                if f.field_id in old_fields and old_fields[f.field_id].name != f.name]
    changes += [f"removed partition field {f.name}" for f in old.fields if f.field_id not in new_fields]
    return changes


def _term(schema: Any, source_id: int, transform: Any) -> str:
    from engine.errors import ValidationError

    try:
        column = schema.find_column_name(source_id)
    except ValidationError:  # a sort order may name a column a later schema dropped
        column = f"#{source_id}"
    return column if str(transform) == "identity" else f"{transform}({column})"
