"""A stopped test server's port, kept bound until it listens there again: :class:`PortHold`.

The fake nodes (``FakeCluster.stop_broker`` / ``stop_master``) and a ``FaultProxy`` that
refuses connections restart on their old port. Between the stop and the restart the port was
free, and the kernel could give it to any socket of the machine that asked for a free port
(another test's server, in a parallel run): the restart then failed to bind ("address already
in use"), the node stayed away for good, and a client that should have seen it come back failed
at its deadline instead (a send across every broker restarting at once, seen once in a 10-worker
run). A socket bound to the port but not listening keeps it: connects to it are refused, as to a
stopped process, and the kernel gives the port to no one asking for a free one; the restart
listens on that very socket.

A local cluster's node is a JVM, which binds its ports itself: :class:`PortHolds` keeps them
while the node is down and lets them go right before the JVM is started again.
"""

from __future__ import annotations

import asyncio
import os
import socket
from collections.abc import Awaitable, Callable

__all__ = ["PortHold", "PortHolds"]

#: The address a held node port is bound on: TubeMQ and ZooKeeper bind the wildcard.
_WILDCARD = "0.0.0.0"


class PortHold:
    """Holds at most one ``host:port`` with a bound, non-listening socket.

    A hold that cannot bind (the port was taken in the instant between the listener's close and
    :meth:`hold`) holds nothing: the restart then binds the port itself, as it did before.
    """

    __slots__ = ("_port", "_sock")

    def __init__(self) -> None:
        self._sock: socket.socket | None = None
        self._port = 0

    def __repr__(self) -> str:
        return f"<PortHold {self._port if self._sock is not None else 'nothing'}>"

    @property
    def port(self) -> int | None:
        """The port held now (None: nothing)."""
        return self._port if self._sock is not None else None

    def hold(self, host: str, port: int) -> None:
        """Release what was held, then bind ``host:port`` (an IPv4 address) without listening.

        Call it right after the port's listening socket closed, without awaiting in between.
        """
        self.release()
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            if os.name == "posix":  # as asyncio's servers: the closed links' TIME_WAIT is no bar
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((host, port))
        except OSError:
            sock.close()
            return
        self._sock, self._port = sock, port

    async def listen(
        self, port: int, serve: Callable[[socket.socket], Awaitable[asyncio.Server]]
    ) -> asyncio.Server | None:
        """The server ``serve`` starts on the held socket when it holds ``port`` (the server
        owns the socket from then on; it is closed if ``serve`` fails), else None (anything
        else held is released: the caller binds ``port`` itself)."""
        sock, self._sock = self._sock, None
        if sock is None or self._port != port:
            if sock is not None:
                sock.close()
            return None
        try:
            return await serve(sock)
        except BaseException:
            sock.close()
            raise

    def release(self) -> None:
        """Close the held socket, if any (the port is free again)."""
        sock, self._sock = self._sock, None
        if sock is not None:
            sock.close()


class PortHolds:
    """Holds several ports of a stopped process (bound on the wildcard, not listening), for a
    process that binds them itself when it starts again: release them right before starting
    it. The cluster's own reservations (``_ports``) keep the ports from its other processes of
    this user and out of the kernel's ephemeral range; the holds also keep them from every
    other socket while the process is down (when no range outside the ephemeral one is usable,
    the ports are ephemeral ones the kernel could hand out)."""

    __slots__ = ("_holds",)

    def __init__(self) -> None:
        self._holds: list[PortHold] = []

    def __repr__(self) -> str:
        return f"<PortHolds {self._holds!r}>"

    @property
    def held(self) -> tuple[int, ...]:
        """The ports held now."""
        return tuple(p for h in self._holds if (p := h.port) is not None)

    def hold(self, ports: tuple[int, ...]) -> None:
        """Release what was held, then hold each of ``ports`` that can be bound (a port already
        bound elsewhere is skipped: its start then meets what it met before; 0, a port not
        used, too)."""
        self.release()
        for port in ports:
            if port <= 0:
                continue
            hold = PortHold()
            hold.hold(_WILDCARD, port)
            self._holds.append(hold)

    def release(self) -> None:
        """Close every held socket (the ports are free again)."""
        holds, self._holds = self._holds, []
        for hold in holds:
            hold.release()
