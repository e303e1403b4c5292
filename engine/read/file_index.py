"""An indexed file table: the live data and delete files of any snapshot, without decoding the log again.

Layer: engine (reads file blocks, engine.read.file_blocks, and falls back to the storage log's bulk parts). Derived
and rebuildable: it holds nothing the log does not, and dropping it only makes the next plan slower.

A snapshot's file changes (the bulk parts of its ``add-snapshot`` event) never change once written. Each is
read as the commit's *file block* (engine.read.file_blocks: written at commit time, rebuilt from the parts when
missing or damaged), decoded once and kept per log position, each added file wrapped in a :class:`FileItem`.
The live set of a snapshot is its parent's live set minus the files it removed plus the files it added; the
live sets of the last few snapshots planned are kept, so planning the snapshot after a commit applies that
commit's changes alone, and a snapshot in the middle of the history replays decoded changes from the nearest
cached ancestor.

A cold filtered plan need not decode every commit: :meth:`FileIndex.pruned_items` reads the block heads
(partition summaries per commit), decodes only the commits whose summaries might match, and builds items only
for files whose partition might match; it counts the rest. It answers only when the result is provably the same
as the full live set filtered (every added path in the history distinct, removals resolved), else the caller
plans from the full live set.

Decoding is lazy: the full :class:`DataFile` is built only when asked for (``FileItem.file``), so a plan that
partition pruning narrows to a few files builds only those. A file with an explicit data sequence number in its
part (``"data-sequence-number"``: compaction, imported entries) keeps it; the others take their snapshot's.

A snapshot staged in a transaction (``Snapshot.staged_changes``) is not in the log: its changes come from the
snapshot itself, no live set of it is kept (its id may land later on another parent), and a plan of it takes
the full replay.

One index belongs to one state store (``FileIndex.of(store)``); it is an explicit cache object, never
module state.
"""

from __future__ import annotations

import contextlib
import gc
import sqlite3
import zlib
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping, Sequence
from types import MappingProxyType
from typing import Any

import attrs
import pyarrow as pa
import pyarrow.compute as pc

from engine.errors import ValidationError
from engine.read.file_blocks import (
    BlockBody,
    BlockError,
    BlockHead,
    BlockTable,
    decode_body,
    decode_head,
    encode_block,
    OFFSET_COLUMN,
    encode_changes,
    path_digest,
)
from engine.model.data_file import DataFile, DataFileContent, FieldSummary, LiveEntry, blob_key
from engine.model.types import StructType
from engine.model.values import value_from_json
from engine.state.table_state import Snapshot, TableState
from storage import LogError

#: Files kept across snapshots before the least recently used snapshots' changes are dropped.
MAX_CACHED_FILES = 500_000
#: Live sets (one per snapshot) kept for incremental planning.
MAX_LIVE_SETS = 4
_MISSING = object()
_DATA = DataFileContent.DATA
_CONTENT = tuple(DataFileContent(i) for i in range(max(DataFileContent) + 1))
if tuple(a.name for a in attrs.fields(DataFile)) != (
        "file_path", "file_format", "spec_id", "partition", "record_count", "file_size_in_bytes", "content",
        "column_sizes", "value_counts", "null_value_counts", "nan_value_counts", "lower_bounds", "upper_bounds",
        "split_offsets", "equality_ids", "sort_order_id", "key_metadata", "first_row_id", "referenced_data_file",
        "content_offset", "content_size_in_bytes"):  # pragma: no cover - model guard
    raise ImportError("engine.read.file_index: DataFile's fields changed; update _data_file")


def _slot_setters(cls: type, names: str) -> tuple[Callable[[Any, Any], None], ...]:
    """The slot setters of a frozen attrs class, to build values whose fields are already converted."""
    return tuple(cls.__dict__[n].__set__ for n in names.split())


