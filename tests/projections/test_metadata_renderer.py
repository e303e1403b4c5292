"""The incremental metadata.json renderer: the same bytes as the reference rendering after every kind of commit,
and each snapshot encoded once however long the history grows."""

from __future__ import annotations

import json

import attrs
import pyarrow as pa
import pytest

from engine import Catalog
from projections import metadata_json
from projections.metadata_json import MetadataRenderer, metadata_dict, render_metadata


def rows(ids: range) -> pa.Table:
    return pa.table({"id": pa.array(list(ids), pa.int64())})


@pytest.fixture(params=[2, 128], ids=["chunks-of-2", "chunks-of-128"])
def chunk(request, monkeypatch) -> int:
    """How many encoded snapshots (and log entries) the renderer joins into one kept piece: 2 crosses a piece's
    boundary at almost every commit of these short histories."""
    monkeypatch.setattr(metadata_json._JoinedTexts, "CHUNK", request.param)
    return request.param


@pytest.mark.parametrize("format_version", [1, 2, 3])
def test_every_commit_renders_the_reference_bytes(tmp_path, format_version, chunk):
    """Appends, a rollback (a snapshot-log entry for an old snapshot), a branch, an expiry (history removed from
    the front), a snapshot limit switched on and off, a schema change: after each, one long-lived renderer gives
    exactly the bytes of a fresh full render (and of the JSON document the REST server returns)."""
    renderer = MetadataRenderer()
    with Catalog.open(tmp_path / "wh") as cat:
        cat.create_namespace("db")
        t = cat.create_table("db.t", schema=pa.schema([("id", pa.int64())]), format_version=format_version)
        seen = 0

        def check() -> None:
            nonlocal seen
            state = t.state
            expected = render_metadata(state)
            assert renderer.render(state) == expected
            assert json.loads(expected) == metadata_dict(state)
            seen += 1

        snaps = []
        for i in range(6):
            snaps.append(t.append(rows(range(i * 3, i * 3 + 3))))
            check()
        t.manage_snapshots().rollback_to_snapshot(snaps[2].snapshot_id).commit()
        check()
        t.manage_snapshots().create_branch(snaps[4].snapshot_id, "audit").commit()
        check()
        t.append(rows(range(100, 103)))
        check()
        t.expire_snapshots(retain_last=2)
        check()
        t.set_properties({"icelog.metadata.max-snapshots": "2"})
        check()
        t.append(rows(range(200, 203)))
        check()
        t.remove_properties("icelog.metadata.max-snapshots")
        check()
        with t.update_schema() as update:
            update.add_column("note", "string")
        check()
        t.append(pa.table({"id": pa.array([300], pa.int64()), "note": ["x"]}))
        check()
        t.set_properties({"write.metadata.previous-versions-max": "2"})  # the metadata log trimmed to two
        check()
        t.append(pa.table({"id": pa.array([301], pa.int64()), "note": ["y"]}))
        check()
        # what the catalog published is what the renderer gives
        assert open(t.metadata_location, "rb").read() == render_metadata(t.state)
        assert cat.verify("db.t") == []
    assert seen == 17


def test_a_commit_encodes_only_its_own_snapshot(tmp_path, monkeypatch):
    encoded: list[int] = []
    original = metadata_json.snapshot_json

    def counting(state, snap):
        encoded.append(snap.snapshot_id)
        return original(state, snap)

    with Catalog.open(tmp_path / "wh") as cat:
        cat.create_namespace("db")
        t = cat.create_table("db.t", schema=pa.schema([("id", pa.int64())]))
        for i in range(40):
            t.append(rows(range(i, i + 1)))
        monkeypatch.setattr(metadata_json, "snapshot_json", counting)
        for i in range(40, 45):
            snap = t.append(rows(range(i, i + 1)))
            assert encoded == [snap.snapshot_id]
            encoded.clear()
        assert open(t.metadata_location, "rb").read() == render_metadata(t.state)


def test_a_commit_encodes_only_its_own_metadata_log_entry(tmp_path, monkeypatch):
    from projections import layout

    paths: list[int] = []
    original = layout.metadata_file_of

    def counting(state, version=None, location=None):
        paths.append(version)
        return original(state, version, location)

    with Catalog.open(tmp_path / "wh") as cat:
        cat.create_namespace("db")
        t = cat.create_table("db.t", schema=pa.schema([("id", pa.int64())]))
        for i in range(30):
            t.append(rows(range(i, i + 1)))
        monkeypatch.setattr(layout, "metadata_file_of", counting)
        for i in range(30, 33):
            t.append(rows(range(i, i + 1)))
            # the new entry (the previous file) and the previous pointer, not the whole log (30 entries)
            assert len([v for v in paths if v is not None]) <= 2, paths
            paths.clear()
        assert open(t.metadata_location, "rb").read() == render_metadata(t.state)


