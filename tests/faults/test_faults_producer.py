"""The producer through a FaultProxy against the fake cluster, one fault at a time.

For every fault: each send ends within its deadline with a result or a typed error, the
producer recovers once the fault is healed, no acknowledged message is lost, and nothing (task,
file descriptor) outlives the producer.
"""

from __future__ import annotations

import asyncio
import itertools

import pytest

from tests.support.fault_env import FaultEnv, apply_fault, bounded, fault_env, fault_table, restore
from tubemq_aio import Producer, SendResult, TubeMQError
from tubemq_aio.errors import FrameError

SEND_TIMEOUT = 0.5
#: A send with no fault in its way (before the fault, after the heal): it must succeed, so its
#: deadline is one a loaded machine keeps, not the fault phase's short one.
HEALTHY_TIMEOUT = 10.0
RETRIES = 2

FAULTS = fault_table(bandwidth=None, bandwidth_cap=300_000, reset="up", reset_after=50_000)

#: Faults after which some send must have failed or been retried.
DISRUPTIVE = {
    "blackhole",
    "broker stops reading",
    "reset after 50 KB",
    "half-closed by the broker",
    "connect refused",
    "broker killed",
}
_bodies = itertools.count()


async def _send_many(
    env: FaultEnv, producer: Producer, count: int, size: int, timeout: float = HEALTHY_TIMEOUT
) -> list[object]:
    """``count`` sends at once, each with ``timeout`` s; each must end by every attempt's
    timeout plus the producer's short retry backoffs."""
    deadline = timeout * (RETRIES + 1) + 1.0

    async def one() -> object:
        body = f"{next(_bodies)}:".encode().ljust(size, b"x")
        outcome = await bounded(producer.send("demo", body, timeout=timeout), deadline)
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
            await apply_fault(env, FAULTS[name])
            outcomes = await _send_many(env, producer, 30, 40_000, SEND_TIMEOUT)
            assert all(isinstance(o, SendResult | TubeMQError) for o in outcomes)
            if name in DISRUPTIVE:  # the fault really hit: sends failed or were retried
                assert producer.retried or not all(isinstance(o, SendResult) for o in outcomes)
            await restore(env, name)
            if name == "corrupted answers":
                # A flipped byte that still reads as a plausible length leaves the stream out of
                # step without any error until later bytes arrive, possibly only after the heal:
                # the first sends then fail with FrameError on that connection, which is closed.
                settling = await _send_many(env, producer, 20, 100)
                assert all(isinstance(o, SendResult | FrameError) for o in settling), settling
            # Healed: sends succeed again (a failed broker may be avoided for a while).
            recovered = await _send_many(env, producer, 20, 100)
            assert all(isinstance(o, SendResult) for o in recovered), recovered
        finally:
            await bounded(producer.close(), 15)
        assert env.lost("demo") == []
