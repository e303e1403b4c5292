"""Table and catalog transactions: several changes land as one commit, or nothing lands."""

from __future__ import annotations

import pyarrow as pa
import pytest

from engine import Catalog
from engine.errors import ValidationError

SCHEMA = pa.schema([("id", pa.int64())])


def rows(*ids: int) -> pa.Table:
    return pa.table({"id": pa.array(ids, pa.int64())})


@pytest.fixture
def cat(tmp_path):
    c = Catalog.open(tmp_path / "wh")
    c.create_namespace("db")
    yield c
    c.close()


def test_table_transaction_is_one_commit(cat):
    t = cat.create_table("db.t", schema=SCHEMA)
    head = cat.log.head(t.uuid)
    with t.transaction() as tx:
        tx.set_properties(owner="etl")
        tx.append(rows(1, 2))
        tx.update_schema().add_column("note", "string").commit()
        tx.append(rows(3))
        assert cat.log.head(t.uuid) == head  # nothing landed yet
        assert tx.properties["owner"] == "etl"  # but the transaction sees its own changes
    events = cat.log.read_stream(t.uuid, after_version=head)
    assert len({e.commit_id for e in events}) == 1
    assert [e.type for e in events] == ["set-properties", "add-snapshot", "add-schema", "set-current-schema",
                                        "add-snapshot"]
    assert sorted(t.scan().to_arrow().column("id").to_pylist()) == [1, 2, 3]
    assert t.schema().find_field("note") is not None
    snaps = t.snapshots()
    assert snaps[-1].parent_snapshot_id == snaps[-2].snapshot_id
    assert t.metadata_location.endswith(f"v{events[-1].version}.metadata.json")
    assert cat.verify("db.t") == []


def test_a_failing_transaction_lands_nothing(cat):
    t = cat.create_table("db.t", schema=SCHEMA)
    head = cat.log.head(t.uuid)
    with pytest.raises(RuntimeError):
        with t.transaction() as tx:
            tx.append(rows(1))
            raise RuntimeError("boom")
    tx = t.transaction()
    tx.append(rows(1))
    with pytest.raises(ValidationError, match="downgrade"):
        tx.upgrade_format_version(1)  # refused as it is staged; the transaction stays usable
    assert cat.log.head(t.uuid) == head and t.scan().count() == 0
    tx.commit_transaction()
    assert t.scan().count() == 1


def test_catalog_transaction_spans_tables_atomically(cat):
    a = cat.create_table("db.a", schema=SCHEMA)
    b = cat.create_table("db.b", schema=SCHEMA)
    with cat.transaction() as tx:
        tx.load_table("db.a").append(rows(1))
        tx.load_table("db.b").append(rows(2))
    ea, eb = cat.log.read_stream(a.uuid)[-1], cat.log.read_stream(b.uuid)[-1]
    assert ea.commit_id == eb.commit_id
    assert a.scan().count() == 1 and b.scan().count() == 1

    heads = (cat.log.head(a.uuid), cat.log.head(b.uuid))
    with pytest.raises(RuntimeError):
        with cat.transaction() as tx:
            tx.load_table("db.a").append(rows(5))
            tx.load_table("db.b").append(rows(6))
            raise RuntimeError("the job failed half way")
    assert (cat.log.head(a.uuid), cat.log.head(b.uuid)) == heads
    assert a.scan().count() == 1 and b.scan().count() == 1

    # a conflict found at commit (b changed under the transaction in a way its delete cannot accept) lands nothing
    tx = cat.transaction()
    tx.load_table("db.a").append(rows(7))
    tx.load_table("db.b").delete_files([f.file_path for f in b.scan().plan_files()])
    b.delete("id = 2")  # removes the file the transaction's delete names
    with pytest.raises(ValidationError):
        tx.commit()
    assert cat.log.head(a.uuid) == heads[0] and a.scan().count() == 1
