"""Parquet data files: write Arrow data as Iceberg data files, and read a file's footer into a DataFile.

Layer: engine (I/O at the edge: reads and writes Parquet through pyarrow). Metrics follow
Iceberg Java: column sizes, value, null and NaN counts per leaf field id, lower and upper
bounds in the spec's binary form for primitive fields outside lists and maps (strings
and binary truncated to 16 characters or bytes by default, with a correct upper bound),
and split offsets from the row groups.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any, Callable, Iterable, Iterator, Mapping

import attrs
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from engine.errors import CorruptFileError, MissingFileError, StorageError, ValidationError, storage_error
from engine.ownership import refuse_catalog_database
from engine.model import types as T
from engine.model.data_file import DataFile
from engine.model.kept_values import KeptForObjects
from engine.model.expressions import BooleanExpression
from engine.model.metrics_evaluation import metrics_might_match
from engine.model.schema import Schema
from engine.model.sort_order import SortOrder
from storage.errors import FileError
from storage.files import LOCAL_FILES, FileIO
from engine.model.values import (
    to_bytes,
    truncate_lower_bound,
    truncate_upper_bound,
    uuid_bounds_order_alike,
    value_from_python,
)

DEFAULT_METRICS_MODE = "truncate(16)"
DEFAULT_MODE_PROPERTY = "write.metadata.metrics.default"
COLUMN_MODE_PREFIX = "write.metadata.metrics.column."
MAX_INFERRED_PROPERTY = "write.metadata.metrics.max-inferred-column-defaults"
MAX_INFERRED_COLUMN_DEFAULTS = 100
_TRUNCATE_MODE = re.compile(r"^truncate\((\d+)\)$")


@attrs.frozen(kw_only=True)
class LeafField:
    """A primitive field as Parquet stores it: one column chunk per row group."""

    field_id: int
    field_type: T.PrimitiveType
    in_repeated: bool


#: each recent schema's leaf fields (the same schema object writes, and describes, every file of a commit)
_LEAVES: KeptForObjects[Mapping[str, LeafField]] = KeptForObjects(64)


def _leaves(schema: Schema) -> Mapping[str, LeafField]:
    """Leaf fields keyed by their Parquet column path (Arrow's compliant nested naming); not to be changed."""
    return _LEAVES.get_or_make(schema, lambda: _schema_leaves(schema))


def _schema_leaves(schema: Schema) -> dict[str, LeafField]:
    out: dict[str, LeafField] = {}

    def visit(prefix: str, t: T.IcebergType, field_id: int, repeated: bool) -> None:
        if isinstance(t, T.StructType):
            for f in t.fields:
                visit(f"{prefix}.{f.name}" if prefix else f.name, f.field_type, f.field_id, repeated)
        elif isinstance(t, T.ListType):
            visit(f"{prefix}.list.element", t.element_type, t.element_id, True)
        elif isinstance(t, T.MapType):
            visit(f"{prefix}.key_value.key", t.key_type, t.key_id, True)
            visit(f"{prefix}.key_value.value", t.value_type, t.value_id, True)
        else:
            out[prefix] = LeafField(field_id=field_id, field_type=t, in_repeated=repeated)  # type: ignore[arg-type]

    visit("", schema.as_struct(), 0, False)
    return out


def _ids_by_path(arrow_schema: pa.Schema) -> dict[str, int]:
    """Parquet leaf paths to the field ids the file itself carries (empty when it carries none)."""
    out: dict[str, int] = {}

    def field_id(f: pa.Field) -> int | None:
        raw = (f.metadata or {}).get(b"PARQUET:field_id")
        return int(raw) if raw is not None else None

    def visit(prefix: str, f: pa.Field) -> None:
        path = f"{prefix}.{f.name}" if prefix else f.name
        t = f.type
        if pa.types.is_struct(t):
            for i in range(t.num_fields):
                visit(path, t.field(i))
        elif pa.types.is_list(t) or pa.types.is_large_list(t):
            visit(f"{path}.list", t.value_field)
        elif pa.types.is_map(t):
            visit(f"{path}.key_value", t.key_field)
            visit(f"{path}.key_value", t.item_field)
        else:
            fid = field_id(f)
            if fid is not None:
                out[path] = fid

    for f in arrow_schema:
        visit("", f)
    return out


def carries_field_ids(path: str, *, io: FileIO = LOCAL_FILES) -> bool:
    """Whether a Parquet file's columns carry Iceberg field ids (files from other writers often do not)."""
    refuse_catalog_database(path)
    try:
        with io.open_input(path) as source:
            return bool(_ids_by_path(pq.read_schema(source)))
    except FileError as e:
        raise storage_error(e, path) from e
    except (pa.ArrowInvalid, OSError) as e:
        raise CorruptFileError(f"Cannot read data file: {path} is not a readable Parquet file ({e})",
                               path=path) from e


def read_parquet_rows(path: str, *, io: FileIO = LOCAL_FILES) -> pa.Table:
    """The rows of a Parquet file given as input (the rows of an overwrite, the keys of a delete), or a typed error
    naming it: :class:`~engine.errors.MissingFileError` when there is no such file, ``CorruptFileError`` when it is
    not Parquet, ``StorageError`` when it cannot be read (a folder, say). A folder is never read as a dataset."""
    refuse_catalog_database(path)
    try:
        with io.open_input(path) as source:
            return pq.read_table(source)
    except FileError as e:
        raise storage_error(e, path) from e
    except (pa.ArrowInvalid, OSError) as e:
        raise CorruptFileError(f"Cannot read {path}: not a readable Parquet file ({e})", path=path) from e


def read_parquet_schema(path: str, *, io: FileIO = LOCAL_FILES) -> pa.Schema:
    """The Arrow schema of a Parquet file given as input, with :func:`read_parquet_rows`'s errors."""
    refuse_catalog_database(path)
    try:
        with io.open_input(path) as source:
            return pq.read_schema(source)
    except FileError as e:
        raise storage_error(e, path) from e
    except (pa.ArrowInvalid, OSError) as e:
        raise CorruptFileError(f"Cannot read {path}: not a readable Parquet file ({e})", path=path) from e


def parse_metrics_mode(text: str | None, fallback: str) -> str:
    """A metrics mode in its normal spelling (``none``, ``counts``, ``full``, ``truncate(N)`` with N > 0, any
    case), or ``fallback`` when ``text`` is None or not a valid mode (Java's MetricsConfig logs and ignores it)."""
    if text is None:
        return fallback
    mode = text.strip().lower()
    if mode in ("none", "counts", "full"):
        return mode
    m = _TRUNCATE_MODE.match(mode)
    return f"truncate({int(m.group(1))})" if m and int(m.group(1)) > 0 else fallback


def _ids_under(t: T.IcebergType) -> list[int]:
    out: list[int] = []
    if isinstance(t, T.StructType):
        for f in t.fields:
            out += [f.field_id] + _ids_under(f.field_type)
    elif isinstance(t, T.ListType):
        out += [t.element_id] + _ids_under(t.element_type)
    elif isinstance(t, T.MapType):
        out += [t.key_id] + _ids_under(t.key_type) + [t.value_id] + _ids_under(t.value_type)
    return out


def metrics_modes(properties: dict[str, str], schema: Schema, sort_order: SortOrder | None = None) -> dict[int, str]:
    """The metrics mode of every field id, as Java's ``MetricsConfig.forTable``: ``write.metadata.metrics.default``
    (truncate(16) when unset, or when unset only for the first ``write.metadata.metrics.max-inferred-column-defaults``
    top-level columns of a wider table, none for the rest); columns of the sort order's order-preserving fields
    at least truncate(16); then ``write.metadata.metrics.column.<full column name>`` (``l.element``, ``m.key``).
    An invalid mode falls back to the default."""
    configured = properties.get(DEFAULT_MODE_PROPERTY)
    inferred: set[int] = set()
    if configured is not None:
        default = parse_metrics_mode(configured, DEFAULT_METRICS_MODE)
    else:
        try:
            limit = int(properties.get(MAX_INFERRED_PROPERTY, MAX_INFERRED_COLUMN_DEFAULTS))
        except ValueError:
            limit = MAX_INFERRED_COLUMN_DEFAULTS
        limit = MAX_INFERRED_COLUMN_DEFAULTS if limit < 0 else limit
        if len(schema.columns) <= limit:
            default = DEFAULT_METRICS_MODE
        else:
            default = "none"
            for f in schema.columns[:limit]:
                inferred.update([f.field_id] + _ids_under(f.field_type))
    sorted_default = "truncate(16)" if default in ("none", "counts") else default
    sorted_ids = {f.source_id for f in (sort_order.fields if sort_order is not None else ())
                  if f.transform.preserves_order}
    modes: dict[int, str] = {}
    for fid in schema.index_by_id():
        mode = DEFAULT_METRICS_MODE if fid in inferred else default
        if fid in sorted_ids:
            mode = sorted_default
        override = properties.get(f"{COLUMN_MODE_PREFIX}{schema.find_column_name(fid)}")
        modes[fid] = mode if override is None else parse_metrics_mode(override, default)
    return modes


def _truncate_width(mode: str) -> int | None:
    m = _TRUNCATE_MODE.match(mode)
    return int(m.group(1)) if m else None


def _time_unit(stats: Any) -> str:
    """The time unit of a Parquet TIME or TIMESTAMP column ("microseconds" when not annotated)."""
    logical = stats.logical_type
    if logical is None or logical.type not in ("TIMESTAMP", "TIME"):
        return "microseconds"
    return str(json.loads(logical.to_json()).get("timeUnit", "microseconds"))


def _stat_value(stats: Any, is_min: bool, t: T.PrimitiveType) -> Any:
    """A Parquet statistics value (the min or the max) converted to icelog's canonical Python value for ``t``."""
    raw = stats.min_raw if is_min else stats.max_raw
    if isinstance(t, T.NANO_TIMESTAMPS):
        scale = {"milliseconds": 1_000_000, "microseconds": 1_000, "nanoseconds": 1}[_time_unit(stats)]
        return int(raw) * scale
    if isinstance(t, (T.TimestampType, T.TimestamptzType, T.TimeType)):
        unit = _time_unit(stats)
        if unit == "milliseconds":
            return int(raw) * 1000
        if unit == "nanoseconds":
            return None  # not exact in micros; leave the column unbounded
        return int(raw)
    if isinstance(t, T.DateType):
        return int(raw)
    if isinstance(t, T.UUIDType):
        import uuid as _uuid
        return _uuid.UUID(bytes=bytes(raw))
    if isinstance(t, T.StringType):
        return raw.decode("utf-8") if isinstance(raw, bytes) else str(raw)
    if isinstance(t, T.DecimalType):
        return value_from_python(t, stats.min if is_min else stats.max)
    if isinstance(t, (T.BinaryType, T.FixedType)):
        return bytes(raw)
    return value_from_python(t, raw)


@attrs.define
class _ColumnMetrics:
    """Column metrics summed over some row groups of a Parquet footer, by field id (bounds as canonical values)."""

    column_sizes: dict[int, int]
    value_counts: dict[int, int]
    null_counts: dict[int, int]
    lowers: dict[int, Any]
    uppers: dict[int, Any]
    no_bounds: set[int]
    split_offsets: list[int]


def _column_metrics(metadata: pq.FileMetaData, file_ids: dict[str, int], leaves: Mapping[str, LeafField],
                    row_groups: Iterable[int]) -> _ColumnMetrics:
    """:param file_ids: the file's own field ids by Parquet path (empty: match columns by the schema's names)"""
    by_id = {leaf.field_id: leaf for leaf in leaves.values()}

    column_sizes: dict[int, int] = {}
    value_counts: dict[int, int] = {}
    null_counts: dict[int, int] = {}
    lowers: dict[int, Any] = {}
    uppers: dict[int, Any] = {}
    no_bounds: set[int] = set()
    split_offsets: list[int] = []

    for rg_index in row_groups:
        rg = metadata.row_group(rg_index)
        first = rg.column(0) if rg.num_columns else None
        if first is not None:
            start = first.data_page_offset
            if first.has_dictionary_page and first.dictionary_page_offset:
                start = min(start, first.dictionary_page_offset)
            split_offsets.append(start)
        for c in range(rg.num_columns):
            col = rg.column(c)
            path_in_schema = col.path_in_schema
            fid = file_ids.get(path_in_schema) if file_ids else (
                leaves[path_in_schema].field_id if path_in_schema in leaves else None)
            if fid is None or fid not in by_id:
                continue
            leaf = by_id[fid]
            column_sizes[fid] = column_sizes.get(fid, 0) + col.total_compressed_size
            value_counts[fid] = value_counts.get(fid, 0) + col.num_values
            stats = col.statistics if col.is_stats_set else None
            if stats is not None and stats.has_null_count:
                null_counts[fid] = null_counts.get(fid, 0) + stats.null_count
            if leaf.in_repeated or fid in no_bounds:
                continue
            if stats is None or not stats.has_min_max:
                if stats is not None and stats.has_null_count and stats.null_count == col.num_values:
                    continue  # an all-null row group bounds nothing
                no_bounds.add(fid)
                continue
            try:
                lo = _stat_value(stats, True, leaf.field_type)
                hi = _stat_value(stats, False, leaf.field_type)
            except (ValueError, TypeError, ValidationError):
                no_bounds.add(fid)
                continue
            if lo is None or hi is None:
                no_bounds.add(fid)
                continue
            if isinstance(lo, float) and (math.isnan(lo) or math.isnan(hi)):
                no_bounds.add(fid)
                continue
            lowers[fid] = lo if fid not in lowers else min(lowers[fid], lo)
            uppers[fid] = hi if fid not in uppers else max(uppers[fid], hi)

    return _ColumnMetrics(column_sizes, value_counts, null_counts, lowers, uppers, no_bounds, split_offsets)


def matching_row_groups(metadata: pq.FileMetaData, arrow_schema: pa.Schema, schema: Schema,
                        row_filter: BooleanExpression) -> list[int] | None:
    """The row groups of a Parquet file whose statistics may hold rows matching ``row_filter`` (bound to
    ``schema``), judged as a file's metrics are; None when every row group may (or the file has only one, or
    carries no field ids to match its columns by).
    """
    file_ids = _ids_by_path(arrow_schema) if metadata.num_row_groups > 1 else {}
    if not file_ids:
        return None
    leaves = _leaves(schema)
    by_id = {leaf.field_id: leaf for leaf in leaves.values()}
    keep = []
    for rg_index in range(metadata.num_row_groups):
        m = _column_metrics(metadata, file_ids, leaves, [rg_index])
        lower, upper = {}, {}
        for fid in set(m.lowers) - m.no_bounds:
            try:
                lower[fid] = to_bytes(by_id[fid].field_type, m.lowers[fid])
                upper[fid] = to_bytes(by_id[fid].field_type, m.uppers[fid])
            except ValidationError:
                continue
        group = DataFile(file_path="", record_count=metadata.row_group(rg_index).num_rows, file_size_in_bytes=0,
                         value_counts=m.value_counts, null_value_counts=m.null_counts, lower_bounds=lower,
                         upper_bounds=upper)
        if metrics_might_match(row_filter, group, schema):
            keep.append(rg_index)
    return None if len(keep) == metadata.num_row_groups else keep


def read_data_file(path: str, schema: Schema, *, spec_id: int, partition: tuple[Any, ...],
                   properties: dict[str, str] | None = None, nan_counts: dict[int, int] | None = None,
                   sort_order_id: int | None = None, metadata: pq.FileMetaData | None = None,
                   file_size: int | None = None, sort_order: SortOrder | None = None,
                   io: FileIO = LOCAL_FILES) -> DataFile:
    """Build a DataFile for a Parquet file from its footer.

    :param path: the Parquet file
    :param schema: the table schema the file's columns map to (by field id, else by name)
    :param spec_id: the partition spec the file is written for
    :param partition: the file's partition tuple (canonical values)
    :param properties: table properties (metrics modes)
    :param nan_counts: NaN counts per field id when the writer knows them (footers do not carry them)
    :param metadata: the footer when already at hand (just written)
    :param sort_order: the order the file is sorted by (its columns get bounds even in none/counts modes)
    :param io: where the file is read from when its footer is not at hand
    """
    properties = properties or {}
    modes = metrics_modes(properties, schema, sort_order)
    refuse_catalog_database(path)
    try:
        if metadata is None:
            with io.open_input(path) as source:
                file_size = source.size() if file_size is None else file_size
                pf = pq.ParquetFile(source)
                metadata = pf.metadata
                arrow_schema = pf.schema_arrow
        else:
            if file_size is None:
                file_size = io.size(path)
            arrow_schema = metadata.schema.to_arrow_schema()
    except FileError as e:
        raise storage_error(e, path) from e
    except FileNotFoundError as e:
        raise MissingFileError(f"Cannot read data file: {path} does not exist", path=path) from e
    except (pa.ArrowInvalid, OSError) as e:
        raise CorruptFileError(f"Cannot read data file: {path} is not a readable Parquet file ({e})",
                               path=path) from e

    leaves = _leaves(schema)
    by_id = {leaf.field_id: leaf for leaf in leaves.values()}
    metrics = _column_metrics(metadata, _ids_by_path(arrow_schema), leaves, range(metadata.num_row_groups))
    column_sizes, value_counts, null_counts = metrics.column_sizes, metrics.value_counts, metrics.null_counts
    lowers, uppers, no_bounds, split_offsets = metrics.lowers, metrics.uppers, metrics.no_bounds, metrics.split_offsets

    lower_bounds: dict[int, bytes] = {}
    upper_bounds: dict[int, bytes] = {}
    for fid in sorted(set(lowers) - no_bounds):
        leaf = by_id[fid]
        mode = modes[fid]
        if mode in ("none", "counts"):
            continue
        width = _truncate_width(mode)
        lo, hi = lowers[fid], uppers[fid]
        if isinstance(leaf.field_type, T.UUIDType) and not uuid_bounds_order_alike(lo, hi):
            continue
        if width is not None and isinstance(leaf.field_type, (T.StringType, T.BinaryType)):
            lo = truncate_lower_bound(leaf.field_type, lo, width)
            hi = truncate_upper_bound(leaf.field_type, hi, width)
        if lo is not None:
            lower_bounds[fid] = to_bytes(leaf.field_type, lo)
        if hi is not None:
            upper_bounds[fid] = to_bytes(leaf.field_type, hi)

    def keep(counts: dict[int, int]) -> dict[int, int]:
        return {fid: n for fid, n in counts.items() if modes.get(fid) != "none"}

    return DataFile(
        file_path=path, file_format="PARQUET", spec_id=spec_id, partition=partition,
        record_count=metadata.num_rows, file_size_in_bytes=file_size,
        column_sizes=keep(column_sizes), value_counts=keep(value_counts), null_value_counts=keep(null_counts),
        nan_value_counts=keep(nan_counts or {}), lower_bounds=lower_bounds, upper_bounds=upper_bounds,
        split_offsets=tuple(split_offsets) or None, sort_order_id=sort_order_id,
    )


def nan_counts(table: pa.Table, schema: Schema) -> dict[int, int]:
    """NaN counts of the float and double fields outside lists and maps (footers do not record them)."""
    out: dict[int, int] = {}

    def visit(arr: pa.Array, t: T.IcebergType, fid: int) -> None:
        if isinstance(t, T.StructType):
            for f in t.fields:
                visit(pc.struct_field(arr, [f.name]), f.field_type, f.field_id)
        elif isinstance(t, (T.FloatType, T.DoubleType)):
            out[fid] = int(pc.sum(pc.is_nan(arr)).as_py() or 0)

    for f in schema.columns:
        if _holds_floats(f.field_type):  # (no column is combined only to find it has no float in it)
            visit(table.column(f.name).combine_chunks(), f.field_type, f.field_id)
    return out


def _holds_floats(t: T.IcebergType) -> bool:
    """Whether a float or double field is ``t`` or inside its structs (not inside lists or maps)."""
    if isinstance(t, T.StructType):
        return any(_holds_floats(f.field_type) for f in t.fields)
    return isinstance(t, (T.FloatType, T.DoubleType))


def iter_row_chunks(table: pa.Table, target_bytes: int) -> Iterator[pa.Table]:
    """Split a table into consecutive slices whose in-memory size stays near ``target_bytes``."""
    total = max(table.nbytes, 1)
    if total <= target_bytes or table.num_rows <= 1:
        yield table
        return
    parts = math.ceil(total / target_bytes)
    step = math.ceil(table.num_rows / parts)
    for start in range(0, table.num_rows, step):
        yield table.slice(start, step)


def statistics_columns(schema: Schema) -> list[str]:
    """The Parquet columns to write statistics for: all but uuid columns.

    Iceberg Java 1.10 compares uuids as signed longs (apache/iceberg#14216) and prunes row groups by their
    footer statistics, so a row group whose uuids span a sign bit would be skipped wrongly; without statistics
    (and so without bounds) Java reads it.
    """
    return [path for path, leaf in _leaves(schema).items()
            if not isinstance(leaf.field_type, (T.UUIDType, T.VariantType, T.UnknownType))]


#: how many leading rows of a column judge whether dictionary encoding pays (parquet-mr judges its first page)
DICTIONARY_SAMPLE_ROWS = 20_000
#: below this many rows every column keeps Arrow's default (a dictionary): the choice weighs nothing in a file so
#: small, and judging it would cost a small append more than its Parquet write
DICTIONARY_JUDGED_FROM_ROWS = 1_000


def dictionary_columns(table: pa.Table) -> list[str] | bool:
    """The Parquet column paths to dictionary-encode: a top-level column only when its dictionary would be
    smaller than its plain values, judged on its first rows as parquet-mr's fallback does (dictionary bytes plus
    bit-packed indices against the plain bytes); leaves inside structs, lists and maps always.

    Arrow's writer falls back to plain only once a dictionary outgrows its page limit, so a column of distinct
    doubles or ids would be written as a dictionary as large as the data, bigger and slower to read than Java's
    plain pages for every reader. True (every column) for a table of fewer than
    :data:`DICTIONARY_JUDGED_FROM_ROWS` rows."""
    if table.num_rows < DICTIONARY_JUDGED_FROM_ROWS:
        return True
    sample = table.slice(0, DICTIONARY_SAMPLE_ROWS)
    out: list[str] = []
    for field, column in zip(table.schema, sample.columns):
        t = field.type
        if pa.types.is_nested(t):
            out.extend(_leaf_paths(field.name, t))
        elif pa.types.is_dictionary(t) or _dictionary_pays(column):
            out.append(field.name)
    return out


def _leaf_paths(prefix: str, t: pa.DataType) -> list[str]:
    """The dotted Parquet paths of the leaves under a column of type ``t`` (lists written in the compliant form)."""
    if pa.types.is_struct(t):
        return [p for i in range(t.num_fields) for p in _leaf_paths(f"{prefix}.{t.field(i).name}", t.field(i).type)]
    if pa.types.is_map(t):
        return _leaf_paths(f"{prefix}.key_value.key", t.key_type) + \
            _leaf_paths(f"{prefix}.key_value.value", t.item_type)
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        return _leaf_paths(f"{prefix}.list.element", t.value_type)
    return [prefix]


def _dictionary_pays(column: pa.ChunkedArray) -> bool:
    values = len(column) - column.null_count
    if values == 0 or pa.types.is_boolean(column.type):
        return True
    try:
        if pa.types.is_string(column.type) or pa.types.is_binary(column.type) or \
                pa.types.is_large_string(column.type) or pa.types.is_large_binary(column.type):
            width = pc.sum(pc.binary_length(column)).as_py() / values + 4  # plain: a 4-byte length before each
        else:
            width = column.type.bit_width / 8
        distinct = pc.count_distinct(column, mode="only_valid").as_py()
    except (ValueError, AttributeError, pa.ArrowException):  # no fixed width, or not countable: Arrow's default
        return True
    index_bits = max(1, math.ceil(math.log2(distinct))) if distinct > 1 else 1
    return bool(distinct * width + values * index_bits / 8 < values * width)


#: the codecs of ``write.parquet.compression-codec`` pyarrow writes (Java's lzo is not among them)
PARQUET_CODECS = frozenset({"none", "snappy", "gzip", "brotli", "lz4", "zstd"})
DEFAULT_ROW_GROUP_BYTES = 128 * 1024 * 1024


def write_parquet(table: pa.Table, path: str, *, properties: dict[str, str], schema: Schema,
                  stage: Callable[[str], None] | None = None,
                  io: FileIO = LOCAL_FILES) -> tuple[pq.FileMetaData, int]:
    """Write one Parquet data file; returns its footer and size.

    :param stage: called with the path before anything is written (icelog records staged files, so the files of
        a job that fails before its commit are found as orphans without listing storage)
    :param io: where the file goes (a local path, or an S3 object that appears whole when the write completes)
    :raises FileError: the file cannot be written (naming it)
    """
    codec = properties.get("write.parquet.compression-codec", "zstd").strip().lower()
    codec = {"uncompressed": "none"}.get(codec, codec)
    if codec not in PARQUET_CODECS:
        raise ValidationError(f"Cannot write {path}: table property write.parquet.compression-codec is {codec!r}, "
                              f"not one of {', '.join(sorted(PARQUET_CODECS))}")
    try:
        row_group_bytes = int(properties.get("write.parquet.row-group-size-bytes", DEFAULT_ROW_GROUP_BYTES))
    except ValueError:  # refused where it is set; one a registered table came with falls back, as every integer
        row_group_bytes = DEFAULT_ROW_GROUP_BYTES
    if stage is not None:
        stage(path)
    rows_per_group = max(1, int(table.num_rows * row_group_bytes / max(table.nbytes, 1))) if table.num_rows else 1
    leaves = _leaves(schema).values()
    # columns of type unknown are never stored (format v3); readers give nulls
    unknown = [f.name for f in schema.fields if isinstance(f.field_type, T.UnknownType)]
    if unknown:
        table = table.drop_columns([name for name in unknown if name in table.column_names])
    # nanosecond columns keep their unit; every other timestamp is written in microseconds
    coerce = None if any(isinstance(leaf.field_type, T.NANO_TIMESTAMPS) for leaf in leaves) else "us"
    collector: list[pq.FileMetaData] = []
    try:
        with io.open_output(path) as sink:
            pq.write_table(table, sink, compression=codec, row_group_size=rows_per_group, version="2.6",
                           coerce_timestamps=coerce, allow_truncated_timestamps=False,
                           write_statistics=statistics_columns(schema),
                           use_compliant_nested_type=True, metadata_collector=collector, store_schema=False,
                           use_dictionary=dictionary_columns(table))
            size = sink.tell()
    except OSError as e:  # an S3 upload fails when the stream closes
        raise StorageError(f"Cannot write file: {path!r} ({e})", path=path) from e
    except FileError as e:
        raise storage_error(e, path) from e
    return collector[0], size
