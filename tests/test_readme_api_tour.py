"""The README's Python tour, call for call, against a real warehouse: if an example stops working, this fails."""

from __future__ import annotations

import datetime

import pyarrow as pa
import pyarrow.parquet as pq

from engine import Catalog


def test_readme_api_tour(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    d = str(tmp_path)
    def batch_of(ids):
        ts = datetime.datetime(2026, 11, 1, tzinfo=datetime.timezone.utc)
        return pa.table({"id": pa.array(ids, pa.int64()), "ts": pa.array([ts + datetime.timedelta(hours=i) for i in ids], pa.timestamp("us", tz="UTC")),
                         "name": [f"n{i}" for i in ids], "category": ["a" if i % 2 else "b" for i in ids]})
    arrow_table = batch_of(range(20)); batch = batch_of(range(100, 105))
    cat = Catalog.open("warehouse"); cat.create_namespace("db"); cat.create_namespace("archive")
    t = cat.create_table("db.events", schema=arrow_table.schema, partition_by=["day(ts)", "bucket(16, id)", "truncate(4, name)", "category"], properties={}, format_version=2)
    snap = t.append(arrow_table)
    pq.write_table(batch_of([200]), "x.parquet")
    t.append_files(["x.parquet"])  # a file from another writer, metrics from its footer
    t.scan(where="id > 10 and category = 'a'", columns=["id", "ts"]).to_arrow()
    t.scan(snapshot_id=snap.snapshot_id).to_arrow()
    t.inspect.snapshots(); t.inspect.files(); t.inspect.entries()
    past = t.as_of(version=2); past.schema(), past.properties; past.scan().to_arrow(); past.publish_view(d + "/view")
    t.log(); cat.log(since=0); t.changes(1, 2)
    cat.as_of(position=3).list_tables("db")
    t.metadata_location; t.location, t.snapshots(), t.current_snapshot()
    cat.list_tables("db"), cat.list_namespaces(), cat.load_table("db.events")
    t.delete("category = 'a' and id < 100")
    t.set_properties({"write.delete.mode": "merge-on-read"})
    t.overwrite(batch_of([300]), where="id = 300")
    t.dynamic_overwrite(batch_of([1, 3]))
    t.delete_files([t.scan().plan_files()[0].file_path])
    keys = pa.table({"id": pa.array([2], pa.int64())}); changes = batch_of([4, 6])
    t.upsert(changes, key_columns=["id"]); t.delete_by_key(keys, ["id"])
    u = cat.create_table("db.u", schema=arrow_table.schema)
    u.append(arrow_table)
    with u.row_delta() as delta:
        delta.add_rows(batch).add_equality_deletes(keys, ["id"])
    assert 2 not in u.scan().to_arrow().column("id").to_pylist()
    t.rewrite_data_files(strategy="zorder", zorder_columns=["id", "ts"]); t.rewrite_manifests()
    with t.update_spec() as update:
        update.add_field("id", "bucket[8]"); update.remove_field("category")
    t.replace_sort_order().asc("ts").desc("id").commit()
    t.remove_properties("owner"); t.upgrade_format_version(2)
    snap = t.current_snapshot()
    with t.manage_snapshots() as ms:
        ms.create_branch(snap.snapshot_id, "audit").create_tag(snap.snapshot_id, "v1")
    a2 = t.append(batch_of([900]), branch="audit")
    t.manage_snapshots().rollback_to_snapshot(snap.parent_snapshot_id).commit()
    t.manage_snapshots().cherrypick_snapshot(a2.snapshot_id).commit()
    cutoff = 2**62
    t.expire_snapshots(older_than_ms=cutoff, retain_last=5); t.remove_orphan_files(older_than_ms=cutoff)
    cat.create_table("db.b", schema=arrow_table.schema)
    cat.create_table("db.a", schema=arrow_table.schema)
    with t.transaction() as tx:
        tx.append(batch); tx.set_properties(owner="etl")
    with cat.transaction() as tx:
        tx.load_table("db.a").append(batch); tx.load_table("db.b").delete("id < 10")
    with t.update_schema() as update:
        update.add_column("note", "string"); update.rename_column("name", "customer"); update.update_column("id", "long")
    cat.rename_table("db.events", "db.clicks"); cat.drop_table("db.clicks")
    assert cat.verify("db.a") == []
    cat.close()
