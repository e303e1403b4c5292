"""Data and delete files, manifest entries and manifest-list records as frozen values.

Layer: engine.model (pure values). These are the facts Iceberg keeps in manifests;
icelog keeps them in the log (snapshot events) and projections render them to Avro.
Metric maps are tuples of ``(field_id, value)`` pairs sorted by field id; bounds are
the spec's single-value binary serialization (Appendix D).

Format version 3 adds four fields: a data file's ``first_row_id`` (row lineage) and, for a deletion
vector (a ``deletion-vector-v1`` blob in a Puffin file), ``referenced_data_file``, ``content_offset``
and ``content_size_in_bytes``. One Puffin file holds many vectors, so a file's identity in a snapshot
is :attr:`DataFile.key`, not its path.
"""

from __future__ import annotations

import base64
from enum import IntEnum
from typing import Any

import attrs

from engine.errors import ValidationError


class DataFileContent(IntEnum):
    DATA = 0
    POSITION_DELETES = 1
    EQUALITY_DELETES = 2


class ManifestContent(IntEnum):
    DATA = 0
    DELETES = 1


class EntryStatus(IntEnum):
    EXISTING = 0
    ADDED = 1
    DELETED = 2


def _pairs(value: Any) -> tuple[tuple[int, Any], ...] | None:
    if value is None:
        return None
    items = value.items() if isinstance(value, dict) else value
    return tuple(sorted((int(k), v) for k, v in items))


@attrs.frozen(kw_only=True)
class DataFile:
    """One data or delete file with its partition tuple and metrics.

    :param partition: partition values in the order of the spec's fields (Python values, see engine.model.values)
    """

    file_path: str
    file_format: str = "PARQUET"
    spec_id: int = 0
    partition: tuple[Any, ...] = attrs.field(default=(), converter=tuple)
    record_count: int
    file_size_in_bytes: int
    content: DataFileContent = attrs.field(default=DataFileContent.DATA, converter=DataFileContent)
    column_sizes: tuple[tuple[int, int], ...] | None = attrs.field(default=None, converter=_pairs)
    value_counts: tuple[tuple[int, int], ...] | None = attrs.field(default=None, converter=_pairs)
    null_value_counts: tuple[tuple[int, int], ...] | None = attrs.field(default=None, converter=_pairs)
    nan_value_counts: tuple[tuple[int, int], ...] | None = attrs.field(default=None, converter=_pairs)
    lower_bounds: tuple[tuple[int, bytes], ...] | None = attrs.field(default=None, converter=_pairs)
    upper_bounds: tuple[tuple[int, bytes], ...] | None = attrs.field(default=None, converter=_pairs)
    split_offsets: tuple[int, ...] | None = attrs.field(default=None, converter=attrs.converters.optional(tuple))
    equality_ids: tuple[int, ...] | None = attrs.field(default=None, converter=attrs.converters.optional(tuple))
    sort_order_id: int | None = None
    key_metadata: bytes | None = None
    #: v3 row lineage: the ``_row_id`` of the file's first row (data files; None before v3 or not assigned)
    first_row_id: int | None = None
    #: v3 deletion vectors (and v2 position delete files that name one data file): the data file it applies to
    referenced_data_file: str | None = None
    #: v3 deletion vectors: where the blob starts in the Puffin file, and its length
    content_offset: int | None = None
    content_size_in_bytes: int | None = None

    @property
    def is_deletion_vector(self) -> bool:
        """A v3 deletion vector: a blob inside a Puffin file, not a whole file."""
        return self.content == DataFileContent.POSITION_DELETES and self.file_format.upper() == "PUFFIN"

    @property
    def key(self) -> str:
        """The file's identity among a snapshot's files: its path, or for a deletion vector its Puffin file's path
        and the blob's offset (one Puffin file holds the vectors of many data files)."""
        return self.file_path if self.content_offset is None else blob_key(self.file_path, self.content_offset)


def blob_key(path: str, content_offset: int) -> str:
    """The identity of a blob at ``content_offset`` inside the file at ``path`` (see :attr:`DataFile.key`)."""
    return f"{path}#{content_offset}"


def deletion_vector_problem(f: DataFile) -> str | None:
    """What keeps a Puffin entry from being a well-formed deletion vector (None for one that is, or for a file that is
    not Puffin): position deletes with a referenced data file, a content offset and a size."""
    if f.file_format.upper() != "PUFFIN":
        return None
    if f.content != DataFileContent.POSITION_DELETES:
        return f"a Puffin file holds deletion vectors, not {f.content.name.lower()}"
    missing = [name for name, v in (("referenced data file", f.referenced_data_file),
                                    ("content offset", f.content_offset),
                                    ("content size", f.content_size_in_bytes)) if v is None]
    return f"a deletion vector without a {', '.join(missing)}" if missing else None


@attrs.frozen(kw_only=True)
class ManifestEntry:
    """A file's entry in a manifest. ``None`` snapshot id / sequence numbers mean inherited (ADDED entries)."""

    status: EntryStatus = attrs.field(converter=EntryStatus)
    snapshot_id: int | None
    data_sequence_number: int | None
    file_sequence_number: int | None
    data_file: DataFile


