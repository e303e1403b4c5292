"""DESIGN.md's import DAG holds: storage imports nothing of ours, the pure engine layers import only each other,
projections import only those and storage, each engine folder imports only the layers below it, nothing imports
tools, the import graph has no cycle, and no module grows past MAX_LINES without a reason on record."""

from __future__ import annotations

import ast
import pathlib
from collections.abc import Callable, Iterator

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
OURS = ("engine", "storage", "projections", "tools")
PURE = ("engine.errors", "engine.state.events", "engine.state.table_state")
MAX_LINES = 700


def _under(*prefixes: str) -> Callable[[str], bool]:
    """Whether a module is one of ``prefixes`` or inside one of them."""
    return lambda m: any(m == p or m.startswith(p + ".") for p in prefixes)


#: (files the rule covers, by path prefix; what it forbids a module of ours to import; why). Every matching rule
#: applies (a file under engine/model/ is checked by the engine/model/ rule and by the "nothing imports tools" one).
RULES: list[tuple[str, Callable[[str], bool], str]] = [
    ("storage/", lambda m: not _under("storage")(m), "storage imports only storage"),
    ("engine/model/", lambda m: not _under("engine.model", "engine.errors")(m),
     "engine.model imports only engine.model and engine.errors"),
    ("engine/state/events.py", lambda m: not (_under("engine.model")(m) or m in PURE),
     "events are pure: engine.model, engine.errors and the fold only"),
    ("engine/state/table_state.py", lambda m: not (_under("engine.model")(m) or m in PURE),
     "the fold is pure: engine.model, engine.errors and the events only"),
    ("projections/", lambda m: not (_under("engine.model", "projections", "storage")(m) or m in PURE),
     "projections import engine.model, engine.state.events/table_state, engine.errors, storage and projections"),
    ("engine/formats/", lambda m: _under("engine")(m) and not _under(
        "engine.formats", "engine.model", "engine.errors", "engine.ownership")(m),
     "engine.formats imports only engine.model, engine.errors, engine.ownership and storage"),
    ("engine/formats/", lambda m: _under("projections")(m),
     "engine.formats imports only engine.model, engine.errors, engine.ownership and storage"),
    ("engine/read/", _under("engine.write", "engine.operations", "engine.catalog", "engine.table",
                            "engine.registration"),
     "engine.read never imports the write path, operations, the catalog API or registration"),
    ("engine/write/", _under("engine.operations", "engine.catalog", "engine.table"),
     "engine.write never imports operations or the catalog API"),
    ("", _under("tools"), "nothing imports tools"),
]

#: imports that break a rule today, each with its reason; (file, imported module). Shrink, never grow.
KNOWN_VIOLATIONS: dict[tuple[str, str], str] = {}


#: modules over MAX_LINES on main today, each with its reason. Shrink, never grow.
BIG_MODULES: dict[str, str] = {}


def modules() -> list[pathlib.Path]:
    return sorted(p for top in OURS for p in (ROOT / top).rglob("*.py"))


def module_name(path: pathlib.Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {module_name(p): p for p in modules()}


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def imported_names(tree: ast.AST, *, type_only: bool = True) -> Iterator[str]:
    """Every module an import statement names, at any depth (inside functions too); ``from a import b`` names
    ``a.b`` when that is one of our modules, else ``a``. Without ``type_only``, imports under
    ``if TYPE_CHECKING:`` are left out (they never run)."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.If) and not type_only and _is_type_checking(node.test):
            for child in node.orelse:
                yield from imported_names(ast.Module(body=[child], type_ignores=[]), type_only=type_only)
            continue
        if isinstance(node, ast.Import):
            yield from (a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for a in node.names:
                full = f"{node.module}.{a.name}"
                yield full if full in MODULES else node.module
        yield from imported_names(node, type_only=type_only)


def our_module(name: str) -> str | None:
    """The module of ours that an imported name resolves to (the longest prefix that is one), or None."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def import_graph() -> dict[str, set[str]]:
    """Our modules and the modules of ours each imports at run time (type-only imports left out)."""
    graph: dict[str, set[str]] = {}
    for name, path in MODULES.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        targets = {our_module(n) for n in imported_names(tree, type_only=False)}
        graph[name] = {t for t in targets if t is not None and t != name}
    return graph


def strongly_connected(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[frozenset[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(frozenset(component))
    return found


def _described(components: list[frozenset[str]]) -> str:
    return "; ".join(" <-> ".join(sorted(c)) for c in components)


def test_the_import_graph_has_no_cycle():
    cycles = strongly_connected(import_graph())
    assert cycles == [], f"import cycles (strongly connected components): {_described(cycles)}"


def test_the_cycle_finder_finds_cycles():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a", "e"}, "e": {"d"}, "f": set()}
    assert sorted(map(sorted, strongly_connected(graph))) == [["a", "b", "c"], ["d", "e"]]


def test_type_only_imports_are_left_out_of_the_graph():
    tree = ast.parse("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import engine.catalog\nelse:\n"
                     "    import engine.errors\ndef f():\n    import storage.log\n")
    assert set(imported_names(tree, type_only=False)) == {"typing", "engine.errors", "storage.log"}
    assert "engine.catalog" in set(imported_names(tree))


@pytest.mark.parametrize("path", modules(), ids=lambda p: str(p.relative_to(ROOT)))
def test_imports_follow_the_layers(path):
    rel = str(path.relative_to(ROOT))
    rules = [rule for rule in RULES if rel.startswith(rule[0]) and not (rel.startswith("tools/") and rule[0] == "")]
    bad = []
    for name in imported_names(ast.parse(path.read_text(encoding="utf-8"))):
        module = our_module(name) or (name if name.split(".")[0] in OURS else None)
        if module is None:
            continue
        for _, forbidden, why in rules:
            if forbidden(module) and (rel, module) not in KNOWN_VIOLATIONS:
                bad.append(f"{module} ({why})")
    assert bad == [], f"{rel} imports across layers: {bad}"


def test_known_violations_still_exist():
    for (rel, module), why in KNOWN_VIOLATIONS.items():
        names = {our_module(n) for n in imported_names(ast.parse((ROOT / rel).read_text(encoding="utf-8")))}
        assert module in names, f"{rel} no longer imports {module}: drop it from KNOWN_VIOLATIONS ({why})"


@pytest.mark.parametrize("path", modules(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_module_opens_with_a_docstring(path):
    if path.name == "__init__.py" and not path.read_text(encoding="utf-8").strip():
        return
    assert ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))), f"{path} has no module docstring"


def test_no_module_is_too_long():
    long = {str(p.relative_to(ROOT)): n for p in modules()
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES}
    unexplained = {rel: n for rel, n in long.items() if rel not in BIG_MODULES}
    assert unexplained == {}, f"modules over {MAX_LINES} lines (split them by concept): {unexplained}"


def test_the_big_module_allowlist_is_current():
    small = [rel for rel in BIG_MODULES if not (ROOT / rel).exists()
             or len((ROOT / rel).read_text(encoding="utf-8").splitlines()) <= MAX_LINES]
    assert small == [], f"no longer over {MAX_LINES} lines (or gone): drop them from BIG_MODULES: {small}"
