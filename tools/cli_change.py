"""The ``icelog`` commands that change a catalog or a table: namespaces and tables (create, append, register,
rename, drop), rows (delete, overwrite, upsert, ...), compaction, schema, partition spec, sort order,
properties, format version, branches and tags, snapshot expiry and orphan files. Each tells what it changed.

Layer: tools (icelog's engine; nothing imports tools). Commits through the Catalog; prints.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any, Callable

from tools.cli_context import change_table, key_values, named_table, open_catalog, read_parquet, tell


def cmd_create_namespace(args: argparse.Namespace) -> None:
    from tools.change_report import ChangeReport

    with open_catalog(args) as cat:
        cat.create_namespace(args.namespace)
        tell(args, ChangeReport(line=f"created namespace {args.namespace}",
                                 facts={"command": args.command, "namespace": args.namespace}))


def cmd_create_table(args: argparse.Namespace) -> None:
    from engine.errors import ValidationError
    from engine.model.schema import Schema
    from engine.formats.parquet_files import read_parquet_schema
    from tools.change_report import describe_change

    schema: Any = None
    if args.schema and not args.schema_from:
        try:
            schema = Schema.from_json(json.loads(args.schema))
        except json.JSONDecodeError as e:
            raise ValidationError(f"Cannot parse --schema: {e}") from e
    elif not args.schema_from:
        raise ValidationError("Cannot create table: give --schema JSON or --schema-from FILE.parquet")
    props = key_values(args.property, "--property")
    with open_catalog(args) as cat:
        if args.schema_from:
            schema = read_parquet_schema(args.schema_from, io=cat.io)
        t = cat.create_table(args.table, schema=schema, partition_by=args.partition_by or None, properties=props,
                             format_version=args.format_version, location=absolute_folder(args.location))
        tell(args, describe_change(args.command, args.table, None, t.state))


def absolute_folder(location: str | None) -> str | None:
    """A ``--location`` as the user typed it: a relative folder is one under the working folder of the command (a
    table location is absolute; the catalog refuses a relative one)."""
    if location is None or "://" in location or location.startswith(("/", "file:")):
        return location
    return os.path.abspath(location)


def cmd_append(args: argparse.Namespace) -> None:
    with open_catalog(args) as cat:
        change_table(args, cat, lambda t: t.append_files(args.files))


def cmd_register(args: argparse.Namespace) -> None:
    import attrs

    from tools.change_report import describe_change
    from tools.progress import phase_bars

    relocate = key_values(args.relocate, "--relocate")
    with open_catalog(args) as cat, phase_bars(f"register {args.table}", unit="snapshot") as progress:
        t = cat.register_table(args.table, args.metadata_location, relocate=relocate or None,
                               location=absolute_folder(args.location), progress=progress)
        report = describe_change(args.command, args.table, None, t.state, metadata_location=t.metadata_location,
                                 notes=list(t.import_notes))
        if not args.json:
            report = attrs.evolve(report, line="\n".join([
                f"registered {args.table}: {len(t.snapshots())} snapshot(s), metadata at {t.metadata_location}",
                *(f"note: {note}" for note in t.import_notes)]))
        tell(args, report)


def cmd_rename_table(args: argparse.Namespace) -> None:
    from tools.change_report import ChangeReport

    with open_catalog(args) as cat:
        cat.rename_table(args.table, args.new_name)
        tell(args, ChangeReport(line=f"rename-table {args.table}: renamed to {args.new_name}",
                                 facts={"command": args.command, "table": args.table, "new_name": args.new_name}))


def cmd_drop_table(args: argparse.Namespace) -> None:
    import attrs

    from tools.change_report import describe_change

    from engine.errors import ValidationError

    if args.delete_external_files and not args.purge:
        raise ValidationError(f"Cannot drop table {args.table}: --delete-external-files deletes files only with "
                              f"--purge; nothing was dropped")
    with open_catalog(args) as cat:
        before = named_table(args, cat).state
        deleted = cat.drop_table(args.table, purge=args.purge, delete_external_files=args.delete_external_files)
        report = describe_change(args.command, args.table, before, None, files_deleted=len(deleted or ()))
        if deleted:
            report = attrs.evolve(report, line=f"{report.line}; deleted {len(deleted)} file(s)")
        tell(args, report)


def cmd_delete(args: argparse.Namespace) -> None:
    with open_catalog(args) as cat:
        change_table(args, cat, lambda t: t.delete(args.where, branch=args.branch))


def cmd_overwrite(args: argparse.Namespace) -> None:
    with open_catalog(args) as cat:
        rows = read_parquet(cat, args.files)
        change_table(args, cat, lambda t: t.overwrite(rows, where=args.where, branch=args.branch))


def cmd_dynamic_overwrite(args: argparse.Namespace) -> None:
    with open_catalog(args) as cat:
        rows = read_parquet(cat, args.files)
        change_table(args, cat, lambda t: t.dynamic_overwrite(rows, branch=args.branch))


def cmd_upsert(args: argparse.Namespace) -> None:
    with open_catalog(args) as cat:
        rows = read_parquet(cat, args.files)
        change_table(args, cat, lambda t: t.upsert(rows, args.key, branch=args.branch))


def cmd_delete_by_key(args: argparse.Namespace) -> None:
    with open_catalog(args) as cat:
        keys = read_parquet(cat, args.files)
        change_table(args, cat, lambda t: t.delete_by_key(keys, args.key, branch=args.branch))


def cmd_compact(args: argparse.Namespace) -> None:
    from tools.progress import progress_bar

    with open_catalog(args) as cat:
        with progress_bar(f"compact {args.table}") as progress:
            change_table(args, cat, lambda t: t.rewrite_data_files(
                where=args.where, strategy=args.strategy, sort_order=args.sort_by or None,
                zorder_columns=args.zorder_by or None, target_file_size_bytes=args.target_file_size,
                progress=progress))


def cmd_rewrite_manifests(args: argparse.Namespace) -> None:
    with open_catalog(args) as cat:
        change_table(args, cat, lambda t: t.rewrite_manifests())


def cmd_add_column(args: argparse.Namespace) -> None:
    from engine.errors import ValidationError

    with open_catalog(args) as cat:
        path = tuple(args.name.split("."))
        default = None
        if args.default is not None:
            try:
                default = json.loads(args.default)
            except ValueError as e:
                raise ValidationError(f"Cannot add column {args.name}: --default must be a JSON value such as 0, "
                                      f"1.5, true or '\"text\"', not {args.default!r}") from e
        change_table(args, cat, lambda t: t.update_schema(
            allow_incompatible_changes=args.allow_incompatible_changes).add_column(
            path, args.type, doc=args.doc, required=args.required, default=default).commit())


def cmd_drop_column(args: argparse.Namespace) -> None:
    with open_catalog(args) as cat:
        change_table(args, cat, lambda t: t.update_schema().delete_column(args.name).commit())


def cmd_rename_column(args: argparse.Namespace) -> None:
    with open_catalog(args) as cat:
        change_table(args, cat, lambda t: t.update_schema().rename_column(args.name, args.new_name).commit())


def cmd_update_column(args: argparse.Namespace) -> None:
    with open_catalog(args) as cat:
        change_table(args, cat, lambda t: t.update_schema().update_column(
            args.name, field_type=args.type, required=False if args.optional else None, doc=args.doc).commit())


def cmd_add_partition_field(args: argparse.Namespace) -> None:
    from engine.model.partitioning import parse_partition_term

    with open_catalog(args) as cat:
        transform, column = parse_partition_term(args.term)
        change_table(args, cat, lambda t: t.update_spec().add_field(column, transform, args.name).commit())


def cmd_remove_partition_field(args: argparse.Namespace) -> None:
    with open_catalog(args) as cat:
        change_table(args, cat, lambda t: t.update_spec().remove_field(args.name).commit())


def cmd_rename_partition_field(args: argparse.Namespace) -> None:
    with open_catalog(args) as cat:
        change_table(args, cat, lambda t: t.update_spec().rename_field(args.name, args.new_name).commit())


def cmd_set_sort_order(args: argparse.Namespace) -> None:
    from engine.model.sort_order import SortDirection, parse_sort_term

    def replace(table: Any) -> None:
        update = table.replace_sort_order()
        for term in args.terms:
            transform, column, direction, null_order = parse_sort_term(term)
            add = update.asc if direction == SortDirection.ASC else update.desc
            add(column, transform, null_order) if null_order is not None else add(column, transform)
        update.commit()

    with open_catalog(args) as cat:
        change_table(args, cat, replace)


def cmd_set_properties(args: argparse.Namespace) -> None:

    pairs = key_values(args.pairs, "set-properties")
    with open_catalog(args) as cat:
        change_table(args, cat, lambda t: t.set_properties(pairs))


def cmd_remove_properties(args: argparse.Namespace) -> None:
    with open_catalog(args) as cat:
        change_table(args, cat, lambda t: t.remove_properties(*args.keys))


def cmd_upgrade_format_version(args: argparse.Namespace) -> None:
    with open_catalog(args) as cat:
        change_table(args, cat, lambda t: t.upgrade_format_version(args.version))


def _snapshots(args: argparse.Namespace, action: Callable[[Any], Any]) -> None:
    def manage(table: Any) -> None:
        builder = table.manage_snapshots()
        action(builder)
        builder.commit()

    with open_catalog(args) as cat:
        change_table(args, cat, manage)


def cmd_create_branch(args: argparse.Namespace) -> None:
    def act(b: Any) -> None:
        b.create_branch(args.snapshot_id, args.name)  # None: the current snapshot when it commits (an empty table:
        # a new empty snapshot, as Java's createBranch)
    _snapshots(args, act)


def cmd_create_tag(args: argparse.Namespace) -> None:
    def act(b: Any) -> None:
        b.create_tag(_current_id(b) if args.snapshot_id is None else args.snapshot_id, args.name)
    _snapshots(args, act)


def _current_id(builder: Any) -> int:
    from engine.errors import ValidationError

    current = builder._table.current_snapshot()
    if current is None:
        raise ValidationError("Cannot create a ref: the table has no snapshot yet; give --snapshot-id")
    return current.snapshot_id


def cmd_remove_branch(args: argparse.Namespace) -> None:
    _snapshots(args, lambda b: b.remove_branch(args.name))


def cmd_remove_tag(args: argparse.Namespace) -> None:
    _snapshots(args, lambda b: b.remove_tag(args.name))


def cmd_rollback(args: argparse.Namespace) -> None:
    _snapshots(args, lambda b: b.rollback_to_snapshot(args.snapshot_id))


def cmd_set_current_snapshot(args: argparse.Namespace) -> None:
    _snapshots(args, lambda b: b.set_current_snapshot(args.snapshot_id))


def cmd_cherrypick(args: argparse.Namespace) -> None:
    _snapshots(args, lambda b: b.cherrypick_snapshot(args.snapshot_id))


def cmd_fast_forward(args: argparse.Namespace) -> None:
    _snapshots(args, lambda b: b.fast_forward(args.branch_name, args.to))


def cmd_expire_snapshots(args: argparse.Namespace) -> None:
    from tools.progress import progress_bar

    with open_catalog(args) as cat:
        with progress_bar(f"expire {args.table}") as progress:
            result = named_table(args, cat).expire_snapshots(older_than_ms=args.older_than_ms,
                                                        retain_last=args.retain_last,
                                                        delete_external_files=args.delete_external_files,
                                                        progress=progress)
        if args.json:
            print(json.dumps({"command": args.command, "table": args.table,
                              "expired_snapshot_ids": list(result.expired_snapshot_ids),
                              "removed_refs": list(result.removed_refs),
                              "deleted_files": {kind: len(getattr(result, f"deleted_{kind}")) for kind in
                                                ("data_files", "delete_files", "manifests", "manifest_lists",
                                                 "metadata_files")}}))
        elif not result.expired_snapshot_ids and not result.removed_refs:
            rule = ("older than --older-than-ms" if args.older_than_ms is not None
                    else "older than history.expire.max-snapshot-age-ms (default 5 days)")
            print(f"expire snapshots: nothing expired (no snapshot {rule} beyond the ones each branch keeps; "
                  f"see --older-than-ms and --retain-last)")
        else:
            deleted = ", ".join(f"{len(getattr(result, f'deleted_{kind}'))} {kind.replace('_', ' ')}" for kind in
                                ("data_files", "delete_files", "manifests", "manifest_lists", "metadata_files"))
            refs = f", {len(result.removed_refs)} ref(s) removed" if result.removed_refs else ""
            print(f"expire snapshots: {len(result.expired_snapshot_ids)} snapshot(s) expired{refs}; deleted {deleted}")


def cmd_remove_orphan_files(args: argparse.Namespace) -> None:
    with open_catalog(args) as cat:
        removed = named_table(args, cat).remove_orphan_files(older_than_ms=args.older_than_ms)
        if args.json:
            print(json.dumps({"command": args.command, "table": args.table, "files_deleted": len(removed),
                              "deleted_files": removed}))
            return
        for path in removed:
            print(path)
        print(f"remove-orphan-files {args.table}: deleted {len(removed)} orphan file(s)", file=sys.stderr)
