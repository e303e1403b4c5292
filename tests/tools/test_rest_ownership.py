"""The REST server keeps every table inside what it owns: hostile names, locations and borrowed files are refused
with 4xx and commit nothing (issue 9, points 1 to 3).

Layer: tests. A real server on 127.0.0.1, raw HTTP requests and PyIceberg's RestCatalog; a sentinel tree around
the warehouse proves no file outside it is created or deleted.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import requests
from pyiceberg.catalog.rest import RestCatalog
from pyiceberg.exceptions import BadRequestError

from engine import Catalog
from tools.rest_server import running_server

TOKEN = "owner-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
SCHEMA_JSON = {"type": "struct", "schema-id": 0,
               "fields": [{"id": 1, "name": "id", "type": "long", "required": False}]}


def files_under(root: Path) -> dict[str, bytes]:
    out = {}
    for folder, _, names in os.walk(root):
        for name in names:
            if "catalog.db" not in name:
                path = os.path.join(folder, name)
                with open(path, "rb") as f:
                    out[path] = f.read()
    return out


def head(warehouse: Path) -> int:
    with Catalog.open(warehouse) as cat:
        return max((e.position for e in cat.log(since=0)), default=0)


@pytest.fixture
def site(tmp_path: Path) -> Path:
    (tmp_path / "sentinel.txt").write_text("outside")
    (tmp_path / "wh").mkdir()
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "mine.txt").write_text("a user's folder")
    with Catalog.open(tmp_path / "wh") as cat:
        cat.create_namespace("db")
        victim = cat.create_table("db.victim", pa.schema([("id", pa.int64())]))
        victim.append(pa.table({"id": pa.array([1, 2, 3], pa.int64())}))
    return tmp_path


@pytest.fixture
def server(site: Path) -> Iterator[str]:
    with running_server(site / "wh", TOKEN) as running:
        yield running.uri


def test_hostile_names_are_refused_with_400(server, site):
    before, position = files_under(site), head(site / "wh")
    for namespace in ([".."], ["db", "../x"], ["a\x00b"], ["x" * 300]):
        r = requests.post(f"{server}/v1/namespaces", json={"namespace": namespace}, headers=AUTH)
        assert r.status_code == 400, (namespace, r.text)
    for name in ("..", "../../escape2", "a/b", "nul\x00", "x" * 1000):
        r = requests.post(f"{server}/v1/namespaces/db/tables", json={"name": name, "schema": SCHEMA_JSON},
                          headers=AUTH)
        assert r.status_code == 400, (name, r.text)
        assert r.json()["error"]["type"] == "BadRequestException"
    r = requests.post(f"{server}/v1/namespaces/{quote('..', safe='')}/tables",
                      json={"name": "t", "schema": SCHEMA_JSON}, headers=AUTH)
    assert 400 <= r.status_code < 500
    assert head(site / "wh") == position
    assert files_under(site) == before


def test_purging_a_dot_dot_table_deletes_nothing(server, site):
    before = files_under(site)
    for path in ("%2E%2E", "..", "%2E"):
        r = requests.delete(f"{server}/v1/namespaces/db/tables/{path}?purgeRequested=true", headers=AUTH)
        assert 400 <= r.status_code < 500, (path, r.status_code)
    r = requests.delete(f"{server}/v1/namespaces/%2E%2E/tables/wh?purgeRequested=true", headers=AUTH)
    assert 400 <= r.status_code < 500
    assert files_under(site) == before
    assert (site / "wh" / "catalog.db").exists()


def test_locations_onto_the_warehouse_another_table_or_a_full_folder_are_refused(server, site):
    with Catalog.open(site / "wh") as cat:
        victim_location = cat.load_table("db.victim").location
    before, position = files_under(site), head(site / "wh")
    for location in (str(site / "wh"), str(site), victim_location, victim_location + "/data/x",
                     str(site / "full"), str(site / "wh" / "catalog.db")):
        for stage in (False, True):
            r = requests.post(f"{server}/v1/namespaces/db/tables",
                              json={"name": "t", "schema": SCHEMA_JSON, "location": location, "stage-create": stage},
                              headers=AUTH)
            assert r.status_code == 400, (location, r.text)
    assert head(site / "wh") == position
    assert files_under(site) == before


def test_a_commit_naming_another_tables_manifest_list_is_refused(server, site):
    with Catalog.open(site / "wh") as cat:
        victim = cat.load_table("db.victim")
        snap = victim.current_snapshot()
        victim_list = victim.inspect.snapshots().column("manifest_list").to_pylist()[-1]
        cat.create_table("db.thief", pa.schema([("id", pa.int64())]))
    position = head(site / "wh")
    body = {"requirements": [], "updates": [
        {"action": "add-snapshot", "snapshot": {
            "snapshot-id": 4242, "sequence-number": 1, "timestamp-ms": int(time.time() * 1000),
            "manifest-list": victim_list, "summary": {"operation": "append"}, "schema-id": 0}},
        {"action": "set-snapshot-ref", "ref-name": "main", "type": "branch", "snapshot-id": 4242}]}
    r = requests.post(f"{server}/v1/namespaces/db/tables/thief", json=body, headers=AUTH)
    assert r.status_code == 400, r.text
    assert "belongs to db.victim" in r.json()["error"]["message"]
    assert head(site / "wh") == position
    with Catalog.open(site / "wh") as cat:
        thief = cat.load_table("db.thief")
        assert thief.current_snapshot() is None
        thief.expire_snapshots(older_than_ms=int(time.time() * 1000) + 3_600_000)
        victim = cat.load_table("db.victim")
        assert victim.current_snapshot().snapshot_id == snap.snapshot_id
        assert sorted(victim.scan().to_arrow().column("id").to_pylist()) == [1, 2, 3]
        assert cat.verify("db.victim") == []


def test_a_client_adding_another_tables_data_file_is_refused(server, site):
    with Catalog.open(site / "wh") as cat:
        victim_file = cat.load_table("db.victim").inspect.files().column("file_path").to_pylist()[0]
    client = RestCatalog("icelog", uri=server, token=TOKEN)
    thief = client.create_table("db.thief2", schema=pq.read_schema(victim_file))
    position = head(site / "wh")
    with pytest.raises(BadRequestError, match="belongs to db.victim"):
        thief.add_files([victim_file])
    assert head(site / "wh") == position
    outside = site / "outside.parquet"
    pq.write_table(pa.table({"id": pa.array([9], pa.int64())}), outside)
    with pytest.raises(BadRequestError, match="not under the table location"):
        thief.add_files([str(outside)])
    assert head(site / "wh") == position
    with Catalog.open(site / "wh") as cat:
        assert sorted(cat.load_table("db.victim").scan().to_arrow().column("id").to_pylist()) == [1, 2, 3]


def test_a_staged_create_makes_folders_only_where_the_table_may_live(site: Path) -> None:
    """A staged create (DuckDB's and Spark's CTAS) makes the table's folder before its commit: only at a location
    the table may own; a hostile location is refused with 4xx and nothing is made or committed."""
    before = files_under(site)
    position = head(site / "wh")
    folders = {p for p, _, _ in os.walk(site)}
    with running_server(site / "wh", token=TOKEN) as server:
        url = f"{server.uri}/v1/namespaces/db/tables"
        for location in (str(site / "wh"), str(site / "wh" / "db" / "victim"),
                         str(site / "wh" / "db" / "victim" / "inside"), str(site / "full"),
                         str(site / "wh" / "db" / "victim" / ".." / "victim"),
                         str(site / "wh" / "x" / ".." / ".." / "elsewhere")):  # dotted spellings are refused
            answer = requests.post(url, json={"name": "staged", "schema": SCHEMA_JSON, "stage-create": True,
                                              "location": location}, headers=AUTH, timeout=30)
            assert 400 <= answer.status_code < 500, (location, answer.text)
        assert {p for p, _, _ in os.walk(site)} == folders  # no folder made for a refused location
        # an allowed location outside the warehouse: the staged table owns nothing yet, so nothing is made there
        outside = str(site / "elsewhere")
        answer = requests.post(url, json={"name": "outside", "schema": SCHEMA_JSON, "stage-create": True,
                                          "location": outside}, headers=AUTH, timeout=30)
        assert answer.status_code == 200, answer.text
        assert not (site / "elsewhere").exists() and {p for p, _, _ in os.walk(site)} == folders
        answer = requests.post(url, json={"name": "staged", "schema": SCHEMA_JSON, "stage-create": True},
                               headers=AUTH, timeout=30)
        assert answer.status_code == 200, answer.text
        made = Path(answer.json()["metadata"]["location"])
    assert made.is_relative_to(site / "wh") and (made / "metadata").is_dir()
    assert not any((made / "metadata").iterdir())  # empty folders, no file
    assert files_under(site) == before and head(site / "wh") == position  # nothing written, nothing committed


def test_a_refused_commit_never_stages_another_tables_files(site: Path) -> None:
    """A commit refused while its files are read stages them as the table's orphans only when the table owns
    them: a manifest list named in another table's folder is neither staged nor ever deleted."""
    with Catalog.open(site / "wh") as cat:
        cat.create_table("db.thief", pa.schema([("id", pa.int64())]))
        victim_location = Path(cat.load_table("db.victim").state.location)
    borrowed = next((victim_location / "metadata").glob("snap-*.avro"))
    keep = borrowed.read_bytes()
    body = {"requirements": [], "updates": [{"action": "add-snapshot", "snapshot": {
        "snapshot-id": 77, "timestamp-ms": 1_700_000_000_000, "manifest-list": str(borrowed),
        "summary": {"operation": "append"}, "schema-id": 0}}]}
    with running_server(site / "wh", token=TOKEN) as server:
        answer = requests.post(f"{server.uri}/v1/namespaces/db/tables/thief", json=body, headers=AUTH, timeout=30)
    assert 400 <= answer.status_code < 500, answer.text
    with Catalog.open(site / "wh") as cat:
        thief = cat.load_table("db.thief")
        assert cat.log.staged_files(thief.uuid) == []
        assert thief.remove_orphan_files(older_than_ms=2**62) == []
        assert cat.verify("db.victim") == []
    assert borrowed.read_bytes() == keep


