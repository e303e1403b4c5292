"""Tests for engine.model.arrow_schema: Iceberg <-> Arrow types, Parquet field ids, PyIceberg interop."""

from __future__ import annotations

import datetime
import decimal
import json
import uuid
from pathlib import Path

import attrs
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from engine.errors import ValidationError
from engine.model.arrow_schema import (
    FIELD_ID_KEY,
    arrow_type_for,
    empty_arrow_table,
    schema_from_arrow,
    schema_to_arrow,
)
from engine.model.schema import Schema
from engine.model.types import (
    BinaryType,
    BooleanType,
    DateType,
    DecimalType,
    DoubleType,
    FixedType,
    FloatType,
    IntegerType,
    ListType,
    LongType,
    MapType,
    NestedField,
    StringType,
    StructType,
    TimestampType,
    TimestamptzType,
    TimeType,
    UUIDType,
)


def req(field_id: int, name: str, t, doc: str | None = None) -> NestedField:
    return NestedField(field_id=field_id, name=name, field_type=t, required=True, doc=doc)


def opt(field_id: int, name: str, t, doc: str | None = None) -> NestedField:
    return NestedField(field_id=field_id, name=name, field_type=t, required=False, doc=doc)


ARROW_OF = [
    (BooleanType(), pa.bool_()),
    (IntegerType(), pa.int32()),
    (LongType(), pa.int64()),
    (FloatType(), pa.float32()),
    (DoubleType(), pa.float64()),
    (DecimalType(9, 2), pa.decimal128(9, 2)),
    (DecimalType(38, 0), pa.decimal128(38, 0)),
    (DateType(), pa.date32()),
    (TimeType(), pa.time64("us")),
    (TimestampType(), pa.timestamp("us")),
    (TimestamptzType(), pa.timestamp("us", tz="UTC")),
    (StringType(), pa.string()),
    (UUIDType(), pa.uuid()),
    (FixedType(3), pa.binary(3)),
    (BinaryType(), pa.binary()),
]

# one value per primitive, in the canonical Python representation where Arrow accepts it directly
SAMPLE = {
    BooleanType(): True, IntegerType(): -7, LongType(): 2**40, FloatType(): 1.5, DoubleType(): -2.25,
    DecimalType(9, 2): decimal.Decimal("1234567.89"), DecimalType(38, 0): decimal.Decimal(10**37),
    DateType(): datetime.date(1969, 12, 31), TimeType(): datetime.time(10, 11, 12, 123456),
    TimestampType(): datetime.datetime(2024, 1, 2, 3, 4, 5, 6),
    TimestamptzType(): datetime.datetime(2024, 1, 2, 3, 4, 5, 6, tzinfo=datetime.timezone.utc),
    StringType(): "héllo", UUIDType(): uuid.UUID("f79c3e09-677c-4bbd-a479-3f349cb785e7"), FixedType(3): b"abc",
    BinaryType(): b"\x00\x01",
}


def all_types_schema() -> Schema:
    primitives = tuple(opt(i + 1, f"c_{i}", t) for i, (t, _) in enumerate(ARROW_OF))
    return Schema(primitives + (
        req(20, "id", LongType(), doc="row id"),
        opt(21, "tags", ListType(element_id=22, element_type=StringType(), element_required=True)),
        opt(23, "points", ListType(element_id=24, element_type=StructType((req(25, "x", DoubleType()),
                                                                            opt(26, "y", DoubleType()))))),
        opt(27, "props", MapType(key_id=28, key_type=StringType(), value_id=29, value_type=IntegerType())),
        req(30, "loc", StructType((opt(31, "city", StringType()),
                                   opt(32, "geo", MapType(key_id=33, key_type=IntegerType(), value_id=34,
                                                          value_type=ListType(element_id=35,
                                                                              element_type=UUIDType()),
                                                          value_required=True))))),
    ), schema_id=1)


