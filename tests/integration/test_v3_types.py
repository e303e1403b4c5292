"""Format v3 types written from Python: ``timestamp_ns``/``timestamptz_ns``, ``unknown`` and ``variant``.

Iceberg Java 1.10 (the runtime jar in the shared Spark session, called through py4j) is the reference reader: its
generic reader (``IcebergGenerics``) plans and reads icelog's tables, its transforms give the partition values
icelog must write, and its variant decoder reads icelog's variant bytes. Spark 3.5 itself has none of these types
and refuses such tables; PyIceberg 0.12 reads nanosecond timestamps and unknown columns; DuckDB 1.4.4 reads none.

Layer: tests (Iceberg Java, PyIceberg and Spark read what icelog writes).
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
import uuid
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from engine import Catalog
from engine.errors import UnsupportedTypeError, ValidationError
from engine.model.schema import Schema
from engine.model.transforms import parse_transform
from engine.model.types import (
    LongType,
    NestedField,
    StringType,
    TimestampNsType,
    TimestamptzNsType,
    UnknownType,
    VariantType,
)
from engine.model.values import from_bytes, to_bytes, value_to_json
from engine.model.variant import encode_variant, variant_array, variant_values

NANOS_PER_DAY = 86_400 * 10**9
#: nanosecond values around the corners: sub-microsecond digits, before 1970, and the last nanosecond of the first
#: second of a day/hour before 1970 (where Java's transforms give one unit less than the floor)
NANOS = [1_510_871_468_123_456_789, -1, 0, 5, -NANOS_PER_DAY + 999_999_999, -3_600 * 10**9 + 999_999_999,
         -NANOS_PER_DAY * 365 + 999_999_999, 1_700_000_000_000_000_001, -123_456_789_012_345_678]


def _field(field_id: int, name: str, field_type: Any, required: bool = False) -> NestedField:
    return NestedField(field_id=field_id, name=name, field_type=field_type, required=required)


def _java_table(spark: Any, metadata_location: str) -> Any:
    """Iceberg Java's view of a table from its metadata file (no catalog)."""
    jvm = spark._jvm
    io = jvm.org.apache.iceberg.hadoop.HadoopFileIO(spark._jsc.hadoopConfiguration())
    ops = jvm.org.apache.iceberg.StaticTableOperations(metadata_location, io)
    return jvm.org.apache.iceberg.BaseTable(ops, "icelog")


def _java_rows(spark: Any, table: Any, columns: list[str], where: Any = None) -> list[str]:
    """Iceberg Java's generic reader: every row of ``columns`` (as ``Record.toString``), optionally filtered."""
    jvm = spark._jvm
    selected = jvm.java.util.ArrayList()
    for c in columns:
        selected.add(c)
    builder = jvm.org.apache.iceberg.data.IcebergGenerics.read(table).select(selected)
    if where is not None:
        builder = builder.where(where)
    rows = []
    iterable = builder.build()
    it = iterable.iterator()
    while it.hasNext():
        rows.append(it.next().toString())
    iterable.close()
    return sorted(rows)


def _java_long(spark: Any, v: int) -> Any:
    return spark._jvm.java.lang.Long.valueOf(str(v))


