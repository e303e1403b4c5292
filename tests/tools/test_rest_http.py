"""The REST server acknowledges a request's headers at once when its body is still to come, so a client that holds
the body back until then (Nagle's algorithm, as DuckDB's HTTP client does) does not wait for a delayed ACK.

Layer: tests (a real uvicorn server with the server's settings on the loopback interface, a raw TCP client).
"""

from __future__ import annotations

import socket
import struct
import threading
import time
from typing import Any

import pytest
import uvicorn

from tools.ports import free_port
from tools.rest_http import PromptAckH11Protocol, PromptAckHttpToolsProtocol
from tools.rest_server import server_config

PROTOCOLS = [PromptAckH11Protocol, PromptAckHttpToolsProtocol]


def _unacked(sock: socket.socket) -> int:
    """Segments this client sent that the server has not acknowledged (``tcpi_unacked`` of Linux's tcp_info)."""
    return struct.unpack_from("I", sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 104), 24)[0]


def _response(sock: socket.socket) -> tuple[int, bytes]:
    """One HTTP/1.1 response read from ``sock``: its status and body (sized by Content-Length)."""
    data = b""
    while b"\r\n\r\n" not in data:
        data += sock.recv(65536)
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    length = next(int(line.split(":")[1]) for line in lines if line.lower().startswith("content-length:"))
    while len(body) < length:
        body += sock.recv(65536)
    return int(lines[0].split()[1]), body


def test_the_server_runs_httptools_and_uvloop_when_installed() -> None:
    config = server_config(lambda *_: None, "127.0.0.1", 1)
    assert config.http is PromptAckHttpToolsProtocol  # the server extra installs httptools
    assert config.loop == "auto"                        # uvicorn's choice: uvloop when installed


@pytest.mark.skipif(not hasattr(socket, "TCP_INFO"), reason="reads the client's TCP_INFO (Linux)")
@pytest.mark.parametrize("protocol", PROTOCOLS, ids=lambda p: p.__name__)
def test_headers_of_a_request_whose_body_is_to_come_are_acknowledged_at_once(protocol: type) -> None:
    headers_in = threading.Event()

    async def echo(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while (await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        if scope["method"] == "POST":
            headers_in.set()
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})

    port = free_port("127.0.0.1")
    config = server_config(echo, "127.0.0.1", port)
    config.http = protocol
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.01)
    try:
        with socket.create_connection(("127.0.0.1", port)) as client:  # Nagle on, as a client may leave it
            for _ in range(4):  # requests and answers: Linux now takes the connection for interactive
                client.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
                assert _response(client) == (200, b"")
            client.sendall(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\n")
            assert headers_in.wait(10)
            # the server has read the headers; a delayed ACK would leave them unacknowledged for up to 40 ms
            assert _unacked(client) == 0
            client.sendall(b"hello")
            assert _response(client) == (200, b"hello")
    finally:
        server.should_exit = True
        thread.join(timeout=30)
