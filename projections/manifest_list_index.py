"""The manifest-list index: the manifest list of each published snapshot, kept as a derived table beside the
catalog's log, so the next snapshot takes its parent's manifests without reading its list back.

Layer: projections (rows in the catalog's derived tables through storage; no files). Each list is stored as the
JSON of its ``ManifestFile`` records; a list shares all but its newest records with its parent's, so the JSON text
of a record and the record decoded from it are kept (a few thousand each) and reused.
"""

from __future__ import annotations

import base64
import json
from typing import Mapping, Protocol, Sequence

from engine.model.data_file import FieldSummary, ManifestFile
from engine.model.kept_values import KeptValues
from projections.manifests import avro_long
from storage import EventLog


def manifest_file_to_json(m: ManifestFile) -> dict:
    def b64(b: bytes | None) -> str | None:
        return None if b is None else base64.b64encode(b).decode("ascii")

    out = {"path": m.manifest_path, "length": m.manifest_length, "spec": m.partition_spec_id,
           "content": int(m.content), "seq": m.sequence_number, "min-seq": m.min_sequence_number,
           "snap": m.added_snapshot_id, "counts": [m.added_files_count, m.existing_files_count,
                                                  m.deleted_files_count, m.added_rows_count,
                                                  m.existing_rows_count, m.deleted_rows_count],
           "parts": None if m.partitions is None else [
               [p.contains_null, p.contains_nan, b64(p.lower_bound), b64(p.upper_bound)] for p in m.partitions]}
    if m.first_row_id is not None:
        out["first-row-id"] = m.first_row_id
    return out


def manifest_file_from_json(o: Mapping) -> ManifestFile:
    def unb64(s: str | None) -> bytes | None:
        return None if s is None else base64.b64decode(s)

    c = o["counts"]
    parts = None if o["parts"] is None else tuple(
        FieldSummary(contains_null=p[0], contains_nan=p[1], lower_bound=unb64(p[2]), upper_bound=unb64(p[3]))
        for p in o["parts"])
    return ManifestFile(manifest_path=o["path"], manifest_length=o["length"], partition_spec_id=o["spec"],
                        content=o["content"], sequence_number=o["seq"], min_sequence_number=o["min-seq"],
                        added_snapshot_id=o["snap"], added_files_count=c[0], existing_files_count=c[1],
                        deleted_files_count=c[2], added_rows_count=c[3], existing_rows_count=c[4],
                        deleted_rows_count=c[5], partitions=parts, first_row_id=o.get("first-row-id"))


#: the index's JSON text of recently stored manifests (a list shares all but its newest manifests with its parent's)
_MANIFEST_JSON_TEXTS: KeptValues[str] = KeptValues(8192)
#: the manifests decoded from the index, by their JSON text: a list shares all but its newest manifests with its
#: parent's, so a list read back reuses the records decoded before instead of parsing them again (and the same
#: objects find their JSON text above at once)
_DECODED_MANIFESTS: KeptValues[ManifestFile] = KeptValues(8192)
#: what stands between two records in a stored list: a record is a JSON object whose first key is "path" and which
#: holds no other object, and inside a string a quote is escaped, so this cannot occur within a record
_BETWEEN_RECORDS = '},{"path":'


def _manifest_json_text(m: ManifestFile) -> str:
    return _MANIFEST_JSON_TEXTS.get_or_make(m, lambda: json.dumps(manifest_file_to_json(m), separators=(",", ":")))


def _decoded_manifest(text: str) -> ManifestFile:
    return _DECODED_MANIFESTS.get_or_make(text, lambda: manifest_file_from_json(json.loads(text)))


def decode_manifest_list(text: str) -> list[ManifestFile]:
    """The records of a stored list: its text is cut into the records' texts, and only those not decoded before are
    parsed (a list of 50 records, all but one known: 17 instead of 107 µs). Text of another shape is parsed whole."""
    if text == "[]":
        return []
    if text.startswith('[{"path":') and text.endswith("}]"):
        pieces = text[1:-1].split(_BETWEEN_RECORDS)
        last = len(pieces) - 1
        try:
            return [_decoded_manifest(('{"path":' if i else "") + piece + ("}" if i < last else ""))
                    for i, piece in enumerate(pieces)]
        except (ValueError, KeyError, TypeError):
            pass  # not cut where records meet after all: parse it whole
    return [manifest_file_from_json(o) for o in json.loads(text)]


class ManifestListIndex(Protocol):
    def get(self, table_uuid: str, snapshot_id: int) -> list[ManifestFile] | None: ...

    def put(self, table_uuid: str, snapshot_id: int, manifests: Sequence[ManifestFile]) -> None: ...


class MemoryIndex:
    """An index held in memory (for rebuilds into another folder)."""

    def __init__(self) -> None:
        self._lists: dict[tuple[str, int], list[ManifestFile]] = {}

    def get(self, table_uuid: str, snapshot_id: int) -> list[ManifestFile] | None:
        return self._lists.get((table_uuid, snapshot_id))

    def put(self, table_uuid: str, snapshot_id: int, manifests: Sequence[ManifestFile]) -> None:
        self._lists[(table_uuid, snapshot_id)] = list(manifests)


class OverlayIndex:
    """Reads through to another index; keeps what this publish adds in memory until it is written in one go."""

    def __init__(self, base: ManifestListIndex) -> None:
        self.base = base
        self.added: dict[int, list[ManifestFile]] = {}

    def get(self, table_uuid: str, snapshot_id: int) -> list[ManifestFile] | None:
        found = self.added.get(snapshot_id)
        return found if found is not None else self.base.get(table_uuid, snapshot_id)

    def put(self, table_uuid: str, snapshot_id: int, manifests: Sequence[ManifestFile]) -> None:
        self.added[snapshot_id] = list(manifests)


class StoredIndex:
    """The manifest-list index as a derived table beside the catalog's log (SQLite or PostgreSQL). A row never
    changes once written, so each table's newest list (the parent of its next commit) is also kept in memory."""

    TABLE = "projection_manifest_lists"

    def __init__(self, log: EventLog) -> None:
        self.log = log
        self._newest: dict[str, tuple[int, list[ManifestFile]]] = {}
        log.derived.create(f"CREATE TABLE IF NOT EXISTS {self.TABLE} (table_uuid TEXT NOT NULL, snapshot_id BIGINT "
                           f"NOT NULL, manifests TEXT NOT NULL, PRIMARY KEY (table_uuid, snapshot_id))")

    def get(self, table_uuid: str, snapshot_id: int) -> list[ManifestFile] | None:
        newest = self._newest.get(table_uuid)
        if newest is not None and newest[0] == snapshot_id:
            return list(newest[1])
        rows = self.log.derived.query(f"SELECT manifests FROM {self.TABLE} WHERE table_uuid = ? AND snapshot_id = ?",
                                      [table_uuid, avro_long(snapshot_id)])
        return None if not rows else decode_manifest_list(rows[0][0])

    def put(self, table_uuid: str, snapshot_id: int, manifests: Sequence[ManifestFile]) -> None:
        self.put_many(table_uuid, {snapshot_id: manifests})

    def put_many(self, table_uuid: str, lists: Mapping[int, Sequence[ManifestFile]]) -> None:
        rows = [(table_uuid, avro_long(sid), "[" + ",".join(_manifest_json_text(m) for m in ms) + "]")
                for sid, ms in lists.items()]
        self.log.derived.insert_missing(self.TABLE, ("table_uuid", "snapshot_id", "manifests"), rows)
        if lists:
            snapshot_id, manifests = list(lists.items())[-1]
            self._newest[table_uuid] = (snapshot_id, list(manifests))