def test_nanosecond_timestamps_keep_their_nanoseconds_and_partition_as_iceberg_java_does(spark: Any,
                                                                                        tmp_path: Path) -> None:
    from pyiceberg.table import StaticTable

    schema = Schema((_field(1, "id", LongType(), required=True), _field(2, "ts", TimestampNsType()),
                     _field(3, "tz", TimestamptzNsType())))
    ids = list(range(len(NANOS)))
    with Catalog.open(tmp_path / "wh") as cat:
        cat.create_namespace("db")
        with pytest.raises(UnsupportedTypeError, match="column 'ts' is a timestamp_ns, which needs format version 3"):
            cat.create_table("db.v2", schema=schema, format_version=2)
        t = cat.create_table("db.t", schema=schema, format_version=3,
                             partition_by=["day(ts)", "bucket(8, tz)", "hour(tz)"])
        t.append(pa.table({"id": ids, "ts": pa.array(NANOS, pa.timestamp("ns")),
                           "tz": pa.array(NANOS, pa.timestamp("ns", tz="UTC"))}))
        got = t.scan().to_arrow().sort_by("id")
        assert got.schema.field("ts").type == pa.timestamp("ns")
        assert got.column("ts").cast(pa.int64()).to_pylist() == NANOS
        assert got.column("tz").cast(pa.int64()).to_pylist() == NANOS
        # bounds are nanoseconds, read from the Parquet statistics of each file
        for f in t.inspect.files().to_pylist():
            held = pq.read_table(f["file_path"].removeprefix("file://")).column("ts").cast(pa.int64()).to_pylist()
            assert from_bytes(TimestampNsType(), dict(f["lower_bounds"])[2]) == min(held)
            assert from_bytes(TimestampNsType(), dict(f["upper_bounds"])[2]) == max(held)
        partitions = {((p["ts_day"] - dt.date(1970, 1, 1)).days, p["tz_bucket"], p["tz_hour"])
                      for p in (f["partition"] for f in t.inspect.files().to_pylist())}
        # filters on nanoseconds, with partition and bounds pruning
        before_1970 = sorted(i for i, n in zip(ids, NANOS) if n < 0)
        assert sorted(t.scan("ts < '1970-01-01T00:00:00'").to_arrow().column("id").to_pylist()) == before_1970
        exact = t.scan("tz = '2017-11-16T22:31:08.123456789+00:00'").to_arrow().column("id").to_pylist()
        assert exact == [0]
        assert t.scan("ts = '2017-11-16T22:31:08.123456788'").to_arrow().num_rows == 0
        before_default = t.metadata_location  # PyIceberg 0.12 cannot parse a timestamp_ns default
        # a default in Appendix D's nanosecond form fills the rows written before the column
        t.update_schema().add_column("at", "timestamp_ns", default="2017-11-16T22:31:08.000000001").commit()
        assert t.state.schema.find_field("at").initial_default == "2017-11-16T22:31:08.000000001"
        assert set(t.scan().to_arrow().column("at").cast(pa.int64()).to_pylist()) == {1_510_871_468_000_000_001}
        location = t.metadata_location

    # Iceberg Java's transforms give the partition values icelog wrote. py4j passes an int that fits 32 bits as an
    # Integer, which Java's nanosecond transforms cannot take; those values go through the functions the transforms
    # call (DateTimeUtil.nanosToDays/Hours, BucketUtil.hash of nanosToMicros), larger ones through the transforms
    jvm = spark._jvm
    types = jvm.org.apache.iceberg.types.Types
    transforms = jvm.org.apache.iceberg.transforms.Transforms
    datetime_util = jvm.org.apache.iceberg.util.DateTimeUtil
    day = transforms.day().bind(types.TimestampNanoType.withoutZone())
    bucket = transforms.bucket(8).bind(types.TimestampNanoType.withZone())
    hour = transforms.hour().bind(types.TimestampNanoType.withZone())

    def java_partition(n: int) -> tuple[int, int, int]:
        if abs(n) >= 2**31:
            return day.apply(n), bucket.apply(n), hour.apply(n)
        hashed = jvm.org.apache.iceberg.util.BucketUtil.hash(datetime_util.nanosToMicros(n))
        return datetime_util.nanosToDays(n), (hashed & 0x7FFFFFFF) % 8, datetime_util.nanosToHours(n)

    java = {java_partition(n) for n in NANOS}
    assert partitions == java
    for n in NANOS:  # the same functions icelog binds
        assert parse_transform("day").bind(TimestampNsType())(n) == java_partition(n)[0]
        assert parse_transform("bucket[8]").bind(TimestamptzNsType())(n) == java_partition(n)[1]
        assert parse_transform("hour").bind(TimestamptzNsType())(n) == java_partition(n)[2]
    single_value = jvm.org.apache.iceberg.SingleValueParser
    conversions = jvm.org.apache.iceberg.types.Conversions
    for java_type, ours in ((types.TimestampNanoType.withoutZone(), TimestampNsType()),
                            (types.TimestampNanoType.withZone(), TimestamptzNsType())):
        for n in NANOS:  # Appendix D: Java's JSON single value and bytes of each value are icelog's
            if abs(n) < 2**31:
                continue  # see above: Java needs a Long
            assert single_value.toJson(java_type, n) == json.dumps(value_to_json(ours, n))
            assert bytes(conversions.toByteBuffer(java_type, n).array()) == to_bytes(ours, n)
        # and Java parses icelog's JSON of every value back to the same nanoseconds
        for n in NANOS:
            assert single_value.fromJson(java_type, json.dumps(value_to_json(ours, n))) == n

    # Iceberg Java plans and reads the table: every row, and the rows of a filter pruned by icelog's metadata
    table = _java_table(spark, location)
    assert str(table.schema().findType("ts")) == "timestamp_ns"
    rows = _java_rows(spark, table, ["id", "ts", "at"])
    # Java's generic reader gives an initial default in its internal form (here the nanoseconds), not as a
    # LocalDateTime; the value is the one icelog recorded
    assert "Record(0, 2017-11-16T22:31:08.123456789, 1510871468000000001)" in rows
    assert len(rows) == len(NANOS)
    expressions = jvm.org.apache.iceberg.expressions.Expressions
    filtered = _java_rows(spark, table, ["id"], expressions.lessThan("ts", "1970-01-01T00:00:00"))
    assert sorted(int(r.removeprefix("Record(").split(",")[0].rstrip(")")) for r in filtered) == before_1970

    # PyIceberg 0.12 reads the nanoseconds too
    py = StaticTable.from_metadata(before_default).scan(selected_fields=("id", "ts", "tz")).to_arrow().sort_by("id")
    assert py.column("ts").cast(pa.int64()).to_pylist() == NANOS

    # Spark 3.5 has no nanosecond timestamps: the Iceberg runtime refuses the table
    with pytest.raises(Exception, match="timestamp_ns"):
        spark.read.format("iceberg").load(location).collect()


