"""File blocks: each snapshot event's file changes in a compact binary form, kept in a derived SQLite table.

Layer: engine (reads and writes its own derived table in the storage log's SQLite file; decodes with
engine.state.events' JSON conventions and engine.model). Derived, disposable and rebuildable: a block holds nothing
the event's bulk parts do not, a missing, stale or damaged block is rebuilt from those parts, and dropping the
table only makes the next plan slower.

A snapshot event's bulk parts are canonical JSON, one text per file change: exact, but a plan that needs
100,000 files would parse 100,000 JSON texts. A block holds the same changes column by column in ``marshal``
form (tuples, ints, strings and bytes only, identical metric pairs shared), so loading a commit's files is one
C-level decode, and ``DataFile`` values are built only for the files a plan keeps. Each block has two halves:

- the *head* (small, read for every commit a cold plan considers): counts of added data and delete files,
  per partition spec the partition summaries of the added data files (Iceberg's manifest-list field
  summaries: null and NaN flags, lower and upper bounds in Appendix D bytes), an 8-byte digest of every added
  path, the removed paths, and whether the added paths are new to the log; a plan skips a commit whose
  summaries rule its filter out without reading the body at all, as a reader of Iceberg manifest lists skips
  whole manifests;
- the *body*: added paths, contents, spec ids, partition tuples (as the log's JSON values, each distinct tuple
  once), explicit data sequence numbers, and the rest of each ``DataFile`` column by column.

Blocks are written in the same transaction as the commit that adds the snapshot (``engine.operations.commit``),
and rebuilt from the log when a reader finds one missing. A derived registry of the digests of every path the
log's commits added lets a commit's head say "these paths are new" (kept only while no commit was missed since
the log began; a rebuilt block never says so); when every commit of a snapshot's history says so, its adds are
known distinct without comparing them. Each half carries a CRC-32 and the table a format
number; a block whose format differs or whose checksum or shape does not match is never used: it is rebuilt
from the log (and stored again when the log is writable).
"""

from __future__ import annotations

import binascii
import hashlib
import json
import marshal
import math
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

import attrs

from engine.errors import ValidationError
from engine.model.data_file import DataFile, DataFileContent, FieldSummary, blob_key
from engine.model.types import DoubleType, FloatType, StructType
from engine.model.values import to_bytes, value_from_json, value_to_json
from storage.errors import LogError

#: Bumped whenever the encoding changes: blocks of another format are rebuilt, never read.
FORMAT = 2
TABLE = "file_blocks"
#: the digest of every path the log's commits added, and the position through which that registry is complete
PATHS_TABLE = "file_block_paths"
PATHS_THROUGH_TABLE = "file_block_paths_through"
#: The ``DataFile`` fields a block stores column by column after path, content, spec id and partition, in order.
REST_FIELDS = ("file_format", "record_count", "file_size_in_bytes", "column_sizes", "value_counts",
               "null_value_counts", "nan_value_counts", "lower_bounds", "upper_bounds", "split_offsets",
               "equality_ids", "sort_order_id", "key_metadata", "first_row_id", "referenced_data_file",
               "content_offset", "content_size_in_bytes")
#: the column of REST_FIELDS holding ``content_offset`` (a deletion vector's key is its path and offset)
OFFSET_COLUMN = REST_FIELDS.index("content_offset")
_ALL_FIELDS = {"file_path", "content", "spec_id", "partition", *REST_FIELDS}
if {a.name for a in attrs.fields(DataFile)} != _ALL_FIELDS:  # pragma: no cover - a guard for model changes
    raise ImportError("engine.read.file_blocks: DataFile's fields changed; update REST_FIELDS and FORMAT")
_CONTENTS = {int(c): c for c in DataFileContent}


def path_digest(path: str) -> bytes:
    """The 8-byte digest of a file path a block head lists (equal digests are a hint, never a proof)."""
    return hashlib.blake2b(path.encode("utf-8", "surrogatepass"), digest_size=8).digest()


