"""The public Python API's entry point: a Catalog over one warehouse and its log.

Layer: engine (top of the engine: opens the log, and uses the state store, operations, the projector, and
engine.table's Table handles). ``Catalog`` owns the one log connection, the state cache and the projector, the
namespaces, and the tables' lifecycle (create, register, rename, drop, where they live and what they own);
``Table`` (engine.table) holds only the catalog and the table's identity, and reads state fresh from the log on
every call; several tables' changes land together through a ``CatalogTransaction`` (engine.catalog_transaction).

::

    from engine import Catalog
    cat = Catalog.open("warehouse")
    cat.create_namespace("db")
    t = cat.create_table("db.events", schema=pa_schema, partition_by=["day(ts)", "bucket(16, id)"])
    t.append(arrow_table)
    t.scan(where="id > 10").to_arrow()
"""

from __future__ import annotations

import functools
import os
import uuid
from datetime import datetime
from typing import Any, Callable, Mapping, Sequence
from urllib.parse import urlsplit

import pyarrow as pa

from engine.catalog_transaction import CatalogTransaction
from engine.errors import (
    AlreadyExists,
    IcelogError,
    IntegrityError,
    NamespaceNotEmpty,
    NamespaceNotFound,
    TableNotFound,
    ValidationError,
    storage_error,
)
from engine.model.arrow_schema import schema_from_arrow
from engine.model.identifiers import parse_identifier, parse_namespace
from engine.model.partitioning import UNPARTITIONED_SPEC, PartitionSpec, build_spec
from engine.model.schema import Schema, check_schema_for_format
from engine.model.sort_order import UNSORTED_ORDER
from engine.model.table_properties import check_property_values
from engine.operations.commit import CommitContext, RetryPolicy, commit_streams
from engine.operations.expire import purge_files
from engine.operations.table_updates import FORMAT_VERSION_PROPERTY, SUPPORTED_FORMAT_VERSIONS, format_version_of
from engine.ownership import (
    Ownership,
    catalog_files,
    check_identifier,
    check_namespace_properties,
    check_new_namespace,
    check_table_location,
    choose_default_location,
    is_local,
    normalize_location,
)
from engine.registration.register import PositionDeleteRelocation, commit_registration
from engine.state.events import (
    CATALOG_STREAM,
    NamespaceCreated,
    NamespaceDropped,
    NamespacePropertiesUpdated,
    TableCreated,
    TableDropped,
    TableRegistered,
    TableRenamed,
)
from engine.state.store import StateStore
from engine.state.table_state import TableEntry
from engine.state.time_travel import HistoricalCatalog, LogEntry, catalog_as_of, entries_since
from engine.table import Table
from engine.written_files import may_have_landed
from projections.projector import DEFAULT_CATALOG_NAME, Projector
from storage import FileError, Log, LogError
from storage.errors import LogDamaged
from storage.files import FileIO, S3Settings, is_s3
from storage.log import log_read_write_methods
from storage.postgres_url import is_postgres_url, redacted

CATALOG_DB = "catalog.db"


class _LogEntries:
    """Makes a catalog's log callable: ``catalog.log(since=position)`` lists event-log entries (position, version,
    stream, type, time, actor, message, commit id, payload) after ``since``."""

    def __call__(self, since: int = 0) -> list[LogEntry]:
        return entries_since(self, since)


class CatalogLog(_LogEntries, Log):
    """The catalog's storage log in its SQLite file, also callable (``catalog.log(since=position)``). A damaged
    database file (``storage.LogDamaged``) reaches the engine as :class:`IntegrityError` naming the position."""