def _data_file(body: BlockBody, row: int, partition: tuple[Any, ...], _new: Any = object.__new__,
               _cls: type = DataFile, _content: tuple[DataFileContent, ...] = _CONTENT,
               _s: tuple[Callable[[Any, Any], None], ...] = _slot_setters(
                   DataFile, "file_path spec_id partition content file_format record_count file_size_in_bytes "
                             "column_sizes value_counts null_value_counts nan_value_counts lower_bounds upper_bounds "
                             "split_offsets equality_ids sort_order_id key_metadata first_row_id "
                             "referenced_data_file content_offset content_size_in_bytes")) -> DataFile:
    """The ``DataFile`` of a block row (its partition already decoded): slots set directly, since the block holds
    exactly what the constructor's converters would make of them."""
    f = _new(_cls)
    s0, s1, s2, s3, s4, s5, s6, s7, s8, s9, s10, s11, s12, s13, s14, s15, s16, s17, s18, s19, s20 = _s
    s0(f, body.paths[row])
    s1(f, body.spec_ids[row])
    s2(f, partition)
    s3(f, _content[body.contents[row]])
    r = body.rest
    s4(f, r[0][row])
    s5(f, r[1][row])
    s6(f, r[2][row])
    s7(f, r[3][row])
    s8(f, r[4][row])
    s9(f, r[5][row])
    s10(f, r[6][row])
    s11(f, r[7][row])
    s12(f, r[8][row])
    s13(f, r[9][row])
    s14(f, r[10][row])
    s15(f, r[11][row])
    s16(f, r[12][row])
    s17(f, r[13][row])
    s18(f, r[14][row])
    s19(f, r[15][row])
    s20(f, r[16][row])
    return f


class FileItem:
    """One file a snapshot added: what planning needs up front, and the full entry on demand.

    :param path: the file's key among a snapshot's files (``DataFile.key``: its path, or a deletion vector's
        Puffin path and offset)
    :param data_sequence_number: the file's data sequence number (its own when the log gave one explicitly,
        else its snapshot's)
    """

    __slots__ = ("_body", "_entry", "_file", "_row", "content", "data_sequence_number", "partition", "path",
                 "snap", "spec_id")

    def __init__(self, path: str, content: DataFileContent, spec_id: int, partition: tuple[Any, ...],
                 data_sequence_number: int, snap: Snapshot, body: BlockBody | None, row: int) -> None:
        self.path = path
        self.content = content
        self.spec_id = spec_id
        self.partition = partition
        self.data_sequence_number = data_sequence_number
        self.snap = snap
        self._body: BlockBody | None = body
        self._row = row
        self._file: DataFile | None = None
        self._entry: LiveEntry | None = None

    @classmethod
    def staged(cls, change: Any, snap: Snapshot) -> FileItem:
        """The item of a file added by a snapshot staged in a transaction (not in the log: never cached)."""
        f = change.file
        seq = snap.sequence_number if change.data_sequence_number is None else change.data_sequence_number
        item = cls(f.key, f.content, f.spec_id, f.partition, seq, snap, None, -1)
        item._file = f
        return item

    def file(self) -> DataFile:
        """The file's :class:`DataFile` (built on first use)."""
        f = self._file
        if f is None:
            assert self._body is not None
            f = self._file = _data_file(self._body, self._row, self.partition)
            self._body = None
        return f

    def entry(self) -> LiveEntry:
        """The :class:`engine.model.data_file.LiveEntry` of the file (built on first use)."""
        if self._entry is None:
            snap = self.snap
            self._entry = LiveEntry(file=self.file(), data_sequence_number=self.data_sequence_number,
                                    file_sequence_number=snap.sequence_number, snapshot_id=snap.snapshot_id)
        return self._entry


@attrs.frozen
class Changes:
    """A snapshot's file changes: the paths it removed and the files it added (in the log's order)."""

    removed: tuple[str, ...]
    added: tuple[FileItem, ...]


@attrs.frozen(kw_only=True)
class PrunedFiles:
    """What :meth:`FileIndex.pruned_items` found: the items a filtered plan must look at, and the count of live data
    files it skipped without building items.

    :param items: live delete files, and live data files whose partition might match, oldest first
    :param data_files: live data files in the snapshot (kept and skipped)
    :param skipped_data_files: live data files ruled out by their commit's partition summaries or their partition
    :param skipped_commits: commits whose files were not decoded at all
    """

    items: list[FileItem]
    data_files: int
    skipped_data_files: int
    skipped_commits: int


