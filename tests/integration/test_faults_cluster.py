"""A few faults against the real cluster: the master behind a FaultProxy goes dark or resets
while a producer sends and a consumer reads. Brokers serve without the master, so nothing may
stop: every call ends within its deadline, every acknowledged message is consumed, and the
clients recover their master sessions once it is back."""

from __future__ import annotations

import asyncio
import time

from tubemq_aio import Consumer, Producer, SendResult, TubeMQError
from tubemq_aio.testing import FaultProxy, LocalCluster

HEARTBEAT = 2.0
SEND_TIMEOUT = 5.0


async def _send(producer: Producer, topic: str, body: bytes, acked: set[bytes]) -> None:
    try:
        result = await asyncio.wait_for(producer.send(topic, body, timeout=SEND_TIMEOUT), 20)
    except TubeMQError:
        return
    assert isinstance(result, SendResult)
    acked.add(body)


async def _read(consumer: Consumer, got: set[bytes]) -> None:
    batch = await asyncio.wait_for(consumer.getmany(timeout=1.0), 10)
    async with batch:
        got.update(m.body for m in batch)


async def test_master_blackholed_then_reset_while_producing_and_consuming(
    cluster: LocalCluster, topic: str
) -> None:
    acked: set[bytes] = set()
    got: set[bytes] = set()
    async with FaultProxy(cluster.master_addr) as master:
        producer = Producer(master.addr, topics=[topic], heartbeat_interval=HEARTBEAT)
        consumer = Consumer(
            master.addr,
            group=f"gfault_{topic}",
            topics=[topic],
            consume_from="earliest",
            heartbeat_interval=HEARTBEAT,
        )
        async with producer, consumer:
            for i in range(20):
                await _send(producer, topic, f"before-{i}".encode(), acked)
            master.set(blackhole=True)  # heartbeats get no answer
            end = time.monotonic() + 3 * HEARTBEAT
            i = 0
            while time.monotonic() < end:
                await _send(producer, topic, f"dark-{i}".encode(), acked)
                await _read(consumer, got)
                i += 1
            master.clear()
            master.reset_connections()  # and the master link is reset once
            for i in range(20):
                await _send(producer, topic, f"after-{i}".encode(), acked)
            assert len(acked) >= 40  # sends to the brokers never needed the master
            deadline = time.monotonic() + 120
            while not acked <= got:
                assert time.monotonic() < deadline, f"{len(acked - got)} acked never consumed"
                await _read(consumer, got)
        assert master.connections >= 2  # the clients came back to the master after the reset
