"""Every table of the corpus (tests/integration/corpus.py) registered in place by icelog and by PyIceberg 0.12's
``register_table``, each snapshot scanned and compared with the writer's own read of it. Prints the figures (how
many tables and snapshots each gets right) and asserts icelog gets every supported one right.

Layer: tests. Format v3 tables with deletion vectors are in the corpus and counted like the others.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from engine import Catalog
from engine.errors import IcelogError
from tests.conftest import duckdb_connect
from tests.integration.corpus import (
    CorpusTable,
    canon_rows,
    duckdb_tables,
    java_api_tables,
    pyiceberg_tables,
    respelled_copy,
    spark_tables,
    unsigned_ids,
)

def _icelog(table: CorpusTable, catalog_dir: Path) -> tuple[bool, int, str]:
    with Catalog.open(catalog_dir) as cat:
        cat.create_namespace("db")
        try:
            t = cat.register_table(f"db.{table.name}", table.metadata, relocate=table.relocate)
        except IcelogError as e:
            return False, 0, f"{type(e).__name__}: {e}"
        right = sum(canon_rows(t.scan(snapshot_id=sid).to_arrow().to_pylist()) == rows
                    for sid, rows in table.expected.items())
        problems = cat.verify(f"db.{table.name}")
        ok = right == len(table.expected) and not problems
        return ok, right, "" if ok else f"{right}/{len(table.expected)} snapshots right; verify: {problems[:2]}"


def _pyiceberg(table: CorpusTable, folder: Path) -> tuple[bool, int, str]:
    from pyiceberg.catalog.sql import SqlCatalog

    catalog = SqlCatalog("check", uri=f"sqlite:///{folder / 'check.db'}", warehouse=f"file://{folder}")
    catalog.create_namespace("db")
    try:
        t = catalog.register_table(f"db.{table.name}", table.metadata)
        right = 0
        for sid, rows in table.expected.items():
            try:
                right += canon_rows(t.scan(snapshot_id=sid).to_arrow().to_pylist()) == rows
            except Exception:  # noqa: BLE001 - a reader's failure on one snapshot counts as wrong
                pass
    except Exception as e:  # noqa: BLE001 - any failure of the other reader counts, with its reason
        return False, 0, f"{type(e).__name__}: {str(e)[:120]}"
    return right == len(table.expected), right, ""


def test_the_corpus_registers_in_place_and_scans_right(spark: Any, warehouse_catalog: str, tmp_warehouse: Path,
                                                       tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    spark_written = spark_tables(spark, warehouse_catalog, tmp_warehouse, tmp_path / "scratch")
    by_name = {t.name: t for t in spark_written}
    # derived before any registration touches the folders: other spellings and id ranges
    derived = [respelled_copy(by_name["v2_merge_on_read"], tmp_path / "respelled"),
               unsigned_ids(by_name["v2_copy_on_write"])]
    corpus = (spark_written + derived + java_api_tables(spark, tmp_path / "java-api-writer")
              + pyiceberg_tables(tmp_path / "pyiceberg-writer")
              + duckdb_tables(tmp_path / "duckdb-writer", duckdb_connect))
    results = []
    for i, table in enumerate(corpus):
        (tmp_path / f"py-{i}").mkdir()
        py_ok, py_right, py_why = _pyiceberg(table, (tmp_path / f"py-{i}").resolve()) if not table.relocate \
            else (False, 0, "PyIceberg cannot relocate a copied table")
        ice_ok, ice_right, ice_why = _icelog(table, tmp_path / f"icelog-{i}")
        results.append({"table": f"{table.writer}/{table.name}", "snapshots": len(table.expected),
                        "icelog": ice_right, "icelog_ok": ice_ok, "icelog_why": ice_why,
                        "pyiceberg": py_right, "pyiceberg_ok": py_ok, "pyiceberg_why": py_why})
    figures = {
        "tables": len(results), "snapshots": sum(r["snapshots"] for r in results),
        "icelog_tables_right": sum(r["icelog_ok"] for r in results),
        "icelog_snapshots_right": sum(r["icelog"] for r in results),
        "pyiceberg_tables_right": sum(r["pyiceberg_ok"] for r in results),
        "pyiceberg_snapshots_right": sum(r["pyiceberg"] for r in results),
    }
    with capsys.disabled():
        print("\ncorpus figures:", json.dumps(figures))
        for r in results:
            print(f"  {r['table']:<45} {r['snapshots']:>2} snapshots  icelog {r['icelog']:>2} "
                  f"{r['icelog_why'][:80]}  pyiceberg {r['pyiceberg']:>2} {r['pyiceberg_why'][:60]}")
    for r in results:
        assert r["icelog_ok"], r
