"""Read data files into Arrow in the shape of a table schema, with their delete files applied.

Layer: engine.read (I/O at the edge: opens data and delete files by format through
:mod:`engine.read.raw_file`, deletion vectors through engine.formats; the rest is pure Arrow work). Columns are
matched by field id at every nesting level, as the spec's "Column Projection" section says: a field renamed since
the file was written is found by its id, a field added later reads as nulls, a dropped field is ignored, and a
promoted type is cast. Files written without field ids
get their ids from the table's name mapping (``schema.name-mapping.default``), else from the current schema's names.

Delete files are applied to the file's own rows before projection: position deletes by row position, equality
deletes by the values of their equality columns, read from the data file by field id (so a column dropped from
the table since still matches). The row filter is applied last, to the projected rows.
"""

from __future__ import annotations

import functools
from typing import Any, Iterable, Mapping, Sequence

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from engine.errors import CorruptFileError
from engine.formats.deletion_vectors import read_vector
from engine.formats.parquet_files import matching_row_groups
from engine.model import types as T
from engine.model.arrow_schema import arrow_children, arrow_field_id, schema_to_arrow
from engine.model.data_file import DataFile, DataFileContent
from engine.model.expressions import BooleanExpression, referenced_field_ids
from engine.model.row_evaluation import arrow_constant, evaluate_arrow
from engine.model.name_mapping import name_mapping
from engine.model.paths import normalize_path
from engine.model.schema import (
    LAST_UPDATED_SEQUENCE_NUMBER_FIELD_ID,
    LINEAGE_COLUMNS,
    LINEAGE_FIELD_IDS,
    ROW_ID_FIELD_ID,
    Schema,
)
from engine.model.values import value_from_json
from engine.model.variant import null_variants
from engine.read.raw_file import FIELD_ID, MappingEntries, RawFile, cast_column, format_of, subtree_ids
from storage.files import LOCAL_FILES, FileIO

#: The reserved field ids of a position delete file's columns.
DELETE_FILE_PATH_ID = 2147483546
DELETE_POS_ID = 2147483545
DELETE_FILE_PATH = "file_path"
DELETE_POS = "pos"
#: The metadata column of a row's position in its data file.
POS_COLUMN = "_pos"
POS_COLUMN_ID = 2147483645


# -- projection ------------------------------------------------------------------------------------------------


def _project(arr: pa.Array, file_field: pa.Field, target: T.IcebergType, arrow_type: pa.DataType, where: str,
             path: str, keep_dictionary: bool = False) -> pa.Array:
    """One column of the file (``arr``, described by ``file_field``) in the shape of ``target``, by field id.

    :param keep_dictionary: a dictionary-encoded column whose values already have ``arrow_type`` stays encoded
    """
    if isinstance(arr.type, pa.DictionaryType):
        if keep_dictionary and arr.type.value_type == arrow_type:
            return arr
        arr = arr.dictionary_decode()
    mask = arr.is_null() if arr.null_count else None
    ftype = file_field.type
    if isinstance(target, T.StructType):
        if not pa.types.is_struct(ftype):
            raise CorruptFileError(f"Cannot read data file {path}: column {where!r} is a {ftype}, not a struct",
                                   path=path)
        children = arr.flatten()
        by_id = {fid: i for i, c in enumerate(arrow_children(ftype)) if (fid := arrow_field_id(c)) is not None}
        out = []
        for nf, af in zip(target.fields, arrow_type):
            i = by_id.get(nf.field_id)
            if i is None:  # a field added after the file was written
                out.append(default_column(nf, af.type, len(arr), nf.initial_default))
            else:
                out.append(_project(children[i], ftype.field(i), nf.field_type, af.type, f"{where}.{nf.name}", path))
        return pa.StructArray.from_arrays(out, fields=list(arrow_type), mask=mask)
    if isinstance(target, T.ListType):
        if not (pa.types.is_list(ftype) or pa.types.is_large_list(ftype)):
            raise CorruptFileError(f"Cannot read data file {path}: column {where!r} is a {ftype}, not a list",
                                   path=path)
        values = _project(arr.values, ftype.value_field, target.element_type, arrow_type.value_type,
                          f"{where}.element", path)
        return pa.ListArray.from_arrays(arr.offsets.cast(pa.int32()), values, type=arrow_type, mask=mask)
    if isinstance(target, T.MapType):
        if not pa.types.is_map(ftype):
            raise CorruptFileError(f"Cannot read data file {path}: column {where!r} is a {ftype}, not a map",
                                   path=path)
        keys = _project(arr.keys, ftype.key_field, target.key_type, arrow_type.key_type, f"{where}.key", path)
        items = _project(arr.items, ftype.item_field, target.value_type, arrow_type.item_type, f"{where}.value",
                         path)
        return pa.MapArray.from_arrays(arr.offsets, keys, items, type=arrow_type, mask=mask)
    return cast_column(arr, arrow_type, where, path)


