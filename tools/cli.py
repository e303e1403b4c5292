"""The ``icelog`` command line: a thin shell that parses arguments, calls the Catalog and prints.

Layer: tools (top; nothing imports it). Every library error becomes one line on stderr and
exit code 1.

The commands live in tools/cli_change.py (those that change a catalog or a table) and tools/cli_read.py (those
that read it); what they share is in tools/cli_context.py. This module holds the parser, the entry point
(``icelog = tools.cli:main``) and the commands that start other tools (demo, bench, serve).
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Callable, Sequence

from storage.postgres_url import is_postgres_url, redacted
from tools.cli_change import (
    cmd_add_column,
    cmd_add_partition_field,
    cmd_append,
    cmd_cherrypick,
    cmd_compact,
    cmd_create_branch,
    cmd_create_namespace,
    cmd_create_table,
    cmd_create_tag,
    cmd_delete,
    cmd_delete_by_key,
    cmd_drop_column,
    cmd_drop_table,
    cmd_dynamic_overwrite,
    cmd_expire_snapshots,
    cmd_fast_forward,
    cmd_overwrite,
    cmd_register,
    cmd_remove_branch,
    cmd_remove_orphan_files,
    cmd_remove_partition_field,
    cmd_remove_properties,
    cmd_remove_tag,
    cmd_rename_column,
    cmd_rename_partition_field,
    cmd_rename_table,
    cmd_rewrite_manifests,
    cmd_rollback,
    cmd_set_current_snapshot,
    cmd_set_properties,
    cmd_set_sort_order,
    cmd_update_column,
    cmd_upgrade_format_version,
    cmd_upsert,
)
from tools.cli_context import catalog_properties
from tools.cli_read import (
    cmd_inspect,
    cmd_log,
    cmd_publish,
    cmd_rebuild,
    cmd_scan,
    cmd_snapshots,
    cmd_tables,
    cmd_verify,
)

DEFAULT_WAREHOUSE = "warehouse"

#: commands that change a catalog or a table: each prints one line saying what changed, or with --json one JSON
#: object holding the same facts
CHANGING_COMMANDS = (
    "create-namespace", "create-table", "append", "register", "rename-table", "drop-table", "publish", "delete",
    "overwrite", "dynamic-overwrite", "upsert", "delete-by-key", "compact", "rewrite-manifests", "add-column",
    "drop-column", "rename-column", "update-column", "add-partition-field", "remove-partition-field",
    "rename-partition-field", "set-sort-order", "set-properties", "remove-properties", "upgrade-format-version",
    "create-branch", "create-tag", "remove-branch", "remove-tag", "rollback", "set-current-snapshot", "cherrypick",
    "fast-forward", "expire-snapshots", "remove-orphan-files")


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def _port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = -1
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"expected a port 0-65535, got {text!r}")
    return value


def cmd_demo(args: argparse.Namespace) -> None:
    from engine.errors import ValidationError
    from tools.demo import run_demo

    folder = args.warehouse_dir or args.warehouse
    if "://" in folder:
        raise ValidationError(f"Cannot run the demo in {folder}: --warehouse must be a local folder (the demo "
                              f"keeps its log there); run it on S3 with --s3 s3://BUCKET/PREFIX")
    run_demo(folder, rows=args.rows, s3=args.s3, properties=catalog_properties(args) or None)


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
          catalog_dir=args.catalog_dir, properties=catalog_properties(args), ready=banner)


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
    p = table_cmd("delete-by-key", cmd_delete_by_key, "Delete rows by key: an equality delete file, or position deletes when the key does not fix the partition.",
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
                                  ("cherrypick", cmd_cherrypick, "Apply a snapshot to main (Java's cherry-pick rules).")):
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
    p.add_argument("--port", type=_port, default=8181)
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
