"""Importing existing Iceberg tables: metadata resolution, gzip, v1 inline manifests, relocation, refs, the
clash check, and typed errors for corrupt or unsupported metadata.

Layer: tests (engine, projections). The tables are written by icelog itself (real Iceberg metadata trees on
disk), then registered into a second catalog; Spark- and PyIceberg-written tables are in
tests/integration/test_register_spark_tables.py.
"""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from engine import Catalog
from engine.errors import AlreadyExists, CorruptFileError, NamespaceNotFound, NotFound, ValidationError
from engine.state.events import RefSet, SnapshotAdded, TableCreated
from engine.registration.register import PositionDeleteRelocation
from engine.registration.metadata_import import Relocator, all_paths, import_table, resolve_metadata_location
from storage.files import FileIO

SCHEMA = pa.schema([("id", pa.int64()), ("cat", pa.string())])


def rows(ids: list[int], cat: str = "a") -> pa.Table:
    return pa.table({"id": pa.array(ids, pa.int64()), "cat": pa.array([cat] * len(ids))})


def ids(t, snapshot_id: int) -> list[int]:
    return sorted(t.scan(snapshot_id=snapshot_id).to_arrow().column("id").to_pylist())


def make_source(tmp_path: Path, *, format_version: int = 2) -> tuple[Catalog, object]:
    src = Catalog.open(tmp_path / "src")
    src.create_namespace("db")
    t = src.create_table("db.t", schema=SCHEMA, partition_by=["cat"], format_version=format_version)
    t.append(rows([1, 2, 3]))
    t.append(rows([4, 5], "b"))
    t.delete("id = 2")
    t.update_schema().add_column("extra", "int").commit()
    t.append(pa.table({"id": pa.array([6], pa.int64()), "cat": ["b"], "extra": pa.array([7], pa.int32())}))
    first = t.snapshots()[0].snapshot_id
    t.manage_snapshots().create_tag(first, "v1").commit()
    t.manage_snapshots().create_branch(t.current_snapshot().snapshot_id, "dev").commit()
    t.append(rows([7], "c"), branch="dev")
    return src, t


def target(tmp_path: Path) -> Catalog:
    cat = Catalog.open(tmp_path / "dst")
    cat.create_namespace("db")
    return cat


def test_registers_every_snapshot_ref_and_schema(tmp_path: Path) -> None:
    _, src = make_source(tmp_path)
    cat = target(tmp_path)
    t = cat.register_table("db.copy", src.metadata_location, location=str(tmp_path / "proj"))
    assert [s.snapshot_id for s in t.snapshots()] == [s.snapshot_id for s in src.snapshots()]
    assert [(s.parent_snapshot_id, s.sequence_number, s.timestamp_ms, s.operation) for s in t.snapshots()] == \
        [(s.parent_snapshot_id, s.sequence_number, s.timestamp_ms, s.operation) for s in src.snapshots()]
    for s in src.snapshots():
        assert ids(t, s.snapshot_id) == ids(src, s.snapshot_id)
    assert {k: (r.type, r.snapshot_id) for k, r in t.refs().items()} == \
        {k: (r.type, r.snapshot_id) for k, r in src.refs().items()}
    assert t.schema() == src.schema() and t.spec() == src.spec()
    assert [s.schema_id for s in t.state.schemas] == [s.schema_id for s in src.state.schemas]
    assert t.state.last_sequence_number == src.state.last_sequence_number
    assert t.history() and [sid for _, sid in t.history()] == [sid for _, sid in src.history()]
    assert t.state.location == str(tmp_path / "proj")
    assert cat.verify("db.copy") == []
    # icelog keeps writing to the imported table
    t.append(rows([100], "z"))
    assert 100 in ids(t, t.current_snapshot().snapshot_id)


def test_events_keep_history_in_commit_order(tmp_path: Path) -> None:
    _, src = make_source(tmp_path)
    imported = import_table(FileIO(), src.metadata_location)
    assert isinstance(imported.events[0], TableCreated)
    added = [e for e in imported.events if isinstance(e, SnapshotAdded)]
    assert [e.snapshot_id for e in added] == [s.snapshot_id for s in src.snapshots()]
    assert added[-1].branch == "dev" and added[0].branch == "main"
    assert added[2].changes and any(not c.added for c in added[2].changes)  # the delete removed a file
    tags = [e for e in imported.events if isinstance(e, RefSet) and e.ref_type == "tag"]
    assert [(e.name, e.snapshot_id) for e in tags] == [("v1", added[0].snapshot_id)]
    assert imported.location == src.location and imported.notes == ()