@attrs.frozen(kw_only=True)
class LiveEntry:
    """A file live in a snapshot, with what its manifest entry would say of it (sequence numbers and snapshot
    explicit: what the log says, nothing inherited)."""

    file: DataFile
    data_sequence_number: int
    file_sequence_number: int
    snapshot_id: int


@attrs.frozen(kw_only=True)
class FieldSummary:
    """Summary of one partition field over a manifest's entries; bounds are Appendix D bytes."""

    contains_null: bool
    contains_nan: bool | None = None
    lower_bound: bytes | None = None
    upper_bound: bytes | None = None


@attrs.frozen(kw_only=True, cache_hash=True)
class ManifestFile:
    """One record of a manifest list."""

    manifest_path: str
    manifest_length: int
    partition_spec_id: int
    content: ManifestContent = attrs.field(default=ManifestContent.DATA, converter=ManifestContent)
    sequence_number: int
    min_sequence_number: int
    added_snapshot_id: int
    added_files_count: int
    existing_files_count: int
    deleted_files_count: int
    added_rows_count: int
    existing_rows_count: int
    deleted_rows_count: int
    partitions: tuple[FieldSummary, ...] | None = attrs.field(default=None, converter=attrs.converters.optional(tuple))
    key_metadata: bytes | None = None
    #: v3: the first ``_row_id`` assigned to the manifest's data files that have none of their own (data manifests)
    first_row_id: int | None = None


def _b64(b: bytes | None) -> str | None:
    return None if b is None else base64.b64encode(b).decode("ascii")


def _unb64(s: str | None) -> bytes | None:
    return None if s is None else base64.b64decode(s)


def data_file_to_json(f: DataFile, partition_json: list[Any]) -> dict[str, Any]:
    """Canonical JSON of a data file for the log. ``partition_json`` is the partition tuple already made JSON-safe."""
    return {
        "content": int(f.content),
        "file-path": f.file_path,
        "file-format": f.file_format,
        "spec-id": f.spec_id,
        "partition": partition_json,
        "record-count": f.record_count,
        "file-size-in-bytes": f.file_size_in_bytes,
        "column-sizes": None if f.column_sizes is None else [[k, v] for k, v in f.column_sizes],
        "value-counts": None if f.value_counts is None else [[k, v] for k, v in f.value_counts],
        "null-value-counts": None if f.null_value_counts is None else [[k, v] for k, v in f.null_value_counts],
        "nan-value-counts": None if f.nan_value_counts is None else [[k, v] for k, v in f.nan_value_counts],
        "lower-bounds": None if f.lower_bounds is None else [[k, _b64(v)] for k, v in f.lower_bounds],
        "upper-bounds": None if f.upper_bounds is None else [[k, _b64(v)] for k, v in f.upper_bounds],
        "split-offsets": None if f.split_offsets is None else list(f.split_offsets),
        "equality-ids": None if f.equality_ids is None else list(f.equality_ids),
        "sort-order-id": f.sort_order_id,
        "key-metadata": _b64(f.key_metadata),
        **_v3_json(f),
    }


def _v3_json(f: DataFile) -> dict[str, Any]:
    """The v3 fields, each only when set: parts written before format version 3 keep their bytes."""
    values = {"first-row-id": f.first_row_id, "referenced-data-file": f.referenced_data_file,
              "content-offset": f.content_offset, "content-size-in-bytes": f.content_size_in_bytes}
    return {k: v for k, v in values.items() if v is not None}


def data_file_from_json(obj: dict[str, Any], partition: tuple[Any, ...]) -> DataFile:
    """Inverse of :func:`data_file_to_json`; ``partition`` is the already-decoded partition tuple."""
    try:
        def pairs(key: str, conv: Any = None) -> Any:
            v = obj.get(key)
            if v is None:
                return None
            return tuple((int(k), conv(x) if conv else int(x)) for k, x in v)

        return DataFile(
            content=obj["content"], file_path=obj["file-path"], file_format=obj["file-format"],
            spec_id=obj["spec-id"], partition=partition, record_count=obj["record-count"],
            file_size_in_bytes=obj["file-size-in-bytes"], column_sizes=pairs("column-sizes"),
            value_counts=pairs("value-counts"), null_value_counts=pairs("null-value-counts"),
            nan_value_counts=pairs("nan-value-counts"), lower_bounds=pairs("lower-bounds", _unb64),
            upper_bounds=pairs("upper-bounds", _unb64), split_offsets=obj.get("split-offsets"),
            equality_ids=obj.get("equality-ids"), sort_order_id=obj.get("sort-order-id"),
            key_metadata=_unb64(obj.get("key-metadata")), first_row_id=obj.get("first-row-id"),
            referenced_data_file=obj.get("referenced-data-file"), content_offset=obj.get("content-offset"),
            content_size_in_bytes=obj.get("content-size-in-bytes"),
        )
    except KeyError as e:
        raise ValidationError(f"Cannot parse data file: missing key {e.args[0]!r}") from e
