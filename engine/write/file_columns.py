"""Files written elsewhere, checked before they are registered: whether a Parquet file reads as a table's schema
(:func:`check_file_columns`), and whether data file descriptions fit the table (:func:`check_data_files`).

Layer: engine (I/O at the edge: reads a Parquet footer through pyarrow). Imports engine.errors, engine.model and
engine.read.raw_file (its name-mapping helpers, so columns are matched exactly as a scan will match them).

A file's columns are matched to the table's fields by their ``PARQUET:field_id`` when the file carries ids, else
through the table's name mapping (``schema.name-mapping.default``, or the schema's current names), as
:mod:`engine.read.reader` does. Each matched column must hold a type the reader reads as the field's type without
losing values: the same type, or a promotion Iceberg allows (int to long, float to double, a decimal of the same
scale and a smaller precision), or another Arrow spelling of it (int8 / int16 and small unsigned integers for
int and long, large and view strings and binaries, dictionary encodings, any timestamp unit, a UTF-8 column
written without its annotation). Structs, lists and maps are checked field by field. A required field must be
in the file (inside structs that are there) and, by the footer's null counts, hold no null.

Usage::

    check_file_columns(path, table_schema, state.prop(NAME_MAPPING_PROPERTY))   # raises ValidationError
"""

from __future__ import annotations

from typing import Any, Callable, Collection, Sequence

import attrs

import pyarrow as pa
import pyarrow.parquet as pq

from engine.errors import CorruptFileError, ValidationError, storage_error
from engine.ownership import Ownership, refuse_catalog_database
from engine.model import types as T
from engine.model.arrow_schema import arrow_carries_field_ids, arrow_children, arrow_field_id
from engine.model.name_mapping import name_mapping
from engine.model.data_file import DataFile, DataFileContent
from engine.model.schema import Schema
from engine.model.values import value_from_python
from engine.state.table_state import TableState
from engine.read.raw_file import apply_name_mapping, parse_name_mapping
from storage.errors import FileError
from storage.files import LOCAL_FILES, FileIO

_INT = (pa.int8(), pa.int16(), pa.int32(), pa.uint8(), pa.uint16())
_LONG = (*_INT, pa.int64(), pa.uint32())
_STRINGS = (pa.string(), pa.large_string(), pa.string_view())
_BINARIES = (pa.binary(), pa.large_binary(), pa.binary_view())


def check_file_columns(path: str, schema: Schema, name_mapping_text: str | None = None, *,
                       io: FileIO = LOCAL_FILES) -> None:
    """Refuse a Parquet file whose columns the table's reader cannot read as ``schema``.

    :param path: the Parquet file
    :param schema: the table schema the file is registered under
    :param name_mapping_text: the table's ``schema.name-mapping.default`` (None: the schema's current names)
    :raises ValidationError: naming the file, the column and both types for a column of a type that does not
        read as the field's; naming the column for a required field the file lacks or holds nulls in
    :raises CorruptFileError: when the file is not a readable Parquet file
    """
    refuse_catalog_database(path)
    try:
        with io.open_input(path) as source:
            pf = pq.ParquetFile(source)
            file_schema, metadata = pf.schema_arrow, pf.metadata
    except FileError as e:
        raise storage_error(e, path) from e
    except (pa.ArrowException, OSError) as e:
        raise CorruptFileError(f"Cannot read data file: {path} is not a readable Parquet file ({e})",
                               path=path) from e
    if not arrow_carries_field_ids(file_schema):
        entries = parse_name_mapping(name_mapping_text)
        file_schema = apply_name_mapping(file_schema, entries if entries is not None else name_mapping(schema))
    required_leaves: dict[str, str] = {}  # Parquet column path -> column name, for required fields
    _check_struct(path, schema.fields, list(file_schema), "", "", True, required_leaves)
    _check_nulls(path, metadata, required_leaves)


