"""Free TCP ports for the servers the tools and tests start on this machine (REST catalog, PostgreSQL, S3).

Layer: tools (the standard library's ``socket`` only).
"""

from __future__ import annotations

import socket


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port on ``host`` that nothing listens on right now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])
