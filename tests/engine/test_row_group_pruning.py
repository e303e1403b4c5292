"""A scan's filter skips the Parquet row groups whose statistics rule it out; the rows read keep their positions in
the file, so position deletes, deletion vectors and row ids still land on the right rows."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq

from engine import Catalog
from engine.model.expressions import bind, parse_expression
from engine.parquet_files import matching_row_groups


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