def _make_folder(path: str, what: str) -> None:
    """Make the folder (and its parents) unless it exists; a file there, or an unwritable parent, is a
    ValidationError naming it, not a traceback."""
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as e:
        raise ValidationError(f"Cannot open catalog: {what} {path} is not a folder icelog can use "
                              f"({e.strerror or e})") from e


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
        # storage.contract's EventLog declares ``derived`` a plain (so invariant) attribute of type DerivedTables, and
        # Log's is a SqliteDerived: a false alarm of the protocol's, not of this call
        self.projector = Projector(log, self.io, name)  # type: ignore[arg-type]

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
                _make_folder(root, "warehouse")
        try:
            if postgres:
                log = _open_postgres_log(path)
            else:
                _make_folder(path, "catalog folder")
                log = CatalogLog.open(os.path.join(path, CATALOG_DB), synchronous=synchronous, create=create)
        except LogDamaged as e:
            raise IntegrityError(f"Cannot open catalog at {path}: {e}", position=e.position) from e
        except LogError as e:
            where = getattr(e, "path", None) or (redacted(path) if postgres else path)
            raise IcelogError(f"Cannot open catalog at {where}: {e}") from e
        return cls(root, log, name=name, project=project, io=io)

    def close(self) -> None:
        # a closed handle shares nothing more with the process's open handles of the log (nor a later one), even
        # when closing the log fails
        self.store.stop_sharing()
        self.projector.stop_sharing()
        self.log.close()

    def __enter__(self) -> Catalog:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # ------------------------------------------------------------ namespaces
    def create_namespace(self, namespace: str | Sequence[str], properties: Mapping[str, str] | None = None) -> None:
        ns = parse_namespace(namespace)
        check_new_namespace(ns)
        properties = {str(k): str(v) for k, v in (properties or {}).items()}
        check_namespace_properties(ns, properties)

        def build(ctx: CommitContext) -> list:
            state = self.store.catalog()
            if state.has_namespace(ns):
                raise AlreadyExists(f"Cannot create namespace {'.'.join(ns)}: it already exists")
            return [(CATALOG_STREAM, state.version, [NamespaceCreated(namespace=ns, properties=properties or {})])]

        commit_streams(self.store, build, policy=RetryPolicy())
        self._publish_namespace(ns)

    def list_namespaces(self, parent: str | Sequence[str] | None = None) -> list[tuple[str, ...]]:
        """Every namespace (``parent`` None), or the namespaces one level below ``parent`` (``()``: the top level),
        as the REST catalog's ``parent`` lists them: a parent that only prefixes namespaces (``a.b`` created, ``a``
        never) lists them, as Java's catalogs do.

        :raises NamespaceNotFound: ``parent`` neither exists nor prefixes a namespace
        """
        state = self.store.catalog()
        if parent is None:
            return [ns for ns, _ in state.namespaces]
        above = parse_namespace(parent) if parent else ()
        found = sorted({ns[:len(above) + 1] for ns, _ in state.namespaces
                        if len(ns) > len(above) and ns[:len(above)] == above})
        if above and not found and not state.has_namespace(above):
            raise NamespaceNotFound(f"Cannot list namespaces: parent {'.'.join(above)} does not exist")
        return found

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
        check_namespace_properties(ns, updates)
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
        self._publish_namespace(ns)
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
        self._publish_namespace(ns)

    def _publish_namespace(self, ns: tuple[str, ...]) -> None:
        """Make the namespace's rows in the pointer tables say what the catalog says now (asked inside their
        transaction, so a commit landing since cannot be undone by rows written after it), whether this catalog
        publishes or not, as a rename moves its table's row."""
        self.projector.publish_namespace(ns, lambda: self.store.catalog().namespace_properties(ns))

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
        check_property_values(props, ".".join(ns + (name,)))
        if FORMAT_VERSION_PROPERTY in props:
            given = props.pop(FORMAT_VERSION_PROPERTY)
            from_property = format_version_of(given)
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
            renamed[:] = [entry.table_uuid]
            return [(CATALOG_STREAM, state.version, [TableRenamed(namespace=ns, name=name, new_namespace=new_ns,
                                                                  new_name=new_name, table_uuid=entry.table_uuid)])]

        renamed: list[str] = []
        commit_streams(self.store, build, policy=RetryPolicy())
        # after a publish running now (it wrote the row under the name it found), before the next (the new one); a
        # catalog that does not publish moves the row too, or its publisher's next publish would leave the old one
        with self.log.exclusive(f"publish {renamed[0]}"):
            self.projector.publish_rename(renamed[0], lambda: self._name_of(renamed[0]))
        return Table(self, new_ns, new_name, renamed[0])  # by its uuid: another rename may have landed since

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
        :raises ValidationError: ``delete_external_files`` without ``purge`` (nothing is dropped: a drop that keeps
            the files cannot delete some of them)
        """
        ns, name = parse_identifier(identifier)
        if delete_external_files and not purge:
            raise ValidationError(f"Cannot drop table {'.'.join(ns + (name,))}: delete_external_files deletes files "
                                  f"only along with a purge (purge=True); nothing was dropped")
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
        with self.log.exclusive(f"publish {table_uuid}"):  # after a publish running now, which put its row back
            self.projector.publish_drop(table_uuid)
        if not purge:
            return []
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
                    must_be_empty: bool = True, action: str = "create table",
                    placed: Sequence[tuple[str, str]] = ()) -> str:
        """Where a new table lives: ``location`` when given and allowed, else a free default folder
        (see engine.ownership).

        :param placed: (location, name) of tables the same commit creates before this one (not in the catalog yet)

        :raises ValidationError: the location is the warehouse, holds the catalog's files, is or overlaps
            another table's location, or (``must_be_empty``) is a file or a non-empty folder
        """
        what = f"{action} {'.'.join(namespace + (name,))}"
        others = self.table_locations(excluding=table_uuid) + [(normalize_location(loc), n) for loc, n in placed]
        if location is None:
            chosen = choose_default_location(self.warehouse, namespace, name, table_uuid,
                                             catalog_database=self.database, others=others, what=what,
                                             holds_files=self._holds_files)
        else:
            check_table_location(location, warehouse=self.warehouse, catalog_database=self.database, others=others,
                                 must_be_empty=must_be_empty, what=what, holds_files=self._holds_files)
            chosen = location.rstrip("/")
        try:
            missing = not self.io.bucket_exists(chosen)
        except FileError as e:
            raise storage_error(e, chosen) from e
        if missing:  # the table would be committed, then never published
            raise ValidationError(f"Cannot {what}: the bucket of {chosen} does not exist")
        return chosen

    def check_rebuild(self, into: str, table: str) -> None:
        """Refuse a folder a table's rebuild would write into but must not: any table's location (its own too), one
        inside or around one, the warehouse root, the catalog's files.

        :raises ValidationError: naming the folder and the rule it breaks
        """
        into = os.fspath(into)
        if is_local(into) and not urlsplit(into).scheme:  # a folder, as FileIO reaches it (relative: from here)
            into = os.path.abspath(into)
        check_table_location(into, warehouse=self.warehouse, catalog_database=self.database,
                             others=self.table_locations(), must_be_empty=False, what=f"rebuild {table} into",
                             holds_files=self._holds_files)

    def _holds_files(self, location: str) -> bool:
        try:
            return self.io.holds_files(location)
        except FileError as e:
            raise storage_error(e, location) from e

    def ownership(self, table_uuid: str, *, name: str | None = None) -> Ownership:
        """The files the table ``table_uuid`` owns (see engine.ownership.Ownership)."""
        location = self.store.table(table_uuid).location
        if name is None:
            entry = self.store.catalog().entry_of(table_uuid)
            name = ".".join(entry.namespace + (entry.name,)) if entry is not None else f"table {table_uuid}"
        return Ownership(location, others=self.table_locations(excluding=table_uuid),
                         catalog_files=catalog_files(self.database), name=name,
                         original_metadata=self.store.original_metadata(table_uuid))

    def ownership_at(self, location: str, *, excluding: str | None = None, name: str = "the table") -> Ownership:
        """The files a table at ``location`` would own among the catalog's tables but ``excluding`` (its own uuid;
        None for a table not registered yet)."""
        return Ownership(location, others=self.table_locations(excluding=excluding),
                         catalog_files=catalog_files(self.database), name=name)

    def load_table(self, identifier: str | Sequence[str]) -> Table:
        ns, name = parse_identifier(identifier)
        entry = self.store.catalog().table(ns, name)
        if entry is None:
            raise TableNotFound(f"Cannot load table {'.'.join(ns + (name,))}: it does not exist")
        return Table(self, ns, name, entry.table_uuid)

    def _name_of(self, table_uuid: str) -> tuple[tuple[str, ...], str] | None:
        """The name the catalog gives a table now; None when it names it no more (dropped)."""
        entry = self.store.catalog().entry_of(table_uuid)
        return None if entry is None else (entry.namespace, entry.name)

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

    def as_of(self, *, position: int | None = None, time: float | datetime | None = None) -> HistoricalCatalog:
        """The whole catalog, read-only, as it was right after log ``position`` or at ``time`` (ms or datetime)."""
        return catalog_as_of(self, position=position, time=time)

    def register_table(self, identifier: str | Sequence[str], metadata_location: str,
                       relocate: Mapping[str, str] | None = None, *, location: str | None = None,
                       progress: Callable[[str, int, int], None] | None = None) -> Table:
        """Take over an existing Iceberg table: its whole history becomes events (see engine.registration.metadata_import).

        icelog publishes beside the original metadata unless that would overwrite an original file (then it
        refuses: pass ``location`` for a new folder; see engine.registration.register). ``progress(step, done, total)`` hears
        how far reading ("read") and then publishing ("publish") the snapshots has come."""
        relocation = PositionDeleteRelocation(self.io)
        try:
            registered = commit_registration(
                self.store, self.io, self.place_table, identifier, metadata_location, relocation, relocate,
                location=location, progress=None if progress is None else lambda done, total: progress("read", done,
                                                                                                        total),
                ownership_at=self.ownership_at)
        except BaseException as e:
            if not may_have_landed(e):  # nothing committed: remove the delete file copies it created
                relocation.discard()
            raise
        # landed: the log names the copies, whatever publishing does now
        table = Table(self, registered.namespace, registered.name, registered.table_uuid)
        table._after_commit(registered.landed, progress=None if progress is None else
                            lambda done, total: progress("publish", done, total))
        table.import_notes = registered.notes  # type: ignore[attr-defined]  # what the events could not carry
        return table

    def publish(self) -> None:
        """Bring every table's projection up to its log head, and the namespaces' rows up to the catalog."""
        self.projector.publish_namespaces(lambda: dict(self.store.catalog().namespaces))
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
