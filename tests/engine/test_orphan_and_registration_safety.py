"""A table deletes and writes only what the log says it wrote or took over: orphan removal keeps the files a
registered table's location held before it and the files other tables reference, and compares the log with the
listing in one spelling (symlinks resolved); a registration checks where the table may live before it writes a
relocated delete file copy, and never writes one over an existing file; expiry and purge with
``delete_external_files`` keep a file another table took over too. Legitimate orphans still go.

Layer: tests (the engine through Catalog and Table; found by review, /work/review34/safety).
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from engine import Catalog
from engine.errors import IcelogError, ValidationError
from engine.model.partitioning import PartitionSpec
from engine.model.schema import Schema
from engine.model.sort_order import SortOrder
from engine.operations import expire as expire_mod
from engine.state.events import TableCreated, decode, encode

SCHEMA = pa.schema([("id", pa.int64())])


def later() -> int:
    """An orphan cutoff after every file of the test."""
    return int(time.time() * 1000) + 3_600_000


def source_table(tmp_path: Path) -> str:
    """An Iceberg table at <tmp>/src/db/t with one append; its metadata file."""
    src = Catalog.open(tmp_path / "src")
    src.create_namespace("db")
    t = src.create_table("db.t", SCHEMA)
    t.append(pa.table({"id": [1, 2]}))
    md = t.metadata_location
    src.close()
    return md


def stray(folder: Path, name: str = "stray.parquet") -> Path:
    """A file a failed job left under a table folder: a legitimate orphan."""
    path = folder / "data" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table({"id": [0]}), path)
    return path


# ---------------------------------------------------------------- orphans of registered tables


def test_orphan_removal_of_a_table_registered_onto_a_users_folder_keeps_the_users_files(tmp_path: Path) -> None:
    md = source_table(tmp_path)
    user = tmp_path / "wh" / "user"
    (user / "notes").mkdir(parents=True)
    (user / "thesis.txt").write_text("a user's file, never the table's")
    (user / "notes" / "draft.md").write_text("another")
    cat = Catalog.open(tmp_path / "wh")
    try:
        cat.create_namespace("db")
        t = cat.register_table("db.r", md, location=str(user))  # create_table would refuse this folder
        orphan = stray(user)
        removed = t.remove_orphan_files(older_than_ms=later())
        assert (user / "thesis.txt").read_text() == "a user's file, never the table's"
        assert (user / "notes" / "draft.md").exists()
        assert removed == [str(orphan)] and not orphan.exists()  # what came after the registration goes
        assert sorted(t.scan().to_arrow().column("id").to_pylist()) == [1, 2]
    finally:
        cat.close()


def test_orphan_removal_of_a_table_registered_in_place_keeps_another_tables_file(tmp_path: Path) -> None:
    md = source_table(tmp_path)
    folder = Path(md).parent.parent
    shared = folder / "data" / "shared.parquet"
    pq.write_table(pa.table({"id": [42]}), shared)  # under the table's folder, not part of the table
    cat = Catalog.open(tmp_path / "wh")
    try:
        cat.create_namespace("db")
        b = cat.create_table("db.b", SCHEMA)
        b.append_files([str(shared)])  # db.b takes it over in place
        a = cat.register_table("db.a", md)  # in place: its location holds db.b's file
        orphan = stray(folder)
        removed = a.remove_orphan_files(older_than_ms=later())
        assert shared.exists(), "db.a's orphan removal deleted a data file live in db.b"
        assert b.scan().to_arrow().column("id").to_pylist() == [42]
        assert removed == [str(orphan)]
        assert sorted(a.scan().to_arrow().column("id").to_pylist()) == [1, 2]
    finally:
        cat.close()


def test_orphan_removal_keeps_a_file_another_table_references_even_unrecorded(tmp_path: Path,
                                                                               monkeypatch: pytest.MonkeyPatch
                                                                               ) -> None:
    """The second guard alone: with no record of what the location held (a registration from before the record),
    a file another table's log references still stays."""
    md = source_table(tmp_path)
    folder = Path(md).parent.parent
    shared = folder / "data" / "shared.parquet"
    pq.write_table(pa.table({"id": [42]}), shared)
    cat = Catalog.open(tmp_path / "wh")
    try:
        cat.create_namespace("db")
        b = cat.create_table("db.b", SCHEMA)
        b.append_files([str(shared)])
        a = cat.register_table("db.a", md)
        monkeypatch.setattr(expire_mod, "original_files", lambda store, table_uuid: (), raising=False)
        orphan = stray(folder)
        assert a.remove_orphan_files(older_than_ms=later()) == [str(orphan)]
        assert shared.exists() and b.scan().to_arrow().column("id").to_pylist() == [42]
    finally:
        cat.close()


