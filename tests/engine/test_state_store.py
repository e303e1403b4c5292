"""Loading a table reads a checkpoint and the events after it, never the whole history."""

from __future__ import annotations

import os

import pyarrow as pa

from engine import Catalog
from engine.state.store import CHECKPOINT_EVERY


def test_cold_load_starts_from_a_checkpoint(tmp_path):
    warehouse = tmp_path / "wh"
    rows = pa.table({"id": pa.array([1], pa.int64())})
    with Catalog.open(warehouse, project=False) as cat:
        cat.create_namespace("db")
        t = cat.create_table("db.t", schema=rows.schema)
        for _ in range(CHECKPOINT_EVERY + 30):
            t.append(rows)
        expected = t.state
    with Catalog.open(warehouse, project=False) as cat:
        reads = []
        original = cat.log.read_stream

        def spy(stream, after_version=0, up_to_version=None):
            events = original(stream, after_version=after_version, up_to_version=up_to_version)
            reads.append((stream, after_version, len(events)))
            return events

        cat.log.read_stream = spy
        loaded = cat.load_table("db.t").state
    assert loaded == expected
    table_reads = [r for r in reads if r[0] == expected.table_uuid]
    assert table_reads and all(after >= CHECKPOINT_EVERY for _, after, _ in table_reads)
    assert sum(n for _, _, n in table_reads) <= 31


def test_state_after_reload_equals_cached_state(tmp_path):
    with Catalog.open(tmp_path / "wh") as cat:
        cat.create_namespace("db")
        t = cat.create_table("db.t", schema=pa.schema([("id", pa.int64())]), properties={"a": "1"})
        t.append(pa.table({"id": pa.array([1, 2], pa.int64())}))
        cached = t.state
    with Catalog.open(tmp_path / "wh") as cat:
        assert cat.load_table("db.t").state == cached


def test_handles_folding_the_same_commits_write_each_checkpoint_once(tmp_path):
    warehouse = tmp_path / "wh"
    rows = pa.table({"id": pa.array([1], pa.int64())})
    with Catalog.open(warehouse, project=False) as writer, Catalog.open(warehouse, project=False) as reader:
        writer.create_namespace("db")
        t = writer.create_table("db.t", schema=rows.schema)
        assert reader.load_table("db.t").state.version == 1  # the reader's cached state starts before the boundary
        for _ in range(CHECKPOINT_EVERY + 5):
            t.append(rows)
        written = []
        original = reader.log.put_checkpoint
        reader.log.put_checkpoint = lambda *args: written.append(args) or original(*args)
        assert reader.load_table("db.t").state == t.state
        assert written == []  # the writer's fold crossed the boundary first and stored it
        assert writer.log.checkpoint_version_at_or_before(t.uuid, t.state.version) == CHECKPOINT_EVERY


def test_a_checkpoint_another_handle_is_writing_is_not_computed_again(tmp_path):
    """Writers of one table cross a checkpoint boundary together: while one holds the table's checkpoint lock (it
    is writing it), another folding the same commits goes on without computing it; once free, it writes it."""
    warehouse = tmp_path / "wh"
    rows = pa.table({"id": pa.array([1], pa.int64())})
    with Catalog.open(warehouse, project=False) as writer, Catalog.open(warehouse, project=False) as other:
        other.store.stop_sharing()  # folds for itself, as another process would
        writer.create_namespace("db")
        t = writer.create_table("db.t", schema=rows.schema)
        writer.log.put_checkpoint = lambda *args: None  # this writer leaves the checkpoint to others
        for _ in range(CHECKPOINT_EVERY + 5):
            t.append(rows)
        with writer.log.exclusive(f"checkpoint {t.uuid}") as held:
            assert held
            assert other.load_table("db.t").state == t.state
            assert other.log.checkpoint_version_at_or_before(t.uuid, t.state.version) == 0
        other.store.forget_cached()
        other.store.stop_sharing()  # and keeps no state folded before, so it folds the commits again
        assert other.load_table("db.t").state == t.state
        assert other.log.checkpoint_version_at_or_before(t.uuid, t.state.version) >= CHECKPOINT_EVERY