def _v3_client_commit(table_location: Path, state, parent_manifests, vector_path: str, referenced: str) -> dict:
    """A REST commit as a v3 client writes it: a manifest holding one deletion vector at ``vector_path`` (for
    ``referenced``), and a manifest list with the parent's manifests and that one, both in the table's folder."""
    import json as json_mod

    from engine.model.data_file import DataFile, DataFileContent, EntryStatus, ManifestContent, ManifestEntry
    from projections.manifests import render_manifest, render_manifest_list

    vector = DataFile(file_path=vector_path, file_format="PUFFIN", content=DataFileContent.POSITION_DELETES,
                      record_count=1, file_size_in_bytes=60, referenced_data_file=referenced, content_offset=4,
                      content_size_in_bytes=30)
    manifest = table_location / "metadata" / "client-m0.avro"
    data = render_manifest([ManifestEntry(status=EntryStatus.ADDED, snapshot_id=None, data_sequence_number=None,
                                          file_sequence_number=None, data_file=vector)],
                           format_version=3, content=ManifestContent.DELETES,
                           schema_json=json_mod.dumps(state.schema.to_json()), schema_id=state.schema.schema_id,
                           spec_id=0, spec_fields_json="[]", partition_fields=[], sync_marker=b"0" * 16)
    manifest.write_bytes(data)
    from engine.model.data_file import ManifestFile

    record = ManifestFile(manifest_path=str(manifest), manifest_length=len(data), partition_spec_id=0,
                          content=ManifestContent.DELETES, sequence_number=state.last_sequence_number + 1,
                          min_sequence_number=state.last_sequence_number + 1, added_snapshot_id=9090,
                          added_files_count=1, existing_files_count=0, deleted_files_count=0, added_rows_count=1,
                          existing_rows_count=0, deleted_rows_count=0)
    listing = table_location / "metadata" / "snap-9090-client.avro"
    listing.write_bytes(render_manifest_list(list(parent_manifests) + [record], format_version=3, snapshot_id=9090,
                                             parent_snapshot_id=state.current_snapshot.snapshot_id,
                                             sequence_number=state.last_sequence_number + 1, sync_marker=b"1" * 16,
                                             first_row_id=state.next_row_id))
    return {"requirements": [], "updates": [
        {"action": "add-snapshot", "snapshot": {
            "snapshot-id": 9090, "parent-snapshot-id": state.current_snapshot.snapshot_id,
            "sequence-number": state.last_sequence_number + 1, "timestamp-ms": int(time.time() * 1000),
            "manifest-list": str(listing), "summary": {"operation": "delete"}, "schema-id": 0,
            "first-row-id": state.next_row_id, "added-rows": 0}},
        {"action": "set-snapshot-ref", "ref-name": "main", "type": "branch", "snapshot-id": 9090}]}


