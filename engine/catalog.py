"""The public Python API: a Catalog over one warehouse, and light Table handles.

Layer: engine (top of the engine: uses the log, the state store, operations, and the
projector). ``Catalog`` owns the one log connection, the state cache and the projector;
``Table`` holds only the catalog and the table's identity, and reads state fresh from the
log on every call.

::

    from engine import Catalog
    cat = Catalog.open("warehouse")
    cat.create_namespace("db")
    t = cat.create_table("db.events", schema=pa_schema, partition_by=["day(ts)", "bucket(16, id)"])
    t.append(arrow_table)
    t.scan(where="id > 10").to_arrow()
"""

from __future__ import annotations

import contextlib
import functools
import threading
import os
import time
import uuid
from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence
from urllib.parse import urlsplit

import attrs
import pyarrow as pa

from engine.write.data_writer import partition_of_file, write_data_files
from engine.errors import (
    AlreadyExists,
    CommitStateUnknown,
    CorruptFileError,
    ForeignWriterError,
    IcelogError,
    IntegrityError,
    MissingFileError,
    NamespaceNotEmpty,
    NamespaceNotFound,
    PublishFailed,
    PublishTimeout,
    StorageError,
    TableNotFound,
    ValidationError,
    storage_error,
)
from engine.state.events import (
    CATALOG_STREAM,
    Event,
    NamespaceCreated,
    NamespaceDropped,
    NamespacePropertiesUpdated,
    PropertiesRemoved,
    PropertiesSet,
    TableCreated,
    TableDropped,
    TableRegistered,
    TableRenamed,
)
from engine.write.file_columns import check_file_columns
from engine.model.arrow_schema import schema_from_arrow
from engine.model.data_file import DataFile, DataFileContent
from engine.model.metrics_evaluation import metrics_must_match
from engine.model.name_mapping import NAME_MAPPING_PROPERTY, name_mapping_json
from engine.model.partitioning import UNPARTITIONED_SPEC, PartitionSpec, build_spec
from engine.model.schema import Schema, check_schema_for_format
from engine.model.values import value_from_python
from engine.model.sort_order import UNSORTED_ORDER
from engine.operations.append import append_events
from engine.operations.commit import (
    CommitContext,
    Landed,
    RetryPolicy,
    commit_streams,
    now_ms,
)
from engine.operations.row_delete import (
    COPY_ON_WRITE,
    RowChanges,
    bind_filter,
    delete_mode,
    plan_dynamic_overwrite,
    plan_row_delete,
    row_change_events,
)
from engine.operations.snapshot import new_snapshot_id, snapshot_events
from engine.operations.table_updates import FORMAT_VERSION_PROPERTY, SUPPORTED_FORMAT_VERSIONS, upgrade_events
from engine.operations.transaction import run_staged
from engine.ownership import (
    Ownership,
    catalog_files,
    check_identifier,
    check_namespace,
    check_table_location,
    choose_default_location,
    is_local,
    normalize_location,
    refuse_catalog_database,
)
from engine.formats.parquet_files import carries_field_ids, read_data_file
from engine.read.scan import Scan
from engine.state.table_state import MAIN_BRANCH, Snapshot, TableEntry, TableState, TableStateReads
from engine.state.store import StateStore
from projections import layout
from projections.projector import DEFAULT_CATALOG_NAME, Projector, render_all
from storage import FileError, FileNotFound, Log, LogError
from storage.errors import ConnectionLost, LogDamaged
from storage.log import log_read_write_methods
from storage.files import FileIO, S3Settings, is_s3
from storage.postgres_url import is_postgres_url, redacted

CATALOG_DB = "catalog.db"
#: per thread, the operations collecting the files they write: (table uuid, paths), innermost last
_WRITING = threading.local()


def parse_identifier(identifier: str | Sequence[str]) -> tuple[tuple[str, ...], str]:
    """``"db.events"`` or ``("db", "events")`` -> ``(("db",), "events")``."""
    parts = tuple(identifier.split(".")) if isinstance(identifier, str) else tuple(identifier)
    if len(parts) < 2 or any(not p for p in parts):
        raise ValidationError(f"Cannot parse table identifier {identifier!r}: expected 'namespace.table'")
    return parts[:-1], parts[-1]


def parse_namespace(namespace: str | Sequence[str]) -> tuple[str, ...]:
    parts = tuple(namespace.split(".")) if isinstance(namespace, str) else tuple(namespace)
    if not parts or any(not p for p in parts):
        raise ValidationError(f"Cannot parse namespace {namespace!r}")
    return parts


def _checksum_of(path: str) -> str | None:
    """The file a Hadoop checksum file ``.<name>.crc`` (written by Spark's local file system) belongs to."""
    folder, name = os.path.split(path)
    if name.startswith(".") and name.endswith(".crc"):
        return os.path.join(folder, name[1:-4])
    return None


class _LogEntries:
    """Makes a catalog's log callable: ``catalog.log(since=position)`` lists event-log entries (position, version,
    stream, type, time, actor, message, commit id, payload) after ``since``."""

    def __call__(self, since: int = 0) -> list[Any]:
        from engine.state.time_travel import entries_since

        return entries_since(self, since)


class CatalogLog(_LogEntries, Log):
    """The catalog's storage log in its SQLite file, also callable (``catalog.log(since=position)``). A damaged
    database file (``storage.LogDamaged``) reaches the engine as :class:`IntegrityError` naming the position."""


def _open_postgres_log(url: str) -> Any:
    """The catalog's log in a PostgreSQL database, also callable (``catalog.log(since=position)``)."""
    try:
        from storage.postgres_log import PostgresLog
    except ModuleNotFoundError as e:
        raise ValidationError("Cannot open a catalog on PostgreSQL: psycopg is not installed "
                              "(pip install 'icelog[postgresql]')") from e

    class CatalogPostgresLog(_LogEntries, PostgresLog):
        pass

    return CatalogPostgresLog.open(url)


