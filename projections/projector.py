"""Publish a table's projections: manifests, manifest lists, vN.metadata.json, the version hint and the pointer row.

Layer: projections (I/O at the edge: writes files through storage.files and derived rows into
the catalog's SQLite file; renders with the pure renderers beside it). Order of writes for
each commit: manifests, manifest list, metadata.json, then (once per publish) the version
hint and the ``iceberg_tables`` pointer, so a crash leaves readers on the previous complete
version. Every byte derives from the log, so two processes publishing the same version
write the same files, and a rebuild into another folder yields identical bytes.

The manifest list of each published snapshot is kept in a derived index table
(``projections.manifest_list_index``) so the next snapshot reuses its parent's manifests without
reading them back; merging takes the entries of the manifests it wrote from memory, rebuilds those of another
process's manifests of new files from the log, and reads back only the rest (another process's merged or rewritten
manifests, and those of snapshots committed at format v1 or under an older schema).
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from typing import Callable, Iterable, Mapping, Sequence

import attrs

from engine.errors import CorruptFileError, ForeignWriterError, IntegrityError
from engine.state.events import FileChange
from engine.model.data_file import (
    DataFile,
    DataFileContent,
    EntryStatus,
    ManifestContent,
    ManifestEntry,
    ManifestFile,
)
from engine.model.kept_values import KeptForObjects, SharedPerLog
from engine.model.partitioning import PartitionSpec
from engine.model.schema import Schema
from engine.state.table_state import Snapshot, TableState
from projections import layout
from projections.manifest_reader import inherits_sequence_numbers, read_manifest
from projections.manifests import (
    partition_summaries,
    render_manifest,
    render_manifest_list,
)
from projections.manifest_list_index import ManifestListIndex, MemoryIndex, OverlayIndex, StoredIndex
from projections.metadata_json import MetadataRenderer
from storage import EventLog
from storage.errors import FileAlreadyExists, FileNotFound
from storage.files import FileIO

DEFAULT_CATALOG_NAME = "icelog"
MERGE_ENABLED_DEFAULT = True
MIN_COUNT_TO_MERGE_DEFAULT = 100
#: how many entries of the manifests it wrote a projector keeps for its next merges (about 1 KB each)
WRITTEN_ENTRIES_KEPT = 200_000
TARGET_MANIFEST_SIZE_DEFAULT = 8 * 1024 * 1024
# Uncompressed Avro: deflate's bytes depend on the zlib build, and a rebuild must be identical on any machine.
AVRO_CODEC = "null"

ChangesOf = Callable[[TableState, Snapshot], Sequence[FileChange]]


def content_of(f: DataFile) -> ManifestContent:
    return ManifestContent.DATA if f.content == DataFileContent.DATA else ManifestContent.DELETES


def _removed_and_relabelled(changes: Sequence[FileChange]) -> tuple[dict[str, DataFile], dict[str, DataFile]]:
    """The files a snapshot removed, and those it removed and added again: the same file with new metadata (the
    row ids an upgrade to v3 gives existing rows), whose entry stays where it is, EXISTING, with the new metadata."""
    removed: dict[str, DataFile] = {c.file.key: c.file for c in changes if not c.added}
    relabelled = {c.file.key: c.file for c in changes if c.added and c.file.key in removed}
    for key in relabelled:
        del removed[key]
    return removed, relabelled


def _added_groups(state: TableState, snap: Snapshot, changes: Sequence[FileChange],
                  relabelled: Mapping[str, DataFile]) -> dict[tuple[int, ManifestContent], list[ManifestEntry]]:
    """The entries of the files a snapshot added, by (spec, content): one new manifest each, in key order."""
    v1 = state.format_version == 1
    inherited = None if not v1 else snap.snapshot_id
    groups: dict[tuple[int, ManifestContent], list[ManifestEntry]] = {}
    for c in changes:
        if not c.added or c.file.key in relabelled:
            continue
        # an explicit data sequence number other than the snapshot's is written, as Java's
        # ManifestWriter.add(file, dataSequenceNumber) does; the file sequence number stays inherited
        explicit = c.data_sequence_number
        data_seq = 0 if v1 else (explicit if explicit is not None and explicit != snap.sequence_number else None)
        groups.setdefault((c.file.spec_id, content_of(c.file)), []).append(ManifestEntry(
            status=EntryStatus.ADDED, snapshot_id=inherited,
            data_sequence_number=data_seq, file_sequence_number=None if not v1 else 0,
            data_file=c.file))
    return groups


# ---------------------------------------------------------------- planning a snapshot's manifests


@attrs.frozen(kw_only=True)
class ManifestWrite:
    """A manifest to write: its path, bytes, and its manifest-list record."""

    path: str
    data: bytes
    record: ManifestFile


class Renderer:
    """Renders one table's files for one commit; pure apart from reading manifests it merges.

    :param read: reads a file this projection wrote before (for merging manifests)
    :param written: the entries of manifests written before, by path (kept between commits by the caller): a
        merge takes them instead of reading back the manifests it packs (a hundred small ones, and the last merged
        one, whose size grows with the table's history)
    :param changes_of: the files each snapshot changed, from the log: a merge rebuilds from them the entries of a
        manifest that holds one snapshot's new files when another process wrote it, instead of reading it back
    """

    def __init__(self, read: Callable[[str], bytes], written: WrittenEntries | None = None,
                 changes_of: ChangesOf | None = None) -> None:
        self._read = read
        self._pending: dict[str, bytes] = {}
        self._written = written if written is not None else WrittenEntries()
        self._changes_of = changes_of

    def read(self, path: str) -> bytes:
        """A manifest rendered in this commit (not yet written, perhaps never) or one published before."""
        pending = self._pending.get(path)
        return pending if pending is not None else self._read(path)

    def manifest(self, state: TableState, snap: Snapshot, ordinal: int, spec_id: int, content: ManifestContent,
                 entries: Sequence[ManifestEntry]) -> ManifestWrite:
        schema = state.schema_by_id(snap.schema_id)
        spec = state.spec_by_id(spec_id)
        ptype = spec.partition_type(schema)
        pfields = [(f.field_id, f.name, f.field_type) for f in ptype.fields]
        path = layout.manifest_file(state.location, snap.commit_id, snap.snapshot_id, ordinal)
        data = render_manifest(
            entries, format_version=state.format_version, content=content,
            schema_json=_schema_json_text(schema), schema_id=schema.schema_id,
            spec_id=spec_id, spec_fields_json=_spec_fields_json_text(spec),
            partition_fields=pfields, sync_marker=layout.sync_marker(path),
            snapshot_id_for_v1=snap.snapshot_id if state.format_version == 1 else None, codec=AVRO_CODEC)
        status_counts = {s: [0, 0] for s in EntryStatus}
        for e in entries:
            status_counts[e.status][0] += 1
            status_counts[e.status][1] += e.data_file.record_count
        seqs = [e.data_sequence_number if e.data_sequence_number is not None else snap.sequence_number
                for e in entries if e.status != EntryStatus.DELETED]
        record = ManifestFile(
            manifest_path=path, manifest_length=len(data), partition_spec_id=spec_id, content=content,
            sequence_number=snap.sequence_number, min_sequence_number=min(seqs, default=snap.sequence_number),
            added_snapshot_id=snap.snapshot_id,
            added_files_count=status_counts[EntryStatus.ADDED][0],
            existing_files_count=status_counts[EntryStatus.EXISTING][0],
            deleted_files_count=status_counts[EntryStatus.DELETED][0],
            added_rows_count=status_counts[EntryStatus.ADDED][1],
            existing_rows_count=status_counts[EntryStatus.EXISTING][1],
            deleted_rows_count=status_counts[EntryStatus.DELETED][1],
            partitions=partition_summaries(pfields, entries), first_row_id=_first_row_id(state, content, entries))
        self._pending[path] = data
        return ManifestWrite(path=path, data=data, record=record)

    def entries_of(self, m: ManifestFile, state: TableState) -> list[ManifestEntry]:
        """The entries of a manifest this projection wrote, with inherited values made explicit.

        :param state: the table as of the commit being rendered (its log names the snapshot that wrote ``m``)
        """
        entries = self._written.get(m)
        if entries is None:
            entries = self._new_file_entries(m, state)
        if entries is None:
            try:
                _, entries = read_manifest(self.read(m.manifest_path), m.manifest_path)
            except (FileNotFoundError, FileNotFound) as missing:
                raise CorruptFileError(f"Cannot merge manifests: {m.manifest_path} is missing",
                                       path=m.manifest_path) from missing
        out = []
        for e in entries:
            inherit = inherits_sequence_numbers(e, m)
            if e.snapshot_id is not None and (not inherit or (e.data_sequence_number is not None and
                                                              e.file_sequence_number is not None)):
                out.append(e)  # nothing inherited (a merged manifest's entries): the entry as it is
                continue
            out.append(attrs.evolve(
                e,
                snapshot_id=e.snapshot_id if e.snapshot_id is not None else m.added_snapshot_id,
                data_sequence_number=e.data_sequence_number if e.data_sequence_number is not None or not inherit
                else m.sequence_number,
                file_sequence_number=e.file_sequence_number if e.file_sequence_number is not None or not inherit
                else m.sequence_number))
        return out

    def _new_file_entries(self, m: ManifestFile, state: TableState) -> list[ManifestEntry] | None:
        """The entries of ``m`` rebuilt from the log when it is a manifest of one snapshot's new files, as rendering
        it gave (the same entries :class:`WrittenEntries` keeps for the manifests this renderer wrote); None for
        any other manifest, which is read back. Only for a snapshot committed at format v2 or later (a v1
        manifest holds no sequence numbers: it is read back, as it is not kept), and only while the table's schema
        is the snapshot's (the log decodes partitions with the current one)."""
        if self._changes_of is None or state.format_version == 1 or m.existing_files_count or \
                m.deleted_files_count or m.added_snapshot_id is None:
            return None
        snap = state.snapshot_by_id(m.added_snapshot_id)
        if snap is None or snap.sequence_number < 1 or snap.schema_id != state.current_schema_id:
            return None
        named = layout.manifest_file(state.location, snap.commit_id, snap.snapshot_id, 0)
        if m.manifest_path.rpartition("-m")[0] != named.rpartition("-m")[0]:
            return None  # not named by the snapshot's commit (a REST client's manifest, an imported one): no lookup
        changes = self._changes_of(state, snap)
        _, relabelled = _removed_and_relabelled(changes)
        groups = _added_groups(state, snap, changes, relabelled)
        for ordinal, (key, entries) in enumerate(sorted(groups.items())):
            if key == (m.partition_spec_id, m.content) and len(entries) == m.added_files_count and \
                    layout.manifest_file(state.location, snap.commit_id, snap.snapshot_id, ordinal) == m.manifest_path:
                return entries
        return None

    def snapshot_manifests(self, state: TableState, snap: Snapshot, parent: Sequence[ManifestFile],
                           changes: Sequence[FileChange]) -> tuple[list[ManifestWrite], list[ManifestFile]]:
        """Manifests to write for ``snap`` and its full manifest list.

        New manifests hold the added files; a parent manifest holding a removed file is rewritten (removed
        entries DELETED, other live entries EXISTING, older DELETED entries dropped); a manifest left without
        live files leaves the list unless this snapshot wrote it; then small manifests merge as Java's merge
        append does. Order: new manifests first, then the parent's, rewritten in place.
        """
        if snap.operation == "replace" and not changes:
            # a manifest rewrite (engine.operations.rewrite.rewrite_manifests): the parent's live manifests pack
            # into as few as the target size allows, whatever the minimum merge count
            self._pending.clear()
            live = [m for m in parent if m.added_files_count or m.existing_files_count]
            return self.merge(state, snap, live, [], 0, min_count=1)
        v1 = state.format_version == 1
        removed, relabelled = _removed_and_relabelled(changes)
        groups = _added_groups(state, snap, changes, relabelled)
        self._pending.clear()
        writes: list[ManifestWrite] = []
        ordinal = 0
        for (spec_id, content), entries in sorted(groups.items()):
            writes.append(self.manifest(state, snap, ordinal, spec_id, content, entries))
            if not v1:  # v1 manifests write no sequence numbers: reading gives None, not the 0 written here
                self._written.put(writes[-1].record, entries)
            ordinal += 1
        kept_parent, rewrites, ordinal = self.remove_files(state, snap, parent, removed, ordinal, relabelled)
        writes += rewrites
        manifests = [w.record for w in writes[:len(groups)]] + kept_parent
        manifests = [m for m in manifests
                     if m.added_files_count or m.existing_files_count or m.added_snapshot_id == snap.snapshot_id]
        if state.bool_property("commit.manifest-merge.enabled", MERGE_ENABLED_DEFAULT):
            merged_writes, manifests = self.merge(state, snap, manifests, [w.record for w in writes], ordinal)
            writes += merged_writes
        kept = {m.manifest_path for m in manifests}
        return [w for w in writes if w.record.manifest_path in kept], manifests

    def remove_files(self, state: TableState, snap: Snapshot, parent: Sequence[ManifestFile],
                     removed: Mapping[str, DataFile], ordinal: int, relabelled: Mapping[str, DataFile] | None = None
                     ) -> tuple[list[ManifestFile], list[ManifestWrite], int]:
        """The parent's manifests with every manifest that holds a removed or relabelled file rewritten (a
        relabelled file keeps its entry with its new metadata); returns the new list, the rewritten manifests to
        write, and the next manifest ordinal."""
        relabelled = relabelled or {}
        if not removed and not relabelled:
            return list(parent), [], ordinal
        wanted = {(f.spec_id, content_of(f)) for f in (*removed.values(), *relabelled.values())}
        found: set[str] = set()
        out: list[ManifestFile] = []
        writes: list[ManifestWrite] = []
        for m in parent:
            if (m.partition_spec_id, m.content) not in wanted or not (m.added_files_count or m.existing_files_count):
                out.append(m)
                continue
            live = [e for e in self.entries_of(m, state) if e.status != EntryStatus.DELETED]
            hits = [e for e in live if e.data_file.key in removed or e.data_file.key in relabelled]
            if not hits:
                out.append(m)
                continue
            entries = [attrs.evolve(e, status=EntryStatus.DELETED, snapshot_id=snap.snapshot_id)
                       if e.data_file.key in removed else
                       attrs.evolve(e, status=EntryStatus.EXISTING,
                                    data_file=relabelled.get(e.data_file.key, e.data_file))
                       for e in live]
            w = self.manifest(state, snap, ordinal, m.partition_spec_id, m.content, entries)
            ordinal += 1
            writes.append(w)
            out.append(w.record)
            found.update(e.data_file.key for e in hits)
        missing = sorted((set(removed) | set(relabelled)) - found)
        if missing:
            raise IntegrityError(f"Cannot project snapshot {snap.snapshot_id}: removed file(s) {missing[:3]} are "
                                 f"in no manifest of its parent")
        return out, writes, ordinal

    def merge(self, state: TableState, snap: Snapshot, manifests: list[ManifestFile], new: list[ManifestFile],
              ordinal: int, min_count: int | None = None) -> tuple[list[ManifestWrite], list[ManifestFile]]:
        """Java's merge append: per (spec, content), pack manifests from the oldest into bins of the target
        size; a bin holding the newest manifest merges only once it reaches the minimum count."""
        if min_count is None:
            min_count = state.int_property("commit.manifest.min-count-to-merge", MIN_COUNT_TO_MERGE_DEFAULT)
        target = state.int_property("commit.manifest.target-size-bytes", TARGET_MANIFEST_SIZE_DEFAULT)
        groups: dict[tuple[int, int], list[ManifestFile]] = {}
        for m in manifests:
            groups.setdefault((int(m.content), m.partition_spec_id), []).append(m)
        writes: list[ManifestWrite] = []
        out: list[ManifestFile] = []
        for (content, spec_id), group in groups.items():
            first = group[0]
            for bin_ in pack_end(group, target):
                if len(bin_) == 1 or (first in bin_ and len(bin_) < min_count):
                    out.extend(bin_)
                    continue
                entries: list[ManifestEntry] = []
                for m in bin_:
                    for e in self.entries_of(m, state):
                        if e.status == EntryStatus.DELETED:
                            if e.snapshot_id == snap.snapshot_id:
                                entries.append(e)
                        elif e.status == EntryStatus.ADDED and e.snapshot_id == snap.snapshot_id:
                            v2 = state.format_version > 1
                            keep_seq = v2 and e.data_sequence_number not in (None, snap.sequence_number)
                            entries.append(attrs.evolve(e, snapshot_id=None if v2 else snap.snapshot_id,
                                                        data_sequence_number=e.data_sequence_number if keep_seq
                                                        else None if v2 else 0,
                                                        file_sequence_number=None if state.format_version > 1
                                                        else 0))
                        else:
                            entries.append(e if e.status == EntryStatus.EXISTING else
                                           attrs.evolve(e, status=EntryStatus.EXISTING))
                w = self.manifest(state, snap, ordinal, spec_id, ManifestContent(content), entries)
                self._written.forget(bin_)  # packed into w: the next merge takes w instead
                if state.format_version > 1:  # v1 manifests write no sequence numbers: reading gives None, not 0
                    self._written.put(w.record, entries)
                ordinal += 1
                writes.append(w)
                out.append(w.record)
        return writes, out


class WrittenEntries:
    """The entries of the manifests a renderer wrote (each commit's new manifests and the merged ones), by path and
    length, as reading them back would give: a merged manifest's entries were read from manifests before, and a
    new manifest's are the files the log holds, which a manifest stores and reads back unchanged (the tests read
    every kept manifest back to check it). The oldest go first beyond :data:`WRITTEN_ENTRIES_KEPT` entries in all,
    and the manifests a merge packs as soon as it has."""

    def __init__(self) -> None:
        self._kept: OrderedDict[tuple[str, int], list[ManifestEntry]] = OrderedDict()
        self._count = 0  # entries kept
        self._lock = threading.Lock()

    def get(self, m: ManifestFile) -> list[ManifestEntry] | None:
        with self._lock:
            return self._kept.get((m.manifest_path, m.manifest_length))

    def put(self, m: ManifestFile, entries: list[ManifestEntry]) -> None:
        if len(entries) > WRITTEN_ENTRIES_KEPT:
            return
        key = (m.manifest_path, m.manifest_length)
        with self._lock:
            self._count += len(entries) - len(self._kept.pop(key, ()))
            self._kept[key] = entries
            while self._count > WRITTEN_ENTRIES_KEPT:
                self._count -= len(self._kept.popitem(last=False)[1])

    def forget(self, manifests: Iterable[ManifestFile]) -> None:
        with self._lock:
            for m in manifests:
                self._count -= len(self._kept.pop((m.manifest_path, m.manifest_length), ()))


#: the JSON text of recent schemas and specs, for each very object (by identity: equal schemas may still differ in
#: their JSON, as a default of 0.0 and one of -0.0 do)
_JSON_TEXTS: KeptForObjects[str] = KeptForObjects(64)


def _schema_json_text(schema: Schema) -> str:
    """A schema's JSON as a manifest's ``schema`` metadata holds it (the same schema is written every commit)."""
    return _JSON_TEXTS.get_or_make(schema, lambda: json.dumps(schema.to_json(), separators=(",", ":")))


def _spec_fields_json_text(spec: PartitionSpec) -> str:
    """A spec's fields as JSON, as a manifest's ``partition-spec`` metadata holds them."""
    return _JSON_TEXTS.get_or_make(spec, lambda: json.dumps(spec.to_json()["fields"], separators=(",", ":")))


def _first_row_id(state: TableState, content: ManifestContent, entries: Sequence[ManifestEntry]) -> int | None:
    """A v3 data manifest's ``first_row_id``: icelog writes every data file's own first row id, so the manifest's
    is the lowest of them (no entry inherits from it); None for delete manifests and before v3."""
    if state.format_version < 3 or content != ManifestContent.DATA:
        return None
    return min((e.data_file.first_row_id for e in entries
                if e.status != EntryStatus.DELETED and e.data_file.first_row_id is not None), default=None)


def pack_end(items: list[ManifestFile], target: int) -> list[list[ManifestFile]]:
    """Greedy bins of at most ``target`` bytes filled from the end of ``items`` (oldest first), one open bin at a
    time; bins and their contents come back in the original order."""
    bins: list[list[ManifestFile]] = []
    current: list[ManifestFile] = []
    weight = 0
    for m in reversed(items):
        if current and weight + m.manifest_length > target:
            bins.append(current)
            current, weight = [], 0
        current.append(m)
        weight += m.manifest_length
    if current:
        bins.append(current)
    return [list(reversed(b)) for b in reversed(bins)]


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
                changes_of: ChangesOf, progress: Callable[[int, int], None] | None = None) -> str | None:
        """Write the files of each commit state in ``states`` (oldest first), then move the hint and the pointer.

        Returns the newest metadata location, or None when there was nothing to publish.

        :param progress: called with (snapshots written, snapshots to write) as their files are written
        """
        if not states:
            return None
        renderer = Renderer(self.io.read_bytes, self._written, changes_of)
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
            if self.published_version(newest.table_uuid) >= newest.version:
                return location  # another process got here first with the same (or a newer) version
            self.io.write_bytes(layout.version_hint_file(newest.location),
                                str(newest.metadata_number()).encode("ascii"))
            rows = derived.query(
                "SELECT metadata_location FROM iceberg_tables WHERE catalog_name = ? AND table_namespace = ? "
                "AND table_name = ?", [self.catalog_name, ns, name])
            derived.upsert("iceberg_tables", ("catalog_name", "table_namespace", "table_name"),
                           {"catalog_name": self.catalog_name, "table_namespace": ns, "table_name": name,
                            "metadata_location": location,
                            "previous_metadata_location": rows[0][0] if rows else None})
            derived.upsert(self.STATUS, ("table_uuid",), {"table_uuid": newest.table_uuid,
                                                          "version": newest.version, "metadata_location": location})
        return location

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

    def publish_rename(self, namespace: tuple[str, ...], name: str, new_namespace: tuple[str, ...],
                       new_name: str) -> None:
        """Move a table's ``iceberg_tables`` pointer row to its new name."""
        self.log.derived.execute(
            "UPDATE iceberg_tables SET table_namespace = ?, table_name = ? WHERE catalog_name = ? AND "
            "table_namespace = ? AND table_name = ?",
            [".".join(new_namespace), new_name, self.catalog_name, ".".join(namespace), name])

    def publish_drop(self, namespace: tuple[str, ...], name: str, table_uuid: str) -> None:
        """Remove a dropped table's pointer row and projection status."""
        derived = self.log.derived
        with derived.transaction():
            derived.execute("DELETE FROM iceberg_tables WHERE catalog_name = ? AND table_namespace = ? AND "
                            "table_name = ?", [self.catalog_name, ".".join(namespace), name])
            derived.execute(f"DELETE FROM {self.STATUS} WHERE table_uuid = ?", [table_uuid])

    def publish_namespace(self, namespace: tuple[str, ...], properties: Mapping[str, str]) -> None:
        ns = ".".join(namespace)
        rows = [("exists", "true")] + sorted(properties.items())
        derived = self.log.derived
        with derived.transaction():
            for key, value in rows:
                derived.upsert("iceberg_namespace_properties", ("catalog_name", "namespace", "property_key"),
                               {"catalog_name": self.catalog_name, "namespace": ns, "property_key": key,
                                "property_value": value})

    def unpublish_namespace(self, namespace: tuple[str, ...], keys: Sequence[str] | None = None) -> None:
        """Remove a namespace's ``iceberg_namespace_properties`` rows: ``keys`` only, or all (a dropped namespace)."""
        ns = ".".join(namespace)
        derived = self.log.derived
        with derived.transaction():
            if keys is None:
                derived.execute("DELETE FROM iceberg_namespace_properties WHERE catalog_name = ? AND "
                                "namespace = ?", [self.catalog_name, ns])
            for k in keys or ():
                derived.execute("DELETE FROM iceberg_namespace_properties WHERE catalog_name = ? AND "
                                "namespace = ? AND property_key = ?", [self.catalog_name, ns, k])


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
            if found is None and not _in_log(state, snap.parent_snapshot_id):
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


def _in_log(state: TableState, snapshot_id: int) -> bool:
    """Whether the table's log holds the snapshot (live or expired since)."""
    return any(s.snapshot_id == snapshot_id for s in state.snapshots) or \
        any(s.snapshot_id == snapshot_id for s in state.expired_snapshots)


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