def test_a_v3_client_vector_outside_the_table_or_on_the_catalog_is_refused(site: Path) -> None:
    """A deletion vector a REST client adds is a file the table takes as its own: a Puffin path outside the table,
    in another table, or the catalog's database is refused with 4xx, nothing is committed and nothing is read."""
    from projections.manifest_reader import read_manifest_list

    with Catalog.open(site / "wh") as cat:
        t = cat.create_table("db.v3", pa.schema([("id", pa.int64())]), format_version=3,
                             properties={"write.delete.mode": "merge-on-read"})
        t.append(pa.table({"id": pa.array([1, 2], pa.int64())}))
        state = t.state
        location = Path(state.location)
        listed = next(location.glob("metadata/snap-*.avro"))
        parent = read_manifest_list(listed.read_bytes(), str(listed))
        data_file = next(e.file for e in t.catalog.store.live_entries(state, state.current_snapshot.snapshot_id))
        victim_data = next((site / "wh" / "db" / "victim" / "data").rglob("*.parquet"))
    outside = site / "outside.puffin"
    outside.write_bytes(b"PFA1" + b"\0" * 56)
    before = files_under(site)
    catalog_db = site / "wh" / "catalog.db"
    db_bytes = catalog_db.read_bytes()
    with running_server(site / "wh", token=TOKEN) as server:
        url = f"{server.uri}/v1/namespaces/db/tables/v3"
        for hostile in (str(outside), str(victim_data), str(catalog_db)):
            position = head(site / "wh")
            body = _v3_client_commit(location, state, parent, hostile, data_file.file_path)
            answer = requests.post(url, json=body, headers=AUTH, timeout=30)
            assert 400 <= answer.status_code < 500, (hostile, answer.text)
            assert "belongs to" in answer.text or "not under the table location" in answer.text, answer.text
            assert head(site / "wh") == position
    assert outside.read_bytes() == b"PFA1" + b"\0" * 56
    with Catalog.open(site / "wh") as cat:
        t = cat.load_table("db.v3")
        assert t.current_snapshot().snapshot_id == state.current_snapshot.snapshot_id
        assert sorted(t.scan().to_arrow().column("id").to_pylist()) == [1, 2]
    after = files_under(site)
    assert {p: b for p, b in after.items() if "client" not in p} == {
        p: b for p, b in before.items() if "client" not in p}
    assert catalog_db.exists() and len(db_bytes) > 0