def _damage_as_integrity_error(method: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(method)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        try:
            return method(*args, **kwargs)
        except LogDamaged as e:
            raise IntegrityError(str(e), position=e.position) from e

    return wrapped


for _name in log_read_write_methods():
    setattr(CatalogLog, _name, _damage_as_integrity_error(getattr(Log, _name)))


class Catalog:
    """A warehouse folder and its catalog log (``<warehouse>/catalog.db``).

    ::

        cat = Catalog.open("warehouse")
        cat.create_namespace("db")
        t = cat.create_table("db.events", schema=pa_schema, partition_by=["day(ts)"])

    :param warehouse: the warehouse folder (created when absent)
    :param name: the catalog name written to the ``iceberg_tables`` pointer rows
    :param synchronous: SQLite's ``synchronous`` setting for the log ("FULL" unless you opt out)
    :param project: publish projections right after each commit (True), or leave them to ``publish()``
    :param create: (``open``) also initialize an existing empty ``catalog.db``; without it an empty or non-SQLite
        file is refused with :class:`IntegrityError` rather than becoming a new, empty catalog
    """

    def __init__(self, warehouse: str, log: Log, *, name: str, project: bool, io: FileIO | None = None) -> None:
        self.warehouse = warehouse
        self.log = log
        self.name = name
        self.project = project
        #: how every file of the catalog's tables is read and written (local files, and S3 when configured)
        self.io = io or FileIO()
        #: the catalog's own database file: never a table's, never opened as data
        self.database = os.fspath(getattr(log, "path", os.path.join(warehouse, CATALOG_DB)))
        self.store = StateStore(log)
        self.projector = Projector(log, self.io, name)

    @classmethod
    def open(cls, catalog_dir: str | os.PathLike, *, warehouse: str | os.PathLike | None = None,
             name: str = DEFAULT_CATALOG_NAME, synchronous: str = "FULL", project: bool = True,
             create: bool = False, properties: Mapping[str, str] | None = None) -> Catalog:
        """Open (or start) the catalog whose log is ``<catalog_dir>/catalog.db``.

        ``Catalog.open("warehouse")`` keeps the log inside the warehouse; ``Catalog.open("catalog",
        warehouse="/data/lake")`` keeps it apart, and tables default to ``<warehouse>/<namespace>/<table>``.
        The warehouse may be on S3::

            Catalog.open("catalog", warehouse="s3://bucket/lake",
                         properties={"s3.endpoint": "http://127.0.0.1:9000", "s3.path-style-access": "true"})

        :param catalog_dir: the folder of ``catalog.db`` (created when absent)
        :param warehouse: where tables live by default (default: ``catalog_dir``): a local folder, or an
            ``s3://`` (``s3a://``, ``s3n://``) URI
        :param properties: FileIO settings by Iceberg's names (``s3.endpoint``, ``s3.region``,
            ``s3.access-key-id``, ``s3.secret-access-key``, ``s3.session-token``, ``s3.path-style-access``), each
            falling back to the AWS environment variables. They are never written to the log or to metadata.
        :raises IntegrityError: the catalog file is empty (without ``create``), not SQLite, or damaged
        :raises ValidationError: a warehouse on a store icelog cannot reach (not local, not S3), or bad properties
        """
        postgres = is_postgres_url(os.fspath(catalog_dir))
        if postgres and warehouse is None:
            raise ValidationError("Cannot open catalog: a log on PostgreSQL needs a warehouse for the tables: "
                                  "Catalog.open('postgresql://...', warehouse=...)")
        if not postgres and not is_local(os.fspath(catalog_dir)):
            raise ValidationError(f"Cannot open catalog: {os.fspath(catalog_dir)} is not a local folder; the log "
                                  f"(catalog.db) stays on a local disk or in PostgreSQL: "
                                  f"Catalog.open(catalog_dir, warehouse=...)")
        path = os.fspath(catalog_dir) if postgres else os.path.abspath(os.fspath(catalog_dir))
        root = path
        try:
            s3 = S3Settings.from_properties(properties)
        except ValueError as e:
            raise ValidationError(f"Cannot open catalog: {e}") from e
        io = FileIO(s3)
        if warehouse is not None:
            text = os.fspath(warehouse)
            if is_s3(text):
                root = normalize_location(text)
                if not urlsplit(root).netloc:
                    raise ValidationError(f"Cannot open catalog: warehouse {text} names no bucket")
                if not s3.configured:
                    raise ValidationError(f"Cannot open catalog: warehouse {text} is on S3, and neither "
                                          f"s3.endpoint nor credentials are configured (properties or AWS_* "
                                          f"environment variables)")
            elif not is_local(text):
                raise ValidationError(f"Cannot open catalog: warehouse {text} is on a store icelog cannot reach "
                                      f"(local folders and s3:// URIs)")
            else:
                root = normalize_location(text)
                os.makedirs(root, exist_ok=True)
        try:
            if postgres:
                log = _open_postgres_log(path)
            else:
                os.makedirs(path, exist_ok=True)
                log = CatalogLog.open(os.path.join(path, CATALOG_DB), synchronous=synchronous, create=create)
        except LogDamaged as e:
            raise IntegrityError(f"Cannot open catalog at {path}: {e}", position=e.position) from e
        except LogError as e:
            where = getattr(e, "path", None) or (redacted(path) if postgres else path)
            raise IcelogError(f"Cannot open catalog at {where}: {e}") from e
        return cls(root, log, name=name, project=project, io=io)

    def close(self) -> None:
        self.log.close()

    def __enter__(self) -> Catalog:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # ------------------------------------------------------------ namespaces
    def create_namespace(self, namespace: str | Sequence[str], properties: Mapping[str, str] | None = None) -> None:
        ns = parse_namespace(namespace)
        check_namespace(ns)

        def build(ctx: CommitContext) -> list:
            state = self.store.catalog()
            if state.has_namespace(ns):
                raise AlreadyExists(f"Cannot create namespace {'.'.join(ns)}: it already exists")
            return [(CATALOG_STREAM, state.version, [NamespaceCreated(namespace=ns, properties=properties or {})])]

        commit_streams(self.store, build, policy=RetryPolicy())
        if self.project:
            self.projector.publish_namespace(ns, properties or {})

    def list_namespaces(self) -> list[tuple[str, ...]]:
        return [ns for ns, _ in self.store.catalog().namespaces]

    def namespace_properties(self, namespace: str | Sequence[str]) -> dict[str, str]:
        ns = parse_namespace(namespace)
        props = self.store.catalog().namespace_properties(ns)
        if props is None:
            raise NamespaceNotFound(f"Cannot load namespace {'.'.join(ns)}: it does not exist")
        return props

    def update_namespace_properties(self, namespace: str | Sequence[str], updates: Mapping[str, str] | None = None,
                                    removals: Sequence[str] = ()) -> tuple[list[str], list[str], list[str]]:
        """Set and remove namespace properties in one commit; returns (updated, removed, missing) keys."""
        ns = parse_namespace(namespace)
        updates = {str(k): str(v) for k, v in (updates or {}).items()}
        overlap = sorted(set(updates) & set(removals))
        if overlap:
            raise ValidationError(f"Cannot update namespace {'.'.join(ns)}: {', '.join(overlap)} both set and removed")
        outcome: list[tuple[list[str], list[str], list[str]]] = []

        def build(ctx: CommitContext) -> list:
            state = self.store.catalog()
            props = state.namespace_properties(ns)
            if props is None:
                raise NamespaceNotFound(f"Cannot update namespace {'.'.join(ns)}: it does not exist")
            present = [k for k in removals if k in props]
            outcome[:] = [(sorted(updates), sorted(present), sorted(k for k in removals if k not in props))]
            if not updates and not present:
                return []
            return [(CATALOG_STREAM, state.version,
                     [NamespacePropertiesUpdated(namespace=ns, updates=updates, removals=present)])]

        commit_streams(self.store, build, policy=RetryPolicy())
        if self.project:
            self.projector.publish_namespace(ns, updates)
            self.projector.unpublish_namespace(ns, outcome[0][1])
        return outcome[0]

    def drop_namespace(self, namespace: str | Sequence[str]) -> None:
        """Remove an empty namespace.

        :raises NamespaceNotFound: it does not exist
        :raises NamespaceNotEmpty: it still holds tables
        """
        ns = parse_namespace(namespace)

        def build(ctx: CommitContext) -> list:
            state = self.store.catalog()
            if not state.has_namespace(ns):
                raise NamespaceNotFound(f"Cannot drop namespace {'.'.join(ns)}: it does not exist")
            tables = [t.name for t in state.tables if t.namespace == ns]
            if tables:
                raise NamespaceNotEmpty(f"Cannot drop namespace {'.'.join(ns)}: it still holds tables "
                                        f"{', '.join(sorted(tables)[:3])}")
            return [(CATALOG_STREAM, state.version, [NamespaceDropped(namespace=ns)])]

        commit_streams(self.store, build, policy=RetryPolicy())
        if self.project:
            self.projector.unpublish_namespace(ns)

    # ------------------------------------------------------------ tables
    def create_table(self, identifier: str | Sequence[str], schema: pa.Schema | Schema,
                     partition_by: Sequence[str] | PartitionSpec | None = None,
                     properties: Mapping[str, str] | None = None, format_version: int | None = None,
                     location: str | None = None) -> Table:
        """Create a table and publish its first metadata version.

        :param identifier: ``"namespace.table"``
        :param schema: a pyarrow schema (field ids assigned, or taken from ``PARQUET:field_id``) or an engine Schema
        :param partition_by: partition terms such as ``"day(ts)"``, ``"bucket(16, id)"``, ``"truncate(4, name)"``,
            ``"category"``, or a PartitionSpec
        :param properties: table properties; ``format-version`` among them is the format version (as in Java and
            Spark's ``TBLPROPERTIES``), not stored as a property
        :param format_version: 1, 2 or 3 (v3: row lineage, deletion vectors); default 2
        :param location: the table folder; default ``<warehouse>/<namespace>/<table>``
        """
        ns, name = parse_identifier(identifier)
        check_identifier(ns, name)
        props = {str(k): str(v) for k, v in (properties or {}).items()}
        if FORMAT_VERSION_PROPERTY in props:
            given = props.pop(FORMAT_VERSION_PROPERTY)
            from_property = _format_version_of(given)
            if format_version is not None and from_property != format_version:
                raise ValidationError(f"Cannot create table {'.'.join(ns + (name,))}: format_version={format_version} "
                                      f"and property format-version={given!r} disagree")
            format_version = from_property  # type: ignore[assignment]
        if format_version is None:
            format_version = 2
        if format_version not in SUPPORTED_FORMAT_VERSIONS:
            raise ValidationError(f"Cannot create table {'.'.join(ns + (name,))}: format version {format_version} "
                                  f"is not supported (1, 2 or 3)")
        if isinstance(schema, pa.Schema):
            schema = schema_from_arrow(schema)
        elif not isinstance(schema, Schema):
            raise ValidationError(f"Cannot create table {name}: schema must be a pyarrow.Schema or an engine Schema, "
                                  f"got {type(schema).__name__}")
        check_schema_for_format(schema, format_version, f"the schema of table {'.'.join(ns + (name,))}")
        if isinstance(partition_by, PartitionSpec):
            spec = partition_by
        elif partition_by:
            if isinstance(partition_by, str):
                partition_by = [partition_by]
            spec = build_spec(schema, list(partition_by))
        else:
            spec = UNPARTITIONED_SPEC
        table_uuid = str(uuid.uuid4())

        def build(ctx: CommitContext) -> list:
            state = self.store.catalog()
            if not state.has_namespace(ns):
                raise NamespaceNotFound(f"Cannot create table {'.'.join(ns + (name,))}: namespace "
                                        f"{'.'.join(ns)} does not exist")
            if state.table(ns, name) is not None:
                raise AlreadyExists(f"Cannot create table {'.'.join(ns + (name,))}: it already exists")
            table_location = self.place_table(ns, name, table_uuid, location)
            created = TableCreated(table_uuid=table_uuid, location=table_location, format_version=format_version,
                                   schema=schema, spec=spec, sort_order=UNSORTED_ORDER, properties=props)
            return [(CATALOG_STREAM, state.version, [TableRegistered(namespace=ns, name=name, table_uuid=table_uuid)]),
                    (table_uuid, 0, [created])]

        landed = commit_streams(self.store, build, policy=RetryPolicy())
        table = Table(self, ns, name, table_uuid)
        table._after_commit(landed)
        return table

    def rename_table(self, from_identifier: str | Sequence[str], to_identifier: str | Sequence[str]) -> Table:
        """Give a table another name (its location and files stay where they are)."""
        ns, name = parse_identifier(from_identifier)
        new_ns, new_name = parse_identifier(to_identifier)
        check_identifier(new_ns, new_name)

        def build(ctx: CommitContext) -> list:
            state = self.store.catalog()
            entry = state.table(ns, name)
            if entry is None:
                raise TableNotFound(f"Cannot rename table {'.'.join(ns + (name,))}: it does not exist")
            if not state.has_namespace(new_ns):
                raise NamespaceNotFound(f"Cannot rename table to {'.'.join(new_ns + (new_name,))}: namespace "
                                        f"{'.'.join(new_ns)} does not exist")
            if state.table(new_ns, new_name) is not None:
                raise AlreadyExists(f"Cannot rename table to {'.'.join(new_ns + (new_name,))}: it already exists")
            return [(CATALOG_STREAM, state.version, [TableRenamed(namespace=ns, name=name, new_namespace=new_ns,
                                                                  new_name=new_name, table_uuid=entry.table_uuid)])]

        commit_streams(self.store, build, policy=RetryPolicy())
        if self.project:
            self.projector.publish_rename(ns, name, new_ns, new_name)
        return self.load_table(new_ns + (new_name,))

    def drop_table(self, identifier: str | Sequence[str], *, purge: bool = False,
                   delete_external_files: bool = False) -> list[str]:
        """Remove a table from the catalog. The log keeps its history, so ``catalog.as_of`` and ``table.as_of``
        still see it. Returns the files deleted.

        :param purge: also delete the files the table owns: every data, delete, manifest, manifest-list and
            metadata file its log says it wrote or took over under its location, and the folders left empty;
            nothing else in or around its folder, and nothing of another table
        :param delete_external_files: with ``purge``, also delete files the table referenced outside its location
            (``append_files`` in place, data of a table registered elsewhere), unless another table's location
            holds them
        """
        ns, name = parse_identifier(identifier)
        found: list[TableEntry] = []

        def build(ctx: CommitContext) -> list:
            state = self.store.catalog()
            entry = state.table(ns, name)
            if entry is None:
                raise TableNotFound(f"Cannot drop table {'.'.join(ns + (name,))}: it does not exist")
            found[:] = [entry]
            return [(CATALOG_STREAM, state.version,
                     [TableDropped(namespace=ns, name=name, table_uuid=entry.table_uuid, purge=purge)])]

        commit_streams(self.store, build, policy=RetryPolicy())
        table_uuid = found[0].table_uuid
        self.projector.publish_drop(ns, name, table_uuid)
        if not purge:
            return []
        from engine.operations.expire import purge_files

        return purge_files(self, table_uuid, self.ownership(table_uuid, name=".".join(ns + (name,))),
                           delete_external=delete_external_files)

    def purge_table(self, identifier: str | Sequence[str], *, delete_external_files: bool = False) -> list[str]:
        """Drop a table and delete the files it owns (PyIceberg's name; see :meth:`drop_table`)."""
        return self.drop_table(identifier, purge=True, delete_external_files=delete_external_files)

    # ------------------------------------------------------------ ownership
    def table_locations(self, *, excluding: str | None = None) -> list[tuple[str, str]]:
        """(normalized location, name) of every table in the catalog but ``excluding`` (a table uuid)."""
        out = []
        for entry in self.store.catalog().tables:
            if entry.table_uuid != excluding:
                out.append((normalize_location(self.store.table(entry.table_uuid).location),
                            ".".join(entry.namespace + (entry.name,))))
        return out

    def place_table(self, namespace: tuple[str, ...], name: str, table_uuid: str, location: str | None, *,
                    must_be_empty: bool = True, action: str = "create table") -> str:
        """Where a new table lives: ``location`` when given and allowed, else a free default folder
        (see engine.ownership).

        :raises ValidationError: the location is the warehouse, holds the catalog's files, is or overlaps
            another table's location, or (``must_be_empty``) is a file or a non-empty folder
        """
        what = f"{action} {'.'.join(namespace + (name,))}"
        others = self.table_locations(excluding=table_uuid)
        if location is None:
            return choose_default_location(self.warehouse, namespace, name, table_uuid,
                                           catalog_database=self.database, others=others, what=what,
                                           holds_files=self._holds_files)
        check_table_location(location, warehouse=self.warehouse, catalog_database=self.database, others=others,
                             must_be_empty=must_be_empty, what=what, holds_files=self._holds_files)
        return location.rstrip("/")

    def _holds_files(self, location: str) -> bool:
        try:
            return self.io.holds_files(location)
        except FileError as e:
            raise storage_error(e, location) from e

    def ownership(self, table_uuid: str, *, name: str | None = None) -> Ownership:
        """The files the table ``table_uuid`` owns (see engine.ownership.Ownership)."""
        location = self.store.table(table_uuid).location
        if name is None:
            entry = next((t for t in self.store.catalog().tables if t.table_uuid == table_uuid), None)
            name = ".".join(entry.namespace + (entry.name,)) if entry is not None else f"table {table_uuid}"
        return Ownership(location, others=self.table_locations(excluding=table_uuid),
                         catalog_files=catalog_files(self.database), name=name)

    def load_table(self, identifier: str | Sequence[str]) -> Table:
        ns, name = parse_identifier(identifier)
        entry = self.store.catalog().table(ns, name)
        if entry is None:
            raise TableNotFound(f"Cannot load table {'.'.join(ns + (name,))}: it does not exist")
        return Table(self, ns, name, entry.table_uuid)

    def table_exists(self, identifier: str | Sequence[str]) -> bool:
        ns, name = parse_identifier(identifier)
        return self.store.catalog().table(ns, name) is not None

    def list_tables(self, namespace: str | Sequence[str]) -> list[tuple[str, ...]]:
        ns = parse_namespace(namespace)
        state = self.store.catalog()
        if not state.has_namespace(ns):
            raise NamespaceNotFound(f"Cannot list tables: namespace {'.'.join(ns)} does not exist")
        return [t.namespace + (t.name,) for t in state.tables if t.namespace == ns]

    def transaction(self) -> CatalogTransaction:
        """Changes to several tables that land atomically (one log commit over their streams) or not at all.

        ::

            with cat.transaction() as tx:
                tx.load_table("db.a").append(rows)
                tx.load_table("db.b").delete("id < 10")
        """
        return CatalogTransaction(self)

    def as_of(self, *, position: int | None = None, time: Any = None) -> Any:
        """The whole catalog, read-only, as it was right after log ``position`` or at ``time``."""
        from engine.state.time_travel import catalog_as_of

        return catalog_as_of(self, position=position, time=time)

    def register_table(self, identifier: str | Sequence[str], metadata_location: str,
                       relocate: Mapping[str, str] | None = None, *, location: str | None = None,
                       progress: Callable[[str, int, int], None] | None = None) -> Table:
        """Take over an existing Iceberg table: its whole history becomes events (see engine.registration.metadata_import).

        icelog publishes beside the original metadata unless that would overwrite an original file (then it
        refuses: pass ``location`` for a new folder; see engine.registration.register). ``progress(step, done, total)`` hears
        how far reading ("read") and then publishing ("publish") the snapshots has come."""
        from engine.registration.register import register_table

        return register_table(self, identifier, metadata_location, relocate=relocate, location=location,
                              progress=progress)

    def publish(self) -> None:
        """Bring every table's projection up to its log head."""
        for entry in self.store.catalog().tables:
            Table(self, entry.namespace, entry.name, entry.table_uuid).publish()

    def verify(self, identifier: str | Sequence[str]) -> list[str]:
        """Problems found: the log's hash chain and sequence (gaps in positions or versions), a projection behind
        the log, and published files that differ from a fresh rendering."""
        try:
            problems = list(self.log.verify())
        except IntegrityError as e:  # a damaged file: the chain cannot even be read
            return [str(e)]
        problems += self.load_table(identifier).verify_projection()
        return problems


class Table(TableStateReads):
    """A handle on one table: the catalog and the table's identity, nothing cached.

    :param catalog: the owning catalog
    :param namespace: the namespace
    :param name: the table name
    :param table_uuid: the table's stream id
    """

    def __init__(self, catalog: Catalog, namespace: tuple[str, ...], name: str, table_uuid: str, *,
                 staged: list[Any] | None = None) -> None:
        self.catalog = catalog
        self.namespace = namespace
        self.name = name
        self.uuid = table_uuid
        self._staged = staged
        #: the files a transaction handle's operations wrote: removed when the transaction does not land
        self._written_in_transaction: list[str] = []
        #: a transaction reads the table at this log version (plus what it staged), as Java's transaction keeps
        #: the metadata it started from; the commit validates everything recorded after it
        self._staged_on_version = catalog.log.head(table_uuid) if staged is not None else None

    def __repr__(self) -> str:
        return f"Table({'.'.join(self.identifier)!r})"

    @property
    def identifier(self) -> tuple[str, ...]:
        return self.namespace + (self.name,)

    # ------------------------------------------------------------ state
    @property
    def state(self) -> TableState:
        if self._staged is None:
            return self.catalog.store.table(self.uuid)
        state = self.catalog.store.table(self.uuid, self._staged_on_version)
        if self._staged:
            ctx = CommitContext(commit_id="staged", time_ms=now_ms())
            state = run_staged(state, self._staged, ctx, staged_on_version=self._staged_on_version)[1]
        return state

    @property
    def metadata_location(self) -> str:
        state = self.state
        published = self.catalog.projector.published_version(self.uuid)
        return layout.metadata_file_of(state, published or state.version)

    # ------------------------------------------------------------ writes
    def append(self, data: pa.Table, *, branch: str = MAIN_BRANCH) -> Snapshot | None:
        """Write ``data`` as Parquet data files (one or more per partition) and commit them as one snapshot."""
        with self._staging() as staged:
            files = write_data_files(self.state, data, stage=staged.append, io=self.catalog.io)
            return self._commit_append(files, branch=branch, staged=staged)

    @contextlib.contextmanager
    def tracking_written(self, written: list[str]) -> Iterator[list[str]]:
        """Add to ``written`` every file this thread stages for the table (:meth:`stage_file`) inside the block."""
        stack = _WRITING.__dict__.setdefault("stack", [])
        stack.append((self.uuid, written))
        try:
            yield written
        finally:
            stack.pop()

    @contextlib.contextmanager
    def removing_written_on_failure(self) -> Iterator[list[str]]:
        """Files the block writes for the table are removed when it fails before its commit lands: a refused
        operation leaves nothing behind. Not when the commit landed (``PublishFailed``) or may have
        (``CommitStateUnknown``): then the log may name them."""
        written: list[str] = []
        try:
            with self.tracking_written(written):
                yield written
        except BaseException as e:
            self._after_failure(written, e)
            raise

    def _after_failure(self, paths: Sequence[str], error: BaseException) -> None:
        """The files an operation wrote, when it failed: kept and recorded as staged when its commit landed
        (``PublishFailed``) or may have (``CommitStateUnknown``), removed otherwise."""
        if not paths:
            return
        if isinstance(error, (PublishFailed, CommitStateUnknown)):
            self.catalog.log.record_staged_many(self.uuid, paths, now_ms())
        else:
            self.remove_written(paths)

    def remove_written(self, paths: Sequence[str]) -> None:
        """Delete files an operation wrote for this table whose commit did not land, and forget their staging
        records; a file that cannot be deleted now stays staged, for remove_orphan_files. Only files the table
        owns are ever deleted: any other path is left alone."""
        io = self.catalog.io
        owned = self.catalog.ownership(self.uuid)
        gone = []
        for path in paths:
            if not owned.owns(path):
                continue
            try:
                io.delete(path)
                gone.append(path)
            except FileNotFound:
                gone.append(path)
            except (FileError, StorageError, OSError):
                continue
        if gone:
            with contextlib.suppress(LogError):
                self.catalog.log.forget_staged(self.uuid, gone)

    def append_files(self, paths: Iterable[str], *, branch: str = MAIN_BRANCH) -> Snapshot | None:
        """Register existing Parquet files in place (unpartitioned tables, or files whose partition is given by
        their values) as one append; metrics come from their footers. Files outside the table location stay the
        caller's: expire and purge never delete them unless asked to (``delete_external_files``).

        :raises ValidationError: a file listed twice, one already live in the branch (as PyIceberg's ``add_files``
            refuses: every reader would count its rows twice), or one that belongs to another table or is the
            catalog's
        """
        state = self.state
        owned = self.catalog.ownership(self.uuid)
        files: list[DataFile] = []
        seen: set[str] = set()
        without_ids = False
        io = self.catalog.io
        ref = state.ref(branch)
        live = {io.canonical(e.file.file_path) for e in self.catalog.store.live_entries(
            state, ref.snapshot_id if ref else None)} if ref else set()
        for p in paths:
            refuse_catalog_database(os.fspath(p), "append file")
            path = os.fspath(p) if is_s3(p) else io.fs_path(p)
            key = io.canonical(path)
            if key in seen:
                raise ValidationError(f"Cannot append files: {path} is listed twice")
            if key in live:
                raise ValidationError(f"Cannot append files: {path} is already in table {'.'.join(self.identifier)} "
                                      f"(branch {branch}); appending it again would count its rows twice")
            seen.add(key)
            owned.check_external_file(path, "append file")
            try:
                found = io.exists(path)
            except FileError as e:
                raise storage_error(e, path) from e
            if not found:
                raise MissingFileError(f"Cannot append file: {path} does not exist", path=path)
            check_file_columns(path, state.schema, state.prop(NAME_MAPPING_PROPERTY), io=io)
            files.append(self._describe_file(state, path))
            without_ids = without_ids or not carries_field_ids(path, io=io)
        mapping = None
        if without_ids and state.prop(NAME_MAPPING_PROPERTY) is None:
            mapping = name_mapping_json(state.schema)

        def refuse_landed_since(base: TableState) -> None:
            """Inside the commit: refuse a file that a writer committing meanwhile made live (two writers
            appending the same file at once: one of them lands it)."""
            if base.version == state.version:
                return
            ref = base.ref(branch)
            live_now = {io.canonical(e.file.file_path) for e in self.catalog.store.live_entries(
                base, ref.snapshot_id)} if ref else set()
            for f in files:
                if io.canonical(f.file_path) in live_now:
                    raise ValidationError(f"Cannot append files: {f.file_path} is already in table "
                                          f"{'.'.join(self.identifier)} (branch {branch}), appended by a commit that "
                                          f"landed meanwhile; appending it again would count its rows twice")

        return self._commit_append(files, name_mapping=mapping, branch=branch, check=refuse_landed_since)

    def delete(self, where: str, *, branch: str = MAIN_BRANCH) -> Snapshot | None:
        """Delete the rows matching ``where``. Files the filter covers entirely (by their metrics) are dropped
        unread; partly matched files are rewritten (``write.delete.mode=copy-on-write``, the default) or get
        position delete files (``merge-on-read``). Returns the new snapshot, or None when no row matched.

        :raises ValidationConflict: a concurrent commit conflicts under ``write.delete.isolation-level``
        """
        state = self.state
        bound = bind_filter(state, where)
        start = self._head(state, branch)
        with self.removing_written_on_failure():
            changes = plan_row_delete(self.catalog.store, state, bound, start, mode=delete_mode(state),
                                      stage=self.stage_file, io=self.catalog.io)
            if not changes.removed and not changes.added:
                return None
            return self._commit_rows(changes, "delete", branch, isolation_for="delete")

    def overwrite(self, data: pa.Table, where: str | None = None, *, branch: str = MAIN_BRANCH) -> Snapshot | None:
        """Replace the rows matching ``where`` (all rows when None) with ``data``, as one ``overwrite`` snapshot
        (rows to keep in partly matched files are rewritten)."""
        state = self.state
        start = self._head(state, branch)
        bound = bind_filter(state, where) if where is not None else None  # a bad filter before any file is written
        with self.removing_written_on_failure():
            new_files = write_data_files(state, data, stage=self.stage_file, io=self.catalog.io, action="overwrite")
            if bound is None:
                live = [e.file for e in self.catalog.store.live_entries(state, start)
                        if e.file.content == DataFileContent.DATA]
                changes = RowChanges(start_snapshot_id=start, removed=tuple(live), touched=tuple(live))
            else:
                changes = plan_row_delete(self.catalog.store, state, bound, start, mode=COPY_ON_WRITE,
                                          stage=self.stage_file, io=self.catalog.io)
            return self._commit_rows(changes, "overwrite", branch, isolation_for="update", new_rows=new_files,
                                     whole_table=where is None)

    def dynamic_overwrite(self, data: pa.Table, *, branch: str = MAIN_BRANCH) -> Snapshot | None:
        """Replace exactly the partitions present in ``data`` (Iceberg's ReplacePartitions)."""
        state = self.state
        start = self._head(state, branch)
        with self.removing_written_on_failure():
            changes, new_files = plan_dynamic_overwrite(self.catalog.store, state, data, start,
                                                        stage=self.stage_file, io=self.catalog.io)
            return self._commit_rows(changes, "overwrite", branch, isolation_for="update", new_rows=new_files)

    @contextlib.contextmanager
    def _staging(self) -> Iterator[list[str]]:
        """Collects the files an operation is about to write; its commit records them as staged in its own
        transaction (no flush of their own). When the operation fails before its commit lands they are removed;
        when it landed or may have, recorded in a transaction of their own (after a crash, remove_orphan_files'
        listing finds them: they are under the table's location)."""
        paths: list[str] = []
        try:
            yield paths
        except BaseException as e:
            self._after_failure(paths, e)
            raise

    def stage_file(self, path: str) -> None:
        """Record a file about to be written for this table, before it is written (see remove_orphan_files)."""
        self.catalog.log.record_staged(self.uuid, path, now_ms())
        if self._staged is not None:
            self._written_in_transaction.append(path)
        for table_uuid, written in getattr(_WRITING, "stack", ()):
            if table_uuid == self.uuid:
                written.append(path)

    def stage_folder(self, folder: str) -> None:
        """Record a folder whose files a job is about to write for this table (every file under it counts as
        staged): a distributed writer stages its job folder once instead of each file (see remove_orphan_files).

        :raises ValidationError: the folder is not under the table's data folder
        """
        text = os.fspath(folder)
        prefix = (text if is_s3(text) else os.path.abspath(text)).rstrip("/") + "/"
        if ".." in prefix.split("/") or not prefix.startswith(layout.data_dir(self.location).rstrip("/") + "/"):
            raise ValidationError(f"Cannot stage folder {folder}: not under {layout.data_dir(self.location)}")
        self.catalog.log.record_staged(self.uuid, prefix, now_ms())

    def append_data_files(self, files: Sequence[DataFile], *, branch: str = MAIN_BRANCH) -> Snapshot | None:
        """Commit data files written elsewhere (described with their partition and metrics, e.g. by
        ``tools.spark.write``) as one append.

        :param files: DataFile values of the table's current spec, under the table location
        :raises ValidationError: a file outside the table location, of another spec, with a partition tuple or
            metrics that do not fit the table's spec and schema, or listed twice; nothing is committed
        """
        files = self._check_written_files(files, "append")
        return self._commit_append(files, branch=branch)

    def overwrite_data_files(self, files: Sequence[DataFile], where: str | None = None, *,
                             branch: str = MAIN_BRANCH) -> Snapshot | None:
        """Replace the rows matching ``where`` (all rows when None) with data files written elsewhere, as one
        ``overwrite`` snapshot (rows to keep in partly matched files are rewritten).

        :raises ValidationError: bad files (see :meth:`append_data_files`), or a file whose rows are not all
            matched by ``where`` by its metrics (it would escape the overwrite)
        """
        files = self._check_written_files(files, "overwrite")
        state = self.state
        start = self._head(state, branch)
        if where is None:
            live = [e.file for e in self.catalog.store.live_entries(state, start)
                    if e.file.content == DataFileContent.DATA]
            changes = RowChanges(start_snapshot_id=start, removed=tuple(live), touched=tuple(live))
            return self._commit_rows(changes, "overwrite", branch, isolation_for="update", new_rows=files,
                                     whole_table=True)
        bound = bind_filter(state, where)
        outside = [f.file_path for f in files if not metrics_must_match(bound, f, state.schema)]
        if outside:
            raise ValidationError(f"Cannot overwrite where {where!r}: file {outside[0]} has rows the filter may "
                                  f"not match ({len(outside)} such file(s))")
        # the rows kept from partly matched files are written here: removed again when the commit is refused (the
        # caller's files stay the caller's)
        with self.removing_written_on_failure():
            changes = plan_row_delete(self.catalog.store, state, bound, start, mode=COPY_ON_WRITE,
                                      stage=self.stage_file, io=self.catalog.io)
            return self._commit_rows(changes, "overwrite", branch, isolation_for="update", new_rows=files)

    def replace_partitions(self, files: Sequence[DataFile], *, branch: str = MAIN_BRANCH) -> Snapshot | None:
        """Replace exactly the partitions the given data files belong to (Iceberg's ReplacePartitions; the
        whole table when it is unpartitioned), as one ``overwrite`` snapshot.

        :raises ValidationError: bad files (see :meth:`append_data_files`)
        """
        files = self._check_written_files(files, "replace partitions")
        if not files:
            return None  # no partition is written, so none is replaced (Java's ReplacePartitions agrees)
        state = self.state
        spec = state.spec
        start = self._head(state, branch)
        partitions = {f.partition for f in files}
        live = [e.file for e in self.catalog.store.live_entries(state, start)
                if e.file.content == DataFileContent.DATA]
        removed = live if spec.is_unpartitioned else [
            f for f in live if f.spec_id == spec.spec_id and f.partition in partitions]
        changes = RowChanges(start_snapshot_id=start, removed=tuple(removed), touched=tuple(removed),
                             partitions=frozenset((spec.spec_id, p) for p in partitions))
        return self._commit_rows(changes, "overwrite", branch, isolation_for="update", new_rows=files)

    def _check_written_files(self, files: Sequence[DataFile], action: str) -> list[DataFile]:
        """Data files written outside icelog, checked against the table: location, current spec, schema."""
        state = self.state
        spec, schema = state.spec, state.schema
        owned = self.catalog.ownership(self.uuid)
        ids = set(schema.index_by_id())
        ptype = spec.partition_type(schema)
        seen: set[str] = set()
        out = []
        for f in files:
            if not isinstance(f, DataFile) or f.content != DataFileContent.DATA:
                raise ValidationError(f"Cannot {action}: expected data files (DataFile), got {f!r:.80}")
            if f.file_path in seen:
                raise ValidationError(f"Cannot {action}: {f.file_path} is listed twice")
            seen.add(f.file_path)
            owned.check_new_file(f.file_path, action)
            if f.spec_id != spec.spec_id:
                raise ValidationError(f"Cannot {action}: {f.file_path} is written for spec {f.spec_id}, the "
                                      f"table's spec is {spec.spec_id}")
            if len(f.partition) != len(ptype.fields):
                raise ValidationError(f"Cannot {action}: {f.file_path} has {len(f.partition)} partition value(s), "
                                      f"spec {spec.spec_id} has {len(ptype.fields)} field(s)")
            try:
                partition = tuple(value_from_python(pf.field_type, v) for pf, v in zip(ptype.fields, f.partition))
            except ValidationError as e:
                raise ValidationError(f"Cannot {action}: {f.file_path} has a bad partition value ({e})") from e
            unknown = sorted({k for pairs in (f.column_sizes, f.value_counts, f.null_value_counts,
                                              f.lower_bounds, f.upper_bounds) for k, _ in (pairs or ())} - ids)
            if unknown:
                raise ValidationError(f"Cannot {action}: {f.file_path} has metrics for field id(s) "
                                      f"{unknown[:5]} not in schema {schema.schema_id}")
            if f.record_count < 0 or f.file_size_in_bytes < 0:
                raise ValidationError(f"Cannot {action}: {f.file_path} has a negative record count or size")
            out.append(attrs.evolve(f, partition=partition) if partition != f.partition else f)
        return out

    @staticmethod
    def _head(state: TableState, branch: str) -> int | None:
        ref = state.ref(branch)
        return ref.snapshot_id if ref is not None else None

    def _commit_rows(self, changes: RowChanges, operation: str, branch: str, *, isolation_for: str,
                     new_rows: Sequence[DataFile] = (), whole_table: bool = False) -> Snapshot | None:
        snapshot_id = new_snapshot_id()
        store = self.catalog.store
        state = self.commit_events(lambda base, ctx: row_change_events(
            store, base, ctx, changes, operation=operation, snapshot_id=snapshot_id, branch=branch,
            isolation_for=isolation_for, new_rows=new_rows, whole_table=whole_table))
        return state.snapshot_by_id(snapshot_id)

    def delete_files(self, paths: Iterable[str], *, branch: str = MAIN_BRANCH) -> Snapshot | None:
        """Remove whole data or delete files by path, as one ``delete`` snapshot (Java's DeleteFiles).

        :raises ValidationError: a path that is not live in the branch's head; nothing is committed
        """
        wanted = list(dict.fromkeys(os.fspath(p) for p in paths))
        snapshot_id = new_snapshot_id()

        def build(base: TableState, ctx: CommitContext) -> list:
            ref = base.ref(branch)
            live = {e.file.file_path: e.file for e in
                    self.catalog.store.live_entries(base, ref.snapshot_id if ref else None)}
            missing = [p for p in wanted if p not in live]
            if missing:
                raise ValidationError(f"Cannot delete files: {', '.join(missing[:3])} not in the table")
            return snapshot_events(base, ctx, operation="delete", snapshot_id=snapshot_id,
                                   removed=[live[p] for p in wanted], branch=branch)

        state = self.commit_events(build)
        return state.snapshot_by_id(snapshot_id)

    def _describe_file(self, state: TableState, path: str) -> DataFile:
        spec = state.spec
        io = self.catalog.io
        partition = partition_of_file(path, state.schema, spec, io=io) if not spec.is_unpartitioned else ()
        return read_data_file(path, state.schema, spec_id=spec.spec_id, partition=partition,
                              properties=dict(state.properties), io=io)

    def _commit_append(self, files: list[DataFile], name_mapping: str | None = None,
                       branch: str = MAIN_BRANCH, staged: Sequence[str] = (),
                       check: Callable[[TableState], None] | None = None) -> Snapshot | None:
        """Commit ``files`` as one append; with ``name_mapping``, also set the table's default name mapping (for
        files written without field ids) in the same commit; ``check(base)`` validates against the head inside the
        commit."""
        if not files:
            return None
        snapshot_id = new_snapshot_id()

        def build(base: TableState, ctx: CommitContext) -> list:
            if check is not None:
                check(base)
            events: list = []
            if name_mapping is not None and base.prop(NAME_MAPPING_PROPERTY) is None:
                events.append(PropertiesSet(updates={NAME_MAPPING_PROPERTY: name_mapping}))
            return events + append_events(base, files, ctx, snapshot_id=snapshot_id, branch=branch)

        return self.commit_events(build, staged=staged).snapshot_by_id(snapshot_id)

    # ------------------------------------------------------------ table metadata
    def set_properties(self, properties: Mapping[str, str] | None = None, **kwargs: str) -> TableState:
        """Set table properties (one commit; values are strings). ``format-version`` upgrades the table's format
        (:meth:`upgrade_format_version`) in the same commit, as Java and Spark take it."""
        updates = {str(k): str(v) for k, v in {**(properties or {}), **kwargs}.items()}
        fmt_text = updates.pop(FORMAT_VERSION_PROPERTY, None)
        fmt = None if fmt_text is None else _format_version_of(fmt_text)

        def build(base: TableState, ctx: CommitContext) -> list:
            events: list = [] if fmt is None else upgrade_events(base, fmt, ctx,  # type: ignore[arg-type]
                                                                 self.catalog.store.live_entries)
            changed = {k: v for k, v in updates.items() if base.prop(k) != v}
            return events + ([PropertiesSet(updates=changed)] if changed else [])

        return self.commit_events(build)

    def remove_properties(self, *keys: str) -> TableState:
        """Remove table properties (absent keys are ignored)."""
        def build(base: TableState, ctx: CommitContext) -> list:
            present = [k for k in keys if base.prop(k) is not None]
            return [PropertiesRemoved(removals=present)] if present else []

        return self.commit_events(build)

    def upgrade_format_version(self, format_version: int) -> TableState:
        """Upgrade the table to a newer format version (2 or 3); downgrades raise ValidationError. An upgrade to 3
        gives the rows live in each branch row ids, in one ``replace`` snapshot per branch."""
        def build(base: TableState, ctx: CommitContext) -> list:
            return upgrade_events(base, format_version, ctx, self.catalog.store.live_entries)

        return self.commit_events(build)

    # ------------------------------------------------------------ transactions
    def transaction(self) -> Table:
        """A handle whose changes are staged and land as one commit when its ``with`` block ends (or on
        ``commit_transaction()``); nothing lands if the block raises."""
        return Table(self.catalog, self.namespace, self.name, self.uuid, staged=[])

    def commit_transaction(self) -> TableState:
        if self._staged is None:
            raise ValidationError("Cannot commit: this table handle is not a transaction")
        builds, self._staged = list(self._staged), []
        since = self._staged_on_version
        try:
            return Table(self.catalog, self.namespace, self.name, self.uuid).commit_events(
                lambda base, ctx: run_staged(base, builds, ctx, staged_on_version=since)[0])
        except BaseException as e:
            self._end_transaction(e)
            raise
        else:
            self._written_in_transaction = []
        finally:
            self._staged_on_version = self.catalog.log.head(self.uuid)  # a next transaction on this handle

    def _end_transaction(self, error: BaseException) -> None:
        """A transaction that did not land: the files its operations wrote are removed (kept and staged when it
        landed or may have, see :meth:`_after_failure`)."""
        written, self._written_in_transaction = self._written_in_transaction, []
        self._after_failure(written, error)

    def __enter__(self) -> Table:
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if self._staged is None:
            return
        if exc_type is None:
            self.commit_transaction()
        else:  # the block failed: nothing of it lands
            self._staged = []
            self._end_transaction(exc)

    def commit_events(self, build: Callable[[TableState, CommitContext], Sequence[Event]], *,
                      staged: Sequence[str] = ()) -> TableState:
        """Commit the events ``build(base, ctx)`` makes on the current state, rebuilt on a fresh base after a
        conflict (up to the table's ``commit.retry.*`` settings); returns the state after the commit. ``staged``:
        the files written for it, recorded as staged in the commit's own transaction.

        In a transaction the build is staged instead, and the state it would lead to comes back."""
        if self._staged is not None:
            if staged:
                self.catalog.log.record_staged_many(self.uuid, staged, now_ms())
                self._written_in_transaction += staged
            self._staged.append(build)
            try:
                return self.state  # validates the staged change now; it is validated again at commit
            except BaseException:
                self._staged.pop()
                raise
        self.check_foreign_writers()

        def commit_build(ctx: CommitContext) -> list:
            base = self.catalog.store.table(self.uuid)
            return [(self.uuid, base.version, list(build(base, ctx)))]

        landed = commit_streams(self.catalog.store, commit_build, policy=RetryPolicy.of(self.state),
                                staged=[(self.uuid, staged)] if staged else ())
        return self._after_commit(landed)

    def check_foreign_writers(self, action: str = "commit to") -> None:
        """Refuse to commit (or publish) over metadata another writer committed behind the log's back.

        A Hadoop-catalog writer (Spark, PyIceberg) reads ``version-hint.text``, writes the next
        ``v<N+1>.metadata.json`` and moves the hint. So two stats and one small read per commit suffice: the
        metadata file after the published version, and the version the hint names. A file there that icelog's
        log does not account for is foreign (an interrupted publish of icelog's own leaves its own rendering).

        :param action: what is refused, for the message ("commit to", "publish")
        :raises ForeignWriterError: naming the file; nothing is committed, nothing is overwritten
        """
        projector, io = self.catalog.projector, self.catalog.io
        published = projector.published_version(self.uuid)
        if published == 0:
            return
        current = self.catalog.store.table(self.uuid)
        location, base = current.location, current.metadata_base
        candidates = [published + 1]
        if not is_s3(location):  # on S3 one HEAD: a Hadoop writer's first file is v<published+1> anyway
            hint_path = layout.version_hint_file(location)
            try:
                hinted = int(io.read_bytes(hint_path).strip() or b"0") - base  # the hint holds file numbers
            except (FileError, OSError, ValueError):
                hinted = published
            if hinted > published + 1:
                candidates.append(hinted)
        for version in candidates:
            path = layout.metadata_file_of(current, version)
            try:
                if not io.is_file(path):
                    continue
            except FileError as e:
                raise storage_error(e, path) from e
            if self._is_own_metadata(path, version, publishing=action == "publish"):
                continue
            raise ForeignWriterError(
                f"Cannot {action} {'.'.join(self.identifier)}: {path} was not published by icelog (another writer "
                f"committed behind the log's back, e.g. through a Hadoop catalog); register or remove it first",
                path=path)

    def _is_own_metadata(self, path: str, version: int, *, publishing: bool) -> bool:
        """Whether the metadata file of ``version`` is icelog's (a publish running now, or one interrupted).

        :param publishing: the caller holds the table's publish lock (no other publish can be running)
        """
        store, projector = self.catalog.store, self.catalog.projector
        if projector.published_version(self.uuid) >= version:
            return True  # a concurrent publish finished meanwhile
        if version > store.log.head(self.uuid):
            return False
        if not publishing:
            # most likely another writer's publish is running: wait for it rather than render the file to compare
            with store.log.exclusive(f"publish {self.uuid}"):
                if projector.published_version(self.uuid) >= version:
                    return True
        try:
            state = store.table(self.uuid, version)
        except IcelogError:
            return False
        return state.version == version and self.catalog.io.read_bytes(path) == projector.metadata.render(state)

    def wait_published(self, version: int, timeout_s: float = 30.0, *, poll_s: float = 0.05) -> int:
        """Block until this table's published projection (metadata file, hint, pointer row) has caught up with
        log version ``version`` (read-your-writes for readers of the metadata, such as Spark after a commit made
        by a catalog opened with ``project=False``); returns the published version.

        :param version: the log version to wait for (``table.state.version`` after a commit)
        :param timeout_s: how long to wait
        :param poll_s: how often to look
        :raises PublishTimeout: the projection is still behind after ``timeout_s`` (names the table)
        """
        deadline = time.monotonic() + timeout_s
        projector = self.catalog.projector
        while True:
            published = projector.published_version(self.uuid)
            if published >= version:
                return published
            if time.monotonic() >= deadline:
                name = ".".join(self.identifier)
                raise PublishTimeout(f"Cannot wait for {name}: its projection is at version {published}, not "
                                     f"{version}, after {timeout_s:g}s (is a publisher running?)",
                                     table=name, version=version, published=published)
            time.sleep(poll_s)

    def _after_commit(self, landed: Landed | None, progress: Callable[[int, int], None] | None = None) -> TableState:
        store = self.catalog.store
        if landed is None:
            return store.table(self.uuid)
        state = store.table(self.uuid)
        if self.catalog.project:
            try:
                # the commit has just checked for foreign metadata, and the publish writes metadata.json only where
                # no file is (a foreign one that slipped in since is refused, never replaced)
                self._publish(check_foreign=False, version=dict(landed.result.heads).get(self.uuid, state.version),
                              progress=progress)
            except (StorageError, ForeignWriterError, LogError) as e:
                raise PublishFailed(f"Committed {'.'.join(self.identifier)} at version {state.version}, but could "
                                    f"not publish it ({e}); readers see the previous version until publish() "
                                    f"succeeds", path=getattr(e, "path", None) or "", table=".".join(self.identifier),
                                    version=state.version) from e
        return state

    # ------------------------------------------------------------ time travel on the log (issue 4)
    def as_of(self, *, version: int | None = None, time: Any = None) -> Any:
        """A read-only table exactly as it was right after log version ``version``, or at ``time`` (ms or datetime)."""
        from engine.state.time_travel import table_as_of

        return table_as_of(self, version=version, time=time)

    def log(self) -> list[Any]:
        """This table's event-log entries (position, version, type, time, actor, message, commit id, payload)."""
        from engine.state.time_travel import table_log

        return table_log(self)

    def changes(self, from_version: int, to_version: int | None = None) -> Any:
        """Data and delete files added and removed between two log versions."""
        from engine.state.time_travel import table_changes

        return table_changes(self, from_version, to_version)

    @property
    def inspect(self) -> Any:
        """Metadata tables as Arrow, with Iceberg Java's column names: ``t.inspect.snapshots()``, ``.files()``..."""
        from engine.read.metadata_tables import InspectTable

        return InspectTable(self)

    # ------------------------------------------------------------ builders (PyIceberg's names)
    def update_schema(self, allow_incompatible_changes: bool = False, case_sensitive: bool = True) -> Any:
        """Schema evolution: ``add_column``, ``delete_column``, ``rename_column``, ``update_column``, ``move_*``,
        ``set_identifier_fields``; commit with ``.commit()`` or a ``with`` block."""
        from engine.operations.update_schema import UpdateSchema

        return UpdateSchema(self, allow_incompatible_changes=allow_incompatible_changes,
                            case_sensitive=case_sensitive)

    def update_spec(self, case_sensitive: bool = True) -> Any:
        """Partition evolution: ``add_field``, ``remove_field``, ``rename_field``."""
        from engine.operations.update_spec import UpdateSpec

        return UpdateSpec(self, case_sensitive=case_sensitive)

    def replace_sort_order(self, case_sensitive: bool = True) -> Any:
        """A new default sort order: ``asc(column, transform=None, null_order=None)``, ``desc(...)``."""
        from engine.operations.update_sort_order import ReplaceSortOrder

        return ReplaceSortOrder(self, case_sensitive=case_sensitive)

    def expire_snapshots(self, older_than_ms: int | None = None, retain_last: int | None = None, *,
                         delete_external_files: bool = False,
                         progress: Callable[[int, int], None] | None = None) -> Any:
        """Expire snapshots (``history.expire.*`` and per-ref retention) and delete the files only they reached
        that the table owns (under its location); ``delete_external_files`` also deletes those outside it (files
        registered in place with ``append_files``), never another table's. ``progress`` is called with (files
        checked, files to check) as it deletes."""
        from engine.operations.expire import expire_snapshots

        return expire_snapshots(self, older_than_ms=older_than_ms, retain_last=retain_last,
                                delete_external_files=delete_external_files, progress=progress)

    def remove_orphan_files(self, older_than_ms: int | None = None) -> list[str]:
        """Delete files under the table location that nothing references, older than ``older_than_ms``."""
        from engine.operations.expire import remove_orphan_files

        return remove_orphan_files(self, older_than_ms=older_than_ms)

    def manage_snapshots(self) -> Any:
        """Branches, tags, rollback, set current snapshot, cherry-pick."""
        from engine.operations.manage_snapshots import ManageSnapshots

        return ManageSnapshots(self)

    def row_delta(self, *, branch: str = MAIN_BRANCH) -> Any:
        """A builder adding data files, position delete files and equality delete files in one commit."""
        from engine.operations.row_delta import RowDelta

        return RowDelta(self, branch=branch)

    def delete_by_key(self, keys: pa.Table, key_columns: Sequence[str], *, branch: str = MAIN_BRANCH) -> Any:
        """Delete the rows whose ``key_columns`` equal a row of ``keys``, with an equality delete file."""
        from engine.operations.row_delta import delete_by_key

        return delete_by_key(self, keys, key_columns, branch=branch)

    def upsert(self, data: pa.Table, key_columns: Sequence[str], *, branch: str = MAIN_BRANCH) -> Any:
        """Insert ``data``, replacing the rows with the same ``key_columns`` (equality deletes + new data files)."""
        from engine.operations.row_delta import upsert

        return upsert(self, data, key_columns, branch=branch)

    def rewrite_data_files(self, where: str | None = None, strategy: str = "binpack", sort_order: Any = None,
                           zorder_columns: Sequence[str] | None = None,
                           target_file_size_bytes: int | None = None, *, branch: str = MAIN_BRANCH,
                           options: Mapping[str, Any] | None = None,
                           progress: Callable[[int, int], None] | None = None) -> Any:
        """Compaction (operation ``replace``): bin-pack, sort, or Z-order the live data files matching ``where``,
        applying and dropping the delete files they cover. ``options`` takes Java's
        ``use-starting-sequence-number`` (default true: the new files keep the starting snapshot's data sequence
        number, so equality deletes committed meanwhile still apply to them). ``progress`` is called with (files
        rewritten, files to rewrite) as it goes."""
        from engine.operations.rewrite import rewrite_data_files

        return rewrite_data_files(self, where=where, strategy=strategy, sort_order=sort_order,
                                  zorder_columns=zorder_columns, target_file_size_bytes=target_file_size_bytes,
                                  branch=branch, options=options, progress=progress)

    def rewrite_manifests(self) -> Any:
        """Rewrite the current snapshot's manifests into as few as the target size allows (``replace``)."""
        from engine.operations.rewrite import rewrite_manifests

        return rewrite_manifests(self)

    # ------------------------------------------------------------ projections
    def publish(self, *, version: int | None = None, progress: Callable[[int, int], None] | None = None) -> str | None:
        """Publish every commit since the last published version (manifests, lists, metadata, hint, pointer).

        :param version: a commit just made: when another writer has published it meanwhile, nothing is done
            (writers of one table queue for its publish lock, and the first publishes what the others wait for)
        :param progress: called with (snapshots published, snapshots to publish) as their files are written
        """
        return self._publish(check_foreign=True, version=version, progress=progress)

    def _publish(self, *, check_foreign: bool, version: int | None = None,
                 progress: Callable[[int, int], None] | None = None) -> str | None:
        """Publish up to the log's head, unless ``version`` (a commit just made) is published already: writers
        queue on the table's publish lock, and the first one publishes every commit waiting, its followers' too."""
        store = self.catalog.store
        for attempt in (1, 2):
            try:
                with store.log.exclusive(f"publish {self.uuid}"):
                    published = self.catalog.projector.published_version(self.uuid)
                    if version is not None and published >= version:
                        return None
                    return self._publish_after(published, store.log.head(self.uuid), check_foreign=check_foreign,
                                               progress=progress)
            except ConnectionLost:
                if attempt == 2:  # a log server that went away under the derived rows: publishing again is safe
                    raise
        return None

    def _publish_after(self, published: int, head: int, *, check_foreign: bool,
                       progress: Callable[[int, int], None] | None = None) -> str | None:
        store = self.catalog.store
        projector = self.catalog.projector
        if published >= head:
            return None
        try:
            if check_foreign:  # the commits stay in the log; their files wait for a publish
                self.check_foreign_writers("publish")
            states = store.commits_between(self.uuid, published, head)
            try:
                return projector.publish(self.namespace, self.name, states, store.file_changes_of, progress=progress)
            except IntegrityError:
                # the derived index lost a parent: re-project from the first commit (same bytes)
                states = store.commits_between(self.uuid, 0, head)
                return projector.publish(self.namespace, self.name, states, store.file_changes_of,
                                         progress=progress)
        except FileError as e:
            raise storage_error(e, e.path) from e

    def render(self) -> dict[str, bytes]:
        """Every projected file of this table, rendered from the log alone (path -> bytes)."""
        store = self.catalog.store
        states = store.commits_between(self.uuid, 0, store.log.head(self.uuid))
        return render_all(states, store.file_changes_of)

    def rebuild(self, into: str) -> list[str]:
        """Render the projection from the log into another folder (same relative layout); returns the paths."""
        location = self.state.location.rstrip("/")
        out = []
        for path, data in sorted(self.render().items()):
            rel = path[len(location):].lstrip("/") if path.startswith(location + "/") else os.path.relpath(path,
                                                                                                           location)
            target = f"{os.fspath(into).rstrip('/')}/{rel}"
            self.catalog.io.write_bytes(target, data)
            out.append(target)
        return out

    def verify_projection(self) -> list[str]:
        """Published files that differ from a fresh rendering, are missing, or were not written by icelog."""
        problems = []
        from engine.operations.expire import projection_files

        published = self.catalog.projector.published_version(self.uuid)
        head = self.catalog.log.head(self.uuid)
        if published < head:  # a crash between commit and publish (or project=False): files may not match yet
            return [f"{'.'.join(self.identifier)}: projection behind the log at version {published} (log head "
                    f"{head}); run publish"]
        rendered = self.render()
        io = self.catalog.io
        needed = projection_files(self, self.state)  # None: some snapshot never projected
        for path, data in sorted(rendered.items()):
            if path.endswith(layout.VERSION_HINT):
                continue
            if path.endswith(".metadata.json"):
                version = int(os.path.basename(path)[1:].split(".")[0]) - self.state.metadata_base
                if version > published:
                    continue
            if not io.exists(path):
                if needed is None or path in needed:  # expired or cleaned up files may be gone
                    problems.append(f"{path}: missing")
            elif io.read_bytes(path) != data:
                problems.append(f"{path}: differs from the log's rendering")
        metadata_dir = layout.metadata_dir(self.state.location)
        # files a client of the REST server wrote for a commit (its manifests) are staged, not foreign
        staged = {io.canonical(p) for p, _ in self.catalog.log.staged_files(self.uuid)}
        originals = self.original_metadata()  # the original writer's, known at registration
        if io.exists(metadata_dir):
            for path in io.list_dir(metadata_dir):
                if path not in rendered and not path.endswith(layout.VERSION_HINT) and ".tmp" not in path \
                        and io.canonical(path) not in staged and _checksum_of(io.canonical(path)) not in staged \
                        and path.rsplit("/", 1)[-1] not in originals:
                    problems.append(f"{path}: not written by icelog (a foreign writer?)")
        return problems

    def original_metadata(self) -> frozenset[str]:
        """Names of the files the table's metadata folder held when it was registered in place (the original
        writer's): never overwritten, never deleted, never called foreign."""
        from engine.state.store import decoded

        first = self.catalog.log.read_stream(self.uuid, up_to_version=1)
        for event, _ in decoded(first):
            if isinstance(event, TableCreated):
                return frozenset(event.original_metadata)
        return frozenset()

    # ------------------------------------------------------------ reads
    def scan(self, where: str | None = None, columns: Sequence[str] | None = None, snapshot_id: int | None = None,
             as_of_timestamp_ms: int | None = None, ref: str | None = None) -> Scan:
        return Scan(self.catalog.store, self.state, where=where, columns=columns, snapshot_id=snapshot_id,
                    as_of_timestamp_ms=as_of_timestamp_ms, ref=ref, io=self.catalog.io)


def _format_version_of(text: str) -> int | str:
    """The format version a ``format-version`` property names (the text itself when it is not a number, for the
    refusal to name)."""
    return int(text) if text.strip().isdigit() else text


class CatalogTransaction:
    """Staged changes to several tables of one catalog, committed together.

    :param catalog: the catalog
    """

    def __init__(self, catalog: Catalog) -> None:
        self.catalog = catalog
        self._tables: dict[str, Table] = {}

    def load_table(self, identifier: str | Sequence[str]) -> Table:
        """A staged handle on a table: its writes and builders are kept until the transaction commits."""
        table = self.catalog.load_table(identifier)
        if table.uuid not in self._tables:
            self._tables[table.uuid] = table.transaction()
        return self._tables[table.uuid]

    def commit(self) -> None:
        staged = {uuid: list(t._staged or []) for uuid, t in self._tables.items()}
        since = {uuid: t._staged_on_version for uuid, t in self._tables.items()}
        store = self.catalog.store

        def build(ctx: CommitContext) -> list:
            out = []
            for stream, builds in staged.items():
                base = store.table(stream)
                out.append((stream, base.version, run_staged(base, builds, ctx, staged_on_version=since[stream])[0]))
            return out

        policies = [RetryPolicy.of(store.table(uuid)) for uuid in staged]
        policy = min(policies, key=lambda p: p.num_retries) if policies else RetryPolicy()
        try:
            for t in self._tables.values():
                t.check_foreign_writers()
            landed = commit_streams(store, build, policy=policy)
        except BaseException as e:
            self._end(e)
            raise
        for t in self._tables.values():
            t._staged = []
            t._written_in_transaction = []
            t._staged_on_version = store.log.head(t.uuid)
            Table(self.catalog, t.namespace, t.name, t.uuid)._after_commit(landed)

    def _end(self, error: BaseException) -> None:
        """The transaction did not land: every table's written files go (see Table._end_transaction)."""
        for t in self._tables.values():
            t._staged = []
            t._end_transaction(error)

    def __enter__(self) -> CatalogTransaction:
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc_type is None:
            self.commit()
        else:
            self._end(exc)