class FileIndex:
    """Decoded file changes per log position and live file sets per snapshot, for one catalog's log.

    ::

        index = FileIndex.of(store)
        entries = index.live_entries(state, snapshot_id)   # same answer as StateStore.live_entries

    :param log: the catalog's event log (``storage.Log``)
    """

    def __init__(self, log: Any) -> None:
        self.log = log
        self.blocks = BlockTable(log)
        self._heads: dict[int, BlockHead] = {}
        self._bodies: OrderedDict[int, BlockBody] = OrderedDict()
        self._changes: OrderedDict[tuple[int, int], Changes] = OrderedDict()
        self._cached_files = 0
        self._held_paths = 0  # the paths the kept bodies hold (kept as they come and go: trimming never counts)
        self._live: OrderedDict[tuple[str, int, int], dict[str, FileItem]] = OrderedDict()
        self._type_keys: dict[Hashable, int] = {}
        self._state_types: dict[int, tuple[TableState, dict[int, StructType], int]] = {}
        self._partitions: dict[tuple[int, int, tuple[Any, ...]], tuple[Any, ...]] = {}
        self._decoded: dict[tuple[int, int], tuple[BlockBody, list[tuple[Any, ...]]]] = {}
        #: per (types id, spec id), per partition field: JSON value -> decoded value
        self._value_maps: dict[tuple[int, int], list[dict[Any, Any]]] = {}
        #: counters, for tests and benchmarks: files decoded, blocks rebuilt from the log's parts
        self.decoded_parts = 0
        self.rebuilt_blocks = 0

    @classmethod
    def of(cls, store: Any) -> FileIndex:
        """The index a state store owns (``store.file_index``), created on first use."""
        index = getattr(store, "file_index", None)
        if index is None:
            index = cls(store.log)
            store.file_index = index
        return index

    def clear(self) -> None:
        self._partitions.clear()
        self._decoded.clear()
        self._value_maps.clear()
        self._heads.clear()
        self._bodies.clear()
        self._changes.clear()
        self._live.clear()
        self._cached_files = 0
        self._held_paths = 0

    # ------------------------------------------------------------ blocks
    def record_commit(self, positions: Sequence[int],
                      snapshots: Iterable[tuple[int, Sequence[Any], Mapping[int, StructType] | None]]) -> None:
        """Store the blocks of a commit's snapshot events ``(position, file changes, partition types)``, inside the
        commit's own transaction, each head saying whether its paths are new to the log (the path registry is
        kept only while every commit since the log began has been registered). A block that cannot be built is
        left out: readers rebuild it from the log (and report what is wrong)."""
        blocks = self.blocks
        try:
            with self.log.transaction():
                complete = bool(positions) and blocks.paths_through() == min(positions) - 1
                rows = []
                for position, changes, types in snapshots:
                    if types is None:  # cannot happen for an event the log took; then the registry is not kept
                        complete = False
                        continue
                    claim = (lambda digests, at=position: blocks.claim_paths(digests, at)) if complete else None
                    head, body = encode_changes(list(changes), types, claim)
                    rows.append((position, head, body))
                blocks.put_many(rows)
                if complete:
                    blocks.set_paths_through(max(positions))
        except (ValidationError, LogError, sqlite3.Error):
            pass

    def _rebuild(self, state: TableState, positions: list[int]) -> dict[int, tuple[bytes, bytes]]:
        """Blocks built from the log's parts (and stored again, when the log takes writes)."""
        if not positions:
            return {}
        types, _ = self._types(state)
        parts = self.log.read_parts_many(positions)
        built = {p: encode_block(parts.get(p, []), types) for p in positions}
        self.rebuilt_blocks += len(built)
        try:
            self.blocks.put_many((p, h, b) for p, (h, b) in built.items())
        except (LogError, sqlite3.Error):
            pass  # a read-only or busy log: the blocks are rebuilt again next time
        return built

    def _load_heads(self, state: TableState, positions: list[int]) -> dict[int, BlockHead]:
        heads = self._heads
        missing = [p for p in positions if p not in heads]
        if missing:
            stored = self.blocks.heads(missing)
            bad = []
            for p in missing:
                found = stored.get(p)
                try:
                    if found is None:
                        raise BlockError("missing")
                    heads[p] = decode_head(*found)
                except BlockError:
                    bad.append(p)
            for p, (h, b) in self._rebuild(state, bad).items():
                head = heads[p] = decode_head(h, zlib.crc32(h))
                self._keep_body(p, decode_body(b, zlib.crc32(b), head))
        return {p: heads[p] for p in positions}

    def _keep_body(self, position: int, body: BlockBody) -> None:
        old = self._bodies.get(position)
        if old is not None:
            self._held_paths -= len(old.paths)
        self._bodies[position] = body
        self._held_paths += len(body.paths)

    def _load_bodies(self, state: TableState, positions: list[int]) -> dict[int, tuple[BlockHead, BlockBody]]:
        bodies = self._bodies
        out: dict[int, tuple[BlockHead, BlockBody]] = {}
        missing = []
        for p in positions:
            body = bodies.get(p)
            if body is None or p not in self._heads:
                missing.append(p)
            else:
                bodies.move_to_end(p)
                out[p] = (self._heads[p], body)
        if missing:
            stored = self.blocks.blocks(missing)
            bad = []
            for p in missing:
                found = stored.get(p)
                try:
                    if found is None:
                        raise BlockError("missing")
                    head = decode_head(found[0], found[1])
                    out[p] = (head, decode_body(found[2], found[3], head))
                except BlockError:
                    bad.append(p)
            for p, (h, b) in self._rebuild(state, bad).items():
                head = decode_head(h, zlib.crc32(h))
                out[p] = (head, decode_body(b, zlib.crc32(b), head))
            for p in missing:
                self._heads[p] = out[p][0]
                self._keep_body(p, out[p][1])
            self._trim()
        return out

    def _trim(self) -> None:
        while self._cached_files > MAX_CACHED_FILES and len(self._changes) > 1:
            _, dropped = self._changes.popitem(last=False)
            self._cached_files -= len(dropped.added)
        if self._held_paths > MAX_CACHED_FILES:
            while self._held_paths > MAX_CACHED_FILES and len(self._bodies) > 1:
                _, dropped_body = self._bodies.popitem(last=False)
                self._held_paths -= len(dropped_body.paths)
            self._decoded = {k: v for k, v in self._decoded.items() if k[0] in self._bodies}

    # ------------------------------------------------------------ decoding
    def _types(self, state: TableState) -> tuple[dict[int, StructType], int]:
        """The partition struct per spec id the parts decode with, and a small id for that set of structs."""
        cached = self._state_types.get(id(state))
        if cached is not None and cached[0] is state:
            return cached[1], cached[2]
        types = {s.spec_id: state.partition_type_of(s) for s in state.specs}
        key = tuple(sorted(types.items(), key=lambda kv: kv[0]))
        type_id = self._type_keys.get(key)
        if type_id is None:
            type_id = self._type_keys[key] = len(self._type_keys)
        if len(self._state_types) > 64:
            self._state_types.clear()
        self._state_types[id(state)] = (state, types, type_id)
        return types, type_id

    def _partition(self, types: dict[int, StructType], type_id: int, spec_id: int, raw: tuple[Any, ...]
                   ) -> tuple[Any, ...]:
        """A partition tuple from a block's JSON values (floats as ``("f", text)``), decoded once and shared."""
        key = (type_id, spec_id, raw)
        partition = self._partitions.get(key)
        if partition is None:
            try:
                fields = types[spec_id].fields
            except KeyError as e:
                raise ValidationError(f"Cannot decode file change: no partition spec {spec_id}") from e
            maps = self._value_maps.setdefault((type_id, spec_id), [{None: None} for _ in fields])
            if len(raw) != len(fields):
                raise ValidationError(f"Cannot decode file change: partition {raw!r} does not fit spec {spec_id}")
            decoded = []
            for values, field, v in zip(maps, fields, raw):
                value = values.get(v, _MISSING)
                if value is _MISSING:
                    value = values[v] = value_from_json(field.field_type, float(v[1]) if type(v) is tuple else v)
                decoded.append(value)
            partition = self._partitions[key] = tuple(decoded)
        return partition

    def _block_partitions(self, position: int, body: BlockBody, types: dict[int, StructType], type_id: int
                          ) -> list[tuple[Any, ...]]:
        """The decoded partition tuple of each of a block's distinct (spec, partition) pairs."""
        found = self._decoded.get((position, type_id))
        if found is None or found[0] is not body:
            decoded = []
            known, decode, value_maps = self._partitions, self._partition, self._value_maps
            try:
                for spec_id, raw in body.partitions:
                    key = (type_id, spec_id, raw)
                    partition = known.get(key)
                    if partition is None:
                        maps = value_maps.get((type_id, spec_id))
                        try:  # every value seen before: decoded by lookups alone
                            if maps is None or len(maps) != len(raw):
                                raise KeyError(spec_id)
                            partition = known[key] = tuple(map(dict.__getitem__, maps, raw))
                        except KeyError:
                            partition = decode(types, type_id, spec_id, raw)
                    decoded.append(partition)
            except (TypeError, ValueError) as e:  # not (spec id, values) pairs: the block is not what we wrote
                raise ValidationError(f"Cannot decode the partitions of the file block at {position} ({e})") from e
            found = self._decoded[(position, type_id)] = (body, decoded)
        return found[1]

    def _items(self, snap: Snapshot, body: BlockBody, types: dict[int, StructType], type_id: int,
               rows: Iterable[int] | None = None) -> list[FileItem]:
        parts = self._block_partitions(snap.log_position, body, types, type_id)
        contents, spec_ids, keys, seqs = body.contents, body.spec_ids, body.partition_keys, body.sequence_numbers
        offsets = body.rest[OFFSET_COLUMN]
        paths = body.paths if all(o is None for o in offsets) else tuple(
            p if o is None else blob_key(p, o) for p, o in zip(body.paths, offsets))
        own = snap.sequence_number
        wanted = range(len(paths)) if rows is None else rows
        if seqs is None:
            items = [FileItem(paths[i], _CONTENT[contents[i]], spec_ids[i], parts[keys[i]], own, snap, body, i)
                     for i in wanted]
        else:
            items = [FileItem(paths[i], _CONTENT[contents[i]], spec_ids[i], parts[keys[i]],
                              own if seqs[i] is None else seqs[i], snap, body, i) for i in wanted]
        self.decoded_parts += len(items)
        return items

    def changes(self, state: TableState, snaps: list[Snapshot]) -> dict[int, Changes]:
        """The changes of each snapshot (by log position), decoding only the blocks not cached yet. Snapshots staged
        in a transaction are not in the log (they carry their changes; :meth:`live_items` reads them there)."""
        types, type_id = self._types(state)
        out: dict[int, Changes] = {}
        missing: list[Snapshot] = []
        for snap in snaps:
            if snap.staged_changes is not None:
                raise ValidationError(f"Cannot read file changes: snapshot {snap.snapshot_id} is staged, not logged")
            found = self._changes.get((snap.log_position, type_id))
            if found is None:
                missing.append(snap)
            else:
                self._changes.move_to_end((snap.log_position, type_id))
                out[snap.log_position] = found
        if missing:
            with collector_paused():
                blocks = self._load_bodies(state, [s.log_position for s in missing])
                for snap in missing:
                    head, body = blocks[snap.log_position]
                    changes = Changes(head.removed, tuple(self._items(snap, body, types, type_id)))
                    out[snap.log_position] = changes
                    self._changes[(snap.log_position, type_id)] = changes
                    self._cached_files += len(changes.added)
            self._trim()
        return out

    # ------------------------------------------------------------ live sets
    def live_items(self, state: TableState, snapshot_id: int | None) -> list[FileItem]:
        """The files live in a snapshot, oldest first, as :class:`FileItem` (entries decoded on demand): files
        its ancestry added minus those a later snapshot removed; a file a snapshot both removes and adds again
        is live with that snapshot's sequence numbers."""
        return list(self.live_set(state, snapshot_id).values())

    def live_files_by_key(self, state: TableState, snapshot_id: int | None) -> LiveFiles:
        """The files live in a snapshot by ``DataFile.key``, each decoded when it is looked up (:class:`LiveFiles`)."""
        return LiveFiles(self.live_set(state, snapshot_id))

    def live_set(self, state: TableState, snapshot_id: int | None) -> Mapping[str, FileItem]:
        """:meth:`live_items` by key, oldest first: a read-only view of the kept set, so asking costs nothing once
        the snapshot (or its parent) has been planned; for a snapshot staged in a transaction, a set of its own
        (never kept)."""
        if snapshot_id is None:
            return {}
        _, type_id = self._types(state)
        start: dict[str, FileItem] = {}
        todo: list[Snapshot] = []  # the ancestry down to the newest snapshot whose set is kept (walked only so far)
        for snap in state.iter_ancestors(snapshot_id, through_expired=True):
            if snap.staged_changes is None:  # (one staged in a transaction may land with other changes)
                cached = self._live.get((state.table_uuid, snap.snapshot_id, type_id))
                if cached is not None:
                    self._live.move_to_end((state.table_uuid, snap.snapshot_id, type_id))
                    if not todo:
                        return MappingProxyType(cached)
                    start = cached
                    break
            todo.append(snap)
        if not todo:
            return {}
        changes = self.changes(state, [s for s in todo if s.staged_changes is None])
        live = dict(start)
        for snap in reversed(todo):  # oldest first
            if snap.staged_changes is not None:
                snap_changes = Changes(tuple(c.file.key for c in snap.staged_changes if not c.added),
                                       tuple(FileItem.staged(c, snap) for c in snap.staged_changes if c.added))
            else:
                snap_changes = changes[snap.log_position]
            for path in snap_changes.removed:
                live.pop(path, None)
            for item in snap_changes.added:
                live.pop(item.path, None)
                live[item.path] = item
        if todo[0].staged_changes is not None:  # the snapshot itself is staged: its set is not kept
            return live
        self._live[(state.table_uuid, snapshot_id, type_id)] = live
        while len(self._live) > MAX_LIVE_SETS:
            self._live.popitem(last=False)
        return MappingProxyType(live)

    def has_live_set(self, state: TableState, snapshot_id: int) -> bool:
        """Whether the live set of the snapshot or of one of its ancestors is cached (planning from it is cheap)."""
        _, type_id = self._types(state)
        return any((state.table_uuid, s.snapshot_id, type_id) in self._live
                   for s in state.iter_ancestors(snapshot_id, through_expired=True) if s.staged_changes is None)

    def pruned_items(self, state: TableState, snapshot_id: int,
                     commit_might_match: Callable[[Mapping[int, tuple[FieldSummary, ...]]], bool],
                     partition_might_match: Callable[[int, tuple[Any, ...]], bool]) -> PrunedFiles | None:
        """The live delete files and the live data files whose partition might match, decoding only the commits
        whose partition summaries might match (``commit_might_match(summaries by spec id)``) and building items
        only for data files that pass ``partition_might_match(spec_id, partition)``.

        Returns None when that shortcut cannot be proven to give the same files as the full live set (a path added
        twice in the history, for one): the caller then filters :meth:`live_items`.
        """
        ancestry = state.ancestors(snapshot_id, through_expired=True)
        if not ancestry:
            return PrunedFiles(items=[], data_files=0, skipped_data_files=0, skipped_commits=0)
        if any(s.staged_changes is not None for s in ancestry):
            return None  # staged in a transaction: no blocks to read
        types, type_id = self._types(state)
        with collector_paused():
            positions = [s.log_position for s in ancestry]
            heads = self._load_heads(state, positions)
            if not all(heads[p].fresh for p in positions):  # else every add in the history has a path of its own
                digests = _digest_array(b"".join(heads[p].digests for p in positions))
                if pc.count_distinct(digests).as_py() != len(digests):
                    return None  # some path was added more than once: only the full replay knows which add wins
            removed = [p for pos in positions for p in heads[pos].removed]
            load = {p for p in positions if heads[p].delete_adds
                    or (heads[p].data_adds and commit_might_match(heads[p].summaries))}
            if removed:
                # a removal of a file in a commit left undecoded would go unnoticed: decode such commits too
                gone = _digest_array(b"".join(path_digest(p) for p in removed))
                load.update(p for p in positions if p not in load and heads[p].data_adds
                            and pc.any(pc.is_in(_digest_array(heads[p].digests), value_set=gone)).as_py())
            bodies = self._load_bodies(state, [p for p in positions if p in load])
            live: dict[str, FileItem] = {}
            decided: dict[tuple[int, tuple[Any, ...]], bool] = {}
            pruned: set[str] = set()
            pruned_count = skipped = skipped_commits = 0
            for snap in reversed(ancestry):  # oldest first
                pos = snap.log_position
                head = heads[pos]
                for path in head.removed:
                    if live.pop(path, None) is None:
                        pruned.discard(path)
                if pos not in load:
                    skipped += head.data_adds
                    skipped_commits += 1
                    continue
                body = bodies[pos][1]
                parts = self._block_partitions(pos, body, types, type_id)
                keep = [decided[p] if (p := (spec_id, partition)) in decided
                        else decided.setdefault(p, partition_might_match(spec_id, partition))
                        for (spec_id, _), partition in zip(body.partitions, parts)]
                contents, keys, paths = body.contents, body.partition_keys, body.paths
                rows = [i for i in range(len(paths)) if contents[i] or keep[keys[i]]]
                if len(rows) < len(paths):
                    if removed:
                        pruned.update(paths[i] for i in range(len(paths)) if not (contents[i] or keep[keys[i]]))
                    else:
                        pruned_count += len(paths) - len(rows)
                for item in self._items(snap, body, types, type_id, rows):
                    live[item.path] = item
            items = list(live.values())
            skipped_data = skipped + pruned_count + len(pruned)
            kept_data = sum(1 for i in items if i.content is _DATA)
            return PrunedFiles(items=items, data_files=kept_data + skipped_data, skipped_data_files=skipped_data,
                               skipped_commits=skipped_commits)

    def live_entries(self, state: TableState, snapshot_id: int | None) -> list[LiveEntry]:
        """The :class:`engine.model.data_file.LiveEntry` of every file live in a snapshot, oldest first (what
        ``StateStore.live_entries`` gives)."""
        return entries_of(self.live_items(state, snapshot_id))


