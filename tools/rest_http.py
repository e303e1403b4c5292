"""The HTTP connection of icelog's REST server: uvicorn's protocols, acknowledging a request's headers at once.

Layer: tools (the REST server's transport; imports uvicorn, h11 and httptools, nothing of ours).

A client that sends a request's headers and its body in two writes with Nagle's algorithm on (DuckDB 1.4's HTTP
client does, for every POST) holds the body back until the headers are acknowledged. Linux delays that ACK by up
to 40 ms on a connection it takes for interactive (one that has carried requests and answers before), because
the receiver has nothing to send yet. Every commit DuckDB sent through the server waited those 40 ms: 60 ms per
INSERT, of which 20 were work. When a request's headers are in and its body is not, these protocols ask the
kernel to send the pending ACK now (``TCP_QUICKACK``, Linux only; elsewhere they do nothing).

:func:`server_protocol` picks uvicorn's httptools protocol (a C parser) when httptools is installed, as it is with
the ``server`` extra: it cut the server's CPU per DuckDB INSERT (four requests) by a quarter against the h11
protocol, the pure-Python fallback.
"""

from __future__ import annotations

import asyncio
import socket

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

try:
    import httptools  # noqa: F401 - uvicorn's httptools protocol needs it
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
except ImportError:  # the h11 protocol serves alone
    HttpToolsProtocol = None  # type: ignore[assignment,misc]

#: the socket option that sends a delayed ACK at once (None where the system has none)
QUICKACK: int | None = getattr(socket, "TCP_QUICKACK", None)


def _acknowledge_now(transport: asyncio.BaseTransport) -> None:
    """Send the ACK the kernel holds back for what the connection received last."""
    sock = transport.get_extra_info("socket")
    if QUICKACK is not None and sock is not None:
        try:
            sock.setsockopt(socket.IPPROTO_TCP, QUICKACK, 1)
        except (OSError, ValueError):  # the connection is gone (uvloop says so with ValueError): nothing to ack
            pass


class PromptAckH11Protocol(H11Protocol):
    """uvicorn's h11 protocol that acknowledges at once the headers of a request whose body is still to come (not
    those of a pipelined request parsed only once the one before it is answered: clients that wait for the ACK
    do not pipeline)."""

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self.conn.their_state is h11.SEND_BODY:
            _acknowledge_now(self.transport)


if HttpToolsProtocol is not None:
    class PromptAckHttpToolsProtocol(HttpToolsProtocol):
        """uvicorn's httptools protocol that acknowledges at once the headers of a request whose body is still to
        come (its request cycle has begun and wants more body)."""

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            cycle = getattr(self, "cycle", None)
            if cycle is not None and cycle.more_body and not cycle.response_complete:
                _acknowledge_now(self.transport)
else:
    PromptAckHttpToolsProtocol = None  # type: ignore[assignment,misc]


def server_protocol() -> type[asyncio.Protocol]:
    """The protocol the server runs: httptools' when installed, else h11's."""
    return PromptAckHttpToolsProtocol if PromptAckHttpToolsProtocol is not None else PromptAckH11Protocol