def test_unknown_columns_are_never_stored_and_promote_to_any_type(spark: Any, tmp_path: Path) -> None:
    from pyiceberg.table import StaticTable

    schema = Schema((_field(1, "id", LongType(), required=True), _field(2, "later", UnknownType())))
    with Catalog.open(tmp_path / "wh") as cat:
        cat.create_namespace("db")
        with pytest.raises(UnsupportedTypeError, match="column 'later' is a unknown, which needs format version 3"):
            cat.create_table("db.v2", schema=schema)
        t = cat.create_table("db.t", schema=schema, format_version=3)
        t.append(pa.table({"id": [1, 2]}))
        t.append(pa.table({"id": [3], "later": pa.nulls(1)}))
        version, files = t.state.version, sorted((tmp_path / "wh").rglob("*.parquet"))
        with pytest.raises(ValidationError, match="column 'later' of type int64 does not fit unknown"):
            t.append(pa.table({"id": [4], "later": [4]}))
        with pytest.raises(ValidationError, match="column 'must' is of type unknown, which must be optional"):
            t.update_schema(allow_incompatible_changes=True).add_column("must", "unknown", required=True).commit()
        with pytest.raises(ValidationError, match="identity cannot apply to type unknown"):
            t.update_spec().add_field("later", "identity").commit()
        assert t.state.version == version and sorted((tmp_path / "wh").rglob("*.parquet")) == files
        for f in files:  # the column is in no data file
            assert pq.read_schema(f).names == ["id"]
        # unknown promotes to any type; rows written before read as nulls
        t.update_schema().update_column("later", "string").commit()
        t.append(pa.table({"id": [4], "later": ["four"]}))
        rows = sorted(t.scan().to_arrow().to_pylist(), key=lambda r: r["id"])
        assert rows == [{"id": 1, "later": None}, {"id": 2, "later": None}, {"id": 3, "later": None},
                        {"id": 4, "later": "four"}]
        assert t.state.schema.find_field("later").field_type == StringType()
        first = t.state.schemas[0]
        assert first.find_field("later").field_type == UnknownType()
        u = cat.create_table("db.u", schema=schema, format_version=3)
        u.append(pa.table({"id": [7]}))
        unknown_location, location = u.metadata_location, t.metadata_location

    jvm_rows = _java_rows(spark, _java_table(spark, unknown_location), ["id", "later"])
    assert jvm_rows == ["Record(7, null)"]
    assert _java_rows(spark, _java_table(spark, location), ["id", "later"]) == [
        "Record(1, null)", "Record(2, null)", "Record(3, null)", "Record(4, four)"]
    py = StaticTable.from_metadata(unknown_location).scan().to_arrow()
    assert py.to_pylist() == [{"id": 7, "later": None}]
    with pytest.raises(Exception, match="unknown"):  # Spark 3.5's Iceberg runtime has no Spark type for it
        spark.read.format("iceberg").load(unknown_location).collect()


VARIANTS: list[Any] = [
    {"name": "ada", "tags": ["x", "y"], "score": 1.5, "nested": {"b": 2, "a": None}},
    [1, -300, 70_000, 2**40, decimal.Decimal("1.25"), "s" * 70, b"\x00\xff", True, False],
    None,
    "short",
    dt.date(2024, 3, 1),
    dt.datetime(2024, 3, 1, 12, 30, 0, 5),
    dt.datetime(2024, 3, 1, 12, 30, tzinfo=dt.timezone.utc),
    uuid.UUID(int=7),
    {"many": list(range(300))},
]


