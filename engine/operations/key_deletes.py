"""Keys of a row delta and the delete files they become: the key columns checked against the schema and the keys
conformed to them, distinct keys, the rows a set of keys matches, the filter a conflict check uses, and
:func:`plan_key_deletes`, which decides per partition spec how keys are deleted (used by ``add_equality_deletes``,
``delete_by_key`` and ``upsert`` in engine.operations.row_delta).

An equality delete file applies to data files of its own partition (spec id and partition tuple), or to every data
file when its spec is unpartitioned, and only to data files with a strictly smaller data sequence number. The keys
are therefore written once for every spec that has live data files (and the current spec):

- a spec that is unpartitioned: one global equality delete file with that spec covers the whole table;
- a spec whose every partition source column is a key column: one equality delete file per partition the keys
  fall in, computed from the key values themselves (Flink's upsert writer; it requires the same of its keys);
- any other spec: the keys do not say which partition a matching row is in. Iceberg allows delete files only in
  the table's own specs, so instead of a global file icelog does what Spark's merge-on-read DELETE does: it reads
  the rows the keys match (existing deletes applied) and writes position delete files for them.
  ``add_equality_deletes`` refuses such keys instead (ValidationError), since it promises equality deletes.

Layer: engine.operations (the planning reads the rows keys match, through engine.read, only for the last kind of
spec; everything else is pure Arrow).
"""

from __future__ import annotations

from typing import Any, Sequence

import attrs
import pyarrow as pa
import pyarrow.compute as pc

from engine.write.data_writer import split_by_partition
from engine.write.delete_files import write_equality_deletes, write_row_deletes
from engine.errors import ValidationError
from engine.model import types as T
from engine.model.arrow_schema import schema_to_arrow
from engine.model.data_file import DataFile, DataFileContent
from engine.model.expressions import (
    AlwaysFalse,
    BooleanExpression,
    GreaterThanOrEqual,
    In,
    IsNull,
    LessThanOrEqual,
    and_,
    or_,
)
from engine.model.expression_binding import bind
from engine.model.metrics_evaluation import metrics_might_match
from engine.model.name_mapping import NAME_MAPPING_PROPERTY
from engine.model.partitioning import PartitionGroups, PartitionSpec
from engine.model.schema import ROW_ID_COLUMN, Schema
from engine.read.reader import POS_COLUMN, DeleteLoader, read_data_file
from engine.read.raw_file import parse_name_mapping
from engine.read.scan import Scan
from engine.state.table_state import TableState

#: Up to this many distinct values per key column, conflict checks use ``IN``; beyond it, the values' range.
KEY_FILTER_MAX_VALUES = 200


# -- key columns -----------------------------------------------------------------------------------------------


def key_fields(schema: Schema, key_columns: Sequence[str], action: str) -> tuple[T.NestedField, ...]:
    """The top-level fields named by ``key_columns``, checked against the spec's rules for equality fields.

    :raises ValidationError: for no columns, a column listed twice or missing, a nested, non-primitive, float or
        double column
    """
    if isinstance(key_columns, str):
        key_columns = [key_columns]
    names = list(key_columns)
    if not names:
        raise ValidationError(f"Cannot {action}: no key columns given")
    by_name = {f.name: f for f in schema.columns}
    out = []
    for name in names:
        if not isinstance(name, str):
            raise ValidationError(f"Cannot {action}: key column {name!r} is not a column name")
        if names.count(name) > 1:
            raise ValidationError(f"Cannot {action}: key column {name!r} is listed twice")
        field = by_name.get(name)
        if field is None:
            raise ValidationError(f"Cannot {action}: key column {name!r} is not a top-level column of the table "
                                  f"({', '.join(sorted(by_name))})")
        if not isinstance(field.field_type, T.PrimitiveType):
            raise ValidationError(f"Cannot {action}: key column {name!r} is a {field.field_type}, not a primitive "
                                  f"type")
        if isinstance(field.field_type, (T.FloatType, T.DoubleType)):
            raise ValidationError(f"Cannot {action}: key column {name!r} is a {field.field_type} (floating point "
                                  f"columns cannot be equality columns)")
        out.append(field)
    return tuple(out)


