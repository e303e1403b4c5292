"""Registering an existing Iceberg table: its whole history becomes one log commit, then icelog publishes it.

Layer: engine (glue: reads through engine.registration.metadata_import, commits through the operations' commit loop;
knows no Catalog or Table: ``Catalog.register_table`` publishes what landed). One commit holds the catalog stream's TableRegistered and every event of the
new table stream, so a table is registered with its full history or not at all.

Where icelog's projection goes: the table keeps its original location (after ``relocate``), so icelog's
metadata lands beside the original's in ``<location>/metadata``. icelog names its metadata files
``v<N>.metadata.json``; when the folder already holds the original writer's ``v<M>[.gz].metadata.json`` files,
N starts after the highest M (the shift is recorded in the log with the table, ``metadata_base``), so no
original file is ever overwritten, and the version hint then points at icelog's version: a Hadoop-catalog
reader (Spark by path) reads icelog's projection from then on. ``location=`` still puts icelog's metadata in a
new folder instead. Manifest and manifest-list names cannot clash (icelog's derive from its commit ids). The
original files are never modified or deleted.

With ``relocate``, a position delete file names data files by their original paths; each one whose rows
name a relocated path is copied with those paths rewritten to ``<location>/data/relocated-<uuid5>.parquet``
(the name derives from the original's path, so a retried import writes the same file) and the events
record the copy instead of the original. Every check of where the table may live (its name, its location
against the other tables', its uuid) runs before anything is written, and again in the commit; a copy is never
written over an existing file (one with the same bytes, an earlier import's, is used as is; another is refused),
and a registration refused before its commit removes the copies it created.

The files the location already held, other than the original metadata and the files the history takes over,
are recorded with the table (``TableCreated.original_files``): they are not the table's, and orphan removal
leaves them alone.
"""

from __future__ import annotations

import contextlib
import io as io_mod
from collections.abc import Callable, Mapping, Sequence
from types import TracebackType
from typing import Any, Protocol, cast

import attrs

from engine.write.delete_files import relocate_position_deletes
from engine.errors import AlreadyExists, NamespaceNotFound, ValidationError
from engine.state.events import CATALOG_STREAM, Event, SnapshotAdded, TableCreated, TableRegistered
from engine.model.data_file import DataFile, DataFileContent
from engine.model.paths import normalize_path
from engine.model.identifiers import parse_identifier
from engine.operations.commit import CommitContext, Landed, RetryPolicy, commit_streams
from engine.ownership import Ownership, check_identifier, refuse_catalog_database
from engine.read.reader import read_position_delete_rows
from engine.state.table_state import CatalogState
from engine.state.store import StateStore
from projections import layout
from engine.registration.metadata_import import (
    ImportedTable,
    all_paths,
    import_table,
    metadata_files_in,
    table_identity,
    versioned_number,
)
from storage.errors import FileAlreadyExists, FileError, LogError
from storage.files import FileIO

@attrs.frozen(kw_only=True)
class Registration:
    """A registration that landed in the log: the new table's stream, the commit, and what the events could not
    carry (the importer's notes). Publishing it is the catalog's (see ``Catalog.register_table``)."""

    namespace: tuple[str, ...]
    name: str
    table_uuid: str
    landed: Landed | None
    notes: tuple[str, ...]


def commit_registration(store: StateStore, io: FileIO, place_table: PlaceTable, identifier: str | Sequence[str],
                        metadata_location: str, relocation: PositionDeleteRelocation,
                        relocate: Mapping[str, str] | None = None, *, location: str | None = None,
                        progress: Callable[[int, int], None] | None = None,
                        ownership_at: Callable[[str], Ownership] | None = None) -> Registration:
    """Take over an existing Iceberg table under ``identifier``: read its history and commit it as one log commit.

    :param store: the catalog's state store
    :param io: the catalog's FileIO
    :param place_table: the catalog's check of where a table may live (``Catalog.place_table``)
    :param identifier: ``"namespace.table"`` (the namespace must exist)
    :param metadata_location: a ``*.metadata.json`` file (gzip too) or the table's folder
    :param relocation: rewrites relocated position delete files, and removes its copies when the registration
        fails (the caller discards it on any failure, publishing included)
    :param relocate: old path prefix -> new path prefix, for tables copied from another machine or store
    :param location: where icelog publishes its projection (default: the original table location)
    :param progress: called with (snapshots read, snapshots) while the history is read
    :param ownership_at: the files a table at a location would own, among the catalog's tables
        (``Catalog.ownership_at``); a history that references another table's file (or the catalog's) is refused,
        as ``append_files`` refuses one: that table's expiry and purge delete its files
    :raises AlreadyExists: the name is taken, or the table (its uuid) is already registered
    :raises ValidationError: the metadata holds what icelog cannot represent
    :raises CorruptFileError: a metadata file, manifest list or manifest cannot be read
    """
    ns, name = parse_identifier(identifier)
    check_identifier(ns, name)
    refuse_catalog_database(metadata_location, "register table")
    # every check before anything is written: the import writes relocated delete file copies into the location
    known_uuid, planned = table_identity(io, metadata_location, relocate=relocate, location=location)
    check_placement(store, place_table, ns, name, known_uuid, planned)
    held = io.list_files(planned)  # what the location holds before the import adds its copies
    imported = import_table(io, metadata_location, relocate=relocate, location=location,
                            relocate_position_deletes=relocation, progress=progress)
    check_position_deletes(io, imported)
    if ownership_at is not None:
        check_files_not_elsewhere(imported, ownership_at(imported.location), ".".join(ns + (name,)))
    events = list(imported.events)
    created = events[0]
    assert isinstance(created, TableCreated)
    originals = tuple(sorted(metadata_files_in(io, imported.location, every=True)))  # one listing
    events[0] = attrs.evolve(created, metadata_base=metadata_base(imported, originals), original_metadata=originals,
                             original_files=original_files(io, imported.location, held, originals, events))
    table_uuid = imported.table_uuid

    def build(ctx: CommitContext) -> list:
        state = check_placement(store, place_table, ns, name, table_uuid, imported.location)
        return [(CATALOG_STREAM, state.version, [TableRegistered(namespace=ns, name=name, table_uuid=table_uuid)]),
                (table_uuid, 0, events)]

    landed = commit_streams(store, build, policy=RetryPolicy(), message=f"register {imported.metadata_location}")
    return Registration(namespace=ns, name=name, table_uuid=table_uuid, landed=landed, notes=tuple(imported.notes))