def test_the_states_of_commits_just_folded_are_not_folded_again(tmp_path):
    """Publishing takes the states at each commit boundary from those the store has just folded (the same
    objects, no read of the log); a range it does not hold is folded from the log, equal to what a fresh handle
    folds."""
    rows = pa.table({"id": pa.array([1], pa.int64())})
    with Catalog.open(tmp_path / "wh", project=False) as cat:
        cat.create_namespace("db")
        t = cat.create_table("db.t", schema=rows.schema)
        first = t.state.version
        for _ in range(3):
            t.append(rows)
        t.set_properties(a="1")  # a commit of another kind between the appends
        t.append(rows)
        store, head = cat.store, t.state.version
        reads = []
        original = cat.log.read_stream

        def spy(stream, after_version=0, up_to_version=None):
            reads.append((after_version, up_to_version))
            return original(stream, after_version=after_version, up_to_version=up_to_version)

        cat.log.read_stream = spy
        states = store.commits_between(t.uuid, first, head)
        assert reads == []
        assert len(states) == 5 and states[-1] is store.table(t.uuid)
        assert [s.version for s in states] == sorted({s.version for s in states})
    with Catalog.open(tmp_path / "wh", project=False) as fresh:
        fresh_reads = []
        original = fresh.log.read_stream
        fresh.log.read_stream = lambda stream, after_version=0, up_to_version=None: fresh_reads.append(
            after_version) or original(stream, after_version=after_version, up_to_version=up_to_version)
        assert fresh.store.commits_between(t.uuid, first, head) == states
        assert fresh_reads  # held nothing: folded from the log


def test_a_checkpoint_encodes_only_the_snapshots_since_the_last_one(tmp_path, monkeypatch):
    """A checkpoint's text is the state's lossless JSON (expired snapshots and v3 row ids included), and the next
    checkpoint encodes only the snapshots committed since: a snapshot's JSON is encoded once per process."""
    import json
    import zlib

    import engine.state.table_state as table_state

    encoded = []
    original = table_state._snapshot_to_json
    monkeypatch.setattr(table_state, "_snapshot_to_json", lambda s: encoded.append(s.snapshot_id) or original(s))
    rows = pa.table({"id": pa.array([1], pa.int64())})
    with Catalog.open(tmp_path / "wh", project=False) as cat:
        cat.create_namespace("db")
        t = cat.create_table("db.t", schema=rows.schema, properties={"format-version": "3"})
        for _ in range(CHECKPOINT_EVERY - 2):
            t.append(rows)
        first = t.state.snapshots[0].snapshot_id
        t.expire_snapshots(older_than_ms=t.state.last_updated_ms + 1, retain_last=CHECKPOINT_EVERY - 3)
        assert t.state.version == CHECKPOINT_EVERY
        assert len(encoded) == CHECKPOINT_EVERY - 2  # each snapshot once, the expired one among them
        encoded.clear()
        for _ in range(CHECKPOINT_EVERY):
            t.append(rows)
        assert len(encoded) == CHECKPOINT_EVERY  # only the new ones
        state = t.state
        blob = cat.log.checkpoint_at_or_before(t.uuid, state.version)
    assert blob is not None and blob[0] == 2 * CHECKPOINT_EVERY
    stored = json.loads(zlib.decompress(blob[1]))
    assert stored == json.loads(json.dumps(table_state.state_to_json(state)))
    assert table_state.state_from_json(stored) == state
    assert [s.snapshot_id for s in table_state.state_from_json(stored).expired_snapshots] == [first]
    assert state.snapshots[-1].first_row_id is not None


def test_a_publish_of_more_commits_than_the_store_keeps_states_for_gives_the_log_s_files(tmp_path):
    """The store keeps the states of the last few commit boundaries only (their snapshot tuples grow with the
    history); publishing a longer run of commits folds the rest from the log and publishes the same files."""
    from engine.state.store import RECENT_STATES

    rows = pa.table({"id": pa.array([1], pa.int64())})
    with Catalog.open(tmp_path / "wh", project=False) as cat:
        cat.create_namespace("db")
        t = cat.create_table("db.t", schema=rows.schema)
        for _ in range(2 * RECENT_STATES + 10):
            t.append(rows)
        assert len(cat.store._recent) <= RECENT_STATES
        t.publish()
        assert cat.verify("db.t") == []
        assert t.scan().count() == 2 * RECENT_STATES + 10
        assert open(t.metadata_location, "rb").read() == t.publisher.render()[t.metadata_location]


def _stream_reads(cat, stream):
    """The ``(after, up to)`` of every read of ``stream`` through ``cat``'s log from now on."""
    reads, original = [], cat.log.read_stream

    def spy(s, after_version=0, up_to_version=None):
        if s == stream:
            reads.append((after_version, up_to_version))
        return original(s, after_version=after_version, up_to_version=up_to_version)

    cat.log.read_stream = spy
    return reads


