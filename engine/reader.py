"""Read data files into Arrow in the shape of a table schema: columns matched by field id.

Layer: engine (I/O at the edge: reads Parquet through pyarrow). A column renamed since the
file was written is found by its id; a column added later reads as nulls; a promoted type
is cast. Files written without field ids are matched by name.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq

from engine.errors import CorruptFileError
from engine.model.arrow_schema import schema_to_arrow
from engine.model.data_file import DataFile
from engine.model.schema import Schema

FIELD_ID = b"PARQUET:field_id"


def _field_id(f: pa.Field) -> int | None:
    raw = (f.metadata or {}).get(FIELD_ID)
    return int(raw) if raw is not None else None


def read_data_file(data_file: DataFile, schema: Schema) -> pa.Table:
    """The rows of ``data_file`` with ``schema``'s top-level columns (names, order, types)."""
    path = data_file.file_path
    try:
        table = pq.read_table(path)
    except FileNotFoundError as e:
        raise CorruptFileError(f"Cannot read data file: {path} does not exist", path=path) from e
    except (pa.ArrowInvalid, OSError) as e:
        raise CorruptFileError(f"Cannot read data file: {path} is not a readable Parquet file ({e})", path=path) from e
    by_id = {fid: i for i, f in enumerate(table.schema) if (fid := _field_id(f)) is not None}
    by_name = {f.name: i for i, f in enumerate(table.schema)} if not by_id else {}
    target = schema_to_arrow(schema)
    columns = []
    for field, arrow_field in zip(schema.columns, target):
        index = by_id.get(field.field_id) if by_id else by_name.get(field.name)
        if index is None:
            columns.append(pa.nulls(table.num_rows, type=arrow_field.type))
            continue
        col = table.column(index)
        if col.type != arrow_field.type:
            try:
                col = col.cast(arrow_field.type)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
                raise CorruptFileError(f"Cannot read data file {path}: column {field.name!r} of type {col.type} "
                                       f"does not read as {field.field_type} ({e})", path=path) from e
        columns.append(col)
    return pa.Table.from_arrays(columns, schema=target)
