"""The producer through a FaultProxy against the fake cluster, one fault at a time.

For every fault: each send ends within its deadline with a result or a typed error, the
producer recovers once the fault is healed, no acknowledged message is lost, and nothing (task,
file descriptor) outlives the producer.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Awaitable, Callable

import pytest
from fault_env import FaultEnv, bounded, fault_env

from tubemq_aio import Producer, SendResult, TubeMQError

SEND_TIMEOUT = 0.5
RETRIES = 2
#: One send: every attempt times out, plus the producer's short retry backoffs.
SEND_DEADLINE = SEND_TIMEOUT * (RETRIES + 1) + 1.0

Fault = Callable[[FaultEnv], Awaitable[None] | None]


async def _refuse(env: FaultEnv) -> None:
    await env.brokers[1].refuse_connections()
    env.brokers[1].reset_connections()


async def _kill_broker(env: FaultEnv) -> None:
    await env.cluster.stop_broker(1)


async def _kill_master(env: FaultEnv) -> None:
    await env.cluster.stop_master()


FAULTS: dict[str, Fault] = {
    "latency": lambda env: env.brokers[1].set(latency=0.05),
    "bandwidth cap": lambda env: env.brokers[1].set(bandwidth=300_000),
    "broker stops reading": lambda env: env.brokers[1].set("up", stop_reading=True),
    "blackhole": lambda env: env.brokers[1].set(blackhole=True),
    "reset after 50 KB": lambda env: env.brokers[1].set("up", reset_after=50_000),
    "corrupted answers": lambda env: env.brokers[1].set("down", corrupt_rate=0.3),
    "half-closed by the broker": lambda env: env.brokers[1].half_close("down"),
    "connect refused": _refuse,
    "broker killed": _kill_broker,
    "master killed": _kill_master,
}

#: Faults after which some send must have failed or been retried.
DISRUPTIVE = {"blackhole", "broker stops reading", "reset after 50 KB", "half-closed by the broker",
              "connect refused", "broker killed"}  # fmt: skip
_bodies = itertools.count()


async def _send_many(env: FaultEnv, producer: Producer, count: int, size: int) -> list[object]:
    async def one() -> object:
        body = f"{next(_bodies)}:".encode().ljust(size, b"x")
        outcome = await bounded(producer.send("demo", body, timeout=SEND_TIMEOUT), SEND_DEADLINE)
        if isinstance(outcome, SendResult):
            env.acked.append(body)
        return outcome

    return list(await asyncio.gather(*(one() for _ in range(count))))


@pytest.mark.parametrize("name", sorted(FAULTS))
async def test_producer_under_fault(name: str) -> None:
    async with fault_env(brokers=2) as env:
        producer = Producer(env.master_addr, topics=["demo"], send_retries=RETRIES)
        await bounded(producer.start(), 10)
        try:
            assert all(isinstance(o, SendResult) for o in await _send_many(env, producer, 10, 100))
            applied = FAULTS[name](env)
            if applied is not None:
                await applied
            outcomes = await _send_many(env, producer, 30, 40_000)
            assert all(isinstance(o, SendResult | TubeMQError) for o in outcomes)
            if name in DISRUPTIVE:  # the fault really hit: sends failed or were retried
                assert producer.retried or not all(isinstance(o, SendResult) for o in outcomes)
            env.heal()
            if name == "connect refused":
                await env.brokers[1].start()
            if name == "broker killed":
                await env.cluster.start_broker(1)
            if name == "master killed":
                await env.cluster.start_master()
            # Healed: sends succeed again (a failed broker may be avoided for a while).
            recovered = await _send_many(env, producer, 20, 100)
            assert all(isinstance(o, SendResult) for o in recovered), recovered
        finally:
            await bounded(producer.close(), 15)
        assert env.lost("demo") == []