def _check_struct(path: str, fields: tuple[T.NestedField, ...], file_fields: list[pa.Field], name_prefix: str,
                  parquet_prefix: str, all_required: bool, required_leaves: dict[str, str]) -> None:
    """Check the table ``fields`` against the file's fields at one struct level (the top level included).

    :param all_required: whether every struct enclosing this level is required (not inside a list or map
        either), so a required field here can never be null
    """
    by_id = {fid: f for f in file_fields if (fid := arrow_field_id(f)) is not None}
    for field in fields:
        name = f"{name_prefix}{field.name}"
        file_field = by_id.get(field.field_id)
        required = all_required and field.required
        if file_field is None:
            if required:
                raise ValidationError(f"Cannot append file {path}: it has no column {name!r}, which the table "
                                      f"requires ({field.field_type}, required)")
            continue
        parquet_path = f"{parquet_prefix}{file_field.name}"
        _check_type(path, field.field_type, file_field, name, parquet_path, required, required_leaves)


def _check_type(path: str, t: T.IcebergType, file_field: pa.Field, name: str, parquet_path: str,
                required: bool, required_leaves: dict[str, str]) -> None:
    ftype = file_field.type
    if pa.types.is_dictionary(ftype):
        ftype = ftype.value_type
    if isinstance(t, T.StructType):
        if not pa.types.is_struct(ftype):
            raise _mismatch(path, name, ftype, t)
        _check_struct(path, t.fields, arrow_children(ftype), f"{name}.", f"{parquet_path}.", required, required_leaves)
        return
    if isinstance(t, T.ListType):
        if not (pa.types.is_list(ftype) or pa.types.is_large_list(ftype)):
            raise _mismatch(path, name, ftype, t)
        element = ftype.value_field
        _check_type(path, t.element_type, element, f"{name}.element", f"{parquet_path}.list.{element.name}",
                    False, required_leaves)
        return
    if isinstance(t, T.MapType):
        if not pa.types.is_map(ftype):
            raise _mismatch(path, name, ftype, t)
        _check_type(path, t.key_type, ftype.key_field, f"{name}.key", f"{parquet_path}.key_value.key", False,
                    required_leaves)
        _check_type(path, t.value_type, ftype.item_field, f"{name}.value", f"{parquet_path}.key_value.value",
                    False, required_leaves)
        return
    if not reads_as(ftype, t):
        raise _mismatch(path, name, ftype, t)
    if required:
        required_leaves[parquet_path] = name


def _mismatch(path: str, name: str, ftype: pa.DataType, t: T.IcebergType) -> ValidationError:
    return ValidationError(f"Cannot append file {path}: column {name!r} is {_type_text(ftype)} in the file, which "
                           f"does not read as the table's {t}")


def _type_text(ftype: pa.DataType) -> str:
    if isinstance(ftype, pa.BaseExtensionType):
        return f"{ftype.extension_name} ({ftype.storage_type})"
    return str(ftype)


def reads_as(ftype: pa.DataType, t: T.IcebergType) -> bool:
    """Whether a file column of Arrow type ``ftype`` reads as the primitive Iceberg type ``t`` without losing or
    refusing values (a column of nulls reads as any type)."""
    if pa.types.is_dictionary(ftype):
        ftype = ftype.value_type
    if pa.types.is_null(ftype):
        return True
    if isinstance(ftype, pa.BaseExtensionType):
        if isinstance(t, T.UUIDType):
            return ftype.storage_type == pa.binary(16)
        ftype = ftype.storage_type
    if isinstance(t, T.BooleanType):
        return ftype == pa.bool_()
    if isinstance(t, T.IntegerType):
        return ftype in _INT
    if isinstance(t, T.LongType):
        return ftype in _LONG
    if isinstance(t, T.FloatType):
        return ftype == pa.float32()
    if isinstance(t, T.DoubleType):
        return ftype in (pa.float32(), pa.float64())
    if isinstance(t, T.DecimalType):
        return (pa.types.is_decimal(ftype) and ftype.scale == t.scale  # type: ignore[attr-defined]
                and ftype.precision <= t.precision)  # type: ignore[attr-defined]
    if isinstance(t, T.DateType):
        return pa.types.is_date(ftype)
    if isinstance(t, T.TimeType):
        return ftype in (pa.time32("ms"), pa.time64("us"))
    if isinstance(t, (T.TimestampType, T.TimestamptzType) + T.NANO_TIMESTAMPS):
        return pa.types.is_timestamp(ftype)
    if isinstance(t, T.VariantType):  # the unshredded (metadata, value) group
        return pa.types.is_struct(ftype) and {"metadata", "value"} <= {f.name for f in arrow_children(ftype)}
    if isinstance(t, T.StringType):
        return ftype in _STRINGS or ftype in _BINARIES  # Hive and Impala write strings without the UTF-8 mark
    if isinstance(t, T.BinaryType):
        return ftype in _BINARIES or ftype in _STRINGS
    if isinstance(t, T.FixedType):
        return ftype == pa.binary(t.length)
    if isinstance(t, T.UUIDType):
        return ftype == pa.binary(16)
    return False


