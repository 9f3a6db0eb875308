"""A send whose only broker is in reconnect backoff keeps trying until its own deadline.

Regression: the retries used to hit the pool's backoff within milliseconds, so one refused (or
timed out) connect failed the send with ``ConnectError`` although most of its timeout was left.
"""

from __future__ import annotations

import asyncio

import pytest

from tests.support.fault_env import FaultEnv, bounded, fault_env
from tubemq_aio import ClientClosedError, NetworkError, Producer, SendResult

SEND_TIMEOUT = 5.0


async def _started(env: FaultEnv) -> Producer:
    producer = Producer(env.master_addr, topics=["demo"], send_retries=2)
    await bounded(producer.start(), 10)
    assert isinstance(await bounded(producer.send("demo", b"warm-up"), 5), SendResult)
    return producer


async def _cut(env: FaultEnv, producer: Producer) -> None:
    """Refuse new connects to the only broker and reset the open link."""
    broker_port = int(env.brokers[1].addr.rsplit(":", 1)[1])
    await env.brokers[1].refuse_connections()
    env.brokers[1].reset_connections()
    for _ in range(100):  # until the producer has seen the reset (at most 5 s)
        if not producer._pool or not any(a.port == broker_port for a in producer._pool.connections):
            return
        await asyncio.sleep(0.05)
    raise AssertionError("the producer never saw its broker link reset")


async def test_send_succeeds_once_the_broker_accepts_again() -> None:
    async with fault_env(brokers=1) as env:
        producer = await _started(env)
        try:
            await _cut(env, producer)
            send = asyncio.ensure_future(producer.send("demo", b"after-heal", timeout=SEND_TIMEOUT))
            await asyncio.sleep(0.8)
            assert not send.done(), send  # still trying, not failed in milliseconds
            await env.brokers[1].start()
            outcome = await bounded(send, SEND_TIMEOUT)
            assert isinstance(outcome, SendResult), outcome
            env.acked.append(b"after-heal")
        finally:
            await bounded(producer.close(), 15)
        assert env.lost("demo") == []


async def test_send_to_an_unreachable_broker_fails_typed_at_its_deadline() -> None:
    timeout = 1.5
    async with fault_env(brokers=1) as env:
        producer = await _started(env)
        try:
            await _cut(env, producer)
            loop = asyncio.get_running_loop()
            began = loop.time()
            outcome = await bounded(producer.send("demo", b"never", timeout=timeout), timeout)
            ended = loop.time()
            assert isinstance(outcome, NetworkError), outcome
            # It used the deadline (not milliseconds) and kept it (the proxy refuses at once).
            assert ended - began >= timeout * 0.9
            assert ended - began <= timeout + 1.0
            assert producer.failed == 1
        finally:
            await bounded(producer.close(), 15)


@pytest.mark.parametrize("how", ["close", "cancel"])
async def test_a_send_waiting_out_a_backoff_ends_at_once_on_close_or_cancel(how: str) -> None:
    async with fault_env(brokers=1) as env:
        producer = await _started(env)
        try:
            await _cut(env, producer)
            send = asyncio.ensure_future(producer.send("demo", b"x", timeout=30.0))
            await asyncio.sleep(0.5)
            assert not send.done()
            loop = asyncio.get_running_loop()
            began = loop.time()
            if how == "close":
                await bounded(producer.close(), 15)
                outcome = await bounded(send, 2)
                assert isinstance(outcome, ClientClosedError), outcome
            else:
                send.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await send
                assert producer.cancelled == 1
            assert loop.time() - began < 5.0  # not the send's 30 s deadline
        finally:
            await bounded(producer.close(), 15)