def default_column(field: T.NestedField, arrow_type: pa.DataType, length: int, default_json: Any) -> pa.Array:
    """The column of a field a file (or a write) does not have: its default value (``initial-default`` on read,
    ``write-default`` on write, in JSON form) in every row, else nulls."""
    if default_json is None:
        if isinstance(field.field_type, T.VariantType):
            return null_variants(length)
        return pa.nulls(length, type=arrow_type)
    return arrow_constant(field.field_type, arrow_type, value_from_json(field.field_type, default_json), length)


def project(table: pa.Table | None, file_schema: pa.Schema, num_rows: int, schema: Schema, path: str,
            keep_dictionaries: bool = False, constants: Mapping[int, Any] | None = None) -> pa.Table:
    """The rows of ``table`` (columns described by ``file_schema``, with field ids) as ``schema``'s columns.

    :param keep_dictionaries: top-level columns read as dictionaries stay so (for evaluating a filter: the result's
        schema then differs from ``schema``'s Arrow form in those columns)
    :param constants: field id to canonical value for columns the file does not have, before their defaults (the
        values of the file's identity partition fields)
    """
    target = schema_to_arrow(schema)
    by_id = {fid: i for i, f in enumerate(file_schema) if (fid := arrow_field_id(f)) is not None}
    columns = []
    for field, arrow_field in zip(schema.columns, target):
        i = by_id.get(field.field_id)
        if i is None and constants and field.field_id in constants:
            columns.append(arrow_constant(field.field_type, arrow_field.type, constants[field.field_id], num_rows))
            continue
        if i is None or table is None:
            columns.append(default_column(field, arrow_field.type, num_rows, field.initial_default))
            continue
        chunks = [_project(c, file_schema.field(i), field.field_type, arrow_field.type, field.name, path,
                           keep_dictionaries) for c in table.column(i).chunks]
        if keep_dictionaries and chunks and all(pa.types.is_dictionary(c.type) for c in chunks) \
                and len({c.type for c in chunks}) == 1:
            columns.append(pa.chunked_array(chunks))
            target = target.set(len(columns) - 1, target.field(len(columns) - 1).with_type(chunks[0].type))
            continue
        chunks = [c.dictionary_decode() if pa.types.is_dictionary(c.type) else c for c in chunks]
        columns.append(pa.chunked_array(chunks, type=arrow_field.type))
    return pa.Table.from_arrays(columns, schema=target)


# -- deletes ---------------------------------------------------------------------------------------------------