@attrs.frozen(kw_only=True)
class BlockHead:
    """What a cold plan reads of every commit: enough to skip the commit without reading its files.

    :param data_adds: data files the commit added
    :param delete_adds: delete files the commit added
    :param summaries: per spec id, one :class:`FieldSummary` per partition field over the added data files
    :param digests: 8 bytes per added file (data and delete; the digest of its ``DataFile.key``), in the body's
        row order
    :param removed: keys of the files the commit removed (``DataFile.key``: the path, or a deletion vector's
        path and offset)
    :param fresh: True when, as the commit was written, no commit before it in the log had added any of its paths
        (so the adds of a snapshot's history are all distinct when every commit in it is fresh)
    """

    data_adds: int
    delete_adds: int
    summaries: Mapping[int, tuple[FieldSummary, ...]]
    digests: bytes
    removed: tuple[str, ...]
    fresh: bool = False


@attrs.frozen(kw_only=True)
class BlockBody:
    """A commit's added files column by column (row ``i`` of each column is the ``i``-th added file).

    :param paths: file paths
    :param contents: ``DataFileContent`` codes, one byte per file
    :param spec_ids: partition spec ids
    :param partition_keys: index into ``partitions`` per file
    :param partitions: distinct ``(spec id, partition)`` pairs, the partition as the log's JSON values (a float as
        ``("f", repr(value))``, so that 0.0 and -0.0, equal but distinct partition values, keep apart)
    :param sequence_numbers: explicit data sequence numbers (None: the snapshot's), or None when none is explicit
    :param rest: one tuple per field of :data:`REST_FIELDS`
    """

    paths: tuple[str, ...]
    contents: bytes
    spec_ids: tuple[int, ...]
    partition_keys: tuple[int, ...]
    partitions: tuple[tuple[int, tuple[Any, ...]], ...]
    sequence_numbers: tuple[int | None, ...] | None
    rest: tuple[tuple[Any, ...], ...]


# ---------------------------------------------------------------- encoding


def _order_key(v: Any) -> Any:
    return (v, math.copysign(1.0, v)) if isinstance(v, float) else v


def _summaries(values: list[tuple[Any, ...]], ptype: StructType) -> tuple[FieldSummary, ...]:
    out = []
    for i, field in enumerate(ptype.fields):
        column = [p[i] if i < len(p) else None for p in values]
        is_float = isinstance(field.field_type, (FloatType, DoubleType))
        present = [v for v in column if v is not None and not (is_float and math.isnan(v))]
        lower = upper = None
        if present:
            lower = to_bytes(field.field_type, min(present, key=_order_key))
            upper = to_bytes(field.field_type, max(present, key=_order_key))
        out.append(FieldSummary(contains_null=any(v is None for v in column),
                                contains_nan=is_float and any(v is not None and math.isnan(v) for v in column),
                                lower_bound=lower, upper_bound=upper))
    return tuple(out)


#: one file change as a block takes it: (added, path (a removal: the file's key), content, spec id, partition as
#: JSON values, the REST_FIELDS values, explicit data sequence number or None)
_Row = tuple[bool, str, DataFileContent, int, tuple[Any, ...], list[Any], "int | None"]


