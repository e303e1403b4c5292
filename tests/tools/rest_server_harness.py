"""A real icelog REST server on a free local port, in a background thread, for tests.

Layer: tests (imports tools.rest_server).

Usage::

    with running_server(warehouse, token="secret") as url:
        requests.get(f"{url}/v1/config", headers={"Authorization": "Bearer secret"})
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import uvicorn

from tools.rest_server import app


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def running_server(warehouse: Path | str, token: str) -> Iterator[str]:
    """Serve ``warehouse`` until the block ends; yields the base URL."""
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app(warehouse, token), host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, name=f"icelog-rest-{port}", daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the REST server did not start")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)
