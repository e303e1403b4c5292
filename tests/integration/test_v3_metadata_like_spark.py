"""icelog's v3 metadata compared field by field with a table Spark (Iceberg 1.10.2) writes through the same
operations: create a partitioned v3 merge-on-read table, insert, delete rows (deletion vectors), delete again in a
file that has a vector (the merged vector replaces it), insert again.

Layer: tests (Spark's Hadoop catalog writes the reference table; both tables' metadata.json, manifest lists,
manifests and Puffin footers are read with json and fastavro).

What is compared: table metadata keys and v3 values (format-version, next-row-id, per-snapshot first-row-id and
added-rows, summary keys and the delete counts in them), the manifest list and manifest Avro field sets and file
metadata keys, every live entry's v3 fields as a reader sees them (first_row_id inherited where written null),
and each deletion vector's entry and Puffin blob description. Values that differ by design (ids, paths, times,
sizes; Spark writing null first_row_id in added entries where icelog writes the value; which Puffin file holds a
vector) are normalised.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import fastavro
import pyarrow as pa

from engine import Catalog
from tests.conftest import puffin_footer
from tools.spark import hadoop_catalog

ROWS_1 = [(0, "a"), (1, "a"), (2, "a"), (3, "b"), (4, "b"), (5, "b")]
ROWS_2 = [(6, "a"), (7, "b")]


def _local(path: str) -> Path:
    return Path(path.removeprefix("file://").removeprefix("file:"))


def _avro(path: str) -> tuple[dict, dict, list[dict]]:
    with open(_local(path), "rb") as fh:
        reader = fastavro.reader(fh)
        meta = {k: v for k, v in reader.metadata.items() if not k.startswith("avro.")}
        return reader.writer_schema, meta, list(reader)


def _field_names(schema: dict) -> set[str]:
    out: set[str] = set()

    def walk(t: Any, prefix: str) -> None:
        if isinstance(t, list):
            for x in t:
                walk(x, prefix)
        elif isinstance(t, dict) and t.get("type") == "record":
            for f in t["fields"]:
                out.add(f"{prefix}{f['name']}:{f.get('field-id')}")
                if f["name"] != "partition":
                    walk(f["type"], f"{prefix}{f['name']}.")
        elif isinstance(t, dict) and t.get("type") in ("array", "map"):
            walk(t.get("items", t.get("values")), prefix)

    walk(schema, "")
    return out


def _puffin_blob(path: str, offset: int) -> dict:
    """The Puffin footer's description of the blob at ``offset`` (Spark puts a commit's vectors in one file per
    task, icelog one per partition: which file holds a vector differs, its blob description must not)."""
    footer = puffin_footer(path)
    b = next(b for b in footer["blobs"] if b["offset"] == offset)
    return {"type": b["type"], "fields": b["fields"], "snapshot-id": b["snapshot-id"],
            "sequence-number": b["sequence-number"], "property-keys": sorted(b.get("properties", {})),
            "compression": b.get("compression-codec"), "footer-property-keys": sorted(footer.get("properties", {}))}


def describe(metadata_path: str) -> dict[str, Any]:
    """What a v3 reader sees of a table, with ids, paths, times and sizes left out."""
    meta = json.loads(_local(metadata_path).read_text())
    out: dict[str, Any] = {"table-keys": sorted(meta), "format-version": meta["format-version"],
                           "next-row-id": meta["next-row-id"], "snapshots": []}
    list_fields: set[str] = set()
    manifest_fields: set[str] = set()
    list_meta: set[str] = set()
    manifest_meta: set[str] = set()
    for snap in meta["snapshots"]:
        summary = snap["summary"]
        counts = {k: summary[k] for k in summary if k.startswith(("added-", "removed-", "deleted-", "total-"))
                  and not k.endswith("files-size")}
        described = {"keys": sorted(snap), "operation": summary["operation"], "first-row-id": snap["first-row-id"],
                     "added-rows": snap["added-rows"], "counts": counts, "entries": []}
        schema, lmeta, manifests = _avro(snap["manifest-list"])
        list_fields |= _field_names(schema)
        list_meta |= set(lmeta)
        for m in manifests:
            mschema, mmeta, entries = _avro(m["manifest_path"])
            manifest_fields |= _field_names(mschema)
            manifest_meta |= set(mmeta)
            next_id = m["first_row_id"]
            for e in entries:
                f = e["data_file"]
                if e["status"] == 2:
                    continue
                first = f["first_row_id"]
                if f["content"] == 0 and first is None and next_id is not None:
                    first = next_id                      # inherited, as readers do
                    next_id += f["record_count"]
                entry = {"status": "live", "content": f["content"], "format": f["file_format"],
                         "partition": f["partition"], "records": f["record_count"], "first_row_id": first,
                         "dv": f["content_offset"] is not None}
                if entry["dv"]:
                    entry["referenced"] = Path(f["referenced_data_file"]).name.count("-") > 0
                    entry["blob"] = _puffin_blob(f["file_path"], f["content_offset"])
                described["entries"].append(entry)
        described["entries"].sort(key=lambda e: (e["content"], str(e["partition"]), e["records"],
                                                 e["first_row_id"] or 0))
        out["snapshots"].append(described)
    out["manifest-list-fields"] = sorted(list_fields)
    out["manifest-list-metadata"] = sorted(list_meta)
    out["manifest-fields"] = sorted(manifest_fields)
    out["manifest-metadata"] = sorted(manifest_meta)
    return out


def test_icelog_v3_metadata_matches_spark_field_by_field(spark: Any, tmp_path: Path) -> None:
    spark_wh = tmp_path / "spark"
    name = hadoop_catalog(spark, spark_wh)
    spark.conf.set("spark.sql.shuffle.partitions", "1")
    spark.sql(f"CREATE TABLE {name}.db.t (id bigint, cat string) USING iceberg PARTITIONED BY (cat) "
              f"TBLPROPERTIES ('format-version'='3', 'write.delete.mode'='merge-on-read', "
              f"'write.distribution-mode'='hash')")
    values = ", ".join(f"({i}, '{c}')" for i, c in ROWS_1)
    spark.sql(f"INSERT INTO {name}.db.t VALUES {values}").collect()
    spark.sql(f"DELETE FROM {name}.db.t WHERE id IN (1, 4)").collect()
    spark.sql(f"DELETE FROM {name}.db.t WHERE id = 2").collect()
    spark.sql(f"INSERT INTO {name}.db.t VALUES {', '.join(f'({i}, {c!r})' for i, c in ROWS_2)}").collect()
    hint = (spark_wh / "db" / "t" / "metadata" / "version-hint.text").read_text().strip()
    theirs = describe(str(spark_wh / "db" / "t" / "metadata" / f"v{hint}.metadata.json"))

    with Catalog.open(tmp_path / "icelog") as cat:
        cat.create_namespace("db")
        t = cat.create_table("db.t", schema=pa.schema([("id", pa.int64()), ("cat", pa.string())]),
                             partition_by=["cat"], format_version=3,
                             properties={"write.delete.mode": "merge-on-read", "write.distribution-mode": "hash"})
        t.append(pa.table({"id": [i for i, _ in ROWS_1], "cat": [c for _, c in ROWS_1]}))
        t.delete("id IN (1, 4)")
        t.delete("id = 2")
        t.append(pa.table({"id": [i for i, _ in ROWS_2], "cat": [c for _, c in ROWS_2]}))
        ours = describe(t.metadata_location)

    assert ours["format-version"] == theirs["format-version"] == 3
    assert ours["next-row-id"] == theirs["next-row-id"]
    assert set(theirs["table-keys"]) <= set(ours["table-keys"]), set(theirs["table-keys"]) - set(ours["table-keys"])
    assert len(ours["snapshots"]) == len(theirs["snapshots"]) == 4
    for i, (mine, spark_snap) in enumerate(zip(ours["snapshots"], theirs["snapshots"])):
        assert mine["keys"] == spark_snap["keys"], i
        assert mine["operation"] == spark_snap["operation"], i
        assert (mine["first-row-id"], mine["added-rows"]) == (spark_snap["first-row-id"], spark_snap["added-rows"]), i
        assert mine["counts"] == spark_snap["counts"], i
        assert mine["entries"] == spark_snap["entries"], i
    assert ours["manifest-list-fields"] == theirs["manifest-list-fields"]
    assert ours["manifest-fields"] == theirs["manifest-fields"]
    # Java's Avro writer also stores the file's Iceberg schema ("iceberg.schema"); icelog's manifests also name
    # their schema id ("schema-id"), as Java's v1 manifests do. Neither is read by any reader.
    for key in ("manifest-list-metadata", "manifest-metadata"):
        assert set(theirs[key]) - {"iceberg.schema"} == set(ours[key]) - {"schema-id"}, key
