"""Write Arrow data as Iceberg data files: check it against the table schema, split it by partition, write Parquet.

Layer: engine (I/O at the edge: writes data files under the table's data folder). The
files it writes are staged, not committed: the caller commits them in one snapshot, and a
failure before that leaves only orphans (no metadata points at them).
"""

from __future__ import annotations

import uuid
from typing import Any, Callable

import pyarrow as pa
import pyarrow.compute as pc

from engine.errors import ValidationError
from engine.ownership import refuse_catalog_database
from engine.model import types as T
from engine.model.arrow_schema import schema_to_arrow
from engine.model.data_file import DataFile
from engine.model.partitioning import PartitionSpec, partition_path
from engine.model.schema import LINEAGE_FIELD_IDS, Schema
from engine.model.values import value_from_python
from engine.model.variant import as_variant_storage
from engine.formats.parquet_files import (
    iter_row_chunks,
    nan_counts,
    read_data_file,
    write_parquet,
)
from engine.read.reader import default_column, lineage_field
from engine.write.sort_rows import sort_table
from engine.state.table_state import TableState
from projections import layout
from storage.errors import FileError
from storage.files import LOCAL_FILES, FileIO

DEFAULT_TARGET_FILE_SIZE = 512 * 1024 * 1024


def conform(data: pa.Table, schema: Schema, *, keep_lineage: bool = False, action: str = "append") -> pa.Table:
    """``data`` cast to the table schema's Arrow form (with field ids), or a ValidationError naming the column.

    :param action: what the caller is doing, as its errors say it ("Cannot overwrite: ...")
    :param keep_lineage: rows carried over by a rewrite of a v3 table: their ``_row_id`` and
        ``_last_updated_sequence_number`` columns (as the reader returns them) stay, last, with their reserved field
        ids, so the rewritten file keeps each row's lineage; users' data never has them
    """
    if not isinstance(data, pa.Table):
        if isinstance(data, pa.RecordBatch):
            data = pa.Table.from_batches([data])
        else:
            raise ValidationError(f"Cannot {action}: expected a pyarrow.Table, got {type(data).__name__}")
    target = schema_to_arrow(schema)
    known = {f.name for f in schema.columns}
    lineage = [name for name in LINEAGE_FIELD_IDS if keep_lineage and name in data.column_names and name not in known]
    extra = [name for name in data.column_names if name not in known and name not in lineage]
    if extra:
        raise ValidationError(f"Cannot {action}: column(s) {', '.join(map(repr, extra))} are not in the table schema "
                              f"({', '.join(sorted(known))})")
    columns = []
    for field, arrow_field in zip(schema.columns, target):
        if field.name not in data.column_names:
            if field.required and field.write_default is None:
                raise ValidationError(f"Cannot {action}: required column {field.name!r} is missing")
            columns.append(default_column(field, arrow_field.type, data.num_rows, field.write_default))
            continue
        col = data.column(field.name)
        if isinstance(field.field_type, T.StructType) and col.type != arrow_field.type:
            col = _fill_struct_defaults(col, field.field_type, arrow_field.type, field.name, action)
        try:
            if isinstance(field.field_type, T.VariantType):
                try:
                    col = as_variant_storage(col)
                except ValidationError as e:
                    raise ValidationError(f"Cannot {action}: column {field.name!r}: {e}") from e
            col = col.cast(arrow_field.type, safe=True) if col.type != arrow_field.type else col
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as e:
            raise ValidationError(f"Cannot {action}: column {field.name!r} of type {col.type} does not fit "
                                  f"{field.field_type} ({e})") from e
        if field.required and col.null_count:
            raise ValidationError(f"Cannot {action}: required column {field.name!r} has {col.null_count} null(s)")
        columns.append(col)
    out = pa.Table.from_arrays(columns, schema=target)
    for name in lineage:
        out = out.append_column(lineage_field(name), data.column(name).cast(pa.int64()))
    return out