class DeleteLoader:
    """Reads delete files once per scan: position deletes grouped by data file, equality delete keys.

    :param mapping: the table's name mapping, for delete files written without field ids
    :param fields: the fields of the schema read, by id: an equality key column a data file predates reads as the
        field's ``initial-default`` there (format v3), as the rest of the row does
    """

    def __init__(self, mapping: MappingEntries | None = None, *, io: FileIO = LOCAL_FILES,
                 fields: Mapping[int, T.NestedField] | None = None) -> None:
        self.mapping = mapping
        self.io = io
        self.fields = fields or {}
        self._positions: dict[str, dict[str, pa.Array]] = {}
        self._keys: dict[str, list[pa.Array]] = {}

    def positions(self, delete_file: DataFile, data_path: str) -> pa.Array | None:
        """The positions a position delete file deletes in the data file at ``data_path``."""
        by_path = self._positions.get(delete_file.key)
        if by_path is None:
            by_path = self._positions[delete_file.key] = self._read_positions(delete_file)
        return by_path.get(normalize_path(data_path))

    def _read_positions(self, delete_file: DataFile) -> dict[str, pa.Array]:
        if delete_file.is_deletion_vector:  # one data file's positions: nothing to group
            rows = read_position_delete_rows(delete_file, io=self.io)
            return {normalize_path(delete_file.referenced_data_file or ""): rows.column(DELETE_POS).combine_chunks()}
        single = _only_data_file(delete_file)
        if single is not None:  # its metrics say it names one data file: its paths need not be read
            raw = RawFile(delete_file.file_path, mapping=_POSITION_MAPPING, needed_ids={DELETE_POS_ID},
                           file_format=delete_file.file_format, io=self.io)
            positions = raw.column_by_id(DELETE_POS_ID)
            if positions is not None:
                return {normalize_path(single): positions.cast(pa.int64())}
        rows = read_position_delete_rows(delete_file, io=self.io)
        paths = rows.column(DELETE_FILE_PATH)
        if len(paths) and not paths.null_count and (first := paths[0].as_py()) == paths[-1].as_py() \
                and pc.all(pc.equal(paths, first)).as_py():  # the common case: one data file's deletes
            return {normalize_path(first): rows.column(DELETE_POS).combine_chunks()}
        table = pa.table({"file_path": paths, "pos": rows.column(DELETE_POS)})
        grouped = table.group_by("file_path", use_threads=False).aggregate([("pos", "list")])
        lists = grouped.column("pos_list").combine_chunks()
        out: dict[str, pa.Array] = {}
        for i, p in enumerate(grouped.column("file_path").to_pylist()):
            key = normalize_path(p) if p is not None else p  # one spelling per file, once per distinct path
            out[key] = lists[i].values if key not in out else pa.concat_arrays([out[key], lists[i].values])
        return out

    def equality_keys(self, delete_file: DataFile) -> list[pa.Array]:
        """The deleted values of an equality delete file, one array per equality field id (in their order)."""
        keys = self._keys.get(delete_file.file_path)
        if keys is None:
            path = delete_file.file_path
            ids = list(delete_file.equality_ids or ())
            if not ids:
                raise CorruptFileError(f"Cannot apply equality delete file: {path} has no equality ids", path=path)
            raw = RawFile(path, mapping=self.mapping, needed_ids=set(ids), file_format=delete_file.file_format,
                           io=self.io)
            keys = []
            for fid in ids:
                col = raw.column_by_id(fid)
                if col is None:
                    raise CorruptFileError(f"Cannot apply equality delete file: {path} has no column with field id "
                                           f"{fid}", path=path)
                keys.append(col)
            self._keys[delete_file.file_path] = keys
        return keys


def _only_data_file(delete_file: DataFile) -> str | None:
    """The one data file a position delete file names: its ``referenced_data_file``, else its ``file_path`` bounds
    when they are equal (as Java's ``ContentFileUtil.referencedDataFile`` judges); None when they differ or are
    missing."""
    if delete_file.referenced_data_file is not None:
        return delete_file.referenced_data_file
    lower = dict(delete_file.lower_bounds or ()).get(DELETE_FILE_PATH_ID)
    upper = dict(delete_file.upper_bounds or ()).get(DELETE_FILE_PATH_ID)
    if lower is None or lower != upper:
        return None
    try:
        return lower.decode("utf-8")
    except UnicodeDecodeError:
        return None


_POSITION_MAPPING = [{"field-id": DELETE_FILE_PATH_ID, "names": [DELETE_FILE_PATH]},
                     {"field-id": DELETE_POS_ID, "names": [DELETE_POS]}]


def _equal_rows(data: list[pa.Array], deleted: list[pa.Array], rows: pa.Array) -> pa.Array:
    """Which data rows equal some deleted row, column by column, a null equal to a null (IS NULL)."""
    if len(data) == 1:
        return pc.is_in(data[0], value_set=pc.unique(deleted[0]), skip_nulls=False)
    left: dict[str, pa.Array] = {}
    right: dict[str, pa.Array] = {}
    for i, (d, x) in enumerate(zip(data, deleted)):
        left[f"n{i}"], right[f"n{i}"] = d.is_null(), x.is_null()
        filler = next((c.drop_null()[0] for c in (x, d) if len(c) - c.null_count), None)
        if filler is not None:  # a column null on both sides compares by its null flags alone
            left[f"v{i}"], right[f"v{i}"] = pc.fill_null(d, filler), pc.fill_null(x, filler)
    keys = list(right)
    right_table = pa.table(right).group_by(keys, use_threads=False).aggregate([])
    left["__row"] = rows
    matched = pa.table(left).join(right_table, keys, join_type="left semi", use_threads=False)
    return pc.is_in(rows, value_set=matched.column("__row").combine_chunks())


