"""What the brokers store at the end of a chaos run: every body of the topic, read back.

A message acknowledged to a producer and never consumed was either never stored (the broker
acknowledged it from its memory cache and a SIGKILL dropped it before the flush: the
unflushed window, docs/failures.md) or stored and skipped by the consumers (a real loss). Only
the broker's data tells the two apart, so the run reads every partition of the topic from its
store's start with a group of its own once the traffic has stopped.
"""

from __future__ import annotations

import asyncio
import time

from tubemq_aio import ClientBalancedConsumer

__all__ = ["stored_bodies"]


async def stored_bodies(masters: str, topic: str, timeout: float) -> set[bytes]:
    """Every body stored in ``topic`` now, read with a new client-balanced group from the
    start of every partition until each reports its end.

    Args:
        masters: the master addresses (``h:p[,h:p...]``).
        topic: the topic.
        timeout: seconds for the whole read.

    Raises:
        TimeoutError: a partition was not read to its end within ``timeout``.
        TubeMQError: a partition could not be connected or read.
    """
    got: set[bytes] = set()
    deadline = time.monotonic() + timeout
    async with ClientBalancedConsumer(
        masters,
        group=f"chaos_readback_{int(time.time() * 1000) % 10**9}",
        topics=[topic],
        consume_from="earliest",
        tail_check_depth=0,
    ) as reader:
        keys = [m.partition_key for m in await reader.partitions()]
        for key in keys:
            await reader.connect(key, 0)  # clamped to the store's start
        while True:
            positions = reader.positions()
            if all(positions[k].at_end for k in keys):
                return got
            if time.monotonic() > deadline:
                behind = sorted(k for k in keys if not positions[k].at_end)
                raise TimeoutError(f"read-back of {topic}: {behind} not at their end")
            batch = await reader.getmany(timeout=1.0)
            async with batch:
                got.update(m.body for m in batch)
            await asyncio.sleep(0)
