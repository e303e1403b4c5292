"""Write row-level delete files: position deletes and equality deletes, as Parquet under the table's data folder.

Layer: engine (I/O at the edge: writes Parquet through engine.formats.parquet_files). Like data files, the delete files
written here are staged, not committed: the caller adds them to a snapshot. A position delete file holds the
spec's reserved columns ``file_path`` (field id 2147483546) and ``pos`` (2147483545), sorted by path then
position, with full metrics on both (as Iceberg Java writes them), so a file that deletes rows of one data file
has equal lower and upper ``file_path`` bounds. An equality delete file holds the table's equality columns with
their field ids; those columns must be primitive, not float or double, and not inside a list or map. A
position delete file of a table copied elsewhere is rewritten with its ``file_path`` values relocated
(:func:`relocate_position_deletes`, used by ``register_table(..., relocate=...)``).
"""

from __future__ import annotations

import uuid
from typing import Any, Callable, Mapping, Sequence

import attrs
import pyarrow as pa
import pyarrow.parquet as pq

from engine.formats.deletion_vectors import encode_puffin
from engine.errors import CorruptFileError, ValidationError, storage_error
from engine.model.paths import normalize_path
from engine.ownership import refuse_catalog_database
from engine.model import types as T
from engine.model.arrow_schema import schema_to_arrow
from engine.model.data_file import DataFile, DataFileContent
from engine.model.partitioning import partition_path
from engine.model.schema import Schema
from engine.formats.parquet_files import nan_counts, read_data_file, write_parquet
from engine.read.reader import (
    DELETE_FILE_PATH,
    DELETE_FILE_PATH_ID,
    DELETE_POS,
    DELETE_POS_ID,
    DeleteLoader,
)
from engine.state.table_state import TableState
from projections import layout
from storage.errors import FileError
from storage.files import LOCAL_FILES, FileIO

#: what icelog's Puffin files say wrote them
CREATED_BY = "icelog"
#: The schema of a position delete file without deleted row values.
POSITION_DELETE_SCHEMA = Schema((
    T.NestedField(field_id=DELETE_FILE_PATH_ID, name=DELETE_FILE_PATH, field_type=T.StringType(), required=True),
    T.NestedField(field_id=DELETE_POS_ID, name=DELETE_POS, field_type=T.LongType(), required=True),
))


def _folder(state: TableState, spec_id: int, partition: tuple[Any, ...], action: str) -> str:
    try:
        spec = state.spec_by_id(spec_id)
    except ValidationError as e:
        raise ValidationError(f"Cannot write {action}: no partition spec with id {spec_id}") from e
    if len(partition) != len(spec.fields):
        raise ValidationError(f"Cannot write {action}: partition {partition!r} has {len(partition)} value(s) for "
                              f"{len(spec.fields)} field(s) of spec {spec_id}")
    folder = layout.data_dir(state.location)
    if not spec.is_unpartitioned:
        folder = f"{folder}/{partition_path(spec, state.schema, tuple(partition), state.partition_type_of(spec))}"
    return f"{folder}/00000-0-{uuid.uuid4()}-00001-deletes.parquet"


def _check_version(state: TableState, action: str) -> None:
    if state.format_version < 2:
        raise ValidationError(f"Cannot write {action}: table {state.location} is format version "
                              f"{state.format_version} (row-level deletes need version 2)")


