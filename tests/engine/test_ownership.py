"""A table owns its folder and nothing else: names that cannot leave the warehouse, locations that never overlap,
and purge, expire and orphan removal that delete only what the table owns (issue 9, points 1 to 3).

Layer: tests. Real warehouses under tmp_path with sentinel files around and inside them; every refusal is
checked to commit nothing (the log's head position stays) and to create or delete no file.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from engine import Catalog
from engine.errors import IcelogError, ValidationError
from engine.state.events import CATALOG_STREAM, TableCreated, TableRegistered
from engine.operations.commit import RetryPolicy, commit_streams
from tools.cli import main as cli

SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string())])
HOUR_MS = 3_600_000


def rows(ids: list[int]) -> pa.Table:
    return pa.table({"id": pa.array(ids, pa.int64()), "name": [f"n{i}" for i in ids]})


def files_under(root: Path) -> dict[str, bytes]:
    """Every file below ``root`` with its bytes (the catalog's database files left out: they change)."""
    out = {}
    for folder, _, names in os.walk(root):
        for name in names:
            path = os.path.join(folder, name)
            if "catalog.db" not in name:
                with open(path, "rb") as f:
                    out[path] = f.read()
    return out


def head(cat: Catalog) -> int:
    return max((e.position for e in cat.log(since=0)), default=0)


@pytest.fixture
def site(tmp_path: Path) -> Path:
    """A folder holding sentinel files and, inside it, the warehouse (with a sentinel of its own)."""
    (tmp_path / "sentinel.txt").write_text("outside")
    (tmp_path / "wh").mkdir()
    (tmp_path / "wh" / "keep.txt").write_text("inside the warehouse, no table's")
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "mine.txt").write_text("a user's folder")
    return tmp_path


@pytest.fixture
def cat(site: Path):
    catalog = Catalog.open(site / "wh")
    catalog.create_namespace("db")
    yield catalog
    catalog.close()


# ---------------------------------------------------------------- names


BAD_NAMES = [
    (("..", "x"), "folder of the path"),
    (("db", "../../escape"), "path separator"),
    (("db", ".."), "folder of the path"),
    (("db", "."), "folder of the path"),
    (("db", "a/b"), "path separator"),
    (("db", "a\\b"), "path separator"),
    (("db", "nul\x00name"), "control character"),
    (("db", "bell\x07"), "control character"),
    (("db", "x" * 1000), "bytes long"),
    (("db", "é" * 128), "bytes long"),  # 256 bytes of UTF-8
    (("/tmp/abs", "t"), "path separator"),
]


@pytest.mark.parametrize("identifier, message", BAD_NAMES)
def test_names_that_cannot_be_a_folder_are_refused_before_anything_is_committed(cat, site, identifier, message):
    before, position = files_under(site), head(cat)
    with pytest.raises(ValidationError, match=message):
        cat.create_table(identifier, SCHEMA)
    with pytest.raises(ValidationError, match=message):
        cat.create_namespace(identifier)  # the whole identifier as a namespace
    assert head(cat) == position
    assert files_under(site) == before


def test_a_string_identifier_naming_an_absolute_path_is_refused(cat, site):
    before = files_under(site)
    with pytest.raises(ValidationError, match="path separator"):
        cat.create_table(f"{site}/escape.t", SCHEMA)
    assert files_under(site) == before


def test_rename_to_a_bad_name_is_refused(cat):
    cat.create_table("db.t", SCHEMA)
    with pytest.raises(ValidationError, match="folder of the path"):
        cat.rename_table("db.t", ("db", ".."))
    assert cat.list_tables("db") == [("db", "t")]


def test_nested_namespaces_never_share_or_nest_folders(cat, site):
    cat.create_namespace(("db", "a"))
    outer = cat.create_table(("db", "a"), SCHEMA)          # folder wh/db/a
    inner = cat.create_table(("db", "a", "b"), SCHEMA)     # would be wh/db/a/b, inside db.a's folder
    assert not inner.location.startswith(outer.location + "/")
    inner.append(rows([1, 2]))
    outer.append(rows([3]))
    inner_files = {p: b for p, b in files_under(Path(inner.location)).items()}
    removed = outer.remove_orphan_files(older_than_ms=int(time.time() * 1000) + HOUR_MS)
    assert all(p.startswith(outer.location + "/") for p in removed)
    assert files_under(Path(inner.location)) == inner_files
    assert inner.scan().to_arrow().num_rows == 2


