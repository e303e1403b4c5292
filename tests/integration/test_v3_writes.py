"""Format v3 written by icelog: tables created as v3, appends with row ids, merge-on-read deletes as deletion vectors
(one per data file, merged with the previous one, which the commit removes), read back by Spark with row lineage;
and Spark writing to an icelog v3 table through the REST catalog, its vectors read by icelog.

Layer: tests (Spark, real Puffin files).
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import fastavro
import pyarrow as pa
import pytest

from engine import Catalog
from engine.errors import ValidationError
from engine.model.data_file import DataFileContent
from tests.conftest import puffin_footer
from tools.rest_server import running_server

TOKEN = "v3-token"
LINEAGE = "_row_id, _last_updated_sequence_number"


def _spark_rows(spark: Any, metadata: str, snapshot_id: int) -> dict[int, tuple]:
    df = spark.read.format("iceberg").option("snapshot-id", snapshot_id).load(metadata)
    return {r["id"]: (r["cat"], r["_row_id"], r["_last_updated_sequence_number"])
            for r in df.selectExpr("id", "cat", "_row_id", "_last_updated_sequence_number").collect()}


def _icelog_rows(t: Any, snapshot_id: int) -> dict[int, tuple]:
    scanned = t.scan(snapshot_id=snapshot_id, columns=["id", "cat", "_row_id", "_last_updated_sequence_number"])
    return {r["id"]: (r["cat"], r["_row_id"], r["_last_updated_sequence_number"])
            for r in scanned.to_arrow().to_pylist()}


def _spark_rest_catalog(spark: Any, name: str, uri: str) -> str:
    """Register Spark catalog ``name`` on icelog's REST server at ``uri`` (no table cache); returns the name."""
    for key, value in {"": "org.apache.iceberg.spark.SparkCatalog", ".type": "rest", ".uri": uri,
                       ".token": TOKEN, ".cache-enabled": "false"}.items():
        spark.conf.set(f"spark.sql.catalog.{name}{key}", value)
    return name


def _live_vectors(t: Any) -> list[Any]:
    return [e.file for e in t.catalog.store.live_entries(t.state, t.current_snapshot().snapshot_id)
            if e.file.content == DataFileContent.POSITION_DELETES]


def test_icelog_v3_table_read_by_spark_with_vectors_and_lineage(spark: Any, tmp_path: Path) -> None:
    with Catalog.open(tmp_path / "wh") as cat:
        cat.create_namespace("db")
        t = cat.create_table("db.t", schema=pa.schema([("id", pa.int64()), ("cat", pa.string())]),
                             partition_by=["cat"], format_version=3,
                             properties={"write.delete.mode": "merge-on-read"})
        t.append(pa.table({"id": list(range(10)), "cat": ["a"] * 5 + ["b"] * 5}))
        t.append(pa.table({"id": list(range(10, 14)), "cat": ["a", "b", "a", "b"]}))
        first = t.current_snapshot()
        assert (t.snapshots()[0].first_row_id, t.snapshots()[0].added_rows) == (0, 10)
        assert (first.first_row_id, first.added_rows) == (10, 4) and t.state.next_row_id == 14

        t.delete("id IN (1, 6, 11)")                 # vectors for three files, in two partitions
        assert len(_live_vectors(t)) == 3
        t.delete("id IN (2, 3)")                     # a second vector for one file merges the first
        vectors = _live_vectors(t)
        assert Counter(v.referenced_data_file for v in vectors).most_common(1)[0][1] == 1
        merged = next(v for v in vectors if v.record_count == 3)
        assert merged.file_format == "PUFFIN" and merged.content_offset is not None
        delta = t.row_delta()
        target = next(e.file for e in t.catalog.store.live_entries(t.state, t.current_snapshot().snapshot_id)
                      if e.file.content == DataFileContent.DATA and e.file.record_count == 2
                      and e.file.partition == ("b",))
        delta.add_position_deletes({target.file_path: [1]}).commit()   # id 13: positions 0, 1 are ids 11, 13
        vectors = _live_vectors(t)
        assert len(vectors) == len({v.referenced_data_file for v in vectors}) == 3
        survivors = sorted(set(range(14)) - {1, 2, 3, 6, 11, 13})
        assert sorted(t.scan().to_arrow().column("id").to_pylist()) == survivors
        assert cat.verify("db.t") == []
        snapshots = [(s.snapshot_id, sorted(t.scan(snapshot_id=s.snapshot_id).to_arrow().column("id").to_pylist()))
                     for s in t.snapshots()]
        icelog_rows = {s.snapshot_id: _icelog_rows(t, s.snapshot_id) for s in t.snapshots()}
        published = t.metadata_location
        meta = json.loads(Path(published.removeprefix("file://")).read_text())
        with pytest.raises(ValidationError, match="downgrade"):
            t.upgrade_format_version(2)

    assert meta["format-version"] == 3 and meta["next-row-id"] == 14
    assert [(s.get("first-row-id"), s.get("added-rows")) for s in meta["snapshots"]] == [
        (0, 10), (10, 4), (14, 0), (14, 0), (14, 0)]
    first_ids: dict[int, tuple] = {}
    for sid, ids in snapshots:
        rows = _spark_rows(spark, published, sid)
        assert sorted(rows) == ids, sid
        assert rows == icelog_rows[sid], sid          # icelog's scan gives the same _row_id and sequence numbers
        for i, (_, row_id, seq) in rows.items():
            first_ids.setdefault(i, (row_id, seq))
            assert (row_id, seq) == first_ids[i], i     # a row keeps its id and sequence number through deletes
    assert sorted(v[0] for v in first_ids.values()) == list(range(14))