def test_handles_of_one_process_take_the_states_another_folded_from_landed_commits(tmp_path):
    """Threads that each open the catalog (a REST server's workers) fold each commit once between them: a handle
    takes the state another folded outside a write transaction (the same object, no read of the log), but never one
    folded inside one (it may hold writes that never land), nor one whose last commit the log does not hold at its
    version. A closed handle shares nothing more."""
    import attrs

    from engine.state.store import LANDED_BY_LOG

    rows = pa.table({"id": pa.array([1], pa.int64())})
    with Catalog.open(tmp_path / "wh") as a, Catalog.open(tmp_path / "wh") as b, \
            Catalog.open(tmp_path / "wh") as apart:
        apart.store.stop_sharing()
        a.create_namespace("db")
        t = a.create_table("db.t", schema=rows.schema)
        t.append(rows)
        reads = _stream_reads(b, t.uuid)
        t_b = b.load_table("db.t")
        assert t_b.state is t.state and reads == []
        t_b.append(rows)
        reads = _stream_reads(a, t.uuid)
        assert t.state is t_b.state and reads == []

        apart.load_table("db.t").append(rows)  # a commit neither has folded
        with a.log.transaction():  # folded inside a write transaction: kept by a alone
            inside = a.store.table(t.uuid)
        assert inside.version == apart.load_table("db.t").state.version
        reads = _stream_reads(b, t.uuid)
        assert b.store.table(t.uuid) == inside and reads != []

        landed = LANDED_BY_LOG.of(b.log)
        head = b.store.table(t.uuid)
        apart.load_table("db.t").append(rows)
        newer = apart.load_table("db.t").state
        landed.add([(attrs.evolve(newer, commit_id="not-in-this-log"), head.version)])
        reads = _stream_reads(b, t.uuid)
        assert b.store.table(t.uuid) == newer and reads != []  # not taken: folded from the log

        b.close()
        assert b.store._landed is not landed and a.store._landed is landed


def test_a_state_asked_for_inside_a_commit_is_never_taken_for_the_end_of_one(tmp_path):
    """A transaction's commit spans several versions; a time-travel read stopping inside it folds a state no commit
    ever had. Kept as a commit boundary, it made the next publish write a metadata.json for that version (which
    verify then called foreign), and another handle of the process go on from it."""
    rows = pa.table({"id": pa.array([1], pa.int64())})
    with Catalog.open(tmp_path / "wh") as cat:
        cat.create_namespace("db")
        cat.create_table("db.t", schema=rows.schema).append(rows)
    with Catalog.open(tmp_path / "wh", project=False) as cat:
        t = cat.load_table("db.t")
        with t.transaction() as tx:
            tx.set_properties(a="1")
            tx.append(rows)
            tx.append(rows)
        entries = [(e.version, e.commit_id) for e in cat.log.read_stream(t.uuid)]
    one_commit = [v for v, c in entries if c == entries[-1][1]]
    assert len(one_commit) == 3 and one_commit[-1] == entries[-1][0]  # versions 3, 4 and 5: one commit
    inside, end, before = one_commit[1], one_commit[-1], one_commit[0] - 1

    with Catalog.open(tmp_path / "wh") as cat, Catalog.open(tmp_path / "wh") as other:
        t = cat.load_table("db.t")
        assert t.as_of(version=inside).state.version == inside
        assert t.as_of(version=inside).render()  # a past state's own files, folded the same way
        t.publish()
        # another handle of the process goes on from a boundary, and publishing covers the one commit
        assert [s.version for s in other.store.commits_between(t.uuid, before, end)] == [end]
        assert other.store.table(t.uuid) == cat.store.table(t.uuid)
        names = sorted(n for n in os.listdir(tmp_path / "wh" / "db" / "t" / "metadata") if n.endswith(".json"))
        assert names == [f"v{v}.metadata.json" for v in range(1, before + 1)] + [f"v{end}.metadata.json"]
    with Catalog.open(tmp_path / "wh") as fresh:
        fresh.store.stop_sharing()
        fresh.projector.stop_sharing()
        assert fresh.load_table("db.t").verify_projection() == []


def test_a_file_change_whose_partition_does_not_fit_its_spec_is_never_recorded() -> None:
    """The last guard before events are written: a partition tuple of another arity than its spec's partition type
    (a client's manifest read under the wrong spec) is refused, naming the file, instead of landing in the log
    where no renderer could place it."""
    import pytest

    from engine.errors import ValidationError
    from engine.model import types as T
    from engine.model.data_file import DataFile
    from engine.state.events import FileChange

    f = DataFile(file_path="/wh/db/t/data/x.parquet", spec_id=0, partition=(), record_count=1, file_size_in_bytes=9)
    one_field = T.StructType(fields=(T.NestedField(field_id=1000, name="c", field_type=T.StringType()),))
    with pytest.raises(ValidationError, match="x.parquet: its partition has 0 value.*spec 0 has 1 field"):
        FileChange(added=True, file=f).encode(one_field)