def write_position_deletes(state: TableState, deletes: Mapping[str, Sequence[int]], *, spec_id: int,
                           partition: tuple[Any, ...], stage: Callable[[str], None] | None = None,
                           io: FileIO = LOCAL_FILES) -> DataFile:
    """Write one position delete file that deletes, for each data file path, the rows at the given positions.

    ::

        f = write_position_deletes(state, {data_file.file_path: [0, 7]}, spec_id=data_file.spec_id,
                                   partition=data_file.partition)

    :param deletes: data file path (as its manifest entry spells it) -> row positions, from 0
    :param spec_id: the partition spec of the data files the deletes refer to
    :param partition: their partition tuple (canonical values)
    :raises ValidationError: for a v1 table, no positions, a negative position, or an unknown spec
    """
    action = "position deletes"
    _check_version(state, action)
    if state.format_version >= 3:
        raise ValidationError(f"Cannot write {action}: table {state.location} is format version 3, which takes "
                              f"deletion vectors instead of new position delete files (write_row_deletes)")
    paths: list[str] = []
    positions: list[int] = []
    for path, rows in deletes.items():
        for pos in _row_numbers(rows, path, action):
            paths.append(path)
            positions.append(pos)
    if not paths:
        raise ValidationError(f"Cannot write {action}: no positions given")
    target = schema_to_arrow(POSITION_DELETE_SCHEMA)
    table = pa.Table.from_arrays([pa.array(paths, pa.string()), pa.array(positions, pa.int64())], schema=target)
    table = table.sort_by([(DELETE_FILE_PATH, "ascending"), (DELETE_POS, "ascending")])
    path = _folder(state, spec_id, partition, action)
    props = dict(state.properties)
    # Java writes full metrics for both columns, whatever the table's metrics mode
    props[f"write.metadata.metrics.column.{DELETE_FILE_PATH}"] = "full"
    props[f"write.metadata.metrics.column.{DELETE_POS}"] = "full"
    footer, size = write_parquet(table, path, properties=props, schema=POSITION_DELETE_SCHEMA, stage=stage, io=io)
    described = read_data_file(path, POSITION_DELETE_SCHEMA, spec_id=spec_id, partition=tuple(partition),
                               properties=props, metadata=footer, file_size=size)
    return attrs.evolve(described, content=DataFileContent.POSITION_DELETES)


def _row_numbers(rows: Sequence[int], path: str, action: str) -> Sequence[int]:
    """``rows`` checked to be row positions (integers from 0) of the data file at ``path``."""
    for pos in rows:
        if isinstance(pos, bool) or not isinstance(pos, int) or pos < 0:
            raise ValidationError(f"Cannot write {action}: position {pos!r} of {path} is not a row number")
    return rows


#: how many data files one v2 position delete file may name: ``file`` (one) or ``partition`` (all of a partition)
DELETE_GRANULARITY_PROPERTY = "write.delete.granularity"


def write_row_deletes(state: TableState, deletes: Mapping[str, Sequence[int]], *, spec_id: int,
                      partition: tuple[Any, ...], previous: Mapping[str, Sequence[DataFile]] | None = None,
                      stage: Callable[[str], None] | None = None,
                      io: FileIO = LOCAL_FILES) -> tuple[list[DataFile], list[DataFile]]:
    """Delete rows by position the way the table's format version does: in v2 position delete files, one per data
    file (``write.delete.granularity`` ``file``, Java's default since 1.8, so that concurrent deletes of other files
    never look like deletes of this one) or one per partition (``partition``); in v3 deletion vectors
    (:func:`write_deletion_vectors`). Returns the delete files to add and those they replace.

    :param deletes: data file path (as its manifest entry spells it) -> row positions, from 0
    :param previous: data file path -> the delete files that apply to it now (v3 merges their positions)
    :raises ValidationError: for a ``write.delete.granularity`` other than ``file`` or ``partition``
    """
    if state.format_version >= 3:
        return write_deletion_vectors(state, deletes, spec_id=spec_id, partition=partition, previous=previous,
                                      stage=stage, io=io)
    granularity = (state.prop(DELETE_GRANULARITY_PROPERTY) or "file").strip().lower()
    if granularity not in ("file", "partition"):
        raise ValidationError(f"Cannot delete rows: {DELETE_GRANULARITY_PROPERTY} is {granularity!r} (file or "
                              "partition)")
    if granularity == "partition":
        return [write_position_deletes(state, deletes, spec_id=spec_id, partition=partition, stage=stage, io=io)], []
    return [write_position_deletes(state, {path: rows}, spec_id=spec_id, partition=partition, stage=stage, io=io)
            for path, rows in deletes.items()], []


