"""The ``icelog`` command line: a thin shell that parses arguments, calls the Catalog and prints.

Layer: tools (top; nothing imports it). Every library error becomes one line on stderr and
exit code 1.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
from typing import Any, Callable, Sequence

from storage.postgres_url import is_postgres_url, redacted

DEFAULT_WAREHOUSE = "warehouse"


#: commands that may start a new catalog where none is (the others refuse a warehouse that holds no catalog)
CREATING_COMMANDS = ("create-namespace", "create-table", "register", "serve", "demo")


#: commands that change a catalog or a table: each prints one line saying what changed, or with --json one JSON
#: object holding the same facts
CHANGING_COMMANDS = (
    "create-namespace", "create-table", "append", "register", "rename-table", "drop-table", "publish", "delete",
    "overwrite", "dynamic-overwrite", "upsert", "delete-by-key", "compact", "rewrite-manifests", "add-column",
    "drop-column", "rename-column", "update-column", "add-partition-field", "remove-partition-field",
    "rename-partition-field", "set-sort-order", "set-properties", "remove-properties", "upgrade-format-version",
    "create-branch", "create-tag", "remove-branch", "remove-tag", "rollback", "set-current-snapshot", "cherrypick",
    "fast-forward", "expire-snapshots", "remove-orphan-files")


def _catalog(args: argparse.Namespace) -> Any:
    from engine import Catalog
    from engine.errors import ValidationError

    catalog_dir = getattr(args, "catalog_dir", None)
    location = catalog_dir or args.warehouse
    if (args.command not in CREATING_COMMANDS and not getattr(args, "create", False)
            and "://" not in location and not os.path.exists(os.path.join(location, "catalog.db"))):
        raise ValidationError(f"Cannot open catalog: there is none at {location} (no catalog.db); check --warehouse "
                              f"and --catalog-dir, or start one with create-namespace, create-table, register or "
                              f"--create")
    return Catalog.open(catalog_dir or args.warehouse, warehouse=args.warehouse if catalog_dir else None,
                        create=getattr(args, "create", False), properties=_properties(args))


def _properties(args: argparse.Namespace) -> dict[str, str]:
    """The ``--property KEY=VALUE`` settings (FileIO properties such as ``s3.endpoint``)."""
    from engine.errors import ValidationError

    out = {}
    for item in getattr(args, "catalog_property", None) or ():
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ValidationError(f"Cannot read --property {item.split('=', 1)[0]!r}: expected KEY=VALUE")
        out[key.strip()] = value
    return out


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def _time(ms: int) -> str:
    return datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.timezone.utc).isoformat(timespec="milliseconds")


def _tell(args: argparse.Namespace, report: Any) -> None:
    """Print a command's report: its line, or with ``--json`` its facts as one JSON object."""
    print(json.dumps(report.facts) if getattr(args, "json", False) else report.line)


def _change(args: argparse.Namespace, cat: Any, change: Callable[[Any], Any]) -> Any:
    """Run ``change(table)`` on the table the command names and tell what it changed; returns what it returned."""
    from tools.change_report import describe_change

    table = _table(args, cat)
    before = table.state
    result = change(table)
    _tell(args, describe_change(args.command, args.table, before, table.state))
    return result