def test_copy_on_write_and_compaction_keep_row_lineage(spark: Any, tmp_path: Path) -> None:
    """Rows a copy-on-write delete or a compaction carries into new files keep their _row_id and
    _last_updated_sequence_number (written into the new files as Java does), read alike by icelog and Spark."""
    with Catalog.open(tmp_path / "wh") as cat:
        cat.create_namespace("db")
        t = cat.create_table("db.t", schema=pa.schema([("id", pa.int64()), ("cat", pa.string())]),
                             partition_by=["cat"], format_version=3)
        t.append(pa.table({"id": list(range(6)), "cat": ["a"] * 3 + ["b"] * 3}))
        t.append(pa.table({"id": [6, 7, 8], "cat": ["a", "b", "a"]}))
        original = _icelog_rows(t, t.current_snapshot().snapshot_id)
        t.delete("id IN (1, 4)")                                  # copy-on-write: files rewritten
        after_delete = _icelog_rows(t, t.current_snapshot().snapshot_id)
        t.rewrite_data_files()                                    # compaction: one file per partition
        live = [e.file for e in t.catalog.store.live_entries(t.state, t.current_snapshot().snapshot_id)]
        assert len(live) == 2
        after_compaction = _icelog_rows(t, t.current_snapshot().snapshot_id)
        t.append(pa.table({"id": [9], "cat": ["b"]}))
        snapshots = [s.snapshot_id for s in t.snapshots()]
        icelog_rows = {sid: _icelog_rows(t, sid) for sid in snapshots}
        published = t.metadata_location
    assert after_delete == {i: v for i, v in original.items() if i not in (1, 4)}
    assert after_compaction == after_delete
    # every written row consumes an id, carried or not (as in Java): 9 appended, 4 + 7 rewritten
    assert icelog_rows[snapshots[-1]][9][1] == 20
    for sid in snapshots:
        assert _spark_rows(spark, published, sid) == icelog_rows[sid], sid


def test_upgrade_to_v3_and_creation_rules(tmp_path: Path) -> None:
    with Catalog.open(tmp_path / "wh") as cat:
        cat.create_namespace("db")
        schema = pa.schema([("id", pa.int64())])
        empty = cat.create_table("db.empty", schema=schema)
        empty.upgrade_format_version(3)
        assert empty.state.format_version == 3 and empty.state.next_row_id == 0
        with pytest.raises(ValidationError, match="format version 4"):
            cat.create_table("db.v4", schema=schema, format_version=4)
        # format-version as a property, as Spark's TBLPROPERTIES give it, is the format version
        by_property = cat.create_table("db.by_property", schema=schema, properties={"format-version": "3"})
        assert by_property.state.format_version == 3 and by_property.state.prop("format-version") is None
        with pytest.raises(ValidationError, match="disagree"):
            cat.create_table("db.both", schema=schema, format_version=2, properties={"format-version": "3"})
        assert cat.table_exists("db.both") is False
        v1 = cat.create_table("db.v1", schema=schema, format_version=1)
        v1.append(pa.table({"id": [1, 2]}))
        v1.set_properties({"format-version": "3", "owner": "me"})
        assert v1.state.format_version == 3 and v1.state.prop("owner") == "me" and v1.state.next_row_id == 2
        with pytest.raises(ValidationError, match="downgrade"):
            v1.set_properties({"format-version": "2", "owner": "you"})
        assert v1.state.prop("owner") == "me"


