"""Carry the entries of a manifest icelog wrote into a merged manifest as bytes, without decoding them.

Layer: projections (pure functions over Avro bytes, and the derived table of record lengths through storage).
A merge packs the table's big merged manifest into the next one every hundred commits. Decoding its entries into
objects and encoding them again cost about 0.1 ms an entry in a process that did not write it (with eight writer
processes, most merges), in the publish that every writer waits for. Every entry of that manifest goes on
unchanged but for its first fields (an ADDED entry becomes EXISTING, with the snapshot id and sequence numbers it
inherited made explicit), so the merge takes each entry's record bytes from the file and writes its first fields
again. To cut the file into records it needs their lengths: the projector keeps them, for each merged manifest it
writes, in the derived table :class:`StoredRecordLengths`. The bytes are those the entries would encode to; a
manifest the table's schema or format version has changed since, or that holds DELETED entries, is decoded as
before.
"""

from __future__ import annotations

from typing import Mapping, Sequence

from engine.model.data_file import EntryStatus, ManifestFile
from projections.manifests import AVRO_MAGIC, SYNC_MARKER_SIZE, encoded_entry_prefix
from storage import EventLog

#: the longest manifest path whose record lengths are kept (the table's primary key holds it)
MAX_KEPT_PATH_BYTES = 2000


def _read_long(data: bytes, pos: int) -> tuple[int, int]:
    """Avro's zig-zag varint at ``pos``: the value and the position after it."""
    b = data[pos]
    pos += 1
    n, shift = b & 0x7F, 7
    while b & 0x80:
        b = data[pos]
        pos += 1
        n |= (b & 0x7F) << shift
        shift += 7
    return (n >> 1) ^ -(n & 1), pos


def _read_bytes(data: bytes, pos: int) -> tuple[bytes, int]:
    size, pos = _read_long(data, pos)
    if size < 0 or pos + size > len(data):
        raise ValueError("a length past the end")
    return data[pos:pos + size], pos + size


def split_records(data: bytes, lengths: Sequence[int], schema_text: str) -> list[bytes] | None:
    """The records of an uncompressed Avro file, cut by their ``lengths``; None when the file is not one whose
    header holds ``schema_text`` with the null codec, or its blocks do not hold exactly those records."""
    try:
        if not data.startswith(AVRO_MAGIC):
            return None
        pos, metadata = len(AVRO_MAGIC), {}
        while True:
            count, pos = _read_long(data, pos)
            if count == 0:
                break
            if count < 0:
                count = -count
                _, pos = _read_long(data, pos)  # the block's size in bytes
            for _ in range(count):
                key, pos = _read_bytes(data, pos)
                metadata[key], pos = _read_bytes(data, pos)
        if metadata.get(b"avro.codec", b"null") != b"null" or metadata.get(b"avro.schema") != schema_text.encode():
            return None
        sync = data[pos:pos + SYNC_MARKER_SIZE]
        pos += SYNC_MARKER_SIZE
        blocks: list[tuple[int, bytes]] = []
        while pos < len(data):
            count, pos = _read_long(data, pos)
            size, pos = _read_long(data, pos)
            end = pos + size
            if count < 0 or size < 0 or data[end:end + SYNC_MARKER_SIZE] != sync:
                return None
            blocks.append((count, data[pos:end]))
            pos = end + SYNC_MARKER_SIZE
    except (IndexError, ValueError):
        return None
    out: list[bytes] = []
    at = 0
    for count, block in blocks:  # each block holds whole records: the lengths must cut it exactly
        pos = 0
        for length in lengths[at:at + count]:
            if length <= 0:
                return None
            out.append(block[pos:pos + length])
            pos += length
        at += count
        if pos != len(block) or at > len(lengths):
            return None
    return out if at == len(lengths) else None


def _read_optional_long(data: bytes, pos: int) -> tuple[int | None, int]:
    branch, pos = _read_long(data, pos)
    if branch == 0:
        return None, pos
    if branch != 1:
        raise ValueError(f"union branch {branch}")
    return _read_long(data, pos)


def carried_records(records: Sequence[bytes], manifest: ManifestFile, merging_snapshot_id: int) -> list[bytes] | None:
    """The records of a v2 or v3 ``manifest`` as a merge by another snapshot writes them: each entry EXISTING, with
    the snapshot id and sequence numbers it inherited from the manifest written out (the rules of
    ``Renderer.entries_of`` and ``Renderer.merge``), its data file's bytes as they are. None when an entry is
    DELETED, is the merging snapshot's, or lacks what an EXISTING entry must say (the entries are then decoded, and
    whatever is wrong is refused there)."""
    out = []
    for record in records:
        try:
            status, pos = _read_long(record, 0)
            snapshot_id, pos = _read_optional_long(record, pos)
            data_seq, pos = _read_optional_long(record, pos)
            file_seq, pos = _read_optional_long(record, pos)
        except (IndexError, ValueError):
            return None
        if status not in (EntryStatus.EXISTING, EntryStatus.ADDED):
            return None
        inherit = status == EntryStatus.ADDED or manifest.sequence_number == 0
        if snapshot_id is None or (inherit and (data_seq is None or file_seq is None)):
            snapshot_id = snapshot_id if snapshot_id is not None else manifest.added_snapshot_id
            if inherit:
                data_seq = data_seq if data_seq is not None else manifest.sequence_number
                file_seq = file_seq if file_seq is not None else manifest.sequence_number
        if snapshot_id is None or data_seq is None or snapshot_id == merging_snapshot_id:
            return None
        out.append(encoded_entry_prefix(EntryStatus.EXISTING, snapshot_id, data_seq, file_seq) + record[pos:])
    return out


class StoredRecordLengths:
    """The record lengths of the merged manifests the projector wrote, by table and path: a derived table beside
    the catalog's log (SQLite or PostgreSQL), rows never changed once written."""

    TABLE = "projection_manifest_records"

    def __init__(self, log: EventLog) -> None:
        self.log = log
        log.derived.create(f"CREATE TABLE IF NOT EXISTS {self.TABLE} (table_uuid TEXT NOT NULL, manifest_path TEXT "
                           f"NOT NULL, lengths TEXT NOT NULL, PRIMARY KEY (table_uuid, manifest_path))")

    def get(self, table_uuid: str, path: str) -> list[int] | None:
        rows = self.log.derived.query(f"SELECT lengths FROM {self.TABLE} WHERE table_uuid = ? AND manifest_path = ?",
                                      [table_uuid, path])
        if not rows:
            return None
        try:
            return [int(n) for n in rows[0][0].split(",")] if rows[0][0] else []
        except ValueError:
            return None  # a damaged row: the manifest is decoded instead

    def put_many(self, table_uuid: str, lengths: Mapping[str, Sequence[int]]) -> None:
        """Keep the lengths of manifests by path; a path longer than :data:`MAX_KEPT_PATH_BYTES` is left out (its
        manifest is decoded when merged), as PostgreSQL refuses index keys past about 2.7 KB."""
        rows = [(table_uuid, path, ",".join(map(str, ns))) for path, ns in lengths.items()
                if len(path.encode("utf-8")) <= MAX_KEPT_PATH_BYTES]
        if rows:
            self.log.derived.insert_missing(self.TABLE, ("table_uuid", "manifest_path", "lengths"), rows)