# ---------------------------------------------------------------- locations


def test_locations_that_overlap_the_warehouse_another_table_or_the_catalog_are_refused(cat, site):
    other = cat.create_table("db.other", SCHEMA)
    other.append(rows([1]))
    (site / "empty").mkdir()
    (site / "afile").write_text("x")
    cases = {
        str(site / "wh"): "warehouse",
        str(site): "warehouse",
        "/": "warehouse",
        f"file://{site}/wh": "warehouse",
        f"{site}/wh/db/..": "'..' segment",
        str(site / "wh" / "catalog.db"): "catalog",
        other.location: "location of table db.other",
        other.location + "/data/sub": "inside the location of table db.other",
        str(site / "wh" / "db"): "holds the location of table db.other",
        str(site / "full"): "not empty",
        str(site / "afile"): "is a file",
    }
    before, position = files_under(site), head(cat)
    for location, message in cases.items():
        with pytest.raises(ValidationError, match=message):
            cat.create_table("db.t", SCHEMA, location=location)
    assert head(cat) == position and not cat.table_exists("db.t")
    assert files_under(site) == before
    table = cat.create_table("db.t", SCHEMA, location=str(site / "empty"))  # outside the warehouse, empty: allowed
    assert table.location == str(site / "empty")


def test_locations_are_judged_where_they_are_written(cat, site):
    """``<symlink>/../x`` was checked through the symlink but written at ``x`` (os.path.abspath drops ``..`` as
    text): a table, or a rebuild, could write inside another table's folder. Relative locations moved with each
    process's working folder; a folder inside a catalog file's name broke every later open of the catalog."""
    other = cat.create_table("db.other", SCHEMA)
    other.append(rows([1]))
    (site / "link").symlink_to(site / "full")
    inside_other = f"{site}/link/..{other.location[len(str(site)):]}/sub"
    before, position = files_under(site), head(cat)
    for location in (inside_other, f"{site}/link/../fresh", "fresh", "./fresh", "file:fresh",
                     str(site / "wh" / "catalog.db-journal"), str(site / "wh" / "catalog.db-shm" / "t"),
                     f"file://elsewhere{site}/fresh"):
        with pytest.raises(ValidationError, match="relative|segment|catalog's database|names host"):
            cat.create_table("db.t", SCHEMA, location=location)
    with pytest.raises(ValidationError, match="inside the location of table db.other"):
        other.rebuild(inside_other)  # judged where it is written: inside the table's own folder
    assert head(cat) == position and files_under(site) == before
    assert not (site / "wh" / "catalog.db-journal").exists()


def test_a_symlink_into_another_tables_folder_is_the_same_place(cat, site):
    other = cat.create_table("db.other", SCHEMA)
    other.append(rows([1]))
    os.symlink(other.location, site / "link")
    with pytest.raises(ValidationError, match="location of table db.other"):
        cat.create_table("db.t", SCHEMA, location=str(site / "link"))


def test_a_renamed_tables_folder_is_not_reused(cat):
    first = cat.create_table("db.t", SCHEMA)
    first.append(rows([1]))
    cat.rename_table("db.t", "db.old")
    second = cat.create_table("db.t", SCHEMA)  # the default folder is db.old's: a fresh one beside it
    assert second.location != first.location
    second.append(rows([2]))
    assert cat.load_table("db.old").scan().to_arrow().column("id").to_pylist() == [1]
    assert second.scan().to_arrow().column("id").to_pylist() == [2]


# ---------------------------------------------------------------- purge