def arrow_field_ids(fields) -> dict[str, int | None]:
    """Every Arrow field by dotted path, with its PARQUET:field_id (None when absent)."""
    out: dict[str, int | None] = {}

    def visit(field: pa.Field, path: str) -> None:
        raw = (field.metadata or {}).get(FIELD_ID_KEY)
        out[path] = None if raw is None else int(raw)
        t = field.type
        if pa.types.is_struct(t):
            for i in range(t.num_fields):
                visit(t.field(i), f"{path}.{t.field(i).name}")
        elif pa.types.is_map(t):
            visit(t.key_field, f"{path}.key")
            visit(t.item_field, f"{path}.value")
        elif pa.types.is_list(t) or pa.types.is_large_list(t):
            visit(t.value_field, f"{path}.element")

    for f in fields:
        visit(f, f.name)
    return out


def write_empty_parquet(path: Path, arrow_schema: pa.Schema) -> None:
    """A Parquet file with no rows; without the saved Arrow schema, so ids come from the Parquet schema only."""
    with pq.ParquetWriter(path, arrow_schema, store_schema=False):
        pass


def test_empty_arrow_table_handles_nested_uuid() -> None:
    schema = all_types_schema()
    table = empty_arrow_table(schema)
    assert table.num_rows == 0
    assert table.schema == schema_to_arrow(schema)
    assert table.schema.field("loc").type.field("geo").type.item_type.value_type == pa.uuid()


# -- Iceberg -> Arrow -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(("iceberg", "arrow"), ARROW_OF, ids=[str(t) for t, _ in ARROW_OF])
def test_primitive_mapping(iceberg, arrow) -> None:
    assert arrow_type_for(iceberg) == arrow
    field = schema_to_arrow(Schema((req(5, "c", iceberg),))).field("c")
    assert field.type == arrow
    assert field.nullable is False
    assert field.metadata == {FIELD_ID_KEY: b"5"}


def test_every_nested_field_carries_its_id_and_nullability() -> None:
    schema = all_types_schema()
    arrow = schema_to_arrow(schema)
    ids = arrow_field_ids(arrow)
    assert None not in ids.values()
    assert {path: schema.find_column_name(i) for path, i in ids.items()} == {p: p for p in ids}
    assert sorted(ids.values()) == sorted(schema.index_by_id())
    tags = arrow.field("tags").type
    assert tags == pa.list_(pa.field("element", pa.string(), nullable=False, metadata={FIELD_ID_KEY: b"22"}))
    props = arrow.field("props").type
    assert props.key_field.name == "key" and props.key_field.nullable is False
    assert props.item_field.name == "value" and props.item_field.nullable is True
    assert arrow.field("loc").nullable is False
    assert arrow.field("id").metadata[b"doc"] == b"row id"


# -- Arrow -> Iceberg ------------------------------------------------------------------------------------------


def test_round_trip_through_arrow() -> None:
    schema = all_types_schema()
    assert schema_from_arrow(schema_to_arrow(schema), schema_id=1) == schema


def test_round_trip_through_parquet_file_ids(tmp_path: Path) -> None:
    # store_schema=False: the ids come back from the Parquet schema itself, not from the saved Arrow schema
    schema = all_types_schema()
    path = tmp_path / "f.parquet"
    write_empty_parquet(path, schema_to_arrow(schema))
    assert schema_from_arrow(pq.read_schema(path), schema_id=1) == attrs.evolve(
        schema, fields=tuple(attrs.evolve(f, doc=None) for f in schema.fields))
    parquet_schema = pq.ParquetFile(path).schema
    assert "optional fixed_len_byte_array(16) field_id=13 c_12 (UUID);" in str(parquet_schema)
    assert "required group field_id=30 loc {" in str(parquet_schema)
    assert "required binary field_id=28 key (String);" in str(parquet_schema)
    assert "required binary field_id=22 element (String);" in str(parquet_schema)


