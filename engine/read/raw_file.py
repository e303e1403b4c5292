"""Open a data or delete file by its format and read its columns as Arrow, each carrying its Iceberg field id.

Layer: engine.read (I/O at the edge: reads Parquet and ORC files through pyarrow, Avro ones through fastavro,
through a ``storage.files.FileIO``; imports engine.model, engine.formats, engine.errors, engine.ownership and
storage). Files written without field ids get their ids from a name mapping (``schema.name-mapping.default``).
:mod:`engine.read.reader` builds on it: it applies delete files and projects the columns onto a table schema.
"""

from __future__ import annotations

import json
from typing import Any, Callable, Mapping, Sequence

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from engine.errors import CorruptFileError, MissingFileError, storage_error
from engine.ownership import refuse_catalog_database
from engine.model.arrow_schema import (
    FIELD_ID_KEY,
    arrow_carries_field_ids,
    arrow_children,
    arrow_field_id,
)
from storage.errors import FileError
from storage.files import LOCAL_FILES, FileIO, is_s3

FIELD_ID = FIELD_ID_KEY

MappingEntries = Sequence[Mapping[str, Any]]


# -- field ids -------------------------------------------------------------------------------------------------



def _with_id(f: pa.Field, field_id: int | None, t: pa.DataType | None = None) -> pa.Field:
    metadata = {k: v for k, v in (f.metadata or {}).items() if k != FIELD_ID}
    if field_id is not None:
        metadata[FIELD_ID] = str(field_id).encode()
    return pa.field(f.name, t if t is not None else f.type, f.nullable, metadata or None)


def _map_field(f: pa.Field, entry: Mapping[str, Any] | None) -> pa.Field:
    """``f`` with the field ids a name-mapping entry gives it and its children (no id where none maps)."""
    field_id = entry.get("field-id") if entry is not None else None
    sub = _entries_by_name(entry.get("fields") or []) if entry is not None else {}
    t = f.type
    if pa.types.is_struct(t):
        t = pa.struct([_map_field(c, sub.get(c.name)) for c in arrow_children(t)])
    elif pa.types.is_map(t):
        t = pa.map_(_map_field(t.key_field, sub.get("key")), _map_field(t.item_field, sub.get("value")))
    elif pa.types.is_large_list(t):
        t = pa.large_list(_map_field(t.value_field, sub.get("element")))
    elif pa.types.is_list(t):
        t = pa.list_(_map_field(t.value_field, sub.get("element")))
    return _with_id(f, field_id, t)


def _entries_by_name(entries: MappingEntries) -> dict[str, Mapping[str, Any]]:
    out: dict[str, Mapping[str, Any]] = {}
    for entry in entries:
        for name in entry.get("names") or []:
            out[name] = entry
    return out


def apply_name_mapping(schema: pa.Schema, entries: MappingEntries) -> pa.Schema:
    """A file's Arrow schema with field ids from a name mapping (columns the mapping does not name get none)."""
    by_name = _entries_by_name(entries)
    return pa.schema([_map_field(f, by_name.get(f.name)) for f in schema])


def parse_name_mapping(text: str | None) -> list[dict[str, Any]] | None:
    """The entries of a ``schema.name-mapping.default`` property value (None when absent)."""
    if text is None:
        return None
    try:
        entries = json.loads(text)
    except ValueError as e:
        raise CorruptFileError(f"Cannot read name mapping: not JSON ({e})", path="schema.name-mapping.default") from e
    if not isinstance(entries, list):
        raise CorruptFileError("Cannot read name mapping: not a JSON list", path="schema.name-mapping.default")
    return entries


def subtree_ids(f: pa.Field) -> set[int]:
    out = set()
    fid = arrow_field_id(f)
    if fid is not None:
        out.add(fid)
    for c in arrow_children(f.type):
        out |= subtree_ids(c)
    return out


# -- reading files ---------------------------------------------------------------------------------------------


