"""Whether an equality delete file may apply to a data file, from both files' metrics (Java's
``DeleteFileIndex.canContainEqDeletesForFile``): ranges, null counts, and what unknown metrics mean."""

from __future__ import annotations

import struct

from engine.model.data_file import DataFile, DataFileContent
from engine.model.delete_overlap import equality_deletes_may_apply
from engine.model.schema import Schema
from engine.model.types import DoubleType, LongType, NestedField, StructType

SCHEMA = Schema((NestedField(field_id=1, name="id", field_type=LongType()),
                 NestedField(field_id=2, name="req", field_type=LongType(), required=True),
                 NestedField(field_id=3, name="x", field_type=DoubleType()),
                 NestedField(field_id=4, name="s", field_type=StructType(()))))
FIELDS = SCHEMA.index_by_id()


def _long(v: int) -> bytes:
    return struct.pack("<q", v)


def _file(lo: int | None, hi: int | None, *, nulls: int | None = 0, values: int = 10, eq: tuple[int, ...] = (),
          field_id: int = 1, nans: int | None = None, bound=_long) -> DataFile:
    return DataFile(file_path=f"/f{lo}-{hi}", record_count=values, file_size_in_bytes=1,
                    content=DataFileContent.EQUALITY_DELETES if eq else DataFileContent.DATA, equality_ids=eq or None,
                    value_counts=((field_id, values),), null_value_counts=None if nulls is None else ((field_id, nulls),),
                    nan_value_counts=None if nans is None else ((field_id, nans),),
                    lower_bounds=None if lo is None else ((field_id, bound(lo)),),
                    upper_bounds=None if hi is None else ((field_id, bound(hi)),))


def test_ranges_decide() -> None:
    data = _file(10, 20)
    assert equality_deletes_may_apply(data, _file(15, 30, eq=(1,)), FIELDS)
    assert equality_deletes_may_apply(data, _file(20, 20, eq=(1,)), FIELDS)          # touching ends overlap
    assert not equality_deletes_may_apply(data, _file(21, 30, eq=(1,)), FIELDS)
    assert not equality_deletes_may_apply(data, _file(0, 9, eq=(1,)), FIELDS)


def test_unknown_metrics_mean_may_apply() -> None:
    assert equality_deletes_may_apply(_file(None, None), _file(21, 30, eq=(1,)), FIELDS)
    assert equality_deletes_may_apply(_file(10, 20), _file(None, None, eq=(1,)), FIELDS)
    # a dropped column or a nested one has no metrics to judge by
    assert equality_deletes_may_apply(_file(10, 20, field_id=9), _file(21, 30, eq=(9,), field_id=9), FIELDS)
    assert equality_deletes_may_apply(_file(10, 20, field_id=4), _file(21, 30, eq=(4,), field_id=4), FIELDS)


def test_null_counts_decide_as_java() -> None:
    only_nulls = _file(None, None, nulls=10)
    assert not equality_deletes_may_apply(only_nulls, _file(1, 2, eq=(1,)), FIELDS)       # data all null, no null key
    assert equality_deletes_may_apply(only_nulls, _file(1, 2, nulls=1, eq=(1,)), FIELDS)  # a null key deleted
    null_keys = _file(None, None, nulls=3, values=3, eq=(1,))
    assert not equality_deletes_may_apply(_file(10, 20), null_keys, FIELDS)               # no null in the data
    assert equality_deletes_may_apply(_file(10, 20, nulls=2), null_keys, FIELDS)
    # both hold nulls: the null keys apply whatever the ranges
    assert equality_deletes_may_apply(_file(10, 20, nulls=1), _file(30, 40, nulls=1, eq=(1,)), FIELDS)


def test_nan_keeps_float_ranges_out_of_the_decision() -> None:
    double = lambda v: struct.pack("<d", v)  # noqa: E731
    data = _file(1, 2, field_id=3, nans=0, bound=double)
    assert not equality_deletes_may_apply(data, _file(5, 6, eq=(3,), field_id=3, nans=0, bound=double), FIELDS)
    assert equality_deletes_may_apply(data, _file(5, 6, eq=(3,), field_id=3, nans=1, bound=double), FIELDS)
    assert equality_deletes_may_apply(data, _file(5, 6, eq=(3,), field_id=3, nans=None, bound=double), FIELDS)


def test_inverted_uuid_bounds_prove_nothing() -> None:
    """uuid bounds merged from row groups in signed order (lower above upper, unsigned): neither an equality delete
    of a key the file holds nor a manifest whose partition summary spans the sign bit is ruled out by them."""
    import uuid

    from engine.model import values
    from engine.model.data_file import FieldSummary
    from engine.model.expression_parser import parse_expression
    from engine.model.manifest_evaluation import manifest_might_match
    from engine.model.partitioning import PartitionField, PartitionSpec
    from engine.model.types import UUIDType

    u = UUIDType()
    uuid_schema = Schema((NestedField(field_id=1, name="u", field_type=u, required=True),))
    high, low, key = (uuid.UUID(s + "0000000-0000-0000-0000-000000000000") for s in ("9", "2", "a"))
    data = DataFile(file_path="/w/data/d.parquet", record_count=10, file_size_in_bytes=100,
                    lower_bounds={1: values.to_bytes(u, high)}, upper_bounds={1: values.to_bytes(u, low)})
    delete = DataFile(file_path="/w/data/e.parquet", record_count=1, file_size_in_bytes=100,
                      content=DataFileContent.EQUALITY_DELETES, equality_ids=(1,),
                      lower_bounds={1: values.to_bytes(u, key)}, upper_bounds={1: values.to_bytes(u, key)})
    assert equality_deletes_may_apply(data, delete, uuid_schema.index_by_id())
    spec = PartitionSpec(spec_id=0, fields=(PartitionField(source_id=1, field_id=1000, transform="identity",
                                                           name="u"),))
    summary = (FieldSummary(contains_null=False, contains_nan=None, lower_bound=values.to_bytes(u, high),
                            upper_bound=values.to_bytes(u, low)),)
    for text in (f"u = '{key}'", f"u < '{low}'", f"u > '{high}'"):
        assert manifest_might_match(parse_expression(text), spec, uuid_schema, summary), text
