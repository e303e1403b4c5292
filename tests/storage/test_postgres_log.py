"""What only a log on a database server has to survive: the server going away in the middle of a commit (every commit
lands once or not at all, and the client learns which), a connection lost after the commit landed, TRUNCATE, and a
role that may only append. Each test runs its own real PostgreSQL server where it stops it."""

from __future__ import annotations

import json
import threading

import psycopg
import pytest

from storage import APPEND_ONLY_MESSAGE, LogBusy, NewEvent, StreamWrite
from storage.postgres_log import PostgresLog
from storage.postgres_url import is_postgres_url, redacted
from tools.postgres_server import LocalPostgres


def write(stream: str, expected: int, n: int = 0) -> StreamWrite:
    return StreamWrite(stream=stream, expected_version=expected,
                       events=(NewEvent(stream=stream, type="t", type_version=1, payload=json.dumps({"n": n})),))


def test_the_server_stopping_mid_commit_lands_nothing_and_a_resend_lands_once() -> None:
    with LocalPostgres() as server:
        log = PostgresLog.open(server.url, busy_timeout_ms=20_000)
        log.commit("c0", (write("s", 0),), time_ms=1)
        with pytest.raises(LogBusy, match="outcome is unknown"):
            with log.transaction():
                log.commit("c1", (write("s", 1),), time_ms=2)  # written, not yet committed
                server.stop("immediate")                        # the server dies before COMMIT
        server.start()
        assert log.commit_of("c1") is None and log.head("s") == 1  # it did not land, and the client can tell
        result = log.commit("c1", (write("s", 1),), time_ms=2)      # re-sent with the same commit id
        assert not result.duplicate and result.positions == (2,)
        assert log.commit("c1", (write("s", 1),), time_ms=2).duplicate
        assert [e.commit_id for e in log.read_stream("s")] == ["c0", "c1"] and log.verify() == []
        log.close()


def test_a_commit_waits_for_a_server_that_comes_back_within_the_busy_timeout() -> None:
    with LocalPostgres() as server:
        log = PostgresLog.open(server.url, busy_timeout_ms=30_000)
        log.commit("c0", (write("s", 0),), time_ms=1)
        server.stop("fast")
        restart = threading.Timer(1.0, server.start)
        restart.start()
        try:
            result = log.commit("c1", (write("s", 1),), time_ms=2)  # reconnects, then lands
        finally:
            restart.join()
        assert result.positions == (2,) and log.head("s") == 2 and log.verify() == []
        log.close()


def test_a_connection_lost_after_the_commit_landed_returns_the_landed_result(postgres_url: str) -> None:
    log = PostgresLog.open(postgres_url)
    conn = log._live()
    real_execute = conn.execute

    def execute_then_lose_the_connection(sql, *args, **kwargs):
        result = real_execute(sql, *args, **kwargs)
        if sql == "COMMIT":
            conn.close()  # the answer to COMMIT never reaches the client
            raise psycopg.OperationalError("server closed the connection unexpectedly")
        return result

    conn.execute = execute_then_lose_the_connection  # type: ignore[method-assign]
    result = log.commit("c1", (write("s", 0),), time_ms=1)
    assert result.positions == (1,) and not result.duplicate
    with PostgresLog.open(postgres_url) as other:
        assert [e.commit_id for e in other.read_stream("s")] == ["c1"] and other.verify() == []
    log.close()


def test_truncate_is_refused_and_a_role_that_may_only_append_commits(postgres_url: str) -> None:
    with PostgresLog.open(postgres_url) as log:
        log.commit("c1", (write("s", 0),), time_ms=1)
    with psycopg.connect(postgres_url, autocommit=True) as admin:
        with pytest.raises(psycopg.Error, match=APPEND_ONLY_MESSAGE):
            admin.execute("TRUNCATE commits CASCADE")
        admin.execute("CREATE ROLE appender LOGIN")
        admin.execute("GRANT SELECT, INSERT ON events, event_parts, commits TO appender")
        admin.execute("GRANT SELECT, INSERT, UPDATE, DELETE ON checkpoints, staged_files TO appender")
    appender_url = postgres_url.replace("postgresql://icelog@", "postgresql://appender@")
    with PostgresLog.open(appender_url) as log:
        log.commit("c2", (write("s", 1),), time_ms=2)
        log.record_staged("s", "/a.parquet", 3)
        log.forget_staged("s", ["/a.parquet"])
        assert log.head("s") == 2 and log.verify() == []
    with psycopg.connect(appender_url, autocommit=True) as conn:
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("DELETE FROM events")


def test_urls_are_recognised_and_passwords_never_shown() -> None:
    assert is_postgres_url("postgresql://u@h/db") and is_postgres_url("postgres://u@h:5/db")
    assert not is_postgres_url("/data/catalog.db") and not is_postgres_url("s3://bucket/x")
    assert redacted("postgresql://u:secret@h:5432/db") == "postgresql://u:***@h:5432/db"
    assert redacted("postgresql://u@h/db") == "postgresql://u@h/db"
    with pytest.raises(LogBusy, match=r"Cannot reach the log: postgresql://u:\*\*\*@127.0.0.1:1/db"):
        PostgresLog.open("postgresql://u:secret@127.0.0.1:1/db", busy_timeout_ms=300)


def test_closed_logs_hand_their_connection_to_the_next_one_opened(postgres_url: str) -> None:
    import multiprocessing

    def backend(log: PostgresLog) -> int:
        return log._live().execute("SELECT pg_backend_pid()").fetchone()[0]

    first = PostgresLog.open(postgres_url)
    pid = backend(first)
    with first.exclusive("publish t1"):
        pass
    first.close()
    second = PostgresLog.open(postgres_url)
    assert backend(second) == pid                                 # the same session, reused
    other = PostgresLog.open(postgres_url)
    assert backend(other) != pid                                  # in use: not handed out twice
    second._live().execute("BEGIN")                               # closed inside a transaction: not reused
    second.close()
    third = PostgresLog.open(postgres_url)
    assert backend(third) not in (pid, backend(other))
    with third.exclusive("publish t1", timeout_s=0.1) as taken:   # no lock left behind by a pooled session
        assert taken
    third.close()
    other.close()
    context = multiprocessing.get_context("fork")
    results = context.Queue()

    def child() -> None:
        with PostgresLog.open(postgres_url) as log:
            results.put(backend(log))

    forked = context.Process(target=child)
    forked.start()
    assert results.get(timeout=30) not in (pid, backend(PostgresLog.open(postgres_url)))  # never the parent's
    forked.join(30)
