"""Deletion vectors (format version 3): ``deletion-vector-v1`` blobs of Puffin files, read and written.

Layer: engine (pure encoding and decoding of the blob bytes; reading a blob goes through storage.files.FileIO).
A deletion vector marks the deleted row positions of one data file (``referenced_data_file``) as a 64-bit
Roaring bitmap in the portable serialization (``pyroaring.BitMap64``). The manifest entry of a vector names its
Puffin file (``file_path``, format ``PUFFIN``), where its blob starts (``content_offset``) and how long it is
(``content_size_in_bytes``); ``record_count`` is the number of deleted positions. A blob is:

- 4 bytes: the length of the magic and the vector together, big-endian;
- 4 bytes: the magic ``D1 D3 39 64``;
- the vector: the portable serialization of the bitmap;
- 4 bytes: the CRC-32 of the magic and the vector, big-endian.

Any disagreement (a short blob, a wrong length, magic or checksum, a bitmap that does not decode, a cardinality
other than the entry's ``record_count``) raises :class:`CorruptFileError` naming the Puffin file.
"""

from __future__ import annotations

import json
import struct
import zlib
from collections.abc import Iterable, Sequence

import pyarrow as pa
from pyroaring import BitMap64

from engine.errors import CorruptFileError
from engine.model.data_file import DataFile
from storage.files import LOCAL_FILES, FileIO

#: the magic that starts every ``deletion-vector-v1`` blob's vector
VECTOR_MAGIC = b"\xd1\xd3\x39\x64"
#: the Puffin blob type of a deletion vector
BLOB_TYPE = "deletion-vector-v1"
#: the magic that starts and ends a Puffin file and starts its footer
PUFFIN_MAGIC = b"PFA1"
#: the field id a deletion vector's blob names: the reserved ``_pos`` column
POS_FIELD_ID = 2147483645
_LENGTH = struct.Struct(">I")
_FOOTER_SIZE = struct.Struct("<ii")  # the footer payload's length, then the flags (0: the payload is not compressed)


def encode_vector(positions: Iterable[int]) -> bytes:
    """The blob bytes of a deletion vector deleting ``positions`` (row positions in one data file)."""
    body = VECTOR_MAGIC + BitMap64(positions).serialize()
    return _LENGTH.pack(len(body)) + body + _LENGTH.pack(zlib.crc32(body))


def encode_puffin(vectors: Sequence[tuple[str, Sequence[int]]], created_by: str) -> tuple[bytes, list[tuple[int, int]]]:
    """A Puffin file holding one deletion vector per data file, and each blob's (offset, length).

    :param vectors: (referenced data file, deleted positions) per blob, in the order to write them
    :param created_by: the footer's ``created-by`` property
    """
    out = bytearray(PUFFIN_MAGIC)
    blobs, spans = [], []
    for referenced, positions in vectors:
        blob = encode_vector(positions)
        spans.append((len(out), len(blob)))
        blobs.append({"type": BLOB_TYPE, "fields": [POS_FIELD_ID], "snapshot-id": -1, "sequence-number": -1,
                      "offset": len(out), "length": len(blob),
                      "properties": {"referenced-data-file": referenced, "cardinality": str(len(set(positions)))}})
        out += blob
    footer = json.dumps({"blobs": blobs, "properties": {"created-by": created_by}}, separators=(",", ":"))
    payload = footer.encode("utf-8")
    out += PUFFIN_MAGIC + payload + _FOOTER_SIZE.pack(len(payload), 0) + PUFFIN_MAGIC
    return bytes(out), spans


def decode_vector(blob: bytes, where: str) -> BitMap64:
    """The bitmap of a ``deletion-vector-v1`` blob.

    :param where: the blob's Puffin file and offset, named in errors
    :raises CorruptFileError: when the blob is not a well-formed deletion vector
    """
    def corrupt(why: str) -> CorruptFileError:
        return CorruptFileError(f"Cannot read deletion vector {where}: {why}", path=where.split("#", 1)[0])

    if len(blob) < 12:
        raise corrupt(f"the blob is {len(blob)} bytes, shorter than any deletion vector")
    (length,) = _LENGTH.unpack_from(blob, 0)
    if length != len(blob) - 8:
        raise corrupt(f"its length field says {length} bytes, the blob holds {len(blob) - 8}")
    body = blob[4:-4]
    if body[:4] != VECTOR_MAGIC:
        raise corrupt(f"the magic is {body[:4].hex()}, not {VECTOR_MAGIC.hex()}")
    (crc,) = _LENGTH.unpack_from(blob, len(blob) - 4)
    if zlib.crc32(body) != crc:
        raise corrupt(f"the checksum is {crc:08x}, the bytes give {zlib.crc32(body):08x}")
    try:
        return BitMap64.deserialize(body[4:])
    except (ValueError, OverflowError, MemoryError) as e:
        raise corrupt(f"the bitmap does not decode ({e})") from e


def read_vector(vector: DataFile, *, io: FileIO = LOCAL_FILES) -> pa.Array:
    """The deleted positions (int64, ascending) of a deletion vector's manifest entry (its blob alone is read).

    :raises CorruptFileError: when the blob cannot be read, is malformed, or its cardinality is not the entry's
        ``record_count``
    """
    where = vector.key
    offset, size = vector.content_offset, vector.content_size_in_bytes
    if offset is None or size is None or offset < 0 or size < 0:
        raise CorruptFileError(f"Cannot read deletion vector {where}: its manifest entry has no content offset "
                               f"and size", path=vector.file_path)
    try:
        with io.open_input(vector.file_path) as f:
            blob = f.read_at(size, offset)
    except (OSError, ValueError) as e:
        raise CorruptFileError(f"Cannot read deletion vector {where}: {type(e).__name__}: {e}",
                               path=vector.file_path) from e
    if len(blob) != size:
        raise CorruptFileError(f"Cannot read deletion vector {where}: the Puffin file ends {size - len(blob)} bytes "
                               f"before the blob does", path=vector.file_path)
    bitmap = decode_vector(bytes(blob), where)
    if len(bitmap) != vector.record_count:
        raise CorruptFileError(f"Cannot read deletion vector {where}: it deletes {len(bitmap)} rows, its manifest "
                               f"entry says {vector.record_count}", path=vector.file_path)
    return pa.array(bitmap.to_array(), pa.uint64()).cast(pa.int64())
