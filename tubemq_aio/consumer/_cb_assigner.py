"""Optional background re-assignment for the client-balanced consumer.

When enabled (``ClientBalancedConsumer(..., reassign_interval=seconds)``), a task owned by the
consumer lists the partitions every period, works out this node's share with a partition
assignor (default :func:`assign_modulo`) and connects the new ones (at the group's stored
offset) and disconnects the ones no longer assigned. New partitions and brokers are picked up
that way without the application doing anything.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from typing import Protocol

from tubemq_aio.consumer._cb_models import PartitionMeta, assign_modulo
from tubemq_aio.errors import ClientClosedError, TubeMQError

__all__ = ["Assignor", "keep_assigned", "reassign_once"]

log = logging.getLogger("tubemq_aio.consumer")

#: Picks the keys one node should hold: ``(metas, source_count, node_id) -> keys``.
Assignor = Callable[[Sequence[PartitionMeta], int, int], list[str]]


class _Assignable(Protocol):
    source_count: int
    node_id: int

    async def partitions(self) -> list[PartitionMeta]: ...

    def assignment(self) -> list[str]: ...

    async def connect(self, partition_key: str, offset: int | None = None) -> object: ...

    async def disconnect(self, partition_key: str) -> None: ...


async def reassign_once(consumer: _Assignable, assignor: Assignor = assign_modulo) -> None:
    """Bring the consumer's connected partitions in line with the assignor's choice once.

    Errors on single partitions are logged and left for the next round.

    Raises:
        ClientClosedError: the consumer is closing (also when an ``on_assigned`` /
            ``on_revoked`` callback of this round closed it).
    """
    metas = [m for m in await consumer.partitions() if m.subscribable]
    wanted = set(assignor(metas, consumer.source_count, consumer.node_id))
    held = set(consumer.assignment())
    for key in sorted(held - wanted):
        try:
            await consumer.disconnect(key)
        except ClientClosedError:
            raise  # closing (maybe by a callback of this very round): nothing left to do
        except TubeMQError as exc:
            log.info("could not disconnect %s: %s", key, exc)
    for key in sorted(wanted - held):
        try:
            await consumer.connect(key)
        except ClientClosedError:
            raise
        except TubeMQError as exc:
            log.info("could not connect %s (next round retries): %s", key, exc)


async def keep_assigned(
    consumer: _Assignable, period: float, assignor: Assignor = assign_modulo
) -> None:
    """Run :func:`reassign_once` every ``period`` seconds until cancelled."""
    while True:
        try:
            await reassign_once(consumer, assignor)
        except ClientClosedError:
            return  # the consumer is closing: nothing is left to assign
        except TubeMQError as exc:
            log.warning("partition re-assignment failed: %s", exc)
        await asyncio.sleep(period)
