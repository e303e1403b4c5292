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

DEFAULT_WAREHOUSE = "warehouse"


def _catalog(args: argparse.Namespace) -> Any:
    from engine import Catalog

    return Catalog.open(args.warehouse)


def _time(ms: int) -> str:
    return datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.timezone.utc).isoformat(timespec="milliseconds")


def cmd_create_namespace(args: argparse.Namespace) -> None:
    with _catalog(args) as cat:
        cat.create_namespace(args.namespace)
        print(f"created namespace {args.namespace}")


def cmd_create_table(args: argparse.Namespace) -> None:
    import pyarrow.parquet as pq

    from engine.errors import ValidationError
    from engine.model.schema import Schema

    if args.schema_from:
        try:
            schema: Any = pq.read_schema(args.schema_from)
        except (OSError, Exception) as e:  # pyarrow raises several types for unreadable files
            from engine.errors import CorruptFileError
            raise CorruptFileError(f"Cannot read schema: {args.schema_from} is not a readable Parquet file ({e})",
                                   path=args.schema_from) from e
    elif args.schema:
        try:
            schema = Schema.from_json(json.loads(args.schema))
        except json.JSONDecodeError as e:
            raise ValidationError(f"Cannot parse --schema: {e}") from e
    else:
        raise ValidationError("Cannot create table: give --schema JSON or --schema-from FILE.parquet")
    props = dict(p.split("=", 1) for p in args.property or [])
    with _catalog(args) as cat:
        t = cat.create_table(args.table, schema=schema, partition_by=args.partition_by or None, properties=props,
                             format_version=args.format_version)
        print(f"created table {args.table} at {t.location}")


def cmd_append(args: argparse.Namespace) -> None:
    with _catalog(args) as cat:
        snap = cat.load_table(args.table).append_files(args.files)
        if snap is None:
            print("nothing to append")
        else:
            print(f"snapshot {snap.snapshot_id}: added {snap.summary_value('added-data-files')} file(s), "
                  f"{snap.summary_value('added-records')} record(s)")


def cmd_tables(args: argparse.Namespace) -> None:
    with _catalog(args) as cat:
        namespaces = [args.namespace] if args.namespace else [".".join(ns) for ns in cat.list_namespaces()]
        for ns in namespaces:
            for ident in cat.list_tables(ns):
                print(".".join(ident))


def cmd_log(args: argparse.Namespace) -> None:
    with _catalog(args) as cat:
        t = cat.load_table(args.table)
        print("position\tversion\ttype\ttime\tcommit_id")
        for e in cat.log.read_stream(t.uuid):
            print(f"{e.position}\t{e.version}\t{e.type}\t{_time(e.time_ms)}\t{e.commit_id}")


def cmd_snapshots(args: argparse.Namespace) -> None:
    with _catalog(args) as cat:
        print("snapshot_id\tparent_id\tsequence\ttime\toperation\ttotal_records\ttotal_data_files")
        for s in cat.load_table(args.table).snapshots():
            print(f"{s.snapshot_id}\t{s.parent_snapshot_id}\t{s.sequence_number}\t{_time(s.timestamp_ms)}\t"
                  f"{s.operation}\t{s.summary_value('total-records')}\t{s.summary_value('total-data-files')}")


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


def cmd_demo(args: argparse.Namespace) -> None:
    from tools.demo import run_demo

    run_demo(args.warehouse_dir or "warehouse")


def cmd_bench(args: argparse.Namespace) -> None:
    from tools.bench import main as bench_main

    bench_main(args.bench_args)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="icelog", description="Event-sourced metadata for Apache Iceberg tables.")
    parser.add_argument("--warehouse", default=os.environ.get("ICELOG_WAREHOUSE", DEFAULT_WAREHOUSE),
                        help="the warehouse folder holding catalog.db (default: ./warehouse)")
    sub = parser.add_subparsers(dest="command", required=True)

    def add(name: str, func: Callable[[argparse.Namespace], None], help_text: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help_text, description=help_text)
        p.set_defaults(func=func)
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
    p = add("append", cmd_append, "Append existing Parquet files to a table as one snapshot.")
    p.add_argument("table")
    p.add_argument("files", nargs="+")
    p = add("tables", cmd_tables, "List tables (of one namespace, or of all).")
    p.add_argument("namespace", nargs="?")
    p = add("log", cmd_log, "Show a table's events: position, version, type, time, commit id.")
    p.add_argument("table")
    p = add("snapshots", cmd_snapshots, "List a table's snapshots.")
    p.add_argument("table")
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
    p = add("demo", cmd_demo, "Run the demo pipeline: create, append, and read back through Spark.")
    p.add_argument("--warehouse-dir", help="where the demo warehouse goes (default ./warehouse)")
    p = add("bench", cmd_bench, "Run the benchmarks and print JSON.")
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


if __name__ == "__main__":
    raise SystemExit(main())
