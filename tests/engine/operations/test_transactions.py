"""Table and catalog transactions: several changes land as one commit, or nothing lands."""

from __future__ import annotations

import pyarrow as pa
import pytest

from engine import Catalog
from engine.errors import ValidationConflict, ValidationError

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


# -- reads inside a transaction see what it staged ---------------------------------------------------------------


def ids_of(table) -> list[int]:
    return sorted(table.scan().to_arrow().column("id").to_pylist())


@pytest.mark.parametrize("mode", ["copy-on-write", "merge-on-read"])
def test_a_delete_in_a_transaction_sees_the_rows_it_appended(cat, mode):
    t = cat.create_table("db.t", schema=SCHEMA, properties={"write.delete.mode": mode})
    t.append(rows(100, 101))
    with t.transaction() as tx:
        tx.append(rows(1, 2, 3, 7, 8))
        assert ids_of(tx) == [1, 2, 3, 7, 8, 100, 101]
        deleted = tx.delete("id < 5")
        assert deleted is not None
        assert ids_of(tx) == [7, 8, 100, 101]
    assert ids_of(t) == [7, 8, 100, 101]
    # the handle's caches hold no staged file set: a fresh catalog reads the same
    with Catalog.open(cat.warehouse) as fresh:
        assert ids_of(fresh.load_table("db.t")) == [7, 8, 100, 101]
    assert cat.verify("db.t") == []


def test_upsert_overwrite_and_compaction_in_a_transaction_see_staged_files(cat):
    t = cat.create_table("db.t", schema=SCHEMA)
    t.append(rows(1, 2))
    with t.transaction() as tx:
        tx.append(rows(3, 4))
        tx.upsert(rows(3, 5), ["id"])          # replaces the staged 3, adds 5
        assert ids_of(tx) == [1, 2, 3, 4, 5]
        tx.overwrite(rows(40), where="id = 4")  # rewrites the staged file holding 4
        assert ids_of(tx) == [1, 2, 3, 5, 40]
        compacted = tx.rewrite_data_files()
        assert compacted is not None and compacted.operation == "replace"
        live = [task.file.file_path for task in tx.scan().plan_files()]
        assert len(live) == 1 and ids_of(tx) == [1, 2, 3, 5, 40]
    assert ids_of(t) == [1, 2, 3, 5, 40]
    assert [task.file.file_path for task in t.scan().plan_files()] == live
    with Catalog.open(cat.warehouse) as fresh:
        assert ids_of(fresh.load_table("db.t")) == [1, 2, 3, 5, 40]
    assert cat.verify("db.t") == []


def test_a_transaction_reads_the_table_as_it_began(cat):
    t = cat.create_table("db.t", schema=SCHEMA)
    t.append(rows(1))
    tx = t.transaction()
    t.append(rows(2))  # lands after the transaction began: the transaction does not read it
    assert ids_of(tx) == [1]
    tx.append(rows(3))
    assert ids_of(tx) == [1, 3]
    tx.commit_transaction()
    assert ids_of(t) == [1, 2, 3]
    tx.append(rows(4))  # the handle's next transaction starts from the commit it made
    assert ids_of(tx) == [1, 2, 3, 4]


# -- a retry validates every staged operation against all that landed since the transaction's base -------------


def test_compaction_staged_after_an_append_sees_equality_deletes_landed_meanwhile(cat):
    t = cat.create_table("db.t", schema=SCHEMA)
    for batch in (rows(1, 2, 3), rows(4, 5, 6)):
        t.append(batch)
    tx = t.transaction()
    tx.append(rows(7, 8))
    assert tx.rewrite_data_files() is not None  # starts from the snapshot of the staged append
    deletes = [t.delete_by_key(rows(2), ["id"]), t.delete_by_key(rows(5), ["id"])]
    assert all(d is not None and d.operation == "delete" for d in deletes)
    with pytest.raises(ValidationConflict) as info:
        tx.commit_transaction()
    assert info.value.commit_id == deletes[0].commit_id and deletes[0].commit_id in str(info.value)
    assert ids_of(t) == [1, 3, 4, 6]  # the deleted rows stay deleted; nothing of the transaction landed
    assert cat.verify("db.t") == []


def test_catalog_transaction_compaction_after_an_append_sees_deletes_landed_meanwhile(cat):
    a = cat.create_table("db.a", schema=SCHEMA)
    b = cat.create_table("db.b", schema=SCHEMA)
    a.append(rows(1, 2))
    a.append(rows(3))
    tx = cat.transaction()
    tx.load_table("db.b").append(rows(9))
    tx.load_table("db.a").append(rows(4))
    tx.load_table("db.a").rewrite_data_files()
    landed = a.delete_by_key(rows(1), ["id"])
    with pytest.raises(ValidationConflict) as info:
        tx.commit()
    assert info.value.commit_id == landed.commit_id
    assert ids_of(a) == [2, 3] and ids_of(b) == []


