"""The ``icelog`` commands that read a catalog and leave its log as it is: list tables, show a table's log and
snapshots, inspect its metadata tables, scan its rows, copy the whole log to another backend, and rebuild,
verify or publish the metadata files projected from the log.

Layer: tools (icelog's engine; nothing imports tools). Opens the catalog, reads the log and the warehouse (and
writes metadata files for rebuild and publish); prints.
"""

from __future__ import annotations

import argparse
import json
import sys

from tools.cli_context import iso_time, open_catalog


def cmd_tables(args: argparse.Namespace) -> None:
    with open_catalog(args) as cat:
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
    with open_catalog(args) as cat:
        t = cat.load_table(args.table)
        print("position\tversion\ttype\toperation\tactor\ttime\tcommit_id\tsummary")
        for e in cat.log.read_stream(t.uuid):
            operation, summary = _event_summary(e.type, e.payload)
            print(f"{e.position}\t{e.version}\t{e.type}\t{operation}\t{e.actor or ''}\t{iso_time(e.time_ms)}\t"
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
        from storage.errors import FileNotFound
        from storage.log_copy import copy_log, head_hash, open_log
        try:
            source_log = open_log(args.targets[0], must_exist=True)
        except FileNotFound as e:
            raise ValidationError(f"Cannot copy the log: no log at SRC {args.targets[0]} (a catalog.db, its "
                                  f"folder, or a postgresql:// URL); nothing was created") from e
        with source_log as source, open_log(args.targets[1]) as target:
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
    with open_catalog(args) as cat:
        snapshots = cat.load_table(args.table).snapshots()
        print("snapshot_id\tparent_id\tsequence\ttime\toperation\ttotal_records\ttotal_data_files")
        for s in snapshots:
            print(f"{s.snapshot_id}\t{s.parent_snapshot_id}\t{s.sequence_number}\t{iso_time(s.timestamp_ms)}\t"
                  f"{s.operation}\t{s.summary_value('total-records')}\t{s.summary_value('total-data-files')}")


def cmd_inspect(args: argparse.Namespace) -> None:
    from engine.read.metadata_tables import inspect_kind, to_json_lines

    with open_catalog(args) as cat:
        for line in to_json_lines(inspect_kind(cat.load_table(args.table), args.kind)):
            print(line)


def cmd_scan(args: argparse.Namespace) -> None:
    from engine.errors import ValidationError
    from engine.read.metadata_tables import non_finite_as_text

    if args.limit is not None and args.limit < 0:
        raise ValidationError(f"Cannot scan {args.table}: --limit must be 0 or more, not {args.limit}")
    columns = args.columns.split(",") if args.columns is not None else None
    if columns is not None and not all(name.strip() for name in columns):
        raise ValidationError(f"Cannot scan {args.table}: --columns {args.columns!r} names an empty column; give "
                              f"comma-separated column names")
    with open_catalog(args) as cat:
        table = cat.load_table(args.table).scan(where=args.where, columns=columns,
                                                snapshot_id=args.snapshot_id).to_arrow()
        shown = table if args.limit is None else table.slice(0, args.limit)
        for row in shown.to_pylist():
            print(json.dumps(non_finite_as_text(row), default=str, ensure_ascii=False, allow_nan=False))
        count = (f"{shown.num_rows}" if shown.num_rows == table.num_rows
                 else f"{shown.num_rows} of {table.num_rows}")
        print(f"({count} row(s))", file=sys.stderr)


def cmd_rebuild(args: argparse.Namespace) -> None:
    with open_catalog(args) as cat:
        paths = cat.load_table(args.table).rebuild(args.into)
        print(f"rebuilt {len(paths)} file(s) into {args.into}")


def cmd_verify(args: argparse.Namespace) -> int:
    with open_catalog(args) as cat:
        problems = cat.verify(args.table)
    if problems:
        for p in problems:
            print(p)
        return 1
    print(f"ok: the log's hash chain holds and the published files of {args.table} match the log")
    return 0


def cmd_publish(args: argparse.Namespace) -> None:
    from tools.progress import progress_bar

    with open_catalog(args) as cat:
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