def test_folder_without_version_hint_and_gzip_metadata(tmp_path: Path) -> None:
    _, src = make_source(tmp_path)
    meta = Path(src.location) / "metadata"
    (meta / "version-hint.text").unlink()
    newest = Path(src.metadata_location)
    number = int(newest.name[1:].split(".")[0])
    (meta / f"v{number}.gz.metadata.json").write_bytes(gzip.compress(newest.read_bytes()))
    newest.unlink()
    io = FileIO()
    assert resolve_metadata_location(io, src.location).endswith(f"v{number}.gz.metadata.json")
    assert resolve_metadata_location(io, str(meta)).endswith(f"v{number}.gz.metadata.json")
    (meta / "version-hint.text").write_text("garbage")
    assert resolve_metadata_location(io, src.location).endswith(f"v{number}.gz.metadata.json")
    cat = target(tmp_path)
    t = cat.register_table("db.copy", src.location, location=str(tmp_path / "proj"))
    assert ids(t, t.current_snapshot().snapshot_id) == [1, 3, 4, 5, 6]


def test_numbered_metadata_names_and_missing_location(tmp_path: Path) -> None:
    _, src = make_source(tmp_path)
    meta = Path(src.location) / "metadata"
    for p in meta.glob("v*.metadata.json"):
        n = int(p.name[1:].split(".")[0])
        p.rename(meta / f"{n:05d}-1b5e0e1c-3a6f-4f8e-9d61-5c7a6e0f0a1b.metadata.json")
    (meta / "version-hint.text").unlink()
    found = resolve_metadata_location(FileIO(), src.location)
    assert Path(found).name.startswith(f"{src.state.version:05d}-")
    with pytest.raises(NotFound, match="does not exist"):
        resolve_metadata_location(FileIO(), str(tmp_path / "nothing"))
    with pytest.raises(NotFound, match="no metadata file"):
        resolve_metadata_location(FileIO(), str(tmp_path))


def test_v1_inline_manifests(tmp_path: Path) -> None:
    _, src = make_source(tmp_path, format_version=1)
    from projections.manifest_reader import read_manifest_list

    meta = json.loads(Path(src.metadata_location).read_text())
    for snap in meta["snapshots"]:
        lst = read_manifest_list(Path(snap["manifest-list"].removeprefix("file://")).read_bytes(), "x")
        snap["manifests"] = [m.manifest_path for m in lst]
        del snap["manifest-list"]
    inline = tmp_path / "inline.metadata.json"
    inline.write_text(json.dumps(meta))
    cat = target(tmp_path)
    t = cat.register_table("db.copy", str(inline), location=str(tmp_path / "proj"))
    assert t.state.format_version == 1
    for s in src.snapshots():
        assert ids(t, s.snapshot_id) == ids(src, s.snapshot_id)


def test_relocate_a_copied_table(tmp_path: Path) -> None:
    _, src = make_source(tmp_path)
    old = src.location
    new = str(tmp_path / "moved")
    shutil.copytree(old, new)
    expected = {s.snapshot_id: ids(src, s.snapshot_id) for s in src.snapshots()}
    shutil.rmtree(old)
    cat = target(tmp_path)
    with pytest.raises(CorruptFileError) as info:  # without relocate the old paths are gone
        cat.register_table("db.copy", new, location=str(tmp_path / "proj"))
    assert old in info.value.path
    proj = str(tmp_path / "proj")  # in place would clash: the source's stream versions outnumber the import's events
    t = cat.register_table("db.copy", new, relocate={old: new}, location=proj)
    assert t.location == proj
    for sid, want in expected.items():
        assert ids(t, sid) == want
    assert all(f.file_path.startswith(new) for f in cat.store.live_files(t.state, t.current_snapshot().snapshot_id))


def test_relocator_matches_scheme_spellings() -> None:
    r = Relocator({"file:/data/wh": "/mnt/wh"})
    assert r("file:/data/wh/t/a.parquet") == "/mnt/wh/t/a.parquet"
    assert r("file:///data/wh/t/a.parquet") == "/mnt/wh/t/a.parquet"
    assert r("/data/wh/t/a.parquet") == "/mnt/wh/t/a.parquet"
    assert r("/data/wh2/t/a.parquet") == "/data/wh2/t/a.parquet"  # a prefix of a name is not a folder prefix
    assert Relocator({"s3://b/x": "s3://c/y", "s3://b": "s3://d"})("s3://b/x/f") == "s3://c/y/f"  # longest wins