def deleted_rows(raw: RawFile, data_file: DataFile, deletes: Iterable[DataFile], loader: DeleteLoader,
                 constants: Mapping[int, Any] | None = None) -> pa.Array | None:
    """A mask of the data file's rows its delete files delete (None when none is deleted); ``constants`` as
    :func:`project` takes them."""
    n = raw.num_rows
    mask: pa.Array | None = None

    def add(m: pa.Array) -> None:
        nonlocal mask
        mask = m if mask is None else pc.or_(mask, m)

    positions = [p for d in deletes if d.content == DataFileContent.POSITION_DELETES
                 if (p := loader.positions(d, data_file.file_path)) is not None]
    if positions:
        add(position_mask(raw, pa.concat_arrays([p.cast(pa.int64()) for p in positions])))
    for d in deletes:
        if d.content != DataFileContent.EQUALITY_DELETES:
            continue
        deleted = loader.equality_keys(d)
        if not len(deleted[0]):
            continue
        data = []
        for fid, x in zip(d.equality_ids or (), deleted):
            col = raw.column_by_id(fid)
            field = loader.fields.get(fid)
            if col is None and constants and fid in constants and field is not None:  # as the scan reads it
                data.append(arrow_constant(field.field_type, x.type, constants[fid], n))
            elif col is None:  # a column the file predates: its initial default in every row (else nulls)
                data.append(pa.nulls(n, type=x.type) if field is None else
                            default_column(field, x.type, n, field.initial_default))
            else:
                data.append(cast_column(col, x.type, str(fid), raw.path))
        add(_equal_rows(data, deleted, raw.positions))
    return mask


def position_mask(raw: RawFile, deleted: pa.Array) -> pa.Array:
    """A mask of the rows of ``raw`` at the ``deleted`` positions (int64; any order, repeats and positions past the
    end allowed). When the rows are the whole file, the positions are scattered into a mask of its length (no hash
    of every row); otherwise the rows read are looked up among them."""
    n = raw.num_rows
    if not raw.all_rows or not hasattr(pc, "scatter"):  # pc.scatter: pyarrow 19 and newer
        return pc.is_in(raw.positions, value_set=deleted)
    inside = deleted.filter(pc.and_(pc.greater_equal(deleted, 0), pc.less(deleted, n)))
    if not len(inside):
        return pa.repeat(pa.scalar(False), n)
    scattered = pc.scatter(pa.repeat(pa.scalar(True), len(inside)), inside, max_index=n - 1)
    return pc.fill_null(scattered, False)


# -- the public reader -----------------------------------------------------------------------------------------


def lineage_field(name: str) -> pa.Field:
    """The Arrow field of a row lineage column (``_row_id`` or ``_last_updated_sequence_number``), with its reserved
    field id, as the reader returns it and a rewrite writes it."""
    return pa.field(name, pa.int64(), metadata={FIELD_ID: str(LINEAGE_FIELD_IDS[name]).encode()})


def lineage_columns(raw: RawFile, first_row_id: int | None, data_sequence_number: int | None
                    ) -> tuple[pa.Array, pa.Array]:
    """Every row's ``_row_id`` and ``_last_updated_sequence_number`` (spec "Row Lineage"): the value a rewrite
    wrote into the file, else the file's ``first_row_id`` plus the row's position, and the data sequence number of
    the file's entry; both null in a file without row lineage (written before the table was v3)."""
    n = raw.num_rows
    if first_row_id is None:
        return pa.nulls(n, pa.int64()), pa.nulls(n, pa.int64())
    row_ids = pc.add(raw.positions, pa.scalar(first_row_id, pa.int64()))
    sequence_numbers = pa.repeat(pa.scalar(data_sequence_number or 0, pa.int64()), n)
    written_ids = raw.column_by_id(ROW_ID_FIELD_ID)
    if written_ids is not None:
        row_ids = pc.coalesce(written_ids.cast(pa.int64()), row_ids)
    written_seqs = raw.column_by_id(LAST_UPDATED_SEQUENCE_NUMBER_FIELD_ID)
    if written_seqs is not None:
        sequence_numbers = pc.coalesce(written_seqs.cast(pa.int64()), sequence_numbers)
    return row_ids, sequence_numbers


