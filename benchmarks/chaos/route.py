"""Send the clients' connections to one broker through a :class:`FaultProxy`.

Clients learn broker addresses from the master, so a proxy cannot be handed to them as an
address. Instead, while :func:`route_through` is active, every connection this process opens to
``target`` (from any event loop or thread) dials the proxy, while the connection pool keeps
filing it under the broker's address.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from tubemq_aio._io import pool
from tubemq_aio.config import parse_host_port

__all__ = ["route_through"]


class _Routed(pool.Address):
    """An address that dials the proxy but equals (and hashes as) the broker's address."""

    real: pool.Address

    def __eq__(self, other: object) -> bool:
        return self.real == other

    def __ne__(self, other: object) -> bool:
        return self.real != other

    def __hash__(self) -> int:
        return hash(self.real)


@contextlib.contextmanager
def route_through(target: str, proxy: str) -> Iterator[None]:
    """Redirect connections to ``target`` (``host:port``) to ``proxy`` while the block runs.

    Args:
        target: The broker's address as the master hands it out.
        proxy: The proxy's listening address.
    """
    src, dst = parse_host_port(target), parse_host_port(proxy)
    original = pool.ConnectionPool._connect

    async def connect(self: Any, address: pool.Address) -> Any:
        if (address.host, address.port) == (src.host, src.port):
            routed = _Routed(dst.host, dst.port, address.tls)
            routed.real = pool.Address(*address)
            address = routed
        return await original(self, address)

    pool.ConnectionPool._connect = connect  # type: ignore[method-assign]
    try:
        yield
    finally:
        pool.ConnectionPool._connect = original  # type: ignore[method-assign]