def test_a_render_goes_on_from_another_folds_snapshots_without_comparing_them_field_by_field(tmp_path, monkeypatch):
    """States folded by another handle (another process, the REST server after a reload) hold other objects for
    the same snapshots: the renderer still goes on from its last render, encoding only the new snapshot, and tells
    the snapshots apart by id and log position, not by comparing every field (a millisecond at 1,000 snapshots)."""
    from engine.state.table_state import Snapshot

    renderer = MetadataRenderer()
    with Catalog.open(tmp_path / "wh") as cat, Catalog.open(tmp_path / "wh") as other:
        other.store.stop_sharing()  # folds for itself, as another process would
        cat.create_namespace("db")
        t = cat.create_table("db.t", schema=pa.schema([("id", pa.int64())]))
        for i in range(5):
            t.append(rows(range(i, i + 1)))
        renderer.render(t.state)
        o = other.load_table("db.t")
        o.append(rows(range(5, 6)))
        state = o.state
        assert state.snapshots[0] is not t.state.snapshots[0] and state.snapshots[0] == t.state.snapshots[0]
        encoded, compared = [], []
        original = metadata_json.snapshot_json
        monkeypatch.setattr(metadata_json, "snapshot_json", lambda s, snap: encoded.append(snap) or original(s, snap))
        monkeypatch.setattr(Snapshot, "__eq__", lambda a, b: compared.append(a) or NotImplemented)
        rendered = renderer.render(state)
        assert [s.snapshot_id for s in encoded] == [state.snapshots[-1].snapshot_id]
        assert compared == []
        assert rendered == render_metadata(state)
        # a snapshot with a kept id but logged at another position is another snapshot: a full render
        moved = attrs.evolve(state, snapshots=(attrs.evolve(state.snapshots[0], log_position=10**9),
                                               *state.snapshots[1:]))
        encoded.clear()
        assert renderer.render(moved) == render_metadata(moved)
        assert len(encoded) == len(state.snapshots) + len(moved.snapshots)  # the renderer's and the reference's


@pytest.mark.parametrize("format_version", [2, 3])
def test_a_sliding_snapshot_window_renders_the_reference_bytes_encoding_only_the_new_snapshot(
        tmp_path, monkeypatch, format_version, chunk):
    """Under ``icelog.metadata.max-snapshots`` each commit drops the oldest published snapshot (and its log entry)
    off the front: the renderer drops their JSON instead of encoding the whole window again, and still gives the
    reference bytes; a branch head outside the window, a rollback and a smaller limit included."""
    encoded: list[int] = []
    original = metadata_json.snapshot_json
    renderer = MetadataRenderer()

    def counting(state, snap):
        encoded.append(snap.snapshot_id)
        return original(state, snap)

    def rendered_by_our_renderer(state) -> bytes:
        monkeypatch.setattr(metadata_json, "snapshot_json", counting)
        try:
            return renderer.render(state)
        finally:
            monkeypatch.setattr(metadata_json, "snapshot_json", original)

    with Catalog.open(tmp_path / "wh") as cat:
        cat.create_namespace("db")
        t = cat.create_table("db.t", schema=pa.schema([("id", pa.int64())]), format_version=format_version,
                             properties={"icelog.metadata.max-snapshots": "4"})
        snaps = [t.append(rows(range(i, i + 1))) for i in range(6)]
        assert renderer.render(t.state) == render_metadata(t.state)
        for i in range(6, 12):
            snap = t.append(rows(range(i, i + 1)))
            encoded.clear()
            assert rendered_by_our_renderer(t.state) == render_metadata(t.state)
            assert encoded == [snap.snapshot_id]  # the window slid: one snapshot encoded, one dropped
        assert len(json.loads(render_metadata(t.state))["snapshots"]) == 4
        t.manage_snapshots().create_branch(snaps[1].snapshot_id, "old").commit()  # a head outside the window
        assert renderer.render(t.state) == render_metadata(t.state)
        for i in range(12, 15):
            t.append(rows(range(i, i + 1)))
            assert renderer.render(t.state) == render_metadata(t.state)
        t.manage_snapshots().rollback_to_snapshot(t.state.current_snapshot.parent_snapshot_id).commit()
        assert renderer.render(t.state) == render_metadata(t.state)
        t.set_properties({"icelog.metadata.max-snapshots": "2"})
        assert renderer.render(t.state) == render_metadata(t.state)
        for i in range(15, 18):
            t.append(rows(range(i, i + 1)))
            assert renderer.render(t.state) == render_metadata(t.state)
        assert open(t.metadata_location, "rb").read() == render_metadata(t.state)
        assert cat.verify("db.t") == []