def cmd_create_namespace(args: argparse.Namespace) -> None:
    from tools.change_report import ChangeReport

    with _catalog(args) as cat:
        cat.create_namespace(args.namespace)
        _tell(args, ChangeReport(line=f"created namespace {args.namespace}",
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
    props = dict(p.split("=", 1) for p in args.property or [])
    with _catalog(args) as cat:
        if args.schema_from:
            schema = read_parquet_schema(args.schema_from, io=cat.io)
        t = cat.create_table(args.table, schema=schema, partition_by=args.partition_by or None, properties=props,
                             format_version=args.format_version, location=args.location)
        _tell(args, describe_change(args.command, args.table, None, t.state))


def cmd_append(args: argparse.Namespace) -> None:
    with _catalog(args) as cat:
        _change(args, cat, lambda t: t.append_files(args.files))


def cmd_register(args: argparse.Namespace) -> None:
    import attrs

    from engine.errors import ValidationError
    from tools.change_report import describe_change
    from tools.progress import phase_bars

    relocate = {}
    for rule in args.relocate or []:
        old, sep, new = rule.partition("=")
        if not sep or not old:
            raise ValidationError(f"Cannot parse --relocate {rule!r}: expected OLD=NEW")
        relocate[old] = new
    with _catalog(args) as cat, phase_bars(f"register {args.table}", unit="snapshot") as progress:
        t = cat.register_table(args.table, args.metadata_location, relocate=relocate or None,
                               location=args.location, progress=progress)
        report = describe_change(args.command, args.table, None, t.state, metadata_location=t.metadata_location,
                                 notes=list(t.import_notes))
        if not args.json:
            report = attrs.evolve(report, line="\n".join([
                f"registered {args.table}: {len(t.snapshots())} snapshot(s), metadata at {t.metadata_location}",
                *(f"note: {note}" for note in t.import_notes)]))
        _tell(args, report)


def cmd_rename_table(args: argparse.Namespace) -> None:
    from tools.change_report import ChangeReport

    with _catalog(args) as cat:
        cat.rename_table(args.table, args.new_name)
        _tell(args, ChangeReport(line=f"rename-table {args.table}: renamed to {args.new_name}",
                                 facts={"command": args.command, "table": args.table, "new_name": args.new_name}))


def cmd_drop_table(args: argparse.Namespace) -> None:
    import attrs

    from tools.change_report import describe_change

    with _catalog(args) as cat:
        before = _table(args, cat).state
        deleted = cat.drop_table(args.table, purge=args.purge or args.delete_external_files,
                                 delete_external_files=args.delete_external_files)
        report = describe_change(args.command, args.table, before, None, files_deleted=len(deleted or ()))
        if deleted:
            report = attrs.evolve(report, line=f"{report.line}; deleted {len(deleted)} file(s)")
        _tell(args, report)


def cmd_tables(args: argparse.Namespace) -> None:
    with _catalog(args) as cat:
        namespaces = [args.namespace] if args.namespace else [".".join(ns) for ns in cat.list_namespaces()]
        for ns in namespaces:
            for ident in cat.list_tables(ns):
                print(".".join(ident))


def cmd_log(args: argparse.Namespace) -> None:
    if args.table == "copy":
        return cmd_log_copy(args)
    if args.targets:
        from engine.errors import ValidationError
        raise ValidationError(f"Cannot show the log: unexpected arguments {' '.join(args.targets)} (did you mean "
                              f"'icelog log copy SRC DST'?)")
    with _catalog(args) as cat:
        t = cat.load_table(args.table)
        print("position\tversion\ttype\toperation\tactor\ttime\tcommit_id\tsummary")
        for e in cat.log.read_stream(t.uuid):
            operation, summary = _event_summary(e.type, e.payload)
            print(f"{e.position}\t{e.version}\t{e.type}\t{operation}\t{e.actor or ''}\t{_time(e.time_ms)}\t"
                  f"{e.commit_id}\t{summary}")


def _event_summary(event_type: str, payload: str) -> tuple[str, str]:
    """An event's operation (for a snapshot) and a one-line summary of what it changed."""
    try:
        body = json.loads(payload)
    except ValueError:
        return "", ""
    if event_type == "add-snapshot":
        from tools.change_report import summary_counts

        shown = summary_counts(body.get("summary") or [])[1]
        branch = body.get("branch", "main")
        return str(body.get("operation", "")), shown + ("" if branch == "main" else f" on {branch}")
    keys = [k for k in ("updates", "removals", "name", "schema-id", "spec-id") if k in body]
    return "", "; ".join(f"{k}={json.dumps(body[k], sort_keys=True)[:60]}" for k in keys)


def cmd_log_copy(args: argparse.Namespace) -> None:
    """``icelog log copy SRC DST``: the whole log, event for event, into an empty log on the other backend."""
    from engine.errors import ValidationError

    if len(args.targets) != 2:
        raise ValidationError("Cannot copy the log: give SRC and DST (a catalog.db, its folder, or a "
                              "postgresql:// URL), e.g. icelog log copy warehouse postgresql://icelog@db/lake")
    try:
        from storage.log_copy import copy_log, head_hash, open_log
        with open_log(args.targets[0]) as source, open_log(args.targets[1]) as target:
            copied = copy_log(source, target)
            problems = target.verify()
            if problems or head_hash(target) != head_hash(source):
                raise ValidationError(f"Cannot trust the copy: {'; '.join(problems[:3]) or 'hash chain heads differ'}")
    except ModuleNotFoundError as e:
        if e.name != "psycopg":
            raise
        raise ValidationError("Cannot open a PostgreSQL log: psycopg is not installed "
                              "(pip install 'icelog[postgresql]')") from e
    print(f"copied {copied.events} events in {copied.commits} commits and {copied.staged_files} staged file "
          f"records; both logs end at hash {copied.head_hash}; the copy verifies")


def cmd_snapshots(args: argparse.Namespace) -> None:
    with _catalog(args) as cat:
        print("snapshot_id\tparent_id\tsequence\ttime\toperation\ttotal_records\ttotal_data_files")
        for s in cat.load_table(args.table).snapshots():
            print(f"{s.snapshot_id}\t{s.parent_snapshot_id}\t{s.sequence_number}\t{_time(s.timestamp_ms)}\t"
                  f"{s.operation}\t{s.summary_value('total-records')}\t{s.summary_value('total-data-files')}")


def cmd_inspect(args: argparse.Namespace) -> None:
    from engine.read.metadata_tables import inspect_kind, to_json_lines

    with _catalog(args) as cat:
        for line in to_json_lines(inspect_kind(cat.load_table(args.table), args.kind)):
            print(line)


def cmd_scan(args: argparse.Namespace) -> None:
    with _catalog(args) as cat:
        columns = args.columns.split(",") if args.columns else None
        table = cat.load_table(args.table).scan(where=args.where, columns=columns,
                                                snapshot_id=args.snapshot_id).to_arrow()
        rows = table.slice(0, args.limit).to_pylist() if args.limit else table.to_pylist()
        for row in rows:
            print(json.dumps(row, default=str, ensure_ascii=False))
        print(f"({table.num_rows} row(s))", file=sys.stderr)


def cmd_rebuild(args: argparse.Namespace) -> None:
    with _catalog(args) as cat:
        paths = cat.load_table(args.table).rebuild(args.into)
        print(f"rebuilt {len(paths)} file(s) into {args.into}")


def cmd_verify(args: argparse.Namespace) -> int:
    with _catalog(args) as cat:
        problems = cat.verify(args.table)
    if problems:
        for p in problems:
            print(p)
        return 1
    print(f"ok: the log's hash chain holds and the published files of {args.table} match the log")
    return 0


def cmd_publish(args: argparse.Namespace) -> None:
    from tools.progress import progress_bar

    with _catalog(args) as cat:
        tables = [cat.load_table(args.table)] if args.table else [
            cat.load_table(e.namespace + (e.name,)) for e in cat.store.catalog().tables]
        told = []
        for table in tables:
            name = ".".join(table.identifier)
            before = cat.projector.published_version(table.uuid)
            with progress_bar(f"publish {name}", unit="snapshot") as progress:
                published = table.publish(progress=progress)
            told.append({"table": name, "published_from": None if published is None else before + 1,
                         "published_to": None if published is None else table.state.version,
                         "metadata_location": published})
            if args.json:
                continue
            if published is None:
                print(f"{name}: up to date at version {before}")
            else:
                print(f"{name}: published versions {before + 1}..{table.state.version} ({published})")
        if args.json:
            print(json.dumps({"command": args.command, "tables": told}))


def _read_parquet(cat: Any, paths: Sequence[str]) -> Any:
    """The rows of the Parquet files a command was given, as one Arrow table."""
    import pyarrow as pa

    from engine.formats.parquet_files import read_parquet_rows

    return pa.concat_tables([read_parquet_rows(p, io=cat.io) for p in paths], promote_options="default")


def _table(args: argparse.Namespace, cat: Any) -> Any:
    return cat.load_table(args.table)


def cmd_delete(args: argparse.Namespace) -> None:
    with _catalog(args) as cat:
        _change(args, cat, lambda t: t.delete(args.where, branch=args.branch))


def cmd_overwrite(args: argparse.Namespace) -> None:
    with _catalog(args) as cat:
        rows = _read_parquet(cat, args.files)
        _change(args, cat, lambda t: t.overwrite(rows, where=args.where, branch=args.branch))


def cmd_dynamic_overwrite(args: argparse.Namespace) -> None:
    with _catalog(args) as cat:
        rows = _read_parquet(cat, args.files)
        _change(args, cat, lambda t: t.dynamic_overwrite(rows, branch=args.branch))


def cmd_upsert(args: argparse.Namespace) -> None:
    with _catalog(args) as cat:
        rows = _read_parquet(cat, args.files)
        _change(args, cat, lambda t: t.upsert(rows, args.key, branch=args.branch))


def cmd_delete_by_key(args: argparse.Namespace) -> None:
    with _catalog(args) as cat:
        keys = _read_parquet(cat, args.files)
        _change(args, cat, lambda t: t.delete_by_key(keys, args.key, branch=args.branch))


def cmd_compact(args: argparse.Namespace) -> None:
    from tools.progress import progress_bar

    with _catalog(args) as cat:
        with progress_bar(f"compact {args.table}") as progress:
            _change(args, cat, lambda t: t.rewrite_data_files(
                where=args.where, strategy=args.strategy, sort_order=args.sort_by or None,
                zorder_columns=args.zorder_by or None, target_file_size_bytes=args.target_file_size,
                progress=progress))


def cmd_rewrite_manifests(args: argparse.Namespace) -> None:
    with _catalog(args) as cat:
        _change(args, cat, lambda t: t.rewrite_manifests())


def cmd_add_column(args: argparse.Namespace) -> None:
    from engine.errors import ValidationError

    with _catalog(args) as cat:
        path = tuple(args.name.split("."))
        default = None
        if args.default is not None:
            try:
                default = json.loads(args.default)
            except ValueError as e:
                raise ValidationError(f"Cannot add column {args.name}: --default must be a JSON value such as 0, "
                                      f"1.5, true or '\"text\"', not {args.default!r}") from e
        _change(args, cat, lambda t: t.update_schema(
            allow_incompatible_changes=args.allow_incompatible_changes).add_column(
            path, args.type, doc=args.doc, required=args.required, default=default).commit())


def cmd_drop_column(args: argparse.Namespace) -> None:
    with _catalog(args) as cat:
        _change(args, cat, lambda t: t.update_schema().delete_column(args.name).commit())


def cmd_rename_column(args: argparse.Namespace) -> None:
    with _catalog(args) as cat:
        _change(args, cat, lambda t: t.update_schema().rename_column(args.name, args.new_name).commit())


def cmd_update_column(args: argparse.Namespace) -> None:
    with _catalog(args) as cat:
        _change(args, cat, lambda t: t.update_schema().update_column(
            args.name, field_type=args.type, required=False if args.optional else None, doc=args.doc).commit())


def cmd_add_partition_field(args: argparse.Namespace) -> None:
    from engine.model.partitioning import parse_partition_term

    with _catalog(args) as cat:
        transform, column = parse_partition_term(args.term)
        _change(args, cat, lambda t: t.update_spec().add_field(column, transform, args.name).commit())


def cmd_remove_partition_field(args: argparse.Namespace) -> None:
    with _catalog(args) as cat:
        _change(args, cat, lambda t: t.update_spec().remove_field(args.name).commit())


def cmd_rename_partition_field(args: argparse.Namespace) -> None:
    with _catalog(args) as cat:
        _change(args, cat, lambda t: t.update_spec().rename_field(args.name, args.new_name).commit())


def cmd_set_sort_order(args: argparse.Namespace) -> None:
    from engine.model.sort_order import SortDirection, parse_sort_term

    def replace(table: Any) -> None:
        update = table.replace_sort_order()
        for term in args.terms:
            transform, column, direction, null_order = parse_sort_term(term)
            add = update.asc if direction == SortDirection.ASC else update.desc
            add(column, transform, null_order) if null_order is not None else add(column, transform)
        update.commit()

    with _catalog(args) as cat:
        _change(args, cat, replace)


def cmd_set_properties(args: argparse.Namespace) -> None:
    from engine.errors import ValidationError

    pairs = [p.split("=", 1) for p in args.pairs]
    if any(len(p) != 2 for p in pairs):
        raise ValidationError("Cannot set properties: give them as key=value")
    with _catalog(args) as cat:
        _change(args, cat, lambda t: t.set_properties(dict(pairs)))  # type: ignore[arg-type]


def cmd_remove_properties(args: argparse.Namespace) -> None:
    with _catalog(args) as cat:
        _change(args, cat, lambda t: t.remove_properties(*args.keys))


def cmd_upgrade_format_version(args: argparse.Namespace) -> None:
    with _catalog(args) as cat:
        _change(args, cat, lambda t: t.upgrade_format_version(args.version))


def _snapshots(args: argparse.Namespace, action: Callable[[Any], Any]) -> None:
    def manage(table: Any) -> None:
        builder = table.manage_snapshots()
        action(builder)
        builder.commit()

    with _catalog(args) as cat:
        _change(args, cat, manage)


def cmd_create_branch(args: argparse.Namespace) -> None:
    def act(b: Any) -> None:
        b.create_branch(args.snapshot_id or _current_id(b), args.name)
    _snapshots(args, act)


def cmd_create_tag(args: argparse.Namespace) -> None:
    def act(b: Any) -> None:
        b.create_tag(args.snapshot_id or _current_id(b), args.name)
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

    with _catalog(args) as cat:
        with progress_bar(f"expire {args.table}") as progress:
            result = _table(args, cat).expire_snapshots(older_than_ms=args.older_than_ms,
                                                        retain_last=args.retain_last,
                                                        delete_external_files=args.delete_external_files,
                                                        progress=progress)
        if args.json:
            print(json.dumps({"expired_snapshot_ids": list(result.expired_snapshot_ids),
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
    with _catalog(args) as cat:
        removed = _table(args, cat).remove_orphan_files(older_than_ms=args.older_than_ms)
        if args.json:
            print(json.dumps({"command": args.command, "table": args.table, "files_deleted": len(removed),
                              "deleted_files": removed}))
            return
        for path in removed:
            print(path)
        print(f"remove-orphan-files {args.table}: deleted {len(removed)} orphan file(s)", file=sys.stderr)


def cmd_demo(args: argparse.Namespace) -> None:
    from engine.errors import ValidationError
    from tools.demo import run_demo

    folder = args.warehouse_dir or args.warehouse
    if "://" in folder:
        raise ValidationError(f"Cannot run the demo in {folder}: --warehouse must be a local folder (the demo "
                              f"keeps its log there); run it on S3 with --s3 s3://BUCKET/PREFIX")
    run_demo(folder, rows=args.rows, s3=args.s3, properties=_properties(args) or None)


def cmd_bench(args: argparse.Namespace) -> None:
    from tools.bench import main as bench_main

    bench_main(args.bench_args)


def cmd_serve(args: argparse.Namespace) -> None:
    from tools.rest_server import serve

    token = args.token or os.environ.get("ICELOG_TOKEN")
    if not token:
        from engine.errors import ValidationError
        raise ValidationError("Cannot serve: give --token SECRET (or set ICELOG_TOKEN); every request must carry it")
    from tools.rest_server import connection_settings

    uri = f"http://{args.host}:{args.port}"

    def banner() -> None:
        log = args.catalog_dir or os.path.join(args.warehouse, "catalog.db")
        if is_postgres_url(log):
            log = redacted(log)
        print(f"icelog REST catalog on {uri}  (warehouse {args.warehouse}, log {log}); Ctrl-C stops it")
        for line in connection_settings(uri, token, os.path.basename(os.path.normpath(args.warehouse)) or "lake"):
            print(f"  {line}")
        sys.stdout.flush()

    serve(args.warehouse, args.host, args.port, token, max_body_bytes=args.max_body_bytes,
          catalog_dir=args.catalog_dir, properties=_properties(args), ready=banner)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="icelog", description="Event-sourced metadata for Apache Iceberg tables.")
    parser.add_argument("--warehouse", default=os.environ.get("ICELOG_WAREHOUSE", DEFAULT_WAREHOUSE),
                        help="the warehouse folder holding catalog.db (default: ./warehouse), or an s3:// URI "
                             "(then give --catalog-dir)")
    parser.add_argument("--catalog-dir", default=os.environ.get("ICELOG_CATALOG_DIR"),
                        help="keep catalog.db in this folder instead of the warehouse, or the log in PostgreSQL: "
                             "postgresql://user@host:5432/db")
    parser.add_argument("--create", action="store_true",
                        help="start a catalog where there is none, or initialize an existing empty catalog.db "
                             "(otherwise refused as a damaged log)")
    parser.add_argument("--property", action="append", metavar="KEY=VALUE", dest="catalog_property",
                        help="a FileIO property, repeatable: s3.endpoint, s3.region, s3.access-key-id, "
                             "s3.secret-access-key, s3.session-token, s3.path-style-access (default: the AWS_* "
                             "environment variables)")
    sub = parser.add_subparsers(dest="command", required=True)

    # the catalog options are taken after the subcommand too (icelog tables --warehouse X); given there, they win
    anywhere = argparse.ArgumentParser(add_help=False)
    anywhere.add_argument("--warehouse", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
    anywhere.add_argument("--catalog-dir", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
    anywhere.add_argument("--create", action="store_true", default=argparse.SUPPRESS, help=argparse.SUPPRESS)

    def add(name: str, func: Callable[[argparse.Namespace], None], help_text: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help_text, description=help_text, parents=[anywhere])
        p.set_defaults(func=func)
        if name in CHANGING_COMMANDS:
            p.add_argument("--json", action="store_true",
                           help="print what changed as one JSON object instead of one line")
        return p

    p = add("create-namespace", cmd_create_namespace, "Create a namespace.")
    p.add_argument("namespace")
    p = add("create-table", cmd_create_table, "Create a table from an Iceberg schema JSON or a Parquet file's schema.")
    p.add_argument("table", help="namespace.table")
    p.add_argument("--schema", help="the schema as Iceberg schema JSON")
    p.add_argument("--schema-from", help="take the schema of this Parquet file")
    p.add_argument("--partition-by", action="append", help="a partition term such as 'day(ts)'; repeatable")
    p.add_argument("--property", action="append", help="key=value table property; repeatable")
    p.add_argument("--format-version", type=int, default=2)
    p.add_argument("--location", help="the table folder (default <warehouse>/<namespace>/<table>); absent or empty")
    p = add("append", cmd_append, "Append existing Parquet files to a table as one snapshot.")
    p.add_argument("table")
    p.add_argument("files", nargs="+")
    p = add("register", cmd_register, "Take over an existing Iceberg table: its whole history becomes events.")
    p.add_argument("table", help="namespace.table")
    p.add_argument("metadata_location", help="a *.metadata.json file (gzip too) or the table's folder")
    p.add_argument("--relocate", action="append", metavar="OLD=NEW",
                   help="rewrite paths starting with OLD to start with NEW; repeatable")
    p.add_argument("--location", help="publish icelog's metadata here instead of the original table folder")
    p = add("rename-table", cmd_rename_table, "Rename a table (its folder and files stay).")
    p.add_argument("table")
    p.add_argument("new_name", help="namespace.table")
    p = add("drop-table", cmd_drop_table, "Drop a table from the catalog (the log keeps its history).")
    p.add_argument("table")
    p.add_argument("--purge", action="store_true", help="also delete the files the table owns")
    p.add_argument("--delete-external-files", action="store_true",
                   help="with --purge, also delete the files it referenced outside its location")
    p = add("tables", cmd_tables, "List tables (of one namespace, or of all).")
    p.add_argument("namespace", nargs="?")
    p = add("log", cmd_log, "Show a table's events: position, version, type, operation, actor, time, commit id "
                            "and what each changed. "
                            "'icelog log copy SRC DST' copies a whole log between SQLite and PostgreSQL.")
    p.add_argument("table", help="namespace.table, or copy")
    p.add_argument("targets", nargs="*", metavar="SRC DST",
                   help="with copy: the source and the (empty) target log: a catalog.db, its folder, or a "
                        "postgresql:// URL")
    p = add("snapshots", cmd_snapshots, "List a table's snapshots.")
    p.add_argument("table")
    p = add("inspect", cmd_inspect, "Print one of a table's metadata tables (Iceberg Java's columns) as JSON lines.")
    p.add_argument("table")
    p.add_argument("kind", choices=["snapshots", "history", "refs", "manifests", "all_manifests", "entries", "files",
                                    "data_files", "delete_files", "partitions", "metadata_log_entries", "log"])
    p = add("scan", cmd_scan, "Print a table's rows as JSON lines.")
    p.add_argument("table")
    p.add_argument("--where", help="a filter such as \"id > 10 and category = 'a'\"")
    p.add_argument("--columns", help="comma-separated column names")
    p.add_argument("--snapshot-id", type=int)
    p.add_argument("--limit", type=int)
    p = add("rebuild", cmd_rebuild, "Render a table's metadata from the log into another folder.")
    p.add_argument("table")
    p.add_argument("--into", required=True)
    p = add("verify", cmd_verify, "Check the log's hash chain and that published files match the log.")
    p.add_argument("table")
    p = add("publish", cmd_publish, "Bring published metadata up to the log head (after a crash or project=False).")
    p.add_argument("table", nargs="?", help="one table (default: every table)")

    def table_cmd(name: str, func: Callable[[argparse.Namespace], None], help_text: str,
                  branch: bool = False) -> argparse.ArgumentParser:
        p = add(name, func, help_text)
        p.add_argument("table")
        if branch:
            p.add_argument("--branch", default="main", help="the branch to commit to (default main)")
        return p

    p = table_cmd("delete", cmd_delete, "Delete the rows matching a filter (write.delete.mode decides CoW or MoR).",
                  branch=True)
    p.add_argument("--where", required=True)
    p = table_cmd("overwrite", cmd_overwrite, "Replace the rows matching --where (or all) with Parquet files' rows.",
                  branch=True)
    p.add_argument("files", nargs="+")
    p.add_argument("--where")
    p = table_cmd("dynamic-overwrite", cmd_dynamic_overwrite,
                  "Replace exactly the partitions present in the Parquet files' rows.", branch=True)
    p.add_argument("files", nargs="+")
    p = table_cmd("upsert", cmd_upsert, "Insert rows, replacing those with the same key columns.", branch=True)
    p.add_argument("files", nargs="+")
    p.add_argument("--key", action="append", required=True, help="a key column; repeatable")
    p = table_cmd("delete-by-key", cmd_delete_by_key, "Delete rows by key with an equality delete file.",
                  branch=True)
    p.add_argument("files", nargs="+", help="Parquet files holding the keys")
    p.add_argument("--key", action="append", required=True, help="a key column; repeatable")
    p = table_cmd("compact", cmd_compact, "Rewrite data files (binpack, sort or zorder), applying delete files.")
    p.add_argument("--where")
    p.add_argument("--strategy", choices=["binpack", "sort", "zorder"], default="binpack")
    p.add_argument("--sort-by", action="append", help="a sort term such as 'ts DESC'; repeatable")
    p.add_argument("--zorder-by", action="append", help="a column; repeatable")
    p.add_argument("--target-file-size", type=int)
    table_cmd("rewrite-manifests", cmd_rewrite_manifests, "Rewrite the current snapshot's manifests.")
    p = table_cmd("add-column", cmd_add_column, "Add a column (dotted name for nested) of an Iceberg type.")
    p.add_argument("name")
    p.add_argument("type", help="an Iceberg type such as long, string, decimal(10,2)")
    p.add_argument("--doc")
    p.add_argument("--required", action="store_true",
                   help="rows already written have no value for it: give --default (format v3) or "
                        "--allow-incompatible-changes")
    p.add_argument("--default", help="the value rows written before it read (a JSON value; format v3)")
    p.add_argument("--allow-incompatible-changes", action="store_true",
                   help="add a required column without a default anyway (readers may then fail on old rows)")
    p = table_cmd("drop-column", cmd_drop_column, "Drop a column.")
    p.add_argument("name")
    p = table_cmd("rename-column", cmd_rename_column, "Rename a column.")
    p.add_argument("name")
    p.add_argument("new_name")
    p = table_cmd("update-column", cmd_update_column, "Promote a column's type, make it optional, or set its doc.")
    p.add_argument("name")
    p.add_argument("--type")
    p.add_argument("--optional", action="store_true")
    p.add_argument("--doc")
    p = table_cmd("add-partition-field", cmd_add_partition_field, "Add a partition field such as 'bucket(16, id)'.")
    p.add_argument("term")
    p.add_argument("--name")
    p = table_cmd("remove-partition-field", cmd_remove_partition_field, "Remove a partition field.")
    p.add_argument("name")
    p = table_cmd("rename-partition-field", cmd_rename_partition_field, "Rename a partition field.")
    p.add_argument("name")
    p.add_argument("new_name")
    p = table_cmd("set-sort-order", cmd_set_sort_order, "Replace the default sort order ('id', 'ts DESC', ...).")
    p.add_argument("terms", nargs="*")
    p = table_cmd("set-properties", cmd_set_properties, "Set table properties key=value.")
    p.add_argument("pairs", nargs="+")
    p = table_cmd("remove-properties", cmd_remove_properties, "Remove table properties.")
    p.add_argument("keys", nargs="+")
    p = table_cmd("upgrade-format-version", cmd_upgrade_format_version, "Upgrade the table's format version.")
    p.add_argument("version", type=int)
    for name, func, help_text in (("create-branch", cmd_create_branch, "Create a branch (at the current snapshot)."),
                                  ("create-tag", cmd_create_tag, "Create a tag (at the current snapshot).")):
        p = table_cmd(name, func, help_text)
        p.add_argument("name")
        p.add_argument("--snapshot-id", type=int)
    for name, func, help_text in (("remove-branch", cmd_remove_branch, "Remove a branch."),
                                  ("remove-tag", cmd_remove_tag, "Remove a tag.")):
        p = table_cmd(name, func, help_text)
        p.add_argument("name")
    for name, func, help_text in (("rollback", cmd_rollback, "Roll main back to an ancestor snapshot."),
                                  ("set-current-snapshot", cmd_set_current_snapshot, "Point main at a snapshot."),
                                  ("cherrypick", cmd_cherrypick, "Apply an append or overwrite snapshot to main.")):
        p = table_cmd(name, func, help_text)
        p.add_argument("snapshot_id", type=int)
    p = table_cmd("fast-forward", cmd_fast_forward, "Fast-forward a branch to another ref.")
    p.add_argument("branch_name")
    p.add_argument("to")
    p = table_cmd("expire-snapshots", cmd_expire_snapshots, "Expire old snapshots and delete unreachable files.")
    p.add_argument("--older-than-ms", type=int)
    p.add_argument("--retain-last", type=int)
    p.add_argument("--delete-external-files", action="store_true",
                   help="also delete unreachable files outside the table location (appended in place)")
    p = table_cmd("remove-orphan-files", cmd_remove_orphan_files, "Delete files under the table no snapshot uses.")
    p.add_argument("--older-than-ms", type=int)
    p = add("serve", cmd_serve, "Run the Iceberg REST catalog server over the warehouse (Spark type=rest).")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8181)
    p.add_argument("--token", help="the bearer token clients must send (default $ICELOG_TOKEN)")
    p.add_argument("--max-body-bytes", type=_positive_int, default=4 << 20,
                   help="the largest request body accepted; larger ones get 413 (default 4194304, 4 MiB)")
    p = add("demo", cmd_demo, "Run the main job: a PySpark pipeline committing through icelog's REST catalog.")
    p.add_argument("--warehouse-dir", help="where the demo warehouse goes (default: --warehouse, ./warehouse)")
    p.add_argument("--rows", type=int, default=200_000, help="events ingested for the day (default 200000)")
    p.add_argument("--s3", nargs="?", const="loopback", metavar="s3://BUCKET/PREFIX",
                   help="run on S3: a loopback S3 server the demo starts and stops (no value), or a real bucket "
                        "(reached with --property s3.* or the AWS_* variables); the log stays in --warehouse-dir")
    # everything after `bench` goes to tools.bench's own parser (one parser: `icelog bench --help` shows its
    # options); "+" as this parser's only prefix makes --sizes and --help plain words it passes on
    bench_help = "Run the benchmarks and print JSON (icelog bench --help lists the options)."
    p = sub.add_parser("bench", help=bench_help, description=bench_help, prefix_chars="+", add_help=False)
    p.set_defaults(func=cmd_bench)
    p.add_argument("bench_args", nargs=argparse.REMAINDER)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    from engine.errors import IcelogError
    from storage.errors import LogError

    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except (IcelogError, LogError) as e:
        print(f"icelog: {e}", file=sys.stderr)
        return 1
    except BrokenPipeError:  # the reader went away (icelog scan ... | head): end quietly
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    except ModuleNotFoundError as e:
        module = (e.name or "").split(".")[0]
        extra = EXTRAS.get(module)
        if extra is None:
            raise
        print(f"icelog: {args.command} needs {module}, which is not installed: pip install 'icelog[{extra}]'",
              file=sys.stderr)
        return 1


#: modules of the optional extras, and the extra that brings each
EXTRAS = {"starlette": "server", "uvicorn": "server", "pyspark": "spark", "psycopg": "postgresql",
          "botocore": "s3"}


if __name__ == "__main__":
    raise SystemExit(main())
