"""A small RPC façade: protobuf request in, protobuf response out, over the pool.

Envelope decoding happens in ``data_received`` (it decides whether a connection must close);
the business message is parsed here, in the awaiting caller or the completion callback.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Protocol, TypeVar

from google.protobuf.message import DecodeError, Message

from tubemq_aio._io.pool import Address, ConnectionPool
from tubemq_aio.errors import RemoteProtocolError
from tubemq_aio.protocol.rpc import SERVICE_OF_METHOD, Method, encode_request

__all__ = ["Endpoint", "RpcClient", "Serializable"]

M = TypeVar("M", bound=Message)


class Serializable(Protocol):
    """Anything with protobuf's ``SerializeToString``."""

    def SerializeToString(self) -> bytes:
        """Return the wire bytes of the message."""
        ...


class Endpoint(Protocol):
    """A ``host``/``port`` pair: :class:`~tubemq_aio._io.pool.Address` or ``config.HostPort``."""

    @property
    def host(self) -> str:
        """Host name or IP address."""
        ...

    @property
    def port(self) -> int:
        """TCP port."""
        ...


def _timeout_ms(timeout: float) -> int:
    return max(1, int(timeout * 1000))


def _parse(response_type: type[M], data: bytes, method: Method) -> M:
    try:
        return response_type.FromString(data)
    except DecodeError as exc:
        raise RemoteProtocolError(
            f"cannot parse the {response_type.__name__} answer to {method.name}: {exc}"
        ) from exc


class RpcClient:
    """Sync, async and oneway RPC calls to TubeMQ masters and brokers.

    Args:
        pool: the connection pool to use (not closed by this object).
        tls: whether endpoints that are not an :class:`Address` (which carries its own flag) are
            reached over TLS.
    """

    def __init__(self, pool: ConnectionPool, *, tls: bool = False) -> None:
        self.pool = pool
        self.tls = tls
        self._keys: dict[Endpoint, Address] = {}

    def _address(self, addr: Endpoint) -> Address:
        if addr.__class__ is Address:
            return addr
        key = self._keys.get(addr)
        if key is None:
            key = self._keys[addr] = Address(addr.host, addr.port, self.tls)
        return key

    def __repr__(self) -> str:
        return f"<RpcClient pool={self.pool!r}>"

    async def call(
        self,
        addr: Endpoint,
        method: Method,
        request: Serializable,
        response_type: type[M],
        timeout: float,
    ) -> M:
        """Send ``request`` and wait for the parsed response.

        Args:
            addr: the master or broker (an :class:`Address` or anything with host and port).
            method: the RPC method id; its service type comes from ``SERVICE_OF_METHOD``.
            request: the business request message.
            response_type: the protobuf class of the response.
            timeout: seconds to wait; also sent as ``RequestBody.timeout`` (ms).

        Returns:
            The parsed response message.

        Raises:
            RemoteRpcError: the server answered with an exception frame.
            RequestTimeoutError: no answer in time (it may have been processed).
            NetworkError: connect failure or connection lost.
            RemoteProtocolError: the answer could not be parsed.
        """
        address = self._address(addr)
        conn = self.pool.ready(address) or await self.pool.connection(address)
        payload = encode_request(
            SERVICE_OF_METHOD[method], method, _timeout_ms(timeout), request.SerializeToString()
        )
        data = await conn.call(payload, timeout)
        return _parse(response_type, data, method)

    async def call_async(
        self,
        addr: Endpoint,
        method: Method,
        request: Serializable,
        response_type: type[M],
        timeout: float,
        callback: Callable[[asyncio.Future[M]], object] | None = None,
    ) -> asyncio.Future[M]:
        """Send ``request`` and return the future of the parsed response.

        Waits only for a connection and for room (in-flight and async bounds).

        Args:
            addr: the master or broker (an :class:`Address` or anything with host and port).
            method: the RPC method id.
            request: the business request message.
            response_type: the protobuf class of the response.
            timeout: seconds until the future fails with ``RequestTimeoutError``.
            callback: called with the future when it is done.

        Returns:
            A future of the parsed response; it fails like :meth:`call` raises.
        """
        address = self._address(addr)
        conn = self.pool.ready(address) or await self.pool.connection(address)
        payload = encode_request(
            SERVICE_OF_METHOD[method], method, _timeout_ms(timeout), request.SerializeToString()
        )
        out: asyncio.Future[M] = asyncio.get_running_loop().create_future()

        def done(inner: asyncio.Future[bytes]) -> None:
            if out.done():
                return
            if inner.cancelled():
                out.cancel()
                return
            exc = inner.exception()
            if exc is not None:
                out.set_exception(exc)
                return
            try:
                out.set_result(_parse(response_type, inner.result(), method))
            except RemoteProtocolError as error:
                out.set_exception(error)

        await conn.call_async(payload, timeout, done)
        if callback is not None:
            out.add_done_callback(callback)
        return out

    async def call_oneway(
        self, addr: Endpoint, method: Method, request: Serializable, timeout: float
    ) -> None:
        """Send ``request`` without expecting an answer.

        Args:
            addr: the master or broker (an :class:`Address` or anything with host and port).
            method: the RPC method id.
            request: the business request message.
            timeout: sent as ``RequestBody.timeout`` (the server drops the request after it).
        """
        address = self._address(addr)
        conn = self.pool.ready(address) or await self.pool.connection(address)
        payload = encode_request(
            SERVICE_OF_METHOD[method], method, _timeout_ms(timeout), request.SerializeToString()
        )
        await conn.call_oneway(payload)
