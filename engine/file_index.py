"""An indexed file table: the live data and delete files of any snapshot, without decoding the log again.

Layer: engine (reads bulk parts from the storage log; decodes them with engine.events). Derived and
rebuildable: it holds nothing the log does not, and dropping it only makes the next plan slower.

A snapshot's file changes (the bulk parts of its ``add-snapshot`` event) never change once written, so the
decoded changes are kept per log position, each file already wrapped in the :class:`LiveEntry` its snapshot
gives it (with the part's explicit data sequence number when it has one, else the snapshot's). The live set
of a snapshot is its parent's live set minus the files it removed plus the files it added; the live sets of
the last few snapshots planned are kept, so planning the snapshot after a commit applies that commit's
changes alone, and a snapshot in the middle of the history replays decoded changes (dictionary work, no
JSON) from the nearest cached ancestor.

Decoding is lazy: a part's path, content, spec id and partition tuple are read from its canonical JSON
without parsing the rest, and the full :class:`DataFile` is built only when asked for (``FileItem.entry``),
so a plan that partition pruning narrows to a few files builds only those.

A snapshot staged in a transaction (``Snapshot.staged_changes``) is not in the log: its changes come from the
snapshot itself, and no live set of it is kept, since its id may land later on another parent.

One index belongs to one state store (``FileIndex.of(store)``); it is an explicit cache object, never
module state.
"""

from __future__ import annotations

import binascii
import gc
import json
from collections import OrderedDict
from collections.abc import Hashable, Iterable
from typing import Any

import attrs

from engine.errors import ValidationError
from engine.model.data_file import DataFile, DataFileContent
from engine.model.types import StructType
from engine.model.values import value_from_json
from engine.state import Snapshot, TableState

#: Files kept across snapshots before the least recently used snapshots' changes are dropped (about 3.5 KB
#: each once decoded: 100,000 files take some 350 MB).
MAX_CACHED_FILES = 500_000
#: Live sets (one per snapshot) kept for incremental planning.
MAX_LIVE_SETS = 4


# The log's data file JSON (engine.model.data_file.data_file_to_json), decoded here without the constructor's
# converters: the log holds metric pairs already sorted, so the values are built once, directly. When DataFile
# gains a field this table does not know, decoding falls back to engine.model.data_file.data_file_from_json.
_PAIRS = {"column_sizes": "column-sizes", "value_counts": "value-counts", "null_value_counts": "null-value-counts",
          "nan_value_counts": "nan-value-counts"}
_BYTE_PAIRS = {"lower_bounds": "lower-bounds", "upper_bounds": "upper-bounds"}
_PLAIN = {"file_path": "file-path", "file_format": "file-format", "spec_id": "spec-id",
          "record_count": "record-count", "file_size_in_bytes": "file-size-in-bytes", "sort_order_id": "sort-order-id"}
_KNOWN = {"content", "partition", "split_offsets", "equality_ids", "key_metadata", *_PAIRS, *_BYTE_PAIRS, *_PLAIN}
_FAST = {a.name for a in attrs.fields(DataFile)} == _KNOWN
_CONTENT = {int(c): c for c in DataFileContent}
_DECODER = json.JSONDecoder()
_MISSING = object()


class FileItem:
    """One file a snapshot added or removed: what planning needs up front, and the full entry on demand."""

    __slots__ = ("_entry", "_index", "_snap", "_text", "added", "content", "partition", "path", "spec_id")

    def __init__(self, added: bool, path: str, content: DataFileContent, spec_id: int, partition: tuple[Any, ...],
                 text: str, snap: Snapshot, index: FileIndex) -> None:
        self.added = added
        self.path = path
        self.content = content
        self.spec_id = spec_id
        self.partition = partition
        self._text: str | None = text
        self._entry: Any = None
        self._snap: Snapshot | None = snap
        self._index: FileIndex | None = index

    @classmethod
    def staged(cls, change: Any, snap: Snapshot) -> FileItem:
        """The item of a file change of a snapshot staged in a transaction (not in the log: never cached)."""
        from engine.state_store import LiveEntry

        f = change.file
        item = cls(change.added, f.file_path, f.content, f.spec_id, f.partition, "", snap, None)  # type: ignore
        seq = snap.sequence_number if change.data_sequence_number is None else change.data_sequence_number
        item._entry = LiveEntry(file=f, data_sequence_number=seq, file_sequence_number=snap.sequence_number,
                                snapshot_id=snap.snapshot_id)
        item._text = item._snap = item._index = None
        return item

    def entry(self) -> Any:
        """The :class:`engine.state_store.LiveEntry` of the file (decoded on first use)."""
        if self._entry is None:
            from engine.state_store import LiveEntry

            assert self._text is not None and self._snap is not None and self._index is not None
            snap = self._snap
            f, data_seq = self._index._file(self._text, self.partition)
            # an explicit data sequence number (compaction, import) overrides the snapshot's
            self._entry = LiveEntry(file=f, data_sequence_number=snap.sequence_number if data_seq is None
                                    else data_seq,
                                    file_sequence_number=snap.sequence_number, snapshot_id=snap.snapshot_id)
            self._text = self._snap = self._index = None
        return self._entry