def conform_keys(keys: pa.Table, schema: Schema, fields: Sequence[T.NestedField], action: str) -> pa.Table:
    """The key columns of ``keys`` (other columns dropped) cast to the table's Arrow types, with field ids."""
    if isinstance(keys, pa.RecordBatch):
        keys = pa.Table.from_batches([keys])
    if not isinstance(keys, pa.Table):
        raise ValidationError(f"Cannot {action}: expected a pyarrow.Table of keys, got {type(keys).__name__}")
    arrow = {f.name: f for f in schema_to_arrow(schema)}
    columns = []
    for field in fields:
        if field.name not in keys.column_names:
            raise ValidationError(f"Cannot {action}: key column {field.name!r} is missing from the rows "
                                  f"({', '.join(keys.column_names)})")
        target = arrow[field.name]
        col = keys.column(field.name)
        try:
            col = col if col.type == target.type else col.cast(target.type, safe=True)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as e:
            raise ValidationError(f"Cannot {action}: key column {field.name!r} of type {col.type} does not fit "
                                  f"{field.field_type} ({e})") from e
        columns.append(col)
    return pa.Table.from_arrays(columns, schema=pa.schema([arrow[f.name] for f in fields]))


def groupable(col: pa.ChunkedArray | pa.Array) -> pa.ChunkedArray | pa.Array:
    """Arrow cannot group or join on extension types (uuid): use their storage, the same bytes."""
    if isinstance(col.type, pa.BaseExtensionType):
        if isinstance(col, pa.ChunkedArray):
            return pa.chunked_array([c.storage for c in col.chunks], type=col.type.storage_type)
        return col.storage
    return col


def distinct_keys(keys: pa.Table) -> pa.Table:
    """The distinct rows of ``keys`` (nulls equal to nulls), in order of first appearance."""
    if keys.num_rows == 0:
        return keys
    names = [f"k{i}" for i in range(keys.num_columns)]
    proxy = pa.table([groupable(c) for c in keys.columns] + [pa.array(range(keys.num_rows), pa.int64())],
                     names=names + ["row"])
    first = proxy.group_by(names, use_threads=False).aggregate([("row", "min")]).column("row_min")
    return keys.take(first.take(pc.sort_indices(first)))  # the first row of each key, in the keys' order


def rows_matching_keys(rows: pa.Table, keys: pa.Table) -> pa.Array:
    """A mask of the ``rows`` whose key columns (the columns of ``keys``) equal some row of ``keys``, a null equal
    to a null, as equality deletes compare."""
    if rows.num_rows == 0 or keys.num_rows == 0:
        return pa.array([False] * rows.num_rows, pa.bool_())
    left: dict[str, Any] = {}
    right: dict[str, Any] = {}
    for i, name in enumerate(keys.column_names):
        d = groupable(rows.column(name).combine_chunks())
        k = groupable(keys.column(name).combine_chunks())
        left[f"n{i}"], right[f"n{i}"] = d.is_null(), k.is_null()
        present = k.drop_null()
        if len(present):  # a key column null in every key compares by its null flag alone
            left[f"v{i}"], right[f"v{i}"] = pc.fill_null(d, present[0]), pc.fill_null(k, present[0])
    names = list(right)
    right_table = pa.table(right).group_by(names, use_threads=False).aggregate([])
    index = pa.array(range(rows.num_rows), pa.int64())
    left["__row"] = index
    matched = pa.table(left).join(right_table, names, join_type="left semi", use_threads=False)
    return pc.is_in(index, value_set=matched.column("__row").combine_chunks())


