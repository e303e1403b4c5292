"""A commit whose connection to PostgreSQL breaks at ``COMMIT`` while the server still commits it, late: the
client first learns nothing, then asks the log, outside the writer lock, while the transaction is still open on
the server (not landed, as far as that read can tell). The next attempt asks again once it holds the writer lock,
when the earlier transaction has ended: the append returns the commit that landed late, once, with its files.
Before, the rebuilt attempt met its own commit id in the log, was refused as a different write, and the data file
of the landed snapshot was deleted.

Layer: tests (a real PostgreSQL server behind a TCP proxy on the loopback interface that holds one ``COMMIT``
back; the client's socket is closed at once).
"""

from __future__ import annotations

import socket
import threading
import time
from pathlib import Path

import pyarrow as pa

from engine import Catalog

SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string())])
_STARTUP_CODES = (80877103, 80877104)  # SSLRequest and GSSENCRequest: answered before the startup message


def rows(ids: list[int]) -> pa.Table:
    return pa.table({"id": pa.array(ids, pa.int64()), "name": [f"x{i}" for i in ids]})


class LateCommitProxy:
    """A TCP proxy to a PostgreSQL server. Once armed, the first ``COMMIT`` a connection sends after inserting a
    commit row is held back: the client's socket closes at once, and the ``COMMIT`` reaches the server ``delay_s``
    later; its answer goes nowhere. Messages are framed to know the query each one runs (psycopg prepares the
    queries it runs often, and then only names them)."""

    def __init__(self, port: int, delay_s: float) -> None:
        self.target = ("127.0.0.1", port)
        self.delay_s = delay_s
        self.armed = False
        self.late_commit_sent = threading.Event()
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def url(self, url: str) -> str:
        credentials, rest = url.split("@", 1)
        return f"{credentials}@127.0.0.1:{self.port}/{rest.split('/', 1)[1]}"

    def close(self) -> None:
        self.listener.close()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(self.target)
            held = threading.Event()
            threading.Thread(target=self._to_server, args=(client, upstream, held), daemon=True).start()
            threading.Thread(target=self._to_client, args=(upstream, client, held), daemon=True).start()

    def _to_server(self, client: socket.socket, upstream: socket.socket, held: threading.Event) -> None:
        buf, untyped, primed = b"", True, False
        statements: dict[bytes, bytes] = {}
        try:
            while True:
                data = client.recv(65536)
                if not data:
                    upstream.close()
                    return
                buf += data
                while True:
                    if untyped:  # the startup message and its requests carry no type byte
                        if len(buf) < 8 or len(buf) < int.from_bytes(buf[:4], "big"):
                            break
                        n = int.from_bytes(buf[:4], "big")
                        msg, buf = buf[:n], buf[n:]
                        untyped = int.from_bytes(msg[4:8], "big") in _STARTUP_CODES
                        upstream.sendall(msg)
                        continue
                    if len(buf) < 5 or len(buf) < int.from_bytes(buf[1:5], "big") + 1:
                        break
                    n = int.from_bytes(buf[1:5], "big") + 1
                    msg, buf = buf[:n], buf[n:]
                    kind, body = msg[:1], msg[5:]
                    query = None
                    if kind == b"P":    # Parse: a named statement
                        name, rest = body.split(b"\0", 1)
                        query = statements[name] = rest.split(b"\0", 1)[0]
                    elif kind == b"B":  # Bind: runs a statement by name
                        name = body.split(b"\0", 2)[1]
                        query = statements.get(name, b"") if name else None
                    elif kind == b"Q":  # a simple query
                        query = body.split(b"\0", 1)[0]
                    if query is not None and self.armed:
                        if query.startswith(b"INSERT INTO commits"):
                            primed = True
                        elif primed and query == b"COMMIT":
                            self.armed = False
                            held.set()
                            client.shutdown(socket.SHUT_RDWR)
                            client.close()  # the client learns nothing: the connection is lost
                            threading.Thread(target=self._send_late, args=(upstream, msg + buf),
                                             daemon=True).start()
                            return
                    upstream.sendall(msg)
        except OSError:
            return

    def _send_late(self, upstream: socket.socket, messages: bytes) -> None:
        time.sleep(self.delay_s)
        upstream.sendall(messages)
        upstream.sendall(b"S\0\0\0\4")  # a Sync, in case the round's had not arrived yet
        self.late_commit_sent.set()
        time.sleep(1.0)
        upstream.close()

    def _to_client(self, upstream: socket.socket, client: socket.socket, held: threading.Event) -> None:
        try:
            while True:
                data = upstream.recv(65536)
                if not data:
                    if not held.is_set():
                        client.close()
                    return
                if not held.is_set():  # the answer to the late COMMIT goes nowhere
                    client.sendall(data)
        except OSError:
            return


def test_an_append_whose_commit_lands_after_its_connection_broke_returns_it_once_with_its_files(
        postgres_server, postgres_url: str, tmp_path: Path) -> None:
    proxy = LateCommitProxy(postgres_server.port, delay_s=2.0)
    warehouse = str(tmp_path / "lake")
    try:
        with Catalog.open(proxy.url(postgres_url), warehouse=warehouse) as cat:
            cat.create_namespace("db")
            t = cat.create_table("db.t", SCHEMA)
            t.append(rows([1]))
            proxy.armed = True
            snap = t.append(rows([2]))
            assert proxy.late_commit_sent.is_set()
    finally:
        proxy.close()
    with Catalog.open(postgres_url, warehouse=warehouse) as cat:
        t = cat.load_table("db.t")
        assert len(t.snapshots()) == 2 and t.current_snapshot().snapshot_id == snap.snapshot_id  # landed once
        assert sorted(t.scan().to_arrow().column("id").to_pylist()) == [1, 2]       # its data file is there
        assert cat.verify("db.t") == [] and cat.log.verify() == []