def write_deletion_vectors(state: TableState, deletes: Mapping[str, Sequence[int]], *, spec_id: int,
                           partition: tuple[Any, ...], previous: Mapping[str, Sequence[DataFile]] | None = None,
                           stage: Callable[[str], None] | None = None,
                           io: FileIO = LOCAL_FILES) -> tuple[list[DataFile], list[DataFile]]:
    """Write one Puffin file holding a deletion vector per data file; returns the vectors' entries and the delete
    files they replace.

    As the spec requires (at most one vector per data file in a snapshot), a data file's new vector also holds the
    positions its previous vector and position delete files deleted, and replaces that vector and the position
    delete files that name this data file alone (an upgraded table's v2 files); a position delete file scoped to
    the whole partition stays for the other files it deletes from.

    :param deletes: data file path -> row positions, from 0
    :param previous: data file path -> the delete files that apply to it now
    :raises ValidationError: for a table before v3, no positions, or a position that is not a row number
    """
    from engine.read.scan import referenced_path

    action = "deletion vectors"
    if state.format_version < 3:
        raise ValidationError(f"Cannot write {action}: table {state.location} is format version "
                              f"{state.format_version} (deletion vectors need version 3)")
    loader = DeleteLoader(io=io)
    vectors: list[tuple[str, list[int]]] = []
    replaced: dict[str, DataFile] = {}
    for path, rows in deletes.items():
        merged = set(_row_numbers(rows, path, action))
        for d in (previous or {}).get(path, ()):
            if d.content != DataFileContent.POSITION_DELETES:
                continue
            old = loader.positions(d, path)
            if old is not None:
                merged.update(old.to_pylist())
            if d.is_deletion_vector or referenced_path(d) == normalize_path(path):
                replaced[d.key] = d
        if merged:
            vectors.append((path, sorted(merged)))
    if not vectors:
        raise ValidationError(f"Cannot write {action}: no positions given")
    data, spans = encode_puffin(vectors, created_by=CREATED_BY)
    puffin = _folder(state, spec_id, partition, action).removesuffix(".parquet") + ".puffin"
    if stage is not None:
        stage(puffin)
    try:
        io.write_new(puffin, data)
    except FileError as e:
        raise storage_error(e, puffin) from e
    added = [DataFile(file_path=puffin, file_format="PUFFIN", spec_id=spec_id, partition=tuple(partition),
                      content=DataFileContent.POSITION_DELETES, record_count=len(positions),
                      file_size_in_bytes=len(data), referenced_data_file=path, content_offset=offset,
                      content_size_in_bytes=length)
             for (path, positions), (offset, length) in zip(vectors, spans)]
    return added, list(replaced.values())


def equality_schema(schema: Schema, equality_ids: Sequence[int]) -> Schema:
    """The part of ``schema`` an equality delete file with these equality ids holds (parent structs kept).

    :raises ValidationError: when an id is missing, listed twice, not primitive, a float or double, or inside a
        list or map
    """
    action = "Cannot write equality deletes"
    ids = list(equality_ids)
    if not ids:
        raise ValidationError(f"{action}: no equality field ids given")
    seen: set[int] = set()
    for fid in ids:
        if isinstance(fid, bool) or not isinstance(fid, int):
            raise ValidationError(f"{action}: equality id {fid!r} is not a field id")
        if fid in seen:
            raise ValidationError(f"{action}: field id {fid} is listed twice")
        seen.add(fid)
        field = schema.index_by_id().get(fid)
        if field is None:
            raise ValidationError(f"{action}: field id {fid} is not in the table schema")
        name = schema.find_column_name(fid)
        if not isinstance(field.field_type, T.PrimitiveType):
            raise ValidationError(f"{action}: column {name!r} is a {field.field_type}, not a primitive type")
        if isinstance(field.field_type, (T.FloatType, T.DoubleType)):
            raise ValidationError(f"{action}: column {name!r} is a {field.field_type} (floating point columns "
                                  f"cannot be equality columns)")
        if schema.is_in_list_or_map(fid):
            raise ValidationError(f"{action}: column {name!r} is inside a list or map")

    def select(fields: tuple[T.NestedField, ...]) -> tuple[T.NestedField, ...]:
        out = []
        for f in fields:
            if f.field_id in seen:
                out.append(f)
            elif isinstance(f.field_type, T.StructType):
                children = select(f.field_type.fields)
                if children:
                    out.append(attrs.evolve(f, field_type=T.StructType(children)))
        return tuple(out)

    return Schema(select(schema.columns), schema_id=schema.schema_id)


