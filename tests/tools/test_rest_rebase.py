"""Server-side rebase of REST appends: a client whose append was built on a branch head that has moved since
(other appends landed) is committed onto the new head inside the log transaction, as Iceberg Java's append retries
on a refreshed base, instead of answering 409. Commits that read what changed still get 409.

Layer: tests (PyIceberg 0.12 RestCatalog clients against ``icelog serve`` in this process; real files).
"""

from __future__ import annotations

import threading
from pathlib import Path

import pyarrow as pa
import pytest

from engine import Catalog
from tools.rest_server import running_server

TOKEN = "rebase-token"
#: PyIceberg retries a refused commit on a refreshed base by itself; without retries a 409 reaches the test
NO_CLIENT_RETRY = {"commit.retry.num-retries": "0"}
SCHEMA = pa.schema([("id", pa.int64()), ("writer", pa.string())])


def _client(uri: str):
    from pyiceberg.catalog.rest import RestCatalog

    return RestCatalog("icelog", uri=uri, token=TOKEN)


def _rows(ids: list[int], writer: str) -> pa.Table:
    return pa.table({"id": pa.array(ids, pa.int64()), "writer": [writer] * len(ids)})


def test_an_append_built_on_a_stale_head_is_rebased_not_refused(tmp_path: Path) -> None:
    with Catalog.open(tmp_path / "wh") as cat:
        cat.create_namespace("db")
        t = cat.create_table("db.t", schema=SCHEMA, properties=NO_CLIENT_RETRY)
        t.append(_rows([1, 2], "icelog"))
    with running_server(tmp_path / "wh", TOKEN) as server:
        stale = _client(server.uri).load_table("db.t")               # reads the head now ...
        with Catalog.open(tmp_path / "wh") as cat:                    # ... while two other appends land
            cat.load_table("db.t").append(_rows([3], "icelog"))
            cat.load_table("db.t").append(_rows([4, 5], "icelog"))
            before = cat.load_table("db.t").current_snapshot()
        stale.append(_rows([10, 11, 12], "pyiceberg"))                # no 409: rebased onto the new head
        fresh = _client(server.uri).load_table("db.t")
        assert sorted(fresh.scan().to_arrow().column("id").to_pylist()) == [1, 2, 3, 4, 5, 10, 11, 12]
    with Catalog.open(tmp_path / "wh") as cat:
        t = cat.load_table("db.t")
        head = t.current_snapshot()
        assert head.parent_snapshot_id == before.snapshot_id and head.sequence_number == before.sequence_number + 1
        summary = dict(head.summary)
        assert summary["total-records"] == "8" and summary["added-records"] == "3"
        assert sorted(t.scan().to_arrow().column("id").to_pylist()) == [1, 2, 3, 4, 5, 10, 11, 12]
        # the appended rows take the rebased snapshot's sequence number: an equality delete committed before them
        # (with a lower one) does not hide them
        assert all(e.data_sequence_number == head.sequence_number for e in t.catalog.store.live_entries(
            t.state, head.snapshot_id) if e.snapshot_id == head.snapshot_id)
        t.publish()
        assert cat.verify("db.t") == []


