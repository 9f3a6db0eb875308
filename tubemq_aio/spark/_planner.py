"""Driver side of the Spark source: where every partition's store begins and ends now.

The planner uses its own consumer group, ``{group}_planner``, so its broker registrations never
compete with the executors' reads of the query's group. Per partition it costs one register at
offset 0 (the broker clamps it to the store's min and reports the store's end) and one
unregister: no message is read.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any
from zoneinfo import ZoneInfo

from tubemq_aio.consumer.client_balanced import ClientBalancedConsumer
from tubemq_aio.errors import PartitionNotSubscribableError, PartitionOccupiedError
from tubemq_aio.spark._bridge import PortalThread, run_async
from tubemq_aio.spark._offsets import StoreBounds
from tubemq_aio.spark._options import SourceOptions, StartTimes

__all__ = ["Planner", "consumer_kwargs", "fetch_bounds", "fetch_bounds_once", "time_offsets"]

log = logging.getLogger("tubemq_aio.spark")

#: Pause between probes of a partition another planner still holds (a killed driver's planner,
#: kept by the broker until its 30 s registration timeout); the planning timeout bounds it.
_OCCUPIED_PAUSE = 1.0


def consumer_kwargs(options: SourceOptions, group: str, topics: list[str]) -> dict[str, Any]:
    """Keyword arguments of a :class:`ClientBalancedConsumer` for ``group`` and ``topics``."""
    kwargs = options.client.kwargs()
    kwargs.update(group=group, topics=topics, consume_from="earliest")
    kwargs["msg_time_zone"] = ZoneInfo(options.msg_time_zone)
    return kwargs


async def fetch_bounds(consumer: ClientBalancedConsumer) -> dict[str, StoreBounds]:
    """Store bounds of every partition of the consumer's topics, keyed by partition key."""
    result: dict[str, StoreBounds] = {}
    for meta in await consumer.partitions():
        while True:
            try:
                low, high = await consumer.offset_bounds(meta.partition_key)
                break
            except (PartitionOccupiedError, PartitionNotSubscribableError):
                log.info("planner probe of %s: held by another member, retrying", meta)
                await asyncio.sleep(_OCCUPIED_PAUSE)
        result[meta.partition_key] = StoreBounds(low, high)
    return result


async def time_offsets(
    consumer: ClientBalancedConsumer, times: StartTimes | None
) -> dict[str, int]:
    """The start offset of each partition searched by ``times`` (docs/protocol/time.md): its
    first message stamped at or after the time, right after its last one when none is;
    ``{}`` without ``times``."""
    if times is None:
        return {}
    keys = [m.partition_key for m in await consumer.partitions()]
    found = await consumer.search_times(times.for_keys(keys), consumer.config.time_search_timeout)
    return {key: f.offset for key, f in found.items()}


def fetch_bounds_once(options: SourceOptions) -> tuple[dict[str, StoreBounds], dict[str, int]]:
    """One-shot :func:`fetch_bounds` and :func:`time_offsets` of ``startingTimestamp`` with a
    short-lived planner consumer (batch reads)."""

    async def run() -> tuple[dict[str, StoreBounds], dict[str, int]]:
        kwargs = consumer_kwargs(options, options.planner_group, list(options.topics))
        async with ClientBalancedConsumer(**kwargs) as consumer:
            starts = await time_offsets(consumer, options.starting_times)
            return await fetch_bounds(consumer), starts

    return run_async(run, options.read_timeout)


class Planner:
    """A long-lived planner consumer on a driver-side anyio blocking portal (streaming reads).

    Created lazily on the first call; :meth:`stop` closes the consumer and the thread.
    """

    def __init__(self, options: SourceOptions) -> None:
        self._options = options
        self._loop: PortalThread | None = None
        self._consumer: ClientBalancedConsumer | None = None

    def bounds(self) -> dict[str, StoreBounds]:
        """Store bounds of every partition now.

        Raises:
            RequestTimeoutError: no answer within ``readTimeout``.
            TubeMQError: the master or a broker refused.
        """
        return self._portal().call(self._bounds, self._options.read_timeout)

    def start_offsets(self) -> dict[str, int]:
        """The offsets of ``startingTimestamp`` / ``startingOffsetsByTimestamp`` now
        (:func:`time_offsets`); ``{}`` without them.

        Raises:
            RequestTimeoutError: no answer within ``readTimeout``.
            TubeMQError: the master or a broker refused.
        """
        return self._portal().call(self._start_offsets, self._options.read_timeout)

    def _portal(self) -> PortalThread:
        if self._loop is None:
            self._loop = PortalThread("tubemq-spark-planner")
        return self._loop

    async def _started(self) -> ClientBalancedConsumer:
        if self._consumer is None or self._consumer.closed:
            opts = self._options
            kwargs = consumer_kwargs(opts, opts.planner_group, list(opts.topics))
            consumer = ClientBalancedConsumer(**kwargs)
            await consumer.start()
            self._consumer = consumer
        return self._consumer

    async def _bounds(self) -> dict[str, StoreBounds]:
        return await fetch_bounds(await self._started())

    async def _start_offsets(self) -> dict[str, int]:
        return await time_offsets(await self._started(), self._options.starting_times)

    async def _close(self) -> None:
        if self._consumer is not None:
            await self._consumer.close()
            self._consumer = None

    def stop(self) -> None:
        """Close the planner consumer and stop its portal. Idempotent."""
        if self._loop is not None:
            self._loop.stop(self._close, self._options.read_timeout)
