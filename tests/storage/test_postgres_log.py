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


def test_writers_commit_under_any_default_isolation_level(postgres_url: str) -> None:
    """A database whose default is REPEATABLE READ or SERIALIZABLE: each write transaction still reads the heads the
    writer before it committed (it begins at READ COMMITTED), so concurrent writers land, none fails."""
    name = postgres_url.rsplit("/", 1)[1]
    with psycopg.connect(postgres_url, autocommit=True) as admin:
        admin.execute(f"ALTER DATABASE {name} SET default_transaction_isolation = 'serializable'")
    errors: list[BaseException] = []

    def writer(w: int) -> None:
        with PostgresLog.open(postgres_url) as log:
            for i in range(5):
                try:
                    log.commit(f"w{w}-{i}", (write(f"s{w}", i),), time_ms=i)
                    log.commit(f"shared-{w}-{i}", (write("shared", log.head("shared")),), time_ms=i)
                except Exception as e:  # a CAS conflict on "shared" is fair; anything else is not
                    if type(e).__name__ != "StreamVersionConflict":
                        errors.append(e)

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    with PostgresLog.open(postgres_url) as log:
        assert [log.head(f"s{w}") for w in range(4)] == [5] * 4 and log.verify() == []


def test_a_lock_lost_with_its_connection_is_reported_to_its_holder(postgres_url: str) -> None:
    """A session lock dies with its connection: the holder must not go on (reconnected) as if it held it, while
    another user takes it."""
    from storage.errors import ConnectionLost

    log = PostgresLog.open(postgres_url)
    with log.exclusive("publish t1") as taken:
        assert taken
        pid = log._live().execute("SELECT pg_backend_pid()").fetchone()[0]
        with psycopg.connect(postgres_url, autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
        with PostgresLog.open(postgres_url) as other, other.exclusive("publish t1", timeout_s=5) as theirs:
            assert theirs  # gone with the connection
        with pytest.raises(ConnectionLost, match="broke while holding the lock 'publish t1'"):
            log.head("s")
    assert log.head("s") == 0  # afterwards the handle reconnects
    with log.exclusive("publish t1") as outer, log.exclusive("publish t1") as inner:  # taken twice, let go twice
        assert outer and inner
    with PostgresLog.open(postgres_url) as other, other.exclusive("publish t1", timeout_s=1) as theirs:
        assert theirs
    log.close()


def test_server_refusals_are_typed_and_leave_the_handle_usable(postgres_url: str) -> None:
    from storage.errors import TransactionFailed

    with PostgresLog.open(postgres_url) as log:
        log.commit("c1", (write("s", 0),), time_ms=1)
    name = postgres_url.rsplit("/", 1)[1]
    with psycopg.connect(postgres_url, autocommit=True) as admin:
        admin.execute(f"ALTER DATABASE {name} SET default_transaction_read_only = on")  # a hot standby's answer
    with PostgresLog.open(postgres_url + "?application_name=standby") as log:  # a new session (not a pooled one)
        with pytest.raises(TransactionFailed, match=f"Cannot .*{name}.*read-only transaction"):
            log.commit("c2", (write("s", 1),), time_ms=2)
        assert log.head("s") == 1
    with psycopg.connect(postgres_url, autocommit=True) as admin:
        admin.execute("SET default_transaction_read_only = off")
        admin.execute(f"ALTER DATABASE {name} SET default_transaction_read_only = off")
    # a statement timeout (common on managed servers) cancelling the wait for the writer lock: LogBusy, and the
    # same handle commits once the lock is free
    timed = postgres_url + "?options=-c%20statement_timeout%3D500"
    with PostgresLog.open(timed) as log, PostgresLog.open(postgres_url) as holder:
        with holder.transaction():
            with pytest.raises(LogBusy, match="locked by another writer"):
                log.commit("c2", (write("s", 1),), time_ms=2)
        assert log.commit("c2", (write("s", 1),), time_ms=2).positions == (2,)


def test_bad_urls_fail_at_once_and_never_show_the_password(postgres_server) -> None:
    import time

    from storage.errors import LogError
    from storage.postgres_url import scrubbed

    host = postgres_server.url.split("@", 1)[1].split("/", 1)[0]
    assert redacted("postgresql://u:p#ss/w?rd@h/db") == "postgresql://u:***@h/db"  # as libpq reads it
    assert redacted("postgresql://u@h/db?sslmode=require&password=x") == "postgresql://u@h/db?sslmode=require&password=***"
    # an @ in the query is no user information: host, port and database stay readable
    assert redacted("postgresql://u:s3cret@h:5432/db?application_name=etl@nightly") == \
        "postgresql://u:***@h:5432/db?application_name=etl@nightly"
    assert redacted("postgresql://h:5432/db?user=u@server&password=x") == \
        "postgresql://h:5432/db?user=u@server&password=***"
    assert redacted("postgresql://u@h/db?pass%77ord=x&sslpass%77ord=y") == \
        "postgresql://u@h/db?pass%77ord=***&sslpass%77ord=***"  # libpq decodes parameter names
    assert is_postgres_url("postgresql://u@[::1/db")  # malformed, still a log's URL (its open names the fault)
    assert scrubbed('token "s3cr%zz" in "postgresql://u:s3cr%zz@h/d?password=q7x9"',
                    "postgresql://u:s3cr%zz@h/d?password=q7x9") == 'token "***" in "postgresql://u:***@h/d?password=***"'
    for url in (f"postgresql://icelog:Hunter%zz2pw@{host}/postgres",  # a bad %-escape
                f"postgresql://icelog:Wr0ngpw@{host}/no_such_database",
                f"postgresql://icelog@{host}/postgres?bogus_option=1",
                f"postgresql://icelog:Wr0ngpw@[::1/postgres"):
        started = time.monotonic()
        with pytest.raises(LogError) as raised:
            PostgresLog.open(url, busy_timeout_ms=20_000)
        assert time.monotonic() - started < 10, url  # not retried until the busy timeout
        assert "Wr0ng" not in str(raised.value) and "Hunter" not in str(raised.value), str(raised.value)


def test_a_writer_whose_connection_breaks_while_it_waits_for_the_lock_commits_on_a_new_one(postgres_url: str) -> None:
    """Nothing is written before the writer lock is granted: a connection lost while waiting for it (a server
    restart, a killed backend) is replaced, and the commit lands once, not 'outcome unknown'."""
    import queue
    import time

    pids: queue.Queue = queue.Queue()
    results: list = []

    def writer() -> None:
        with PostgresLog.open(postgres_url) as log:
            pids.put(log._live().execute("SELECT pg_backend_pid()").fetchone()[0])
            try:
                # as the engine commits: its build runs inside the write transaction
                results.append(log.run_in_transaction(lambda: log.commit("c1", (write("s", 0),), time_ms=1)))
            except Exception as e:  # noqa: BLE001 - asserted below
                results.append(e)

    with PostgresLog.open(postgres_url) as holder, holder.transaction():
        thread = threading.Thread(target=writer)
        thread.start()
        pid = pids.get(timeout=10)
        time.sleep(0.5)  # the writer waits for the lock the holder has
        with psycopg.connect(postgres_url, autocommit=True) as admin:
            assert admin.execute("SELECT wait_event_type FROM pg_stat_activity WHERE pid = %s",
                                 (pid,)).fetchone() == ("Lock",)
            admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
        time.sleep(0.3)
    thread.join(timeout=30)
    assert len(results) == 1 and not isinstance(results[0], Exception), results
    with PostgresLog.open(postgres_url) as log:
        assert [e.commit_id for e in log.read_stream("s")] == ["c1"] and log.verify() == []
