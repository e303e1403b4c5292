"""The HTTP connection of icelog's REST server: uvicorn's h11 protocol, acknowledging a request's headers at once.

Layer: tools (the REST server's transport; imports uvicorn and h11, nothing of ours).

A client that sends a request's headers and its body in two writes with Nagle's algorithm on (DuckDB 1.4's HTTP
client does, for every POST) holds the body back until the headers are acknowledged. Linux delays that ACK by up
to 40 ms on a connection it takes for interactive (one that has carried requests and answers before), because
the receiver has nothing to send yet. Every commit DuckDB sent through the server waited those 40 ms: 60 ms per
INSERT, of which 20 were work. When a request's headers are in and its body is not, this protocol asks the
kernel to send the pending ACK now (``TCP_QUICKACK``, Linux only; elsewhere it does nothing).
"""

from __future__ import annotations

import socket

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

#: the socket option that sends a delayed ACK at once (None where the system has none)
QUICKACK: int | None = getattr(socket, "TCP_QUICKACK", None)


class PromptAckH11Protocol(H11Protocol):
    """uvicorn's h11 protocol that acknowledges at once the headers of a request whose body is still to come."""

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if QUICKACK is not None and self.conn.their_state is h11.SEND_BODY:
            sock = self.transport.get_extra_info("socket")
            if sock is not None:
                try:
                    sock.setsockopt(socket.IPPROTO_TCP, QUICKACK, 1)
                except OSError:  # the connection is gone: nothing to acknowledge
                    pass