def test_in_place_registration_publishes_after_the_original_versions(tmp_path: Path) -> None:
    _, src = make_source(tmp_path)
    # the import holds fewer events than the source's stream has versions: icelog's v<N> would land on an
    # original file, so its numbers start after the highest original one instead
    cat = target(tmp_path)
    n = len(import_table(FileIO(), src.location).events)
    folder = Path(src.location) / "metadata"
    originals = {p.name: p.read_bytes() for p in folder.iterdir()}
    highest = max(int(name[1:].split(".")[0]) for name in originals if name.endswith(".metadata.json"))
    assert highest >= n
    t = cat.register_table("db.copy", src.metadata_location)  # in place, no other argument
    assert t.metadata_location == str(folder / f"v{highest + 1}.metadata.json")
    assert (folder / "version-hint.text").read_text() == str(highest + 1)
    for name, data in originals.items():
        if name != "version-hint.text":
            assert (folder / name).read_bytes() == data, name  # never overwritten
    t.append(t.scan().to_arrow().slice(0, 1))
    assert t.metadata_location == str(folder / f"v{highest + 2}.metadata.json")
    assert cat.verify("db.copy") == []
    assert t.remove_orphan_files(older_than_ms=2**62) == []  # the originals are not orphans
    stray = folder / "appeared-later.metadata.json"
    stray.write_bytes(b"x")  # a metadata file that came after the registration is reported
    assert any("appeared-later.metadata.json" in p for p in cat.verify("db.copy"))
    stray.unlink()
    # metadata clean-up after commits deletes icelog's old versions, never the original writer's
    t.set_properties({"write.metadata.delete-after-commit.enabled": "true",
                      "write.metadata.previous-versions-max": "1"})
    for _ in range(3):
        t.append(t.scan().to_arrow().slice(0, 1))
    t.expire_snapshots(older_than_ms=2**62, retain_last=1)
    for name, data in originals.items():
        if name != "version-hint.text":
            assert (folder / name).read_bytes() == data, name


def test_name_taken_and_uuid_registered_twice(tmp_path: Path) -> None:
    _, src = make_source(tmp_path)
    cat = target(tmp_path)
    cat.register_table("db.copy", src.metadata_location, location=str(tmp_path / "p1"))
    with pytest.raises(AlreadyExists, match="already exists"):
        cat.register_table("db.copy", src.metadata_location, location=str(tmp_path / "p2"))
    with pytest.raises(AlreadyExists, match="already registered as db.copy"):
        cat.register_table("db.other", src.metadata_location, location=str(tmp_path / "p3"))
    cat.drop_table("db.copy")  # its history stays under the uuid: the message says so, not 'another name'
    with pytest.raises(AlreadyExists, match="is a table this catalog dropped"):
        cat.register_table("db.other", src.metadata_location, location=str(tmp_path / "p3"))