def key_filter(keys: pa.Table, schema: Schema) -> BooleanExpression:
    """A filter (bound to ``schema``) that every row holding one of ``keys`` matches: per key column ``IN`` its
    values (their range beyond :data:`KEY_FILTER_MAX_VALUES`), or ``IS NULL`` where a key is null."""
    terms = []
    for name in keys.column_names:
        col = keys.column(name).combine_chunks()
        present = col.drop_null()
        term: BooleanExpression | None = None
        if len(present):
            values = pc.unique(groupable(present))
            if len(values) <= KEY_FILTER_MAX_VALUES or isinstance(col.type, pa.BaseExtensionType):
                term = In(name, tuple(present.take(_first_of_each(present)).to_pylist()))
            else:
                bounds = pc.min_max(present)
                term = and_(GreaterThanOrEqual(name, bounds["min"].as_py()),
                            LessThanOrEqual(name, bounds["max"].as_py()))
        if col.null_count:
            term = IsNull(name) if term is None else or_(IsNull(name), term)
        terms.append(AlwaysFalse() if term is None else term)  # no keys at all
    return bind(and_(*terms), schema)


def _first_of_each(values: pa.Array) -> pa.Array:
    """Indices of the first occurrence of each distinct value."""
    proxy = pa.table({"v": groupable(values), "row": pa.array(range(len(values)), pa.int64())})
    return proxy.group_by(["v"], use_threads=False).aggregate([("row", "min")]).column("row_min")


# -- planning the deletes of keys --------------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class KeyDeletes:
    """The delete files written for a set of keys.

    :param files: equality delete files, and position delete files for specs the keys do not partition
    :param referenced: the live data files those position deletes refer to
    :param filter: a filter every row holding a key matches (bound to the table schema)
    """

    files: tuple[DataFile, ...]
    referenced: tuple[DataFile, ...]
    filter: BooleanExpression
    #: v3: the deletion vectors (and file-scoped position delete files) the new vectors replace
    replaced: tuple[DataFile, ...] = ()
    #: with ``positions_only``: each deleted row's key columns and its ``_row_id`` (for an upsert to keep it)
    row_ids: pa.Table | None = None


def _covers(spec: PartitionSpec, key_ids: set[int]) -> bool:
    """Whether the key columns determine a row's partition in ``spec``."""
    return all(pf.source_id in key_ids for pf in spec.fields)


def plan_key_deletes(table: Any, state: TableState, snapshot_id: int | None, keys: pa.Table,
                     fields: Sequence[T.NestedField], *, action: str, fallback: bool,
                     positions_only: bool = False) -> KeyDeletes:
    """Write the delete files that delete every row of snapshot ``snapshot_id`` whose key columns equal a row of
    ``keys`` (conformed, distinct), as the module docstring describes.

    :param positions_only: read the matching rows and write position deletes (v3: deletion vectors) for every
        spec, never equality deletes, and return the deleted rows' ids (``KeyDeletes.row_ids``)
    """
    store = table.catalog.store
    schema = state.schema
    ids = [f.field_id for f in fields]
    bound = key_filter(keys, schema)
    if keys.num_rows == 0:
        return KeyDeletes(files=(), referenced=(), filter=bound)
    entries = [e for e in store.live_entries(state, snapshot_id) if e.file.content == DataFileContent.DATA]
    spec_ids = sorted({e.file.spec_id for e in entries} | {state.spec.spec_id})
    if positions_only:
        row_ids: list[pa.Table] = []
        pos_files, referenced, replaced = _position_deletes(table, state, snapshot_id, keys, bound, set(spec_ids),
                                                            row_ids=row_ids)
        return KeyDeletes(files=tuple(pos_files), referenced=tuple(referenced), filter=bound,
                          replaced=tuple(replaced), row_ids=pa.concat_tables(row_ids) if row_ids else None)
    specs = [state.spec_by_id(i) for i in spec_ids]
    unpartitioned = [s for s in specs if s.is_unpartitioned]
    if unpartitioned:
        spec = state.spec if state.spec.is_unpartitioned else unpartitioned[0]
        eq = write_equality_deletes(state, keys, equality_ids=ids, spec_id=spec.spec_id, partition=(),
                                    stage=table.stage_file, io=table.catalog.io)
        return KeyDeletes(files=(eq,), referenced=(), filter=bound)
    uncovered = [spec for spec in specs if not _covers(spec, set(ids))]
    if uncovered and not fallback:  # refused before any file is written
        spec = uncovered[0]
        missing = [schema.find_column_name(pf.source_id) for pf in spec.fields if pf.source_id not in ids]
        raise ValidationError(
            f"Cannot {action}: partition spec {spec.spec_id} partitions by {', '.join(map(repr, missing))}, "
            f"which the equality columns do not include, so the deletes' partitions are unknown "
            f"(include the column, or use delete_by_key, which writes position deletes for such rows)")
    files: list[DataFile] = []
    for spec in specs:
        if spec in uncovered:
            continue
        for values, part in split_by_partition(keys, schema, spec):
            files.append(write_equality_deletes(state, part, equality_ids=ids, spec_id=spec.spec_id,
                                                stage=table.stage_file, partition=values, io=table.catalog.io))
    referenced: list[DataFile] = []
    replaced: list[DataFile] = []
    if uncovered:
        pos_files, referenced, replaced = _position_deletes(table, state, snapshot_id, keys, bound,
                                                            {s.spec_id for s in uncovered})
        files += pos_files
    return KeyDeletes(files=tuple(files), referenced=tuple(referenced), filter=bound, replaced=tuple(replaced))