class FileIndex:
    """Decoded file changes per log position and live file sets per snapshot, for one catalog's log.

    ::

        index = FileIndex.of(store)
        entries = index.live_entries(state, snapshot_id)   # same answer as StateStore.live_entries

    :param log: the catalog's event log (``storage.Log``)
    """

    def __init__(self, log: Any) -> None:
        self.log = log
        self._changes: OrderedDict[tuple[int, int], tuple[FileItem, ...]] = OrderedDict()
        self._cached_files = 0
        self._live: OrderedDict[tuple[str, int, int], dict[str, Any]] = OrderedDict()
        self._type_keys: dict[Hashable, int] = {}
        self._partitions: dict[tuple[int, int, tuple[Any, ...]], tuple[Any, ...]] = {}
        self._values: dict[tuple[int, int, int, Any], Any] = {}
        #: counters, for tests and benchmarks
        self.decoded_parts = 0

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
        self._values.clear()
        self._changes.clear()
        self._live.clear()
        self._cached_files = 0

    # ------------------------------------------------------------ decoding
    def _types(self, state: TableState) -> tuple[dict[int, StructType], int]:
        """The partition struct per spec id the parts decode with, and a small id for that set of structs."""
        types = {s.spec_id: s.partition_type(state.schema) for s in state.specs}
        key = tuple(sorted(types.items(), key=lambda kv: kv[0]))
        type_id = self._type_keys.get(key)
        if type_id is None:
            type_id = self._type_keys[key] = len(self._type_keys)
        return types, type_id

    def changes(self, state: TableState, snaps: list[Snapshot]) -> dict[int, tuple[FileItem, ...]]:
        """The changes of each snapshot (by log position), reading only the parts not cached yet. Snapshots staged
        in a transaction are not in the log (they carry their changes; :meth:`live_items` reads them there)."""
        types, type_id = self._types(state)
        out: dict[int, tuple[FileItem, ...]] = {}
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
            parts = self.log.read_parts_many([s.log_position for s in missing])
            collecting = gc.isenabled()
            gc.disable()  # many small objects, none cyclic: collections would only slow decoding down
            try:
                for snap in missing:
                    items = tuple(self._item(text, snap, types, type_id) for text in parts.get(snap.log_position, []))
                    self.decoded_parts += len(items)
                    out[snap.log_position] = items
                    self._changes[(snap.log_position, type_id)] = items
                    self._cached_files += len(items)
            finally:
                if collecting:
                    gc.enable()
            while self._cached_files > MAX_CACHED_FILES and len(self._changes) > 1:
                _, dropped = self._changes.popitem(last=False)
                self._cached_files -= len(dropped)
        return out

    def _partition(self, types: dict[int, StructType], type_id: int, spec_id: int, raw: list[Any]
                   ) -> tuple[Any, ...]:
        """A partition tuple from its JSON, decoded once per distinct tuple and shared."""
        # floats by their text, so that 0.0 and -0.0 (equal, distinct partition values) keep apart
        key = (type_id, spec_id, tuple(("f", repr(v)) if type(v) is float else v for v in raw))
        partition = self._partitions.get(key)
        if partition is None:
            values = self._values
            decoded = []
            for pos, (field, v) in enumerate(zip(types[spec_id].fields, raw)):
                vkey = (type_id, spec_id, pos, ("f", repr(v)) if type(v) is float else v)
                value = values.get(vkey, _MISSING)
                if value is _MISSING:
                    value = values[vkey] = None if v is None else value_from_json(field.field_type, v)
                decoded.append(value)
            partition = self._partitions[key] = tuple(decoded)
        return partition

    def _item(self, text: str, snap: Snapshot, types: dict[int, StructType], type_id: int) -> FileItem:
        """A bulk part's item: the few fields planning needs, read straight from the canonical JSON (a key's
        quoted name followed by a colon cannot occur inside a JSON string), the rest left for later."""
        try:
            if not _FAST:
                raise LookupError
            at = [text.find(k) for k in ('"content":', '"file-path":', '"spec-id":', '"partition":')]
            if min(at) < 0 or not text.startswith('{"change":"'):
                raise LookupError
            content = _CONTENT[_DECODER.raw_decode(text, at[0] + 10)[0]]
            path = _DECODER.raw_decode(text, at[1] + 12)[0]
            spec_id = _DECODER.raw_decode(text, at[2] + 10)[0]
            raw = _DECODER.raw_decode(text, at[3] + 12)[0]
            added = text.startswith('{"change":"add"')
        except (LookupError, ValueError):
            try:
                obj = json.loads(text)
                j = obj["file"]
                content, path, spec_id, raw = _CONTENT[j["content"]], j["file-path"], j["spec-id"], j["partition"]
                added = obj["change"] == "add"
            except (LookupError, ValueError, TypeError) as e:
                raise ValidationError(f"Cannot decode file change: {text[:200]!r} ({e})") from e
        if not isinstance(spec_id, int) or not isinstance(raw, list) or not isinstance(path, str):
            raise ValidationError(f"Cannot decode file change: {text[:200]!r}")
        try:
            partition = self._partition(types, type_id, spec_id, raw)
        except KeyError as e:
            raise ValidationError(f"Cannot decode file change: no partition spec {spec_id} ({path})") from e
        return FileItem(added, path, content, spec_id, partition, text, snap, self)

    def _file(self, text: str, partition: tuple[Any, ...]) -> tuple[DataFile, int | None]:
        """The full data file of a bulk part (the partition tuple already decoded) and its explicit data
        sequence number (None: the snapshot's)."""
        obj = json.loads(text)
        data_seq = obj.get("data-sequence-number")
        if data_seq is not None and (type(data_seq) is not int):
            raise ValidationError(f"Cannot decode file change: {text[:200]!r} (data sequence number {data_seq!r})")
        if not _FAST:
            from engine.model.data_file import data_file_from_json

            return data_file_from_json(obj["file"], partition), data_seq
        try:
            j = obj["file"]
            f = object.__new__(DataFile)
            put = object.__setattr__
            put(f, "content", _CONTENT[j["content"]])
            put(f, "partition", partition)
            for name, k in _PLAIN.items():
                put(f, name, j.get(k))
            for name, k in _PAIRS.items():
                v = j.get(k)
                put(f, name, None if v is None else tuple((p[0], p[1]) for p in v))
            for name, k in _BYTE_PAIRS.items():
                v = j.get(k)
                put(f, name, None if v is None else tuple((p[0], binascii.a2b_base64(p[1])) for p in v))
            for name, k in (("split_offsets", "split-offsets"), ("equality_ids", "equality-ids")):
                v = j.get(k)
                put(f, name, None if v is None else tuple(v))
            km = j.get("key-metadata")
            put(f, "key_metadata", None if km is None else binascii.a2b_base64(km))
            if f.file_format is None or f.file_path is None or f.record_count is None:
                raise KeyError("file-path")
            return f, data_seq
        except (KeyError, TypeError, IndexError, ValueError, binascii.Error) as e:
            raise ValidationError(f"Cannot decode file change: {text[:200]!r} ({e})") from e

    # ------------------------------------------------------------ live sets
    def live_items(self, state: TableState, snapshot_id: int | None) -> list[FileItem]:
        """The files live in a snapshot, oldest first, as :class:`FileItem` (entries decoded on demand): files
        its ancestry added minus those a later snapshot removed; a file a snapshot both removes and adds again
        is live with that snapshot's sequence numbers."""
        if snapshot_id is None:
            return []
        ancestry = state.ancestors(snapshot_id, through_expired=True)
        if not ancestry:
            return []
        _, type_id = self._types(state)
        start: dict[str, FileItem] = {}
        todo = ancestry
        for i, snap in enumerate(ancestry):
            if snap.staged_changes is not None:
                continue  # staged in a transaction: its id may land later with other changes or another parent
            cached = self._live.get((state.table_uuid, snap.snapshot_id, type_id))
            if cached is not None:
                self._live.move_to_end((state.table_uuid, snap.snapshot_id, type_id))
                if i == 0:
                    return list(cached.values())
                start, todo = cached, ancestry[:i]
                break
        changes = self.changes(state, [s for s in todo if s.staged_changes is None])
        live = dict(start)
        for snap in reversed(todo):  # oldest first
            if snap.staged_changes is not None:
                snap_changes: tuple[FileItem, ...] = tuple(FileItem.staged(c, snap) for c in snap.staged_changes)
            else:
                snap_changes = changes.get(snap.log_position, ())
            for item in snap_changes:
                if not item.added:
                    live.pop(item.path, None)
            for item in snap_changes:
                if item.added:
                    live.pop(item.path, None)
                    live[item.path] = item
        if ancestry[0].staged_changes is not None:
            return list(live.values())
        self._live[(state.table_uuid, snapshot_id, type_id)] = live
        while len(self._live) > MAX_LIVE_SETS:
            self._live.popitem(last=False)
        return list(live.values())

    def live_entries(self, state: TableState, snapshot_id: int | None) -> list[Any]:
        """The :class:`engine.state_store.LiveEntry` of every file live in a snapshot, oldest first (what
        ``StateStore.live_entries`` gives)."""
        return entries_of(self.live_items(state, snapshot_id))


def entries_of(items: Iterable[FileItem]) -> list[Any]:
    """The entries of the items, decoding those not decoded yet (with the cyclic collector paused)."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        return [item.entry() for item in items]
    finally:
        if collecting:
            gc.enable()