def _fill_struct_defaults(col: pa.ChunkedArray | pa.Array, struct: T.StructType, arrow_type: pa.StructType,
                          where: str, action: str) -> pa.ChunkedArray | pa.Array:
    """A struct column with the fields the data lacks filled in: their write default, else nulls (a required
    field without a default is refused). Fields are matched by name, at any depth of structs."""
    if not pa.types.is_struct(col.type):
        return col  # the cast names the mismatch
    given = {col.type.field(i).name for i in range(col.type.num_fields)}
    extra = given - {f.name for f in struct.fields}
    if extra:
        raise ValidationError(f"Cannot {action}: field(s) {', '.join(map(repr, sorted(extra)))} of column {where!r} are "
                              "not in the table schema")
    if isinstance(col, pa.ChunkedArray):
        return pa.chunked_array([_fill_struct_defaults(c, struct, arrow_type, where, action) for c in col.chunks],
                                type=arrow_type if col.num_chunks == 0 else None)
    children = []
    for nf, af in zip(struct.fields, arrow_type):
        if nf.name not in given:
            if nf.required and nf.write_default is None:
                raise ValidationError(f"Cannot {action}: required field {where}.{nf.name} is missing")
            children.append(default_column(nf, af.type, len(col), nf.write_default))
            continue
        child = col.field(nf.name)
        if isinstance(nf.field_type, T.StructType):
            child = _fill_struct_defaults(child, nf.field_type, af.type, f"{where}.{nf.name}", action)
        children.append(child)
    mask = col.is_null() if col.null_count else None
    return pa.StructArray.from_arrays(children, names=[af.name for af in arrow_type], mask=mask)


def _column(table: pa.Table, schema: Schema, source_id: int) -> tuple[Any, T.IcebergType]:
    name = schema.find_column_name(source_id)
    parts = name.split(".")
    arr: Any = table.column(parts[0]).combine_chunks()
    for p in parts[1:]:
        arr = pc.struct_field(arr, [p])
    return arr, schema.find_field(source_id).field_type


def partition_keys(table: pa.Table, schema: Schema, spec: PartitionSpec) -> list[pa.Array]:
    """One array per partition field: the transform of its source column, row by row."""
    out = []
    for pf in spec.fields:
        arr, source_type = _column(table, schema, pf.source_id)
        try:
            out.append(pf.transform.bind_arrow(source_type)(arr))
        except (pa.ArrowInvalid, ValueError, OverflowError, TypeError, ValidationError) as e:
            raise ValidationError(f"Cannot partition column {schema.find_column_name(pf.source_id)!r} by "
                                  f"{pf.transform}: {e}") from e
    return out


def split_by_partition(table: pa.Table, schema: Schema, spec: PartitionSpec) -> list[tuple[tuple[Any, ...], pa.Table]]:
    """The rows of ``table`` grouped by partition tuple (canonical values), in order of first appearance."""
    if spec.is_unpartitioned or table.num_rows == 0:
        return [((), table)] if table.num_rows else []
    # Arrow cannot group by extension types (uuid): group by their storage, the same bytes
    # Arrow cannot group by extension types (uuid): group by their storage, the same bytes; dates are read as
    # their day numbers (Iceberg's value), which also holds days past Python's year 9999
    keys = [k.storage if isinstance(k.type, pa.BaseExtensionType) else
            k.cast(pa.int32()) if pa.types.is_date32(k.type) else k for k in partition_keys(table, schema, spec)]
    ptype = spec.partition_type(schema)
    names = [f"k{i}" for i in range(len(keys))]
    index = pa.table(keys + [pa.array(range(table.num_rows), type=pa.int64())], names=names + ["row"])
    grouped = index.group_by(names, use_threads=False).aggregate([("row", "list"), ("row", "min")])
    grouped = grouped.sort_by([("row_min", "ascending")])
    out = []
    for i in range(grouped.num_rows):
        try:
            values = tuple(
                None if (v := grouped.column(n)[i].as_py()) is None else value_from_python(f.field_type, v)
                for n, f in zip(names, ptype.fields))
        except (OverflowError, ValueError) as e:
            raise ValidationError(f"Cannot partition rows: a partition value is out of range ({e})") from e
        rows = grouped.column("row_list")[i].values
        out.append((values, table.take(rows)))
    return out