def _conform(arr: Any, field: T.NestedField, arrow_type: pa.DataType, where: str) -> pa.Array:
    """A column of the caller's rows in the shape of ``field`` (struct children matched by name)."""
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    action = "Cannot write equality deletes"
    if isinstance(field.field_type, T.StructType):
        if not pa.types.is_struct(arr.type):
            raise ValidationError(f"{action}: column {where!r} of type {arr.type} is not a struct")
        names = [arr.type.field(i).name for i in range(arr.type.num_fields)]
        children = arr.flatten()
        out = []
        for nf, af in zip(field.field_type.fields, arrow_type):
            if nf.name not in names:
                raise ValidationError(f"{action}: column {where + '.' + nf.name!r} is missing")
            out.append(_conform(children[names.index(nf.name)], nf, af.type, f"{where}.{nf.name}"))
        result = pa.StructArray.from_arrays(out, fields=list(arrow_type),
                                            mask=arr.is_null() if arr.null_count else None)
    else:
        try:
            result = arr if arr.type == arrow_type else arr.cast(arrow_type, safe=True)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as e:
            raise ValidationError(f"{action}: column {where!r} of type {arr.type} does not fit {field.field_type} "
                                  f"({e})") from e
    if field.required and result.null_count:
        raise ValidationError(f"{action}: required column {where!r} has {result.null_count} null(s)")
    return result


def write_equality_deletes(state: TableState, rows: pa.Table, *, equality_ids: Sequence[int], spec_id: int,
                           partition: tuple[Any, ...], stage: Callable[[str], None] | None = None,
                           io: FileIO = LOCAL_FILES) -> DataFile:
    """Write one equality delete file: data rows whose equality columns equal one of ``rows`` are deleted (a null
    matches a null).

    ::

        f = write_equality_deletes(state, pa.table({"id": [3, 9]}), equality_ids=[1], spec_id=0, partition=())

    :param rows: the deleted values, columns named as the table's top-level columns (a struct column for a
        nested equality field); other columns are left out of the file
    :param equality_ids: the field ids of the equality columns
    :param spec_id: the partition spec of the file (an unpartitioned spec makes the deletes global)
    :param partition: its partition tuple (canonical values)
    :raises ValidationError: naming the culprit, for a bad equality column, missing or ill-typed values, a v1
        table, or no rows
    """
    action = "equality deletes"
    _check_version(state, action)
    if isinstance(rows, pa.RecordBatch):
        rows = pa.Table.from_batches([rows])
    if not isinstance(rows, pa.Table):
        raise ValidationError(f"Cannot write {action}: expected a pyarrow.Table, got {type(rows).__name__}")
    file_schema = equality_schema(state.schema, equality_ids)
    if rows.num_rows == 0:
        raise ValidationError(f"Cannot write {action}: no rows given")
    target = schema_to_arrow(file_schema)
    columns = []
    for field, arrow_field in zip(file_schema.columns, target):
        if field.name not in rows.column_names:
            raise ValidationError(f"Cannot write {action}: column {field.name!r} is missing from the rows")
        columns.append(_conform(rows.column(field.name), field, arrow_field.type, field.name))
    table = pa.Table.from_arrays(columns, schema=target)
    path = _folder(state, spec_id, partition, action)
    props = dict(state.properties)
    footer, size = write_parquet(table, path, properties=props, schema=file_schema, stage=stage, io=io)
    described = read_data_file(path, file_schema, spec_id=spec_id, partition=tuple(partition), properties=props,
                               nan_counts=nan_counts(table, file_schema), metadata=footer, file_size=size)
    return attrs.evolve(described, content=DataFileContent.EQUALITY_DELETES, equality_ids=tuple(equality_ids))