def _rows_of_parts(texts: Sequence[str], partition_types: Mapping[int, StructType]) -> Iterator[_Row]:
    for text in texts:
        try:
            obj = json.loads(text)
            j = obj["file"]
            path, spec_id, raw = j["file-path"], j["spec-id"], tuple(j["partition"])
            content = _CONTENTS[j["content"]]
            if type(path) is not str or type(spec_id) is not int:
                raise ValueError("file-path or spec-id")
            if obj["change"] != "add":
                offset = j.get("content-offset")
                yield False, path if offset is None else blob_key(path, offset), content, spec_id, raw, [], None
                continue
            # the columns as data_file_from_json and DataFile's converters would make them
            values = [j["file-format"], j["record-count"], j["file-size-in-bytes"]]
            # (the log's pairs come from DataFile values, whose converters sorted them by field id)
            for k in ("column-sizes", "value-counts", "null-value-counts", "nan-value-counts"):
                v = j.get(k)
                values.append(None if v is None else tuple(map(tuple, v)))
            for k in ("lower-bounds", "upper-bounds"):
                v = j.get(k)
                values.append(None if v is None else tuple((a, binascii.a2b_base64(x)) for a, x in v))
            for k in ("split-offsets", "equality-ids"):
                v = j.get(k)
                values.append(None if v is None else tuple(v))
            values.append(j.get("sort-order-id"))
            km = j.get("key-metadata")
            values.append(None if km is None else binascii.a2b_base64(km))
            values += [j.get("first-row-id"), j.get("referenced-data-file"), j.get("content-offset"),
                       j.get("content-size-in-bytes")]
            if values[0] is None or values[1] is None:
                raise ValueError("file-format or record-count")
            sequence_number = obj.get("data-sequence-number")
            if len(raw) != len(partition_types[spec_id].fields):
                raise ValueError(f"partition has {len(raw)} values, spec {spec_id} has another number of fields")
        except (LookupError, ValueError, TypeError, binascii.Error) as e:
            raise ValidationError(f"Cannot decode file change: {text[:200]!r} ({e})") from e
        yield True, path, content, spec_id, raw, values, sequence_number


def _rows_of_changes(changes: Sequence[Any], partition_types: Mapping[int, StructType]) -> Iterator[_Row]:
    for change in changes:
        f = change.file
        try:
            fields = partition_types[f.spec_id].fields
        except KeyError as e:
            raise ValidationError(f"Cannot encode file change of {f.file_path}: no partition spec {f.spec_id}") from e
        if len(f.partition) != len(fields):
            raise ValidationError(f"Cannot encode file change of {f.file_path}: partition {f.partition!r}")
        # the partition's JSON values exactly as FileChange.encode writes them into the part
        raw = tuple(None if v is None else value_to_json(t.field_type, v) for t, v in zip(fields, f.partition))
        if not change.added:
            yield False, f.key, f.content, f.spec_id, raw, [], None
            continue
        values = [f.file_format, f.record_count, f.file_size_in_bytes, f.column_sizes, f.value_counts,
                  f.null_value_counts, f.nan_value_counts, f.lower_bounds, f.upper_bounds, f.split_offsets,
                  f.equality_ids, f.sort_order_id, f.key_metadata, f.first_row_id, f.referenced_data_file,
                  f.content_offset, f.content_size_in_bytes]
        yield True, f.file_path, f.content, f.spec_id, raw, values, getattr(change, "data_sequence_number", None)


def encode_block(texts: Sequence[str], partition_types: Mapping[int, StructType],
                 claim_paths: Callable[[bytes], bool] | None = None) -> tuple[bytes, bytes]:
    """The head and body bytes of a snapshot event's bulk parts (decoded with the log's own JSON decoder).

    :param texts: the event's bulk parts, in ordinal order
    :param partition_types: the partition struct of every spec id the parts name
    :param claim_paths: given the packed digests of the added paths, says whether no earlier commit added any of
        them (:meth:`BlockTable.claim_paths`); None: not known, the head says so
    :raises ValidationError: when a part does not decode
    """
    return _encode(_rows_of_parts(texts, partition_types), partition_types, claim_paths)


def encode_changes(changes: Sequence[Any], partition_types: Mapping[int, StructType],
                   claim_paths: Callable[[bytes], bool] | None = None) -> tuple[bytes, bytes]:
    """:func:`encode_block` of a snapshot event's ``FileChange`` values (the same block as from the parts they
    encode to, without parsing them back: what a commit uses).

    :raises ValidationError: when a change does not fit its spec
    """
    return _encode(_rows_of_changes(changes, partition_types), partition_types, claim_paths)


