"""Publish a table's projections: manifests, manifest lists, vN.metadata.json, the version hint and the pointer row.

Layer: projections (I/O at the edge: writes files through storage.files and derived rows into
the catalog's SQLite file; renders with the pure renderers beside it). Order of writes for
each commit: manifests, manifest list, metadata.json, then (once per publish) the version
hint and the ``iceberg_tables`` pointer, so a crash leaves readers on the previous complete
version. Every byte derives from the log, so two processes publishing the same version
write the same files, and a rebuild into another folder yields identical bytes.

The manifest list of each published snapshot is kept in a derived index table
(``projections.manifest_list_index``) so the next snapshot reuses its parent's manifests without
reading them back; :mod:`projections.commit_renderer` renders each commit's manifests, and the record lengths of
the merged ones are kept in another (``projections.carried_manifests``) for the next merge in any process.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, Mapping, Sequence

from engine.errors import ForeignWriterError, IntegrityError
from engine.model.data_file import ManifestFile
from engine.model.kept_values import SharedPerLog
from engine.state.table_state import Snapshot, TableState
from projections import layout
from projections.carried_manifests import StoredRecordLengths
from projections.commit_renderer import AVRO_CODEC, ChangesOf, Renderer, WrittenEntries
from projections.manifest_list_index import ManifestListIndex, MemoryIndex, OverlayIndex, StoredIndex
from projections.manifests import render_manifest_list
from projections.metadata_json import MetadataRenderer
from storage import EventLog
from storage.errors import FileAlreadyExists
from storage.files import FileIO

DEFAULT_CATALOG_NAME = "icelog"


class KeptBetweenPublishes:
    """What a projector keeps between publishes to render the next commit without reading or encoding again: the
    entries of the manifests written (for merges) and each table's encoded snapshot history (for metadata.json).

    Every projector of one log in a process shares one (:data:`KEPT_BY_LOG`): threads that each open the
    catalog (a REST server's workers, writers of one process) publish one another's commits, and a handle that
    kept only what it wrote itself read back the merged manifests the others wrote (all of the table's files, every
    hundred commits) and encoded again the snapshots it had not rendered. Both are safe to share: what they hold
    is keyed by the file's path and length, or checked against the state rendered, and each guards itself with a
    lock; a table's publishes are serialized by its publish lock.
    """

    def __init__(self) -> None:
        self.written = WrittenEntries()
        self.metadata = MetadataRenderer()


#: what the projectors of each log database in this process keep between publishes
KEPT_BY_LOG: SharedPerLog[KeptBetweenPublishes] = SharedPerLog(KeptBetweenPublishes)


# ---------------------------------------------------------------- publishing


class Projector:
    """Publishes the projections of tables, commit by commit.

    ::

        projector = Projector(log, io)
        projector.publish(("db",), "events", states, changes_of)

    :param log: the catalog's log (its database holds the derived index and pointer tables)
    :param io: file IO for the warehouse
    :param catalog_name: the ``catalog_name`` of the ``iceberg_tables`` rows
    """

    STATUS = "projection_status"

    def __init__(self, log: EventLog, io: FileIO, catalog_name: str = DEFAULT_CATALOG_NAME) -> None:
        self.log = log
        self.io = io
        self.catalog_name = catalog_name
        self.index = StoredIndex(log)
        self.record_lengths = StoredRecordLengths(log)
        #: what it keeps between publishes, shared with every projector of the log in the process
        self._kept = KEPT_BY_LOG.of(log)
        derived = log.derived
        derived.create(f"CREATE TABLE IF NOT EXISTS {self.STATUS} (table_uuid TEXT PRIMARY KEY, version BIGINT "
                       f"NOT NULL, metadata_location TEXT NOT NULL)")
        derived.create("CREATE TABLE IF NOT EXISTS iceberg_tables (catalog_name VARCHAR(255) NOT NULL, "
                   "table_namespace VARCHAR(255) NOT NULL, table_name VARCHAR(255) NOT NULL, "
                   "metadata_location VARCHAR(1000), previous_metadata_location VARCHAR(1000), "
                   "PRIMARY KEY (catalog_name, table_namespace, table_name))")
        derived.create("CREATE TABLE IF NOT EXISTS iceberg_namespace_properties (catalog_name VARCHAR(255) NOT NULL, "
                   "namespace VARCHAR(255) NOT NULL, property_key VARCHAR(255) NOT NULL, "
                   "property_value VARCHAR(1000), PRIMARY KEY (catalog_name, namespace, property_key))")

    @property
    def metadata(self) -> MetadataRenderer:
        """Renders metadata.json, keeping each table's encoded snapshot history between publishes."""
        return self._kept.metadata

    @property
    def _written(self) -> WrittenEntries:
        """The entries of the manifests written, for the next merge."""
        return self._kept.written

    def stop_sharing(self) -> None:
        """Keep nothing more with the process's other projectors of the log (the log was closed)."""
        self._kept = KeptBetweenPublishes()

    def published_version(self, table_uuid: str) -> int:
        rows = self.log.derived.query(f"SELECT version FROM {self.STATUS} WHERE table_uuid = ?", [table_uuid])
        return 0 if not rows else int(rows[0][0])

    def publish(self, namespace: tuple[str, ...], name: str, states: Sequence[TableState],
                changes_of: ChangesOf, progress: Callable[[int, int], None] | None = None,
                name_now: Callable[[], tuple[tuple[str, ...], str] | None] | None = None) -> str | None:
        """Write the files of each commit state in ``states`` (oldest first), then move the hint and the pointer.

        Returns the newest metadata location, or None when there was nothing to publish.

        :param progress: called with (snapshots written, snapshots to write) as their files are written
        :param name_now: the name the catalog gives the table, asked inside the pointer's transaction (no catalog
            commit lands meanwhile): the row goes under it, not under a name read before a rename; None (dropped
            since) leaves the rows alone, since the name may be another table's by now
        """
        if not states:
            return None
        renderer = Renderer(self.io.read_bytes, self._written, changes_of, self.record_lengths.get)
        index = OverlayIndex(self.index)
        on_snapshot = None
        if progress is not None:
            total = sum(len(commit_snapshots(state)) for state in states)
            written = iter(range(1, total + 1))
            progress(0, total)
            on_snapshot = lambda: progress(next(written), total)  # noqa: E731
        for state in states:
            write_commit(state, renderer, index, changes_of, self._write, self.metadata, on_snapshot=on_snapshot)
        newest = states[-1]
        location = layout.metadata_file_of(newest)
        ns = ".".join(namespace)
        derived = self.log.derived
        with derived.transaction():
            self.index.put_many(newest.table_uuid, index.added)
            self.record_lengths.put_many(newest.table_uuid, renderer.merged_lengths)
            if self.published_version(newest.table_uuid) >= newest.version:
                return location  # another process got here first with the same (or a newer) version
            self.io.write_bytes(layout.version_hint_file(newest.location),
                                str(newest.metadata_number()).encode("ascii"))
            if name_now is not None:
                named = name_now()
                if named is None:
                    return location
                ns, name = ".".join(named[0]), named[1]
            rows = derived.query(
                "SELECT metadata_location FROM iceberg_tables WHERE catalog_name = ? AND table_namespace = ? "
                "AND table_name = ?", [self.catalog_name, ns, name])
            derived.upsert("iceberg_tables", ("catalog_name", "table_namespace", "table_name"),
                           {"catalog_name": self.catalog_name, "table_namespace": ns, "table_name": name,
                            "metadata_location": location,
                            "previous_metadata_location": rows[0][0] if rows else None})
            if name_now is not None:  # rows of the table under a name it had before (a rename raced a publish)
                self._delete_rows_of(_folder_of(location), keep=(ns, name))
            derived.upsert(self.STATUS, ("table_uuid",), {"table_uuid": newest.table_uuid,
                                                          "version": newest.version, "metadata_location": location})
        return location

    def _delete_rows_of(self, folder: str, *, keep: tuple[str, str] | None = None) -> None:
        """Delete the pointer rows naming a metadata file of the table whose metadata folder is ``folder`` (a table's
        rows, whatever name they are under: locations never overlap), but the one under ``keep``."""
        sql = ("DELETE FROM iceberg_tables WHERE catalog_name = ? AND substr(metadata_location, 1, ?) = ?")
        args: list[Any] = [self.catalog_name, len(folder), folder]
        if keep is not None:
            sql += " AND NOT (table_namespace = ? AND table_name = ?)"
            args += list(keep)
        self.log.derived.execute(sql, args)

    def _published_location(self, table_uuid: str) -> str | None:
        rows = self.log.derived.query(f"SELECT metadata_location FROM {self.STATUS} WHERE table_uuid = ?",
                                      [table_uuid])
        return rows[0][0] if rows else None

    def _write(self, path: str, data: bytes) -> None:
        """Write one rendered file. A metadata.json is written once, never replaced (locally a hard link of a
        temporary file, on an object store a conditional PUT): the same bytes already there are a publish
        repeated; other bytes a foreign writer's (a Hadoop-catalog commit that slipped in since the check)."""
        if not path.endswith(".metadata.json"):
            self.io.write_fresh(path, data)  # manifests and manifest lists: names only this commit takes
            return
        try:
            self.io.write_once(path, data)
        except FileAlreadyExists as e:
            raise ForeignWriterError(f"Cannot publish {path}: another writer put different metadata there; "
                                     f"register or remove it first", path=path) from e

    def publish_rename(self, table_uuid: str, name_now: Callable[[], tuple[tuple[str, ...], str] | None]) -> None:
        """Put a renamed table's ``iceberg_tables`` pointer row under the name the catalog gives it now, asked inside
        the pointer's transaction (the caller holds the table's publish lock): every row of the table under another
        name goes, whichever rename or publish wrote it (two renames racing each other, or a publish between a
        rename and this)."""
        derived = self.log.derived
        with derived.transaction():
            location, named = self._published_location(table_uuid), name_now()
            if location is None or named is None:
                return  # never published (no rows), or dropped since (the drop removes them)
            ns, name = ".".join(named[0]), named[1]
            folder = _folder_of(location)
            rows = derived.query("SELECT previous_metadata_location FROM iceberg_tables WHERE catalog_name = ? AND "
                                 "metadata_location = ?", [self.catalog_name, location])
            self._delete_rows_of(folder)
            derived.upsert("iceberg_tables", ("catalog_name", "table_namespace", "table_name"),
                           {"catalog_name": self.catalog_name, "table_namespace": ns, "table_name": name,
                            "metadata_location": location, "previous_metadata_location": rows[0][0] if rows else None})

    def publish_drop(self, table_uuid: str) -> None:
        """Remove a dropped table's pointer rows, under whatever name (none of another table: locations never
        overlap), and its projection status; the caller holds the table's publish lock."""
        derived = self.log.derived
        with derived.transaction():
            location = self._published_location(table_uuid)
            if location is not None:
                self._delete_rows_of(_folder_of(location))
            derived.execute(f"DELETE FROM {self.STATUS} WHERE table_uuid = ?", [table_uuid])

    def publish_namespace(self, namespace: tuple[str, ...],
                          properties_now: Callable[[], Mapping[str, str] | None]) -> None:
        """Make a namespace's ``iceberg_namespace_properties`` rows hold what the catalog says now, asked inside
        their transaction: its properties, or no rows once it is dropped."""
        with self.log.derived.transaction():
            self._write_namespace_rows(".".join(namespace), properties_now())

    def publish_namespaces(self, namespaces_now: Callable[[], Mapping[tuple[str, ...], Any]]) -> None:
        """Make every namespace's rows hold what the catalog says now (the rows of namespaces it no longer has go):
        a repair of rows a catalog that did not publish left behind."""
        derived = self.log.derived
        with derived.transaction():
            now = {".".join(ns): dict(props) for ns, props in namespaces_now().items()}
            rows = derived.query("SELECT DISTINCT namespace FROM iceberg_namespace_properties WHERE catalog_name = ?",
                                 [self.catalog_name])
            for (ns,) in rows:
                if ns not in now:
                    self._write_namespace_rows(ns, None)
            for ns, props in now.items():
                self._write_namespace_rows(ns, props)

    def _write_namespace_rows(self, ns: str, properties: Mapping[str, str] | None) -> None:
        derived = self.log.derived
        derived.execute("DELETE FROM iceberg_namespace_properties WHERE catalog_name = ? AND namespace = ?",
                        [self.catalog_name, ns])
        if properties is None:
            return
        for key, value in [("exists", "true"), *sorted(properties.items())]:
            derived.upsert("iceberg_namespace_properties", ("catalog_name", "namespace", "property_key"),
                           {"catalog_name": self.catalog_name, "namespace": ns, "property_key": key,
                            "property_value": value})


def _folder_of(metadata_location: str) -> str:
    """The folder of a metadata file, with its trailing slash."""
    return metadata_location[:metadata_location.rfind("/") + 1]


def write_commit(state: TableState, renderer: Renderer, index: ManifestListIndex, changes_of: ChangesOf,
                 write: Callable[[str, bytes], None], metadata: MetadataRenderer,
                 on_snapshot: Callable[[], None] | None = None) -> dict[str, bytes]:
    """Render and write one commit's files (manifests, manifest list, metadata.json); returns what was written.
    ``on_snapshot()`` is called after each snapshot's files are written."""
    written: dict[str, bytes] = {}
    for snap in commit_snapshots(state):
        parent: list[ManifestFile] = []
        if snap.parent_snapshot_id is not None:
            found = index.get(state.table_uuid, snap.parent_snapshot_id)
            if found is None and state.logged_snapshot(snap.parent_snapshot_id) is None:
                # an imported snapshot whose parent was expired before the import: the log never held the
                # parent, the snapshot's changes add every file live in it, and its parent id stays as Java's does
                found = []
            if found is None:
                raise IntegrityError(f"Cannot project snapshot {snap.snapshot_id}: the manifest list of its parent "
                                     f"{snap.parent_snapshot_id} was never projected")
            parent = found
        writes, manifests = renderer.snapshot_manifests(state, snap, parent, changes_of(state, snap))
        for w in writes:
            write(w.path, w.data)
            written[w.path] = w.data
        list_path = layout.manifest_list_file(state.location, snap.snapshot_id, snap.commit_id)
        data = render_manifest_list(manifests, format_version=state.format_version, snapshot_id=snap.snapshot_id,
                                    parent_snapshot_id=snap.parent_snapshot_id,
                                    sequence_number=snap.sequence_number, sync_marker=layout.sync_marker(list_path),
                                    codec=AVRO_CODEC, first_row_id=snap.first_row_id)
        write(list_path, data)
        written[list_path] = data
        index.put(state.table_uuid, snap.snapshot_id, manifests)
        if on_snapshot is not None:
            on_snapshot()
    meta_path = layout.metadata_file_of(state)
    meta = metadata.render(state)
    write(meta_path, meta)
    written[meta_path] = meta
    return written


def commit_snapshots(state: TableState) -> tuple[Snapshot, ...]:
    """The snapshots ``state``'s commit added: the last ones of its snapshots (a snapshot goes on the end when it is
    added, and an expiry keeps the others' order), found from the end in the time they take, not the history's."""
    snapshots, commit_id = state.snapshots, state.commit_id
    start = len(snapshots)
    while start and snapshots[start - 1].commit_id == commit_id:
        start -= 1
    return snapshots[start:]


def render_all(states: Iterable[TableState], changes_of: ChangesOf,
               read_back: Callable[[str], bytes] | None = None) -> dict[str, bytes]:
    """Every file of a table's projection, rendered from its commit states alone (for rebuild and verify)."""
    files: dict[str, bytes] = {}

    def read(path: str) -> bytes:
        if path in files:
            return files[path]
        if read_back is not None:
            return read_back(path)
        raise FileNotFoundError(path)

    renderer = Renderer(read)
    index = MemoryIndex()
    metadata = MetadataRenderer(max_tables=1)
    last: TableState | None = None
    for state in states:
        write_commit(state, renderer, index, changes_of, files.__setitem__, metadata)
        last = state
    if last is not None:
        files[layout.version_hint_file(last.location)] = str(last.metadata_number()).encode("ascii")
    return files