def test_icelog_deletion_vectors_in_hostile_partitions(site: Path) -> None:
    """Deletion vectors icelog writes land in the table's data folder, under partition folders that escape hostile
    values (rows are left in each file, so vectors, not file removals, are written); nothing outside the table is
    created or changed."""
    before = files_under(site)
    with Catalog.open(site / "wh") as cat:
        t = cat.create_table("db.q3", pa.schema([("id", pa.int64()), ("cat", pa.string())]), format_version=3,
                             partition_by=["cat"], properties={"write.delete.mode": "merge-on-read"})
        hostile = ["../../../escape", "/etc/passwd", "..", "a/../../b"]
        t.append(pa.table({"id": pa.array(range(8), pa.int64()), "cat": hostile * 2}))
        t.delete("id < 4")
        vectors = [e.file for e in t.catalog.store.live_entries(t.state, t.current_snapshot().snapshot_id)
                   if e.file.is_deletion_vector]
        location = Path(t.state.location)
        assert sorted(t.scan().to_arrow().column("id").to_pylist()) == [4, 5, 6, 7]
    assert len(vectors) == 4
    assert all(Path(v.file_path.removeprefix("file://")).resolve().is_relative_to(location / "data")
               for v in vectors)
    new = set(files_under(site)) - set(before)
    assert all(Path(p).resolve().is_relative_to(location) for p in new)
    assert {p: b for p, b in files_under(site).items() if p in before} == before