def test_orphan_removal_keeps_a_live_file_named_through_a_symlinked_folder(tmp_path: Path) -> None:
    cat = Catalog.open(tmp_path / "wh")
    try:
        cat.create_namespace("db")
        t = cat.create_table("db.t", SCHEMA)
        real = Path(t.location) / "data" / "loaded.parquet"
        real.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(pa.table({"id": [1, 2]}), real)
        alias = tmp_path / "mnt"
        alias.symlink_to(t.location)  # the same folder by another path (a mount, a link)
        t.append_files([str(alias / "data" / "loaded.parquet")])
        orphan = stray(Path(t.location))
        removed = t.remove_orphan_files(older_than_ms=later())
        assert str(real) not in removed and real.exists(), "orphan removal deleted a live data file of the table"
        assert removed == [str(orphan)]
        assert sorted(t.scan().to_arrow().column("id").to_pylist()) == [1, 2]
    finally:
        cat.close()


# ---------------------------------------------------------------- registration writes nothing it may not


def moved_table_with_deletes(tmp_path: Path) -> tuple[str, Path, str, str]:
    """A merge-on-read table copied to <tmp>/moved/t: (its original location, the copy, the copy's metadata file,
    one of its data files by original path)."""
    src = Catalog.open(tmp_path / "orig")
    src.create_namespace("db")
    t = src.create_table("db.t", SCHEMA, properties={"write.delete.mode": "merge-on-read"}, format_version=2)
    t.append(pa.table({"id": [1, 2, 3]}))
    t.delete("id = 2")
    orig_loc, md_name = t.location, Path(t.metadata_location).name
    data_file = next(p for p in t.inspect.files().column("file_path").to_pylist()
                     if "delete" not in p and p.endswith(".parquet"))
    src.close()
    moved = tmp_path / "moved" / "t"
    shutil.copytree(orig_loc, moved)
    return orig_loc, moved, str(moved / "metadata" / md_name), data_file


def test_a_refused_registration_never_writes_into_another_tables_folder(tmp_path: Path) -> None:
    orig_loc, moved, md, data_file = moved_table_with_deletes(tmp_path)
    cat = Catalog.open(tmp_path / "wh")
    try:
        cat.create_namespace("db")
        b = cat.register_table("db.b", md, relocate={orig_loc: str(moved)})
        assert sorted(b.scan().to_arrow().column("id").to_pylist()) == [1, 3]
        copies = sorted((moved / "data").glob("relocated-*.parquet"))
        assert copies, "db.b has a relocated delete file"
        before = {p: p.read_bytes() for p in copies}
        listing = sorted(moved.rglob("*"))
        with pytest.raises(IcelogError):  # onto db.b's location, with another mapping
            cat.register_table("db.a", md, relocate={orig_loc: str(moved), data_file: str(tmp_path / "x.parquet")},
                               location=str(moved))
        assert [p.name for p in copies if p.read_bytes() != before[p]] == []
        assert sorted(moved.rglob("*")) == listing
        assert not cat.table_exists("db.a")
        assert sorted(b.scan().to_arrow().column("id").to_pylist()) == [1, 3]
    finally:
        cat.close()


def test_a_relocated_copy_is_never_written_over_an_existing_file(tmp_path: Path) -> None:
    orig_loc, moved, md, _ = moved_table_with_deletes(tmp_path)
    probe = Catalog.open(tmp_path / "probe")  # where the copy of the delete file is named
    probe.create_namespace("db")
    probe.register_table("db.p", md, relocate={orig_loc: str(moved)}, location=str(tmp_path / "probe" / "p"))
    copy_name = next((tmp_path / "probe" / "p" / "data").glob("relocated-*.parquet")).name
    probe.close()
    target = tmp_path / "wh" / "new"
    (target / "data").mkdir(parents=True)
    (target / "data" / copy_name).write_bytes(b"a user's file that happens to have the name")
    cat = Catalog.open(tmp_path / "wh")
    try:
        cat.create_namespace("db")
        with pytest.raises(ValidationError, match="already exists with other content"):
            cat.register_table("db.n", md, relocate={orig_loc: str(moved)}, location=str(target))
        assert (target / "data" / copy_name).read_bytes() == b"a user's file that happens to have the name"
        assert sorted(p.name for p in target.rglob("*")) == ["data", copy_name]
        assert not cat.table_exists("db.n")
        # a fresh folder takes the copy; registering again elsewhere with the same bytes there is no clobber
        fresh = tmp_path / "wh" / "fresh"
        n = cat.register_table("db.n", md, relocate={orig_loc: str(moved)}, location=str(fresh))
        assert sorted(n.scan().to_arrow().column("id").to_pylist()) == [1, 3]
        assert (fresh / "data" / copy_name).exists()
    finally:
        cat.close()