def relocate_position_deletes(delete_file: DataFile, relocate: Callable[[str], str], folder: str,
                              properties: Mapping[str, str] | None = None,
                              io: FileIO = LOCAL_FILES) -> DataFile | None:
    """A copy of a position delete file whose ``file_path`` values are relocated, for tables moved to another
    place (``register_table(..., relocate=...)``); None when no value changes.

    The copy keeps the spec's schema and field ids, is sorted by path then position, has full metrics on both
    columns, and is named after the original's path (``relocated-<uuid5>.parquet`` in ``folder``), so importing
    the same table again writes the same file. It keeps the original's spec id and partition.

    :param delete_file: the position delete file (at its relocated path, where it can be read)
    :param relocate: old path -> new path
    :param folder: where the copy goes (a local path or ``file:`` URI)
    :raises CorruptFileError: the delete file cannot be read
    """
    from engine.read.reader import read_position_delete_rows

    rows = read_position_delete_rows(delete_file, io=io)
    paths = rows.column(DELETE_FILE_PATH).to_pylist()
    moved = [None if p is None else relocate(p) for p in paths]
    if moved == paths:
        return None
    table = pa.Table.from_arrays([pa.array(moved, pa.string()), rows.column(DELETE_POS)],
                                 schema=schema_to_arrow(POSITION_DELETE_SCHEMA))
    table = table.sort_by([(DELETE_FILE_PATH, "ascending"), (DELETE_POS, "ascending")])
    path = relocated_position_deletes_path(delete_file, folder)
    props = dict(properties or {})
    props[f"write.metadata.metrics.column.{DELETE_FILE_PATH}"] = "full"
    props[f"write.metadata.metrics.column.{DELETE_POS}"] = "full"
    footer, size = write_parquet(table, path, properties=props, schema=POSITION_DELETE_SCHEMA, io=io)
    described = read_data_file(path, POSITION_DELETE_SCHEMA, spec_id=delete_file.spec_id,
                               partition=tuple(delete_file.partition), properties=props, metadata=footer,
                               file_size=size)
    return attrs.evolve(described, content=DataFileContent.POSITION_DELETES)


def relocated_position_deletes_path(delete_file: DataFile, folder: str) -> str:
    """Where :func:`relocate_position_deletes` writes the copy of ``delete_file`` in ``folder`` (a local path)."""
    name = f"relocated-{uuid.uuid5(uuid.NAMESPACE_URL, delete_file.file_path)}.parquet"
    return f"{_local(folder).rstrip('/')}/{name}"


def _local(location: str) -> str:
    """A local path for a ``file:`` URI (``file:/x``, ``file:///x``), other locations unchanged."""
    for prefix in ("file://localhost/", "file:///", "file:/"):
        if location.startswith(prefix):
            return "/" + location[len(prefix):]
    return location


__all__ = ["POSITION_DELETE_SCHEMA", "equality_schema", "relocate_position_deletes", "relocated_position_deletes_path",
           "write_deletion_vectors", "write_equality_deletes", "write_position_deletes", "write_row_deletes"]


def paths_in_position_deletes(delete_file: DataFile, *, io: FileIO = LOCAL_FILES) -> list[str]:
    """The data file paths a position delete file names, sorted: from its ``file_path`` bounds when they name one
    file, else from the file's ``file_path`` column.

    :raises CorruptFileError: the delete file cannot be read
    """
    from engine.read.scan import referenced_path

    single = referenced_path(delete_file)
    if single is not None:
        return [single]
    path = delete_file.file_path
    refuse_catalog_database(path)
    try:
        with io.open_input(path) as source:
            column = pq.read_table(source, columns=[DELETE_FILE_PATH]).column(DELETE_FILE_PATH)
    except (pa.ArrowInvalid, OSError, KeyError, FileError) as e:
        raise CorruptFileError(f"Cannot read position delete file: {path} has no readable {DELETE_FILE_PATH} "
                               f"column ({e})", path=path) from e
    return sorted({normalize_path(p) for p in column.unique().to_pylist() if p is not None})