def check_files_not_elsewhere(imported: ImportedTable, owned: Ownership, full: str) -> None:
    """Refuse a history whose data or delete files lie under another table's location (or are the catalog's)."""
    seen: set[str] = set()
    for event in imported.events:
        if isinstance(event, SnapshotAdded):
            for change in event.changes:
                path = change.file.file_path
                if change.added and path not in seen:
                    seen.add(path)
                    owner = owned.owner_elsewhere(path)
                    if owner is not None:
                        raise ValidationError(f"Cannot register table {full}: its history references {path}, which "
                                              f"belongs to {owner} (whose expiry and purge delete it)")


def check_placement(store: StateStore, place_table: PlaceTable, ns: tuple[str, ...], name: str,
                    table_uuid: str | None, location: str) -> CatalogState:
    """Refuse a registration whose namespace is missing, whose name is taken, whose location breaks the rules of
    ``place_table`` (another table's location, inside or around one, the warehouse, the catalog's files) or whose
    uuid is registered already (None: the import makes a fresh one); returns the catalog state checked.

    :raises NamespaceNotFound, AlreadyExists, ValidationError: naming the table and the rule
    """
    state = store.catalog()
    full = ".".join(ns + (name,))
    if not state.has_namespace(ns):
        raise NamespaceNotFound(f"Cannot register table {full}: namespace {'.'.join(ns)} does not exist")
    if state.table(ns, name) is not None:
        raise AlreadyExists(f"Cannot register table {full}: it already exists")
    place_table(ns, name, table_uuid or "", location, must_be_empty=False, action="register table")
    if table_uuid is not None and store.log.head(table_uuid) != 0:
        entry = state.entry_of(table_uuid)
        if entry is None:
            raise AlreadyExists(f"Cannot register table {full}: table uuid {table_uuid} is a table this catalog "
                                f"dropped, whose history stays in its log under that uuid (icelog cannot take the "
                                f"dropped table back; read it with catalog.as_of)")
        raise AlreadyExists(f"Cannot register table {full}: table uuid {table_uuid} is already registered "
                            f"as {'.'.join(entry.namespace + (entry.name,))}")
    return state


def original_files(io: FileIO, location: str, held: Sequence[tuple[str, int | None]], originals: Sequence[str],
                   events: Sequence[Event]) -> tuple[str, ...]:
    """The files ``held`` (the location's listing before the import) as paths relative to ``location``, but the
    original metadata files (``originals``, named in the metadata folder) and the files the history takes over:
    what the table's location held that is not the table's (a user's files, another writer's)."""
    if not held:
        return ()
    root = io.canonical(location).rstrip("/") + "/"
    taken = set()
    for path in all_paths(events):
        with contextlib.suppress(FileError, ValueError):
            taken.add(io.canonical(path))
    names = set(originals)
    out = []
    for path, _ in held:
        if not path.startswith(root) or path in taken:
            continue
        relative = path[len(root):]
        folder, _, base = relative.rpartition("/")
        if folder == "metadata" and base in names:
            continue
        out.append(relative)
    return tuple(sorted(out))


class PlaceTable(Protocol):
    """Where a new table may live (``Catalog.place_table``): returns the location, or raises ValidationError."""

    def __call__(self, namespace: tuple[str, ...], name: str, table_uuid: str, location: str | None, *,
                 must_be_empty: bool = True, action: str = "create table") -> str: ...