def test_variant_values_round_trip_and_iceberg_java_decodes_them(spark: Any, tmp_path: Path) -> None:
    schema = Schema((_field(1, "id", LongType(), required=True), _field(2, "doc", VariantType())))
    ids = list(range(len(VARIANTS)))
    with Catalog.open(tmp_path / "wh") as cat:
        cat.create_namespace("db")
        with pytest.raises(UnsupportedTypeError, match="column 'doc' is a variant, which needs format version 3"):
            cat.create_table("db.v2", schema=schema)
        t = cat.create_table("db.t", schema=schema, format_version=3)
        t.append(pa.table({"id": ids, "doc": variant_array(VARIANTS)}))
        t.append(pa.table({"id": [100]}))                              # no column: a null variant
        got = t.scan().to_arrow().sort_by("id")
        assert got.schema.field("doc").metadata[b"ARROW:extension:name"] == b"arrow.parquet.variant"
        assert variant_values(got.column("doc")) == VARIANTS + [None]
        assert sorted(t.scan("doc is null").to_arrow().column("id").to_pylist()) == [2, 100]
        # nothing to compare, partition or sort by; refused before anything lands
        version = t.state.version
        with pytest.raises(ValidationError, match="variant column has no single values"):
            t.scan("doc = 1").to_arrow()
        with pytest.raises(ValidationError, match="identity cannot apply to type variant"):
            t.update_spec().add_field("doc", "identity").commit()
        with pytest.raises(ValidationError, match="column 'doc': Cannot use a string column as a variant"):
            t.append(pa.table({"id": [5], "doc": ["{}"]}))
        assert t.state.version == version
        files = t.inspect.files().to_pylist()
        written = [Path(f["file_path"].removeprefix("file://")) for f in files]
        location = t.metadata_location
    for f in files:  # no bounds for a variant column
        assert 2 not in dict(f["lower_bounds"] or []) and 2 not in dict(f["upper_bounds"] or [])
    # the Parquet layout of an unshredded variant: a group with the field id holding binary metadata and value
    parquet_schema = str(pq.ParquetFile(written[0]).schema)
    assert "optional group field_id=2 doc" in parquet_schema
    assert "required binary field_id=-1 metadata" in parquet_schema
    assert "required binary field_id=-1 value" in parquet_schema

    # Iceberg Java's schema has the variant, and its decoder reads every value icelog encoded
    jvm = spark._jvm
    assert str(_java_table(spark, location).schema().findType("doc")) == "variant"
    texts = []
    for value in VARIANTS:
        if value is None:
            continue
        metadata, encoded = encode_variant(value)
        buffer = jvm.java.nio.ByteBuffer
        order = jvm.java.nio.ByteOrder.LITTLE_ENDIAN
        java_metadata = getattr(jvm.org.apache.iceberg.variants.VariantMetadata, "from")(
            buffer.wrap(metadata).order(order))
        texts.append(str(getattr(jvm.org.apache.iceberg.variants.VariantValue, "from")(
            java_metadata, buffer.wrap(encoded).order(order))))
    assert texts[0] == ("VariantObject(fields={name: Variant(type=STRING, value=ada), nested: VariantObject(fields={"
                        "a: Variant(type=NULL, value=null), b: Variant(type=INT8, value=2)}), score: Variant(type=DOUBLE, "
                        "value=1.5), tags: VariantArray([Variant(type=STRING, value=x), Variant(type=STRING, "
                        "value=y)])})")
    assert texts[1].startswith("VariantArray([Variant(type=INT8, value=1), Variant(type=INT16, value=-300), "
                               "Variant(type=INT32, value=70000), Variant(type=INT64, value=1099511627776), "
                               "Variant(type=DECIMAL4, value=1.25), Variant(type=STRING, value=sss")
    assert texts[1].endswith("Variant(type=BINARY, value=00FF), Variant(type=BOOLEAN_TRUE, value=true), "
                             "Variant(type=BOOLEAN_FALSE, value=false)])")
    assert texts[2:7] == ["Variant(type=STRING, value=short)", "Variant(type=DATE, value=2024-03-01)",
                          "Variant(type=TIMESTAMPNTZ, value=2024-03-01T12:30:00.000005)",
                          "Variant(type=TIMESTAMPTZ, value=2024-03-01T12:30:00+00:00)",
                          "Variant(type=UUID, value=00000000-0000-0000-0000-000000000007)"]
    assert texts[7].startswith("VariantObject(fields={many: VariantArray([Variant(type=INT8, value=0), ")
    assert texts[7].count("Variant(type=") == 300 and "Variant(type=INT16, value=299)" in texts[7]
    with pytest.raises(Exception, match="variant"):  # Spark 3.5 has no variant type
        spark.read.format("iceberg").load(location).collect()
