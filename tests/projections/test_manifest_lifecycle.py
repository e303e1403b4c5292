"""The manifest entry lifecycle of the consistency-model write-up's five-snapshot example, file by file.

Snapshot 1 adds data-1 and data-2; 2 deletes data-1; 3 adds data-3; 4 deletes data-2; 5 adds data-4.
"""

from __future__ import annotations

import json

import pyarrow as pa
import pytest

from engine import Catalog
from engine.model.data_file import EntryStatus
from projections.manifest_reader import read_manifest, read_manifest_list


def manifest_list(meta_path: str, snapshot_id: int) -> list:
    meta = json.load(open(meta_path))
    snap = next(s for s in meta["snapshots"] if s["snapshot-id"] == snapshot_id)
    return read_manifest_list(open(snap["manifest-list"], "rb").read(), snap["manifest-list"])


def entries(m) -> list[tuple[str, EntryStatus, int | None]]:
    _, es = read_manifest(open(m.manifest_path, "rb").read(), m.manifest_path)
    return [(e.data_file.file_path.rsplit("/", 1)[-1].split("-")[0], e.status, e.snapshot_id) for e in es]


@pytest.fixture
def table(tmp_path):
    cat = Catalog.open(tmp_path / "wh")
    cat.create_namespace("db")
    # fast append, so the example's manifests are not merged
    t = cat.create_table("db.t", schema=pa.schema([("name", pa.string())]),
                         properties={"commit.manifest-merge.enabled": "false"})
    yield t
    cat.close()


def write(table, names: list[str]) -> list[str]:
    """One Parquet file per name, named after it, registered in one append."""
    import pyarrow.parquet as pq

    folder = f"{table.location}/data"
    import os
    os.makedirs(folder, exist_ok=True)
    paths = []
    for n in names:
        p = f"{folder}/{n}-file.parquet"
        pq.write_table(pa.table({"name": [n]}), p)
        paths.append(p)
    return paths


def test_five_snapshot_manifest_lifecycle(table):
    d1, d2 = write(table, ["data1", "data2"])
    s1 = table.append_files([d1, d2]).snapshot_id
    s2 = table.delete_files([d1]).snapshot_id
    [d3] = write(table, ["data3"])
    s3 = table.append_files([d3]).snapshot_id
    s4 = table.delete_files([d2]).snapshot_id
    [d4] = write(table, ["data4"])
    s5 = table.append_files([d4]).snapshot_id
    meta = table.metadata_location

    # 1: manifest-1 holds data-1 and data-2 as ADDED
    [m1] = manifest_list(meta, s1)
    assert entries(m1) == [("data1", EntryStatus.ADDED, None), ("data2", EntryStatus.ADDED, None)]
    assert (m1.added_snapshot_id, m1.added_files_count) == (s1, 2)

    # 2: manifest-1 rewritten as manifest-2: data-1 DELETED, data-2 EXISTING, added in snapshot 2
    [m2] = manifest_list(meta, s2)
    assert m2.manifest_path != m1.manifest_path and m2.added_snapshot_id == s2
    assert entries(m2) == [("data1", EntryStatus.DELETED, s2), ("data2", EntryStatus.EXISTING, s1)]
    assert (m2.added_files_count, m2.existing_files_count, m2.deleted_files_count) == (0, 1, 1)

    # 3: manifest-3 adds data-3; manifest-2 is reused unchanged
    m3, m2_again = manifest_list(meta, s3)
    assert entries(m3) == [("data3", EntryStatus.ADDED, None)]
    assert m2_again == m2

    # 4: manifest-2 rewritten as manifest-4: data-2 DELETED, data-1 gone; manifest-3 untouched
    m3_again, m4 = manifest_list(meta, s4)
    assert m3_again == m3
    assert entries(m4) == [("data2", EntryStatus.DELETED, s4)]
    assert (m4.added_snapshot_id, m4.existing_files_count, m4.deleted_files_count) == (s4, 0, 1)

    # 5: manifest-5 adds data-4; manifest-4 (only a DELETED entry) leaves the list
    m5, m3_last = manifest_list(meta, s5)
    assert entries(m5) == [("data4", EntryStatus.ADDED, None)]
    assert m3_last == m3
    assert m4.manifest_path not in {m.manifest_path for m in manifest_list(meta, s5)}

    # the summaries say the same, and the table reads data-3 and data-4
    snaps = {s.snapshot_id: s for s in table.snapshots()}
    assert snaps[s2].operation == "delete" and snaps[s2].summary_value("deleted-data-files") == "1"
    assert snaps[s4].summary_value("total-data-files") == "1"
    assert snaps[s5].summary_value("total-records") == "2"
    assert sorted(table.scan().to_arrow().column("name").to_pylist()) == ["data3", "data4"]
    assert sorted(table.scan(snapshot_id=s1).to_arrow().column("name").to_pylist()) == ["data1", "data2"]
    assert table.catalog.verify("db.t") == []


def test_deleting_a_file_not_in_the_table_commits_nothing(table):
    [d1] = write(table, ["data1"])
    before = table.catalog.log.head(table.uuid)
    from engine.errors import ValidationError
    with pytest.raises(ValidationError, match="data1-file.parquet"):
        table.delete_files([d1])
    assert table.catalog.log.head(table.uuid) == before