class RawFile:
    """A data file's rows as written (the needed top-level columns), with a schema carrying field ids.

    Parquet, ORC (pyarrow.orc) and Avro (fastavro) files are read, by ``file_format`` (default: by the file
    name's extension, else Parquet). ORC files read through pyarrow carry no field ids, so their columns are
    matched through the name mapping.
    """

    def __init__(self, path: str, *, mapping: MappingEntries | None, needed_ids: set[int] | None,
                 file_format: str | None = None, io: FileIO = LOCAL_FILES,
                 row_groups: Callable[[pq.FileMetaData, pa.Schema], list[int] | None] | None = None,
                 first_ids: set[int] | None = None,
                 keep_rows: Callable[["RawFile"], pa.Array | None] | None = None) -> None:
        """:param row_groups: for a Parquet file, picks the row groups to read from its footer and Arrow schema
            (None: all); the rows read keep their positions in the file (:attr:`positions`)
        :param first_ids: with ``keep_rows``, the fields read first (a filter's columns, equality delete keys)
        :param keep_rows: given the file with only ``first_ids`` read, the mask of the rows to keep (None: all);
            the other needed columns are then read and only the kept rows stay (:attr:`positions` included), so a
            selective filter decodes no more than its own columns in full"""
        self.path = path
        fmt = format_of(path, file_format)
        refuse_catalog_database(path)
        # each row's position in the file (rows of skipped row groups are not read); None while the rows are all
        # of the file's, in order (the positions 0..n-1 are then made only when asked for)
        self._positions: pa.Array | None = None
        try:
            with io.open_input(path) as source:
                if fmt in ("ORC", "AVRO"):
                    file_schema, read, self.num_rows = (_open_orc if fmt == "ORC" else _open_avro)(source, path)
                else:
                    file_schema, read, self.num_rows, self._positions = _open_parquet(
                        source, path, row_groups, dictionary_ids=first_ids if keep_rows is not None else None)
                if keep_rows is None or first_ids is None:
                    self._read_columns(file_schema, read, mapping, needed_ids)
                else:
                    self._read_columns(file_schema, read, mapping, first_ids)
                    self._read_kept_rows(file_schema, read, mapping, needed_ids, keep_rows(self))
        except FileError as e:
            raise storage_error(e, path) from e
        except CorruptFileError:
            raise
        except FileNotFoundError as e:
            raise MissingFileError(f"Cannot read file: {path} does not exist", path=path) from e
        except (pa.ArrowException, OSError, ValueError, TypeError, KeyError, IndexError, EOFError,
                UnicodeDecodeError) as e:
            raise CorruptFileError(f"Cannot read file: {path} is not a readable {fmt.title()} file ({e})",
                                   path=path) from e

    @staticmethod
    def _mapped(file_schema: pa.Schema, mapping: MappingEntries | None) -> pa.Schema:
        if not arrow_carries_field_ids(file_schema) and mapping is not None:
            return apply_name_mapping(file_schema, mapping)
        return file_schema

    def _read_columns(self, file_schema: pa.Schema, read: Any, mapping: MappingEntries | None,
                      needed_ids: set[int] | None) -> None:
        file_schema = self._mapped(file_schema, mapping)
        keep = [i for i, f in enumerate(file_schema) if needed_ids is None or subtree_ids(f) & needed_ids]
        self.schema = pa.schema([file_schema.field(i) for i in keep])
        names = [file_schema.field(i).name for i in keep]
        self.table = read(names) if keep else None

    def _read_kept_rows(self, file_schema: pa.Schema, read: Any, mapping: MappingEntries | None,
                        needed_ids: set[int] | None, mask: pa.Array | None) -> None:
        """Narrow the columns read so far to the rows ``mask`` keeps, then read the other needed columns for them
        (none at all when no row is kept); columns stay in the file's order."""
        file_schema = self._mapped(file_schema, mapping)
        have = {f.name: self.table.column(i) for i, f in enumerate(self.schema)} if self.table is not None else {}
        keep = [i for i, f in enumerate(file_schema) if needed_ids is None or subtree_ids(f) & needed_ids]
        missing = [file_schema.field(i).name for i in keep if file_schema.field(i).name not in have]
        if mask is not None:
            have = {name: column.filter(mask) for name, column in have.items()}
            self._positions = (pc.indices_nonzero(mask).cast(pa.int64()) if self._positions is None
                               else self._positions.filter(mask))
            self.num_rows = len(self._positions)
        for name, column in have.items():  # strings the filter read as dictionaries: plain for the rows kept
            if isinstance(column.type, pa.DictionaryType):
                have[name] = column.cast(file_schema.field(name).type)
        if missing:
            if self.num_rows:
                rest = read(missing)
                rest = rest.filter(mask) if mask is not None else rest
                have.update({name: rest.column(name) for name in missing})
            else:
                have.update({name: pa.chunked_array([], file_schema.field(name).type) for name in missing})
        self.schema = pa.schema([file_schema.field(i) for i in keep])
        self.table = pa.table([have[f.name] for f in self.schema], schema=self.schema) if keep else None

    @property
    def positions(self) -> pa.Array:
        """Each row's position in the file, from 0 (int64)."""
        if self._positions is None:
            self._positions = _row_numbers(self.num_rows)
        return self._positions

    @property
    def all_rows(self) -> bool:
        """Whether the rows are every row of the file, in order (row ``i`` is at position ``i``)."""
        return self._positions is None

    def column_by_id(self, field_id: int) -> pa.Array | None:
        """The values of the field with this id, found at the top level or inside structs (null where a parent
        struct is null); None when the file does not have it."""
        if self.table is None:
            return None
        for i, f in enumerate(self.schema):
            if field_id not in subtree_ids(f):
                continue
            arr: pa.Array = self.table.column(i).combine_chunks()
            field = f
            while arrow_field_id(field) != field_id:
                if not pa.types.is_struct(field.type):
                    return None  # inside a list or map: not a row-level value
                index = next(j for j, c in enumerate(arrow_children(field.type)) if field_id in subtree_ids(c))
                arr = arr.flatten()[index]
                field = field.type.field(index)
            return _plain(arr)
        return None


