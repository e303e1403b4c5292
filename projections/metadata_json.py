"""Render ``vN.metadata.json`` from a table state: a pure function, fixed key order (and a renderer that keeps
the encoded history between a table's commits, for the same bytes at a cost that does not grow with it).

Layer: projections (pure; imports engine.model and engine.state.table_state). Keys follow Iceberg
Java's TableMetadataParser order, so output is byte-stable and familiar; format
version 1 also carries the legacy ``schema`` and ``partition-spec`` fields.
"""

from __future__ import annotations

import itertools
import json
import operator
import threading
from collections import OrderedDict
from typing import Any, Sequence

import attrs

from engine.state.table_state import Snapshot, SnapshotRef, TableState
from projections import layout

MAX_SNAPSHOTS = "icelog.metadata.max-snapshots"


def snapshot_json(state: TableState, snap: Snapshot) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if state.format_version >= 2:
        out["sequence-number"] = snap.sequence_number
    out["snapshot-id"] = snap.snapshot_id
    if snap.parent_snapshot_id is not None:
        out["parent-snapshot-id"] = snap.parent_snapshot_id
    out["timestamp-ms"] = snap.timestamp_ms
    summary: dict[str, str] = {"operation": snap.operation}
    summary.update(snap.summary)
    out["summary"] = summary
    out["manifest-list"] = layout.manifest_list_file(state.location, snap.snapshot_id, snap.commit_id)
    out["schema-id"] = snap.schema_id
    if state.format_version >= 3 and snap.first_row_id is not None:
        out["first-row-id"] = snap.first_row_id
        out["added-rows"] = snap.added_rows or 0
    return out


def ref_json(ref: SnapshotRef) -> dict[str, Any]:
    out: dict[str, Any] = {"snapshot-id": ref.snapshot_id, "type": ref.type}
    if ref.min_snapshots_to_keep is not None:
        out["min-snapshots-to-keep"] = ref.min_snapshots_to_keep
    if ref.max_snapshot_age_ms is not None:
        out["max-snapshot-age-ms"] = ref.max_snapshot_age_ms
    if ref.max_ref_age_ms is not None:
        out["max-ref-age-ms"] = ref.max_ref_age_ms
    return out


def published_snapshots(state: TableState) -> list[Snapshot]:
    """The snapshots metadata.json lists: all of them, or under ``icelog.metadata.max-snapshots`` only the newest
    N plus every ref head (the log keeps the full history for icelog's own time travel)."""
    limit = state.int_property(MAX_SNAPSHOTS, 0)
    if limit <= 0 or len(state.snapshots) <= limit:
        return list(state.snapshots)
    heads = {ref.snapshot_id for _, ref in state.refs}
    newest = {s.snapshot_id for s in state.snapshots[-limit:]}
    return [s for s in state.snapshots if s.snapshot_id in newest or s.snapshot_id in heads]


def _head_dict(state: TableState) -> dict[str, Any]:
    """The keys of metadata.json before ``snapshots``."""
    v1 = state.format_version == 1
    out: dict[str, Any] = {"format-version": state.format_version, "table-uuid": state.table_uuid,
                           "location": state.location}
    if not v1:
        out["last-sequence-number"] = state.last_sequence_number
    out["last-updated-ms"] = state.last_updated_ms
    out["last-column-id"] = state.last_column_id
    if v1:
        out["schema"] = state.schema.to_json()
    out["current-schema-id"] = state.current_schema_id
    out["schemas"] = [s.to_json() for s in state.schemas]
    if v1:
        out["partition-spec"] = state.spec.to_json()["fields"]
    out["default-spec-id"] = state.default_spec_id
    out["partition-specs"] = [s.to_json() for s in state.specs]
    out["last-partition-id"] = state.last_partition_id
    out["default-sort-order-id"] = state.default_sort_order_id
    out["sort-orders"] = [o.to_json() for o in state.sort_orders]
    out["properties"] = dict(state.properties)
    current = state.current_snapshot
    out["current-snapshot-id"] = current.snapshot_id if current is not None else -1
    out["refs"] = {name: ref_json(ref) for name, ref in state.refs}
    return out


def _middle_dict(state: TableState) -> dict[str, Any]:
    """The keys between ``snapshots`` and ``snapshot-log``."""
    out: dict[str, Any] = {"statistics": [], "partition-statistics": []}
    if state.format_version >= 3:
        out["next-row-id"] = state.next_row_id or 0
    return out


def _snapshot_log(state: TableState, published: Sequence[Snapshot]) -> list[tuple[int, int]]:
    """The snapshot-log entries of the published snapshots, oldest first."""
    kept = {s.snapshot_id for s in published}
    return [(ts, sid) for ts, sid in state.snapshot_log if sid in kept]


def _metadata_log(state: TableState) -> list[dict[str, Any]]:
    return [{"timestamp-ms": ts, "metadata-file": layout.metadata_file_of(state, version)}
            for ts, version in state.metadata_log]


