"""Filters with thousands of terms work end to end through Table.scan and Table.delete; a filter nested deeper
than the limit is a ValidationError and commits nothing."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from engine import Catalog
from engine.errors import ValidationError
from engine.model.expressions import MAX_DEPTH

N = 2000


def rows(start: int, n: int) -> pa.Table:
    ids = list(range(start, start + n))
    return pa.table({"id": pa.array(ids, pa.int64()), "part": pa.array([i % 4 for i in ids], pa.int64()),
                     "name": pa.array([f"n{i}" for i in ids])})


@pytest.fixture
def table(tmp_path):
    cat = Catalog.open(tmp_path / "warehouse")
    cat.create_namespace("db")
    t = cat.create_table("db.t", schema=rows(0, 1).schema, partition_by=["part"])
    t.append(rows(0, 1500))
    t.append(rows(1500, 1500))
    t.append(rows(3000, 1500))
    yield t
    cat.close()


def _ids(t) -> list[int]:
    return sorted(t.scan().to_arrow().column("id").to_pylist())


def _head(t) -> tuple[int, int]:
    log = t.catalog.log
    return log.head(t.uuid), len(log.read_since(0))


@pytest.mark.parametrize("where, keep", [
    (" or ".join(f"id = {i}" for i in range(0, 3 * N, 3)), pc.is_in(pc.field("id"), pa.array(range(0, 3 * N, 3)))),
    (" and ".join(f"id != {i}" for i in range(0, 2 * N)), pc.field("id") >= 2 * N),
    ("id in (" + ", ".join(str(i) for i in range(1, 2 * N, 2)) + ")",
     pc.is_in(pc.field("id"), pa.array(range(1, 2 * N, 2)))),
    (" or ".join(f"(part = {i % 4} and id = {i})" for i in range(N)), pc.field("id") < N),
], ids=["or", "and", "in", "nested"])
def test_2000_term_filter_scans_like_pyarrow(table, where, keep):
    expected = sorted(table.scan().to_arrow().filter(keep).column("id").to_pylist())
    assert expected  # the filter selects something
    assert sorted(table.scan(where=where).to_arrow().column("id").to_pylist()) == expected
    assert table.scan(where=where).count() == len(expected)


def test_2000_term_delete(table):
    before = _ids(table)
    where = " or ".join(f"id = {i}" for i in range(0, 2 * N, 2))
    assert table.delete(where) is not None
    assert _ids(table) == [i for i in before if not (i < 2 * N and i % 2 == 0)]


@pytest.mark.parametrize("where", [
    "(" * 1000 + "id = 1" + ")" * 1000,
    "NOT " * 5000 + "id = 1",
    "id = 0 or (" * (MAX_DEPTH + 1) + "id = 1" + ")" * (MAX_DEPTH + 1),
])
def test_deep_filter_is_refused_and_commits_nothing(table, where):
    head = _head(table)
    with pytest.raises(ValidationError, match=f"limit of {MAX_DEPTH}"):
        table.delete(where)
    with pytest.raises(ValidationError, match=f"limit of {MAX_DEPTH}"):
        table.scan(where=where).to_arrow()
    assert _head(table) == head
    assert len(_ids(table)) == 4500