def _plain(arr: pa.Array) -> pa.Array:
    if isinstance(arr.type, pa.DictionaryType):
        arr = arr.dictionary_decode()
    if isinstance(arr.type, pa.BaseExtensionType):
        arr = arr.storage
    return arr


# -- file formats ----------------------------------------------------------------------------------------------

_EXTENSIONS = {".parquet": "PARQUET", ".orc": "ORC", ".avro": "AVRO"}


def format_of(path: str, file_format: str | None) -> str:
    if file_format:
        return file_format.upper()
    for ext, fmt in _EXTENSIONS.items():
        if path.lower().endswith(ext):
            return fmt
    return "PARQUET"


def _open_parquet(source: pa.NativeFile, path: str,
                  row_groups: Callable[[pq.FileMetaData, pa.Schema], list[int] | None] | None,
                  dictionary_ids: set[int] | None = None) -> tuple[pa.Schema, Any, int, pa.Array | None]:
    """:param dictionary_ids: top-level string and binary columns with these field ids are read as dictionaries
    (no string is materialized for a row a filter then drops)"""
    # coalesced read-ahead pays for object stores; on a local file it only adds copies (half a small file's read)
    pre_buffer = is_s3(path)
    pf = pq.ParquetFile(source, pre_buffer=pre_buffer)
    if dictionary_ids:
        names = [f.name for f in pf.schema_arrow if arrow_field_id(f) in dictionary_ids
                 and (pa.types.is_string(f.type) or pa.types.is_binary(f.type))]
        if names:
            pf = pq.ParquetFile(source, metadata=pf.metadata, read_dictionary=names, pre_buffer=pre_buffer)
    chosen = row_groups(pf.metadata, pf.schema_arrow) if row_groups is not None else None
    if chosen is None:
        return pf.schema_arrow, lambda names: pf.read(columns=names, use_threads=False), pf.metadata.num_rows, None
    starts, offset = [], 0
    for i in range(pf.metadata.num_row_groups):
        starts.append(offset)
        offset += pf.metadata.row_group(i).num_rows
    counts = [pf.metadata.row_group(i).num_rows for i in chosen]
    positions = pa.concat_arrays([pc.add(_row_numbers(n), pa.scalar(starts[i], pa.int64()))
                                  for i, n in zip(chosen, counts)]) if chosen else pa.array([], pa.int64())
    return (pf.schema_arrow, lambda names: pf.read_row_groups(chosen, columns=names, use_threads=False),
            sum(counts), positions)


def _open_orc(source: pa.NativeFile, path: str) -> tuple[pa.Schema, Any, int]:
    from pyarrow import orc

    f = orc.ORCFile(source)
    return f.schema, lambda names: f.read(columns=names), f.nrows


def _open_avro(source: pa.NativeFile, path: str) -> tuple[pa.Schema, Any, int]:
    import fastavro

    reader = fastavro.reader(source)
    avro_schema = reader.writer_schema
    records = list(reader)
    if not isinstance(avro_schema, dict) or avro_schema.get("type") != "record":
        raise CorruptFileError(f"Cannot read file: {path} is not an Avro file of records", path=path)
    fields = [_avro_field(f) for f in avro_schema["fields"]]
    schema = pa.schema(fields)

    def read(names: list[str]) -> pa.Table:
        chosen = [schema.field(n) for n in names]
        columns = [pa.array([_avro_value(f.type, r.get(f.name)) for r in records], type=f.type) for f in chosen]
        return pa.Table.from_arrays(columns, schema=pa.schema(chosen))

    return schema, read, len(records)


def _id_meta(field_id: Any) -> dict[bytes, bytes] | None:
    return None if field_id is None else {FIELD_ID: str(int(field_id)).encode()}


def _avro_field(f: Mapping[str, Any]) -> pa.Field:
    t, nullable = _avro_type(f["type"])
    return pa.field(f["name"], t, nullable=nullable, metadata=_id_meta(f.get("field-id")))