@pytest.mark.parametrize(("arrow", "iceberg"), [
    (pa.int8(), IntegerType()), (pa.int16(), IntegerType()), (pa.int32(), IntegerType()), (pa.int64(), LongType()),
    (pa.float32(), FloatType()), (pa.float64(), DoubleType()), (pa.bool_(), BooleanType()),
    (pa.string(), StringType()), (pa.large_string(), StringType()), (pa.string_view(), StringType()),
    (pa.binary(), BinaryType()), (pa.large_binary(), BinaryType()), (pa.binary(7), FixedType(7)),
    (pa.uuid(), UUIDType()), (pa.decimal128(10, 3), DecimalType(10, 3)), (pa.decimal256(20, 1), DecimalType(20, 1)),
    (pa.date32(), DateType()), (pa.date64(), DateType()),
    (pa.time32("s"), TimeType()), (pa.time32("ms"), TimeType()), (pa.time64("us"), TimeType()),
    (pa.time64("ns"), TimeType()),
    (pa.timestamp("s"), TimestampType()), (pa.timestamp("ns"), TimestampType()),
    (pa.timestamp("ms", tz="UTC"), TimestamptzType()), (pa.timestamp("us", tz="Europe/Paris"), TimestamptzType()),
    (pa.dictionary(pa.int32(), pa.string()), StringType()),
    (pa.large_list(pa.int64()), ListType(element_id=2, element_type=LongType())),
    (pa.list_(pa.field("x", pa.int64(), nullable=False)),
     ListType(element_id=2, element_type=LongType(), element_required=True)),
    (pa.list_(pa.int32(), 3), ListType(element_id=2, element_type=IntegerType())),
])
def test_accepted_arrow_types(arrow, iceberg) -> None:
    schema = schema_from_arrow(pa.schema([pa.field("c", arrow)]))
    assert schema.find_field("c") == opt(1, "c", iceberg)


def test_fresh_ids_follow_java_order_when_no_field_has_one() -> None:
    arrow = pa.schema([
        pa.field("a", pa.struct([pa.field("a1", pa.int32()),
                                 pa.field("a2", pa.list_(pa.struct([pa.field("e", pa.int32())])))])),
        pa.field("b", pa.map_(pa.struct([pa.field("k", pa.string(), nullable=False)]), pa.list_(pa.int64()))),
        pa.field("c", pa.int64(), nullable=False),
    ])
    schema = schema_from_arrow(arrow, schema_id=4)
    assert schema.schema_id == 4
    assert {schema.find_column_name(i): i for i in range(1, schema.highest_field_id + 1)} == {
        "a": 1, "b": 2, "c": 3,
        "a.a1": 4, "a.a2": 5, "a.a2.element": 6, "a.a2.element.e": 7,
        "b.key": 8, "b.value": 9, "b.key.k": 10, "b.value.element": 11,
    }
    assert schema.find_field("c").required is True
    assert schema.find_field("b.key").required is True
    assert schema.find_field("b.value").required is False


@pytest.mark.parametrize(("arrow", "message"), [
    (pa.uint8(), "uint8"), (pa.uint32(), "uint32"), (pa.uint64(), "uint64"), (pa.float16(), "halffloat"),
    (pa.duration("us"), "duration"), (pa.month_day_nano_interval(), "interval"),
    (pa.decimal256(40, 2), "decimal256"), (pa.json_(), "extension"),
    (pa.list_(pa.uint16()), "\\.element': type uint16"),
    (pa.struct([pa.field("inner", pa.uint16())]), "\\.inner': type uint16"),
    (pa.map_(pa.string(), pa.float16()), "\\.value': type halffloat"),
])
def test_unsupported_arrow_types_name_the_field(arrow, message) -> None:
    with pytest.raises(ValidationError, match=f"^Cannot convert Arrow field 'c.*{message}"):
        schema_from_arrow(pa.schema([pa.field("c", arrow)]))


