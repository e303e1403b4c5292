"""Whether an equality delete file can delete rows of a data file, judged from both files' column metrics.

Layer: engine.model (pure functions over DataFile values; imports engine.model and engine.errors only).

The rule is Iceberg Java's (``DeleteFileIndex.canContainEqDeletesForFile``), used both when a scan decides which
equality deletes to apply to a data file and when a commit validates that no delete added meanwhile touches a file
it rewrites: for every equality column with metrics, the delete cannot apply when the data holds only nulls and
the delete no null, or the reverse, or when the value ranges (lower and upper bounds) of the two files do not
overlap. Anything unknown (missing counts or bounds, a nested or dropped column) means "may apply". icelog is
stricter than Java in one place: float and double ranges are compared only when neither file holds a NaN, since
NaN is outside every range.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from engine.errors import ValidationError
from engine.model.data_file import DataFile
from engine.model.types import DoubleType, FloatType, NestedField, PrimitiveType
from engine.model.metrics_evaluation import bounds_inverted
from engine.model.values import bound_value


def equality_deletes_may_apply(data_file: DataFile, delete_file: DataFile, fields: Mapping[int, NestedField]) -> bool:
    """Whether ``delete_file`` (equality deletes) may delete a row of ``data_file`` (as far as metrics tell).

    :param fields: the table schema's fields by id (``Schema.index_by_id()``), for the equality columns' types and
        nullability
    """
    return FileMetrics(data_file).may_hold_rows_deleted_by(FileMetrics(delete_file), fields)


def _ranges_comparable(field: NestedField, data: FileMetrics, deletes: FileMetrics) -> bool:
    if isinstance(field.field_type, (FloatType, DoubleType)):
        return data.nan_count(field.field_id) == 0 and deletes.nan_count(field.field_id) == 0
    return True


class FileMetrics:
    """One file's column metrics, read the way Java's null-count helpers read them (a scan builds them once per
    file and compares them with every delete file's)."""

    def __init__(self, f: DataFile) -> None:
        self.file = f
        self.value_counts = dict(f.value_counts) if f.value_counts is not None else None
        self.null_counts = dict(f.null_value_counts) if f.null_value_counts is not None else None
        self.nan_counts = dict(f.nan_value_counts) if f.nan_value_counts is not None else None
        self.lower = dict(f.lower_bounds or ())
        self.upper = dict(f.upper_bounds or ())
        self.has_bounds = bool(f.lower_bounds) and bool(f.upper_bounds)

    def may_hold_rows_deleted_by(self, deletes: FileMetrics, fields: Mapping[int, NestedField]) -> bool:
        """Whether the equality delete file ``deletes`` may delete a row of this data file."""
        check_ranges = self.has_bounds and deletes.has_bounds
        for field_id in deletes.file.equality_ids or ():
            field = fields.get(field_id)
            if field is None or not isinstance(field.field_type, PrimitiveType):
                continue  # no metrics to judge by: may apply
            if self.contains_null(field) and deletes.contains_null(field):
                continue  # null keys deleted, null keys present
            if self.all_null(field) and deletes.all_non_null(field):
                return False
            if deletes.all_null(field) and self.all_non_null(field):
                return False
            if not check_ranges or not _ranges_comparable(field, self, deletes):
                continue
            data_lower, data_upper = self.bound(field, lower=True), self.bound(field, lower=False)
            delete_lower, delete_upper = deletes.bound(field, lower=True), deletes.bound(field, lower=False)
            if None in (data_lower, data_upper, delete_lower, delete_upper):
                continue
            if data_lower > delete_upper or delete_lower > data_upper:
                return False
        return True

    def contains_null(self, field: NestedField) -> bool:
        if field.required:
            return False
        if self.null_counts is None or self.null_counts.get(field.field_id) is None:
            return True
        return self.null_counts[field.field_id] > 0

    def all_null(self, field: NestedField) -> bool:
        if field.required or self.null_counts is None or self.value_counts is None:
            return False
        nulls, values = self.null_counts.get(field.field_id), self.value_counts.get(field.field_id)
        return nulls is not None and values is not None and nulls == values

    def all_non_null(self, field: NestedField) -> bool:
        if field.required:
            return True
        if self.null_counts is None or self.null_counts.get(field.field_id) is None:
            return False
        return self.null_counts[field.field_id] <= 0

    def nan_count(self, field_id: int) -> int | None:
        return None if self.nan_counts is None else self.nan_counts.get(field_id)

    def bound(self, field: NestedField, *, lower: bool) -> Any:
        raw = (self.lower if lower else self.upper).get(field.field_id)
        if raw is None or bounds_inverted(field.field_type, self.lower.get(field.field_id),
                                          self.upper.get(field.field_id)):
            return None
        try:
            return bound_value(field.field_type, raw)
        except ValidationError:
            return None  # an unreadable bound proves nothing
