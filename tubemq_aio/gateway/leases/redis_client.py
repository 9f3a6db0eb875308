"""The gateway's Redis client, built from its ``redis`` URL: one server, Sentinel or Cluster.

Three forms (see ``docs/gateway.md``, "Redis topologies"):

* ``redis://[user:password@]host:port/db``, ``rediss://…``, ``unix://…``: one server (with or
  without replicas the gateway does not know of).
* ``redis+sentinel://[user:password@]h1:26379,h2:26379/<service>/<db>``: the primary of
  ``service`` as the sentinels name it; after a failover the next connection asks them again.
  The credentials are the data nodes'; the sentinels' are the query's ``sentinel_username`` and
  ``sentinel_password`` (none by default).
* ``redis+cluster://[user:password@]h1:7000,h2:7001[/0]``: a Redis Cluster; the hosts are seeds,
  the client learns the slot map and follows ``MOVED``. Every gateway key of a group carries the
  hash tag ``{g:<group>}``, so every script touches one slot.

``rediss+sentinel://`` and ``rediss+cluster://`` speak TLS to every node (the sentinels too);
their query takes the TLS options of :mod:`.redis_options`, as ``rediss://`` takes redis-py's.

A ``[redis]`` table (``url``, ``max_connections``, ``ack_replicas``, ``ack_wait_ms`` and the
URL options of :mod:`.redis_options`) may stand for the top-level ``redis*`` settings
(:func:`redis_table_options`).

Each form bounds the connections of one replica: the single-server and Sentinel pools make a
burst wait for a free connection (up to the round-trip timeout) instead of failing; a cluster
client's pools are per node and fail when full, so the store caps its round trips in flight
(:attr:`RedisTopology.inflight_cap`). A connection goes back to its pool even when the caller
is cancelled while giving it back (:class:`ShieldedBlockingPool`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import parse_qsl, unquote

import redis.asyncio as aioredis
from redis.asyncio.cluster import ClusterNode, RedisCluster
from redis.asyncio.connection import AbstractConnection
from redis.asyncio.sentinel import Sentinel, SentinelConnectionPool

from tubemq_aio.errors import ConfigError
from tubemq_aio.gateway.leases.redis_options import (
    URL_OPTIONS,
    HaOptions,
    fold_into_url,
    parse_ha_options,
)

__all__ = [
    "RedisClient",
    "RedisTopology",
    "ShieldedBlockingPool",
    "open_redis",
    "parse_redis_url",
    "redis_table_options",
]

#: What the store, the wake listener and the housekeeper talk to.
RedisClient = aioredis.Redis | RedisCluster

_SINGLE = ("redis://", "rediss://", "unix://")
#: URL scheme → (kind, TLS) of the replicated forms.
_HA_SCHEMES = {
    "redis+sentinel": ("sentinel", False),
    "rediss+sentinel": ("sentinel", True),
    "redis+cluster": ("cluster", False),
    "rediss+cluster": ("cluster", True),
}
#: ``[redis]`` table key → the top-level setting it stands for.
_TABLE_KEYS = {
    "url": "redis",
    "max_connections": "redis_max_connections",
    "ack_replicas": "redis_ack_replicas",
    "ack_wait_ms": "redis_ack_wait_ms",
}


class ShieldedBlockingPool(aioredis.BlockingConnectionPool):
    """A single server's pool whose callers wait for a free connection when all are in use, and
    whose release of a connection a cancel does not cut short."""

    async def release(self, connection: AbstractConnection) -> None:
        """Give ``connection`` back to the pool, to the end even if the caller is cancelled
        meanwhile (the caller still gets its ``CancelledError``).

        The release waits for the pool's lock while another caller holds it; redis-py's own
        callers (a command's ``finally``) let a cancel arriving then skip it, and the connection
        stayed in use for good: as many such cancels as the pool has connections, and every
        call failed with "No connection available." (redis/redis-py#4121).
        """
        await asyncio.shield(super().release(connection))


class _BlockingSentinelPool(SentinelConnectionPool, ShieldedBlockingPool):
    """A Sentinel pool whose callers wait for a free connection when all are in use (released
    as :class:`ShieldedBlockingPool` releases)."""

    async def disconnect(self, inuse_connections: bool = True) -> None:
        """Close the pool's connections; the full close (the client's ``aclose``) also closes
        those to the sentinels. The pool's :class:`Sentinel` holds them and nothing else
        closes it: they stayed open until the garbage collector found them."""
        await super().disconnect(inuse_connections)
        if inuse_connections:  # not the idle-only close after a master change
            for sentinel in self.sentinel_manager.sentinels:
                await sentinel.aclose()


@dataclass(frozen=True, slots=True)
class RedisTopology:
    """A parsed ``redis`` URL.

    Attributes:
        kind: ``server``, ``sentinel`` or ``cluster``.
        url: the URL as given (``server``: handed to redis-py as is).
        nodes: the sentinels' or the cluster seeds' ``(host, port)`` (empty for ``server``).
        service: the Sentinel service (master) name.
        db: the database number (always 0 in a cluster).
        username: the data nodes' ACL user, or None.
        password: the data nodes' password, or None.
        options: TLS and the sentinels' credentials (``sentinel``/``cluster`` only).
    """

    kind: Literal["server", "sentinel", "cluster"]
    url: str = field(repr=False)
    nodes: tuple[tuple[str, int], ...] = ()
    service: str = ""
    db: int = 0
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    options: HaOptions = field(default_factory=HaOptions)

    @property
    def supports_wait(self) -> bool:
        """Whether ``WAIT`` after a write can run on the write's own connection (not in a
        cluster, where redis-py sends a keyless command to another node's connection)."""
        return self.kind != "cluster"


def _split_hosts(text: str, url_kind: str) -> tuple[tuple[str, int], ...]:
    nodes = []
    for part in text.split(","):
        host, sep, port = part.strip().rpartition(":")
        host = host.strip("[]")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ConfigError(f"redis: {url_kind} hosts must be host:port[,host:port…]")
        nodes.append((host, int(port)))
    return tuple(nodes)


def parse_redis_url(url: str) -> RedisTopology:
    """Parse the gateway's ``redis`` setting (the forms in the module docstring).

    Raises:
        ConfigError: not one of the forms, or a malformed host list, service or database.
    """
    if not isinstance(url, str) or not url.strip():
        raise ConfigError("redis is required (a non-empty URL)")
    if url.startswith(_SINGLE):
        _check_server_query(url)
        return RedisTopology("server", url)
    scheme, sep, rest = url.partition("://")
    if not sep or scheme not in _HA_SCHEMES:
        raise ConfigError(
            "redis must be a redis://, rediss://, unix://, redis[s]+sentinel:// or "
            "redis[s]+cluster:// URL"
        )
    kind, tls = _HA_SCHEMES[scheme]
    if "#" in rest:
        raise ConfigError(f"redis: a {kind} URL takes no fragment")
    rest, _, query = rest.partition("?")
    options = parse_ha_options(query, kind, tls)
    creds, at, rest = rest.rpartition("@")
    username = password = None
    if at:
        user, colon, secret = creds.partition(":")
        username = unquote(user) or None
        password = unquote(secret) if colon else None
    hosts, _, path = rest.partition("/")
    nodes = _split_hosts(hosts, kind)
    parts = [p for p in path.split("/") if p]
    if kind == "sentinel":
        if not 1 <= len(parts) <= 2:
            raise ConfigError("redis: a sentinel URL is redis+sentinel://hosts/<service>[/<db>]")
        service, db_text = parts[0], parts[1] if len(parts) == 2 else "0"
    else:
        if len(parts) > 1 or (parts and parts[0] != "0"):
            raise ConfigError("redis: a Redis Cluster has database 0 only")
        service, db_text = "", "0"
    if not db_text.isdigit() or int(db_text) > 10_000:
        raise ConfigError("redis: the database must be a number")
    return RedisTopology(
        "sentinel" if kind == "sentinel" else "cluster",
        url,
        nodes,
        unquote(service),
        int(db_text),
        username,
        password,
        options,
    )


def _check_server_query(url: str) -> None:
    """The single-server form's query goes to redis-py; our own options must fit it."""
    names = {name for name, _ in parse_qsl(url.partition("?")[2], keep_blank_values=True)}
    for name in sorted(names & set(URL_OPTIONS)):
        if name.startswith("sentinel_"):
            raise ConfigError(f"redis: {name} is an option of redis+sentinel:// URLs only")
        if not url.startswith("rediss://"):
            raise ConfigError(f"redis: {name} needs a rediss:// URL")


def open_redis(topology: RedisTopology, *, max_connections: int, timeout: float) -> RedisClient:
    """A client of the topology's primary (or primaries); nothing is connected yet.

    Args:
        topology: from :func:`parse_redis_url`.
        max_connections: connections at most (per node in a cluster).
        timeout: seconds for a connect and for one reply (a single server's replies are
            bounded by the caller's round trip instead); also how long a caller waits for a
            free connection of a full pool.
    """
    common: dict[str, Any] = {"socket_timeout": timeout, "socket_connect_timeout": timeout}
    if topology.kind == "server":
        # No socket timeout: every command of the gateway runs within a round trip's deadline
        # (RoundTrips.roundtrip; the wake listener bounds its own reads), and redis-py writes
        # under a socket timeout through asyncio.wait_for: a task and a loop turn per command.
        pool = ShieldedBlockingPool.from_url(
            topology.url,
            max_connections=max_connections,
            timeout=timeout,
            socket_timeout=None,  # redis-py's default is 5 s
            socket_connect_timeout=timeout,
        )
        return aioredis.Redis.from_pool(pool)
    auth: dict[str, Any] = {"username": topology.username, "password": topology.password}
    tls = topology.options.tls
    if tls is not None:
        common.update(tls.client_kwargs())
    if topology.kind == "sentinel":
        sentinel_auth = {
            "username": topology.options.sentinel_username,
            "password": topology.options.sentinel_password,
        }
        sentinel = Sentinel(  # type: ignore[no-untyped-call]
            list(topology.nodes), sentinel_kwargs={**common, **sentinel_auth}, **common
        )
        client: aioredis.Redis = sentinel.master_for(
            topology.service,
            connection_pool_class=_BlockingSentinelPool,
            db=topology.db,
            max_connections=max_connections,
            timeout=timeout,
            **auth,
        )
        return client
    return RedisCluster(
        startup_nodes=[ClusterNode(host, port) for host, port in topology.nodes],
        max_connections=max_connections,
        **auth,
        **common,
    )


def redis_table_options(table: object, top_level: Mapping[str, object]) -> dict[str, object]:
    """The top-level settings a ``[redis]`` table stands for (``url``, ``max_connections``,
    ``ack_replicas``, ``ack_wait_ms``); their values are checked where the top-level ones are.
    The table's URL options (TLS, the sentinels' credentials) go into the URL's query.

    Raises:
        ConfigError: not a table, an unknown key, no ``url``, or a setting given both in the
            table and at the top level.
    """
    if not isinstance(table, Mapping):
        raise ConfigError("redis must be a URL string or a [redis] table")
    unknown = sorted(set(table) - set(_TABLE_KEYS) - set(URL_OPTIONS))
    if unknown:
        raise ConfigError(f"unknown config key redis.{unknown[0]}")
    if "url" not in table:
        raise ConfigError("redis.url is required in a [redis] table")
    out: dict[str, object] = {}
    for key, value in table.items():
        flat = _TABLE_KEYS.get(key)
        if flat is None:
            continue
        if flat in top_level:
            raise ConfigError(f"{flat} is set twice: at the top level and as redis.{key}")
        out[flat] = value
    url_options = {key: value for key, value in table.items() if key in URL_OPTIONS}
    out["redis"] = fold_into_url(out["redis"], url_options)
    return out