def test_format_v3_types_map_to_arrow_and_back() -> None:
    from engine.model.types import TimestampNsType, TimestamptzNsType, UnknownType, VariantType
    from engine.model.variant import VARIANT_STORAGE_TYPE

    schema = Schema((NestedField(field_id=1, name="ns", field_type=TimestampNsType()),
                     NestedField(field_id=2, name="nstz", field_type=TimestamptzNsType()),
                     NestedField(field_id=3, name="u", field_type=UnknownType()),
                     NestedField(field_id=4, name="v", field_type=VariantType())))
    arrow = schema_to_arrow(schema)
    assert [f.type for f in arrow] == [pa.timestamp("ns"), pa.timestamp("ns", tz="UTC"), pa.null(), VARIANT_STORAGE_TYPE]
    assert arrow.field("v").metadata[b"ARROW:extension:name"] == b"arrow.parquet.variant"
    back = schema_from_arrow(arrow)
    # nanosecond Arrow timestamps read as microsecond timestamps unless the schema says otherwise (older tables
    # cannot hold nanoseconds); null is unknown, the marked struct is variant
    assert [f.field_type for f in back.fields] == [TimestampType(), TimestamptzType(), UnknownType(), VariantType()]


def test_partial_or_bad_field_ids_rejected() -> None:
    partial = pa.schema([pa.field("a", pa.int32(), metadata={FIELD_ID_KEY: b"1"}),
                         pa.field("b", pa.list_(pa.int32()), metadata={FIELD_ID_KEY: b"2"})])
    with pytest.raises(ValidationError, match="some do not, e.g. 'b.element'"):
        schema_from_arrow(partial)
    with pytest.raises(ValidationError, match="'a': field id b'x' is not an integer"):
        schema_from_arrow(pa.schema([pa.field("a", pa.int32(), metadata={FIELD_ID_KEY: b"x"})]))
    duplicate = pa.schema([pa.field("a", pa.int32(), metadata={FIELD_ID_KEY: b"1"}),
                           pa.field("b", pa.int32(), metadata={FIELD_ID_KEY: b"1"})])
    with pytest.raises(ValidationError, match="field id 1 is used by both 'a' and 'b'"):
        schema_from_arrow(duplicate)
    with pytest.raises(ValidationError, match="two fields named 'a'"):
        schema_from_arrow(pa.schema([pa.field("a", pa.int32()), pa.field("a", pa.int64())]))
    with pytest.raises(ValidationError, match="expected a pyarrow.Schema"):
        schema_from_arrow(pa.struct([pa.field("a", pa.int32())]))


# -- PyIceberg 0.12 interop ------------------------------------------------------------------------------------


def test_pyiceberg_maps_uuid_to_arrow_uuid_like_us() -> None:
    pyarrow_io = pytest.importorskip("pyiceberg.io.pyarrow")
    from pyiceberg.schema import Schema as PySchema
    from pyiceberg.types import NestedField as PyField
    from pyiceberg.types import UUIDType as PyUUID

    theirs = pyarrow_io.schema_to_pyarrow(PySchema(PyField(1, "u", PyUUID(), required=True)))
    assert theirs.field("u").type == arrow_type_for(UUIDType()) == pa.uuid()


def test_pyiceberg_reads_our_parquet_ids(tmp_path: Path) -> None:
    pyarrow_io = pytest.importorskip("pyiceberg.io.pyarrow")
    from pyiceberg.schema import Schema as PySchema

    schema = all_types_schema()
    path = tmp_path / "f.parquet"
    write_empty_parquet(path, schema_to_arrow(schema))
    read_back = pyarrow_io.pyarrow_to_schema(pq.read_schema(path))
    expected = PySchema.model_validate_json(json.dumps(schema.to_json()))
    # PyIceberg's converter leaves schema id and docs at their defaults
    assert read_back.as_struct() == PySchema.model_validate_json(
        json.dumps(attrs.evolve(schema, fields=tuple(attrs.evolve(f, doc=None) for f in schema.fields)).to_json())
    ).as_struct()
    assert read_back.highest_field_id == expected.highest_field_id == 35
    # and PyIceberg's own Arrow schema for the same table agrees with ours on every id
    assert arrow_field_ids(pyarrow_io.schema_to_pyarrow(expected)) == arrow_field_ids(schema_to_arrow(schema))