def _row_groups_matching(schema: Schema, row_filter: BooleanExpression, metadata: pq.FileMetaData,
                         arrow_schema: pa.Schema) -> list[int] | None:
    return matching_row_groups(metadata, arrow_schema, schema, row_filter)


def read_data_file(data_file: DataFile, schema: Schema, *, deletes: Sequence[DataFile] = (),
                   name_mapping_entries: MappingEntries | None = None, row_filter: BooleanExpression | None = None,
                   loader: DeleteLoader | None = None, with_positions: bool = False,
                   with_lineage: bool = False, data_sequence_number: int | None = None,
                   io: FileIO | None = None, partition_constants: Mapping[int, Any] | None = None) -> pa.Table:
    """The live rows of ``data_file`` with ``schema``'s top-level columns (names, order, types).

    :param deletes: the delete files that apply to the file (scan planning decides which)
    :param name_mapping_entries: the table's name mapping, for files without field ids (default: the schema's
        current names)
    :param row_filter: a filter bound to ``schema``, applied after the deletes
    :param loader: caches delete files across the data files of one scan
    :param with_positions: add a last column ``_pos`` (int64): each row's position in the file, from 0 (what a
        position delete file records)
    :param with_lineage: add the row lineage columns ``_row_id`` and ``_last_updated_sequence_number`` (before
        ``_pos``), from the file's ``first_row_id`` and ``data_sequence_number`` (:func:`lineage_columns`)
    :param io: where the files are read from (default: the loader's, else local files)
    :param partition_constants: field id to value of the file's identity partition fields, read for those columns
        the file does not have (:meth:`PartitionSpec.identity_values`)
    """
    io = io or (loader.io if loader is not None else LOCAL_FILES)
    mapping = name_mapping_entries if name_mapping_entries is not None else name_mapping(schema)
    needed = {f.field_id for f in schema.columns}
    if with_lineage:
        needed |= set(LINEAGE_FIELD_IDS.values())
    for d in deletes:
        if d.content == DataFileContent.EQUALITY_DELETES:
            needed |= set(d.equality_ids or ())
    row_groups = None if row_filter is None else functools.partial(_row_groups_matching, schema, row_filter)
    loader = loader or DeleteLoader(mapping, io=io, fields=schema.index_by_id())
    first = _filter_columns_first(data_file, schema, row_filter, needed, deletes)
    if first is not None:  # late materialization: the filter's columns, then the rest for the rows it keeps
        assert row_filter is not None
        filtered = row_filter

        def keep_rows(raw: RawFile) -> pa.Array:
            selected = evaluate_arrow(filtered, project(raw.table, raw.schema, raw.num_rows, schema,
                                                        data_file.file_path, True, partition_constants))
            deleted = deleted_rows(raw, data_file, deletes, loader, partition_constants) if deletes else None
            return selected if deleted is None else pc.and_(selected, pc.invert(deleted))

        raw = RawFile(data_file.file_path, mapping=mapping, needed_ids=needed, file_format=data_file.file_format,
                       io=io, row_groups=row_groups, first_ids=first, keep_rows=keep_rows)
        row_filter = None  # applied, and the deletes with it
        mask = None
    else:
        raw = RawFile(data_file.file_path, mapping=mapping, needed_ids=needed, file_format=data_file.file_format,
                       io=io, row_groups=row_groups)
        mask = deleted_rows(raw, data_file, deletes, loader, partition_constants) if deletes else None
    table, num_rows = raw.table, raw.num_rows
    if mask is not None and table is not None:
        table = table.filter(pc.invert(mask))
        num_rows = table.num_rows
    elif mask is not None:
        num_rows = raw.num_rows - int(pc.sum(mask).as_py() or 0)
    out = project(table, raw.schema, num_rows, schema, data_file.file_path, constants=partition_constants)
    if with_lineage:
        for name, values in zip(LINEAGE_COLUMNS, lineage_columns(raw, data_file.first_row_id, data_sequence_number)):
            out = out.append_column(lineage_field(name), values.filter(pc.invert(mask)) if mask is not None else values)
    if with_positions:
        positions = raw.positions
        if mask is not None:
            positions = positions.filter(pc.invert(mask))
        out = out.append_column(pa.field(POS_COLUMN, pa.int64(), nullable=False,
                                         metadata={FIELD_ID: str(POS_COLUMN_ID).encode()}), positions)
    if row_filter is not None:
        out = out.filter(evaluate_arrow(row_filter, out))
    return out


