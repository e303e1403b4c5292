"""Namespace events: dropping a namespace and updating its properties, folded purely and committed by the Catalog.

Layer: tests.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from engine import Catalog
from engine.errors import NamespaceNotEmpty, NamespaceNotFound, ValidationError
from engine.state.events import NamespaceCreated, NamespaceDropped, NamespacePropertiesUpdated, TableRegistered, decode, encode
from engine.state.table_state import CatalogState, LogPosition, apply


def _at(version: int) -> LogPosition:
    return LogPosition(position=version, version=version, commit_id=f"c{version}", time_ms=version)


def test_fold_updates_and_drops_namespaces() -> None:
    state = apply(NamespaceCreated(namespace=("db",), properties={"a": "1", "b": "2"}), CatalogState(), _at(1))
    state = apply(NamespacePropertiesUpdated(namespace=("db",), updates={"c": "3", "a": "9"}, removals=["b"]),
                  state, _at(2))
    assert state.namespace_properties(("db",)) == {"a": "9", "c": "3"}
    assert state.version == 2
    with_table = apply(TableRegistered(namespace=("db",), name="t", table_uuid="u"), state, _at(3))
    with pytest.raises(ValidationError, match="still holds tables"):
        apply(NamespaceDropped(namespace=("db",)), with_table, _at(4))
    dropped = apply(NamespaceDropped(namespace=("db",)), state, _at(3))
    assert not dropped.has_namespace(("db",)) and dropped.namespace_properties(("db",)) is None


def test_namespace_events_round_trip() -> None:
    for event in (NamespaceDropped(namespace=("a", "b")),
                  NamespacePropertiesUpdated(namespace=("a",), updates={"k": "v"}, removals=["x", "w"])):
        type_name, version, payload, parts = encode(event)
        assert decode(type_name, version, payload, list(parts)) == event


def test_catalog_drops_and_updates_namespaces(tmp_warehouse: Path) -> None:
    with Catalog.open(tmp_warehouse) as cat:
        cat.create_namespace("db", {"a": "1"})
        assert cat.update_namespace_properties("db", {"b": "2"}, ["a", "zz"]) == (["b"], ["a"], ["zz"])
        assert cat.namespace_properties("db") == {"b": "2"}
        with pytest.raises(ValidationError, match="both set and removed"):
            cat.update_namespace_properties("db", {"b": "3"}, ["b"])
        import pyarrow as pa
        cat.create_table("db.t", schema=pa.schema([("id", pa.int64())]))
        with pytest.raises(NamespaceNotEmpty, match="db.*t"):
            cat.drop_namespace("db")
        cat.drop_table("db.t")
        cat.drop_namespace("db")
        assert cat.list_namespaces() == []
        with pytest.raises(NamespaceNotFound):
            cat.drop_namespace("db")
        with pytest.raises(NamespaceNotFound):
            cat.namespace_properties("db")
        assert [e.type for e in cat.log(since=0)][-1] == "drop-namespace"


def test_a_namespace_level_with_a_dot_is_refused(tmp_warehouse: Path) -> None:
    """('d.e',) and ('d', 'e') were two namespaces to icelog but one in the pointer tables, whose rows then flipped
    between the two tables of one name (PyIceberg's SqlCatalog read the other table's rows)."""
    with Catalog.open(tmp_warehouse) as cat:
        cat.create_namespace(("d", "e"))
        head = max(e.position for e in cat.log(since=0))
        with pytest.raises(ValidationError, match="level 'd.e' holds a dot"):
            cat.create_namespace(("d.e",))
        assert max(e.position for e in cat.log(since=0)) == head


def _namespace_rows(cat: Catalog) -> dict[str, dict[str, str]]:
    out: dict[str, dict[str, str]] = {}
    for ns, key, value in cat.log.derived.query(
            "SELECT namespace, property_key, property_value FROM iceberg_namespace_properties"):
        out.setdefault(ns, {})[key] = value
    return out


def test_namespace_rows_say_what_the_catalog_says_after_a_race_and_without_projection(tmp_warehouse: Path,
                                                                                   monkeypatch) -> None:
    """The rows were written from the request after its commit: a drop landing in between came back to life for
    SQL-catalog readers, and an older update overwrote a newer one. Catalogs opened with project=False wrote no
    rows at all, and Catalog.publish() never repaired them."""
    import engine.catalog

    with Catalog.open(tmp_warehouse) as cat, Catalog.open(tmp_warehouse) as other:
        cat.create_namespace("db", {"k": "1"})
        commit = engine.catalog.commit_streams

        def dropped_meanwhile(*args, **kwargs):
            landed = commit(*args, **kwargs)
            monkeypatch.setattr(engine.catalog, "commit_streams", commit)
            other.drop_namespace("db")
            return landed

        monkeypatch.setattr(engine.catalog, "commit_streams", dropped_meanwhile)
        cat.update_namespace_properties("db", {"k": "2"})
        assert cat.list_namespaces() == [] and _namespace_rows(cat) == {}
    with Catalog.open(tmp_warehouse, project=False) as quiet:
        quiet.create_namespace("q", {"a": "1"})
        assert _namespace_rows(quiet) == {"q": {"exists": "true", "a": "1"}}
        quiet.log.derived.execute("DELETE FROM iceberg_namespace_properties")
        quiet.publish()
        assert _namespace_rows(quiet) == {"q": {"exists": "true", "a": "1"}}


def test_list_namespaces_under_a_parent_as_the_rest_catalog_lists_them(tmp_warehouse: Path) -> None:
    with Catalog.open(tmp_warehouse) as cat:
        for ns in (("a",), ("a", "b"), ("a", "b", "c"), ("x", "y")):
            cat.create_namespace(ns)
        assert cat.list_namespaces() == [("a",), ("a", "b"), ("a", "b", "c"), ("x", "y")]
        assert cat.list_namespaces(()) == [("a",), ("x",)]  # x only prefixes x.y: listed, as Java's catalogs do
        assert cat.list_namespaces("a") == [("a", "b")]
        assert cat.list_namespaces(("a", "b", "c")) == []
        with pytest.raises(NamespaceNotFound, match="parent nope"):
            cat.list_namespaces("nope")