def metadata_dict(state: TableState) -> dict[str, Any]:
    """The table metadata of ``state`` as an ordered dict (the JSON document)."""
    out = _head_dict(state)
    published = published_snapshots(state)
    out["snapshots"] = [snapshot_json(state, s) for s in published]
    out.update(_middle_dict(state))
    out["snapshot-log"] = [{"timestamp-ms": ts, "snapshot-id": sid} for ts, sid in _snapshot_log(state, published)]
    out["metadata-log"] = _metadata_log(state)
    return out


def _encode(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":"), allow_nan=False).encode("utf-8")


def render_metadata(state: TableState) -> bytes:
    """The bytes of ``v<state.version>.metadata.json``."""
    return _encode(metadata_dict(state))


class _JoinedTexts:
    """The encoded items of a JSON array, kept for the next render: every :data:`CHUNK` items are joined once into
    one piece, so a render joins a few large pieces and the newest items instead of every item again (at 1,000
    snapshots, 30 pieces instead of 2,000)."""

    CHUNK = 128

    def __init__(self, texts: Sequence[bytes] = ()) -> None:
        self.texts: list[bytes] = []
        self.chunks: list[bytes] = []
        self.extend(texts)

    def extend(self, texts: Sequence[bytes]) -> None:
        for text in texts:
            self.texts.append(text)
            if len(self.texts) % self.CHUNK == 0:
                self.chunks.append(b",".join(self.texts[-self.CHUNK:]))

    def without_first(self, count: int) -> _JoinedTexts:
        return _JoinedTexts(self.texts[count:]) if count else self

    def pieces(self) -> list[bytes]:
        """The array's content (without brackets) as pieces to join."""
        out: list[bytes] = []
        for chunk in self.chunks:
            out += (chunk, b",")
        rest = self.texts[len(self.chunks) * self.CHUNK:]
        if rest:
            out.append(b",".join(rest))
        elif out:
            out.pop()
        return out


@attrs.define
class _Rendered:
    """What one table's last render encoded, to extend by the next (in place: a render takes its table's entry out
    of the renderer's keeping): its published snapshots (their ids, and their JSON) and its snapshot log (the
    state's, and the published entries with their JSON)."""

    location: str
    format_version: int
    snapshots: list[Snapshot]
    snapshot_ids: set[int]
    snapshot_texts: _JoinedTexts
    snapshot_log: tuple[tuple[int, int], ...]
    #: the snapshot-log entries published (those of published snapshots) and their JSON
    snapshot_log_entries: list[tuple[int, int]]
    snapshot_log_texts: _JoinedTexts
    #: the JSON of metadata-log entries already encoded for this location and metadata base
    metadata_base: int = 0
    metadata_log_parts: dict[tuple[int, int], bytes] = attrs.Factory(dict)


def _encode_log_entry(entry: tuple[int, int]) -> bytes:
    return b'{"timestamp-ms":%d,"snapshot-id":%d}' % entry