def test_purge_deletes_what_the_table_owns_and_nothing_else(cat, site):
    table = cat.create_table("db.t", SCHEMA, properties={"write.delete.mode": "merge-on-read"})
    table.append(rows([1, 2, 3]))
    table.delete("id = 2")
    table.append(rows([4]))
    stray = Path(table.location) / "notes.txt"
    stray.write_text("a file the table never wrote")
    (Path(table.location) / "data" / "user.bin").write_text("nor this")
    external = site / "external.parquet"
    pq.write_table(rows([9]), external)
    table.append_files([str(external)])
    neighbour = cat.create_table("db.neighbour", SCHEMA)
    neighbour.append(rows([7]))
    keep = {p: b for p, b in files_under(site).items() if not p.startswith(table.location + "/")}
    deleted = cat.purge_table("db.t")
    assert deleted and all(p.startswith(table.location + "/") for p in deleted)
    assert stray.read_text() == "a file the table never wrote"
    assert (Path(table.location) / "data" / "user.bin").exists()
    assert not (Path(table.location) / "metadata").exists()  # emptied, so removed
    after = files_under(site)
    assert {p: b for p, b in after.items() if not p.startswith(table.location + "/")} == keep
    assert sorted(p for p in after if p.startswith(table.location + "/")) == sorted(
        [str(stray), str(Path(table.location) / "data" / "user.bin")])
    assert neighbour.scan().to_arrow().column("id").to_pylist() == [7]
    assert not cat.table_exists("db.t")


def test_purge_with_delete_external_files_deletes_files_registered_in_place(cat, site):
    table = cat.create_table("db.t", SCHEMA)
    external = site / "external.parquet"
    pq.write_table(rows([9]), external)
    table.append_files([str(external)])
    deleted = cat.drop_table("db.t", purge=True, delete_external_files=True)
    assert str(external) in deleted and not external.exists()
    assert (site / "sentinel.txt").exists() and (site / "full" / "mine.txt").exists()


def test_purge_keeps_the_folder_given_as_location_when_it_holds_foreign_files(cat, site):
    (site / "given").mkdir()
    table = cat.create_table("db.t", SCHEMA, location=str(site / "given"))
    table.append(rows([1]))
    (site / "given" / "later.txt").write_text("written by someone else after the create")
    cat.purge_table("db.t")
    assert (site / "given" / "later.txt").read_text() == "written by someone else after the create"
    assert sorted(os.listdir(site / "given")) == ["later.txt"]


def test_purge_of_a_registered_table_keeps_what_was_not_part_of_it(cat, site, tmp_path):
    source = Catalog.open(tmp_path / "source")
    source.create_namespace("db")
    metadata = {}
    for name in ("t", "u"):
        original = source.create_table(f"db.{name}", SCHEMA)
        original.append(rows([1, 2]))
        metadata[name] = original.metadata_location
    source.close()
    (tmp_path / "source" / "db" / "t" / "README").write_text("not part of the table")
    source_files = files_under(tmp_path / "source")
    registered = cat.register_table("db.t", metadata["t"], location=str(site / "wh" / "db" / "t"))
    assert registered.scan().to_arrow().num_rows == 2
    cat.purge_table("db.t")  # the source's files are external: they stay
    assert files_under(tmp_path / "source") == source_files
    assert not (site / "wh" / "db" / "t").exists()
    cat.register_table("db.u", metadata["u"], location=str(site / "wh" / "db" / "u"))
    deleted = cat.purge_table("db.u", delete_external_files=True)  # taken over: its data files go too
    assert any(p.startswith(str(tmp_path / "source" / "db" / "u" / "data")) for p in deleted)
    assert (tmp_path / "source" / "db" / "t" / "README").read_text() == "not part of the table"
    assert (tmp_path / "source" / "catalog.db").exists()
    assert files_under(tmp_path / "source" / "db" / "t") == {
        p: b for p, b in source_files.items() if p.startswith(str(tmp_path / "source" / "db" / "t"))}


def test_purge_of_a_table_nested_in_another_by_an_old_catalog_spares_the_inner_table(cat, site):
    outer = cat.create_table("db.outer", SCHEMA)
    outer.append(rows([1]))
    # a catalog written before these rules could hold a table inside another's folder: build one with raw events
    import uuid

    inner_uuid = str(uuid.uuid4())
    created = TableCreated(table_uuid=inner_uuid, location=outer.location + "/nested", format_version=2,
                           schema=outer.schema(), spec=outer.spec(), sort_order=outer.sort_order(), properties={})

    def build(ctx):
        state = cat.store.catalog()
        return [(CATALOG_STREAM, state.version, [TableRegistered(namespace=("db",), name="inner",
                                                                 table_uuid=inner_uuid)]),
                (inner_uuid, 0, [created])]

    commit_streams(cat.store, build, policy=RetryPolicy())
    inner = cat.load_table("db.inner")
    inner.publish()
    inner.append(rows([5, 6]))
    inner_files = files_under(Path(inner.location))
    outer.remove_orphan_files(older_than_ms=int(time.time() * 1000) + HOUR_MS)
    cat.purge_table("db.outer")
    assert files_under(Path(inner.location)) == inner_files
    assert inner.scan().to_arrow().column("id").to_pylist() == [5, 6]


