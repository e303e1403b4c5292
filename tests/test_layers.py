"""DESIGN.md's import DAG holds: storage imports nothing of ours, the pure engine layers import only each other,
projections import only those and storage, and nothing imports tools."""

from __future__ import annotations

import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
OURS = ("engine", "storage", "projections", "tools")
PURE = ("engine.errors", "engine.state.events", "engine.state.table_state")

# first matching prefix wins
RULES = [
    ("storage/", lambda m: m.startswith("storage")),
    ("engine/model/", lambda m: m.startswith("engine.model") or m == "engine.errors"),
    ("engine/state/events.py", lambda m: m.startswith("engine.model") or m in ("engine.errors", "engine.state.events")),
    ("engine/state/table_state.py", lambda m: m.startswith("engine.model") or m in PURE),
    ("projections/", lambda m: m.startswith(("engine.model", "projections", "storage")) or m in PURE),
    ("engine/", lambda m: not m.startswith("tools")),
    ("tools/", lambda m: True),
]


def modules() -> list[pathlib.Path]:
    return sorted(p for top in OURS for p in (ROOT / top).rglob("*.py"))


@pytest.mark.parametrize("path", modules(), ids=lambda p: str(p.relative_to(ROOT)))
def test_imports_follow_the_layers(path):
    rel = str(path.relative_to(ROOT))
    allowed = next(rule for prefix, rule in RULES if rel.startswith(prefix))
    bad = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else (
            [node.module] if isinstance(node, ast.ImportFrom) and node.module else [])
        bad += [n for n in names if n.split(".")[0] in OURS and not allowed(n)]
    assert bad == [], f"{rel} imports across layers: {bad}"


@pytest.mark.parametrize("path", modules(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_module_opens_with_a_docstring(path):
    if path.name == "__init__.py" and not path.read_text(encoding="utf-8").strip():
        return
    assert ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))), f"{path} has no module docstring"
