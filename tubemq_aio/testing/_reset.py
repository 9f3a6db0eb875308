"""A real TCP reset, for the fake servers and the fault proxy."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct

__all__ = ["reset_transport"]

_LINGER_ZERO = struct.pack("ii", 1, 0)


def reset_transport(transport: asyncio.WriteTransport) -> None:
    """Abort ``transport`` so that the peer sees a TCP RST, not an orderly EOF.

    ``abort()`` alone sends a FIN when nothing is left unread; a zero linger time makes the
    kernel reset the connection instead, which is what a crashed or hostile peer produces.
    """
    sock = transport.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _LINGER_ZERO)
    transport.abort()