class PositionDeleteRelocation:
    """Rewrites a moved table's position delete files with relocated ``file_path`` values under the data folder of
    icelog's table location (the importer's ``relocate_position_deletes``), remembering the copies it created so
    a registration that fails before its commit removes them (copies that existed before, made by an earlier
    import of the same table, stay).

    :param io: file IO for the warehouse
    """

    def __init__(self, io: FileIO) -> None:
        self.io = io
        self.created: list[str] = []

    def __call__(self, delete_file: DataFile, relocate: Callable[[str], str], table_location: str
                 ) -> DataFile | None:
        folder = layout.data_dir(table_location)
        # written whole when done, never over an existing file (see _WriteNew)
        writer = cast(FileIO, _WriteNew(self.io, self.created))
        return relocate_position_deletes(delete_file, relocate, folder, io=writer)

    def discard(self) -> None:
        for path in self.created:
            with contextlib.suppress(LogError, OSError):
                self.io.delete(path)
        self.created.clear()


class _WriteNew:
    """``io`` whose outputs are buffered and written when complete with a no-clobber write: a file already there
    with the same bytes (an earlier import's copy) stays as it is; one with other bytes (another table's file) is
    never overwritten: the registration is refused. The files it creates are added to ``created``."""

    def __init__(self, io: FileIO, created: list[str]) -> None:
        self._io = io
        self._created = created

    def __getattr__(self, name: str) -> Any:
        return getattr(self._io, name)

    def open_output(self, location: str) -> _NewFile:
        return _NewFile(self._io, str(location), self._created)


class _NewFile:
    """One output of :class:`_WriteNew`: a buffer, written (if nothing failed) on leaving the ``with`` block."""

    def __init__(self, io: FileIO, location: str, created: list[str]) -> None:
        self._io, self._location, self._created = io, location, created
        self._buffer = io_mod.BytesIO()

    def __enter__(self) -> io_mod.BytesIO:
        return self._buffer

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        data = self._buffer.getvalue()
        self._buffer.close()
        if exc_type is not None:
            return
        try:
            self._io.write_new(self._location, data)
        except FileAlreadyExists:
            if self._io.read_bytes(self._location) != data:
                raise ValidationError(
                    f"Cannot register table: {self._location} already exists with other content (another table's "
                    f"file, or an earlier import's copy made with other relocations); it is left as it is: pass "
                    f"location= for a folder of the table's own") from None
            return
        self._created.append(self._location)


def first_version(imported: ImportedTable) -> int:
    """The stream version (and metadata file number) of icelog's first projection of the imported table."""
    return len(imported.events)


def check_position_deletes(io: FileIO, imported: ImportedTable) -> None:
    """Refuse a position delete file that names a data file of the table by a spelling that does not match it
    (another authority, scheme or escape than the scan will see): its deletes would silently not apply. A delete
    naming a file the table never had (a dangling delete after compaction) is harmless and passes.

    :raises ValidationError: naming the delete file and the path it cannot match
    """
    data: dict[str, set[str]] = {}  # file name -> the normalized paths of the table's data files of that name
    deletes: dict[str, DataFile] = {}
    for event in imported.events:
        for change in getattr(event, "changes", ()) if isinstance(event, SnapshotAdded) else ():
            df, path = change.file, change.file.file_path
            if not change.added:
                continue
            if df.content == DataFileContent.DATA:
                key = normalize_path(path)
                data.setdefault(key.rsplit("/", 1)[-1], set()).add(key)
            elif df.content == DataFileContent.POSITION_DELETES:
                deletes.setdefault(path, df)
    if not deletes:
        return
    known = set().union(*data.values()) if data else set()
    for path, df in sorted(deletes.items()):
        rows = read_position_delete_rows(df, io=io).column("file_path")  # the rows, not bounds that may disagree
        for named in sorted({normalize_path(p) for p in rows.unique().to_pylist() if p is not None}):
            if named in known:
                continue
            same_name = data.get(named.rsplit("/", 1)[-1])
            if same_name:
                raise ValidationError(
                    f"Cannot import position delete file {path}: it deletes rows of {named}, which matches no data "
                    f"file of the table, but {sorted(same_name)[0]} has the same name (another spelling of the "
                    f"path? pass relocate= with the prefix the delete file uses)")


def metadata_base(imported: ImportedTable, names: Sequence[str]) -> int:
    """How far to shift icelog's metadata file numbers so that its first ``v<N>.metadata.json`` comes after every
    ``v<M>[.gz].metadata.json`` among ``names`` (the location's metadata folder; 0 when none is in the way):
    icelog never overwrites an original file, and a Hadoop-catalog reader following the version hint moves on to
    icelog's versions."""
    highest = max((versioned_number(n) or 0 for n in names), default=0)
    return max(0, highest + 1 - first_version(imported))