class LiveFiles(Mapping[str, DataFile]):
    """A snapshot's live files by ``DataFile.key``, over its kept live set: a file is decoded when it is looked up,
    so a commit that asks about a few files of a large table (a REST append: are its new files new?) pays for
    those alone, not for a copy of the whole set."""

    __slots__ = ("_items",)

    def __init__(self, items: Mapping[str, FileItem]) -> None:
        self._items = items

    def __getitem__(self, key: str) -> DataFile:
        return self._items[key].file()

    def __contains__(self, key: object) -> bool:
        return key in self._items

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)


def _digest_array(digests: bytes) -> pa.Array:
    """Packed 8-byte path digests as an Arrow array (compared in bulk, without a Python object per path)."""
    return pa.Array.from_buffers(pa.uint64(), len(digests) // 8, [None, pa.py_buffer(digests)])


def entries_of(items: Iterable[FileItem]) -> list[LiveEntry]:
    """The entries of the items, decoding those not decoded yet (with the cyclic collector paused)."""
    with collector_paused():
        return [item.entry() for item in items]


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while a block builds many small objects that form no cycles (decoded
    files, scan tasks): collections would only traverse them again and again.

    When the block ends, the objects it left alive go straight to the oldest generation (``gc.freeze()`` then
    ``gc.unfreeze()``, both O(1)), instead of all waiting in the youngest one for the next young collection to
    traverse every one of them. Not done when the application froze objects itself (``gc.freeze`` before a
    fork, say): unfreezing would undo that."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        if gc.get_freeze_count() == 0:
            gc.freeze()
            gc.unfreeze()
        gc.enable()
