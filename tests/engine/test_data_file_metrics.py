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
