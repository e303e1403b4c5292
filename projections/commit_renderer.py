"""Render the manifests of one commit's snapshots: new manifests, rewrites of the parent's, Java's merge append.

Layer: projections (pure renderers; reads back only manifests it merges or rewrites, through the function it is
given). A snapshot's manifests are planned from the files the log says it changed and its parent's manifest list:
the files it added go into new manifests, a parent manifest holding a removed file is rewritten, and small
manifests merge as Java's ``MergingSnapshotProducer`` merges them. Merging takes the entries of the manifests it
wrote from memory (:class:`WrittenEntries`), rebuilds those of another process's manifests of new files from the
log, carries another process's merged manifests over as record bytes (:mod:`projections.carried_manifests`), and
reads back only the rest (rewritten manifests, those of snapshots committed at format v1 or under an older schema
or format version). :mod:`projections.projector` writes what it renders.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from typing import Any, Callable, Iterable, Mapping, Sequence

import attrs

from engine.errors import CorruptFileError, IntegrityError
from engine.model.data_file import (
    DataFile,
    DataFileContent,
    EntryStatus,
    ManifestContent,
    ManifestEntry,
    ManifestFile,
)
from engine.model.kept_values import KeptForObjects
from engine.model.partitioning import PartitionSpec
from engine.model.schema import Schema
from engine.state.events import FileChange
from engine.state.table_state import Snapshot, TableState
from projections import layout
from projections.carried_manifests import carried_records, split_records
from projections.manifest_reader import inherits_sequence_numbers, read_manifest
from projections.manifests import (
    combine_partition_summaries,
    encode_manifest_entries,
    manifest_entry_schema_text,
    partition_summaries,
    render_manifest_records,
)
from storage.errors import FileNotFound

MERGE_ENABLED_DEFAULT = True
MIN_COUNT_TO_MERGE_DEFAULT = 100
#: how many entries of the manifests it wrote a projector keeps for its next merges (about 1 KB each)
WRITTEN_ENTRIES_KEPT = 200_000
TARGET_MANIFEST_SIZE_DEFAULT = 8 * 1024 * 1024
# Uncompressed Avro: deflate's bytes depend on the zlib build, and a rebuild must be identical on any machine.
AVRO_CODEC = "null"

ChangesOf = Callable[[TableState, Snapshot], Sequence[FileChange]]
#: ``lengths(table_uuid, manifest_path)``: the record lengths of a merged manifest written before, or None
RecordLengthsOf = Callable[[str, str], list[int] | None]


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


@attrs.frozen
class CarriedManifest:
    """A manifest whose entries a merge carries over as record bytes (see :mod:`projections.carried_manifests`)."""

    manifest: ManifestFile
    records: list[bytes]


def _partition_fields(state: TableState, snap: Snapshot, spec_id: int) -> list[tuple[int, str, Any]]:
    """The partition fields of ``spec_id`` as a manifest of ``snap`` writes them: (field id, name, result type)."""
    ptype = state.partition_type_of(state.spec_by_id(spec_id), state.schema_by_id(snap.schema_id))
    return [(f.field_id, f.name, f.field_type) for f in ptype.fields]


class Renderer:
    """Renders one table's files for one commit; pure apart from reading manifests it merges.

    :param read: reads a file this projection wrote before (for merging manifests)
    :param written: the entries of manifests written before, by path (kept between commits by the caller): a
        merge takes them instead of reading back the manifests it packs (a hundred small ones, and the last merged
        one, whose size grows with the table's history)
    :param changes_of: the files each snapshot changed, from the log: a merge rebuilds from them the entries of a
        manifest that holds one snapshot's new files when another process wrote it, instead of reading it back
    :param lengths: ``lengths(table_uuid, path)``: the record lengths of a merged manifest written before (see
        :mod:`projections.carried_manifests`), so a merge carries its entries over as bytes when ``written`` does not
        hold them
    """

    def __init__(self, read: Callable[[str], bytes], written: WrittenEntries | None = None,
                 changes_of: ChangesOf | None = None, lengths: RecordLengthsOf | None = None) -> None:
        self._read = read
        self._pending: dict[str, bytes] = {}
        self._written = written if written is not None else WrittenEntries()
        self._changes_of = changes_of
        self._lengths = lengths
        #: the record lengths of the merged manifests rendered (and not packed into a newer one since), by path
        self.merged_lengths: dict[str, list[int]] = {}

    def read(self, path: str) -> bytes:
        """A manifest rendered in this commit (not yet written, perhaps never) or one published before."""
        pending = self._pending.get(path)
        return pending if pending is not None else self._read(path)

    def manifest(self, state: TableState, snap: Snapshot, ordinal: int, spec_id: int, content: ManifestContent,
                 entries: Sequence[ManifestEntry]) -> ManifestWrite:
        return self._render(state, snap, ordinal, spec_id, content, [entries])

    def _render(self, state: TableState, snap: Snapshot, ordinal: int, spec_id: int, content: ManifestContent,
                segments: Sequence[Sequence[ManifestEntry] | CarriedManifest], *,
                keep_lengths: bool = False) -> ManifestWrite:
        """A manifest of ``segments`` in order: entries, or the records of a manifest carried over as bytes."""
        pfields = _partition_fields(state, snap, spec_id)
        schema = state.schema_by_id(snap.schema_id)
        path = layout.manifest_file(state.location, snap.commit_id, snap.snapshot_id, ordinal)
        v1_snapshot_id = snap.snapshot_id if state.format_version == 1 else None
        records: list[bytes] = []
        entries: list[ManifestEntry] = []
        carried: list[ManifestFile] = []
        for segment in segments:
            if isinstance(segment, CarriedManifest):
                records += segment.records
                carried.append(segment.manifest)
            else:
                records += encode_manifest_entries(segment, format_version=state.format_version, content=content,
                                                   spec_id=spec_id, partition_fields=pfields,
                                                   snapshot_id_for_v1=v1_snapshot_id)
                entries += segment
        data = render_manifest_records(
            records, format_version=state.format_version, content=content,
            schema_json=_schema_json_text(schema), schema_id=schema.schema_id,
            spec_id=spec_id, spec_fields_json=_spec_fields_json_text(state.spec_by_id(spec_id)),
            partition_fields=pfields, sync_marker=layout.sync_marker(path), codec=AVRO_CODEC)
        if keep_lengths:
            self.merged_lengths[path] = [len(r) for r in records]
        status_counts = {s: [0, 0] for s in EntryStatus}
        for e in entries:
            status_counts[e.status][0] += 1
            status_counts[e.status][1] += e.data_file.record_count
        seqs = [e.data_sequence_number if e.data_sequence_number is not None else snap.sequence_number
                for e in entries if e.status != EntryStatus.DELETED]
        partitions = partition_summaries(pfields, entries)
        first_row_id = _first_row_id(state, content, entries, carried)
        for m in carried:  # every entry of a carried manifest goes on EXISTING (see carried_records)
            status_counts[EntryStatus.EXISTING][0] += m.added_files_count + m.existing_files_count
            status_counts[EntryStatus.EXISTING][1] += m.added_rows_count + m.existing_rows_count
            seqs.append(m.min_sequence_number)
            partitions = combine_partition_summaries(pfields, partitions, m.partitions or ())
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
            partitions=partitions, first_row_id=first_row_id)
        self._pending[path] = data
        return ManifestWrite(path=path, data=data, record=record)

    def _carried(self, state: TableState, snap: Snapshot, m: ManifestFile, spec_id: int) -> CarriedManifest | None:
        """``m``'s entries for a merge by ``snap`` as record bytes, taken from its file by their kept lengths (see
        :mod:`projections.carried_manifests`); None when they are to be had as entries: kept by ``written``, or
        ``m`` is not a merged manifest of an earlier snapshot written with today's entry schema, without DELETED
        entries."""
        # a merged manifest holds EXISTING entries; one of new files only is rebuilt from the log (entries_of)
        if state.format_version == 1 or not m.existing_files_count or m.deleted_files_count or \
                m.added_snapshot_id == snap.snapshot_id or self._written.get(m) is not None:
            return None
        lengths = self.merged_lengths.get(m.manifest_path)
        if lengths is None and self._lengths is not None:
            lengths = self._lengths(state.table_uuid, m.manifest_path)
        pfields = _partition_fields(state, snap, spec_id)
        if lengths is None or len(lengths) != m.added_files_count + m.existing_files_count or \
                len(m.partitions or ()) != len(pfields):
            return None
        try:
            data = self.read(m.manifest_path)
        except (FileNotFoundError, FileNotFound):
            return None  # decoding it says what is missing
        if len(data) != m.manifest_length:
            return None
        records = split_records(data, lengths, manifest_entry_schema_text(state.format_version, pfields))
        records = None if records is None else carried_records(records, m, snap.snapshot_id)
        return None if records is None else CarriedManifest(manifest=m, records=records)

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
                segments: list[list[ManifestEntry] | CarriedManifest] = []
                for m in bin_:
                    carried = self._carried(state, snap, m, spec_id)
                    if carried is not None:
                        segments.append(carried)
                        continue
                    segment: list[ManifestEntry] = []
                    for e in self.entries_of(m, state):
                        if e.status == EntryStatus.DELETED:
                            if e.snapshot_id == snap.snapshot_id:
                                segment.append(e)
                        elif e.status == EntryStatus.ADDED and e.snapshot_id == snap.snapshot_id:
                            v2 = state.format_version > 1
                            keep_seq = v2 and e.data_sequence_number not in (None, snap.sequence_number)
                            segment.append(attrs.evolve(e, snapshot_id=None if v2 else snap.snapshot_id,
                                                        data_sequence_number=e.data_sequence_number if keep_seq
                                                        else None if v2 else 0,
                                                        file_sequence_number=None if state.format_version > 1
                                                        else 0))
                        else:
                            segment.append(e if e.status == EntryStatus.EXISTING else
                                           attrs.evolve(e, status=EntryStatus.EXISTING))
                    segments.append(segment)
                    entries += segment
                w = self._render(state, snap, ordinal, spec_id, ManifestContent(content), segments,
                                 keep_lengths=True)
                self._written.forget(bin_)  # packed into w: the next merge takes w instead
                for m in bin_:
                    self.merged_lengths.pop(m.manifest_path, None)
                # v1 manifests write no sequence numbers (reading gives None, not 0); carried entries are not at hand
                if state.format_version > 1 and not any(isinstance(s, CarriedManifest) for s in segments):
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


def _first_row_id(state: TableState, content: ManifestContent, entries: Sequence[ManifestEntry],
                  carried: Sequence[ManifestFile]) -> int | None:
    """A v3 data manifest's ``first_row_id``: icelog writes every data file's own first row id, so the manifest's
    is the lowest of them and of the manifests it carries (no entry inherits from it); None for delete manifests and
    before v3. A manifest with a live file from before the upgrade (no id: a branch or rollback onto an old snapshot)
    gets none either, or readers would give that file's rows the ids of others."""
    if state.format_version < 3 or content != ManifestContent.DATA:
        return None
    ids = [e.data_file.first_row_id for e in entries if e.status != EntryStatus.DELETED]
    ids += [m.first_row_id for m in carried]
    return None if None in ids else min(ids, default=None)  # type: ignore[type-var]


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
