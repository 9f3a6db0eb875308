"""Connections to every known broker opened in the background when the producer's metadata
changes, so that a send's first attempt does not wait for a TCP connect."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable

from tubemq_aio._io.rpc_client import RpcClient
from tubemq_aio._supervisor import Supervisor
from tubemq_aio.errors import TubeMQError
from tubemq_aio.protocol.broker_blocking import BrokerBlocker
from tubemq_aio.protocol.producer_meta import Broker

__all__ = ["Preconnect"]

log = logging.getLogger("tubemq_aio.producer")


class Preconnect:
    """Opens a connection to each broker not yet connected, one background task each.

    Each outcome (connected or not) is recorded with the broker-blocking policy, as a send's
    connect would be. The tasks belong to ``supervisor`` (non-essential: a failed connect is
    logged at INFO and ends its task) and end with it.

    Args:
        rpc: the producer's RPC client (its pool owns the connections).
        supervisor: the producer's task owner.
        blocker: the producer's broker-blocking policy.
    """

    def __init__(self, rpc: RpcClient, supervisor: Supervisor, blocker: BrokerBlocker) -> None:
        self._rpc = rpc
        self._supervisor = supervisor
        self._blocker = blocker

    def brokers(self, brokers: Iterable[Broker]) -> None:
        """Start a connect to each of ``brokers`` that has no connection (none once the
        supervisor is closed)."""
        if self._supervisor.closed:
            return
        rpc = self._rpc
        for broker in brokers:
            if not rpc.connected(broker):
                name = f"connect-{rpc.address(broker)}"
                self._supervisor.spawn(self._connect(broker), name, essential=False)

    async def _connect(self, broker: Broker) -> None:
        address = self._rpc.address(broker)
        connected = True
        try:
            await self._rpc.connect(broker)
        except TubeMQError as exc:
            connected = False
            log.info("pre-connect to broker %s failed: %s", address, exc)
        now = time.monotonic()
        self._blocker.record_connect(str(address), connected, now, broker_id=broker.broker_id)