def test_upgrade_to_v3_gives_existing_rows_ids_that_spark_reads(spark: Any, tmp_path: Path) -> None:
    """A v2 table with a branch, a tag and position deletes upgrades to v3: each branch gets one replace snapshot
    that labels its live files (EXISTING entries with explicit first_row_id, nothing rewritten); old position
    deletes keep applying, the next delete writes a vector that absorbs the file's, and Spark reads the same rows
    with the same stable _row_id at every snapshot."""
    with Catalog.open(tmp_path / "wh") as cat:
        cat.create_namespace("db")
        t = cat.create_table("db.t", schema=pa.schema([("id", pa.int64()), ("cat", pa.string())]),
                             partition_by=["cat"], properties={"write.delete.mode": "merge-on-read"})
        t.append(pa.table({"id": list(range(6)), "cat": ["a"] * 3 + ["b"] * 3}))
        t.append(pa.table({"id": [6, 7], "cat": ["a", "a"]}))
        t.delete("id = 1")                                    # a v2 position delete file
        old_tag = t.current_snapshot().snapshot_id
        t.manage_snapshots().create_tag(old_tag, "before").create_branch(old_tag, "dev").commit()
        t.append(pa.table({"id": [100], "cat": ["b"]}), branch="dev")
        before = t.state.version
        t.upgrade_format_version(3)
        state = t.state
        assert state.format_version == 3 and state.version == before + 3     # upgrade + one snapshot per branch
        main_head, dev_head = state.snapshot_by_id(state.ref("main").snapshot_id), \
            state.snapshot_by_id(state.ref("dev").snapshot_id)
        assert main_head.operation == dev_head.operation == "replace"
        assert (main_head.first_row_id, main_head.added_rows) == (0, 8)      # every live row of the files
        assert (dev_head.first_row_id, dev_head.added_rows) == (8, 9)
        assert state.next_row_id == 17
        assert main_head.summary_value("added-data-files") is None            # nothing added, nothing removed
        assert sorted(t.scan().to_arrow().column("id").to_pylist()) == [0, 2, 3, 4, 5, 6, 7]
        assert t.catalog.verify("db.t") == []
        published = t.metadata_location
        meta_path = Path(published.removeprefix("file://"))
        meta = json.loads(meta_path.read_text())
        head_list = next(s for s in meta["snapshots"] if s["snapshot-id"] == main_head.snapshot_id)["manifest-list"]
        with open(head_list.removeprefix("file://"), "rb") as fh:
            listed = list(fastavro.reader(fh))
        statuses = []
        for m in listed:
            with open(m["manifest_path"].removeprefix("file://"), "rb") as fh:
                statuses += [(e["status"], e["data_file"]["content"], e["data_file"].get("first_row_id"))
                             for e in fastavro.reader(fh)]
        data_entries = sorted((s, i) for s, c, i in statuses if c == 0)
        assert data_entries == [(0, 0), (0, 3), (0, 6)], statuses         # EXISTING, each file labelled once
        assert all(m["first_row_id"] is not None for m in listed if m["content"] == 0)
        t.delete("id = 2")                        # same file as the v2 delete of id 1: one vector, both rows
        vectors = _live_vectors(t)
        assert [(v.file_format, v.record_count) for v in vectors] == [("PUFFIN", 2)]
        t.append(pa.table({"id": [8], "cat": ["b"]}))
        assert t.current_snapshot().first_row_id == 17
        snapshots = [(s.snapshot_id, sorted(t.scan(snapshot_id=s.snapshot_id).to_arrow().column("id").to_pylist()))
                     for s in t.snapshots()]
        icelog_rows = {s.snapshot_id: _icelog_rows(t, s.snapshot_id) for s in t.snapshots()}
        published = t.metadata_location

    ids_after_upgrade: dict[int, tuple] = {}
    for sid, ids in snapshots:
        rows = _spark_rows(spark, published, sid)
        assert sorted(rows) == ids, sid
        assert rows == icelog_rows[sid], sid      # before the upgrade both give null lineage
        if sid == dev_head.snapshot_id:        # the branch labels the rows it shares with main anew
            assert sorted(row_id for _, row_id, _ in rows.values()) == [8, *range(10, 17)]  # id 1 deleted
            continue
        lineage = {i: (row_id, seq) for i, (_, row_id, seq) in rows.items() if row_id is not None}
        for i, pair in lineage.items():
            assert ids_after_upgrade.setdefault(i, pair) == pair, i            # stable once assigned
    main_rows = _spark_rows(spark, published, snapshots[-1][0])
    assert all(row_id is not None for _, row_id, _ in main_rows.values())
    assert len({row_id for _, row_id, _ in main_rows.values()}) == len(main_rows)
    dev = spark.read.format("iceberg").option("branch", "dev").load(published)
    assert sorted(r["id"] for r in dev.collect()) == [0, 2, 3, 4, 5, 6, 7, 100]


