"""The transport façade: the one way every client reaches a master or a broker.

Producer, both consumers, the master sessions and the transport benchmark all call
:meth:`RpcClient.call`: it takes the open connection to the peer (or opens one through the pool),
wraps the serialized business request in the RPC envelope, sends it and returns the business
response bytes. Building requests and parsing answers stays with the pure ``protocol`` modules.

Finding the connection is on every call's path, so each client remembers, by host and port
(its own TLS flag implied), the connection its pool last gave: two dictionary lookups on values
whose hashes are cached, no key built per call. Any peer object with that host and port finds
it; an :class:`~tubemq_aio._io.pool.Address` (which carries its own TLS flag) goes to the pool
directly. A remembered connection that closed is asked of the pool again; one the pool reaps is
closed at once (:meth:`ConnectionPool.reap`), so no client sends on it afterwards.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Sequence
from typing import Protocol

from tubemq_aio._io.connection import Connection
from tubemq_aio._io.decisions import wire_timeout_ms
from tubemq_aio._io.pool import Address, ConnectionPool
from tubemq_aio._io.stats import TransportStats
from tubemq_aio.checks import Checks
from tubemq_aio.protocol.rpc import SERVICE_OF_METHOD, Method, encode_request

__all__ = ["Endpoint", "RpcClient"]

_MAX_CACHED_TIMEOUTS = 1024
#: Addresses remembered (pool keys and connections); both tables start over when it is reached.
_MAX_REMEMBERED_ADDRESSES = 4096


class Endpoint(Protocol):
    """A ``host``/``port`` pair: an :class:`Address`, a ``HostPort``, a ``BrokerInfo``."""

    @property
    def host(self) -> str:
        """Host name or IP address."""
        ...

    @property
    def port(self) -> int:
        """TCP port."""
        ...


class RpcClient:
    """Calls to TubeMQ masters and brokers over a connection pool.

    Args:
        pool: where connections come from (the owner of this object closes it).
        tls: whether endpoints that are not an :class:`Address` (which carries its own flag) are
            TLS ports.
    """

    __slots__ = ("_conns", "_keys", "_wire_ms", "pool", "tls")

    def __init__(self, pool: ConnectionPool, *, tls: bool = False) -> None:
        self.pool = pool
        self.tls = tls
        self._keys: dict[tuple[str, int], Address] = {}
        #: host -> port -> the connection the pool last gave for it (see the module).
        self._conns: dict[str, dict[int, Connection]] = {}
        # timeout (s) -> RequestBody.timeout (ms) of the validated timeouts seen (bounded).
        self._wire_ms: dict[float, int] = {}

    def __repr__(self) -> str:
        return f"<RpcClient tls={self.tls} pool={self.pool!r}>"

    @property
    def stats(self) -> TransportStats:
        """The pool's transport counters."""
        return self.pool.stats

    def address(self, peer: Endpoint) -> Address:
        """The pool key of ``peer``."""
        if peer.__class__ is Address:
            return peer
        key = (peer.host, peer.port)
        address = self._keys.get(key)
        if address is None:
            if len(self._keys) >= _MAX_REMEMBERED_ADDRESSES:
                self._keys.clear()
                self._conns.clear()
            address = self._keys[key] = Address(peer.host, peer.port, self.tls)
        return address

    def ready(self, peer: Endpoint) -> Connection | None:
        """The open connection to ``peer`` if there is one (no I/O, no await)."""
        if type(peer) is Address:  # carries its own TLS flag: the pool key itself
            return self.pool.ready(peer)
        ports = self._conns.get(peer.host)
        conn = None if ports is None else ports.get(peer.port)
        if conn is not None and not conn.is_closed:
            return conn
        address = self.address(peer)
        conn = self.pool.ready(address)
        if conn is not None:
            self._conns.setdefault(address.host, {})[address.port] = conn
        elif ports is not None:  # a closed one is not kept alive (nor its read buffer)
            ports.pop(address.port, None)
        return conn

    def connected(self, peer: Endpoint) -> bool:
        """Whether an open connection to ``peer`` exists (no I/O)."""
        return self.ready(peer) is not None

    def retry_in(self, peer: Endpoint) -> float:
        """Seconds before the pool allows a connect to ``peer`` again (0.0: now; no I/O)."""
        return self.pool.retry_in(self.address(peer))

    async def connect(self, peer: Endpoint) -> Connection:
        """Open (or reuse) the connection to ``peer`` without sending anything.

        Raises:
            ConnectError: the connect failed, timed out, or the address is backing off.
            ClientClosedError: the pool is closed.
        """
        return self.ready(peer) or await self.pool.connection(self.address(peer))

    async def call(
        self, peer: Endpoint, method: Method, body: bytes, timeout: float, *, raw: bool = False
    ) -> bytes:
        """Send the serialized request ``body`` and wait for the business response bytes.

        Args:
            peer: the master or broker.
            method: the RPC method id; its service type comes from ``SERVICE_OF_METHOD``.
            body: the serialized business request.
            timeout: seconds for the whole call; also sent as ``RequestBody.timeout`` (ms).
            raw: a plain SUCCESS answer comes back whole, envelope included (see
                :meth:`Connection.call <tubemq_aio._io.connection.Connection.call>`).

        Returns:
            The business response bytes (parse them with the ``protocol`` module of the call).

        Raises:
            ConnectError: no connection (connect failed or backing off): not sent.
            RequestNotSentError: the connection was lost before the request was written.
            WriteTimeoutError: no room to write, or no connection open, within ``timeout`` (not
                sent).
            RequestTimeoutError: no answer within ``timeout`` (it may have been processed).
            ConnectionLostError: the connection broke after the request was written.
            RemoteRpcError: the server answered with an exception frame.
            RemoteProtocolError: the answer could not be decoded.
            ClientClosedError: the pool or the connection was closed by its owner.
            ConfigError: ``timeout`` is not a positive finite number (nothing is sent).
        """
        timeout_ms = self._wire_ms.get(timeout) or self._timeout_ms(timeout)
        payload = encode_request(SERVICE_OF_METHOD[method], method, timeout_ms, body)
        return await self.call_payload(peer, payload, timeout, raw=raw)

    async def call_payload(
        self, peer: Endpoint, payload: bytes, timeout: float, *, raw: bool = False
    ) -> bytes:
        """:meth:`call` with the request payload (RPC envelope included) built by the caller.

        Args:
            peer: the master or broker.
            payload: the request payload (e.g. ``encode_request`` output).
            timeout: seconds for the whole call (validated with :meth:`wire_timeout`).
            raw: as for :meth:`call`.

        Raises:
            The errors of :meth:`call`.
        """
        conn = self.ready(peer) or await self.pool.connection(self.address(peer), timeout)
        return await conn.call(payload, timeout, raw=raw)

    def start_parts(
        self, peer: Endpoint, parts: Sequence[bytes], size: int, timeout: float
    ) -> tuple[Connection, int, asyncio.Future[bytes]] | None:
        """Send a request now over an open connection with room, without awaiting anything.

        The hot path of :meth:`call_payload` for callers that await the answer themselves (one
        coroutine frame less per call), with the payload in pieces (joined when written).

        Args:
            peer: the master or broker.
            parts: the request payload (RPC envelope included) in pieces.
            size: the payload length.
            timeout: seconds to wait for the answer (validated with :meth:`wire_timeout`).

        Returns:
            ``(connection, serial, future)``: the future ends as :meth:`call` would return or
            raise; a caller that stops waiting (cancelled) must call
            ``connection.abandon(serial)``. ``None`` when there is no open connection or no room
            right now: nothing was sent, use :meth:`call_payload`.
        """
        # ready() inlined for a remembered connection (the hot path; subscripts cost less than
        # dict.get calls, and a miss is rare: a peer's first call, or after a reconnect).
        if type(peer) is not Address:
            try:
                conn = self._conns[peer.host][peer.port]
            except KeyError:
                pass
            else:
                started = conn.start_parts(parts, size, timeout)
                if started is not None or not conn.is_closed:
                    return started  # sent, or open with no room right now
        latest = self.ready(peer)  # not remembered, closed, or an Address: ask the pool
        return None if latest is None else latest.start_parts(parts, size, timeout)

    def wire_timeout(self, timeout: float) -> int:
        """``RequestBody.timeout`` in ms for a call of ``timeout`` seconds (cached).

        Raises:
            ConfigError: ``timeout`` is not a positive finite number.
        """
        return self._wire_ms.get(timeout) or self._timeout_ms(timeout)

    def _timeout_ms(self, timeout: float) -> int:
        """Validate ``timeout`` and remember its wire value."""
        checks = Checks("RpcClient.call")
        # Any finite positive duration: a huge one is capped on the wire (wire_timeout_ms).
        checks.number("timeout", timeout, low=0.0, high=math.inf, low_open=True, unit="seconds")
        checks.done()
        if len(self._wire_ms) >= _MAX_CACHED_TIMEOUTS:
            self._wire_ms.clear()
        ms = self._wire_ms[timeout] = wire_timeout_ms(timeout)
        return ms
