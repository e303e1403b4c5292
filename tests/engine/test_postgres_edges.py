"""A catalog on PostgreSQL behaves as one on SQLite at the edges: a handle used from another thread is refused
(threads interleaving transactions on one connection wrote a broken hash chain into the permanent log), names and
namespace properties the pointer tables cannot hold are refused before anything lands (on both backends), a
password never shows (in the URL's user information or its query string, with one host or several), and verify
reconnects after a server restart.

Layer: tests (real PostgreSQL servers: the run's, and a throwaway one for the restart).
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from engine import Catalog
from engine.errors import ValidationError
from storage.errors import WrongThread
from storage.postgres_url import redacted

SCHEMA = pa.schema([("id", pa.int64())])


def test_a_handle_is_used_by_the_thread_that_opened_it_only(postgres_url: str, tmp_path: Path) -> None:
    with Catalog.open(postgres_url, warehouse=str(tmp_path / "lake")) as cat:
        cat.create_namespace("db")
        t = cat.create_table("db.t", SCHEMA)
        errors: list[BaseException] = []

        def append() -> None:
            try:
                t.append(pa.table({"id": [1]}))
            except BaseException as e:
                errors.append(e)

        threads = [threading.Thread(target=append) for _ in range(3)]
        for th in threads:
            th.start()
        for th in threads:
            th.join(60)
        assert len(errors) == 3 and all(isinstance(e, WrongThread) for e in errors), errors
        t.append(pa.table({"id": [2]}))  # the handle keeps working in its own thread
        assert t.scan().to_arrow().column("id").to_pylist() == [2]
        assert cat.log.verify() == [] and cat.verify("db.t") == []


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_names_and_properties_the_pointer_tables_cannot_hold_are_refused_before_anything_lands(
        backend: str, request: Any, tmp_path: Path) -> None:
    where = request.getfixturevalue("postgres_url") if backend == "postgres" else str(tmp_path / "catalog")
    with Catalog.open(where, warehouse=str(tmp_path / "lake")) as cat:
        cat.create_namespace("db")
        head = cat.log.head("catalog")
        for call, culprit in [
            (lambda: cat.create_namespace(("a" * 200, "b" * 200)), "at most 255 characters"),
            (lambda: cat.create_namespace("x", {"k": "v" * 1001}), "at most 1000 characters"),
            (lambda: cat.create_namespace("x", {"k" * 256: "v"}), "1 to 255 characters"),
            (lambda: cat.create_namespace("x", {"k": "a\x00b"}), "NUL"),
            (lambda: cat.update_namespace_properties("db", {"k": "v" * 1001}), "at most 1000 characters"),
        ]:
            with pytest.raises(ValidationError, match=culprit):
                call()
        assert cat.log.head("catalog") == head and cat.list_namespaces() == [("db",)]
        cat.create_namespace("x", {"k": "v" * 1000})  # the limits themselves are fine
        assert cat.namespace_properties("x") == {"k": "v" * 1000}


@pytest.mark.parametrize("url, shown", [
    ("postgresql://icelog@db-host/lake?password=S3CRET", "postgresql://icelog@db-host/lake?password=***"),
    ("postgresql://u:S3CRET@h1:5432,h2:5433/lake", "postgresql://u:***@h1:5432,h2:5433/lake"),
    ("postgresql://u:S3CRET@[::1]:5432/lake?sslmode=disable&sslpassword=S3CRET",
     "postgresql://u:***@[::1]:5432/lake?sslmode=disable&sslpassword=***"),
])
def test_a_password_never_shows(url: str, shown: str) -> None:
    assert redacted(url) == shown


def test_an_unreachable_server_is_named_without_its_password(tmp_path: Path) -> None:
    from engine.errors import IcelogError
    from tools.ports import free_port

    url = f"postgresql://icelog@127.0.0.1:{free_port()}/lake?password=S3CRET&connect_timeout=1"
    with pytest.raises(IcelogError) as e:
        Catalog.open(url, warehouse=str(tmp_path / "lake"))
    assert "S3CRET" not in str(e.value) and "password=***" in str(e.value)


def test_verify_reconnects_after_a_server_restart(tmp_path: Path) -> None:
    from tools.postgres_server import LocalPostgres

    with LocalPostgres() as server:
        with Catalog.open(server.url, warehouse=str(tmp_path / "lake")) as cat:
            cat.create_namespace("db")
            cat.create_table("db.t", SCHEMA).append(pa.table({"id": [1]}))
            server.stop("fast")
            server.start()
            assert cat.log.verify() == [] and cat.verify("db.t") == []