def test_v3_row_delta_refuses_position_delete_files(tmp_path: Path) -> None:
    from engine.write.delete_files import write_position_deletes

    with Catalog.open(tmp_path / "wh") as cat:
        cat.create_namespace("db")
        t = cat.create_table("db.t", schema=pa.schema([("id", pa.int64())]), format_version=3)
        t.append(pa.table({"id": [1, 2]}))
        data = t.current_snapshot()
        f = next(e.file for e in t.catalog.store.live_entries(t.state, data.snapshot_id))
        with pytest.raises(ValidationError, match="deletion vectors"):
            write_position_deletes(t.state, {f.file_path: [0]}, spec_id=0, partition=())
        assert t.current_snapshot().snapshot_id == data.snapshot_id


def test_spark_writes_to_an_icelog_v3_table_through_rest(spark: Any, tmp_warehouse: Path) -> None:
    with running_server(tmp_warehouse, TOKEN) as server:
        name = _spark_rest_catalog(spark, "v3rest", server.uri)
        with Catalog.open(tmp_warehouse) as cat:
            cat.create_namespace("db")
            t = cat.create_table("db.t", schema=pa.schema([("id", pa.int64()), ("cat", pa.string())]),
                                 format_version=3, properties={"write.delete.mode": "merge-on-read",
                                                               "write.update.mode": "merge-on-read"})
            t.append(pa.table({"id": list(range(6)), "cat": ["x"] * 6}))
        spark.sql(f"INSERT INTO {name}.db.t VALUES (6, 'y'), (7, 'y')").collect()
        spark.sql(f"DELETE FROM {name}.db.t WHERE id IN (0, 7)").collect()
        spark.sql(f"UPDATE {name}.db.t SET cat = 'z' WHERE id = 3").collect()
        spark_rows = {r["id"]: (r["cat"], r["_row_id"]) for r in spark.sql(
            f"SELECT id, cat, _row_id FROM {name}.db.t").collect()}
        with Catalog.open(tmp_warehouse) as cat:
            t = cat.load_table("db.t")
            assert t.state.format_version == 3
            got = {r["id"]: r["cat"] for r in t.scan().to_arrow().to_pylist()}
            assert got == {i: c for i, (c, _) in spark_rows.items()}
            assert any(e.file.is_deletion_vector for e in t.catalog.store.live_entries(
                t.state, t.current_snapshot().snapshot_id))
            assert t.state.next_row_id >= max(r for _, r in spark_rows.values()) + 1
            assert cat.verify("db.t") == []
            # icelog continues: its vector for a file Spark deleted from merges Spark's
            t.delete("id = 1")
            assert sorted(r["id"] for r in t.scan().to_arrow().to_pylist()) == sorted(set(spark_rows) - {1})
        assert sorted(r["id"] for r in spark.sql(f"SELECT id FROM {name}.db.t").collect()) == sorted(
            set(spark_rows) - {1})
        # the row ids Spark saw are the ones it still sees after icelog's commit
        after = {r["id"]: r["_row_id"] for r in spark.sql(f"SELECT id, _row_id FROM {name}.db.t").collect()}
        assert after == {i: r for i, (_, r) in spark_rows.items() if i != 1}