def test_a_retried_registration_uses_its_earlier_identical_copy(tmp_path: Path) -> None:
    orig_loc, moved, md, _ = moved_table_with_deletes(tmp_path)
    target = tmp_path / "wh" / "r"
    first = Catalog.open(tmp_path / "first")  # an earlier import into the same folder, in another catalog
    first.create_namespace("db")
    first.register_table("db.r", md, relocate={orig_loc: str(moved)}, location=str(target))
    copies = {p: p.read_bytes() for p in (target / "data").glob("relocated-*.parquet")}
    first.close()
    cat = Catalog.open(tmp_path / "wh")
    try:
        cat.create_namespace("db")
        r = cat.register_table("db.r", md, relocate={orig_loc: str(moved)}, location=str(target))
        assert sorted(r.scan().to_arrow().column("id").to_pylist()) == [1, 3]
        assert {p: p.read_bytes() for p in copies} == copies
    finally:
        cat.close()


# ---------------------------------------------------------------- files two tables took over


def shared_file(tmp_path: Path) -> Path:
    shared = tmp_path / "incoming" / "f.parquet"
    shared.parent.mkdir()
    pq.write_table(pa.table({"id": [1]}), shared)
    return shared


@pytest.mark.parametrize("how", ["expire", "purge"])
def test_delete_external_files_spares_a_file_live_in_another_table(tmp_path: Path, how: str) -> None:
    shared = shared_file(tmp_path)
    own = tmp_path / "incoming" / "own.parquet"
    pq.write_table(pa.table({"id": [5]}), own)
    cat = Catalog.open(tmp_path / "wh")
    try:
        cat.create_namespace("db")
        b = cat.create_table("db.b", SCHEMA)
        b.append_files([str(shared)])
        c = cat.create_table("db.c", SCHEMA)
        c.append_files([str(shared), str(own)])
        if how == "expire":
            c.delete("id in (1, 5)")
            c.append(pa.table({"id": [2]}))
            deleted = c.expire_snapshots(older_than_ms=later(), retain_last=1,
                                         delete_external_files=True).deleted_data_files
        else:
            deleted = cat.purge_table("db.c", delete_external_files=True)
        assert shared.exists(), f"{how} of db.c deleted a file db.b still reads"
        assert str(own) in deleted and not own.exists()  # only db.c's: it goes
        assert b.scan().to_arrow().column("id").to_pylist() == [1]
    finally:
        cat.close()


# ---------------------------------------------------------------- the log stays readable


def test_table_created_without_original_files_decodes_and_encodes_as_before() -> None:
    schema = Schema.from_json({"type": "struct", "schema-id": 0, "fields": [
        {"id": 1, "name": "id", "required": False, "type": "long"}]})
    old = TableCreated(table_uuid="u", location="/w/t", format_version=2, schema=schema,
                       spec=PartitionSpec.from_json({"spec-id": 0, "fields": []}),
                       sort_order=SortOrder.from_json({"order-id": 0, "fields": []}), original_metadata=("v1.json",))
    payload = old.payload()
    assert "original-files" not in payload  # an old log's event, encoded the same
    assert decode(TableCreated.TYPE, TableCreated.VERSION, encode(old)[2]).original_files == ()
    new = TableCreated(**{**{f: getattr(old, f) for f in ("table_uuid", "location", "format_version", "schema",
                                                            "spec", "sort_order", "original_metadata")},
                          "original_files": ("data/a.txt", "x/y")})
    assert new.payload()["original-files"] == ["data/a.txt", "x/y"]
    assert decode(TableCreated.TYPE, TableCreated.VERSION, encode(new)[2]) == new


def test_an_old_registration_without_the_record_still_removes_orphans(tmp_path: Path) -> None:
    """A table whose TableCreated has no ``original-files`` (logs written before it) behaves as before for
    files no table references."""
    cat = Catalog.open(tmp_path / "wh")
    try:
        cat.create_namespace("db")
        t = cat.create_table("db.t", SCHEMA)
        t.append(pa.table({"id": [1]}))
        orphan = stray(Path(t.location))
        assert expire_mod.original_files(cat.store, t.uuid) == ()
        assert t.remove_orphan_files(older_than_ms=later()) == [str(orphan)]
        assert os.path.exists(t.location) and t.scan().to_arrow().num_rows == 1
    finally:
        cat.close()


def test_a_history_referencing_another_tables_files_is_not_registered(tmp_path: Path) -> None:
    """Registered in place as db.a, the same table (its uuid removed, as format v1 allows) is refused as db.c
    elsewhere: its files are db.a's, whose expiry and purge delete them (the README's rule for inputs)."""
    import json

    md = source_table(tmp_path)
    meta = json.loads(Path(md.removeprefix("file://")).read_text())
    del meta["table-uuid"]
    copy = tmp_path / "no-uuid.metadata.json"
    copy.write_text(json.dumps(meta))
    with Catalog.open(tmp_path / "icelog") as cat:
        cat.create_namespace("db")
        cat.register_table("db.a", md)
        head = cat.log.head("catalog")
        with pytest.raises(ValidationError, match="references .*belongs to db.a"):
            cat.register_table("db.c", str(copy), location=str(tmp_path / "elsewhere"))
        assert cat.log.head("catalog") == head and not (tmp_path / "elsewhere").exists()