def _encode(rows: Iterable[_Row], partition_types: Mapping[int, StructType],
            claim_paths: Callable[[bytes], bool] | None) -> tuple[bytes, bytes]:
    # equal values (metric pairs, whole metric tuples, formats) become one object: marshal writes it once
    shared: dict[Any, Any] = {}
    share = shared.setdefault

    paths: list[str] = []
    contents = bytearray()
    spec_ids: list[int] = []
    keys: list[int] = []
    partition_index: dict[tuple[int, tuple[Any, ...]], int] = {}
    partitions: list[tuple[int, tuple[Any, ...]]] = []
    sequence_numbers: list[int | None] = []
    rest: list[list[Any]] = [[] for _ in REST_FIELDS]
    removed: list[str] = []
    deletes = 0
    data_keys: set[int] = set()
    for added, path, content, spec_id, raw, values, sequence_number in rows:
        if not added:
            removed.append(path)
            continue
        if not (sequence_number is None or type(sequence_number) is int):
            raise ValidationError(f"Cannot encode file change of {path}: data sequence number {sequence_number!r}")
        # floats by their text, so that 0.0 and -0.0 (equal, distinct partition values) keep apart
        key = tuple(("f", repr(v)) if type(v) is float else v for v in raw)
        try:
            at = partition_index.get((spec_id, key))
            if at is None:
                at = partition_index[(spec_id, key)] = len(partitions)
                partitions.append((spec_id, key))
            for column, v in zip(rest, values):
                if type(v) is tuple:
                    v = tuple([share(x, x) for x in v])
                    v = share(v, v)
                elif type(v) is str:
                    v = share(v, v)
                column.append(v)
        except TypeError as e:  # an unhashable value where the log holds numbers and strings
            raise ValidationError(f"Cannot encode file change of {path} ({e})") from e
        paths.append(path)
        contents.append(int(content))
        spec_ids.append(spec_id)
        keys.append(at)
        sequence_numbers.append(sequence_number)
        if content is DataFileContent.DATA:
            data_keys.add(at)
        else:
            deletes += 1
    typed: dict[int, list[tuple[Any, ...]]] = {}
    for at in sorted(data_keys):
        spec_id, key = partitions[at]
        fields = partition_types[spec_id].fields
        try:
            typed.setdefault(spec_id, []).append(tuple(
                None if v is None else value_from_json(t.field_type, float(v[1]) if type(v) is tuple else v)
                for t, v in zip(fields, key)))
        except (ValueError, TypeError, ValidationError) as e:
            raise ValidationError(f"Cannot decode partition {key!r} of spec {spec_id} ({e})") from e
    try:
        summaries = tuple((spec_id, tuple((s.contains_null, s.contains_nan, s.lower_bound, s.upper_bound)
                                          for s in _summaries(values, partition_types[spec_id])))
                          for spec_id, values in sorted(typed.items()))
    except (ValueError, TypeError, ValidationError) as e:
        raise ValidationError(f"Cannot summarize partitions of a commit's files ({e})") from e
    offsets = rest[OFFSET_COLUMN]
    digests = b"".join(path_digest(p if o is None else blob_key(p, o)) for p, o in zip(paths, offsets))
    fresh = claim_paths is not None and claim_paths(digests)
    try:
        head = marshal.dumps((len(paths) - deletes, deletes, summaries, digests, tuple(removed), fresh))
        body = marshal.dumps((tuple(paths), bytes(contents), tuple(spec_ids), tuple(keys), tuple(partitions),
                              None if all(s is None for s in sequence_numbers) else tuple(sequence_numbers),
                              tuple(tuple(c) for c in rest)))
    except ValueError as e:  # a value marshal cannot write (not a number, string, bytes or tuple of those)
        raise ValidationError(f"Cannot encode a commit's files ({e})") from e
    return head, body


# ---------------------------------------------------------------- decoding


class BlockError(ValueError):
    """A stored block that must not be used (wrong format, bad checksum, unexpected shape)."""