def test_a_render_joins_the_kept_history_in_a_few_pieces(tmp_path, monkeypatch):
    """The JSON of the kept snapshots and log entries is joined into one piece per chunk as the history grows, so
    a render joins a few pieces and the newest snapshots, not one piece per snapshot; the bytes stay the
    reference's."""
    monkeypatch.setattr(metadata_json._JoinedTexts, "CHUNK", 4)
    renderer = MetadataRenderer()
    with Catalog.open(tmp_path / "wh") as cat:
        cat.create_namespace("db")
        t = cat.create_table("db.t", schema=pa.schema([("id", pa.int64())]))
        for i in range(18):
            t.append(rows(range(i, i + 1)))
            assert renderer.render(t.state) == render_metadata(t.state)
        kept = renderer._last[t.uuid]
        # 18 snapshots: four pieces of four, the last two one by one, and the commas between the pieces
        assert [len(p.split(b'{"sequence-number"')) - 1 for p in kept.snapshot_texts.pieces() if p != b","] == \
            [4, 4, 4, 4, 2]
        assert len([p for p in kept.snapshot_log_texts.pieces() if p != b","]) == 5


class _RenderNextOnRelease:
    """The renderer's lock, which runs ``then()`` once, right after the ``times``-th release: another thread's
    render taking the kept render at the worst moment, deterministically."""

    def __init__(self, lock, times: int, then) -> None:
        self.lock, self.times, self.then = lock, times, then

    def __enter__(self):
        return self.lock.__enter__()

    def __exit__(self, *exc):
        self.lock.__exit__(*exc)
        self.times -= 1
        if self.times == 0:
            self.then()


def newest_states(tmp_path, *, appends: int, count: int) -> list:
    """The states of the last ``count`` versions of a table of ``appends`` one-row appends, newest first."""
    with Catalog.open(tmp_path / "wh") as cat:
        cat.create_namespace("db")
        t = cat.create_table("db.t", schema=pa.schema([("id", pa.int64())]))
        for i in range(appends):
            t.append(rows(range(i, i + 1)))
        return [cat.store.table(t.uuid, t.state.version - back) for back in range(count)]


def test_a_render_is_not_changed_by_the_next_one_extending_what_it_kept(tmp_path):
    """Handles of one log in a process (a REST server's workers) share one renderer: a render that kept its texts
    for the next while still joining them returned the next version's snapshots in its own document."""
    newer, older, oldest = newest_states(tmp_path, appends=6, count=3)
    renderer = MetadataRenderer()
    renderer.render(oldest)  # a render kept, for the next to go on from
    rendered_newer: list[bytes] = []
    # the older render's second release is the one after it kept its texts: the newer render runs right then
    renderer._lock = _RenderNextOnRelease(renderer._lock, 2, lambda: rendered_newer.append(renderer.render(newer)))

    document = renderer.render(older)

    assert document == render_metadata(older)
    assert len(json.loads(document)["snapshots"]) == len(older.snapshots)
    assert rendered_newer == [render_metadata(newer)]


def test_rendering_the_same_state_again_gives_the_kept_document_without_encoding_anything(tmp_path, monkeypatch):
    """A REST commit answers with the metadata its publish has just rendered: the second render of that very state
    is the first one's document, while any other state (an equal one folded anew, the next version) renders."""
    state, older = newest_states(tmp_path, appends=4, count=2)
    renderer = MetadataRenderer()
    first = renderer.render(state)
    expected_older, expected = render_metadata(older), render_metadata(state)
    heads: list[int] = []
    original = metadata_json._head_dict
    monkeypatch.setattr(metadata_json, "_head_dict", lambda s: heads.append(s.version) or original(s))

    assert renderer.render(state) is first
    assert heads == []
    assert renderer.render(older) == expected_older  # another state renders (and is kept in turn)
    assert renderer.render(attrs.evolve(state)) == first == expected
    assert heads == [older.version, state.version]
