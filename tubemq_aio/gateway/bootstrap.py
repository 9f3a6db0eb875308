"""``tubemq-gateway init``: write the store's boot markers once, before the first replica starts.

A replica never writes the boot marker on its own: after Redis lost the gateway state (FLUSHALL,
a restart without persistence, a failover to an empty replica) a starting replica cannot tell
that store from one that never held any state, and re-marking it would hide the loss (a
``latest`` group would skip unacked messages, an ``earliest`` one redeliver acked ones). So the
markers are written by this explicit step, and after a loss every replica answers 503
``state_lost`` until an admin resets the group (or runs ``init`` again, knowingly).
"""

from __future__ import annotations

from tubemq_aio.gateway.config.gateway_config import GatewayConfig
from tubemq_aio.gateway.leases.lease_store import LeaseStore
from tubemq_aio.gateway.leases.redis_client import open_redis, parse_redis_url

__all__ = ["initialise_store"]


async def initialise_store(config: GatewayConfig) -> tuple[bool, list[str]]:
    """Write the store's boot marker and every configured group's marker (idempotent).

    Returns:
        Whether the store held the boot marker already, and the groups marked (a config
        without ``[[groups]]`` uses no Redis: nothing is written, ``(False, [])``).

    Raises:
        StoreUnavailableError: Redis cannot be reached.
    """
    if not config.groups:
        return False, []
    timeout = config.rpc_timeout
    client = open_redis(parse_redis_url(config.redis), max_connections=4, timeout=timeout)
    try:
        store = LeaseStore(client, timeout=timeout)
        was_booted = await store.booted()
        groups = [g.spec.name for g in config.groups]
        await store.boot(groups, allow_init=True)
        return was_booted, groups
    finally:
        await client.aclose()