def _avro_type(t: Any) -> tuple[pa.DataType, bool]:
    """The Arrow type of an Avro schema, and whether it is nullable (a union with null)."""
    if isinstance(t, list):
        rest = [x for x in t if x != "null"]
        if len(rest) != 1:
            raise ValueError(f"unsupported Avro union {t!r}")
        return _avro_type(rest[0])[0], len(rest) != len(t)
    if isinstance(t, str):
        t = {"type": t}
    kind, logical = t["type"], t.get("logicalType")
    if isinstance(kind, (dict, list)):
        return _avro_type(kind)
    if logical == "decimal":
        return pa.decimal128(int(t["precision"]), int(t.get("scale", 0))), False
    if logical == "uuid":
        return pa.binary(16), False
    if kind == "int":
        return {"date": pa.date32(), "time-millis": pa.time32("ms")}.get(logical, pa.int32()), False
    if kind == "long":
        if logical in ("timestamp-micros", "timestamp-millis"):
            unit = "us" if logical.endswith("micros") else "ms"
            return pa.timestamp(unit, tz="UTC" if t.get("adjust-to-utc", False) else None), False
        if logical in ("local-timestamp-micros", "local-timestamp-millis"):
            return pa.timestamp("us" if logical.endswith("micros") else "ms"), False
        return (pa.time64("us"), False) if logical == "time-micros" else (pa.int64(), False)
    simple = {"boolean": pa.bool_(), "float": pa.float32(), "double": pa.float64(), "string": pa.string(),
              "bytes": pa.binary()}
    if kind in simple:
        return simple[kind], False
    if kind == "fixed":
        return pa.binary(int(t["size"])), False
    if kind == "record":
        return pa.struct([_avro_field(f) for f in t["fields"]]), False
    if kind == "array":
        items = t["items"]
        if logical == "map" and isinstance(items, dict) and items.get("type") == "record":
            key, value = (next(f for f in items["fields"] if f["name"] == n) for n in ("key", "value"))
            kt, _ = _avro_type(key["type"])
            vt, vnull = _avro_type(value["type"])
            return pa.map_(pa.field("key", kt, nullable=False, metadata=_id_meta(key.get("field-id"))),
                           pa.field("value", vt, nullable=vnull, metadata=_id_meta(value.get("field-id")))), False
        et, enull = _avro_type(items)
        return pa.list_(pa.field("element", et, nullable=enull, metadata=_id_meta(t.get("element-id")))), False
    if kind == "map":
        vt, vnull = _avro_type(t["values"])
        return pa.map_(pa.field("key", pa.string(), nullable=False, metadata=_id_meta(t.get("key-id"))),
                       pa.field("value", vt, nullable=vnull, metadata=_id_meta(t.get("value-id")))), False
    raise ValueError(f"unsupported Avro type {t!r}")


def _avro_value(t: pa.DataType, v: Any) -> Any:
    """A value fastavro decoded, in the form ``pa.array`` takes for ``t``."""
    if v is None:
        return None
    if isinstance(t, pa.MapType):
        items = v.items() if isinstance(v, dict) else ((x["key"], x["value"]) for x in v)
        return [(_avro_value(t.key_type, k), _avro_value(t.item_type, x)) for k, x in items]
    if pa.types.is_struct(t):
        return {f.name: _avro_value(f.type, v.get(f.name)) for f in t}
    if pa.types.is_list(t):
        return [_avro_value(t.value_type, x) for x in v]
    if pa.types.is_fixed_size_binary(t) and not isinstance(v, bytes):
        return v.bytes  # a uuid
    return v


def cast_column(arr: pa.Array, target: pa.DataType, where: str, path: str) -> pa.Array:
    if isinstance(arr.type, pa.DictionaryType):
        arr = arr.dictionary_decode()
    if arr.type == target:
        return arr
    try:
        if isinstance(target, pa.BaseExtensionType):
            storage = _plain(arr)
            if storage.type != target.storage_type:
                storage = storage.cast(target.storage_type)
            return pa.ExtensionArray.from_storage(target, storage)
        arr = _plain(arr)
        if pa.types.is_timestamp(arr.type) and pa.types.is_timestamp(target):
            if arr.type.unit != target.unit:
                arr = arr.cast(pa.timestamp(target.unit, arr.type.tz), safe=False)
            if arr.type.tz != target.tz:
                arr = pa.Array.from_buffers(target, len(arr), arr.buffers(), arr.null_count, arr.offset)
            return arr
        return arr.cast(target)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as e:
        raise CorruptFileError(f"Cannot read data file {path}: column {where!r} of type {arr.type} does not read "
                               f"as {target} ({e})", path=path) from e


def _row_numbers(n: int) -> pa.Array:
    """0, 1, ..., n - 1 as int64 (the indices of n true values: one pass, no running sum)."""
    if n == 0:
        return pa.array([], pa.int64())
    return pc.indices_nonzero(pa.repeat(pa.scalar(True), n)).cast(pa.int64())