# ---------------------------------------------------------------- files brought in


def test_files_of_another_table_or_the_catalog_cannot_be_brought_in(cat, site):
    victim = cat.create_table("db.victim", SCHEMA)
    victim.append(rows([1, 2]))
    victim_file = victim.inspect.files().column("file_path").to_pylist()[0]
    thief = cat.create_table("db.thief", SCHEMA)
    position = head(cat)
    with pytest.raises(ValidationError, match="belongs to db.victim"):
        thief.append_files([victim_file])
    data_file = next(e.file for e in cat.store.live_entries(victim.state, victim.current_snapshot().snapshot_id))
    with pytest.raises(ValidationError, match="belongs to db.victim"):
        thief.append_data_files([data_file])
    with pytest.raises(ValidationError, match="belongs to db.victim"):
        thief.row_delta().add_data_files([data_file]).commit()
    assert head(cat) == position
    thief.expire_snapshots(older_than_ms=int(time.time() * 1000) + HOUR_MS)
    assert victim.scan().to_arrow().num_rows == 2


def test_the_original_metadata_of_a_table_registered_in_place_cannot_be_brought_in(cat, site, tmp_path):
    """The files a registered table's metadata folder held are the original writer's, although under its location:
    named as data files (whose metadata is taken on trust), purge and expiry would delete them."""
    import attrs

    source = Catalog.open(tmp_path / "source")
    source.create_namespace("db")
    original = source.create_table("db.o", SCHEMA, location=str(site / "lake" / "o"))
    original.append(rows([1]))
    source.close()
    metadata = site / "lake" / "o" / "metadata"
    originals = {p: p.read_bytes() for p in metadata.iterdir() if p.name != "version-hint.text"}
    t = cat.register_table("db.t", str(site / "lake" / "o"))
    data_file = next(e.file for e in cat.store.live_entries(t.state, t.current_snapshot().snapshot_id))
    position = head(cat)
    for path in originals:
        fake = attrs.evolve(data_file, file_path=str(path), file_size_in_bytes=path.stat().st_size)
        with pytest.raises(ValidationError, match="belongs to the writer of db.t before its registration"):
            t.append_data_files([fake])
        with pytest.raises(ValidationError, match="belongs to the writer of db.t before its registration"):
            t.row_delta().add_data_files([fake]).commit()
    assert head(cat) == position
    cat.purge_table("db.t")
    assert {p: p.read_bytes() for p in metadata.iterdir() if p in originals} == originals


def test_expire_never_deletes_files_appended_in_place(cat, site):
    table = cat.create_table("db.t", SCHEMA)
    external = site / "source.parquet"
    pq.write_table(rows([1]), external)
    table.append_files([str(external)])
    table.delete("id = 1")  # the external file leaves the table
    table.append(rows([2]))
    result = table.expire_snapshots(older_than_ms=int(time.time() * 1000) + HOUR_MS, retain_last=1)
    assert result.expired_snapshot_ids
    assert external.exists() and str(external) not in result.deleted_data_files


def test_expire_with_delete_external_files_deletes_them(cat, site):
    table = cat.create_table("db.t", SCHEMA)
    external = site / "source.parquet"
    pq.write_table(rows([1]), external)
    table.append_files([str(external)])
    table.delete("id = 1")
    table.append(rows([2]))
    result = table.expire_snapshots(older_than_ms=int(time.time() * 1000) + HOUR_MS, retain_last=1,
                                    delete_external_files=True)
    assert str(external) in result.deleted_data_files and not external.exists()


# ---------------------------------------------------------------- CLI


