"""Probes of a stopped server's port: another socket asking for it, a connect to it."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import Iterator

__all__ = ["another_socket_on", "refused"]


@contextlib.contextmanager
def another_socket_on(port: int, host: str = "127.0.0.1") -> Iterator[bool]:
    """For the block, another socket asks for ``host:port`` (bound without ``SO_REUSEADDR``, as
    a socket the kernel gave the port to holds it) and keeps it if it got it; yields whether it
    got it (False: the port is held)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((host, port))
        except OSError:  # EADDRINUSE
            yield False
        else:
            yield True


async def refused(port: int, host: str = "127.0.0.1") -> bool:
    """Whether a connect to ``host:port`` is refused (a stopped process's port)."""
    try:
        _, writer = await asyncio.wait_for(asyncio.open_connection(host, port), 5)
    except ConnectionRefusedError:
        return True
    writer.close()
    return False
