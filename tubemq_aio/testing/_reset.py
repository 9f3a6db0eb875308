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

    Safe to call again on a transport already aborted or closed, on asyncio's loop and on
    uvloop alike: uvloop hands out a socket object whose descriptor is ``-1`` once the transport
    is closed, and ``setsockopt`` on it raises ``ValueError`` (not ``OSError``).
    """
    if not transport.is_closing():
        sock = transport.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError, ValueError):
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _LINGER_ZERO)
    transport.abort()