def test_compaction_staged_after_an_append_lands_beside_unrelated_commits(cat):
    t = cat.create_table("db.t", schema=SCHEMA)
    t.append(rows(1, 2))
    t.append(rows(3))
    tx = t.transaction()
    tx.append(rows(4))
    tx.rewrite_data_files()
    t.append(rows(10))  # adds rows but deletes none of the compacted ones: no conflict
    tx.commit_transaction()
    assert ids_of(t) == [1, 2, 3, 4, 10]
    assert cat.verify("db.t") == []


def test_staged_delete_after_an_append_sees_an_append_into_its_range_under_serializable(cat):
    t = cat.create_table("db.t", schema=SCHEMA)
    t.append(rows(1, 2, 3))
    tx = t.transaction()
    tx.append(rows(20))
    tx.delete("id < 10")
    landed = t.append(rows(6))  # may hold rows the staged delete's filter matches
    with pytest.raises(ValidationConflict) as info:
        tx.commit_transaction()
    assert info.value.commit_id == landed.commit_id and landed.commit_id in str(info.value)
    assert ids_of(t) == [1, 2, 3, 6]


def test_staged_delete_after_an_append_lands_under_snapshot_isolation(cat):
    t = cat.create_table("db.t", schema=SCHEMA, properties={"write.delete.isolation-level": "snapshot"})
    t.append(rows(1, 2, 3))
    tx = t.transaction()
    tx.append(rows(20))
    tx.delete("id < 10")
    t.append(rows(6))  # snapshot isolation: rows the delete never read stay
    tx.commit_transaction()
    assert ids_of(t) == [6, 20]
    assert cat.verify("db.t") == []


def test_staged_delete_after_an_append_sees_a_delete_of_its_file_landed_meanwhile(cat):
    t = cat.create_table("db.t", schema=SCHEMA, properties={"write.delete.isolation-level": "snapshot"})
    t.append(rows(1, 2, 3))
    tx = t.transaction()
    tx.append(rows(20))
    tx.delete("id = 2")  # rewrites the file holding 1, 2, 3
    landed = t.delete("id = 3")  # rewrote (removed) that file first
    with pytest.raises(ValidationConflict) as info:
        tx.commit_transaction()
    assert info.value.commit_id == landed.commit_id
    assert ids_of(t) == [1, 2]


def test_staged_upsert_after_an_append_sees_a_concurrent_append_of_its_keys(cat):
    t = cat.create_table("db.t", schema=SCHEMA)
    t.append(rows(1, 2))
    tx = t.transaction()
    tx.append(rows(20))
    tx.upsert(rows(3), ["id"])
    landed = t.append(rows(3))  # the same key, added meanwhile: the upsert would leave it twice
    with pytest.raises(ValidationConflict) as info:
        tx.commit_transaction()
    assert info.value.commit_id == landed.commit_id
    assert ids_of(t) == [1, 2, 3]


def test_events_the_fold_would_refuse_are_refused_before_they_are_written(cat):
    """A commit's events are folded onto the table's head before the log takes them: one the fold refuses (here a
    ref to a snapshot the table does not hold, from a builder that did not check) would otherwise land and stop
    every later read of the table."""
    from engine.errors import ValidationError
    from engine.state.events import RefSet

    t = cat.create_table("db.t", schema=SCHEMA)
    t.append(rows(3))
    head = cat.log.head(t.uuid)
    with pytest.raises(ValidationError, match="snapshot 12345 does not exist"):
        t.commit_events(lambda base, ctx: [RefSet(name="dangling", snapshot_id=12345)])
    assert cat.log.head(t.uuid) == head
    assert t.scan().to_arrow().num_rows == 1 and t.state.ref("dangling") is None


@pytest.mark.parametrize("step", [lambda tx: tx.delete("id = 1"), lambda tx: tx.overwrite(rows(7), where="id = 1")],
                         ids=["delete", "overwrite"])
@pytest.mark.parametrize("upgrade", [lambda tx: tx.upgrade_format_version(3),
                                     lambda tx: tx.set_properties({"format-version": "3"})],
                         ids=["upgrade_format_version", "format-version property"])
def test_a_transaction_that_upgrades_to_v3_and_then_rewrites_rows_lands(cat, step, upgrade):
    """The upgrade's row-id snapshot keeps its id on every build: the delete read it while staged, and found it
    again at commit (it was drawn anew, and the delete refused as if the branch had moved)."""
    t = cat.create_table("db.t", schema=SCHEMA)
    t.append(rows(1, 2))
    with t.transaction() as tx:
        upgrade(tx)
        step(tx)
    assert t.state.format_version == 3
    assert sorted(t.scan().to_arrow().column("id").to_pylist()) in ([2], [2, 7])
    assert cat.verify("db.t") == []