def _pyiceberg_scan(schema: Schema, path: Path, record_count: int) -> pa.Table:
    """Read one Parquet file the way a PyIceberg table scan does: projected by field id onto `schema`."""
    from pyiceberg.expressions import AlwaysTrue
    from pyiceberg.io.pyarrow import ArrowScan, PyArrowFileIO
    from pyiceberg.manifest import DataFile, FileFormat
    from pyiceberg.partitioning import UNPARTITIONED_PARTITION_SPEC
    from pyiceberg.schema import Schema as PySchema
    from pyiceberg.table import FileScanTask
    from pyiceberg.table.metadata import new_table_metadata
    from pyiceberg.table.sorting import UNSORTED_SORT_ORDER
    from pyiceberg.typedef import Record

    py_schema = PySchema.model_validate_json(json.dumps(schema.to_json()))
    metadata = new_table_metadata(py_schema, UNPARTITIONED_PARTITION_SPEC, UNSORTED_SORT_ORDER, str(path.parent))
    # new_table_metadata reassigns fresh ids; keep ours so that the projection really is by our ids
    metadata = metadata.model_copy(update={"schemas": [py_schema], "current_schema_id": py_schema.schema_id,
                                           "last_column_id": py_schema.highest_field_id})
    data_file = DataFile.from_args(file_path=str(path), file_format=FileFormat.PARQUET, partition=Record(),
                                   record_count=record_count, file_size_in_bytes=path.stat().st_size)
    data_file.spec_id = 0
    return ArrowScan(metadata, PyArrowFileIO(), py_schema, AlwaysTrue()).to_table([FileScanTask(data_file)])


def test_pyiceberg_scan_reads_every_type_by_field_id(tmp_path: Path) -> None:
    pytest.importorskip("pyiceberg.io.pyarrow")
    schema = all_types_schema()
    row = {f"c_{i}": SAMPLE[t] for i, (t, _) in enumerate(ARROW_OF)}
    row.update(id=1, tags=["a", "b"], points=[{"x": 1.0, "y": None}], props=[("k", 5)],
               loc={"city": "Oslo", "geo": [(7, [uuid.UUID(int=1).bytes])]})
    row[f"c_{[t for t, _ in ARROW_OF].index(UUIDType())}"] = SAMPLE[UUIDType()].bytes
    # pyarrow cannot build nested pa.uuid() values from Python objects, but casts 16-byte storage to them
    storage = Schema.from_json(json.loads(json.dumps(schema.to_json()).replace('"uuid"', '"fixed[16]"')))
    table = pa.Table.from_pylist([row], schema=schema_to_arrow(storage)).cast(schema_to_arrow(schema))
    path = tmp_path / "data.parquet"
    pq.write_table(table, path)
    result = _pyiceberg_scan(schema, path, 1).to_pylist()[0]
    for i, (t, _) in enumerate(ARROW_OF):
        assert result[f"c_{i}"] == SAMPLE[t], t
    assert result["tags"] == ["a", "b"]
    assert result["points"] == [{"x": 1.0, "y": None}]
    assert result["props"] == [("k", 5)]
    assert result["loc"] == {"city": "Oslo", "geo": [(7, [uuid.UUID(int=1)])]}


def test_pyiceberg_scan_projects_renamed_and_added_columns_by_id(tmp_path: Path) -> None:
    pytest.importorskip("pyiceberg.io.pyarrow")
    written = Schema((req(1, "a", LongType()), opt(2, "b", StringType()), opt(3, "c", DoubleType())))
    path = tmp_path / "old.parquet"
    pq.write_table(pa.Table.from_pylist([{"a": 1, "b": "x", "c": 0.5}], schema=schema_to_arrow(written)), path)
    # the spec's column projection example: rename c, reorder, drop a, add a new column named a
    evolved = Schema((opt(3, "measurement", DoubleType()), opt(2, "name", StringType()), opt(4, "a", LongType())),
                     schema_id=1)
    assert _pyiceberg_scan(evolved, path, 1).to_pylist() == [{"measurement": 0.5, "name": "x", "a": None}]