def test_eight_pyiceberg_clients_append_at_once_and_every_append_lands_once(tmp_path: Path) -> None:
    with Catalog.open(tmp_path / "wh") as cat:
        cat.create_namespace("db")
        cat.create_table("db.t", schema=SCHEMA, properties=NO_CLIENT_RETRY)
    errors: list[BaseException] = []
    with running_server(tmp_path / "wh", TOKEN) as server:
        tables = [_client(server.uri).load_table("db.t") for _ in range(8)]   # all on the same (empty) head
        start = threading.Barrier(8)

        def append(i: int) -> None:
            try:
                start.wait()
                for k in range(3):
                    tables[i].append(_rows([i * 100 + k], f"w{i}"))
            except BaseException as e:  # noqa: BLE001 - reported below
                errors.append(e)

        threads = [threading.Thread(target=append, args=(i,)) for i in range(8)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
    assert errors == []                                               # no 409 for pure appends
    with Catalog.open(tmp_path / "wh") as cat:
        t = cat.load_table("db.t")
        ids = sorted(t.scan().to_arrow().column("id").to_pylist())
        assert ids == sorted(i * 100 + k for i in range(8) for k in range(3))   # each landed once
        assert len(t.snapshots()) == 24
        t.publish()
        assert cat.verify("db.t") == []


def _staged_manifests(warehouse: Path) -> set[str]:
    with Catalog.open(warehouse) as cat:
        return {p for p, _ in cat.log.staged_files(cat.load_table("db.t").uuid) if p.endswith(".avro")}


def test_commits_that_read_what_changed_still_get_409(tmp_path: Path) -> None:
    from pyiceberg.exceptions import CommitFailedException
    from pyiceberg.types import StringType

    with Catalog.open(tmp_path / "wh") as cat:
        cat.create_namespace("db")
        t = cat.create_table("db.t", schema=SCHEMA, properties=NO_CLIENT_RETRY)
        t.append(_rows([1, 2, 3], "icelog"))
    with running_server(tmp_path / "wh", TOKEN) as server:
        stale = _client(server.uri).load_table("db.t")
        with Catalog.open(tmp_path / "wh") as cat:
            cat.load_table("db.t").append(_rows([4], "icelog"))
            version = cat.load_table("db.t").state.version
        staged_before = _staged_manifests(tmp_path / "wh")
        with pytest.raises(CommitFailedException):                   # an overwrite read the rows it replaces
            stale.overwrite(_rows([9], "pyiceberg"))
        # the files the refused commit named are the table's orphans (PyIceberg may clean up after itself)
        assert _staged_manifests(tmp_path / "wh") - staged_before
        stale = _client(server.uri).load_table("db.t")
        with Catalog.open(tmp_path / "wh") as cat:
            cat.load_table("db.t").update_schema().add_column("note", "string").commit()
            version = cat.load_table("db.t").state.version
        with pytest.raises(CommitFailedException):                   # a schema change built on the old schema
            with stale.update_schema() as update:
                update.add_column("other", StringType())
        with Catalog.open(tmp_path / "wh") as cat:
            assert cat.load_table("db.t").state.version == version


def test_a_duckdb_insert_whose_transaction_began_before_another_append_is_rebased(tmp_path: Path) -> None:
    """DuckDB spells out its snapshot's sequence number in the entries it adds: that is inheriting it, so the
    append still moves onto the new head (with the new number)."""
    from tests.conftest import duckdb_connect

    with Catalog.open(tmp_path / "wh") as cat:
        cat.create_namespace("db")
        cat.create_table("db.t", schema=SCHEMA)
    with running_server(tmp_path / "wh", TOKEN) as server:
        con = duckdb_connect()
        con.execute(f"ATTACH 'warehouse' AS ice (TYPE iceberg, ENDPOINT '{server.uri}', AUTHORIZATION_TYPE 'oauth2', "
                    f"TOKEN '{TOKEN}')")
        con.execute("BEGIN")
        con.execute("INSERT INTO ice.db.t VALUES (1, 'duckdb')")      # built on the empty table
        with Catalog.open(tmp_path / "wh") as cat:
            cat.load_table("db.t").append(_rows([2], "icelog"))
        con.execute("COMMIT")                                          # no 409
        assert sorted(con.execute("SELECT id FROM ice.db.t").fetchall()) == [(1,), (2,)]
        con.close()
    with Catalog.open(tmp_path / "wh") as cat:
        t = cat.load_table("db.t")
        head = t.current_snapshot()
        assert head.sequence_number == 2 and head.parent_snapshot_id is not None
        assert all(e.data_sequence_number == 2 for e in t.catalog.store.live_entries(t.state, head.snapshot_id)
                   if e.snapshot_id == head.snapshot_id)
        # DuckDB writes no totals and no counts: the rebased summary gets no totals it cannot count (it claimed the
        # icelog parent's one row), and neither do later snapshots on it, as Java's updateTotal leaves them out
        assert not any(k.startswith("total-") for k, _ in head.summary)
        t.append(_rows([3], "icelog"))
        assert dict(t.current_snapshot().summary).get("added-records") == "1"
        assert not any(k.startswith("total-") for k, _ in t.current_snapshot().summary)
        assert cat.verify("db.t") == []


def test_a_rebased_append_of_files_the_table_does_not_own_is_refused_and_lands_nothing(tmp_path: Path) -> None:
    """Rebasing changes where an append lands, never what it may add: a stale client appending another table's data
    file, or a file outside the table's location, still gets 400 and nothing is committed."""
    import pyarrow.parquet as pq
    from pyiceberg.exceptions import BadRequestError

    with Catalog.open(tmp_path / "wh") as cat:
        cat.create_namespace("db")
        victim = cat.create_table("db.victim", schema=SCHEMA)
        victim.append(_rows([1], "victim"))
        victim_file = victim.inspect.files().column("file_path").to_pylist()[0].removeprefix("file://")
        cat.create_table("db.t", schema=SCHEMA, properties=NO_CLIENT_RETRY).append(_rows([5], "icelog"))
    outside = tmp_path / "outside.parquet"
    pq.write_table(_rows([9], "outside"), outside)
    with running_server(tmp_path / "wh", TOKEN) as server:
        # PyIceberg's add_files first sets a name mapping when the table has none (then it is no pure append)
        mapping = _client(server.uri).load_table("db.t").schema().name_mapping.model_dump_json()
        with Catalog.open(tmp_path / "wh") as cat:
            cat.load_table("db.t").set_properties({"schema.name-mapping.default": mapping})
        for path, message in ((victim_file, "belongs to db.victim"), (str(outside), "not under the table location")):
            stale = _client(server.uri).load_table("db.t")
            with Catalog.open(tmp_path / "wh") as cat:
                cat.load_table("db.t").append(_rows([6], "icelog"))      # the client's head is stale: a rebase case
                version = cat.load_table("db.t").state.version
            with pytest.raises(BadRequestError, match=message):
                stale.add_files([path])
            with Catalog.open(tmp_path / "wh") as cat:
                assert cat.load_table("db.t").state.version == version
    with Catalog.open(tmp_path / "wh") as cat:
        assert sorted(cat.load_table("db.t").scan().to_arrow().column("id").to_pylist()) == [5, 6, 6]
        assert cat.load_table("db.victim").scan().to_arrow().column("id").to_pylist() == [1]
        assert cat.verify("db.victim") == []


def test_rest_appends_look_up_their_files_without_listing_the_tables(tmp_path: Path, monkeypatch) -> None:
    """A REST append, fresh or rebased, finds its changes by looking up its own files among the parent's live
    files (``StateStore.live_files_by_key``): the parent's whole live set is never listed, however large."""
    from engine.read.file_index import LiveFiles
    from engine.state.store import StateStore

    with Catalog.open(tmp_path / "wh") as cat:
        cat.create_namespace("db")
        t = cat.create_table("db.t", schema=SCHEMA, properties=NO_CLIENT_RETRY)
        for i in range(5):
            t.append(_rows([i], "icelog"))

    def listed(*_: object) -> None:
        raise AssertionError("a REST append listed a snapshot's whole live set")

    monkeypatch.setattr(StateStore, "live_entries", listed)
    monkeypatch.setattr(LiveFiles, "__iter__", listed)
    with running_server(tmp_path / "wh", TOKEN) as server:
        stale = _client(server.uri).load_table("db.t")
        _client(server.uri).load_table("db.t").append(_rows([10], "pyiceberg"))  # on the head
        stale.append(_rows([20], "pyiceberg"))                                   # rebased onto it
    monkeypatch.undo()
    with Catalog.open(tmp_path / "wh") as cat:
        t = cat.load_table("db.t")
        assert sorted(t.scan().to_arrow().column("id").to_pylist()) == [0, 1, 2, 3, 4, 10, 20]
        assert len(t.snapshots()) == 7 and cat.verify("db.t") == []


def test_a_rebased_append_takes_the_current_schema_and_the_commit_time_as_java_s_retry_does(tmp_path: Path) -> None:
    """A snapshot log going back in time by more than a minute is one Iceberg Java refuses to load ("Expected sorted
    snapshot log entries"), and time travel reads a snapshot with its schema id: the rebased snapshot gets the
    time of the commit and the table's current schema, not the stale ones the client built it with."""
    with Catalog.open(tmp_path / "wh") as cat:
        cat.create_namespace("db")
        cat.create_table("db.t", schema=SCHEMA, properties=NO_CLIENT_RETRY).append(_rows([1], "icelog"))
    with running_server(tmp_path / "wh", TOKEN) as server:
        stale = _client(server.uri).load_table("db.t")
        tx = stale.transaction()
        tx.append(_rows([3], "pyiceberg"))
        # built two minutes before it commits (a long transaction, or a client clock behind the server's)
        tx._updates = tuple(u.model_copy(update={"snapshot": u.snapshot.model_copy(
            update={"timestamp_ms": u.snapshot.timestamp_ms - 120_000})}) if u.action == "add-snapshot" else u
            for u in tx._updates)
        with Catalog.open(tmp_path / "wh") as cat:                    # meanwhile: a new column, and an append
            cat.load_table("db.t").update_schema().add_column("note", "string").commit()
            cat.load_table("db.t").append(pa.table({"id": pa.array([2], pa.int64()), "writer": ["icelog"],
                                                    "note": ["x"]}))
        tx.commit_transaction()                                       # rebased, no 409
        fresh = _client(server.uri).load_table("db.t")
        head = fresh.current_snapshot()
        parent = fresh.snapshot_by_id(head.parent_snapshot_id)
        assert head.schema_id == fresh.metadata.current_schema_id != 0
        assert head.timestamp_ms >= parent.timestamp_ms
        log = [e.timestamp_ms for e in fresh.metadata.snapshot_log]
        assert log == sorted(log)
        assert sorted(fresh.scan(snapshot_id=head.snapshot_id).to_arrow().to_pylist(), key=lambda r: r["id"]) == [
            {"id": 1, "writer": "icelog", "note": None}, {"id": 2, "writer": "icelog", "note": "x"},
            {"id": 3, "writer": "pyiceberg", "note": None}]
    with Catalog.open(tmp_path / "wh") as cat:
        t = cat.load_table("db.t")
        t.publish()
        assert cat.verify("db.t") == []


def test_a_table_can_refuse_rebases_for_clients_that_append_after_reading(tmp_path: Path) -> None:
    """The request does not say what the client read before appending (an upsert that matched no row reads the
    keys it then inserts): a table whose clients do that sets icelog.rest.rebase-appends=false, and a stale append
    gets 409 and lands nothing, as with a server that never rebases. Iceberg Java clients, which retry by themselves
    with their own validations, are never rebased (tests/integration/test_rest_concurrent_appends.py)."""
    from pyiceberg.exceptions import CommitFailedException

    from engine.operations.table_updates import REBASE_APPENDS
    from tools.rest_commits import retries_by_itself

    with Catalog.open(tmp_path / "wh") as cat:
        cat.create_namespace("db")
        t = cat.create_table("db.t", schema=SCHEMA, properties={**NO_CLIENT_RETRY, REBASE_APPENDS: "false"})
        t.append(_rows([1], "icelog"))
    with running_server(tmp_path / "wh", TOKEN) as server:
        stale = _client(server.uri).load_table("db.t")
        with Catalog.open(tmp_path / "wh") as cat:
            cat.load_table("db.t").append(_rows([2], "icelog"))
            version = cat.load_table("db.t").state.version
        with pytest.raises(CommitFailedException):
            stale.append(_rows([2], "pyiceberg"))
    with Catalog.open(tmp_path / "wh") as cat:
        assert cat.load_table("db.t").state.version == version
        assert sorted(cat.load_table("db.t").scan().to_arrow().column("id").to_pylist()) == [1, 2]
    assert retries_by_itself("Apache Iceberg 1.10.2 (commit 7a3b1c2)")
    assert not retries_by_itself("PyIceberg 0.12.0") and not retries_by_itself("")


@pytest.mark.parametrize("replaced_by", ["a tag", "nothing", "an unrelated branch"])
def test_a_stale_append_to_a_branch_that_was_replaced_meanwhile_gets_409(tmp_path: Path, replaced_by: str) -> None:
    """The client appends to branch ``b`` as it read it; meanwhile ``b`` moved on and was then replaced: by a tag
    of the same name (which no commit may move; the rebase turned it into a branch), removed, or by a branch on
    another history. None of them is an append landed on what the client read: the spec's 409, nothing lands."""
    from pyiceberg.exceptions import CommitFailedException

    with Catalog.open(tmp_path / "wh") as cat:
        cat.create_namespace("db")
        first = cat.create_table("db.t", schema=SCHEMA, properties=NO_CLIENT_RETRY).append(_rows([1], "icelog"))
    with running_server(tmp_path / "wh", TOKEN) as server:
        client = _client(server.uri)
        client.load_table("db.t").manage_snapshots().create_branch(first.snapshot_id, "b").commit()
        client.load_table("db.t").append(_rows([2], "b"), branch="b")
        stale = client.load_table("db.t")                                 # reads b one snapshot past main's
        client.load_table("db.t").append(_rows([3], "other"), branch="b")
        moved_to = client.load_table("db.t").metadata.refs["b"].snapshot_id
        client.load_table("db.t").manage_snapshots().remove_branch("b").commit()
        if replaced_by == "a tag":
            client.load_table("db.t").manage_snapshots().create_tag(moved_to, "b").commit()
        elif replaced_by == "an unrelated branch":
            client.load_table("db.t").append(_rows([5], "main"))          # main: a sibling of b's history
            main = client.load_table("db.t").metadata.current_snapshot_id
            client.load_table("db.t").manage_snapshots().create_branch(main, "b").commit()
        with Catalog.open(tmp_path / "wh") as cat:
            before = cat.load_table("db.t").state.ref("b")
        with pytest.raises(CommitFailedException):
            stale.append(_rows([10], "stale"), branch="b")
    with Catalog.open(tmp_path / "wh") as cat:
        t = cat.load_table("db.t")
        assert t.state.ref("b") == before and 10 not in t.scan().to_arrow().column("id").to_pylist()


def test_a_stale_append_of_a_file_another_commit_added_meanwhile_gets_409(tmp_path: Path) -> None:
    """Two clients register the same Parquet file from one base: the second is no append of its own once the
    first has landed (rebased, the table would count the file twice), so it gets 409 and the file is live once."""
    import pyarrow.parquet as pq
    from pyiceberg.exceptions import CommitFailedException

    with Catalog.open(tmp_path / "wh") as cat:
        cat.create_namespace("db")
        t = cat.create_table("db.t", schema=SCHEMA, properties=NO_CLIENT_RETRY)
        t.append(_rows([1], "icelog"))
        shared = f"{t.location}/data/shared.parquet"
    with running_server(tmp_path / "wh", TOKEN) as server:
        mapping = _client(server.uri).load_table("db.t").schema().name_mapping.model_dump_json()
        with Catalog.open(tmp_path / "wh") as cat:
            cat.load_table("db.t").set_properties({"schema.name-mapping.default": mapping})
        pq.write_table(_rows([7, 8], "shared"), shared)
        first, second = _client(server.uri).load_table("db.t"), _client(server.uri).load_table("db.t")
        first.add_files([shared])
        with pytest.raises(CommitFailedException):
            second.add_files([shared])
    with Catalog.open(tmp_path / "wh") as cat:
        t = cat.load_table("db.t")
        assert sorted(t.scan().to_arrow().column("id").to_pylist()) == [1, 7, 8]
        assert len([p for p in t.inspect.files().column("file_path").to_pylist() if p.endswith("shared.parquet")]) == 1
        t.publish()
        assert cat.verify("db.t") == []
