"""A scan's filter skips the Parquet row groups whose statistics rule it out; the rows read keep their positions in
the file, so position deletes, deletion vectors and row ids still land on the right rows."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq

from engine import Catalog
from engine.model.expression_binding import bind
from engine.model.expression_parser import parse_expression
from engine.formats.parquet_files import matching_row_groups


def column_reads(monkeypatch) -> list[list[str]]:
    """The columns of each ``ParquetFile.read`` from now on, in the order read."""
    reads: list[list[str]] = []
    original = pq.ParquetFile.read

    def spy(self, columns=None, **kwargs):
        reads.append(list(columns or []))
        return original(self, columns=columns, **kwargs)

    monkeypatch.setattr(pq.ParquetFile, "read", spy)
    return reads


def test_filters_skip_row_groups_and_keep_positions(tmp_path) -> None:
    with Catalog.open(tmp_path / "wh") as cat:
        cat.create_namespace("db")
        t = cat.create_table("db.t", schema=pa.schema([("id", pa.int64()), ("v", pa.string())]), format_version=3,
                             properties={"write.parquet.row-group-size-bytes": "20000",
                                         "write.delete.mode": "merge-on-read"})
        t.append(pa.table({"id": pa.array(range(10_000), pa.int64()), "v": [f"v{i}" for i in range(10_000)]}))
        [path] = t.inspect.files().column("file_path").to_pylist()
        footer = pq.ParquetFile(path.removeprefix("file://"))
        groups = footer.metadata.num_row_groups
        assert groups >= 4
        late = bind(parse_expression("id >= 9500"), t.state.schema)
        chosen = matching_row_groups(footer.metadata, footer.schema_arrow, t.state.schema, late)
        assert chosen is not None and 0 < len(chosen) < groups and chosen[-1] == groups - 1
        t.delete("id in (9600, 9601, 9999)")                          # a deletion vector in the last row groups
        got = t.scan("id >= 9500", columns=["id", "v", "_row_id"]).to_arrow().sort_by("id").to_pylist()
        expected = [i for i in range(9500, 10_000) if i not in (9600, 9601, 9999)]
        assert [r["id"] for r in got] == expected
        assert all(r["_row_id"] == r["id"] and r["v"] == f"v{r['id']}" for r in got)   # ids follow positions
        assert t.scan("id >= 20000").to_arrow().num_rows == 0       # every row group skipped
        assert t.scan("id < 3 or id > 9997").count() == 4            # groups at both ends, one row deleted


def test_a_filter_reads_its_own_columns_first_and_the_rest_only_for_the_rows_it_keeps(tmp_path, monkeypatch) -> None:
    with Catalog.open(tmp_path / "wh") as cat:
        cat.create_namespace("db")
        t = cat.create_table("db.t", schema=pa.schema([("id", pa.int64()), ("cat", pa.string()),
                                                      ("payload", pa.string())]),
                             properties={"write.delete.mode": "merge-on-read"})
        t.append(pa.table({"id": pa.array(range(1000), pa.int64()), "cat": ["a", "b"] * 500,
                           "payload": [f"p{i}" for i in range(1000)]}))
        t.append(pa.table({"id": pa.array(range(1000, 1010), pa.int64()), "cat": ["b"] * 10,
                           "payload": ["q"] * 10}))
        t.delete("id in (0, 2, 998)")                                   # position deletes on the first file
        t.delete_by_key(pa.table({"id": pa.array([4], pa.int64())}), ["id"])  # an equality delete
        reads = column_reads(monkeypatch)
        got = t.scan("cat = 'a' and id < 10").to_arrow().sort_by("id").to_pylist()
        assert got == [{"id": i, "cat": "a", "payload": f"p{i}"} for i in (6, 8)]
        data_reads = [r for r in reads if "cat" in r or "payload" in r]
        # the filter's and the equality key's columns first, then the payload for the rows kept (the second file's
        # ids rule it out at planning)
        assert [sorted(r) for r in data_reads] == [["cat", "id"], ["payload"]]
        reads.clear()
        assert t.scan("cat = 'z'").to_arrow().num_rows == 0
        assert all("payload" not in r for r in reads)
        monkeypatch.undo()
        full = t.scan().to_arrow().to_pylist()                         # the same rows as filtering a full read
        for text, keep in (("cat = 'b'", lambda r: r["cat"] == "b"), ("payload = 'q'", lambda r: r["payload"] == "q")):
            assert sorted(t.scan(text).to_arrow().to_pylist(), key=lambda r: r["id"]) == sorted(
                filter(keep, full), key=lambda r: r["id"])


def test_a_filter_whose_other_columns_are_fixed_width_reads_the_file_once(tmp_path, monkeypatch) -> None:
    """Numbers cost no more to filter than to read again: with only fixed-width columns besides the filter's, a
    file is read in one pass (the filter's strings still as dictionaries), with the same rows as a full read."""
    with Catalog.open(tmp_path / "wh") as cat:
        cat.create_namespace("db")
        t = cat.create_table("db.t", schema=pa.schema([("id", pa.int64()), ("cat", pa.string()),
                                                      ("x", pa.float64()), ("day", pa.date32())]),
                             properties={"write.delete.mode": "merge-on-read"})
        t.append(pa.table({"id": pa.array(range(100), pa.int64()), "cat": ["a", "b", None, "c"] * 25,
                           "x": [i / 100 for i in range(100)],
                           "day": pa.array([i % 7 for i in range(100)], pa.int32()).cast(pa.date32())}))
        t.delete("id in (0, 4, 97)")
        reads = column_reads(monkeypatch)
        got = t.scan("cat = 'a' and x < 0.5").to_arrow()
        assert [sorted(r) for r in reads if "cat" in r] == [["cat", "day", "id", "x"]]
        assert got.schema.field("cat").type == pa.string()
        monkeypatch.undo()
        full = t.scan().to_arrow().to_pylist()
        assert sorted(got.to_pylist(), key=lambda r: r["id"]) == [
            r for r in sorted(full, key=lambda r: r["id"]) if r["cat"] == "a" and r["x"] < 0.5]
        assert got.num_rows == 11  # ids 8, 12, ..., 48 (0 and 4 deleted)