class MetadataRenderer:
    """:func:`render_metadata` for a sequence of commits, without re-encoding the history each time.

    A snapshot never changes once logged, so the JSON of the snapshots (and snapshot-log entries) a table's last
    render published is kept, and the next render of that table encodes only what came after it, and joins the
    kept JSON in large pieces: the CPU a commit's render takes barely grows with the history (the document still
    does). The bytes are exactly :func:`render_metadata`'s. Keeps the last render of up to ``max_tables`` tables.
    """

    def __init__(self, max_tables: int = 64) -> None:
        self.max_tables = max_tables
        self._last: OrderedDict[str, _Rendered] = OrderedDict()
        #: the last document rendered and the very state it is of (one, not one per table: a document is as large
        #: as the texts kept to extend it)
        self._latest_document: tuple[TableState, bytes] | None = None
        self._lock = threading.Lock()

    def render(self, state: TableState) -> bytes:
        with self._lock:
            latest = self._latest_document
            if latest is not None and latest[0] is state:
                return latest[1]  # the same state again (a REST commit answers with the metadata it just published)
            last = self._last.pop(state.table_uuid, None)
        rendered = self._extend(last, state) if last is not None else None
        if rendered is None:
            published = published_snapshots(state)
            log_entries = _snapshot_log(state, published)
            rendered = _Rendered(state.location, state.format_version, published,
                                 {s.snapshot_id for s in published},
                                 _JoinedTexts([_encode(snapshot_json(state, snap)) for snap in published]),
                                 state.snapshot_log, log_entries,
                                 _JoinedTexts([_encode_log_entry(entry) for entry in log_entries]))
        head, middle = _encode(_head_dict(state)), _encode(_middle_dict(state))
        metadata_log = b",".join(self._metadata_log_parts(rendered, state))
        document = b"".join((head[:-1], b',"snapshots":[', *rendered.snapshot_texts.pieces(), b"],", middle[1:-1],
                             b',"snapshot-log":[', *rendered.snapshot_log_texts.pieces(), b'],"metadata-log":[',
                             metadata_log, b"]}"))
        # kept for the next render only once this one is done with it: the handles of a log in a process share the
        # renderer, and the next render (another thread's) extends the kept texts in place
        with self._lock:
            self._last[state.table_uuid] = rendered
            self._latest_document = (state, document)
            while len(self._last) > self.max_tables:
                self._last.popitem(last=False)
        return document

    @staticmethod
    def _metadata_log_parts(rendered: _Rendered, state: TableState) -> list[bytes]:
        """The metadata-log entries' JSON, each encoded once per location and metadata base (the log keeps the
        newest ``write.metadata.previous-versions-max``, so most entries are the last render's)."""
        if rendered.metadata_base != state.metadata_base:
            rendered.metadata_base = state.metadata_base
            rendered.metadata_log_parts = {}
        known, parts = rendered.metadata_log_parts, []
        for entry in state.metadata_log:
            part = known.get(entry)
            if part is None:
                part = known[entry] = _encode({"timestamp-ms": entry[0],
                                               "metadata-file": layout.metadata_file_of(state, entry[1])})
            parts.append(part)
        if len(known) > 2 * len(parts) + 16:  # forget entries the log no longer lists
            rendered.metadata_log_parts = {entry: known[entry] for entry in state.metadata_log}
        return parts

    @staticmethod
    def _extend(last: _Rendered, state: TableState) -> _Rendered | None:
        """``last`` extended to ``state`` when the state only added snapshots and log entries after it (under
        ``icelog.metadata.max-snapshots``, the oldest published snapshots may also drop off the front, with their
        log entries); None when anything else changed (an expiry, a snapshot limit set, another location), which
        takes a full render. Nothing of ``last`` changes before it is known to extend."""
        if (last.location, last.format_version) != (state.location, state.format_version):
            return None
        m = len(last.snapshot_log)
        if len(state.snapshot_log) < m or state.snapshot_log[:m] != last.snapshot_log:
            return None
        published = published_snapshots(state)
        dropped = _dropped_from_front(last.snapshots, published)
        if dropped is None:
            return None
        snapshots, ids, log_entries = last.snapshots, last.snapshot_ids, last.snapshot_log_entries
        snapshot_texts, log_texts = last.snapshot_texts, last.snapshot_log_texts
        if dropped:
            gone = {s.snapshot_id for s in snapshots[:dropped]}
            front = 0  # the log entries of the dropped snapshots must be the first ones published
            while front < len(log_entries) and log_entries[front][1] in gone:
                front += 1
            if any(entry[1] in gone for entry in log_entries[front:]):
                return None
            snapshots, ids = snapshots[dropped:], ids - gone
            snapshot_texts = snapshot_texts.without_first(dropped)
            log_entries, log_texts = log_entries[front:], log_texts.without_first(front)
        added = published[len(snapshots):]
        snapshots.extend(added)
        ids.update(s.snapshot_id for s in added)
        snapshot_texts.extend([_encode(snapshot_json(state, snap)) for snap in added])
        new_log = [entry for entry in state.snapshot_log[m:] if entry[1] in ids]
        log_entries.extend(new_log)
        log_texts.extend([_encode_log_entry(entry) for entry in new_log])
        return _Rendered(state.location, state.format_version, snapshots, ids, snapshot_texts, state.snapshot_log,
                         log_entries, log_texts, last.metadata_base, last.metadata_log_parts)


def _dropped_from_front(old: Sequence[Snapshot], new: Sequence[Snapshot]) -> int | None:
    """How many snapshots dropped off the front of ``old`` for ``new`` to go on from the rest of it (0 when none
    did); None when ``new`` does not go on from ``old`` that way, or shares none of it (a limit removed brings
    older snapshots back, with log entries the last render left out)."""
    dropped = 0
    if old and new and _key(new[0]) != _key(old[0]):
        first = new[0].snapshot_id
        dropped = next((i for i, s in enumerate(old) if s.snapshot_id == first), len(old))
    if old and (not new or dropped == len(old)):
        return None
    rest = len(old) - dropped
    if len(new) < rest or not _same_snapshots(new[:rest], old[dropped:]):
        return None
    return dropped


def _same_snapshots(a: Sequence[Snapshot], b: Sequence[Snapshot]) -> bool:
    """Whether two runs of snapshots of a table are the same ones: the same objects, or else the same snapshot ids
    added at the same log positions (a snapshot never changes once logged; comparing every field of a thousand
    snapshots that another process's fold made cost a millisecond a commit)."""
    if len(a) != len(b):
        return False
    # the identical ones (most: the same process folded them) go by at C speed; the others by their keys
    return all(_key(a[i]) == _key(b[i]) for i in itertools.compress(range(len(a)), map(operator.is_not, a, b)))


def _key(snapshot: Snapshot) -> tuple[int, int]:
    return snapshot.snapshot_id, snapshot.log_position