def _check_nulls(path: str, metadata: Any, required_leaves: dict[str, str]) -> None:
    """Refuse nulls in required columns, counted by the footer's statistics (a chunk without them is trusted)."""
    if not required_leaves:
        return
    for rg_index in range(metadata.num_row_groups):
        rg = metadata.row_group(rg_index)
        for c in range(rg.num_columns):
            col = rg.column(c)
            name = required_leaves.get(col.path_in_schema)
            if name is None or not col.is_stats_set:
                continue
            stats = col.statistics
            if stats is not None and stats.has_null_count and stats.null_count > 0:
                raise ValidationError(f"Cannot append file {path}: column {name!r} is required, but the file holds "
                                      f"{stats.null_count} null(s) in it (row group {rg_index})")


def check_data_files(state: TableState, files: Sequence[DataFile], owned: Ownership, action: str) -> list[DataFile]:
    """Data files written outside icelog (``append_data_files`` and the like), checked against the table before
    anything is committed: owned location, the current spec, partition values, metrics of the schema's fields;
    returns them with their partition values in the spec's types."""
    spec, schema = state.spec, state.schema
    ids = set(schema.index_by_id())
    ptype = spec.partition_type(schema)
    seen: set[str] = set()
    out = []
    for f in files:
        if not isinstance(f, DataFile) or f.content != DataFileContent.DATA:
            raise ValidationError(f"Cannot {action}: expected data files (DataFile), got {f!r:.80}")
        key = owned.normalize(f.file_path)  # one spelling per file: file://, a relative path, a symlinked folder
        if key in seen:
            raise ValidationError(f"Cannot {action}: {f.file_path} is listed twice")
        seen.add(key)
        owned.check_new_file(f.file_path, action)
        if f.spec_id != spec.spec_id:
            raise ValidationError(f"Cannot {action}: {f.file_path} is written for spec {f.spec_id}, the "
                                  f"table's spec is {spec.spec_id}")
        if len(f.partition) != len(ptype.fields):
            raise ValidationError(f"Cannot {action}: {f.file_path} has {len(f.partition)} partition value(s), "
                                  f"spec {spec.spec_id} has {len(ptype.fields)} field(s)")
        try:
            partition = tuple(value_from_python(pf.field_type, v) for pf, v in zip(ptype.fields, f.partition))
        except ValidationError as e:
            raise ValidationError(f"Cannot {action}: {f.file_path} has a bad partition value ({e})") from e
        unknown = sorted({k for pairs in (f.column_sizes, f.value_counts, f.null_value_counts,
                                          f.lower_bounds, f.upper_bounds) for k, _ in (pairs or ())} - ids)
        if unknown:
            raise ValidationError(f"Cannot {action}: {f.file_path} has metrics for field id(s) "
                                  f"{unknown[:5]} not in schema {schema.schema_id}")
        if f.record_count < 0 or f.file_size_in_bytes < 0:
            raise ValidationError(f"Cannot {action}: {f.file_path} has a negative record count or size")
        out.append(attrs.evolve(f, partition=partition) if partition != f.partition else f)
    return out


def refuse_live_files(paths: Sequence[str], live: Collection[str], canonical: Callable[[str], str], table: str,
                      branch: str, action: str, *, meanwhile: bool = False) -> None:
    """Refuse files already live in a branch (``live``: their canonical paths): appending one again would make every
    reader count its rows twice.

    :param meanwhile: the check runs inside the commit (the file was made live by a commit that landed meanwhile)
    :raises ValidationError: naming the first such file
    """
    for path in paths:
        if canonical(path) in live:
            how = ", appended by a commit that landed meanwhile" if meanwhile else ""
            raise ValidationError(f"Cannot {action}: {path} is already in table {table} (branch {branch}){how}; "
                                  f"appending it again would count its rows twice")