def _load(blob: bytes, crc: int) -> Any:
    if zlib.crc32(blob) != crc:
        raise BlockError("checksum mismatch")
    try:
        return marshal.loads(blob)
    except (EOFError, ValueError, TypeError) as e:
        raise BlockError(f"cannot unmarshal ({e})") from e


def _check(ok: bool, what: str) -> None:
    if not ok:
        raise BlockError(what)


def decode_head(blob: bytes, crc: int) -> BlockHead:
    """A block's head from its stored bytes. :raises BlockError: when it must not be used"""
    v = _load(blob, crc)
    _check(type(v) is tuple and len(v) == 6, "head shape")
    data_adds, delete_adds, summaries, digests, removed, fresh = v
    _check(type(fresh) is bool, "fresh flag")
    _check(type(data_adds) is int and type(delete_adds) is int and data_adds >= 0 and delete_adds >= 0, "counts")
    _check(type(digests) is bytes and len(digests) == 8 * (data_adds + delete_adds), "digests")
    _check(type(removed) is tuple and all(type(p) is str for p in removed), "removed paths")
    _check(type(summaries) is tuple, "summaries")
    by_spec: dict[int, tuple[FieldSummary, ...]] = {}
    for item in summaries:
        _check(type(item) is tuple and len(item) == 2 and type(item[0]) is int and type(item[1]) is tuple, "summary")
        fields = []
        for s in item[1]:
            _check(type(s) is tuple and len(s) == 4 and type(s[0]) is bool and type(s[1]) is bool
                   and all(b is None or type(b) is bytes for b in s[2:]), "field summary")
            fields.append(FieldSummary(contains_null=s[0], contains_nan=s[1], lower_bound=s[2], upper_bound=s[3]))
        by_spec[item[0]] = tuple(fields)
    return BlockHead(data_adds=data_adds, delete_adds=delete_adds, summaries=by_spec, digests=digests,
                     removed=removed, fresh=fresh)


def decode_body(blob: bytes, crc: int, head: BlockHead) -> BlockBody:
    """A block's body from its stored bytes. :raises BlockError: when it must not be used"""
    v = _load(blob, crc)
    _check(type(v) is tuple and len(v) == 7, "body shape")
    paths, contents, spec_ids, keys, partitions, sequence_numbers, rest = v
    n = head.data_adds + head.delete_adds
    _check(type(paths) is tuple and len(paths) == n, "paths")
    _check(type(contents) is bytes and len(contents) == n and contents.count(0) == head.data_adds
           and max(contents, default=0) <= max(_CONTENTS), "contents")
    _check(type(spec_ids) is tuple and len(spec_ids) == n, "spec ids")
    _check(type(partitions) is tuple, "partitions")
    _check(type(keys) is tuple and len(keys) == n
           and (not keys or (min(keys) >= 0 and max(keys) < len(partitions))), "partition keys")
    _check(sequence_numbers is None or (type(sequence_numbers) is tuple and len(sequence_numbers) == n),
           "sequence numbers")
    _check(type(rest) is tuple and len(rest) == len(REST_FIELDS)
           and all(type(c) is tuple and len(c) == n for c in rest), "columns")
    return BlockBody(paths=paths, contents=contents, spec_ids=spec_ids, partition_keys=keys, partitions=partitions,
                     sequence_numbers=sequence_numbers, rest=rest)


# ---------------------------------------------------------------- the table


