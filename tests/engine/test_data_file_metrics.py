"""The metrics icelog records for the data files it writes: NaN counts per float field (footers carry none)."""

from __future__ import annotations

import math

import pyarrow as pa

from engine import Catalog


def test_nan_counts_for_top_level_and_struct_floats_only(tmp_path) -> None:
    nan = math.nan
    point = pa.struct([pa.field("lat", pa.float32()), pa.field("label", pa.string())])
    data = pa.table({
        "id": pa.array([1, 2, 3], pa.int64()),
        "x": pa.array([nan, 1.0, nan], pa.float64()),
        "name": pa.array(["a", "b", None], pa.string()),
        "p": pa.array([{"lat": nan, "label": "a"}, {"lat": 2.0, "label": None}, None], point),
        "xs": pa.array([[nan], [], None], pa.list_(pa.float64())),  # inside a list: not counted, as Java's writer
    })
    with Catalog.open(tmp_path / "wh") as cat:
        cat.create_namespace("db")
        t = cat.create_table("db.t", schema=data.schema)
        t.append(data)
        [task] = t.scan().plan_files()
        columns = {f.name: f for f in t.state.schema.columns}
        lat_id = next(f.field_id for f in columns["p"].field_type.fields if f.name == "lat")
        ids = {name: f.field_id for name, f in columns.items()}
        assert dict(task.file.nan_value_counts) == {ids["x"]: 2, lat_id: 1}


def test_dictionary_encoding_only_where_it_pays(tmp_path) -> None:
    """As parquet-mr falls back to plain pages when a column's dictionary would be no smaller than its values,
    icelog writes distinct ids and doubles plain, and few-valued columns (and every leaf of a nested one) as
    dictionaries; what is read back is what was written."""
    import pyarrow.parquet as pq

    n = 30_000
    data = pa.table({
        "id": pa.array(range(n), pa.int64()),
        "x": pa.array([i * 0.37 for i in range(n)], pa.float64()),
        "cat": pa.array([f"c{i % 20:02d}" for i in range(n)], pa.string()),
        "small": pa.array([i % 7 for i in range(n)], pa.int32()),
        "names": pa.array([f"name-{i}" for i in range(n)], pa.string()),
        "p": pa.array([{"label": str(i)} for i in range(n)], pa.struct([pa.field("label", pa.string())])),
        "empty": pa.nulls(n, pa.string()),
    })
    with Catalog.open(tmp_path / "wh") as cat:
        cat.create_namespace("db")
        t = cat.create_table("db.t", schema=data.schema)
        t.append(data)
        [task] = t.scan().plan_files()
        metadata = pq.ParquetFile(task.file.file_path).metadata
        encodings = {metadata.row_group(0).column(i).path_in_schema: metadata.row_group(0).column(i).encodings
                     for i in range(metadata.num_columns)}
        dictionary = {path for path, used in encodings.items() if "RLE_DICTIONARY" in used}
        assert dictionary == {"cat", "small", "p.label", "empty"}, encodings
        assert t.scan().to_arrow().sort_by("id").equals(data)
        # a small file keeps Arrow's default: judging would cost more than it saves
        t.append(data.slice(0, 10))
        small = next(f for f in t.scan().plan_files() if f.file.record_count == 10).file.file_path
        metadata = pq.ParquetFile(small).metadata
        assert all("RLE_DICTIONARY" in metadata.row_group(0).column(i).encodings for i in range(metadata.num_columns))
