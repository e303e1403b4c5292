"""A loopback S3 server (moto's) for the demo, the benchmarks and the tests, and a proxy in front of it that counts
requests and injects faults.

Layer: tools (imports moto, pyarrow and the standard library; nothing of icelog). The proxy passes requests through
unchanged (the signature covers the Host header, which is forwarded as sent) until a fault is set: then chosen
requests get an HTTP error (500 or 503, as an overloaded S3 answers) or their connection is dropped, as when the
server stops. It counts what it forwards, by method.

::

    with LoopbackS3() as server, S3Proxy(server.endpoint) as proxy:
        server.create_bucket("icelog-demo")
        props = {**server.properties(), "s3.endpoint": proxy.endpoint}
        proxy.fail(lambda method, path: method == "PUT" and "metadata.json" in path, status=503)
        ...
        proxy.heal()
        proxy.requests           # Counter({"PUT": 5, "HEAD": 1})
"""

from __future__ import annotations

import http.client
import logging
import socket
import threading
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable
from urllib.parse import urlsplit

Matcher = Callable[[str, str], bool]

#: the keys of the loopback server (moto accepts any pair)
LOOPBACK_ACCESS_KEY = "icelog-loopback"
LOOPBACK_SECRET_KEY = "icelog-loopback-secret"


class LoopbackS3:
    """moto's S3 server on 127.0.0.1 and a free port, in a thread of this process, until the block ends."""

    def __init__(self, region: str = "us-east-1") -> None:
        self.region = region
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = int(probe.getsockname()[1])
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self._server: object | None = None

    def __enter__(self) -> LoopbackS3:
        from moto.server import ThreadedMotoServer

        logging.getLogger("werkzeug").setLevel(logging.ERROR)
        server = ThreadedMotoServer(ip_address="127.0.0.1", port=self.port, verbose=False)
        server.start()
        self._server = server
        return self

    def __exit__(self, *exc: object) -> None:
        if self._server is not None:
            self._server.stop()  # type: ignore[attr-defined]
            self._server = None

    def properties(self) -> dict[str, str]:
        """Iceberg FileIO properties that reach this server."""
        return {"s3.endpoint": self.endpoint, "s3.region": self.region, "s3.access-key-id": LOOPBACK_ACCESS_KEY,
                "s3.secret-access-key": LOOPBACK_SECRET_KEY, "s3.path-style-access": "true"}

    def create_bucket(self, name: str) -> None:
        import pyarrow.fs as pafs

        pafs.S3FileSystem(access_key=LOOPBACK_ACCESS_KEY, secret_key=LOOPBACK_SECRET_KEY, scheme="http",
                          endpoint_override=f"127.0.0.1:{self.port}", region=self.region,
                          allow_bucket_creation=True).create_dir(name)


class S3Proxy:
    """Forward HTTP requests to ``target`` (``http://host:port``), failing those a matcher picks."""

    def __init__(self, target: str) -> None:
        parts = urlsplit(target)
        self._target = (parts.hostname or "127.0.0.1", parts.port or 80)
        self._lock = threading.Lock()
        self._matcher: Matcher | None = None
        self._status = 503
        self._drop = False
        self.requests: Counter[str] = Counter()
        self.failed = 0
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def _handle(self) -> None:
                if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
                    body = self._read_chunked()  # forwarded as framed: aws-chunked signs the framing
                else:
                    length = int(self.headers.get("Content-Length") or 0)
                    body = self.rfile.read(length) if length else None
                with proxy._lock:
                    matcher, status, drop = proxy._matcher, proxy._status, proxy._drop
                    hit = matcher is not None and matcher(self.command, self.path)
                    if hit:
                        proxy.failed += 1
                    else:
                        proxy.requests[self.command] += 1
                if hit and drop:
                    self.close_connection = True
                    self.connection.close()
                    return
                if hit:
                    payload = (f"<?xml version='1.0' encoding='UTF-8'?><Error><Code>"
                               f"{'SlowDown' if status == 503 else 'InternalError'}</Code>"
                               f"<Message>injected</Message></Error>").encode()
                    self.send_response(status)
                    self.send_header("Content-Type", "application/xml")
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                    return
                conn = http.client.HTTPConnection(*proxy._target, timeout=60)
                try:
                    headers = {k: v for k, v in self.headers.items() if k.lower() != "connection"}
                    conn.request(self.command, self.path, body=body, headers=headers)
                    answer = conn.getresponse()
                    data = answer.read()
                    self.send_response(answer.status, answer.reason)
                    for key, value in answer.getheaders():
                        if key.lower() not in ("transfer-encoding", "connection", "content-length"):
                            self.send_header(key, value)
                    length = answer.getheader("Content-Length") if self.command == "HEAD" else None
                    self.send_header("Content-Length", length or str(len(data)))
                    self.end_headers()
                    if self.command != "HEAD":
                        self.wfile.write(data)
                finally:
                    conn.close()

            def _read_chunked(self) -> bytes:
                raw = bytearray()
                while True:
                    line = self.rfile.readline()
                    raw += line
                    size = int(line.split(b";", 1)[0].strip() or b"0", 16)
                    if size == 0:
                        while True:  # trailers up to the empty line
                            trailer = self.rfile.readline()
                            raw += trailer
                            if trailer in (b"\r\n", b"\n", b""):
                                return bytes(raw)
                    raw += self.rfile.read(size + 2)

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _handle

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.endpoint = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, name="faulty-s3", daemon=True)

    def __enter__(self) -> S3Proxy:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def fail(self, matcher: Matcher, *, status: int = 503, drop: bool = False) -> None:
        """Answer the requests ``matcher(method, path)`` picks with ``status`` (or drop their connection)."""
        with self._lock:
            self._matcher, self._status, self._drop = matcher, status, drop

    def stop(self) -> None:
        """Behave as a stopped server: every request's connection is dropped."""
        self.fail(lambda method, path: True, drop=True)

    def heal(self) -> None:
        with self._lock:
            self._matcher = None

    def reset_counts(self) -> None:
        with self._lock:
            self.requests.clear()
            self.failed = 0