def test_a_refused_v3_upgrade_commit_lands_nothing_and_writes_no_file(server, site):
    """An upgrade to v3 labels existing rows in new snapshots; when a later update of the same REST commit is
    refused (a default value of the wrong type), none of them lands and no file appears anywhere."""
    before_files = files_under(site)
    position = head(site / "wh")
    schema = {"type": "struct", "schema-id": 1, "fields": [
        {"id": 1, "name": "id", "type": "long", "required": False},
        {"id": 2, "name": "score", "type": "int", "required": False, "initial-default": "five"}]}
    body = {"requirements": [], "updates": [
        {"action": "upgrade-format-version", "format-version": 3},
        {"action": "add-schema", "schema": schema, "last-column-id": 2},
        {"action": "set-current-schema", "schema-id": -1}]}
    r = requests.post(f"{server}/v1/namespaces/db/tables/victim", json=body, headers=AUTH)
    assert r.status_code == 400, r.text
    assert "initial-default 'five' of column 'score'" in r.json()["error"]["message"]
    assert head(site / "wh") == position
    assert files_under(site) == before_files
    with Catalog.open(site / "wh") as cat:
        victim = cat.load_table("db.victim")
        assert victim.state.format_version == 2 and len(victim.snapshots()) == 1
        assert cat.verify("db.victim") == []


def test_a_client_list_carrying_its_parents_manifests_and_another_tables_is_refused(server, site):
    """The server skips the ownership check only for the manifests the parent's published list holds (the table's
    already): another table's manifest listed beside them is refused, nothing is committed and nothing is read."""
    from projections.manifest_reader import read_manifest_list
    from projections.manifests import render_manifest_list

    with Catalog.open(site / "wh") as cat:
        victim_list = Path(cat.load_table("db.victim").inspect.snapshots().column("manifest_list").to_pylist()[-1])
        [victim_manifest] = read_manifest_list(victim_list.read_bytes(), str(victim_list))
        thief = cat.create_table("db.thief3", pa.schema([("id", pa.int64())]))
        thief.append(pa.table({"id": pa.array([7], pa.int64())}))
        state = thief.state
        location = Path(state.location)
    parent_list = next(location.glob("metadata/snap-*.avro"))
    parent = read_manifest_list(parent_list.read_bytes(), str(parent_list))
    listing = location / "metadata" / "snap-5151-client.avro"
    listing.write_bytes(render_manifest_list(list(parent) + [victim_manifest], format_version=2,
                                             snapshot_id=5151,
                                             parent_snapshot_id=state.current_snapshot.snapshot_id,
                                             sequence_number=state.last_sequence_number + 1, sync_marker=b"2" * 16))
    position = head(site / "wh")
    before = files_under(site)
    body = {"requirements": [], "updates": [
        {"action": "add-snapshot", "snapshot": {
            "snapshot-id": 5151, "parent-snapshot-id": state.current_snapshot.snapshot_id,
            "sequence-number": state.last_sequence_number + 1, "timestamp-ms": int(time.time() * 1000),
            "manifest-list": str(listing), "summary": {"operation": "append"}, "schema-id": 0}},
        {"action": "set-snapshot-ref", "ref-name": "main", "type": "branch", "snapshot-id": 5151}]}
    r = requests.post(f"{server}/v1/namespaces/db/tables/thief3", json=body, headers=AUTH)
    assert r.status_code == 400, r.text
    message = r.json()["error"]["message"]
    assert "belongs to db.victim" in message and victim_manifest.manifest_path in message  # refused as a manifest
    assert head(site / "wh") == position
    assert files_under(site) == before
    with Catalog.open(site / "wh") as cat:
        assert cat.load_table("db.thief3").current_snapshot().snapshot_id == state.current_snapshot.snapshot_id
        assert sorted(cat.load_table("db.victim").scan().to_arrow().column("id").to_pylist()) == [1, 2, 3]
        assert cat.verify("db.victim") == []


