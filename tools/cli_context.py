"""What the ``icelog`` commands share: opening the catalog the options name (refusing a warehouse that holds no
catalog unless the command may start one), the ``--property`` settings, and telling what a command changed (one
line, or one JSON object with ``--json``).

Layer: tools (icelog's engine and tools.change_report; nothing imports tools). Opens the catalog; prints.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
from typing import Any, Callable, Sequence


#: commands that may start a new catalog where none is (the others refuse a warehouse that holds no catalog)
CREATING_COMMANDS = ("create-namespace", "create-table", "register", "serve", "demo")


def open_catalog(args: argparse.Namespace) -> Any:
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
                        create=getattr(args, "create", False), properties=catalog_properties(args))


def key_values(items: Sequence[str] | None, option: str) -> dict[str, str]:
    """``KEY=VALUE`` arguments as a dict (the value may hold ``=``); one without ``=`` or a key is an error naming
    the option."""
    from engine.errors import ValidationError

    out = {}
    for item in items or ():
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ValidationError(f"Cannot read {option} {item.split('=', 1)[0]!r}: expected KEY=VALUE")
        out[key.strip()] = value
    return out


def catalog_properties(args: argparse.Namespace) -> dict[str, str]:
    """The ``--property KEY=VALUE`` settings (FileIO properties such as ``s3.endpoint``)."""
    return key_values(getattr(args, "catalog_property", None), "--property")


def iso_time(ms: int) -> str:
    return datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.timezone.utc).isoformat(timespec="milliseconds")


def tell(args: argparse.Namespace, report: Any) -> None:
    """Print a command's report: its line, or with ``--json`` its facts as one JSON object."""
    print(json.dumps(report.facts) if getattr(args, "json", False) else report.line)


def change_table(args: argparse.Namespace, cat: Any, change: Callable[[Any], Any]) -> Any:
    """Run ``change(table)`` on the table the command names and tell what it changed; returns what it returned."""
    from tools.change_report import describe_change

    table = named_table(args, cat)
    before = table.state
    result = change(table)
    tell(args, describe_change(args.command, args.table, before, table.state))
    return result


def read_parquet(cat: Any, paths: Sequence[str]) -> Any:
    """The rows of the Parquet files a command was given, as one Arrow table."""
    import pyarrow as pa

    from engine.formats.parquet_files import read_parquet_rows

    return pa.concat_tables([read_parquet_rows(p, io=cat.io) for p in paths], promote_options="default")


def named_table(args: argparse.Namespace, cat: Any) -> Any:
    return cat.load_table(args.table)
