"""Scan filters of every operator return exactly the rows a full read filtered by pyarrow returns, on a table
with nulls, NaN, several partitions and an evolved spec; count() agrees without reading what it need not."""

from __future__ import annotations

import datetime as dt
import math

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from engine import Catalog

DAY = dt.datetime(2024, 1, 1)


def batch(start: int, n: int) -> pa.Table:
    ids = list(range(start, start + n))
    cats = [(None if i % 7 == 3 else "abc"[i % 3]) for i in ids]
    ts = [DAY + dt.timedelta(hours=5 * i) for i in ids]
    xs = [(None if i % 5 == 1 else math.nan if i % 5 == 2 else float(i % 11) - 3.5) for i in ids]
    names = [(None if i % 4 == 0 else f"{'ab' if i % 3 else 'b'}{i}") for i in ids]
    return pa.table({"id": pa.array(ids, pa.int64()), "category": pa.array(cats, pa.string()),
                     "ts": pa.array(ts, pa.timestamp("us")), "x": pa.array(xs, pa.float64()),
                     "name": pa.array(names, pa.string())})


@pytest.fixture(scope="module")
def table(tmp_path_factory):
    cat = Catalog.open(tmp_path_factory.mktemp("filters") / "warehouse")
    cat.create_namespace("db")
    t = cat.create_table("db.t", schema=batch(0, 1).schema, partition_by=["category"])
    t.append(batch(0, 20))
    t.append(batch(20, 20))
    t.update_spec().add_field("ts", "day").commit()  # files written from now on are also partitioned by day
    t.append(batch(40, 30))
    yield t
    cat.close()


F = pc.field
CASES = [
    ("id = 7", F("id") == 7),
    ("category = 'a'", F("category") == "a"),
    ("category != 'a'", F("category") != "a"),
    ("id != 7", F("id") != 7),
    ("x != 1.5", F("x") != 1.5),
    ("id < 12", F("id") < 12),
    ("x < 0", F("x") < 0),
    ("id <= 12", F("id") <= 12),
    ("x <= 0.5", F("x") <= 0.5),
    ("id > 50", F("id") > 50),
    ("x > 2.5", F("x") > 2.5),
    ("id >= 50", F("id") >= 50),
    ("x >= 6.5", F("x") >= 6.5),
    ("ts >= '2024-01-05T00:00:00'", F("ts") >= pa.scalar(dt.datetime(2024, 1, 5), pa.timestamp("us"))),
    ("ts < '2024-01-03T10:00:00'", F("ts") < pa.scalar(dt.datetime(2024, 1, 3, 10), pa.timestamp("us"))),
    ("category in ('a', 'c')", F("category").isin(["a", "c"])),
    ("id in (1, 5, 45, 69, 1000)", F("id").isin([1, 5, 45, 69, 1000])),
    ("category not in ('a', 'c')", ~F("category").isin(["a", "c"]) & F("category").is_valid()),
    ("x not in (0.5, 1.5)", ~F("x").isin([0.5, 1.5]) & F("x").is_valid()),
    ("category is null", F("category").is_null()),
    ("category is not null", F("category").is_valid()),
    ("x is null", F("x").is_null()),
    ("x is not null", F("x").is_valid()),
    ("is_nan(x)", pc.is_nan(F("x"))),
    ("name like 'ab%'", pc.starts_with(F("name"), "ab")),
    ("name like 'b%'", pc.starts_with(F("name"), "b")),
    ("category = 'b' and id > 30", (F("category") == "b") & (F("id") > 30)),
    ("category = 'b' or x > 5", (F("category") == "b") | (F("x") > 5)),
    ("not (id < 40)", ~(F("id") < 40)),
    ("not (category = 'a')", ~(F("category") == "a")),
    ("not (x > 0) and category is not null", ~(F("x") > 0) & F("category").is_valid()),
    ("(category = 'c' or category is null) and not (ts < '2024-01-08T00:00:00')",
     ((F("category") == "c") | F("category").is_null())
     & ~(F("ts") < pa.scalar(dt.datetime(2024, 1, 8), pa.timestamp("us")))),
    ("id = 100000", F("id") == 100000),
]


def _is_nan_where(where: str) -> str:
    return "x is nan" if where == "is_nan(x)" else where


def _expected(table, expr) -> list[int]:
    full = table.scan().to_arrow()
    return sorted(full.filter(expr).column("id").to_pylist())


@pytest.mark.parametrize("where,expr", CASES, ids=[c[0] for c in CASES])
def test_filter_returns_rows_pyarrow_selects(table, where, expr):
    where = _is_nan_where(where)
    expected = _expected(table, expr)
    scan = table.scan(where=where)
    got = sorted(scan.to_arrow().column("id").to_pylist())
    assert got == expected
    assert scan.count() == len(expected)
    assert sorted(table.scan(where=where, columns=["id"]).to_arrow().column("id").to_pylist()) == expected


def test_full_table_has_nulls_nan_and_several_partitions(table):
    full = table.scan().to_arrow()
    assert full.num_rows == 70
    assert full.column("category").null_count > 0 and full.column("x").null_count > 0
    assert pc.sum(pc.is_nan(full.column("x"))).as_py() > 0
    tasks = table.scan().plan_files()
    assert len({(t.spec_id, t.partition) for t in tasks}) > 6
    assert {t.spec_id for t in tasks} == {0, 1}


def test_is_nan_operator_spelled_as_sql(table):
    expected = _expected(table, pc.is_nan(F("x")))
    assert len(expected) > 0
    assert sorted(table.scan(where="x is nan").to_arrow().column("id").to_pylist()) == expected


def test_count_without_filter_sums_record_counts(table):
    assert table.scan().count() == 70
    assert table.scan(where="category = 'a'").count() == len(_expected(table, F("category") == "a"))


def test_to_pandas(table):
    pytest.importorskip("pandas")
    frame = table.scan(where="category = 'a'", columns=["id", "x"]).to_pandas()
    assert sorted(frame["id"].tolist()) == _expected(table, F("category") == "a")
    assert list(frame.columns) == ["id", "x"]
