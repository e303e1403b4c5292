"""The public API is typed: mypy finds no error in engine/catalog.py and engine/table.py (configured in
pyproject.toml's [tool.mypy]), and a user's script sees the builders, results and views by their types, not Any."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest

import mypy.api as mypy_api  # in the test extras: a missing checker fails the suite, never skips it

REPO = Path(__file__).resolve().parent.parent

USER_SCRIPT = """
from engine import Catalog, Table

cat = Catalog.open("warehouse")
t = cat.load_table("db.t")
reveal_type(cat)
reveal_type(t)
reveal_type(t.update_schema())
reveal_type(t.update_spec())
reveal_type(t.replace_sort_order())
reveal_type(t.manage_snapshots())
reveal_type(t.row_delta())
reveal_type(t.transaction())
reveal_type(cat.transaction())
reveal_type(cat.transaction().load_table("db.t"))
reveal_type(t.as_of(version=1))
reveal_type(cat.as_of(position=1))
reveal_type(t.inspect)
reveal_type(t.expire_snapshots())
reveal_type(t.rewrite_data_files())
reveal_type(t.state)
reveal_type(t.log())
reveal_type(t.changes(1))
reveal_type(cat.create_table("db.u", schema=t.schema()))
"""

EXPECTED = [
    "engine.catalog.Catalog",
    "engine.table.Table",
    "engine.operations.update_schema.UpdateSchema",
    "engine.operations.update_spec.UpdateSpec",
    "engine.operations.update_sort_order.ReplaceSortOrder",
    "engine.operations.manage_snapshots.ManageSnapshots",
    "engine.operations.row_delta.RowDelta",
    "engine.table.Table",
    "engine.catalog_transaction.CatalogTransaction",
    "engine.table.Table",
    "engine.state.time_travel.HistoricalTable",
    "engine.state.time_travel.HistoricalCatalog",
    "engine.read.metadata_tables.InspectTable",
    "engine.operations.expire.ExpireResult",
    "engine.state.table_state.Snapshot | None",
    "engine.state.table_state.TableState",
    "builtins.list[engine.state.time_travel.LogEntry]",
    "engine.state.time_travel.Changes",
    "engine.table.Table",
]


def _mypy(*args: str, cache: Path) -> tuple[str, int]:
    out, err, code = mypy_api.run(["--config-file", str(REPO / "pyproject.toml"), "--cache-dir", str(cache),
                                   "--no-error-summary", *args])
    return out + err, code


def test_catalog_and_table_type_check(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)
    out, code = _mypy("engine/catalog.py", "engine/table.py", cache=tmp_path / "cache")
    assert code == 0 and not out.strip(), out


def test_a_users_script_sees_precise_types(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)
    script = tmp_path / "user_script.py"
    script.write_text(textwrap.dedent(USER_SCRIPT))
    out, _ = _mypy(str(script), cache=tmp_path / "cache")
    revealed = re.findall(r'Revealed type is "(.*)"', out)
    errors = [line for line in out.splitlines() if ": error:" in line]
    assert not errors, out
    assert revealed == EXPECTED, out