def test_a_spark_append_to_a_v3_table_overtaken_by_another_is_rebased_with_its_row_ids_moved(
        spark: Any, tmp_warehouse: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Another append lands between Spark's refresh and its commit through REST: the server rebases the append
    onto the new head, and its snapshot's first-row-id and its files' row ids move to the head's next-row-id, so
    every row keeps a distinct id. The server rebases only clients that do not retry by themselves (PyIceberg,
    DuckDB; Spark gets 409 and retries with its own validations): this test has it take Spark's commit for such a
    client's, to move the row ids of files a v3 writer really wrote."""
    import tools.rest_server as rest_server

    schema = pa.schema([("id", pa.int64()), ("cat", pa.string())])
    with Catalog.open(tmp_warehouse) as cat:
        cat.create_namespace("db")
        t = cat.create_table("db.t", schema=schema, format_version=3,
                             properties={"commit.retry.num-retries": "0"})
        t.append(pa.table({"id": [0, 1, 2], "cat": ["icelog"] * 3}))
    commit_table, overtaken = rest_server.commit_table, []

    def overtaking(rc: Any, ns: tuple[str, ...], name: str, body: Any, **options: Any) -> Any:
        if not overtaken:  # a real append by another writer, landing just before Spark's commit
            with Catalog.open(tmp_warehouse) as other:
                other.load_table("db.t").append(pa.table({"id": [3, 4], "cat": ["other"] * 2}))
            overtaken.append(name)
        return commit_table(rc, ns, name, body, **options)

    monkeypatch.setattr(rest_server, "commit_table", overtaking)
    monkeypatch.setattr(rest_server, "retries_by_itself", lambda client_version: False)
    with running_server(tmp_warehouse, TOKEN) as server:
        name = _spark_rest_catalog(spark, "v3rebase", server.uri)
        spark.sql(f"INSERT INTO {name}.db.t VALUES (10, 'spark'), (11, 'spark')").collect()
        spark_ids = {r["id"]: r["_row_id"] for r in spark.sql(f"SELECT id, _row_id FROM {name}.db.t").collect()}
    assert overtaken == ["t"]
    assert sorted(spark_ids) == [0, 1, 2, 3, 4, 10, 11]
    assert sorted(spark_ids.values()) == list(range(7)) and {spark_ids[10], spark_ids[11]} == {5, 6}
    with Catalog.open(tmp_warehouse) as cat:
        t = cat.load_table("db.t")
        head = t.current_snapshot()
        other = t.state.snapshot_by_id(head.parent_snapshot_id)
        assert dict(other.summary)["added-records"] == "2" and other.first_row_id == 3
        assert head.first_row_id == 5 and head.sequence_number == other.sequence_number + 1
        assert t.state.next_row_id == 7
        assert {r["id"]: r["_row_id"] for r in t.scan(columns=["id", "_row_id"]).to_arrow().to_pylist()} == spark_ids
        assert cat.verify("db.t") == []


def test_spark_upgrades_an_icelog_v2_table_to_v3_through_rest(spark: Any, tmp_warehouse: Path) -> None:
    """ALTER TABLE ... SET TBLPROPERTIES ('format-version'='3') from Spark on an icelog v2 table with rows: icelog
    labels the live rows in the same commit, Spark's next writes continue the lineage, both read the same rows."""
    with running_server(tmp_warehouse, TOKEN) as server:
        name = _spark_rest_catalog(spark, "v3upgrade", server.uri)
        with Catalog.open(tmp_warehouse) as cat:
            cat.create_namespace("db")
            t = cat.create_table("db.t", schema=pa.schema([("id", pa.int64()), ("cat", pa.string())]),
                                 properties={"write.delete.mode": "merge-on-read"})
            t.append(pa.table({"id": list(range(4)), "cat": ["x"] * 4}))
            t.delete("id = 0")                                # a v2 position delete file
        spark.sql(f"ALTER TABLE {name}.db.t SET TBLPROPERTIES ('format-version'='3')").collect()
        with Catalog.open(tmp_warehouse) as cat:
            t = cat.load_table("db.t")
            assert t.state.format_version == 3 and t.state.next_row_id == 4
            assert t.current_snapshot().operation == "replace"
        spark.sql(f"INSERT INTO {name}.db.t VALUES (4, 'y')").collect()
        spark.sql(f"DELETE FROM {name}.db.t WHERE id = 2").collect()
        spark_rows = {r["id"]: r["_row_id"] for r in spark.sql(f"SELECT id, _row_id FROM {name}.db.t").collect()}
        assert spark_rows == {1: 1, 3: 3, 4: 4}
        with Catalog.open(tmp_warehouse) as cat:
            t = cat.load_table("db.t")
            assert sorted(t.scan().to_arrow().column("id").to_pylist()) == [1, 3, 4]
            assert t.state.next_row_id == 5
            assert cat.verify("db.t") == []


def _two_file_table(cat: Any, first: list[int], second: list[int]) -> Any:
    """``db.t``: a v3 merge-on-read table of one column ``id``, one data file per given list."""
    cat.create_namespace("db")
    t = cat.create_table("db.t", schema=pa.schema([("id", pa.int64())]), format_version=3,
                         properties={"write.delete.mode": "merge-on-read"})
    t.append(pa.table({"id": first}))
    t.append(pa.table({"id": second}))
    return t


def test_icelog_puffin_files_hold_one_vector_per_data_file(tmp_path: Path) -> None:
    with Catalog.open(tmp_path / "wh") as cat:
        t = _two_file_table(cat, [1, 2, 3], [4, 5, 6])
        t.delete("id IN (1, 4)")
        vectors = _live_vectors(t)
        assert len(vectors) == 2 and len({v.file_path for v in vectors}) == 1
        assert len(puffin_footer(vectors[0].file_path)["blobs"]) == 2
        manifests = list((tmp_path / "wh" / "db" / "t" / "metadata").glob("*-m*.avro"))
        dv_entries = []
        for m in manifests:
            with m.open("rb") as f:
                dv_entries += [r["data_file"] for r in fastavro.reader(f) if r["data_file"]["file_format"] == "PUFFIN"]
        assert {(d["content_offset"], d["record_count"]) for d in dv_entries} == {
            (v.content_offset, 1) for v in vectors}


def test_pyiceberg_and_duckdb_read_icelog_v3_tables_with_vectors(tmp_path: Path) -> None:
    from pyiceberg.table import StaticTable

    from tests.conftest import duckdb_connect

    with Catalog.open(tmp_path / "wh") as cat:
        cat.create_namespace("db")
        t = cat.create_table("db.t", schema=pa.schema([("id", pa.int64()), ("cat", pa.string())]),
                             partition_by=["cat"], format_version=3,
                             properties={"write.delete.mode": "merge-on-read"})
        t.append(pa.table({"id": list(range(8)), "cat": ["a", "b"] * 4}))
        t.delete("id IN (1, 2)")
        t.delete("id = 4")  # merges the vector of partition a's file
        metadata = t.metadata_location
    survivors = [0, 3, 5, 6, 7]
    assert sorted(StaticTable.from_metadata(metadata).scan().to_arrow().column("id").to_pylist()) == survivors
    con = duckdb_connect()
    assert sorted(r[0] for r in con.execute(f"SELECT id FROM iceberg_scan('{metadata}')").fetchall()) == survivors


def test_expiry_deletes_a_puffin_file_only_when_none_of_its_vectors_is_reachable(tmp_path: Path) -> None:
    """One Puffin file holds the vectors of several data files: replacing one of them leaves the file reachable
    through the others, so expiry keeps it; once every vector in it is replaced, expiry deletes it."""
    with Catalog.open(tmp_path / "wh") as cat:
        t = _two_file_table(cat, [0, 1, 2], [3, 4, 5])
        t.delete("id IN (0, 3)")                        # one Puffin file, two vectors
        shared = {v.file_path for v in _live_vectors(t)}
        assert len(shared) == 1 and len(_live_vectors(t)) == 2
        puffin = Path(next(iter(shared)).removeprefix("file://"))
        t.delete("id = 1")                              # file 1's vector replaced; file 2's stays in the shared file
        far_future = 2**62
        t.expire_snapshots(older_than_ms=far_future, retain_last=1)
        assert puffin.exists()
        assert sorted(t.scan().to_arrow().column("id").to_pylist()) == [2, 4, 5]
        t.delete("id = 4")                              # now no vector of the shared file is live
        result = t.expire_snapshots(older_than_ms=far_future, retain_last=1)
        assert not puffin.exists()
        assert any(p.endswith(puffin.name) for p in result.deleted_delete_files)
        assert sorted(t.scan().to_arrow().column("id").to_pylist()) == [2, 5]
        assert cat.verify("db.t") == []


def test_compaction_replaces_an_upgraded_tables_position_delete_files(tmp_path: Path) -> None:
    """An upgraded table's v2 position delete file applies until compaction rewrites its data file: then the delete
    file is gone, the rows it deleted stay deleted and the carried rows keep their ids."""
    with Catalog.open(tmp_path / "wh") as cat:
        cat.create_namespace("db")
        t = cat.create_table("db.t", schema=pa.schema([("id", pa.int64())]),
                             properties={"write.delete.mode": "merge-on-read"})
        t.append(pa.table({"id": [1, 2, 3]}))
        t.append(pa.table({"id": [4, 5]}))
        t.delete("id = 2")                                              # a v2 position delete file
        t.upgrade_format_version(3)
        contents = sorted((f["content"], f["file_format"]) for f in t.inspect.files().to_pylist())
        assert contents == [(0, "PARQUET"), (0, "PARQUET"), (1, "PARQUET")]
        before = t.scan(columns=["id", "_row_id"]).to_arrow().sort_by("id").to_pylist()
        assert [r["id"] for r in before] == [1, 3, 4, 5]
        t.rewrite_data_files()
        files = t.inspect.files().to_pylist()
        assert [(f["content"], f["record_count"]) for f in files] == [(0, 4)]   # no delete file of any kind left
        assert t.scan(columns=["id", "_row_id"]).to_arrow().sort_by("id").to_pylist() == before


def test_upsert_writes_vectors_and_keeps_the_replaced_rows_ids_as_spark_merge_does(spark: Any, tmp_path: Path) -> None:
    """A v3 upsert deletes the replaced rows with a deletion vector (no equality deletes) and writes each replacing
    row with the replaced row's ``_row_id`` and the new sequence number, as Spark's MERGE INTO does on its own v3
    table; Spark reads icelog's rows with the same lineage."""
    from tools.spark import hadoop_catalog

    rows = {"id": [1, 2, 3], "cat": ["a", "b", "c"]}
    with Catalog.open(tmp_path / "wh") as cat:
        cat.create_namespace("db")
        t = cat.create_table("db.t", schema=pa.schema([("id", pa.int64()), ("cat", pa.string())]), format_version=3)
        t.append(pa.table(rows))
        t.upsert(pa.table({"id": [2, 4], "cat": ["B", "d"]}), ["id"])
        kinds = sorted((f.content, f.file_format) for f in (e.file for e in t.catalog.store.live_entries(
            t.state, t.current_snapshot().snapshot_id)))
        assert kinds == [(DataFileContent.DATA, "PARQUET"), (DataFileContent.DATA, "PARQUET"),
                         (DataFileContent.POSITION_DELETES, "PUFFIN")]
        head = t.current_snapshot().snapshot_id
        icelog = _icelog_rows(t, head)
        assert icelog == {1: ("a", 0, 1), 2: ("B", 1, 2), 3: ("c", 2, 1), 4: ("d", 4, 2)}
        assert _spark_rows(spark, t.metadata_location, head) == icelog

    name = hadoop_catalog(spark, tmp_path / "spark")
    spark.sql(f"CREATE TABLE {name}.db.t (id bigint, cat string) USING iceberg TBLPROPERTIES ('format-version'='3', "
              "'write.merge.mode'='merge-on-read', 'write.update.mode'='merge-on-read', "
              "'write.delete.mode'='merge-on-read')").collect()
    spark.sql(f"INSERT INTO {name}.db.t VALUES (1, 'a'), (2, 'b'), (3, 'c')").collect()
    spark.sql(f"MERGE INTO {name}.db.t t USING (SELECT * FROM VALUES (2L, 'B'), (4L, 'd') AS s(id, cat)) s "
              "ON t.id = s.id WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *").collect()
    merged = {r["id"]: (r["cat"], r["_row_id"], r["_last_updated_sequence_number"]) for r in
              spark.sql(f"SELECT id, cat, {LINEAGE} FROM {name}.db.t").collect()}
    assert {k: v for k, v in merged.items() if k != 4} == {k: v for k, v in icelog.items() if k != 4}
    assert merged[4][0] == "d" and merged[4][1] >= 3 and merged[4][2] == 2     # a new id past the first commit's