def test_a_commit_refused_for_a_manifest_list_outside_the_table_never_opens_it(site: Path, monkeypatch) -> None:
    """The refused commit's files are staged as the table's orphans only as far as the table owns them: a manifest
    list outside it (a user's file, a pipe that would block the request, a device that never ends) is not read."""
    import storage.files as files

    opened: list[str] = []
    read_bytes = files.FileIO.read_bytes

    def recording(self, location):
        opened.append(str(location))
        return read_bytes(self, location)

    monkeypatch.setattr(files.FileIO, "read_bytes", recording)
    outside = site / "full" / "mine.txt"
    body = {"requirements": [], "updates": [
        {"action": "add-snapshot", "snapshot": {"snapshot-id": 4242, "timestamp-ms": int(time.time() * 1000),
                                                "manifest-list": str(outside), "summary": {"operation": "append"}}},
        {"action": "set-snapshot-ref", "ref-name": "main", "type": "branch", "snapshot-id": 4242}]}
    before = head(site / "wh")
    with running_server(site / "wh", TOKEN) as server:
        answer = requests.post(f"{server.uri}/v1/namespaces/db/tables/victim", json=body, headers=AUTH, timeout=30)
    assert answer.status_code == 400 and "mine.txt" in answer.json()["error"]["message"], answer.text
    assert not [p for p in opened if p.endswith("mine.txt")]
    assert head(site / "wh") == before
    assert (site / "full" / "mine.txt").read_text() == "a user's folder"


def test_locations_spelled_to_land_elsewhere_are_refused(server, site):
    """A location is judged where icelog writes it: ``<symlink>/../x`` (checked through the symlink, written at
    ``x``: inside another table), a relative path (each process would find it under its own working folder), an
    empty ``set-location`` in a create by commit (it was taken for none, and the table then lived at ``""``: its
    metadata went to ``/metadata`` and its orphan removal ran in the server's working folder), and a folder inside
    a catalog file's name (a ``catalog.db-journal`` folder left every later open of the catalog failing)."""
    with Catalog.open(site / "wh") as cat:
        victim_location = cat.load_table("db.victim").location
    (site / "link").symlink_to(site / "full")
    before, position = files_under(site), head(site / "wh")
    spelled = [f"{site}/link/..{victim_location[len(str(site)):]}/sub", f"{site}/link/../wh", "relative/t",
               "file:relative/t", str(site / "wh" / "catalog.db-journal" / "t"),
               str(site / "wh" / "catalog.db-wal" / "t"), f"{site}/./full2"]
    for location in spelled:
        r = requests.post(f"{server}/v1/namespaces/db/tables",
                          json={"name": "t", "schema": SCHEMA_JSON, "location": location, "stage-create": True},
                          headers=AUTH)
        assert r.status_code == 400, (location, r.text)
    for location in ["", "/", *spelled]:
        body = {"requirements": [{"type": "assert-create"}],
                "updates": [{"action": "upgrade-format-version", "format-version": 2},
                            {"action": "add-schema", "schema": SCHEMA_JSON},
                            {"action": "set-location", "location": location}]}
        r = requests.post(f"{server}/v1/namespaces/db/tables/t", json=body, headers=AUTH)
        assert r.status_code == 400, (location, r.text)
    assert head(site / "wh") == position
    assert files_under(site) == before
    assert not (site / "wh" / "catalog.db-journal").exists() and not os.path.exists("/metadata/v1.metadata.json")
    with Catalog.open(site / "wh") as cat:  # the catalog still opens
        assert [t.name for t in cat.store.catalog().tables] == ["victim"]


def test_purging_a_table_keeps_a_file_another_table_took_over_in_place(site: Path) -> None:
    """A REST client stages a create at an empty folder; meanwhile table a takes a file in that folder over in
    place; the client's create commit then names the file as its own. Purging the client's table leaves the file:
    table a's log references it too."""
    ext = site / "ext"
    ext.mkdir()
    schema = pa.schema([pa.field("id", pa.int64(), nullable=True)])
    with running_server(site / "wh", TOKEN) as running:
        client = RestCatalog("icelog", uri=running.uri, token=TOKEN)
        txn = client.create_table_transaction("db.c", schema, location=str(ext))
        pq.write_table(pa.table({"id": pa.array([1, 2, 3], pa.int64())}, schema=schema), ext / "f.parquet")
        with Catalog.open(site / "wh") as cat:
            cat.create_table("db.a", schema).append_files([str(ext / "f.parquet")])
        txn.add_files([str(ext / "f.parquet")])
        txn.commit_transaction()
        client.purge_table("db.c")
    assert (ext / "f.parquet").exists()
    with Catalog.open(site / "wh") as cat:
        assert cat.load_table("db.a").scan().to_arrow().column("id").to_pylist() == [1, 2, 3]
