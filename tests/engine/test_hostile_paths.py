"""Property-style: hostile identifiers and locations, thrown at the catalog in random sequences, never create or
delete a file outside the folders the catalog's tables own (issue 9, the sentinel-tree test).

Layer: tests. A seeded generator builds names and locations from fragments that have broken catalogs before
(dot segments, separators, control characters, absolute paths, over-long names, other tables' folders, the
warehouse, the catalog's database, symlinks, full folders). After every step, every file outside the warehouse is
as it was, and every file inside it is the catalog's database or under the location of a table the log knows.
At the end every table is written to, expired, cleaned of orphans and purged: the sentinels still stand.
"""

from __future__ import annotations

import os
import random
import time
from pathlib import Path

import pyarrow as pa
import pytest

from engine import Catalog
from engine.errors import IcelogError

SCHEMA = pa.schema([("id", pa.int64())])
FRAGMENTS = ["..", ".", "/", "\\", "\x00", "\x1f", "\n", "a", "db", "t", "catalog.db", "%2E%2E", "é", "~", "$HOME",
             " ", "-", "x" * 120, "wh", "*"]
STEPS = 200


def snapshot(root: Path) -> dict[str, bytes]:
    out = {}
    for folder, dirs, names in os.walk(root):
        for name in names:
            path = os.path.join(folder, name)
            if os.path.islink(path):
                out[path] = b"<link>"
                continue
            with open(path, "rb") as f:
                out[path] = f.read()
    return out


def random_part(rng: random.Random) -> str:
    if rng.random() < 0.4:  # a plain name now and then, so tables get made, nested and renamed
        return rng.choice(["a", "t", "db", "events"]) + str(rng.randint(0, 3))
    return "".join(rng.choice(FRAGMENTS) for _ in range(rng.randint(1, 3)))


def random_identifier(rng: random.Random, namespaces: list[tuple[str, ...]]) -> tuple[str, ...]:
    if namespaces and rng.random() < 0.6:
        return rng.choice(namespaces) + (random_part(rng),)
    return tuple(random_part(rng) for _ in range(rng.randint(1, 3)))


def random_location(rng: random.Random, site: Path, tables: list[str]) -> str | None:
    choices = [None, None, str(site), str(site / "wh"), str(site / "wh" / "catalog.db"), str(site / "full"),
               str(site / "wh" / "db"), "/", str(site / "link"), f"file://{site}/wh",
               str(site / "fresh" / random_part(rng)), str(site / "wh" / ".." / "escape")]
    if tables:
        other = rng.choice(tables)
        choices += [other, other + "/data", os.path.dirname(other), other + "/../" + random_part(rng)]
    return rng.choice(choices)


def allowed(path: str, site: Path, locations: list[str]) -> bool:
    """A file the catalog may have made: its database, or one under a table's location."""
    if os.path.basename(path).startswith("catalog.db") and os.path.dirname(path) == str(site / "wh"):
        return True
    real = os.path.realpath(path)
    return any(real == loc or real.startswith(loc + "/") for loc in locations)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_hostile_names_and_locations_stay_inside_what_tables_own(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    site = tmp_path
    (site / "sentinel.txt").write_text("outside")
    (site / "full").mkdir()
    (site / "full" / "mine.txt").write_text("a user's folder")
    (site / "wh").mkdir()
    (site / "wh" / "keep.txt").write_text("the warehouse's own, no table's")
    (site / "fresh").mkdir()
    (site / "fresh" / "sentinel").write_text("beside new tables")
    os.symlink(site / "wh", site / "link")
    before = snapshot(site)
    cat = Catalog.open(site / "wh")
    cat.create_namespace("db")
    namespaces: list[tuple[str, ...]] = [("db",)]
    refused = 0
    purged = 0

    def table_locations() -> list[str]:
        return [os.path.realpath(cat.load_table(t.namespace + (t.name,)).location)
                for t in cat.store.catalog().tables]

    ever: set[str] = set()  # every location a table was created at (dropped tables keep unpurged files)

    def check() -> None:
        now = snapshot(site)
        for path, data in before.items():  # every sentinel stands, unchanged
            assert now.get(path) == data, path
        ever.update(table_locations())
        strays = [p for p in now if p not in before and not allowed(p, site, sorted(ever))]
        assert strays == []

    for step in range(STEPS):
        action = rng.choice(["namespace", "table", "table", "rename", "append", "drop"])
        try:
            if action == "namespace":
                ns = random_identifier(rng, namespaces)
                cat.create_namespace(ns)
                namespaces.append(ns)
            elif action == "table":
                identifier = random_identifier(rng, namespaces)
                cat.create_table(identifier, SCHEMA, location=random_location(rng, site, table_locations()))
            elif action == "rename" and cat.store.catalog().tables:
                entry = rng.choice(cat.store.catalog().tables)
                cat.rename_table(entry.namespace + (entry.name,), random_identifier(rng, namespaces))
            elif action == "append" and cat.store.catalog().tables:
                entry = rng.choice(cat.store.catalog().tables)
                cat.load_table(entry.namespace + (entry.name,)).append(
                    pa.table({"id": pa.array([step], pa.int64())}))
            elif action == "drop" and cat.store.catalog().tables:
                entry = rng.choice(cat.store.catalog().tables)
                purge = rng.random() < 0.7
                cat.drop_table(entry.namespace + (entry.name,), purge=purge)
                purged += purge
        except IcelogError:
            refused += 1
        check()
    assert refused > STEPS // 4  # the generator really was hostile
    assert len(ever) >= 5 and purged  # ...and still let tables be made and purged

    future = int(time.time() * 1000) + 3_600_000
    for entry in cat.store.catalog().tables:
        table = cat.load_table(entry.namespace + (entry.name,))
        table.append(pa.table({"id": pa.array([1], pa.int64())}))
        table.expire_snapshots(older_than_ms=future)
        table.remove_orphan_files(older_than_ms=future)
        check()
    for entry in cat.store.catalog().tables:
        cat.purge_table(entry.namespace + (entry.name,))
        check()
    cat.close()
    assert (site / "sentinel.txt").read_text() == "outside"
    assert (site / "wh" / "keep.txt").read_text() == "the warehouse's own, no table's"
    assert (site / "full" / "mine.txt").read_text() == "a user's folder"
    assert (site / "wh" / "catalog.db").exists()