def write_data_files(state: TableState, data: pa.Table, *, stage: Callable[[str], None] | None = None,
                     io: FileIO = LOCAL_FILES, keep_lineage: bool = False, action: str = "append") -> list[DataFile]:
    """Write ``data`` as Parquet data files of the table (one or more per partition) and describe them.

    :param keep_lineage: write the ``_row_id`` and ``_last_updated_sequence_number`` columns ``data`` carries (v3
        rows that keep their lineage; see :func:`conform`)
    :param action: the operation writing them, as errors about the rows name it (``overwrite``, ``upsert``, ...)
    """
    schema, spec = state.schema, state.spec
    table = conform(data, schema, keep_lineage=keep_lineage, action=action)
    if not state.sort_order.is_unsorted:
        table = sort_table(table, state.sort_order, schema)
    files: list[DataFile] = []
    for values, rows in split_by_partition(table, schema, spec):
        files += write_partition_files(state, rows, spec=spec, partition=values, stage=stage, io=io)
    return files


def write_partition_files(state: TableState, rows: pa.Table, *, spec: PartitionSpec, partition: tuple[Any, ...],
                          stage: Callable[[str], None] | None = None, data_folder: str | None = None,
                          io: FileIO = LOCAL_FILES) -> list[DataFile]:
    """Write rows that all belong to one partition of ``spec`` (already conformed to the schema), split by the
    target file size.

    :param data_folder: the folder under which partition folders are made (default: the table's data folder; a
        distributed job passes its own staged job folder under it)
    """
    schema = state.schema
    props = dict(state.properties)
    target = state.int_property("write.target-file-size-bytes", DEFAULT_TARGET_FILE_SIZE)
    folder = data_folder.rstrip("/") if data_folder is not None else layout.data_dir(state.location)
    if not spec.is_unpartitioned:
        folder = f"{folder}/{partition_path(spec, schema, partition, state.partition_type_of(spec))}"
    write_id = uuid.uuid4()
    files = []
    for chunk_index, chunk in enumerate(iter_row_chunks(rows, target)):
        path = f"{folder}/{chunk_index:05d}-{write_id}.parquet"
        footer, size = write_parquet(chunk, path, properties=props, schema=schema, stage=stage, io=io)
        files.append(read_data_file(path, schema, spec_id=spec.spec_id, partition=partition, properties=props,
                                    nan_counts=nan_counts(chunk, schema), sort_order_id=state.default_sort_order_id,
                                    metadata=footer, file_size=size, sort_order=state.sort_order))
    return files


def partition_of_file(path: str, schema: Schema, spec: PartitionSpec, *, io: FileIO = LOCAL_FILES
                      ) -> tuple[Any, ...]:
    """The one partition tuple of an existing data file, computed from its rows (ValidationError when its rows span
    several partitions)."""
    import pyarrow.parquet as pq

    from engine.errors import CorruptFileError, storage_error

    refuse_catalog_database(path)
    try:
        with io.open_input(path) as source:
            table = pq.read_table(source)
    except FileError as e:
        raise storage_error(e, path) from e
    except (pa.ArrowInvalid, OSError) as e:
        raise CorruptFileError(f"Cannot read data file: {path} is not a readable Parquet file ({e})", path=path) from e
    groups = split_by_partition(conform(table, schema), schema, spec)
    if len(groups) > 1:
        raise ValidationError(f"Cannot append file {path}: its rows span {len(groups)} partitions of spec "
                              f"{spec.spec_id}")
    return groups[0][0] if groups else tuple(None for _ in spec.fields)