def _filter_columns_first(data_file: DataFile, schema: Schema, row_filter: BooleanExpression | None,
                          needed: set[int], deletes: Sequence[DataFile]) -> set[int] | None:
    """The fields to read before the others when a Parquet file is read with a filter that needs fewer columns than
    the scan returns (and the equality delete keys, which decide with it which rows are kept); None to read every
    needed column at once."""
    if row_filter is None or format_of(data_file.file_path, data_file.file_format) != "PARQUET":
        return None
    first = set(referenced_field_ids(row_filter))
    for d in deletes:
        if d.content == DataFileContent.EQUALITY_DELETES:
            first |= set(d.equality_ids or ())
    columns = schema_to_arrow(schema)
    if not first or all(subtree_ids(f) & first for f in columns):
        return None  # the filter reads every column the scan returns: nothing to read later
    # a nested field's struct by its own id too: a file written before the field was added has the struct without
    # the field's id, and the field then reads as its initial default, not as a null struct
    first |= {fid for f in columns if subtree_ids(f) & first and (fid := arrow_field_id(f)) is not None}
    if all(_fixed_width(f.type) for f in columns if not subtree_ids(f) & first):
        # pyarrow decodes whole columns either way: a second pass over the file for columns that are cheap to
        # filter costs more than it saves; read them with the filter's (its strings still as dictionaries)
        return first | needed
    return first


def _fixed_width(t: pa.DataType) -> bool:
    """Whether a column's values have one width (numbers, dates, times, fixed binary): filtering them costs a
    copy, unlike strings, lists and structs, which a late read materializes only for the rows kept."""
    try:
        return t.bit_width > 0
    except ValueError:
        return False


def read_position_delete_rows(delete_file: DataFile, *, io: FileIO = LOCAL_FILES) -> pa.Table:
    """A position delete file's ``file_path`` and ``pos`` columns as written (paths not normalised), any format; for
    a deletion vector, its data file's path and the vector's positions.

    :raises CorruptFileError: the file cannot be read or lacks the two columns; a deletion vector is malformed
    """
    if delete_file.is_deletion_vector:
        positions = read_vector(delete_file, io=io)
        if delete_file.referenced_data_file is None:
            raise CorruptFileError(f"Cannot read deletion vector {delete_file.key}: its manifest entry names no "
                                   f"referenced data file", path=delete_file.file_path)
        return pa.table({DELETE_FILE_PATH: pa.repeat(pa.scalar(delete_file.referenced_data_file, pa.string()),
                                                      len(positions)), DELETE_POS: positions})
    path = delete_file.file_path
    raw = RawFile(path, mapping=_POSITION_MAPPING, needed_ids={DELETE_FILE_PATH_ID, DELETE_POS_ID},
                   file_format=delete_file.file_format, io=io)
    paths, positions = raw.column_by_id(DELETE_FILE_PATH_ID), raw.column_by_id(DELETE_POS_ID)
    if paths is None or positions is None:
        if raw.num_rows == 0:
            return pa.table({DELETE_FILE_PATH: pa.array([], pa.string()), DELETE_POS: pa.array([], pa.int64())})
        raise CorruptFileError(f"Cannot read position delete file: {path} has no file_path and pos columns",
                               path=path)
    return pa.table({DELETE_FILE_PATH: paths.cast(pa.string()), DELETE_POS: positions.cast(pa.int64())})
