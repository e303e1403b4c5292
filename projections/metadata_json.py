"""Render ``vN.metadata.json`` from a table state: a pure function, fixed key order.

Layer: projections (pure; imports engine.model and engine.state). Keys follow Iceberg
Java's TableMetadataParser order, so output is byte-stable and familiar; format
version 1 also carries the legacy ``schema`` and ``partition-spec`` fields.
"""

from __future__ import annotations

import json
from typing import Any

from engine.state import Snapshot, SnapshotRef, TableState
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


def metadata_dict(state: TableState) -> dict[str, Any]:
    """The table metadata of ``state`` as an ordered dict (the JSON document)."""
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
    published = published_snapshots(state)
    out["snapshots"] = [snapshot_json(state, s) for s in published]
    out["statistics"] = []
    out["partition-statistics"] = []
    if state.format_version >= 3:
        out["next-row-id"] = state.next_row_id or 0
    kept = {s.snapshot_id for s in published}
    out["snapshot-log"] = [{"timestamp-ms": ts, "snapshot-id": sid} for ts, sid in state.snapshot_log if sid in kept]
    out["metadata-log"] = [{"timestamp-ms": ts, "metadata-file": layout.metadata_file_of(state, version)}
                           for ts, version in state.metadata_log]
    return out


def render_metadata(state: TableState) -> bytes:
    """The bytes of ``v<state.version>.metadata.json``."""
    return json.dumps(metadata_dict(state), separators=(",", ":"), allow_nan=False).encode("utf-8")