@pytest.mark.parametrize("args", [
    ["create-namespace", ".."],
    ["create-table", "db.a/b", "--schema", '{"type": "struct", "schema-id": 0, "fields": []}'],
    ["create-table", "db.t", "--location", "{wh}", "--schema", '{"type": "struct", "schema-id": 0, "fields": []}'],
    ["create-table", "db.t", "--location", "{site}/full",
     "--schema", '{"type": "struct", "schema-id": 0, "fields": []}'],
])
def test_cli_refuses_names_and_locations_in_one_line(cat, site, capsys, args):
    before = files_under(site)
    args = [a.replace("{wh}", str(site / "wh")).replace("{site}", str(site)) for a in args]
    code = cli(["--warehouse", str(site / "wh"), *args])
    out, err = capsys.readouterr()
    assert code == 1
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert files_under(site) == before


def test_relative_folders_typed_by_a_user_are_taken_from_the_working_folder(cat, site, monkeypatch):
    """The catalog refuses relative locations; the CLI's ``--location`` and a rebuild's target resolve one from
    where the command runs, as a user typing a folder means it."""
    (site / "work").mkdir()
    monkeypatch.chdir(site / "work")
    code = cli(["--warehouse", str(site / "wh"), "create-table", "db.rel", "--location", "tables/rel",
                "--schema", '{"type": "struct", "schema-id": 0, "fields": [{"id": 1, "name": "id", "type": "long", '
                            '"required": false}]}'])
    assert code == 0
    assert cat.load_table("db.rel").location == str(site / "work" / "tables" / "rel")
    t = cat.create_table("db.t", SCHEMA)
    t.append(rows([1]))
    written = t.rebuild("copy")
    assert written and all(os.path.abspath(p).startswith(str(site / "work" / "copy") + "/") for p in written)
    assert all(os.path.isfile(site / "work" / p) for p in written)
    assert len(t.rebuild("./copy")) == len(written)  # the same files again: nothing rewritten


def test_errors_are_icelog_errors(cat):
    with pytest.raises(IcelogError):
        cat.create_table(("db", "x\x00"), SCHEMA)


def test_cli_purge_and_expire_leave_external_files_unless_asked(cat, site, capsys):
    table = cat.create_table("db.t", SCHEMA)
    external = site / "in-place.parquet"
    pq.write_table(rows([1]), external)
    table.append_files([str(external)])
    table.append(rows([2]))
    (Path(table.location) / "stray.txt").write_text("not the table's")
    wh = str(site / "wh")
    assert cli(["--warehouse", wh, "drop-table", "db.t", "--purge"]) == 0
    assert "deleted" in capsys.readouterr().out
    assert external.exists() and (Path(table.location) / "stray.txt").exists()
    again = cat.create_table("db.u", SCHEMA)
    again.append_files([str(external)])
    # asking to delete external files without a purge is refused: nothing is dropped, nothing deleted
    assert cli(["--warehouse", wh, "drop-table", "db.u", "--delete-external-files"]) != 0
    assert "only with --purge" in capsys.readouterr().err
    with pytest.raises(ValidationError, match="only along with a purge"):
        cat.drop_table("db.u", delete_external_files=True)
    assert external.exists() and cat.load_table("db.u").scan().count() == 1
    assert cli(["--warehouse", wh, "drop-table", "db.u", "--purge", "--delete-external-files"]) == 0
    assert not external.exists()
    assert (site / "sentinel.txt").exists() and (site / "full" / "mine.txt").exists()


def test_a_staged_job_folder_must_be_under_the_data_folder(tmp_path) -> None:
    """A job folder staged for a distributed write is later listed and its files deleted as orphans: one that
    climbs out of the table's data folder (``..``) or lies elsewhere is refused and nothing is recorded."""
    import pyarrow as pa
    import pytest

    from engine import Catalog
    from engine.errors import ValidationError

    with Catalog.open(tmp_path / "wh") as cat:
        cat.create_namespace("db")
        t = cat.create_table("db.t", schema=pa.schema([("id", pa.int64())]))
        data = f"{t.state.location}/data"
        for folder in (f"{data}/../../other", f"{data}/job/../../../x", str(tmp_path / "elsewhere"),
                       f"s3://bucket{data}/job"):
            with pytest.raises(ValidationError, match="Cannot stage folder"):
                t.stage_folder(folder)
        assert cat.log.staged_files(t.uuid) == []
        t.stage_folder(f"{data}/spark-job")
        assert [p for p, _ in cat.log.staged_files(t.uuid)] == [f"{data}/spark-job/"]
