"""Script calls of a fetch packed by the gateway and sent on a pooled connection of one server.

A fetch runs three scripts (settle, acquire, record) of about twenty arguments each, and
redis-py 8 spent most of the replica's Python calls of a fetch on them: each argument encoded
through its ``Encoder`` and joined piece by piece, the command's retry wrapper, observability
hooks and the pipeline object (docs/gateway.md, "The script calls packed by the gateway"). On
a single server (``redis://``, ``rediss://``, ``unix://``: a plain pool) the gateway packs the
``EVALSHA`` commands itself, the part that is the same for every call of a script on a scope
(the command, the script's SHA and the 9 keys) packed once and kept, and sends them as
redis-py's client does: a connection from the client's pool, one ``send_packed_command``, one
``read_response`` per command, the connection back to the pool. The bytes on the wire are
those redis-py writes for the same arguments, and the connection's own error handling is
unchanged (it closes itself on a timeout, an ``OSError`` or a cancel between its write and its
answers). Only a pool whose connections retry nothing themselves takes this path (the
gateway's: ``Retry`` with 0 retries), so
:class:`~tubemq_aio.gateway.leases.roundtrips.RoundTrips` stays the one place that retries; an
answer ``NOSCRIPT`` reaches it as redis-py raises it.

Sentinel and Cluster clients keep redis-py's own path (they resolve the primary or the slot's
node per command).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import redis.asyncio as aioredis
from redis.exceptions import ResponseError

from tubemq_aio.gateway.leases.redis_client import RedisClient, ShieldedBlockingPool

__all__ = ["PackedCalls", "packed_calls_for"]

#: Packed command heads kept at most (script, scope and argument count each; emptied when full).
_HEADS_MAX = 4096
#: One script call: the script's SHA (hex text), its keys (encoded), its other arguments.
ScriptCall = tuple[str, tuple[bytes, ...], Sequence[Any]]


def _bulk(value: bytes) -> bytes:
    return b"$%d\r\n%b\r\n" % (len(value), value)


class PackedCalls:
    """``EVALSHA`` calls packed here and sent on a connection of ``pool`` (see the module).

    Args:
        pool: the single-server client's connection pool (its encoder settings are used for
            text arguments).
    """

    def __init__(self, pool: aioredis.ConnectionPool) -> None:
        self.pool = pool
        kwargs = pool.connection_kwargs
        self._encoding: str = kwargs.get("encoding", "utf-8")
        self._errors: str = kwargs.get("encoding_errors", "strict")
        self._heads: dict[tuple[str, tuple[bytes, ...], int], bytes] = {}

    def pack(self, sha: str, keys: tuple[bytes, ...], args: Sequence[Any]) -> bytes:
        """``EVALSHA sha len(keys) *keys *args`` in the Redis protocol, as redis-py packs it.

        ``args`` are ``bytes``, ``str`` (encoded with the pool's encoding) or ``int``; any
        other type goes through redis-py's own encoder (which refuses a ``bool``).
        """
        head = self._heads.get((sha, keys, len(args)))
        if head is None:
            head = self._head(sha, keys, len(args))
        parts = [head]
        append = parts.append
        for arg in args:
            kind = type(arg)
            if kind is bytes:
                value = arg
            elif kind is str:
                value = arg.encode(self._encoding, self._errors)
            elif kind is int:
                value = b"%d" % arg
            else:
                value = self._encoder().encode(arg)
            append(b"$%d\r\n%b\r\n" % (len(value), value))
        return b"".join(parts)

    def _head(self, sha: str, keys: tuple[bytes, ...], argc: int) -> bytes:
        count = 3 + len(keys) + argc
        head = b"*%d\r\n$7\r\nEVALSHA\r\n%b%b%b" % (
            count,
            _bulk(sha.encode("ascii")),
            _bulk(b"%d" % len(keys)),
            b"".join(_bulk(key) for key in keys),
        )
        if len(self._heads) >= _HEADS_MAX:
            self._heads.clear()
        self._heads[(sha, keys, argc)] = head
        return head

    def _encoder(self) -> Any:
        return self.pool.get_encoder()  # type: ignore[no-untyped-call]

    async def call(self, calls: Sequence[ScriptCall]) -> list[Any]:
        """Send ``calls`` in one write on one pooled connection and read their answers.

        Returns:
            One answer per call, in order; a call Redis refused is its ``ResponseError``
            (``NoScriptError`` among them), as a redis-py pipeline gives it.

        Raises:
            redis.exceptions.ConnectionError / TimeoutError: as redis-py raises them (the
                connection closed itself).
        """
        packed = b"".join(self.pack(sha, keys, args) for sha, keys, args in calls)
        conn = await self.pool.get_connection()  # type: ignore[no-untyped-call]
        try:
            await conn.send_packed_command(packed)
            out: list[Any] = []
            for _ in calls:
                try:
                    out.append(await conn.read_response())
                except ResponseError as exc:
                    out.append(exc)
            return out
        finally:
            await self.pool.release(conn)

    async def call_one(self, sha: str, keys: tuple[bytes, ...], args: Sequence[Any]) -> Any:
        """One script call (see :meth:`call`).

        Raises:
            redis.exceptions.ResponseError: Redis refused it (``NoScriptError`` when the
                script is not loaded).
            redis.exceptions.ConnectionError / TimeoutError: as :meth:`call`.
        """
        (answer,) = await self.call(((sha, keys, args),))
        if isinstance(answer, ResponseError):
            raise answer
        return answer


#: The pools of one server (a Sentinel pool, a subclass, finds the primary per connection).
_PLAIN_POOLS = (aioredis.ConnectionPool, aioredis.BlockingConnectionPool, ShieldedBlockingPool)
#: Connection settings that give redis-py's commands retries of their own.
_RETRY_SETTINGS = ("retry", "retry_on_error", "retry_on_timeout")


def packed_calls_for(client: RedisClient) -> PackedCalls | None:
    """The packed path for ``client`` when it is a single server's client on a plain pool whose
    connections retry nothing themselves (the gateway's, see ``open_redis``); None for Sentinel
    and Cluster clients and for any other client (they keep redis-py's path)."""
    if type(client) is not aioredis.Redis or client.single_connection_client:
        return None
    pool = client.connection_pool
    if type(pool) not in _PLAIN_POOLS:
        return None
    if any(pool.connection_kwargs.get(name) for name in _RETRY_SETTINGS):
        return None
    return PackedCalls(pool)