class BlockTable:
    """The derived ``file_blocks`` table beside the catalog's log (SQLite or PostgreSQL), keyed by the snapshot
    event's log position.

    ::

        blocks = BlockTable(log)
        blocks.put(position, *encode_block(parts, partition_types))
        heads = blocks.heads([position])        # {position: (head bytes, crc)}; absent rows left out

    :param log: the catalog's event log (``storage.Log``)
    """

    def __init__(self, log: Any) -> None:
        self.log = log
        self._ready = False

    def _create(self) -> bool:
        if not self._ready:
            derived = self.log.derived
            try:
                derived.create(
                    f"CREATE TABLE IF NOT EXISTS {TABLE} (position INTEGER PRIMARY KEY, format INTEGER NOT NULL, "
                    f"head_crc INTEGER NOT NULL, body_crc INTEGER NOT NULL, head BLOB NOT NULL, body BLOB NOT NULL)")
                derived.create(f"CREATE TABLE IF NOT EXISTS {PATHS_TABLE} (digest INTEGER PRIMARY KEY, "
                               f"position INTEGER NOT NULL)")
                derived.create(f"CREATE TABLE IF NOT EXISTS {PATHS_THROUGH_TABLE} "
                               f"(one INTEGER PRIMARY KEY CHECK (one = 1), position INTEGER NOT NULL)")
                self._ready = True
            except LogError:
                return False
        return True

    # -- the path registry: every path digest added by the log's commits, so a commit can tell it adds new paths
    def paths_through(self) -> int:
        """The log position through which every commit's added paths are registered (0: none, or not kept)."""
        if not self._create():
            return -1
        rows = self.log.derived.query(f"SELECT position FROM {PATHS_THROUGH_TABLE}")
        return 0 if not rows else int(rows[0][0])

    def set_paths_through(self, position: int) -> None:
        self.log.derived.upsert(PATHS_THROUGH_TABLE, ("one",), {"one": 1, "position": position})

    def claim_paths(self, digests: bytes, position: int) -> bool:
        """Register the digests of paths a commit at ``position`` adds; True when none was registered before and
        they are distinct (within the caller's transaction)."""
        values = [int.from_bytes(digests[i:i + 8], "little", signed=True) for i in range(0, len(digests), 8)]
        derived = self.log.derived
        seen = derived.query(f"SELECT count(*) FROM {PATHS_TABLE} WHERE {derived.one_of('digest')}",
                             [derived.list_value(values)])[0][0]
        derived.insert_missing(PATHS_TABLE, ("digest", "position"), [(v, position) for v in values])
        return bool(seen == 0 and len(set(values)) == len(values))

    def _select(self, columns: str, positions: Iterable[int]) -> list[tuple[Any, ...]]:
        if not self._create():
            return []
        derived = self.log.derived
        try:
            return derived.query(f"SELECT position, format, {columns} FROM {TABLE} WHERE {derived.one_of('position')}",
                                 [derived.list_value(list(positions))])
        except LogError:
            return []

    def heads(self, positions: Iterable[int]) -> dict[int, tuple[bytes, int]]:
        """The stored heads (bytes, CRC-32) of the current format, by position."""
        return {p: (blob, crc) for p, fmt, crc, blob in self._select("head_crc, head", positions) if fmt == FORMAT}

    def blocks(self, positions: Iterable[int]) -> dict[int, tuple[bytes, int, bytes, int]]:
        """The stored heads and bodies (head, head CRC, body, body CRC) of the current format, by position."""
        return {p: (head, hcrc, body, bcrc)
                for p, fmt, hcrc, bcrc, head, body in self._select("head_crc, body_crc, head, body", positions)
                if fmt == FORMAT}

    def put_many(self, rows: Iterable[tuple[int, bytes, bytes]]) -> None:
        """Store blocks ``(position, head, body)``, replacing what was there (inside the caller's transaction
        when there is one)."""
        if not self._create():
            return
        values = [(p, FORMAT, zlib.crc32(h), zlib.crc32(b), h, b) for p, h, b in rows]
        self.log.derived.upsert_many(TABLE, ("position",), ("position", "format", "head_crc", "body_crc", "head",
                                                            "body"), values)

    def drop(self) -> None:
        """Delete every block and the path registry (blocks are rebuilt from the log as plans need them)."""
        if self._create():
            derived = self.log.derived
            with derived.transaction():
                for table in (TABLE, PATHS_TABLE, PATHS_THROUGH_TABLE):
                    derived.execute(f"DELETE FROM {table}")
