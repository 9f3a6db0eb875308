"""Calls to the active TubeMQ master, failing over along the configured address list.

Only one master is active at a time; the others answer every call with a ``StandbyException``.
Like the Java client (docs/protocol/wire.md §9), a call goes to the current master and, when that
master is a standby, unreachable, or does not answer in time, moves on to the next address and tries
again, at most once per address. The client then stays on the master that answered.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from tubemq_aio.checks import Checks
from tubemq_aio.config import HostPort
from tubemq_aio.errors import (
    NetworkError,
    RemoteRpcError,
    RequestTimeoutError,
    TubeMQError,
)
from tubemq_aio.protocol.rpc import Method

__all__ = ["MasterInvoker", "RpcCaller"]


class RpcCaller(Protocol):
    """The one transport operation master calls need (:class:`~tubemq_aio._io.rpc_client.RpcClient`
    in production, a fake in unit tests)."""

    async def call(self, addr: HostPort, method: Method, body: bytes, timeout: float) -> bytes:
        """Send the serialized request ``body`` to ``addr``; return the response bytes."""
        ...


def _should_fail_over(exc: TubeMQError) -> bool:
    if isinstance(exc, NetworkError | RequestTimeoutError):
        return True
    return isinstance(exc, RemoteRpcError) and exc.retriable


class MasterInvoker:
    """Sends master RPCs to the active master of a cluster.

    Args:
        rpc: the transport used for each attempt.
        masters: the master addresses, tried in this order.
        timeout: default per-attempt timeout in seconds.
    """

    def __init__(self, rpc: RpcCaller, masters: Sequence[HostPort], timeout: float) -> None:
        checks = Checks("MasterInvoker")
        if not masters:
            checks.problem("at least one master address is required")
        checks.done()
        self._rpc = rpc
        self._masters = tuple(masters)
        self._index = 0
        self._timeout = timeout
        self.failovers = 0

    def __repr__(self) -> str:
        return f"<MasterInvoker current={self.current} masters={len(self._masters)}>"

    @property
    def current(self) -> HostPort:
        """The master the next call goes to first."""
        return self._masters[self._index]

    @property
    def masters(self) -> tuple[HostPort, ...]:
        """All configured master addresses."""
        return self._masters

    async def call(self, method: Method, body: bytes, *, timeout: float | None = None) -> bytes:
        """Send one master RPC, failing over to the next master on standby or network errors.

        Args:
            method: the master method id.
            body: the serialized request message.
            timeout: per-attempt timeout in seconds (default: the invoker's).

        Returns:
            The serialized response message of the master that answered.

        Raises:
            TubeMQError: the error of the last attempt when every master failed, or at once any
                error that another master would not fix (for example a malformed request).
        """
        per_attempt = self._timeout if timeout is None else timeout
        last: TubeMQError | None = None
        for _ in range(len(self._masters)):
            addr = self._masters[self._index]
            try:
                return await self._rpc.call(addr, method, body, per_attempt)
            except TubeMQError as exc:
                if not _should_fail_over(exc):
                    raise
                last = exc
                self._index = (self._index + 1) % len(self._masters)
                self.failovers += 1
        assert last is not None
        raise last