@pytest.mark.parametrize("what", ["metadata", "manifest list", "manifest"])
def test_corrupt_files_raise_typed_errors_naming_the_file(tmp_path: Path, what: str) -> None:
    _, src = make_source(tmp_path)
    meta = Path(src.metadata_location)
    if what == "metadata":
        victim = meta
    else:
        doc = json.loads(meta.read_text())
        current = next(s for s in doc["snapshots"] if s["snapshot-id"] == doc["current-snapshot-id"])
        victim = Path(current["manifest-list"].removeprefix("file://"))
        if what == "manifest":
            from projections.manifest_reader import read_manifest_list

            victim = Path(read_manifest_list(victim.read_bytes(), "x")[0].manifest_path.removeprefix("file://"))
    data = victim.read_bytes()
    victim.write_bytes(data[: len(data) // 2])
    with pytest.raises(CorruptFileError) as info:
        import_table(FileIO(), str(meta))
    assert info.value.path.endswith(victim.name)
    assert victim.name in str(info.value)


def test_corrupt_gzip_metadata(tmp_path: Path) -> None:
    bad = tmp_path / "v1.gz.metadata.json"
    bad.write_bytes(gzip.compress(b'{"format-version": 2}')[:-6])
    with pytest.raises(CorruptFileError, match="v1.gz.metadata.json"):
        import_table(FileIO(), str(bad))


def _doc(src) -> dict:
    return json.loads(Path(src.metadata_location).read_text())


def test_unsupported_metadata_is_refused_naming_file_and_field(tmp_path: Path) -> None:
    _, src = make_source(tmp_path)
    path = tmp_path / "x.metadata.json"
    io = FileIO()

    doc = _doc(src)
    doc["format-version"] = 4
    path.write_text(json.dumps(doc))
    with pytest.raises(ValidationError, match=r"x.metadata.json: field 'format-version' is 4"):
        import_table(io, str(path))

    doc = _doc(src)
    doc["schemas"][0]["fields"][0]["initial-default"] = 5          # a default in a v2 table
    path.write_text(json.dumps(doc))
    with pytest.raises(ValidationError, match=r"x.metadata.json \(schema 0\): column 'id' has an initial-default"):
        import_table(io, str(path))

    doc = _doc(src)
    doc["format-version"] = 3
    doc["schemas"][0]["fields"][0]["write-default"] = "five"      # not a long
    path.write_text(json.dumps(doc))
    with pytest.raises(ValidationError, match=r"x.metadata.json \(schema 0\): the write-default 'five' of column 'id'"):
        import_table(io, str(path))

    doc = _doc(src)
    doc["schemas"][0]["fields"][0]["type"] = "geometry"
    path.write_text(json.dumps(doc))
    with pytest.raises(ValidationError, match=r"x.metadata.json: field 'schemas\[0\]' cannot be read"):
        import_table(io, str(path))

    doc = _doc(src)
    doc["schemas"][0]["fields"][0]["type"] = "variant"                 # a v3 type in a v2 table
    path.write_text(json.dumps(doc))
    with pytest.raises(ValidationError, match=r"x.metadata.json \(schema 0\): column 'id' is a variant, which needs "
                                              r"format version 3"):
        import_table(io, str(path))

    doc = _doc(src)
    del doc["snapshots"][0]["sequence-number"]  # Java writes none for 0 (a snapshot from before an upgrade to v2)
    path.write_text(json.dumps(doc))
    first = next(e for e in import_table(io, str(path)).events if isinstance(e, SnapshotAdded))
    assert first.sequence_number == 0

    doc = _doc(src)
    del doc["location"]
    path.write_text(json.dumps(doc))
    with pytest.raises(ValidationError, match=r"field 'location' is missing"):
        import_table(io, str(path))


def test_v3_imports_as_v3_keeping_next_row_id(tmp_path: Path) -> None:
    _, src = make_source(tmp_path)
    doc = _doc(src)
    doc["format-version"] = 3
    doc["next-row-id"] = 42
    path = tmp_path / "v3.metadata.json"
    path.write_text(json.dumps(doc))
    imported = import_table(FileIO(), str(path))
    created = imported.events[0]
    assert isinstance(created, TableCreated) and created.format_version == 3 and created.next_row_id == 42
    assert imported.original_format_version == 3 and imported.notes == ()


def test_expired_parent_id_is_kept(tmp_path: Path) -> None:
    _, src = make_source(tmp_path)
    doc = _doc(src)
    first = doc["snapshots"][0]["snapshot-id"]
    doc["snapshots"] = doc["snapshots"][1:]
    doc["refs"] = {k: v for k, v in doc["refs"].items() if v["snapshot-id"] != first}
    doc["snapshot-log"] = [e for e in doc.get("snapshot-log", []) if e["snapshot-id"] != first]
    path = tmp_path / "expired.metadata.json"
    path.write_text(json.dumps(doc))
    cat = target(tmp_path)
    t = cat.register_table("db.copy", str(path), location=str(tmp_path / "proj"))
    assert t.import_notes == ()
    assert t.snapshots()[0].parent_snapshot_id == first  # as Java keeps it, though the parent is gone
    for s in src.snapshots()[1:]:
        assert ids(t, s.snapshot_id) == ids(src, s.snapshot_id)
    published = json.loads(Path(t.metadata_location.removeprefix("file://")).read_text())
    assert published["snapshots"][0]["parent-snapshot-id"] == first
    assert first not in {s["snapshot-id"] for s in published["snapshots"]}


def test_relocating_position_deletes_rewrites_them(tmp_path: Path) -> None:
    from engine.model.data_file import DataFileContent

    src = Catalog.open(tmp_path / "src")
    src.create_namespace("db")
    t = src.create_table("db.t", schema=SCHEMA, partition_by=["cat"],
                         properties={"write.delete.mode": "merge-on-read"})
    t.append(rows([1, 2, 3]))
    t.append(rows([4, 5], "b"))
    t.delete("id = 2")
    t.delete("id IN (3, 5)")
    expected = {s.snapshot_id: ids(t, s.snapshot_id) for s in t.snapshots()}
    assert any(f.content == DataFileContent.POSITION_DELETES
               for f in src.store.live_files(t.state, t.current_snapshot().snapshot_id))
    new = str(tmp_path / "moved")
    shutil.copytree(t.location, new)
    # the importer alone (no rewriter given) refuses
    with pytest.raises(ValidationError, match="with relocate: its rows name data files by their original paths"):
        import_table(FileIO(), new, relocate={t.location: new})
    shutil.rmtree(t.location)  # the original is gone
    cat = target(tmp_path)
    # a registration refused at its commit (no such namespace) removes the delete file copies it made
    with pytest.raises(NamespaceNotFound):
        cat.register_table("nope.copy", new, relocate={t.location: new})
    assert not list(Path(new).rglob("relocated-*"))
    proj = str(tmp_path / "proj")
    r = cat.register_table("db.copy", new, relocate={t.location: new}, location=proj)
    for sid, want in expected.items():
        assert ids(r, sid) == want
    deletes = [f for f in cat.store.live_files(r.state, r.current_snapshot().snapshot_id)
               if f.content == DataFileContent.POSITION_DELETES]
    assert len(deletes) == 3  # one per partition and delete
    for f in deletes:
        assert f.file_path.startswith(f"{proj}/data/relocated-") and f.record_count == 1
        written = pq.read_table(f.file_path)
        assert [fld.metadata[b"PARQUET:field_id"] for fld in written.schema] == [b"2147483546", b"2147483545"]
        assert all(p.startswith(new) for p in written.column("file_path").to_pylist())
        assert dict(f.lower_bounds)[2147483546] == dict(f.upper_bounds)[2147483546]  # names one data file
    # importing again names the rewritten files the same way; a refused second registration keeps them
    again = import_table(FileIO(), new, relocate={t.location: new}, location=proj,
                         relocate_position_deletes=PositionDeleteRelocation(FileIO()))
    assert sorted(p for p in all_paths(again.events) if "relocated-" in p) == sorted(f.file_path for f in deletes)
    with pytest.raises(AlreadyExists, match="already registered"):  # the same table, a second time
        cat.register_table("db.copy2", new, relocate={t.location: new}, location=proj)
    assert all(Path(f.file_path).exists() for f in deletes)
    assert ids(r, r.current_snapshot().snapshot_id) == [1, 4]


def test_a_registration_whose_publish_fails_after_its_commit_keeps_its_relocated_delete_files(tmp_path: Path) -> None:
    """The log names the relocated copies once the registration landed: a publish failing after it (here a
    renderer error) reports PublishFailed and removes none of them."""
    from engine.errors import PublishFailed
    from engine.model.data_file import DataFileContent

    src = Catalog.open(tmp_path / "src")
    src.create_namespace("db")
    t = src.create_table("db.t", schema=SCHEMA, properties={"write.delete.mode": "merge-on-read"})
    t.append(rows([1, 2, 3]))
    t.delete("id = 2")
    new = str(tmp_path / "moved")
    shutil.copytree(t.location, new)
    cat = target(tmp_path)

    def broken_publish(*args, **kwargs):
        raise ValueError("a renderer bug")

    real_publish, cat.projector.publish = cat.projector.publish, broken_publish
    try:
        with pytest.raises(PublishFailed):
            cat.register_table("db.copy", new, relocate={t.location: new}, location=str(tmp_path / "proj"))
    finally:
        cat.projector.publish = real_publish
    r = cat.load_table("db.copy")
    r.publish()
    deletes = [f for f in cat.store.live_files(r.state, r.current_snapshot().snapshot_id)
               if f.content == DataFileContent.POSITION_DELETES]
    assert deletes and all(Path(f.file_path).exists() for f in deletes)
    assert ids(r, r.current_snapshot().snapshot_id) == [1, 3]