def _position_deletes(table: Any, state: TableState, snapshot_id: int | None, keys: pa.Table,
                      bound: BooleanExpression, spec_ids: set[int], row_ids: list[pa.Table] | None = None
                      ) -> tuple[list[DataFile], list[DataFile], list[DataFile]]:
    """Position delete files (v3: deletion vectors) for the live rows of data files in ``spec_ids`` that hold one
    of ``keys``; returns them, the data files they reference and the delete files they replace.

    :param row_ids: when given, receives the key columns and ``_row_id`` of the rows deleted (v3 lineage)
    """
    if snapshot_id is None:
        return [], [], []
    schema = state.schema
    mapping = parse_name_mapping(state.prop(NAME_MAPPING_PROPERTY))
    loader = DeleteLoader(mapping, io=table.catalog.io, fields=schema.index_by_id())
    groups: PartitionGroups[dict[str, list[int]]] = PartitionGroups(dict)
    previous: dict[str, Sequence[DataFile]] = {}
    referenced: list[DataFile] = []
    for task in Scan(table.catalog.store, state, snapshot_id=snapshot_id).plan_files():
        f = task.file
        if f.spec_id not in spec_ids or not metrics_might_match(bound, f, schema):
            continue
        rows = read_data_file(f, schema, deletes=task.deletes, name_mapping_entries=mapping, loader=loader,
                              partition_constants=state.partition_constants(f),
                              with_positions=True, with_lineage=row_ids is not None,
                              data_sequence_number=task.data_sequence_number)
        mask = rows_matching_keys(rows.select(keys.column_names), keys)
        positions = rows.column(POS_COLUMN).filter(mask).to_pylist()
        if positions and row_ids is not None:
            row_ids.append(rows.select([*keys.column_names, ROW_ID_COLUMN]).filter(mask))
        if positions:
            groups.of(f.spec_id, f.partition)[f.file_path] = positions
            previous[f.file_path] = task.deletes
            referenced.append(f)
    files: list[DataFile] = []
    replaced: list[DataFile] = []
    for spec_id, partition, deletes in groups:
        written, gone = write_row_deletes(state, deletes, spec_id=spec_id, partition=partition, previous=previous,
                                          stage=table.stage_file, io=table.catalog.io)
        files += written
        replaced += gone
    return files, referenced, replaced


__all__ = ["KeyDeletes", "conform_keys", "distinct_keys", "key_fields", "key_filter", "plan_key_deletes",
           "rows_matching_keys"]
